"""Running ncu on the workload and importing what it wrote into the store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hroofline.collect.ncu_command import NcuPass, NcuSettings
from hroofline.collect.preflight import explain_ncu_failure
from hroofline.errors import ProfilingError
from hroofline.importers.build import ImportOptions, import_source
from hroofline.importers.source import ImportedSource
from hroofline.model.run import CUDA_MEMORY_METHOD, PhaseMemory
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.metricset import MetricSet

_PROFILED = re.compile(r"==PROF== Profiling \"")
# A CSV log's result rows start with the launch's ID: ncu --csv prints no "Profiling" line per kernel.
_CSV_LAUNCH = re.compile(r'^"(\d+)","', re.MULTILINE)


@dataclass(frozen=True)
class PassResult:
    name: str
    kernels: int
    log: Path


def progress_line(name: str, done: int, expected: int | None, seconds: float) -> str:
    """'all metrics: 120 of 170 launches profiled, 50 to go, about 15 s left': the time left from the rate
    since the first launch (the application's start-up is not ncu's per-launch cost)."""
    if expected is None or expected <= 0:
        return f"  {name}: {done:,} launches profiled"
    left = max(expected - done, 0)
    line = f"  {name}: {done:,} of {expected:,} launches profiled, {left:,} to go"
    if done > 1 and left:
        line += f", about {_duration(seconds / (done - 1) * left)} left"
    return line


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class _Progress:
    """One progress line: rewritten in place on a terminal, else a line every 10% (or 50 launches)."""

    def __init__(self, name: str, expected: int | None, say: Callable[[str], None]) -> None:
        self.name, self.expected, self.say = name, expected, say
        self.first: float | None = None
        self.terminal = sys.stderr.isatty()
        self.step = max(1, (expected or 500) // 10)

    def launch(self, done: int) -> None:
        now = time.monotonic()
        self.first = self.first if self.first is not None else now
        line = progress_line(self.name, done, self.expected, now - self.first)
        if self.terminal:
            sys.stderr.write("\r" + line.ljust(79))
            sys.stderr.flush()
        elif done == 1 or done % self.step == 0:
            self.say(line)

    def end(self) -> None:
        if self.terminal and self.first is not None:
            sys.stderr.write("\n")


def run_pass(ncu_pass: NcuPass, progress: Callable[[str], None], expected: int | None = None) -> PassResult:
    """One ncu run; its whole output goes to a log beside its result, progress to ``progress`` (with the
    time left where the launches to profile, ``expected``, are known)."""
    ncu_pass.output.parent.mkdir(parents=True, exist_ok=True)
    ncu_pass.log.parent.mkdir(parents=True, exist_ok=True)
    log = ncu_pass.log
    kernels = 0
    lines: list[str] = []
    try:
        process = subprocess.Popen(
            ncu_pass.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
    except OSError as error:
        raise ProfilingError(f"cannot start {ncu_pass.command[0]}: {error}") from error
    assert process.stdout is not None
    shown = _Progress(ncu_pass.name, expected, progress)
    with log.open("w") as log_file:
        log_file.write("$ " + " ".join(ncu_pass.command) + "\n")
        for line in process.stdout:
            log_file.write(line)
            lines.append(line)
            if _PROFILED.search(line):
                kernels += 1
                shown.launch(kernels)
    shown.end()
    returncode = process.wait()
    output = "".join(lines)
    if ncu_pass.writes_log_file and ncu_pass.output.is_file():
        logged = ncu_pass.output.read_text(errors="replace")
        output += logged
        kernels = max(kernels, len(_PROFILED.findall(logged)), len(set(_CSV_LAUNCH.findall(logged))))
    failure = explain_ncu_failure(output, returncode, str(log))
    if failure is None and kernels == 0 and ncu_pass.writes_log_file:
        failure = explain_ncu_failure(output + "\n==WARNING== No kernels were profiled.", returncode, str(log))
    if failure is None and not ncu_pass.output.is_file():
        failure = ProfilingError(f"ncu wrote no {ncu_pass.output.name}", f"see {log}")
    if failure is not None:
        raise failure
    progress(f"  {ncu_pass.name}: done, {kernels:,} launches profiled")
    return PassResult(ncu_pass.name, kernels, log)


def profile_with_ncu(
    passes: list[NcuPass],
    settings: NcuSettings,
    metric_set: MetricSet,
    gpu: GpuName,
    progress: Callable[[str], None],
    force_gpu: bool = False,
    expected: int | None = None,
) -> ImportedSource:
    """Runs every pass, then imports the report (or the folder of per-group logs, merged by launch);
    ``force_gpu`` judges it as ``gpu`` whatever SM count it states; ``expected`` launches per pass, where known."""
    for number, ncu_pass in enumerate(passes, start=1):
        progress(f"ncu pass {number}/{len(passes)}: {ncu_pass.name}")
        run_pass(ncu_pass, progress, expected)
    source = passes[0].output if len(passes) == 1 else passes[0].output.parent
    options = ImportOptions(phase=None, gpu=gpu, merge="launch", force_gpu=force_gpu)
    imported = import_source(source, options, metric_set)
    info = replace(imported.info, settings={**imported.info.settings, **settings.recorded()})
    return replace(imported, info=info)


def with_measured_memory(source: ImportedSource, path: Path) -> ImportedSource:
    """The source with the per-phase CUDA memory the workload wrote to ``path`` (none where it wrote nothing)."""
    if not path.is_file():
        return source
    try:
        phases = [PhaseMemory.from_json(item) for item in json.loads(path.read_text())]
    except (ValueError, TypeError, KeyError) as error:
        raise ProfilingError(f"{path} is not the workload's memory record: {error}") from None
    formulas = {**source.info.formulas_used, "memory": "the first profiled step's " + CUDA_MEMORY_METHOD}
    return replace(source, info=replace(source.info, memory=phases, formulas_used=formulas))
