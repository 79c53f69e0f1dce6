"""Hopper's own efficiencies (issue 24, item 1) as predict uses them on a GPU of compute capability 9.0, and the
bench's way of judging them on a few real steps. The fit to the 168 steps measured on an H100 and an H200, judged
with each GPU left out, and its figures are checked by tests/figures/test_hopper_estimate.py (make check-figures)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hroofline.analyze.calibrate import error_factors, fit
from hroofline.analyze.estimate import load_estimate_model
from tests.conftest import estimate_error_bench


def test_predict_takes_the_generation_of_its_gpu(cli, tmp_path) -> None:
    hopper, ampere = load_estimate_model().for_cc("9.0"), load_estimate_model().for_cc("8.0")
    assert ampere == load_estimate_model()
    on_h100 = cli("predict", "--arch", "resnet18", "--gpu", "h100", "--store", tmp_path)
    assert on_h100.code == 0, on_h100.err
    training = hopper.error_for("train")
    assert f"held-out measured {training.measured_on} were within x{training.p90:.2f}" in on_h100.out
    on_a100 = cli("predict", "--arch", "resnet18", "--gpu", "a100", "--store", tmp_path)
    assert f"V100, A100 and T4 were within x{ampere.error.p90:.2f}" in on_a100.out


def test_an_inference_pass_on_hopper_has_the_band_of_inference_passes() -> None:
    """On Hopper the estimate of an inference pass is the host's time at a floor fitted on other hosts: its held-out
    error is wider than a training step's, and so is the band predict gives it. EfficientNet-V2-S at batch 1 on the
    fifth visit's H200 (a model no fit saw), measured at 10.39 ms, is estimated 2.17 times slower: outside the band
    of all Hopper steps together (x1.60), inside inference's."""
    import hroofline

    bench = estimate_error_bench()
    rows = bench.timed_steps(bench.H200_FIFTH)
    chosen = (rows["model"] == "efficientnet_v2_s") & (rows["precision"] == "fp32") & (rows["batch"] == 1)
    measured_s = float(rows.loc[chosen & (rows["phases"] != "train"), "measured_s"].item())
    bundled = load_estimate_model().for_cc("9.0")
    forward, every = bundled.error_for("forward"), bundled.error
    assert forward.p90 > every.p90
    step = hroofline.predict("efficientnet_v2_s", gpu="h200", batch_size=1, phases="forward").step
    assert step.error_factor == forward.p90 and step.error_measured_on == forward.measured_on
    # the validation page's figures (docs/validation.md)
    assert (measured_s, step.estimate_s) == pytest.approx((10.39e-3, 22.6e-3), abs=0.05e-3)
    assert step.estimate_s / measured_s == pytest.approx(2.17, abs=0.01)
    assert (step.low_s, step.high_s) == pytest.approx((9.18e-3, 55.5e-3), rel=0.002)
    assert step.low_s < measured_s < step.high_s
    every_band = (step.estimate_s / every.p90, step.estimate_s * every.p90)
    assert every_band == pytest.approx((14.1e-3, 36.1e-3), abs=0.05e-3)
    assert measured_s < every_band[0]  # the band of all Hopper steps together missed it


def test_each_hopper_gpu_left_out_is_judged_by_a_fit_to_the_other() -> None:
    """The bench's held-out protocol on four real steps (ResNet-18's training steps at batch 32, FP32 and AMP, on
    the H100 and the H200): each GPU's steps are judged with the efficiencies fitted on the other GPU's steps alone,
    the published fit's host floor kept."""
    bench = estimate_error_bench()
    rows = bench.hopper_rows()
    chosen = (rows["model"] == "resnet18") & (rows["batch"] == 32) & (rows["phases"] == "train")
    rows = rows[chosen & (rows["layout"] == "NCHW")].reset_index(drop=True)
    assert sorted(rows["gpu"]) == ["h100-sxm", "h100-sxm", "h200", "h200"]
    found = bench.samples(rows)
    floor = load_estimate_model().host_floor_s
    factors = bench.held_out(found, list(rows["gpu"]), floor)
    for gpu in ("h100-sxm", "h200"):
        mine = (rows["gpu"] == gpu).to_numpy()
        other = fit([sample for sample, keep in zip(found, ~mine, strict=True) if keep], floor)
        assert other.host_floor_s == floor
        judged = error_factors([sample for sample, keep in zip(found, mine, strict=True) if keep], other)
        assert factors[mine] == pytest.approx(judged, rel=1e-12)
    assert (factors >= 1).all()


def test_each_kind_of_step_takes_the_band_of_its_widest_way() -> None:
    """kind_bands: per kind of step (training steps, inference passes), the way of judging whose steps of that kind
    have the widest 90th percentile; a way without steps of a kind is passed over for it."""
    bench = estimate_error_bench()

    def way(phases: list[str], factors: list[float], where: str):
        rows = pd.DataFrame({"phases": phases, "model": "m", "batch": [1, 32, 128][: len(phases)]})
        return bench.JudgedSteps(rows, np.array(factors), where)

    ways = [
        way(["train", "train", "forward"], [1.1, 1.3, 2.0], "first"),
        way(["train", "train"], [1.2, 1.5], "second"),
        way(["forward", "forward", "train"], [1.4, 1.8, 1.0], "third"),
    ]
    bands = bench.kind_bands(ways)
    assert set(bands) == {"train", "forward"}
    (train, train_steps), (forward, forward_steps) = bands["train"], bands["forward"]
    assert "second" in train.measured_on and train_steps == 2
    assert "first" in forward.measured_on and forward_steps == 1 and forward.p90 == pytest.approx(2.0)
    assert train.measured_on == "2 training steps of 1 torchvision models second, batch 1 to 32"
