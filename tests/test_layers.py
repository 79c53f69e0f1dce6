"""Layers: every op and kernel on its nn.Module, in forward and backward, from the CPU recorder, the
predictor and imported NVTX module ranges; the commands that group, filter and compare by layer."""

from __future__ import annotations

import collections
import csv
import html
import io
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import TrainingStep, WorkloadConfig
from hroofline.model.layers import NON_MODULE_LABELS
from hroofline.store.runs import RunStore
from tests.conftest import need_package

REPO = Path(__file__).resolve().parents[1]
REGISTRY_OPS = {str(packet).replace(".", "::", 1) for packet in flop_registry}
FLOP_COLUMNS = ["flops_fp64", "flops_fp32", "flops_fp16"]


def _is_layer(name: object) -> bool:
    return isinstance(name, str) and (name in NON_MODULE_LABELS or bool(re.fullmatch(r"[\w.]+", name)))


def test_cpu_profile_puts_every_op_on_a_layer(cli, tmp_path: Path, cpu_profile_args: list[str]) -> None:
    """resnet18 at batch 2 on this CPU: at least 99% of op time on a module path or an explicit label, and
    layer4.1.conv2's backward convolution on layer4.1.conv2."""
    store = tmp_path / "store"
    argv = [a if a != "1" else "2" for a in cpu_profile_args]  # batch 2
    assert cli(*argv, "--run", "r18", "--store", str(store)).code == 0
    launches = RunStore(store).load("r18").launches
    labelled = launches["layer"].map(_is_layer)
    assert launches.loc[labelled, "time_s"].sum() >= 0.99 * launches["time_s"].sum()
    conv2 = launches[launches["layer"] == "layer4.1.conv2"]
    assert set(conv2["kernel"]) == {"aten::convolution", "aten::convolution_backward"}
    assert conv2.loc[conv2["kernel"] == "aten::convolution_backward", "phase"].tolist() == ["backward"]
    assert set(launches.loc[launches["phase"] == "optimizer", "layer"]) == {"<optimizer>"}
    assert "<loss>" in set(launches.loc[launches["phase"] == "backward", "layer"])  # the loss's backward
    assert launches["shapes"].str.contains("2x3x224x224").any()  # the input batch, as the first conv saw it


def _per_module(launches: pd.DataFrame) -> collections.Counter[str]:
    """FLOPs of the ops FlopCounterMode counts (its registry), summed over each layer and the layers above it."""
    counted = launches[launches["kernel"].isin(REGISTRY_OPS)]
    totals: collections.Counter[str] = collections.Counter()
    for layer, flops in zip(counted["layer"], counted[FLOP_COLUMNS].sum(axis=1), strict=True):
        parts = [] if layer.startswith("<") else layer.split(".")
        for depth in range(1, len(parts) + 1):
            totals[".".join(parts[:depth])] += flops
    return totals


def _flop_counter(arch: str, backward: bool) -> tuple[str, dict[str, float]]:
    """FlopCounterMode on the step as predict traces it: attention as the fused kernel a GPU runs."""
    from hroofline.work.fused_attention import fused_attention

    step = TrainingStep(WorkloadConfig(arch, 2, device="meta"))
    with FlopCounterMode(display=False) as counter, fused_attention():
        loss = step.built.loss(step.model, step.images)
        if backward:
            loss.backward()
    root = type(step.model).__name__
    counts = counter.get_flop_counts()
    return root, {name[len(root) + 1 :]: float(sum(ops.values())) for name, ops in counts.items() if "." in name}


