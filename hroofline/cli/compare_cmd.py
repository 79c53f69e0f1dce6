"""``hroofline compare``: two runs, phase by phase and kernel family by kernel family."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.analyze.compare import compare_runs
from hroofline.cli.common import add_store_option, positive_int, say, write_out
from hroofline.cli.compare_base import add_base_arguments, load_pair
from hroofline.model.run import Run
from hroofline.render.text import FORMATS, render_frame, to_json

EPILOG = """\
examples:
  hroofline compare deepcam-fp32 deepcam-amp-o1                       what AMP changed
  hroofline compare deepcam-fp32 deepcam-amp-o1 --out fp32-vs-amp.html   both on one roofline, with arrows
  hroofline compare r50-fp32-a100 r50-fp32-a100-measured --format json   predicted against measured
  hroofline compare --baseline last-good deepcam-amp-o1                 against a named baseline
  hroofline compare --baseline last-good deepcam-amp-o1 --base-store last-good-store/   baseline from a CI artifact

Ratios are candidate / base; speedup is base time / candidate time. The table ends with the advice for BASE
(hroofline advise) and whether CAND shows each acted on, where both are one model (their layers or kernel
families shared; else "not judged"). A predicted run against a measured one of the same step and GPU (either
way round) gives the "estimated versus measured" table instead of speedups: per phase, the measured time
over the estimate and over the prediction's roofline bound, and measured FLOPs and HBM bytes over predicted;
a predicted run is marked "predicted" in the heading.
"""


def register(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        description="Per phase: time, FLOPs, tensor-FLOP share, bytes per level, speedup and candidate/base ratios. "
        "Per kernel family (kernel names change between precisions, so kernels are matched by family, and by "
        "NVTX op context when both runs have it): the largest gains and regressions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_base_arguments(compare)
    compare.add_argument("--format", choices=FORMATS, default="table")
    compare.add_argument("-n", "--top", type=positive_int, default=8, metavar="N", help="gains/regressions shown (8)")
    compare.add_argument("--out", metavar="FILE", help="also draw both runs on one roofline (.html .png .svg .json)")
    compare.add_argument("--level", default="hbm", choices=("l1", "l2", "hbm"), help="memory level of the chart")
    compare.add_argument("--ceilings", metavar="GPU|SET|FILE", help="roofs of the chart (default: the base run's GPU)")
    add_store_option(compare)
    compare.set_defaults(run_command=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from hroofline.api.views import comparison_report
    from hroofline.render.compare_text import phase_frame
    from hroofline.render.output import chart_format

    if args.out:
        chart_format(Path(args.out))
    base, candidate = load_pair(args)
    comparison = compare_runs(base, candidate)
    if args.format == "json":
        write_out(to_json(comparison.to_json()))
    elif args.format == "csv":
        write_out(render_frame(phase_frame(comparison), "csv"))
    else:
        write_out(comparison_report(comparison, base, candidate, args.top))
    if args.out:
        _draw(args, base, candidate)
    return 0


def _draw(args: argparse.Namespace, base: Run, candidate: Run) -> None:
    from hroofline.api.outputs import comparison_chart
    from hroofline.render.output import write_chart

    drawn = comparison_chart(base, candidate, args.level, args.ceilings)
    write_chart(drawn.chart.to_dict(), Path(args.out), drawn.title)
    say(f"wrote {args.out} ({drawn.families} kernel families)")
