"""The workload and the CPU backend, for real on this machine's CPU (PyTorch, random weights)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
import torchvision

from hroofline.collect.workload import STEP_PHASES, NvtxListener, PhaseMarks, TrainingStep, WorkloadConfig
from hroofline.roofs.ceilings import load_ceilings_file
from hroofline.store.runs import RunStore
from hroofline.work.ops import OpRecorder, records_to_launches


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`hroofline profile --arch resnet18 --gpu cpu --batch-size 2 --steps 1`, ceilings measured here."""
    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("cpu") / "store"
    argv = ["profile", "--arch", "resnet18", "--gpu", "cpu", "--batch-size", "2", "--steps", "1", "--store", str(store)]
    assert main(argv) == 0
    return store


def test_profile_gives_every_phase_time_and_flops(cli, cpu_run: Path) -> None:
    result = cli("summary", "resnet18-fp32-cpu-b2", "--format", "json", "--store", str(cpu_run))
    phases = json.loads(result.out)["phases"]
    assert list(phases) == ["forward", "backward", "optimizer"]  # no op outside the phases
    for phase in STEP_PHASES:
        assert phases[phase]["time_s"] > 0 and phases[phase]["flops"] > 0 and phases[phase]["bytes_l1"] > 0
    ratio = phases["backward"]["flops"] / phases["forward"]["flops"]
    assert 1.7 <= ratio <= 2.3


def test_forward_flops_match_torchvision(cpu_run: Path) -> None:
    """Convolution and matmul FLOPs of the forward pass = 2 x batch x torchvision's published GMACs."""
    launches = RunStore(cpu_run).load("resnet18-fp32-cpu-b2").launches
    forward = launches[launches["phase"] == "forward"]
    matmuls = forward[forward["kernel"].isin(["aten::convolution", "aten::addmm"])]["flops_fp32"].sum()
    published = torchvision.models.ResNet18_Weights.DEFAULT.meta["_ops"] * 1e9 * 2 * 2
    assert matmuls == pytest.approx(published, rel=0.01)
    assert forward["flops_fp32"].sum() > matmuls  # batch norm, ReLU, pooling and adds add their share


def test_run_carries_its_measured_ceilings_and_charts(cli, cpu_run: Path, tmp_path: Path) -> None:
    meta = RunStore(cpu_run).load_meta("resnet18-fp32-cpu-b2")
    assert meta.gpu == "cpu" and meta.sources[0].kind == "cpu"
    assert meta.ceilings and meta.ceilings["peaks"]["fp32"] > 1e9 and meta.ceilings["peaks"]["l1"] > 1e9
    assert meta.sources[0].settings["batch_size"] == "2"
    chart = tmp_path / "cpu.json"
    result = cli("chart", "resnet18-fp32-cpu-b2", "--out", str(chart), "--store", str(cpu_run))
    assert result.code == 0, result.err
    spec = json.loads(chart.read_text())
    assert "measured" in spec["title"]["subtitle"][0]
    top = cli("top", "resnet18-fp32-cpu-b2", "--phase", "backward", "-n", "1", "--format", "json", "--store", cpu_run)
    assert json.loads(top.out)[0]["kernel"] == "aten::convolution_backward"


@pytest.mark.parametrize(
    ("precision", "column"), [("amp-bf16", "flops_fp16"), ("amp", "flops_fp16"), ("o2", "flops_fp16")]
)
def test_precision_modes_run_and_count_16_bit_flops(precision: str, column: str) -> None:
    """Each 16-bit mode's step, for real on this CPU: its convolutions' FLOPs counted as 16-bit. On 48x48 images
    (the last stage's maps 2x2: batch norm in training needs more than one value per channel): float16 on a CPU
    is slow (at 224x224 two ResNet-18 steps took over 30 s), and the size does not change the dtype an op runs
    in."""
    recorder = OpRecorder()
    config = WorkloadConfig("resnet18", batch_size=1, precision=precision, input_shape=(3, 48, 48))
    step = TrainingStep(config, PhaseMarks([recorder.listen]))
    step.run()
    with recorder:
        step.run()
    launches = records_to_launches(recorder.records)
    convolutions = launches[launches["kernel"] == "aten::convolution"]
    assert convolutions[column].sum() > 0.9 * convolutions[["flops_fp32", "flops_fp16"]].sum().sum()
    assert set(launches["phase"]) == set(STEP_PHASES)


def test_nvtx_phases_run_without_a_profiler_attached() -> None:
    calls: list[tuple[str, bool]] = []
    marks = PhaseMarks([NvtxListener(), lambda phase, entering: calls.append((phase, entering))])
    TrainingStep(WorkloadConfig("resnet18", batch_size=1), marks).run()
    assert calls == [(p, e) for p in STEP_PHASES for e in (True, False)]


