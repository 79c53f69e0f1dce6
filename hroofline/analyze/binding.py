"""Where each kernel sits against its roofs: binding roof, % of roof, time at roof, dots above a roof.

The roofline model, per launch, with that launch's roofs (:func:`hroofline.roofs.ceilings.run_roofs`):

- compute time at roof: per execution pipe, the sum over the precisions it runs of FLOPs_p / peak_p;
  pipes run concurrently, so t_c = the longest pipe (``[pipes]`` in metrics/hierarchical.toml)
- memory time at roof   t_L = bytes_L / bandwidth_L                       for L in L1, L2, HBM
- time at roof          t_roof = max(t_c, t_L1, t_L2, t_HBM); the binding roof is the term that is largest,
  except that a compute time within ``CO_BOUND`` of the largest names the compute roof: such a kernel is at
  its compute roof as much as at the memory one (co-bound), and no change of data movement lifts a compute
  roof. On Hopper wgmma reads its operands from shared memory in step with the tensor pipe: a cuBLAS BF16
  GEMM keeps the L1 writeback path busy 94.0-94.3% of its time and the tensor pipe 93.5-93.8% (H100 and H200
  calibrations of 2026-11-27, tests/data/gpu-2026-11-27). A launch faster than its roofs keeps the roof it beat
- roof_pct              100 * t_roof / time          (= achieved FLOP/s / attainable FLOP/s)
- recoverable time      time - t_roof

A group of launches (a kernel name in a phase) has the sums: t_roof = sum of its launches' t_roof, not
the roof of its summed FLOPs and bytes; its binding roof is the one that binds most of that time.

A launch cannot run faster than its time at roof. Per memory level, its dot (intensity FLOPs/bytes_L,
FLOP/s) lies above the roof of that level when time < max(t_c, t_L): then the ceilings or the metrics are
wrong, and hroofline says so instead of drawing it quietly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from hroofline.analyze.communication import LINK_COLUMNS, link_roofs, link_terms, with_link_columns
from hroofline.analyze.kernels import KernelQuery, kernel_table, phase_launches, selected_launches
from hroofline.analyze.utilization import kernel_utilization, with_utilization
from hroofline.errors import HrooflineError
from hroofline.model.quantities import COMPUTE_ROOF_OF, LEVEL_LABELS, LEVELS, ROOF_LABELS, UTILIZATION_COLUMNS
from hroofline.model.run import Run, ordered_phases
from hroofline.roofs.ceilings import CPU, RunRoofs, run_gpu
from hroofline.roofs.metricset import load_metric_set

# Relative slack for the above-roof test: float rounding only, not measurement noise.
ABOVE_ROOF_SLACK = 1e-9
CO_BOUND = 0.05  # a compute time at roof this close to the largest term names the compute roof
BOUND_PREFIX = "roof_time:"  # per-launch time at roof, by binding roof, summed per group

ROOF_COLUMNS: tuple[str, ...] = ("bound", "roof_pct", "time_at_roof_s", "recoverable_s")
TOP_COLUMNS: tuple[str, ...] = (
    "kernel",
    "phase",
    "count",
    "time_s",
    "phase_share_pct",
    "flop_rate",
    "ai_l1",
    "ai_l2",
    "ai_hbm",
    *ROOF_COLUMNS,
    *UTILIZATION_COLUMNS,
    *LINK_COLUMNS,
)
TOP_SORTS: tuple[str, ...] = ("time_s", "recoverable_s", "time_at_roof_s", "flops", "flop_rate")
# top --by layer: the layer first, then its kernel with the most time.
LAYER_TOP_COLUMNS: tuple[str, ...] = ("layer", "phase", "count", "kernel", *TOP_COLUMNS[3:])


# Why a kernel group ran faster than its roofs allow (the kinds of AboveRoof, one warning line each).
RESIDENT = "resident"  # analytic bytes judged at HBM: data an earlier kernel left in L2 served it
BEYOND_L2 = "beyond-l2"  # too fast even with L2 full of their data: the bytes (or the HBM roof) too high
CACHE_CEILING = "cache-ceiling"  # analytic bytes judged at a measured cache ceiling (a CPU's) the ops outrun
LESS_ARITHMETIC = "less-arithmetic"  # analytic FLOPs: the kernel did less arithmetic than the op's formula
CPU_COMPUTE_CEILING = "cpu-compute-ceiling"  # a CPU op above the compute roof measured on that CPU
FLUSHED = "flushed"  # a trace with ncu's counters: HBM bytes counted cold (cache flushes), times from a warm step
MEASURED = "measured"  # measured counters above a roof: the ceilings or the metrics are wrong


@dataclass(frozen=True)
class AboveRoof:
    """A kernel group (a kernel name in a phase) some of whose launches took less time than their roofs allow;
    ``time_s`` and ``time_at_roof_s`` are those launches' own."""

    kernel: str
    phase: str
    bound: str
    launches_above: int
    count: int
    time_s: float
    time_at_roof_s: float
    kind: str


