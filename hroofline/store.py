"""The run store: a folder of runs, each its metadata (JSON) and its launches (Parquet), laid out as a
Hive-partitioned dataset, so that DuckDB, Polars or Spark read every run's launches as one table (the schema
is in ``docs/store.md`` and :mod:`hroofline.store_format`).

Layout::

    STORE/store.json                               the store's layout and schema version
    STORE/runs/run=<run>/meta.json                 metadata; names the current launches file
    STORE/runs/run=<run>/launches-<id>.parquet     one row per launch, with a ``run`` column
    STORE/runs/run=<run>/.lock                     serialises writers of the run
    STORE/.lock                                    serialises migrations

Writes are atomic: a new launches file is written and synced under a fresh name, then ``meta.json`` is
replaced in one ``os.replace``. A reader sees the old run or the new one, never a mix; an import that
is interrupted at any point leaves the run as it was (at worst an unreferenced launches file, removed
by the next write). A store written by an older hroofline is migrated on first use
(:mod:`hroofline.store_migration`).
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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hroofline.errors import MergeError, StoreError, UsageError, did_you_mean
from hroofline.metricset import QUANTITIES, load_metric_set
from hroofline.model import (
    SCHEMA_VERSION,
    Run,
    RunMeta,
    conform_launches,
    empty_launches,
    ordered_phases,
    upgrade_launches,
)
from hroofline.roof_upgrade import DENSE_SCHEMA, upgrade_roofs
from hroofline.store_format import launches_frame, launches_table

if TYPE_CHECKING:
    from hroofline.importers import ImportedSource

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
RUN_FOLDER_PREFIX = "run="  # Hive-style: the folder names the partition column and its value
LAYOUT_VERSION = 2  # 1: runs/<run>/, raw metrics as columns, no run column; 2: runs/run=<run>/
STORE_FILE = "store.json"


def check_run_name(name: str) -> str:
    if not _RUN_NAME.match(name):
        raise UsageError(
            f"invalid run name {name!r}", "use letters, digits, '.', '_', '+' and '-', starting with a letter or digit"
        )
    return name


@dataclass
class AddResult:
    added: list[ImportedSource]
    already_present: list[ImportedSource]
    run: Run


class RunStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._current = False  # the store's layout checked (and migrated when old) in this process

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, name: str) -> Path:
        return self.runs_dir / f"{RUN_FOLDER_PREFIX}{name}"

    def ensure_current(self) -> None:
        """Migrates a store written by an older hroofline, once per process (a no-op on a current store)."""
        if not self._current:
            from hroofline.store_migration import migrate_if_old

            migrate_if_old(self)
            self._current = True

    def run_names(self) -> list[str]:
        self.ensure_current()
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            p.name.removeprefix(RUN_FOLDER_PREFIX)
            for p in self.runs_dir.iterdir()
            if p.name.startswith(RUN_FOLDER_PREFIX) and (p / "meta.json").is_file()
        )

    def has_run(self, name: str) -> bool:
        self.ensure_current()
        return (self.run_dir(name) / "meta.json").is_file()

    def load_meta(self, name: str) -> RunMeta:
        return RunMeta.from_json(self._read_meta_json(name))

    def committed(self, name: str) -> tuple[RunMeta, Path]:
        """A run's metadata and the launches file it names (what a reader of the run reads), in one read."""
        raw = self._read_meta_json(name)
        return RunMeta.from_json(raw), self.run_dir(name) / raw["launches_file"]

    def load(self, name: str) -> Run:
        raw = self._read_meta_json(name)
        return read_run(self.run_dir(name), raw)

    def _read_meta_json(self, name: str) -> dict:
        check_run_name(name)
        self.ensure_current()
        path = self.run_dir(name) / "meta.json"
        if not path.is_file():
            hint = did_you_mean(name, self.run_names(), "runs there", "hroofline runs")
            raise StoreError(f"no run named {name!r} in store {self.root}", hint)
        data = read_meta_json(path)
        data["name"] = name  # the folder names the run
        return data

    def remove_run(self, name: str) -> None:
        """Removes a run: renamed out of the way in one step (readers see it or nothing), then deleted."""
        self._read_meta_json(name)  # an unknown name is an error, with the names there are
        run_dir = self.run_dir(name)
        with locked(run_dir / ".lock"):
            trash = self.runs_dir / f".removed-{name}-{uuid.uuid4().hex[:8]}"
            os.replace(run_dir, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def rename_run(self, name: str, new_name: str) -> None:
        """Renames a run: written whole under the new name (its launches carry the name), put in place in one
        directory rename, then the old one removed."""
        check_run_name(new_name)
        self._read_meta_json(name)
        target = self.run_dir(new_name)
        if target.exists():
            raise UsageError(f"run {new_name!r} exists already", "remove it first: hroofline rm " + new_name)
        with locked(self.run_dir(name) / ".lock"):
            run = self.load(name)
            write_run_into_place(self, target, replace(run.meta, name=new_name), run.launches, "renaming")
            trash = self.runs_dir / f".removed-{name}-{uuid.uuid4().hex[:8]}"
            os.replace(self.run_dir(name), trash)
        shutil.rmtree(trash, ignore_errors=True)
        sweep_leftovers(self)

    def add_sources(
        self,
        name: str,
        sources: list[ImportedSource],
        gpu: str | None = None,
        precision: str | None = None,
    ) -> AddResult:
        """Append sources to a run (creating it); a source already in the run is skipped."""
        return self._add(name, sources, RunDefaults(gpu, precision, None), start_fresh=False)

    def replace_run(self, name: str, sources: list[ImportedSource], defaults: RunDefaults) -> AddResult:
        """Make ``name`` a run of just ``sources``, under the run's lock: readers see the old run until the
        new metadata replaces the old in one rename (the same commit point as any import)."""
        return self._add(name, sources, defaults, start_fresh=True)

    def _add(self, name: str, sources: list[ImportedSource], defaults: RunDefaults, start_fresh: bool) -> AddResult:
        check_run_name(name)
        self.ensure_current()
        run_dir = self.run_dir(name)
        created = not run_dir.exists()
        if not self.runs_dir.is_dir():
            self.runs_dir.mkdir(parents=True, exist_ok=True)  # another import may be creating the store too
            write_store_file(self.root)
        sweep_leftovers(self)
        run_dir.mkdir(exist_ok=True)
        try:
            return self._add_locked(run_dir, name, sources, defaults, start_fresh)
        except BaseException:
            if created and not (run_dir / "meta.json").exists():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise

    def _add_locked(
        self, run_dir: Path, name: str, sources: list[ImportedSource], defaults: RunDefaults, start_fresh: bool
    ) -> AddResult:
        with locked(run_dir / ".lock"):
            existing = self.load(name) if self.has_run(name) and not start_fresh else None
            now = datetime.now(UTC).isoformat(timespec="seconds")
            meta = existing.meta if existing else RunMeta(name=name, created=now)
            frames = [existing.launches] if existing else [empty_launches()]
            known = {s.sha256 for s in meta.sources}
            added, skipped = [], []
            for source in sources:
                if source.info.sha256 in known:
                    skipped.append(source)
                    continue
                _check_same_device(meta, source, name)
                _check_not_another_pass(frames, meta, source, name)
                meta.cc = meta.cc or source.cc
                meta.device_name = meta.device_name or source.device_name
                frame = source.launches.copy()
                frame["source"] = len(meta.sources)
                meta.sources.append(source.info)
                frames.append(frame)
                known.add(source.info.sha256)
                added.append(source)
            meta.gpu = meta.gpu or defaults.gpu
            meta.precision = meta.precision or defaults.precision
            meta.ceilings = meta.ceilings or defaults.ceilings
            if added:
                meta.arch = load_metric_set(meta.metric_set).arch_of(meta.cc)
                meta.updated = now
                launches = conform_launches(pd.concat([f for f in frames if len(f)], ignore_index=True))
                run = Run(write_run(run_dir, meta, launches), launches)
            else:
                run = existing if existing else Run(meta, empty_launches())
            return AddResult(added=added, already_present=skipped, run=run)


def read_meta_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise StoreError(f"unreadable run metadata {path} ({error})") from None
    if data.get("schema_version", 0) > SCHEMA_VERSION:
        raise StoreError(
            f"run {data.get('name', path.parent.name)!r} was written by a newer hroofline "
            f"(schema {data['schema_version']})",
            "upgrade hroofline",
        )
    return data


def read_run(run_dir: Path, raw: dict[str, Any]) -> Run:
    """A run from its folder and metadata, its launches in today's schema whatever wrote them."""
    path = run_dir / raw["launches_file"]
    try:
        frame = launches_frame(pq.ParquetFile(path).read())
    except (OSError, pa.ArrowException) as error:
        raise StoreError(f"run {raw['name']!r}: cannot read {path} ({error})") from None
    meta = RunMeta.from_json(raw)
    frame = conform_launches(upgrade_launches(frame, meta.schema_version, meta.predicted))
    if meta.schema_version < DENSE_SCHEMA:
        frame = upgrade_roofs(meta, frame)  # on today's columns: older files lack the sparse ones
    meta.schema_version = SCHEMA_VERSION
    return Run(meta=meta, launches=frame)


def write_run(run_dir: Path, meta: RunMeta, launches: pd.DataFrame) -> RunMeta:
    """Writes a run's launches and then its metadata (the commit point) into ``run_dir``; returns the metadata
    written (``meta`` in today's schema, with the phases of ``launches``)."""
    launches_file = f"launches-{uuid.uuid4().hex[:12]}.parquet"
    new_files = [run_dir / f".{launches_file}.tmp", run_dir / launches_file, run_dir / ".meta.json.tmp"]
    phases = ordered_phases(set(launches["phase"].dropna()))
    meta = replace(meta, schema_version=SCHEMA_VERSION, phases=phases)
    try:
        pq.write_table(launches_table(launches, meta.name), new_files[0], compression="zstd")
        fsync_file(new_files[0])
        os.replace(new_files[0], new_files[1])
        data = meta.to_json()
        data["launches_file"] = launches_file
        new_files[2].write_text(json.dumps(data, indent=2, sort_keys=True))
        fsync_file(new_files[2])
        os.replace(new_files[2], run_dir / "meta.json")  # the commit point
    except BaseException:
        if not _meta_names(run_dir, launches_file):  # interrupted before the commit point
            for path in new_files:
                path.unlink(missing_ok=True)
        raise
    fsync_dir(run_dir)
    for stale in run_dir.glob("launches-*.parquet"):
        if stale.name != launches_file:
            stale.unlink(missing_ok=True)
    return meta


def write_run_into_place(store: RunStore, target: Path, meta: RunMeta, launches: pd.DataFrame, purpose: str) -> None:
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


def sweep_leftovers(store: RunStore) -> None:
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
    temporary = root / f".{STORE_FILE}.{uuid.uuid4().hex[:8]}.tmp"
    text = json.dumps({"layout": LAYOUT_VERSION, "schema_version": SCHEMA_VERSION}, indent=2) + "\n"
    temporary.write_text(text)
    fsync_file(temporary)
    os.replace(temporary, root / STORE_FILE)


@dataclass(frozen=True)
class RunDefaults:
    """Run-level facts a command supplies; they fill what the run does not know yet."""

    gpu: str | None
    precision: str | None
    ceilings: dict[str, Any] | None


def _meta_names(run_dir: Path, launches_file: str) -> bool:
    try:
        return json.loads((run_dir / "meta.json").read_text()).get("launches_file") == launches_file
    except (OSError, json.JSONDecodeError):
        return False


def _measured(launches: pd.DataFrame) -> frozenset[str]:
    return frozenset(c for c in ("time_s", *QUANTITIES) if launches[c].notna().any())


def _same_values(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """The same time and quantities launch by launch (to 1e-6): the same measurement, not a repeat of it."""
    columns = ["time_s", *QUANTITIES]
    left, right = a[columns].to_numpy(dtype=float), b[columns].to_numpy(dtype=float)
    return bool(np.allclose(left, right, rtol=1e-6, atol=0.0, equal_nan=True))


def _check_not_another_pass(frames: list[pd.DataFrame], meta: RunMeta, source: ImportedSource, name: str) -> None:
    """A source that lists the same launches as one already in the run is either another pass over them
    (other quantities) or the same measurement again (the same values, e.g. another export of one report):
    appending either would count every launch twice. A repeat (the same kernels measured again) appends."""
    kernels = list(source.launches["kernel"])
    for frame in frames:
        for index, rows in frame.groupby("source", sort=False):
            if list(rows["kernel"]) != kernels:
                continue
            other = meta.sources[int(index)].path
            if _measured(rows) != _measured(source.launches):
                raise MergeError(
                    f"{source.info.path} lists the same {len(kernels)} launches as {other}, in run {name!r}, "
                    "with other metrics: it is another pass over them, not more launches",
                    "import all passes in one command (or as one folder) to join them launch by launch, into a new run",
                )
            if _same_values(rows, source.launches):
                raise MergeError(
                    f"{source.info.path} holds the same {len(kernels)} launches with the same values as {other}, "
                    f"in run {name!r}: the same measurement twice (another export of one report?)",
                    "import one of them",
                )


def _check_same_device(meta: RunMeta, source: ImportedSource, name: str) -> None:
    if meta.cc and source.cc and meta.cc != source.cc:
        raise StoreError(
            f"run {name!r} holds data of a compute capability {meta.cc} GPU; {source.info.path} is from {source.cc}",
            "import it into another run",
        )


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fsync_file(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
