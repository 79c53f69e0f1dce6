"""The work of a serving engine's paged attention and KV-cache write, per layer and step.

vLLM's attention op, ``vllm::unified_attention_with_output(query [T, Hq, D], key [T, Hkv, D], value [T, Hkv, Dv],
output [T, Hq, Dv], layer name, ...)``, attends each request's new tokens to its whole sequence, read from the
paged KV cache; the sequence lengths are in the attention metadata, which a trace does not record. The step's
range does (:mod:`hroofline.work.serving_steps`, TraceLens' detailed vLLM range): with it, per call (one layer)

- FLOPs: 2 x pairs x Hq x (D + Dv) (S = QK^T and O = PV), pairs the step's causal query-key pairs,
  Σ sq·sk - Σ sq²/2 + Σ sq/2 over its prefill and decode requests;
- bytes: the queries read and the output written (the step's query tokens x Hq x (D + Dv)), and the KV cache
  read: every request's whole sequence, Σ sk x Hkv x (D + Dv). A decoding request (sq = 1) reads its whole
  cache for one token: that is its attention's cost.

Assumed, and named in the import's note: the KV cache holds the key's dtype (vLLM's ``kv_cache_dtype="auto"``;
the trace records the cache's dtype only where the write op, ``reshape_and_cache_flash``, is traced), and every
layer attends to the whole sequence: a sliding-window layer (gpt-oss's every other layer, 128 tokens) reads at
most its window, so its count is an upper bound. Without the step's sums (vLLM's own range gives no context
lengths) the attention's work stays unknown.

vLLM's KV-cache write, ``_C_cache_ops::reshape_and_cache_flash(key, value, key_cache, value_cache,
slot_mapping, ...)``, copies each new token's key and value into its cache slot: no FLOPs; the key, value and
slot mapping read and the cache slots written, at the cache's recorded dtype.
"""

from __future__ import annotations

import math

from hroofline.work.fused_ops import Argument, Formula, FusedWork
from hroofline.work.ops import PRECISION_COLUMN
from hroofline.work.serving_steps import ServingStep

ATTENTION_OPS = ("vllm::unified_attention_with_output",)
ATTENTION_ASSUMPTION = (
    "vLLM's paged attention is charged each request's whole sequence from the step's range (TraceLens' detailed "
    "execute range: Σ sq·sk, Σ sq², Σ sk), the KV cache assumed in the key's dtype and every layer assumed to "
    "attend to the whole sequence (a sliding-window layer reads at most its window: its count is an upper bound)"
)


def attention_elements(
    query_tokens: int, context_tokens: int, query_heads: int, kv_heads: int, dim: int, dim_v: int
) -> tuple[float, float]:
    """Elements one attention call moves: (queries read + output written, KV cache read)."""
    return float(query_tokens * query_heads * (dim + dim_v)), float(context_tokens * kv_heads * (dim + dim_v))


def unified_attention(step: ServingStep, args: list[Argument]) -> FusedWork | None:
    """One layer's attention over the step: see the module."""
    query, key, value = (args[i] if i < len(args) else Argument() for i in range(3))
    if query.tensor is None or key.tensor is None or value.tensor is None:
        return None
    if len(query.tensor) != 3 or len(key.tensor) != 3 or len(value.tensor) != 3:
        return None
    pairs, context = step.attended_pairs, step.context_tokens
    if pairs is None or context is None or query.tensor[0] < step.query_tokens:
        return None  # no context lengths, or a step of more tokens than the op was given: not this step's call
    (_, query_heads, dim), (_, kv_heads, _), dim_v = query.tensor, key.tensor, value.tensor[-1]
    flops = 2.0 * pairs * query_heads * (dim + dim_v)
    queries, cache = attention_elements(step.query_tokens, context, query_heads, kv_heads, dim, dim_v)
    itemsize = (query.dtype or key.dtype).itemsize if (query.dtype or key.dtype) else None
    kv_itemsize = key.dtype.itemsize if key.dtype else itemsize
    if itemsize is None or kv_itemsize is None:
        return None
    column = PRECISION_COLUMN.get(query.dtype, "flops_fp32") if query.dtype else "flops_fp32"
    return FusedWork(flops, queries * itemsize + cache * kv_itemsize, column, matmul=True)


def reshape_and_cache(args: list[Argument]) -> FusedWork | None:
    """_C_cache_ops::reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, ...): see the
    module."""
    key, value, key_cache, value_cache, slots = (args[i] if i < len(args) else Argument() for i in range(5))
    if key.tensor is None or value.tensor is None or key_cache.dtype is None or value_cache.dtype is None:
        return None
    written = math.prod(key.tensor) * key_cache.dtype.itemsize + math.prod(value.tensor) * value_cache.dtype.itemsize
    return FusedWork(0.0, key.bytes + value.bytes + slots.bytes + written, "flops_fp32")


CACHE_FORMULAS: dict[str, Formula] = {"_C_cache_ops::reshape_and_cache_flash": reshape_and_cache}
