"""``hroofline advise``: what to change in the step, from its roofline, with the evidence and what it can win."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from hroofline.cli.common import add_store_option, open_store, roofs_option_help, write_out
from hroofline.render.text import FORMATS

if TYPE_CHECKING:
    import pandas as pd

EPILOG = """\
examples:
  hroofline advise deepcam-fp32                    the findings, the most to win first
  hroofline advise deepcam-amp-o1 --format json    the same as data (hroofline.advise(run) in Python)
  hroofline advise deepcam-amp-o1 --format csv     one row per finding, for a spreadsheet
  hroofline advise deepcam-fp32 --ceilings v100-yang-ert   against measured ceilings (a run without roofs: a FILE)

Each finding names the rule that fired, its evidence (kernels, layers, their time and share of the step,
their % of roof), the change in PyTorch terms with a line of code, and what it can win: an upper bound
(the kernels vanish or reach their roofs) or an estimate (they reach what similar kernels of the run
reach). Rules and their thresholds are data: metrics/advice.toml. `hroofline compare BEFORE AFTER` says
for each finding of BEFORE whether AFTER shows it acted on.
"""


def register(commands: argparse._SubParsersAction) -> None:
    advise = commands.add_parser(
        "advise",
        description="Advice from the run's roofline: layout conversions (channels_last), matrix products on "
        "fallback kernels (shapes to pad), FP32 work off the tensor cores (TF32, mixed precision), memory-bound "
        "element-wise kernels (fusion), per-parameter optimizers (foreach, fused), kernels too small for the GPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    advise.add_argument("run", metavar="RUN")
    advise.add_argument(
        "--format",
        type=_format,
        choices=FORMATS,
        default="table",
        help="table: the findings in sentences, for people (`text`, its former name, is taken too); csv: one row "
        "per finding; json: the findings as data",
    )
    advise.add_argument("--ceilings", metavar="GPU|SET|FILE", help=roofs_option_help())
    add_store_option(advise)
    advise.set_defaults(run_command=run_advise)


def _format(text: str) -> str:
    """--format, with ``text`` (advise's table before every read command took table|csv|json) taken as table."""
    return "table" if text == "text" else text


def run_advise(args: argparse.Namespace) -> int:
    from hroofline.analyze.advice.rules import ON_GPU, advice_scope, done_by_compiling
    from hroofline.analyze.compiled_step import compile_mode
    from hroofline.api.advice import advise, done_advice, findings
    from hroofline.render.advice import NOT_JUDGED, advice_text
    from hroofline.render.text import render_frame, to_json

    run = open_store(args).load(args.run)
    if args.format == "json":
        data = {"run": run.name, "findings": advise(run, args.ceilings).to_dict(orient="records")}
        data["done"] = done_advice(run)
        if run.meta.predicted:
            data["not_judged"] = NOT_JUDGED[advice_scope(run)]
        write_out(to_json(data))
        return 0
    if args.format == "csv":
        write_out(render_frame(flat_findings(advise(run, args.ceilings)), "csv"))
        return 0
    found = findings(run, args.ceilings)  # the scope is asked for only where nothing was found
    scope = ON_GPU if found else advice_scope(run, args.ceilings)
    write_out(advice_text(run.name, found, scope, done_by_compiling(run), compile_mode(run)))
    return 0


def flat_findings(table: pd.DataFrame) -> pd.DataFrame:
    """The findings with one value per cell: kernels and layers joined by '; ', the shares and details as JSON."""
    flat = table.copy()
    for column in ("kernels", "layers"):
        flat[column] = flat[column].map("; ".join)
    for column in ("phase_share", "detail"):
        flat[column] = flat[column].map(lambda value: json.dumps(value, sort_keys=True, default=str))
    return flat
