"""Many runs on one roofline: each run (or each run's phase) as one point, at its whole-step intensity.

Per point: FLOPs (all precisions), bytes at one memory level, time, and the time at roof of its launches
(each launch at its own roofs, as ``top`` judges it). Intensity = FLOPs / bytes; performance = FLOPs / time;
attainable = FLOPs / time at roof, the performance the step would reach with every kernel at its roof.
Runs are grouped by GPU: each GPU's roofs are drawn with its own runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.binding import launch_roof_terms
from hroofline.errors import UsageError
from hroofline.model.quantities import COMPUTE_ROOF_OF
from hroofline.model.run import PHASES, Run
from hroofline.roofs.ceilings import run_roofs
from hroofline.roofs.formulas import arithmetic_intensity, flop_rate, total_flops
from hroofline.roofs.metricset import load_metric_set

GROUPINGS: tuple[str, ...] = ("run", "phase")
POINT_COLUMNS: tuple[str, ...] = (
    "run",
    "series",
    "gpu",
    "phase",
    "flops",
    "bytes",
    "time_s",
    "time_at_roof_s",
    "intensity",
    "flop_rate",
    "attainable_flop_rate",
    "attainable_pct",
)  # then the FLOPs (and integer operations) per precision, which say which compute roofs to draw


@dataclass(frozen=True)
class StepPoints:
    """The points; per GPU one value per roof (the first run's on that GPU, time-weighted median over its
    launches) and what they are; the level the bytes are at."""

    points: pd.DataFrame
    peaks: dict[str, dict[str, float]]
    roof_labels: dict[str, str]
    level: str

    @property
    def drawable(self) -> pd.Series:
        """Which points have an intensity and a FLOP/s, so that a chart can place them."""
        return self.points["intensity"].gt(0) & self.points["flop_rate"].gt(0)

    @property
    def skipped_runs(self) -> list[str]:
        """The runs with no point a chart can place."""
        return self.points.loc[~self.drawable, "run"].drop_duplicates().tolist()

    def missing(self, run: str) -> list[str]:
        """What run ``run`` lacks to be placed: its FLOPs, its bytes at the level drawn, or its time."""
        rows = self.points[self.points["run"] == run]
        wanted = (("FLOPs", "flops"), (f"{self.level.upper()} bytes", "bytes"), ("time", "time_s"))
        return [what for what, column in wanted if not rows[column].gt(0).any()]

    def table(self) -> pd.DataFrame:
        """The points as a table: their columns but the time at roof (attainable FLOP/s says it), bytes named
        after their level."""
        columns = [c for c in POINT_COLUMNS if c != "time_at_roof_s"]
        return self.points[columns].rename(columns={"bytes": f"bytes_{self.level}"})


def gpu_label(run: Run) -> str:
    return run.meta.gpu_name or "unknown GPU"


def step_points(runs: Sequence[Run], by: str, level: str | None = None, ceilings: str | None = None) -> StepPoints:
    """One point per run (``by="run"``) or per run and phase (``by="phase"``), bytes at ``level`` (default: the
    slowest level most runs have bytes at, HBM first). A run without bytes there gets a point without an
    intensity (not drawn). ``ceilings`` replaces the roofs of runs of one GPU only."""
    if ceilings is not None and len({gpu_label(run) for run in runs}) > 1:
        raise UsageError(
            "--ceilings gives one GPU's roofs, and these runs ran on several GPUs",
            "leave --ceilings out (each GPU gets its own roofs), or chart one GPU's runs",
        )
    chosen = level or _common_level(runs)
    rows = []
    peaks: dict[str, dict[str, float]] = {}
    labels: dict[str, str] = {}
    run_labels: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for run in runs:
        run_roof = run_roofs(run, ceilings)
        run_labels.setdefault(gpu_label(run), set()).add(run_roof.label)
        if gpu_label(run) not in peaks:  # the roofs drawn for a GPU are its first run's
            peaks[gpu_label(run)] = run_roof.representative(run.launches)
            labels[gpu_label(run)] = run_roof.label
            first[gpu_label(run)] = run.name
        launches = run.launches
        terms = launch_roof_terms(launches, run_roof.per_launch, load_metric_set().pipes_of(run.meta.cc))
        frame = pd.DataFrame(
            {
                "phase": launches["phase"].astype("string"),
                "flops": total_flops(launches),
                "bytes": launches[f"bytes_{chosen}"],
                "time_s": launches["time_s"],
                "time_at_roof_s": terms["time_at_roof_s"],
                **{column: launches[column] for column in COMPUTE_ROOF_OF},
            }
        )
        groups = [("step", frame)] if by == "run" else list(frame.groupby("phase", sort=False))
        for phase, part in sorted(groups, key=lambda g: _phase_order(str(g[0]))):
            rows.append(
                {
                    "run": run.name,
                    "series": "",
                    "gpu": gpu_label(run),
                    "phase": str(phase),
                    "flops": float(part["flops"].sum()),
                    "bytes": float(part["bytes"].sum(min_count=1)),
                    "time_s": float(part["time_s"].sum(min_count=1)),
                    "time_at_roof_s": float(part["time_at_roof_s"].sum(min_count=1)),
                    **{column: float(part[column].sum()) for column in COMPUTE_ROOF_OF},
                }
            )
    for gpu, seen in run_labels.items():  # runs of one GPU judged against other roofs: say whose are drawn
        if len(seen) > 1:
            labels[gpu] += f" (drawn: {first[gpu]}'s roofs; each run is judged against its own)"
    points = pd.DataFrame(rows, columns=[*POINT_COLUMNS[:8], *COMPUTE_ROOF_OF])
    points["series"] = points["run"].map(series_names(runs))
    points["intensity"] = arithmetic_intensity(points["flops"], points["bytes"])
    points["flop_rate"] = flop_rate(points["flops"], points["time_s"])
    points["attainable_flop_rate"] = flop_rate(points["flops"], points["time_at_roof_s"])
    points["attainable_pct"] = 100.0 * points["flop_rate"] / points["attainable_flop_rate"]
    return StepPoints(points[[*POINT_COLUMNS, *COMPUTE_ROOF_OF]], peaks, labels, chosen)


def series_names(runs: Sequence[Run]) -> dict[str, str]:
    """What tells the runs apart once the GPU is on its own chart: the model, and the precision and batch size
    where they differ between runs; the run's name where the model is not known."""
    described = {run.name: _settings(run) for run in runs}
    varying = [
        key for key in ("precision", "batch_size") if len({settings.get(key) for settings in described.values()}) > 1
    ]
    names = {}
    for run in runs:
        settings = described[run.name]
        model = settings.get("model") or settings.get("arch")
        if not model:
            names[run.name] = run.name
            continue
        parts = [
            model,
            *(settings[k] if k != "batch_size" else f"batch {settings[k]}" for k in varying if k in settings),
        ]
        names[run.name] = " ".join(parts)
    if len({(gpu_label(run), names[run.name]) for run in runs}) < len(runs):  # two runs on one GPU look alike
        return {run.name: run.name for run in runs}
    return names


