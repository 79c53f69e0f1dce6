"""Checks before profiling on a GPU, and the meaning of ncu's failures, each as one clear line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hroofline.errors import ProfilingError
from hroofline.roofs.catalog import GpuName, gpu_from_display_name

NCU_DOWNLOAD = "https://developer.nvidia.com/nsight-compute"
# The newest ncu that still profiles each architecture (later releases dropped it).
LAST_NCU_FOR: dict[str, tuple[int, int]] = {"volta": (2024, 1)}
PERMISSION_HINT = (
    "ncu needs access to the GPU performance counters: run it as root (sudo), or let every user profile "
    "with `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/ and a reboot; see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


@dataclass(frozen=True)
class NcuTool:
    path: str
    version: tuple[int, int] | None
    version_text: str


def find_ncu(explicit: str | None = None) -> str | None:
    return shutil.which(explicit or "ncu")


def ncu_version(path: str) -> NcuTool:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as error:
        raise ProfilingError(f"cannot run {path}: {error}") from error
    text = done.stdout + done.stderr
    found = re.search(r"Version (\d{4})\.(\d+)", text)
    version = (int(found.group(1)), int(found.group(2))) if found else None
    line = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("Version")), text.strip()[:80])
    return NcuTool(path=path, version=version, version_text=line)


def check_ncu_supports(tool: NcuTool, arch: str) -> None:
    last = LAST_NCU_FOR.get(arch)
    if last and tool.version and tool.version > last:
        raise ProfilingError(
            f"{tool.path} is ncu {tool.version[0]}.{tool.version[1]}, which no longer supports {arch} GPUs",
            f"use ncu {last[0]}.{last[1]} or older (pass --ncu PATH, e.g. from CUDA 12.4)",
        )


def counters_denied() -> bool:
    """Whether the NVIDIA driver keeps the performance counters for administrators (RmProfilingAdminOnly: 1)
    and this process is not one: ncu would fail with ERR_NVGPUCTRPERM."""
    try:
        params = Path("/proc/driver/nvidia/params").read_text()
    except OSError:
        return False
    admin_only = any(line.replace(" ", "") == "RmProfilingAdminOnly:1" for line in params.splitlines())
    return admin_only and os.geteuid() != 0


def gpu_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def visible_device() -> tuple[str, int]:
    """The name and SM count of the GPU the workload will run on (device 0)."""
    import torch

    properties = torch.cuda.get_device_properties(0)
    return str(properties.name), int(properties.multi_processor_count)


def check_device_is(gpu: GpuName, name: str, sms: int) -> None:
    """The GPU here must be the one named: its roofs and rates are that GPU's. The SM count alone does not
    tell an H200 from an H100 SXM (132 each): a display name the catalog knows as another GPU is refused too."""
    here = gpu_from_display_name(name)
    if here is not None and here.name != gpu.name:
        raise ProfilingError(
            f"this machine's GPU is {name} ({here.name} in the catalog), not {gpu.name}",
            f"pass --gpu {here.name} (or --force-gpu to judge it as {gpu.name} anyway)",
        )
    if gpu.sms is None or sms == gpu.sms:
        return
    raise ProfilingError(
        f"this machine's GPU is {name} with {sms} SMs, not {gpu.name} ({gpu.sms} SMs)",
        f"pass --gpu {here.name}"
        if here is not None
        else "the catalog does not know it (a MIG slice, another part): add --force-gpu to profile it as "
        f"{gpu.name}'s architecture, its roofs from its own reports",
    )


def preflight(ncu_option: str | None, arch: str, gpu: GpuName, force_gpu: bool = False) -> NcuTool:
    """ncu found and new enough, a GPU visible and the one named: else one line naming what is wrong."""
    missing = []
    ncu = find_ncu(ncu_option)
    if ncu is None:
        where = ncu_option or "ncu"
        missing.append(f"{where} is not on PATH (install Nsight Compute: {NCU_DOWNLOAD})")
    if not gpu_visible():
        missing.append("PyTorch sees no NVIDIA GPU")
    if missing:
        raise ProfilingError(
            f"cannot profile on {gpu.name} here: " + "; ".join(missing),
            "instead: profile this machine's CPU with GPU=cpu (hroofline profile --gpu cpu), or predict the cost "
            f"on the GPU with hroofline predict --gpu {gpu.name}",
        )
    assert ncu is not None
    if not force_gpu:
        check_device_is(gpu, *visible_device())
    tool = ncu_version(ncu)
    check_ncu_supports(tool, arch)
    return tool


def explain_ncu_failure(output: str, returncode: int, log: str) -> ProfilingError | None:
    """The error an ncu run's output shows, if any (None: it looks fine)."""
    if "ERR_NVGPUCTRPERM" in output:
        return ProfilingError("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)", PERMISSION_HINT)
    if "No kernels were profiled" in output:
        return ProfilingError(
            "ncu profiled no kernel",
            f"the NVTX filter matched nothing or the workload stopped before its profiled steps; see {log}",
        )
    if "PyTorch sees no CUDA GPU" in output:
        return ProfilingError("the workload found no CUDA GPU under ncu", f"see {log}")
    if returncode != 0:
        lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("==PROF==")]
        last = lines[-1] if lines else "no output"
        return ProfilingError(f"ncu exited with status {returncode}: {last}", f"see {log}")
    return None
