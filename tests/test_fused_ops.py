"""Fused ops outside PyTorch's FLOP formulas (issue 46, item 5): FlashAttention 2/3, cuDNN attention, fused
RMSNorm, RoPE, SiLU-and-mul, the optimizers' _foreach_* and fused Adam/AdamW, each on a real shape against a count
written here from first principles (2 FLOPs a multiply-add, bytes = tensors moved once)."""

from __future__ import annotations

import gzip
import lzma
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from hroofline.importers.kineto import parse_trace
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.importers.trace_work import OpWork, op_work
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO, SHARED, need

BF16 = "c10::BFloat16"
B, S, H, D = 8, 512, 12, 64  # GPT-2 small's attention at batch 8, 512 tokens (the H200 step of tests/data)


def _args(*arguments: tuple[Any, str, str]) -> dict[str, Any]:
    """Trace args as the profiler writes them: (dims, type, concrete value) per argument in schema order."""
    return {
        "Input Dims": [a[0] for a in arguments],
        "Input type": [a[1] for a in arguments],
        "Concrete Inputs": [a[2] for a in arguments],
    }


def _tensor(*shape: int, kind: str = BF16) -> tuple[list[int], str, str]:
    return list(shape), kind, ""


def _value(text: str, kind: str = "Scalar") -> tuple[list[int], str, str]:
    return [], kind, text


NONE = ([], "", "")  # an optional tensor left out


def _flops(work: OpWork | None) -> float:
    assert work is not None
    return sum(work.flops.values())


def _fa2_forward(q: tuple[int, ...], k: tuple[int, ...], causal: bool, window_left: int = -1) -> dict[str, Any]:
    # flash_attn::_flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, window_size_left,
    # window_size_right, softcap, alibi_slopes, return_softmax)
    return _args(
        _tensor(*q), _tensor(*k), _tensor(*k), _value("0."), _value("0.125"), _value(str(causal)),
        _value(str(window_left)), _value("-1"), _value("0."), NONE, _value("False"),
    )  # fmt: skip


def test_flash_attention_2_counts_the_attended_pairs_of_its_two_products_forward_and_five_backward() -> None:
    tokens = B * S * H * D * 2  # bytes of one (B, S, H, D) bf16 tensor
    causal_pairs = sum(i + 1 for i in range(S))  # query i attends keys 0..i
    forward = op_work("flash_attn::_flash_attn_forward", _fa2_forward((B, S, H, D), (B, S, H, D), causal=True))
    # QK^T and PV: 2 FLOPs per multiply-add, D of them per pair each
    assert _flops(forward) == B * H * causal_pairs * (2 * D + 2 * D)
    assert forward.matmul_flops == {"flops_fp16": _flops(forward)} and forward.bf16
    assert forward.bytes == 3 * tokens + tokens + B * H * S * 4  # q, k, v read; out and float32 lse written
    full = op_work("flash_attn::_flash_attn_forward", _fa2_forward((B, S, H, D), (B, S, H, D), causal=False))
    assert _flops(full) == 4 * B * H * S * S * D
    # _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal,
    # window_size_left, window_size_right, softcap, alibi_slopes, deterministic, rng_state)
    backward = op_work(
        "flash_attn::_flash_attn_backward",
        _args(
            *[_tensor(B, S, H, D)] * 5, _tensor(B, H, S, kind="float"), *[_tensor(B, S, H, D)] * 3, _value("0."),
            _value("0.125"), _value("True"), _value("-1"), _value("-1"), _value("0."), NONE, _value("False"), NONE,
        ),
    )  # fmt: skip
    # S = QK^T recomputed, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q
    assert _flops(backward) == B * H * causal_pairs * 5 * 2 * D
    assert backward.bytes == 5 * tokens + B * H * S * 4 + 3 * tokens  # dout, q, k, v, out, lse read; dq, dk, dv


def test_a_sliding_window_and_a_shorter_query_count_flashattentions_bottom_right_mask() -> None:
    queries, keys, window = 300, 1000, 128
    work = op_work("flash_attn::_flash_attn_forward", _fa2_forward((1, queries, H, D), (1, keys, H, D), True, window))
    # query i sits on key i + 700 (bottom-right) and sees the window keys before it
    mask = torch.ones(queries, keys).tril(keys - queries).triu(keys - queries - window)
    assert _flops(work) == H * int(mask.sum()) * 4 * D


