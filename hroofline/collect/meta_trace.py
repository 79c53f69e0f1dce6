"""Tracing a training step on PyTorch's meta device: every op with its shapes, no memory, no arithmetic.

The same workload and op recorder as the CPU backend; on meta tensors the recorder's timings mean
nothing, its FLOPs and bytes are exact. Used by ``hroofline predict``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from hroofline.collect.memory_tracking import PhaseMemory
from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig
from hroofline.work.fused_attention import fused_attention
from hroofline.work.fused_dropout import fused_dropout
from hroofline.work.ops import OpRecorder, records_to_launches

PHASE_CHOICES = ("forward", "train")


@dataclass(frozen=True)
class StepTrace:
    """A traced step: one row per op (FLOPs per precision, fewest bytes as ``bytes_hbm``) and its memory."""

    launches: pd.DataFrame
    memory: list[PhaseMemory]


def trace_step(config: WorkloadConfig, phases: str = "train") -> pd.DataFrame:
    """The ops of one forward pass, or of one steady-state training step (the optimizer's state, such as
    momentum, made beforehand), with FLOPs per precision and fewest bytes (``bytes_hbm``)."""
    return trace_step_memory(config, phases).launches


def trace_step_memory(config: WorkloadConfig, phases: str = "train") -> StepTrace:
    """:func:`trace_step` with each phase's memory: a forward pass is traced in training mode with
    gradients on (what it holds for backward is what a training step holds), unless ``phases`` is
    "forward", which is inference: eval mode, no gradients, no loss (:meth:`TrainingStep.infer`)."""

    tracker = LayerTracker()
    recorder = OpRecorder(tracker)
    step = TrainingStep(replace(config, device="meta"), PhaseMarks([recorder.listen, tracker.phase_changed]), tracker)
    if phases != "forward":
        step.prime_optimizer()
    liveness = step.track_memory()
    with tracker, recorder, liveness, fused_attention(), fused_dropout():
        if phases == "forward":
            step.infer()
        else:
            step.run()
    launches = records_to_launches(recorder.records)
    launches = launches.rename(columns={"bytes_l1": "bytes_hbm"})
    return StepTrace(launches.drop(columns=["time_s", "time_method"]), liveness.phases)


def trace_identity(config: WorkloadConfig, gpu: str, phases: str) -> str:
    """A prediction's source identity: the same question to the same hroofline and torch gives the same answer
    (a sweep reuses a prediction of the store with it). A ``FILE.py:FACTORY`` model is known by its file's
    content too: an edited model is another question."""
    import torch

    import hroofline

    text = (
        f"{sorted(asdict(config).items())} {gpu} {phases} hroofline {hroofline.__version__} torch {torch.__version__}"
    )
    spec = config.model
    where = spec.name.rpartition(":")[0] if spec.kind == "python" else ""
    if where.endswith(".py") and Path(where).is_file():
        text += f" file {hashlib.sha256(Path(where).read_bytes()).hexdigest()}"
    return hashlib.sha256(text.encode()).hexdigest()
