"""``profile --backend trace`` and ``profile --backend ncu --kernels top:N`` on a model."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.cli.common import open_store, say
from hroofline.cli.profile_common import cpu_ceilings, report_phases
from hroofline.collect.ncu_top import KernelSelection, parse_kernels_option, top_kernel_names
from hroofline.collect.workload import WorkloadConfig
from hroofline.errors import ProfilingError
from hroofline.importers.source import ImportedSource
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.ceilings import CPU
from hroofline.store.runs import RunDefaults


def profile_out_dir(args: argparse.Namespace, run: str) -> Path:
    """Where a profile's trace, reports and logs go: --out-dir, else hroofline-profiles/RUN."""
    return Path(args.out_dir or Path("hroofline-profiles") / run)


def profile_trace_run(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName | None, run: str, warmup: int
) -> None:
    source = _trace_pass(args, config, gpu, run, warmup)
    store = open_store(args)
    defaults = RunDefaults(gpu.name if gpu else CPU, config.precision, None)
    if gpu is None:
        defaults = RunDefaults(CPU, config.precision, cpu_ceilings(args).to_json())
    result = store.replace_run(run, [source], defaults)
    report_phases(result.run, store.root)


def _trace_pass(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName | None, run: str, warmup: int
) -> ImportedSource:
    from hroofline.collect.trace_backend import profile_trace

    if gpu is not None:
        from hroofline.collect.preflight import gpu_visible

        if not gpu_visible():
            raise ProfilingError(f"cannot profile on {gpu.name} here: PyTorch sees no NVIDIA GPU", "profile --gpu cpu")
    trace_file = profile_out_dir(args, run) / "trace.json"
    source = profile_trace(config, warmup, args.steps, trace_file, say)
    for note in source.info.notes:
        say(f"  note: {note}")
    say(f"  trace: {trace_file} (open it in Perfetto or chrome://tracing)")
    return source


def top_kernels_pass(
    args: argparse.Namespace, config: WorkloadConfig, gpu: GpuName, run: str, warmup: int
) -> tuple[ImportedSource, KernelSelection]:
    """The trace pass of ``--kernels top:N``: every kernel's time, and the N names ncu is to profile."""
    count = parse_kernels_option(args.kernels)
    say(f"trace pass: every kernel of the step, to choose the {count} kernel names ncu profiles")
    trace = _trace_pass(args, config, gpu, run, warmup)
    selection = top_kernel_names(trace.launches, count)
    share = f"{100 * selection.share:.1f}%"
    say(
        f"ncu pass: the top {len(selection.names)} kernel names ({share} of kernel time, {selection.launches} launches)"
    )
    return trace, selection
