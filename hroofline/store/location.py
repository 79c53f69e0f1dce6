"""Where the run store is: light enough for the CLI to name it in ``--help`` before pandas is imported."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STORE = "hroofline-runs"
STORE_ENV = "HROOFLINE_STORE"


def store_path(option: str | None) -> Path:
    """--store DIR, else $HROOFLINE_STORE, else ./hroofline-runs."""
    return Path(option or os.environ.get(STORE_ENV) or DEFAULT_STORE)
