"""Importing a thousand ranks: one trace per rank, each read and written to the store on its own by a pool of
worker processes, so that memory is bounded by one rank's trace per worker and not by their sum
(:mod:`hroofline.store.rank_parts` keeps the parts and commits them as the run). A killed import keeps the ranks
it stored; run again, it skips them and imports the rest."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from hroofline.api.imports import ImportSettings, checked_settings
from hroofline.errors import HrooflineError, InputError, UsageError
from hroofline.importers.build import ImportOptions, import_sources, read_source, source_digest
from hroofline.importers.source_hash import run_algorithm
from hroofline.model.run import RunMeta
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.files import (
    check_run_name,
    locked_run_folder,
    sweep_leftovers,
    sweep_temporary_files,
    write_store_file,
)
from hroofline.store.rank_parts import commit_parts, stored_parts, sweep_half_written, write_part
from hroofline.store.runs import RunStore

TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz")


@dataclass(frozen=True)
class RanksImported:
    """What an import of many ranks did: the run's metadata, and how many rank traces it imported now, found in
    the run already, found stored by an earlier import that was killed (resumed), and found half-written."""

    meta: RunMeta
    imported: int
    already_in_run: int
    resumed: int
    half_written: int

    @property
    def launches(self) -> int:
        return sum(source.launches for source in self.meta.sources)


def is_rank_folder(path: Path) -> bool:
    """A folder of PyTorch profiler traces (one per rank), as opposed to a folder of ncu passes."""
    return path.is_dir() and any(_is_trace(child) for child in path.iterdir())


def rank_traces(sources: Iterable[str | Path]) -> list[Path]:
    """The trace files of ``sources``: files as given, folders by their traces (sorted by name)."""
    sources = list(sources)
    found: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            found += sorted(child for child in path.iterdir() if _is_trace(child))
        elif _is_trace(path):
            found.append(path)
        elif path.is_file():
            raise UsageError(f"{path}: import --jobs takes PyTorch profiler traces (.json, .json.gz, .json.xz)")
        else:
            raise InputError(f"{path}: no such file or folder")
    if not found:
        raise InputError(f"no traces in {', '.join(str(s) for s in sources)}", "give .json(.gz|.xz) traces")
    return found


def import_ranks(
    store: RunStore,
    run: str,
    sources: Iterable[str | Path],
    settings: ImportSettings,
    *,
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> RanksImported:
    """``hroofline import DIR --run RUN --jobs N``: each rank's trace in ``sources`` imported by one of ``jobs``
    worker processes (default: the CPU count) and stored as a part, then the parts committed as run ``run``.
    Traces the run holds already, or that a killed import stored, are skipped."""
    name = check_run_name(run)
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: give 1 or more worker processes")
    options, _ = checked_settings(settings)
    if settings.replace or options.cpu_ops or options.captures or options.compiled:
        raise UsageError(
            "--jobs imports GPU traces rank by rank, not with --replace, --gpu cpu, --capture or --compile-log",
            f"remove the run first (hroofline rm {name}), or import without --jobs",
        )
    say = progress or (lambda text: None)
    paths = rank_traces(sources)
    store.ensure_current()
    if not store.runs_dir.is_dir():
        store.runs_dir.mkdir(parents=True, exist_ok=True)
        write_store_file(store.root)
    sweep_leftovers(store)
    run_dir = store.run_dir(name)
    with locked_run_folder(run_dir):  # one import of the run at a time; its workers write parts under this lock
        sweep_temporary_files(run_dir)
        half = sweep_half_written(run_dir)
        existing, existing_file = store.committed(name) if store.has_run(name) else (None, None)
        in_run = {s.source_hash for s in existing.sources} if existing else set()
        in_parts = {part.digest for part in stored_parts(run_dir)}
        options = replace(options, hash_algorithm=run_algorithm(in_run | in_parts))  # the run's own hash
        todo, held, resumed = _to_import(paths, in_run, in_parts, options.hash_algorithm)
        if resumed or half:
            say(f"resuming run {name!r}: {resumed} ranks stored already, {half} half-written (imported again)")
        _import_in_workers(todo, run_dir, name, options, jobs or os.cpu_count() or 1, say)
        meta = commit_parts(run_dir, existing, existing_file) if todo or in_parts else existing
    if meta is None:
        raise InputError(f"no ranks imported into run {name!r}")
    return RanksImported(meta, len(todo), held, resumed, half)


def _to_import(
    paths: list[Path], in_run: set[str], in_parts: set[str], algorithm: str
) -> tuple[list[tuple[Path, str]], int, int]:
    """The traces to import with their digests, and how many the run and the stored parts hold already."""
    todo, seen, held, resumed = [], set(), 0, 0
    for path in paths:
        digest = source_digest(path, algorithm)
        if digest in seen:
            continue
        seen.add(digest)
        if digest in in_run:
            held += 1
        elif digest in in_parts:
            resumed += 1
        else:
            todo.append((path, digest))
    return todo, held, resumed


def _import_in_workers(
    todo: list[tuple[Path, str]], run_dir: Path, run: str, options: ImportOptions, jobs: int, say: Callable[[str], None]
) -> None:
    """Imports ``todo`` in ``jobs`` processes (one: in this one), a progress line every twentieth of them
    (ranks/s); the first failure stops the import, and the ranks stored by then are kept for the next one."""
    if not todo:
        return
    progress = _Progress(len(todo), say)
    if jobs == 1:
        for path, digest in todo:
            progress.done(import_rank(path, digest, run_dir, run, options))
        return
    # forkserver: workers do not inherit the threads of a parent that has loaded pyarrow (fork could deadlock)
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        pending: set[Future[str | None]] = {
            pool.submit(import_rank, path, digest, run_dir, run, options) for path, digest in todo
        }
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    progress.done(future.result())
        except BaseException:
            for other in pending:
                other.cancel()
            raise


class _Progress:
    """Counts ranks done, says the rate every twentieth of them, and raises a worker's failure."""

    def __init__(self, total: int, say: Callable[[str], None]) -> None:
        self.total, self.say, self.count = total, say, 0
        self.every = max(1, total // 20)
        self.started = time.perf_counter()

    def done(self, failure: str | None) -> None:
        if failure is not None:
            raise InputError(failure, "the ranks stored so far are kept: run the import again to resume")
        self.count += 1
        if self.count % self.every == 0 or self.count == self.total:
            rate = self.count / max(time.perf_counter() - self.started, 1e-9)
            self.say(f"[{self.count}/{self.total} ranks] {rate:.1f} ranks/s")


def import_rank(path: Path, digest: str, run_dir: Path, run: str, options: ImportOptions) -> str | None:
    """In a worker: one rank's trace read, built and stored as a part; None, or the one-line reason it failed
    (returned rather than raised: the parent says it, and the worker's traceback is no use to anyone)."""
    try:
        metric_set = load_metric_set()
        imported = import_sources([read_source(path, options, metric_set, digest)], options, metric_set)
        for source in imported:
            if source.on_cpu:
                raise InputError(f"{path}: recorded on the CPU alone", "import CPU traces without --jobs")
            write_part(run_dir, run, source)
    except HrooflineError as error:
        return error.one_line()
    except MemoryError:
        return f"{path}: out of memory while importing it"
    return None


def _is_trace(path: Path) -> bool:
    return path.is_file() and path.name.endswith(TRACE_SUFFIXES)
