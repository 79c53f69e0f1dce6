"""Does a step fit a GPU's memory, and the largest batch that does.

The step's peak is the highest phase peak (:mod:`hroofline.collect.memory_tracking`). Not all of a GPU's
memory is PyTorch's: ECC takes about 6% of a T4 (15.1 of 16 GiB), the CUDA context a few hundred MiB, and the
caching allocator leaves gaps between blocks. A step fits when its peak is at most :data:`USABLE_SHARE` of
the memory sold.

The largest batch: in each phase, the parameters, gradients and optimizer state at its peak do not grow
with the batch (nor do the optimizer's temporaries); its inputs, activations and temporaries grow in
proportion. Each phase's line gives a batch; the smallest holds for the step. Where a tracer is at hand and
the step as asked does not fit, the answer is traced and the line redrawn through the new point, until the
traced peak fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hroofline.model.run import PhaseMemory

USABLE_SHARE = 0.92
BATCH_INDEPENDENT: tuple[str, ...] = ("parameters", "gradients", "optimizer_state")
MAX_RETRACES = 4


@dataclass(frozen=True)
class MemoryFit:
    """The answer for one GPU: bytes sold and usable, the step's peak, and the largest batch that fits."""

    gpu: str
    capacity_bytes: float
    usable_bytes: float
    peak_bytes: float
    peak_phase: str
    largest_batch: int  # 0: not even one sample fits
    largest_batch_traced: bool  # checked by tracing that batch, or only the linear scaling

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.usable_bytes


def usable_bytes(capacity_bytes: float) -> float:
    """What a step may use of a GPU's memory (the rest goes to ECC, the CUDA context and allocator gaps)."""
    return capacity_bytes * USABLE_SHARE


def peak_phase(memory: Sequence[PhaseMemory]) -> PhaseMemory:
    return max(memory, key=lambda m: m.peak_bytes)


def batch_line(phase: PhaseMemory, batch: int) -> tuple[float, float]:
    """(bytes that do not grow with the batch, bytes per sample) at the phase's peak. The optimizer's
    temporaries are per parameter, not per sample."""
    fixed_categories = (*BATCH_INDEPENDENT, "temporaries") if phase.phase == "optimizer" else BATCH_INDEPENDENT
    fixed = sum(phase.peak_by_category.get(c, 0.0) for c in fixed_categories)
    return fixed, max(phase.peak_bytes - fixed, 0.0) / batch


def _solve(fixed: float, per_sample: float, usable: float) -> int:
    if per_sample <= 0:
        return 0
    return max(int((usable - fixed) // per_sample), 0)


def memory_fit(
    gpu: str,
    capacity_bytes: float,
    memory: Sequence[PhaseMemory],
    batch: int,
    peak_at: Callable[[int], float] | None = None,
) -> MemoryFit:
    """The fit of a step traced at ``batch``; with ``peak_at`` (a batch size to its traced peak) the largest batch
    is traced and the line redrawn until it fits, when the step as asked does not fit."""
    peak = peak_phase(memory)
    usable = usable_bytes(capacity_bytes)
    # each phase's own line: the smallest answer holds for all (the peak may move to another phase)
    largest = min(_solve(*batch_line(phase, batch), usable) for phase in memory)
    traced = False
    if peak_at is not None and peak.peak_bytes > usable and largest >= 1:
        known = (batch, peak.peak_bytes)
        for _ in range(MAX_RETRACES):
            traced_peak = peak_at(largest)
            if traced_peak <= usable:
                traced = True
                break
            slope = (known[1] - traced_peak) / (known[0] - largest)  # largest < known[0]: it only goes down
            known = (largest, traced_peak)
            fixed = traced_peak - slope * largest
            largest = min(_solve(fixed, slope, usable), largest - 1)
            if largest < 1:
                break
    return MemoryFit(gpu, capacity_bytes, usable, peak.peak_bytes, peak.phase, largest, traced)
