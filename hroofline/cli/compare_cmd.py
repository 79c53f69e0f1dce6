"""``hroofline compare``: two runs, phase by phase and kernel family by kernel family."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.analyze.compare import compare_runs
from hroofline.analyze.gate import DEFAULT_PCT, check_pct, compare_json, parse_gate_spec
from hroofline.cli.common import add_store_option, positive_int, say, write_out
from hroofline.cli.compare_base import add_base_arguments, load_pair
from hroofline.errors import UsageError
from hroofline.model.run import Run
from hroofline.render.text import FORMATS, render_frame, to_json

EPILOG = """\
examples:
  hroofline compare deepcam-fp32 deepcam-amp-o1                       what AMP changed
  hroofline compare deepcam-fp32 deepcam-amp-o1 --out fp32-vs-amp.html   both on one roofline, with arrows
  hroofline compare r50-fp32-a100 r50-fp32-a100-measured --format json   predicted against measured
  hroofline compare deepcam-fp32 deepcam-amp-o1 --fail-on-regression     a CI gate: exit 0, AMP is no slower
                                                                       (the other way round exits 1)
  hroofline compare deepcam-fp32 deepcam-amp-o1 --gate phase=5,layer=10 --format markdown
                                                                       the verdict as a pull-request comment
                                                                       (>> $GITHUB_STEP_SUMMARY in a job)
  hroofline compare --baseline last-good deepcam-amp-o1                 against a named baseline
  hroofline compare --baseline last-good deepcam-amp-o1 --base-store last-good-store/   baseline from a CI artifact

Ratios are candidate / base; speedup is base time / candidate time. The table ends with the advice for BASE
(hroofline advise) and whether CAND shows each acted on, where both are one model (their layers or kernel
families shared; else "not judged"). A predicted run against a measured one of the same step and GPU (either
way round) gives the "estimated versus measured" table instead of speedups: per phase, the measured time
over the estimate and over the prediction's roofline bound, and measured FLOPs and HBM bytes over predicted;
a predicted run is marked "predicted" in the heading.

The gate (--fail-on-regression, --phase-gate, --layer-gate, --family-gate, --gate): exit 1 when an item of a
gated level (phase, layer, kernel family, matched as above) is slower by more than its PCT and by more than
the runs' noise: the candidate's 95% lower bound above the base's upper bound by PCT,
m_c - h_c > (1 + PCT/100)(m_b + h_b), per step. The noise comes from a run's profiled steps (--steps N, a
trace's steps), else its repeated launches of the same work, else none (the PCT alone). Exit 0 otherwise,
2 for usage errors. --format json follows docs/reference/compare.schema.json (schema_version 1).
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
    compare.add_argument("--format", choices=(*FORMATS, "markdown"), default="table")
    compare.add_argument("-n", "--top", type=positive_int, default=8, metavar="N", help="gains/regressions shown (8)")
    compare.add_argument("--out", metavar="FILE", help="also draw both runs on one roofline (.html .png .svg .json)")
    compare.add_argument("--level", default="hbm", choices=("l1", "l2", "hbm"), help="memory level of the chart")
    compare.add_argument("--ceilings", metavar="GPU|SET|FILE", help="roofs of the chart (default: the base run's GPU)")
    _add_gate_options(compare)
    add_store_option(compare)
    compare.set_defaults(run_command=run_compare)


def _pct(text: str) -> float:
    """argparse type of a gate's percentage."""
    try:
        return check_pct("gate", text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(error.hint or error.message) from None


def _add_gate_options(compare: argparse.ArgumentParser) -> None:
    gate = compare.add_argument_group("gate (exit 1 on a regression beyond PCT and the noise)")
    gate.add_argument(
        "--fail-on-regression",
        nargs="?",
        const=DEFAULT_PCT,
        type=_pct,
        metavar="PCT",
        help=f"gate the phases and the step at PCT percent ({DEFAULT_PCT:g} when PCT is left out)",
    )
    for level, what in (("phase", "phases and the step"), ("layer", "layers"), ("family", "kernel families")):
        gate.add_argument(f"--{level}-gate", type=_pct, metavar="PCT", help=f"gate the {what} at PCT percent")
    gate.add_argument("--gate", metavar="SPEC", help="levels and PCTs in one: phase=5,layer=10,family=10")


def gate_thresholds(args: argparse.Namespace) -> dict[str, float]:
    """{level: PCT} from the gate options (a level named twice: the per-level option wins); empty: no gate."""
    thresholds: dict[str, float] = {}
    if args.fail_on_regression is not None:
        thresholds["phase"] = args.fail_on_regression
    if args.gate:
        thresholds.update(parse_gate_spec(args.gate))
    for level in ("phase", "layer", "family"):
        if getattr(args, f"{level}_gate") is not None:
            thresholds[level] = getattr(args, f"{level}_gate")
    return thresholds


def run_compare(args: argparse.Namespace) -> int:
    from hroofline.api.views import comparison_report, markdown_summary, verdict_of
    from hroofline.render.compare_text import phase_frame
    from hroofline.render.gate_text import verdict_text
    from hroofline.render.output import chart_format

    thresholds = gate_thresholds(args)
    if args.out:
        chart_format(Path(args.out))
    base, candidate = load_pair(args)
    comparison = compare_runs(base, candidate)
    verdict = verdict_of(base, candidate, comparison, thresholds) if thresholds else None
    if args.format == "json":
        write_out(to_json(compare_json(comparison, verdict)))
    elif args.format == "markdown":
        write_out(markdown_summary(comparison, base, candidate, verdict))
    elif args.format == "csv":
        write_out(render_frame(phase_frame(comparison), "csv"))
        if verdict is not None:
            say(verdict_text(verdict).rstrip())  # stdout stays CSV
    else:
        gated = "\n" + verdict_text(verdict) if verdict is not None else ""
        write_out(comparison_report(comparison, base, candidate, args.top) + gated)
    if args.out:
        _draw(args, base, candidate)
    return 1 if verdict is not None and not verdict.passed else 0


def _draw(args: argparse.Namespace, base: Run, candidate: Run) -> None:
    from hroofline.api.outputs import comparison_chart
    from hroofline.render.output import write_chart

    drawn = comparison_chart(base, candidate, args.level, args.ceilings)
    write_chart(drawn.chart.to_dict(), Path(args.out), drawn.title)
    say(f"wrote {args.out} ({drawn.families} kernel families)")
