"""The work of an Inductor-generated Triton kernel, from the CPU event PyTorch records for its launch.

``torch.compile`` runs fused kernels that no ATen op launched: PyTorch (2.4 and later) records each launch as a
CPU event named after the kernel (``triton_poi_fused_add_cos_sin_0``; ``poi`` pointwise, ``red``/``per``
reductions, ``tem`` GEMM/convolution templates, ``for`` foreach) whose args carry the kernel's arguments
(``Input Dims``, ``Input type``, ``Input Strides``; sizes such as xnumel and rnumel in ``Concrete Inputs``) and,
with ``TORCHINDUCTOR_BENCHMARK_KERNEL=1``, Inductor's own estimates ``kernel_num_gb`` and ``kernel_flop``.

- Bytes: ``kernel_num_gb`` x 1e9 where the trace has it: Inductor's ``estimate_kernel_num_bytes``
  (torch/_inductor/codegen/simd.py) counts each buffer argument once at its size (a sliced one as its slices),
  in-place buffers twice (read and written). Else from the recorded tensors: each tensor argument moved once, at
  the distinct elements its strides cover (a broadcast stride-0 dimension counts once). The event does not say
  which arguments are outputs (Inductor's in_ptr/out_ptr/in_out_ptr names are in the generated source only), and
  none needs telling apart: an input is read once, an output written once; an in_out_ptr, read and written, is
  counted once, so the count is a floor.
- FLOPs: ``kernel_flop`` where the trace has it (Inductor's count of the matmul, convolution and attention nodes
  it fused, by PyTorch's FLOP formulas); a template (``triton_tem_*``) without it from its shapes (an A of M x K,
  a B of K x N and an output of M x N: 2 M N K); plus, for pointwise and reduction kernels, the element-wise ops
  the kernel's name lists (``fused_add_cos_sin``), one FLOP per element of the kernel's iteration space (xnumel x
  rnumel, from ``Concrete Inputs``) for each that does arithmetic (a nonzero cost in ``metrics/cpu_ops.toml``): an
  estimate kept low (an op fused after a reduction runs on its smaller output, the one case it counts high). The
  table's full costs price an op run alone over its whole tensors; fused, ops share their loads and a
  backward kernel recomputes a forward op from saved statistics (on the H200 GPT-2 step the full costs put the
  layer-norm backward kernels at the H200's FP32 peak, at 40% of its HBM bandwidth). Copies, views, casts and
  indexing cost no FLOPs. A name listing an op of no known cost leaves the FLOPs unknown, never 0. Pointwise
  FLOPs go to the FP32 column: Inductor computes 16-bit inputs in float32.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from hroofline.importers.kineto import CpuEvent, input_dims
from hroofline.importers.trace_work import DTYPES, OpWork
from hroofline.work.ops import element_costs

INDUCTOR = "inductor"  # work_source: Inductor's own kernel_num_gb / kernel_flop
TENSORS = "tensors"  # work_source: bytes from the kernel's recorded tensors
_KERNEL = re.compile(r"^triton_(poi|red|per|tem|for|mm|bmm|conv)_")
# Ops a fused kernel's name lists that do no arithmetic: copies, casts, views, indexing, fills, compares (0 FLOPs, as
# the CPU path counts ops metrics/cpu_ops.toml does not list); prepare_softmax_online is Inductor's split of the
# softmax the name also lists (counted there); a GEMM or convolution named in a pointwise kernel is the library call
# whose operand it prepares (a cast, a copy): its FLOPs are that call's.
_NO_FLOPS = frozenset(
    [
        "view",
        "_unsafe_view",
        "_to_copy",
        "to_copy",
        "copy",
        "copy_",
        "clone",
        "expand",
        "slice",
        "slice_scatter",
        "select",
        "select_scatter",
        "cat",
        "split",
        "transpose",
        "t",
        "permute",
        "unsqueeze",
        "squeeze",
        "reshape",
        "as_strided",
        "alias",
        "detach",
        "lift_fresh",
        "empty",
        "full",
        "fill",
        "fill_",
        "zeros",
        "ones",
        "zero",
        "zero_",
        "new_zeros",
        "new_ones",
        "arange",
        "scalar_tensor",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_not",
        "logical_and",
        "logical_or",
        "constant_pad_nd",
        "embedding",
        "embedding_dense_backward",
        "index",
        "index_put",
        "index_select",
        "gather",
        "scatter",
        "scatter_add",
        "stack",
        "unbind",
        "unfold",
        "bernoulli",
        "rand",
        "randn",
        "philox_rand",
        "lift",
        "squeeze_copy",
        "permute_copy",
        "expand_copy",
        "view_copy",
        "prepare_softmax_online",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "convolution",
        "convolution_backward",
        "moe_forward",  # vLLM's MoE op, whose input the kernel pads (triton_poi_fused_constant_pad_nd_moe_forward)
    ]
)


def is_inductor_kernel(event: CpuEvent) -> bool:
    """A CPU event recorded for the launch of an Inductor-generated Triton kernel."""
    return bool(_KERNEL.match(event.name)) or event.args.get("kernel_backend") == "triton"


@dataclass(frozen=True)
class InductorWork:
    work: OpWork
    source: str  # INDUCTOR or TENSORS
    flops_known: bool  # False: the FLOPs are unknown (the bytes are still known)


def inductor_work(event: CpuEvent) -> InductorWork | None:
    """The kernel's work and where it came from; None where neither the trace's estimate nor its tensors give
    its bytes."""
    args = event.args
    tensors = _tensors(args)
    num_gb = _number(args.get("kernel_num_gb"))
    if num_gb is not None:
        moved, source = num_gb * 1e9, INDUCTOR
    elif tensors:
        moved, source = float(sum(nbytes for nbytes, _ in tensors)), TENSORS
    else:
        return None
    found = _KERNEL.match(event.name)
    kind = found.group(1) if found else None
    gemm = _number(args.get("kernel_flop"))
    if kind == "tem" and not gemm:
        gemm = _template_flops(input_dims(args) or [])
    pointwise = 0.0 if kind == "tem" else _named_flops(event.name, _elements(args))
    column = _gemm_column(tensors)
    flops: dict[str, float] = {"flops_fp32": pointwise or 0.0}
    if gemm:
        flops[column] = flops.get(column, 0.0) + gemm
    work = OpWork(
        flops=flops,
        bytes=moved,
        main_op=event.name,
        bf16="c10::BFloat16" in _list(args.get("Input type")),
        matmul_flops={column: gemm} if gemm else {},
    )
    return InductorWork(work, source, flops_known=pointwise is not None and (kind != "tem" or gemm is not None))


def _tensors(args: dict[str, Any]) -> list[tuple[float, str]]:
    """(bytes, type name) of each tensor argument: the distinct elements its strides cover."""
    dims = input_dims(args) or []
    types = _list(args.get("Input type"))
    strides = _list(args.get("Input Strides"))
    found = []
    for index, shape in enumerate(dims):
        kind = types[index] if index < len(types) else ""
        if not isinstance(kind, str) or kind not in DTYPES or not isinstance(shape, list):
            continue
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        stride = strides[index] if index < len(strides) and isinstance(strides[index], list) else []
        if len(stride) == len(shape):
            elements = math.prod(d for d, s in zip(shape, stride, strict=True) if s != 0)
        else:
            elements = math.prod(shape)
        found.append((float(elements * DTYPES[kind].itemsize), kind))
    return found


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _gemm_column(tensors: list[tuple[float, str]]) -> str:
    kinds = {kind for _, kind in tensors}
    if kinds & {"c10::BFloat16", "c10::Half"}:
        return "flops_fp16"
    return "flops_fp64" if kinds == {"double"} else "flops_fp32"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _elements(args: dict[str, Any]) -> int | None:
    """The kernel's iteration space: the product of its trailing integer size arguments (xnumel, rnumel)."""
    concrete = _list(args.get("Concrete Inputs"))
    sizes = []
    for value in reversed(concrete):
        if not isinstance(value, str) or not value.strip().isdigit():
            break
        sizes.append(int(value))
    return math.prod(sizes) if sizes else None


