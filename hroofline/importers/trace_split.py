"""The work of a trace's GPU activities: each op's analytic work, split over the kernels it launched.

- Memsets write, and device-to-device copies read and write, the bytes the trace gives them; host copies move
  them once through HBM. They do no FLOPs.
- Communication kernels get their bus bytes (:mod:`hroofline.importers.collectives`) and no FLOPs.
- Any other kernel belongs to the op whose work is counted: of the dispatchable ops around its launch, the
  outermost whose recorded inputs replay (:mod:`hroofline.importers.trace_work`), skipping an op that calls
  itself again on inputs cast to another type (autocast: an ``aten::linear`` of float inputs around one of
  bfloat16 inputs) or around a scaled FP8/FP4 product (a float8 tensor subclass's ``aten::mm``, whose recorded
  inputs are its bfloat16 face, around the ``aten::_scaled_mm`` it dispatched to), and any op that encloses an op
  another launch counts (so no work counts twice). The op's
  bytes are split over its kernels in proportion to their durations, its FLOPs likewise over its tensor-core
  kernels where it has some (a split-K GEMM's reduction kernel, cuDNN's workspace clearing, do none of the
  multiply-adds), else over all.
- Whether an op's matrix products, convolutions and fused attention ran on tensor cores follows from its
  input dtype and the GPU's rules, as ``predict`` decides: 16-bit products on the FP16 or BF16 tensor cores,
  float64 ones on the FP64 tensor cores, float32 convolutions in TF32 (cuDNN's default) and float32 matrix
  products in FP32 (PyTorch's default), wherever the GPU has that tensor path (a rate in
  ``metrics/rates.toml``). The kernels' names decide what the dtype cannot: a name that says TF32 (a float32
  product run with TF32 allowed) or CUDA cores (``gemv``, ``simt``, ``f32f32_f32f32``); and a convolution is on
  tensor cores only where its kernel's name says so, because cuDNN runs depthwise, grouped and small
  convolutions on the CUDA cores whatever the dtype. A trace of an unknown GPU falls back to the names alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Set
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from hroofline.importers.collectives import collective_name, collective_size, is_communication
from hroofline.importers.inductor_work import inductor_work, is_inductor_kernel
from hroofline.importers.kineto import CpuEvent, GpuActivity
from hroofline.importers.kineto_links import LaunchLink
from hroofline.importers.trace_work import DISPATCHING_OPS, FLOAT_TYPE_NAMES, LIST_ELEMENT_BYTES, OpWork, op_work
from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.roofs.metricset import MetricSet, TensorKernelHints
from hroofline.roofs.rates import DenseRates
from hroofline.work.low_precision import SCALED_OPS

# Where a launch's work came from (the launch table's work_source).
FORMULA = "formula"  # the launching ATen op's FLOP and byte formulas on its recorded shapes
TRACE = "trace"  # a copy's or set's bytes as the trace gives them
COLLECTIVE = "collective"  # a communication kernel's bus bytes from the collective's arguments
UNKNOWN = "unknown"


def activity_work(
    activities: list[GpuActivity], links: list[LaunchLink], metric_set: MetricSet, rates: DenseRates
) -> pd.DataFrame:
    """Per activity: FLOPs per precision, fewest HBM bytes, link bytes and the op the work was counted as
    (null where unknown); ``rates`` are the traced GPU's (empty where it is unknown)."""
    count = len(activities)
    numbers = (*FLOP_QUANTITIES, "bytes_hbm", "bytes_link", "bytes_message", "group_size")
    columns: dict[str, Any] = {c: np.full(count, np.nan) for c in numbers}
    columns["work_op"] = np.full(count, None, dtype=object)
    columns["collective"] = np.full(count, None, dtype=object)
    columns["work_source"] = np.full(count, UNKNOWN, dtype=object)
    kernels_of_op: dict[int, list[int]] = defaultdict(list)
    works: dict[int, OpWork] = {}
    unknown_flops: list[int] = []
    counted_ops = choose_counted_ops(links)
    for index, (activity, link) in enumerate(zip(activities, links, strict=True)):
        if activity.category in ("memcpy", "memset"):
            columns["bytes_hbm"][index] = copy_bytes(activity)
            columns["flops_fp32"][index] = 0.0
            columns["work_source"][index] = TRACE
        elif is_communication(activity.name):
            args = activity.args if collective_name(activity.args) else (link.op.args if link.op else {})
            size = collective_size(args)
            if size is not None:
                columns["collective"][index] = size.name
                columns["bytes_message"][index] = size.message_bytes
                columns["group_size"][index] = size.group_size
            link_bytes = size.bus_bytes if size is not None else None
            columns["bytes_link"][index] = link_bytes if link_bytes is not None else np.nan
            columns["work_source"][index] = COLLECTIVE if link_bytes is not None else UNKNOWN
        elif link.op is not None and is_inductor_kernel(link.op):
            # a kernel Inductor generated: its own launch event says its work (each launches one kernel)
            if (found := inductor_work(link.op)) is not None:
                kernels_of_op[id(link.op)].append(index)
                works[id(link.op)] = found.work
                columns["work_source"][index] = found.source
                if not found.flops_known:
                    unknown_flops.append(index)
        elif (counted := counted_ops[index]) is not None:
            kernels_of_op[id(counted[0])].append(index)
            works[id(counted[0])] = counted[1]
            columns["work_source"][index] = FORMULA
    names = KernelNames([a.name.lower() for a in activities], metric_set.tensor_hints)
    for key, indices in kernels_of_op.items():
        work = works[key]
        if work.list_dtype_assumed and (size := _element_bytes([activities[i].name for i in indices])):
            work = replace(work, bytes=work.bytes * size / LIST_ELEMENT_BYTES)
        # the op's FLOPs go to the kernels that compute (a split-K GEMM's reduction kernel does none of them)
        computing = [i for i in indices if names.computing[i]] or indices
        flop_shares = dict(zip(computing, _duration_shares(activities, computing), strict=True))
        for share, index in zip(_duration_shares(activities, indices), indices, strict=True):
            for column in FLOP_QUANTITIES:
                columns[column][index] = 0.0
            for column, flops in work.flops.items():
                columns[column][index] = flops * flop_shares.get(index, 0.0)
            for column, flops in (work.matmul_flops or {}).items():
                target = tensor_column(column, work, rates, names, index)
                if target is not None:
                    moved = flops * flop_shares.get(index, 0.0)
                    columns[column][index] -= moved
                    columns[target][index] += moved
            columns["bytes_hbm"][index] = work.bytes * share
            columns["work_op"][index] = work.main_op
    for index in unknown_flops:
        for column in FLOP_QUANTITIES:
            columns[column][index] = np.nan
    return pd.DataFrame(columns)


