"""``hroofline import``: sources into a run, all or nothing."""

from __future__ import annotations

import argparse

from hroofline.api.imports import import_files
from hroofline.cli.common import add_store_option, open_store, progress, say
from hroofline.errors import UsageError
from hroofline.importers.build import ImportOptions
from hroofline.model.phases import parse_phase_option
from hroofline.roofs.catalog import resolve_gpu
from hroofline.store.files import check_run_name
from hroofline.store.runs import RunDefaults

HELP = """\
Import ncu output or PyTorch profiler traces into a run. A SOURCE is a .ncu-rep report, an ncu CSV export
(long --page details or wide --page raw, any ncu version from 2020 on), an ncu console log (metric names or
ncu's default sections), a folder of passes over one run (Yang et al.'s one-metric-per-run logs, a time pass
and an instruction pass, ...), or a torch.profiler (Kineto) trace (.json); each may be gzip- or xz-compressed.

A trace gives every kernel, memcpy and memset its measured duration, its launching CPU op (shapes, ranges,
phase, profiler step, rank) and analytic work: the op's recorded shapes replayed on the meta device with the
formulas of `predict` (minimum bytes, HBM level only), split over the op's kernels by duration. Kernels of ops
without shapes or formulas have unknown work; the import says what share of time has known work. NCCL
kernels are communication, with their bytes from the collective's arguments. Traces of several ranks
imported into one run give per-rank summaries (`summary --by rank`).

Sources that are passes over the same launches (the same kernels in the same order, each measuring
other metrics) are joined launch by launch, here as in a folder: kernel time comes from the pass that
measured it without instruction metrics. Other sources are appended: that is how a run gathers forward,
backward and optimizer data collected separately. A source already in the run is skipped. Either every
source is imported or, on any error, none is and the store is unchanged.
"""

EPILOG = """\
examples:
  hroofline import fw.ncu-rep --run cnn-fp32 --phase forward     # a report names its GPU
  hroofline import pt-O0-Adam-bw/ --run deepcam-fp32 --gpu v100 --phase bw
  hroofline import time_dram.ncu-rep dpflops.ncu-rep --run gene   # two passes: joined, 8 launches
  hroofline import logs/ --run r1 --merge name     # files disagree launch by launch
  hroofline import trace.json.gz --run ddp --gpu a100 --steps 5,6   # a torch.profiler trace, two steps
  hroofline import rank0.json.gz rank1.json.gz --run ddp-ranks --gpu a100  # two ranks, one run
"""


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="file or folder to import")
    parser.add_argument("--run", required=True, help="run to create or append to")
    parser.add_argument(
        "--phase",
        help="phase of launches whose NVTX ranges name none: forward|fw|fwd, backward|bw|bwd, "
        "optimizer|opt|optimizer_step|step, other (default: from NVTX, else other)",
    )
    parser.add_argument(
        "--gpu",
        help="the GPU that was profiled, e.g. v100, a100, h100 (needed when the file does not say, "
        "e.g. for tensor FLOPs from old CSV exports)",
    )
    parser.add_argument(
        "--force-gpu",
        action="store_true",
        help="judge a report as --gpu even where the device it states has another SM count (default: refused)",
    )
    parser.add_argument(
        "--merge",
        choices=("launch", "name"),
        default="launch",
        help="for passes (a folder, or several files): join launch by launch (default), or join "
        "per-kernel-name sums when the passes' launch sequences differ",
    )
    parser.add_argument(
        "--steps",
        help="traces: the ProfilerStep numbers to import, e.g. 5,6 or 5-7 (default: every kernel of the trace)",
    )
    parser.add_argument(
        "--rank", type=int, help="traces: the rank of a trace that does not say (default: its distributedInfo, else 0)"
    )
    parser.add_argument("--precision", help="label for the run's precision, e.g. fp32, amp (metadata only)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="make the run these sources alone (re-import with other options, e.g. --gpu); the old run stays "
        "until the new one is written",
    )
    add_store_option(parser)
    parser.set_defaults(run_command=run)


def parse_steps(text: str) -> frozenset[int]:
    """'5,6' or '5-7' or '5,8-9' -> the step numbers."""
    steps: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            steps.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise UsageError(f"--steps {text!r}: give step numbers, e.g. 5,6 or 5-7") from None
    if not steps:
        raise UsageError(f"--steps {text!r}: give step numbers, e.g. 5,6 or 5-7")
    return frozenset(steps)


def run(args: argparse.Namespace) -> int:
    name = check_run_name(args.run)
    if args.force_gpu and not args.gpu:
        raise UsageError("--force-gpu needs --gpu: the GPU to judge the report as")
    options = ImportOptions(
        phase=parse_phase_option(args.phase) if args.phase else None,
        gpu=resolve_gpu(args.gpu) if args.gpu else None,
        merge=args.merge,
        steps=parse_steps(args.steps) if args.steps else None,
        rank=args.rank,
        force_gpu=args.force_gpu,
    )
    gpu = options.gpu.name if options.gpu else None
    defaults = RunDefaults(gpu, args.precision, None)
    store = open_store(args, writing=True)
    done = import_files(store, name, args.sources, options, defaults, args.replace, progress)
    for prefix in done.skipped:
        say(f"{prefix}: already in run {name!r}, nothing added")
    result = done.result
    if result is None:
        return 0
    if done.replaced:
        say(f"run {name!r} replaced")
    for source in result.added:
        info = source.info
        phases = source.launches["phase"].value_counts()
        phase_text = ", ".join(f"{p} {n}" for p, n in phases.items())
        measured = ", ".join(info.formulas_used) or "time only"
        say(f"imported {info.path}: {info.launches} launches ({phase_text}); {measured}")
        for note in info.notes:
            say(f"  note: {note}")
        for warning in info.warnings:
            say(f"hroofline: warning: {warning}")
    for note in result.notes:
        say(f"note: {note}")
    for source in result.already_present:
        say(f"{source.info.path}: already in run {name!r}, nothing added")
    total = int(result.run.launches["launches"].sum())
    say(f"run {name!r}: {total} launches from {len(result.run.meta.sources)} sources in {store.root}")
    return 0
