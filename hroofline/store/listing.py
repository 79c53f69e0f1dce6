"""The store's list of runs, one row each from its metadata (no launches are read, no pandas imported):
what ``hroofline runs`` prints and the ``runs`` table of ``hroofline query``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hroofline.model.run import RunMeta
from hroofline.store.reading import BrokenRun, StoreReader

RUN_LISTING_COLUMNS: tuple[str, ...] = (
    "run",
    "kind",
    "gpu",
    "cc",
    "arch",
    "precision",
    "compile",
    "phases",
    "sources",
    "launches",
    "ncu",
    "created",
    "updated",
)


def run_listing(store: StoreReader) -> tuple[list[dict[str, Any]], list[BrokenRun]]:
    """One row per readable run, from the runs' metadata alone; and the runs that cannot be read."""
    metas, broken = store.readable_metas()
    return listing_rows(metas), broken


def listing_rows(metas: Sequence[RunMeta]) -> list[dict[str, Any]]:
    return [
        {
            "run": meta.name,
            "kind": "+".join(dict.fromkeys(source.collection for source in meta.sources)) or None,
            "gpu": meta.gpu_name,
            "cc": meta.cc,
            "arch": meta.arch,
            "precision": meta.precision,
            "compile": meta.compile_mode,
            "phases": ",".join(meta.phases) or None,
            "sources": len(meta.sources),
            "launches": sum(s.launches for s in meta.sources),
            "ncu": ", ".join(meta.ncu_versions) or None,
            "created": meta.created,
            "updated": meta.updated,
        }
        for meta in metas
    ]
