"""Analytic work of a traced op: its recorded shapes replayed on PyTorch's meta device.

The op (``aten::linear`` with ``Input Dims`` [[8, 512], [1000, 512], [1000]] and ``Input type``
[float, float, float]) is called again on meta tensors of those shapes, dtypes and strides, under the same op
recorder as ``predict`` (:class:`hroofline.work.ops.OpRecorder`): the same FLOP formulas, the same
fewest bytes. Non-tensor arguments come from the trace's ``Concrete Inputs`` where it recorded them, else from
the schema's defaults; a trace without values (PyTorch before 2.1) records every argument, passed or defaulted,
so there a default for an integer argument is a guess too. Where the recorded tensors list every valid value of
such an argument (an axis, a set of axes, a trailing part of a shape), each is replayed and the work kept where all
the calls PyTorch accepts do the same FLOPs (bytes: the fewest of them). Any other integer argument (a stride, a
padding) is guessed and the result kept only when the trace's ``Output dims`` confirm the output shapes; otherwise
the op's work is unknown, as it is for ops PyTorch cannot run on the meta device (an extension not loaded here).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from itertools import combinations, product
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_leaves

from hroofline.importers.kineto import input_dims
from hroofline.work import low_precision
from hroofline.work.fused_attention import fused_attention
from hroofline.work.fused_ops import LIST_DTYPE, Argument, Formula, formula_for
from hroofline.work.moe import MOE_FORMULAS, moe_model
from hroofline.work.op_names import MATMUL_OPS
from hroofline.work.ops import OpRecorder
from hroofline.work.serving_attention import ATTENTION_ASSUMPTION, ATTENTION_OPS, CACHE_FORMULAS, unified_attention
from hroofline.work.serving_steps import step_of

# The dtype names the profiler writes (c10's type names), current and 2021.
DTYPES: dict[str, torch.dtype] = {
    "float": torch.float32,
    "double": torch.float64,
    "c10::Half": torch.float16,
    "c10::BFloat16": torch.bfloat16,
    "long int": torch.int64,
    "long": torch.int64,
    "int": torch.int32,
    "short int": torch.int16,
    "short": torch.int16,
    "signed char": torch.int8,
    "unsigned char": torch.uint8,
    "bool": torch.bool,
    "c10::Float8_e4m3fn": torch.float8_e4m3fn,
    "c10::Float8_e5m2": torch.float8_e5m2,
    "c10::Float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "c10::Float8_e5m2fnuz": torch.float8_e5m2fnuz,
    "c10::Float8_e8m0fnu": torch.float8_e8m0fnu,  # MX block scales
    "c10::Float4_e2m1fn_x2": torch.float4_e2m1fn_x2,  # two FP4 values an element
    "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
}
FLOAT_TYPE_NAMES = frozenset(name for name, dtype in DTYPES.items() if dtype.is_floating_point)
# Ops that dispatch to one of several kernels on a GPU but decompose on the meta device: what they dispatched to
# (a fused attention op, recorded inside them) is what ran; alone, they replay as their fused kernel.
DISPATCHING_OPS = frozenset({"aten::scaled_dot_product_attention", "aten::dropout"})
# Alone, such an op replays as the fused op it runs on a GPU (dropout as one kernel: input, output and mask once;
# on the meta device it decomposes into bernoulli_, div_ and mul, 2.4 times the bytes in bfloat16).
_REPLAYED_AS = {"aten::dropout": "aten::native_dropout"}
# What a tensor without a recorded type is taken to be (the 2021 schema records shapes only).
ASSUMED_DTYPE = torch.float32
# A tensor list's elements where none of the op's tensors records a type (the profiler writes "TensorList", never
# its dtype): fused_ops' LIST_DTYPE, float32, 4 bytes.
LIST_ELEMENT_BYTES = LIST_DTYPE.itemsize
# c10::ScalarType codes, as Concrete Inputs write a dtype argument.
SCALAR_TYPES: dict[int, torch.dtype] = {
    0: torch.uint8,
    1: torch.int8,
    2: torch.int16,
    3: torch.int32,
    4: torch.int64,
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    11: torch.bool,
    **low_precision.SCALAR_TYPES,
}


@dataclass(frozen=True)
class OpWork:
    """FLOPs per precision column (``flops_fp32``, ...) and the fewest bytes of one op call, and the ATen op
    that does most of it as ``predict`` names it (``aten::linear`` replays as ``aten::addmm``).

    ``matmul_flops`` are the FLOPs of its matrix products, convolutions and fused attention (by column): the
    work cuBLAS and cuDNN run on tensor cores where the GPU and the dtype allow."""

    flops: dict[str, float]
    bytes: float
    main_op: str | None = None
    bf16: bool = False  # bfloat16 inputs (their FLOPs share the flops_fp16 column with float16's)
    matmul_flops: dict[str, float] | None = None
    convolution: bool = False  # cuDNN runs float32 convolutions in TF32 by default, cuBLAS float32 products not
    # its tensors are lists whose dtype the trace does not record (torch.cat's): counted as float32, 4 bytes an
    # element (LIST_ELEMENT_BYTES), for a kernel that says its element size to correct
    list_dtype_assumed: bool = False


class _Unreplayable(Exception):
    pass


@dataclass(frozen=True)
class _Recorded:
    dims: Any
    type: str
    concrete: str
    strides: Any
    valued: bool  # the trace records argument values (Concrete Inputs); before PyTorch 2.1 it records shapes only


_Call = tuple[list[Any], dict[str, Any]]  # positional and keyword arguments


def op_work(name: str, args: dict[str, Any], ranges: tuple[str, ...] = ()) -> OpWork | None:
    """The analytic work of an op call as the trace recorded it, or None where it cannot be known; a serving
    engine's attention op takes its step's context lengths from the ranges open around it (outermost first)."""
    step = step_of(ranges) if name in ATTENTION_OPS else None
    key = json.dumps(
        [
            name,
            step.range_name if step is not None else None,
            input_dims(args),
            args.get("Input type"),
            args.get("Concrete Inputs"),
            args.get("Input Strides"),
            args.get("Output dims"),
        ],
        sort_keys=True,
    )
    return _op_work(key)


@lru_cache(maxsize=65536)
def _op_work(key: str) -> OpWork | None:
    name, step_range, dims, types, concrete, strides, output_dims = json.loads(key)
    step = step_of((step_range,)) if step_range else None
    if name in ATTENTION_OPS:  # its work needs the step's context lengths
        return _fused_work(name, partial(unified_attention, step), dims, types, concrete) if step else None
    formula = formula_for(name) or low_precision.formula_for(name) or MOE_FORMULAS.get(name) or CACHE_FORMULAS.get(name)
    if formula is not None:  # fused ops have no FLOP formula on the meta device (or none at all here)
        return _fused_work(name, formula, dims, types, concrete)
    packet = _packet(_REPLAYED_AS.get(name, name))
    if packet is None or not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else []
    recorded = [
        _Recorded(
            dims[i],
            types[i] if i < len(types) else "",
            concrete[i] if isinstance(concrete, list) and i < len(concrete) else "",
            strides[i] if isinstance(strides, list) and i < len(strides) else None,
            isinstance(concrete, list),
        )
        for i in range(len(dims))
    ]
    # An out= overload counts as its op (Inductor calls aten::mm(a, b, out=c): 3 recorded inputs, the profiler
    # recording every argument in schema order, out last), tried after the functional overloads. Other overloads
    # whose names say "out" (aten::to's dtype_layout) stay out: their recorded dtype and layout are not replayable.
    overloads = [getattr(packet, name) for name in packet.overloads()]
    overloads = [o for o in overloads if "out" not in o._overloadname or _is_out(o)]
    for overload in sorted(overloads, key=lambda o: (len(o._schema.arguments) != len(recorded), _is_out(o))):
        try:
            calls, guessed = _arguments(overload._schema, recorded)
        except Exception:  # _Unreplayable, or recorded values PyTorch refuses (negative or huge sizes)
            continue
        work = _agreed_work(overload, calls, guessed, output_dims)
        if work is not None:
            untyped = "TensorList" in types and not any(kind in DTYPES for kind in types)
            return replace(work, bf16="c10::BFloat16" in types, list_dtype_assumed=untyped)
    return None


def work_assumptions(counted: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One line per assumption that the work of the counted ops (name, recorded arguments) rests on: the model a
    MoE op's expert sizes were taken from, how serving attention was charged."""
    models = sorted(
        {model.assumption for name, args in counted if name in MOE_FORMULAS and (model := _moe_model(args))}
    )
    lines = [f"MoE expert sizes not in the trace were assumed from the model its shapes match: {m}" for m in models]
    if any(name in ATTENTION_OPS for name, _ in counted):
        lines.append(ATTENTION_ASSUMPTION)
    return lines