@dataclass
class RoofNotes:
    """What the roof analysis could not do, in sentences for the user; kernels above a roof as records, said
    once per kind and listed one by one on request by :mod:`hroofline.render.roof_notes`."""

    above: list[AboveRoof] = field(default_factory=list)
    missing_roofs: list[str] = field(default_factory=list)
    roofs_label: str = ""
    l2_bytes: float | None = None  # the GPU's L2, which can hold what an earlier kernel wrote


@dataclass(frozen=True)
class RoofTimes:
    """Per launch: the compute time at roof (longest pipe) and each level's, their maximum and its roof."""

    compute: pd.Series
    levels: dict[str, pd.Series]
    time_at_roof: pd.Series
    bound: pd.Series  # the largest term's roof
    compute_label: pd.Series  # the compute roof that binds the longest pipe


@dataclass(frozen=True)
class RoofGaps:
    """Per launch, what its roofs leave out (work of a kind without its roof, traffic at a level without one, a
    launch without a time): the notes of any selection of those launches, counted over that selection."""

    masks: tuple[tuple[str, pd.Series], ...]  # a sentence with ``{count}`` in it, and the launches it counts

    def tell(self, notes: RoofNotes | None, index: pd.Index | None = None) -> None:
        """Add to ``notes`` (none: nothing to tell) the sentences that some launch in ``index`` (all of them when
        None) has, counted over those launches."""
        if notes is None:
            return
        for sentence, mask in self.masks:
            count = int((mask if index is None else mask.loc[index]).sum())
            if count:
                notes.missing_roofs.append(sentence.replace("{count}", str(count)))


def roof_times(
    launches: pd.DataFrame, peaks: pd.DataFrame, pipes: tuple[tuple[str, ...], ...], notes: RoofNotes | None = None
) -> RoofTimes:
    """The time each launch would take at its roofs (``peaks``: one column per roof key, per launch)."""
    times, gaps = _roof_times_and_gaps(launches, peaks, pipes)
    gaps.tell(notes)
    return times


def _roof_times_and_gaps(
    launches: pd.DataFrame, peaks: pd.DataFrame, pipes: tuple[tuple[str, ...], ...]
) -> tuple[RoofTimes, RoofGaps]:
    gaps: list[tuple[str, pd.Series]] = []
    parts: dict[str, pd.Series] = {}
    for column, key in COMPUTE_ROOF_OF.items():
        flops = launches[column].fillna(0.0)
        peak = peaks[key]
        label = ROOF_LABELS[key]
        gaps.append(
            (
                f"{{count}} launch(es) do {label} work but have no {label} roof: their compute time at roof leaves "
                "that part out",
                (flops > 0) & peak.isna(),
            )
        )
        parts[key] = (flops / peak).where(flops > 0, 0.0).fillna(0.0)
    pipe_times = pd.DataFrame(
        {
            str(i): sum((parts[k] for k in group if k in parts), start=pd.Series(0.0, launches.index))
            for i, group in enumerate(pipes)
        }
    )
    compute = pipe_times.max(axis=1) if len(pipe_times.columns) else pd.Series(0.0, launches.index)
    levels: dict[str, pd.Series] = {}
    for level in LEVELS:
        nbytes = launches[f"bytes_{level}"]
        levels[level] = nbytes / peaks[level]
        label = LEVEL_LABELS[level]
        gaps.append(
            (
                f"no {label} bandwidth roof for {{count}} launch(es) with {label} traffic: it does not enter their "
                "time at roof",
                (nbytes > 0) & peaks[level].isna(),
            )
        )
    frame = pd.DataFrame({"compute": compute.where(compute > 0), **levels})
    # A launch whose work was not counted at all (a log of durations and throughputs) has no bound: its
    # memory time alone would call it memory-bound without evidence.
    uncounted = launches[list(COMPUTE_ROOF_OF)].isna().all(axis=1)
    time_at_roof = frame.max(axis=1, skipna=True).where(~uncounted)
    bound_term = frame.fillna(-1.0).idxmax(axis=1).where(time_at_roof.notna())
    binding_key = pd.Series(_binding_compute_key(parts, pipes, pipe_times, launches.index), index=launches.index)
    compute_label = binding_key.map(ROOF_LABELS).where(frame["compute"].notna())
    bound = compute_label.where(bound_term == "compute", bound_term.map(LEVEL_LABELS))
    times = RoofTimes(frame["compute"], levels, time_at_roof, bound.where(time_at_roof.notna()), compute_label)
    return times, RoofGaps(tuple(gaps))


