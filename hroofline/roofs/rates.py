"""Dense compute rates per SM per clock cycle (``metrics/rates.toml``), resolved for one GPU.

A compute roof is a rate x SMs x the SM clock a launch ran at. The rate of a GPU is its architecture's,
read over by its GeForce rates (half-rate FP32 accumulation) and by its own model's where its SMs differ
(an H20 does a quarter of an H100's tensor work per SM). Sparse keys (``tensor_fp16_sparse``) are the
dense rate x ``sparse_factor``. Nothing here computes a roof: :mod:`hroofline.roofs.report` does.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from hroofline.roofs.catalog import GpuName
from hroofline.roofs.metricset import metrics_dir, normalize_cc

SPARSE_SUFFIX = "_sparse"
RATES_FILE = "metrics/rates.toml"


@dataclass(frozen=True)
class DenseRates:
    """Per roof key: FLOP (or operations) per SM per cycle; ``source`` says which rows of the table."""

    per_sm_cycle: dict[str, float] = field(default_factory=dict)
    source: str = ""
    tolerance: float = 0.10
    cc: str | None = None  # the compute capability they are rates of

    def get(self, key: str) -> float | None:
        return self.per_sm_cycle.get(key)


@cache
def _table() -> dict[str, Any]:
    return tomllib.loads((metrics_dir() / "rates.toml").read_text())


def is_consumer(gpu: GpuName | None, device_name: str | None) -> bool:
    """A GeForce part: the catalog says so, or ncu's device name does."""
    if gpu is not None and gpu.consumer:
        return True
    return bool(device_name) and "geforce" in str(device_name).lower()


def rates_for(cc: str | None, gpu: GpuName | None = None, device_name: str | None = None) -> DenseRates:
    """The rates of a GPU of compute capability ``cc``: its architecture's, its GeForce rates, its model's."""
    table = _table()
    cc = normalize_cc(cc) if cc else (gpu.cc if gpu is not None else None)
    if cc is None or cc not in table["arch"]:
        return DenseRates(tolerance=float(table["tolerance"]))
    rows: list[tuple[str, dict[str, Any]]] = [(f"arch {cc}", table["arch"][cc])]
    if is_consumer(gpu, device_name) and cc in table.get("consumer", {}):
        rows.append((f"GeForce {cc}", table["consumer"][cc]))
    if gpu is not None and gpu.name in table.get("model", {}):
        rows.append((f"model {gpu.name}", table["model"][gpu.name]))
    rates: dict[str, float] = {}
    for _, row in rows:
        rates.update({k: float(v) for k, v in row.items() if k not in ("source", "unknown")})
        for key in row.get("unknown", ()):
            rates.pop(key, None)
    factor = float(table["sparse_factor"])
    for key, value in list(rates.items()):
        if key.startswith("tensor_") and key != "tensor_fp64":
            rates[key + SPARSE_SUFFIX] = value * factor
    source = "; ".join(f"{name}: {row['source']}" for name, row in rows)
    return DenseRates(rates, f"{RATES_FILE} ({source})", float(table["tolerance"]), cc)


__all__ = ["SPARSE_SUFFIX", "DenseRates", "is_consumer", "rates_for"]
