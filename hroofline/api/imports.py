"""Importing files into a run, as one composition for the CLI and the notebook: what ``hroofline import`` takes
(:class:`ImportSettings`) checked once, sources already in the run skipped, the rest read, passes over the same
launches joined, and all of them added in one atomic step."""

from __future__ import annotations

import dataclasses
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hroofline.collect.same_step import is_joined, is_report, is_trace, join_same_steps, same_step
from hroofline.errors import InputError, UsageError, did_you_mean
from hroofline.importers.build import ImportOptions, ReadSource, import_sources, read_source, source_digest
from hroofline.importers.inductor_provenance import layers_from_compile_log
from hroofline.importers.source import ImportedSource
from hroofline.importers.source_hash import run_algorithm
from hroofline.model.phases import parse_phase_option
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.ceilings import CPU, Ceilings, load_ceilings_file
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.files import check_run_name
from hroofline.store.runs import AddResult, RunDefaults, RunStore

MERGES: tuple[str, ...] = ("launch", "name")


@dataclass(frozen=True)
class ImportSettings:
    """What ``hroofline import`` takes besides its sources and run, by its options' names (``--force-gpu`` is
    ``force_gpu``), with the same defaults:

    - ``gpu``: the GPU that was profiled (``"v100"``, ``"h100-sxm"``, ``hroofline gpus`` lists them), or ``"cpu"``
      for a trace of ops that ran on the CPU; needed where the file does not say;
    - ``phase``: the phase of launches whose ranges name none (``"forward"``, ``"bw"``, ...);
    - ``ceilings``: the run's roofs, a ceilings file; ``measure_ceilings``: for a CPU trace recorded here, measure
      this CPU's ceilings anew (else measured once per machine and cached);
    - ``force_gpu``: judge a report as ``gpu`` even where the device it states is another;
    - ``merge``: passes over one run joined launch by launch (``"launch"``) or per kernel name (``"name"``);
    - ``steps``: traces, the ProfilerStep numbers to import (``"5,6"``, ``"5-7"`` or ``[5, 6]``; default all);
    - ``rank``: traces, the rank of a trace that does not say (default: its distributedInfo, else 0);
    - ``capture``: traces replayed from CUDA (or HIP) graphs, the trace(s) written while the graphs were captured
      (a path or a list of them): each graph launch's kernels get the ops that launched them at capture;
    - ``compile_log``: traces of a torch.compile'd model, its compile log (the folder ``TORCH_TRACE`` wrote with
      ``INDUCTOR_PROVENANCE=1``, a .tar.xz of it, or one .log): each compiled kernel placed on its module;
    - ``precision``: a label for the run's precision (``"amp"``; metadata only);
    - ``replace``: make the run these sources alone (the old run stays until the new one is written);
    - ``git_commit``: the commit of the code the sources measured (7 to 40 hex digits), recorded with each source
      (metadata only: a file states none).
    """

    gpu: str | None = None
    phase: str | None = None
    ceilings: str | Path | None = None
    measure_ceilings: bool = False
    force_gpu: bool = False
    merge: str = "launch"
    steps: str | Iterable[int] | None = None
    rank: int | None = None
    capture: str | Path | Iterable[str | Path] = ()
    compile_log: str | Path | None = None
    precision: str | None = None
    replace: bool = False
    git_commit: str | None = None

    @classmethod
    def named(cls, base: ImportSettings | None = None, **options: Any) -> ImportSettings:
        """``base`` (else the defaults) with ``options`` given by name; a name that is no option is refused."""
        if base is not None and not isinstance(base, cls):
            raise UsageError(
                f"settings {base!r}: not an ImportSettings",
                "give one, ImportSettings(gpu='h100'), or the options by name",
            )
        known = [f.name for f in fields(cls)]
        unknown = next((name for name in options if name not in known), None)
        if unknown is not None:
            raise UsageError(f"{unknown!r}: not an option of import", did_you_mean(unknown, known, "options"))
        return dataclasses.replace(base or cls(), **options)


@dataclass
class Imported:
    """What an import did: the store's result (sources added, already present, the run), the files it skipped
    because the run held them already, and why a CPU run's ceilings are unknown, where they are."""

    result: AddResult | None
    skipped: list[str] = field(default_factory=list)  # "[i/n] source" of each source the run held already
    replaced: bool = False
    ceilings_unknown: list[str] = field(default_factory=list)


CpuCeilings = Callable[[list[ImportedSource]], dict[str, Any] | None]
ThisCpu = Callable[[bool], Ceilings]  # this machine's CPU ceilings; True: measured anew


def import_with(
    store: RunStore,
    run: str,
    sources: list[str | Path],
    settings: ImportSettings,
    progress: Callable[[str], None] | None = None,
    this_cpu: ThisCpu | None = None,
) -> Imported:
    """``hroofline import SOURCES --run RUN`` with ``settings``: checked before anything is read (a usage error
    names the option), then :func:`import_files`. A CPU trace recorded on this machine gets this CPU's ceilings
    from ``this_cpu`` (default: measured once per machine and cached, its lines to ``progress``)."""
    name = check_run_name(run)
    options, defaults = checked_settings(settings)
    if this_cpu is None:
        this_cpu = _this_cpu(progress or (lambda text: None))
    unknown: list[str] = []
    done = import_files(
        store,
        name,
        sources,
        options,
        defaults,
        settings.replace,
        progress,
        _cpu_ceilings(unknown, this_cpu, settings.measure_ceilings),
    )
    return dataclasses.replace(done, ceilings_unknown=unknown)