@pytest.mark.parametrize("arch", ["resnet18", "vit_b_16"])
def test_predicted_layer_flops_equal_flop_counter_mode(arch: str) -> None:
    """Per module, predict's FLOPs equal FlopCounterMode's (PyTorch's own attribution): in forward for every
    module; over forward and backward for every module its tracker closes. The exceptions are the modules
    ModuleTracker leaves open in backward (a ResNet block's downsample until the block's input gradient is
    complete, ViT's Dropouts, never closed), to which FlopCounterMode adds all that runs meanwhile."""
    launches = trace_step(WorkloadConfig(arch, 2, device="meta"))
    _, forward_counts = _flop_counter(arch, backward=False)
    ours = _per_module(launches[launches["phase"] == "forward"])
    assert len(forward_counts) > 30
    for module, flops in forward_counts.items():
        assert ours.get(module, 0.0) == pytest.approx(flops, rel=1e-12), module
    _, both_counts = _flop_counter(arch, backward=True)
    ours = _per_module(launches[launches["phase"].isin(["forward", "backward"])])
    left_open = {m for m in both_counts if m.split(".")[-1] in ("downsample", "0") and "downsample" in m}
    left_open |= {m for m in both_counts if "dropout" in m or re.search(r"mlp\.[24]$", m)}
    closed = [m for m in both_counts if m not in left_open]
    assert len(closed) >= (30 if arch == "resnet18" else 60)
    for module in closed:
        assert ours.get(module, 0.0) == pytest.approx(both_counts[module], rel=1e-12), module
    for module in left_open:  # our attribution: a downsample conv's forward plus its two gradients, Dropout none
        expected = 3 * forward_counts.get(module, 0.0)
        assert ours.get(module, 0.0) == pytest.approx(expected, rel=1e-12), module
        assert both_counts[module] > ours.get(module, 0.0)


def _with_module_ranges(source: Path) -> str:
    """The RTX 3070 CSV (one start/end range, 'convLayer', on every launch), with hroofline's ranges added to
    each launch's start/end cell the way ncu writes them: another quoted Id:Domain:Name:PL_Type:PL_Value
    entry (doubled quotes inside the CSV field). Launches 0-3: forward in conv1; 4-7: backward in
    layer1.0.conv2; 8: backward outside modules; the rest: optimizer; from launch 8 on without the user's
    range (a user's range names the layer where no module range does)."""
    text = source.read_text()
    header_at = text.index('"ID","Process ID"')
    rows = list(csv.reader(io.StringIO(text[header_at:])))
    header, body = rows[0], rows[1:]
    column = next(i for i, name in enumerate(header) if "Start/Stop_Range" in name)
    for row in body:
        launch = int(row[0])
        if launch < 4:
            added = ["1:hroofline:forward:none:none", "2:hroofline:conv1:none:none"]
        elif launch < 8:
            added = ["1:hroofline:backward:none:none", "3:hroofline:layer1.0.conv2:none:none"]
        elif launch == 8:
            added = ["1:hroofline:backward:none:none"]
        else:
            added = ["4:hroofline:optimizer:none:none"]
        kept = row[column].rstrip() if launch < 8 else ""
        row[column] = kept + "".join(f' "{entry}"' for entry in added) + " "
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, *body])
    return text[:header_at] + out.getvalue()


def test_layers_from_ncu_start_end_module_ranges(cli, tmp_path: Path, ncu_dir: Path) -> None:
    source = tmp_path / "gcn_layers.csv"
    source.write_text(_with_module_ranges(ncu_dir / "rtx3070_gcn_torch_nvtx_startend_csv.txt"))
    store = tmp_path / "store"
    assert cli("import", str(source), "--run", "gcn", "--gpu", "rtx3070", "--store", str(store)).code == 0
    launches = RunStore(store).load("gcn").launches.sort_values("launch_id")
    assert launches["layer"].tolist() == ["conv1"] * 4 + ["layer1.0.conv2"] * 4 + ["<autograd>"] + ["<optimizer>"] * (
        len(launches) - 9
    )
    assert launches["phase"].tolist()[:9] == ["forward"] * 4 + ["backward"] * 5
    grouped = cli("kernels", "gcn", "--group-by", "layer", "--format", "csv", "--store", str(store))
    table = pd.read_csv(io.StringIO(grouped.out))
    assert table.set_index("layer")["count"].to_dict()["layer1.0.conv2"] == 4
    only = cli("kernels", "gcn", "--layer", "layer1", "--format", "csv", "--store", str(store))
    assert len(pd.read_csv(io.StringIO(only.out))) == 4  # layer1 and everything below it
    by_range = cli("kernels", "gcn", "--nvtx", "*backward*", "--format", "csv", "--store", str(store))
    assert len(pd.read_csv(io.StringIO(by_range.out))) == 5


