"""A sweep of predictions (models x GPUs x batch sizes x precisions) as one table, a row per run.

Per run: the step's roofline bound and estimate, throughput at the estimate, FLOPs and the fewest bytes
(HBM), arithmetic intensity = FLOPs / bytes, attainable FLOP/s = FLOPs / bound (every op at its own roof,
so the step's mix of precisions and memory-bound ops is in it), the step's peak memory and whether it fits,
and what the forward pass leaves allocated (what ``torch.cuda.memory_allocated`` grows by over it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.estimate import StepTime
from hroofline.analyze.memory_fit import MemoryFit, peak_phase
from hroofline.model.run import PhaseMemory
from hroofline.roofs.formulas import total_flops

SWEEP_COLUMNS: tuple[str, ...] = (
    "run",
    "model",
    "gpu",
    "precision",
    "batch",
    "time_bound_s",
    "time_s",
    "per_s",
    "unit",
    "flops",
    "bytes_hbm",
    "intensity",
    "attainable_flop_per_s",
    "memory_peak_bytes",
    "memory_forward_retained_bytes",
    "fits",
    "largest_batch",
)


@dataclass(frozen=True)
class SweepEntry:
    run: str
    model: str
    gpu: str
    precision: str
    batch: int
    launches: pd.DataFrame
    step: StepTime
    fit: MemoryFit | None
    memory: Sequence[PhaseMemory]


def sweep_table(entries: Sequence[SweepEntry]) -> pd.DataFrame:
    rows = []
    for entry in entries:
        flops = float(total_flops(entry.launches).sum())
        moved = float(entry.launches["bytes_hbm"].sum())
        rows.append(
            {
                "run": entry.run,
                "model": entry.model,
                "gpu": entry.gpu,
                "precision": entry.precision,
                "batch": entry.batch,
                "time_bound_s": entry.step.bound_s,
                "time_s": entry.step.estimate_s,
                "per_s": entry.step.throughput(entry.step.estimate_s),
                "unit": entry.step.unit,
                "flops": flops,
                "bytes_hbm": moved,
                "intensity": flops / moved if moved else None,
                "attainable_flop_per_s": flops / entry.step.bound_s if entry.step.bound_s else None,
                "memory_peak_bytes": peak_phase(entry.memory).peak_bytes if entry.memory else None,
                "memory_forward_retained_bytes": next(
                    (m.retained_bytes for m in entry.memory if m.phase == "forward"), None
                ),
                "fits": entry.fit.fits if entry.fit else None,
                "largest_batch": entry.fit.largest_batch if entry.fit else None,
            }
        )
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
