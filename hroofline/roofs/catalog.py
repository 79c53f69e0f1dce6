"""The GPU catalog (``metrics/gpus.toml``): the names ``--gpu`` takes, what each GPU is, its datasheet peaks."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache

from hroofline.errors import UsageError, did_you_mean
from hroofline.roofs.metricset import metrics_dir

GIB = 2**30  # bytes in a GiB: device memory is sold in binary units


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
    vendor: str = "nvidia"  # "amd": an Instinct GPU, its SMs compute units; ncu cannot profile it
    roofs_from_reports_only: str | None = None  # why the catalog gives it no peaks (a laptop's clock varies)
    derived: frozenset[str] = frozenset()  # keys whose peak or quoted clock was computed from a per-SM rate

    @property
    def compute_unit(self) -> str:
        """What the vendor calls the unit ``sms`` counts: NVIDIA's streaming multiprocessor, AMD's compute unit."""
        return "CU" if self.vendor == "amd" else "SM"

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
            vendor=str(value.get("vendor", "nvidia")),
            roofs_from_reports_only=value.get("roofs_from_reports_only"),
            derived=frozenset(derived),
        )
    return gpus


def refuse_for_ncu(gpu: GpuName, where: str) -> None:
    """ncu profiles NVIDIA GPUs only: an AMD GPU named for an ncu report, profile or check is refused in one line."""
    if gpu.vendor != "nvidia":
        raise UsageError(
            f"{where}: --gpu {gpu.name} is an {gpu.vendor.upper()} GPU, and ncu profiles NVIDIA GPUs only",
            "judge it from a PyTorch profiler trace, which ROCm builds of PyTorch write: "
            "hroofline profile --backend trace, or hroofline import TRACE.json",
        )


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


# What the driver reports against the memory size as sold: an H100 80GB's 79.2 GiB, a board's reserved memory.
MEMORY_TOLERANCE = 0.1


def gpu_from_properties(cc: str, sms: int, memory_bytes: float) -> GpuName | None:
    """The catalog GPU a device of this compute capability, SM count and memory is (an OEM part such as the
    'NVIDIA A100-PG509-200', 108 SMs, 39.4 GiB, compute capability 8.0, is an A100 40 GB); None unless exactly
    one entry fits. The memory a device reports is what the driver leaves usable: within 10% below the
    catalog's."""
    fits = [
        gpu
        for gpu in load_gpu_names().values()
        if gpu.cc == cc
        and gpu.sms == sms
        and gpu.memory_bytes is not None
        and (1 - MEMORY_TOLERANCE) * gpu.memory_bytes <= memory_bytes <= gpu.memory_bytes
    ]
    return fits[0] if len(fits) == 1 else None
