"""Numbering the op calls of the profiled steps, the same way in the trace pass and in the ncu pass.

ncu cannot be told "these 170 of 1,118 launches" by launch number: its ``--kernel-id`` counts per kernel name
and takes one name pattern and one number pattern, whose combinations select half of a GPT-2 step. What it
can filter on exactly is an NVTX push/pop range open on the launching thread. So a dispatch mode counts every
ATen op call of the profiled steps (forward, backward on autograd's thread, optimizer):

- in the trace pass it wraps call *n* in a ``record_function`` range ``hroofline.call#n``, which ties each
  kernel of the trace to the call that launched it (:mod:`hroofline.importers.kineto_links`);
- in the ncu pass it wraps the calls the plan chose (:mod:`hroofline.collect.distinct_launches`) in the NVTX
  range ``measure`` of the ``hroofline`` domain, and ncu runs with ``--nvtx-include hroofline@measure/``.

Both passes run the same workload with the same marks otherwise, so call *n* is the same op on the same
inputs in both; the join checks each measured kernel's name, grid and block against the trace's.
Every op is counted (ATen's and custom ones, ``torchvision::nms``) but the ``profiler`` ops that
``record_function`` itself dispatches: phase and layer ranges are ``record_function`` ranges in the trace pass
and NVTX ranges in the ncu pass, and would number the two passes apart. Inside ``measure``, a range
``call#n`` names the call, which ncu records with each result: the join checks it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hroofline.errors import UsageError
from hroofline.importers.kineto_links import CALL_RANGE_PREFIX

MEASURE_RANGE = "measure"
CALL_NVTX_PREFIX = "call#"  # the range inside ``measure`` naming the call's number
_NOT_COUNTED = "profiler"


def call_marks(mark: Callable[[int, str], contextlib.AbstractContextManager[Any] | None]) -> Any:
    """A dispatch mode that numbers op calls from 0 and runs call *n* of op *name* (``aten::addmm``)
    inside ``mark(n, name)`` (where not None)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class CallMarks(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func.namespace == _NOT_COUNTED:
                return func(*args, **kwargs)
            number = self.calls
            self.calls += 1
            context = mark(number, func.name().split(".", 1)[0])  # without the overload, as traces name it
            if context is None:
                return func(*args, **kwargs)
            with context:
                return func(*args, **kwargs)

    return CallMarks()


def trace_call_marks() -> Any:
    """The trace pass's marks: every call in a ``record_function`` range naming its number."""
    from torch.autograd.profiler import record_function

    return call_marks(lambda number, _: record_function(f"{CALL_RANGE_PREFIX}{number}"))


def measure_call_marks(planned: frozenset[int], domain: str) -> Any:
    """The ncu pass's marks: the planned calls in the NVTX push/pop range ``measure`` of ``domain``, and in it
    ``call#n``."""
    import nvtx

    @contextlib.contextmanager
    def measured(number: int) -> Iterator[None]:
        with (
            nvtx.annotate(message=MEASURE_RANGE, domain=domain),
            nvtx.annotate(message=f"{CALL_NVTX_PREFIX}{number}", domain=domain),
        ):
            yield

    return call_marks(lambda number, _: measured(number) if number in planned else None)


@contextlib.contextmanager
def marking(marks: Any | None) -> Iterator[None]:
    """Runs the block under ``marks`` (a mode from above), or unmarked where None."""
    if marks is None:
        yield
        return
    with marks:
        yield


def measure_marks(path: Path, domain: str) -> Any:
    """The ncu pass's op-call marks (in NVTX ``domain``) for the calls listed in ``path``."""
    try:
        planned = frozenset(int(number) for number in json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as error:
        raise UsageError(f"--measure-calls {path}: not a JSON list of op-call numbers ({error})") from None
    return measure_call_marks(planned, domain)
