"""The steps a process traced on the meta device for its predictions, the last few kept: a notebook that predicts
one model on several GPUs traces it once (a ResNet-50 training step is about a second or more of tracing here).

A kept step is shared by every prediction that asks for it, as a sweep's ``traces`` always shared one: its users
read it and never change it (``predicted_ops`` and ``with_estimate`` copy the ops before they add columns, and a
prediction's source gets a list of its own of the frozen ``PhaseMemory`` records)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from hroofline.collect.meta_trace import StepTrace
from hroofline.collect.workload import WorkloadConfig

RECENT_STEPS_KEPT = 16  # a few models at a few batch sizes and precisions
# Model specs whose step is the same each time in one process: torchvision's models and the built-in transformers
# configs. A FILE.py or PKG.MODULE factory may be edited between two predictions, and an nn.Module handed to the
# API is registered as a new spec each time: those are traced again.
FIXED_MODEL_KINDS = frozenset({"torchvision", "hf"})

StepKey = tuple[WorkloadConfig, str]  # the configuration and the phases traced ("train" or "forward")


class RecentSteps:
    """The last ``size`` steps kept by :func:`keeps`, by (configuration, phases); the least recently used goes
    first. Safe to share between threads (a notebook's predictions run in threads of their own)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._steps: OrderedDict[StepKey, StepTrace] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: StepKey) -> StepTrace | None:
        with self._lock:
            step = self._steps.get(key)
            if step is not None:
                self._steps.move_to_end(key)
            return step

    def keep(self, key: StepKey, step: StepTrace) -> None:
        with self._lock:
            self._steps[key] = step
            self._steps.move_to_end(key)
            while len(self._steps) > self.size:
                self._steps.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()

    def __len__(self) -> int:
        return len(self._steps)


def keeps(config: WorkloadConfig) -> bool:
    """Whether a step of ``config`` may be reused (:data:`FIXED_MODEL_KINDS`): only under PyTorch's default
    float32 default dtype, which the key leaves out (torch.set_default_dtype changes the model built)."""
    import torch

    return config.model.kind in FIXED_MODEL_KINDS and torch.get_default_dtype() == torch.float32


RECENT_STEPS = RecentSteps(RECENT_STEPS_KEPT)
