"""The report as one composition for the CLI and the notebook: per run its facts, summary, a roofline and the top
kernels of each phase; every run on its GPU's roofline; comparisons. The page itself is rendered by
:mod:`hroofline.render.report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.analyze.binding import (
    RoofNotes,
    has_times,
    ranked,
    roof_table,
    roofline_points,
    run_terms,
    top_kernels,
)
from hroofline.analyze.kernels import KernelQuery, has_layers, phase_summary
from hroofline.analyze.overlap import run_overlap
from hroofline.analyze.provenance import counter_provenance
from hroofline.analyze.step_points import overview_table, step_points
from hroofline.analyze.utilization import run_utilization, summary_with_utilization
from hroofline.api.advice import findings
from hroofline.api.outputs import explained, warnings_of
from hroofline.errors import HrooflineError, UsageError
from hroofline.model.run import Run
from hroofline.render.output import write_atomically
from hroofline.render.roof_notes import provenance_line
from hroofline.render.utilization import utilization_sentence
from hroofline.roofs.ceilings import RunRoofs, readable_source, run_roofs

if TYPE_CHECKING:
    from hroofline.render.report import ComparisonSection, RunSection, RunsSection


@dataclass
class Report:
    """A report page, with what its runs warn about and what it could not draw."""

    html: str
    sections: list[RunSection]
    comparisons: list[ComparisonSection]
    notes: list[str] = field(default_factory=list)

    @property
    def charts(self) -> int:
        return sum(1 for s in self.sections for p in s.phases if p.spec is not None) + sum(
            1 for c in self.comparisons if c.spec is not None
        )

    def warnings(self) -> list[str]:
        """What the runs warn about, once per kind and run, as ``hroofline top`` says it."""
        return [f"{section.name}: {warning}" for section in self.sections for warning in section.warnings]

    def details(self) -> list[str]:
        """Every kernel behind a warning, one line each (``--explain``)."""
        return [f"{section.name}: {line}" for section in self.sections for line in section.details]

    def write(self, folder: Path) -> Path:
        """``folder/index.html``, written atomically; the folder is made where it is missing."""
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {folder} exists and is not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise HrooflineError(f"cannot create {folder}: {error.strerror}") from None
        target = folder / "index.html"
        write_atomically(target, self.html.encode())
        return target


def report(
    runs: list[Run], pairs: list[tuple[Run, Run]], title: str, top: int = 10, ceilings: str | None = None
) -> Report:
    """The report of ``runs`` (each against ``ceilings``, else its own roofs) and of the comparisons ``pairs``."""
    from hroofline.render.report import report_page

    notes: list[str] = []
    sections = [_run_section(run, run_roofs(run, ceilings), top, ceilings) for run in runs]
    comparisons = [_comparison_section(base, candidate, top) for base, candidate in pairs]
    totals = {section.name: section.summary["total"] for section in sections}
    overview = _overview_section(runs, totals, ceilings, notes) if len(runs) > 1 else None
    return Report(report_page(title, sections, comparisons, overview), sections, comparisons, notes)


def _run_section(run: Run, roofs: RunRoofs, count: int, ceilings: str | None = None) -> RunSection:
    from hroofline.render.report import PhaseSection, RunSection
    from hroofline.render.roofline_chart import ChartOptions, roofline_chart

    meta = run.meta
    facts = [
        ("GPU", meta.gpu_name or "unknown"),
        ("compute capability", f"{meta.cc or '-'} ({meta.arch or 'unknown architecture'})"),
        ("precision", meta.precision or "-"),
        ("kernel launches", str(int(run.launches["launches"].sum()))),
        *([("counters", line)] if (line := provenance_line(counter_provenance(run.launches))) else []),
        ("sources", ", ".join(s.path for s in meta.sources) or "-"),
        ("ncu", ", ".join(meta.ncu_versions) or "-"),
        ("roofs", roofs.label + "".join(f"; {note}" for note in roofs.notes)),
    ]
    utilization = run_utilization(run)
    facts += [("MFU and MBU", utilization_sentence(utilization))]
    phases = []
    summary = summary_with_utilization(phase_summary(run), utilization)
    known = run_terms(run, roofs)  # once for the run's every table below, not once per table
    for phase in summary:
        if phase == "total":
            continue
        points = roofline_points(run, roofs, KernelQuery(group_by="name", phase=phase), roofs.levels(), known)
        timed = has_times(run, phase)  # a source without kernel times: its kernels ranked by FLOPs
        top = ranked(points.table, "time_s" if timed else "flops", count)  # the chart's roof table, ranked
        spec = None
        note = None
        if not points.points.empty:
            title = f"{run.name} · {phase}"
            options = ChartOptions(title=title, levels=roofs.levels(), phase_selector=False)
            spec = roofline_chart(points, roofs, options).to_dict(validate=False)
        else:
            note = "No kernel in this phase has time, FLOPs and bytes, so there is nothing to place on a roofline."
        if not timed:
            note = (note + " " if note else "") + "No kernel of this phase has a time: the table ranks them by FLOPs."
        layers = None
        if timed and has_layers(run):
            layers = top_kernels(run, roofs, KernelQuery(group_by="layer", phase=phase, top=count), known=known)
        phases.append(PhaseSection(phase=phase, spec=spec, top=top, note=note, layers=layers))
    notes = RoofNotes()  # the warnings as `hroofline top RUN` says them: once per kind over every phase
    roof_table(run, roofs, KernelQuery(group_by="name"), notes, known)
    return RunSection(
        name=run.name,
        facts=facts,
        summary=summary,
        phases=phases,
        warnings=warnings_of(notes),
        details=explained(notes),
        sources=list(meta.sources),
        advice=findings(run, ceilings),
        roof_sources=readable_source(roofs.source).split("; "),
        overlap=run_overlap(run) if run.launches["rank"].nunique() > 1 else None,
    )


def _overview_section(
    runs: list[Run], totals: dict[str, dict[str, float | int | None]], ceilings: str | None, notes: list[str]
) -> RunsSection | None:
    """Every run as one dot on its GPU's roofline, where the runs share a memory level with bytes; what keeps a
    run or the chart out goes to ``notes``."""
    from hroofline.render.report import RunsSection
    from hroofline.render.runs_chart import runs_chart

    try:
        found = step_points(runs, "run", None, ceilings)
    except UsageError as error:
        notes.append(f"no all-runs chart in the report: {error.one_line()}")
        return None
    drawable = found.drawable
    if not drawable.any():
        notes.append("no all-runs chart in the report: no run has FLOPs, bytes and time")
        return None
    for run in found.skipped_runs:
        notes.append(f"{run} is not on the all-runs chart: it has no {' and no '.join(found.missing(run))}")
    spec = runs_chart(found, "All runs, one dot each").to_dict(validate=False)
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
        spec = compare_chart(matched, roofs, "hbm", (base.name, candidate.name), title).to_dict(validate=False)
    return ComparisonSection(title=title, tables=tables, spec=spec)
