"""``profile --compile MODE --backend trace`` for a mode whose step replays CUDA graphs (on a GPU): the warm-up
steps that record the graphs are traced too, into a capture trace beside the measured step's, so that the import
links each replayed kernel to the op that launched it at capture (:mod:`hroofline.importers.graph_capture`).

When CUDA graph trees warm up, record and replay (``torch/_inductor/cudagraph_trees.py``, PyTorch 2.14): Inductor
wraps each compiled graph (the forward, and the backward that AOT autograd compiles at the first backward) in
``cudagraphify``, whose first call makes the tree function, and ``CUDAGraphTreeManager._run`` runs a function not
yet in ``warmed_up_functions`` eagerly (``run_eager``: the warm-up). Each call of the compiled model is a new
generation (``OptimizeContext`` enters ``install_generation_tagging_init``, which adds one to
``GenerationTracker.generation``), which ends the warm-up (``try_end_curr_warmup``); the next call of a warmed-up
function records it (``record_function``: ``torch.cuda.graph`` capture, then one replay of the new graph), and the
calls after that replay it (``execute_node``). So step 1 compiles and warms up, step 2 records (and replays once),
step 3 replays: steps 2 to ``warmup`` are the ones traced here, and the measured step is a replay. Where guards
recompile the model in step 2 (a new function: warmed up there, recorded in step 3) the recording is still in the
traced steps; where it recompiled in the measured step, that step would record (no replay to join, nothing lost but
the join). Recording in step 1 takes Inductor's ``triton.skip_cudagraph_warmup`` (off by default): then the traced
steps capture no graph, the join refuses their trace and the step is imported without it, with one warning line. A
warm-up of one step traces nothing here: the measured step records its graphs (the CLI warns of it).

What the capture trace holds on CUDA, as Kineto writes it (libkineto's ``CuptiCbidRegistry``): every runtime call
that is not on its blocklist, so ``cudaStreamBeginCapture``/``cudaStreamEndCapture`` around each graph and the
launch calls inside (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaLaunchCooperativeKernel``, the
``cudaMemcpy*``/``cudaMemset*`` range), and of the driver calls only ``cuLaunchKernel``/``cuLaunchKernelEx``
(Triton's launches); during a capture no kernel runs, so no GPU activity is linked to them. Starting the profiler
before the graphs exist also avoids PyTorch's known trouble with graphs recorded before the profiler's first use
(pytorch/pytorch#100441).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hroofline.collect.workload import TrainingStep
from hroofline.errors import InputError

# The longest refusal kept in the warning line (the join's own text, its paths left out).
REFUSAL_CHARS = 200


def capture_trace_file(trace_file: Path) -> Path:
    """Where the warm-up steps' trace goes: beside the measured step's, ``<stem>-capture<suffix>``."""
    return trace_file.with_name(f"{trace_file.stem}-capture{trace_file.suffix}")


def warm_up(
    step: TrainingStep,
    warmup: int,
    capture: tuple[list[Any], Path] | None,
    quiet: Callable[[], contextlib.AbstractContextManager[Any]],
) -> Path | None:
    """Runs ``warmup`` steps; with ``capture`` (the profiler's activities, the file), the first unprofiled (it
    compiles) and the rest under torch.profiler (shapes recorded), written to the file, which is returned."""
    if capture is None or warmup < 2:
        for _ in range(warmup):
            step.run()
        return None
    from torch.profiler import profile

    activities, capture_file = capture
    step.run()
    step.synchronize()
    profiler = profile(activities=activities, record_shapes=True)
    with quiet():
        profiler.start()
    try:
        for _ in range(warmup - 1):
            step.run()
        step.synchronize()
    finally:
        with quiet():
            profiler.stop()
    capture_file.parent.mkdir(parents=True, exist_ok=True)
    with quiet():
        profiler.export_chrome_trace(str(capture_file))
    return capture_file


def capture_refused_warning(capture: Path, trace_file: Path, refused: InputError) -> str:
    """The one line saying why the warm-up steps' trace attributed no replayed kernel: the join's refusal,
    shortened (its paths to file names, at most :data:`REFUSAL_CHARS` characters)."""
    reason = refused.message
    for path in (capture, trace_file):
        reason = reason.replace(f"{path}: ", "").replace(str(path), path.name)
    reason = reason.removeprefix("--capture: ")
    if len(reason) > REFUSAL_CHARS:
        reason = reason[:REFUSAL_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"the warm-up steps' trace {capture.name} attributed no replayed kernel (it was left out): {reason}"
