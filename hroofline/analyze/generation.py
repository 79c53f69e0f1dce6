"""Generation on a GPU: time to first token, time per output token, and how much KV cache fits.

A request generates N tokens after a prompt of P tokens, for B sequences at once. The prefill runs the prompt
through the model in one forward pass and gives the first token; each later token takes one decode step, a
forward pass of one token per sequence that reads all the weights and the whole KV cache. Per step (``W`` the
weights read, ``M`` the matrix products' weights, ``H`` the output projection's, ``L`` layers, ``A`` query heads
x head size, ``KV`` the cache's bytes per token, ``b`` bytes per weight):

    prefill FLOPs = 2 M B P + 2 H B + 4 L A B P (P + 1) / 2   (causal attention; logits of the last token only)
    prefill bytes = W b + KV B P                               (weights read once, the prompt's cache written)
    decode FLOPs at context c = B (2 (M + H) + 4 L A c)
    decode bytes at context c = W b + KV B c                   (weights, the cache read with the new token's)
    KV = 2 (keys and values) x L x KV heads x head size x b

The bound of a step is its time at roof, max(FLOPs / tensor peak of the precision, bytes / HBM bandwidth). TPOT
is the mean over the decode steps at contexts P+1 ... P+N-1 (the first token comes from the prefill). The
estimate of a step is the longer of the host's time for its ops (one forward pass's ops, each its kind's
multiple of the fitted host floor: :mod:`hroofline.analyze.estimate`) and its kernels' time, FLOP time over the
tensor class's efficiency or HBM time over the memory-bound class's, whichever is longer. Activations (B x the
hidden size per layer in a decode step) and the gathered embedding rows are left out of the bytes.

Memory: the weights and the KV cache of every sequence at its full context must fit in
:data:`CACHE_UTILIZATION` of the GPU's memory, vLLM's default ``gpu_memory_utilization``; the rest is the margin
for activations, the CUDA context and the allocator.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache

from hroofline.analyze.estimate import ErrorBand, EstimateModel
from hroofline.collect.decoder_shape import DecoderShape
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.metricset import metrics_dir

CACHE_UTILIZATION = 0.90  # vLLM's default gpu_memory_utilization: weights + KV cache within it
# precision -> (bytes per weight and per cached value, the tensor roof its FLOPs run on)
GENERATION_PRECISIONS: dict[str, tuple[int, str]] = {"bf16": (2, "tensor_bf16"), "fp8": (1, "tensor_fp8")}


@dataclass(frozen=True)
class GenerationRequest:
    prompt_tokens: int
    new_tokens: int
    batch: int
    precision: str  # a key of GENERATION_PRECISIONS

    @property
    def value_bytes(self) -> int:
        return GENERATION_PRECISIONS[self.precision][0]

    @property
    def context(self) -> int:
        """The longest context a sequence reaches: prompt and generated tokens."""
        return self.prompt_tokens + self.new_tokens

    def decode_contexts(self) -> range:
        """The contexts of the decode steps (at least one, for TPOT, where only one token is asked for)."""
        return range(self.prompt_tokens + 1, self.prompt_tokens + max(self.new_tokens, 2))


@dataclass(frozen=True)
class StepWork:
    flops: float
    bytes: float


def kv_bytes_per_token(shape: DecoderShape, value_bytes: int) -> float:
    """A token's keys and values in every layer."""
    return 2.0 * shape.layers * shape.kv_heads * shape.head_dim * value_bytes


def prefill_work(shape: DecoderShape, request: GenerationRequest) -> StepWork:
    batch, prompt = request.batch, request.prompt_tokens
    attention = 4.0 * shape.layers * shape.attention_width * batch * prompt * (prompt + 1) / 2
    flops = 2.0 * shape.body_matmul_weights * batch * prompt + 2.0 * shape.head_weights * batch + attention
    written = kv_bytes_per_token(shape, request.value_bytes) * batch * prompt
    return StepWork(flops, shape.read_weights * request.value_bytes + written)


def decode_work(shape: DecoderShape, request: GenerationRequest, context: int) -> StepWork:
    per_sequence = (
        2.0 * (shape.body_matmul_weights + shape.head_weights) + 4.0 * shape.layers * shape.attention_width * context
    )
    cache = kv_bytes_per_token(shape, request.value_bytes) * request.batch * context
    return StepWork(request.batch * per_sequence, shape.read_weights * request.value_bytes + cache)


@dataclass(frozen=True)
class Roofs:
    """The peaks a generation step is judged by, SI, and the estimate's parameters for the GPU's generation."""

    tensor_flops: float  # the precision's dense tensor peak
    tensor_key: str
    hbm_bytes: float
    estimate: EstimateModel


@dataclass(frozen=True)
class StepTimes:
    """A step's (TTFT's, or TPOT's: the mean decode step) bound and estimate, and the work behind them."""

    work: StepWork
    bound_s: float
    estimate_s: float  # the longer of the two below (TPOT: the mean over the decode steps of the longer)
    kernels_s: float  # its kernels at the fitted efficiencies
    host_s: float  # the host's time for the step's ops

    @property
    def host_bound(self) -> bool:
        return self.host_s >= self.kernels_s


def _bound(work: StepWork, roofs: Roofs) -> float:
    return max(work.flops / roofs.tensor_flops, work.bytes / roofs.hbm_bytes)


def _kernels(work: StepWork, roofs: Roofs) -> float:
    efficiency = roofs.estimate.efficiency
    return max(
        work.flops / roofs.tensor_flops / efficiency["tensor"], work.bytes / roofs.hbm_bytes / efficiency["other"]
    )


