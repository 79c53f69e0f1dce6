"""This CPU's ceilings, measured once per machine and kept in the user's cache folder.

A CPU run's roofs are measured on the machine that ran it (``hroofline ceilings --measure --quick``, without the
host's time per op). They stay what they are from one profile to the next, so the first profile measures them
and writes them as a ceilings file; later ones read that file. The file is named by a digest of what its
numbers depend on (:func:`machine_key`: the CPU's model, its cores and PyTorch's threads, hroofline's and
PyTorch's versions), so a change of any of these measures anew; a file that cannot be read as ceilings is
measured anew too, said in one line.

The folder: :func:`hroofline.collect.cache_folder.cache_dir`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hroofline.collect.cache_folder import CACHE_ENV, cache_dir, write_atomically
from hroofline.errors import HrooflineError
from hroofline.roofs.ceilings import Ceilings, ceilings_from_toml, read_toml_file

KEY_TABLE = "machine"  # the cached file's table that holds its key
BUSY_LOAD_PER_CORE = 2.0  # a load average over this many per core: roofs measured then may be low


def machine_key() -> dict[str, str]:
    """What a CPU's measured ceilings depend on: another value of any of these is another machine."""
    import torch

    from hroofline import __version__
    from hroofline.collect.measure import cpu_name, usable_cpus

    return {
        "cpu": cpu_name(),
        "cores": str(os.cpu_count() or 0),
        "threads": str(torch.get_num_threads()),
        "usable_cpus": str(usable_cpus()),
        "hroofline": __version__,
        "torch": torch.__version__,
    }


def cache_file(key: dict[str, str]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"cpu-ceilings-{digest}.toml"


@dataclass(frozen=True)
class CpuCeilings:
    """This CPU's ceilings, where they are kept, and whether they were measured now (else read back)."""

    ceilings: Ceilings
    path: Path | None  # None: measured, but could not be kept
    measured_now: bool
    measured_on: str  # the day they were measured, YYYY-MM-DD
    load: float | None = None  # the machine's load average (1 minute) as the measurement began

    @property
    def busy(self) -> str | None:
        """How busy the machine was, where its load average was over twice its cores: roofs measured then may be
        low (a dot of a later profile above them). (Up to twice, one thread's rate times the threads holds the
        roofs: measure.py; and the minute after `make venv`'s pip, or a test run's two workers, is not busy.)"""
        cores = os.cpu_count() or 1  # the load average is the machine's: against its cores
        if self.load is None or self.load <= BUSY_LOAD_PER_CORE * cores:
            return None
        return f"the machine was busy, load average {self.load:.1f} on {cores} core(s): the roofs may be low"


def cpu_ceilings_cached(progress: Callable[[str], None], remeasure: bool = False) -> CpuCeilings:
    """This CPU's ceilings: read from the cache, else measured (``ceilings --measure --quick`` without the host's
    time per op) and kept there. ``remeasure`` measures even where a cached file exists; so does the first
    profile that finds the machine quiet after they were measured on a busy one (the roofs may be low)."""
    key = machine_key()
    path = cache_file(key)
    load = _load_average()
    why = "as asked (--measure-ceilings)" if remeasure else "once for this machine"
    if path.exists() and not remeasure:
        cached = _read(path, key, progress)
        if cached is not None and not (cached.busy and replace(cached, load=load).busy is None):
            return cached
        why = "again, on a quiet machine (they were measured on a busy one)" if cached is not None else "again"
    progress(f"measuring this CPU's ceilings, {why} (hroofline ceilings --measure --quick)")
    text = _quick_measurement(progress)
    day = time.strftime("%Y-%m-%d")
    text += f"\n[{KEY_TABLE}]\n" + "".join(f"{name} = {json.dumps(value)}\n" for name, value in key.items())
    text += f'measured_on = "{day}"\n' + (f"load_average = {load:.2f}\n" if load is not None else "")
    try:
        write_atomically(path, text)
    except OSError as error:  # a read-only home: the profile goes on, measuring again next time
        progress(f"could not keep the ceilings in {path.parent} ({error.strerror}): set {CACHE_ENV} to a folder")
        return CpuCeilings(ceilings_from_toml(tomllib.loads(text), path), None, True, day, load)
    return CpuCeilings(ceilings_from_toml(tomllib.loads(text), path), path, True, day, load)


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every system
        return None


def _quick_measurement(progress: Callable[[str], None]) -> str:
    """The roofs as a ceilings file's text; its steps unsaid (eleven lines the profile's two lines around them,
    'measuring' and 'measured: TIME', cover; `hroofline ceilings --measure` lists them)."""
    from hroofline.collect.measure import measure

    return measure("cpu", quick=True, host=False).toml()


def _read(path: Path, key: dict[str, str], progress: Callable[[str], None]) -> CpuCeilings | None:
    """The cached ceilings, or None (said in one line) where the file is not what this machine wrote."""
    try:
        data = read_toml_file(path, "cached ceilings file")
        ceilings = ceilings_from_toml(data, path)
        kept = data.get(KEY_TABLE)
        if not isinstance(kept, dict) or {name: kept.get(name) for name in key} != key:
            raise HrooflineError(f"cached ceilings file {path} is not this machine's")
    except HrooflineError as error:
        progress(f"{error.one_line()}: not used")
        return None
    load = kept.get("load_average")
    load = float(load) if isinstance(load, int | float) and not isinstance(load, bool) else None
    return CpuCeilings(ceilings, path, False, str(kept.get("measured_on", "?")), load)
