"""Compiled kernels on their layers (issue 46, item 2): the TORCH_TRACE compile log places each kernel of a
torch.compile'd graph on the module it came from. Real data: the H200 traces and compile logs of
tests/data/gpu-2026-11-28 (README there: recorded with hroofline, PyTorch 2.11.0, Inductor's provenance on)."""

from __future__ import annotations

import lzma
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from hroofline.importers.inductor_provenance import common_ancestor, layers_from_compile_log, parameter_module
from hroofline.importers.kineto import parse_trace
from hroofline.importers.source import ImportedSource
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "gpu-2026-11-28"
# the ops whose FLOPs are a layer's matmuls and convolutions (Inductor's out= GEMMs count as their op)
MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::convolution", "aten::convolution_backward")
NOT_PLACED = ("<compiled>", "OptimizedModule")  # the compiled region's label (OptimizedModule before 2026-11-28)


@cache
def _imported(model: str, mode: str, with_log: bool = False) -> ImportedSource:
    path = DATA / "traces" / f"{model}-bf16-{mode}-trace.json.xz"
    log = DATA / "compile-logs" / f"{model}-bf16-compiled-torch-trace.tar.xz"
    options = TraceOptions(compiled=layers_from_compile_log(log) if with_log else None)
    return trace_source(parse_trace(lzma.open(path).read(), path), "test", options, load_metric_set())


def _launches(model: str, mode: str, with_log: bool = False) -> pd.DataFrame:
    return _imported(model, mode, with_log).launches


def _placed_share(launches: pd.DataFrame) -> float:
    kernels = launches[launches["category"] == "kernel"]
    placed = kernels["layer"].notna() & ~kernels["layer"].isin(NOT_PLACED)
    return kernels.loc[placed, "time_s"].sum() / kernels["time_s"].sum()


def _matmul_flops_by_layer(launches: pd.DataFrame) -> pd.Series:
    columns = [c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]
    matmuls = launches[launches["work_op"].isin(MATMULS)]
    return matmuls[columns].sum(axis=1).groupby(matmuls["layer"]).sum()


@pytest.mark.parametrize("model", ["resnet50", "gpt2"])
def test_a_compiled_steps_kernels_land_on_the_eager_steps_layers(model: str) -> None:
    without = _launches(model, "compiled")
    # before: the compiled model's kernels on its region's label; on a layer only the eager loss and optimizer (8.7%)
    assert _placed_share(without) < 0.10
    compiled, eager = _launches(model, "compiled", True), _launches(model, "eager")
    placed = {
        "resnet50": "100.0% of the compiled graphs' kernel time (762 of 762 kernels)",
        "gpt2": "99.3% of the compiled graphs' kernel time (645 of 648 kernels)",
    }[model]
    assert any(placed in note for note in _imported(model, "compiled", True).info.notes)
    # the rest: kernels of the compiled region the log does not place, and the eager loss and optimizer's
    assert _placed_share(compiled) >= 0.95
    assert _placed_share(compiled) == pytest.approx({"resnet50": 0.990, "gpt2": 0.988}[model], abs=0.0005)
    by_layer = pd.concat({"compiled": _matmul_flops_by_layer(compiled), "eager": _matmul_flops_by_layer(eager)}, axis=1)
    by_layer = by_layer.fillna(0.0)
    assert by_layer["compiled"].sum() == pytest.approx(by_layer["eager"].sum(), rel=1e-3)
    # every layer's matmul and convolution FLOPs (forward and backward) as in the eager step: 54 layers of
    # resnet50, 49 of GPT-2 (12 blocks' c_attn, c_proj, c_fc, c_proj and the tied lm_head)
    assert len(by_layer) == {"resnet50": 54, "gpt2": 49}[model]
    assert ((by_layer["compiled"] - by_layer["eager"]).abs() <= 0.01 * by_layer["eager"]).all()
    assert (
        by_layer.loc[by_layer["eager"] > 0].index.str.contains(r"conv|downsample|fc|c_attn|c_proj|c_fc|lm_head").all()
    )
    if model == "gpt2":  # the tied lm_head (its weight is wte's) keeps its own layer (0.014% apart: Inductor's
        # logits are padded from 50257 to 50264 columns)
        assert by_layer.at["lm_head", "compiled"] == pytest.approx(by_layer.at["lm_head", "eager"], rel=1e-3)


def test_the_phase_of_a_compiled_kernel_is_its_graphs() -> None:
    """The forward graph's kernels run in the forward phase, the backward graph's in backward."""
    graphs = layers_from_compile_log(DATA / "compile-logs" / "resnet50-bf16-compiled-torch-trace.tar.xz")
    kinds = {graph.kind for graph in graphs.values()}
    assert kinds == {"forward", "backward"}
    compiled = _launches("resnet50", "compiled", True)
    backward = next(g for g in graphs.values() if g.kind == "backward")
    names = {call.op for call in backward.calls if call.op.startswith("triton_")}
    assert (compiled.loc[compiled["kernel"].isin(names), "phase"] == "backward").all()


def test_module_paths_from_dynamos_input_names_and_their_common_ancestor() -> None:
    assert parameter_module("L_self_modules_layer1_modules_0_modules_conv1_parameters_weight_") == "layer1.0.conv1"
    assert parameter_module("L_self_modules_bn1_buffers_running_mean_") == "bn1"
    assert parameter_module("L_self_parameters_scale_") == ""
    assert parameter_module("L_x_") is None
    assert common_ancestor(["layer1.0.bn3", "layer1.0.downsample.1"]) == "layer1.0"
    assert common_ancestor(["layer1.0.bn3", "fc"]) == ""


