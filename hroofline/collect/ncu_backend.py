"""Running ncu on the workload and importing what it wrote into the store."""

from __future__ import annotations

import json
import re
import subprocess
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


def run_pass(ncu_pass: NcuPass, progress: Callable[[str], None]) -> PassResult:
    """One ncu run; its whole output goes to a log beside its result, progress to ``progress``."""
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
    with log.open("w") as log_file:
        log_file.write("$ " + " ".join(ncu_pass.command) + "\n")
        for line in process.stdout:
            log_file.write(line)
            lines.append(line)
            if _PROFILED.search(line):
                kernels += 1
                if kernels == 1 or kernels % 50 == 0:
                    progress(f"  {ncu_pass.name}: {kernels} kernels profiled")
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
    progress(f"  {ncu_pass.name}: done, {kernels} kernels")
    return PassResult(ncu_pass.name, kernels, log)


def profile_with_ncu(
    passes: list[NcuPass],
    settings: NcuSettings,
    metric_set: MetricSet,
    gpu: GpuName,
    progress: Callable[[str], None],
    force_gpu: bool = False,
) -> ImportedSource:
    """Runs every pass, then imports the report (or the folder of per-group logs, merged by launch);
    ``force_gpu`` judges it as ``gpu`` whatever SM count it states."""
    for number, ncu_pass in enumerate(passes, start=1):
        progress(f"ncu pass {number}/{len(passes)}: {ncu_pass.name}")
        run_pass(ncu_pass, progress)
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
