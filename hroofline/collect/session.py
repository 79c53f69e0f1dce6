"""Marking your own training script: ``phase``, ``annotate`` and ``profiled_step``.

A script marks its step with these; what they do depends on who runs it:

- under ``hroofline profile --script`` on a GPU (ncu runs the script with ``HROOFLINE_COLLECT=ncu``):
  ``phase`` opens a process-wide NVTX start/end range in the ``hroofline`` domain, ``annotate`` adds one
  per module (named by its path, in backward too), ``profiled_step`` calls cudaProfilerStart/Stop so that
  ncu (``--profile-from-start off``) profiles only those steps;
- under ``hroofline profile --script --gpu cpu`` (the script runs in hroofline's process): every ATen op
  of the collected steps is recorded with its phase and layer;
- otherwise (the script run as usual) they do nothing, at the cost of a function call.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from hroofline.errors import UsageError
from hroofline.model.phases import canonical_phase

COLLECT_ENV = "HROOFLINE_COLLECT"  # set to "ncu" in the command ncu runs
LAYERS_ENV = "HROOFLINE_LAYERS"  # "0": no module ranges
WARMUP_ENV = "HROOFLINE_WARMUP"  # profiled_step entries left out first
STEPS_ENV = "HROOFLINE_STEPS"  # profiled_step entries collected after them


class Session:
    """What marks feed while a script is collected: phase listeners, the module tracker, and what
    ``profiled_step`` turns on and off."""

    def __init__(self, mode: str, layers: bool = True, warmup: int = 1, steps: int = 1) -> None:
        from hroofline.collect.module_tracking import LayerTracker

        self.mode = mode  # "ncu" or "cpu"
        self.warmup = warmup
        self.wanted = steps
        self.tracker: Any = LayerTracker() if layers else None
        self.phase_listeners: list[Any] = []
        self.recorder: Any = None
        self.steps = 0
        if mode == "ncu":
            from hroofline.collect.workload import NvtxLayerRanges, NvtxListener

            self.phase_listeners.append(NvtxListener())
            if self.tracker is not None:
                self.tracker.listeners.append(NvtxLayerRanges())
        if self.tracker is not None:
            self.phase_listeners.append(self.tracker.phase_changed)

    def enter_phase(self, name: str, entering: bool) -> None:
        for listener in self.phase_listeners if entering else reversed(self.phase_listeners):
            listener(name, entering)

    @property
    def collected(self) -> int:
        """Steps collected so far."""
        return max(0, min(self.steps - self.warmup, self.wanted))

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        import torch

        index = self.steps
        self.steps += 1
        if not self.warmup <= index < self.warmup + self.wanted:
            yield
            return
        if self.mode == "cpu" and self.recorder is not None:  # the CPU recorder numbers its ops' steps
            self.recorder.step = index - self.warmup
        cuda = self.mode == "ncu" and torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        try:
            with contextlib.ExitStack() as active:
                for context in (self.tracker, self.recorder):
                    if context is not None:
                        active.enter_context(context)
                yield
            if cuda:
                torch.cuda.synchronize()
        finally:
            if cuda:
                torch.cuda.profiler.stop()


_active: list[Session] = []


def active_session() -> Session | None:
    """The session collecting this process: one hroofline started, or one the environment asks for."""
    if not _active and os.environ.get(COLLECT_ENV) == "ncu":
        warmup, steps = int(os.environ.get(WARMUP_ENV, "1")), int(os.environ.get(STEPS_ENV, "1"))
        _active.append(Session("ncu", os.environ.get(LAYERS_ENV, "1") != "0", warmup, steps))
    return _active[0] if _active else None


@contextlib.contextmanager
def collecting(session: Session) -> Iterator[Session]:
    """Makes ``session`` the one the marks feed (hroofline's CPU recorder running a script)."""
    _active.insert(0, session)
    try:
        yield session
    finally:
        _active.remove(session)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Marks a phase of the step: ``forward`` (model and loss), ``backward`` or ``optimizer`` (aliases:
    fw, bw, opt, step, ...)::

        with hroofline.phase("forward"):
            loss = loss_fn(model(x), y)
    """
    canonical = canonical_phase(name)
    if canonical is None or canonical == "other":
        raise UsageError(f"unknown phase {name!r}", "use forward, backward or optimizer")
    session = active_session()
    if session is None:
        yield
        return
    session.enter_phase(canonical, True)
    try:
        yield
    finally:
        session.enter_phase(canonical, False)


def annotate(model: Any, enabled: bool = True) -> Any:
    """Names the layers of ``model`` by their module path (``layer4.1.conv2``) in what is collected,
    forward and backward; returns the model. ``enabled=False`` leaves module ranges out."""
    session = active_session()
    if session is not None and session.tracker is not None and enabled:
        session.tracker.add_root(model)
    return model


@contextlib.contextmanager
def profiled_step() -> Iterator[None]:
    """Wraps one training step; ``hroofline profile`` collects the steps after ``--warmup`` of them (1),
    ``--steps`` of them (1); run otherwise it does nothing::

        for images, labels in batches:
            with hroofline.profiled_step():
                train_step(images, labels)
    """
    session = active_session()
    if session is None:
        yield
        return
    with session.step():
        yield
