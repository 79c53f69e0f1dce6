"""Which ATen ops are which kind of work: names only, no torch (the CLI checks its arguments before torch loads)."""

from __future__ import annotations

CONVOLUTION_OPS: frozenset[str] = frozenset({"aten::convolution", "aten::convolution_backward"})
# Fused attention: one kernel on a GPU (FlashAttention, memory-efficient, cuDNN), its FLOPs those of its two
# matrix products (forward) or five (backward, the scores recomputed), halved where attention is causal.
ATTENTION_OPS: frozenset[str] = frozenset(
    f"aten::{name}{suffix}"
    for name in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_flash_attention",
        "_efficient_attention",
        "_cudnn_attention",
    )
    for suffix in ("", "_forward", "_backward")
)
# ATen ops that are matrix products: what cuBLAS/cuDNN run on tensor cores when the inputs allow.
MATMUL_OPS: frozenset[str] = (
    CONVOLUTION_OPS | ATTENTION_OPS | frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})
)
# cuDNN's NCHW <-> NHWC conversions around an NCHW convolution on tensor cores, as predicted rows (one per
# convolution op and element size). Their names hold the kernels' own (nchwToNhwc, nhwcToNchw), which the
# advice rule on layout conversions matches in measured runs too.
LAYOUT_CONVERSION_KERNELS: dict[int, str] = {
    bits: f"cudnn nchwToNhwc/nhwcToNchw ({bits}-bit layout conversions, predicted)" for bits in (16, 32)
}
# Batch norms, forward and backward, training and inference: cuDNN calls, the longest host time of the ops
# metrics/host_cost.toml measured.
BATCH_NORM_OPS: frozenset[str] = frozenset(
    f"aten::{name}"
    for name in (
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit_functional",
        "_batch_norm_with_update",
        "_batch_norm_with_update_functional",
        "_batch_norm_no_update",
        "batch_norm_backward",
        "cudnn_batch_norm",
        "cudnn_batch_norm_backward",
    )
)
