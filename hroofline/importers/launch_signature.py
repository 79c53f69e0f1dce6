"""What identifies the same work: a launch's signature, from what the trace records about it.

Two launches with one signature run the same kernel on the same launch configuration for an op called on
inputs that agree in everything the profiler records: shapes, dtypes, strides and the concrete scalars
(``record_shapes``), and in the launch's place among its op call's kernels. Their counters (FLOPs, bytes at
every level) are then the same, which lets ncu measure one launch per signature (:mod:`hroofline.collect.
distinct_launches`).

Kernel name, grid and block alone are not enough, measured on the shared H100 reports: cuDNN's implicit GEMMs
keep their grid when the input channels change (resnet34's forward FLOPs 14% off when copied so), GPT-2's
forward 16% off. A launch whose op's inputs are not all recorded (no op, no shapes, a tensor list such as the
optimizer's ``_foreach_`` ops take) has no signature: it is its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from hroofline.importers.kineto import CpuEvent, GpuActivity, input_dims
from hroofline.importers.kineto_links import LaunchLink

# The op arguments ``record_shapes`` writes (PyTorch 1.8 to 2.x spellings), each part of the signature.
_INPUT_ARGS = ("Input Dims", "Input dims", "Input type", "Input Strides", "Concrete Inputs")
# Input types whose content the trace does not record: a list of tensors has no dims of its own.
_UNRECORDED_INPUTS = ("TensorList", "GenericList")


def launch_signatures(activities: Sequence[GpuActivity], links: Sequence[LaunchLink]) -> list[str | None]:
    """Each kernel's signature (16 hex digits), None where its op's inputs are not all recorded or it is
    not a kernel."""
    ordinal: dict[int, int] = {}  # kernels seen so far per op call, keyed by the op event's identity
    signatures: list[str | None] = []
    for activity, link in zip(activities, links, strict=True):
        op = _recorded_op(link)
        if activity.category != "kernel" or op is None:
            signatures.append(None)
            continue
        place = ordinal.get(id(op), 0)
        ordinal[id(op)] = place + 1
        parts: list[Any] = [
            activity.name,
            activity.args.get("grid"),
            activity.args.get("block"),
            activity.args.get("shared memory"),
            op.name,
            [op.args.get(name) for name in _INPUT_ARGS],
            place,
        ]
        text = json.dumps(parts, sort_keys=True, default=str)
        signatures.append(hashlib.blake2b(text.encode(), digest_size=8).hexdigest())
    return signatures


def op_calls(links: Sequence[LaunchLink]) -> tuple[list[int | None], bool]:
    """Which op call launched each activity, and whether the numbers are hroofline's own: its count of the op
    calls of the profiled steps where the trace marks them (a trace pass for ncu), else the trace's External id
    of the innermost op with recorded inputs (unique within the trace only)."""
    if any(link.marked_call is not None for link in links):
        return [link.marked_call for link in links], True
    calls: list[int | None] = []
    for link in links:
        op = _recorded_op(link) or link.op
        external = op.args.get("External id") if op is not None else None
        calls.append(int(external) if isinstance(external, int) else None)
    return calls, False


def _recorded_op(link: LaunchLink) -> CpuEvent | None:
    """The innermost op that launched the kernel and whose inputs are all recorded, else None."""
    for op in (link.op, *reversed(link.candidates)):
        if op is None or input_dims(op.args) is None:
            continue
        types = op.args.get("Input type")
        if isinstance(types, list) and any(str(t) in _UNRECORDED_INPUTS for t in types):
            return None
        return op
    return None
