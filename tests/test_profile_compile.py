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


def _gemm_flops_by_hand() -> dict[str, int]:
    """A linear layer of K inputs and N outputs on M samples: 2 M N K FLOPs forward; backward, the weight gradient
    (2 M N K) and, for the second layer only (the batch needs no gradient), the input gradient (2 M N K)."""
    first, second = 2 * BATCH * IN * HIDDEN, 2 * BATCH * HIDDEN * OUT
    return {"forward": first + second, "backward": first + 2 * second}


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP's step traced eager (--backend trace) and compiled (--compile: a trace on the CPU), one store."""
    from hroofline.cli.main import main

    folder = tmp_path_factory.mktemp("compiled")
    (folder / "mlp.py").write_text(MLP)
    ceilings = folder / "ceilings.toml"
    ceilings.write_text('name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\n')
    common = ["profile", "--model", f"{folder / 'mlp.py'}:build", "--input-shape", "3,4,4", "--batch-size", "4"]
    common += ["--gpu", "cpu", "--ceilings", str(ceilings), "--store", str(folder / "store")]
    assert main([*common, "--backend", "trace", "--out-dir", str(folder / "eager")]) == 0
    assert main([*common, "--compile", "--out-dir", str(folder / "compiled")]) == 0
    return folder / "store"


def _gemm_flops(launches) -> dict[str, float]:
    columns = [c for c in launches.columns if c.startswith("flops_") and c != "flops_tensor"]
    gemms = launches[launches["work_op"].isin(GEMMS)]
    return {phase: float(rows[columns].sum().sum()) for phase, rows in gemms.groupby("phase", observed=True)}


def test_a_compiled_cpu_step_has_the_eager_steps_gemm_flops_and_says_it_was_compiled(cli, mlp_runs: Path) -> None:
    store = RunStore(mlp_runs)
    eager, compiled = store.load(EAGER), store.load(COMPILED)
    by_hand = _gemm_flops_by_hand()  # forward 29,696, backward 34,816
    assert _gemm_flops(eager.launches) == pytest.approx(by_hand, rel=1e-12)
    assert _gemm_flops(compiled.launches) == pytest.approx(by_hand, rel=1e-12)
    # Inductor's C++ code calls the GEMMs with out= inside the compiled region; the loss and optimizer stay eager
    gemms = compiled.launches[compiled.launches["work_op"].isin(GEMMS)]
    assert set(gemms["layer"]) == {"<compiled>"}
    assert {"<loss>", "<optimizer>"} <= set(compiled.launches["layer"].astype(str))
    settings = compiled.meta.sources[0].settings
    assert settings["compile"] == "default" and settings["warmup_steps"] == "3"  # compilation outside the step
    assert compiled.meta.compile_mode == "default" and eager.meta.compile_mode is None
    # compiled in the warm-up, not in the measured step: one compiled frame, compiled once. Dynamo guards on the
    # layer tracker's global hooks by their ids, and a tracker entered anew for the measured step recompiled there.
    events = json.loads((mlp_runs.parent / "compiled" / "trace.json").read_text())["traceEvents"]
    names = {str(event.get("name", "")) for event in events}
    assert not any(name.startswith("compile_attempt") for name in names)
    assert {name for name in names if name.startswith("Torch-Compiled Region")} == {"Torch-Compiled Region: 0/0"}
    assert "compile" not in eager.meta.sources[0].settings
    runs = {row["run"]: row for row in json.loads(cli("runs", "--format", "json", "--store", mlp_runs).out)}
    assert runs[COMPILED]["compile"] == "default" and runs[EAGER]["compile"] is None
    assert " compile " in cli("runs", "--store", mlp_runs).out.splitlines()[0]
    summary = cli("summary", COMPILED, "--store", mlp_runs)
    assert "note: the model ran torch.compile'd (mode default)" in summary.err
    assert json.loads(cli("summary", COMPILED, "--format", "json", "--store", mlp_runs).out)["compile"] == "default"


def test_compare_matches_the_compiled_region_with_the_modules_it_replaced(cli, mlp_runs: Path) -> None:
    """The eager run's module paths (0-3) against the compiled run's <compiled>: one model, layer to layer, with
    each phase's launches, bytes and time."""
    store = RunStore(mlp_runs)
    eager, compiled = store.load(EAGER).launches, store.load(COMPILED).launches
    data = json.loads(cli("compare", EAGER, COMPILED, "--format", "json", "--store", mlp_runs).out)
    assert data["matched_on"] == "layer" and data["compiled"] == {"candidate": "default"}
    assert data["bytes_level"] == "l1"  # the CPU's runs count bytes at L1 only
    region = {(row["phase"], row["family"]): row for row in data["families"]}
    for phase in ("forward", "backward"):
        row = region[(phase, "<compiled>")]
        assert row["status"] == "matched"
        modules = eager[(eager["phase"] == phase) & eager["layer"].astype(str).isin(["0", "1", "2", "3"])]
        assert row["base_kernels"] == int(modules["launches"].sum()) and row["base_time_s"] == pytest.approx(
            float(modules["time_s"].sum())
        )
        inside = compiled[(compiled["phase"] == phase) & (compiled["layer"] == "<compiled>")]
        assert row["candidate_kernels"] == int(inside["launches"].sum())
    total = data["phases"]["total"]
    assert total["base_kernels"] == int(eager["launches"].sum())
    assert total["candidate_kernels"] == int(compiled["launches"].sum())
    assert total["candidate_kernels"] < total["base_kernels"]  # fused: measured 92 against 135
    text = cli("compare", EAGER, COMPILED, "--store", mlp_runs)
    assert text.code == 0, text.err
    assert f"torch.compile'd: {COMPILED} (mode default): launches, bytes and time" in text.out
    assert "base L1 bytes" in text.out and "bytes saved" in text.out
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
    assert "--warmup 1: the measured step records its CUDA graphs (--compile wants 3)" in graphs.err
