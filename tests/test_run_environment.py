"""What a run records to be reproduced in CI (issue 44, point 3) and compare's warnings where base and candidate were
measured differently: GPU, driver, clock control, PyTorch version; none where they match, none from what a run does
not record (a store written before these were recorded).

Real data: torch.profiler traces of one VGG-16 FP32 batch-32 training step on an H200 (twice) and an H100, recorded
with hroofline (tests/data/gpu-2026-11-27/README.md: driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130 on both).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from argparse import Namespace
from pathlib import Path

import pytest

from hroofline.cli.profile_common import profiled_code
from hroofline.collect.environment import code_version, driver_release, profile_environment
from hroofline.model.environment import Difference, environment_differences
from hroofline.model.run import RunMeta, SourceInfo
from tests.conftest import REPO, VGG_TRACES
from tests.test_baseline import hroofline

WARNING = "hroofline: warning: base and candidate differ in"


def meta(gpu: str | None = "h100-sxm", **settings: str) -> RunMeta:
    source = SourceInfo(path="step.ncu-rep", kind="ncu-rep", source_hash="0" * 64, launches=1, settings=dict(settings))
    return RunMeta(name="r", gpu=gpu, sources=[source])


SAME = {"driver_version": "580.159.04", "clock_control": "base", "torch_version": "2.11.0+cu130"}


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"gpu": "h200"}, Difference("GPU", "h100-sxm", "h200")),
        ({"driver_version": "575.57.08"}, Difference("driver", "580.159.04", "575.57.08")),
        ({"clock_control": "none"}, Difference("clock control", "base", "none")),
        ({"torch_version": "2.10.0+cu128"}, Difference("PyTorch", "2.11.0+cu130", "2.10.0+cu128")),
    ],
)
def test_each_difference_is_found_alone(changed: dict[str, str], expected: Difference) -> None:
    settings = {**SAME, **{k: v for k, v in changed.items() if k != "gpu"}}
    candidate = meta(changed.get("gpu", "h100-sxm"), **settings)
    assert environment_differences(meta(**SAME), candidate) == [expected]


def test_runs_that_match_or_do_not_record_differ_in_nothing() -> None:
    assert environment_differences(meta(**SAME), meta(**SAME)) == []
    # an old run records none of it: nothing can be told, nothing is said (the GPU both name is the same)
    assert environment_differences(meta(**SAME), meta()) == []
    # a driver release against a trace's CUDA driver version: not the same fact, not compared
    assert environment_differences(meta(**SAME), meta(cuda_driver_version="13.0")) == []
    # a joined trace+ncu run's clock control is ncu's where the trace recorded none
    assert environment_differences(meta(clock_control="base"), meta(ncu_clock_control="none")) == [
        Difference("clock control", "base", "none")
    ]


def test_compare_warns_of_another_gpu_in_one_line_and_not_for_the_same_gpu(
    vgg_traces_store: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = hroofline(
        capsys, "compare", "vgg-h200", "vgg-h100", "--format", "csv", "--store", vgg_traces_store
    )
    warnings = [line for line in err.splitlines() if line.startswith(WARNING)]
    assert (
        code == 0
        and out
        and warnings
        == [
            f"{WARNING} GPU (device name): NVIDIA H200 (vgg-h200) against NVIDIA H100 80GB HBM3 (vgg-h100); the "
            "comparison is not of the code alone"
        ]
    )
    code, out, err = hroofline(
        capsys, "compare", "vgg-h200", "vgg-h200-again", "--format", "csv", "--store", vgg_traces_store
    )
    assert code == 0 and out and WARNING not in err


def test_compare_warns_of_another_pytorch_a_run_records(
    vgg_traces_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same GPU, but the candidate recorded (as `profile` records) another PyTorch than the base."""
    store = tmp_path / "store"
    shutil.copytree(vgg_traces_store, store)
    for run, version in (("vgg-h200", "2.11.0+cu130"), ("vgg-h200-again", "2.12.0+cu130")):
        path = store / "runs" / f"run={run}" / "meta.json"
        data = json.loads(path.read_text())
        data["sources"][0]["settings"]["torch_version"] = version
        path.write_text(json.dumps(data))
    code, _, err = hroofline(capsys, "compare", "vgg-h200", "vgg-h200-again", "--format", "csv", "--store", store)
    assert code == 0 and [line for line in err.splitlines() if line.startswith(WARNING)] == [
        f"{WARNING} PyTorch: 2.11.0+cu130 (vgg-h200) against 2.12.0+cu130 (vgg-h200-again); the comparison is not "
        "of the code alone"
    ]


