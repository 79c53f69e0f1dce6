"""``hroofline profile --compile [MODE]`` (issue 46, item 4): the model torch.compile'd, warmed up outside the
measured step, recorded in the run; on the CPU through Inductor's C++ code (gcc), under ncu (a stand-in replaying a
real report) with CUDA graph nodes profiled as kernels; compare of the eager and the compiled run, and advise on the
compiled one."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hroofline.store.runs import RunStore
from tests.conftest import REPO, SHARED, need

# A tiny MLP: 3x4x4 inputs flattened, 48 -> 64 -> 10, batch 4; compiling its step takes seconds, not minutes.
MLP = """import torch


def build() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
"""
BATCH, IN, HIDDEN, OUT = 4, 48, 64, 10
GEMMS = ("aten::mm", "aten::addmm")
STEPS = ("forward", "backward", "optimizer")
EAGER, COMPILED = "mlp.build-fp32-cpu-b4-3x4x4-trace", "mlp.build-fp32-cpu-b4-3x4x4-compiled-trace"
GRAPHED = "mlp.build-fp32-cpu-b4-3x4x4-compiled-reduce-overhead-trace"  # replays_graphs patched to say True


def _gemm_flops_by_hand() -> dict[tuple[str, str], int]:
    """Per phase and layer (the Sequential's Linears are its modules 1 and 3): a linear layer of K inputs and N
    outputs on M samples, 2 M N K FLOPs forward; backward, the weight gradient (2 M N K) and, for the second layer
    only (the batch needs no gradient), the input gradient (2 M N K)."""
    first, second = 2 * BATCH * IN * HIDDEN, 2 * BATCH * HIDDEN * OUT
    return {("forward", "1"): first, ("forward", "3"): second, ("backward", "1"): first, ("backward", "3"): 2 * second}


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP's step traced eager (--backend trace) and compiled (--compile: a trace on the CPU), one store; and
    compiled in reduce-overhead mode as on a GPU, where its step replays CUDA graphs (``replays_graphs`` says so
    on the CPU too: the warm-up steps traced into a capture trace, which holds no graph here). Compiled after the
    default mode's, in this process, its C++ code is cached: about 2 s more."""
    import hroofline.collect.trace_backend as trace_backend
    from hroofline.cli.main import main

    folder = tmp_path_factory.mktemp("compiled")
    (folder / "mlp.py").write_text(MLP)
    ceilings = folder / "ceilings.toml"
    ceilings.write_text('name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\n')
    common = ["profile", "--model", f"{folder / 'mlp.py'}:build", "--input-shape", "3,4,4", "--batch-size", "4"]
    common += ["--gpu", "cpu", "--ceilings", str(ceilings), "--store", str(folder / "store")]
    assert main([*common, "--backend", "trace", "--out-dir", str(folder / "eager")]) == 0
    assert main([*common, "--compile", "--out-dir", str(folder / "compiled")]) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trace_backend, "replays_graphs", lambda mode, on_gpu: True)
        assert main([*common, "--compile", "reduce-overhead", "--out-dir", str(folder / "graphed")]) == 0
    return folder / "store"


def _gemm_flops(launches) -> dict[tuple[str, str], float]:
    """The GEMMs' FLOPs (with the ops they launch, which share them) per phase and layer."""
    columns = [c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]
    gemms = launches[launches["work_op"].isin(GEMMS)]
    by_layer = gemms.groupby([gemms["phase"].astype(str), gemms["layer"].astype(str)])
    return {key: float(rows[columns].sum().sum()) for key, rows in by_layer}


