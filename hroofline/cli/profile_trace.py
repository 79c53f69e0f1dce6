"""``profile --backend trace``, and the trace passes before ncu on a model: the distinct-launch plan (the
default) and ``--kernels top:N``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hroofline.cli.common import say, stage
from hroofline.cli.profile_common import cpu_ceilings, store_profiled
from hroofline.collect.distinct_launches import join_distinct, plan_distinct_launches, write_measure_calls
from hroofline.collect.ncu_top import join_counters, kernel_filter_arguments, parse_kernels_option, top_kernel_names
from hroofline.collect.same_step import highest_clock
from hroofline.collect.workload import WorkloadConfig
from hroofline.errors import ProfilingError
from hroofline.importers.source import ImportedSource
from hroofline.importers.trace_source import MARKED_CALLS_SETTING
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.ceilings import CPU
from hroofline.store.runs import RunDefaults

MEASURE_CALLS_FILE = "measure-calls.json"  # the op calls the ncu pass marks, written by the trace pass


def profile_out_dir(args: argparse.Namespace, run: str) -> Path:
    """Where a profile's trace, reports and logs go: --out-dir, else hroofline-profiles/RUN."""
    return Path(args.out_dir or Path("hroofline-profiles") / run)


def profile_trace_run(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName | None, run: str, warmup: int
) -> None:
    with stage(f"traced {config.arch}'s {warmup} warm-up and {args.steps} profiled step(s)"):
        source = _trace_pass(args, config, gpu, run, warmup)
    _store_trace_run(args, source, gpu, config.precision, run)


def profile_script_trace_run(
    args: argparse.Namespace, script: Path, script_args: list[str], gpu: GpuName | None, run: str, warmup: int
) -> None:
    """``profile --script --backend trace``: torch.profiler around the steps the script marks, in this process."""
    from hroofline.collect.trace_backend import profile_script_trace

    _check_gpu_visible(gpu)
    trace_file = profile_out_dir(args, run) / "trace.json"
    with stage(f"traced {script.name}'s {warmup} warm-up and {args.steps} profiled step(s)"):
        source = profile_script_trace(script, script_args, warmup, args.steps, trace_file, say, gpu is not None)
    _say_trace_notes(source, trace_file)
    _store_trace_run(args, source, gpu, None, run)


def _store_trace_run(
    args: argparse.Namespace, source: ImportedSource, gpu: GpuName | None, precision: str | None, run: str
) -> None:
    """The trace's run, replacing any of that name: on the CPU with its ceilings (--ceilings, else this CPU's)."""
    defaults = (
        RunDefaults(gpu.name, precision, None) if gpu else RunDefaults(CPU, precision, cpu_ceilings(args).to_json())
    )
    store_profiled(args, run, source, defaults)


def _check_gpu_visible(gpu: GpuName | None) -> None:
    if gpu is not None:
        from hroofline.collect.preflight import gpu_visible

        if not gpu_visible():
            raise ProfilingError(f"cannot profile on {gpu.name} here: PyTorch sees no NVIDIA GPU", "profile --gpu cpu")


def _say_trace_notes(source: ImportedSource, trace_file: Path) -> None:
    for note in source.info.notes:
        say(f"  note: {note}")
    for warning in source.info.warnings:
        say(f"hroofline: warning: {warning}")
    say(f"  trace: {trace_file} (open it in Perfetto or chrome://tracing)")


@dataclass(frozen=True)
class TracePlan:
    """What a trace pass decided for the ncu pass after it: ncu's extra filter options or the op calls to mark,
    how many launches ncu is to profile, and how its counters join the trace's run."""

    trace: ImportedSource
    join: Callable[[ImportedSource], ImportedSource]
    kernel_filter: tuple[str, ...] = ()
    measure_calls: Path | None = None
    expected_launches: int | None = None


def _trace_pass(
    args: argparse.Namespace,
    config: WorkloadConfig,
    gpu: GpuName | None,
    run: str,
    warmup: int,
    mark_calls: bool = False,
) -> ImportedSource:
    from hroofline.collect.trace_backend import profile_trace

    _check_gpu_visible(gpu)
    trace_file = profile_out_dir(args, run) / "trace.json"
    source = profile_trace(config, warmup, args.steps, trace_file, say, mark_calls)
    _say_trace_notes(source, trace_file)
    return source


def top_kernels_pass(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName, run: str, warmup: int
) -> TracePlan:
    """The trace pass of ``--kernels top:N``: every kernel's time, and the N names ncu is to profile."""
    count = parse_kernels_option(args.kernels)
    say(f"trace pass: every kernel of the step, to choose the {count} kernel names ncu profiles")
    trace = _trace_pass(args, config, gpu, run, warmup)
    selection = top_kernel_names(trace.launches, count)
    share = f"{100 * selection.share:.1f}%"
    say(
        f"ncu pass: the top {len(selection.names)} kernel names ({share} of kernel time, {selection.launches} launches)"
    )
    return TracePlan(
        trace,
        lambda measured: join_counters(trace, measured, selection, highest_clock(gpu)),
        kernel_filter=tuple(kernel_filter_arguments(selection)),
        expected_launches=selection.launches,
    )


def distinct_launches_pass(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName, run: str, warmup: int
) -> TracePlan:
    """The trace pass of distinct-launch profiling: every launch's signature and op call, and the calls whose
    launches ncu measures (one per signature at least)."""
    say("trace pass: every launch of the step with its op and inputs, to profile each distinct launch once")
    trace = _trace_pass(args, config, gpu, run, warmup, mark_calls=True)
    if MARKED_CALLS_SETTING not in trace.info.settings:
        raise ProfilingError(
            "the trace pass recorded no op calls (no ATen op ran in the profiled step?)",
            "profile with --every-launch",
        )
    plan = plan_distinct_launches(trace.launches)
    share = 100 * plan.profiled / plan.launches
    say(
        f"ncu pass: {plan.profiled:,} of {plan.launches:,} launches ({share:.1f}%), at least one of each of "
        f"{plan.signatures:,} signatures, in {len(plan.calls):,} op calls; the rest get copied counters"
    )
    calls = write_measure_calls(plan, profile_out_dir(args, run) / MEASURE_CALLS_FILE)
    return TracePlan(
        trace,
        lambda measured: join_distinct(trace, measured, plan, highest_clock(gpu)),
        measure_calls=calls,
        expected_launches=plan.profiled,
    )
