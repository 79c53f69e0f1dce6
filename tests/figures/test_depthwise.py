"""The validation page's paragraph on depthwise convolutions' kernels (docs/validation.md, key depthwise), figure
by figure: on the H200's traces of ConvNeXt-T and EfficientNet-B0 (tests/data/gpu-2026-11-27/h200-layouts, AMP,
batch 32), the depthwise ops' kernel time over their bound; on DeepCAM's V100 AMP run (../shared, Yang et al.),
the efficiencies `predict --calibrate` measures. tests/test_depthwise.py and tests/test_estimate.py check the
same readings in make test."""

from __future__ import annotations

from pathlib import Path

import pytest

from hroofline.analyze.calibrate import calibrate_on_run
from hroofline.analyze.estimate import load_estimate_model
from hroofline.store.runs import RunStore
from tests.test_depthwise import LAYOUTS, measured_depthwise, predicted_depthwise
from tests.validation_page import assert_page_shows, page_figures


def bound_share(model: str, layout: str) -> tuple[float, float]:
    """The depthwise ops' bound over their kernels' time in the H200's trace, and that time in ms."""
    _, bound_s = predicted_depthwise(model, layout == "channels_last")
    seconds = measured_depthwise(model, layout).seconds
    return bound_s / seconds, seconds * 1e3


def test_depthwise_kernels_on_the_h200_and_deepcam(deepcam_store: Path) -> None:
    (batch,) = {int(path.name.split("-b")[1].split("-")[0]) for path in LAYOUTS.glob("*-amp-b*-train-*-trace.json.xz")}
    convnext, convnext_last = bound_share("convnext_tiny", "nchw"), bound_share("convnext_tiny", "channels_last")
    assert convnext == pytest.approx(convnext_last, abs=0.005)  # either layout: the page's figures are both's
    efficientnet, efficientnet_last = (
        bound_share("efficientnet_b0", "nchw"),
        bound_share("efficientnet_b0", "channels_last"),
    )
    figures = [batch, 1 / convnext[0], *convnext, 1 / efficientnet[0], 1 / efficientnet_last[0]]
    figures += [*efficientnet, *efficientnet_last]
    calibration = calibrate_on_run(RunStore(deepcam_store).load("deepcam-O1"), load_estimate_model())
    efficiency = calibration.model.efficiency
    figures += [efficiency["depthwise"], calibration.classes["depthwise"].launches, efficiency["other"]]
    assert_page_shows(page_figures("depthwise"), figures, "the depthwise kernels' time")