def launch_roof_terms(
    launches: pd.DataFrame, peaks: pd.DataFrame, pipes: tuple[tuple[str, ...], ...], notes: RoofNotes | None = None
) -> pd.DataFrame:
    """Per launch: time at roof, the roof that binds it, and whether it beats a roof (per level too)."""
    terms, gaps = _launch_roof_terms_and_gaps(launches, peaks, pipes)
    gaps.tell(notes)
    return terms


def _launch_roof_terms_and_gaps(
    launches: pd.DataFrame, peaks: pd.DataFrame, pipes: tuple[tuple[str, ...], ...]
) -> tuple[pd.DataFrame, RoofGaps]:
    times, gaps = _roof_times_and_gaps(launches, peaks, pipes)
    seconds = launches["time_s"]
    untimed = seconds.isna() & times.time_at_roof.notna()
    sentence = "{count} launch(es) have no kernel time: they are left out of time at roof, % of roof and FLOP/s"
    gaps = RoofGaps((*gaps.masks, (sentence, untimed)))
    # Time at roof is compared with time: a launch without a time has none to compare.
    time_at_roof = times.time_at_roof.where(seconds.notna())
    above = (seconds < time_at_roof * (1 - ABOVE_ROOF_SLACK)).fillna(False)
    # Co-bound launches name their compute roof; one faster than its roofs keeps the roof it beat, which says why
    co_bound = times.compute >= (1 - CO_BOUND) * times.time_at_roof
    bound = times.compute_label.where(co_bound & ~above, times.bound)
    out = pd.DataFrame({"time_at_roof_s": time_at_roof, "bound": bound}, index=launches.index)
    out["above_roof"] = above.astype(float)
    # launches whose work is ncu's counters (a trace joined with them): their HBM bytes were counted cold
    counted = launches["counters_from"].notna() if "counters_from" in launches else pd.Series(False, launches.index)
    out["above_counted"] = (above & counted).astype(float)
    # what the launches above a roof took, and what their roofs allow: summed per group for the warning
    out["above_time_s"] = seconds.where(out["above_roof"] > 0, 0.0)
    out["above_time_at_roof_s"] = time_at_roof.where(out["above_roof"] > 0, 0.0)
    hbm_bytes = launches["bytes_hbm"] if "bytes_hbm" in launches else pd.Series(0.0, launches.index)
    out["above_bytes_hbm"] = hbm_bytes.where(out["above_roof"] > 0, 0.0)
    for level in LEVELS:
        # The dot at this level: above when faster than both the compute roof and this level's roof.
        level_roof_time = pd.concat([times.compute, times.levels[level]], axis=1).max(axis=1, skipna=True)
        out[f"above_{level}"] = (seconds < level_roof_time * (1 - ABOVE_ROOF_SLACK)).fillna(False).astype(float)
    return out, gaps