@dataclass(frozen=True)
class GenerationFit:
    """Weights and KV cache against the GPU's memory: the request's, and the most that fits."""

    capacity_bytes: float
    budget_bytes: float  # CACHE_UTILIZATION of the capacity
    weight_bytes: float
    cache_bytes: float  # the request's KV cache at its longest context
    cache_tokens: int  # tokens of KV cache (batch x context) the budget holds beside the weights
    largest_batch: int  # sequences at the request's full context
    largest_context: int  # tokens per sequence at the request's batch (the model's position limit aside)

    @property
    def held_bytes(self) -> float:
        """The weights and the request's KV cache."""
        return self.weight_bytes + self.cache_bytes

    @property
    def fits(self) -> bool:
        return self.held_bytes <= self.budget_bytes


def generation_fit(shape: DecoderShape, request: GenerationRequest, capacity_bytes: float) -> GenerationFit:
    per_token = kv_bytes_per_token(shape, request.value_bytes)
    budget = capacity_bytes * CACHE_UTILIZATION
    weights = shape.parameters * request.value_bytes  # held: the untied embedding tables too
    tokens = max(int((budget - weights) // per_token), 0)
    return GenerationFit(
        capacity_bytes=capacity_bytes,
        budget_bytes=budget,
        weight_bytes=weights,
        cache_bytes=per_token * request.batch * request.context,
        cache_tokens=tokens,
        largest_batch=tokens // request.context,
        largest_context=tokens // request.batch,
    )


@dataclass(frozen=True)
class MeasuredGeneration:
    """Generation measured on a GPU against this estimate: measured / estimated, least and most
    (metrics/generation.toml)."""

    measured_on: str
    sources: tuple[str, ...]  # the measured files, from the repository's root
    ttft: tuple[float, float]
    tpot: tuple[float, float]


@cache
def load_measured_generation() -> tuple[MeasuredGeneration, ...]:
    data = tomllib.loads((metrics_dir() / "generation.toml").read_text())
    return tuple(
        MeasuredGeneration(
            str(entry["measured_on"]),
            tuple(str(source) for source in entry["sources"]),
            (float(entry["ttft"][0]), float(entry["ttft"][1])),
            (float(entry["tpot"][0]), float(entry["tpot"][1])),
        )
        for entry in data["measured"]
    )


@dataclass(frozen=True)
class GenerationPrediction:
    shape: DecoderShape
    request: GenerationRequest
    gpu: str
    roofs: Roofs
    ttft: StepTimes
    tpot: StepTimes
    kv_bytes_per_token: float
    fit: GenerationFit | None  # None where the catalog lacks the GPU's memory
    vendor: str  # the GPU's (estimate.FITTED_VENDOR: the one the estimate was fitted on)
    error: ErrorBand | None  # the step estimate's held-out band (inference passes): not measured on generation
    measured: tuple[MeasuredGeneration, ...]  # generation measured against this estimate (metrics/generation.toml)

    def total_s(self, ttft_s: float, tpot_s: float) -> float:
        """The whole request: the prefill, then a decode step for each token after the first."""
        return ttft_s + (self.request.new_tokens - 1) * tpot_s

    def tokens_per_s(self, ttft_s: float, tpot_s: float) -> float:
        """Generated tokens of all sequences over the whole request's time."""
        return self.request.batch * self.request.new_tokens / self.total_s(ttft_s, tpot_s)

    @property
    def request_estimate_s(self) -> float:
        return self.total_s(self.ttft.estimate_s, self.tpot.estimate_s)

    @property
    def tokens_per_s_estimate(self) -> float:
        return self.tokens_per_s(self.ttft.estimate_s, self.tpot.estimate_s)

    @property
    def tokens_per_s_bound(self) -> float:
        """The most tokens per second the roofs allow."""
        return self.tokens_per_s(self.ttft.bound_s, self.tpot.bound_s)

    @property
    def weights_read_bytes(self) -> float:
        """What every step reads of the weights (all but the untied embedding tables)."""
        return self.shape.read_weights * self.request.value_bytes

    @property
    def kv_cache_bytes(self) -> float:
        """The request's KV cache at its longest context."""
        return self.kv_bytes_per_token * self.request.batch * self.request.context


def predict_generation(
    shape: DecoderShape,
    request: GenerationRequest,
    gpu: GpuName,
    roofs: Roofs,
) -> GenerationPrediction:
    capacity_bytes = gpu.memory_bytes
    host_s = shape.forward_host_weight * roofs.estimate.host_floor_s  # one forward pass's ops, prefill or decode
    prefill = prefill_work(shape, request)
    kernels_s = _kernels(prefill, roofs)
    ttft = StepTimes(prefill, _bound(prefill, roofs), max(host_s, kernels_s), kernels_s, host_s)
    steps = [decode_work(shape, request, context) for context in request.decode_contexts()]
    count = len(steps)
    mean = StepWork(sum(s.flops for s in steps) / count, sum(s.bytes for s in steps) / count)
    bound = sum(_bound(s, roofs) for s in steps) / count
    kernels = [_kernels(s, roofs) for s in steps]
    estimate = sum(max(host_s, k) for k in kernels) / count
    return GenerationPrediction(
        shape=shape,
        request=request,
        gpu=gpu.variant or gpu.name,
        roofs=roofs,
        ttft=ttft,
        tpot=StepTimes(mean, bound, estimate, sum(kernels) / count, host_s),
        kv_bytes_per_token=kv_bytes_per_token(shape, request.value_bytes),
        fit=generation_fit(shape, request, capacity_bytes) if capacity_bytes else None,
        vendor=gpu.vendor,
        error=roofs.estimate.error_for("forward"),
        measured=load_measured_generation(),
    )