def checked_settings(settings: ImportSettings) -> tuple[ImportOptions, RunDefaults]:
    """The importers' options and the run's defaults from ``settings``, each checked as the CLI checks its options
    (the ceilings file read now, before the import)."""
    gpu = settings.gpu.strip() if settings.gpu else None
    on_cpu = gpu is not None and gpu.lower() == CPU
    if settings.force_gpu and on_cpu:
        raise UsageError("--force-gpu: not with --gpu cpu (it judges a GPU's report as another GPU)")
    if settings.force_gpu and not gpu:
        raise UsageError("--force-gpu needs --gpu: the GPU to judge the report as")
    if settings.measure_ceilings and (settings.ceilings or (gpu and not on_cpu)):
        what = "--ceilings FILE" if settings.ceilings else f"--gpu {gpu} (a GPU's roofs are its catalog's)"
        raise UsageError(f"--measure-ceilings: measures this CPU's ceilings, for a CPU trace, not with {what}")
    if settings.merge not in MERGES:
        raise UsageError(f"--merge {settings.merge!r}: not one of {', '.join(MERGES)}")
    rank = settings.rank
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise UsageError(f"--rank {rank!r}: give a rank, a whole number, 0 or more")
    named = resolve_gpu(gpu) if gpu and not on_cpu else None
    options = ImportOptions(
        phase=parse_phase_option(settings.phase) if settings.phase else None,
        gpu=named,
        merge=settings.merge,
        steps=_steps(settings.steps),
        rank=rank,
        cpu_ops=on_cpu,
        force_gpu=settings.force_gpu,
        captures=_existing_captures(settings.capture),
        compiled=layers_from_compile_log(Path(settings.compile_log)) if settings.compile_log else None,
    )
    ceilings = load_ceilings_file(Path(settings.ceilings)).to_json() if settings.ceilings else None
    commit = _checked_commit(settings.git_commit)
    return options, RunDefaults(named.name if named else None, settings.precision, ceilings, commit)


def _checked_commit(commit: str | None) -> str | None:
    """A git commit as its hex digits (7 to 40: abbreviated or whole), lower case."""
    if commit is None:
        return None
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", commit.strip()):
        raise UsageError(f"--git-commit {commit!r}: not a commit", "give its hash, e.g. `git rev-parse HEAD`")
    return commit.strip().lower()


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


def _steps(value: str | Iterable[int] | None) -> frozenset[int] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return parse_steps(value)
    steps = list(value)
    if not steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise UsageError(f"steps {value!r}: give step numbers, e.g. [5, 6] or '5-7'")
    return frozenset(steps)


def _existing_captures(capture: str | Path | Iterable[str | Path]) -> tuple[Path, ...]:
    """The capture traces, each checked to exist before anything is read."""
    paths = (Path(capture),) if isinstance(capture, str | Path) else tuple(Path(c) for c in capture)
    for path in paths:
        if not path.is_file():
            raise InputError(f"--capture {path}: no such file")
    return paths


def _this_cpu(progress: Callable[[str], None]) -> ThisCpu:
    def measured(measure_again: bool) -> Ceilings:
        from hroofline.collect.ceilings_cache import cpu_ceilings_cached

        return cpu_ceilings_cached(progress, measure_again).ceilings

    return measured


def _cpu_ceilings(unknown: list[str], this_cpu: ThisCpu, measure_again: bool) -> CpuCeilings:
    """The ceilings of the CPU a CPU trace was recorded on, where that is this machine (the trace's host_name):
    ``this_cpu``'s (cached, or measured anew with ``measure_again``). Else none, and why in ``unknown``."""

    def ceilings(sources: list[ImportedSource]) -> dict[str, Any] | None:
        hosts = {source.info.settings.get("host") for source in sources}
        here = socket.gethostname()
        if hosts == {here}:
            return this_cpu(measure_again).to_json()
        recorded = ", ".join(sorted(repr(h) for h in hosts if h and h != here))
        unknown.append(
            f"the trace was recorded on host {recorded}, not on this one ({here!r})"
            if recorded
            else "the trace does not say which machine recorded it"
        )
        return None

    return ceilings


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
    already = {s.source_hash for s in store.load_meta(name).sources} if store.has_run(name) and not replacing else set()
    options = dataclasses.replace(options, hash_algorithm=run_algorithm(already))  # the run's own hash
    metric_set = load_metric_set()
    read: list[ReadSource] = []
    skipped: list[str] = []
    for index, source in enumerate(sources, start=1):
        path = Path(source)
        # Only an existing run can already hold the source; then its digest is needed up front.
        digest = source_digest(path, options.hash_algorithm) if already and path.exists() else None
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
    added = store.append_sources(name, imported, defaults)
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