def _settings(run: Run) -> dict[str, str]:
    merged: dict[str, str] = {}
    for source in run.meta.sources:
        for key, value in source.settings.items():
            merged.setdefault(key, value)
    return merged


def _phase_order(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


def _common_level(runs: Sequence[Run]) -> str:
    """The level most runs have bytes at; of equals, HBM before L2 before L1."""
    counts = {level: sum(run.launches[f"bytes_{level}"].notna().any() for run in runs) for level in ("hbm", "l2", "l1")}
    best = max(counts, key=lambda level: counts[level])  # max keeps the first of equals
    if counts[best] == 0:
        raise UsageError("no run has bytes at any memory level, so none has an intensity to draw")
    return best


def overview_table(found: StepPoints, runs: Sequence[Run], totals: Mapping[str, Mapping[str, object]]) -> pd.DataFrame:
    """The points of whole runs with each run's roofline bound (predictions), peak memory and whether that
    fits its GPU's usable memory (:mod:`hroofline.analyze.memory_fit`), where known. ``totals``: each run's
    ``total`` row of :func:`hroofline.analyze.kernels.phase_summary`."""
    from hroofline.analyze.memory_fit import usable_bytes
    from hroofline.roofs.ceilings import run_gpu

    usable = {}
    for run in runs:
        gpu = run_gpu(run.meta)
        sold = _settings(run).get("gpu_memory_bytes")  # a prediction records the variant's memory it used
        capacity = float(sold) if sold else (gpu.memory_bytes if gpu is not None else None)
        usable[run.name] = usable_bytes(capacity) if capacity else None
    table = found.points.copy()
    table["time_bound_s"] = table["run"].map(lambda name: totals[name].get("time_bound_s"))
    table["memory_peak_bytes"] = table["run"].map(lambda name: totals[name].get("memory_peak_bytes"))
    table["fits"] = [
        None if peak is None or pd.isna(peak) or usable[name] is None else bool(peak <= usable[name])
        for name, peak in zip(table["run"], table["memory_peak_bytes"], strict=True)
    ]
    return table
