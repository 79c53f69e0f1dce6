"""The metric set and GPU names, read from the data files in ``metrics/``.

Nothing here computes: this module turns the TOML files into typed objects that
:mod:`hroofline.roofline` and :mod:`hroofline.report_roofs` evaluate.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path

from hroofline.errors import UsageError, did_you_mean

GIB = 2**30  # bytes in a GiB: device memory is sold in binary units

# FLOPs on the CUDA cores, per precision.
CORE_FLOP_QUANTITIES: tuple[str, ...] = ("flops_fp64", "flops_fp32", "flops_fp16")
# FLOPs on the tensor cores, per input precision (fp16_acc16: FP16 inputs with an FP16 accumulator).
TENSOR_FLOP_QUANTITIES: tuple[str, ...] = (
    "flops_tensor_tf32",
    "flops_tensor_fp16",
    "flops_tensor_fp16_acc16",
    "flops_tensor_bf16",
    "flops_tensor_fp8",
    "flops_tensor_fp4",
    "flops_tensor_fp64",
    # 2:4-sparse tensor work (ncu's _sparsity_on paths), judged against the sparse roof (twice the dense one)
    "flops_tensor_tf32_sparse",
    "flops_tensor_fp16_sparse",
    "flops_tensor_fp16_acc16_sparse",
    "flops_tensor_bf16_sparse",
    "flops_tensor_fp8_sparse",
)
FLOP_QUANTITIES: tuple[str, ...] = CORE_FLOP_QUANTITIES + TENSOR_FLOP_QUANTITIES
# Integer tensor operations: counted and shown, never mixed into FLOPs.
OP_QUANTITIES: tuple[str, ...] = (
    "ops_tensor_int8",
    "ops_tensor_int4",
    "ops_tensor_int1",
    "ops_tensor_int8_sparse",
    "ops_tensor_int4_sparse",
)
BYTE_QUANTITIES: tuple[str, ...] = ("bytes_l1", "bytes_l2", "bytes_hbm")
QUANTITIES: tuple[str, ...] = FLOP_QUANTITIES + OP_QUANTITIES + BYTE_QUANTITIES

LEVELS: tuple[str, ...] = ("l1", "l2", "hbm")
# The compute roofs: one per FLOP (or operation) quantity, named as in metrics/gpus.toml and ceilings files.
COMPUTE_ROOF_OF: dict[str, str] = {
    "flops_fp64": "fp64",
    "flops_fp32": "fp32",
    "flops_fp16": "fp16",
    **{q: q.removeprefix("flops_") for q in TENSOR_FLOP_QUANTITIES},
    **{q: q.replace("ops_", "") for q in OP_QUANTITIES},
}
COMPUTE_ROOFS: tuple[str, ...] = tuple(COMPUTE_ROOF_OF.values())
TENSOR_ROOFS: tuple[str, ...] = tuple(k for k in COMPUTE_ROOFS if k.startswith("tensor_"))
ROOF_KEYS: tuple[str, ...] = LEVELS + COMPUTE_ROOFS
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
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "metrics", here / "_metrics"):
        if (candidate / "hierarchical.toml").is_file():
            return candidate
    raise FileNotFoundError("hroofline's metrics/ data folder is missing from the installation")


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
        ),
        display_names=dict(data.get("display_names", {})),
    )


@dataclass(frozen=True)
class GpuName:
    """A catalog GPU: its names, compute capability and datasheet peaks (FLOP/s, byte/s).

    ``clocks`` gives the SM clock (Hz) each peak is quoted at: ``default`` for all, per key where the
    datasheet quotes a peak at another clock (H100 tensor peaks at 1830 MHz, FP32 at 1980 MHz)."""

    name: str
    cc: str
    aliases: tuple[str, ...]
    match: tuple[str, ...]
    peaks: dict[str, float] = field(default_factory=dict)
    peak_source: str | None = None
    clocks: dict[str, float] = field(default_factory=dict)
    clock_source: str | None = None
    link_bandwidth: float | None = None  # GPU-to-GPU link, per direction (byte/s): the communication roof
    link_source: str | None = None
    memory_bytes: float | None = None  # device memory as sold (metrics/gpus.toml memory_gib)
    memory_by_alias: dict[str, float] = field(default_factory=dict)  # larger variants named by an alias
    variant: str | None = None  # the alias that chose a variant's memory (v100-sxm2-32gb)
    sms: int | None = None  # streaming multiprocessors
    l2_bytes: float | None = None  # L2 cache
    consumer: bool = False  # a GeForce part (half-rate FP32 accumulation: metrics/rates.toml [consumer])
    roofs_from_reports_only: str | None = None  # why the catalog gives it no peaks (a laptop's clock varies)
    derived: frozenset[str] = frozenset()  # keys whose peak or quoted clock was computed from a per-SM rate

    def quoted_clock(self, key: str) -> float | None:
        """The SM clock a compute or cache peak is quoted at; None for HBM (its own clock) or unknown."""
        if key == "hbm":
            return None
        return self.clocks.get(key, self.clocks.get("default"))


@cache
def load_gpu_names() -> dict[str, GpuName]:
    data = tomllib.loads((metrics_dir() / "gpus.toml").read_text())
    gpus = {}
    for key, value in data.items():
        peak = dict(value.get("peak", {}))
        source = peak.pop("source", None)
        derived = set(peak.pop("derived", ())) | set(value.get("clock", {}).get("derived", ()))
        clocks = {k: float(v) for k, v in value.get("clock", {}).items() if k not in ("source", "derived")}
        clock_source = value.get("clock", {}).get("source")
        gpus[key] = GpuName(
            name=key,
            cc=value["cc"],
            aliases=tuple(value.get("aliases", ())),
            match=tuple(value.get("match", ())),
            peaks={k: float(v) for k, v in peak.items()},
            peak_source=source,
            clocks=clocks,
            clock_source=clock_source,
            link_bandwidth=float(value["link"]["bandwidth"]) if "link" in value else None,
            link_source=value.get("link", {}).get("source"),
            memory_bytes=float(value["memory_gib"]) * GIB if "memory_gib" in value else None,
            memory_by_alias={k: float(v) * GIB for k, v in value.get("memory_gib_by_alias", {}).items()},
            sms=int(value["sms"]) if "sms" in value else None,
            l2_bytes=float(value["l2_mib"]) * 2**20 if "l2_mib" in value else None,
            consumer=bool(value.get("consumer", False)),
            roofs_from_reports_only=value.get("roofs_from_reports_only"),
            derived=frozenset(derived),
        )
    return gpus


def _canon(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().lower())


def resolve_gpu(name: str) -> GpuName:
    """A --gpu argument to a catalog entry; case and '-'/'_'/' ' do not matter."""
    wanted = _canon(name)
    for gpu in load_gpu_names().values():
        if wanted == gpu.name or wanted in (_canon(a) for a in gpu.aliases):
            variant = gpu.memory_by_alias.get(wanted)
            return replace(gpu, memory_bytes=variant, variant=wanted) if variant else gpu
    names = [*load_gpu_names(), *(a for gpu in load_gpu_names().values() for a in gpu.aliases)]
    raise UsageError(f"unknown GPU {name!r}", did_you_mean(_canon(name), names, "GPUs", "hroofline gpus"))


# A word after the matched model name that makes it another product (RTX 3090 Ti, RTX 4090 D, H200 NVL)
# or a slice of one (MIG): the catalog's full-part peaks do not apply.
_VARIANT_WORDS = frozenset({"ti", "super", "d", "nvl", "mig", "max-q", "mobile", "laptop", "ada", "lhr", "xt"})


def gpu_from_display_name(display_name: str) -> GpuName | None:
    """ncu's device display name (e.g. 'Tesla V100-SXM2-16GB') to a catalog entry, if any.

    The longest matching fragment wins; a name with a variant word after it (Ti, D, NVL, ...) or a MIG
    slice matches nothing, rather than a full part's peaks."""
    text = display_name.lower()
    if re.search(r"(^|[\s-])mig([\s-]|$)", text):
        return None
    best: tuple[int, GpuName] | None = None
    for gpu in load_gpu_names().values():
        for fragment in gpu.match:
            found = re.search(rf"(^|[\s-]){re.escape(fragment)}($|[\s-])", text)
            if not found or (best is not None and len(fragment) <= best[0]):
                continue
            rest = text[found.end() :].replace("-", " ").split()
            if rest and rest[0] in _VARIANT_WORDS and rest[0] not in fragment.split():
                continue
            best = (len(fragment), gpu)
    return best[1] if best else None
