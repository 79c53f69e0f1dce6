"""The work of fused ops that PyTorch's FLOP formulas and the meta device do not count: FlashAttention 2 and 3,
cuDNN attention, fused RMSNorm, fused RoPE, SiLU-and-mul, the optimizers' ``_foreach_*`` and fused Adam/AdamW.

Each formula takes an op's arguments as a trace records them (tensor shapes and dtypes, tensor-list shapes,
concrete scalars, in schema order) and gives its FLOPs and fewest bytes (every tensor read once, every output
written once), or None where the arguments do not say (a shape not recorded, a sequence length known only to
the GPU): such an op's work stays unknown, never 0. Argument positions are the ops' schemas in their sources
(flash-attn's ``flash_attn_interface.py``, FlashAttention 3's ``hopper/flash_attn_interface.py``, vLLM's
``csrc/torch_bindings.cpp``, PyTorch's ``native_functions.yaml``).

Attention counts the FLOPs of its matrix products, 2 per multiply-add, over the query-key pairs the mask leaves
(model FLOPs, as FlashAttention's benchmarks count them, not hardware FLOPs: the kernel also computes the masked
half of the tiles on the diagonal): a causal flag halves the work of a square attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hroofline.work.ops import PRECISION_COLUMN, element_costs

# The profiler writes a tensor list's type as 'TensorList', without its dtype: optimizers keep parameters and
# their state in float32 (under autocast too), so a list counts 4 bytes an element.
LIST_DTYPE = torch.float32
_STATISTICS_DTYPE = torch.float32  # softmax log-sum-exp and RMSNorm's rstd are kept in float32


@dataclass(frozen=True)
class Argument:
    """One recorded argument: a tensor (one shape), a tensor list (a shape per tensor, ``listed``) or a value."""

    shapes: tuple[tuple[int, ...], ...] = ()
    dtype: torch.dtype | None = None
    value: Any = None
    listed: bool = False

    @property
    def tensor(self) -> tuple[int, ...] | None:
        return self.shapes[0] if len(self.shapes) == 1 and not self.listed else None

    @property
    def bytes(self) -> float:
        itemsize = (self.dtype or LIST_DTYPE).itemsize
        return float(sum(math.prod(shape) for shape in self.shapes) * itemsize)


@dataclass(frozen=True)
class FusedWork:
    flops: float
    bytes: float
    column: str  # the precision column of its FLOPs (flops_fp16, flops_fp32, ...)
    matmul: bool = False  # matrix products (attention): tensor-core work where the GPU and dtype allow


Formula = Callable[[list[Argument]], FusedWork | None]


def _get(args: list[Argument], index: int | None) -> Argument:
    return args[index] if index is not None and index < len(args) else Argument()


def _given(argument: Argument) -> bool:
    """A tensor with elements was passed (an optional tensor left out records no shape, or an empty one)."""
    if argument.listed:
        return bool(argument.shapes)
    return argument.tensor is not None and math.prod(argument.tensor) > 0


def _column(dtype: torch.dtype | None) -> str:
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return "flops_tensor_fp8"  # FP8 attention (FA3): both products on the FP8 tensor cores
    return PRECISION_COLUMN.get(dtype or LIST_DTYPE, "flops_fp32")


def attended_pairs(
    query_length: int, key_length: int, causal: bool, window: tuple[int, int] = (-1, -1), bottom_right: bool = True
) -> int:
    """Query-key pairs a mask leaves: query i sits on key diagonal d = i + (key_length - query_length)
    (bottom-right, FlashAttention's alignment since 2.1) or d = i (top-left, PyTorch's ``is_causal``) and sees keys
    d - left .. d + right (a bound of -1 is none; causal sets right to 0)."""
    left, right = window
    right = 0 if causal else right
    diagonal = np.arange(query_length) + (key_length - query_length if bottom_right else 0)
    high = np.minimum(key_length - 1, diagonal + right) if right >= 0 else np.full(query_length, key_length - 1)
    low = np.maximum(0, diagonal - left) if left >= 0 else np.zeros(query_length, dtype=np.int64)
    return int(np.clip(high - low + 1, 0, None).sum())


@dataclass(frozen=True)
class AttentionSchema:
    """Where an attention op's arguments are (None: the op has none). q, k, v are (batch, sequence, heads, dim),
    (batch, heads, sequence, dim) with ``heads_first``, or (tokens, heads, dim) where ``cu_seqlens`` is given."""

    q: int
    k: int
    v: int
    causal: int
    backward: bool = False
    window: tuple[int, int] | None = None
    cu_seqlens: tuple[int | None, int | None] = (None, None)
    max_seqlen: tuple[int | None, int | None] = (None, None)
    lengths_unrecorded: tuple[int, ...] = ()  # paged KV, seqused, appended KV: lengths only the GPU knows
    read: tuple[int, ...] = ()  # what the backward reads besides q, k, v (dout, out, lse)
    heads_first: bool = False
    bottom_right: bool = True


def _pairs(schema: AttentionSchema, args: list[Argument], q: tuple[int, ...], k: tuple[int, ...]) -> int | None:
    """Attended query-key pairs summed over the batch (per head)."""
    bounds = [_get(args, i).value for i in schema.window or (None, None)]
    window = (int(bounds[0]) if bounds[0] is not None else -1, int(bounds[1]) if bounds[1] is not None else -1)
    causal = bool(_get(args, schema.causal).value)
    cu_q, cu_k = (_get(args, i) for i in schema.cu_seqlens)
    if not _given(cu_q) and not _given(cu_k):
        if len(q) != 4 or len(k) != 4:
            return None
        batch, sq, sk = (q[0], q[2], k[2]) if schema.heads_first else (q[0], q[1], k[1])
        return batch * attended_pairs(sq, sk, causal, window, schema.bottom_right)
    # packed sequences: their lengths are in cu_seqlens' values, which a trace does not record; the pairs are
    # known only where every sequence has the recorded maximum length, or (unmasked) one side has
    if not _given(cu_q) or cu_q.tensor is None or len(q) != 3 or len(k) != 3:
        return None
    batch = cu_q.tensor[0] - 1
    max_q, max_k = (_get(args, i).value for i in schema.max_seqlen)
    if not isinstance(max_q, int) or not isinstance(max_k, int) or batch <= 0:
        return None
    equal_q, equal_k = q[0] == batch * max_q, k[0] == batch * max_k
    if equal_q and equal_k:
        return batch * attended_pairs(max_q, max_k, causal, window, schema.bottom_right)
    if causal or any(w >= 0 for w in window):
        return None
    return max_q * k[0] if equal_q else (max_k * q[0] if equal_k else None)


def _attention(schema: AttentionSchema) -> Formula:
    def formula(args: list[Argument]) -> FusedWork | None:
        """Forward: 2 x pairs x heads x (D + Dv) (S = QK^T and O = PV); backward: 2 x pairs x heads x (3D + 2Dv)
        (S again, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q). Bytes: forward reads q, k, v and writes the
        output and the float32 log-sum-exp; backward reads q, k, v, dout, out and lse and writes dq, dk, dv."""
        query, key, value = (_get(args, i) for i in (schema.q, schema.k, schema.v))
        if query.tensor is None or key.tensor is None or value.tensor is None:
            return None
        if any(_given(_get(args, i)) for i in schema.lengths_unrecorded):
            return None
        q, k = query.tensor, key.tensor
        pairs = _pairs(schema, args, q, k)
        if pairs is None:
            return None
        heads = q[1] if schema.heads_first else q[-2]
        dim, dim_v = q[-1], value.tensor[-1]
        if schema.backward:
            flops = 2.0 * pairs * heads * (3 * dim + 2 * dim_v)
            moved = 2 * (query.bytes + key.bytes + value.bytes) + sum(_get(args, i).bytes for i in schema.read)
        else:
            out_dtype = torch.bfloat16 if query.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else query.dtype
            flops = 2.0 * pairs * heads * (dim + dim_v)
            out = Argument(((*q[:-1], dim_v),), out_dtype)
            lse = Argument(((math.prod(q[:-1]),),), _STATISTICS_DTYPE)  # one per query row and head
            moved = query.bytes + key.bytes + value.bytes + out.bytes + lse.bytes
        return FusedWork(flops, moved, _column(query.dtype), matmul=True)

    return formula


_FA2_FORWARD = AttentionSchema(q=0, k=1, v=2, causal=5, window=(6, 7))
_FA2_BACKWARD = AttentionSchema(q=1, k=2, v=3, causal=11, window=(12, 13), backward=True, read=(0, 4, 5))
_FA2_VARLEN_FORWARD = AttentionSchema(
    q=0, k=1, v=2, causal=9, window=(10, 11), cu_seqlens=(3, 4), max_seqlen=(5, 6), lengths_unrecorded=(15, 16, 17)
)
_FA2_VARLEN_BACKWARD = AttentionSchema(
    q=1, k=2, v=3, causal=15, window=(16, 17), cu_seqlens=(9, 10), max_seqlen=(11, 12), backward=True, read=(0, 4, 5)
)
# FlashAttention 3 (hopper/): the custom op and the C++ op it calls take the forward's arguments in one order
_FA3_FORWARD = AttentionSchema(
    q=0,
    k=1,
    v=2,
    causal=24,
    window=(25, 26),
    cu_seqlens=(7, 8),
    max_seqlen=(12, 13),
    lengths_unrecorded=(3, 11, 14, 16),
)
_FA3_BACKWARD = AttentionSchema(
    q=1, k=2, v=3, causal=16, window=(17, 18), cu_seqlens=(6, 7), max_seqlen=(10, 11), lengths_unrecorded=(8, 9),
    backward=True, read=(0, 4, 5),
)  # fmt: skip
_FA3_BWD = AttentionSchema(
    q=1, k=2, v=3, causal=16, window=(17, 18), cu_seqlens=(9, 10), max_seqlen=(13, 14), lengths_unrecorded=(11, 12),
    backward=True, read=(0, 4, 5),
)  # fmt: skip
# ATen's cuDNN attention, which PyTorch's FLOP counter lacks: (batch, heads, sequence, dim), top-left causal
_CUDNN_FORWARD = AttentionSchema(q=0, k=1, v=2, causal=10, cu_seqlens=(4, 5), heads_first=True, bottom_right=False)
_CUDNN_BACKWARD = AttentionSchema(
    q=1, k=2, v=3, causal=14, cu_seqlens=(9, 10), heads_first=True, bottom_right=False, backward=True, read=(0, 4, 5)
)


def _rms_rows(elements: int, args: list[Argument], shape_index: int | None, weight: Argument) -> int:
    normalized = _get(args, shape_index).value
    if isinstance(normalized, list | tuple) and normalized:
        size = math.prod(int(n) for n in normalized)
    elif weight.tensor:
        size = math.prod(weight.tensor)
    else:
        size = 0
    return elements // size if size else 0


def _rms_norm(input_index: int, weight_index: int, shape_index: int | None = None, added: int | None = None) -> Formula:
    def formula(args: list[Argument]) -> FusedWork | None:
        """FLOPs per element: square, accumulate, scale by rstd, by the weight (4; 3 without a weight), plus the
        residual add of a fused add-RMSNorm (1); per row: divide by n, add eps, rsqrt (3). Bytes: the input (and
        residual) and weight read, the output (and the updated residual) written, rstd (float32) where returned."""
        inputs, weight, residual = _get(args, input_index), _get(args, weight_index), _get(args, added)
        if inputs.tensor is None:
            return None
        elements = math.prod(inputs.tensor)
        rows = _rms_rows(elements, args, shape_index, weight)
        if not rows:
            return None
        per_element = 3 + (weight.tensor is not None) + (residual.tensor is not None)
        moved = 2 * inputs.bytes + weight.bytes + 2 * residual.bytes
        if shape_index is not None:  # aten::_fused_rms_norm returns rstd too
            moved += rows * _STATISTICS_DTYPE.itemsize
        return FusedWork(per_element * elements + 3.0 * rows, moved, _column(inputs.dtype))

    return formula


def _fused_rms_norm_backward(args: list[Argument]) -> FusedWork | None:
    """aten::_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask). FLOPs per
    element: x_hat = x rstd (1); for the input gradient, g w (1, with a weight), the row dot sum(g w x_hat) (2) and
    rstd (g w - x_hat dot / n) (3), plus per row dot / n (1); for the weight gradient, sum over rows of g x_hat (2).
    Bytes: grad_out, input, rstd and weight read; the gradients asked for written."""
    grad, inputs, rstd, weight = (_get(args, i) for i in (0, 1, 3, 4))
    if grad.tensor is None or inputs.tensor is None:
        return None
    mask = _get(args, 5).value
    want_input, want_weight = (bool(mask[0]), bool(mask[1])) if isinstance(mask, list | tuple) else (True, True)
    want_weight = want_weight and weight.tensor is not None
    elements = math.prod(inputs.tensor)
    rows = _rms_rows(elements, args, 2, weight)
    if not rows:
        return None
    per_element = 1 + want_input * ((weight.tensor is not None) + 2 + 3) + want_weight * 2
    moved = grad.bytes + inputs.bytes + rstd.bytes + weight.bytes + want_input * inputs.bytes
    moved += want_weight * weight.bytes
    return FusedWork(per_element * elements + want_input * rows, moved, _column(inputs.dtype))


def _rotary_embedding(args: list[Argument]) -> FusedWork | None:
    """vLLM's and SGLang's rotary_embedding(positions, query!, key!?, head_size, cos_sin_cache, is_neox), in place.
    Each rotated pair (x1, x2) becomes (x1 cos - x2 sin, x2 cos + x1 sin): 6 FLOPs, 3 per rotated element, over
    rot_dim (the cache's width) of each query and key head of each token. Bytes: the rotated elements read and
    written, each token's cos and sin row (rot_dim values) read, the positions read."""
    positions, query, key, cache = (_get(args, i) for i in (0, 1, 2, 4))
    head_size = _get(args, 3).value
    if positions.tensor is None or query.tensor is None or cache.tensor is None or not isinstance(head_size, int):
        return None
    tokens, rot_dim = math.prod(positions.tensor), cache.tensor[-1]
    heads = sum(math.prod(t.tensor) // (tokens * head_size) for t in (query, key) if t.tensor is not None)
    rotated = tokens * heads * rot_dim
    itemsize = (query.dtype or LIST_DTYPE).itemsize
    moved = 2.0 * rotated * itemsize + tokens * rot_dim * (cache.dtype or LIST_DTYPE).itemsize + positions.bytes
    return FusedWork(3.0 * rotated, moved, _column(query.dtype))


def _silu_and_mul(args: list[Argument]) -> FusedWork | None:
    """vLLM's silu_and_mul(result!, input): input (..., 2d) -> silu(x[..., :d]) * x[..., d:]. FLOPs per output
    element: silu's and mul's costs in metrics/cpu_ops.toml (4 + 1). Bytes: the input read, the result written."""
    result, inputs = _get(args, 0), _get(args, 1)
    if result.tensor is None or inputs.tensor is None:
        return None
    costs = element_costs().per_output
    flops = (costs["silu"] + costs["mul"]) * math.prod(result.tensor)
    return FusedWork(flops, result.bytes + inputs.bytes, _column(inputs.dtype))


def _linear(args: list[Argument]) -> FusedWork | None:
    """vLLM's ROCm dense GEMM, rocm_unquantized_gemm(x, weight, bias) = F.linear (hipBLASLt or its skinny
    kernels): 2 x rows x out_features x in_features, as PyTorch counts addmm (the bias add left out). Bytes: x,
    weight and bias read, the (rows, out_features) output written."""
    inputs, weight, bias = _get(args, 0), _get(args, 1), _get(args, 2)
    if inputs.tensor is None or weight.tensor is None or len(weight.tensor) != 2 or not inputs.tensor:
        return None
    rows, (out_features, in_features) = math.prod(inputs.tensor[:-1]), weight.tensor
    out = Argument(((rows, out_features),), inputs.dtype)
    moved = inputs.bytes + weight.bytes + bias.bytes + out.bytes
    return FusedWork(2.0 * rows * out_features * in_features, moved, _column(inputs.dtype), matmul=True)


# _foreach_ ops that move data and compute nothing
_FOREACH_NO_FLOPS = frozenset({"copy", "zero", "clone"})
_FOREACH_OVERWRITES = frozenset({"copy", "zero"})  # write the first list without reading it


def _foreach(name: str) -> Formula:
    def formula(args: list[Argument]) -> FusedWork | None:
        """FLOPs: the op's per-element cost in metrics/cpu_ops.toml (add 1, addcmul 2, lerp 2, ...; +1 for an
        add or sub with alpha != 1, a multiply-add) x the elements of the first tensor list. Bytes: each tensor
        list and tensor argument read once (a list passed twice, as addcmul_(v, g, g), counts twice: the trace does
        not say two arguments are one list), the result (the first list, or a new list of its shapes) written once.
        A tensor list the trace recorded without shapes (PyTorch drops those of lists over 30 tensors) leaves the
        work unknown."""
        lists = [a for a in args if a.listed]
        if not lists or any(not a.shapes for a in lists):
            return None
        base = name.removeprefix("_foreach_").rstrip("_")
        costs = element_costs()
        elements = sum(math.prod(shape) for shape in lists[0].shapes)
        if base in _FOREACH_NO_FLOPS:
            per_element = 0.0
        elif base in costs.per_output or f"{base}_" in costs.per_output:
            per_element = costs.per_output.get(base, costs.per_output.get(f"{base}_", 0.0))
        elif f"_foreach_{base}" in costs.per_input:
            per_element = costs.per_input[f"_foreach_{base}"]
        else:
            return None  # an op of no known cost: unknown, not 0
        alpha = _get(args, 2).value if len(args) > 2 and args[1].shapes else None
        if base in ("add", "sub") and isinstance(alpha, int | float) and alpha != 1:
            per_element += 1.0
        read = sum(a.bytes for a in args if a.shapes) - (lists[0].bytes if base in _FOREACH_OVERWRITES else 0.0)
        written = len(lists[0].shapes) * LIST_DTYPE.itemsize if base == "norm" else lists[0].bytes  # norm: one a tensor
        return FusedWork(per_element * elements, read + written, "flops_fp32")

    return formula


def _fused_adam(args: list[Argument]) -> FusedWork | None:
    """aten::_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
    beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf), per parameter element as PyTorch's
    kernel (ATen/native/cuda/fused_adam_utils.cuh) computes it: m = b1 m + (1 - b1) g (3), v = b2 v +
    (1 - b2) g g (4), denom = sqrt(v) / sqrt(bc2) + eps (3), p -= step_size m / denom (3): 13 FLOPs; + 2 for
    weight decay (Adam: g += wd p; AdamW: p -= lr wd p), + 1 with amsgrad (max), + 1 with maximize (negate),
    + 1 with a grad scale (unscale); the step size is per tensor. Bytes: params, grads, exp_avgs and
    exp_avg_sqs read, params and both averages written (7 x 4 B an element in float32); amsgrad reads and
    writes its max too, a grad scale writes the unscaled grads back; the steps (one value a tensor) read."""
    params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = (_get(args, i) for i in range(6))
    if not params.listed or not params.shapes or not grads.shapes:
        return None
    weight_decay, amsgrad, maximize = (_get(args, i).value for i in (9, 11, 12))
    grad_scale = _get(args, 13).tensor is not None
    per_element = 13 + 2 * bool(weight_decay) + bool(amsgrad) + bool(maximize) + grad_scale
    elements = sum(math.prod(shape) for shape in params.shapes)
    moved = 2 * (params.bytes + exp_avgs.bytes + exp_avg_sqs.bytes) + grads.bytes * (1 + grad_scale)
    moved += 2 * max_sqs.bytes * bool(amsgrad) + steps.bytes
    return FusedWork(float(per_element * elements), moved, "flops_fp32")


FORMULAS: dict[str, Formula] = {
    "flash_attn::_flash_attn_forward": _attention(_FA2_FORWARD),
    "flash_attn::_flash_attn_backward": _attention(_FA2_BACKWARD),
    "flash_attn::_flash_attn_varlen_forward": _attention(_FA2_VARLEN_FORWARD),
    "flash_attn::_flash_attn_varlen_backward": _attention(_FA2_VARLEN_BACKWARD),
    "flash_attn_3::_flash_attn_forward": _attention(_FA3_FORWARD),
    "flash_attn_3::fwd": _attention(_FA3_FORWARD),
    "flash_attn_3::_flash_attn_backward": _attention(_FA3_BACKWARD),
    "flash_attn_3::bwd": _attention(_FA3_BWD),
    "aten::_cudnn_attention_forward": _attention(_CUDNN_FORWARD),
    "aten::_cudnn_attention_backward": _attention(_CUDNN_BACKWARD),
    "aten::_fused_rms_norm": _rms_norm(0, 2, shape_index=1),
    "aten::_fused_rms_norm_backward": _fused_rms_norm_backward,
    "_C::rms_norm": _rms_norm(1, 2),
    "_C::fused_add_rms_norm": _rms_norm(0, 2, added=1),
    "vllm::rocm_aiter_rms_norm": _rms_norm(0, 1),
    "vllm::rocm_aiter_rmsnorm2d_fwd_with_add": _rms_norm(0, 2, added=1),
    "_C::rotary_embedding": _rotary_embedding,
    "sgl_kernel::rotary_embedding": _rotary_embedding,
    "_C::silu_and_mul": _silu_and_mul,
    "vllm::rocm_unquantized_gemm": _linear,
    "aten::_fused_adam_": _fused_adam,
    "aten::_fused_adamw_": _fused_adam,
}


def formula_for(name: str) -> Formula | None:
    """The fused formula of an op recorded as ``name`` (``aten::_foreach_add_``, ``flash_attn::...``), if any."""
    if name.startswith("aten::_foreach_"):
        return _foreach(name.removeprefix("aten::"))
    return FORMULAS.get(name)