def test_a_report_without_module_ranges_has_no_layers(cli, tmp_path: Path, ncu_dir: Path) -> None:
    source = ncu_dir / "rtx3070_gcn_torch_nvtx_startend_csv.txt"
    store = str(tmp_path / "store")
    assert cli("import", str(source), "--run", "gcn", "--gpu", "rtx3070", "--store", store).code == 0
    # a user's own range is the layer: 'convLayer' on every launch
    assert set(RunStore(Path(store)).load("gcn").launches["layer"]) == {"convLayer"}
    dcam = cli("kernels", "gcn", "--group-by", "layer", "--store", store)
    assert dcam.code == 0


def test_top_by_layer_and_layer_chart(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("predict", "--arch", "resnet18", "--gpu", "a100", "--batch-size", "8", "--store", store).code == 0
    run = "resnet18-fp32-a100-40gb-b8-predicted"
    top = cli("top", run, "--by", "layer", "-n", "3", "--phase", "backward", "--format", "csv", "--store", store)
    table = pd.read_csv(io.StringIO(top.out))
    assert list(table.columns[:4]) == ["layer", "phase", "count", "kernel"]
    launches = RunStore(Path(store)).load(run).launches
    backward = launches[launches["phase"] == "backward"].groupby("layer")["time_s"].sum().sort_values()
    # at batch 8 many ops take the estimate's host floor, so layers tie: the times are what must match
    assert table["time_s"].tolist() == pytest.approx(list(backward.values[::-1][:3]), rel=1e-9)
    assert all(
        backward[layer] == pytest.approx(time) for layer, time in zip(table["layer"], table["time_s"], strict=True)
    )
    forward = cli("top", run, "--by", "layer", "--phase", "forward", "--format", "csv", "--store", store).out
    assert "convolution_backward" not in forward  # each row's kernel is from its own phase
    out = tmp_path / "layers.json"
    assert cli("chart", run, "--by", "layer", "--phase", "forward", "--out", str(out), "--store", store).code == 0
    assert "One dot per layer (module) and phase" in out.read_text()
    report = tmp_path / "report"
    assert cli("report", run, "--out", str(report), "-n", "3", "--store", store).code == 0
    page = (report / "index.html").read_text()
    assert "Top layers of backward" in page and f">{html.escape(table['layer'][0])}</td>" in page


def test_compare_matches_layer_to_layer(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    for precision in ("fp32", "amp"):
        argv = ["predict", "--arch", "resnet50", "--gpu", "v100", "--precision", precision, "--batch-size", "8"]
        assert cli(*argv, "--run", precision, "--store", store).code == 0
    result = cli("compare", "fp32", "amp", "--format", "json", "--store", store)
    data = pd.read_json(io.StringIO(result.out), typ="series")
    assert data["matched_on"] == "layer"
    families = pd.DataFrame(data["families"])
    runs = RunStore(Path(store))
    base, cand = (runs.load(n).launches for n in ("fp32", "amp"))
    conv = families[(families["family"] == "layer3.2.conv2") & (families["phase"] == "backward")].iloc[0]
    assert conv["base_time_s"] == pytest.approx(
        base[(base.layer == "layer3.2.conv2") & (base.phase == "backward")].time_s.sum()
    )
    assert conv["candidate_time_s"] == pytest.approx(
        cand[(cand.layer == "layer3.2.conv2") & (cand.phase == "backward")].time_s.sum()
    )
    text = cli("compare", "fp32", "amp", "-n", "3", "--store", store).out
    assert "matched layer to layer" in text and "largest gains:" in text


def test_script_profiled_on_the_cpu_with_the_public_api(cli, tmp_path: Path) -> None:
    """samples/train_tiny_cnn.py (the README's script) profiled as a user would, then predicted from Python."""
    import hroofline

    store = str(tmp_path / "store")
    script = REPO / "samples" / "train_tiny_cnn.py"
    result = cli(
        "profile", "--gpu", "cpu", "--ceilings", str(_ceilings(tmp_path)), "--store", store, "--script", str(script)
    )
    assert result.code == 0, result.err
    run = hroofline.load("train_tiny_cnn-cpu", store=store)
    layers = set(run.launches["layer"])
    assert {"0", "3", "7", "<loss>", "<optimizer>"} <= layers
    top = cli("top", "train_tiny_cnn-cpu", "--by", "layer", "-n", "4", "--store", store)
    assert top.code == 0 and "layer" in top.out.splitlines()[-6]  # the header, 4 rows, the line pointing to advise
    namespace: dict[str, object] = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    model = namespace["build"]()  # type: ignore[operator]
    predicted = hroofline.predict(model, gpu="a100", input_shape=(3, 32, 32), batch_size=8)
    assert set(predicted.launches["layer"]) >= {"0", "3", "7"}
    assert next(model.parameters()).device.type == "cpu"  # the user's model is untouched

    # the same convolutions, counted the same way, measured and predicted
    def conv_flops(launches: pd.DataFrame) -> float:
        rows = launches[launches["kernel"] == "aten::convolution"]
        return float(rows[FLOP_COLUMNS].sum().sum() + rows["flops_tensor"].fillna(0).sum())

    assert conv_flops(predicted.launches) == pytest.approx(conv_flops(run.launches))


def _ceilings(tmp_path: Path) -> Path:
    path = tmp_path / "ceilings.toml"
    path.write_text('name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\nfp16 = 800e9\nfp64 = 100e9\n')
    return path


def test_script_errors_are_the_scripts(cli, tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import hroofline\nwith hroofline.profiled_step():\n    raise ValueError('script boom')\n")
    store = str(tmp_path / "store")
    argv = ["profile", "--gpu", "cpu", "--ceilings", str(_ceilings(tmp_path)), "--store", store]
    result = cli(*argv, "--script", str(script), "--store", "elsewhere")
    assert result.code == 1 and "fails.py failed: ValueError: script boom" in result.err
    assert 'fails.py", line 3' in result.err  # the script's own traceback
    assert "--store after --script go to the script" in result.err
    mixed = cli(*argv, "--precision", "amp", "--script", str(script))
    assert mixed.code == 2 and "--precision: not with --script" in mixed.err


def test_script_dry_run_shows_the_module_ranges(cli, tmp_path: Path) -> None:
    script = REPO / "samples" / "train_tiny_cnn.py"
    result = cli("profile", "--gpu", "a100", "--dry-run", "--script", str(script), "--epochs", "1")
    assert result.code == 0
    command = result.out.split()
    assert command[0].endswith("ncu") and "--profile-from-start" in command
    assert "HROOFLINE_COLLECT=ncu" in command and "HROOFLINE_LAYERS=1" in command
    assert command[-3:] == [str(script), "--epochs", "1"]
    plain = cli("profile", "--arch", "resnet18", "--gpu", "a100", "--dry-run").out.split()
    assert "--no-layers" not in plain  # module ranges are on by default
    off = cli("profile", "--arch", "resnet18", "--gpu", "a100", "--dry-run", "--no-layers").out.split()
    assert "--no-layers" in off


def test_nvtx_module_ranges_follow_backward() -> None:
    """The ranges the ncu workload opens: one at a time, the innermost module, in backward too."""
    from hroofline.collect.module_tracking import LayerTracker
    from hroofline.collect.workload import PhaseMarks

    seen: list[str] = []
    tracker = LayerTracker(listeners=[lambda layer: seen.append(layer)])
    step = TrainingStep(WorkloadConfig("resnet18", 1, device="meta"), PhaseMarks([tracker.phase_changed]), tracker)
    with tracker:
        step.run()
    backward = seen[seen.index("<loss>", seen.index("fc")) :]
    assert "layer4.1.conv2" in backward and backward.index("layer4.1.conv2") < backward.index("layer1.0.conv1")
    assert seen[-1] == "<outside>" and "<optimizer>" in seen


def test_a_compiled_model_compiles_whole_under_the_layer_tracker() -> None:
    """A script that torch.compiles its annotated model: Dynamo traced the tracker's global hooks and failed
    ("UnspecializedNNModuleVariable(ResNet) is already tracked for mutation", on an H200 under PyTorch 2.11 and
    here under 2.14, tests/data/gpu-2026-11-28/README.md); the tracker steps aside inside the compiled region, which
    then compiles as one graph, its kernels labelled <compiled> (not the wrapper's class name, OptimizedModule), and
    the eager modules around it are still tracked."""
    from torch._dynamo.utils import counters

    from hroofline.collect.module_tracking import LayerTracker

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    loss = torch.nn.MSELoss()
    seen: list[str] = []
    counters.clear()
    with LayerTracker([model], listeners=[seen.append]):
        output = torch.compile(model)(torch.randn(2, 16))
        loss(output, torch.zeros(2, 4))
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert "<loss>" in seen and "<compiled>" in seen and "0" not in seen


@pytest.mark.parametrize(
    ("argv", "shape_or_tokens"),
    [
        (["--arch", "deeplabv3_resnet50", "--input-shape", "3,512,512", "--batch-size", "2"], "2x3x512x512"),
        (["--model", "hf:gpt2", "--seq-len", "1024", "--batch-size", "1"], "1x1024"),
    ],
)
def test_predict_segmentation_and_transformers(cli, tmp_path: Path, argv: list[str], shape_or_tokens: str) -> None:
    if "hf:gpt2" in argv:
        need_package("transformers")
    store = str(tmp_path / "store")
    result = cli("predict", *argv, "--gpu", "a100", "--phases", "forward", "--run", "p", "--store", store)
    assert result.code == 0, result.err
    launches = RunStore(Path(store)).load("p").launches
    assert launches["shapes"].str.startswith(shape_or_tokens).any()


def test_gpt2_forward_flops_are_2_n_t_plus_attention() -> None:
    """GPT-2 (124M) forward at 1024 tokens: 2 x (parameters less the position table; the token table counts
    once, as the LM head) x tokens + 4 x layers x seq^2 x d_model (QK^T and AV) x (seq + 1) / (2 seq) (causal:
    a fused kernel skips the masked half), within 5%."""
    need_package("transformers")
    launches = trace_step(WorkloadConfig("hf:gpt2", 1, device="meta", seq_len=1024), "forward")
    step = TrainingStep(WorkloadConfig("hf:gpt2", 1, device="meta", seq_len=1024))
    parameters = sum(p.numel() for p in step.model.parameters())  # tied: the token table once
    positions = step.model.config.n_positions * step.model.config.n_embd
    layers, d_model, tokens = step.model.config.n_layer, step.model.config.n_embd, 1024
    causal = (tokens + 1) / (2 * tokens)  # GPT-2's attention is causal: the keys up to each query's position
    expected = 2 * (parameters - positions) * tokens + 4 * layers * tokens**2 * d_model * causal
    measured = launches[FLOP_COLUMNS].sum().sum()
    assert measured == pytest.approx(expected, rel=0.05)
    assert abs(measured / expected - 1) < 0.01  # in fact within 1%


def test_runs_can_be_removed_renamed_and_reimported(cli, tmp_path: Path, ncu_dir: Path) -> None:
    store = str(tmp_path / "store")
    source = str(ncu_dir / "rtx3070_gcn_torch_nvtx_startend_csv.txt")
    assert cli("import", source, "--run", "a", "--store", store).code == 0
    again = cli("import", source, "--run", "a", "--gpu", "rtx3070", "--replace", "--store", store)
    assert again.code == 0 and "replaced" in again.err
    assert RunStore(Path(store)).load_meta("a").gpu == "rtx3070"
    assert cli("rename", "a", "b", "--store", store).code == 0
    assert RunStore(Path(store)).run_names() == ["b"] and RunStore(Path(store)).load("b").name == "b"
    assert cli("rename", "b", "b", "--store", store).code == 2
    empty = cli("kernels", "b", "--layer", "nothing.here", "--store", store)
    assert empty.code == 1 and "matches --layer nothing.here" in empty.err and "convLayer" in empty.err
    missing = cli("rm", "b", "nope", "--store", store)
    assert missing.code == 1 and RunStore(Path(store)).run_names() == ["b"]  # nothing removed
    assert cli("rm", "b", "--store", store).code == 0
    assert RunStore(Path(store)).run_names() == [] and not list((tmp_path / "store" / "runs").iterdir())


def test_profile_from_a_model_factory(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    spec = f"{REPO / 'samples' / 'train_tiny_cnn.py'}:build"
    argv = ["predict", "--model", spec, "--input-shape", "3,32,32", "--gpu", "t4", "--batch-size", "4"]
    result = cli(*argv, "--store", store)
    assert result.code == 0, result.err
    assert "train_tiny_cnn.build-fp32-t4-b4-3x32x32-predicted" in result.out
    bad = cli("predict", "--model", "nowhere.py:build", "--gpu", "t4", "--store", store)
    assert bad.code == 2 and "no file nowhere.py" in bad.err
    both = cli("predict", "--arch", "resnet18", "--model", "hf:gpt2", "--gpu", "t4", "--store", store)
    assert both.code == 2
    (tmp_path / "helpers.py").write_text("import torch\ndef linear():\n    return torch.nn.Linear(4, 2)\n")
    (tmp_path / "net.py").write_text(
        "from helpers import linear\ndef build():\n    return linear()\ndef broken():\n    raise RuntimeError('no')\n"
        "def argmax():\n    import torch\n    class M(torch.nn.Linear):\n        def forward(self, x):\n"
        "            return super().forward(x).argmax(1)\n    return M(4, 2)\n"
    )
    beside = cli(
        "predict", "--model", f"{tmp_path / 'net.py'}:build", "--input-shape", "4", "--gpu", "t4", "--store", store
    )
    assert beside.code == 0, beside.err  # net.py imports a module from its own folder
    broken = cli("predict", "--model", f"{tmp_path / 'net.py'}:broken", "--gpu", "t4", "--store", store)
    assert broken.code == 2 and "broken() failed: RuntimeError: no" in broken.err and "internal" not in broken.err
    integers = cli(
        "predict", "--model", f"{tmp_path / 'net.py'}:argmax", "--input-shape", "4", "--gpu", "t4", "--store", store
    )
    assert integers.code == 2 and "floating-point tensor output" in integers.err
    tokens = cli("predict", "--model", "hf:gpt2", "--input-shape", "3,4,4", "--gpu", "t4", "--store", store)
    assert tokens.code == 2 and "--seq-len, not --input-shape" in tokens.err
    # a factory of torchvision's RegNet, which works out its widths with tensors, builds on the meta device too
    regnet = cli("predict", "--model", "torchvision.models:regnet_x_400mf", "--gpu", "t4", "--store", store)
    assert regnet.code == 0, regnet.err


def test_import_hroofline_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, hroofline; assert 'torch' not in sys.modules and 'pandas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert torch.__version__  # the test process itself has torch
