"""``profile --backend trace``: torch.profiler around the profiled steps, imported as a trace run.

The step's phases and its layers are ``record_function`` ranges (``forward``, ``backward``, ``optimizer``;
``hroofline.layer:<module path>``, one at a time, also in autograd's threads), ops are recorded with their
shapes (``record_shapes``), and each profiled step is a ``ProfilerStep#N``. On a GPU the trace's kernels are
the launches; on the CPU (no kernels) every op is, with its self time (its duration less its child ops').
Either way the work is the analytic work of the ops' recorded shapes, as for any imported
trace (:mod:`hroofline.importers.trace_source`), and the trace file is kept beside the run's other outputs. A
compiled step that replays CUDA graphs (on a GPU) has the warm-up steps that record them traced too, and is
imported joined with that trace (:mod:`hroofline.collect.graph_capture_steps`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from hroofline.collect.compile_log import COMPILE_LOG_DIR, compile_logged, read_compile_log
from hroofline.collect.compiling import quiet_layers, replays_graphs, tracked_throughout
from hroofline.collect.graph_capture_steps import capture_refused_warning, capture_trace_file, warm_up
from hroofline.collect.memory_tracking import CudaPhaseMemory
from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.workload import LayerRange, PhaseMarks, TrainingStep, WorkloadConfig, warn_if_skipped
from hroofline.errors import InputError, ProfilingError
from hroofline.importers.build import ImportOptions
from hroofline.importers.kineto_links import LAYER_RANGE_PREFIX
from hroofline.importers.source import ImportedSource
from hroofline.model.run import CUDA_MEMORY_METHOD, LIVENESS_METHOD, PhaseMemory, first_per_phase


class RecordFunctionRanges:
    """Phases as nested ``record_function`` ranges; the current layer as one range at a time (``layer``)."""

    def __init__(self) -> None:
        from torch.autograd.profiler import record_function

        self._record_function = record_function
        self._phases: dict[str, Any] = {}
        self.layer = LayerRange(
            lambda layer: record_function(LAYER_RANGE_PREFIX + layer).__enter__(),
            lambda opened: opened.__exit__(None, None, None),
        )

    def phase(self, name: str, entering: bool) -> None:
        self.layer(None)
        if entering:
            self._phases[name] = self._record_function(name).__enter__()
        elif name in self._phases:
            self._phases.pop(name).__exit__(None, None, None)


def profile_trace(
    config: WorkloadConfig,
    warmup: int,
    steps: int,
    trace_file: Path,
    progress: Callable[[str], None],
    mark_calls: bool = False,
) -> ImportedSource:
    """Profiles ``steps`` training steps (after ``warmup``) with torch.profiler; the trace is written to
    ``trace_file`` and imported. ``mark_calls`` numbers the op calls (:mod:`hroofline.collect.op_calls`) so
    that an ncu pass can measure chosen ones."""
    from torch.profiler import ProfilerActivity

    from hroofline.collect.op_calls import marking, trace_call_marks

    ranges = RecordFunctionRanges()
    tracker = LayerTracker(listeners=[ranges.layer])
    step = TrainingStep(config, PhaseMarks([ranges.phase, tracker.phase_changed]), tracker)
    on_gpu = config.device != "cpu"
    capture = capture_trace_file(trace_file) if replays_graphs(config.compile, on_gpu) else None
    recording = f", steps 2-{warmup} traced as they record CUDA graphs ({capture})" if capture and warmup > 1 else ""
    progress(f"{config.arch}: {warmup} warm-up step(s){recording}")
    compile_log = trace_file.parent / COMPILE_LOG_DIR if config.compile is not None else None
    logged = compile_logged(compile_log) if compile_log is not None else contextlib.nullcontext()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    if capture is not None:
        capture.unlink(missing_ok=True)  # an earlier profile's capture is not this one's
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # Kineto's own log lines are no news to the user
    with logged, tracked_throughout(tracker, config.compile is not None) as tracking:
        with quiet_layers(tracker):  # a mode replaying CUDA graphs: the steps recording them traced too
            capture = warm_up(step, warmup, (activities, capture) if capture else None, native_stderr_quiet)
        step.synchronize()
        progress(f"{config.arch}: {steps} profiled step(s) under torch.profiler (record_shapes)")
        scale = step.loss_scale()
        profiler = _step_profiler(activities, steps, trace_file)  # the warm-up steps ran above
        trace_file.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with tracking, native_stderr_quiet():
            profiler.start()
            with marking(trace_call_marks() if mark_calls else None):
                for _ in range(steps):
                    step.run()
                    step.synchronize()
                    profiler.step()
            ranges.layer(None)
            profiler.stop()
        seconds = time.perf_counter() - started
        warn_if_skipped(step, scale)
        if not trace_file.exists():
            raise ProfilingError(f"torch.profiler wrote no trace to {trace_file}")
        memory = measure_step_memory(step, on_gpu)  # a compiled step's still with the hooks it was compiled with
    settings = {key: str(value) for key, value in asdict(config).items() if value is not None or key != "compile"}
    settings.update(warmup_steps=str(warmup), profiled_steps=str(steps), profiled_seconds=f"{seconds:.3f}")
    if capture is not None:
        settings["capture_trace"] = str(capture)
    graphs, unread = read_compile_log(compile_log) if compile_log is not None else (None, [])
    options = ImportOptions(cpu_ops=not on_gpu, compiled=graphs)
    source = import_collected_trace(trace_file, settings, options, capture)
    source.info.warnings += unread
    source.info.memory, source.info.formulas_used["memory"] = memory
    return source


def profile_script_trace(
    script: Path,
    argv: list[str],
    warmup: int,
    steps: int,
    trace_file: Path,
    progress: Callable[[str], None],
    on_gpu: bool,
) -> ImportedSource:
    """Runs the user's script in this process with torch.profiler around the ``steps`` steps it marks with
    ``hroofline.profiled_step()`` after ``warmup`` of them, its phases and layers (``hroofline.phase``,
    ``hroofline.annotate``) as ``record_function`` ranges, as for a model; the trace is written to ``trace_file``
    and imported."""
    from torch.profiler import ProfilerActivity

    from hroofline.collect.cpu_backend import run_marked_script
    from hroofline.collect.session import Session

    ranges = RecordFunctionRanges()
    session = Session("trace", layers=True, warmup=warmup, steps=steps)
    session.tracker.listeners.append(ranges.layer)
    session.phase_listeners.insert(0, ranges.phase)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    profiled = ProfiledSteps(_step_profiler(activities, steps, trace_file), steps, ranges, on_gpu)
    session.recorder = profiled
    trace_file.parent.mkdir(parents=True, exist_ok=True)
    trace_file.unlink(missing_ok=True)  # an earlier profile's trace is not this one's
    try:
        run_marked_script(script, argv, session, progress)
    finally:
        profiled.stop()
    if not trace_file.exists():
        raise ProfilingError(f"torch.profiler wrote no trace to {trace_file}")
    settings = {"script": str(script), "arguments": " ".join(argv), "warmup_steps": str(warmup)}
    settings.update(profiled_steps=str(steps), profiled_seconds=f"{profiled.seconds:.3f}")
    return import_collected_trace(trace_file, settings, ImportOptions(cpu_ops=not on_gpu))


def _step_profiler(activities: list[Any], steps: int, trace_file: Path) -> Any:
    """torch.profiler over ``steps`` steps: its schedule marks each step (``ProfilerStep#N``) and hands over the
    trace, written to ``trace_file``, after the last."""
    from torch.profiler import profile, schedule

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*warmup.*")
        return profile(
            activities=activities,
            record_shapes=True,
            schedule=schedule(wait=0, warmup=0, active=steps, repeat=1),
            on_trace_ready=lambda done: done.export_chrome_trace(str(trace_file)),
        )


class ProfiledSteps:
    """What a script's collected steps enter (the session's recorder): the profiler starts with the first, each
    one's end is a profiler step (after the GPU's work is done), and it stops after the last."""

    def __init__(self, profiler: Any, steps: int, ranges: RecordFunctionRanges, on_gpu: bool) -> None:
        self.profiler, self.steps, self.ranges, self.on_gpu = profiler, steps, ranges, on_gpu
        self.done = 0
        self.running = False
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> ProfiledSteps:
        if not self.running and self.done < self.steps:
            with native_stderr_quiet():
                self.profiler.start()
            self.running, self._started = True, time.perf_counter()
        return self

    def __exit__(self, *failure: object) -> None:
        if not self.running:
            return
        if self.on_gpu:
            import torch

            torch.cuda.synchronize()
        self.done += 1
        with native_stderr_quiet():  # the last step's ends the recording: Kineto's stop marker
            self.profiler.step()
        if self.done >= self.steps or failure[0] is not None:
            self.stop()

    def stop(self) -> None:
        """Closes the open layer range and stops the profiler (which writes the trace); once."""
        if not self.running:
            return
        self.running = False
        self.ranges.layer(None)
        with native_stderr_quiet():
            self.profiler.stop()
        self.seconds = time.perf_counter() - self._started


def measure_step_memory(step: TrainingStep, on_gpu: bool) -> tuple[list[PhaseMemory], str]:
    """Each phase's memory over one more step, after the profiled ones (so that measuring it, with its
    synchronisations or its dispatch mode, changes no profiled time): the CUDA caching allocator on a GPU,
    the tensor storages on the CPU."""
    listeners = list(step.marks.listeners)
    if on_gpu:
        cuda = CudaPhaseMemory()
        step.marks.listeners.append(cuda)
        try:
            step.run()
            step.synchronize()
        finally:
            step.marks.listeners = listeners
        return first_per_phase(cuda.phases), "one step after the profiled ones: " + CUDA_MEMORY_METHOD
    liveness = step.track_memory()
    try:
        with liveness:
            step.run()
    finally:
        step.marks.listeners = listeners
    return first_per_phase(liveness.phases), "one step after the profiled ones: " + LIVENESS_METHOD


# What Kineto logs as an ERROR on a machine without a CUDA GPU when it lists the GPUs for the trace: no news there.
NO_GPU_COUNT = "gpuGetDeviceCount failed"


@contextlib.contextmanager
def native_stderr_quiet() -> Iterator[None]:
    """Kineto prints start/stop markers (``USDT: ... profiler_start``) from C++ onto file descriptor 2, and on a
    machine without a GPU that it found none; they are dropped, anything else it prints there is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode(errors="replace").splitlines()
    kept = [line for line in lines if line.strip() and not line.startswith("USDT:") and NO_GPU_COUNT not in line]
    if kept:
        sys.stderr.write("\n".join(kept) + "\n")


def import_collected_trace(
    trace_file: Path, settings: dict[str, str], options: ImportOptions, capture: Path | None = None
) -> ImportedSource:
    """The trace imported with ``settings``; with ``capture`` (the warm-up steps' trace of a step replaying CUDA
    graphs) joined to it, or, where the join refuses it, without it and one warning saying why: never a failure."""
    from hroofline.importers.build import import_source
    from hroofline.roofs.metricset import load_metric_set

    metric_set = load_metric_set()
    try:
        source = import_source(trace_file, replace(options, captures=(capture,)) if capture else options, metric_set)
    except InputError as refused:
        if capture is None:
            raise
        source = import_source(trace_file, options, metric_set)
        source.info.warnings.append(capture_refused_warning(capture, trace_file, refused))
        settings = {**settings, "capture_trace": f"{capture} (left out)"}
    source.info.settings.update(settings)
    return source
