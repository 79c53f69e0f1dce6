"""What hroofline keeps per machine between runs, in one folder: this CPU's measured ceilings
(:mod:`hroofline.collect.ceilings_cache`) and files that take seconds to make and are the same each time (the
charts' JavaScript, made by vl-convert).

The folder: ``$HROOFLINE_CACHE_DIR``, else ``$XDG_CACHE_HOME/hroofline``, else ``~/.cache/hroofline``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from hroofline.store.files import replace_text

CACHE_ENV = "HROOFLINE_CACHE_DIR"


def cache_dir() -> Path:
    """Where hroofline keeps what it measured or made on this machine."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "hroofline"


def write_atomically(path: Path, text: str) -> None:
    """Written under another name, then renamed (the store's :func:`~hroofline.store.files.replace_text`), its
    folder made first: a reader finds the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, text)


def kept_text(name: str, make: Callable[[], str], mark: str) -> str:
    """The text of the cache folder's file ``name`` (the name says everything the text depends on), made by
    ``make`` and kept there when it is missing or lacks ``mark`` (a string every whole text holds: a file cut
    short or changed is made again). A folder that cannot be written costs only the time: the text is made each
    time."""
    path = cache_dir() / name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    if mark in text:
        return text
    text = make()
    with contextlib.suppress(OSError):
        write_atomically(path, text)
    return text