def test_packed_sequences_count_where_their_lengths_are_known_and_stay_unknown_where_not() -> None:
    def varlen(total: int, batch: int, longest: int) -> dict[str, Any]:
        # _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
        # softmax_scale, causal, window_size_left, window_size_right, softcap, alibi_slopes, return_softmax, ...)
        cu = _tensor(batch + 1, kind="int")
        return _args(
            _tensor(total, H, D), _tensor(total, H, D), _tensor(total, H, D), cu, cu, _value(str(longest)),
            _value(str(longest)), _value("0."), _value("0.125"), _value("True"), _value("-1"), _value("-1"),
        )  # fmt: skip

    equal = op_work("flash_attn::_flash_attn_varlen_forward", varlen(B * S, B, S))
    assert _flops(equal) == B * H * sum(i + 1 for i in range(S)) * 4 * D  # 8 sequences of 512, as the batched op
    # 8 sequences of at most 512 tokens, 3000 in all: their lengths are in cu_seqlens' values, not in the trace
    assert op_work("flash_attn::_flash_attn_varlen_forward", varlen(3000, B, S)) is None


def test_flash_attention_3_with_grouped_query_heads_on_llama3_8b_shapes() -> None:
    tokens, heads, kv_heads, dim = 8192, 32, 8, 128  # Llama 3 8B, one 8k-token sequence
    # flash_attn_3::_flash_attn_forward(q, k, v, k_new, v_new, qv, out_, cu_seqlens_q, cu_seqlens_k,
    # cu_seqlens_k_new, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, page_table, kv_batch_idx, leftpad_k,
    # rotary_cos, rotary_sin, seqlens_rotary, q_descale, k_descale, v_descale, softmax_scale, causal, ...)
    args = _args(
        _tensor(1, tokens, heads, dim), _tensor(1, tokens, kv_heads, dim), _tensor(1, tokens, kv_heads, dim),
        *[NONE] * 9, _value(""), _value(""), *[NONE] * 9, _value("0.088"), _value("True"), _value("-1"),
        _value("-1"),
    )  # fmt: skip
    work = op_work("flash_attn_3::_flash_attn_forward", args)
    assert _flops(work) == heads * tokens * (tokens + 1) // 2 * 4 * dim  # every query head, causal
    q_bytes, kv_bytes = tokens * heads * dim * 2, tokens * kv_heads * dim * 2
    assert work.bytes == q_bytes + 2 * kv_bytes + q_bytes + heads * tokens * 4


def test_cudnn_attention_which_pytorchs_flop_counter_lacks_counts_its_products() -> None:
    # aten::_cudnn_attention_forward(query, key, value, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
    # compute_log_sumexp, dropout_p, is_causal, return_debug_mask): (batch, heads, sequence, dim)
    qkv = [_tensor(B, H, S, D)] * 3
    args = _args(*qkv, NONE, NONE, NONE, _value(str(S)), _value(str(S)), _value("True"), _value("0."),
                 _value("False"), _value("False"))  # fmt: skip
    assert _flops(op_work("aten::_cudnn_attention_forward", args)) == 4 * B * H * S * S * D


# GPT-2 small's block parameters (12 tensors: under the 30 whose shapes the profiler records in a list): two layer
# norms (weight, bias), c_attn, attention c_proj, c_fc, MLP c_proj (weight, bias)
GPT2_BLOCK = [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,), (768, 3072), (3072,)]
GPT2_BLOCK += [(3072, 768), (768,)]
GPT2_BLOCK_ELEMENTS = 6 * 768 + 768 * 2304 + 2304 + 768 * 768 + 768 * 3072 + 3072 + 3072 * 768


def _cpu_trace_events(name: str) -> list[Any]:
    return _cpu_trace(name).cpu


