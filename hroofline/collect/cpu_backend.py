"""``--gpu cpu``: the workload's steps on the CPU, each ATen op a "launch" of the run."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict

from hroofline.collect.cpu_ops import TIME_METHOD, OpRecorder, records_to_launches
from hroofline.collect.measure import cpu_name
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig, warn_if_skipped
from hroofline.importers import ImportedSource
from hroofline.model import SourceInfo

FORMULAS = {
    "flops_fp64": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float64 ops",
    "flops_fp32": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float32 ops",
    "flops_fp16": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float16/bfloat16 ops",
    "bytes_l1": "fewest bytes an op must move: each distinct input read once, each output written once",
}


def profile_cpu(config: WorkloadConfig, warmup: int, steps: int, progress: Callable[[str], None]) -> ImportedSource:
    recorder = OpRecorder()
    step = TrainingStep(config, PhaseMarks([recorder.listen]))
    progress(f"{config.arch}: {warmup} warm-up step(s)")
    for _ in range(warmup):
        step.run()
    progress(f"{config.arch}: {steps} profiled step(s)")
    scale = step.loss_scale()
    with recorder:
        for _ in range(steps):
            step.run()
    warn_if_skipped(step, scale)
    launches = records_to_launches(recorder.records)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    identity = f"{asdict(config)} {stamp} {time.time_ns()}"
    info = SourceInfo(
        path=f"cpu:{config.arch}",
        kind="cpu",
        sha256=hashlib.sha256(identity.encode()).hexdigest(),
        launches=len(launches),
        formulas_used=dict(FORMULAS),
        time_methods={TIME_METHOD: len(launches)},
        settings={
            **{key: str(value) for key, value in asdict(config).items()},
            "warmup_steps": str(warmup),
            "profiled_steps": str(steps),
            "profiled_at": stamp,
        },
        notes=["bytes_l1 holds the fewest bytes each op must move (a lower bound); L2 and DRAM are not measured"],
    )
    return ImportedSource(info=info, launches=launches, cc=None, device_name=cpu_name())
