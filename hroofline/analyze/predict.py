"""Prediction: what a training step should cost on a GPU, from a trace of its ops on the meta device.

Per op (traced by :mod:`hroofline.collect.meta_trace`): FLOPs per precision, the fewest bytes it must
move, and

    predicted time = max(sum over precisions p of FLOPs_p / peak_p, bytes / HBM bandwidth)

with the GPU's datasheet peaks. Matrix products and convolutions in 16-bit (amp, amp-bf16, o2) or under
TF32 run on the tensor cores when the GPU has them for that input type; everything else runs on the
FP32 / FP16 / FP64 units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hroofline.errors import UsageError
from hroofline.metricset import GpuName

TIME_METHOD = "predicted: max(FLOPs per precision / peak, bytes / HBM bandwidth) with datasheet peaks"
# ATen ops that are matrix products: what cuBLAS/cuDNN run on tensor cores when the inputs allow.
MATMUL_OPS: frozenset[str] = frozenset(
    {
        "aten::convolution",
        "aten::convolution_backward",
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    }
)
# Which tensor-core peak serves a precision mode's matrix products, and which FLOP column they leave.
TENSOR_PEAK: dict[str, tuple[str, str]] = {
    "tf32": ("tensor_tf32", "flops_fp32"),
    "amp": ("tensor_fp16", "flops_fp16"),
    "o2": ("tensor_fp16", "flops_fp16"),
    "amp-bf16": ("tensor_bf16", "flops_fp16"),
}


@dataclass(frozen=True)
class Peaks:
    """The peaks a prediction uses, SI: FLOP/s per FLOP column and HBM byte/s."""

    flops: dict[str, float]
    hbm: float
    tensor_key: str | None
    notes: tuple[str, ...] = ()


def prediction_peaks(gpu: GpuName, precision: str) -> Peaks:
    peaks = gpu.peaks
    if "fp32" not in peaks or "hbm" not in peaks:
        raise UsageError(f"the catalog has no FP32 or HBM peak for {gpu.name}", "see `hroofline gpus`")
    flops = {
        "flops_fp64": peaks.get("fp64", peaks["fp32"]),
        "flops_fp32": peaks["fp32"],
        "flops_fp16": peaks.get("fp16", peaks["fp32"]),
    }
    notes = []
    for key in ("fp64", "fp16"):
        if key not in peaks:
            notes.append(
                f"the catalog has no {key.upper()} peak for {gpu.name}: {key.upper()} work is predicted at FP32's"
            )
    tensor_key = None
    if precision in TENSOR_PEAK:
        wanted, _ = TENSOR_PEAK[precision]
        tensor_key = wanted if wanted in peaks else None
        if precision == "amp-bf16" and tensor_key is None:
            raise UsageError(f"{gpu.name} has no BF16 tensor cores", "predict with --precision amp (float16)")
        if tensor_key is None:
            notes.append(
                f"{gpu.name} has no {wanted.removeprefix('tensor_').upper()} tensor cores: matrix products "
                "are predicted on the FP32 / FP16 units"
            )
    if precision in ("amp", "amp-bf16"):
        notes.append(
            "amp is traced as a 16-bit model with float32 batch norm (what autocast gives a CNN, as Apex O2): "
            "layer norm and softmax count as 16-bit, and autocast's per-op weight casts are not counted"
        )
    if tensor_key:
        flops["flops_tensor"] = peaks[tensor_key]
    return Peaks(flops=flops, hbm=peaks["hbm"], tensor_key=tensor_key, notes=tuple(notes))


def to_tensor_cores(launches: pd.DataFrame, precision: str, peaks: Peaks) -> pd.DataFrame:
    """Moves the FLOPs of matrix products to ``flops_tensor`` where the precision and GPU allow."""
    out = launches.copy()
    out["flops_tensor"] = 0.0
    if peaks.tensor_key is None:
        return out
    _, column = TENSOR_PEAK[precision]
    eligible = out["kernel"].isin(MATMUL_OPS) & (out[column] > 0)
    out.loc[eligible, "flops_tensor"] = out.loc[eligible, column]
    out.loc[eligible, column] = 0.0
    return out


def predict_times(launches: pd.DataFrame, peaks: Peaks) -> pd.DataFrame:
    """``time_s`` of every op by the roofline; ``bytes_hbm`` holds its fewest bytes."""
    out = launches.copy()
    compute = sum(
        (out[column].fillna(0.0) / peak for column, peak in peaks.flops.items()), start=pd.Series(0.0, out.index)
    )
    memory = out["bytes_hbm"].fillna(0.0) / peaks.hbm
    out["time_s"] = np.maximum(compute, memory)
    out["time_method"] = TIME_METHOD
    return out


@dataclass(frozen=True)
class FlopSplit:
    """Forward FLOPs in matrix products (what model summaries count) and in everything else."""

    matmul: float
    other: float
    other_by_op: dict[str, float]


def flop_split(launches: pd.DataFrame, phase: str = "forward") -> FlopSplit:
    rows = launches[launches["phase"] == phase]
    flops = rows[["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]].fillna(0.0).sum(axis=1)
    is_matmul = rows["kernel"].isin(MATMUL_OPS)
    other = flops[~is_matmul].groupby(rows.loc[~is_matmul, "kernel"]).sum().sort_values(ascending=False)
    return FlopSplit(
        matmul=float(flops[is_matmul].sum()),
        other=float(flops[~is_matmul].sum()),
        other_by_op={str(k): float(v) for k, v in other.items() if v > 0},
    )
