"""The ncu command lines that profile a training step, built from ``metrics/hierarchical.toml``.

- The metric list is the architecture's ``[collect]`` list.
- Only the profiled steps are profiled: ``--profile-from-start off`` and the workload calls
  cudaProfilerStart/Stop around them.
- Only the launches of the op calls a distinct-launch plan chose (the default after a trace pass):
  ``--nvtx --nvtx-include hroofline@measure/``, the push/pop range the workload opens around those calls
  (:mod:`hroofline.collect.op_calls`). Else (``--every-launch``) every kernel inside the phases:
  ``--nvtx --nvtx-include hroofline@forward`` and so on. The phases are
  NVTX start/end ranges (no trailing ``/`` in the filter, which would mean push/pop ranges), so kernels
  that backward launches from autograd threads are included and tagged.
- Clock and cache control are explicit choices, recorded in the run: ``base`` clocks give repeatable
  counts, ``--cache-control all`` flushes caches between replay passes.
- A compiled step (``profile --compile``) whose mode replays CUDA graphs (reduce-overhead, max-autotune) is
  profiled with ``--graph-profiling node``: each kernel node of a replayed graph is profiled as a kernel of its
  own (ncu's default, said in the command so that the report is never one result per graph).
- One pass exports one ``.ncu-rep`` with every metric; ``groups`` runs the application once per metric
  group (Yang et al.'s way, each pass with few counters, for clean timing) and writes each pass's
  long CSV log, merged launch by launch on import.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hroofline.collect.compiling import replays_graphs
from hroofline.collect.op_calls import MEASURE_RANGE
from hroofline.collect.session import COLLECT_ENV, LAYERS_ENV, STEPS_ENV, WARMUP_ENV
from hroofline.collect.workload import NVTX_DOMAIN, STEP_PHASES, WorkloadConfig
from hroofline.roofs.metricset import MetricSet

CLOCK_CONTROLS = ("base", "none")
CACHE_CONTROLS = ("all", "none")
PASS_MODES = ("one", "groups")
# Metric groups for --passes groups, by the unit whose counters they read.
GROUP_PREFIXES: dict[str, tuple[str, ...]] = {
    "time": ("gpu__time_duration", "sm__cycles_elapsed", "smsp__cycles_elapsed"),
    "flops": ("sm__sass_", "smsp__sass_", "sm__inst_executed_pipe_tensor", "sm__ops_path_tensor", "smsp__inst"),
    "dram": ("dram__",),
    "l2": ("lts__",),
    "l1": ("l1tex__",),
}


@dataclass(frozen=True)
class NcuSettings:
    clock_control: str = "base"
    cache_control: str = "all"
    passes: str = "one"
    warmup: int = 2
    steps: int = 1
    kernel_filter: tuple[str, ...] = ()  # ncu options choosing kernels by name (``--kernels top:N``)
    distinct: bool = False  # only the op calls the workload marks as ``measure`` (one launch per signature)
    compile: str | None = None  # the torch.compile mode of the profiled model (profile --compile)

    @property
    def graph_nodes(self) -> bool:
        """Whether the step replays CUDA graphs, whose kernel nodes ncu is to profile one by one."""
        return replays_graphs(self.compile, on_gpu=True)

    def recorded(self) -> dict[str, str]:
        recorded = {
            "clock_control": self.clock_control,
            "cache_control": self.cache_control,
            "passes": self.passes,
            "warmup_steps": str(self.warmup),
            "profiled_steps": str(self.steps),
        }
        if self.compile is not None:
            recorded["compile"] = self.compile
        if self.graph_nodes:
            recorded["graph_profiling"] = "node"
        if self.kernel_filter:
            recorded["kernel_filter"] = " ".join(self.kernel_filter)
        if self.distinct:
            recorded["launches"] = "one per signature, the rest copied"
        elif not self.kernel_filter:
            recorded["launches"] = "every launch"
        return recorded


def workload_command(
    config: WorkloadConfig,
    settings: NcuSettings,
    layers: bool = True,
    memory_out: Path | None = None,
    measure_calls: Path | None = None,
) -> list[str]:
    """The workload module's command line; with ``memory_out`` it writes each phase's CUDA memory there, with
    ``measure_calls`` it marks those op calls for ncu."""
    shape = ["--input-shape", ",".join(map(str, config.input_shape))] if config.input_shape else []
    tokens = ["--seq-len", str(config.seq_len)] if config.seq_len else []
    layout = ["--channels-last"] if config.channels_last else []
    compiled = ["--compile", config.compile] if config.compile else []
    return [
        sys.executable,
        "-m",
        "hroofline.collect.workload",
        "--arch",
        config.arch,
        *shape,
        *tokens,
        *layout,
        *compiled,
        "--batch-size",
        str(config.batch_size),
        "--precision",
        config.precision,
        "--optimizer",
        config.optimizer,
        "--warmup",
        str(settings.warmup),
        "--steps",
        str(settings.steps),
        "--device",
        "cuda",
        *([] if layers else ["--no-layers"]),
        *(["--memory-out", str(memory_out)] if memory_out is not None else []),
        *(["--measure-calls", str(measure_calls)] if measure_calls is not None else []),
    ]


def script_command(script: Path, arguments: list[str], settings: NcuSettings, layers: bool = True) -> list[str]:
    """The user's script, told through its environment to mark phases, modules and the profiled steps
    (:mod:`hroofline.collect.session`)."""
    environment = {
        COLLECT_ENV: "ncu",
        LAYERS_ENV: "1" if layers else "0",
        WARMUP_ENV: str(settings.warmup),
        STEPS_ENV: str(settings.steps),
    }
    return ["env", *(f"{k}={v}" for k, v in environment.items()), sys.executable, str(script), *arguments]


def nvtx_filter(distinct: bool = False) -> list[str]:
    if distinct:
        return ["--nvtx", "--nvtx-include", f"{NVTX_DOMAIN}@{MEASURE_RANGE}/"]
    arguments = ["--nvtx"]
    for phase in STEP_PHASES:
        arguments += ["--nvtx-include", f"{NVTX_DOMAIN}@{phase}"]
    return arguments


def metric_groups(metrics: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for metric in metrics:
        group = next((g for g, prefixes in GROUP_PREFIXES.items() if metric.startswith(prefixes)), "other")
        groups.setdefault(group, []).append(metric)
    # Every pass also reads the kernel time, so that the merged launches can be checked against each other.
    time = groups.get("time", [])
    return {g: (m if g == "time" else [*time, *m]) for g, m in groups.items()}


@dataclass(frozen=True)
class NcuPass:
    name: str
    command: list[str]
    output: Path
    log: Path  # ncu's console output, kept apart from the results it imports

    @property
    def writes_log_file(self) -> bool:
        """ncu --log-file: the tool's own messages go to ``output`` with the results, not to stdout."""
        return "--log-file" in self.command


