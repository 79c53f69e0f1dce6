"""The validation page's items on the fifth and sixth visits' traces (docs/validation.md, keys fifth-visit-traces
and sixth-visit-traces), figure by figure: the 11 NCHW training steps traced again on another H200 (h200-fifth/)
and on an H100 (h100-sixth/) against the fourth visit's H200 traces (h200-layouts/): their layout conversions'
time and NCHW batch norm's rate per channel block. tests/figures/test_layout_conversions.py and
test_batch_norm.py hold the same traces to their own bounds."""

from __future__ import annotations

import numpy as np

from hroofline.analyze.batch_norm import load_channel_rate
from tests.test_batch_norm import GPU_DATA, TRAINING_STEPS, channel_rates
from tests.test_layout_conversions import LAYOUTS, MOSTLY_UNCOUNTED, estimated_conversion_s, read_trace
from tests.validation_page import assert_page_shows, page_figures


def conversions_again(visit: str) -> list[tuple]:
    """Each NCHW training step's trace of the fourth visit and the same step's of ``visit``, which launched the
    same conversion kernels, in number and kind."""
    pairs = [
        (read_trace(LAYOUTS / path.name), read_trace(path)) for path in sorted((GPU_DATA / visit).glob("*-nchw-*"))
    ]
    assert len(pairs) == 11
    for first, again in pairs:
        assert again.conversion_kernels == first.conversion_kernels
        assert again.spatial_conversion_kernels == first.spatial_conversion_kernels
    return pairs


def rates(visit: str | None) -> np.ndarray:
    """NCHW batch norm's forward and backward rate per channel block over the traced steps of ``visit`` (None:
    the fourth visit's)."""
    paths = TRAINING_STEPS if visit is None else [GPU_DATA / visit / path.name for path in TRAINING_STEPS]
    return np.array(channel_rates(paths)[:2])


def test_the_fifth_visits_traces() -> None:
    drift = [abs(again.conversion_s / first.conversion_s - 1) * 100 for first, again in conversions_again("h200-fifth")]
    bundled = load_channel_rate()
    h100 = np.array(channel_rates([GPU_DATA / "h100-resnet50-amp-b32-nchw-trace.json.xz"])[:2])
    h200 = np.array(channel_rates([path for path in TRAINING_STEPS if path.name.startswith("resnet50-amp")])[:2])
    figures = [max(drift), *rates("h200-fifth"), bundled.forward, bundled.backward, *(abs(h100 / h200 - 1) * 100)]
    assert_page_shows(page_figures("fifth-visit-traces"), figures, "the fifth visit's traces")


def test_the_sixth_visits_traces() -> None:
    slower: dict[str, list[float]] = {"fp32": [], "amp": []}
    estimated = []
    for h200, h100 in conversions_again("h100-sixth"):
        slower[h100.config.precision].append(h100.conversion_s / h200.conversion_s)
        if h100.config.arch not in MOSTLY_UNCOUNTED:
            estimated.append(estimated_conversion_s(h100, "h100-sxm") / h100.conversion_s)
    every = slower["fp32"] + slower["amp"]
    figures = [min(every), max(every), min(slower["fp32"]), max(slower["fp32"]), min(slower["amp"])]
    figures += [max(slower["amp"]), min(estimated), max(estimated)]
    sixth = rates("h100-sixth")
    figures += [*sixth, *((1 - sixth / rates(None)) * 100), *((1 - sixth / rates("h200-fifth")) * 100)]
    assert_page_shows(page_figures("sixth-visit-traces"), figures, "the sixth visit's traces")
