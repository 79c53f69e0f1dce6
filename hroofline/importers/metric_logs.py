"""A folder of one-metric-per-run ncu logs (Yang et al.'s method), merged into one profile.

Each file holds the console log of one application run with one metric, ending in ncu's long CSV.
Launch by launch merging needs every file to list the same launches (same ID, same kernel name, same
order); anything else is reported, never silently joined. ``--merge name`` instead sums each metric
per kernel name (rates are averaged) and joins those sums, which needs equal launch counts per name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from hroofline.errors import InputError, MergeError
from hroofline.importers.ncu_csv import read_ncu_csv
from hroofline.importers.raw import RawProfile, read_source_bytes, sha256_of_file

_RATE_MARKERS = (".per_second", ".per_cycle_elapsed", ".per_cycle_active", ".pct", ".ratio", ".peak_sustained")


def folder_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(f"{folder}: the folder holds no files")
    return files


def folder_digest(files: list[Path]) -> tuple[str, list[dict[str, str]]]:
    listed = [{"name": f.name, "sha256": sha256_of_file(f)} for f in files]
    digest = hashlib.sha256("".join(f"{f['name']}\0{f['sha256']}\n" for f in listed).encode()).hexdigest()
    return digest, listed


def read_metric_logs(folder: Path, merge: str) -> RawProfile:
    files = folder_files(folder)
    profiles = [(f, read_ncu_csv(read_source_bytes(f), str(f))) for f in files]
    if merge == "name":
        return _merge_by_name(profiles)
    return _merge_by_launch(profiles)


def _merge_by_launch(profiles: list[tuple[Path, RawProfile]]) -> RawProfile:
    first_path, first = profiles[0]
    reference = first.identity[["launch_id", "kernel"]].reset_index(drop=True)
    metrics = [first.metrics]
    units = dict(first.units)
    for path, profile in profiles[1:]:
        sequence = profile.identity[["launch_id", "kernel"]].reset_index(drop=True)
        if len(sequence) != len(reference) or not sequence.equals(reference):
            raise MergeError(
                f"{path.parent}: the per-metric files disagree on the launch sequence: "
                f"{_difference(first_path, reference, path, sequence)}",
                "pass --merge name to join per-kernel-name sums instead",
            )
        metrics.append(profile.metrics.reset_index(drop=True))
        for name, unit in profile.units.items():
            units.setdefault(name, unit)
    merged = _combine_metric_frames(metrics)
    return RawProfile(
        kind="ncu-metric-logs",
        identity=first.identity.reset_index(drop=True),
        metrics=merged,
        units=units,
        notes=[f"merged {len(profiles)} one-metric files launch by launch"],
    )


def _difference(path_a: Path, a: pd.DataFrame, path_b: Path, b: pd.DataFrame) -> str:
    if len(a) != len(b):
        return f"{path_a.name} has {len(a)} launches, {path_b.name} has {len(b)}"
    differs = (a["launch_id"] != b["launch_id"]).to_numpy() | (a["kernel"] != b["kernel"]).to_numpy()
    index = int(np.flatnonzero(differs)[0])
    return (
        f"launch {index + 1} is ID {a['launch_id'][index]} {_short(a['kernel'][index])!r} in {path_a.name} "
        f"but ID {b['launch_id'][index]} {_short(b['kernel'][index])!r} in {path_b.name}"
    )


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


def _combine_metric_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    combined = pd.concat([f.reset_index(drop=True) for f in frames], axis=1)
    # The same metric in two files: keep the first file's column.
    return combined.loc[:, ~combined.columns.duplicated()]


def _merge_by_name(profiles: list[tuple[Path, RawProfile]]) -> RawProfile:
    counts_ref: pd.Series | None = None
    ref_path = profiles[0][0]
    sums: list[pd.DataFrame] = []
    units: dict[str, str] = {}
    identity: pd.DataFrame | None = None
    for path, profile in profiles:
        kernels = profile.identity["kernel"].reset_index(drop=True)
        counts = kernels.value_counts(sort=False)
        if counts_ref is None:
            counts_ref = counts
            first_rows = profile.identity.reset_index(drop=True).drop_duplicates("kernel")
            identity = first_rows.set_index("kernel")
        elif not counts.sort_index().equals(counts_ref.sort_index()):
            name = next(
                (k for k in counts_ref.index.union(counts.index) if counts_ref.get(k, 0) != counts.get(k, 0)), "?"
            )
            raise MergeError(
                f"{path.parent}: --merge name needs the same launch count per kernel name in every file: "
                f"{_short(str(name))!r} has {counts_ref.get(name, 0)} in {ref_path.name} and "
                f"{counts.get(name, 0)} in {path.name}"
            )
        grouped = profile.metrics.reset_index(drop=True).groupby(kernels, sort=False)
        rates = [c for c in profile.metrics.columns if any(m in c for m in _RATE_MARKERS)]
        counters = [c for c in profile.metrics.columns if c not in rates]
        part = pd.concat([grouped[counters].sum(min_count=1), grouped[rates].mean()], axis=1)
        sums.append(part)
        for name, unit in profile.units.items():
            units.setdefault(name, unit)
    assert identity is not None and counts_ref is not None
    names = list(identity.index)
    merged = _combine_metric_frames([s.reindex(names) for s in sums])
    rows = identity.reset_index()
    rows["launches"] = [int(counts_ref[k]) for k in names]
    rows["launch_id"] = range(len(rows))
    return RawProfile(
        kind="ncu-metric-logs",
        identity=rows,
        metrics=merged.reset_index(drop=True),
        units=units,
        notes=[f"merged {len(profiles)} one-metric files per kernel name (--merge name): one row per name"],
    )
