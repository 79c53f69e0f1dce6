"""The metric set, read from ``metrics/hierarchical.toml``: formulas, roofs, clocks, pipes, what to collect.

Nothing here computes: this module turns the TOML file into typed objects that
:mod:`hroofline.roofs.formulas` and :mod:`hroofline.roofs.report` evaluate. The quantities and roof keys
themselves are the model's vocabulary (:mod:`hroofline.model.quantities`); the GPU catalog is
:mod:`hroofline.roofs.catalog`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from hroofline.errors import UsageError
from hroofline.model.quantities import QUANTITIES, TENSOR_ROOFS

# Device attributes (device__attribute_*) the roofs are derived from when a report lacks peak metrics.
DEVICE_ATTRIBUTES: tuple[str, ...] = (
    "device__attribute_multiprocessor_count",
    "device__attribute_num_tex_per_multiprocessor",
    "device__attribute_l2s_count",
    "device__attribute_memory_clock_rate",
    "device__attribute_global_memory_bus_width",
    "device__attribute_clock_rate",
    "device__attribute_l2_cache_size",
)


def metrics_dir() -> Path:
    """The ``metrics/`` folder: in the source tree, or packaged inside a wheel."""
    package = Path(__file__).resolve().parents[1]  # hroofline/
    for candidate in (package.parent / "metrics", package / "_metrics"):
        if (candidate / "hierarchical.toml").is_file():
            return candidate
    raise FileNotFoundError("hroofline's metrics/ data folder is missing from the installation")


def bundled_ceiling_files() -> dict[str, Path]:
    """The measured ceiling sets that ship in metrics/ceilings, by name."""
    folder = metrics_dir() / "ceilings"
    return {path.stem: path for path in sorted(folder.glob("*.toml"))}


@dataclass(frozen=True)
class Formula:
    """One way to compute a quantity: a weighted sum of metrics, or of all metrics matching a pattern."""

    label: str
    terms: dict[str, float] = field(default_factory=dict)
    pattern: str | None = None
    arch: tuple[str, ...] | None = None
    roof: str | None = None  # for bytes: the roof definition of the same traffic
    # architectures where this counter cannot see all of the level's traffic (Hopper's TMA and wgmma
    # bypass the L1TEX t-stage and the LSU writeback filters): see [l1_blind] in hierarchical.toml
    blind_on: tuple[str, ...] = ()

    def applies_to(self, arch: str | None) -> bool:
        # An architecture-specific formula needs a known architecture: a wrong guess gives wrong FLOPs.
        return self.arch is None or (arch is not None and arch in self.arch)

    def describe(self) -> str:
        if self.pattern:
            return f"{self.label}: sum of metrics matching {self.pattern}"
        parts = [name if coef == 1 else f"{coef:g} * {name}" for name, coef in self.terms.items()]
        return f"{self.label}: " + " + ".join(parts)


@dataclass(frozen=True)
class RoofAlternative:
    """One way to get a roof from a report, per cycle (see [roofs] in metrics/hierarchical.toml)."""

    per_cycle: dict[str, float] = field(default_factory=dict)
    per_unit: float | None = None
    units: str | None = None
    rate: bool = False  # the dense rate per SM per cycle of metrics/rates.toml x SMs
    memory_bus: bool = False

    def describe(self, clock: str) -> str:
        if self.memory_bus:
            return "device__attribute_memory_clock_rate x 2 x device__attribute_global_memory_bus_width / 8"
        if self.rate:
            return f"dense rate per SM per cycle (metrics/rates.toml) x SMs x {clock}"
        if self.per_cycle:
            parts = [name if coef == 1 else f"{coef:g} x {name}" for name, coef in self.per_cycle.items()]
            units = f" x {self.units} units" if self.units else ""
            return " + ".join(parts) + units + f" x {clock}"
        return f"{self.per_unit:g} per {self.units} unit per cycle x {self.units} units x {clock}"


@dataclass(frozen=True)
class RoofDefinition:
    key: str  # the roof it gives: a level (l1, l2, hbm) or a compute roof
    clock: str
    alternatives: tuple[RoofAlternative, ...]


@dataclass(frozen=True)
class TimeMetrics:
    duration: str
    cycles: str
    clock: str


@dataclass(frozen=True)
class TensorKernelHints:
    """Kernel-name fragments and pipe metrics that show tensor-core work (float and integer)."""

    float_names: tuple[str, ...]
    integer_names: tuple[str, ...]
    integer_metrics: tuple[str, ...]
    precision_names: dict[str, tuple[str, ...]] = field(default_factory=dict)  # FLOP column -> name fragments
    compute_names: tuple[str, ...] = ()  # GEMM, convolution and attention kernels: where an op's FLOPs go
    cuda_core_names: tuple[str, ...] = ()  # products that run on the CUDA cores (GEMV, SIMT, FFMA GEMMs)
    setup_names: tuple[str, ...] = ()  # kernels named like a GEMM that set it up or add its partial results


@dataclass(frozen=True)
class L1Blindness:
    """When an L1 count cannot be trusted on architectures with TMA (see [l1_blind] in hierarchical.toml)."""

    min_share_of_l2: float = 0.25
    evidence: tuple[str, ...] = ()  # metrics (any submetric) whose non-zero value shows wgmma / TMA use


@dataclass(frozen=True)
class MetricSet:
    name: str
    schema: int
    reference: str
    time: TimeMetrics
    formulas: dict[str, tuple[Formula, ...]]
    architectures: dict[str, str]
    collect: dict[str, tuple[str, ...]]
    roofs: dict[str, RoofDefinition] = field(default_factory=dict)
    clocks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    l1_blind: L1Blindness = field(default_factory=L1Blindness)
    pipes: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    tensor_hints: TensorKernelHints = field(default_factory=lambda: TensorKernelHints((), (), ()))
    display_names: dict[str, str] = field(default_factory=dict)

    def arch_of(self, cc: str | None) -> str | None:
        if not cc:
            return None
        return self.architectures.get(normalize_cc(cc))

    def metrics_to_collect(self, arch: str) -> list[str]:
        """The ncu --metrics list for one architecture: the formulas' metrics and the roofs' peaks."""
        if arch not in self.collect:
            raise UsageError(f"no metric list for architecture {arch!r}")
        paths = list(self.collect[arch])
        peaks = [f"{m}.peak_sustained" for m in paths if m.startswith("sm__ops_path_tensor_")]
        return list(self.collect["common"]) + paths + list(self.collect.get("roofs", ())) + peaks

    def pipes_of(self, cc: str | None) -> tuple[tuple[str, ...], ...]:
        """Compute roofs grouped by the execution pipe they share, for a compute capability."""
        groups = self.pipes.get(normalize_cc(cc) if cc else "", self.pipes.get("default", ()))
        expanded = []
        for group in groups:
            keys: list[str] = []
            for key in group:
                keys += list(TENSOR_ROOFS) if key == "tensor" else [key]
            expanded.append(tuple(keys))
        return tuple(expanded)

    def feeds_a_formula(self, metric: str) -> bool:
        """Whether a metric, in count or rate form and under either prefix, is used by some formula or
        roof (peaks, clocks, device attributes, tensor-pipe evidence).

        Asked once per metric per launch when reading reports, so answers are memoised."""
        known = self._feeds_answers.get(metric)
        if known is None:
            known = self._feeds_a_formula(metric)
            self._feeds_answers[metric] = known
        return known

    def _feeds_a_formula(self, metric: str) -> bool:
        base = strip_rate_suffix(metric)
        names = self._formula_metrics
        if base in names or other_prefix(base) in names or metric in names:
            return True
        if re.fullmatch(r"\w+__cycles_elapsed\.(avg|sum)(\.per_second)?", metric):
            return True  # unit clocks, and converting a unit's .per_cycle_elapsed rates into counts
        if metric.startswith(self._evidence_prefixes):
            return True
        return any(pattern.match(base) for pattern in self._formula_patterns)

    def feeds_a_quantity(self, metric: str) -> bool:
        """Whether a metric (count or rate form, either prefix) enters a quantity: time, FLOPs or bytes."""
        base = strip_rate_suffix(metric)
        names = self._quantity_metrics
        if base in names or other_prefix(base) in names or metric in names:
            return True
        return any(pattern.match(base) for pattern in self._formula_patterns)

    @cached_property
    def _quantity_metrics(self) -> frozenset[str]:
        names = {self.time.duration, self.time.cycles, self.time.clock}
        for formulas in self.formulas.values():
            for formula in formulas:
                names.update(formula.terms)
        return frozenset(names)

    @cached_property
    def _feeds_answers(self) -> dict[str, bool]:
        return {}

    @cached_property
    def _formula_metrics(self) -> frozenset[str]:
        names = set(self._quantity_metrics) | {"smsp__cycles_elapsed.avg"}
        for definition in self.roofs.values():
            for alternative in definition.alternatives:
                names.update(alternative.per_cycle)
        for clock_names in self.clocks.values():
            names.update(clock_names)
        names.update(DEVICE_ATTRIBUTES)
        names.update(self.display_names.values())
        return frozenset(names)

    @cached_property
    def _evidence_prefixes(self) -> tuple[str, ...]:
        hints = self.tensor_hints
        return tuple(f"{m}." for m in (*hints.integer_metrics, *self.l1_blind.evidence))

    @cached_property
    def _formula_patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(f.pattern) for formulas in self.formulas.values() for f in formulas if f.pattern)


RATE_SUFFIXES = (".per_cycle_elapsed", ".per_second")


def strip_rate_suffix(name: str) -> str:
    for suffix in RATE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def other_prefix(metric: str) -> str:
    """sm__X <-> smsp__X: instruction counters summed over all SMs or all sub-partitions are equal."""
    if metric.startswith("smsp__"):
        return "sm__" + metric[len("smsp__") :]
    if metric.startswith("sm__"):
        return "smsp__" + metric[len("sm__") :]
    return metric


def normalize_cc(cc: str) -> str:
    text = str(cc).strip()
    if re.fullmatch(r"\d+", text):
        return f"{text}.0"
    return text


def _roof_definitions(data: dict) -> dict[str, RoofDefinition]:
    roofs = {}
    for name, entry in data.items():
        alternatives = tuple(
            RoofAlternative(
                per_cycle={k: float(v) for k, v in alt.get("per_cycle", {}).items()},
                per_unit=float(alt["per_unit"]) if "per_unit" in alt else None,
                units=alt.get("units"),
                rate=bool(alt.get("rate", False)),
                memory_bus=bool(alt.get("memory_bus", False)),
            )
            for alt in entry["alternatives"]
        )
        roofs[name] = RoofDefinition(key=entry.get("level", name), clock=entry["clock"], alternatives=alternatives)
    return roofs


@cache
def load_metric_set(name: str = "hierarchical") -> MetricSet:
    path = metrics_dir() / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    formulas: dict[str, tuple[Formula, ...]] = {}
    for quantity in QUANTITIES:
        entries = data["quantity"][quantity]
        formulas[quantity] = tuple(
            Formula(
                label=entry["label"],
                terms={k: float(v) for k, v in entry.get("terms", {}).items()},
                pattern=entry.get("pattern"),
                arch=tuple(entry["arch"]) if "arch" in entry else None,
                roof=entry.get("roof"),
                blind_on=tuple(entry.get("blind_on", ())),
            )
            for entry in entries
        )
    hints = data.get("tensor_core_kernels", {})
    return MetricSet(
        name=data["name"],
        schema=int(data["schema"]),
        reference=data["reference"],
        time=TimeMetrics(**data["time"]),
        formulas=formulas,
        architectures=dict(data["architectures"]),
        collect={k: tuple(v) for k, v in data["collect"].items()},
        roofs=_roof_definitions(data.get("roofs", {})),
        clocks={k: tuple(v) for k, v in data.get("clocks", {}).items()},
        l1_blind=L1Blindness(
            min_share_of_l2=float(data["l1_blind"]["min_share_of_l2"]),
            evidence=tuple(data["l1_blind"]["evidence"]),
        ),
        pipes={k: tuple(tuple(g) for g in v) for k, v in data.get("pipes", {}).items()},
        tensor_hints=TensorKernelHints(
            float_names=tuple(hints.get("float", ())),
            integer_names=tuple(hints.get("integer", ())),
            integer_metrics=tuple(hints.get("integer_metrics", ())),
            precision_names={k: tuple(v) for k, v in hints.get("precision", {}).items()},
            compute_names=tuple(hints.get("compute", ())),
            cuda_core_names=tuple(hints.get("cuda_cores", ())),
            setup_names=tuple(hints.get("setup", ())),
        ),
        display_names=dict(data.get("display_names", {})),
    )
