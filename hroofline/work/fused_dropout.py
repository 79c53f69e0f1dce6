"""Dropout traced as PyTorch runs it on a GPU: one fused kernel, not its decomposition.

On CUDA, ``aten::dropout`` calls ``aten::native_dropout`` for any 0 < p < 1 (``is_fused_kernel_acceptable``): one
kernel that reads the input and writes the output and a one-byte mask. On the meta device it decomposes into
``bernoulli_``, ``div_`` and ``mul`` (2.4 times the bytes in bfloat16, and three ops to launch). While tracing,
``F.dropout`` (which ``nn.Dropout`` calls) runs the fused op in its place; it has a meta kernel and a gradient
(``native_dropout_backward``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F


@contextlib.contextmanager
def fused_dropout() -> Iterator[None]:
    original = F.dropout

    def fused(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        if not training or not 0 < p < 1 or inplace or input.numel() == 0:
            return original(input, p, training, inplace)
        return torch.ops.aten.native_dropout(input, p, True)[0]

    F.dropout = fused
    try:
        yield
    finally:
        F.dropout = original
