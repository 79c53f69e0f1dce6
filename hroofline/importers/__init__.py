"""The import stage: any real ncu output or PyTorch profiler trace to the standard per-launch table.

:mod:`hroofline.importers.build` is the pipeline (read, recognise, join passes, evaluate the formulas and the
report's roofs); the readers are one module per format. ``from hroofline.importers import import_source`` loads
it on first use.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib

    for module in ("build", "source"):
        value = getattr(importlib.import_module(f"hroofline.importers.{module}"), name, None)
        if value is not None:
            return value
    raise AttributeError(f"module 'hroofline.importers' has no attribute {name!r}")
