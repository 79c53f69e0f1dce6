"""``profile --compile MODE``: the step's model under ``torch.compile``, its modes and what each asks of a profile.

Only the model is compiled, as most training scripts do (``model = torch.compile(model)``): the loss of a
torchvision model and the optimizer stay eager. Compilation happens in the first warm-up step, and a mode that
replays CUDA graphs records them in the next ones (CUDA graph trees: one eager warm-up run at a compiled graph's
first call, a recording at its next, then replays; :mod:`hroofline.collect.graph_capture_steps` says where in
PyTorch), so the measured step is a replay after :data:`COMPILED_WARMUP` warm-up steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hroofline.errors import UsageError

COMPILE_MODES: tuple[str, ...] = ("default", "max-autotune", "reduce-overhead")
# The modes whose Inductor options turn on triton.cudagraphs (torch._inductor.list_mode_options): on a GPU their
# step replays CUDA graphs, whose kernels ncu must profile node by node.
CUDA_GRAPH_MODES: tuple[str, ...] = ("max-autotune", "reduce-overhead")
# Warm-up steps of a compiled step: compilation with the CUDA graph trees' eager warm-up run (at the compiled
# graphs' first call), their recording, a first replay (or, where guards recompiled in step 2, the recording).
COMPILED_WARMUP = 3


def check_compile_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in COMPILE_MODES:
        raise UsageError(f"unknown compile mode {mode!r}", f"use {', '.join(COMPILE_MODES)}")
    return mode


def replays_graphs(mode: str | None, on_gpu: bool) -> bool:
    """Whether a step compiled in ``mode`` replays CUDA graphs (on a GPU only: Inductor's CPU code has none)."""
    return on_gpu and mode in CUDA_GRAPH_MODES


def compiled_module(module: Any, mode: str) -> Any:
    """``torch.compile(module)`` in ``mode`` (``default``: torch.compile's own, no mode given)."""
    import torch

    return torch.compile(module, mode=None if mode == "default" else mode)


def compiled_suffix(mode: str | None) -> str:
    """What a run name adds for a compiled step: -compiled, or -compiled-MODE for a mode other than default."""
    if mode is None:
        return ""
    return "-compiled" if mode == "default" else f"-compiled-{mode}"


@contextlib.contextmanager
def tracked_throughout(tracker: Any | None, compiled: bool) -> Iterator[contextlib.AbstractContextManager[Any]]:
    """A compiled step's layer tracker entered once, around its warm-up and its measured steps; yields what the
    measured steps enter to track layers (the tracker for an eager step, nothing for a compiled one). Dynamo guards
    on the global module hooks by their handle ids, so a tracker entered anew for the measured step (new hooks, new
    ids) made it recompile the model there (``list(dict.keys(_global_forward_hooks))[0] == 1`` failed)."""
    if tracker is None or not compiled:
        yield tracker if tracker is not None else contextlib.nullcontext()
        return
    with tracker:
        yield contextlib.nullcontext()


@contextlib.contextmanager
def quiet_layers(tracker: Any | None) -> Iterator[None]:
    """No layer ranges (the tracker's listeners) while the step warms up."""
    if tracker is None:
        yield
        return
    listeners, tracker.listeners = tracker.listeners, []
    try:
        yield
    finally:
        tracker.listeners = listeners
