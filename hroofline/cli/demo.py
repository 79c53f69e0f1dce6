"""``make demo``: the demo's commands, run one after another in one process, each stage with its time.

Each stage prints its title, the ``hroofline`` command line(s) a reader would type, what they print, and then
its time; at the end, the demo's total. One process, not one per command: each ``hroofline`` started anew
imports PyTorch or pandas again (0.5 to 1 s a command on a two-core machine, 20 commands), which is the start-up
of a program, not what the demo shows.

Run as ``python -m hroofline.cli.demo --store demo-runs --report demo-report --shared ../shared --chart PNG``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hroofline.cli.main import main as hroofline
from hroofline.model.numbers import si

DEEPCAM = "fixtures/deepcam"  # Yang et al.'s DeepCAM V100 data, under --shared
PREDICTED = ("resnet50-fp32-v100-predicted", "resnet50-amp-v100-predicted")
DEEPCAM_RUNS = ("deepcam-fp32", "deepcam-amp-o1")
TITLE = "hroofline demo: resnet18 on this CPU, resnet50 predicted on a V100, DeepCAM measured on a V100"


class Demo:
    def __init__(self, store: str) -> None:
        self.store = store
        self.start = time.perf_counter()

    def stage(self, title: str, *commands: Sequence[str]) -> None:
        """One stage: its title, then each command as typed and what it prints, then the stage's time."""
        started = time.perf_counter()
        _print(f"\n== {title}")
        for words in commands:
            argv = [*words, "--store", self.store]
            _print("$ hroofline " + shlex.join(argv))
            code = hroofline(argv)
            if code:
                _print(f"make demo: `hroofline {shlex.join(argv)}` failed (exit {code})", error=True)
                raise SystemExit(code)
        _print(f"-- {title.split(':')[0]}: {si(time.perf_counter() - started, 's')}")

    def took(self) -> str:
        return si(time.perf_counter() - self.start, "s")


def _print(text: str, error: bool = False) -> None:
    stream = sys.stderr if error else sys.stdout
    sys.stdout.flush()
    print(text, file=stream, flush=True)


def run_demo(store: str, report: str, shared: Path, chart: str) -> None:
    demo = Demo(store)
    demo.stage(
        "profiling resnet18 (batch 2) on this CPU",
        [
            "profile",
            "--arch",
            "resnet18",
            "--gpu",
            "cpu",
            "--batch-size",
            "2",
            "--warmup",
            "1",
            "--run",
            "resnet18-cpu",
        ],
    )
    demo.stage("resnet18-cpu: phases", ["summary", "resnet18-cpu"])
    demo.stage("resnet18-cpu: top kernels", ["top", "resnet18-cpu", "-n", "6"])
    demo.stage(
        "resnet18-cpu: top layers in backward",
        ["top", "resnet18-cpu", "--by", "layer", "--phase", "backward", "-n", "4"],
    )
    demo.stage(
        "predicted: resnet50 training step (batch 32) on a V100, FP32 and AMP",
        *(
            ["predict", "--arch", "resnet50", "--gpu", "v100", "--precision", precision, "--run", run]
            for precision, run in zip(("fp32", "amp"), PREDICTED, strict=True)
        ),
        ["compare", *PREDICTED, "-n", "4"],
    )
    deepcam = shared / DEEPCAM
    compares = ["--compare", *PREDICTED]
    if deepcam.is_dir():
        demo.stage(
            "Yang et al.'s DeepCAM on a V100, FP32 and AMP O1: import",
            *(
                [
                    *("import", str(deepcam / f"pt-{level}-Adam-{phase}"), "--run", run, "--gpu", "v100"),
                    *("--phase", phase, "--precision", precision),
                ]
                for phase in ("fw", "bw", "opt")
                for level, run, precision in (("O0", DEEPCAM_RUNS[0], "fp32"), ("O1", DEEPCAM_RUNS[1], "amp-o1"))
            ),
        )
        demo.stage("deepcam-fp32 and deepcam-amp-o1: phases", *(["summary", run] for run in DEEPCAM_RUNS))
        demo.stage(
            "deepcam-amp-o1: top forward kernels",
            ["top", DEEPCAM_RUNS[1], "--phase", "forward", "-n", "8", "--ceilings", "v100-yang-ert"],
        )
        demo.stage("deepcam-fp32 against deepcam-amp-o1", ["compare", *DEEPCAM_RUNS, "-n", "4"])
        Path(chart).parent.mkdir(parents=True, exist_ok=True)
        demo.stage(
            "the README's chart",
            ["chart", DEEPCAM_RUNS[1], "--phase", "forward", "--ceilings", "v100-yang-ert", "--out", chart],
        )
        compares += ["--compare", *DEEPCAM_RUNS]
    else:
        _print(f"\n({deepcam} not found: skipping Yang et al.'s DeepCAM V100 data)")
    query = (
        "SELECT run, count(*) AS launches, sum(time_s) AS time_s, sum(flops) AS flops FROM launches GROUP BY run "
        "ORDER BY run"
    )
    demo.stage("SQL over all runs of the store (DuckDB)", ["query", query])
    runs = ["resnet18-cpu", *PREDICTED, *(DEEPCAM_RUNS if deepcam.is_dir() else ())]
    demo.stage("report", ["report", *runs, *compares, "--title", TITLE, "--out", report])
    _print(f"\nthe demo took {demo.took()}; open {report}/index.html in a browser (it works offline)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hroofline.cli.demo", description="make demo's commands")
    parser.add_argument("--store", default="demo-runs")
    parser.add_argument("--report", default="demo-report")
    parser.add_argument("--shared", default="../shared", type=Path)
    parser.add_argument("--chart", default="docs/deepcam-amp-o1-forward.png")
    args = parser.parse_args(argv)
    run_demo(args.store, args.report, args.shared, args.chart)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the hroofline program does: no teardown of PyTorch's and pandas' modules
