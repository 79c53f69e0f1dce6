"""Memory of a training step, phase by phase: peak, what stays allocated, and what it is.

Two ways, one record (:class:`PhaseMemory`):

- :class:`StorageLiveness` follows every tensor storage the step's ops create (a ``TorchDispatchMode``
  sees each op's outputs; a finalizer on each storage sees it freed). It works on the meta device, so
  ``predict`` answers without memory, and on the CPU, where ``profile`` measures with it. Each storage counts
  once, however many views share it, rounded up to the 512-byte blocks of PyTorch's CUDA caching allocator.
  What happens inside one op (cuDNN workspaces, a decomposition's temporaries) is not seen.
- :class:`CudaPhaseMemory` reads the CUDA caching allocator (``torch.cuda.memory_allocated`` and its peak,
  reset at each phase start): what ``torch.cuda.memory_stats`` says, workspaces included.

Storages are put in categories: parameters (and buffers), gradients, optimizer state and inputs are the step's
own tensors; activations are storages the forward pass leaves alive (saved for backward, and its output);
everything else is a temporary.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from hroofline.model.run import CUDA_MEMORY_METHOD, LIVENESS_METHOD, MEMORY_CATEGORIES, PhaseMemory, first_per_phase

CUDA_BLOCK_BYTES = 512  # the CUDA caching allocator rounds every block up to a multiple of 512 bytes


@dataclass(frozen=True)
class StepTensors:
    """The tensors a step holds before it starts, by category (an optimizer's state may be empty)."""

    parameters: list[Any]
    gradients: list[Any]
    optimizer_state: list[Any]
    inputs: list[Any]


@dataclass
class _Storage:
    nbytes: int
    born_in: str | None
    category: str | None = None


_TO_COPY = torch.ops.aten._to_copy.default


def _rounded(nbytes: int) -> int:
    return -(-nbytes // CUDA_BLOCK_BYTES) * CUDA_BLOCK_BYTES


class StorageLiveness(TorchDispatchMode):
    """Bytes of live tensor storages through a step; ``phases`` holds one :class:`PhaseMemory` per phase.

    Use as a context manager around the step, with :meth:`listen` among the step's phase listeners and
    ``gradients_of`` giving the parameters' ``.grad`` tensors (they are told apart at each phase's end)."""

    def __init__(self, held: StepTensors, gradients_of: Callable[[], Iterable[Any]]) -> None:
        super().__init__()
        self._gradients_of = gradients_of
        self._live: dict[int, _Storage] = {}
        self._current = 0
        self._phase: str | None = None
        self._start = 0
        self._peak = 0
        self._at_peak: list[_Storage] = []
        self.phases: list[PhaseMemory] = []
        for category in ("parameters", "gradients", "optimizer_state", "inputs"):
            for tensor in getattr(held, category):
                self._add(tensor, category)

    def _add(self, tensor: Any, category: str | None = None) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._live:
            return
        entry = _Storage(_rounded(storage.nbytes()), self._phase, category)
        self._live[key] = entry
        weakref.finalize(storage, self._free, key, entry).atexit = False
        self._current += entry.nbytes
        if self._current > self._peak:
            self._peak = self._current
            self._at_peak = list(self._live.values())

    def _free(self, key: int, entry: _Storage) -> None:
        if self._live.get(key) is entry:
            del self._live[key]
            self._current -= entry.nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        # a weight's copy in another dtype (autocast's 16-bit weights) is a weight too: it does not grow with the batch
        category = "parameters" if func is _TO_COPY and self._category_of(args[0]) == "parameters" else None
        for leaf in tree_leaves(out):
            if hasattr(leaf, "untyped_storage"):
                self._add(leaf, category)
        return out

    def _category_of(self, tensor: Any) -> str | None:
        entry = self._live.get(tensor.untyped_storage()._cdata) if hasattr(tensor, "untyped_storage") else None
        return entry.category if entry is not None else None

    def listen(self, phase: str, entering: bool) -> None:
        if entering:
            self._phase, self._start, self._peak = phase, self._current, self._current
            self._at_peak = list(self._live.values())
            return
        self._classify(phase)
        self.phases.append(
            PhaseMemory(
                phase=phase,
                start_bytes=float(self._start),
                peak_bytes=float(self._peak),
                end_bytes=float(self._current),
                method=LIVENESS_METHOD,
                peak_by_category=_by_category(self._at_peak),
                end_by_category=_by_category(self._live.values()),
            )
        )
        self._phase = None

    def _classify(self, phase: str) -> None:
        """Storages alive at a phase's end get their category: gradients, what forward leaves (activations),
        what the optimizer leaves (its state); a storage freed before any phase end stays a temporary."""
        gradients = {g.untyped_storage()._cdata for g in self._gradients_of() if g is not None}
        for key, entry in self._live.items():
            if key in gradients:
                entry.category = "gradients"
            elif entry.category is None and entry.born_in == phase:
                entry.category = {"forward": "activations", "optimizer": "optimizer_state"}.get(phase)


def write_memory(path: Path, phases: list[PhaseMemory]) -> None:
    """The first step's phases as JSON, written atomically (a profiler's replays run the workload again)."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps([asdict(m) for m in first_per_phase(phases)], indent=2))
    temporary.replace(path)


def _by_category(entries: Iterable[_Storage]) -> dict[str, float]:
    totals = dict.fromkeys(MEMORY_CATEGORIES, 0.0)
    for entry in entries:
        totals[entry.category or "temporaries"] += entry.nbytes
    return totals


class CudaPhaseMemory:
    """A phase listener reading the CUDA caching allocator at each phase's start and end."""

    def __init__(self) -> None:
        import torch

        self._cuda = torch.cuda
        self._start = 0
        self.phases: list[PhaseMemory] = []

    def __call__(self, phase: str, entering: bool) -> None:
        self._cuda.synchronize()
        if entering:
            self._start = self._cuda.memory_allocated()
            self._cuda.reset_peak_memory_stats()
            return
        self.phases.append(
            PhaseMemory(
                phase=phase,
                start_bytes=float(self._start),
                peak_bytes=float(self._cuda.max_memory_allocated()),
                end_bytes=float(self._cuda.memory_allocated()),
                method=CUDA_MEMORY_METHOD,
            )
        )