def _moe_model(args: dict[str, Any]) -> Any:
    arguments = _fused_arguments(input_dims(args), args.get("Input type"), args.get("Concrete Inputs"))
    return moe_model(arguments) if arguments is not None else None


def _fused_arguments(dims: Any, types: Any, concrete: Any) -> list[Argument] | None:
    if not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else []
    concrete = concrete if isinstance(concrete, list) else []
    return [
        _fused_argument(dims[i], types[i] if i < len(types) else "", concrete[i] if i < len(concrete) else "")
        for i in range(len(dims))
    ]


def _fused_work(name: str, formula: Formula, dims: Any, types: Any, concrete: Any) -> OpWork | None:
    """The work of an op that :mod:`hroofline.work.fused_ops` counts, from its recorded arguments."""
    arguments = _fused_arguments(dims, types, concrete)
    if arguments is None:
        return None
    types = types if isinstance(types, list) else []
    work = formula(arguments)
    if work is None:
        return None
    return OpWork(
        flops={work.column: work.flops},
        bytes=work.bytes,
        main_op=name,
        bf16="c10::BFloat16" in types,
        matmul_flops={work.column: work.flops} if work.matmul else {},
    )


def _fused_argument(dims: Any, kind: Any, text: Any) -> Argument:
    if kind == "TensorList":  # its shapes, one per tensor; [] where the profiler left them out (over 30 tensors)
        shapes = dims if isinstance(dims, list) and all(isinstance(d, list) for d in dims) else []
        return Argument(tuple(tuple(d) for d in shapes), listed=True)
    if kind in DTYPES and isinstance(dims, list) and all(isinstance(d, int) for d in dims):
        return Argument((tuple(dims),), DTYPES[kind])
    try:
        return Argument(value=ast.literal_eval(text) if isinstance(text, str) and text else None)
    except (ValueError, SyntaxError):
        return Argument()