def _binding_compute_key(
    parts: dict[str, pd.Series], pipes: tuple[tuple[str, ...], ...], pipe_times: pd.DataFrame, index: pd.Index
) -> list[str]:
    """Per launch, the precision that takes the most time in its longest pipe."""
    keys = np.full(len(index), "fp32", dtype=object)
    if not len(pipe_times.columns):
        return list(keys)
    frame = pd.DataFrame(parts, index=index)
    longest = pipe_times.to_numpy().argmax(axis=1)
    for number, group in enumerate(pipes):
        columns = [k for k in group if k in frame]
        chosen = longest == number
        if columns and chosen.any():
            keys[chosen] = frame.loc[chosen, columns].idxmax(axis=1).to_numpy()
    return list(keys)


def _group_terms(terms: pd.DataFrame) -> pd.DataFrame:
    """Per-launch terms as summable columns: time at roof per binding roof, above flags as counts."""
    summed = [
        "time_at_roof_s",
        "above_roof",
        "above_counted",
        "above_time_s",
        "above_time_at_roof_s",
        "above_bytes_hbm",
    ]
    out = terms[[*summed, *(f"above_{lv}" for lv in LEVELS)]].copy()
    for label in sorted(terms["bound"].dropna().unique()):
        out[BOUND_PREFIX + label] = terms["time_at_roof_s"].where(terms["bound"] == label, 0.0)
    return out


def _finish(table: pd.DataFrame) -> pd.DataFrame:
    """Binding roof, % of roof and recoverable time from the summed terms; flags back to booleans."""
    out = table.copy()
    bound_columns = [c for c in out.columns if c.startswith(BOUND_PREFIX)]
    if bound_columns:
        times = out[bound_columns].fillna(0.0)
        out["bound"] = times.idxmax(axis=1).str.removeprefix(BOUND_PREFIX).where(times.max(axis=1) > 0)
    else:
        out["bound"] = None
    seconds = out["time_s"]
    out["roof_pct"] = 100.0 * out["time_at_roof_s"] / seconds.where(seconds > 0)
    out["recoverable_s"] = seconds - out["time_at_roof_s"]
    out["above_launches"] = out["above_roof"].fillna(0).astype("int64")
    for column in ("above_roof", *(f"above_{lv}" for lv in LEVELS)):
        out[column] = out[column].fillna(0) > 0
    return out.drop(columns=bound_columns)


@dataclass(frozen=True)
class RunTerms:
    """Per launch of a whole run, against one set of its roofs, the terms a roof table sums: its time at roof and
    what its roofs leave out, utilisation against the run's own dense peaks (None without them) and the
    collectives' link terms. Each launch's terms are its own alone, so a table of some launches takes theirs. A
    caller that draws many tables of one run (the report: two per phase and one for the run) makes them once with
    :func:`run_terms`."""

    launches: pd.DataFrame  # the launch table they were computed from
    roofs: RunRoofs  # the roofs they were computed against
    roof_terms: pd.DataFrame
    gaps: RoofGaps
    utilization: pd.DataFrame | None
    links: pd.DataFrame


def run_terms(run: Run, roofs: RunRoofs) -> RunTerms:
    """The run's :class:`RunTerms` against ``roofs``."""
    launches = run.launches
    pipes = load_metric_set().pipes_of(run.meta.cc)
    terms, gaps = _launch_roof_terms_and_gaps(launches, roofs.per_launch.loc[launches.index], pipes)
    # utilisation against the run's own dense peaks, whatever roofs it is judged by; collectives: busbw on the link
    return RunTerms(launches, roofs, terms, gaps, kernel_utilization(run), link_terms(run, link_roofs(run)))


