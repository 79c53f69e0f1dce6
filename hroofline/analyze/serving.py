"""A serving trace's steps: each model step of a serving engine, its phase (prefill, decode or mixed), its batch,
query tokens and context, and what its kernels did.

A step is a range of the engine's own (vLLM's ``execute_context_..._generation_...``,
:mod:`hroofline.work.serving_steps`), kept per launch in the ``nvtx`` column by the trace importer; the launches
inside it (the kernels replayed from its CUDA graphs included) are its kernels. A mixed step runs its prefill and
decode requests in the same kernels: their time cannot be split, so the step is one row, with each group's
requests, query tokens and context beside it. Its attention is split by group where the context is known: each
group's share of the attention's bytes is its share of the elements moved (its queries and output, and the KV
cache its requests read), and the decode requests' KV cache read is their context x layers x Hkv x (D + Dv) at
the attention's bytes per element.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.ranks import work_known_share
from hroofline.model.run import Run
from hroofline.roofs.formulas import total_flops
from hroofline.work.serving_attention import ATTENTION_OPS, attention_elements
from hroofline.work.serving_steps import RequestGroup, ServingStep, serving_step

STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "phase",
    "batch",
    "prefill_requests",
    "decode_requests",
    "query_tokens",
    "prefill_query_tokens",
    "decode_query_tokens",
    "context_tokens",
    "prefill_context_tokens",
    "decode_context_tokens",
    "time_s",
    "kernels",
    "flops",
    "bytes_hbm",
    "work_known",
    "attention_layers",
    "attention_bytes",
    "decode_attention_bytes",
    "decode_kv_cache_bytes",
)


@dataclass(frozen=True)
class AttentionGeometry:
    """One attention call's heads and head widths (from its recorded shapes) and bytes per element moved."""

    query_heads: int
    kv_heads: int
    dim: int
    dim_v: int
    bytes_per_element: float

    def elements(self, group: RequestGroup) -> float | None:
        if group.context_tokens is None:
            return None
        queries, cache = attention_elements(
            group.query_tokens, group.context_tokens, self.query_heads, self.kv_heads, self.dim, self.dim_v
        )
        return queries + cache

    def kv_cache_bytes(self, group: RequestGroup) -> float | None:
        if group.context_tokens is None:
            return None
        _, cache = attention_elements(0, group.context_tokens, self.query_heads, self.kv_heads, self.dim, self.dim_v)
        return cache * self.bytes_per_element


def serving_steps(run: Run) -> pd.DataFrame:
    """One row per serving step (in launch order): the columns of :data:`STEP_COLUMNS`; empty where the run has no
    serving step ranges. Token counts are null where the step's range does not give them."""
    launches = run.launches
    rows = []
    if "nvtx" in launches and len(launches):
        names = launches["nvtx"].astype("string")
        for name in dict.fromkeys(names.dropna()):
            step = serving_step(str(name))
            if step is not None:
                rows.append(_step_row(step, launches[(names == name).fillna(False).to_numpy()]))
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))


def _step_row(step: ServingStep, launches: pd.DataFrame) -> dict[str, object]:
    attention = launches[launches["work_op"].isin(ATTENTION_OPS)] if "work_op" in launches else launches.iloc[:0]
    geometry = _geometry(step, attention)
    attention_bytes = float(attention["bytes_hbm"].sum()) if len(attention) else None
    decode_bytes = decode_cache = None
    if geometry is not None and attention_bytes is not None:
        decode, whole = (
            geometry.elements(step.decode),
            (geometry.elements(step.prefill), geometry.elements(step.decode)),
        )
        if decode is not None and None not in whole:
            decode_bytes = attention_bytes * decode / sum(w for w in whole if w is not None)
        cache = geometry.kv_cache_bytes(step.decode)
        decode_cache = cache * len(attention) if cache is not None else None
    return {
        "step": step.range_name,
        "phase": step.phase,
        "batch": step.batch,
        "prefill_requests": step.prefill.requests,
        "decode_requests": step.decode.requests,
        "query_tokens": step.query_tokens,
        "prefill_query_tokens": step.prefill.query_tokens,
        "decode_query_tokens": step.decode.query_tokens,
        "context_tokens": step.context_tokens,
        "prefill_context_tokens": step.prefill.context_tokens,
        "decode_context_tokens": step.decode.context_tokens,
        "time_s": float(launches["time_s"].sum()),
        "kernels": int((launches["category"] == "kernel").sum()),
        "flops": float(total_flops(launches).sum()),
        "bytes_hbm": float(launches["bytes_hbm"].sum()),
        "work_known": work_known_share(launches),
        "attention_layers": len(attention),
        "attention_bytes": attention_bytes,
        "decode_attention_bytes": decode_bytes,
        "decode_kv_cache_bytes": decode_cache,
    }


def _geometry(step: ServingStep, attention: pd.DataFrame) -> AttentionGeometry | None:
    """The heads and widths of the step's attention calls (all alike, else None), from their recorded shapes
    ('T x Hq x D, T x Hkv x D, T x Hkv x Dv, ...'), and the bytes per element their work implies."""
    shapes = set(attention["shapes"].dropna().astype(str)) if len(attention) else set()
    if len(shapes) != 1 or step.context_tokens is None:
        return None
    parts = [p.strip().split("x") for p in next(iter(shapes)).split(",")]
    if len(parts) < 3 or any(len(p) != 3 or not all(n.isdigit() for n in p) for p in parts[:3]):
        return None
    (_, query_heads, dim), (_, kv_heads, _), (_, _, dim_v) = ([int(n) for n in p] for p in parts[:3])
    queries, cache = attention_elements(step.query_tokens, step.context_tokens, query_heads, kv_heads, dim, dim_v)
    per_call = float(attention["bytes_hbm"].sum()) / len(attention)
    return AttentionGeometry(query_heads, kv_heads, dim, dim_v, per_call / (queries + cache))
