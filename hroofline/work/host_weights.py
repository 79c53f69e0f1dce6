"""The host's time per op by kind of op: a cuDNN or cuBLAS call costs the host more than an element-wise op.

Eager PyTorch's host time per op is not one constant. A convolution or a batch norm goes through cuDNN's
descriptors and heuristics, a matrix product through cuBLAS; an element-wise op only through the dispatcher and
one kernel launch. Measured on an H100's host (``metrics/host_cost.toml``, float32 ops), a batch norm in training
took 3.2 times an element-wise op's host time besides its counter's add (an op of its own), a convolution 1.8
times, a linear layer 1.8 times. The estimate's host floor is an element-wise op's time; each op's floor is that
times its kind's weight (measured, not fitted).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from hroofline.roofs.metricset import metrics_dir
from hroofline.work.op_names import BATCH_NORM_OPS, CONVOLUTION_OPS, MATMUL_OPS


@dataclass(frozen=True)
class HostWeights:
    """Per kind of op, its host time over an element-wise op's; every op of no listed kind weighs 1."""

    convolution: float
    matmul: float
    batch_norm: float
    measured_on: str

    def __post_init__(self) -> None:
        if min(self.convolution, self.matmul, self.batch_norm) <= 0:
            raise ValueError(f"host weights must be positive: {self}")

    def of(self, kernels: pd.Series) -> np.ndarray:
        """Each op's weight, by its ATen name (backward ops as their forward op's)."""
        names = kernels.astype(str)
        weights = np.ones(len(names))
        weights[names.isin(MATMUL_OPS).to_numpy()] = self.matmul
        weights[names.isin(CONVOLUTION_OPS).to_numpy()] = self.convolution  # matrix products too: set after them
        weights[names.isin(BATCH_NORM_OPS).to_numpy()] = self.batch_norm
        return weights

    def floors(self, element_wise_s: float) -> dict[str, float]:
        """Each kind's host time when an element-wise op's is ``element_wise_s``."""
        return {
            "element-wise op": element_wise_s,
            "convolution": element_wise_s * self.convolution,
            "matrix product": element_wise_s * self.matmul,
            "batch norm": element_wise_s * self.batch_norm,
        }


EVEN_WEIGHTS = HostWeights(1.0, 1.0, 1.0, "one host time for every op")


@cache
def load_host_weights() -> HostWeights:
    """The weights of ``metrics/host_cost.toml``'s measured seconds: each kind's over the element-wise ops' mean."""
    data = tomllib.loads((metrics_dir() / "host_cost.toml").read_text())
    seconds = data["seconds_per_op"]
    unit = float(np.mean(seconds["elementwise"]))
    batch_norm = float(seconds["batch_norm"]) - float(seconds["batch_norm_counter"])
    return HostWeights(
        convolution=float(seconds["convolution"]) / unit,
        matmul=float(seconds["matmul"]) / unit,
        batch_norm=batch_norm / unit,
        measured_on=str(data["measured_on"]),
    )
