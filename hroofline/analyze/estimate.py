"""A step-time estimate beside the roofline bound: what a predicted step should take, with its error.

The bound is each op's time at roof (:mod:`hroofline.analyze.predict`). Real steps are slower: eager PyTorch
spends tens of microseconds per op on the host, and kernels reach only part of their roof, a part that
depends on the kind of work. The estimate of one op is

    max(host floor, time at roof / efficiency of its class)

with three classes: matrix products and convolutions on the tensor cores, the same on the FP32 units, and
everything else (memory-bound element-wise work, reductions, normalisation). The floor and the three
efficiencies are fitted to measured step times (:mod:`hroofline.analyze.calibrate`), and live with the error
they showed on measurements left out of the fit in ``metrics/estimate.toml``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd

from hroofline.analyze.predict import MATMUL_OPS
from hroofline.model.host import HostCost
from hroofline.model.quantities import TENSOR_FLOP_QUANTITIES
from hroofline.roofs.metricset import metrics_dir

OP_CLASSES: tuple[str, ...] = ("tensor", "matmul_fp32", "other")
FITTED_HOST = "fitted"  # EstimateModel.host_source of the bundled floor


@dataclass(frozen=True)
class EstimateModel:
    """The fitted parameters of the estimate, and the error they showed on data left out of the fit."""

    host_floor_s: float
    efficiency: dict[str, float]  # per op class, in (0, 1]
    median_error: float | None = None  # error factor max(est/meas, meas/est), held-out rows
    p90_error: float | None = None
    source: str = ""
    measured_on: str = ""  # what the held-out error was measured on
    host_source: str = FITTED_HOST  # where host_floor_s comes from: the fit, or a measurement (HostCost.describe)


def op_classes(launches: pd.DataFrame) -> np.ndarray:
    """Per op, the index of its class in :data:`OP_CLASSES`."""
    tensor_columns = [c for c in TENSOR_FLOP_QUANTITIES if c in launches]
    on_tensor_cores = launches[tensor_columns].fillna(0.0).sum(axis=1).to_numpy() > 0
    matmul = launches["kernel"].isin(MATMUL_OPS).to_numpy()
    return np.where(on_tensor_cores, 0, np.where(matmul, 1, 2))


def estimate_times(roof_s: np.ndarray, classes: np.ndarray, model: EstimateModel) -> np.ndarray:
    """Each op's estimated time from its time at roof and its class."""
    efficiency = np.array([model.efficiency[c] for c in OP_CLASSES])
    return np.maximum(model.host_floor_s, roof_s / efficiency[classes])


def describe_efficiency(efficiency: dict[str, float]) -> str:
    """``tensor 0.90, matmul_fp32 1.00, other 0.56``: the efficiency of each op class."""
    return ", ".join(f"{name} {efficiency[name]:.2f}" for name in OP_CLASSES)


def estimate_method(model: EstimateModel) -> str:
    efficiency = describe_efficiency(model.efficiency)
    host = "fitted" if model.host_source == FITTED_HOST else "measured"
    return (
        f"estimated: max(host floor {model.host_floor_s * 1e6:.1f} us ({host}), time at roof / efficiency of the "
        f"op's class: {efficiency}), {model.source}"
    )


def with_host_cost(model: EstimateModel, host: HostCost, phases: str, precision: str) -> EstimateModel:
    """The estimate with the host floor measured on a machine (``ceilings --measure``) instead of the fitted one."""
    return replace(model, host_floor_s=host.per_op(phases, precision), host_source=host.describe(phases, precision))


def with_estimate(launches: pd.DataFrame, model: EstimateModel) -> pd.DataFrame:
    """Predicted ops with ``time_s`` the estimate; ``time_bound_s`` keeps the roofline bound."""
    out = launches.copy()
    out["time_s"] = estimate_times(out["time_bound_s"].to_numpy(), op_classes(out), model)
    out["time_method"] = estimate_method(model)
    return out


@cache
def load_estimate_model() -> EstimateModel:
    data = tomllib.loads((metrics_dir() / "estimate.toml").read_text())
    fit, error = data["fit"], data.get("held_out_error", {})
    return EstimateModel(
        host_floor_s=float(fit["host_floor_s"]),
        efficiency={c: float(fit["efficiency"][c]) for c in OP_CLASSES},
        median_error=error.get("median"),
        p90_error=error.get("p90"),
        source=str(data.get("source", "")),
        measured_on=str(error.get("measured_on", "")),
    )


@dataclass(frozen=True)
class StepTime:
    """A predicted step (or forward pass): bound and estimate, the estimate's error band, and throughput."""

    bound_s: float
    estimate_s: float
    error_factor: float | None  # 90% of held-out steps were within this factor of the estimate
    error_measured_on: str  # which steps: the error holds for steps like these
    items: float  # samples (or tokens) per step
    unit: str  # "images", "tokens" or "samples"

    @property
    def low_s(self) -> float | None:
        return self.estimate_s / self.error_factor if self.error_factor else None

    @property
    def high_s(self) -> float | None:
        return self.estimate_s * self.error_factor if self.error_factor else None

    def throughput(self, seconds: float | None) -> float | None:
        """Items per second at ``seconds`` per step."""
        return self.items / seconds if seconds else None


def step_time(launches: pd.DataFrame, model: EstimateModel, items: float, unit: str) -> StepTime:
    return StepTime(
        bound_s=float(launches["time_bound_s"].sum()),
        estimate_s=float(launches["time_s"].sum()),
        error_factor=model.p90_error,
        error_measured_on=model.measured_on,
        items=items,
        unit=unit,
    )
