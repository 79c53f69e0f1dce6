"""Layers of a trace recorded with ``with_stack=True`` (torch.profiler's own, not hroofline's ranges): each launch on
the ``nn.Module`` calls open around it, backward on the module of the forward op that created its autograd node,
and a torch.compile'd model as the compiled region, matched layer to layer against the eager step by ``compare``.
The traces are PyTorch's own, recorded here on the CPU by the test (a small MLP and its loss); the expected
FLOPs are counted by hand: 2 M N K per matrix product."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hroofline.api import load

BATCH, IN, HIDDEN, OUT = 8, 32, 64, 10
GEMMS = ("aten::addmm", "aten::mm")


def _record(path: Path, compiled: bool) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT))
    loss_of = torch.nn.MSELoss()
    run = torch.compile(model) if compiled else model
    inputs, target = torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
    for _ in range(2):  # compiled at the first call; the profiled step reuses it
        loss_of(run(inputs), target).backward()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        loss_of(run(inputs), target).backward()
    prof.export_chrome_trace(str(path))


@pytest.fixture(scope="module")
def mlp_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hroofline.cli.main import main

    folder = tmp_path_factory.mktemp("module-layers")
    for name, compiled in (("eager", False), ("compiled", True)):
        _record(folder / f"{name}.json", compiled)
        assert main(["import", str(folder / f"{name}.json"), "--run", name, "--store", str(folder / "store")]) == 0
    return folder


def test_the_trace_records_module_calls(mlp_traces: Path) -> None:
    events = json.loads((mlp_traces / "eager.json").read_text())["traceEvents"]
    calls = sorted(e["name"] for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.M"))
    assert calls == [f"nn.Module: {n}" for n in ("Linear_0", "Linear_1", "MSELoss_0", "ReLU_0", "Sequential_0")]


def test_gemm_flops_land_on_their_modules_forward_and_backward(mlp_traces: Path) -> None:
    launches = load("eager", mlp_traces / "store").launches
    gemms = launches[launches["work_op"].isin(GEMMS)]
    flops = gemms.filter(like="flops_").drop(columns="flops_tensor", errors="ignore").sum(axis=1)
    by_layer = flops.groupby([gemms["phase"].astype(str), gemms["layer"].astype(str)]).sum().to_dict()
    first, second = 2 * BATCH * IN * HIDDEN, 2 * BATCH * HIDDEN * OUT
    assert by_layer == pytest.approx(
        {  # to rounding: a launch's FLOPs are its op's share by duration
            ("forward", "Sequential_0.Linear_0"): first,
            ("forward", "Sequential_0.Linear_1"): second,
            # backward: each weight's gradient; the input's only for the second layer (the batch needs none)
            ("backward", "Sequential_0.Linear_0"): first,
            ("backward", "Sequential_0.Linear_1"): 2 * second,
        },
        rel=1e-12,
    )


def test_the_compiled_model_is_the_compiled_region(mlp_traces: Path, cli) -> None:
    launches = load("compiled", mlp_traces / "store").launches
    layers = set(launches["layer"].astype(str))
    assert "<compiled>" in layers and not any(layer.startswith("Sequential_0") for layer in layers)
    assert "MSELoss_0" in layers  # the loss stays eager, on its module
    compared = cli("compare", "eager", "compiled", "--store", mlp_traces / "store")
    assert compared.code == 0 and "matched layer to layer" in compared.out
    eager = load("eager", mlp_traces / "store").launches
    on_modules = eager["layer"].astype(str).str.startswith("Sequential_0") & (eager["phase"] == "forward")
    region = next(line for line in compared.out.splitlines() if line.startswith("forward   <compiled>"))
    assert region.split()[2] == str(int(on_modules.sum()))  # the eager launches the region replaced


def test_a_trace_without_module_calls_has_no_layers(tmp_path: Path) -> None:
    """The same kind of step without with_stack: no layer, as before."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from hroofline.cli.main import main

    model = torch.nn.Sequential(torch.nn.Linear(IN, OUT))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(torch.randn(BATCH, IN)).sum().backward()
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    assert main(["import", str(tmp_path / "plain.json"), "--run", "plain", "--store", str(tmp_path / "s")]) == 0
    assert load("plain", tmp_path / "s").launches["layer"].isna().all()
