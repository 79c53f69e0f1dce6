"""The store's disk layer: where runs live, and reading, writing, locking and sweeping them atomically.

Layout::

    STORE/store.json                               the store's layout and schema version
    STORE/runs/run=<run>/meta.json                 metadata; names the current launches file
    STORE/runs/run=<run>/launches-<id>.parquet     one row per launch, with a ``run`` column
    STORE/runs/run=<run>/.lock                     serialises writers of the run
    STORE/.lock                                    serialises migrations

Writes are atomic: a new launches file is written and synced under a fresh name, then ``meta.json`` is
replaced in one ``os.replace``. A reader sees the old run or the new one, never a mix. Both the runs
(:mod:`hroofline.store.runs`) and the migration of old stores (:mod:`hroofline.store.migration`) stand on
this module, which imports neither.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hroofline.errors import StoreError, UsageError, system_error
from hroofline.model.run import SCHEMA_VERSION, Run, RunMeta, conform_launches, ordered_phases, upgrade_launches

if TYPE_CHECKING:
    import pandas as pd

_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")  # matched whole: `$` would let a final newline in
RUN_FOLDER_PREFIX = "run="  # Hive-style: the folder names the partition column and its value
LAYOUT_VERSION = 2  # 1: runs/<run>/, raw metrics as columns, no run column; 2: runs/run=<run>/
STORE_FILE = "store.json"


def check_run_name(name: str) -> str:
    if not _RUN_NAME.fullmatch(name):
        raise UsageError(
            f"invalid run name {name!r}", "use letters, digits, '.', '_', '+' and '-', starting with a letter or digit"
        )
    return name


class StoreLayout:
    """Where a store's runs are: ``root/runs/run=<name>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, name: str) -> Path:
        return self.runs_dir / f"{RUN_FOLDER_PREFIX}{name}"


def read_meta_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        name = path.parent.name.removeprefix(RUN_FOLDER_PREFIX)
        raise StoreError(
            f"unreadable run metadata {path} ({error})",
            f"`hroofline rm {name}` removes the run; `hroofline import ... --run {name} --replace` writes a new one",
        ) from None
    if data.get("schema_version", 0) > SCHEMA_VERSION:
        raise StoreError(
            f"run {data.get('name', path.parent.name)!r} was written by a newer hroofline "
            f"(schema {data['schema_version']})",
            "upgrade hroofline",
        )
    return data


