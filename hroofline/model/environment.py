"""What a run records of where and from what it was measured, in its sources' settings: enough to profile the step
again (in CI, on the next commit) and to tell whether two runs are comparable at all.

The keys (each a source setting, a string; a key a run lacks was not recorded, as in runs stored before them):

- ``git_commit`` and ``git_dirty``: the commit of the repository that holds the profiled code (``profile --script
  FILE``, ``--model FILE.py:F``; ``import --git-commit``), and whether its tracked files had changes; ``git_commit``
  says ``none (why)`` where there is no such repository (``--arch``: torchvision's code, versioned by its version);
- ``torch_version``, ``cuda_version`` (the CUDA PyTorch was built with): the process that profiled the step;
- ``cuda_runtime_version``, ``cuda_driver_version``: what a PyTorch trace states (Kineto's ``cuda_runtime_version``
  and ``cuda_driver_version``, the CUDA versions, not the driver's release);
- ``driver_version``: the NVIDIA driver's release (``/proc/driver/nvidia/version``, else ``nvidia-smi``);
- ``clock_control``: ncu's ``--clock-control`` (``base``: clocks locked at base; ``none``: left to boost); a
  trace profiled on a GPU records ``none`` (torch.profiler does not lock clocks); ``ncu_clock_control`` in a trace
  joined with ncu's counters.

The GPU is the run's own (``RunMeta.gpu_name``). Nothing here is a stage: the run's metadata read, no more.
"""

from __future__ import annotations

from dataclasses import dataclass

from hroofline.model.run import RunMeta

GIT_COMMIT = "git_commit"
GIT_DIRTY = "git_dirty"
TORCH_VERSION = "torch_version"
CUDA_VERSION = "cuda_version"
CUDA_RUNTIME_VERSION = "cuda_runtime_version"
CUDA_DRIVER_VERSION = "cuda_driver_version"
DRIVER_VERSION = "driver_version"
CLOCK_CONTROL = "clock_control"
NCU_CLOCK_CONTROL = "ncu_" + CLOCK_CONTROL


@dataclass(frozen=True)
class Difference:
    """One fact two runs record differently: what it is, and each run's value."""

    what: str
    base: str
    candidate: str

    def warning(self, base_run: str, candidate_run: str) -> str:
        """What ``compare`` says of it (the CLI on stderr, the API as a Python warning)."""
        return (
            f"base and candidate differ in {self.what}: {self.base} ({base_run}) against {self.candidate} "
            f"({candidate_run}); the comparison is not of the code alone"
        )


def recorded(meta: RunMeta, *keys: str) -> str | None:
    """The first of ``keys`` that a source of the run records (sources in order), else None."""
    for key in keys:
        for source in meta.sources:
            value = source.settings.get(key)
            if value:
                return value
    return None


def _same_kind(base: tuple[str, str | None], candidate: tuple[str, str | None]) -> tuple[str, str | None, str | None]:
    """(what, base's value, candidate's value) where both runs know the fact the same way, else no values."""
    return (base[0], base[1], candidate[1]) if base[0] == candidate[0] else (base[0], None, None)


def _gpu(meta: RunMeta) -> tuple[str, str | None]:
    """The GPU as the run knows it: the catalog's name where it has one, else the device name its sources state (a
    catalog name and a device name of one GPU differ as text)."""
    return ("GPU", meta.gpu) if meta.gpu else ("GPU (device name)", meta.device_name)


def _driver(meta: RunMeta) -> tuple[str, str | None]:
    """The driver as the run knows it: its release where recorded, else the CUDA driver version a trace states."""
    release = recorded(meta, DRIVER_VERSION)
    return ("driver", release) if release else ("CUDA driver version", recorded(meta, CUDA_DRIVER_VERSION))


def environment_differences(base: RunMeta, candidate: RunMeta) -> list[Difference]:
    """Where ``base`` and ``candidate`` were measured differently in GPU, driver, clock control or PyTorch version:
    only what both runs record (a run stored before these were recorded, or a CPU run's driver, says nothing)."""
    clocks = (CLOCK_CONTROL, NCU_CLOCK_CONTROL)
    facts = [
        _same_kind(_gpu(base), _gpu(candidate)),
        _same_kind(_driver(base), _driver(candidate)),
        ("clock control", recorded(base, *clocks), recorded(candidate, *clocks)),
        ("PyTorch", recorded(base, TORCH_VERSION), recorded(candidate, TORCH_VERSION)),
    ]
    return [Difference(what, a, b) for what, a, b in facts if a and b and a != b]
