"""The work of a trace's GPU activities: each op's analytic work, split over the kernels it launched.

- Memsets write, and device-to-device copies read and write, the bytes the trace gives them; host copies move
  them once through HBM. They do no FLOPs.
- Communication kernels get their bus bytes (:mod:`hroofline.importers.collectives`) and no FLOPs.
- Any other kernel belongs to the op whose work is counted: of the dispatchable ops around its launch, the
  outermost whose recorded inputs replay (:mod:`hroofline.importers.trace_work`), skipping an op that calls
  itself again on inputs cast to another type (autocast: an ``aten::linear`` of float inputs around one of
  bfloat16 inputs) and any op that encloses an op another launch counts (so no work counts twice). The op's
  bytes are split over its kernels in proportion to their durations, its FLOPs likewise over its tensor-core
  kernels where it has some (a split-K GEMM's reduction kernel does none of the multiply-adds), else over all.
- Tensor-core kernels' FLOPs move to the tensor column of their input precision: 16-bit to FP16 (BF16 where
  the op's inputs were bfloat16 or the kernel's name says so), FP32 to TF32, FP64 to FP64.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set
from typing import Any

import numpy as np
import pandas as pd

from hroofline.importers.collectives import bus_bytes, collective_name, is_communication
from hroofline.importers.kineto import CpuEvent, GpuActivity
from hroofline.importers.kineto_links import LaunchLink
from hroofline.importers.trace_work import FLOAT_TYPE_NAMES, OpWork, op_work
from hroofline.metricset import FLOP_QUANTITIES, MetricSet


def activity_work(activities: list[GpuActivity], links: list[LaunchLink], metric_set: MetricSet) -> pd.DataFrame:
    """Per activity: FLOPs per precision, fewest HBM bytes, link bytes and the op the work was counted as
    (null where unknown)."""
    count = len(activities)
    columns: dict[str, Any] = {c: np.full(count, np.nan) for c in (*FLOP_QUANTITIES, "bytes_hbm", "bytes_link")}
    columns["work_op"] = np.full(count, None, dtype=object)
    kernels_of_op: dict[int, list[int]] = defaultdict(list)
    works: dict[int, OpWork] = {}
    counted_ops = choose_counted_ops(links)
    for index, (activity, link) in enumerate(zip(activities, links, strict=True)):
        if activity.category in ("memcpy", "memset"):
            columns["bytes_hbm"][index] = copy_bytes(activity)
            columns["flops_fp32"][index] = 0.0
        elif is_communication(activity.name):
            args = activity.args if collective_name(activity.args) else (link.op.args if link.op else {})
            link_bytes = bus_bytes(args)
            columns["bytes_link"][index] = link_bytes if link_bytes is not None else np.nan
        elif (counted := counted_ops[index]) is not None:
            kernels_of_op[id(counted[0])].append(index)
            works[id(counted[0])] = counted[1]
    names = [a.name.lower() for a in activities]
    tensor = np.array([any(f in name for f in metric_set.tensor_hints.float_names) for name in names], dtype=bool)
    bf16 = np.array([any(f in name for f in _bf16_names(metric_set)) for name in names], dtype=bool)
    for key, indices in kernels_of_op.items():
        work = works[key]
        computing = [i for i in indices if tensor[i]] or indices
        flop_shares = dict(zip(computing, _duration_shares(activities, computing), strict=True))
        for share, index in zip(_duration_shares(activities, indices), indices, strict=True):
            for column in FLOP_QUANTITIES:
                columns[column][index] = 0.0
            for column, flops in work.flops.items():
                columns[column][index] = flops * flop_shares.get(index, 0.0)
            columns["bytes_hbm"][index] = work.bytes * share
            columns["work_op"][index] = work.main_op
            bf16[index] = bf16[index] or work.bf16
    return _route_tensor_work(pd.DataFrame(columns), tensor, bf16)


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
                position = next(i for i, op in enumerate(link.candidates) if op is pair[0])
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
        if id(op) not in works:
            works[id(op)] = op_work(op.name, op.args)
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


def _duration_shares(activities: list[GpuActivity], indices: list[int]) -> np.ndarray:
    durations = np.array([activities[i].duration_s for i in indices])
    return durations / durations.sum() if durations.sum() > 0 else np.full(len(indices), 1 / len(indices))


def _bf16_names(metric_set: MetricSet) -> tuple[str, ...]:
    return metric_set.tensor_hints.precision_names.get("flops_tensor_bf16", ("bf16",))


def _route_tensor_work(frame: pd.DataFrame, tensor: np.ndarray, bf16: np.ndarray) -> pd.DataFrame:
    moves = (
        ("flops_fp16", "flops_tensor_fp16", tensor & ~bf16),
        ("flops_fp16", "flops_tensor_bf16", tensor & bf16),
        ("flops_fp32", "flops_tensor_tf32", tensor),
        ("flops_fp64", "flops_tensor_fp64", tensor),
    )
    for source, target, mask in moves:
        moving = mask & (frame[source].fillna(0.0).to_numpy() > 0)
        frame.loc[moving, target] = frame.loc[moving, source]
        frame.loc[moving, source] = 0.0
    return frame
