"""Named baselines: a store's ``baselines.json`` maps a name (``main``, ``last-good``) to a run of the store, so that
a CI job compares each candidate with the last good run by a name that outlives the run's own.

The file is replaced whole in one ``os.replace`` under its own lock (``.baselines.lock``), like a run's metadata:
a reader sees the old mapping or the new one. A baseline names a run and holds nothing of it: removing the
baseline leaves the run; removing the run is refused while a baseline names it (the last good run of a CI job is
not lost to a clean-up); renaming the run carries its baselines to the new name.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from hroofline.errors import StoreError, UsageError, did_you_mean
from hroofline.store.files import locked, replace_json
from hroofline.store.reading import StoreReader

BASELINES_FILE = "baselines.json"
_LOCK_FILE = ".baselines.lock"
BASELINE_COLUMNS = ("name", "run", "set_at", "run_present")  # a row of `hroofline baseline list`
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")  # as a run's name


@dataclass(frozen=True)
class Baseline:
    """A name for a run of the store, and when it was set (UTC, ISO 8601)."""

    name: str
    run: str
    set_at: str


def check_baseline_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"invalid baseline name {name!r}",
            "use letters, digits, '.', '_', '+' and '-', starting with a letter or digit",
        )
    return name


def read_baselines(root: Path) -> dict[str, Baseline]:
    """The store's baselines by name (none where the store has no ``baselines.json``)."""
    path = root / BASELINES_FILE
    try:
        data = json.loads(path.read_text())
        return {name: Baseline(name, entry["run"], entry["set_at"]) for name, entry in data["baselines"].items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise StoreError(
            f"unreadable baselines file {path} ({error})", "remove it and set the baselines again"
        ) from None


def set_baseline(store: StoreReader, name: str, run: str) -> Baseline:
    """Makes ``name`` the baseline of run ``run`` (which must be in the store), replacing what it named before."""
    check_baseline_name(name)
    baseline = Baseline(name, run, datetime.now(UTC).isoformat(timespec="seconds"))
    with baselines_locked(store):  # a removal of the run waits, or has removed it: then it is unknown here
        store.load_meta(run)  # an unknown run: one line, with the runs it may have meant
        baselines = read_baselines(store.root)
        baselines[name] = baseline
        _write(store.root, baselines)
    return baseline


def remove_baseline(store: StoreReader, name: str) -> Baseline:
    """Removes baseline ``name``; its run stays."""
    check_baseline_name(name)
    store.ensure_current()
    with baselines_locked(store):
        baselines = read_baselines(store.root)
        if name not in baselines:
            raise _unknown(store.root, name, baselines)
        removed = baselines.pop(name)
        _write(store.root, baselines)
    return removed


def baseline_run(store: StoreReader, name: str) -> str:
    """The run baseline ``name`` names; an unknown name, or a baseline whose run is gone, is one line."""
    check_baseline_name(name)
    store.ensure_current()
    baselines = read_baselines(store.root)
    if name not in baselines:
        raise _unknown(store.root, name, baselines)
    run = baselines[name].run
    if not store.has_run(run):
        raise StoreError(
            f"baseline {name!r} names run {run!r}, which is no longer in store {store.root}",
            f"set it again: hroofline baseline set {name} RUN",
        )
    return run


def baselines_of(root: Path, run: str) -> list[str]:
    """The names of the baselines that name run ``run``."""
    return sorted(name for name, baseline in read_baselines(root).items() if baseline.run == run)


def check_not_baseline(root: Path, run: str) -> None:
    """Refuses to remove a run that a baseline names."""
    names = baselines_of(root, run)
    if names:
        listed = ", ".join(repr(n) for n in names)
        raise StoreError(
            f"run {run!r} is the baseline {listed} of store {root}: not removed",
            f"set the baseline to another run, or remove it first: hroofline baseline rm {names[0]}",
        )


def carry_baselines(store: StoreReader, run: str, new_run: str) -> None:
    """After run ``run`` was renamed ``new_run`` (under its lock): the baselines that named it name ``new_run``."""
    with baselines_locked(store):
        baselines = read_baselines(store.root)
        moved = {n: Baseline(n, new_run, b.set_at) for n, b in baselines.items() if b.run == run}
        if moved:
            _write(store.root, {**baselines, **moved})


def baseline_rows(store: StoreReader) -> list[dict[str, str | bool]]:
    """One row per baseline, by name: the run it names, when it was set, and whether the run is still there."""
    store.ensure_current()
    return [
        {**asdict(baseline), "run_present": store.has_run(baseline.run)}
        for _, baseline in sorted(read_baselines(store.root).items())
    ]


def _unknown(root: Path, name: str, baselines: dict[str, Baseline]) -> StoreError:
    hint = did_you_mean(name, sorted(baselines), "baselines there", "hroofline baseline list")
    return StoreError(f"no baseline named {name!r} in store {root}", hint)


@contextlib.contextmanager
def baselines_locked(store: StoreReader) -> Iterator[None]:
    """The baselines' lock: what holds it sees no baseline set or removed meanwhile. Taken after a run's lock where
    both are held (removing or renaming a run), never before one."""
    store.root.mkdir(parents=True, exist_ok=True)
    with locked(store.root / _LOCK_FILE):
        yield


def _write(root: Path, baselines: dict[str, Baseline]) -> None:
    """The baselines file replaced whole, in one rename (the caller holds the lock)."""
    data = {"baselines": {n: {"run": b.run, "set_at": b.set_at} for n, b in sorted(baselines.items())}}
    replace_json(root / BASELINES_FILE, data)