def _is_out(overload: Any) -> bool:
    return any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in overload._schema.arguments)


def _packet(name: str) -> Any:
    namespace, _, op = name.partition("::")
    op = op.split(".")[0]
    try:
        return getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return None


def _agreed_work(overload: Any, calls: list[_Call], guessed: bool, output_dims: Any) -> OpWork | None:
    """The work of the op called with each of ``calls`` (one, or one per valid value of the arguments the trace
    did not record) where every call PyTorch accepts does the same FLOPs; its bytes the fewest of theirs (the
    fewest the op must move, as everywhere). A guessed value must give the trace's ``Output dims``."""
    works = [_replay(overload, call, guessed, output_dims) for call in calls]
    accepted = [work for work in works if work is not None]
    if not accepted or any(replace(work, bytes=0.0) != replace(accepted[0], bytes=0.0) for work in accepted):
        return None
    return replace(accepted[0], bytes=min(work.bytes for work in accepted))


def _replay(overload: Any, call: _Call, guessed: bool, output_dims: Any) -> OpWork | None:
    positional, keywords = call
    recorder = OpRecorder()
    function = F.scaled_dot_product_attention if overload.name() == "aten::scaled_dot_product_attention" else overload
    try:
        with recorder, fused_attention():
            result = function(*positional, **keywords)
    except Exception:  # an op PyTorch cannot run with these arguments on meta: the work stays unknown
        return None
    if guessed or output_dims:
        outputs = [list(t.shape) for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        wanted = [d for d in output_dims or [] if isinstance(d, list) and d]
        if not wanted or [o for o in outputs if o] != wanted:
            return None
    flops: dict[str, float] = {}
    matmul: dict[str, float] = {}
    for record in recorder.records:
        if record.flop_column and record.flops:
            flops[record.flop_column] = flops.get(record.flop_column, 0.0) + record.flops
            if record.op in MATMUL_OPS:
                matmul[record.flop_column] = matmul.get(record.flop_column, 0.0) + record.flops
    main = max(recorder.records, key=lambda r: (r.flops, r.bytes), default=None)
    return OpWork(
        flops=flops,
        bytes=float(sum(r.bytes for r in recorder.records)),
        main_op=main.op if main else None,
        matmul_flops=matmul,
        convolution=any(r.op.startswith("aten::convolution") for r in recorder.records),
    )


# An argument the trace did not record whose every valid value the first recorded tensor lists: its axes (gather's
# or softmax's dim: one; a reduction's: any set of them, or None for all), a trailing part of its shape
# (layer_norm's normalized_shape, which it checks against its weight's). The calls with each are replayed.
_LISTED_AXES = "dim"
_LISTED_SHAPE = "normalized_shape"
_MOST_AXES = 6  # a reduction over a tensor of more dimensions lists too many sets of them
_SHAPE_BEARING = frozenset({"int", "SymInt", "List[int]", "List[SymInt]"})


def _arguments(schema: Any, recorded: list[_Recorded]) -> tuple[list[_Call], bool]:
    """The calls of ``schema`` the recorded inputs allow (one per valid value of each argument whose every value
    :func:`_listed_values` knows), and whether a shape-bearing integer argument had to be guessed."""
    if len(recorded) > len(schema.arguments):
        raise _Unreplayable
    dtype = next((DTYPES[r.type] for r in recorded if r.type in DTYPES and isinstance(r.dims, list)), LIST_DTYPE)
    choices: list[list[Any]] = []
    guessed = False
    for index, argument in enumerate(schema.arguments):
        entry = recorded[index] if index < len(recorded) else None
        value, was_guessed = _value(argument, entry, dtype)
        listed = _listed_values(argument, recorded) if was_guessed and entry is not None else None
        choices.append(listed or [value])
        guessed = guessed or (was_guessed and not listed)
    calls = []
    for values in product(*choices):
        positional = [v for a, v in zip(schema.arguments, values, strict=True) if not a.kwarg_only]
        keywords = {a.name: v for a, v in zip(schema.arguments, values, strict=True) if a.kwarg_only}
        calls.append((positional, keywords))
    return calls, guessed


def _listed_values(argument: Any, recorded: list[_Recorded]) -> list[Any] | None:
    shape = recorded[0].dims if recorded else None
    if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        return None
    kind = str(argument.real_type)
    axes = range(max(len(shape), 1))
    if argument.name == _LISTED_AXES and kind in ("int", "SymInt"):
        return list(axes)
    if argument.name == _LISTED_AXES and _unwrapped(kind) in ("List[int]", "List[SymInt]") and len(shape) <= _MOST_AXES:
        sets = [list(chosen) for size in range(1, len(axes) + 1) for chosen in combinations(axes, size)]
        return [None, *sets] if kind.startswith("Optional[") else sets
    if argument.name == _LISTED_SHAPE and kind in ("List[int]", "List[SymInt]") and shape:
        return [shape[start:] for start in range(len(shape))]
    return None


def _value(argument: Any, entry: _Recorded | None, list_dtype: torch.dtype) -> tuple[Any, bool]:
    kind = str(argument.type)
    optional = kind.startswith("Optional[")
    base = _unwrapped(kind)
    if base == "Tensor":
        if entry is not None and entry.type in DTYPES and isinstance(entry.dims, list):
            return _meta_tensor(entry.dims, DTYPES[entry.type], entry.strides), False
        if optional and (entry is None or not entry.dims):
            return None, False
        if entry is not None and not entry.type and entry.dims:  # 2021 traces record no types: float32
            return _meta_tensor(entry.dims, ASSUMED_DTYPE, entry.strides), False
        if entry is not None and not entry.type and entry.dims == []:
            # an undefined tensor (the profiler records neither type nor shape): ops that take one accept it empty
            return torch.empty(0, device="meta"), False
        raise _Unreplayable
    if base in ("List[Tensor]", "List[Optional[Tensor]]"):
        # no shapes ([]): the profiler leaves out those of a list of over 30 tensors, so its size is unknown
        dims = entry.dims if entry is not None else None
        if isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims):
            return [_meta_tensor(d, list_dtype, None) for d in dims], False
        raise _Unreplayable
    if entry is not None and entry.concrete not in ("", None):
        return _concrete(entry.concrete, argument.name), False
    if entry is not None and entry.type and base in _SHAPE_FREE_PLACEHOLDERS:
        return _SHAPE_FREE_PLACEHOLDERS[base], False  # a scalar was passed (its type is recorded), not its value
    # A trace without values records every argument, passed or defaulted: conv2d's stride there may be 2, not
    # the schema's 1.
    unrecorded = entry is not None and not entry.valued and _unwrapped(str(argument.real_type)) in _SHAPE_BEARING
    if argument.has_default_value():
        return argument.default_value, unrecorded
    if optional:
        return None, unrecorded
    if argument.name == "dtype":
        return list_dtype, True
    return _placeholder(base)