def test_adam_and_vit() -> None:
    recorder = OpRecorder()
    step = TrainingStep(WorkloadConfig("vit_b_16", batch_size=1, optimizer="adam"), PhaseMarks([recorder.listen]))
    with recorder:
        step.run()
    launches = records_to_launches(recorder.records)
    optimizer = launches[launches["phase"] == "optimizer"]
    assert optimizer["flops_fp32"].sum() > 0
    forward = launches[launches["phase"] == "forward"]
    assert forward["flops_fp32"].sum() > 2 * 17.5e9 * 0.99  # vit_b_16: 17.56 GMACs at 224x224


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arch", "resnet7", "--gpu", "cpu"], "unknown model 'resnet7'"),
        (["--arch", "resnet18", "--gpu", "cpu", "--precision", "fp8"], "unknown precision 'fp8'"),
        (["--arch", "resnet18", "--gpu", "v99"], "unknown GPU 'v99'"),
    ],
)
def test_bad_profile_requests_are_usage_errors(cli, tmp_path: Path, argv: list[str], message: str) -> None:
    result = cli("profile", *argv, "--store", str(tmp_path / "store"))
    assert result.code == 2 and message in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "store").exists()


def test_ceilings_measure_prints_and_writes_a_ceilings_file(cli, tmp_path: Path) -> None:
    out = tmp_path / "here.toml"
    result = cli("ceilings", "--measure", "--quick", "--out", str(out))
    assert result.code == 0, result.err
    assert re.search(r"fp32\s+\d[\d.]* [GT]FLOP/s", result.out)
    working_sets = re.findall(r"KiB\s+(l1|l2|l3|dram)\s+\d[\d.]* [GT]B/s", result.out)
    assert len(working_sets) >= 2 and "dram" in working_sets
    ceilings = load_ceilings_file(out)
    assert ceilings.peaks["fp32"] > 1e9 and ceilings.bandwidth["hbm"] > 1e8
    # (Which level is faster is not asserted: on a busy machine one timing can lose to another.)
    assert set(ceilings.bandwidth) >= {"l1", "hbm"} and all(v > 1e8 for v in ceilings.bandwidth.values())
    # what it prints as written is what the file holds, to the digits printed
    printed = result.out.split("what --out writes")[1]
    scale = {"G": 1e9, "T": 1e12, "M": 1e6}
    shown = {
        name: float(value) * scale[prefix]
        for name, value, prefix in re.findall(r"^  (\w+) +([\d.]+) ([GTM])(?:B|FLOP)/s$", printed, flags=re.M)
    }
    assert shown == pytest.approx({**ceilings.bandwidth, **ceilings.peaks}, rel=5e-4)


def test_show_ceilings(cli) -> None:
    result = cli("ceilings", "--show", "v100-yang-ert")
    assert result.code == 0
    assert re.search(r"hbm +828\.8 GB/s", result.out) and re.search(r"tensor_fp16 +106\.5 TFLOP/s", result.out)
    assert " at " not in result.out  # measured ceilings are taken as given, at no particular clock
    datasheet = cli("ceilings", "--show", "h100-sxm")
    assert re.search(r"fp32 +67\.00 TFLOP/s +at 1\.98 GHz", datasheet.out)
    assert re.search(r"tensor_fp8 +1\.979 PFLOP/s +at 1\.83 GHz", datasheet.out)


def test_profile_refuses_to_append_and_replaces_on_request(cli, tmp_path: Path, cpu_profile_args: list[str]) -> None:
    argv = [*cpu_profile_args, "--warmup", "0", "--run", "r", "--store", str(tmp_path / "store")]
    assert cli(*argv).code == 0
    again = cli(*argv)
    assert again.code == 2 and "exists already" in again.err and "--replace" in again.err
    assert cli(*argv, "--replace").code == 0
    store = RunStore(tmp_path / "store")
    assert store.run_names() == ["r"] and [p.name for p in store.runs_dir.iterdir()] == ["run=r"]
    run = store.load("r")
    assert len(run.meta.sources) == 1 and int(run.launches["launches"].sum()) == len(run.launches) < 500
    assert run.meta.ceilings and run.meta.ceilings["label"] == "fixed"


