"""An Nsight Systems export's NVTX ranges as the trace path's CPU events.

- ``torch.autograd.profiler.emit_nvtx()`` writes each op call and each ``record_function`` range as one range named
  ``aten::mm, seq = 12, op_id = 345, sizes = [[8, 16], [16, 4]], input_op_ids = [(340,0)]`` (PyTorch's
  ``getNvtxStr``: ``seq`` where autograd numbered the call, ``sizes`` only with ``record_shapes=True``). The name is
  what precedes the first of those fields; ``sizes`` become the op's ``Input Dims`` and ``seq`` its ``Sequence
  number``, as the PyTorch profiler records them, so the trace path's work formulas and forward passes apply as
  they are. emit_nvtx records no dtypes: the tensors are taken as float32, the trace path's rule for a trace
  without types (said in the source's notes).
- An op or a range by the PyTorch profiler's own rule (:func:`~hroofline.importers.kineto.is_user_range_name`):
  ``ProfilerStep#3``, ``forward`` or NCCL's ``ncclSend`` are ranges, ``aten::mm`` and ``FSDP::pre_forward (m)`` ops.
- FSDP's hooks (``FSDP::pre_forward (encoder.block.14.layer.1)`` ... ``FSDP::post_forward (encoder.block.14.layer.1)``,
  ``pre_backward``/``post_backward`` likewise) bound a module's forward (backward): from its pre hook's start to
  its post hook's end, on any thread of the process. Each such span becomes the layer range
  ``hroofline.layer:MODULE`` and a phase range (``forward``, ``backward``), process-wide: on the launching thread,
  the user's own phase ranges and autograd's backward ops decide a launch's phase first, as in the trace path (a
  checkpointed module's forward recomputed in backward stays backward).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hroofline.importers.kineto import CpuEvent, is_user_range_name
from hroofline.importers.kineto_links import LAYER_RANGE_PREFIX
from hroofline.importers.nsys_sqlite import NvtxRange

_FIELDS = re.compile(r", (seq|op_id|sizes|input_op_ids) = ")
_FSDP_HOOK = re.compile(r"^FSDP::(pre|post)_(forward|backward) \((.+)\)$")
FSDP_THREAD = ("", "fsdp modules")  # the spans made from FSDP's hooks lie on no thread: they are process-wide


@dataclass(frozen=True)
class RangeName:
    """An emit_nvtx range's text, taken apart."""

    name: str
    sequence: int | None
    sizes: list[Any] | None


def parse_range(text: str) -> RangeName:
    """``aten::mm, seq = 12, op_id = 345, sizes = [[8, 16], [16, 4]]`` -> (``aten::mm``, 12, [[8, 16], [16, 4]])."""
    first = _FIELDS.search(text)
    if first is None:
        return RangeName(text, None, None)
    name = text[: first.start()]
    sequence = re.search(r", seq = (\d+)", text)
    return RangeName(name, int(sequence.group(1)) if sequence else None, _sizes(text))


def _sizes(text: str) -> list[Any] | None:
    """The list after ``, sizes = ``, read to its closing bracket (``input_op_ids`` may follow)."""
    at = text.find(", sizes = ")
    if at < 0:
        return None
    start = at + len(", sizes = ")
    depth = 0
    for position in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[position], 0)
        if depth == 0:
            try:
                sizes = json.loads(text[start : position + 1])
            except ValueError:
                return None
            return sizes if isinstance(sizes, list) else None
    return None


def cpu_events(ranges: list[NvtxRange]) -> tuple[list[CpuEvent], int]:
    """The process's ranges as CPU events, with the FSDP module spans made from its hooks; and how many ops carry
    recorded sizes."""
    events: list[CpuEvent] = []
    with_sizes = 0
    for item in ranges:
        parsed = parse_range(item.text)
        args: dict[str, Any] = {}
        if parsed.sizes is not None:
            args["Input Dims"] = parsed.sizes
            with_sizes += 1
        if parsed.sequence is not None:
            args["Sequence number"] = parsed.sequence
        is_range = is_user_range_name(parsed.name)
        events.append(CpuEvent(parsed.name, item.thread, item.start_s, item.end_s, is_range, args))
    return events + module_spans(events), with_sizes


def module_spans(events: list[CpuEvent]) -> list[CpuEvent]:
    """Per FSDP module and direction, each span from a pre hook's start to the next post hook's end: a layer range
    and a phase range, both process-wide."""
    opened: dict[tuple[str, str], float] = {}
    spans: list[CpuEvent] = []
    for event in sorted(events, key=lambda e: e.start_s):
        hook = _FSDP_HOOK.match(event.name)
        if hook is None:
            continue
        when, direction, module = hook.groups()
        key = (module, direction)
        if when == "pre":
            opened.setdefault(key, event.start_s)
        elif key in opened:
            start = opened.pop(key)
            spans.append(CpuEvent(LAYER_RANGE_PREFIX + module, FSDP_THREAD, start, event.end_s, True, {}))
            spans.append(CpuEvent(direction, FSDP_THREAD, start, event.end_s, True, {}))
    return spans
