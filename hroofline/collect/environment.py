"""What a profile records of the code and the machine it measured (the keys: :mod:`hroofline.model.environment`):
the git commit of the profiled code, PyTorch's and CUDA's versions, the NVIDIA driver, and for a trace on a GPU that
its clocks were not locked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hroofline.model.environment import (
    CLOCK_CONTROL,
    CUDA_VERSION,
    DRIVER_VERSION,
    GIT_COMMIT,
    GIT_DIRTY,
    TORCH_VERSION,
)

GIT_TIMEOUT_S = 10.0
_DRIVER_RELEASE = re.compile(r"Kernel Module(?: for [\w-]+)?\s+(\d+\.\d+(?:\.\d+)?)")
NVIDIA_VERSION_FILE = Path("/proc/driver/nvidia/version")


def code_version(code: Path | None, why_none: str) -> dict[str, str]:
    """The commit of the git repository that holds file ``code``, and whether its tracked files differ from it
    (``git_dirty``: true or false); ``git_commit`` says ``none (why)`` where there is no such file (``why_none``),
    repository or git."""
    if code is None:
        return {GIT_COMMIT: f"none ({why_none})"}
    folder = code.resolve().parent
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return {GIT_COMMIT: f"none ({code} is not in a git repository with a commit, or git is not installed)"}
    changes = _git(folder, "status", "--porcelain", "--untracked-files=no")
    recorded = {GIT_COMMIT: commit}
    if changes is not None:
        recorded[GIT_DIRTY] = "true" if changes else "false"
    return recorded


def _git(folder: Path, *arguments: str) -> str | None:
    """git's output in ``folder``, stripped; None where git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *arguments], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def software_versions(on_gpu: bool) -> dict[str, str]:
    """PyTorch's version and, on a GPU, the CUDA it was built with and the NVIDIA driver's release, where known."""
    import torch

    versions = {TORCH_VERSION: str(torch.__version__)}
    if on_gpu and torch.version.cuda:
        versions[CUDA_VERSION] = str(torch.version.cuda)
    driver = driver_release() if on_gpu else None
    if driver:
        versions[DRIVER_VERSION] = driver
    return versions


def driver_release(version_file: Path = NVIDIA_VERSION_FILE) -> str | None:
    """The NVIDIA driver's release (580.159.04): the kernel module's version file, else nvidia-smi; None where
    neither says."""
    try:
        found = _DRIVER_RELEASE.search(version_file.read_text())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    return lines[0] if done.returncode == 0 and lines else None


def profile_environment(code: Path | None, why_none: str, on_gpu: bool, settings: dict[str, str]) -> dict[str, str]:
    """Everything a profile records besides how it collected (``settings``, the source's): the code's commit, the
    versions, and on a GPU without ncu's clock control recorded (a trace), ``clock_control: none``."""
    recorded = {**code_version(code, why_none), **software_versions(on_gpu)}
    if on_gpu and CLOCK_CONTROL not in settings:
        recorded[CLOCK_CONTROL] = "none"  # torch.profiler leaves the clocks to the GPU's boost
    return recorded
