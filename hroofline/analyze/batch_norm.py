"""Batch norm in training over NCHW tensors: a time per channel that a wider GPU does not shorten.

Training batch norm reduces each channel over N x H x W. In NCHW, cuDNN (and PyTorch's own kernels) run one
thread block per channel, so a layer of 64 channels keeps 64 blocks busy on a GPU with room for hundreds; its
time is about N x H x W over what one block streams per second, not its bytes over the GPU's bandwidth. The
traced step marks these ops with the elements of one channel (:func:`hroofline.work.ops.nchw_channel_elements`);
the estimate gives each ``elements / rate`` (``metrics/batch_norm.toml``: measured on real traces, not fitted)
where that is longer than their class's estimate. It is the rate of the kernels of big layers: cuDNN runs
small ones (28 x 28 and below at batch 32) on ``*_singleread*`` kernels about twice as fast per block. NHWC kernels
and inference spread over the whole GPU and get no such time.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from hroofline.roofs.metricset import metrics_dir


@dataclass(frozen=True)
class ChannelRate:
    """Elements of one channel one thread block reduces per second, forward and backward."""

    forward: float
    backward: float
    measured_on: str

    def times(self, elements: np.ndarray, backward: np.ndarray) -> np.ndarray:
        """The time of ops whose kernels run one block per channel of ``elements`` (0: no such op)."""
        return elements / np.where(backward, self.backward, self.forward)


NO_CHANNEL_LIMIT = ChannelRate(np.inf, np.inf, "no limit")


# cuDNN's NCHW training batch norm kernels, one thread block per channel (bn_fw_tr_1C11_kernel_NCHW,
# bn_bw_1C11_kernel_new, and their *_singleread* variants); not its inference ones (bn_fw_inf_1C11_*).
_PER_CHANNEL_KERNELS = re.compile(r"\bbn_(?:fw_tr|bw)_1C11_")


def per_channel_kernels(kernels: pd.Series) -> pd.Series:
    """Which measured kernels are NCHW training batch norm's, whose time a prediction gives per channel."""
    return kernels.astype(str).str.contains(_PER_CHANNEL_KERNELS)


@cache
def load_channel_rate() -> ChannelRate:
    """The measured rates of ``metrics/batch_norm.toml``."""
    data = tomllib.loads((metrics_dir() / "batch_norm.toml").read_text())
    rate = data["elements_per_s"]
    return ChannelRate(float(rate["forward"]), float(rate["backward"]), str(data["measured_on"]))
