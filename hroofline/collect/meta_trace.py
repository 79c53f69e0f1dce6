"""Tracing a training step on PyTorch's meta device: every op with its shapes, no memory, no arithmetic.

The same workload and op recorder as the CPU backend; on meta tensors the recorder's timings mean
nothing, its FLOPs and bytes are exact. Used by ``hroofline predict``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, replace

import pandas as pd

from hroofline.collect.cpu_ops import OpRecorder, records_to_launches
from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig

PHASE_CHOICES = ("forward", "train")


def trace_step(config: WorkloadConfig, phases: str = "train") -> pd.DataFrame:
    """The ops of one forward pass, or of one steady-state training step (after an untraced one, so that
    optimizer state such as momentum exists), with FLOPs per precision and fewest bytes (``bytes_hbm``)."""
    import torch

    tracker = LayerTracker()
    recorder = OpRecorder(tracker)
    step = TrainingStep(replace(config, device="meta"), PhaseMarks([recorder.listen, tracker.phase_changed]), tracker)
    if phases == "forward":
        with tracker, recorder, torch.no_grad():
            step.forward()
    else:
        step.run()
        with tracker, recorder:
            step.run()
    launches = records_to_launches(recorder.records)
    launches = launches.rename(columns={"bytes_l1": "bytes_hbm"})
    return launches.drop(columns=["time_s", "time_method"])


def trace_identity(config: WorkloadConfig, gpu: str, phases: str) -> str:
    """A prediction's source identity: the same question gives the same answer."""
    text = f"{sorted(asdict(config).items())} {gpu} {phases}"
    return hashlib.sha256(text.encode()).hexdigest()
