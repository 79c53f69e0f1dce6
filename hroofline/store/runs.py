"""The run store: a folder of runs, each its metadata (JSON) and its launches (Parquet), laid out as a
Hive-partitioned dataset, so that DuckDB, Polars or Spark read every run's launches as one table (the schema
is in ``docs/guides/store.md`` and :mod:`hroofline.store.format`; the layout and atomic writes in
:mod:`hroofline.store.files`).

An import that is interrupted at any point leaves the run as it was (at worst an unreferenced launches file,
removed by the next write). A store written by an older hroofline is migrated on first use
(:mod:`hroofline.store.migration`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hroofline.errors import MergeError, StoreError, UsageError
from hroofline.model.environment import GIT_COMMIT
from hroofline.model.quantities import QUANTITIES
from hroofline.model.run import Run, RunMeta, conform_launches, empty_launches
from hroofline.roofs.ceilings import CPU
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.baselines import baselines_locked, carry_baselines, check_not_baseline
from hroofline.store.files import (
    check_run_name,
    locked_existing_run,
    locked_run_folder,
    read_run,
    sweep_leftovers,
    sweep_temporary_files,
    write_run,
    write_run_into_place,
    write_store_file,
)
from hroofline.store.reading import StoreReader

if TYPE_CHECKING:
    from hroofline.importers.source import ImportedSource


@dataclass
class AddResult:
    added: list[ImportedSource]
    already_present: list[ImportedSource]
    run: Run
    notes: list[str] = field(default_factory=list)  # what the user must know about where the sources went


class RunStore(StoreReader):
    """The runs of a store: read, add, replace, rename, remove (reading their metadata is
    :class:`~hroofline.store.reading.StoreReader`'s, the disk layer :mod:`hroofline.store.files`)."""

    def load(self, name: str, columns: Collection[str] | None = None) -> Run:
        """Run ``name``; with ``columns``, only those launch columns read (see :func:`read_run`)."""
        raw = self._read_meta_json(name)
        return read_run(self.run_dir(name), raw, columns)

    def remove_run(self, name: str) -> None:
        """Removes a run: renamed out of the way in one step (readers see it or nothing), then deleted. A run that
        a baseline names is not removed (:mod:`hroofline.store.baselines`)."""
        self.check_folder(name)  # an unknown name is an error, with the names there are; a broken run goes too
        run_dir = self.run_dir(name)
        # an import into the run finishes first; no baseline is set to it while it goes
        with locked_existing_run(run_dir, name), baselines_locked(self):
            check_not_baseline(self.root, name)
            trash = self.runs_dir / f".removed-{name}-{uuid.uuid4().hex[:8]}"
            os.replace(run_dir, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def check_removable(self, name: str) -> None:
        """That run ``name`` can be removed: it has a folder (an unknown name is an error, with the names there are;
        a broken run goes too) and no baseline names it."""
        self.check_folder(name)
        check_not_baseline(self.root, name)

    def rename_run(self, name: str, new_name: str) -> None:
        """Renames a run: written whole under the new name (its launches carry the name), put in place in one
        directory rename, then the old one removed; the baselines that named it name the new one."""
        check_run_name(new_name)
        self._read_meta_json(name)
        target = self.run_dir(new_name)
        if target.exists():
            raise UsageError(f"run {new_name!r} exists already", "remove it first: hroofline rm " + new_name)
        with locked_existing_run(self.run_dir(name), name):
            run = self.load(name)
            write_run_into_place(self, target, replace(run.meta, name=new_name), run.launches, "renaming")
            trash = self.runs_dir / f".removed-{name}-{uuid.uuid4().hex[:8]}"
            os.replace(self.run_dir(name), trash)
            carry_baselines(self, name, new_name)
        shutil.rmtree(trash, ignore_errors=True)
        sweep_leftovers(self)

    def add_sources(
        self,
        name: str,
        sources: list[ImportedSource],
        gpu: str | None = None,
        precision: str | None = None,
        ceilings: dict[str, Any] | None = None,
    ) -> AddResult:
        """Append sources to a run (creating it); a source already in the run is skipped. ``gpu``, ``precision``
        and ``ceilings`` fill what the run does not know yet."""
        return self._add(name, sources, RunDefaults(gpu, precision, ceilings), start_fresh=False)

    def append_sources(self, name: str, sources: list[ImportedSource], defaults: RunDefaults) -> AddResult:
        """:meth:`add_sources` with the command's run-level facts whole (``import --git-commit`` among them)."""
        return self._add(name, sources, defaults, start_fresh=False)

    def replace_run(self, name: str, sources: list[ImportedSource], defaults: RunDefaults) -> AddResult:
        """Make ``name`` a run of just ``sources``, under the run's lock: readers see the old run until the
        new metadata replaces the old in one rename (the same commit point as any import)."""
        return self._add(name, sources, defaults, start_fresh=True)

    def _add(self, name: str, sources: list[ImportedSource], defaults: RunDefaults, start_fresh: bool) -> AddResult:
        check_run_name(name)
        self.ensure_current()
        run_dir = self.run_dir(name)
        if not self.runs_dir.is_dir():
            self.runs_dir.mkdir(parents=True, exist_ok=True)  # another import may be creating the store too
            write_store_file(self.root)
        sweep_leftovers(self)
        with locked_run_folder(run_dir):  # from here on, an import or rm that held the lock is done with it
            has_meta, has_launches = (run_dir / "meta.json").is_file(), any(run_dir.glob("launches-*.parquet"))
            if not start_fresh:
                self._check_not_orphaned(name, has_meta, has_launches)
            # a new run: no metadata and no launches (a folder an import left when it failed holds neither)
            created = not has_meta and not has_launches
            try:
                return self._add_locked(run_dir, name, sources, defaults, start_fresh)
            except BaseException:
                # A new run that failed goes, under its lock: an import waiting on it then makes the folder anew.
                if created and not (run_dir / "meta.json").exists():
                    shutil.rmtree(run_dir, ignore_errors=True)
                raise

    def _add_locked(
        self, run_dir: Path, name: str, sources: list[ImportedSource], defaults: RunDefaults, start_fresh: bool
    ) -> AddResult:
        """The import proper; the caller holds the run's lock."""
        sweep_temporary_files(run_dir)
        existing = self.load(name) if self.has_run(name) and not start_fresh else None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        meta = existing.meta if existing else RunMeta(name=name, created=now)
        frames = [existing.launches] if existing else [empty_launches()]
        known = {s.source_hash for s in meta.sources}
        added, skipped, notes = [], [], []
        for source in sources:
            if source.info.source_hash in known:
                skipped.append(source)
                continue
            _check_same_device(meta, source, name)
            if existing and not defaults.gpu:
                notes += _kept_gpu_note(meta, source, name)
            _check_not_another_pass(frames, meta, source, name)
            meta.cc = meta.cc or source.cc
            meta.device_name = meta.device_name or source.device_name
            if defaults.git_commit:
                source.info.settings[GIT_COMMIT] = defaults.git_commit
            frame = source.launches.assign(source=len(meta.sources))  # copy-on-write: no copy of the launches
            meta.sources.append(source.info)
            frames.append(frame)
            known.add(source.info.source_hash)
            added.append(source)
        meta.gpu = meta.gpu or defaults.gpu or next((s.gpu for s in added if s.gpu), None)
        meta.precision = meta.precision or defaults.precision
        meta.ceilings = meta.ceilings or defaults.ceilings
        if added:
            meta.arch = load_metric_set(meta.metric_set).arch_of(meta.cc)
            meta.updated = now
            filled = [f for f in frames if len(f)]
            launches = conform_launches(filled[0] if len(filled) == 1 else pd.concat(filled, ignore_index=True))
            run = Run(write_run(run_dir, meta, launches), launches)
        else:
            run = existing if existing else Run(meta, empty_launches())
        return AddResult(added=added, already_present=skipped, run=run, notes=notes)

    def _check_not_orphaned(self, name: str, has_meta: bool, has_launches: bool) -> None:
        """A run folder whose metadata is missing or unreadable still holds launches (the only copy, maybe): an
        import that is not told to replace the run must not write over them. Called under the run's lock."""
        if has_meta:
            try:
                self.load_meta(name)
            except StoreError as error:
                raise StoreError(
                    f"run {name!r} cannot be read: {error.message}",
                    f"import with --replace to write a new run over it, or remove it: hroofline rm {name}",
                ) from None
        elif has_launches:
            raise StoreError(
                f"run {name!r} has launches but no metadata (its meta.json is missing): importing would delete them",
                f"import with --replace to write a new run over it, or remove it: hroofline rm {name}",
            )


@dataclass(frozen=True)
class RunDefaults:
    """Run-level facts a command supplies; they fill what the run does not know yet."""

    gpu: str | None
    precision: str | None
    ceilings: dict[str, Any] | None
    git_commit: str | None = None  # of the code the sources measured, where the command was told (import --git-commit)


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
    if not any(len(frame) for frame in frames):  # a new run: nothing to be the same as
        return
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


def _kept_gpu_note(meta: RunMeta, source: ImportedSource, name: str) -> list[str]:
    """A source that names no GPU, appended to a run that has one, is judged as the run's GPU: said, since the
    source may come from another GPU (which nothing in it can tell)."""
    if source.cc or source.device_name or not meta.gpu_name:
        return []
    cc = f" (compute capability {meta.cc})" if meta.cc else ""
    return [
        f"{source.info.path} names no GPU: run {name!r} keeps its GPU, {meta.gpu_name}{cc}, and judges these "
        "launches against its roofs; if they were measured on another GPU, import them into another run with --gpu"
    ]


def _check_same_device(meta: RunMeta, source: ImportedSource, name: str) -> None:
    if meta.sources and (meta.gpu == CPU) != source.on_cpu:
        where = "the CPU" if meta.gpu == CPU else (meta.gpu_name or "a GPU")
        source_where = "the CPU" if source.on_cpu else "a GPU"
        raise StoreError(
            f"run {name!r} holds data measured on {where}; {source.info.path} was measured on {source_where}",
            "import it into another run",
        )
    if meta.cc and source.cc and meta.cc != source.cc:
        raise StoreError(
            f"run {name!r} holds data of a compute capability {meta.cc} GPU; {source.info.path} is from {source.cc}",
            "import it into another run",
        )
