"""Communication kernels (NCCL and friends) and the bytes each rank moves over its links.

A kernel is communication by its name: NCCL's (``ncclKernel_AllReduce_RING_LL_Sum_float``,
``ncclDevKernel_AllGather_RING_LL``), RCCL's, and PyTorch's own symmetric-memory collectives. Its bytes come
from the collective's arguments where the trace has them (PyTorch writes ``Collective name``, ``In msg nelems``,
``Out msg nelems``, ``Group size`` and ``dtype`` on the kernel or its ``record_param_comms`` op): the message
size S = max(in, out) elements x element size, and the bytes each rank sends over its links, as nccl-tests
counts them ("bus bytes", so that bus bytes / time compares with the link bandwidth whatever the group size):

    all_reduce                           2 (n - 1) / n x S
    all_gather, reduce_scatter, all_to_all   (n - 1) / n x S
    broadcast, reduce, send, recv            S
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_COMMUNICATION = re.compile(
    r"^(void )?(nccl|rccl|ncclDevKernel|ncclKernel)|cross_device_reduce|(one|two)_shot_all_reduce|"
    r"multimem_all_reduce|all_gather_into_tensor_kernel",
    re.IGNORECASE,
)
ELEMENT_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "short": 2,
    "int16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "char": 1,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
# Bus-byte factor per collective, f(n) x message size (nccl-tests' busBw over algBw), by the collective's names.
_ALL_REDUCE = frozenset({"allreduce", "all_reduce", "allreduce_coalesced"})
_PART_OF_N = frozenset(
    {
        "allgather",
        "all_gather",
        "_allgather_base",
        "allgather_into_tensor_coalesced",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor_coalesced",
        "all_to_all",
        "alltoall",
        "all_to_allv",
        "alltoall_base",
        "gather",
        "scatter",
    }
)
_WHOLE = frozenset({"broadcast", "reduce", "send", "recv"})


def _factor(name: str, ranks: int) -> float | None:
    if name in _ALL_REDUCE:
        return 2 * (ranks - 1) / ranks
    if name in _PART_OF_N:
        return (ranks - 1) / ranks
    return 1.0 if name in _WHOLE else None


def is_communication(kernel: str) -> bool:
    return bool(_COMMUNICATION.search(kernel))


def collective_name(args: dict[str, Any]) -> str | None:
    name = args.get("Collective name")
    return str(name) if name else None


@dataclass(frozen=True)
class CollectiveSize:
    """What one collective launch moves: its name as PyTorch records it, the message size S (bytes: max of the
    in and out element counts x element size), the ranks in its group and its bus bytes (f(n) x S)."""

    name: str
    message_bytes: float
    group_size: int
    bus_bytes: float | None  # None for a collective whose bus-byte factor is not known


def collective_size(args: dict[str, Any]) -> CollectiveSize | None:
    """The sizes of the collective described by ``args``, or None where the trace does not say enough (no
    collective name, sizes, group size or element type)."""
    name = (collective_name(args) or "").lower()
    size = ELEMENT_BYTES.get(str(args.get("dtype", "")).lower())
    group = args.get("Group size")
    try:
        elements = max(float(args.get("In msg nelems") or 0), float(args.get("Out msg nelems") or 0))
        ranks = int(group) if group is not None else None
    except (TypeError, ValueError):
        return None
    if not name or size is None or not math.isfinite(elements) or elements <= 0 or not ranks or ranks < 1:
        return None
    message = float(elements * size)
    factor = _factor(name, ranks)
    return CollectiveSize(name, message, ranks, factor * message if factor is not None else None)


def bus_bytes(args: dict[str, Any]) -> float | None:
    """The bytes one rank moves over its links for the collective described by ``args``, or None where the
    trace does not say enough (no collective name, sizes or element type)."""
    found = collective_size(args)
    return found.bus_bytes if found is not None else None
