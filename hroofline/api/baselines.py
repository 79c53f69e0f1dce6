"""Baselines from Python, as ``hroofline baseline set|list|rm`` and ``compare --baseline`` (store/baselines.py)::

hroofline.set_baseline("last-good", "resnet18-cpu")     # as `hroofline baseline set last-good resnet18-cpu`
hroofline.baselines()                                   # a DataFrame: name, run, set_at, run_present
hroofline.compare(hroofline.load_baseline("last-good"), "resnet18-cpu-new")
hroofline.remove_baseline("last-good")                  # the run stays
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.api.notebook import store_at
from hroofline.store import baselines as stored

if TYPE_CHECKING:
    import pandas as pd

    from hroofline.api.face import RunView
    from hroofline.store.baselines import Baseline


def set_baseline(name: str, run: str, store: str | Path | None = None) -> Baseline:
    """Makes ``name`` the baseline of ``run``, a run of the store (``store``, else $HROOFLINE_STORE, else
    ./hroofline-runs); a name set before moves to ``run``."""
    return stored.set_baseline(store_at(store), name, run)


def baselines(store: str | Path | None = None) -> pd.DataFrame:
    """The store's baselines, one row each by name: the run it names, when it was set, whether the run is there."""
    import pandas as pd

    return pd.DataFrame(stored.baseline_rows(store_at(store)), columns=list(stored.BASELINE_COLUMNS))


def remove_baseline(name: str, store: str | Path | None = None) -> Baseline:
    """Removes baseline ``name``; its run stays."""
    return stored.remove_baseline(store_at(store), name)


def load_baseline(name: str, store: str | Path | None = None) -> RunView:
    """The run baseline ``name`` names, as :func:`hroofline.load` gives a run (``store``: the store that holds the
    baseline, e.g. the last good store a CI job downloaded)."""
    from hroofline.api.notebook import load

    return load(stored.baseline_run(store_at(store), name), store)
