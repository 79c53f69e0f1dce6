"""``--gpu cpu``: the workload's steps on the CPU, each ATen op a "launch" of the run."""

from __future__ import annotations

import hashlib
import runpy
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from hroofline.collect.measure import cpu_name
from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.session import Session, collecting
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig, warn_if_skipped
from hroofline.errors import HrooflineError, ProfilingError
from hroofline.importers.source import ImportedSource
from hroofline.model.run import LIVENESS_METHOD, SourceInfo, first_per_phase
from hroofline.work.ops import TIME_METHOD, OpRecorder, records_to_launches

FORMULAS = {
    "flops_fp64": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float64 ops",
    "flops_fp32": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float32 ops",
    "flops_fp16": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml, float16/bfloat16 ops",
    "bytes_l1": "fewest bytes an op must move: each distinct input read once, each output written once",
}


LOWER_BOUND_NOTE = "bytes_l1 holds the fewest bytes each op must move (a lower bound); L2 and DRAM are not measured"
LAYER_NOTE = (
    "layers from PyTorch's module tracking (torch.utils.module_tracker): backward ops belong to the module whose "
    "forward created them"
)


def profile_cpu(config: WorkloadConfig, warmup: int, steps: int, progress: Callable[[str], None]) -> ImportedSource:
    tracker = LayerTracker()
    recorder = OpRecorder(tracker)
    step = TrainingStep(config, PhaseMarks([recorder.listen, tracker.phase_changed]), tracker)
    progress(f"{config.arch}: {warmup} warm-up step(s)")
    for _ in range(warmup):
        step.run()
    progress(f"{config.arch}: {steps} profiled step(s)")
    scale = step.loss_scale()
    liveness = step.track_memory()
    with tracker, recorder, liveness:  # liveness innermost, so its bookkeeping is outside the ops' timings
        for index in range(steps):
            recorder.step = index
            step.run()
    warn_if_skipped(step, scale)
    settings = {key: str(value) for key, value in asdict(config).items()}
    source = _cpu_source(recorder, f"cpu:{config.arch}", settings, warmup, steps)
    source.info.memory = first_per_phase(liveness.phases)
    source.info.formulas_used["memory"] = "the first profiled step's tensor storages: " + LIVENESS_METHOD
    return source


def profile_script_cpu(
    script: Path, argv: list[str], warmup: int, steps: int, progress: Callable[[str], None]
) -> ImportedSource:
    """Runs the user's script in this process, recording the ops of the steps it marks with
    ``hroofline.profiled_step()`` (after ``warmup`` of them), with the phases and layers it marks."""
    session = Session("cpu", layers=True, warmup=warmup, steps=steps)
    recorder = OpRecorder(session.tracker)
    session.recorder = recorder
    session.phase_listeners.insert(0, recorder.listen)
    run_marked_script(script, argv, session, progress)
    settings = {"script": str(script), "arguments": " ".join(argv)}
    return _cpu_source(recorder, f"cpu:{script}", settings, warmup, steps)


def run_marked_script(script: Path, argv: list[str], session: Session, progress: Callable[[str], None]) -> None:
    """Runs the user's script in this process as ``python script.py ARGS`` would, its marks feeding
    ``session``; refuses a script that failed or marked fewer steps than the session collects."""
    progress(f"running {script} {' '.join(argv)}".rstrip())
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        with collecting(session):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as error:
        if error.code not in (0, None):
            raise ProfilingError(f"{script} exited with status {error.code}") from None
    except HrooflineError:
        raise
    except Exception as error:
        _print_script_traceback(error, script)
        raise ProfilingError(f"{script} failed: {type(error).__name__}: {error}") from None
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if session.collected < session.wanted:
        raise ProfilingError(
            f"{script} ran {session.steps} step(s) in hroofline.profiled_step(): {session.warmup} warm-up and "
            f"{session.wanted} profiled wanted",
            "wrap each training step in `with hroofline.profiled_step():`, or lower --warmup / --steps",
        )


def _cpu_source(recorder: OpRecorder, path: str, settings: dict[str, str], warmup: int, steps: int) -> ImportedSource:
    """The recorded ops as a source: one launch per op, the collection's settings, a unique identity."""
    launches = records_to_launches(recorder.records)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    collected = {**settings, "warmup_steps": str(warmup), "profiled_steps": str(steps), "profiled_at": stamp}
    info = SourceInfo(
        path=path,
        kind="cpu",
        source_hash=hashlib.sha256(f"{path} {collected} {time.time_ns()}".encode()).hexdigest(),
        launches=len(launches),
        formulas_used=dict(FORMULAS),
        time_methods={TIME_METHOD: len(launches)},
        settings=collected,
        notes=[LOWER_BOUND_NOTE, LAYER_NOTE],
    )
    return ImportedSource(info=info, launches=launches, cc=None, device_name=cpu_name(), on_cpu=True)


def _print_script_traceback(error: BaseException, script: Path) -> None:
    """The script's own traceback, from its first frame on, as ``python script.py`` would show it."""
    trace = error.__traceback__
    target = str(script.resolve())
    while trace is not None and trace.tb_frame.f_code.co_filename != target:
        trace = trace.tb_next
    lines = traceback.format_exception(type(error), error, trace or error.__traceback__)
    sys.stderr.write("".join(lines))
