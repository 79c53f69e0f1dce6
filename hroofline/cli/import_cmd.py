"""``hroofline import``: sources into a run, all or nothing."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any

from hroofline.api.imports import CpuCeilings, import_files
from hroofline.cli.common import add_store_option, open_store, progress, say
from hroofline.cli.profile_common import this_cpu_ceilings
from hroofline.errors import InputError, UsageError
from hroofline.importers.build import ImportOptions
from hroofline.importers.source import ImportedSource
from hroofline.model.phases import parse_phase_option
from hroofline.model.run import Run
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import CPU, load_ceilings_file, roofs_unknown
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
imported into one run give per-rank summaries (`summary --by rank`). A trace recorded on the CPU alone
(activities=[ProfilerActivity.CPU]) makes a CPU run (--gpu cpu, taken without it): every op is a launch, timed
by its self time, with its work from its recorded shapes; its roofs are the ceilings of --ceilings FILE, or
this machine's (measured, as profile --gpu cpu does) where the trace says it was recorded here. A run left without roofs
(a trace that names no GPU) is said at once: top, chart, report and advise need them.

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
  hroofline import trace.json --run mine --ceilings cpu.toml   # a trace made on the CPU, its CPU's ceilings
  hroofline import replay.json.gz --capture capture.pt.trace.json.gz --run vllm  # graph replays: their ops
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
        "optimizer|opt|optimizer_step|step, prefill, decode, mixed, other (default: from NVTX or a serving "
        "engine's step range, else other)",
    )
    parser.add_argument(
        "--gpu",
        help="the GPU that was profiled, e.g. v100, a100, h100 (needed when the file does not say, "
        "e.g. for tensor FLOPs from old CSV exports), or cpu: a trace of ops that ran on the CPU (taken without "
        "it where the trace has no GPU activity)",
    )
    parser.add_argument(
        "--ceilings",
        metavar="FILE",
        help="the run's roofs: a ceilings file (`hroofline ceilings --measure --out FILE` writes one); for a CPU "
        "trace, of the CPU it was recorded on (default there: this machine's, measured, where the trace was "
        "recorded here)",
    )
    parser.add_argument(
        "--measure-ceilings",
        action="store_true",
        help="for a CPU trace recorded here: measure this CPU's ceilings anew (a quiet machine gives the truest "
        "roofs) and cache them for later runs (default: measured once per machine and cached)",
    )
    parser.add_argument(
        "--force-gpu",
        action="store_true",
        help="judge a report as --gpu even where the device it states is another (name or SM count; default: refused)",
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
    parser.add_argument(
        "--capture",
        nargs="+",
        default=[],
        metavar="CAPTURE",
        help="traces replayed from CUDA (or HIP) graphs: the trace(s) written while the graphs were captured "
        "(vLLM's capture_traces/*.pt.trace.json.gz); each graph launch's kernels get the ops that launched them "
        "at capture, matched in launch order by kernel names (grid and block where both record them)",
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
    on_cpu = bool(args.gpu) and args.gpu.strip().lower() == CPU
    if args.force_gpu and on_cpu:
        raise UsageError("--force-gpu: not with --gpu cpu (it judges a GPU's report as another GPU)")
    if args.force_gpu and not args.gpu:
        raise UsageError("--force-gpu needs --gpu: the GPU to judge the report as")
    if args.measure_ceilings and (args.ceilings or (args.gpu and not on_cpu)):
        what = "--ceilings FILE" if args.ceilings else f"--gpu {args.gpu} (a GPU's roofs are its catalog's)"
        raise UsageError(f"--measure-ceilings: measures this CPU's ceilings, for a CPU trace, not with {what}")
    ceilings = load_ceilings_file(Path(args.ceilings)).to_json() if args.ceilings else None  # before the import
    options = ImportOptions(
        phase=parse_phase_option(args.phase) if args.phase else None,
        gpu=resolve_gpu(args.gpu) if args.gpu and not on_cpu else None,
        merge=args.merge,
        steps=parse_steps(args.steps) if args.steps else None,
        rank=args.rank,
        cpu_ops=on_cpu,
        force_gpu=args.force_gpu,
        captures=tuple(_existing_captures(args.capture)),
    )
    gpu = options.gpu.name if options.gpu else None
    defaults = RunDefaults(gpu, args.precision, ceilings)
    store = open_store(args, writing=True)
    unknown: list[str] = []  # why the CPU's ceilings are not known, where they are not
    done = import_files(
        store,
        name,
        args.sources,
        options,
        defaults,
        args.replace,
        progress,
        _cpu_ceilings(unknown, args.measure_ceilings),
    )
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
    if args.measure_ceilings and result.run.meta.gpu != CPU:
        say(f"note: --measure-ceilings: nothing measured: run {name!r} is not a CPU run (its roofs are its GPU's)")
    _warn_without_roofs(result.run, unknown)
    return 0


def _existing_captures(names: list[str]) -> list[Path]:
    """The capture traces, each checked to exist before anything is read."""
    paths = [Path(name) for name in names]
    for path in paths:
        if not path.is_file():
            raise InputError(f"--capture {path}: no such file")
    return paths


def _cpu_ceilings(unknown: list[str], measure_again: bool = False) -> CpuCeilings:
    """The ceilings of the CPU a CPU trace was recorded on, where that is this machine (the trace's host_name):
    this CPU's (cached, or measured anew with ``measure_again``). Else none, and why in ``unknown``."""

    def ceilings(sources: list[ImportedSource]) -> dict[str, Any] | None:
        hosts = {source.info.settings.get("host") for source in sources}
        here = socket.gethostname()
        if hosts == {here}:
            return this_cpu_ceilings(measure_again).to_json()
        recorded = ", ".join(sorted(repr(h) for h in hosts if h and h != here))
        unknown.append(
            f"the trace was recorded on host {recorded}, not on this one ({here!r})"
            if recorded
            else "the trace does not say which machine recorded it"
        )
        return None

    return ceilings


def _warn_without_roofs(run: Run, unknown: list[str]) -> None:
    """A run that commands drawing or ranking against roofs would refuse: said now, in one line, with the way
    to give it roofs, rather than one command later."""
    missing = roofs_unknown(run)
    if missing is None:
        return
    why = "; ".join([*unknown, missing])
    needing = "top, chart, report and advise need roofs"
    if run.meta.gpu == CPU:
        fix = (
            "measure that CPU's ceilings on it (hroofline ceilings --measure --out cpu.toml) and import again with "
            "--ceilings cpu.toml --replace, or pass --ceilings cpu.toml to them"
        )
    else:
        fix = (
            "import again with --replace and --gpu NAME (see `hroofline gpus`) or --ceilings FILE, or pass "
            "--ceilings NAME|FILE to them"
        )
    say(f"hroofline: warning: run {run.name!r} has no roofs ({why}): summary works; {needing}: {fix}")