def roof_table(
    run: Run, roofs: RunRoofs, query: KernelQuery, notes: RoofNotes | None = None, known: RunTerms | None = None
) -> pd.DataFrame:
    """The kernel table with each row's share of its phase's time and its roofs. ``known``: the run's
    :class:`RunTerms`, made before; they are used only when made from this very launch table and these very roofs
    (the same objects), else the terms are made again, so that terms of another run, of a table or roofs since
    replaced, are never summed. A table changed in place (``run.launches.loc[...] = ...``) needs new ones."""
    launches = selected_launches(run, query)
    if known is not None and known.launches is run.launches and known.roofs is roofs:
        terms = known.roof_terms.loc[launches.index]
        known.gaps.tell(notes, launches.index)
        utilization, links = known.utilization, known.links
    else:
        pipes = load_metric_set().pipes_of(run.meta.cc)
        terms = launch_roof_terms(launches, roofs.per_launch.loc[launches.index], pipes, notes)
        utilization, links = kernel_utilization(run), link_terms(run, link_roofs(run))
    extra = _group_terms(terms)
    if utilization is not None:
        extra = extra.join(utilization.loc[launches.index])
    extra = extra.join(links.loc[launches.index])
    table = with_link_columns(_finish(kernel_table(run, query, extra)))
    table = (
        with_utilization(table)
        if utilization is not None
        else table.assign(**{c: float("nan") for c in UTILIZATION_COLUMNS})
    )
    phase_time = run.launches.groupby("phase", observed=True)["time_s"].sum()
    table["phase_share_pct"] = 100.0 * table["time_s"] / table["phase"].map(phase_time).astype("float64")
    if notes is not None:
        analytic = any(not source.counted_work for source in run.meta.sources)
        on_cpu = run.meta.gpu == CPU
        notes.roofs_label = roofs.label
        gpu = run_gpu(run.meta)
        notes.l2_bytes = gpu.l2_bytes if gpu is not None else None
        notes.above.extend(_above_roof_records(table, analytic, on_cpu, notes.l2_bytes))
    return table


def _above_roof_records(
    table: pd.DataFrame, analytic: bool, on_cpu: bool = False, l2_bytes: float | None = None
) -> list[AboveRoof]:
    records = []
    for row in table[table["above_roof"]].itertuples(index=False):
        kind = _above_kind(str(row.bound), analytic, row.above_counted > 0, on_cpu)  # only joins set counters_from
        if kind == RESIDENT and l2_bytes is not None and row.above_bytes_hbm > 0:
            # what an L2 full of their data leaves to come from HBM, at the HBM roof: still more than they took
            from_hbm = max(1.0 - l2_bytes * row.above_launches / row.above_bytes_hbm, 0.0)
            kind = BEYOND_L2 if row.above_time_s < row.above_time_at_roof_s * from_hbm else kind
        records.append(
            AboveRoof(
                str(row.kernel),
                str(row.phase),
                str(row.bound),
                int(row.above_launches),
                int(row.count),
                float(row.above_time_s),
                float(row.above_time_at_roof_s),
                kind,
            )
        )
    return records


def _above_kind(bound: str, analytic: bool, counted: bool, on_cpu: bool = False) -> str:
    """Why a kernel group beat its roof. A CPU's ATen ops do the arithmetic of their formula (no Winograd in
    PyTorch's CPU convolutions): one above the compute roof measured on that CPU says the roof is low."""
    if on_cpu and bound not in LEVEL_LABELS.values():
        return CPU_COMPUTE_CEILING
    if counted:  # ncu's counters on a trace's times: cold HBM bytes, the rest measured
        return FLUSHED if bound == LEVEL_LABELS["hbm"] else MEASURED
    if not analytic:
        return MEASURED
    if bound == LEVEL_LABELS["hbm"]:
        return RESIDENT
    return CACHE_CEILING if bound in LEVEL_LABELS.values() else LESS_ARITHMETIC


def top_kernels(
    run: Run, roofs: RunRoofs, query: KernelQuery, notes: RoofNotes | None = None, known: RunTerms | None = None
) -> pd.DataFrame:
    """Kernels grouped by name (or layers, ``query.group_by``) within each phase, ranked by ``query.sort``
    (largest first), the first ``query.top``, with their roofs (``known``: as :func:`roof_table`'s)."""
    if query.sort not in TOP_SORTS:
        raise HrooflineError(f"cannot rank by {query.sort!r}", "use one of " + ", ".join(TOP_SORTS))
    if query.group_by not in ("name", "layer"):
        raise HrooflineError(f"top ranks kernel names or layers, not {query.group_by!r}")
    if query.sort == "time_s" and not has_times(run, query.phase):
        raise HrooflineError(
            f"run {run.name!r} has no kernel times: its sources measured no time metric, so nothing can be "
            "ranked by time",
            f"rank by FLOPs: hroofline top {run.name} --sort flops",
        )
    table = roof_table(run, roofs, replace(query, top=None, sort="time_s"), notes, known)
    return ranked(table, query.sort, query.top)


