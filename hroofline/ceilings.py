"""The roofs a run is drawn and judged against: bandwidth per memory level and compute per precision.

Two kinds of sets exist. A GPU's datasheet peaks come from the catalog (``metrics/gpus.toml``); measured
ceilings (ERT and the like) come from a small TOML file, either bundled in ``metrics/ceilings/`` or the
user's own. Every value is SI: byte/s for bandwidth, FLOP/s for compute.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from hroofline.errors import InputError, UsageError
from hroofline.metricset import GpuName, gpu_from_display_name, load_gpu_names, metrics_dir, resolve_gpu
from hroofline.model import RunMeta

CPU = "cpu"  # the --gpu name of CPU runs
LEVELS: tuple[str, ...] = ("l1", "l2", "hbm")
LEVEL_LABELS: dict[str, str] = {"l1": "L1", "l2": "L2", "hbm": "HBM"}
# The compute roofs hroofline draws, each fed by one FLOP quantity of a run.
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "fp16", "tensor")
PRECISION_LABELS: dict[str, str] = {"fp64": "FP64", "fp32": "FP32", "fp16": "FP16", "tensor": "tensor"}
# A run counts tensor FLOPs without their input precision, so one tensor roof stands for them all: the
# FP16 one (what AMP uses), else the first of these the set has.
TENSOR_KEYS: tuple[str, ...] = ("tensor_fp16", "tensor_bf16", "tensor_tf32", "tensor_fp8", "tensor")
FILE_KEYS: frozenset[str] = frozenset({*LEVELS, "fp64", "fp32", "fp16", *TENSOR_KEYS, "tensor_fp64"})


@dataclass(frozen=True)
class Ceilings:
    """One set of roofs; ``label`` and ``source`` say which set a chart shows."""

    label: str
    source: str
    bandwidth: dict[str, float]  # level -> byte/s
    compute: dict[str, float]  # precision -> FLOP/s
    tensor_key: str | None = None  # which tensor peak stands for "tensor"

    def peaks(self) -> dict[str, float]:
        """The set as flat SI peaks, the inverse of :func:`from_peaks` (how a run keeps its roofs)."""
        values = {**self.bandwidth, **{k: v for k, v in self.compute.items() if k != "tensor"}}
        if "tensor" in self.compute:
            values[self.tensor_key or "tensor"] = self.compute["tensor"]
        return values

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "source": self.source, "peaks": self.peaks()}

    def describe(self) -> str:
        return f"{self.label}; source: {self.source}"

    @property
    def tensor_label(self) -> str:
        if self.tensor_key and self.tensor_key.startswith("tensor_"):
            return f"tensor ({self.tensor_key.removeprefix('tensor_').upper()} inputs)"
        return "tensor"


def from_peaks(label: str, source: str, peaks: dict[str, float]) -> Ceilings:
    bandwidth = {level: peaks[level] for level in LEVELS if level in peaks}
    compute = {p: peaks[p] for p in ("fp64", "fp32", "fp16") if p in peaks}
    tensor_key = next((k for k in TENSOR_KEYS if k in peaks), None)
    if tensor_key:
        compute["tensor"] = peaks[tensor_key]
    return Ceilings(label=label, source=source, bandwidth=bandwidth, compute=compute, tensor_key=tensor_key)


def datasheet_ceilings(gpu: GpuName) -> Ceilings:
    if not gpu.peaks:
        raise UsageError(
            f"the catalog has no datasheet peaks for {gpu.name}",
            "pass --ceilings FILE with measured ceilings (format: metrics/ceilings/v100-yang-ert.toml)",
        )
    return from_peaks(f"{gpu.name} datasheet", gpu.peak_source or "metrics/gpus.toml", gpu.peaks)


def bundled_ceiling_files() -> dict[str, Path]:
    folder = metrics_dir() / "ceilings"
    return {path.stem: path for path in sorted(folder.glob("*.toml"))}


def load_ceilings_file(path: Path) -> Ceilings:
    """A measured-ceilings file: ``name``, ``source``, optional ``gpu``, and ``[ceilings]`` in SI units."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read ceilings file {path}: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"ceilings file {path} is not valid TOML: {error}") from error
    values = data.get("ceilings")
    if not isinstance(values, dict) or not values:
        raise InputError(
            f"ceilings file {path} has no [ceilings] table", "see metrics/ceilings/v100-yang-ert.toml for the format"
        )
    unknown = sorted(set(values) - FILE_KEYS)
    if unknown:
        raise InputError(
            f"ceilings file {path}: unknown key(s) {', '.join(unknown)}", "known: " + ", ".join(sorted(FILE_KEYS))
        )
    peaks: dict[str, float] = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise InputError(f"ceilings file {path}: {key} must be a positive number in SI units, not {value!r}")
        if value < 1e6:  # GB/s or GFLOP/s written without the 1e9
            raise InputError(
                f"ceilings file {path}: {key} = {value:g} is far too small for byte/s or FLOP/s",
                "values are SI: write 828.76 GB/s as 828.76e9",
            )
        peaks[key] = float(value)
    label = str(data.get("name") or path.stem)
    return from_peaks(label, str(data.get("source") or path.name), peaks)


def run_gpu(meta: RunMeta) -> GpuName | None:
    if meta.gpu == CPU:
        return None
    if meta.gpu:
        return load_gpu_names().get(meta.gpu) or resolve_gpu(meta.gpu)
    return gpu_from_display_name(meta.device_name) if meta.device_name else None


def ceilings_for_run(meta: RunMeta, choice: str | None = None) -> Ceilings:
    """The run's GPU datasheet by default; else ``choice``: a file, a bundled set, or a catalog GPU."""
    if choice is None and meta.ceilings:
        return from_peaks(str(meta.ceilings["label"]), str(meta.ceilings["source"]), dict(meta.ceilings["peaks"]))
    if choice is None:
        gpu = run_gpu(meta)
        if gpu is None:
            raise UsageError(
                f"run {meta.name!r} does not say which GPU it ran on",
                "pass --ceilings with a GPU name, a bundled set or a file (see `hroofline gpus`)",
            )
        return datasheet_ceilings(gpu)
    path = Path(choice)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise InputError(f"ceilings file {path} does not exist")
        return load_ceilings_file(path)
    bundled = bundled_ceiling_files()
    if choice in bundled:
        return load_ceilings_file(bundled[choice])
    try:
        return datasheet_ceilings(resolve_gpu(choice))
    except UsageError:
        raise UsageError(
            f"--ceilings {choice!r} is neither a file, a bundled set nor a catalog GPU",
            "bundled sets: " + ", ".join(bundled) + "; GPUs: see `hroofline gpus`",
        ) from None
