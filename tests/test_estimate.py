"""The step-time estimate and its calibration (the fit itself is run on published data by
bench/estimate_error.py; here: the formula, and that the fitter finds parameters it is given)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hroofline.analyze import layout
from hroofline.analyze.batch_norm import load_channel_rate
from hroofline.analyze.calibrate import (
    Sample,
    error_factors,
    estimated_step,
    fit,
    grid_estimates,
    percentiles,
    sample_terms,
)
from hroofline.analyze.estimate import (
    LAYOUT_CLASS,
    OP_CLASSES,
    ErrorBand,
    EstimateModel,
    OpKinds,
    error_bands,
    estimate_times,
    load_estimate_model,
    op_kinds,
)
from hroofline.analyze.layout import load_layout_cost
from hroofline.analyze.predict import prediction_peaks
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.roofs.catalog import resolve_gpu
from hroofline.work.host_weights import load_host_weights


def predicted_ops(
    batch: int, precision: str, gpu: str = "v100", model: str = "resnet18", phases: str = "forward"
) -> tuple[np.ndarray, OpKinds]:
    config = WorkloadConfig(model, batch, precision, "sgd", "meta")
    peaks = prediction_peaks(resolve_gpu(gpu), precision)
    ops = layout.predicted_ops(trace_step(config, phases), peaks).launches
    return ops["time_bound_s"].to_numpy(), op_kinds(ops)


def test_classes_and_formula() -> None:
    roof, kinds = predicted_ops(4, "amp")
    assert set(np.unique(kinds.classes)) == {0, 2}  # AMP: convolutions on the tensor cores, the rest memory-bound
    model = EstimateModel(30e-6, {"tensor": 0.5, "matmul_fp32": 0.8, "other": 0.25, "depthwise": 0.1})
    # each op's floor: 30 us times its kind's host weight (resnet18's forward: 20 convolutions, 20 batch norms,
    # one matrix product; the rest element-wise)
    weights = load_host_weights()
    kinds_of_op = {weights.convolution: 20, weights.batch_norm: 20, weights.matmul: 1}
    assert {w: int((kinds.host_weight == w).sum()) for w in kinds_of_op} == kinds_of_op
    assert set(kinds.host_weight) == {1.0, *kinds_of_op}
    floors = 30e-6 * kinds.host_weight
    expected = [max(f, t / (0.5 if c == 0 else 0.25)) for f, t, c in zip(floors, roof, kinds.classes, strict=True)]
    assert estimate_times(roof, kinds, model) == pytest.approx(expected, rel=1e-12)
    _, fp32 = predicted_ops(4, "fp32")
    assert set(np.unique(fp32.classes)) == {1, 2}  # V100 FP32: no TF32, convolutions on the FP32 units


def test_depthwise_convolutions_are_a_class_of_their_own() -> None:
    """MobileNetV2's 17 depthwise 3x3 convolutions (one per inverted residual block) are their own class in the
    forward pass and in both gradients, on tensor cores or not; its other 35 convolutions are not."""
    step = trace_step(WorkloadConfig("mobilenet_v2", 4, "amp", "sgd", "meta"), "train")
    for op in ("aten::convolution", "aten::convolution_backward"):
        convolutions = step[step["kernel"] == op]
        depthwise = convolutions[convolutions["depthwise"]]
        assert len(convolutions) == 52 and len(depthwise) == 17
        assert depthwise["shapes"].str.contains(r"x1x3x3$").all()
    for precision in ("amp", "fp32"):
        roof, kinds = predicted_ops(4, precision, "v100", "mobilenet_v2")
        depthwise = kinds.classes == 3
        assert depthwise.sum() == 17
        model = EstimateModel(0.0, {"tensor": 0.5, "matmul_fp32": 0.8, "other": 0.25, "depthwise": 0.1})
        assert estimate_times(roof, kinds, model)[depthwise] == pytest.approx(roof[depthwise] / 0.1, rel=1e-12)


def test_layout_conversions_share_their_convolutions_host_time() -> None:
    """On an A100 in NCHW each 3x3 convolution of resnet18 under AMP is followed by its conversions: 3 kernels in
    the forward pass, their time 3 x the time per kernel + their bound / the 16-bit share. The convolution and its
    conversions together take max(the convolution's host time, its time + theirs): the row holds what they add."""
    roof, kinds = predicted_ops(4, "amp", "a100")
    conversions = np.flatnonzero(kinds.classes == LAYOUT_CLASS)
    assert len(conversions) == 17 and set(kinds.kernels[conversions]) == {3} and set(kinds.conversion_bits) == {0, 16}
    assert (kinds.parent[conversions] == conversions - 1).all() and (kinds.classes[conversions - 1] == 0).all()
    cost = load_layout_cost()
    for floor in (30e-6, 0.0):
        model = EstimateModel(floor, {"tensor": 0.5, "matmul_fp32": 0.8, "other": 0.25, "depthwise": 0.1})
        times = estimate_times(roof, kinds, model)
        convolution = roof[conversions - 1] / 0.5
        own = 3 * cost.kernel_s + roof[conversions] / cost.efficiency[16]
        host = floor * load_host_weights().convolution  # a convolution's host time
        together = np.maximum(host, convolution + own)
        assert times[conversions - 1] + times[conversions] == pytest.approx(together, rel=1e-12)
        assert times[conversions - 1] == pytest.approx(np.maximum(host, convolution), rel=1e-12)
        if floor == 0:
            assert times[conversions] == pytest.approx(own, rel=1e-12)  # nothing hides them
        else:
            assert (times[conversions] < own).any()  # the host's floor hides some


def test_fit_finds_the_parameters_that_made_the_times() -> None:
    """Step times made by a known model from real predicted ops (resnet18 forward, batch 1 to 256, FP32 and
    AMP on a V100, AMP on an A100 with its layout conversions): the fit gives them back to the grid's resolution
    and the error factors are 1."""
    truth = EstimateModel(25e-6, {"tensor": 0.6, "matmul_fp32": 0.8, "other": 0.4, "depthwise": 0.15})
    samples = []
    for batch in (1, 16, 128, 256):
        for precision, gpu, model in (
            ("fp32", "v100", "resnet18"),
            ("amp", "v100", "resnet18"),
            ("amp", "a100", "resnet18"),
            ("amp", "a100", "mobilenet_v2"),
        ):
            roof, kinds = predicted_ops(batch, precision, gpu, model)
            measured = float(estimate_times(roof, kinds, truth).sum())
            samples.append(Sample(f"{precision}:{batch}:{model}", roof, kinds, measured))
    found = fit(samples)
    assert found.host_floor_s == pytest.approx(truth.host_floor_s, abs=1e-6)
    for name in OP_CLASSES:
        assert found.efficiency[name] == pytest.approx(truth.efficiency[name], abs=0.02)
    median, p90 = percentiles(error_factors(samples, found))
    assert median < 1.01 and p90 < 1.02
    # steps without a depthwise convolution say nothing of that class: it takes the memory-bound rest's efficiency
    without = fit([s for s in samples if "mobilenet" not in s.key])
    assert without.efficiency["depthwise"] == without.efficiency["other"] == pytest.approx(0.4, abs=0.02)


def test_the_fit_sums_what_the_estimate_sums() -> None:
    """The fit sums each sample per class over a grid of efficiencies at once; at every grid point that sum is
    the estimate op by op, layout conversions sharing their convolution's host floor and NCHW training batch
    norms' time per channel included."""
    grids = [np.array([0.3, 0.9]), np.array([0.5, 1.0]), np.array([0.02, 0.2, 0.6]), np.array([0.05, 0.4])]
    for precision, gpu, batch, model, phases in (
        ("amp", "a100", 2, "resnet18", "forward"),
        ("amp", "a100", 64, "resnet18", "forward"),
        ("fp32", "a100", 16, "resnet18", "forward"),
        ("fp32", "v100", 8, "resnet18", "forward"),
        ("amp", "h100", 16, "mobilenet_v2", "forward"),
        ("amp", "h100", 32, "resnet18", "train"),
        ("fp32", "v100", 4, "mobilenet_v2", "train"),
    ):
        roof, kinds = predicted_ops(batch, precision, gpu, model, phases)
        if phases == "train":  # the times per channel matter at some grid points and not at others
            per_channel = kinds.channel_times(load_channel_rate())
            assert (per_channel > 0).sum() == (40 if model == "resnet18" else 104)
            assert (per_channel > roof / 0.6).any() and (per_channel < roof / 0.02).all()
        sample = Sample(f"{precision}:{gpu}:{batch}", roof, kinds, 1.0)
        terms = sample_terms(sample)
        for floor in (0.0, 20e-6, 60e-6):
            # a class the sample has no op of is an axis of length 1: the sum does not depend on its efficiency
            summed = np.broadcast_to(grid_estimates(terms, floor, grids), [len(g) for g in grids])
            for index in np.ndindex(summed.shape):
                efficiency = {name: float(g[i]) for name, g, i in zip(OP_CLASSES, grids, index, strict=True)}
                expected = estimated_step(sample, EstimateModel(floor, efficiency))
                assert summed[index] == pytest.approx(expected, rel=1e-12), (precision, gpu, batch, floor, index)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"median": 1.2, "p90": 1.6, "inference": {}}, "held_out_error has no inference"),
        (
            {"forward": {"median": 1.7, "p90": 2.4}},
            "held_out_error.forward must be a table of median, p90, measured_on",
        ),
        ({"train": 1.4}, "held_out_error.train must be a table"),
        ({"median": 1.2}, "held_out_error needs both median and p90"),
    ],
)
def test_a_wrong_held_out_error_table_is_refused(table: dict, message: str) -> None:
    """metrics/estimate.toml's bands: a mistyped kind of step or an incomplete band would print the wrong band."""
    with pytest.raises(ValueError, match=message):
        error_bands(table)