def test_bytes_follow_what_each_op_reads_and_writes() -> None:
    recorder = OpRecorder()
    a, b, out = torch.ones(1000), torch.ones(1000), torch.empty(1000)
    left, right = [torch.ones(1000) for _ in range(3)], [torch.ones(1000) for _ in range(3)]
    with recorder:
        a.add_(b)  # reads a and b, writes a
        torch.add(a, b, out=out)  # reads a and b, writes out
        out.copy_(a)  # reads a, overwrites out
        torch._foreach_add_(left, right)  # reads both lists, writes the first
        _ = a.expand(10, 1000) + b  # the expanded view covers 1000 elements, the result 10000
    got = [(r.op, r.flops, r.bytes) for r in recorder.records]
    assert got == [
        ("aten::add_", 1000.0, 12000.0),
        ("aten::add", 1000.0, 12000.0),
        ("aten::copy_", 0.0, 8000.0),
        ("aten::_foreach_add_", 3000.0, 36000.0),
        ("aten::add", 10000.0, 48000.0),
    ]


def test_depthwise_convolution_backward_is_twice_the_forward() -> None:
    recorder = OpRecorder()
    images = torch.randn(2, 32, 16, 16, requires_grad=True)
    weights = torch.randn(32, 1, 3, 3, requires_grad=True)
    with recorder:
        torch.nn.functional.conv2d(images, weights, padding=1, groups=32).sum().backward()
    flops = {r.op: r.flops for r in recorder.records}
    assert flops["aten::convolution"] == 2 * (2 * 32 * 16 * 16) * (1 * 3 * 3)
    assert flops["aten::convolution_backward"] == 2 * flops["aten::convolution"]


def test_gpu_only_options_are_refused_for_the_cpu(cli, tmp_path: Path) -> None:
    result = cli(
        "profile",
        "--arch",
        "resnet18",
        "--gpu",
        "cpu",
        "--dry-run",
        "--passes",
        "groups",
        "--store",
        str(tmp_path / "store"),
    )
    assert result.code == 2 and "--passes, --dry-run: only for profiling a GPU" in result.err
    assert not (tmp_path / "store").exists()


def test_a_cpu_run_gets_no_gpu_advice(cpu_run: Path, cli) -> None:
    from hroofline.analyze.advice.base import load_rules
    from hroofline.analyze.advice.rules import advise
    from hroofline.store.runs import RunStore

    store = RunStore(cpu_run)
    (name,) = store.run_names()
    gpu_rules = {key for key, rule in load_rules().items() if rule.applies_to == "gpu"}
    assert not {f.rule.key for f in advise(store.load(name))} & gpu_rules
    out = cli("advise", name, "--store", str(cpu_run)).out
    assert name in out and "tensor cores" not in out and "channels_last" not in out


def test_cpu_ops_above_their_measured_compute_roof_are_said_once_as_a_low_roof(cli, tmp_path: Path) -> None:
    """A CPU's ATen convolutions do their formula's arithmetic: one faster than the FP32 roof measured on that CPU
    says the roof is low (as one measured while other work held the cores is), in one line for all of them, not
    that the kernels skipped arithmetic (Winograd: a GPU kernel's reason)."""
    ceilings = tmp_path / "low.toml"
    ceilings.write_text('name = "low"\n[ceilings]\nl1 = 1e15\nhbm = 1e15\nfp32 = 1e6\nfp16 = 1e6\nfp64 = 1e6\n')
    store = str(tmp_path / "store")
    argv = ["profile", "--arch", "resnet18", "--gpu", "cpu", "--batch-size", "1", "--warmup", "0", "--run", "r"]
    assert cli(*argv, "--ceilings", str(ceilings), "--store", store).code == 0
    shown = cli("top", "r", "--store", store)
    assert shown.code == 0, shown.err
    lines = [line for line in shown.err.splitlines() if "faster than" in line]
    assert len(lines) == 1, shown.err
    assert "the compute roof measured on this CPU" in lines[0] and "--measure-ceilings" in lines[0]
    assert "Winograd" not in shown.err


def test_the_profiled_steps_convolutions_stay_under_the_fp32_roof_measured_here(cli, cpu_run: Path) -> None:
    """The demo's profile (resnet18, batch 2, its roofs measured here): no op above the compute roof. The roof was
    the best of three tries, which on a busy machine all fell in busy moments: the demo's first output was this
    warning, twice (once per `top`): on two threads, at a moment another process held one up. Roofs measured
    while other work held twice the cores (load average, which the cache keeps) can be low still: then this is
    skipped."""
    import tomllib

    from hroofline.collect.ceilings_cache import BUSY_LOAD_PER_CORE, cache_file, machine_key

    measured = tomllib.loads(cache_file(machine_key()).read_text())["machine"]
    if measured.get("load_average", 0.0) > BUSY_LOAD_PER_CORE * (os.cpu_count() or 1):
        pytest.skip(f"the roofs were measured at load average {measured['load_average']} on {os.cpu_count()} cores")
    shown = cli("top", "resnet18-fp32-cpu-b2", "--store", str(cpu_run))
    assert shown.code == 0, shown.err
    assert "compute roof" not in shown.err, shown.err
