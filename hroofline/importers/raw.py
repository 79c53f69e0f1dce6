"""What every reader returns before the metric formulas run: per-launch identity and raw metrics."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import mmap
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hroofline.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"


@dataclass
class RawProfile:
    """Launches as a reader found them.

    ``identity`` has one row per launch with the columns launch_id, kernel, nvtx_ranges (a tuple of
    push/pop range names, outermost first, then start/end ranges), grid, block, device, cc, stream.
    ``metrics`` has the same index and one float column per ncu metric, already in SI base units.
    """

    kind: str
    identity: pd.DataFrame
    metrics: pd.DataFrame
    units: dict[str, str] = field(default_factory=dict)
    ncu_version: str | None = None
    device_name: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def read_source_bytes(path: Path) -> bytes:
    """A file's content, gunzipped when it is gzip-compressed (by content, not by name)."""
    return gunzip_if_needed(read_file_bytes(path), path)


def read_file_bytes(path: Path) -> bytes | mmap.mmap:
    """A file's bytes; large files are memory-mapped rather than copied into memory."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < (1 << 20):
                return handle.read()
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None


def gunzip_if_needed(data: bytes | mmap.mmap, path: Path) -> bytes | mmap.mmap:
    """The data, decompressed where it is gzip or xz (shared reports travel as .ncu-rep.xz)."""
    if data[:6] == XZ_MAGIC:
        try:
            return lzma.decompress(data)
        except lzma.LZMAError:
            raise InputError(f"{path}: the xz data is truncated or corrupt") from None
    if data[:2] != GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error):
        raise InputError(f"{path}: the gzip data is truncated or corrupt") from None


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def decode_text(data: bytes | mmap.mmap) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def is_blank(data: bytes | mmap.mmap) -> bool:
    return re.search(rb"\S", data) is None


def check_last_launch_complete(rows_per_launch: list[int], where: str, what: str) -> None:
    """A file cut at a line boundary ends with a launch that has fewer rows than every other one."""
    if len(rows_per_launch) < 2:
        return
    last, others = rows_per_launch[-1], rows_per_launch[:-1]
    if last < min(others):
        raise InputError(
            f"{where}: the file ends inside launch {len(rows_per_launch)}: it has {last} {what} where every "
            f"other launch has at least {min(others)} (is the file truncated?)"
        )
