"""What a run is shown as, composed once for the CLI and the notebook: its roofline, its top kernels, several runs
on their GPUs' rooflines, and the roof notes in sentences. The CLI parses arguments and prints; these compose
the stages (roofs, analysis, rendering)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hroofline.analyze.binding import RooflinePoints, RoofNotes, roofline_points, top_kernels
from hroofline.analyze.communication import CollectiveKind, LinkRoofs, collective_kinds, link_roofs
from hroofline.analyze.kernels import KernelQuery
from hroofline.analyze.utilization import RunUtilization, run_utilization
from hroofline.errors import HrooflineError, UsageError
from hroofline.model.quantities import LEVEL_LABELS
from hroofline.model.run import Run
from hroofline.render.roof_notes import above_roof_details, above_roof_lines
from hroofline.roofs.ceilings import RunRoofs, run_roofs


@dataclass
class Roofline:
    """A run's hierarchical roofline: the Altair chart, what it drew and against which roofs."""

    chart: Any  # altair.Chart
    points: RooflinePoints
    roofs: RunRoofs
    title: str

    @property
    def warnings(self) -> list[str]:
        return warnings_of(self.points.notes)


def roofline(
    run: Run, query: KernelQuery, ceilings: str | None = None, levels: tuple[str, ...] | None = None, title: str = ""
) -> Roofline:
    """The roofline of ``run``'s launches that ``query`` selects, one dot per its grouping (a kernel name in a
    phase, a layer, a launch), at ``levels`` (default: those with a roof)."""
    from hroofline.render.roofline_chart import ChartOptions, roofline_chart  # Altair loads only when drawing

    roofs = run_roofs(run, ceilings)
    levels = levels or roofs.levels()
    points = roofline_points(run, roofs, query, levels=levels)
    if points.points.empty:
        where = f" in phase {query.phase}" if query.phase else ""
        if points.not_drawn == 0:
            raise HrooflineError(f"nothing to draw: run {run.name!r} has no kernels{where}")
        raise HrooflineError(
            f"nothing to draw: no kernel of run {run.name!r}{where} has time, FLOPs and bytes at "
            + ", ".join(LEVEL_LABELS[lv] for lv in levels)
            + f" ({points.no_flops} of {points.not_drawn} have no FLOPs)"
        )
    title = title or run.name + (f" · {query.phase}" if query.phase else "")
    return Roofline(roofline_chart(points, roofs, ChartOptions(title=title, levels=levels)), points, roofs, title)


@dataclass
class TopTable:
    """The kernels (or layers) worth the time, ranked, with the roofs they were judged against."""

    table: pd.DataFrame
    roofs: RunRoofs
    notes: RoofNotes = field(default_factory=RoofNotes)
    utilization: RunUtilization = field(default_factory=RunUtilization)  # the run's MFU and MBU, their peaks
    link_roofs: LinkRoofs | None = None  # what the run's collectives are judged against
    collectives: list[CollectiveKind] = field(default_factory=list)  # per collective kind: algbw, busbw, % of roof

    @property
    def warnings(self) -> list[str]:
        return warnings_of(self.notes)


def top(run: Run, query: KernelQuery, ceilings: str | None = None) -> TopTable:
    roofs = run_roofs(run, ceilings)
    notes = RoofNotes()
    links = link_roofs(run)
    kinds = collective_kinds(run, links)
    return TopTable(top_kernels(run, roofs, query, notes), roofs, notes, run_utilization(run), links, kinds)


def rank_chart(run: Run, title: str = "") -> Any:
    """``hroofline chart RUN --by rank``: a stacked bar per rank, its wall time over the profiled steps made of
    compute, communication hidden and exposed, and idle (hroofline/analyze/overlap.py)."""
    from hroofline.analyze.overlap import run_overlap
    from hroofline.render.overlap import rank_bars

    overlap = run_overlap(run)
    if overlap.unknown is not None:
        raise UsageError(f"run {run.name!r}: {overlap.unknown}")
    return rank_bars(overlap, title or f"{run.name}: wall time per rank")


def summary_frame(run: Run, by: str = "phase") -> pd.DataFrame:
    """``hroofline summary``'s table: per phase and in total (``by="phase"``: time, FLOPs, tensor FLOPs, bytes per
    level, launches), or per rank or profiler step and phase (``by="rank"``, ``"step"``)."""
    from dataclasses import asdict

    from hroofline.analyze.kernels import phase_summary
    from hroofline.analyze.ranks import grouped_summary
    from hroofline.analyze.utilization import summary_with_utilization

    if by == "phase":
        summary = summary_with_utilization(phase_summary(run), run_utilization(run))
        return pd.DataFrame(summary).T.rename_axis("phase").infer_objects()
    rows = grouped_summary(run, by)
    if not rows:
        raise UsageError(
            f"run {run.name!r} has no {by} on any launch",
            "ranks and profiler steps come from PyTorch profiler traces (`hroofline import trace.json`)",
        )
    return pd.DataFrame([asdict(r) for r in rows]).rename(columns={"key": by})


def warnings_of(notes: RoofNotes) -> list[str]:
    """The roof analysis's warnings: kernels above a roof once per kind, roofs missing."""
    return above_roof_lines(notes) + notes.missing_roofs


def explained(notes: RoofNotes) -> list[str]:
    """Every kernel group behind a warning, one line each."""
    return above_roof_details(notes)


@dataclass
class ComparisonChart:
    """Two runs' kernel families on one roofline, an arrow from base to candidate."""

    chart: Any
    families: int
    title: str


def comparison_chart(base: Run, candidate: Run, level: str = "hbm", ceilings: str | None = None) -> ComparisonChart:
    """``hroofline compare --out``'s chart: the 25 largest kernel families of both runs at ``level``."""
    from hroofline.analyze.compare import comparison_roofs, matched_points
    from hroofline.render.compare_chart import compare_chart

    matched = matched_points(base, candidate, level, count=25)
    if matched.empty:
        raise HrooflineError(f"no kernel family of both runs has FLOPs and {level} bytes to draw")
    roofs = comparison_roofs(base, candidate, ceilings)
    title = f"{base.name} -> {candidate.name}"
    chart = compare_chart(matched, roofs, level, (base.name, candidate.name), title)
    return ComparisonChart(chart, len(matched), title)


@dataclass
class RunsChart:
    """Several runs, one dot each (or per phase), on their GPUs' rooflines."""

    chart: Any
    found: Any  # hroofline.analyze.step_points.StepPoints
    title: str


def runs_chart(runs: list[Run], by: str, level: str | None, ceilings: str | None, title: str = "") -> RunsChart:
    from hroofline.analyze.step_points import step_points
    from hroofline.render.runs_chart import runs_chart as draw

    found = step_points(runs, by, level, ceilings)
    if not found.drawable.any():
        raise HrooflineError("nothing to draw: no run has FLOPs, bytes and time")
    series = found.points["series"].drop_duplicates().tolist()
    gpus = len(found.peaks)
    title = title or (", ".join(series) if len(series) <= 4 else f"{len(runs)} runs") + (
        f" on {', '.join(found.peaks)}" if gpus <= 3 else f" on {gpus} GPUs"
    )
    return RunsChart(draw(found, title), found, title)
