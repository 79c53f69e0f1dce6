"""The GPU profiling path: ncu command lines per architecture, pre-flight, and the subprocess path end
to end against a stand-in ncu (tests/standin/ncu) that checks its arguments and replays real reports
from ../shared (the real binary needs a GPU)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hroofline.collect.ncu_backend import profile_with_ncu
from hroofline.collect.ncu_command import NcuSettings, ncu_passes, workload_command
from hroofline.collect.preflight import check_ncu_supports, gpu_visible, ncu_version
from hroofline.collect.workload import WorkloadConfig
from hroofline.errors import ProfilingError
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.runs import RunStore
from tests.conftest import REPO, need

STANDIN = REPO / "tests" / "standin" / "ncu"
CONFIG = WorkloadConfig("resnet34", batch_size=32, precision="amp")


def _command(gpu: str, settings: NcuSettings | None = None, out: Path = Path("out")) -> list[list[str]]:
    metric_set = load_metric_set()
    arch = metric_set.arch_of(resolve_gpu(gpu).cc)
    assert arch is not None
    settings = settings or NcuSettings()
    return [p.command for p in ncu_passes("ncu", metric_set, arch, workload_command(CONFIG, settings), settings, out)]


def _option(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, part in enumerate(command) if part == flag]


@pytest.mark.parametrize(
    ("gpu", "tensor_metric"),
    [
        ("v100", "sm__inst_executed_pipe_tensor.sum"),
        ("a100", "sm__ops_path_tensor_src_fp16.sum"),
        ("h100-sxm", "sm__ops_path_tensor_src_fp16.sum"),
    ],
)
def test_ncu_command_per_architecture(gpu: str, tensor_metric: str) -> None:
    (command,) = _command(gpu)
    assert command[0] == "ncu"
    metrics = _option(command, "--metrics")[0].split(",")
    assert tensor_metric in metrics or any(m.startswith(tensor_metric.removesuffix(".sum")) for m in metrics)
    for common in ("gpu__time_duration.sum", "dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum"):
        assert common in metrics
    if gpu == "v100":
        assert not any(m.startswith("sm__ops_path_tensor") for m in metrics)
    else:
        assert "sm__inst_executed_pipe_tensor.sum" not in metrics
    # Start/end ranges: no trailing '/', which would select push/pop ranges that miss autograd threads.
    assert _option(command, "--nvtx-include") == ["hroofline@forward", "hroofline@backward", "hroofline@optimizer"]
    assert "--nvtx" in command
    assert _option(command, "--profile-from-start") == ["off"]
    assert _option(command, "--clock-control") == ["base"] and _option(command, "--cache-control") == ["all"]
    assert _option(command, "--export") == [str(Path("out") / "profile.ncu-rep")]
    workload = command[command.index("-m") - 1 :]
    assert workload[1:3] == ["-m", "hroofline.collect.workload"]
    assert _option(workload, "--precision") == ["amp"] and _option(workload, "--arch") == ["resnet34"]


def test_group_passes_each_read_the_time_and_log_long_csv() -> None:
    commands = _command("v100", NcuSettings(passes="groups", clock_control="none", cache_control="none"))
    groups = {Path(_option(c, "--log-file")[0]).stem: _option(c, "--metrics")[0].split(",") for c in commands}
    assert set(groups) == {"time", "flops", "dram", "l2", "l1"}
    for metrics in groups.values():
        assert "gpu__time_duration.sum" in metrics
    assert all(_option(c, "--page") == ["details"] and "--csv" in c for c in commands)
    assert all(_option(c, "--clock-control") == ["none"] for c in commands)
    everything = set(_command("v100")[0][_command("v100")[0].index("--metrics") + 1].split(","))
    assert set().union(*groups.values()) == everything


def test_dry_run_prints_the_command(cli) -> None:
    """The command profiles every launch of the phases, to run elsewhere; the default (one launch per
    signature) needs a trace pass first, which the note says."""
    result = cli("profile", "--arch", "resnet34", "--gpu", "v100", "--dry-run", "--run", "r34")
    assert result.code == 0
    assert "--nvtx-include hroofline@forward" in result.out and "measure" not in result.out
    assert "one launch per signature" in result.err and "trace pass" in result.err
    assert "hroofline-profiles/r34/profile.ncu-rep" in result.out
    assert "hroofline.collect.workload --arch resnet34" in result.out
    every = cli("profile", "--arch", "resnet34", "--gpu", "v100", "--dry-run", "--run", "r34", "--every-launch")
    assert every.code == 0 and every.out == result.out and "trace pass" not in every.err


def test_the_ncu_command_of_a_distinct_launch_pass() -> None:
    (command,) = _command("h100-sxm", NcuSettings(distinct=True))
    assert _option(command, "--nvtx-include") == ["hroofline@measure/"]
    assert NcuSettings(distinct=True).recorded()["launches"] == "one per signature, the rest copied"
    assert "launches" not in NcuSettings(kernel_filter=("--kernel-name", "x")).recorded()


@pytest.fixture
def standin_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH whose ncu is the stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").symlink_to(STANDIN)  # resolves to the repository, whose metric lists it checks
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir / "ncu"


def _passes(ncu: Path, tmp_path: Path, settings: NcuSettings, gpu: str = "v100") -> list:
    metric_set = load_metric_set()
    arch = metric_set.arch_of(resolve_gpu(gpu).cc)
    assert arch is not None
    return ncu_passes(str(ncu), metric_set, arch, workload_command(CONFIG, settings), settings, tmp_path / "prof")


def test_one_pass_end_to_end(
    standin_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ncu_dir: Path
) -> None:
    report = need(ncu_dir / "v100_gene_dgdxy_time_dram_nvtx.ncu-rep")
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(report))
    settings = NcuSettings(clock_control="base", cache_control="all")
    messages: list[str] = []
    source = profile_with_ncu(
        _passes(standin_path, tmp_path, settings), settings, load_metric_set(), resolve_gpu("v100"), messages.append
    )
    assert source.info.kind == "ncu-rep"
    assert source.info.settings["clock_control"] == "base" and source.info.settings["cache_control"] == "all"
    assert len(source.launches) > 0 and source.launches["time_s"].gt(0).all()
    assert any("done, 3 launches profiled" in m for m in messages)
    assert (tmp_path / "prof" / "logs" / "all-metrics.log").read_text().startswith("$ ")
    store = RunStore(tmp_path / "store")
    result = store.add_sources("r", [source], gpu="v100-sxm2", precision="amp")
    assert result.run.meta.sources[0].settings["passes"] == "one"
    again = store.load("r")
    assert again.meta.sources[0].settings["profiled_steps"] == "1"


def test_group_passes_are_merged_launch_by_launch(
    standin_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ncu_dir: Path
) -> None:
    """Two real logs of the same application, one per metric group: the merged run has both groups' data."""
    time_dram = need(ncu_dir / "v100_gene_dgdxy_time_dram.csv")
    flops = need(ncu_dir / "v100_gene_dgdxy_dpflops.csv")
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(time_dram))
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORTS", json.dumps({"flops": str(flops)}))
    settings = NcuSettings(passes="groups")
    source = profile_with_ncu(
        _passes(standin_path, tmp_path, settings), settings, load_metric_set(), resolve_gpu("v100"), lambda _: None
    )
    assert source.info.kind == "ncu-metric-logs"
    assert len(source.info.files) == 5
    assert source.launches["time_s"].gt(0).all()
    assert source.launches["flops_fp64"].gt(0).any() and source.launches["bytes_hbm"].gt(0).all()


