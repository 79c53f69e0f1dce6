"""The store stage: runs kept as a Hive-partitioned Parquet dataset.

``files`` (the disk layer: layout, atomic reads and writes, locks), ``runs`` (the runs: add, replace, rename,
remove), ``migration`` (older stores brought to today's layout, on ``files`` alone), ``format`` (the Parquet
schema), ``upgrade`` (runs of older schemas corrected on reading), ``location`` (where the store is), ``query``
(SQL over it). ``from hroofline.store import RunStore`` loads what it names on first use: the CLI's start does not
pay for pandas and pyarrow.
"""

from __future__ import annotations

from typing import Any

_HOMES = {"RunStore": "runs", "RunDefaults": "runs", "AddResult": "runs"}


def __getattr__(name: str) -> Any:
    import importlib

    for module in (_HOMES.get(name, "files"), "runs"):
        value = getattr(importlib.import_module(f"hroofline.store.{module}"), name, None)
        if value is not None:
            return value
    raise AttributeError(f"module 'hroofline.store' has no attribute {name!r}")
