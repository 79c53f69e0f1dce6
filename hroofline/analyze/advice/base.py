"""What every advice rule works with: the run's launches with their roofs, the rule's data from
``metrics/advice.toml``, and what a rule finds (:class:`Finding`: evidence as numbers, no text of its own)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pandas as pd

from hroofline.analyze.binding import launch_roof_terms
from hroofline.model.names import short_kernel_name
from hroofline.model.run import Run, ordered_phases
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.ceilings import CPU, run_gpu, run_roofs
from hroofline.roofs.metricset import load_metric_set, metrics_dir

UPPER_BOUND = "upper bound"
ESTIMATE = "estimate"
_NOT_KERNELS = ("memcpy", "memset", "communication")
_LISTED = 5  # kernels and layers named in the evidence


@dataclass(frozen=True)
class Rule:
    """A rule's data: its key, its title, what it applies to and everything else it reads (``settings``)."""

    key: str
    title: str
    applies_to: str  # "gpu" or "any"
    min_step_share: float
    settings: dict[str, Any]

    def text(self, name: str) -> str:
        return str(self.settings[name])


@cache
def load_rules() -> dict[str, Rule]:
    data = tomllib.loads((metrics_dir() / "advice.toml").read_text())
    return {
        key: Rule(key, str(table["title"]), str(table["applies_to"]), float(table["min_step_share"]), table)
        for key, table in data.items()
    }


@dataclass(frozen=True)
class Evidence:
    """The launches a finding is about: their time per phase, shares, roof % and the names that take the most."""

    launches: int
    time_s: float
    step_share: float  # of the step's kernel time
    phase_time_s: dict[str, float]
    phase_share: dict[str, float]  # of each phase's kernel time
    roof_pct: float | None  # time at roof / time, of those with a roof
    recoverable_s: float  # time above their roofs
    kernels: tuple[tuple[str, float], ...]  # (short kernel name, time) with the most time first
    layers: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Finding:
    rule: Rule
    evidence: Evidence
    win_s: float  # what the change can win
    win_kind: str  # UPPER_BOUND or ESTIMATE
    change: str  # the change in PyTorch terms (the rule's text for this case)
    code: str
    upper_bound_s: float  # never won more than this
    detail: dict[str, Any] = field(default_factory=dict)  # what the rule found besides (a dimension to pad)


@dataclass(frozen=True)
class Confirmation:
    """What a later run shows of an earlier finding: its evidence kernels' time before and after."""

    finding: Finding
    before_s: float
    after_s: float
    confirmed: bool
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class AdviceContext:
    """A run's launches with each one's time at roof; the catalog GPU it ran on (None: a CPU, or a GPU the
    catalog lacks, judged against its file's own roofs)."""

    run: Run
    launches: pd.DataFrame
    gpu: GpuName | None
    cc: float | None
    step_time_s: float
    phase_time_s: dict[str, float]
    per_launch_peaks: pd.DataFrame

    @property
    def on_gpu(self) -> bool:
        """Every run but a CPU's (hroofline's own CPU profile, ``--gpu cpu``): a GPU the catalog lacks is a GPU."""
        return self.run.meta.gpu != CPU

    def evidence(self, mask: pd.Series) -> Evidence:
        chosen = self.launches[mask]
        time = float(chosen["time_s"].sum())
        per_phase = chosen.groupby("phase", observed=True)["time_s"].sum()
        per_phase = per_phase.reindex(ordered_phases({str(p) for p in per_phase.index}))
        with_roof = chosen["time_at_roof_s"].notna()
        timed = float(chosen.loc[with_roof, "time_s"].sum())
        roof_pct = 100.0 * float(chosen.loc[with_roof, "time_at_roof_s"].sum()) / timed if timed > 0 else None
        recoverable = (chosen["time_s"] - chosen["time_at_roof_s"]).clip(lower=0).fillna(0.0).sum()
        return Evidence(
            launches=int(chosen["launches"].fillna(1).sum()),
            time_s=time,
            step_share=time / self.step_time_s if self.step_time_s > 0 else 0.0,
            phase_time_s={str(p): float(t) for p, t in per_phase.items() if t > 0},
            phase_share={
                str(p): float(t) / self.phase_time_s[str(p)]
                for p, t in per_phase.items()
                if t > 0 and self.phase_time_s.get(str(p))
            },
            roof_pct=roof_pct,
            recoverable_s=float(recoverable),
            kernels=_most(chosen.assign(kernel=chosen["kernel"].astype(str).map(short_kernel_name)), "kernel"),
            layers=_most(chosen, "layer"),
        )


