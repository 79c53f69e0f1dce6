"""A folder of ncu passes over one run: Yang et al.'s one-metric-per-run logs, NERSC's time and FLOP
passes, or ``hroofline profile --passes groups``. Every file is read in its own format (report, CSV,
console log, each possibly gzip-compressed) and the passes are joined (:mod:`hroofline.importers.join`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hroofline.errors import InputError
from hroofline.importers.join import Pass, join_passes
from hroofline.importers.raw import RawProfile
from hroofline.importers.source_hash import SHA256, file_hash, files_hash
from hroofline.roofs.metricset import MetricSet


def folder_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(f"{folder}: the folder holds no files")
    return files


def folder_digest(files: list[Path]) -> tuple[str, list[dict[str, str]]]:
    """A folder's identity and its files': SHA-256 always (small files; the same identity in every run)."""
    listed = [{"name": f.name, SHA256: file_hash(f, SHA256)} for f in files]
    return files_hash(listed, SHA256), listed


def read_metric_logs(
    folder: Path, merge: str, metric_set: MetricSet, read_file: Callable[[Path], RawProfile]
) -> RawProfile:
    passes = [Pass(path, read_file(path)) for path in folder_files(folder)]
    joined = join_passes(passes, merge, metric_set, str(folder))
    joined.kind = "ncu-metric-logs"
    return joined