class KernelNames:
    """What kernel names show, per activity: a computing kernel (a GEMM, convolution or attention kernel, not one
    that only sets a GEMM up), a tensor-core one, a CUDA-core one, TF32 or BF16 inputs."""

    def __init__(self, names: list[str], hints: TensorKernelHints) -> None:
        def showing(fragments: tuple[str, ...]) -> np.ndarray:
            return np.array([any(f in name for f in fragments) for name in names], dtype=bool)

        self.computing = showing(hints.compute_names) & ~showing(hints.setup_names)
        self.tensor = showing(hints.float_names)
        self.cuda_cores = showing(hints.cuda_core_names)
        self.tf32 = showing(hints.precision_names.get("flops_tensor_tf32", ("tf32",)))
        self.bf16 = showing(hints.precision_names.get("flops_tensor_bf16", ("bf16",)))


def tensor_column(column: str, work: OpWork, rates: DenseRates, names: KernelNames, index: int) -> str | None:
    """The tensor column an op's matrix-product FLOPs in ``column`` move to on this kernel, or None."""
    if names.cuda_cores[index] and not names.tensor[index]:
        return None
    if work.convolution and not names.tensor[index]:
        return None  # cuDNN's depthwise, grouped and small convolutions run on the CUDA cores
    if column == "flops_fp16":
        key = "tensor_bf16" if work.bf16 or names.bf16[index] else "tensor_fp16"
    elif column == "flops_fp32":
        # TF32 for a product only where its kernel's name says so; for a tensor-core convolution by default
        tf32 = names.tf32[index] or work.convolution
        key = "tensor_tf32" if tf32 else None
    elif column == "flops_fp64":
        key = "tensor_fp64"
    else:
        key = None
    if key is None:
        return None
    if rates.per_sm_cycle:
        return "flops_" + key if rates.get(key) is not None else None
    return "flops_" + key if names.tensor[index] else None  # an unknown GPU: the names alone


