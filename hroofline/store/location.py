"""Where the run store is: light enough for the CLI to name it in ``--help`` before pandas is imported."""

from __future__ import annotations

import os
from pathlib import Path

from hroofline.errors import StoreError

DEFAULT_STORE = "hroofline-runs"
STORE_ENV = "HROOFLINE_STORE"


def store_path(option: str | None, writing: bool = True) -> Path:
    """--store DIR, else $HROOFLINE_STORE, else ./hroofline-runs; checked to be a folder or nothing yet (a write
    creates it; a read, see :func:`existing_store_path`, needs it)."""
    path = Path(option or os.environ.get(STORE_ENV) or DEFAULT_STORE)
    if path.is_symlink() and not path.exists():
        raise StoreError(
            f"store {path} is a link to {os.readlink(path)}, which does not exist", "fix or remove the link"
        )
    if path.exists() and not path.is_dir():
        hint = (
            "give a folder with --store (an import or profile creates it if missing)"
            if writing
            else "give the folder of a store with --store (`hroofline import` or `profile` makes one)"
        )
        raise StoreError(f"store {path} is a file, not a folder", hint)
    if not path.exists():
        there = next((parent for parent in path.parents if parent.exists()), None)  # the nearest that is
        if there is not None and not there.is_dir():
            raise StoreError(f"store {path} cannot be made: {there} is a file", "give a folder with --store")
    return path


def existing_store_path(option: str | None) -> Path:
    """The store a read command reads (as :func:`store_path`), which must exist: a misspelt --store is said, not
    taken for an empty store (and nothing is created)."""
    path = store_path(option, writing=False)
    if not path.exists():
        raise StoreError(f"no store at {path}", "create one with `hroofline import` or `profile`")
    return path