def ncu_passes(
    ncu: str, metric_set: MetricSet, arch: str, workload: list[str], settings: NcuSettings, out_dir: Path
) -> list[NcuPass]:
    """The ncu invocations for one profile: one pass, or one per metric group into ``out_dir/groups``."""
    metrics = metric_set.metrics_to_collect(arch)
    common = [
        ncu,
        "--target-processes",
        "all",
        "--profile-from-start",
        "off",
        *nvtx_filter(settings.distinct),
        *(["--graph-profiling", "node"] if settings.graph_nodes else []),
        "--clock-control",
        settings.clock_control,
        "--cache-control",
        settings.cache_control,
        *settings.kernel_filter,
    ]
    if settings.passes == "one":
        report = out_dir / "profile.ncu-rep"
        command = [*common, "--metrics", ",".join(metrics), "--export", str(report), "--force-overwrite", *workload]
        return [NcuPass("all metrics", command, report, out_dir / "logs" / "all-metrics.log")]
    passes = []
    for group, group_metrics in metric_groups(metrics).items():
        log = out_dir / "groups" / f"{group}.csv"
        command = [*common, "--metrics", ",".join(group_metrics), "--csv", "--page", "details", "--log-file", str(log)]
        passes.append(NcuPass(group, [*command, *workload], log, out_dir / "logs" / f"{group}.log"))
    return passes
