"""Benchmark: what profiling one launch per signature saves, and what it costs in accuracy.

For each pair of a trace and the full ncu report of the same step (default: the shared H100 GPT-2 step,
``../shared/fixtures/h100/gpt2-amp-bf16-b8-s512-{trace.json,step.ncu-rep}.xz``; any pairs as
``TRACE REPORT`` on the command line), prints the launches of the step, their signatures, the launches ncu
would profile (those of the op calls the plan chooses) against all of them, and the largest per-phase
difference between the full report and the report rebuilt from the measured launches: total FLOPs, bytes
at L1, L2 and HBM, and time at roof (with the report's own roofs per launch for both). The baseline is the
full report itself, read in the same run. The two must be the same step launch for launch: kernel name, grid
and block, and op shapes where both record them (a trace of another batch is refused, exit 1).

Targets (issue 22): at most 1/6 of the launches profiled, FLOPs and bytes within 2%, time at roof within 3%.
Prints ``PASS`` or ``FAIL`` with the reason; exits 1 on FAIL. ``--json`` prints one object per pair instead:
``input``, ``launches``, ``signatures``, ``profiled``, ``flops_error``, ``bytes_error``, ``time_at_roof_error``.

Run as ``make bench`` or ``.venv/bin/python bench/collection_cost.py [--json] [TRACE REPORT]...``.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hroofline.api.collection_cost import CopyCheck, check_copy  # noqa: E402
from hroofline.errors import HrooflineError  # noqa: E402
from hroofline.importers.build import ImportOptions, import_source  # noqa: E402
from hroofline.roofs.metricset import load_metric_set  # noqa: E402
from hroofline.store.runs import RunDefaults, RunStore  # noqa: E402

H100 = REPO.parent / "shared" / "fixtures" / "h100"
DEFAULT_PAIR = (H100 / "gpt2-amp-bf16-b8-s512-trace.json.xz", H100 / "gpt2-amp-bf16-b8-s512-step.ncu-rep.xz")
MAX_PROFILED_SHARE = 1 / 6
MAX_COUNTER_ERROR = 0.02
MAX_TIME_AT_ROOF_ERROR = 0.03


def _plain(path: Path, folder: Path) -> Path:
    """``path`` decompressed into ``folder`` where it is xz-compressed (the shared fixtures are)."""
    if path.suffix != ".xz":
        return path
    target = folder / path.stem
    with lzma.open(path) as packed, target.open("wb") as plain:
        shutil.copyfileobj(packed, plain)
    return target


def measure(trace: Path, report: Path) -> CopyCheck:
    with tempfile.TemporaryDirectory(prefix="hroofline-bench-") as folder:
        store = RunStore(Path(folder) / "store")
        metric_set = load_metric_set()
        for name, path in (("trace", trace), ("report", report)):
            print(f"reading {path.name}", file=sys.stderr, flush=True)
            source = import_source(_plain(path, Path(folder)), ImportOptions(), metric_set)
            store.replace_run(name, [source], RunDefaults(None, None, None))
        return check_copy(store.load("trace"), store.load("report"))


def record(trace: Path, check: CopyCheck) -> dict[str, object]:
    plan = check.plan
    return {
        "input": trace.name.removesuffix(".xz"),
        "launches": plan.launches,
        "signatures": plan.signatures,
        "profiled": plan.profiled,
        "flops_error": check.flops_error,
        "bytes_error": check.bytes_error,
        "time_at_roof_error": check.time_at_roof_error,
    }


def failures(found: dict[str, object]) -> list[str]:
    share = int(found["profiled"]) / int(found["launches"])  # type: ignore[call-overload]
    wrong = []
    if share > MAX_PROFILED_SHARE:
        wrong.append(f"{share:.1%} of the launches profiled (target at most {MAX_PROFILED_SHARE:.1%})")
    for key, limit in (("flops_error", MAX_COUNTER_ERROR), ("bytes_error", MAX_COUNTER_ERROR)):
        if float(found[key]) > limit:  # type: ignore[arg-type]
            wrong.append(f"{key} {float(found[key]):.2%} over {limit:.0%}")  # type: ignore[arg-type]
    if float(found["time_at_roof_error"]) > MAX_TIME_AT_ROOF_ERROR:  # type: ignore[arg-type]
        wrong.append(f"time at roof off by {float(found['time_at_roof_error']):.2%}")  # type: ignore[arg-type]
    return wrong


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, metavar="TRACE REPORT", help="pairs (default: GPT-2 on H100)")
    parser.add_argument("--json", action="store_true", help="one JSON object per pair")
    args = parser.parse_args(argv)
    if len(args.files) % 2:
        parser.error("give the files in pairs: TRACE REPORT")
    pairs = list(zip(args.files[::2], args.files[1::2], strict=True)) or [DEFAULT_PAIR]
    missing = [str(p) for pair in pairs for p in pair if not p.exists()]
    if missing:
        print(f"collection_cost: no such file: {', '.join(missing)}", file=sys.stderr)
        return 1
    wrong: list[str] = []
    for trace, report in pairs:
        try:
            check = measure(trace, report)
        except HrooflineError as error:
            print(f"collection_cost: {error.one_line()}", file=sys.stderr)
            return 1
        found = record(trace, check)
        wrong += [f"{found['input']}: {w}" for w in failures(found)]
        if args.json:
            print(json.dumps(found))
            continue
        plan = check.plan
        print(f"{found['input']} against {report.name.removesuffix('.xz')} (the full report: the baseline)")
        print(f"  launches in the step's phases  {plan.launches:>8,}")
        print(f"  signatures                     {plan.signatures:>8,}")
        print(
            f"  launches ncu profiles          {plan.profiled:>8,}  ({plan.profiled / plan.launches:.1%}; "
            f"{plan.launches / plan.profiled:.1f}x fewer, in {len(plan.calls):,} op calls)"
        )
        print("  largest per-phase difference from the full report:")
        table = (100 * check.per_phase).round(3).rename(columns=lambda c: f"{c} %")
        print("    " + table.to_string().replace("\n", "\n    "))
    if not args.json:
        print("PASS" if not wrong else "FAIL: " + "; ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
