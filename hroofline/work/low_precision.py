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


def _work(
    a: Argument, b: Argument, out_shape: tuple[int, ...], contraction: int, out: torch.dtype | None, read: float
) -> FusedWork | None:
    """2 x (output elements) x K FLOPs in the pair's column; bytes: a, b, ``read`` (scales, bias) and the output."""
    if a.dtype is None or b.dtype is None or out is None:
        return None
    logical = contraction * PACKED_VALUES.get(a.dtype, 1)
    column = precision_column(a.dtype, b.dtype) or PRECISION_COLUMN.get(a.dtype)
    if column is None:
        return None
    moved = a.bytes + b.bytes + read + math.prod(out_shape) * out.itemsize
    return FusedWork(2.0 * math.prod(out_shape) * logical, moved, column, matmul=True)


def _scaled_mm(version: int) -> Formula:
    # v1: (self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    # v2: (self, mat2, scale_a[], recipe_a, swizzle_a, scale_b[], recipe_b, swizzle_b, bias, out_dtype,
    #      contraction_dim, use_fast_accum)
    def formula(args: list[Argument]) -> FusedWork | None:
        """(M, K) by (K, N) -> (M, N), the contraction along ``contraction_dim`` where a _v2 call gives one."""
        a, b = _arg(args, 0), _arg(args, 1)
        if a.tensor is None or b.tensor is None or len(a.tensor) != 2 or len(b.tensor) != 2:
            return None
        if version == 1:
            scales = sum(_arg(args, i).bytes for i in (2, 3, 4, 5) if _arg(args, i).tensor is not None)
            out_dtype, dims = _out_dtype(_arg(args, 6), a.dtype), None
        else:
            a_scales = _scale_list_bytes(_arg(args, 2), _arg(args, 3))
            b_scales = _scale_list_bytes(_arg(args, 5), _arg(args, 6))
            if a_scales is None or b_scales is None:
                return None
            scales = a_scales + b_scales + _arg(args, 8).bytes
            out_dtype, dims = _out_dtype(_arg(args, 9), a.dtype), _arg(args, 10).value
        k_a, k_b = (dims[0], dims[1]) if isinstance(dims, list | tuple) and len(dims) == 2 else (1, 0)
        if a.tensor[k_a] != b.tensor[k_b]:
            return None
        return _work(a, b, (a.tensor[1 - k_a], b.tensor[1 - k_b]), a.tensor[k_a], out_dtype, scales)

    return formula


def _grouped(scaled: int) -> Formula:
    """``scaled``: 0 for _grouped_mm(self, mat2, offs, bias, out_dtype); 1 for _scaled_grouped_mm(self, mat2,
    scale_a, scale_b, offs, bias, scale_result, out_dtype, use_fast_accum); 2 for its _v2 (self, mat2, scale_a[],
    recipe_a, swizzle_a, scale_b[], recipe_b, swizzle_b, offs, bias, out_dtype, contraction_dim, use_fast_accum)."""
    offs_at, bias_at, out_at = {0: (2, 3, 4), 1: (4, 5, 7), 2: (8, 9, 10)}[scaled]

    def formula(args: list[Argument]) -> FusedWork | None:
        """Batched (G, M, K) by (G, K, N) -> (G, M, N), no offsets: 2 G M N K. With offsets the groups' extents
        are values the trace does not hold: unknown."""
        a, b, offs = _arg(args, 0), _arg(args, 1), _arg(args, offs_at)
        if offs.tensor is not None or a.tensor is None or b.tensor is None or len(a.tensor) != 3 or len(b.tensor) != 3:
            return None
        if a.tensor[0] != b.tensor[0] or a.tensor[2] != b.tensor[1]:
            return None
        read = _arg(args, bias_at).bytes
        if scaled == 1:
            read += _arg(args, 2).bytes + _arg(args, 3).bytes + _arg(args, 6).bytes
        elif scaled == 2:
            a_scales = _scale_list_bytes(_arg(args, 2), _arg(args, 3))
            b_scales = _scale_list_bytes(_arg(args, 5), _arg(args, 6))
            if a_scales is None or b_scales is None:
                return None
            read += a_scales + b_scales
        default = a.dtype if scaled == 0 else torch.bfloat16
        out_shape = (a.tensor[0], a.tensor[1], b.tensor[2])
        return _work(a, b, out_shape, a.tensor[2], _out_dtype(_arg(args, out_at), default), read)

    return formula


FORMULAS: dict[str, Formula] = {
    "aten::_scaled_mm": _scaled_mm(1),
    "aten::_scaled_mm_v2": _scaled_mm(2),
    "aten::_grouped_mm": _grouped(0),
    "aten::_scaled_grouped_mm": _grouped(1),
    "aten::_scaled_grouped_mm_v2": _grouped(2),
}


def formula_for(name: str) -> Formula | None:
    """The formula of a scaled or grouped product recorded as ``name`` (``aten::_scaled_mm``), if it is one."""
    return FORMULAS.get(name)
