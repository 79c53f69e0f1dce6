"""Where a run's counters came from: measured on each launch, or measured once per signature and copied."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

_NOT_KERNELS = ("memcpy", "memset")


@dataclass(frozen=True)
class CounterProvenance:
    launches: int  # the run's kernel launches (copies and sets are no kernels: ncu does not profile them)
    measured: int  # launches whose counters ncu measured on them
    copied: int  # launches carrying the counters of an identical measured launch


def counter_provenance(launches: pd.DataFrame) -> CounterProvenance | None:
    """None where no counters were copied (every run before distinct-launch profiling, and --every-launch)."""
    source = launches["counters_from"] if "counters_from" in launches.columns else None
    if source is None or not source.notna().any():
        return None
    copied = source.notna() & (source != launches["launch_id"])
    if not copied.any():
        return None
    measured = source.notna() & ~copied
    count = launches["launches"].fillna(1)
    kernels = ~launches["category"].isin(_NOT_KERNELS).fillna(False)
    return CounterProvenance(int(count[kernels].sum()), int(count[measured].sum()), int(count[copied].sum()))