@cache
def _cpu_trace(name: str) -> Any:
    """CPU ops of a fused step recorded here by torch.profiler: the arguments exactly as a trace records them."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in GPT2_BLOCK]
    for p in params:
        p.grad = torch.randn_like(p)
    lists = [[torch.randn(s) for s in GPT2_BLOCK] for _ in range(3)]
    x, w = torch.randn(2, 128, 4096), torch.randn(4096)
    steps = {
        "rms": lambda: torch.ops.aten._fused_rms_norm(x, [4096], w, 1e-6),
        "adamw": lambda: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=True).step(),
        "adam-amsgrad": lambda: torch.optim.Adam(params, lr=1e-3, amsgrad=True, fused=True).step(),
        "foreach": lambda: (
            torch._foreach_mul_(lists[0], 0.9),
            torch._foreach_add_(lists[0], lists[1], alpha=-0.01),
            torch._foreach_addcmul_(lists[0], lists[1], lists[2], value=0.001),
            torch._foreach_lerp_(lists[0], lists[1], 0.1),
            torch._foreach_addcdiv_(lists[0], lists[1], lists[2], value=-0.001),
            torch._foreach_sqrt(lists[2]),
            torch._foreach_sqrt_(lists[2]),
            torch._foreach_div_(lists[0], 2.0),
        ),
    }
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        steps[name]()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.json"
        prof.export_chrome_trace(str(path))
        return parse_trace(path.read_bytes(), path)


def test_fused_rms_norm_as_the_profiler_records_it() -> None:
    (event,) = [e for e in _cpu_trace_events("rms") if e.name == "aten::_fused_rms_norm"]
    work = op_work(event.name, event.args)
    elements, rows = 2 * 128 * 4096, 2 * 128
    # per element: x^2, accumulate, x rstd, x w (4); per row: mean, + eps, rsqrt (3). The meta replay counted 0.
    assert _flops(work) == 4 * elements + 3 * rows
    assert work.bytes == 4 * elements + 4 * 4096 + 4 * elements + 4 * rows  # x, w read; out, rstd written


def test_fused_rms_norm_backward_on_llama_shapes() -> None:
    tokens, hidden = 4096, 4096
    # aten::_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)
    args = _args(_tensor(tokens, hidden), _tensor(tokens, hidden), _value("[4096]", "ScalarList"),
                 _tensor(tokens, 1, kind="float"), _tensor(hidden), _value("[True, True]", "ScalarList"))  # fmt: skip
    work = op_work("aten::_fused_rms_norm_backward", args)
    # x_hat (1), g w (1), the row dot (2), the input gradient (3); the weight gradient (2); dot / n per row
    assert _flops(work) == 9 * tokens * hidden + tokens
    assert work.bytes == 2 * (3 * tokens * hidden + 2 * hidden) + 4 * tokens  # g, x, w, rstd read; dx, dw written


def test_foreach_ops_count_each_list_once_and_their_per_element_cost() -> None:
    events = [e for e in _cpu_trace_events("foreach") if e.name.startswith("aten::_foreach_")]
    works = [(e.name, op_work(e.name, e.args)) for e in events]
    n, list_bytes = GPT2_BLOCK_ELEMENTS, 4 * GPT2_BLOCK_ELEMENTS
    expected = [  # (FLOPs per element, lists read + lists written)
        ("aten::_foreach_mul_", 1, 1 + 1),
        ("aten::_foreach_add_", 2, 2 + 1),  # self + alpha x other: a multiply-add
        ("aten::_foreach_addcmul_", 2, 3 + 1),
        ("aten::_foreach_lerp_", 2, 2 + 1),
        ("aten::_foreach_addcdiv_", 2, 3 + 1),
        ("aten::_foreach_sqrt", 1, 1 + 1),
        ("aten::_foreach_sqrt_", 1, 1 + 1),
        ("aten::_foreach_div_", 1, 1 + 1),
    ]
    assert [(name, _flops(w), w.bytes) for name, w in works] == [(o, f * n, m * list_bytes) for o, f, m in expected]


@pytest.mark.parametrize(
    ("step", "op", "per_element", "state_lists"),
    [("adamw", "aten::_fused_adamw_", 13 + 2, 7), ("adam-amsgrad", "aten::_fused_adam_", 13 + 1, 7 + 2)],
)
def test_fused_adam_counts_its_update_per_parameter_element(step: str, op: str, per_element: int, state_lists) -> None:
    (event,) = [e for e in _cpu_trace_events(step) if e.name == op]
    work = op_work(event.name, event.args)
    # m (3), v (4), denom (3), update (3); AdamW's decay p -= lr wd p (2); amsgrad's max (1)
    assert _flops(work) == per_element * GPT2_BLOCK_ELEMENTS
    # read p, g, m, v and write p, m, v (amsgrad: max read and written), float32; one step value per tensor
    assert work.bytes == state_lists * 4 * GPT2_BLOCK_ELEMENTS + 12 * 4


def test_an_imported_trace_carries_the_fused_formulas_work() -> None:
    """As a user imports it: a CPU trace of a fused AdamW step, each op's work split over the ops it ran."""
    launches = trace_source(_cpu_trace("adamw"), "adamw", TraceOptions(cpu_ops=True), load_metric_set()).launches
    adamw = launches[launches["work_op"] == "aten::_fused_adamw_"]
    assert set(adamw["work_source"]) == {"formula"}
    assert adamw["flops_fp32"].sum() == pytest.approx(15 * GPT2_BLOCK_ELEMENTS, rel=1e-12)


