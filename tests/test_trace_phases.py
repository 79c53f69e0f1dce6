"""A trace whose ranges name no forward pass (a script profiled without ``record_function``): its forward ops
were phase 'other'. Autograd's own records give the forward pass (each op's ``Sequence number``, matched by the
backward op of the node it made), checked here against the order the script ran its lines in."""

from __future__ import annotations

import json
import lzma
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hroofline.api import load
from tests.conftest import REPO, need, run_script_here

# Two training steps of a tiny model, profiled as a user does (ProfilerStep ranges from the schedule, no
# record_function): the batch is made before the forward pass, the gradients zeroed before it.
STEPS = """\
import sys
import torch
from torch.profiler import ProfilerActivity, profile, schedule

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
steps = schedule(wait=0, warmup=0, active=2, repeat=1)
write = lambda done: done.export_chrome_trace(sys.argv[1])
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=steps, on_trace_ready=write) as prof:
    for _ in range(2):
        optimizer.zero_grad()
        images, targets = torch.randn(32, 8), torch.randn(32, 4)
        loss = torch.nn.functional.mse_loss(model(images), targets)
        loss.backward()
        optimizer.step()
        prof.step()
"""


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("phases")
    (folder / "steps.py").write_text(STEPS)
    trace = folder / "trace.json"
    with warnings.catch_warnings():  # the schedule's warm-up of 0 steps is the script's as a user writes it
        warnings.filterwarnings("ignore", "Profiler won't be using warmup")
        run_script_here(folder / "steps.py", trace)
    return trace


def _inside(event: dict[str, Any], spans: list[tuple[float, float]]) -> bool:
    return any(start <= event["ts"] and event["ts"] + event["dur"] <= end for start, end in spans)


def _spans(events: list[dict[str, Any]], first: str, last: str | None = None) -> list[tuple[float, float]]:
    """From each op named ``first`` to the end of the next op named ``last`` (or its own end)."""
    starts = [e for e in events if e["name"] == first]
    ends = [e for e in events if e["name"] == (last or first)]
    return [(s["ts"], next(e["ts"] + e["dur"] for e in ends if e["ts"] >= s["ts"])) for s in starts]


def test_a_cpu_trace_without_ranges_has_its_forward_pass(cli, two_steps: Path) -> None:
    """Expected from the script's order, per op: from the first layer's aten::linear to the end of aten::mse_loss,
    the forward pass; inside autograd's evaluate_function ops, backward; inside PyTorch's Optimizer.* ranges,
    optimizer; the batch's aten::randn and the gradient's seed (ones_like before the engine) stay other.
    Before: forward 0 and other 92 of 244 ops."""
    events = sorted(
        (e for e in json.loads(two_steps.read_text())["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"]
    )
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    linears = [e for e in ops if e["name"] == "aten::linear"]
    forward = [(first["ts"], end) for first, (_, end) in zip(linears[::2], _spans(ops, "aten::mse_loss"), strict=True)]
    backward = [
        (e["ts"], e["ts"] + e["dur"]) for e in ops if e["name"].startswith("autograd::engine::evaluate_function")
    ]
    optimizer = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("Optimizer.")]

    def phase(op: dict[str, Any]) -> str:
        for name, spans in (("backward", backward), ("optimizer", optimizer), ("forward", forward)):
            if _inside(op, spans):
                return name
        return "other"

    expected = Counter((op["name"], phase(op)) for op in ops)
    ceilings = two_steps.with_name("fixed-ceilings.toml")  # the phases need no roofs: none measured here
    ceilings.write_text('name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\n')
    result = cli("import", two_steps, "--run", "steps", "--gpu", "cpu", "--ceilings", ceilings)
    assert result.code == 0, result.err
    launches = load("steps", cli.store).launches
    assert Counter(zip(launches["kernel"], launches["phase"], strict=True)) == expected
    per_step = launches.groupby(["step", "phase"]).size()
    assert per_step[0].to_dict() == per_step[1].to_dict()  # one forward pass per step
    assert per_step[0]["forward"] == sum(1 for op in ops if phase(op) == "forward") / 2 > 0
    other = set(launches.loc[launches["phase"] == "other", "kernel"])
    assert "aten::randn" in other and "aten::linear" not in other and "aten::mse_loss" not in other


def test_the_h100_vgg16_trace_gets_its_forward_pass() -> None:
    """The H100 VGG16 fp32 training step this project traced (tests/data/gpu-2026-11-27/h100-sixth, README
    there: torch.profiler, record_shapes, no record_function): 8.81 ms of 28.7 ms of kernels were 'other' (issue
    45, item 3). Expected: the kernels whose runtime call ran between the first aten::conv2d and the end of
    aten::cross_entropy_loss (launched by the runtime or,
    cuLaunchKernel, the driver)."""
    path = need(REPO / "tests/data/gpu-2026-11-27/h100-sixth/vgg16-fp32-b32-train-nchw-trace.json.xz")
    document = json.loads(lzma.decompress(path.read_bytes()))
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    first = next(e for e in ops if e["name"] == "aten::conv2d")
    loss = next(e for e in ops if e["name"] == "aten::cross_entropy_loss")
    called = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    inside = [
        e for e in kernels if first["ts"] <= called.get(e["args"].get("correlation"), -1) <= loss["ts"] + loss["dur"]
    ]
    from hroofline.importers.build import ImportOptions, import_source
    from hroofline.roofs.metricset import load_metric_set

    launches = import_source(path, ImportOptions(), load_metric_set()).launches
    forward = launches[launches["phase"] == "forward"]
    assert len(forward) == len(inside) == 102
    assert forward["time_s"].sum() == pytest.approx(sum(e["dur"] for e in inside) * 1e-6, rel=1e-9)
    assert forward["time_s"].sum() == pytest.approx(8.81e-3, abs=0.005e-3)
