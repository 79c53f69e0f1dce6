"""The work of scaled (FP8, FP4) and grouped matrix products, counted in the precision they run in: ATen's
``_scaled_mm`` (per-tensor, rowwise and block-scaled: DeepSeek-style 1x128 and 128x128, MXFP8, MXFP4, NVFP4),
``_scaled_mm_v2``, ``_scaled_grouped_mm`` (and ``_v2``) and ``_grouped_mm`` (MoE experts).

Each formula takes the op's arguments as a trace records them (:class:`hroofline.work.fused_ops.Argument`, in
schema order: PyTorch 2.14's ``native_functions.yaml``) and gives:

- FLOPs: 2 x M x N x K (a multiply-add is 2), K the logical contraction length: a ``float4_e2m1fn_x2`` tensor packs
  two FP4 values into each element, so its recorded K is half the logical one. Grouped products sum 2 M_g N K over
  their groups, and a group's extent (``offs``, cumulative ends along M, N or K) is in the offsets' values, which a
  trace does not record: such a product's work is unknown (None), and only the batched form without ``offs``
  (3-D x 3-D, every group alike) is counted. A CPU trace records the per-group products ``_grouped_mm`` runs
  there, which are counted instead.
- Their column: ``flops_tensor_fp8`` where both inputs are FP8 (e4m3 or e5m2, or the fnuz ones of AMD's MI300) or
  one is FP8 and the other FP4 (Blackwell's mixed f8f6f4 MMA runs at the FP8 rate), ``flops_tensor_fp4`` where both
  are FP4; the dense roofs of those names (``tensor_fp8``, ``tensor_fp4`` in ``metrics/gpus.toml`` and
  ``metrics/rates.toml``) judge them, as they judge the FP8 and FP4 instructions ncu counts. FP8 work never runs on
  CUDA cores, so it goes to the tensor column whatever the kernel's name. A 16- or 32-bit ``_grouped_mm`` goes to
  its float column as a matrix product (the trace import moves it to the tensor column its dtype and the GPU give).
- Bytes: each input read once at its element size (FP8 1 B, packed FP4 0.5 B a value, the scales at theirs:
  float32, e8m0 1 B, e4m3 1 B), the output written once at its dtype (``out_dtype``, else the inputs' for
  ``_scaled_mm`` and ``_grouped_mm``, bfloat16 for ``_scaled_grouped_mm``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from hroofline.work.fused_ops import Argument, Formula, FusedWork
from hroofline.work.ops import PRECISION_COLUMN

FP8_DTYPES = frozenset({torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz})
FP4_DTYPES = frozenset({torch.float4_e2m1fn_x2})
PACKED_VALUES = {torch.float4_e2m1fn_x2: 2}  # values per stored element
# c10::ScalarType codes as a trace writes a dtype argument (``out_dtype``: '15' is bfloat16)
SCALAR_TYPES: dict[int, torch.dtype] = {
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    15: torch.bfloat16,
    23: torch.float8_e5m2,
    24: torch.float8_e4m3fn,
    25: torch.float8_e5m2fnuz,
    26: torch.float8_e4m3fnuz,
    44: torch.float8_e8m0fnu,
    45: torch.float4_e2m1fn_x2,
}
# torch.nn.functional.ScalingType, as the _v2 ops record their recipes ('[3]'), and the dtype of its scales:
# TensorWise, RowWise, BlockWise1x16 (NVFP4: e4m3), BlockWise1x32 (MX: e8m0), BlockWise1x128, BlockWise128x128
RECIPE_SCALE_DTYPES: dict[int, torch.dtype] = {
    0: torch.float32,
    1: torch.float32,
    2: torch.float8_e4m3fn,
    3: torch.float8_e8m0fnu,
    4: torch.float32,
    5: torch.float32,
}


def precision_column(a: torch.dtype | None, b: torch.dtype | None) -> str | None:
    """The FLOP column of a product of ``a`` by ``b`` values: FP4 by FP4 on the FP4 tensor roof, FP8 by FP8 or FP4
    on the FP8 one; None for any other pair (a float product, counted by its dtype)."""
    low = FP8_DTYPES | FP4_DTYPES
    if a in FP4_DTYPES and b in FP4_DTYPES:
        return "flops_tensor_fp4"
    if a in low and b in low:
        return "flops_tensor_fp8"
    return None


def _arg(args: list[Argument], index: int) -> Argument:
    return args[index] if index < len(args) else Argument()


def _out_dtype(argument: Argument, default: torch.dtype | None) -> torch.dtype | None:
    value = argument.value
    return SCALAR_TYPES.get(value) if isinstance(value, int) else default


def _scale_list_bytes(scales: Argument, recipes: Argument) -> float | None:
    """A _v2 op's scales: a tensor list the trace records without dtypes, whose dtypes its recipes say."""
    kinds = recipes.value
    if not isinstance(kinds, list | tuple) or len(kinds) != len(scales.shapes):
        return None
    if any(kind not in RECIPE_SCALE_DTYPES for kind in kinds):
        return None
    return float(sum(math.prod(s) * RECIPE_SCALE_DTYPES[k].itemsize for s, k in zip(scales.shapes, kinds, strict=True)))