def _unwrapped(kind: str) -> str:
    return kind[len("Optional[") : -1] if kind.startswith("Optional[") else kind


def _meta_tensor(dims: list[int], dtype: torch.dtype, strides: Any) -> torch.Tensor:
    if not all(isinstance(d, int) for d in dims):
        raise _Unreplayable
    if isinstance(strides, list) and len(strides) == len(dims) and all(isinstance(s, int) for s in strides):
        return torch.empty_strided(dims, strides, dtype=dtype, device="meta")
    return torch.empty(dims, dtype=dtype, device="meta")


def _concrete(text: str, name: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise _Unreplayable from None
    if name == "dtype" and isinstance(value, int):
        return SCALAR_TYPES.get(value, value)  # a ScalarType argument, written as its code
    return value


_SHAPE_FREE_PLACEHOLDERS: dict[str, Any] = {"bool": False, "float": 1.0, "number": 1, "List[bool]": [True] * 3}


def _placeholder(base: str) -> tuple[Any, bool]:
    """A value for an argument the trace did not record: harmless for scalars; integers (strides, sizes)
    change shapes, so the replay says it guessed."""
    if base in _SHAPE_FREE_PLACEHOLDERS:
        return _SHAPE_FREE_PLACEHOLDERS[base], False
    if base in ("int", "SymInt"):
        return 1, True
    if base in ("List[int]", "List[SymInt]"):
        return [1], True
    raise _Unreplayable
