"""A serving engine's step, as its own profiler range names it: the requests in prefill and in decode, their query
tokens and the context they attend to.

vLLM's worker (``vllm/v1/worker/gpu_worker.py``, ``annotate_profile``) wraps each model step in a range named
``execute_context_{N}({tokens})_generation_{M}({tokens})``: N requests still in their prompt (prefill, possibly a
chunk of it) and M generating one token each (decode). With TraceLens' patch (``detailed_trace_annotation``, in
AMD-AGI/TraceLens ``examples/custom_workflows/inference_analysis/vllm_patches``) the range also sums, per group,
over its requests, with sq a request's scheduled (new) tokens and sk its whole sequence (computed + scheduled):
``execute_{tokens}_context_{N}(sq{Σsq}sk{Σsk}sqsq{Σsq²}sqsk{Σsq·sk})_generation_{M}(sq..sk..sqsq..sqsk..)``.

Those sums are what causal attention's work needs: a request attends sq·(sk - sq) pairs to its cached context and
sq·(sq + 1)/2 within its new tokens (bottom-right causal), so the step's pairs are Σsq·sk - Σsq²/2 + Σsq/2, and the
KV cache it reads is Σsk tokens. The native range (no sums) gives the phase, the requests and the query tokens;
the context stays unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFILL, DECODE, MIXED = "prefill", "decode", "mixed"

_GROUP = r"(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
_DETAILED = re.compile(rf"^execute_(\d+)_context_{_GROUP}_generation_{_GROUP}$")
_NATIVE = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)$")


@dataclass(frozen=True)
class RequestGroup:
    """The requests of one kind in a step (prefill or decode) and their sums; the context sums are None where the
    range does not give them."""

    requests: int
    query_tokens: int  # Σ sq
    context_tokens: int | None = None  # Σ sk: the KV cache the group's attention reads, per layer
    query_squares: int | None = None  # Σ sq²
    query_context: int | None = None  # Σ sq·sk

    @property
    def attended_pairs(self) -> float | None:
        """Query-key pairs of causal attention, bottom-right aligned: Σ (sq·(sk - sq) + sq·(sq + 1)/2)."""
        if self.query_context is None or self.query_squares is None:
            return None
        return self.query_context - self.query_squares / 2 + self.query_tokens / 2


@dataclass(frozen=True)
class ServingStep:
    """One model step of a serving engine: its prefill and decode requests."""

    range_name: str
    prefill: RequestGroup
    decode: RequestGroup

    @property
    def phase(self) -> str:
        """prefill (no decoding request), decode (no prefill request) or mixed (both, as chunked prefill does)."""
        if self.decode.requests == 0:
            return PREFILL
        return DECODE if self.prefill.requests == 0 else MIXED

    @property
    def batch(self) -> int:
        """Requests in the step."""
        return self.prefill.requests + self.decode.requests

    @property
    def query_tokens(self) -> int:
        return self.prefill.query_tokens + self.decode.query_tokens

    @property
    def context_tokens(self) -> int | None:
        if self.prefill.context_tokens is None or self.decode.context_tokens is None:
            return None
        return self.prefill.context_tokens + self.decode.context_tokens

    @property
    def attended_pairs(self) -> float | None:
        pairs = (self.prefill.attended_pairs, self.decode.attended_pairs)
        return None if None in pairs else float(sum(p for p in pairs if p is not None))


def serving_step(name: str) -> ServingStep | None:
    """The step a range names (vLLM's detailed or native execute range), or None."""
    if match := _DETAILED.match(name):
        numbers = [int(n) for n in match.groups()]
        return ServingStep(name, RequestGroup(*numbers[1:6]), RequestGroup(*numbers[6:11]))
    if match := _NATIVE.match(name):
        prefill_requests, prefill_tokens, decode_requests, decode_tokens = (int(n) for n in match.groups())
        return ServingStep(
            name, RequestGroup(prefill_requests, prefill_tokens), RequestGroup(decode_requests, decode_tokens)
        )
    return None


def step_of(ranges: tuple[str, ...] | list[str]) -> ServingStep | None:
    """The innermost serving step among a launch's ranges (outermost first)."""
    return next((step for name in reversed(ranges) if (step := serving_step(name)) is not None), None)
