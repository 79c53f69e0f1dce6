"""Low precision on the trace path (issue 47, item 3): FP8 and FP4 scaled products and grouped (MoE) GEMMs counted
in their precision, 2 x M x N x K with K the logical contraction length, and judged against that precision's dense
roof. Every expected figure is counted here from the shapes this file writes (2 FLOPs a multiply-add; bytes: inputs
and scales read once at their element size, the output written once)."""

from __future__ import annotations

import importlib.util
import io
import lzma
import math
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from hroofline.importers.kineto import parse_trace
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.importers.trace_work import op_work
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import datasheet_ceilings
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO

E4M3, E5M2, BF16 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16
# Recorded by tests/data/gpu-2026-11-28/low-precision/record.py on an H200 (its README says how)
H200_TRACE = REPO / "tests" / "data" / "gpu-2026-11-28" / "low-precision" / "h200-trace.json.xz"
SUBCLASS_SCRIPT = H200_TRACE.with_name("record_float8_subclass.py")
# NVIDIA's H100 SXM datasheet: 1,979 TFLOP/s dense FP8 (3,958 with sparsity); B200: 9 PFLOP/s dense FP4
H100_FP8_DENSE = 1979e12
B200_FP4_DENSE = 9e15


def _trace_of(call: Any, device: str = "cpu") -> Any:
    """``call`` under torch.profiler on the CPU (on meta tensors too): its ops' arguments as a trace records them."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        call()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        return parse_trace(path.read_bytes(), path)


@cache
def _cpu_run() -> pd.DataFrame:
    """FP8 products and grouped GEMMs run on the CPU (PyTorch 2.14 has CPU kernels for _scaled_mm and _grouped_mm;
    _scaled_grouped_mm has none), imported as a user imports a CPU trace."""
    torch.manual_seed(0)

    def fp8(*shape: int, dtype: torch.dtype = E4M3) -> torch.Tensor:
        return torch.randn(*shape).to(dtype)

    offs = torch.tensor([16, 48, 64], dtype=torch.int32)  # three experts of 16, 32 and 16 rows

    def step() -> None:
        torch._scaled_mm(fp8(64, 128), fp8(96, 128).t(), torch.tensor(1.0), torch.tensor(1.0), out_dtype=BF16)
        torch._scaled_mm(fp8(64, 128), fp8(96, 128).t(), torch.ones(64, 1), torch.ones(1, 96), out_dtype=BF16)
        torch._scaled_mm(fp8(32, 64), fp8(48, 64, dtype=E5M2).t(), torch.tensor(2.0), torch.tensor(0.5))
        torch._grouped_mm(torch.randn(4, 16, 64, dtype=BF16), torch.randn(4, 64, 32, dtype=BF16))
        torch._grouped_mm(torch.randn(64, 64, dtype=BF16), torch.randn(3, 64, 32, dtype=BF16), offs=offs)

    trace = _trace_of(step)
    return trace_source(trace, "lowprec", TraceOptions(cpu_ops=True), load_metric_set()).launches


def _summed(launches: pd.DataFrame, op: str, column: str) -> float:
    return float(launches.loc[launches["work_op"] == op, column].sum())


def test_fp8_scaled_mm_traced_on_the_cpu_counts_2mnk_in_the_fp8_column() -> None:
    """Per-tensor and rowwise e4m3 -> bf16, and e4m3 x e5m2 -> e4m3 (no out_dtype: the inputs'): 2 M N K FLOPs, all
    of them FP8 tensor work (the CPU upcasts to an aten::mm inside the op: its launch shares the op's work, and no
    float32 FLOPs are counted besides)."""
    launches = _cpu_run()
    scaled = launches[launches["work_op"] == "aten::_scaled_mm"]
    assert set(scaled["work_source"]) == {"formula"}
    flops = 2 * 64 * 96 * 128 * 2 + 2 * 32 * 48 * 64
    assert _summed(launches, "aten::_scaled_mm", "flops_tensor_fp8") == pytest.approx(flops, rel=1e-12)
    others = [c for c in FLOP_QUANTITIES if c != "flops_tensor_fp8"]
    assert scaled[others].fillna(0).to_numpy().sum() == 0
    per_tensor = 64 * 128 + 96 * 128 + 4 + 4 + 64 * 96 * 2  # e4m3 1 B, float32 scales, bf16 out
    rowwise = 64 * 128 + 96 * 128 + 64 * 4 + 96 * 4 + 64 * 96 * 2
    mixed = 32 * 64 + 48 * 64 + 4 + 4 + 32 * 48 * 1  # out in the inputs' e4m3
    assert _summed(launches, "aten::_scaled_mm", "bytes_l1") == pytest.approx(per_tensor + rowwise + mixed, rel=1e-12)


def test_grouped_mm_on_the_cpu_batched_and_by_offsets() -> None:
    """Batched (no offsets): 2 G M N K by the formula. With offsets, the experts' row counts are values a trace does
    not record: the op itself stays unknown, and the CPU's per-expert products (one aten::mm each) count instead,
    their sum that of the experts' rows."""
    launches = _cpu_run()
    assert _summed(launches, "aten::_grouped_mm", "flops_fp16") == pytest.approx(2 * 4 * 16 * 32 * 64, rel=1e-12)
    by_expert = launches[launches["work_op"] == "aten::mm"]
    assert by_expert["flops_fp16"].sum() == pytest.approx(sum(2 * rows * 32 * 64 for rows in (16, 32, 16)), rel=1e-12)
    grouped = launches[launches["kernel"] == "aten::_grouped_mm"]
    assert (grouped["work_source"] == "unknown").sum() == 1  # the one with offsets: not 0, unknown


def _meta(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_block_scaled_mxfp8_mxfp4_and_nvfp4_traced_on_the_meta_device() -> None:
    """No GPU here runs them (Blackwell's); their recorded arguments come from calls on meta tensors, which the
    profiler records as it would on the GPU. FP4 packs two values an element: K = 2 x its recorded K, 0.5 B a
    value. MX scales are e8m0 (1 B) every 32 values, NVFP4's e4m3 (1 B) every 16."""
    m, n, k = 256, 384, 512
    e8m0, fp4 = torch.float8_e8m0fnu, torch.float4_e2m1fn_x2
    from torch.nn.functional import ScalingType, SwizzleType, scaled_mm

    def step() -> None:
        a8, b8 = _meta(m, k, dtype=E4M3), _meta(n, k, dtype=E4M3).t()
        a4, b4 = _meta(m, k // 2, dtype=fp4), _meta(n, k // 2, dtype=fp4).t()
        mx_a, mx_b = _meta(m * k // 32, dtype=e8m0), _meta(n * k // 32, dtype=e8m0)
        torch._scaled_mm(a8, b8, mx_a, mx_b, out_dtype=BF16)  # MXFP8
        torch._scaled_mm(a4, b4, mx_a, mx_b, out_dtype=BF16)  # MXFP4
        torch._scaled_mm(a4, b4, _meta(m * k // 16, dtype=E4M3), _meta(n * k // 16, dtype=E4M3), out_dtype=BF16)
        block = ScalingType.BlockWise1x32
        scaled_mm(a8, b8, mx_a, block, mx_b, block, SwizzleType.SWIZZLE_32_4_4, SwizzleType.SWIZZLE_32_4_4)

    ops = [e for e in _trace_of(step).cpu if e.name in ("aten::_scaled_mm", "aten::_scaled_mm_v2")]
    works = [op_work(e.name, e.args) for e in ops]
    assert [e.name for e in ops] == ["aten::_scaled_mm"] * 3 + ["aten::_scaled_mm_v2"]
    assert all(w is not None for w in works)
    product, out = 2.0 * m * n * k, m * n * 2
    mx_scales, nv_scales = (m + n) * k // 32, (m + n) * k // 16
    expected = [
        ("flops_tensor_fp8", (m + n) * k + mx_scales + out),
        ("flops_tensor_fp4", (m + n) * k / 2 + mx_scales + out),
        ("flops_tensor_fp4", (m + n) * k / 2 + nv_scales + out),
        ("flops_tensor_fp8", (m + n) * k + mx_scales + out),  # the _v2 op: its recipes say the scales are e8m0
    ]
    for work, (column, moved) in zip(works, expected, strict=True):
        assert work is not None and work.flops == {column: product} and work.bytes == moved


def test_the_roofs_they_are_judged_against_exist() -> None:
    assert datasheet_ceilings(resolve_gpu("h100-sxm")).peak("tensor_fp8") == H100_FP8_DENSE
    assert datasheet_ceilings(resolve_gpu("b200")).peak("tensor_fp4") == B200_FP4_DENSE


def _top(cli, *args: str) -> pd.DataFrame:
    result = cli(*args)
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out))


# record.py's products, in its order: (kernel-name fragment, FLOPs, column)
H200_PRODUCTS = [
    ("nvjet_sm90_qqtst_144x128", 2 * 4096 * 8192 * 8192, "flops_tensor_fp8"),  # per-tensor e4m3 -> bf16
    ("nvjet_sm90_qqtst_128x128", 2 * 4096 * 8192 * 8192, "flops_tensor_fp8"),  # rowwise
    ("nvjet_sm90_rqsss", 2 * 2048 * 4096 * 4096, "flops_tensor_fp8"),  # e4m3 x e5m2 -> float32
]


@pytest.mark.parametrize("gpu", [(), ("--gpu", "h100-sxm", "--force-gpu")])
def test_fp8_gemms_of_an_h200_trace_on_the_fp8_dense_roof(cli, gpu: tuple[str, ...]) -> None:
    """The H200's trace judged as the H200 it names, and as an H100 SXM (the same 132 SMs, FP8 rate and tensor
    clock): each FP8 GEMM's FLOPs are 2 M N K in flops_tensor_fp8, bound by the FP8 tensor roof, its time at roof
    those FLOPs over the datasheet's 1,979 TFLOP/s (8,192 FLOP/SM/cycle x 132 SMs x 1.83 GHz: 1,978.9)."""
    assert cli("import", H200_TRACE, "--run", "fp8", *gpu).code == 0
    kernels = _top(cli, "kernels", "fp8", "--format", "csv")
    top = _top(cli, "top", "fp8", "-n", "50", "--format", "csv")
    for fragment, flops, column in H200_PRODUCTS:
        launch = kernels[kernels["kernel"].str.contains(fragment)]
        assert len(launch) == 1 and launch[column].item() == flops
        row = top[top["kernel"].str.contains(fragment)]
        assert row["bound"].item() == "FP8 tensor"
        assert row["time_at_roof_s"].item() == pytest.approx(flops / H100_FP8_DENSE, rel=1e-4)
        assert 60 < row["roof_pct"].item() < 80  # 1.27 to 1.52 PFLOP/s measured (the file's kernel times)


def test_grouped_gemms_of_an_h200_trace() -> None:
    """Batched bf16 _grouped_mm (3-D x 3-D): 2 G M N K on the BF16 tensor roof, none of it on the kernel that
    prepares the groups; with offsets (MoE experts, _scaled_grouped_mm and _grouped_mm) the experts' rows are not
    in the trace: unknown, not 0."""
    trace = parse_trace(lzma.decompress(H200_TRACE.read_bytes()), H200_TRACE)
    launches = trace_source(trace, "h200", TraceOptions(), load_metric_set()).launches
    batched = launches[launches["kernel"].str.contains("GemmUniversal") & (launches["work_source"] == "formula")]
    assert batched["flops_tensor_bf16"].sum() == 2 * 8 * 1024 * 2048 * 4096
    prepare = launches[launches["kernel"].str.contains("prepare_grouped_gemm_data")]
    assert len(prepare) == 4 and (prepare[list(FLOP_QUANTITIES)].fillna(0).to_numpy() == 0).all()
    unknown = launches[launches["kernel"].str.contains("GemmUniversal") & (launches["work_source"] == "unknown")]
    assert len(unknown) == 3 and unknown["flops_tensor_fp8"].isna().all()
    assert np.isnan(unknown[list(FLOP_QUANTITIES)].to_numpy()).all()
    assert math.isclose(float(launches["flops_tensor_fp8"].sum()), sum(f for _, f, _ in H200_PRODUCTS))


def _recorded(*arguments: tuple[list[int], str, str]) -> dict[str, Any]:
    """Trace args as the profiler writes them: (dims, type, concrete value) per argument in schema order."""
    return {
        "Input Dims": [a[0] for a in arguments],
        "Input type": [a[1] for a in arguments],
        "Concrete Inputs": [a[2] for a in arguments],
    }


FP8_TYPE, FP4_TYPE, FLOAT = "c10::Float8_e4m3fn", "c10::Float4_e2m1fn_x2", "float"
NONE = ([], "", "")


def test_mixed_fp8_by_fp4_batched_scaled_grouped_and_fp8_attention_columns() -> None:
    """FP8 by FP4 (Blackwell's f8f6f4 MMA, at the FP8 rate): K is the FP8 side's, the FP4 side's doubled; a batched
    _scaled_grouped_mm (no offsets) is 2 G M N K with its default bfloat16 output; FP8 FlashAttention counts on the
    FP8 roof too (before, the FP16 one)."""
    mixed = op_work(
        "aten::_scaled_mm",
        _recorded(
            ([128, 256], FP8_TYPE, ""), ([128, 64], FP4_TYPE, ""), ([], FLOAT, ""), ([], FLOAT, ""),
            NONE, NONE, ([], "Scalar", "15"), ([], "Scalar", "False"),
        ),
    )  # fmt: skip
    assert mixed is not None and mixed.flops == {"flops_tensor_fp8": 2.0 * 128 * 64 * 256}
    assert mixed.bytes == 128 * 256 + 128 * 64 + 4 + 4 + 128 * 64 * 2
    batched = op_work(
        "aten::_scaled_grouped_mm",
        _recorded(
            ([4, 64, 128], FP8_TYPE, ""), ([4, 128, 32], FP8_TYPE, ""), ([4, 64], FLOAT, ""), ([4, 32], FLOAT, ""),
            NONE, NONE, NONE, ([], "", ""), ([], "Scalar", "False"),
        ),
    )  # fmt: skip
    assert batched is not None and batched.flops == {"flops_tensor_fp8": 2.0 * 4 * 64 * 32 * 128}
    assert batched.bytes == 4 * 64 * 128 + 4 * 128 * 32 + 4 * 64 * 4 + 4 * 32 * 4 + 4 * 64 * 32 * 2
    q = ([2, 128, 4, 64], FP8_TYPE, "")  # flash_attn::_flash_attn_forward(q, k, v, dropout_p, scale, causal, ...)
    attention = op_work(
        "flash_attn::_flash_attn_forward",
        _recorded(q, q, q, ([], "Scalar", "0."), ([], "Scalar", "0.125"), ([], "Scalar", "False"),
                  ([], "Scalar", "-1"), ([], "Scalar", "-1"), ([], "Scalar", "0."), NONE, ([], "Scalar", "False")),
    )  # fmt: skip
    assert attention is not None and attention.flops == {"flops_tensor_fp8": 2.0 * 2 * 128 * 128 * 4 * (64 + 64)}


def _float8_face() -> type[torch.Tensor]:
    """torchao's float8 training pattern (Float8TrainingTensor) as record_float8_subclass.py has it: a tensor that
    shows itself as bfloat16, holds e4m3 data and a scale, and runs aten::mm as torch._scaled_mm."""
    spec = importlib.util.spec_from_file_location("record_float8_subclass", SUBCLASS_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Float8Face


def test_a_float8_subclass_mm_counts_as_the_scaled_mm_inside_it_beside_bf16_work() -> None:
    """The profiler records the subclass's aten::mm with bfloat16 inputs around the aten::_scaled_mm it dispatched
    to: the FP8 product ran, and its 2 M N K land in flops_tensor_fp8 (before, all of them were the outer mm's
    bfloat16 FLOPs). A bfloat16 product of the same step stays in its own column: a mixed FP8 training step's
    FLOPs per precision."""
    one, float8_face = torch.tensor(1.0), _float8_face()
    a = float8_face(torch.randn(64, 128).to(E4M3), one)
    b = float8_face(torch.randn(96, 128).to(E4M3).t(), one)
    x, w = torch.randn(32, 128, dtype=BF16), torch.randn(128, 48, dtype=BF16)

    def step() -> None:
        torch.mm(a, b)
        torch.mm(x, w)

    launches = trace_source(_trace_of(step), "float8", TraceOptions(cpu_ops=True), load_metric_set()).launches
    assert launches["flops_tensor_fp8"].sum() == pytest.approx(2 * 64 * 96 * 128, rel=1e-12)
    assert set(launches.loc[launches["flops_tensor_fp8"] > 0, "work_op"]) == {"aten::_scaled_mm"}
    assert launches["flops_fp16"].sum() == pytest.approx(2 * 32 * 48 * 128, rel=1e-12)  # the bfloat16 mm alone


def test_an_h200_step_of_a_float8_subclass_mm_beside_a_bf16_one() -> None:
    """record_float8_subclass.py on an H200: the subclass's FP8 GEMM (cuBLAS's nvjet qqtst kernel, launched under
    aten::mm > aten::_scaled_mm) on the FP8 tensor column, the plain bfloat16 one on the BF16 column: 2 x 4096 x
    4096 x 8192 each, apart (before: both on BF16)."""
    path = H200_TRACE.with_name("float8-subclass-h200-trace.json.xz")
    trace = parse_trace(lzma.decompress(path.read_bytes()), path)
    launches = trace_source(trace, "float8", TraceOptions(), load_metric_set()).launches.set_index("kernel")
    fp8 = launches.filter(like="nvjet_sm90_qqtst", axis=0)
    bf16 = launches.filter(like="nvjet_sm90_tst", axis=0)
    flops = 2 * 4096 * 4096 * 8192
    assert fp8["flops_tensor_fp8"].item() == flops and fp8["flops_tensor_bf16"].item() == 0
    assert bf16["flops_tensor_bf16"].item() == flops and bf16["flops_tensor_fp8"].item() == 0
    assert fp8["work_op"].item() == "aten::_scaled_mm"
