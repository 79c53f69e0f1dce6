"""Benchmark: the cost of the CPU backend's op recorder on a training step.

Times one training step of resnet18 (batch 2, fp32, SGD; the size `make profile GPU=cpu BATCH=2` uses)
without hroofline's recorder (the baseline) and with it, taking turns, best of N each, in one process
after warm-up steps. The recorded step includes everything the recorder does per op: the timer, the FLOP
formulas and the byte counts.

Target (from the issue): the profiled step takes at most 1.5x the unprofiled step. Prints both times and
the ratio, then PASS or FAIL; exits 1 on FAIL.

Run as ``make bench`` or ``.venv/bin/python bench/cpu_overhead.py [--arch resnet18] [--batch-size 2]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from hroofline.collect.cpu_ops import OpRecorder
from hroofline.collect.workload import PhaseMarks, TrainingStep, WorkloadConfig

MAX_RATIO = 1.5


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    recorder = OpRecorder()
    step = TrainingStep(WorkloadConfig(args.arch, batch_size=args.batch_size), PhaseMarks([recorder.listen]))
    for _ in range(3):
        step.run()
    plain, recorded = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        step.run()
        plain.append(time.perf_counter() - start)
        recorder.records.clear()
        start = time.perf_counter()
        with recorder:
            step.run()
        recorded.append(time.perf_counter() - start)
    ops = len(recorder.records)
    ratio = min(recorded) / min(plain)
    print(f"{args.arch}, batch {args.batch_size}, fp32, best of {args.repeat}; {ops} ops recorded per step")
    print(f"{'baseline: training step':<40} {min(plain) * 1e3:8.1f} ms")
    print(f"{'training step with the op recorder':<40} {min(recorded) * 1e3:8.1f} ms   ratio {ratio:.2f}")
    if ratio > MAX_RATIO:
        print(f"FAIL: ratio {ratio:.2f} is above {MAX_RATIO}")
        return 1
    print(f"PASS: ratio {ratio:.2f} <= {MAX_RATIO}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
