"""Layers: the ``nn.Module`` path every op and kernel belongs to, and the labels of what belongs to none.

A layer is the module's path in the model (``layer4.1.conv2``, as in ``named_modules()``); backward work
belongs to the module whose forward created it. What runs in no module of the model gets an explicit label
(:data:`NON_MODULE_LABELS`). Where layers come from: :mod:`hroofline.collect.module_tracking` (CPU recorder,
predictor, NVTX module ranges for ncu) and the NVTX ranges of any imported report.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from hroofline.model.phases import canonical_phase

MODEL = "<model>"  # the model's own code, outside its submodules
LOSS = "<loss>"  # the loss (an nn loss module, or what the forward phase runs after the model)
AUTOGRAD = "<autograd>"  # backward outside any module, after the loss's: gradient accumulation
OPTIMIZER = "<optimizer>"  # zero_grad, the optimizer step, the gradient scaler
OUTSIDE = "<outside>"  # ops outside the model and outside the step's phases
COMPILED = "<compiled>"  # a torch.compile'd model's kernels: fused across its modules, placed on none of them
NON_MODULE_LABELS: tuple[str, ...] = (MODEL, LOSS, AUTOGRAD, OPTIMIZER, OUTSIDE, COMPILED)


def layer_name(tracked: str) -> str:
    """ModuleTracker's name -> layer: '<model>.layer4.1.conv2' -> 'layer4.1.conv2', '<loss>.x' -> '<loss>'."""
    if tracked.startswith(MODEL + "."):
        return tracked[len(MODEL) + 1 :]
    if tracked.startswith(LOSS):
        return LOSS
    return tracked


def label_outside_modules(phase: str, model_done: bool, module_seen: bool) -> str:
    """The label of an op that runs in no module, by the phase it runs in: ``model_done`` (forward) says the
    model has returned, ``module_seen`` (backward) that backward has reached a module. The loss's backward
    runs before any module's (a loss module is never entered in backward: its output is the seed)."""
    if phase == "backward":
        return AUTOGRAD if module_seen else LOSS
    if phase == "optimizer":
        return OPTIMIZER
    if phase == "forward" and model_done:
        return LOSS
    return OUTSIDE


def matches(layer: str | None, pattern: str) -> bool:
    """A layer against a glob: 'layer4*' matches layer4 and all below it; a plain name matches the layer and
    the layers below it ('layer4.1' matches 'layer4.1.conv2')."""
    if layer is None:
        return False
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(layer, pattern)
    return layer == pattern or layer.startswith(pattern + ".")


def layer_from_ranges(ranges: Sequence[str]) -> str | None:
    """The layer an NVTX range stack (outermost first) names: its innermost range below the phase that is no
    phase (hroofline's workload keeps one module range open at a time; or any range a user set, at any depth).
    Ranges around the phase (a 'train_step' range) are no layer."""
    phases = [index for index, name in enumerate(ranges) if canonical_phase(name) is not None]
    below = [name for name in (ranges[phases[0] + 1 :] if phases else ranges) if canonical_phase(name) is None]
    return below[-1] if below else None


def phase_label(phase: str) -> str:
    """The label of a kernel in no module range, in a source that has module ranges elsewhere."""
    return {"backward": AUTOGRAD, "optimizer": OPTIMIZER}.get(phase, OUTSIDE)
