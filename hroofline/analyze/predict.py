"""Prediction: what a training step should cost on a GPU, from a trace of its ops on the meta device.

Per op (traced by :mod:`hroofline.collect.meta_trace`): FLOPs per precision, the fewest bytes it must
move, and its predicted time = its time at roof with the GPU's datasheet peaks, the same formula every
measured launch is judged by (:func:`hroofline.analyze.binding.launch_roof_terms`):

    time = max(compute time (longest execution pipe), bytes / HBM bandwidth)

Which ops run on the tensor cores follows what PyTorch does for the precision mode:

- ``fp32`` is PyTorch's default: cuDNN convolutions in TF32 on compute capability 8.0 and later
  (``torch.backends.cudnn.allow_tf32`` is True), matrix products in FP32
  (``torch.backends.cuda.matmul.allow_tf32`` is False);
- ``fp32-strict`` turns TF32 off: everything on the FP32 units;
- ``tf32`` puts convolutions and matrix products on the TF32 tensor cores;
- ``amp``, ``o2`` (float16) and ``amp-bf16`` put them on the 16-bit tensor cores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from hroofline.analyze.binding import roof_times
from hroofline.errors import UsageError
from hroofline.model.quantities import CORE_FLOP_QUANTITIES, FLOP_QUANTITIES, OP_QUANTITIES, ROOF_KEYS
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.ceilings import datasheet_ceilings
from hroofline.roofs.formulas import total_flops
from hroofline.roofs.metricset import load_metric_set
from hroofline.work.op_names import CONVOLUTION_OPS, MATMUL_OPS

TIME_METHOD = (
    "predicted: time at roof (longest pipe of FLOPs per precision / peak, bytes / HBM bandwidth), datasheet peaks"
)
# The first compute capability whose tensor cores take TF32 (Ampere): where PyTorch's TF32 defaults act.
TF32_FROM_CC = (8, 0)


@dataclass(frozen=True)
class TensorRoute:
    """Which ops a precision mode runs on the tensor cores, from which FLOP column, onto which roof."""

    ops: frozenset[str]
    source_column: str
    roof: str


TENSOR_ROUTES: dict[str, TensorRoute] = {
    "fp32": TensorRoute(CONVOLUTION_OPS, "flops_fp32", "tensor_tf32"),
    "tf32": TensorRoute(MATMUL_OPS, "flops_fp32", "tensor_tf32"),
    "amp": TensorRoute(MATMUL_OPS, "flops_fp16", "tensor_fp16"),
    "o2": TensorRoute(MATMUL_OPS, "flops_fp16", "tensor_fp16"),
    "amp-bf16": TensorRoute(MATMUL_OPS, "flops_fp16", "tensor_bf16"),
}


@dataclass(frozen=True)
class Peaks:
    """The peaks a prediction uses, SI, and how the precision mode maps ops onto the tensor cores."""

    gpu: GpuName
    values: dict[str, float]
    route: TensorRoute | None
    notes: tuple[str, ...] = ()

    @property
    def tensor_key(self) -> str | None:
        return self.route.roof if self.route else None


def _cc(gpu: GpuName) -> tuple[int, int]:
    major, _, minor = gpu.cc.partition(".")
    return int(major), int(minor or 0)


def prediction_peaks(gpu: GpuName, precision: str) -> Peaks:
    peaks = dict(gpu.peaks)
    if "fp32" not in peaks or "hbm" not in peaks:
        why = f" ({gpu.roofs_from_reports_only})" if gpu.roofs_from_reports_only else ""
        raise UsageError(
            f"the catalog has no FP32 or HBM peak for {gpu.name}{why}",
            "profile it to get its roofs from its ncu reports, or predict on a GPU `hroofline gpus` gives peaks for",
        )
    notes = []
    for key in ("fp64", "fp16"):
        if key not in peaks:
            peaks[key] = peaks["fp32"]
            notes.append(
                f"the catalog has no {key.upper()} peak for {gpu.name}: {key.upper()} work is predicted at FP32's"
            )
    route = TENSOR_ROUTES.get(precision)
    if precision == "fp32" and _cc(gpu) < TF32_FROM_CC:
        route = None  # no TF32 before Ampere: PyTorch's default runs convolutions in FP32 there
    elif precision == "fp32":
        notes.append(
            f"fp32 follows PyTorch's defaults: on {gpu.name} (compute capability {gpu.cc}) cuDNN runs convolutions "
            "in TF32 on the tensor cores (torch.backends.cudnn.allow_tf32 = True) and matrix products in FP32; "
            "--precision fp32-strict turns TF32 off"
        )
    if route is not None and route.roof not in peaks:
        if precision == "amp-bf16":
            raise UsageError(f"{gpu.name} has no BF16 tensor cores", "predict with --precision amp (float16)")
        kind = route.roof.removeprefix("tensor_").upper()
        notes.append(f"{gpu.name} has no {kind} tensor cores: matrix products are predicted on the FP32 / FP16 units")
        route = None
    if precision in ("amp", "amp-bf16"):
        notes.append(
            "amp is traced with autocast's casts emulated: matrix products and convolutions in 16 bit (float32 "
            "weights cast each step, their gradients cast back), softmax, norms and losses in float32"
        )
    return Peaks(gpu=gpu, values=peaks, route=route, notes=tuple(notes))


def to_tensor_cores(launches: pd.DataFrame, peaks: Peaks) -> pd.DataFrame:
    """Moves the FLOPs of the ops the precision mode runs on the tensor cores to that tensor column."""
    out = launches.copy()
    for column in FLOP_QUANTITIES:
        if column not in CORE_FLOP_QUANTITIES:
            out[column] = 0.0
    route = peaks.route
    if route is None:
        return out
    eligible = out["kernel"].isin(route.ops) & (out[route.source_column] > 0)
    target = "flops_" + route.roof
    out.loc[eligible, target] = out.loc[eligible, route.source_column]
    out.loc[eligible, route.source_column] = 0.0
    return out


def predict_times(launches: pd.DataFrame, peaks: Peaks) -> pd.DataFrame:
    """``time_bound_s`` (and, until an estimate replaces it, ``time_s``) of every op: its time at roof with the
    datasheet peaks; ``bytes_hbm`` holds its fewest bytes."""
    out = launches.copy()
    for column in ("bytes_l1", "bytes_l2", *OP_QUANTITIES):
        if column not in out:
            out[column] = float("nan")
    # The prediction's peaks (FP64 and FP16 filled in where the catalog lacks them), as a set with its fallbacks.
    ceilings = replace(datasheet_ceilings(peaks.gpu), peaks=peaks.values)
    roofs = pd.DataFrame({key: float(ceilings.peak(key) or "nan") for key in ROOF_KEYS}, index=out.index)
    roofs[["l1", "l2"]] = float("nan")  # the fewest bytes are counted at HBM only
    times = roof_times(out, roofs, load_metric_set().pipes_of(peaks.gpu.cc))
    out["time_bound_s"] = times.time_at_roof.fillna(0.0)
    out["time_s"] = out["time_bound_s"]
    out["time_method"] = TIME_METHOD
    return out


def tensor_share(launches: pd.DataFrame, peaks: Peaks) -> float:
    """The share of the FLOPs the precision mode put on its tensor roof."""
    if peaks.route is None:
        return 0.0
    total = total_flops(launches).sum()
    return float(launches["flops_" + peaks.route.roof].sum() / total) if total else 0.0


@dataclass(frozen=True)
class FlopSplit:
    """Forward FLOPs in matrix products (what model summaries count) and in everything else."""

    matmul: float
    other: float
    other_by_op: dict[str, float]


def flop_split(launches: pd.DataFrame, phase: str = "forward") -> FlopSplit:
    rows = launches[launches["phase"] == phase]
    columns = [c for c in FLOP_QUANTITIES if c in rows]
    flops = rows[columns].fillna(0.0).sum(axis=1)
    is_matmul = rows["kernel"].isin(MATMUL_OPS)
    other = flops[~is_matmul].groupby(rows.loc[~is_matmul, "kernel"]).sum().sort_values(ascending=False, kind="stable")
    return FlopSplit(
        matmul=float(flops[is_matmul].sum()),
        other=float(flops[~is_matmul].sum()),
        other_by_op={str(k): float(v) for k, v in other.items() if v > 0},
    )
