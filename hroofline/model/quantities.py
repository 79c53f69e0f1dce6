"""The vocabulary of a run: the quantities every launch carries, the roofs they are judged against, their labels.

Data, no stage: :mod:`hroofline.model.run` (the :class:`Run`), the roof domain and every stage speak these words.
"""

from __future__ import annotations

from typing import Any

# FLOPs on the CUDA cores, per precision.
CORE_FLOP_QUANTITIES: tuple[str, ...] = ("flops_fp64", "flops_fp32", "flops_fp16")
# FLOPs on the tensor cores, per input precision (fp16_acc16: FP16 inputs with an FP16 accumulator).
TENSOR_FLOP_QUANTITIES: tuple[str, ...] = (
    "flops_tensor_tf32",
    "flops_tensor_fp16",
    "flops_tensor_fp16_acc16",
    "flops_tensor_bf16",
    "flops_tensor_fp8",
    "flops_tensor_fp4",
    "flops_tensor_fp64",
    # 2:4-sparse tensor work (ncu's _sparsity_on paths), judged against the sparse roof (twice the dense one)
    "flops_tensor_tf32_sparse",
    "flops_tensor_fp16_sparse",
    "flops_tensor_fp16_acc16_sparse",
    "flops_tensor_bf16_sparse",
    "flops_tensor_fp8_sparse",
)
FLOP_QUANTITIES: tuple[str, ...] = CORE_FLOP_QUANTITIES + TENSOR_FLOP_QUANTITIES
# Integer tensor operations: counted and shown, never mixed into FLOPs.
OP_QUANTITIES: tuple[str, ...] = (
    "ops_tensor_int8",
    "ops_tensor_int4",
    "ops_tensor_int1",
    "ops_tensor_int8_sparse",
    "ops_tensor_int4_sparse",
)
BYTE_QUANTITIES: tuple[str, ...] = ("bytes_l1", "bytes_l2", "bytes_hbm")
QUANTITIES: tuple[str, ...] = FLOP_QUANTITIES + OP_QUANTITIES + BYTE_QUANTITIES

# Utilisation of the dense peaks, % (hroofline/analyze/utilization.py): of model FLOPs, of hardware FLOPs, of HBM.
UTILIZATION_COLUMNS: tuple[str, ...] = ("mfu_pct", "hfu_pct", "mbu_pct")

LEVELS: tuple[str, ...] = ("l1", "l2", "hbm")
# The compute roofs: one per FLOP (or operation) quantity, named as in metrics/gpus.toml and ceilings files.
COMPUTE_ROOF_OF: dict[str, str] = {
    "flops_fp64": "fp64",
    "flops_fp32": "fp32",
    "flops_fp16": "fp16",
    **{q: q.removeprefix("flops_") for q in TENSOR_FLOP_QUANTITIES},
    **{q: q.replace("ops_", "") for q in OP_QUANTITIES},
}
COMPUTE_ROOFS: tuple[str, ...] = tuple(COMPUTE_ROOF_OF.values())
TENSOR_ROOFS: tuple[str, ...] = tuple(k for k in COMPUTE_ROOFS if k.startswith("tensor_"))
ROOF_KEYS: tuple[str, ...] = LEVELS + COMPUTE_ROOFS

LEVEL_LABELS: dict[str, str] = {"l1": "L1", "l2": "L2", "hbm": "HBM"}
ROOF_LABELS: dict[str, str] = {
    **LEVEL_LABELS,
    "fp64": "FP64",
    "fp32": "FP32",
    "fp16": "FP16",
    "tensor_tf32": "TF32 tensor",
    "tensor_fp16": "FP16 tensor",
    "tensor_fp16_acc16": "FP16 tensor (FP16 acc.)",
    "tensor_bf16": "BF16 tensor",
    "tensor_fp8": "FP8 tensor",
    "tensor_fp4": "FP4 tensor",
    "tensor_fp64": "FP64 tensor",
    "tensor_int8": "INT8 tensor",
    "tensor_int4": "INT4 tensor",
    "tensor_int1": "INT1 tensor",
    "tensor_tf32_sparse": "TF32 tensor 2:4 sparse",
    "tensor_fp16_sparse": "FP16 tensor 2:4 sparse",
    "tensor_fp16_acc16_sparse": "FP16 tensor (FP16 acc.) 2:4 sparse",
    "tensor_bf16_sparse": "BF16 tensor 2:4 sparse",
    "tensor_fp8_sparse": "FP8 tensor 2:4 sparse",
    "tensor_int8_sparse": "INT8 tensor 2:4 sparse",
    "tensor_int4_sparse": "INT4 tensor 2:4 sparse",
}


def compute_roofs_present(points: Any) -> list[str]:
    """Compute roofs whose FLOPs (or operations) the drawn kernels have: the ones worth drawing."""
    return [key for column, key in COMPUTE_ROOF_OF.items() if column in points and (points[column].fillna(0) > 0).any()]
