"""Benchmark: how fast the everyday commands answer, start-up and imports included (issue 13).

Each command runs as a user runs it (``hroofline ...`` in a fresh process), best of 5, on a store of one
run imported here from Yang et al.'s DeepCAM AMP data (5,081 launches; skipped without ../shared):

* baseline: ``python -c "import pandas, pyarrow.parquet"``, what any command that reads the store must
  import, measured in the same run;
* ``hroofline --help``, ``runs`` and a misspelt command (``sumary RUN``): under 0.3 s, none of pandas, pyarrow,
  torch, altair imported (``tests/test_architecture.py`` checks which modules load);
* ``hroofline summary RUN`` and ``top RUN``: under 1.5x the baseline (they read the store, so they import
  pandas and pyarrow: what they add is hroofline's own; 0.5 s where the baseline is 0.3 s);
* ``hroofline predict --arch resnt50 --gpu v100`` (a misspelt model): under 1 s, answered with "did you
  mean resnet50" before PyTorch is imported.

Prints each time and its ratio to the baseline, then PASS or FAIL; exits 1 on FAIL.

Run as ``make bench`` or ``.venv/bin/python bench/cli_startup.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEEPCAM = REPO.parent / "shared" / "fixtures" / "deepcam"
HROOFLINE = Path(sys.executable).parent / "hroofline"
REPEAT = 5
RUN = "deepcam-amp-o1"


def best_of(argv: Sequence[str], expect_code: int = 0) -> tuple[float, str]:
    best, output = float("inf"), ""
    for _ in range(REPEAT):
        start = time.perf_counter()
        done = subprocess.run(list(argv), capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        if done.returncode != expect_code:
            raise SystemExit(f"FAIL: {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
        output = done.stdout + done.stderr
    return best, output


def main() -> int:
    if not DEEPCAM.is_dir():
        print(f"skipped: {DEEPCAM} not found (../shared beside the checkout)")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "store")
        for folder_phase, phase in (("fw", "forward"), ("bw", "backward"), ("opt", "optimizer")):
            source = DEEPCAM / f"pt-O1-Adam-{folder_phase}"
            subprocess.run(
                [HROOFLINE, "import", source, "--run", RUN, "--gpu", "v100", "--phase", phase, "--store", store],
                check=True,
                capture_output=True,
            )
        baseline, _ = best_of([sys.executable, "-c", "import pandas, pyarrow.parquet"])
        print(f"{'baseline: import pandas, pyarrow.parquet':<44} {baseline:6.3f} s")
        failed = False
        checks = [
            (["--help"], 0.3, 0, "COMMAND"),
            (["runs"], 0.3, 0, None),
            (["sumary", RUN], 0.3, 2, "did you mean summary"),
            (["summary", RUN], 1.5 * baseline, 0, None),
            (["top", RUN], 1.5 * baseline, 0, None),
            (["predict", "--arch", "resnt50", "--gpu", "v100"], 1.0, 2, "did you mean resnet50"),
        ]
        for words, limit, code, expected in checks:
            store_args = ["--store", store] if words[0] in ("runs", "summary", "top") else []
            seconds, output = best_of([str(HROOFLINE), *words, *store_args], code)
            ok = seconds < limit and (expected is None or expected in output)
            failed |= not ok
            label = "hroofline " + " ".join(words)
            print(
                f"{label:<44} {seconds:6.3f} s  {seconds / baseline:5.2f}x baseline  limit {limit:.2f} s  "
                f"{'ok' if ok else 'TOO SLOW' if seconds >= limit else 'WRONG ANSWER'}"
            )
    print("PASS" if not failed else "FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