def ranked(table: pd.DataFrame, sort: str, count: int | None) -> pd.DataFrame:
    """A roof table's rows ranked by ``sort``, largest first, in the columns of `top`."""
    table = table.sort_values(sort, ascending=False, kind="stable", na_position="last")
    if count is not None:
        table = table.head(count)
    columns = LAYER_TOP_COLUMNS if "layer" in table.columns and "source" not in table.columns else TOP_COLUMNS
    return table[list(columns)].reset_index(drop=True)


def has_times(run: Run, phase: str | None = None) -> bool:
    """Whether the launches (of the phase) can be ranked by time: some has one, or there are none."""
    times = phase_launches(run, phase)["time_s"]
    return times.empty or bool(times.notna().any())


@dataclass
class RooflinePoints:
    """What a roofline chart draws: one row per kernel group (or launch), and what it leaves out."""

    points: pd.DataFrame
    table: pd.DataFrame  # every row, drawn or not, with its roofs (what `top` ranks)
    phases: list[str]
    notes: RoofNotes
    not_drawn: int  # kernel groups with no FLOPs, no time or no bytes at the levels drawn
    not_drawn_time_s: float
    no_flops: int  # of those, the ones with no FLOPs at all
    group_by: str  # launch, name or layer: what one dot is
    peaks: dict[str, float] = field(default_factory=dict)  # the roofs drawn: one value per roof
    analytic_work: bool = False  # FLOPs and bytes from the ops' shapes (a trace), not counters
    predicted: bool = False  # a prediction: times are estimates, no kernel ran
    unknown_at: dict[str, int] = field(default_factory=dict)  # level -> drawn dots with no intensity there
    levels_drawn: tuple[str, ...] = ()  # the levels asked for where some dot has an intensity (all, if none has)

    @property
    def per_launch(self) -> bool:
        return self.group_by == "launch"


def roofline_points(
    run: Run, roofs: RunRoofs, query: KernelQuery, levels: tuple[str, ...] = LEVELS, known: RunTerms | None = None
) -> RooflinePoints:
    """The kernel groups, layers or launches (``query.group_by``) a chart can place: time, FLOPs and bytes at
    one of ``levels`` (``known``: as :func:`roof_table`'s)."""
    notes = RoofNotes()
    table = roof_table(run, roofs, replace(query, top=None, sort="time_s"), notes, known)
    drawable = (table["flop_rate"] > 0) & table[[f"ai_{level}" for level in levels]].gt(0).any(axis=1)
    hidden = table[~drawable]
    points = table[drawable].reset_index(drop=True)
    points.insert(0, "kid", np.arange(len(points)))
    phases = ordered_phases(set(points["phase"].astype(str)))
    launches = selected_launches(run, replace(query, group_by="launch"))
    return RooflinePoints(
        points=points,
        table=table,
        phases=phases,
        notes=notes,
        not_drawn=len(hidden),
        not_drawn_time_s=float(hidden["time_s"].sum()),
        no_flops=int((hidden["flops"].fillna(0) <= 0).sum()),
        group_by=query.group_by,
        peaks=roofs.representative(launches),
        analytic_work=any(source.analytic_work for source in run.meta.sources),
        predicted=run.meta.predicted,
        unknown_at=_unknown_at(points, levels),
        levels_drawn=levels_with_dots(points, levels),
    )


def _unknown_at(points: pd.DataFrame, levels: tuple[str, ...]) -> dict[str, int]:
    """Per level drawn where other dots have an intensity: how many dots have none (their bytes there were not
    counted, as a Hopper L1 count blind to TMA)."""
    counts = {}
    for level in levels:
        known = points[f"ai_{level}"].gt(0)
        if known.any() and not known.all():
            counts[level] = int((~known).sum())
    return counts


def levels_with_dots(points: pd.DataFrame, levels: tuple[str, ...]) -> tuple[str, ...]:
    """Of ``levels``, those where some kernel has an intensity to draw (all of them when none has)."""
    drawn = tuple(lv for lv in LEVELS if lv in levels and points[f"ai_{lv}"].gt(0).any())
    return drawn or tuple(lv for lv in LEVELS if lv in levels)
