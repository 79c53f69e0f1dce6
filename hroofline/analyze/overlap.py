"""Traces of several ranks: what each rank's wall time is made of, and which rank holds the others back.

Per rank, profiler step and phase (and per step over all its phases), from the launches' intervals
``[start_s, start_s + time_s)`` on every stream of the rank's GPU:

- ``wall_s``: the first activity's start to the last activity's end (the GPU's own bounds, not the profiler
  step's CPU-side range: the GPU runs behind the host);
- ``compute_s``: time when non-communication activity (kernels, copies, sets) runs and no communication kernel;
- ``communication_hidden_s``: time when a communication kernel runs beside non-communication activity;
- ``communication_exposed_s``: time when only communication runs;
- ``idle_s``: time when nothing runs (the GPU waits on its host, or on another rank outside a collective).

The four partition the wall time (a sweep over the intervals' ends), so they add up to ``wall_s``; the busy
time (the union of the intervals) is ``wall_s - idle_s``. Copies and sets count with compute: they are the
rank's own work, not a collective. A rank's totals add its steps' figures; a phase's add the steps' figures of
that phase.

The critical rank of a step (and of each phase of it) is the rank whose own work (``compute_s +
communication_hidden_s``: the time its non-communication work runs) is longest; ties go to the lowest rank.
The median rank is the rank in the middle by own work (of an even number, the lower middle one). The critical
rank's **lag** (``lag_s``) is its own work minus the median rank's: never negative, what the others wait for.
The **waiting it causes** (``waiting_caused_s``) is the median rank's exposed communication and idle time minus
the critical rank's: in a synchronous job the ranks' walls are equal and the critical rank's longer work shows as
the others' time waiting inside the collective (exposed communication), so this is close to the lag.
``wall_difference_s``, the critical rank's wall time minus the median rank's, is ``lag_s - waiting_caused_s``
exactly (wall = own work + exposed communication + idle): near 0 in a synchronous job, the lag where the ranks
do not wait on each other.

Intervals come only from launches with a start (``start_s``: traces imported with schema 9 on); a run without
any has no wall time, said so, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hroofline.model.run import Run, ordered_phases

ALL_PHASES = "all"  # a step over all its phases
NO_START = (
    "wall time unknown: no launch has a start time (runs imported before schema 9, ncu runs, predictions); "
    "import the PyTorch profiler traces again"
)
NO_RANKS = "wall time unknown: no launch has a rank"
COMMUNICATION = "communication"


@dataclass(frozen=True)
class WallTime:
    """One rank in one step (None: launches outside any profiler step) and phase (or :data:`ALL_PHASES`)."""

    rank: int
    step: int | None
    phase: str
    wall_s: float
    compute_s: float
    communication_hidden_s: float
    communication_exposed_s: float
    idle_s: float

    @property
    def own_work_s(self) -> float:
        """Time its non-communication work runs."""
        return self.compute_s + self.communication_hidden_s


@dataclass(frozen=True)
class CriticalRank:
    """The rank of a step and phase whose own work is longest: its own work over the median rank's (``lag_s``), the
    waiting that causes the median rank (exposed communication and idle over the critical rank's) and the walls'
    difference (``lag_s - waiting_caused_s``)."""

    step: int | None
    phase: str
    ranks: int
    critical_rank: int
    median_rank: int
    own_work_s: float
    median_own_work_s: float
    lag_s: float
    waiting_caused_s: float
    wall_difference_s: float


@dataclass(frozen=True)
class RunOverlap:
    """A run's wall times: per rank, step and phase (``rows``), per rank over its steps (``ranks``, phase
    :data:`ALL_PHASES`, step None), per rank and phase over its steps (``rank_phases``), and the critical rank of
    each step and phase with two ranks or more. ``unknown`` says why there are none."""

    rows: list[WallTime] = field(default_factory=list)
    ranks: list[WallTime] = field(default_factory=list)
    rank_phases: list[WallTime] = field(default_factory=list)
    critical: list[CriticalRank] = field(default_factory=list)
    unknown: str | None = None


def interval_split(starts: np.ndarray, ends: np.ndarray, communication: np.ndarray) -> tuple[float, ...]:
    """(wall, compute, communication hidden, communication exposed, idle), seconds, of intervals ``[start, end)``
    some of which are communication: a sweep over their ends, each stretch between two ends classed by what runs."""
    times = np.concatenate([starts, ends])
    other = np.where(communication, 0, 1)
    comm = 1 - other
    order = np.argsort(times, kind="stable")
    times = times[order]
    running_other = np.cumsum(np.concatenate([other, -other])[order])
    running_comm = np.cumsum(np.concatenate([comm, -comm])[order])
    lengths = np.diff(times)  # the stretch after each end, until the next; what runs there is the count after it
    busy_other, busy_comm = running_other[:-1] > 0, running_comm[:-1] > 0
    wall = float(times[-1] - times[0])
    return (
        wall,
        float(lengths[busy_other & ~busy_comm].sum()),
        float(lengths[busy_other & busy_comm].sum()),
        float(lengths[~busy_other & busy_comm].sum()),
        float(lengths[~busy_other & ~busy_comm].sum()),
    )


def _wall_time(rank: int, step: int | None, phase: str, group: pd.DataFrame) -> WallTime:
    starts = group["start_s"].to_numpy(dtype=np.float64)
    figures = interval_split(starts, starts + group["time_s"].to_numpy(dtype=np.float64), group["is_comm"].to_numpy())
    return WallTime(rank, step, phase, *figures)


def run_overlap(run: Run) -> RunOverlap:
    """Wall time per rank, step and phase, their totals and the critical ranks (the module's rules)."""
    launches = run.launches
    if launches["rank"].isna().all():
        return RunOverlap(unknown=NO_RANKS)
    timed = launches[launches["start_s"].notna() & launches["time_s"].notna() & launches["rank"].notna()]
    if timed.empty:
        return RunOverlap(unknown=NO_START)
    timed = pd.DataFrame(
        {
            "source": timed["source"].to_numpy(),  # each source's starts are on its own clock
            "rank": timed["rank"].astype("int64").to_numpy(),
            "step": timed["step"].astype("float64").fillna(-1.0).astype("int64").to_numpy(),
            "phase": timed["phase"].astype("string").fillna("other").to_numpy(),
            "start_s": timed["start_s"].to_numpy(dtype=np.float64),
            "time_s": timed["time_s"].to_numpy(dtype=np.float64),
            "is_comm": (timed["category"] == COMMUNICATION).fillna(False).to_numpy(dtype=bool),
        }
    )
    rows: list[WallTime] = []
    for (_source, rank, step), in_step in timed.groupby(["source", "rank", "step"], sort=True):
        step_number = None if step < 0 else int(step)
        rows.append(_wall_time(int(rank), step_number, ALL_PHASES, in_step))
        for phase, group in in_step.groupby("phase", sort=False):
            rows.append(_wall_time(int(rank), step_number, str(phase), group))
    order = {p: i for i, p in enumerate([ALL_PHASES, *ordered_phases({r.phase for r in rows} - {ALL_PHASES})])}
    rows.sort(key=lambda r: (r.rank, -1 if r.step is None else r.step, order[r.phase]))
    return RunOverlap(
        rows=rows,
        ranks=_totals([r for r in rows if r.phase == ALL_PHASES], by_phase=False),
        rank_phases=_totals([r for r in rows if r.phase != ALL_PHASES], by_phase=True),
        critical=_critical_ranks(rows),
    )


def _totals(rows: list[WallTime], by_phase: bool) -> list[WallTime]:
    """Rows added up over steps: per rank, or per rank and phase."""
    sums: dict[tuple[int, str], np.ndarray] = {}
    for row in rows:
        key = (row.rank, row.phase if by_phase else ALL_PHASES)
        figures = np.array(_figures(row))
        sums[key] = sums[key] + figures if key in sums else figures
    return [WallTime(rank, None, phase, *map(float, figures)) for (rank, phase), figures in sums.items()]


def _figures(row: WallTime) -> tuple[float, ...]:
    return (row.wall_s, row.compute_s, row.communication_hidden_s, row.communication_exposed_s, row.idle_s)


def _critical_ranks(rows: list[WallTime]) -> list[CriticalRank]:
    by_group: dict[tuple[int | None, str], list[WallTime]] = {}
    for row in rows:
        by_group.setdefault((row.step, row.phase), []).append(row)
    found = []
    for (step, phase), group in by_group.items():
        if len({r.rank for r in group}) < 2:
            continue
        ranked = sorted(group, key=lambda r: (r.own_work_s, -r.rank))  # ties: the lowest rank is the critical one
        critical, median = ranked[-1], ranked[(len(ranked) - 1) // 2]
        found.append(
            CriticalRank(
                step=step,
                phase=phase,
                ranks=len(ranked),
                critical_rank=critical.rank,
                median_rank=median.rank,
                own_work_s=critical.own_work_s,
                median_own_work_s=median.own_work_s,
                lag_s=critical.own_work_s - median.own_work_s,
                waiting_caused_s=_waiting_s(median) - _waiting_s(critical),
                wall_difference_s=critical.wall_s - median.wall_s,
            )
        )
    return found


def _waiting_s(row: WallTime) -> float:
    """Time a rank's GPU runs none of its own work: communication no compute hides, and idle."""
    return row.communication_exposed_s + row.idle_s
