"""``hroofline chart``, ``top`` and ``report``: a run against its roofs."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.analyze.binding import TOP_COLUMNS
from hroofline.analyze.kernels import RANKING_READS, shown_columns
from hroofline.analyze.provenance import counter_provenance
from hroofline.api.options import (
    CHART_GROUPINGS,
    DEFAULT_TOP,
    FORMATS,
    RANK_CHART,
    STEP_GROUPINGS,
    TOP_GROUPINGS,
    TOP_SORTS,
    chart_levels,
    check_whole_run,
    kernel_query,
)
from hroofline.api.outputs import explained, rank_chart, roofline, runs_chart, top
from hroofline.cli.common import (
    add_selection_options,
    add_store_option,
    open_store,
    positive_int,
    roofs_option_help,
    say,
    write_out,
)
from hroofline.errors import UsageError
from hroofline.model.names import with_table_names
from hroofline.model.phases import parse_phase_option
from hroofline.model.quantities import LEVEL_LABELS
from hroofline.render.communication import collective_kind_lines, link_roofs_line
from hroofline.render.output import CHART_WRITERS, chart_format, write_chart
from hroofline.render.roof_notes import provenance_line
from hroofline.render.text import render_frame
from hroofline.render.utilization import utilization_lines

DOT_NOUNS = {"name": "kernels", "layer": "layers", "launch": "launches"}


EXPLAIN_HELP = (
    "list every kernel behind a warning (kernels faster than their roofs allow are said in one line per kind)"
)


def register(commands: argparse._SubParsersAction) -> None:
    ceilings_help = roofs_option_help()
    chart = commands.add_parser(
        "chart",
        description="Hierarchical roofline of a run: arithmetic intensity (FLOP/byte) against FLOP/s, log-log, "
        "with the L1/L2/HBM bandwidth roofs and the compute roofs of the precisions present. Each kernel "
        "(name and phase) is one dot per memory level, joined by a line; dot area is proportional to time. "
        "Dots above a roof are marked and reported: the ceilings or the metrics are then wrong. "
        "Several runs (or --by run / --by phase): one dot per run (and phase) at its whole-step intensity at "
        "one memory level, one chart per GPU with that GPU's roofs, and a table of intensity, FLOP/s and "
        "attainable FLOP/s (every kernel at its roof) on stdout.",
        epilog="examples:\n"
        "  hroofline chart deepcam-amp-o1 --phase forward --out fw.html     interactive, works offline\n"
        "  hroofline chart deepcam-amp-o1 --phase forward --out fw.png      image, no browser needed\n"
        "  hroofline chart deepcam-amp-o1 --ceilings v100-yang-ert --level l2,hbm --out fw.svg\n"
        "  hroofline chart deepcam-fp32 deepcam-amp-o1 r50-amp-a100 --out runs.html   one dot per run\n"
        "  hroofline chart deepcam-fp32 deepcam-amp-o1 --by phase --out phases.png\n"
        "  hroofline chart ddp --by rank --out ranks.html       a bar per rank: compute, communication, idle",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chart.add_argument("runs", metavar="RUN", nargs="+")
    chart.add_argument("--phase", help="only this phase (default: all, with a phase selector in HTML)")
    chart.add_argument(
        "--level",
        help="memory levels to draw, comma-separated, from l1, l2, hbm (default: those the ceilings have a roof for)",
    )
    chart.add_argument("--ceilings", metavar="GPU|SET|FILE", help=ceilings_help)
    chart.add_argument(
        "--by",
        choices=CHART_GROUPINGS,
        help="one dot per kernel name and phase (default for one run), per layer and phase, per launch; "
        "or one per run (default for several) or per run and phase; rank: a stacked bar per rank of a trace of "
        "several ranks, its wall time split into compute, communication hidden and exposed, and idle",
    )
    chart.add_argument("--per-launch", action="store_true", help="the same as --by launch")
    add_selection_options(chart)
    chart.add_argument(
        "--out",
        metavar="FILE",
        help="output file; the extension picks the format: "
        + ", ".join(CHART_WRITERS)
        + " (default: RUN[-PHASE].html; several runs: runs.html)",
    )
    chart.add_argument("--title", help="chart title (default: run and phase)")
    chart.add_argument("--explain", action="store_true", help=EXPLAIN_HELP)
    chart.add_argument("--format", choices=FORMATS, default="table", help="several runs: their table's format")
    add_store_option(chart)
    chart.set_defaults(run_command=draw_chart)

    top = commands.add_parser(
        "top",
        description="Kernels grouped by name within each phase, ranked by time: share of the phase's time, "
        "achieved FLOP/s, arithmetic intensity per level (FLOP/byte), the roof that binds the kernel, how close it "
        "runs to it (roof_pct = time at roof / time), the time it would take at its roof and the time that is "
        "recoverable (time - time at roof). Per launch, time at roof = max(compute time, bytes per level / "
        "bandwidth), where compute time is the longest execution pipe's sum of FLOPs per precision / that "
        "precision's peak; a kernel's time at roof is the sum over its launches. Roofs are at the SM clock "
        "each launch ran at where the source measured it; the first line says which roofs and which clock. "
        "Collectives with recorded sizes (a trace's NCCL kernels) also get algbw and busbw (message and bus bytes / "
        "time, NCCL's conventions) and link_pct (busbw / their link roof: NVLink or PCIe within a node, the network "
        "per GPU once the group spans nodes), summed per collective kind under the table (docs/guides/traces.md).",
        epilog="columns: "
        + ", ".join(TOP_COLUMNS)
        + "\n\nexample:\n  hroofline top deepcam-amp-o1 --phase forward -n 5",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("run", metavar="RUN")
    top.add_argument("--phase", help="only this phase (default: every phase, ranked together)")
    top.add_argument("--by", choices=TOP_GROUPINGS, default="name", help="rank kernel names (default) or layers")
    add_selection_options(top)
    top.add_argument(
        "-n",
        "--top",
        type=positive_int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"how many kernels (default {DEFAULT_TOP})",
    )
    top.add_argument(
        "--sort",
        choices=TOP_SORTS,
        default="time_s",
        help="rank by kernel time (default), recoverable time, time at roof, FLOPs or FLOP/s",
    )
    top.add_argument("--format", choices=FORMATS, default="table")
    top.add_argument("--ceilings", metavar="GPU|SET|FILE", help=ceilings_help)
    top.add_argument("--explain", action="store_true", help=EXPLAIN_HELP)
    add_store_option(top)
    top.set_defaults(run_command=show_top)

    report = commands.add_parser(
        "report",
        description="An HTML report of one or more runs, in DIR/index.html: per run, the phase summary, a "
        "hierarchical roofline chart per phase and the top-kernels table. The page holds everything it needs "
        "and opens offline.",
        epilog="example:\n  hroofline report deepcam-fp32 deepcam-amp-o1 --out report/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("runs", metavar="RUN", nargs="+")
    report.add_argument("--out", metavar="DIR", required=True, help="folder to write index.html into (created)")
    report.add_argument("--ceilings", metavar="GPU|SET|FILE", help=ceilings_help)
    report.add_argument(
        "-n",
        "--top",
        type=positive_int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"kernels per table (default {DEFAULT_TOP})",
    )
    report.add_argument("--title", default="hroofline report", help="page title")
    report.add_argument(
        "--compare",
        nargs=2,
        action="append",
        default=[],
        metavar=("BASE", "CAND"),
        help="add a comparison of two runs (table and chart); may be given several times",
    )
    report.add_argument("--explain", action="store_true", help=EXPLAIN_HELP)
    add_store_option(report)
    report.set_defaults(run_command=write_report)


def _warn(warnings: list[str], details: list[str]) -> None:
    for line in warnings:
        say(f"hroofline: warning: {line}")
    for line in details:
        say(f"  {line}")


def draw_chart(args: argparse.Namespace) -> int:
    by = args.by or ("name" if len(args.runs) == 1 else "run")
    if by == RANK_CHART:
        return draw_rank_chart(args)
    if by in STEP_GROUPINGS:
        return draw_runs_chart(args, by)
    if len(args.runs) > 1:
        raise UsageError(
            f"--by {by} draws the kernels of one run", "several runs are drawn with --by run or --by phase"
        )
    name = args.runs[0]
    chosen_levels = chart_levels(args.level) if args.level else None
    phase = parse_phase_option(args.phase) if args.phase else None
    out = Path(args.out) if args.out else Path(f"{name}{'-' + phase if phase else ''}.html")
    chart_format(out)  # refuse an unknown extension before any work
    run = open_store(args).load(name)
    group_by = "launch" if args.per_launch else by
    query = kernel_query(group_by, phase, args.layer, args.nvtx)
    drawn = roofline(run, query, args.ceilings, chosen_levels, args.title or "")
    write_chart(drawn.chart.to_dict(), out, drawn.title)
    _warn(drawn.warnings, explained(drawn.points.notes) if args.explain else [])
    dots = f"{len(drawn.points.points)} {DOT_NOUNS[group_by]}"
    at = ", ".join(LEVEL_LABELS[lv] for lv in drawn.points.levels_drawn)
    say(f"wrote {out} ({dots} at {at}; roofs: {drawn.roofs.label})")
    return 0


def draw_rank_chart(args: argparse.Namespace) -> int:
    """One run of several ranks: a stacked bar per rank of its wall time."""
    if len(args.runs) > 1:
        raise UsageError("--by rank draws the ranks of one run", "name one run")
    check_whole_run(RANK_CHART, args.phase, args.layer, args.nvtx, args.per_launch, None)
    name = args.runs[0]
    out = Path(args.out) if args.out else Path(f"{name}-ranks.html")
    chart_format(out)
    chart = rank_chart(open_store(args).load(name, RANKING_READS), args.title or "")
    write_chart(chart.to_dict(), out, args.title or f"{name}: wall time per rank")
    say(f"wrote {out} (a bar per rank: compute, communication hidden and exposed, idle)")
    return 0


def draw_runs_chart(args: argparse.Namespace, by: str) -> int:
    """Several runs, one dot each (or per phase), one chart per GPU; the table on stdout."""
    from hroofline.render.runs_chart import points_text

    levels = chart_levels(args.level) if args.level else None
    check_whole_run(by, args.phase, args.layer, args.nvtx, args.per_launch, levels)
    out = Path(args.out) if args.out else Path("runs.html")
    chart_format(out)
    store = open_store(args)
    runs = [store.load(name) for name in dict.fromkeys(args.runs)]
    drawn = runs_chart(runs, by, levels[0] if levels else None, args.ceilings, args.title or "")
    found = drawn.found
    write_chart(drawn.chart.to_dict(), out, drawn.title)
    table = found.table()
    write_out(points_text(table) if args.format == "table" else render_frame(table, args.format))
    for run in found.skipped_runs:
        say(f"hroofline: warning: {run} is not drawn: it has no {' and no '.join(found.missing(run))}")
    drawn_gpus = found.points.loc[found.drawable, "gpu"].nunique()
    say(f"wrote {out} ({int(found.drawable.sum())} dots on {drawn_gpus} GPU(s), bytes at {found.level.upper()})")
    return 0


def show_top(args: argparse.Namespace) -> int:
    run = open_store(args).load(args.run, RANKING_READS)
    query = kernel_query(args.by, args.phase, args.layer, args.nvtx, args.top, args.sort)
    ranked = top(run, query, args.ceilings)
    table, roofs = ranked.table, ranked.roofs
    if args.format == "table":
        with_table_names(table)
        write_out(f"roofs: {roofs.label} (how each is made: hroofline ceilings --run {run.name})\n")
        table = shown_columns(table)
        for note in roofs.notes:
            write_out(f"note: {note}\n")
        counters = provenance_line(counter_provenance(run.launches))
        if counters:
            write_out(f"note: {counters}\n")
        if run.meta.predicted:
            write_out(
                "note: a prediction: time_s is the estimated time (bound / its class's efficiency, with a host "
                "floor), time_at_roof_s its roofline bound, so roof_pct is the estimate's efficiency\n"
            )
        for line in utilization_lines(ranked.utilization):  # the denominator of mfu_pct, hfu_pct, mbu_pct
            write_out(f"{line}\n")
    write_out(render_frame(table, args.format))
    if args.format == "table" and ranked.collectives and ranked.link_roofs is not None:
        write_out("\ncollectives (algbw = message bytes / time, busbw = bus bytes / time):\n")
        write_out("".join(f"{line}\n" for line in collective_kind_lines(ranked.collectives)))
        write_out(f"{link_roofs_line(ranked.link_roofs)}\n")
    if args.format == "table" and not run.meta.predicted:
        write_out(f"what to change, with what it can win: hroofline advise {run.name}\n")
    _warn(ranked.warnings, explained(ranked.notes) if args.explain else [])
    return 0


def write_report(args: argparse.Namespace) -> int:
    from hroofline.api.report_page import report

    store = open_store(args)
    runs = [store.load(name) for name in dict.fromkeys(args.runs)]  # load all first: a bad name writes nothing
    pairs = [(store.load(base), store.load(candidate)) for base, candidate in args.compare]
    page = report(runs, pairs, args.title, args.top, args.ceilings)
    for note in page.notes:
        say(f"hroofline: note: {note}")
    target = page.write(Path(args.out))
    _warn(page.warnings(), page.details() if args.explain else [])
    say(f"wrote {target} ({len(page.sections)} run(s), {page.charts} chart(s))")
    return 0