def _template_flops(dims: list[Any]) -> float | None:
    """2 M N K of a GEMM template whose arguments hold an M x K, a K x N and an M x N matrix (batched alike)."""
    shapes = [tuple(d) for d in dims if isinstance(d, list) and len(d) >= 2 and all(isinstance(x, int) for x in d)]
    for a in shapes:
        for b in shapes:
            if a[:-2] != b[:-2] or a[-1] != b[-2]:
                continue
            out = (*a[:-1], b[-1])
            if out in shapes and a is not b:
                return 2.0 * math.prod(out) * a[-1]
    return None


def _named_flops(name: str, elements: int | None) -> float | None:
    """FLOPs of the element-wise ops a fused kernel's name lists, per element of its iteration space; None where
    a listed op has no known cost or the elements are not recorded."""
    body = re.sub(r"_\d+$", "", _KERNEL.sub("", name)).removeprefix("fused_")
    words = [w for w in body.split("_") if w]
    costs = element_costs()
    known = {**costs.per_output, **costs.per_input}
    total, position = 0.0, 0
    while position < len(words):
        for end in range(len(words), position, -1):
            op = "_".join(words[position:end])
            match = next((o for o in (op, "_" + op, op + "_") if o in known or o in _NO_FLOPS), None)
            if match is not None:
                total += 1.0 if known.get(match, 0.0) > 0 else 0.0  # kept low: see the module's docstring
                position = end
                break
        else:
            return None
    if total == 0:
        return 0.0
    return total * elements if elements is not None else None
