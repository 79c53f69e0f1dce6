"""What ``hroofline predict --generate`` prints: TTFT, TPOT and tokens/s as bound and estimate, the KV cache, and
how much of it fits the GPU (:mod:`hroofline.analyze.generation` computes them)."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.generation import CACHE_UTILIZATION, GenerationPrediction, StepTimes
from hroofline.model.numbers import per_second, si
from hroofline.model.quantities import ROOF_LABELS
from hroofline.render.prediction import untested_vendor_line
from hroofline.roofs.catalog import GIB


def generation_text(prediction: GenerationPrediction) -> str:
    request, shape, roofs = prediction.request, prediction.shape, prediction.roofs
    lines = [
        f"{shape.name}: generate {request.new_tokens:,} tokens after a {request.prompt_tokens:,}-token prompt, "
        f"batch {request.batch:,}, {request.precision} on {prediction.gpu} (bound: time at roof; estimate: "
        "the longer of the host's time for the step's ops and its kernels' at the fitted efficiencies)",
        _step_line("TTFT (prefill)", prediction.ttft),
        _step_line(f"TPOT (decode, mean over contexts {request.prompt_tokens + 1:,}+)", prediction.tpot),
    ]
    lines.append(
        f"tokens/s: estimate {per_second(prediction.tokens_per_s_estimate, 'tokens')} "
        f"({si(prediction.request_estimate_s, 's')} for the request), "
        f"bound at most {per_second(prediction.tokens_per_s_bound, 'tokens')}"
    )
    lines.append(_error_line(prediction))
    vendor = untested_vendor_line(prediction.vendor)
    if vendor:
        lines.append(vendor)
    lines.append(
        f"host floor: {shape.forward_ops:,} ops per forward pass (traced, one token), "
        f"{si(prediction.tpot.host_s, 's')} at {si(roofs.estimate.host_floor_s, 's')} per element-wise op "
        "(fitted) x each op's host weight (metrics/host_cost.toml); Hugging Face generate's own work per token "
        "(logits processors, stopping criteria, its cache bookkeeping) is not counted"
    )
    kv = prediction.kv_bytes_per_token
    lines.append(
        f"KV cache: {si(kv, 'B')} per token (2 x {shape.layers} layers x {shape.kv_heads} KV heads x "
        f"{shape.head_dim} x {request.value_bytes} B); {si(prediction.kv_cache_bytes, 'B')} for "
        f"{request.batch:,} x {request.context:,} tokens"
    )
    if prediction.fit is not None:
        lines.append(_fit_line(prediction))
    lines.append(
        f"work: {si(prediction.weights_read_bytes, 'B')} of weights read per step; "
        f"prefill {si(prediction.ttft.work.flops, 'FLOP')}, a decode step {si(prediction.tpot.work.flops, 'FLOP')} "
        f"on the {ROOF_LABELS[roofs.tensor_key]} roof ({si(roofs.tensor_flops, 'FLOP/s')}), "
        f"HBM {si(roofs.hbm_bytes, 'B/s')}"
    )
    return "\n".join(lines) + "\n"


def _step_line(label: str, times: StepTimes) -> str:
    limit = "host-bound" if times.host_bound else "kernel-bound"
    return f"{label}: estimate {si(times.estimate_s, 's')} ({limit}), bound {si(times.bound_s, 's')}"


def _error_line(prediction: GenerationPrediction) -> str:
    """What generation measured on a GPU showed against this estimate, and the step estimate's band."""
    parts = [
        f"on {m.measured_on}, measured / estimate: TTFT x{m.ttft[0]:.2f} to x{m.ttft[1]:.2f}, "
        f"TPOT x{m.tpot[0]:.2f} to x{m.tpot[1]:.2f}"
        for m in prediction.measured
    ]
    error = prediction.error
    if error is not None:
        parts.append(f"the step estimate's band, on {error.measured_on}, is 90% within x{error.p90:.2f}")
    if not parts:
        return "error: none known"
    return "error: " + "; ".join(parts) + " (docs/validation.md, Generation)"


def _fit_line(prediction: GenerationPrediction) -> str:
    fit = prediction.fit
    assert fit is not None
    shape, request = prediction.shape, prediction.request
    verdict = "fits" if fit.fits else "DOES NOT FIT"
    limit = f" (the model's positions stop at {shape.max_positions:,})" if shape.max_positions else ""
    return (
        f"memory: weights {si(fit.weight_bytes, 'B')} + KV cache {si(fit.cache_bytes, 'B')} {verdict} "
        f"{100 * CACHE_UTILIZATION:.0f}% of {si(fit.capacity_bytes, 'B')} ({fit.capacity_bytes / GIB:g} GiB; the "
        f"rest the margin for activations, CUDA context and allocator, vLLM's default): "
        f"{fit.cache_tokens:,} tokens of KV cache fit, the largest batch at {request.context:,} tokens "
        f"{fit.largest_batch:,}, the longest context at batch {request.batch:,} {fit.largest_context:,}{limit}"
    )


def generation_table(prediction: GenerationPrediction) -> pd.DataFrame:
    """One row per quantity (SI units): bound and estimate where both exist."""
    ttft, tpot = prediction.ttft, prediction.tpot
    rows = [
        ("ttft", "s", ttft.bound_s, ttft.estimate_s),
        ("tpot", "s", tpot.bound_s, tpot.estimate_s),
        ("tokens_per_s", "tokens/s", prediction.tokens_per_s_bound, prediction.tokens_per_s_estimate),
        ("kv_cache_bytes_per_token", "B", prediction.kv_bytes_per_token, None),
        ("kv_cache_bytes", "B", prediction.kv_cache_bytes, None),
    ]
    fit = prediction.fit
    if fit is not None:
        rows += [
            ("kv_cache_tokens_that_fit", "tokens", fit.cache_tokens, None),
            ("largest_batch", "sequences", fit.largest_batch, None),
            ("largest_context", "tokens", fit.largest_context, None),
        ]
    return pd.DataFrame(rows, columns=["quantity", "unit", "bound", "estimate"])