def test_held_out_error_tables_read_per_kind() -> None:
    band = {"median": 1.2, "p90": 1.6, "measured_on": "these steps"}
    error, kinds = error_bands({**band, "forward": {**band, "p90": 2.4}})
    assert error == ErrorBand(1.2, 1.6, "these steps") and kinds == {"forward": ErrorBand(1.2, 2.4, "these steps")}
    model = EstimateModel(0.0, {}, error=error, kind_errors=kinds)
    assert model.error_for("forward").p90 == 2.4 and model.error_for("train") == error == model.error_for("other")
    assert error_bands({}) == (None, {})


def test_the_bundled_fit_says_its_held_out_error() -> None:
    model = load_estimate_model()
    assert 0 < model.host_floor_s < 100e-6
    assert all(0 < model.efficiency[name] <= 1 for name in OP_CLASSES)
    assert model.error is not None and 1 <= model.error.median <= model.error.p90
    # NVIDIA's held-out steps are mostly inference: one band, the widest of its protocols, serves both kinds
    assert model.kind_errors == {} and model.error_for("forward") == model.error_for("train") == model.error


def test_calibrating_on_a_measured_run(cli, deepcam_store, deepcam_store_copy) -> None:
    """DeepCAM AMP on a V100 (ncu): per class, the kernels' bound at the datasheet roofs over their measured time.
    The class sums are checked against an independent reading of the run: names for the class, and the bound
    between its two terms' maximum and sum."""
    from hroofline.analyze.calibrate import calibrate_on_run
    from hroofline.store.runs import RunStore

    run = RunStore(deepcam_store).load("deepcam-O1")
    calibration = calibrate_on_run(run, load_estimate_model())
    launches = run.launches[run.launches["time_s"].gt(0)]
    tensor = launches["flops_tensor"].fillna(0) > 0
    # the function's own name, without return type, namespaces, template arguments and parameters
    base = launches["kernel"].map(lambda k: (re.sub(r"<.*", "", k.split("(")[0]).split("::")[-1].split() or [k])[-1])
    # DeepCAM's Xception backbone has depthwise convolutions: PyTorch's own kernels and cuDNN's c1_k1 ones
    depthwise = base.str.contains("depthwise|c1_k1", case=False)
    matmul = base.str.contains("gemm|cudnn|conv|winograd|wgrad|dgrad|fprop", case=False) & ~tensor & ~depthwise
    assert depthwise.sum() == 180 and not (depthwise & tensor).any()
    peak = tomllib_peaks("v100-sxm2")
    for name, rows in (
        ("tensor", launches[tensor]),
        ("matmul_fp32", launches[matmul]),
        ("depthwise", launches[depthwise]),
    ):
        share = calibration.classes[name]
        assert share.launches == len(rows) and share.measured_s == pytest.approx(rows["time_s"].sum(), rel=1e-9)
        terms = [
            rows["flops_fp32"].fillna(0) / peak["fp32"],
            rows["flops_fp16"].fillna(0) / peak["fp16"],
            rows["flops_tensor"].fillna(0) / peak["tensor_fp16"],
            rows["bytes_hbm"].fillna(0) / peak["hbm"],
        ]
        # each launch's bound: at least its slowest single term (pipes overlap), at most all of them in a row
        slowest = np.maximum.reduce([t.to_numpy() for t in terms]).sum()
        assert slowest * 0.999 <= share.bound_s <= sum(t.sum() for t in terms) * 1.001
        assert calibration.model.efficiency[name] == pytest.approx(min(1.0, share.bound_s / share.measured_s), abs=1e-3)
    assert calibration.measured == ("tensor", "matmul_fp32", "other", "depthwise")
    # the README's figures: depthwise kernels reach a smaller share of their roof than the memory-bound rest
    assert calibration.model.efficiency["depthwise"] == pytest.approx(0.185, abs=0.0005)
    assert calibration.model.efficiency["other"] == pytest.approx(0.378, abs=0.0005)
    # cuDNN's layout conversions and NCHW training batch norm are in no class: a prediction costs them at their
    # own measured rates
    conversions = base.str.contains("nchwToNhwc|nhwcToNchw")
    per_channel = base.str.fullmatch(r"bn_(fw_tr|bw)_1C11_.*")
    assert conversions.sum() > 0 and per_channel.sum() > 0
    measured = launches["flops_fp32"].notna() | launches["bytes_hbm"].notna()
    measured_other = ~tensor & ~matmul & ~depthwise & ~conversions & ~per_channel & measured
    assert calibration.classes["other"].launches <= measured_other.sum()
    left_out = conversions.sum() + per_channel.sum()
    assert sum(share.launches for share in calibration.classes.values()) <= len(launches) - left_out
    store = deepcam_store_copy  # the prediction goes to a copy: the session's store is read by other tests as it is
    result = cli(
        "predict",
        "--arch",
        "resnet18",
        "--gpu",
        "v100",
        "--calibrate",
        "deepcam-O1",
        "--store",
        str(store),
        "--run",
        "cal",
    )
    assert result.code == 0, result.err
    assert "estimate calibrated on run deepcam-O1 (v100-sxm2)" in result.out and "its error is not known" in result.out
    refused = cli("predict", "--arch", "resnet18", "--gpu", "v100", "--calibrate", "cal", "--store", str(store))
    assert refused.code == 2 and "is a prediction" in refused.err


def tomllib_peaks(gpu: str) -> dict[str, float]:
    import tomllib

    from hroofline.roofs.metricset import metrics_dir

    return tomllib.loads((metrics_dir() / "gpus.toml").read_text())[gpu]["peak"]