def read_run(run_dir: Path, raw: dict[str, Any], columns: Collection[str] | None = None) -> Run:
    """A run from its folder and metadata, its launches in today's schema whatever wrote them. With ``columns``,
    only those launch columns are read (the others are left unknown, and the raw metrics out): a summary of a
    million launches needs their numbers, not their names."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hroofline.store.format import launches_frame
    from hroofline.store.upgrade import DENSE_SCHEMA, upgrade_roofs

    path = run_dir / raw["launches_file"]
    try:
        parquet = pq.ParquetFile(path)
        current = raw.get("schema_version") == SCHEMA_VERSION  # older files are upgraded from all their columns
        read = [c for c in parquet.schema_arrow.names if c in columns] if columns is not None and current else None
        if read is None:
            frame = launches_frame(parquet.read())
        else:  # plain columns: converted as they are freed, so the run is not held twice
            frame = parquet.read(columns=read).to_pandas(split_blocks=True, self_destruct=True)
    except (MemoryError, pa.ArrowMemoryError):
        size = path.stat().st_size / 1e6
        raise StoreError(
            f"out of memory reading run {raw['name']!r} ({path}, {size:.0f} MB on disk)",
            "close other programs, or read fewer columns with hroofline query",
        ) from None
    except (OSError, pa.ArrowException) as error:
        raise StoreError(f"run {raw['name']!r}: cannot read {path} ({error})") from None
    meta = RunMeta.from_json(raw)
    if read is not None:  # read in part, from a file in today's schema: nothing to upgrade
        return Run(meta=meta, launches=conform_launches(frame, columns))
    frame = conform_launches(upgrade_launches(frame, meta.schema_version, meta.predicted))
    if meta.schema_version < DENSE_SCHEMA:
        frame = upgrade_roofs(meta, frame)  # on today's columns: older files lack the sparse ones
    meta.schema_version = SCHEMA_VERSION
    return Run(meta=meta, launches=frame)


def write_run(run_dir: Path, meta: RunMeta, launches: pd.DataFrame) -> RunMeta:
    """Writes a run's launches and then its metadata (the commit point) into ``run_dir``; returns the metadata
    written (``meta`` in today's schema, with the phases of ``launches``)."""
    phases = ordered_phases(set(launches["phase"].dropna().unique()))  # unique first: not a Python loop per launch
    return commit_run(run_dir, replace(meta, phases=phases), lambda path: write_launches(launches, meta.name, path))


def commit_run(run_dir: Path, meta: RunMeta, write: Callable[[Path], None]) -> RunMeta:
    """Writes a run's launches file with ``write`` (given the temporary path), syncs it, then replaces its
    metadata in one ``os.replace`` (the commit point); returns the metadata written, in today's schema. Files of
    a write interrupted before the commit point are removed; older launches files after it."""
    launches_file = f"launches-{uuid.uuid4().hex[:12]}.parquet"
    new_files = [run_dir / f".{launches_file}.tmp", run_dir / launches_file, run_dir / ".meta.json.tmp"]
    meta = replace(meta, schema_version=SCHEMA_VERSION)
    try:
        write(new_files[0])
        fsync_file(new_files[0])
        os.replace(new_files[0], new_files[1])
        data = meta.to_json()
        data["launches_file"] = launches_file
        new_files[2].write_text(json.dumps(data, indent=2, sort_keys=True))
        fsync_file(new_files[2])
        os.replace(new_files[2], run_dir / "meta.json")  # the commit point
    except BaseException as error:
        if not _meta_names(run_dir, launches_file):  # interrupted before the commit point
            for path in new_files:
                path.unlink(missing_ok=True)
        fault = system_error(error, writing=f"run {meta.name!r} in {run_dir}") if isinstance(error, OSError) else None
        if fault:
            raise fault from None
        raise
    fsync_dir(run_dir)
    for stale in run_dir.glob("launches-*.parquet"):
        if stale.name != launches_file:
            stale.unlink(missing_ok=True)
    return meta


WRITE_ROWS = 50_000  # launches converted to Arrow at a time: a million-launch run is not held twice


def write_launches(launches: pd.DataFrame, run: str, path: Path) -> None:
    """The launches as one Parquet file, converted and written :data:`WRITE_ROWS` at a time (one row group each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hroofline.store.format import launches_table

    pa.default_memory_pool().release_unused()  # what reading the source left in Arrow's pool, before this grows it
    first = launches_table(launches.iloc[:WRITE_ROWS], run)
    with pq.ParquetWriter(path, first.schema, compression="zstd") as writer:
        writer.write_table(first, row_group_size=WRITE_ROWS)
        del first
        for start in range(WRITE_ROWS, len(launches), WRITE_ROWS):
            chunk = launches_table(launches.iloc[start : start + WRITE_ROWS], run)
            writer.write_table(chunk, row_group_size=WRITE_ROWS)


def write_run_into_place(store: StoreLayout, target: Path, meta: RunMeta, launches: pd.DataFrame, purpose: str) -> None:
    """Writes a whole run into a working folder (``.PURPOSE-NAME-...``), then renames it to ``target`` in one step,
    which fails if a run appeared there meanwhile; the working folder goes on any failure."""
    staging = store.runs_dir / f".{purpose}-{meta.name}-{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir()
        write_run(staging, meta, launches)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


LEFTOVER_PREFIXES = (".migrating-", ".renaming-", ".removed-")  # working folders of a migration, rename, removal
LEFTOVER_AGE_S = 3600.0  # older than any of those takes: left by one that was killed


def sweep_leftovers(store: StoreLayout) -> None:
    """Removes the working folders that a killed migration, rename or removal left in the runs folder (whole
    copies of runs that readers of ``runs/**`` would see twice)."""
    if not store.runs_dir.is_dir():
        return
    now = time.time()
    for folder in store.runs_dir.iterdir():
        if folder.name.startswith(LEFTOVER_PREFIXES):
            try:
                stale = now - folder.stat().st_mtime >= LEFTOVER_AGE_S
            except OSError:  # removed meanwhile
                continue
            if stale:
                shutil.rmtree(folder, ignore_errors=True)


def write_store_file(root: Path) -> None:
    """Says which layout and schema the store's runs are in (atomically)."""
    replace_json(root / STORE_FILE, {"layout": LAYOUT_VERSION, "schema_version": SCHEMA_VERSION})


def replace_json(path: Path, data: object) -> None:
    """``path`` replaced whole by ``data`` as JSON (:func:`replace_text`)."""
    replace_text(path, json.dumps(data, indent=2) + "\n")


def replace_text(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text`` (UTF-8), in one rename of a synced temporary file beside it (removed if
    the write fails): a reader sees the old file or the new one, never a part."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        fsync_file(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _meta_names(run_dir: Path, launches_file: str) -> bool:
    try:
        return json.loads((run_dir / "meta.json").read_text()).get("launches_file") == launches_file
    except (OSError, json.JSONDecodeError):
        return False


@contextlib.contextmanager
def _flocked(handle: IO[str]) -> Iterator[None]:
    """An exclusive lock on an open file, released however the block ends."""
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle, _flocked(handle):
        yield


@contextlib.contextmanager
def locked_run_folder(run_dir: Path) -> Iterator[None]:
    """The run's lock, on the folder that is at ``run_dir`` once the lock is held: a removal that held the lock
    first renames the folder away, and writing into it then would fail midway. Creates the folder."""
    lock = run_dir / ".lock"
    for _ in range(LOCK_TRIES):
        run_dir.mkdir(exist_ok=True)
        with lock.open("a") as handle, _flocked(handle):
            if _same_file(handle.fileno(), lock):
                yield
                return
    raise StoreError(f"cannot lock run folder {run_dir}: it was removed and made again {LOCK_TRIES} times")


LOCK_TRIES = 100  # a folder removed under a waiting writer is made again; a file system whose inodes disagree stops


@contextlib.contextmanager
def locked_existing_run(run_dir: Path, name: str) -> Iterator[None]:
    """The lock of run ``name``'s folder, which must still be there once the lock is held: a removal that held
    it first has taken the run away, and this one has nothing left to do but say so."""
    lock = run_dir / ".lock"
    try:
        handle = lock.open("a") if run_dir.is_dir() else None
    except FileNotFoundError:
        handle = None
    if handle is None:
        raise StoreError(f"no run named {name!r}: it was removed meanwhile")
    with handle, _flocked(handle):
        if not _same_file(handle.fileno(), lock):
            raise StoreError(f"no run named {name!r}: it was removed meanwhile")
        yield


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        held, there = os.fstat(descriptor), path.stat()
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


TEMPORARY_FILES = (".launches-*.parquet.tmp", ".meta.json.tmp")


def sweep_temporary_files(run_dir: Path) -> None:
    """Removes what a killed write of this run left (a launches file can be tens of MB). Called under the run's
    lock, so no write of the run is under way."""
    for pattern in TEMPORARY_FILES:
        for path in run_dir.glob(pattern):
            path.unlink(missing_ok=True)


def fsync_file(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