@dataclass(frozen=True)
class GemmSchema:
    """Where a scaled or grouped product's arguments are, after ``self`` and ``mat2``: its scale tensors (v1 ops),
    its scale lists with their recipes (_v2 ops), bias, ``out_dtype``, ``offs`` (grouped ops) and
    ``contraction_dim`` (_v2 ops); ``bf16_out``: bfloat16 without an ``out_dtype`` (else the inputs' dtype)."""

    out_dtype: int
    bias: int
    scales: tuple[int, ...] = ()
    scale_lists: tuple[tuple[int, int], ...] = ()
    offs: int | None = None
    contraction: int | None = None
    bf16_out: bool = False


def _read_besides(schema: GemmSchema, args: list[Argument]) -> float | None:
    """Bytes of the scales and the bias; None where a scale list's recipes do not say its dtype."""
    lists = [_scale_list_bytes(_arg(args, i), _arg(args, r)) for i, r in schema.scale_lists]
    if any(b is None for b in lists):
        return None
    tensors = [_arg(args, i) for i in (*schema.scales, schema.bias)]
    return sum(t.bytes for t in tensors if t.tensor is not None) + sum(b for b in lists if b is not None)


def _product(schema: GemmSchema) -> Formula:
    def formula(args: list[Argument]) -> FusedWork | None:
        """(M, K) by (K, N) -> (M, N), the contraction along ``contraction_dim`` where a _v2 call gives one; grouped
        ops batched, (G, M, K) by (G, K, N) -> (G, M, N): 2 x output elements x K. With offsets the groups' extents
        are values a trace does not record: unknown."""
        a, b = _arg(args, 0), _arg(args, 1)
        if a.tensor is None or b.tensor is None or a.dtype is None or b.dtype is None:
            return None
        grouped = schema.offs is not None
        if grouped and (_arg(args, schema.offs).tensor is not None or a.tensor[:1] != b.tensor[:1]):
            return None
        rank = 3 if grouped else 2
        if len(a.tensor) != rank or len(b.tensor) != rank:
            return None
        dims = _arg(args, schema.contraction).value if schema.contraction is not None else None
        k_a, k_b = (dims[0], dims[1]) if isinstance(dims, list | tuple) and len(dims) == 2 else (1, 0)
        k_a, k_b = k_a + rank - 2, k_b + rank - 2  # after the group dimension
        contraction = a.tensor[k_a] * PACKED_VALUES.get(a.dtype, 1)
        if contraction != b.tensor[k_b] * PACKED_VALUES.get(b.dtype, 1):
            return None
        rows, columns = a.tensor[2 * rank - 3 - k_a], b.tensor[2 * rank - 3 - k_b]
        out_shape = (*a.tensor[: rank - 2], rows, columns)
        out = _out_dtype(_arg(args, schema.out_dtype), torch.bfloat16 if schema.bf16_out else a.dtype)
        read = _read_besides(schema, args)
        column = precision_column(a.dtype, b.dtype) or PRECISION_COLUMN.get(a.dtype)
        if out is None or read is None or column is None:
            return None
        moved = a.bytes + b.bytes + read + math.prod(out_shape) * out.itemsize
        return FusedWork(2.0 * math.prod(out_shape) * contraction, moved, column, matmul=True)

    return formula


# Argument positions in PyTorch 2.14's native_functions.yaml (self and mat2 first):
# _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
# _scaled_mm_v2(self, mat2, scale_a[], recipe_a, swizzle_a, scale_b[], recipe_b, swizzle_b, bias, out_dtype,
#     contraction_dim, use_fast_accum)
# _grouped_mm(self, mat2, offs, bias, out_dtype)
# _scaled_grouped_mm(self, mat2, scale_a, scale_b, offs, bias, scale_result, out_dtype, use_fast_accum)
# _scaled_grouped_mm_v2(self, mat2, scale_a[], recipe_a, swizzle_a, scale_b[], recipe_b, swizzle_b, offs, bias,
#     out_dtype, contraction_dim, use_fast_accum)
FORMULAS: dict[str, Formula] = {
    "aten::_scaled_mm": _product(GemmSchema(out_dtype=6, bias=4, scales=(2, 3, 5))),
    "aten::_scaled_mm_v2": _product(GemmSchema(out_dtype=9, bias=8, scale_lists=((2, 3), (5, 6)), contraction=10)),
    "aten::_grouped_mm": _product(GemmSchema(out_dtype=4, bias=3, offs=2)),
    "aten::_scaled_grouped_mm": _product(GemmSchema(out_dtype=7, bias=5, scales=(2, 3, 6), offs=4, bf16_out=True)),
    "aten::_scaled_grouped_mm_v2": _product(
        GemmSchema(out_dtype=10, bias=9, scale_lists=((2, 3), (5, 6)), offs=8, contraction=11, bf16_out=True)
    ),
}


# The scaled products: what a float8 tensor subclass's aten::mm (torchao's Float8TrainingTensor) dispatches to,
# recorded inside an op whose own recorded inputs are the subclass's bfloat16 face
SCALED_OPS: frozenset[str] = frozenset(name for name in FORMULAS if "_scaled_" in name)


def formula_for(name: str) -> Formula | None:
    """The formula of a scaled or grouped product recorded as ``name`` (``aten::_scaled_mm``), if it is one."""
    return FORMULAS.get(name)
