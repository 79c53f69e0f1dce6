"""`hroofline predict`: FLOPs against torchvision's published figures, the roofline time of every op."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import torchvision

from hroofline.analyze.predict import MATMUL_OPS, flop_split
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.roofs.metricset import metrics_dir
from hroofline.store.runs import RunStore
from tests.conftest import need_package

FLOP_COLUMNS = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]


def _published_flops(arch: str, batch: int = 1) -> float:
    """torchvision's figure for the model's weights: FLOPs = 2 x 1e9 x meta['_ops'] (GMACs) per image."""
    return 2e9 * torchvision.models.get_model_weights(arch).DEFAULT.meta["_ops"] * batch


@pytest.mark.parametrize(
    "arch", ["resnet50", "vgg16", "vit_b_16", "resnet18", "convnext_tiny", "swin_t", "regnet_x_3_2gf", "maxvit_t"]
)
def test_forward_flops_match_torchvision(arch: str) -> None:
    launches = trace_step(WorkloadConfig(arch, batch_size=1), "forward").assign(flops_tensor=0.0)
    split = flop_split(launches)
    published = _published_flops(arch)
    total = split.matmul + split.other
    assert -0.01 <= total / published - 1 <= 0.03  # the band: 1% below to 3% above
    assert split.matmul == pytest.approx(published, rel=1e-3)  # torchvision counts convolutions and matmuls


def test_every_torchvision_classifier_builds_on_the_meta_device() -> None:
    """`--arch` takes any of them: RegNet, which works out its widths with tensors, included."""
    import torch

    from hroofline.collect.models import torchvision_model

    names = tomllib.loads((metrics_dir() / "torchvision_models.toml").read_text())["classification"]
    for name in names:
        with torch.device("meta"):
            network = torchvision_model(name)
        assert next(network.parameters()).device.type == "meta", name


def test_depthwise_models_say_what_the_other_ops_add() -> None:
    """MobileNet's element-wise work is a tenth of its FLOPs: outside the band, and shown as such."""
    split = flop_split(trace_step(WorkloadConfig("mobilenet_v2", batch_size=1), "forward").assign(flops_tensor=0.0))
    assert split.matmul == pytest.approx(_published_flops("mobilenet_v2"), rel=1e-3)
    assert 0.05 < split.other / (split.matmul + split.other) < 0.15
    assert "aten::native_batch_norm" in split.other_by_op


def test_resnet18_batch_256_worked_example(cli, tmp_path: Path) -> None:
    result = cli(
        "predict",
        "--arch",
        "resnet18",
        "--gpu",
        "v100",
        "--batch-size",
        "256",
        "--phases",
        "forward",
        "--run",
        "r18",
        "--store",
        str(tmp_path / "store"),
    )
    assert result.code == 0, result.err
    assert "forward: 928.8 GFLOP in convolutions and matrix products" in result.out
    assert "in other ops: native_batch_norm" in result.out
    # an inference pass, said as such: not a training step's forward
    assert "resnet18, batch 256, fp32 on v100-sxm2, inference (eval, no grad), predicted" in result.out
    assert "\ninference: estimate " in result.out and "\nstep" not in result.out
    run = RunStore(tmp_path / "store").load("r18")
    assert set(run.launches["phase"]) == {"forward"}
    assert run.meta.sources[0].kind == "analytic" and run.meta.gpu == "v100-sxm2"


def host_weights(kernels: pd.Series) -> pd.Series:
    """Each op's host time over an element-wise op's, from metrics/host_cost.toml's measured seconds as that file
    says: a kind's seconds over the element-wise ops' mean, the batch norm's less its counter's add."""
    seconds = tomllib.loads((metrics_dir() / "host_cost.toml").read_text())["seconds_per_op"]
    unit = sum(seconds["elementwise"]) / len(seconds["elementwise"])
    weights = pd.Series(1.0, index=kernels.index)
    weights[kernels.isin({"aten::addmm", "aten::mm"})] = seconds["matmul"] / unit
    weights[kernels.isin({"aten::convolution", "aten::convolution_backward"})] = seconds["convolution"] / unit
    norm = seconds["batch_norm"] - seconds["batch_norm_counter"]
    weights[kernels.isin({"aten::native_batch_norm", "aten::native_batch_norm_backward"})] = norm / unit
    return weights


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("predict") / "store"
    for precision in ("fp32", "amp"):
        argv = ["predict", "--arch", "resnet50", "--gpu", "v100", "--precision", precision, "--run", f"r50-{precision}"]
        assert main([*argv, "--store", str(store)]) == 0
    return store


