"""The ground: a :class:`~hroofline.model.run.Run` and its vocabulary, data that imports no stage.

``run`` (the run, its metadata and launch columns), ``quantities`` (quantities, roof keys and their labels),
``phases`` and ``layers`` (what a launch belongs to), ``numbers`` (SI text and JSON values). ``from
hroofline.model import Run`` reads :mod:`hroofline.model.run`, loaded on first use so that this package costs
nothing to import.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib

    run = importlib.import_module("hroofline.model.run")
    try:
        return getattr(run, name)
    except AttributeError:
        raise AttributeError(f"module 'hroofline.model' has no attribute {name!r}") from None