def test_group_passes_of_a_real_h100_run(standin_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ncu --csv --log-file writes no 'Profiling' line per kernel: the time pass of the H100 GEMM calibration
    (10 kernels, ncu 2025.3.1, NVTX start/end ranges <outside> and forward) once said 'ncu profiled no kernel'.
    The stand-in replays that log as ncu wrote it, for every group."""
    log = need(REPO.parent / "shared" / "fixtures" / "h100" / "gemm-calibration-groups-time-pass.csv")
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(log))
    settings = NcuSettings(passes="groups")
    said: list[str] = []
    passes = _passes(standin_path, tmp_path, settings, "h100-sxm")
    source = profile_with_ncu(passes, settings, load_metric_set(), resolve_gpu("h100"), said.append)
    assert len(source.launches) == 10 and set(source.launches["phase"]) == {"forward"}
    assert source.launches["time_s"].between(1.5e-3, 3.3e-3).all()
    assert "  time: done, 10 launches profiled" in said


def test_progress_says_launches_done_to_go_and_time_left() -> None:
    from hroofline.collect.ncu_backend import progress_line

    assert progress_line("all metrics", 1, 170, 0.0) == "  all metrics: 1 of 170 launches profiled, 169 to go"
    # 50 launches in 14.7 s after the first: 0.3 s each, 120 to go
    assert progress_line("all metrics", 51, 171, 15.0) == (
        "  all metrics: 51 of 171 launches profiled, 120 to go, about 36 s left"
    )
    assert progress_line("all metrics", 11, 1118, 30.0).endswith("1,107 to go, about 55 min left")
    assert progress_line("all metrics", 170, 170, 50.0) == "  all metrics: 170 of 170 launches profiled, 0 to go"
    assert progress_line("all metrics", 7, None, 3.0) == "  all metrics: 7 launches profiled"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("perm", "ERR_NVGPUCTRPERM"),
        ("nokernels", "ncu profiled no kernel"),
        ("crash", "ncu exited with status 1: Traceback (most recent call last): RuntimeError: CUDA error"),
    ],
)
@pytest.mark.parametrize("passes", ["one", "groups"])
def test_ncu_failures_are_explained(
    standin_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, message: str, passes: str
) -> None:
    monkeypatch.setenv("HROOFLINE_STANDIN_MODE", mode)
    settings = NcuSettings(passes=passes)
    with pytest.raises(ProfilingError) as caught:
        profile_with_ncu(
            _passes(standin_path, tmp_path, settings), settings, load_metric_set(), resolve_gpu("v100"), lambda _: None
        )
    assert message in caught.value.one_line()
    assert "\n" not in caught.value.one_line()
    if mode == "perm":
        assert "NVreg_RestrictProfilingToAdminUsers=0" in caught.value.one_line()


def test_ncu_too_new_for_volta(standin_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = ncu_version(str(standin_path))
    assert tool.version == (2024, 1)
    check_ncu_supports(tool, "volta")  # 2024.1 still profiles Volta
    monkeypatch.setenv("HROOFLINE_STANDIN_VERSION", "2025.3.0.0")
    newer = ncu_version(str(standin_path))
    with pytest.raises(ProfilingError, match="no longer supports volta"):
        check_ncu_supports(newer, "volta")
    check_ncu_supports(newer, "hopper")


NO_GPU = pytest.mark.skipif(gpu_visible(), reason="describes a machine without an NVIDIA GPU")


@NO_GPU
def test_profile_on_a_gpu_here_names_what_is_missing(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu anywhere
    result = cli("profile", "--arch", "resnet34", "--gpu", "v100", "--store", str(tmp_path / "store"))
    assert result.code == 1
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "ncu is not on PATH" in result.err and "PyTorch sees no NVIDIA GPU" in result.err
    assert "GPU=cpu" in result.err
    assert not (tmp_path / "store").exists()


@NO_GPU
def test_with_ncu_but_no_gpu_only_the_gpu_is_missing(cli, standin_path: Path, tmp_path: Path) -> None:
    result = cli("profile", "--arch", "resnet34", "--gpu", "a100", "--store", str(tmp_path / "store"))
    assert result.code == 1
    assert "PyTorch sees no NVIDIA GPU" in result.err and "not on PATH" not in result.err
