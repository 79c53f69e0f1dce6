"""The central type passed between the pipeline stages: a :class:`Run`.

A run is metadata plus one row per kernel launch (``Run.launches``, a pandas DataFrame). Every
importer produces the same launch columns; the store keeps them in Parquet; the analysis reads them.
All quantities are SI: seconds, FLOPs, bytes. A quantity that was not measured is null, never 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from hroofline.metricset import QUANTITIES

SCHEMA_VERSION = 1

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "other")

# Identity of a launch. ``launches`` is 1 for a real launch and N for a row that stands for N launches
# of one kernel name (``--merge name``).
IDENTITY_COLUMNS: dict[str, str] = {
    "source": "int32",
    "launch_id": "int64",
    "kernel": "string",
    "phase": "string",
    "nvtx": "string",
    "grid": "string",
    "block": "string",
    "device": "string",
    "cc": "string",
    "stream": "string",
    "launches": "int64",
}
TIME_COLUMNS: dict[str, str] = {
    "time_s": "float64",
    "time_method": "string",
    "clock_hz": "float64",
}
QUANTITY_COLUMNS: dict[str, str] = {q: "float64" for q in QUANTITIES}
LAUNCH_COLUMNS: dict[str, str] = {**IDENTITY_COLUMNS, **TIME_COLUMNS, **QUANTITY_COLUMNS}
# Raw ncu metrics that fed a formula are kept beside the quantities, under this prefix, so every stored
# number can be traced back to what ncu measured.
RAW_METRIC_PREFIX = "metric:"


@dataclass
class SourceInfo:
    """One imported source: a file, or a folder of one-metric-per-run logs."""

    path: str
    kind: str
    sha256: str
    launches: int
    files: list[dict[str, str]] = field(default_factory=list)
    ncu_version: str | None = None
    phase: str | None = None
    formulas_used: dict[str, str] = field(default_factory=dict)
    time_methods: dict[str, int] = field(default_factory=dict)
    extra_metrics: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)  # how it was collected (clock control, ...)
    notes: list[str] = field(default_factory=list)


@dataclass
class RunMeta:
    name: str
    gpu: str | None = None
    device_name: str | None = None
    cc: str | None = None
    arch: str | None = None
    precision: str | None = None
    metric_set: str = "hierarchical"
    schema_version: int = SCHEMA_VERSION
    created: str | None = None
    updated: str | None = None
    sources: list[SourceInfo] = field(default_factory=list)
    ceilings: dict[str, Any] | None = None  # roofs measured with the run (CPU runs): label, source, peaks

    @property
    def ncu_versions(self) -> list[str]:
        return sorted({s.ncu_version for s in self.sources if s.ncu_version})

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ncu_versions"] = self.ncu_versions
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMeta:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "sources"}
        sources = [SourceInfo(**s) for s in data.get("sources", [])]
        return cls(**fields, sources=sources)


@dataclass
class Run:
    meta: RunMeta
    launches: pd.DataFrame

    @property
    def name(self) -> str:
        return self.meta.name


def empty_launches() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in LAUNCH_COLUMNS.items()})


def conform_launches(frame: pd.DataFrame) -> pd.DataFrame:
    """Give a launch table exactly the standard columns and dtypes, raw metric columns last."""
    out = frame.copy()
    for name, dtype in LAUNCH_COLUMNS.items():
        if name not in out.columns:
            missing = float("nan") if dtype == "float64" else pd.NA
            out[name] = pd.Series([missing] * len(out), index=out.index, dtype=dtype)
        else:
            out[name] = out[name].astype(dtype)
    raw = sorted(c for c in out.columns if c.startswith(RAW_METRIC_PREFIX))
    for name in raw:
        out[name] = out[name].astype("float64")
    return out[list(LAUNCH_COLUMNS) + raw].reset_index(drop=True)