def _vllm_capture_op(name: str) -> Any:
    path = need(SHARED / "fixtures" / "compiled" / "vllm-mi300x-piecewise-capture.json.gz")
    return next(e for e in parse_trace(gzip.decompress(path.read_bytes()), path).cpu if e.name == name)


def test_vllms_rotary_embedding_and_fused_add_rms_norm_on_its_recorded_shapes() -> None:
    """The capture trace vLLM wrote on an MI300X (TraceLens' tests, see ../shared/fixtures/compiled/README.md)."""
    rope = _vllm_capture_op("_C::rotary_embedding")
    assert rope.args["Input Dims"][:3] == [[8192], [8192, 4096], [8192, 512]]
    work = op_work(rope.name, rope.args)
    rotated = 8192 * (4096 // 64 + 512 // 64) * 64  # 64 query and 8 key heads of 64, the cache's rot_dim 64
    assert _flops(work) == 3 * rotated  # (x1 cos - x2 sin, x2 cos + x1 sin): 6 FLOPs a pair
    assert work.bytes == 2 * rotated * 2 + 8192 * 64 * 2 + 8192 * 8  # rotated read+written, cos/sin rows, positions
    norm = _vllm_capture_op("vllm::rocm_aiter_rmsnorm2d_fwd_with_add")
    work = op_work(norm.name, norm.args)
    elements = 8192 * 2880
    assert _flops(work) == 5 * elements + 3 * 8192  # residual add, then RMSNorm with a weight
    assert work.bytes == 2 * (4 * elements + 2880)  # x, residual, weight read; out, residual out written


def test_vllms_rocm_dense_gemm_on_its_recorded_shapes() -> None:
    gemm = _vllm_capture_op("vllm::rocm_unquantized_gemm")
    assert gemm.args["Input Dims"] == [[8192, 2880], [5120, 2880], [5120]]
    work = op_work(gemm.name, gemm.args)
    assert _flops(work) == 2 * 8192 * 5120 * 2880 and work.matmul_flops == {"flops_fp16": _flops(work)}
    assert work.bytes == 2 * (8192 * 2880 + 5120 * 2880 + 5120 + 8192 * 5120)  # x, weight, bias read; out written


def test_silu_and_mul_on_a_llama_mlp() -> None:
    tokens, inner = 4096, 11008  # Llama 2 7B's MLP
    work = op_work("_C::silu_and_mul", _args(_tensor(tokens, inner), _tensor(tokens, 2 * inner)))
    # silu(x) = x / (1 + exp(-x)): negate, exp, add, divide (4); times the gate (1)
    assert _flops(work) == 5 * tokens * inner
    assert work.bytes == 2 * (tokens * inner + tokens * 2 * inner)


def test_foreach_ops_whose_lists_the_trace_left_without_shapes_stay_unknown_not_zero() -> None:
    """GPT-2's 148-tensor lists: PyTorch's profiler writes [] for a list of over 30 tensors."""
    path = REPO / "tests" / "data" / "gpu-2026-11-28" / "traces" / "gpt2-bf16-compiled-trace.json.xz"
    foreach = [
        e for e in parse_trace(lzma.decompress(path.read_bytes()), path).cpu if e.name.startswith("aten::_foreach_")
    ]
    assert len(foreach) == 3 and all(e.args["Input Dims"][0] == [] for e in foreach)
    assert [op_work(e.name, e.args) for e in foreach] == [None] * 3
