"""``hroofline profile``: a training step on a GPU with ncu (or torch.profiler), or on the CPU, into a run."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.cli.common import (
    add_store_option,
    add_workload_options,
    open_store,
    positive_int,
    say,
    stage,
    workload_config,
    workload_name,
    write_out,
)
from hroofline.cli.profile_common import cpu_ceilings, store_profiled
from hroofline.cli.profile_trace import (
    TracePlan,
    distinct_launches_pass,
    profile_out_dir,
    profile_script_trace_run,
    profile_trace_run,
    top_kernels_pass,
)
from hroofline.collect.compiling import COMPILE_MODES, COMPILED_WARMUP, compiled_suffix, replays_graphs
from hroofline.collect.models import check_model
from hroofline.collect.ncu_top import parse_kernels_option
from hroofline.collect.workload import canonical_precision
from hroofline.errors import UsageError
from hroofline.roofs.catalog import GpuName, refuse_for_ncu, resolve_gpu
from hroofline.roofs.ceilings import CPU, Ceilings
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.files import check_run_name
from hroofline.store.runs import RunDefaults

MEMORY_FILE = "memory.json"  # where the profiled workload writes each phase's CUDA memory

if TYPE_CHECKING:
    from hroofline.collect.ncu_command import NcuSettings
    from hroofline.collect.preflight import NcuTool
    from hroofline.importers.source import ImportedSource

PROFILE_EPILOG = """\
examples:
  hroofline profile --arch resnet18 --gpu cpu --batch-size 2          the CPU, with ceilings measured here
  hroofline profile --arch resnet34 --gpu v100 --precision amp        ncu on a V100 (ncu 2024.1 or older): a trace
                                                                       pass, then ncu on one launch per signature
  hroofline profile --arch resnet34 --gpu h100-sxm --every-launch     ncu on every launch (Yang's way; slower)
  hroofline profile --arch vit_b_16 --gpu h100-sxm --passes groups    one ncu run per metric group
  hroofline profile --arch resnet50 --gpu a100 --dry-run              print the ncu command only
  hroofline profile --arch resnet18 --gpu cpu --backend trace --batch-size 2   torch.profiler: times measured,
                                                                       work from the ops' shapes
  hroofline profile --arch resnet50 --gpu a100 --kernels top:5        a trace, then ncu on the 5 longest kernels
  hroofline profile --arch deeplabv3_resnet50 --input-shape 3,512,512 --gpu cpu --batch-size 2
  hroofline profile --model mypkg.models:build --gpu cpu               your own model (FACTORY() -> nn.Module)
  hroofline profile --arch resnet18 --gpu cpu --batch-size 2 --input-shape 3,64,64 --compile
                                                                       the model torch.compile'd (on the CPU: a
                                                                       trace, Inductor's C++ code); run
                                                                       resnet18-fp32-cpu-b2-3x64x64-compiled-trace
  hroofline profile --model hf:gpt2 --gpu h100 --compile reduce-overhead   CUDA graphs: ncu profiles every
                                                                       launch, each graph node as a kernel
  hroofline profile --gpu cpu --script train.py --epochs 1             your own script, marked with
                                                                       hroofline.profiled_step/phase/annotate
  hroofline profile --gpu h100 --backend trace --script train.py      your script under torch.profiler (no
                                                                       counter permission needed)

On a GPU, the step's phases and its modules are NVTX start/end ranges (domain 'hroofline'), which also
cover the kernels PyTorch's autograd threads launch; ncu profiles only the phases, only in the profiled
steps, and every kernel gets the layer (module path) it ran in, in backward too.

ncu costs about 0.3 s per launch it profiles (H100, the hierarchical metric set). By default a torch.profiler
trace pass first records every launch with its kernel, grid, block, op and op inputs; launches that agree in all
of these (a signature) do the same work, so ncu profiles one of each (GPT-2's step: 168 of 1,118 launches) and
the others get its counters with their own measured time. --every-launch profiles each launch instead: for
data-dependent kernels, or when the copy check warns.
"""


def register(commands: argparse._SubParsersAction) -> None:
    profile = commands.add_parser(
        "profile",
        description="Run a training step of a model (torchvision, hf: transformer configs or your own; random "
        "weights, synthetic batch: nothing is downloaded), or your own training script, with its forward, "
        "backward and optimizer phases and its layers marked, collect the hierarchical metric set per kernel, "
        "and store the result as a run for summary, top, chart and report.",
        epilog=PROFILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_workload_options(profile, "a catalog GPU (see `hroofline gpus`) or cpu")
    profile.add_argument(
        "--script",
        nargs=argparse.REMAINDER,
        help="--script SCRIPT [ARGS...]: profile your own training script instead of --arch/--model (the last "
        "option: what follows goes to the script); it marks its steps with hroofline.profiled_step(), phases "
        "with hroofline.phase(), layers with hroofline.annotate(model); a script that calls torch.compile itself is "
        "profiled as it runs, compiled (--compile is for --arch and --model)",
    )
    profile.add_argument(
        "--compile",
        nargs="?",
        const="default",
        choices=COMPILE_MODES,
        metavar="MODE",
        help="torch.compile the model (its loss and optimizer stay eager) in MODE: default (--compile alone), "
        f"max-autotune or reduce-overhead (both replay CUDA graphs on a GPU); {COMPILED_WARMUP} warm-up steps "
        "(compilation with the CUDA graph warm-up, their recording, a first replay) run before the measured "
        "step; the run is named "
        "...-compiled[-MODE]. A trace (--backend trace, and on the CPU) places the compiled kernels on their "
        "modules by the compilation's log (TORCH_TRACE with Inductor's provenance, kept in --out-dir's "
        "compile-log/); under ncu they carry the layer <compiled>. With --backend trace on a GPU the modes that "
        "replay graphs also record the warm-up steps' trace (trace-capture.json), which attributes the replayed "
        "kernels to their ops. Not with --script: your script compiles its model itself and is profiled as it "
        "runs",
    )
    profile.add_argument(
        "--backend",
        choices=BACKENDS,
        help="how to measure: ncu (counters per kernel; on a GPU where ncu is installed, the default), trace "
        "(torch.profiler: measured kernel or op times with analytic work from the recorded shapes; no counter "
        "permission needed; the default on a GPU without ncu, and with --compile on the CPU), recorder (--gpu cpu "
        "only, the default there: "
        "every ATen op timed at the dispatcher)",
    )
    profile.add_argument("--steps", type=positive_int, default=1, metavar="N", help="profiled steps (1)")
    profile.add_argument(
        "--warmup", type=int, metavar="N", help="unprofiled steps first (2; with --script: profiled_step entries, 1)"
    )
    profile.add_argument("--no-layers", action="store_true", help="no NVTX range per module (GPU)")
    profile.add_argument(
        "--run",
        help="run name (default: MODEL-PRECISION-GPU[-bN][-CxHxW|-sN][-adam][-trace], naming what differs from "
        "the defaults: batch 32, the model's own input, sgd; --backend trace adds -trace; SCRIPT-GPU for --script)",
    )
    profile.add_argument("--replace", action="store_true", help="replace the run if it exists (else: refuse)")
    gpu_options = profile.add_argument_group("GPU (ncu) options")
    gpu_options.add_argument("--ncu", metavar="PATH", help="the ncu to use (default: ncu on PATH)")
    gpu_options.add_argument(
        "--passes", choices=("one", "groups"), help="one ncu run (default), or one per metric group (Yang's way)"
    )
    gpu_options.add_argument("--clock-control", choices=("base", "none"), help="ncu clock control (default base)")
    gpu_options.add_argument("--cache-control", choices=("all", "none"), help="ncu cache control (default all)")
    gpu_options.add_argument(
        "--out-dir", metavar="DIR", help="where ncu's reports and logs go (hroofline-profiles/RUN)"
    )
    gpu_options.add_argument(
        "--kernels",
        metavar="top:N",
        help="ncu on the N kernel names with the most time only: a torch.profiler trace pass measures every "
        "kernel first, then ncu profiles just those names' launches; their counters replace the analytic work "
        "of the same launches in the trace's run",
    )
    gpu_options.add_argument(
        "--every-launch",
        action="store_true",
        help="ncu profiles every launch of the phases (no trace pass, no copied counters; about 0.3 s a launch on "
        "an H100); the default profiles one launch per signature and copies its counters to the identical ones",
    )
    gpu_options.add_argument("--dry-run", action="store_true", help="print the ncu command line(s) and stop")
    gpu_options.add_argument(
        "--force-gpu",
        action="store_true",
        help="profile this machine's GPU as --gpu even where its SM count differs (a MIG slice, a GPU the catalog "
        "lacks: name one of its architecture; its roofs then come from its own reports)",
    )
    cpu_options = profile.add_argument_group("CPU options")
    cpu_options.add_argument(
        "--ceilings",
        metavar="FILE",
        help="ceilings file for the run (default: this CPU's, measured once per machine by its first profile, "
        "which prints how long it took, and cached in $HROOFLINE_CACHE_DIR, else $XDG_CACHE_HOME/hroofline, else "
        "~/.cache/hroofline)",
    )
    cpu_options.add_argument(
        "--measure-ceilings",
        action="store_true",
        help="measure this CPU's ceilings anew (a quiet machine gives the truest roofs) and cache them for later runs",
    )
    add_store_option(profile)
    profile.set_defaults(run_command=run_profile)


BACKENDS = ("ncu", "trace", "recorder")
HROOFLINE_OPTIONS = (
    "--store",
    "--run",
    "--replace",
    "--ceilings",
    "--measure-ceilings",
    "--gpu",
    "--steps",
    "--warmup",
    "--dry-run",
)
GPU_ONLY_OPTIONS = (
    "ncu",
    "passes",
    "clock_control",
    "cache_control",
    "kernels",
    "every_launch",
    "dry_run",
    "force_gpu",
)


def run_profile(args: argparse.Namespace) -> int:
    on_cpu = args.gpu.lower() == CPU
    if args.warmup is not None and args.warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    gpu_only = [f"--{name.replace('_', '-')}" for name in GPU_ONLY_OPTIONS if getattr(args, name) not in (None, False)]
    if on_cpu and gpu_only:
        raise UsageError(f"{', '.join(gpu_only)}: only for profiling a GPU with ncu, not for --gpu cpu")
    _check_backend(args, on_cpu, gpu_only)
    if args.measure_ceilings and (not on_cpu or args.ceilings):
        what = "--ceilings FILE" if args.ceilings else f"--gpu {args.gpu} (a GPU's roofs are its catalog's)"
        raise UsageError(f"--measure-ceilings: measures this CPU's ceilings, not with {what}")
    if args.backend == "trace" and gpu_only:
        raise UsageError(f"{', '.join(gpu_only)}: only for --backend ncu, not for --backend trace")
    if args.kernels and args.every_launch:
        raise UsageError("--kernels and --every-launch: choose one (top kernel names, or every launch)")
    if args.kernels:
        parse_kernels_option(args.kernels)
        if args.dry_run or args.script is not None:
            what = "--dry-run" if args.dry_run else "--script"
            raise UsageError(f"--kernels: not with {what} (its trace pass chooses the kernels, on the model)")
    _check_compile(args)
    if args.script is not None:
        return _profile_script(args, on_cpu)
    config = replace(workload_config(args, "cpu" if on_cpu else "cuda"), compile=args.compile)
    gpu = None if on_cpu else resolve_gpu(args.gpu)
    cpu_backend = "trace" if args.compile else "recorder"  # the recorder sees ATen ops: compiled code runs none
    backend = args.backend or (cpu_backend if on_cpu else _default_gpu_backend(args))
    suffix = compiled_suffix(args.compile) + ("-trace" if backend == "trace" else "")
    run = check_run_name(args.run or workload_name(config, args.gpu) + suffix)
    check_model(config.model)  # before minutes of measuring or profiling
    _refuse_existing(args, run)  # after the arguments: a mistake in them is said first
    warmup = _warmup_steps(args, on_cpu)
    if backend == "trace":
        profile_trace_run(args, config, gpu, run, warmup)
    elif on_cpu:
        from hroofline.collect.cpu_backend import profile_cpu

        ceilings = cpu_ceilings(args)
        with stage(f"ran {config.arch}'s {warmup} warm-up and {args.steps} profiled step(s)"):
            source = profile_cpu(config, warmup, args.steps, say)
        _store_cpu(args, run, source, config.precision, ceilings)
    else:
        from hroofline.collect.ncu_command import workload_command

        assert gpu is not None
        settings = _ncu_settings(args, warmup)
        plan, tool, calls = None, None, None
        if args.compile:
            _say_compiled_under_ncu(args.compile, args.every_launch)
        elif args.dry_run and not args.every_launch:
            say(
                "note: this command profiles every launch; by default hroofline first runs a trace pass and profiles "
                "one launch per signature, which needs the trace's op calls (run hroofline profile itself)"
            )
        elif not args.every_launch:
            tool = _preflight(args, gpu)  # before the trace pass: ncu must be there to use what it finds
            plan = (top_kernels_pass if args.kernels else distinct_launches_pass)(args, config, gpu, run, warmup)
            settings = replace(settings, kernel_filter=plan.kernel_filter, distinct=plan.measure_calls is not None)
            calls = plan.measure_calls
        memory_out = profile_out_dir(args, run) / MEMORY_FILE
        command = workload_command(config, settings, not args.no_layers, memory_out, calls)
        _profile_gpu(args, gpu, command, settings, run, config.arch, plan, tool)
    return 0


def _check_compile(args: argparse.Namespace) -> None:
    if args.compile is None:
        return
    if args.script is not None:
        raise UsageError(
            "--compile: not with --script (your script compiles its model itself, and is profiled as it runs)"
        )
    if args.backend == "recorder":
        raise UsageError(
            "--compile: not with --backend recorder (it times ATen ops; compiled code runs Inductor's kernels)",
            "use --backend trace",
        )
    if args.kernels:
        raise UsageError("--compile: not with --kernels (ncu profiles every launch of a compiled step)")


def _warmup_steps(args: argparse.Namespace, on_cpu: bool) -> int:
    """The warm-up steps before the measured one: 2, a compiled step's 3 (compilation with the CUDA graphs' warm-up,
    their recording, a first replay); fewer than a compiled step needs (1; 2 where it replays CUDA graphs) is said,
    since the measured step then compiles or records."""
    if args.compile is None:
        return 2 if args.warmup is None else args.warmup
    needed = 2 if replays_graphs(args.compile, not on_cpu) else 1
    if args.warmup is not None and args.warmup < needed:
        what = "records its CUDA graphs" if args.warmup else "compiles the model"
        say(f"hroofline: warning: --warmup {args.warmup}: the measured step {what} (--compile wants {needed})")
    return COMPILED_WARMUP if args.warmup is None else args.warmup


def _say_compiled_under_ncu(mode: str, every_launch: bool) -> None:
    if not every_launch:  # the distinct-launch pass marks ATen op calls, and Inductor's kernels are launched by none
        say("--compile: ncu profiles every launch of the step (one launch per signature needs the op of each)")
    if replays_graphs(mode, on_gpu=True):
        say(
            f"--compile {mode}: the step replays CUDA graphs; ncu profiles each graph node as a kernel "
            "(--graph-profiling node)"
        )


def _check_backend(args: argparse.Namespace, on_cpu: bool, gpu_only: list[str]) -> None:
    if args.backend == "recorder" and not on_cpu:
        raise UsageError("--backend recorder: only with --gpu cpu", "on a GPU use --backend ncu or trace")
    if args.backend == "ncu" and on_cpu:
        raise UsageError(
            "--backend ncu: not with --gpu cpu (ncu profiles NVIDIA GPUs)", "use --backend trace or recorder"
        )
    if not on_cpu and args.backend != "trace" and (args.backend == "ncu" or gpu_only):
        # an AMD GPU is profiled with a trace only, its default backend
        refuse_for_ncu(resolve_gpu(args.gpu), "--backend ncu" if args.backend == "ncu" else gpu_only[0])


def _default_gpu_backend(args: argparse.Namespace) -> str:
    """ncu where it is installed and may read the counters; else, on a machine with a GPU, a trace (said on
    stderr); without a GPU, ncu, whose checks then say what is missing."""
    from hroofline.collect.preflight import counters_denied, find_ncu, gpu_visible

    if resolve_gpu(args.gpu).vendor != "nvidia":
        return "trace"  # ncu profiles NVIDIA GPUs only
    if args.dry_run or args.ncu or args.kernels or args.every_launch:
        return "ncu"  # asked for ncu's options: ncu it is, or its checks say why not
    if find_ncu(None) is None:
        if not gpu_visible():
            return "ncu"
        say("ncu is not on PATH: collecting a torch.profiler trace instead (--backend trace)")
        return "trace"
    if counters_denied():
        say("the GPU's performance counters are for administrators only: collecting a torch.profiler trace instead")
        return "trace"
    return "ncu"


def _refuse_existing(args: argparse.Namespace, run: str) -> None:
    if not args.dry_run and not args.replace and open_store(args, writing=True).has_run(run):
        raise UsageError(f"run {run!r} exists already", "pass --replace to profile it anew, or --run NAME")


def _profile_script(args: argparse.Namespace, on_cpu: bool) -> int:
    workload_options = (
        "arch",
        "model",
        "input_shape",
        "seq_len",
        "precision",
        "batch_size",
        "optimizer",
        "channels_last",
    )
    model_options = [o for o in workload_options if getattr(args, o) is not None]
    if model_options:
        names = ", ".join(f"--{o.replace('_', '-')}" for o in model_options)
        raise UsageError(f"{names}: not with --script (the script builds its own model, batch and optimizer)")
    if not args.script:
        raise UsageError("--script needs the script to run: --script train.py [ARGS]")
    script, script_args = Path(args.script[0]), list(args.script[1:])
    if not script.is_file():
        raise UsageError(f"--script {script}: no such file")
    ours = [a for a in script_args if a.split("=")[0] in HROOFLINE_OPTIONS]
    if ours:
        say(
            f"hroofline: warning: {', '.join(ours)} after --script go to the script, not to hroofline "
            "(put hroofline's options before --script)"
        )
    gpu = None if on_cpu else resolve_gpu(args.gpu)
    backend = args.backend or ("recorder" if on_cpu else _default_gpu_backend(args))
    suffix = "-trace" if backend == "trace" else ""
    run = check_run_name(args.run or f"{script.stem}-{args.gpu.lower()}{suffix}")
    _refuse_existing(args, run)
    warmup = 1 if args.warmup is None else args.warmup
    if backend == "trace":
        profile_script_trace_run(args, script, script_args, gpu, run, warmup)
    elif on_cpu:
        from hroofline.collect.cpu_backend import profile_script_cpu

        ceilings = cpu_ceilings(args)
        with stage(f"ran {script}"):
            source = profile_script_cpu(script, script_args, warmup, args.steps, say)
        _store_cpu(args, run, source, None, ceilings)
    else:
        from hroofline.collect.ncu_command import script_command

        if not args.every_launch and not args.dry_run:
            say("--script: ncu profiles every launch (one launch per signature needs a trace pass of a model)")
        settings = _ncu_settings(args, warmup)
        command = script_command(script, script_args, settings, not args.no_layers)
        _profile_gpu(args, gpu, command, settings, run, str(script))
    return 0


def _store_cpu(
    args: argparse.Namespace, run: str, source: ImportedSource, precision: str | None, ceilings: Ceilings
) -> None:
    store_profiled(args, run, source, RunDefaults(CPU, precision, ceilings.to_json()))


def _ncu_settings(args: argparse.Namespace, warmup: int) -> NcuSettings:
    from hroofline.collect.ncu_command import NcuSettings

    return NcuSettings(
        args.clock_control or "base",
        args.cache_control or "all",
        args.passes or "one",
        warmup,
        args.steps,
        compile=getattr(args, "compile", None),
    )


def _ncu_arch(gpu: GpuName) -> str:
    """The GPU's architecture, which the metric set has an ncu metric list for."""
    metric_set = load_metric_set()
    arch = metric_set.arch_of(gpu.cc)
    if arch is None or arch not in metric_set.collect:
        raise UsageError(f"no ncu metric list for {gpu.name} (compute capability {gpu.cc})")
    return arch


def _preflight(args: argparse.Namespace, gpu: GpuName) -> NcuTool:
    from hroofline.collect.preflight import preflight

    return preflight(args.ncu, _ncu_arch(gpu), gpu, args.force_gpu)


def _profile_gpu(
    args: argparse.Namespace,
    gpu: GpuName | None,
    workload: list[str],
    settings: NcuSettings,
    run: str,
    what: str,
    plan: TracePlan | None = None,
    tool: NcuTool | None = None,
) -> None:
    from hroofline.collect.ncu_backend import profile_with_ncu, with_measured_memory
    from hroofline.collect.ncu_command import ncu_passes
    from hroofline.collect.preflight import find_ncu

    assert gpu is not None  # resolved by the caller for every GPU profile
    metric_set = load_metric_set()
    arch = _ncu_arch(gpu)
    out_dir = profile_out_dir(args, run)
    if args.dry_run:
        ncu = find_ncu(args.ncu) or args.ncu or "ncu"
        for ncu_pass in ncu_passes(ncu, metric_set, arch, workload, settings, out_dir):
            write_out(" ".join(_quoted(part) for part in ncu_pass.command) + "\n")
        return
    tool = tool or _preflight(args, gpu)  # the --kernels pass checked it before its trace pass
    say(f"profiling {what} on {gpu.name} ({arch}) with {tool.path} ({tool.version_text})")
    passes = ncu_passes(tool.path, metric_set, arch, workload, settings, out_dir)
    (out_dir / MEMORY_FILE).unlink(missing_ok=True)  # an earlier profile's record is not this one's
    expected = plan.expected_launches if plan is not None else None
    with stage("profiled with ncu"):
        profiled = profile_with_ncu(passes, settings, metric_set, gpu, say, args.force_gpu, expected)
    source = with_measured_memory(profiled, out_dir / MEMORY_FILE)
    shown = 0
    if plan is not None:
        source = plan.join(source)
        shown = len(plan.trace.info.notes)  # said after the trace pass
    for note in source.info.notes[shown:]:
        say(f"  note: {note}")
    for warning in source.info.warnings:
        say(f"hroofline: warning: {warning}")
    precision = None if args.script is not None else canonical_precision(args.precision or "fp32")
    store_profiled(args, run, source, RunDefaults(gpu.name, precision, None))


def _quoted(part: str) -> str:
    return part if part and all(c.isalnum() or c in "-_./=,@:+" for c in part) else repr(part)
