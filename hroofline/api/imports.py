"""Importing files into a run, as one composition for the CLI and the notebook: sources already in the run are
skipped, the rest read, passes over the same launches joined, and all of them added in one atomic step."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hroofline.collect.same_step import is_joined, is_report, is_trace, join_same_steps, same_step
from hroofline.errors import InputError, UsageError
from hroofline.importers.build import ImportOptions, ReadSource, import_sources, read_source, source_digest
from hroofline.importers.source import ImportedSource
from hroofline.roofs.ceilings import CPU
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.files import check_run_name
from hroofline.store.runs import AddResult, RunDefaults, RunStore


@dataclass
class Imported:
    """What an import did: the store's result (sources added, already present, the run) and the files it skipped
    because the run held them already."""

    result: AddResult | None
    skipped: list[str] = field(default_factory=list)  # "[i/n] source" of each source the run held already
    replaced: bool = False


CpuCeilings = Callable[[list[ImportedSource]], dict[str, Any] | None]


def import_files(
    store: RunStore,
    run: str,
    sources: list[str | Path],
    options: ImportOptions,
    defaults: RunDefaults,
    replace: bool = False,
    progress: Callable[[str], None] | None = None,
    cpu_ceilings: CpuCeilings | None = None,
) -> Imported:
    """Imports ``sources`` into ``run`` of ``store`` (all or none); with ``replace`` the run becomes these sources
    alone. ``defaults`` fill what the run does not know (its GPU, precision). Sources whose ops ran on the CPU (a
    trace recorded without the CUDA activity) make a CPU run (GPU ``cpu``): ``cpu_ceilings`` gives its roofs, as
    a ceilings set's JSON, or None where that CPU's are unknown."""
    name = check_run_name(run)
    say = progress or (lambda text: None)
    replacing = replace and store.has_run(name)
    if defaults.ceilings and store.has_run(name) and not replacing:
        _check_ceilings_taken(store, name, defaults.ceilings)
    already = {s.sha256 for s in store.load_meta(name).sources} if store.has_run(name) and not replacing else set()
    metric_set = load_metric_set()
    read: list[ReadSource] = []
    skipped: list[str] = []
    for index, source in enumerate(sources, start=1):
        path = Path(source)
        # Only an existing run can already hold the source; then its digest is needed up front.
        digest = source_digest(path) if already and path.exists() else None
        prefix = f"[{index}/{len(sources)}] {source}"
        if digest in already and options.captures:  # held without its capture: added again, it would count twice
            raise UsageError(
                f"{source}: run {name!r} holds it already, imported without --capture",
                "import it with --capture into another run, or add --replace to make the run anew",
            )
        if digest in already:
            skipped.append(prefix)
            continue
        say(f"{prefix}: reading")
        with _out_of_memory_names(str(path)):
            read.append(read_source(path, options, metric_set, digest))
    if not read:
        return Imported(None, skipped)
    with _out_of_memory_names(", ".join(str(s.path) for s in read)):
        imported = import_sources(read, options, metric_set)
    read.clear()  # the raw metrics are not needed to write the run: their memory is freed first
    imported = join_same_steps(imported, options.gpu)
    if store.has_run(name) and not replacing:
        _check_not_the_same_step(store, name, imported)
    if options.cpu_ops and not all(source.on_cpu for source in imported):
        other = next(source for source in imported if not source.on_cpu)
        raise UsageError(
            f"{other.info.path}: --gpu cpu is for PyTorch profiler traces of ops that ran on the CPU",
            "name the GPU it was measured on, or leave --gpu out",
        )
    if any(source.on_cpu for source in imported):
        defaults = _cpu_run_defaults(store, name, imported, defaults, replacing, cpu_ceilings)
    if replacing:
        return Imported(store.replace_run(name, imported, defaults), skipped, replaced=True)
    added = store.add_sources(name, imported, defaults.gpu, defaults.precision, defaults.ceilings)
    return Imported(added, skipped)


def _check_not_the_same_step(store: RunStore, name: str, imported: list[ImportedSource]) -> None:
    """A trace added to a run that holds an ncu report of the same step, or the other way round, would count
    every launch twice: refused, with the way to join them (both in one import)."""
    held = store.load_meta(name).sources
    launches = None  # read once, where a source may be the other half of a step
    for source in imported:
        other = is_report if is_trace(source.info) else is_trace if is_report(source.info) else None
        if other is None:
            continue
        for index, info in enumerate(held):
            if not (other(info) or is_joined(info)):
                continue
            if launches is None:
                launches = store.load(name, ["source", "launch_id", "kernel", "category"]).launches
            theirs = launches[launches["source"] == index]
            trace, report = (source.launches, theirs) if is_trace(source.info) else (theirs, source.launches)
            if not same_step(trace, report):
                continue
            if is_joined(info):
                raise InputError(
                    f"{source.info.path}: run {name!r} holds {info.path} joined with ncu's counters already (the same "
                    "step): added, every launch would count twice",
                    "import it into another run",
                )
            pair = f"{source.info.path} {info.path}" if is_trace(source.info) else f"{info.path} {source.info.path}"
            what = "a trace" if is_trace(info) else "an ncu report"
            raise InputError(
                f"{source.info.path}: run {name!r} holds {info.path}, {what} of the same step "
                f"({len(report):,} launches): added, every launch would count twice",
                f"join them launch for launch in one import: hroofline import {pair} --run {name} --replace",
            )


def _check_ceilings_taken(store: RunStore, name: str, ceilings: dict[str, Any]) -> None:
    """Ceilings given for a run that has its own already would be ignored (a run keeps the roofs it was made
    with): refused, with the way to make the run with them."""
    own = store.load_meta(name).ceilings
    if own and own != ceilings:
        raise UsageError(
            f"--ceilings: run {name!r} has ceilings already ({own.get('label') or 'measured'}); they are kept, not "
            "replaced by these",
            "import with --replace to make the run anew with these ceilings, or pass --ceilings to top, chart, "
            "report or advise to judge it against them",
        )


def _cpu_run_defaults(
    store: RunStore,
    name: str,
    imported: list[ImportedSource],
    defaults: RunDefaults,
    replacing: bool,
    cpu_ceilings: CpuCeilings | None,
) -> RunDefaults:
    """A CPU run's GPU (``cpu``) and its ceilings: the run's own where it has them, else ``cpu_ceilings``'."""
    gpu = next((s for s in imported if not s.on_cpu), None)
    if gpu is not None:
        cpu = next(s for s in imported if s.on_cpu)
        raise InputError(
            f"{cpu.info.path} was recorded on the CPU and {gpu.info.path} on a GPU: one run holds one device's",
            "import them into two runs",
        )
    existing = store.load_meta(name) if store.has_run(name) and not replacing else None
    if existing is not None and (existing.gpu != CPU or existing.ceilings):
        return RunDefaults(CPU, defaults.precision, None)  # the run's own, or the store refuses the mix
    ceilings = defaults.ceilings or (cpu_ceilings(imported) if cpu_ceilings is not None else None)
    return RunDefaults(CPU, defaults.precision, ceilings)


@contextmanager
def _out_of_memory_names(what: str) -> Iterator[None]:
    """Out of memory while reading or computing a source: said in one line naming it (a MemoryError's own
    message is empty; pyarrow's ArrowMemoryError is one too). Nothing is stored: the store's write comes after."""
    try:
        yield
    except MemoryError:
        raise InputError(
            f"{what}: out of memory while importing it; nothing was stored",
            "close other programs, import its files one at a time, or import it on a machine with more memory",
        ) from None
