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
from collections.abc import Callable
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
# Bus-byte factor per collective, f(n) x message size (nccl-tests' busBw over algBw).
_FACTORS: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "allreduce_coalesced": lambda n: 2 * (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "_allgather_base": lambda n: (n - 1) / n,
    "allgather_into_tensor_coalesced": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "_reduce_scatter_base": lambda n: (n - 1) / n,
    "reduce_scatter_tensor_coalesced": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "all_to_allv": lambda n: (n - 1) / n,
    "alltoall_base": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}


def is_communication(kernel: str) -> bool:
    return bool(_COMMUNICATION.search(kernel))


def collective_name(args: dict[str, Any]) -> str | None:
    name = args.get("Collective name")
    return str(name) if name else None


def bus_bytes(args: dict[str, Any]) -> float | None:
    """The bytes one rank moves over its links for the collective described by ``args``, or None where the
    trace does not say enough (no collective name, sizes or element type)."""
    name = (collective_name(args) or "").lower()
    factor = _FACTORS.get(name)
    size = ELEMENT_BYTES.get(str(args.get("dtype", "")).lower())
    group = args.get("Group size")
    try:
        elements = max(float(args.get("In msg nelems") or 0), float(args.get("Out msg nelems") or 0))
        ranks = int(group) if group is not None else None
    except (TypeError, ValueError):
        return None
    if factor is None or size is None or not math.isfinite(elements) or elements <= 0 or not ranks or ranks < 1:
        return None
    return float(factor(ranks) * elements * size)