def test_every_op_takes_its_roofline_time(predicted: Path) -> None:
    peaks = tomllib.loads((metrics_dir() / "gpus.toml").read_text())["v100-sxm2"]["peak"]
    fit = tomllib.loads((metrics_dir() / "estimate.toml").read_text())["fit"]
    per_block = tomllib.loads((metrics_dir() / "batch_norm.toml").read_text())["elements_per_s"]
    channel_rate = {False: per_block["forward"], True: per_block["backward"]}
    for precision, tensor_peak in (("fp32", None), ("amp", peaks["tensor_fp16"])):
        launches = RunStore(predicted).load(f"r50-{precision}").launches
        compute = (
            launches["flops_fp64"] / peaks["fp64"]
            + launches["flops_fp32"] / peaks["fp32"]
            + launches["flops_fp16"] / peaks["fp16"]
            + (launches["flops_tensor"] / tensor_peak if tensor_peak else 0.0)
        )
        expected = pd.concat([compute, launches["bytes_hbm"] / peaks["hbm"]], axis=1).max(axis=1)
        assert launches["time_bound_s"].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-12)
        assert set(launches["phase"]) == {"forward", "backward", "optimizer"}
        # The estimate: each op at least its host time (the floor x its kind's weight), else its bound over its
        # class's efficiency, and a batch norm in training (NCHW) N*H*W over one thread block's rate where that is
        # longer (a block per channel).
        matmul = launches["kernel"].isin(MATMUL_OPS)
        efficiency = matmul.map({True: fit["efficiency"]["matmul_fp32"], False: fit["efficiency"]["other"]})
        if tensor_peak:
            efficiency = efficiency.where(launches["flops_tensor"] == 0, fit["efficiency"]["tensor"])
        rate = launches["kernel"].str.endswith("_backward").map(channel_rate)
        norms = launches["kernel"].str.contains("batch_norm")
        assert norms.sum() == 106  # 53 forward, 53 backward, in training, NCHW
        dims = launches["shapes"].str.extract(r"^(\d+)x(\d+)x(\d+)x(\d+)").astype(float)
        per_channel = (dims[0] * dims[2] * dims[3] / rate).where(norms, 0.0)
        # 16-bit halves a batch norm's bytes, not its time per channel: on the V100 some are held to it under AMP
        assert ((per_channel > expected / efficiency).sum() > 0) == bool(tensor_peak)
        floors = fit["host_floor_s"] * host_weights(launches["kernel"])
        estimate = pd.concat([expected / efficiency, per_channel, floors], axis=1).max(axis=1)
        assert launches["time_s"].to_numpy() == pytest.approx(estimate.to_numpy(), rel=1e-12)


def test_tensor_cores_take_the_matrix_products_under_amp(predicted: Path) -> None:
    fp32 = RunStore(predicted).load("r50-fp32").launches
    amp = RunStore(predicted).load("r50-amp").launches
    assert fp32["flops_tensor"].sum() == 0
    tensor_ops = set(amp.loc[amp["flops_tensor"] > 0, "kernel"])
    assert tensor_ops and tensor_ops <= MATMUL_OPS
    # Same work, less traffic: 16-bit activations halve most of the bytes.
    for phase in ("forward", "backward"):
        f, a = fp32[fp32["phase"] == phase], amp[amp["phase"] == phase]
        assert a[FLOP_COLUMNS].sum().sum() == pytest.approx(f[FLOP_COLUMNS].sum().sum(), rel=0.02)
        assert 0.4 < a["bytes_hbm"].sum() / f["bytes_hbm"].sum() < 0.6
        assert a["time_bound_s"].sum() < f["time_bound_s"].sum() / 2


