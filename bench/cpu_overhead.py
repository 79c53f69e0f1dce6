"""Benchmark: what each CPU collection mode costs on a training step, and what importing its trace costs.

(The op recorder's ratio was this file's whole job before traces; it still fails above MAX_RATIO.)

Times one training step of resnet18 (batch 2, fp32, SGD) in one process after warm-up steps, taking turns,
best of N each:

- baseline: the plain step;
- trace: the step under torch.profiler with shapes recorded and hroofline's phase and layer ranges
  (``profile --backend trace``);
- recorder: the step under hroofline's op recorder (``profile --gpu cpu``, the default backend there).

Then the import of one profiled step's trace (linking, and the analytic work replayed on the meta device).
Prints each time and its ratio to the baseline; exits 1 when the trace's or the recorder's ratio is above
MAX_RATIO (the target: a profiled step takes at most 1.5x the unprofiled step).

Run as ``make bench`` or ``.venv/bin/python bench/cpu_overhead.py [--arch resnet18] [--batch-size 2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from hroofline.collect.module_tracking import LayerTracker
from hroofline.collect.trace_backend import RecordFunctionRanges, import_collected_trace, native_stderr_quiet
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig
from hroofline.work.ops import OpRecorder

MAX_RATIO = 1.5


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    ranges = RecordFunctionRanges()
    tracker = LayerTracker(listeners=[ranges.layer])
    recorder = OpRecorder()
    marks = PhaseMarks([ranges.phase, tracker.phase_changed, recorder.listen])
    step = TrainingStep(WorkloadConfig(args.arch, batch_size=args.batch_size), marks, tracker)
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")
    for _ in range(3):
        step.run()
    plain, traced, recorded = [], [], []
    trace_file = Path(tempfile.mkdtemp()) / "trace.json"
    for _ in range(args.repeat):
        start = time.perf_counter()
        step.run()
        plain.append(time.perf_counter() - start)
        with native_stderr_quiet(), tracker, profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
            start = time.perf_counter()
            step.run()
            traced.append(time.perf_counter() - start)
        recorder.records.clear()
        start = time.perf_counter()
        with recorder:
            step.run()
        recorded.append(time.perf_counter() - start)
    profiler.export_chrome_trace(str(trace_file))
    start = time.perf_counter()
    source = import_collected_trace(trace_file, {}, cpu_ops=True)
    import_s = time.perf_counter() - start
    base = min(plain)
    print(f"{args.arch}, batch {args.batch_size}, fp32, best of {args.repeat}")
    print(f"{'baseline: training step':<44} {base * 1e3:8.1f} ms")
    _row("under torch.profiler (--backend trace)", min(traced), base)
    _row("under the op recorder (--backend recorder)", min(recorded), base)
    size = f"({len(source.launches)} ops, {trace_file.stat().st_size / 1e6:.1f} MB of JSON)"
    _row("importing the step trace (analytic work)", import_s, base, size)
    ratios = {"trace": min(traced) / base, "recorder": min(recorded) / base}
    failed = {mode: ratio for mode, ratio in ratios.items() if ratio > MAX_RATIO}
    for mode, ratio in ratios.items():
        verdict, relation = ("FAIL", ">") if mode in failed else ("PASS", "<=")
        print(f"{verdict}: {mode} ratio {ratio:.2f} {relation} {MAX_RATIO}")
    return 1 if failed else 0


def _row(label: str, seconds: float, base: float, extra: str = "") -> None:
    print(f"{label:<44} {seconds * 1e3:8.1f} ms   ratio {seconds / base:.2f}   {extra}".rstrip())


if __name__ == "__main__":
    sys.exit(main())