def test_a_compiled_cpu_steps_gemms_land_on_the_eager_steps_layers_with_their_flops(cli, mlp_runs: Path) -> None:
    """profile --compile writes the compilation's log (TORCH_TRACE with Inductor's provenance) and imports the
    trace with it: each GEMM Inductor's C++ code calls (with out=) inside the compiled region is on its Linear,
    with the FLOPs the eager step has there (forward layer by layer; backward phase by phase)."""
    store = RunStore(mlp_runs)
    eager, compiled = store.load(EAGER), store.load(COMPILED)
    by_hand = _gemm_flops_by_hand()  # forward 24,576 and 5,120; backward 24,576 and 10,240
    assert _gemm_flops(eager.launches) == pytest.approx(by_hand, rel=1e-12)
    # forward, layer by layer; backward, phase by phase: PyTorch 2.14's backward graph names almost no source
    # lines, so a weight gradient's GEMM is placed by data flow, and one of them has landed on the other Linear
    # (a fresh clone's run; docs/guides/compiled.md says so): each on a Linear, the phase's FLOPs the eager step's
    compiled_flops = _gemm_flops(compiled.launches)
    forward = {key: value for key, value in compiled_flops.items() if key[0] == "forward"}
    assert forward == pytest.approx({k: v for k, v in by_hand.items() if k[0] == "forward"}, rel=1e-12)
    backward = {key: value for key, value in compiled_flops.items() if key[0] == "backward"}
    assert {layer for _, layer in backward} <= {layer for _, layer in by_hand}
    assert sum(backward.values()) == pytest.approx(sum(v for k, v in by_hand.items() if k[0] == "backward"))
    notes = compiled.meta.sources[0].notes
    placed = [note for note in notes if note.startswith("compiled kernels placed on their layers by the compile log")]
    assert len(placed) == 1 and ": 100.0% of the compiled graphs' kernel time" in placed[0], notes
    assert not compiled.meta.sources[0].warnings
    assert list((mlp_runs.parent / "compiled" / "compile-log").glob("*.log"))  # kept beside the trace
    # the loss and optimizer stay eager; what is left in the region is its own bookkeeping (Dynamo's cache
    # lookup, the autograd function's calls), no GEMM
    assert {"<loss>", "<optimizer>", "<compiled>"} <= set(compiled.launches["layer"].astype(str))
    region = compiled.launches[compiled.launches["layer"] == "<compiled>"]
    assert region["work_op"].isna().all()
    settings = compiled.meta.sources[0].settings
    assert settings["compile"] == "default" and settings["warmup_steps"] == "3"  # compilation outside the step
    assert compiled.meta.compile_mode == "default" and eager.meta.compile_mode is None
    # compiled in the warm-up, not in the measured step: one compiled frame, compiled once. Dynamo guards on the
    # layer tracker's global hooks by their ids, and a tracker entered anew for the measured step recompiled there.
    events = json.loads((mlp_runs.parent / "compiled" / "trace.json").read_text())["traceEvents"]
    names = {str(event.get("name", "")) for event in events}
    assert not any(name.startswith("compile_attempt") for name in names)
    # one compiled frame ran (its id is frame/compilation: 0/0 here, 0/2 in a fresh clone's run, where guards
    # recompiled it in the warm-up), and none compiled in the measured step (no compile_attempt above)
    regions = {name for name in names if name.startswith("Torch-Compiled Region")}
    assert len(regions) == 1 and next(iter(regions)).startswith("Torch-Compiled Region: 0/")
    assert "compile" not in eager.meta.sources[0].settings
    runs = {row["run"]: row for row in json.loads(cli("runs", "--format", "json", "--store", mlp_runs).out)}
    assert runs[COMPILED]["compile"] == "default" and runs[EAGER]["compile"] is None
    assert " compile " in cli("runs", "--store", mlp_runs).out.splitlines()[0]
    summary = cli("summary", COMPILED, "--store", mlp_runs)
    assert "note: the model ran torch.compile'd (mode default)" in summary.err
    assert json.loads(cli("summary", COMPILED, "--format", "json", "--store", mlp_runs).out)["compile"] == "default"


