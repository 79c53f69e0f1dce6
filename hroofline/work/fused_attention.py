"""Attention traced as PyTorch runs it on a GPU: one fused kernel, not a matrix product, softmax and another.

On CUDA, ``F.scaled_dot_product_attention`` (which ``nn.MultiheadAttention`` and Hugging Face's "sdpa" models
call) picks a fused kernel: FlashAttention for 16-bit inputs without a mask, memory-efficient attention for
float32 or a mask. On the meta device it has no fused kernel and decomposes into ``bmm``, softmax and ``bmm``,
which reads and writes the whole attention matrix and keeps it for backward. While tracing, this module puts
the fused ops in its place (they have meta kernels and gradients), so their FLOPs, bytes and memory are the
fused kernels'. What the fused kernels cannot take (grouped-query attention) keeps PyTorch's own path. A
trace is not made for one GPU: FlashAttention stands for the 16-bit fused kernel of any GPU (a V100 or T4
runs memory-efficient attention instead, with the same FLOPs and the same inputs and outputs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from hroofline.work.autocast import active_dtype

HALF_DTYPES = (torch.float16, torch.bfloat16)
FLASH_MAX_HEAD_DIM = 256


@contextlib.contextmanager
def fused_attention() -> Iterator[None]:
    original = F.scaled_dot_product_attention

    def fused(
        query: Any,
        key: Any,
        value: Any,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> Any:
        if enable_gqa or query.dim() != 4 or key.shape[-3] != query.shape[-3]:
            return original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
        half = active_dtype()  # under autocast, attention runs in 16 bit
        if half is not None:
            query, key, value = (t.to(half) if t.dtype == torch.float32 else t for t in (query, key, value))
        aten = torch.ops.aten
        flash = attn_mask is None and query.dtype in HALF_DTYPES and query.shape[-1] <= FLASH_MAX_HEAD_DIM
        if flash:
            return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, scale=scale)[0]
        needs_grad = any(t.requires_grad for t in (query, key, value)) and torch.is_grad_enabled()
        return aten._scaled_dot_product_efficient_attention(
            query, key, value, attn_mask, needs_grad, dropout_p, is_causal, scale=scale
        )[0]

    F.scaled_dot_product_attention = fused
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original