def choose_counted_ops(links: list[LaunchLink]) -> list[tuple[CpuEvent, OpWork] | None]:
    """Per launch, the op whose work its work is, with that work (None where none can be known), such that
    no counted op encloses another: an op some launch counts is passed over by the launches around it (an
    autocast ``aten::linear``'s cast kernels count as the casts, not as the linear its inner bfloat16
    ``aten::linear`` already counts). Passing over an op can only pass over more, so this ends."""
    passed_over: set[int] = set()
    works: dict[int, OpWork | None] = {}  # per op event: each op is replayed once, however many launches ask
    chosen = [_counted_op(link, passed_over, works) for link in links]
    while True:
        counted = {id(pair[0]) for pair in chosen if pair is not None}
        enclosing = set()
        for link, pair in zip(links, chosen, strict=True):
            if pair is not None:
                position = next((i for i, op in enumerate(link.candidates) if op is pair[0]), len(link.candidates))
                enclosing |= {id(op) for op in link.candidates[:position] if id(op) in counted}
        if not enclosing - passed_over:
            return chosen
        passed_over |= enclosing
        # only the launches whose op is now passed over choose again: passing over only takes candidates away
        chosen = [
            _counted_op(link, passed_over, works) if pair is not None and id(pair[0]) in passed_over else pair
            for link, pair in zip(links, chosen, strict=True)
        ]


def _counted_op(
    link: LaunchLink, passed_over: Set[int], works: dict[int, OpWork | None]
) -> tuple[CpuEvent, OpWork] | None:
    """The op whose work a launch's work is, with that work; None where no op's work can be known. ``works``
    keeps each op's work once found."""
    candidates = link.candidates
    for position, op in enumerate(candidates):
        if id(op) in passed_over or _recast_inside(op, candidates[position + 1 :]):
            continue
        if op.name in DISPATCHING_OPS and position < len(candidates) - 1:
            continue  # what it dispatched to is recorded inside it: that ran
        if op.name not in SCALED_OPS and any(inner.name in SCALED_OPS for inner in candidates[position + 1 :]):
            continue  # a float8 subclass's aten::mm, recorded as bfloat16: the scaled product inside it ran
        if id(op) not in works:
            works[id(op)] = op_work(op.name, op.args, link.ranges)
        work = works[id(op)]
        if work is not None:
            return op, work
    return None


def _recast_inside(op: CpuEvent, inner: tuple[CpuEvent, ...]) -> bool:
    """Autocast: the op calls itself again with its floating-point inputs cast to another type (an
    ``aten::linear`` of float inputs around an ``aten::linear`` of bfloat16 ones); its own inputs are not what
    ran."""
    types = float_types(op)
    return bool(types) and any(o.name == op.name and float_types(o) not in (set(), types) for o in inner)


def float_types(op: CpuEvent) -> set[str]:
    types = op.args.get("Input type")
    return {t for t in types if t in FLOAT_TYPE_NAMES} if isinstance(types, list) else set()


def copy_bytes(activity: GpuActivity) -> float:
    try:
        size = float(activity.args["bytes"])
    except (KeyError, TypeError, ValueError):
        return np.nan
    if not np.isfinite(size) or size < 0:
        return np.nan
    both_ends_on_device = "dtod" in activity.name.lower().replace(" ", "")
    return size * (2.0 if both_ends_on_device else 1.0)


# PyTorch's concatenation kernel is instantiated per element size (CatArrayBatchedCopy<OpaqueType<2u>, ...>)
_OPAQUE_ELEMENT = re.compile(r"OpaqueType<(\d+)u?>")


def _element_bytes(kernels: list[str]) -> int | None:
    """The element size the kernels' names say, where every one that says one says the same."""
    sizes = {int(m.group(1)) for name in kernels if (m := _OPAQUE_ELEMENT.search(name))}
    return sizes.pop() if len(sizes) == 1 else None


def _duration_shares(activities: list[GpuActivity], indices: list[int]) -> np.ndarray:
    durations = np.array([activities[i].duration_s for i in indices])
    return durations / durations.sum() if durations.sum() > 0 else np.full(len(indices), 1 / len(indices))
