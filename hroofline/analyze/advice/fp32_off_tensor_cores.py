"""FP32 matrix products and convolutions on the FP32 units of a GPU with tensor cores: TF32 (Ampere on) or
mixed precision (Volta, Turing) runs them on the tensor cores. The win is bounded by the time their FLOPs take
at the tensor-core roof, and by the time their bytes take at their memory roofs (moving the arithmetic moves no
bytes). A later run shows it done where most of the FP32 FLOPs found have left the FP32 units."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import (
    UPPER_BOUND,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    matrix_products,
    names_matching,
)
from hroofline.analyze.binding import roof_times
from hroofline.analyze.families import kernel_family
from hroofline.roofs.metricset import load_metric_set

_TF32_FROM = 8.0  # Ampere
_TENSOR_CORES_FROM = 7.0  # Volta


def _in_families(context: AdviceContext, rule: Rule) -> pd.Series:
    """Matrix products; before Ampere convolutions too (from Ampere on PyTorch lets cuDNN use TF32 by default:
    a convolution it still runs on the FP32 units is cuDNN's choice, which no switch changes)."""
    families = context.launches["kernel"].astype(str).map(kernel_family)
    wanted = rule.settings["families"] if (context.cc or 0) < _TF32_FROM else rule.settings["tf32_families"]
    # cuBLAS's own names are no family 'gemm' (sm80_xmma_gemm_f32f32_..._ffma): its matrix products by pattern too
    return families.isin(wanted) | matrix_products(context.launches)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    if context.cc is None or context.cc < _TENSOR_CORES_FROM:
        return None
    launches = context.launches
    fp32 = launches["flops_fp32"].fillna(0.0)
    tensor = launches["flops_tensor"].fillna(0.0)
    sixteen_bit = names_matching(launches["kernel"], rule.settings["sixteen_bit"])
    mask = _in_families(context, rule) & (fp32 > 0) & (tensor <= 0) & ~sixteen_bit
    evidence = enough_evidence(context, mask, rule)
    if evidence is None:
        return None
    tf32 = context.cc >= _TF32_FROM
    peak = context.per_launch_peaks.loc[mask[mask].index, "tensor_tf32" if tf32 else "tensor_fp16"]
    chosen = launches[mask]
    at_tensor_roof = (chosen["flops_fp32"] / peak).where(peak > 0)
    peaks = context.per_launch_peaks.loc[chosen.index]
    levels = roof_times(chosen, peaks, load_metric_set().pipes_of(context.run.meta.cc)).levels
    floor = pd.concat([at_tensor_roof, *levels.values()], axis=1).max(axis=1, skipna=True).where(peak > 0)
    win = float((chosen["time_s"] - floor).clip(lower=0).fillna(0.0).sum())
    suffix = "tf32" if tf32 else "fp16"
    return Finding(
        rule,
        evidence,
        win,
        UPPER_BOUND,
        rule.text(f"change_{suffix}"),
        rule.text(f"code_{suffix}"),
        win,
        {
            "families": sorted(set(chosen["kernel"].astype(str).map(kernel_family))),
            "fp32_flops": float(fp32[mask].sum()),  # what confirm() looks for in a later run
        },
    )


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    """Confirmed where most of the FP32 FLOPs found have left the FP32 units: the later run's matrix products
    that still do FP32 work and none on the tensor cores do under half of them (the other matrix products of a
    run, on the tensor cores from the start, say nothing of it)."""
    launches = after.launches[_in_families(after, finding.rule)]
    still = launches[(launches["flops_fp32"].fillna(0.0) > 0) & (launches["flops_tensor"].fillna(0.0) <= 0)]
    found = float(finding.detail.get("fp32_flops", 0.0))
    left = float(still["flops_fp32"].sum())
    moved = min(max(1.0 - left / found, 0.0), 1.0) if found > 0 else 0.0
    after_s = float(still["time_s"].sum())
    return Confirmation(finding, finding.evidence.time_s, after_s, moved >= 0.5, {"tensor_share": moved})