def _most(frame: pd.DataFrame, column: str) -> tuple[tuple[str, float], ...]:
    if column not in frame.columns or frame[column].isna().all():
        return ()
    times = frame.groupby(column, observed=True)["time_s"].sum().sort_values(ascending=False, kind="stable")
    return tuple((str(name), float(time)) for name, time in times.iloc[:_LISTED].items())


def advice_context(run: Run, ceilings: str | None = None) -> AdviceContext:
    """The kernel launches of ``run`` (every phase, ``other`` too: a report imported without ``--phase`` or a
    forward outside any range is still the step's work; no copies, sets or communication) with their time at
    roof against the run's own roofs (or ``ceilings``: a GPU name, a bundled set or a ceilings file, as ``top``'s)."""
    launches = run.launches
    in_step = ~launches["category"].isin(_NOT_KERNELS).fillna(False) & launches["time_s"].notna()
    roofs = run_roofs(run, ceilings)
    chosen = launches[in_step]
    terms = launch_roof_terms(chosen, roofs.per_launch.loc[chosen.index], load_metric_set().pipes_of(run.meta.cc))
    frame = chosen.assign(time_at_roof_s=terms["time_at_roof_s"])
    phase_time = frame.groupby("phase", observed=True)["time_s"].sum()
    gpu = run_gpu(run.meta)
    cc = run.meta.cc or (gpu.cc if gpu is not None else None)
    return AdviceContext(
        run=run,
        launches=frame,
        gpu=gpu,
        cc=float(cc) if cc and run.meta.gpu != CPU else None,
        step_time_s=float(frame["time_s"].sum()),
        phase_time_s={str(p): float(t) for p, t in phase_time.items()},
        per_launch_peaks=roofs.per_launch.loc[chosen.index],
    )


def enough_evidence(context: AdviceContext, mask: pd.Series, rule: Rule) -> Evidence | None:
    """The evidence of the launches ``mask`` selects, where they take the rule's share of the step at least."""
    if not mask.any():
        return None
    evidence = context.evidence(mask)
    return evidence if evidence.step_share >= rule.min_step_share else None


def time_shrunk(finding: Finding, after: AdviceContext, mask: pd.Series, fraction: float) -> Confirmation:
    """Confirmed where the launches ``mask`` selects in the later run take ``fraction`` of the evidence's time
    or less."""
    after_s = float(after.launches.loc[mask, "time_s"].sum())
    return Confirmation(finding, finding.evidence.time_s, after_s, after_s <= fraction * finding.evidence.time_s)


def matrix_products(launches: pd.DataFrame) -> pd.Series:
    """Launches of matrix products (the patterns of metrics/advice.toml's gemm_fallbacks), not convolutions: not by
    name (cuDNN's implicit GEMMs), nor by the op that launched them (a trace: cuDNN runs a 1x1 convolution on
    cuBLAS's GEMM kernels)."""
    settings = load_rules()["gemm_fallbacks"].settings
    kernels = launches["kernel"].astype(str)
    found = names_matching(kernels, settings["gemm"]) & ~names_matching(kernels, settings["not_gemm"])
    if "op" in launches.columns:
        ops = launches["op"].astype("string").str.contains("conv", regex=False).fillna(False).astype(bool)
        found &= ~ops
    return found


def names_matching(kernels: pd.Series, patterns: list[str]) -> pd.Series:
    """Kernel names containing any of ``patterns`` (as written: case matters)."""
    names = kernels.astype(str)
    found = pd.Series(False, index=kernels.index)
    for pattern in patterns:
        found |= names.str.contains(pattern, regex=False)
    return found
