"""``hroofline chart``, ``top`` and ``report``: a run against its roofs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.analyze.kernels import KernelQuery, has_layers, phase_summary
from hroofline.analyze.names import short_kernel_name
from hroofline.analyze.roofs import (
    TOP_COLUMNS,
    TOP_SORTS,
    RoofNotes,
    above_roof_details,
    has_times,
    levels_with_dots,
    ranked,
    roofline_points,
    top_kernels,
)
from hroofline.analyze.step_points import GROUPINGS as STEP_GROUPINGS
from hroofline.analyze.step_points import overview_table, step_points
from hroofline.ceilings import LEVEL_LABELS, RunRoofs, bundled_ceiling_files, run_roofs
from hroofline.cli.common import add_selection_options, add_store_option, open_store, positive_int, say, write_out
from hroofline.errors import HrooflineError, UsageError
from hroofline.metricset import LEVELS
from hroofline.model import Run
from hroofline.phases import parse_phase_option
from hroofline.render.output import CHART_WRITERS, chart_format, write_atomically, write_chart
from hroofline.render.text import render_frame

if TYPE_CHECKING:  # the report's page and its sections are imported where a report is written
    from hroofline.render.report import ComparisonSection, RunSection, RunsSection

CEILINGS_HELP = (
    "roofs to use: a catalog GPU (see `hroofline gpus`), a bundled measured set ({bundled}) or a TOML file "
    "of your own measured ceilings (default: the report's own roofs, where its sources carry ncu peak "
    "metrics, else the datasheet of the run's GPU, scaled to the SM clock each kernel ran at)"
)
LEVEL_ALIASES = {"l1": "l1", "l2": "l2", "hbm": "hbm", "dram": "hbm"}
DOT_NOUNS = {"name": "kernels", "layer": "layers", "launch": "launches"}


EXPLAIN_HELP = (
    "list every kernel behind a warning (kernels faster than their roofs allow are said in one line per kind)"
)


def register(commands: argparse._SubParsersAction) -> None:
    ceilings_help = CEILINGS_HELP.format(bundled=", ".join(bundled_ceiling_files()) or "none")
    chart = commands.add_parser(
        "chart",
        help="draw the hierarchical roofline of a run, or many runs on their GPUs' rooflines (HTML, PNG, SVG, JSON)",
        description="Hierarchical roofline of a run: arithmetic intensity (FLOP/byte) against FLOP/s, log-log, "
        "with the L1/L2/HBM bandwidth roofs and the compute roofs of the precisions present. Each kernel "
        "(name and phase) is one dot per memory level, joined by a line; dot area is proportional to time. "
        "Dots above a roof are marked and reported: the ceilings or the metrics are then wrong. "
        "Several runs (or --by run / --by phase): one dot per run (and phase) at its whole-step intensity at "
        "one memory level, one chart per GPU with that GPU's roofs, and a table of intensity, FLOP/s and "
        "attainable FLOP/s (every kernel at its roof) on stdout.",
        epilog="examples:\n"
        "  hroofline chart deepcam-amp --phase forward --out fw.html     interactive, works offline\n"
        "  hroofline chart deepcam-amp --phase forward --out fw.png      image, no browser needed\n"
        "  hroofline chart deepcam-amp --ceilings v100-yang-ert --level l2,hbm --out fw.svg\n"
        "  hroofline chart r18-v100 r34-v100 r50-v100 r18-a100 r34-a100 r50-a100 --out resnets.html\n"
        "  hroofline chart deepcam-fp32 deepcam-amp-o1 --by phase --out phases.png",
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
        choices=("name", "layer", "launch", *STEP_GROUPINGS),
        help="one dot per kernel name and phase (default for one run), per layer and phase, per launch; "
        "or one per run (default for several) or per run and phase",
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
    chart.add_argument(
        "--format", choices=("table", "csv", "json"), default="table", help="several runs: their table's format"
    )
    add_store_option(chart)
    chart.set_defaults(run_command=draw_chart)

    top = commands.add_parser(
        "top",
        help="the kernels worth your time: ranked by time, with binding roof and recoverable time",
        description="Kernels grouped by name within each phase, ranked by time: share of the phase's time, "
        "achieved FLOP/s, arithmetic intensity per level (FLOP/byte), the roof that binds the kernel, how close it "
        "runs to it (roof_pct = time at roof / time), the time it would take at its roof and the time that is "
        "recoverable (time - time at roof). Per launch, time at roof = max(compute time, bytes per level / "
        "bandwidth), where compute time is the longest execution pipe's sum of FLOPs per precision / that "
        "precision's peak; a kernel's time at roof is the sum over its launches. Roofs are at the SM clock "
        "each launch ran at where the source measured it; the first line says which roofs and which clock.",
        epilog="columns: " + ", ".join(TOP_COLUMNS) + "\n\nexample:\n  hroofline top deepcam-amp --phase forward -n 5",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("run", metavar="RUN")
    top.add_argument("--phase", help="only this phase (default: every phase, ranked together)")
    top.add_argument("--by", choices=("name", "layer"), default="name", help="rank kernel names (default) or layers")
    add_selection_options(top)
    top.add_argument("-n", "--top", type=positive_int, default=10, metavar="N", help="how many kernels (default 10)")
    top.add_argument(
        "--sort",
        choices=TOP_SORTS,
        default="time_s",
        help="rank by kernel time (default), recoverable time, time at roof, FLOPs or FLOP/s",
    )
    top.add_argument("--format", choices=("table", "csv", "json"), default="table")
    top.add_argument("--ceilings", metavar="GPU|SET|FILE", help=ceilings_help)
    top.add_argument("--explain", action="store_true", help=EXPLAIN_HELP)
    add_store_option(top)
    top.set_defaults(run_command=show_top)

    report = commands.add_parser(
        "report",
        help="write one self-contained HTML page: summary, a chart per phase and the top kernels of each run",
        description="An HTML report of one or more runs, in DIR/index.html: per run, the phase summary, a "
        "hierarchical roofline chart per phase and the top-kernels table. The page holds everything it needs "
        "and opens offline.",
        epilog="example:\n  hroofline report deepcam-fp32 deepcam-amp --out report/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("runs", metavar="RUN", nargs="+")
    report.add_argument("--out", metavar="DIR", required=True, help="folder to write index.html into (created)")
    report.add_argument("--ceilings", metavar="GPU|SET|FILE", help=ceilings_help)
    report.add_argument(
        "-n", "--top", type=positive_int, default=10, metavar="N", help="kernels per table (default 10)"
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
    add_store_option(report)
    report.set_defaults(run_command=write_report)


def parse_levels(text: str) -> tuple[str, ...]:
    wanted = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - set(LEVEL_ALIASES))
    if unknown or not wanted:
        raise UsageError(f"--level {text!r}: unknown level {', '.join(unknown) or '(none)'}", "use l1, l2 and hbm")
    chosen = {LEVEL_ALIASES[w] for w in wanted}
    return tuple(level for level in LEVELS if level in chosen)


def _warn(notes: RoofNotes, explain: bool = False) -> None:
    for line in notes.above_roof + notes.missing_roofs:
        say(f"hroofline: warning: {line}")
    if explain:
        for line in above_roof_details(notes):
            say(f"  {line}")


def draw_chart(args: argparse.Namespace) -> int:
    by = args.by or ("name" if len(args.runs) == 1 else "run")
    if by in STEP_GROUPINGS:
        return draw_runs_chart(args, by)
    if len(args.runs) > 1:
        raise UsageError(
            f"--by {by} draws the kernels of one run", "several runs are drawn with --by run or --by phase"
        )
    from hroofline.render.roofline_chart import ChartOptions, roofline_chart  # Altair loads only when drawing

    args.run = args.runs[0]
    chosen_levels = parse_levels(args.level) if args.level else None
    phase = parse_phase_option(args.phase) if args.phase else None
    out = Path(args.out) if args.out else Path(f"{args.run}{'-' + phase if phase else ''}.html")
    chart_format(out)  # refuse an unknown extension before any work
    run = open_store(args).load(args.run)
    roofs = run_roofs(run, args.ceilings)
    levels = chosen_levels or roofs.levels()
    group_by = "launch" if args.per_launch else by
    query = KernelQuery(group_by=group_by, phase=phase, layer=args.layer, nvtx=args.nvtx)
    points = roofline_points(run, roofs, query, levels=levels)
    if points.points.empty:
        where = f" in phase {phase}" if phase else ""
        if points.not_drawn == 0:
            raise HrooflineError(f"nothing to draw: run {args.run!r} has no kernels{where}")
        raise HrooflineError(
            f"nothing to draw: no kernel of run {args.run!r}{where} has time, FLOPs and bytes at "
            + ", ".join(LEVEL_LABELS[lv] for lv in levels)
            + f" ({points.no_flops} of {points.not_drawn} have no FLOPs)"
        )
    title = args.title or f"{run.name}" + (f" · {phase}" if phase else "")
    spec = roofline_chart(points, roofs, ChartOptions(title=title, levels=levels)).to_dict()
    write_chart(spec, out, title)
    _warn(points.notes, args.explain)
    drawn = f"{len(points.points)} {DOT_NOUNS[group_by]}"
    at = ", ".join(LEVEL_LABELS[lv] for lv in levels_with_dots(points.points, levels))
    say(f"wrote {out} ({drawn} at {at}; roofs: {roofs.label})")
    return 0


def draw_runs_chart(args: argparse.Namespace, by: str) -> int:
    """Several runs, one dot each (or per phase), one chart per GPU; the table on stdout."""
    from hroofline.render.runs_chart import points_text, runs_chart

    levels = parse_levels(args.level) if args.level else None
    if levels is not None and len(levels) > 1:
        raise UsageError("--level: runs are compared at one memory level", "give one of l1, l2, hbm")
    if args.phase or args.layer or args.nvtx or args.per_launch:
        raise UsageError(f"--by {by} draws whole runs", "leave out --phase, --layer, --nvtx and --per-launch")
    out = Path(args.out) if args.out else Path("runs.html")
    chart_format(out)
    store = open_store(args)
    runs = [store.load(name) for name in dict.fromkeys(args.runs)]
    found = step_points(runs, by, levels[0] if levels else None, args.ceilings)
    drawable = found.drawable
    if not drawable.any():
        raise HrooflineError("nothing to draw: no run has FLOPs, bytes and time")
    series = found.points["series"].drop_duplicates().tolist()
    gpus = len(found.peaks)
    title = args.title or (", ".join(series) if len(series) <= 4 else f"{len(runs)} runs") + (
        f" on {', '.join(found.peaks)}" if gpus <= 3 else f" on {gpus} GPUs"
    )
    write_chart(runs_chart(found, title).to_dict(), out, title)
    table = found.table()
    write_out(points_text(table) if args.format == "table" else render_frame(table, args.format))
    if found.skipped_runs:
        say(f"hroofline: warning: not drawn (no FLOPs, bytes or time): {', '.join(found.skipped_runs)}")
    drawn_gpus = found.points.loc[drawable, "gpu"].nunique()
    say(f"wrote {out} ({int(drawable.sum())} dots on {drawn_gpus} GPU(s), bytes at {found.level.upper()})")
    return 0


def show_top(args: argparse.Namespace) -> int:
    run = open_store(args).load(args.run)
    roofs = run_roofs(run, args.ceilings)
    notes = RoofNotes()
    phase = parse_phase_option(args.phase) if args.phase else None
    query = KernelQuery(group_by=args.by, phase=phase, top=args.top, sort=args.sort, layer=args.layer, nvtx=args.nvtx)
    table = top_kernels(run, roofs, query, notes)
    if args.format == "table":
        table["kernel"] = table["kernel"].map(short_kernel_name)
        write_out(f"roofs: {roofs.label} (how each is made: hroofline ceilings --run {run.name})\n")
        for note in roofs.notes:
            write_out(f"note: {note}\n")
        if run.meta.predicted:
            write_out(
                "note: a prediction: time_s is the estimated time (bound / its class's efficiency, with a host "
                "floor), time_at_roof_s its roofline bound, so roof_pct is the estimate's efficiency\n"
            )
    write_out(render_frame(table, args.format))
    _warn(notes, args.explain)
    return 0


def write_report(args: argparse.Namespace) -> int:
    from hroofline.render.report import report_page

    store = open_store(args)
    runs = [store.load(name) for name in dict.fromkeys(args.runs)]  # load all first: a bad name writes nothing
    pairs = [(store.load(base), store.load(candidate)) for base, candidate in args.compare]
    sections = [_run_section(run, run_roofs(run, args.ceilings), args.top) for run in runs]
    comparisons = [_comparison_section(base, candidate, args.top) for base, candidate in pairs]
    totals = {section.name: section.summary["total"] for section in sections}
    overview = _overview_section(runs, totals, args.ceilings) if len(runs) > 1 else None
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise HrooflineError(f"cannot create {folder}: {error.strerror}") from None
    target = folder / "index.html"
    write_atomically(target, report_page(args.title, sections, comparisons, overview).encode())
    for section in sections:
        for warning in section.warnings:
            say(f"hroofline: warning: {section.name}: {warning}")
    charts = sum(1 for s in sections for p in s.phases if p.spec is not None)
    charts += sum(1 for c in comparisons if c.spec is not None)
    say(f"wrote {target} ({len(sections)} run(s), {charts} chart(s))")
    return 0


def _run_section(run: Run, roofs: RunRoofs, count: int) -> RunSection:
    from hroofline.render.report import PhaseSection, RunSection
    from hroofline.render.roofline_chart import ChartOptions, roofline_chart

    meta = run.meta
    facts = [
        ("GPU", meta.gpu_name or "unknown"),
        ("compute capability", f"{meta.cc or '-'} ({meta.arch or 'unknown architecture'})"),
        ("precision", meta.precision or "-"),
        ("kernel launches", str(int(run.launches["launches"].sum()))),
        ("sources", ", ".join(s.path for s in meta.sources) or "-"),
        ("ncu", ", ".join(meta.ncu_versions) or "-"),
        ("roofs", roofs.describe() + "".join(f" {note}." for note in roofs.notes)),
    ]
    warnings: list[str] = []
    phases = []
    summary = phase_summary(run)
    for phase in summary:
        if phase == "total":
            continue
        points = roofline_points(run, roofs, KernelQuery(group_by="name", phase=phase), roofs.levels())
        timed = has_times(run, phase)  # a source without kernel times: its kernels ranked by FLOPs
        top = ranked(points.table, "time_s" if timed else "flops", count)  # the chart's roof table, ranked
        notes = points.notes
        lines = notes.above_roof + notes.missing_roofs + above_roof_details(notes)
        warnings.extend(w for w in lines if w not in warnings)
        spec = None
        note = None
        if not points.points.empty:
            title = f"{run.name} · {phase}"
            options = ChartOptions(title=title, levels=roofs.levels(), phase_selector=False)
            spec = roofline_chart(points, roofs, options).to_dict()
        else:
            note = "No kernel in this phase has time, FLOPs and bytes, so there is nothing to place on a roofline."
        if not timed:
            note = (note + " " if note else "") + "No kernel of this phase has a time: the table ranks them by FLOPs."
        layers = None
        if timed and has_layers(run):
            layers = top_kernels(run, roofs, KernelQuery(group_by="layer", phase=phase, top=count))
        phases.append(PhaseSection(phase=phase, spec=spec, top=top, note=note, layers=layers))
    return RunSection(
        name=run.name, facts=facts, summary=summary, phases=phases, warnings=warnings, sources=list(meta.sources)
    )


def _overview_section(
    runs: list[Run], totals: dict[str, dict[str, float | int | None]], ceilings: str | None
) -> RunsSection | None:
    """Every run as one dot on its GPU's roofline, where the runs share a memory level with bytes."""
    from hroofline.render.report import RunsSection
    from hroofline.render.runs_chart import runs_chart

    try:
        found = step_points(runs, "run", None, ceilings)
    except UsageError as error:
        say(f"hroofline: note: no all-runs chart in the report: {error.one_line()}")
        return None
    drawable = found.drawable
    if not drawable.any():
        say("hroofline: note: no all-runs chart in the report: no run has FLOPs, bytes and time")
        return None
    if found.skipped_runs:
        what = f"no FLOPs, {found.level.upper()} bytes or time"
        say(f"hroofline: note: not on the all-runs chart ({what}): {', '.join(found.skipped_runs)}")
    spec = runs_chart(found, "All runs, one dot each").to_dict()
    return RunsSection(spec=spec, table=overview_table(found, runs, totals))


def _comparison_section(base: Run, candidate: Run, count: int) -> ComparisonSection:
    from hroofline.analyze.compare import compare_runs, comparison_roofs, matched_points
    from hroofline.render.compare_chart import compare_chart
    from hroofline.render.compare_text import comparison_tables
    from hroofline.render.report import ComparisonSection

    title = f"{base.name} -> {candidate.name}"
    tables = comparison_tables(compare_runs(base, candidate), count)
    matched = matched_points(base, candidate, "hbm", count=25)
    spec = None
    if not matched.empty:
        roofs = comparison_roofs(base, candidate)
        spec = compare_chart(matched, roofs, "hbm", (base.name, candidate.name), title).to_dict()
    return ComparisonSection(title=title, tables=tables, spec=spec)
