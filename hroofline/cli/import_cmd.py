"""``hroofline import``: sources into a run, all or nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.api.imports import ImportSettings, import_with
from hroofline.api.rank_import import import_ranks, is_rank_folder
from hroofline.cli.common import add_store_option, open_store, progress, say
from hroofline.cli.profile_common import this_cpu_ceilings
from hroofline.model.run import Run
from hroofline.roofs.ceilings import CPU, roofs_unknown

HELP = """\
Import ncu output or PyTorch profiler traces into a run. A SOURCE is a .ncu-rep report, an ncu CSV export
(long --page details or wide --page raw, any ncu version from 2020 on), an ncu console log (metric names or
ncu's default sections), a folder of passes over one run (Yang et al.'s one-metric-per-run logs, a time pass
and an instruction pass, ...), or a torch.profiler (Kineto) trace (.json); each may be gzip- or xz-compressed.
An Nsight Systems export (nsys export --type sqlite; a .nsys-rep is exported on the fly where nsys is on PATH)
is read as a trace of every rank it holds (one per GPU where each process drives one), its ops, phases and
layers from NVTX (emit_nvtx's op ranges, FSDP's module hooks, your own ranges).

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
  hroofline import profile.sqlite --run fsdp --gpu h100   # an Nsight Systems export: both GPUs' ranks
  hroofline import traces/ --run ddp-1k --jobs 8   # a folder of per-rank traces, 8 at a time, resumable
  hroofline import trace.json --run mine --ceilings cpu.toml   # a trace made on the CPU, its CPU's ceilings
  hroofline import replay.json.gz --capture capture.pt.trace.json.gz --run vllm  # graph replays: their ops
  hroofline import compiled.json.xz --run c --compile-log torch-trace.tar.xz   # torch.compile'd: kernels on modules
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
    parser.add_argument(
        "--compile-log",
        metavar="LOG",
        help="traces of a torch.compile'd model: its compile log (the folder TORCH_TRACE=DIR wrote, with "
        "INDUCTOR_PROVENANCE=1 set; a .tar.xz of it, or one .log), which places each compiled kernel on its module "
        "(default: the compiled region's label)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="traces of many ranks (a folder of them, or several files): import them rank by rank in N worker "
        "processes, each rank stored on its own (memory: one rank's trace per worker), resumable when killed "
        "(default for a folder of traces: the CPU count)",
    )
    parser.add_argument("--precision", help="label for the run's precision, e.g. fp32, amp (metadata only)")
    parser.add_argument(
        "--git-commit",
        metavar="SHA",
        help="the commit of the code the sources measured (`git rev-parse HEAD`), recorded with each source for CI "
        "(metadata only: a report or trace states none)",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="make the run these sources alone (re-import with other options, e.g. --gpu); the old run stays "
        "until the new one is written",
    )
    add_store_option(parser)
    parser.set_defaults(run_command=run)


def settings_of(args: argparse.Namespace) -> ImportSettings:
    """The command's options as the API's: one set of checks and defaults for both."""
    return ImportSettings(
        gpu=args.gpu,
        phase=args.phase,
        ceilings=args.ceilings,
        measure_ceilings=args.measure_ceilings,
        force_gpu=args.force_gpu,
        merge=args.merge,
        steps=args.steps,
        rank=args.rank,
        capture=args.capture,
        compile_log=args.compile_log,
        precision=args.precision,
        replace=args.replace,
        git_commit=args.git_commit,
    )


def run(args: argparse.Namespace) -> int:
    name = args.run
    if args.jobs is not None or any(is_rank_folder(Path(source)) for source in args.sources):
        return _run_ranks(args)
    store = open_store(args, writing=True)
    # this_cpu_ceilings is looked up when called: it says what it measured or found cached
    done = import_with(store, name, args.sources, settings_of(args), progress, lambda again: this_cpu_ceilings(again))
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
    _warn_without_roofs(result.run, done.ceilings_unknown)
    return 0


def _run_ranks(args: argparse.Namespace) -> int:
    store = open_store(args, writing=True)
    done = import_ranks(store, args.run, args.sources, settings_of(args), jobs=args.jobs, progress=say)
    kept = f", {done.already_in_run} in the run already" if done.already_in_run else ""
    say(
        f"run {args.run!r}: {done.launches} launches from {len(done.meta.sources)} ranks "
        f"({done.imported} imported now{kept}) in {store.root}"
    )
    return 0


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
