"""The work of ATen ops: analytic FLOPs and fewest bytes per op, and the recorder that sees every op of a step
(the CPU backend times it; traces and predictions take its work alone).

A ``TorchDispatchMode`` sees each op where PyTorch dispatches it to a kernel (below autograd, so the
backward ops are seen as the ops they are). Each op's time is the wall time of that kernel call; its
FLOPs come from PyTorch's FLOP formulas (matmul, convolution, attention) or ``metrics/cpu_ops.toml``
(element-wise, reductions, normalisation); its bytes are the fewest it must move (inputs read once,
outputs written once), counted at L1. Views and other metadata-only ops launch no kernel and are left out.
"""

from __future__ import annotations

import math
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch
from torch._prims_common import suggest_memory_format
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from hroofline.errors import ProfilingError
from hroofline.model.quantities import OP_QUANTITIES, TENSOR_FLOP_QUANTITIES
from hroofline.roofs.metricset import metrics_dir
from hroofline.work.op_names import ATTENTION_OPS

TIME_METHOD = "wall time of the ATen op at the dispatcher (TorchDispatchMode, time.perf_counter)"

NO_PHASE = "other"
PRECISION_COLUMN = {
    torch.float64: "flops_fp64",
    torch.float32: "flops_fp32",
    torch.float16: "flops_fp16",
    torch.bfloat16: "flops_fp16",  # 16-bit floats share one column; the run's precision says which
}


@dataclass(frozen=True)
class ElementCosts:
    per_output: dict[str, float]
    per_input: dict[str, float]


@cache
def element_costs() -> ElementCosts:
    data = tomllib.loads((metrics_dir() / "cpu_ops.toml").read_text())
    return ElementCosts(
        per_output={k: float(v) for k, v in data["per_output_element"].items()},
        per_input={k: float(v) for k, v in data["per_input_element"].items()},
    )


@dataclass
class OpRecord:
    op: str
    phase: str
    layer: str | None
    shapes: str
    seconds: float
    flops: float
    flop_column: str | None
    bytes: float
    bytes_layout: float = 0.0  # what cuDNN's layout conversions move if the op runs on tensor cores (NCHW)
    layout_kernels: int = 0  # how many conversion kernels that takes
    depthwise: bool = False  # a depthwise convolution or its backward (its own kernels, far below their roof)
    channel_elements: int = 0  # a training batch norm over NCHW: the elements of each channel (one block each)
    step: int | None = None  # the profiled step (0, 1, ...) it ran in, where the recorder was told


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _tensor_bytes(tensor: torch.Tensor) -> float:
    """Bytes of the distinct elements a tensor covers: an expanded (stride-0) view covers few."""
    spanned = tensor.numel() * tensor.element_size()
    try:
        stored = tensor.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return spanned
    return float(min(spanned, stored)) if stored else float(spanned)


def _distinct_bytes(tensors: list[torch.Tensor]) -> float:
    seen: set[int] = set()
    total = 0.0
    for tensor in tensors:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += _tensor_bytes(tensor)
    return total


# In-place ops that replace the destination's contents without reading them.
_OVERWRITES = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "set_"})


def _op_name(packet: Any) -> str:
    """'aten.add_' -> 'add_'."""
    return str(packet).split(".")[-1]


# Gathers read the rows they select, not the whole table they select from (an embedding lookup of 5 tokens
# reads 5 rows of a 50,257-word table): op name -> the argument that is the table.
_GATHERED_FROM = {"embedding": "weight", "index_select": "self", "gather": "self"}
# The negative log-likelihood reads one log-probability per target (4,096 of GPT-2's 4,096 x 50,257 logits): op
# name -> (the table, the index); its backward writes the whole gradient (zeros, then one value per target) and
# takes the log-probabilities for their shape alone.
_GATHERED_BY_INDEX = {"nll_loss_forward": ("self", "target"), "nll_loss2d_forward": ("self", "target")}
_SHAPE_ONLY = {"nll_loss_backward": "self", "nll_loss2d_backward": "self"}


