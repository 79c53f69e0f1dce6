"""Benchmark: predicting a resnet50 training step (batch 32) on a V100.

Each measurement runs in its own subprocess so that peak memory (max RSS) is its own, best of 3:

* baseline: one training step of the same model on PyTorch's meta device with nothing recorded (what
  PyTorch itself needs to walk the step), after building the model;
* hroofline in-process: build, trace (every op recorded with FLOPs and bytes), predict the time of every
  op and store the run;
* hroofline CLI: ``hroofline predict --arch resnet50 --gpu v100 --batch-size 32`` wall time, interpreter
  start-up and imports included.

Targets (from issue 12): under 3 s wall from the CLI and under 1.5 GB (1,500 MB). Prints the times, ratios
to the baseline and peak memory, then PASS or FAIL; exits 1 on FAIL.

Run as ``make bench`` or ``.venv/bin/python bench/predict_speed.py``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAX_SECONDS = 3.0
MAX_PEAK_MB = 1500.0
BIN = Path(sys.executable).parent
ARCH, GPU, BATCH = "resnet50", "v100", 32


def worker(kind: str, store: str) -> None:
    """Runs in the child: one measurement, printed as JSON."""
    start = time.perf_counter()
    if kind == "baseline":
        from dataclasses import replace

        from hroofline.collect.workload import TrainingStep, WorkloadConfig

        TrainingStep(replace(WorkloadConfig(ARCH, BATCH), device="meta")).run()
    else:
        from hroofline.cli.main import main

        args = ["predict", "--arch", ARCH, "--gpu", GPU, "--batch-size", str(BATCH), "--store", store, "--replace"]
        assert main(args) == 0
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb}))


def child(kind: str, store: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", kind, store], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def cli(store: str) -> dict[str, float]:
    start = time.perf_counter()
    subprocess.run(
        [
            str(BIN / "hroofline"),
            "predict",
            "--arch",
            ARCH,
            "--gpu",
            GPU,
            "--batch-size",
            str(BATCH),
            "--store",
            store,
            "--replace",
        ],
        capture_output=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hroofline-predict-bench-") as folder:
        runs = {"baseline": [], "in-process": [], "cli": []}
        for _ in range(3):
            runs["baseline"].append(child("baseline", folder))
            runs["in-process"].append(child("in-process", folder))
            runs["cli"].append(cli(folder))
    best = {kind: min(r["seconds"] for r in results) for kind, results in runs.items()}
    peak = max(r["peak_mb"] for r in runs["in-process"] + runs["cli"])
    print(f"{ARCH} training step, batch {BATCH}, on {GPU}; best of 3")
    print(f"{'baseline: untraced meta-device step':<44} {best['baseline']:7.2f} s")
    ratio = best["in-process"] / best["baseline"]
    print(f"{'hroofline predict, in-process':<44} {best['in-process']:7.2f} s   ratio {ratio:.1f}")
    print(f"{'hroofline predict, CLI wall time':<44} {best['cli']:7.2f} s   ratio {best['cli'] / best['baseline']:.1f}")
    print(f"{'peak memory':<44} {peak:7.0f} MB")
    failures = []
    if best["cli"] >= MAX_SECONDS:
        failures.append(f"the CLI took {best['cli']:.2f} s, not under {MAX_SECONDS:.0f} s")
    if peak >= MAX_PEAK_MB:
        failures.append(f"peak memory {peak:.0f} MB, not under {MAX_PEAK_MB:.0f} MB")
    print(
        "FAIL: " + "; ".join(failures) if failures else f"PASS: under {MAX_SECONDS:g} s and under {MAX_PEAK_MB:,.0f} MB"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