def test_an_imported_trace_keeps_its_cuda_versions_and_the_commit_it_is_given(
    vgg_traces_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the trace's top level says "cuda_driver_version": 13000, "cuda_runtime_version": 13000 (CUDA's 1000 x major +
    # 10 x minor: 13.0, as the README's CUDA 13.0)
    settings = json.loads((vgg_traces_store / "runs" / "run=vgg-h200" / "meta.json").read_text())["sources"][0][
        "settings"
    ]
    assert (settings["cuda_driver_version"], settings["cuda_runtime_version"]) == ("13.0", "13.0")
    assert "git_commit" not in settings  # an imported trace states no commit
    store = tmp_path / "store"
    code, _, _ = hroofline(
        capsys, "import", VGG_TRACES["vgg-h100"], "--run", "r", "--git-commit", "C08552C", "--store", store
    )
    recorded = json.loads((store / "runs" / "run=r" / "meta.json").read_text())["sources"][0]["settings"]
    assert code == 0 and recorded["git_commit"] == "c08552c"
    code, _, err = hroofline(
        capsys, "import", VGG_TRACES["vgg-h100"], "--run", "s", "--git-commit", "main", "--store", store
    )
    assert code == 2 and "--git-commit 'main': not a commit" in err and not (store / "runs" / "run=s").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_commit_of_the_profiled_file_and_whether_it_was_changed(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    (repository / "src").mkdir(parents=True)
    script = repository / "src" / "train.py"
    script.write_text("print('step')\n")
    commit = _committed(repository)
    assert code_version(script, "") == {"git_commit": commit, "git_dirty": "false"}
    script.write_text("print('another step')\n")
    (repository / "untracked.txt").write_text("not the code")
    assert code_version(script, "") == {"git_commit": commit, "git_dirty": "true"}
    outside = tmp_path / "alone.py"
    outside.write_text("")
    assert code_version(outside, "")["git_commit"].startswith(f"none ({outside} is not in a git repository")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_profiled_script_records_its_commit_and_pytorch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """samples/train_tiny_cnn.py (the README's script) committed in a repository of its own, profiled on the CPU."""
    import torch

    repository = tmp_path / "repo"
    repository.mkdir()
    script = repository / "train_tiny_cnn.py"
    shutil.copy(REPO / "samples" / "train_tiny_cnn.py", script)
    commit = _committed(repository)
    ceilings = tmp_path / "ceilings.toml"
    ceilings.write_text(
        'name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\nfp16 = 800e9\nfp64 = 100e9\n'
    )
    store = tmp_path / "store"
    argv = ["profile", "--gpu", "cpu", "--ceilings", ceilings, "--store", store, "--run", "tiny", "--script", script]
    code, _, err = hroofline(capsys, *argv)
    assert code == 0, err
    settings = json.loads((store / "runs" / "run=tiny" / "meta.json").read_text())["sources"][0]["settings"]
    assert (settings["git_commit"], settings["git_dirty"]) == (commit, "false")
    assert settings["torch_version"] == torch.__version__
    assert not {"clock_control", "driver_version", "cuda_version"} & set(settings)  # the CPU: none of them


def _committed(repository: Path) -> str:
    """Commits what is in ``repository`` as its first commit; the commit's hash, read from .git by hand."""
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run([*git, *command], check=True)
    head = (repository / ".git" / "HEAD").read_text().split()[-1]  # ref: refs/heads/<branch>
    return (repository / ".git" / head).read_text().strip()


def test_which_code_a_profile_versions() -> None:
    assert profiled_code(Namespace(script=["train.py", "--lr", "1"], model=None, arch=None)) == (Path("train.py"), "")
    assert profiled_code(Namespace(script=None, model="models/tiny.py:build", arch=None))[0] == Path("models/tiny.py")
    code, why = profiled_code(Namespace(script=None, model=None, arch="resnet18"))
    assert code is None and why == "--arch resnet18: torchvision's code, versioned by torchvision's version"
    assert code_version(code, why) == {"git_commit": f"none ({why})"}


def test_the_driver_release_is_read_from_the_kernel_module(tmp_path: Path) -> None:
    proprietary = tmp_path / "version"
    proprietary.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Nov 20 00:00:00 UTC 2025\n"
        "GCC version:  gcc version 12.3.0\n"
    )
    assert driver_release(proprietary) == "580.159.04"
    proprietary.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n")
    assert driver_release(proprietary) == "575.57.08"


def test_a_profile_records_pytorch_and_on_a_gpu_unlocked_clocks_unless_ncu_locked_them() -> None:
    import torch

    on_cpu = profile_environment(None, "--arch resnet18", False, {})
    assert on_cpu["torch_version"] == torch.__version__ and "clock_control" not in on_cpu
    assert "driver_version" not in on_cpu and "cuda_version" not in on_cpu
    assert profile_environment(None, "x", True, {})["clock_control"] == "none"  # a trace: torch.profiler locks none
    assert "clock_control" not in profile_environment(None, "x", True, {"clock_control": "base"})  # ncu's kept