def _argument_values(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(schema argument, value) of each argument the call passed or defaulted."""
    positional = list(args)
    for index, argument in enumerate(func._schema.arguments):
        if index < len(positional) and not argument.kwarg_only:
            yield argument, positional[index]
        elif argument.name in kwargs:
            yield argument, kwargs[argument.name]
        elif argument.has_default_value():
            yield argument, argument.default_value


def op_bytes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> float:
    """Every tensor the op reads, once, plus every tensor it writes, once: its outputs and the arguments
    its schema marks as written (in-place ops, ``out=``). An ``out=`` argument is written, not read. A
    gather's table counts as the rows it selected (as many bytes as its output), the negative log-likelihood's
    as one element per target; its backward reads the log-probabilities for their shape alone."""
    reads: list[torch.Tensor] = []
    writes: list[torch.Tensor] = _tensors(out)
    name = _op_name(func.overloadpacket)
    table, index = _GATHERED_BY_INDEX.get(name, (_GATHERED_FROM.get(name), None))
    arguments = list(_argument_values(func, args, kwargs))
    values = {argument.name: value for argument, value in arguments}
    gathered = 0.0
    for argument, value in arguments:
        if value is None or argument.name == _SHAPE_ONLY.get(name):
            continue
        if argument.name == table:
            table_bytes = _distinct_bytes(_tensors(value))
            if index is not None:  # one element of the table per index
                gathered = min(table_bytes, float(values[index].numel() * value.element_size()))
            else:
                gathered = min(table_bytes, _distinct_bytes(_tensors(out))) if _tensors(out) else table_bytes
            continue
        written = argument.alias_info is not None and argument.alias_info.is_write
        if written:
            writes += _tensors(value)
        overwritten = written and (
            (argument.kwarg_only and argument.name.startswith("out")) or _op_name(func.overloadpacket) in _OVERWRITES
        )
        if not overwritten:
            reads += _tensors(value)
    return _distinct_bytes(reads) + _distinct_bytes(writes) + gathered


# Ops that only allocate or relabel memory: no kernel touches the data.
_NO_DATA_MOVED = frozenset(
    {
        "detach",
        "lift_fresh",
        "alias",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "_unsafe_view",
        "as_strided_",  # restrides in place: no kernel (an H200 trace of EfficientNet-B0 in channels_last)
    }
)


def _is_metadata_only(func: Any) -> bool:
    packet = func.overloadpacket
    namespace = getattr(packet, "__module__", "") or ""
    if "profiler" in str(packet) or namespace.endswith("profiler"):
        return True
    return bool(getattr(func, "is_view", False)) or _op_name(packet) in _NO_DATA_MOVED


# CPU kernels PyTorch's FLOP counter has no entry for, counted by the formula of their GPU twin (same
# leading arguments: query, key, value; the backward's grad_out first).
_SAME_FORMULA_AS = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: torch.ops.aten._scaled_dot_product_flash_attention,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        torch.ops.aten._scaled_dot_product_flash_attention_backward
    ),
}


def convolution_flops(output_elements: int, weight: torch.Tensor) -> float:
    """2 x output elements x (input channels per group x kernel size): ``weight`` is (C_out, C_in/groups, k...)."""
    return 2.0 * output_elements * math.prod(weight.shape[1:])


def convolution_backward_flops(args: tuple[Any, ...]) -> float:
    """The input gradient and the weight gradient each cost what the forward convolution did.

    PyTorch's own formula leaves ``groups`` out of the weight gradient, which makes a depthwise
    convolution's backward pass dozens of times its forward pass."""
    grad_output, inputs, weight = args[0], args[1], args[2]
    transposed, output_mask = bool(args[7]), args[10]
    forward = convolution_flops((inputs if transposed else grad_output).numel(), weight)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@dataclass(frozen=True)
class LayoutConversions:
    bytes: float  # read and written
    kernels: int


NO_CONVERSION = LayoutConversions(0.0, 0)


def _convolution_tensors(func: Any, args: tuple[Any, ...]) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """A convolution's or its backward's input, weight and whether it is transposed; None for any other op."""
    packet = func.overloadpacket
    if packet is torch.ops.aten.convolution:
        return args[0], args[1], bool(args[6])
    if packet is torch.ops.aten.convolution_backward:
        return args[1], args[2], bool(args[7])
    return None


def is_depthwise(func: Any, args: tuple[Any, ...]) -> bool:
    """A 2-D depthwise convolution (or its backward): one input channel per group, of more than one, and a
    kernel larger than 1x1. cuDNN and PyTorch run these on kernels of their own (``conv2d_c1_k1_*``,
    ``conv_depthwise2d_*``) far below their roof: on an H200, torch.profiler traces showed them taking 6 to 22 times
    their bound."""
    found = _convolution_tensors(func, args)
    if found is None:
        return False
    inputs, weight, transposed = found
    depthwise = weight.dim() == 4 and weight.shape[1] == 1 and inputs.dim() == 4 and inputs.shape[1] > 1
    return depthwise and not transposed and math.prod(weight.shape[2:]) > 1


# Batch norms that may reduce statistics; the schema's flag says whether they do (training, train, update), and
# the ops without one always do.
_TRAINING_NORMS = (
    torch.ops.aten.native_batch_norm,
    torch.ops.aten._native_batch_norm_legit,
    torch.ops.aten._native_batch_norm_legit_functional,
    torch.ops.aten._batch_norm_with_update,
    torch.ops.aten._batch_norm_with_update_functional,
    torch.ops.aten.native_batch_norm_backward,
    torch.ops.aten.batch_norm_backward,
    torch.ops.aten.cudnn_batch_norm,
    torch.ops.aten.cudnn_batch_norm_backward,
)
_TRAINING_FLAGS = ("training", "train", "update")


def nchw_channel_elements(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """For a batch norm in training (forward or backward) over a 4-D NCHW input, the elements of one channel it
    reduces over (N x H x W); 0 for every other op.

    Its kernels run one thread block per channel (cuDNN's ``bn_fw_tr_1C11_kernel_NCHW``, ``bn_bw_1C11_*``: a grid
    of C blocks on an H200's traces), so a layer of few channels leaves most of the GPU idle and takes about
    N x H x W over one block's rate, whatever the GPU's bandwidth (metrics/batch_norm.toml). In NHWC, and in
    inference, where no statistics are reduced, the work spreads over the whole GPU."""
    if func.overloadpacket not in _TRAINING_NORMS:
        return 0
    values = {argument.name: value for argument, value in _argument_values(func, args, kwargs)}
    inputs, training = values.get("input"), next((values[f] for f in _TRAINING_FLAGS if f in values), True)
    if not training or not isinstance(inputs, torch.Tensor) or inputs.dim() != 4 or _channels_last(inputs):
        return 0
    return inputs.numel() // max(int(inputs.shape[1]), 1)


def nchw_conversions(func: Any, args: tuple[Any, ...], out: Any) -> LayoutConversions:
    """The bytes cuDNN's NCHW <-> NHWC conversions read and write around a 2-D convolution of NCHW tensors when
    it runs on tensor cores, whose kernels work in NHWC, and their kernels; none for an op that is no such
    convolution.

    Counted as torch.profiler traces of ten torchvision models on an H200 showed them (cuDNN 9.19,
    tests/data/gpu-2026-11-27/h200-layouts): around every convolution with a kernel larger than 1x1 that is not
    depthwise, the forward pass converts its input, weight and output, the input gradient its output gradient,
    weight and input gradient, the weight gradient its output gradient (again), input and weight gradient; each
    conversion reads and writes its tensor once. 1x1 convolutions mostly run on NCHW directly (some convert: not
    counted), depthwise ones do not convert, and channels_last tensors need no conversion."""
    found = _convolution_tensors(func, args)
    if found is None:
        return NO_CONVERSION
    inputs, weight, transposed = found
    if func.overloadpacket is torch.ops.aten.convolution:
        tensors = [inputs, weight, out]
    else:
        grad_output, mask = args[0], args[10]
        # input gradient: output gradient, weight, input gradient; weight gradient: output gradient, input, its own
        tensors = [grad_output, weight, inputs] * bool(mask[0]) + [grad_output, inputs, weight] * bool(mask[1])
    if transposed or inputs.dim() != 4 or math.prod(weight.shape[2:]) == 1 or weight.shape[1] == 1:
        return NO_CONVERSION
    if any(_channels_last(t) for t in (inputs, weight)):
        return NO_CONVERSION
    return LayoutConversions(2.0 * sum(float(t.numel() * t.element_size()) for t in tensors), len(tensors))


def _laid_out_as_on_a_gpu(func: Any, args: tuple[Any, ...], out: Any) -> Any:
    """A convolution's output in the layout cuDNN gives it: channels_last where its input or weight is. PyTorch's
    meta kernel returns it NCHW even then, which would leave the batch norms after a channels_last convolution
    looking NCHW on the meta device (and miss the ops a GPU runs to restride a pooled channels_last tensor)."""
    found = _convolution_tensors(func, args) if func is torch.ops.aten.convolution.default else None
    if found is None or not isinstance(out, torch.Tensor) or out.device.type != "meta" or out.dim() != 4:
        return out
    inputs, weight, _ = found
    if _channels_last(out) or not any(_channels_last(t) for t in (inputs, weight)):
        return out
    return out.contiguous(memory_format=torch.channels_last)


def _channels_last(tensor: torch.Tensor) -> bool:
    """Laid out NHWC, by the rule cuDNN picks its kernels by (PyTorch's suggest_memory_format): a 1x1 weight or an
    N x C x 1 x 1 tensor restrided to channels_last counts, though it is also plainly contiguous; a plainly
    contiguous one does not."""
    return tensor.dim() == 4 and suggest_memory_format(tensor) == torch.channels_last


def causal_share(query_length: int, key_length: int) -> float:
    """The share of query-key pairs causal attention computes (a query attends to keys up to its own position,
    top-left aligned as PyTorch's is_causal): about half, S(S+1)/2 of S x S pairs."""
    if query_length <= 0 or key_length <= 0:
        return 1.0
    if query_length <= key_length:
        pairs = query_length * (query_length + 1) / 2
    else:
        pairs = key_length * (key_length + 1) / 2 + (query_length - key_length) * key_length
    return pairs / (query_length * key_length)


# The low-level kernels' ops lay query and key out as (batch, sequence, heads, dim); the sdpa ops as
# (batch, heads, sequence, dim). The memory-efficient ones say causal by a mask type (1: top-left, 2: bottom-right).
_SEQUENCE_FIRST = ("_flash_attention_", "_efficient_attention_")
_CAUSAL_MASK_TYPES = (1, 2)


def _attention_causal_share(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    values = {argument.name: value for argument, value in _argument_values(func, args, kwargs)}
    query, key = values.get("query"), values.get("key")
    causal = values.get("is_causal") or values.get("custom_mask_type") in _CAUSAL_MASK_TYPES
    if not causal or not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor):
        return 1.0
    axis = -3 if any(name in str(func.overloadpacket) for name in _SEQUENCE_FIRST) else -2
    return causal_share(int(query.shape[axis]), int(key.shape[axis]))


def op_flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> float:
    packet = _SAME_FORMULA_AS.get(func.overloadpacket, func.overloadpacket)
    if packet is torch.ops.aten.convolution_backward:
        return convolution_backward_flops(args)
    if packet in flop_registry:
        flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
        if str(func.overloadpacket).replace(".", "::", 1) in ATTENTION_OPS:
            flops *= _attention_causal_share(func, args, kwargs)  # a causal kernel skips the masked blocks
        return flops
    name = _op_name(packet)
    base = name.removeprefix("_foreach_")
    costs = element_costs()
    if base in costs.per_output:
        # the first output is the result (dropout's mask is not); in-place foreach ops return nothing
        results = out if name.startswith("_foreach_") or not isinstance(out, tuple) else out[:1]
        elements = _tensors(results) or _tensors(args[:1])
        return costs.per_output[base] * sum(t.numel() for t in elements)
    if base in costs.per_input:
        return costs.per_input[base] * sum(t.numel() for t in _tensors(args[:1]))
    return 0.0


def _flop_column(args: tuple[Any, ...], out: Any) -> str | None:
    for tensor in _tensors(out) + _tensors(args):
        column = PRECISION_COLUMN.get(tensor.dtype)
        if column:
            return column
    return None


def input_shapes(inputs: list[torch.Tensor]) -> str:
    """The shapes of an op's tensor arguments: '2x64x56x56, 64x64x3x3' (a scalar tensor is '()')."""
    return ", ".join("x".join(map(str, t.shape)) or "()" for t in inputs)


class LayerSource(Protocol):
    """What names the layer an op runs in (:class:`hroofline.collect.module_tracking.LayerTracker`)."""

    def layer(self) -> str | None: ...


class OpRecorder(TorchDispatchMode):
    """Records every op run while active; ``listen`` follows the phases of a step, ``tracker`` (PyTorch's
    module tracking) the layer each op runs in."""

    def __init__(self, tracker: LayerSource | None = None) -> None:
        super().__init__()
        self.records: list[OpRecord] = []
        self.phase = NO_PHASE
        self.tracker = tracker
        self.step: int | None = None  # the profiled step being recorded (its ops' repeats are the run's noise)

    def listen(self, phase: str, entering: bool) -> None:
        self.phase = phase if entering else NO_PHASE

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if _is_metadata_only(func):
            return func(*args, **kwargs)
        inputs = _tensors(args)
        elsewhere = next((t.device for t in inputs if t.device.type not in ("cpu", "meta")), None)
        if elsewhere is not None:
            raise ProfilingError(
                f"{func.overloadpacket} runs on {elsewhere}: the CPU recorder (--gpu cpu) times CPU ops only",
                "profile a GPU with --gpu NAME (ncu), or run the script on the CPU",
            )
        start = time.perf_counter()
        out = _laid_out_as_on_a_gpu(func, args, func(*args, **kwargs))
        seconds = time.perf_counter() - start
        conversions = nchw_conversions(func, args, out)
        self.records.append(
            OpRecord(
                op=str(func.overloadpacket).replace(".", "::", 1),
                phase=self.phase,
                layer=self.tracker.layer() if self.tracker is not None else None,
                shapes=input_shapes(inputs),
                seconds=seconds,
                flops=op_flops(func, args, kwargs, out),
                flop_column=_flop_column(args, out),
                bytes=op_bytes(func, args, kwargs, out),
                bytes_layout=conversions.bytes,
                layout_kernels=conversions.kernels,
                depthwise=is_depthwise(func, args),
                channel_elements=nchw_channel_elements(func, args, kwargs),
                step=self.step,
            )
        )
        return out


def records_to_launches(records: list[OpRecord]) -> pd.DataFrame:
    """One row per op, in the launch-table layout of every other source.

    The fewest bytes an op must move are a lower bound on its traffic through L1, through which every
    operand passes; how much of it also reaches L2 or DRAM depends on what the caches hold, so those
    levels stay unmeasured rather than guessed."""
    frame = pd.DataFrame(
        {
            "launch_id": np.arange(len(records), dtype=np.int64),
            "kernel": [r.op for r in records],
            "phase": [r.phase for r in records],
            "nvtx": [r.phase for r in records],
            "layer": [r.layer for r in records],
            "shapes": [r.shapes for r in records],
            "device": "cpu",
            "launches": 1,
            "time_s": [r.seconds for r in records],
            "time_method": TIME_METHOD,
            "bytes_l1": [r.bytes for r in records],
            "bytes_layout": [r.bytes_layout for r in records],
            "layout_kernels": [r.layout_kernels for r in records],
            "depthwise": [r.depthwise for r in records],
            "channel_elements": [r.channel_elements for r in records],
            "step": pd.array([r.step for r in records], dtype="Int64"),
        }
    )
    for column in ("flops_fp64", "flops_fp32", "flops_fp16"):
        frame[column] = [r.flops if r.flop_column == column else 0.0 for r in records]
    for column in (*TENSOR_FLOP_QUANTITIES, *OP_QUANTITIES):
        frame[column] = 0.0  # no tensor cores on a CPU (and none on the meta device until predict puts them)
    return frame