def _user_ranges(trace: Path) -> tuple[dict[str, Any], list[str], float, float]:
    """A trace's head (less its events), its record_function ranges' names, its first start and last end (us)."""
    data = json.loads(trace.read_text())
    events = [e for e in data.pop("traceEvents") if e.get("ph") == "X"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    return data, names, min(e["ts"] for e in events), max(e["ts"] + e.get("dur", 0) for e in events)


def _without_frame_ids(launches) -> list[tuple[str, str, str, int]]:
    """Each launch's phase, layer, name (a compiled frame's id left out: the second compilation in a process
    numbers its frame 0/1) and count, sorted."""
    names = (
        launches["kernel"]
        .astype(str)
        .str.replace(r"Torch-Compiled Region: \d+/\d+", "Torch-Compiled Region", regex=True)
    )
    columns = (launches["phase"].astype(str), launches["layer"].astype(str), names, launches["launches"].astype(int))
    return sorted(zip(*columns, strict=True))


def test_a_step_that_replays_cuda_graphs_traces_its_warm_up_steps_as_their_capture(mlp_runs: Path) -> None:
    """profile --compile reduce-overhead --backend trace, with ``replays_graphs`` saying True as on a GPU: step 1
    compiles unprofiled, steps 2 and 3 (where CUDA graph trees record, collect/graph_capture_steps.py) are traced
    into trace-capture.json beside trace.json, and the measured step is imported with it. A CPU capture holds no
    graph: the join refuses it, the step is imported without it, with one warning line saying why, and its
    launches are the default mode's run's (no patch) one for one, with the same FLOPs."""
    graphed = mlp_runs.parent / "graphed"
    capture, trace = graphed / "trace-capture.json", graphed / "trace.json"
    source = RunStore(mlp_runs).load(GRAPHED).meta.sources[0]
    assert (
        source.settings["capture_trace"] == f"{capture} (left out)" and source.settings["compile"] == "reduce-overhead"
    )
    head, captured, _, last = _user_ranges(capture)
    measured_head, measured, measured_first, _ = _user_ranges(trace)
    # the warm-up steps 2 and 3: each phase twice, each compiled graph (forward, backward) called twice, with no
    # profiler step and no layer range (layers are quiet in the warm-up); the measured step once each
    calls = [name for name in captured if name.startswith("## Call CompiledFxGraph")]
    assert [captured.count(phase) for phase in STEPS] == [2, 2, 2] and len(calls) == 4 and len(set(calls)) == 2
    assert not any(name.startswith(("ProfilerStep#", "hroofline.layer:")) for name in captured)
    assert [measured.count(phase) for phase in STEPS] == [1, 1, 1] and "ProfilerStep#0" in measured
    assert all(measured.count(call) == 1 for call in set(calls))
    # on one clock (the same base), the capture ends before the measured step's trace begins
    assert head["baseTimeNanoseconds"] == measured_head["baseTimeNanoseconds"] and last < measured_first
    (warning,) = source.warnings
    assert warning == (
        "the warm-up steps' trace trace-capture.json attributed no replayed kernel (it was left out): the trace "
        "captured no CUDA graph (no launch between a StreamBeginCapture and its StreamEndCapture)"
    )
    graphed, compiled = RunStore(mlp_runs).load(GRAPHED).launches, RunStore(mlp_runs).load(COMPILED).launches
    assert _without_frame_ids(graphed) == _without_frame_ids(compiled)
    assert int(graphed["launches"].sum()) == 92  # as test_compare's compiled run
    # an op's FLOPs are split over its launches by their times, which differ run to run: per layer they are equal
    assert _gemm_flops(graphed) == pytest.approx(_gemm_flops(compiled), rel=1e-12)
    assert _gemm_flops(graphed)[("forward", "1")] == pytest.approx(2 * BATCH * IN * HIDDEN, rel=1e-12)  # 24,576
    assert not (mlp_runs.parent / "compiled" / "trace-capture.json").exists()  # default mode: no graphs


def test_compare_matches_the_compiled_run_layer_by_layer(cli, mlp_runs: Path) -> None:
    """The eager run's Linears (1, 3) against the compiled run's, where its GEMMs are placed; the eager Flatten and
    ReLU (0, 2), fused away, folded into the compiled region's <compiled>: per phase and layer both runs' launches,
    bytes and time, as the stored launches sum them."""
    store = RunStore(mlp_runs)
    eager, compiled = store.load(EAGER).launches, store.load(COMPILED).launches
    data = json.loads(cli("compare", EAGER, COMPILED, "--format", "json", "--store", mlp_runs).out)
    assert data["matched_on"] == "layer" and data["compiled"] == {"candidate": "default"}
    assert data["bytes_level"] == "l1"  # the CPU's runs count bytes at L1 only
    rows = {(row["phase"], row["family"]): row for row in data["families"]}

    def sums(launches, phase: str, layers: list[str]) -> tuple[int, float, float]:
        inside = launches[(launches["phase"] == phase) & launches["layer"].astype(str).isin(layers)]
        return int(inside["launches"].sum()), float(inside["bytes_l1"].sum()), float(inside["time_s"].sum())

    for phase in ("forward", "backward"):
        for layer in ("1", "3"):
            row = rows[(phase, layer)]
            assert row["status"] == "matched"
            for side, launches in (("base", eager), ("candidate", compiled)):
                kernels, moved, seconds = sums(launches, phase, [layer])
                assert row[f"{side}_kernels"] == kernels and kernels > 0
                assert row[f"{side}_bytes"] == pytest.approx(moved, rel=1e-12)
                assert row[f"{side}_time_s"] == pytest.approx(seconds, rel=1e-12)
        region = rows[(phase, "<compiled>")]
        assert region["base_kernels"] == sums(eager, phase, ["0", "2"])[0]
        assert region["candidate_kernels"] == sums(compiled, phase, ["<compiled>"])[0]
    # the forward Linears: eager, aten::linear's transpose, addmm and the ops under them; compiled, Inductor's
    # addmm alone (its weight's transpose a view of the generated code)
    forward = [rows[("forward", layer)] for layer in ("1", "3")]
    assert all(row["candidate_kernels"] < row["base_kernels"] for row in forward)
    total = data["phases"]["total"]
    assert total["base_kernels"] == int(eager["launches"].sum())
    assert total["candidate_kernels"] == int(compiled["launches"].sum())
    assert total["candidate_kernels"] < total["base_kernels"]  # fused: measured 92 against 135
    text = cli("compare", EAGER, COMPILED, "--store", mlp_runs)
    assert text.code == 0, text.err
    assert f"torch.compile'd: {COMPILED} (mode default): launches, bytes and time" in text.out
    assert "base L1 bytes" in text.out and "bytes saved" in text.out
    by_layer = text.out.split("torch.compile'd, layer by layer (the 8 with the most time):\n", 1)[1]
    header, *lines = by_layer.splitlines()
    assert header.split()[:4] == ["phase", "layer", "base", "launches"]
    shown = {tuple(line.split()[:2]) for line in lines[1:] if line.strip() and not line.endswith(":")}
    assert {("forward", "1"), ("forward", "3"), ("backward", "3")} <= shown
    assert "not the same model" not in text.out


def test_advise_on_a_compiled_run_does_not_recommend_compiling_again(cli, mlp_runs: Path) -> None:
    advice = json.loads(cli("advise", COMPILED, "--format", "json", "--store", mlp_runs).out)
    assert not any("torch.compile" in finding["code"] for finding in advice["findings"])
    assert [done["rule"] for done in advice["done"]] == ["memory_bound_elementwise"]
    assert advice["done"][0]["compile"] == "default"
    text = cli("advise", COMPILED, "--store", mlp_runs).out
    assert f"done in {COMPILED}'s step" in text and "the model is torch.compile'd (mode default)" in text
    assert json.loads(cli("advise", EAGER, "--format", "json", "--store", mlp_runs).out)["done"] == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--compile", "fast"], "argument --compile: invalid choice: 'fast'"),
        (["--compile", "--backend", "recorder"], "--compile: not with --backend recorder"),
        (["--compile", "--kernels", "top:3"], "--compile: not with --kernels"),
    ],
)
def test_compile_arguments_are_checked_before_torch_is_imported(extra: list[str], message: str) -> None:
    gpu = "h100" if "--kernels" in extra else "cpu"
    argv = ["profile", "--arch", "resnet18", "--gpu", gpu, *extra]
    code = (
        "import sys\nfrom hroofline.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
        "except SystemExit as stop:\n    code = stop.code\nprint(code, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=REPO, env={**os.environ}, check=False
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_compile_is_not_for_a_script(cli, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    result = cli("profile", "--gpu", "cpu", "--compile", "--script", str(script))
    assert result.code == 2 and "your script compiles its model itself" in result.err


@pytest.mark.parametrize(("mode", "graphs"), [("reduce-overhead", True), ("default", False)])
def test_a_compiled_step_under_ncu_profiles_every_launch_and_graph_nodes_as_kernels(
    cli, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, graphs: bool
) -> None:
    """The ncu command of a compiled step: no trace pass (Inductor's kernels are launched by no ATen op call to
    mark), the phases' every launch, the workload compiled with 3 warm-up steps, and for a mode that replays CUDA
    graphs ``--graph-profiling node``. The stand-in ncu checks the command and replays the real H100 GEMM
    calibration report (an eager report: what is checked here is the command and what the run records)."""
    import hroofline.collect.preflight as preflight

    report = tmp_path / "gemm.ncu-rep"
    report.write_bytes(
        lzma.decompress(need(SHARED / "fixtures" / "h100" / "gemm-calibration-base-clock.ncu-rep.xz").read_bytes())
    )
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(report))
    arguments = tmp_path / "ncu-args"
    monkeypatch.setenv("HROOFLINE_STANDIN_ARGS", str(arguments))
    monkeypatch.setattr(preflight, "gpu_visible", lambda: True)
    result = cli(
        *("profile", "--model", "hf:gpt2", "--batch-size", "8", "--precision", "amp-bf16", "--gpu", "h100-sxm"),
        *("--force-gpu", "--compile", mode, "--out-dir", str(tmp_path / "prof"), "--store", str(tmp_path / "store")),
    )
    assert result.code == 0, result.err
    run = "gpt2-amp-bf16-h100-sxm-b8-compiled" + ("" if mode == "default" else f"-{mode}")
    assert f"run '{run}'" in result.err
    assert "trace pass" not in result.err and "--compile: ncu profiles every launch of the step" in result.err
    given = arguments.read_text().splitlines()
    assert given[given.index("--compile") + 1] == mode and given[given.index("--warmup") + 1] == "3"
    assert [a for a in given if a.startswith("hroofline@")] == [f"hroofline@{p}" for p in STEPS]
    assert ("--graph-profiling" in given) == graphs
    if graphs:
        assert given[given.index("--graph-profiling") + 1] == "node"
        assert "ncu profiles each graph node as a kernel (--graph-profiling node)" in result.err
    settings = RunStore(tmp_path / "store").load(run).meta.sources[0].settings
    assert settings["compile"] == mode and settings["launches"] == "every launch"
    assert settings.get("graph_profiling") == ("node" if graphs else None)


def test_the_dry_run_of_a_compiled_step_says_its_graph_profiling_and_a_short_warm_up(cli) -> None:
    result = cli("profile", "--arch", "resnet50", "--gpu", "a100", "--compile", "reduce-overhead", "--dry-run")
    assert result.code == 0, result.err
    assert "--graph-profiling node" in result.out and "--compile reduce-overhead" in result.out
    assert (
        "--warmup 3" in result.out and "hroofline-profiles/resnet50-fp32-a100-compiled-reduce-overhead/" in result.out
    )
    short = cli("profile", "--arch", "resnet50", "--gpu", "a100", "--compile", "--warmup", "0", "--dry-run")
    assert "--graph-profiling" not in short.out  # default mode: no CUDA graphs
    assert "hroofline: warning: --warmup 0: the measured step compiles the model (--compile wants 1)" in short.err
    graphs = cli(
        "profile", "--arch", "resnet50", "--gpu", "a100", "--compile", "max-autotune", "--warmup", "1", "--dry-run"
    )
    assert "--warmup 1: the measured step records its CUDA graphs (--compile wants 2)" in graphs.err
    # step 2 records (collect/graph_capture_steps.py), so the measured step after two warm-up steps replays
    two = cli(
        "profile", "--arch", "resnet50", "--gpu", "a100", "--compile", "reduce-overhead", "--warmup", "2", "--dry-run"
    )
    assert two.code == 0 and "warning" not in two.err


def test_a_compile_log_that_cannot_be_read_leaves_the_compiled_region_with_one_warning(
    mlp_runs: Path, tmp_path: Path
) -> None:
    """What profile --compile does where its compile log places nothing: no graphs, one warning line; the
    import then keeps the compiled region's label. The log: the compiled profile's own, its provenance handles
    taken out (a PyTorch that writes none), and an empty folder (a compilation that logged nothing)."""
    from hroofline.collect.compile_log import read_compile_log

    log = next((mlp_runs.parent / "compiled" / "compile-log").glob("*.log"))
    assert read_compile_log(log.parent)[0]  # as written, it places the GEMMs (the tests above)
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    lines = log.read_text().splitlines(keepends=True)
    (stripped / log.name).write_text("".join(line for line in lines if "[Provenance debug handles]" not in line))
    graphs, warnings = read_compile_log(stripped)
    assert graphs is None and len(warnings) == 1
    assert warnings[0].startswith("--compile: the compile log is not readable (")
    assert "INDUCTOR_PROVENANCE=1" in warnings[0] and warnings[0].endswith(
        "the compiled kernels keep the layer <compiled>"
    )
    (tmp_path / "empty").mkdir()
    graphs, warnings = read_compile_log(tmp_path / "empty")
    assert graphs is None and "no TORCH_TRACE log entries" in warnings[0] and len(warnings) == 1
