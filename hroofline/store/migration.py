"""Bringing a store written by an older hroofline to today's layout and schema, on first use.

Layout 1 kept each run in ``runs/<run>/`` with raw metrics as columns and no ``run`` column; older schemas
lack columns that readers of the whole store (DuckDB, Polars, Spark) expect in every file. Each run is read
as :func:`hroofline.store.files.read_run` reads any run, written again in today's schema and put in place in one
rename, so a migration stopped at any point leaves every run readable, old or new; the next use goes on
where it stopped. ``store.json`` says when the store is current, so that a current store costs one small read.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from hroofline.errors import StoreError
from hroofline.model.run import SCHEMA_VERSION
from hroofline.store.files import (
    LAYOUT_VERSION,
    RUN_FOLDER_PREFIX,
    STORE_FILE,
    StoreLayout,
    locked,
    read_meta_json,
    read_run,
    sweep_leftovers,
    write_run,
    write_run_into_place,
    write_store_file,
)


def store_version(root: Path) -> tuple[int, int] | None:
    """(layout, schema version) as ``store.json`` says, or None where it says nothing."""
    try:
        data = json.loads((root / STORE_FILE).read_text())
        return int(data["layout"]), int(data["schema_version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def migrate_if_old(store: StoreLayout) -> None:
    if not store.runs_dir.is_dir():
        return
    version = store_version(store.root)
    if version is not None and version > (LAYOUT_VERSION, SCHEMA_VERSION):
        raise StoreError(
            f"store {store.root} was written by a newer hroofline (layout {version[0]}, schema {version[1]})",
            "upgrade hroofline",
        )
    # A current store can still get an old-layout run: an older hroofline writing into it.
    if version == (LAYOUT_VERSION, SCHEMA_VERSION) and not old_layout_folders(store):
        return
    if not os.access(store.root, os.W_OK) or not os.access(store.runs_dir, os.W_OK):
        raise StoreError(
            f"store {store.root} was written by an older hroofline and must be migrated, but it is read-only",
            "run any hroofline command on it once with write access, or copy it somewhere writable",
        )
    with locked(store.root / ".lock"):
        if store_version(store.root) != (LAYOUT_VERSION, SCHEMA_VERSION) or old_layout_folders(store):
            migrate(store)  # unless another process did it meanwhile


def old_layout_folders(store: StoreLayout) -> list[Path]:
    """Runs in layout 1 (``runs/NAME/``): one listing of the runs folder."""
    return [
        folder
        for folder in store.runs_dir.iterdir()
        if not folder.name.startswith((".", RUN_FOLDER_PREFIX)) and (folder / "meta.json").is_file()
    ]


def migrate(store: StoreLayout) -> None:
    """Every run to today's layout and schema; runs that cannot be read are left where they are, with a
    note. Ends by writing ``store.json``."""
    migrated, left = 0, []
    sweep_leftovers(store)
    for folder in sorted(store.runs_dir.iterdir()):
        if folder.name.startswith(".") or not (folder / "meta.json").is_file():
            continue
        try:
            migrated += _migrate_run(store, folder)
        except StoreError as error:
            left.append(f"{folder.name} ({error.message})")
    write_store_file(store.root)
    if migrated:
        _note(f"migrated {migrated} run(s) in {store.root} to store layout {LAYOUT_VERSION}, schema {SCHEMA_VERSION}")
    for entry in left:
        _note(f"could not migrate run folder {entry}; it is left as it was")


def _migrate_run(store: StoreLayout, folder: Path) -> int:
    """1 when the run was rewritten, 0 when it was current already."""
    legacy = not folder.name.startswith(RUN_FOLDER_PREFIX)
    name = folder.name if legacy else folder.name.removeprefix(RUN_FOLDER_PREFIX)
    raw = read_meta_json(folder / "meta.json")
    target = store.run_dir(name)
    if legacy and (target / "meta.json").is_file():
        if _same_run(raw, read_meta_json(target / "meta.json")):  # moved by a migration stopped before removing it
            shutil.rmtree(folder, ignore_errors=True)
            return 0
        name = _free_name(store, f"{name}.old-layout")  # another run of that name: keep both
        target = store.run_dir(name)
        _note(f"run folder {folder.name} (old layout) and run {folder.name} differ: the old one is now run {name}")
    raw["name"] = name
    if not legacy and raw.get("schema_version", 0) == SCHEMA_VERSION:
        return 0
    with locked(folder / ".lock"):
        run = read_run(folder, raw)
        if not legacy:
            write_run(folder, run.meta, run.launches)  # in place: meta.json is the commit point
            return 1
        write_run_into_place(store, target, run.meta, run.launches, "migrating")
    shutil.rmtree(folder, ignore_errors=True)
    return 1


def _same_run(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The same run before and after its migration: the same sources (by checksum) and last update."""

    def identity(data: dict[str, Any]) -> tuple[object, ...]:
        sources = data.get("sources") or []
        return tuple(source.get("source_hash", source.get("sha256")) for source in sources), data.get("updated")

    return identity(old) == identity(new)


def _free_name(store: StoreLayout, name: str) -> str:
    candidate, number = name, 1
    while store.run_dir(candidate).exists():
        number += 1
        candidate = f"{name}{number}"
    return candidate


def _note(text: str) -> None:
    print(f"hroofline: note: {text}", file=sys.stderr)