def test_import_refuses_a_compile_log_that_is_not_one(cli, tmp_path: Path) -> None:
    log = tmp_path / "not-a-log.log"
    log.write_text("hello\n")
    result = cli("import", DATA / "traces" / "resnet50-bf16-compiled-trace.json.xz", "--run", "r", "--compile-log", log)
    assert result.code == 1
    assert "no TORCH_TRACE log entries" in result.err and "Traceback" not in result.err


STEP = """
import sys
import torch
from torch.profiler import ProfilerActivity, profile


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = self.fc1(x)
        h = self.act(h)
        return x + self.fc2(h)


torch.manual_seed(0)
model = torch.nn.Sequential(Block(), Block())
compiled = torch.compile(model)
x = torch.randn(8, 32)
compiled(x).sum().backward()  # compiles
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    compiled(x).sum().backward()
prof.export_chrome_trace(sys.argv[1])
"""


def test_a_model_compiled_on_the_cpu_gets_its_gemms_layers_from_its_compile_log(cli, tmp_path: Path) -> None:
    """What a user who compiles on their own gets: TORCH_TRACE and INDUCTOR_PROVENANCE set, the step profiled,
    the trace imported with --compile-log. Inductor's C++ kernels leave no profiler event; its GEMMs do
    (addmm and mm with out=), each on the Linear that made it, forward and backward."""
    import os
    import subprocess
    import sys
    import tempfile

    script, trace, log = tmp_path / "step.py", tmp_path / "trace.json", tmp_path / "torch-trace"
    script.write_text(STEP)
    environment = {
        **os.environ,
        "TORCH_TRACE": str(log),
        "INDUCTOR_PROVENANCE": "1",
        # Inductor's cache kept from one test run to the next (a fresh one per run cost about 10 s of C++ compiles
        # here), of its own: the cache key leaves the trace.* options out, so a graph cached by a compile without
        # provenance would log code that names none (hroofline/collect/compile_log.py); compiled with it, a graph
        # found in the cache logs its provenance as compiled anew does (the same 7 backward GEMMs placed)
        "TORCHINDUCTOR_CACHE_DIR": str(Path(tempfile.gettempdir()) / f"hroofline-tests-inductor-{os.getuid()}"),
    }
    done = subprocess.run([sys.executable, str(script), str(trace)], env=environment, capture_output=True, text=True)
    if done.returncode != 0 and "CppCompileError" in done.stderr:
        pytest.skip("Inductor's C++ compile cannot run here: " + done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr[-2000:]
    imported = cli("import", trace, "--run", "mine", "--compile-log", log)
    assert imported.code == 0, imported.err
    assert "compiled kernels placed on their layers by the compile log" in imported.out + imported.err
    launches = pd.read_parquet(next(cli.store.rglob("launches-*.parquet")))
    gemms = launches[launches["kernel"].isin(["aten::addmm", "aten::mm"])]
    # the step marks no phase: the compiled GEMMs' phases are their graphs', forward or backward
    assert set(gemms["phase"]) == {"forward", "backward"}
    backward = gemms["phase"] == "backward"
    # forward: one addmm per Linear, counted by hand from the model
    assert gemms.loc[~backward, "layer"].value_counts().to_dict() == {"0.fc1": 1, "0.fc2": 1, "1.fc1": 1, "1.fc2": 1}
    # backward: each Linear's input and weight gradients, one GEMM each (the first Linear's input needs none);
    # PyTorch 2.14's backward graph prints no source lines: the first Linear's weight gradient, last in backward,
    # reading only its gradient and the model's input, lands on the other block's fc1 (the same line of code)
    by_layer = gemms.loc[backward, "layer"].value_counts().to_dict()
    assert by_layer["0.fc2"] == by_layer["1.fc2"] == 2
    assert by_layer.get("0.fc1", 0) + by_layer["1.fc1"] == 3
    assert sum(by_layer.values()) == 7


def test_the_notebook_imports_with_the_compile_log_as_the_command(tmp_path: Path) -> None:
    import hroofline

    trace = DATA / "traces" / "resnet50-bf16-compiled-trace.json.xz"
    log = DATA / "compile-logs" / "resnet50-bf16-compiled-torch-trace.tar.xz"
    run = hroofline.import_run(trace, "compiled", gpu="h200", compile_log=log, store=tmp_path / "store")
    layers = run.launches.set_index("launch_id")["layer"]
    assert (layers == _launches("resnet50", "compiled", True).set_index("launch_id")["layer"]).all()


@pytest.mark.parametrize("model", ["resnet50", "gpt2"])
def test_the_compiled_step_moves_no_more_bytes_at_hbm_than_the_eager_one(model: str) -> None:
    """Fusion keeps intermediates on chip: the compiled step's analytic HBM bytes (the eager ops' fewest bytes; the
    fused kernels' recorded tensors, each moved once) are at most the eager step's, on the same steps' kernels."""
    compiled, eager = _launches(model, "compiled"), _launches(model, "eager")
    kernels = [frame[frame["category"] == "kernel"] for frame in (compiled, eager)]
    fused, unfused = (k["bytes_hbm"].sum() for k in kernels)
    assert 0 < fused <= unfused
    assert len(kernels[0]) < len(kernels[1])  # and it launches fewer kernels