def test_precision_and_gpu_combinations(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    tf32 = cli(
        "predict",
        "--arch",
        "resnet18",
        "--gpu",
        "a100",
        "--precision",
        "tf32",
        "--batch-size",
        "2",
        "--run",
        "a",
        "--store",
        store,
    )
    assert tf32.code == 0
    launches = RunStore(tmp_path / "store").load("a").launches
    assert launches["flops_tensor"].sum() > 0  # TF32 matmuls on A100 tensor cores
    volta = cli(
        "predict",
        "--arch",
        "resnet18",
        "--gpu",
        "v100",
        "--precision",
        "tf32",
        "--batch-size",
        "2",
        "--run",
        "v",
        "--store",
        store,
    )
    assert volta.code == 0
    assert RunStore(tmp_path / "store").load("v").launches["flops_tensor"].sum() == 0  # no TF32 on Volta
    assert "v100-sxm2 has no TF32 tensor cores" in volta.err
    bf16 = cli("predict", "--arch", "resnet18", "--gpu", "v100", "--precision", "amp-bf16", "--store", store)
    assert bf16.code == 2 and "no BF16 tensor cores" in bf16.err
    unknown = cli("predict", "--arch", "resnet7", "--gpu", "v100", "--store", store)
    assert unknown.code == 2 and unknown.err.count("\n") == 1
    no_peaks = cli("predict", "--arch", "resnet18", "--gpu", "rtx4060-laptop", "--store", store)
    assert no_peaks.code == 2 and "no FP32 or HBM peak" in no_peaks.err


def test_predicted_runs_work_with_the_other_commands(cli, predicted: Path, tmp_path: Path) -> None:
    summary = json.loads(cli("summary", "r50-amp", "--format", "json", "--store", str(predicted)).out)
    assert summary["phases"]["forward"]["flops_tensor"] > 0
    top = cli("top", "r50-amp", "-n", "3", "--store", str(predicted))
    assert top.code == 0 and "beats" not in top.err  # a prediction never beats its own roofs
    assert "note: a prediction: time_s is the estimated time" in top.out
    chart = cli("chart", "r50-amp", "--out", str(tmp_path / "p.json"), "--store", str(predicted))
    assert chart.code == 0 and "at HBM" in chart.err
    subtitle = json.loads((tmp_path / "p.json").read_text())["title"]["subtitle"]
    assert any("Predicted (no kernel ran)" in line for line in subtitle)
    assert "One dot per kernel name and phase, at HBM; area proportional to time." in subtitle  # one level


@pytest.mark.parametrize("arch", ["mobilenet_v2", "efficientnet_b0", "resnet18"])
def test_backward_is_about_twice_the_forward(arch: str) -> None:
    """Grouped and depthwise convolutions included: each gradient costs one forward pass."""
    launches = trace_step(WorkloadConfig(arch, batch_size=1), "train")
    flops = launches.groupby("phase")[["flops_fp32"]].sum()["flops_fp32"]
    assert 1.7 <= flops["backward"] / flops["forward"] <= 2.3


def test_fp32_is_pytorchs_default_tf32_convolutions_on_ampere(cli, tmp_path: Path) -> None:
    """PyTorch runs cuDNN convolutions in TF32 by default from Ampere on and matrix products in FP32:
    so does `predict --precision fp32`, and says so; fp32-strict keeps everything on the FP32 units."""
    store = tmp_path / "store"
    default = cli("predict", "--arch", "resnet50", "--gpu", "a100", "--precision", "fp32", "--store", str(store))
    assert default.code == 0, default.err
    assert "cuDNN runs convolutions in TF32" in default.err and "fp32-strict" in default.err
    assert "tensor cores: convolutions on the TF32 tensor roof (156 TFLOP/s)" in default.out
    strict = cli("predict", "--arch", "resnet50", "--gpu", "a100", "--precision", "fp32-strict", "--store", str(store))
    assert strict.code == 0 and "tensor cores: none" in strict.out and "TF32" not in strict.err
    runs = RunStore(store)
    tf32 = runs.load("resnet50-fp32-a100-40gb-predicted").launches
    fp32 = runs.load("resnet50-fp32-strict-a100-40gb-predicted").launches
    convolutions = tf32["kernel"].isin({"aten::convolution", "aten::convolution_backward"})
    assert (tf32.loc[convolutions, "flops_tensor_tf32"] > 0).all() and (tf32.loc[convolutions, "flops_fp32"] == 0).all()
    matmuls = tf32["kernel"].isin({"aten::addmm", "aten::mm"})
    assert matmuls.any() and (tf32.loc[matmuls, "flops_tensor_tf32"] == 0).all()
    assert (tf32.loc[matmuls, "flops_fp32"] > 0).all()
    assert fp32["flops_tensor"].sum() == 0
    # The same FLOPs either way; on the FP32 units the step takes about 2.8x as long.
    assert tf32["flops_tensor_tf32"].sum() + tf32["flops_fp32"].sum() == pytest.approx(fp32["flops_fp32"].sum())
    assert 2.5 < fp32["time_bound_s"].sum() / tf32["time_bound_s"].sum() < 3.1
    volta = cli("predict", "--arch", "resnet18", "--gpu", "v100", "--batch-size", "2", "--store", str(store))
    assert volta.code == 0 and "tensor cores: none" in volta.out and "TF32" not in volta.err


def test_profile_sets_tf32_as_pytorch_does() -> None:
    from hroofline.collect.workload import tf32_switches

    # (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32): PyTorch's defaults for fp32
    assert tf32_switches("fp32") == (False, True)
    assert tf32_switches("fp32-strict") == (False, False)
    assert tf32_switches("tf32") == (True, True)
    assert tf32_switches("amp") == (False, True)


def test_safe_softmax_counts_its_flops() -> None:
    import torch

    from hroofline.work.ops import op_flops

    scores = torch.randn(2, 4, 8)
    out = torch.ops.aten._safe_softmax(scores, -1)
    assert op_flops(torch.ops.aten._safe_softmax.default, (scores, -1), {}, out) == 3 * scores.numel()


def test_amp_traces_autocasts_casts() -> None:
    """Float32 weights cast to 16 bit at every convolution and linear layer, each step, and their gradients cast
    back: ResNet-18 has 20 convolutions and one linear layer (weight and bias)."""
    launches = trace_step(WorkloadConfig("resnet18", batch_size=2, precision="amp"), "train")
    casts = launches[launches["kernel"] == "aten::_to_copy"].groupby("phase").size()
    layers = 20 + 2
    assert casts["forward"] == layers + 1 + 1  # and the image in, the logits out to float32 for the loss
    assert casts["backward"] == layers + 1  # and the loss's gradient into the 16-bit logits
    fp32 = trace_step(WorkloadConfig("resnet18", batch_size=2, precision="fp32"), "train")
    assert "aten::_to_copy" not in set(fp32["kernel"])
    flops = [frame[FLOP_COLUMNS[:3]].sum().sum() for frame in (launches, fp32)]
    assert flops[0] == pytest.approx(flops[1], rel=0.01)  # the same work, in 16 bit


def test_attention_is_traced_as_the_fused_kernel_pytorch_runs() -> None:
    """ViT's nn.MultiheadAttention calls scaled_dot_product_attention: FlashAttention in 16 bit, memory-efficient
    attention in float32, never the bmm-softmax-bmm the meta device would decompose it into."""
    for precision, op in (("amp", "flash"), ("fp32", "efficient")):
        launches = trace_step(WorkloadConfig("vit_b_16", batch_size=2, precision=precision), "train")
        kernels = launches.groupby("phase")["kernel"].agg(set)
        assert f"aten::_scaled_dot_product_{op}_attention" in kernels["forward"]
        assert f"aten::_scaled_dot_product_{op}_attention_backward" in kernels["backward"]
        assert not {"aten::bmm", "aten::_safe_softmax", "aten::_softmax"} & kernels["forward"]
        attention = launches[launches["kernel"] == f"aten::_scaled_dot_product_{op}_attention"]
        # 4 x batch x heads x tokens^2 x head size: QK^T and PV, a multiply-add each
        assert attention[FLOP_COLUMNS[:3]].sum(axis=1).iloc[0] == 4 * 2 * 12 * 197**2 * 64


def test_amp_casts_what_autocast_casts_in_a_transformer() -> None:
    """GPT-2 calls torch.addmm itself (Hugging Face's Conv1D), not nn.Linear: under amp its matrix products still
    run in 16 bit, and layer norm and softmax in float32, as autocast's lists say."""
    need_package("transformers")
    launches = trace_step(WorkloadConfig("hf:gpt2", batch_size=1, precision="amp", seq_len=64), "train")
    forward = launches[launches["phase"] == "forward"]
    matmul = forward[forward["kernel"].isin(MATMUL_OPS)]
    assert matmul["flops_fp32"].sum() == 0 and matmul["flops_fp16"].sum() > 0
    norms = forward[forward["kernel"] == "aten::native_layer_norm"]
    assert len(norms) == 25 and norms["flops_fp32"].gt(0).all() and norms["flops_fp16"].eq(0).all()


def test_the_api_prediction_says_what_the_cli_prints(cli, tmp_path: Path) -> None:
    """hroofline.predict() returns the step time, throughput, error band and memory fit the CLI prints, and the
    same text: a notebook user gets images/s, 'fits' and the largest batch without the CLI."""
    import hroofline

    printed = cli("predict", "--arch", "resnet18", "--gpu", "h100", "--store", tmp_path / "store")
    assert printed.code == 0, printed.err
    predicted = hroofline.predict(
        "resnet18", gpu="h100", run="resnet18-fp32-h100-sxm-predicted", store=tmp_path / "api"
    )
    assert predicted.describe() == printed.out
    step, fit = predicted.step, predicted.fit
    total = predicted.summary().loc["total"]
    assert step.estimate_s == pytest.approx(total["time_s"]) and step.bound_s == pytest.approx(total["time_bound_s"])
    assert step.low_s < step.estimate_s < step.high_s and step.unit == "images"
    images_per_s = f"{step.throughput(step.estimate_s):,.0f} images/s"
    assert images_per_s in printed.out and f"largest batch that fits: {fit.largest_batch:,}" in printed.out
    assert fit.fits and fit.gpu == "h100-sxm"
    assert images_per_s in repr(predicted) and f"largest batch {fit.largest_batch:,}" in repr(predicted)
    # a copy keeps what it says; a run without a prediction says so in one line instead of a traceback
    import copy
    from dataclasses import replace

    from hroofline.api.prediction import PredictedRun
    from hroofline.errors import UsageError

    assert copy.deepcopy(predicted).describe() == printed.out and replace(predicted).step == step
    bare = PredictedRun(predicted.meta, predicted.launches)
    assert "estimate" not in repr(bare)
    with pytest.raises(UsageError, match="carries no prediction"):
        bare.describe()


def test_advise_says_it_does_not_judge_a_predicted_run(cli, predicted: Path) -> None:
    """advise does not say 'no rule found enough time to win' of a prediction (whose own output names its layout
    conversions): it says it does not judge predictions, and why (issue 45)."""
    assert RunStore(predicted).load("r50-amp").meta.predicted
    out = cli("advise", "r50-amp", "--store", str(predicted)).out
    assert "not judged: a predicted run" in out and "no rule found" not in out
    data = json.loads(cli("advise", "r50-amp", "--format", "json", "--store", str(predicted)).out)
    assert data["findings"] == [] and data["not_judged"].startswith("not judged")
