"""The metric set and GPU names, read from the data files in ``metrics/``.

Nothing here computes: this module turns the TOML files into typed objects that
:mod:`hroofline.roofline` evaluates.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from hroofline.errors import UsageError

QUANTITIES: tuple[str, ...] = (
    "flops_fp64",
    "flops_fp32",
    "flops_fp16",
    "flops_tensor",
    "bytes_l1",
    "bytes_l2",
    "bytes_hbm",
)
FLOP_QUANTITIES: tuple[str, ...] = QUANTITIES[:4]
BYTE_QUANTITIES: tuple[str, ...] = QUANTITIES[4:]


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

    def applies_to(self, arch: str | None) -> bool:
        # An architecture-specific formula needs a known architecture: a wrong guess gives wrong FLOPs.
        return self.arch is None or (arch is not None and arch in self.arch)

    def describe(self) -> str:
        if self.pattern:
            return f"{self.label}: sum of metrics matching {self.pattern}"
        parts = [name if coef == 1 else f"{coef:g} * {name}" for name, coef in self.terms.items()]
        return f"{self.label}: " + " + ".join(parts)


@dataclass(frozen=True)
class TimeMetrics:
    duration: str
    cycles: str
    clock: str


@dataclass(frozen=True)
class MetricSet:
    name: str
    schema: int
    reference: str
    time: TimeMetrics
    formulas: dict[str, tuple[Formula, ...]]
    architectures: dict[str, str]
    collect: dict[str, tuple[str, ...]]

    def arch_of(self, cc: str | None) -> str | None:
        if not cc:
            return None
        return self.architectures.get(normalize_cc(cc))

    def metrics_to_collect(self, arch: str) -> list[str]:
        """The ncu --metrics list for one architecture."""
        if arch not in self.collect:
            raise UsageError(f"no metric list for architecture {arch!r}")
        return list(self.collect["common"]) + list(self.collect[arch])

    def feeds_a_formula(self, metric: str) -> bool:
        """Whether a metric, in count or rate form and under either prefix, is used by some formula.

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
        if re.fullmatch(r"\w+__cycles_elapsed\.avg(\.per_second)?", metric):
            return True  # converts a unit's .per_cycle_elapsed rates into counts
        return any(pattern.match(base) for pattern in self._formula_patterns)

    @cached_property
    def _feeds_answers(self) -> dict[str, bool]:
        return {}

    @cached_property
    def _formula_metrics(self) -> frozenset[str]:
        names = {self.time.duration, self.time.cycles, self.time.clock, "smsp__cycles_elapsed.avg"}
        for formulas in self.formulas.values():
            for formula in formulas:
                names.update(formula.terms)
        return frozenset(names)

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
            )
            for entry in entries
        )
    return MetricSet(
        name=data["name"],
        schema=int(data["schema"]),
        reference=data["reference"],
        time=TimeMetrics(**data["time"]),
        formulas=formulas,
        architectures=dict(data["architectures"]),
        collect={k: tuple(v) for k, v in data["collect"].items()},
    )


@dataclass(frozen=True)
class GpuName:
    """A catalog GPU: its names, compute capability and datasheet peaks (FLOP/s, byte/s)."""

    name: str
    cc: str
    aliases: tuple[str, ...]
    match: tuple[str, ...]
    peaks: dict[str, float] = field(default_factory=dict)
    peak_source: str | None = None


@cache
def load_gpu_names() -> dict[str, GpuName]:
    data = tomllib.loads((metrics_dir() / "gpus.toml").read_text())
    gpus = {}
    for key, value in data.items():
        peak = dict(value.get("peak", {}))
        source = peak.pop("source", None)
        gpus[key] = GpuName(
            name=key,
            cc=value["cc"],
            aliases=tuple(value.get("aliases", ())),
            match=tuple(value.get("match", ())),
            peaks={k: float(v) for k, v in peak.items()},
            peak_source=source,
        )
    return gpus


def resolve_gpu(name: str) -> GpuName:
    """A --gpu argument to a catalog entry; case and '-'/'_'/' ' do not matter."""

    def canon(text: str) -> str:
        return re.sub(r"[\s_]+", "-", text.strip().lower())

    wanted = canon(name)
    for gpu in load_gpu_names().values():
        if wanted == gpu.name or wanted in (canon(a) for a in gpu.aliases):
            return gpu
    known = ", ".join(sorted(load_gpu_names()))
    raise UsageError(f"unknown GPU {name!r}", f"known GPUs: {known}")


def gpu_from_display_name(display_name: str) -> GpuName | None:
    """ncu's device display name (e.g. 'Tesla V100-SXM2-16GB') to a catalog entry, if any."""
    text = display_name.lower()
    best: tuple[int, GpuName] | None = None
    for gpu in load_gpu_names().values():
        for fragment in gpu.match:
            found = re.search(rf"(^|[\s-]){re.escape(fragment)}($|[\s-])", text)
            if found and (best is None or len(fragment) > best[0]):
                best = (len(fragment), gpu)
    return best[1] if best else None
