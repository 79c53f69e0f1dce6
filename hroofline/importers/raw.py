"""What every reader returns before the metric formulas run (per-launch identity and raw metrics), and how a
source's bytes are read: regular files only, decompressed (gzip, xz, zstd) in a stream up to a bound."""

from __future__ import annotations

import lzma
import mmap
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pandas as pd

from hroofline.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
NCU_REPORT_MAGIC = b"NVR\x00"

# How far a compressed source may expand. Real profiles compress 10-90x (the shared DeepCAM logs: 50-87x with
# gzip; ncu reports and traces less); 1,000x is far above that and near deflate's own maximum (about 1,030x), so
# only data made to expand (a "bomb") reaches it. Small files may always expand to 256 MB; nothing expands past
# 4 GB, more than a 1,000,000-launch export (about 0.3-0.7 GB) or a 100,000-launch .ncu-rep holds, and still
# within what a workstation can parse.
EXPANSION_RATIO = 1000
EXPANSION_FLOOR = 256 << 20
EXPANSION_CAP = 4 << 30
_READ = 1 << 20  # compressed bytes per read
_OUT = 8 << 20  # decompressed bytes per step
_SNIFF = 4096  # the head that tells binary junk from a report, a CSV, a log or JSON


@dataclass
class RawProfile:
    """Launches as a reader found them.

    ``identity`` has one row per launch with the columns launch_id, kernel, nvtx_ranges (a tuple of
    push/pop range names, outermost first, then start/end ranges), grid, block, device, cc, stream.
    ``metrics`` has the same index and one float column per ncu metric, already in SI base units.
    ``rejected`` counts, per (metric, reason), the launches whose value the reader could not take (text that
    is no number); :func:`hroofline.importers.values.check_values` adds the numbers that make no sense.
    """

    kind: str
    identity: pd.DataFrame
    metrics: pd.DataFrame
    units: dict[str, str] = field(default_factory=dict)
    ncu_version: str | None = None
    device_name: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rejected: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass
class SourceData:
    """A source file's content: ``data`` (decompressed where it was compressed) and, for a file that was not
    compressed, its ``path``, so that readers may stream it rather than parse from a memory map."""

    data: bytes | bytearray | mmap.mmap
    plain_path: Path | None = None


def check_regular_file(path: Path) -> int:
    """The file's size; a device (/dev/zero), pipe or socket is refused: it may never end."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: not a regular file (a device, pipe or socket): save the data to a file first")
    return info.st_size


def read_source_data(path: Path) -> SourceData:
    """A file's content, decompressed where it is gzip or xz (by content, not by name) up to the expansion bound.
    Plain files are memory-mapped (sniffing touches only their start); nothing past the size seen is read."""
    size = check_regular_file(path)
    try:
        with path.open("rb") as handle:
            magic = handle.read(6)
            kind = "gzip" if magic[:2] == GZIP_MAGIC else "xz" if magic == XZ_MAGIC else None
            kind = "zstd" if magic[:4] == ZSTD_MAGIC else kind
            if kind:
                handle.seek(0)
                return SourceData(_decompress(handle, size, path, kind))
            handle.seek(0)
            if size < (1 << 20):
                return SourceData(handle.read(size), path)
            return SourceData(mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ), path)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None


def expansion_limit(compressed_size: int) -> int:
    return min(max(EXPANSION_RATIO * compressed_size, EXPANSION_FLOOR), EXPANSION_CAP)


def _decompress(handle: BinaryIO, size: int, path: Path, kind: str) -> bytearray:
    """The decompressed content, in steps: stops at the expansion limit, and as soon as its head shows binary
    junk (a bomb of zeros is refused after a few KB, never held in memory)."""
    limit = expansion_limit(size)
    left = size

    def read() -> bytes:
        nonlocal left
        chunk = handle.read(min(_READ, left)) if left > 0 else b""
        left -= len(chunk)
        return chunk

    out = bytearray()
    checked = False
    try:
        pieces = {"xz": _xz_pieces, "gzip": _gzip_pieces, "zstd": _zstd_pieces}[kind](read, path)
        for piece in pieces:
            out += piece
            if len(out) > limit:
                raise InputError(
                    f"{path}: the {kind} data expands to more than {limit / 1e6:,.0f} MB ({EXPANSION_RATIO:,}x its "
                    f"size, {EXPANSION_CAP >> 30} GB at most): refused as a decompression bomb; if it is a real "
                    "profile, decompress it and import the plain file"
                )
            if not checked and len(out) >= _SNIFF:
                check_head(out, path)
                checked = True
    except (EOFError, OSError, zlib.error, lzma.LZMAError, ValueError):  # pyarrow's zstd raises OSError
        raise InputError(f"{path}: the {kind} data is truncated or corrupt") from None
    check_head(out, path)
    return out


def _gzip_pieces(read: Callable[[], bytes], path: Path) -> Iterator[bytes]:
    """Decompressed pieces of at most ``_OUT`` bytes; concatenated members and zero padding as gzip reads them."""
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = b""
    while True:
        if not data:
            data = read()
            if not data:
                if not decompressor.eof:
                    raise EOFError
                return
        if decompressor.eof:  # after a member: padding, or the next member
            data = data.lstrip(b"\x00")
            if not data:
                continue
            if not data.startswith(GZIP_MAGIC):
                raise InputError(f"{path}: the gzip data is followed by data that is not gzip")
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        yield decompressor.decompress(data, _OUT)
        data = decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail


def _xz_pieces(read: Callable[[], bytes], path: Path) -> Iterator[bytes]:
    """Decompressed pieces of at most ``_OUT`` bytes; concatenated streams and their padding as xz reads them."""
    decompressor = lzma.LZMADecompressor()
    data = b""
    while True:
        if decompressor.needs_input:
            if not data:
                data = read()
                if not data:
                    raise EOFError
            piece, data = decompressor.decompress(data, _OUT), b""
        else:
            piece = decompressor.decompress(b"", _OUT)
        yield piece
        if decompressor.eof:
            rest = decompressor.unused_data.lstrip(b"\x00")
            while not rest:
                more = read()
                if not more:
                    return
                rest = more.lstrip(b"\x00")
            if not rest.startswith(XZ_MAGIC):
                raise InputError(f"{path}: the xz data is followed by data that is not xz")
            decompressor, data = lzma.LZMADecompressor(), rest


def _zstd_pieces(read: Callable[[], bytes], path: Path) -> Iterator[bytes]:
    """Decompressed pieces of a zstd stream (``.ncu-rep.zst``), by pyarrow's codec: no module of its own needed."""
    import pyarrow as pa

    compressed = bytearray()
    while chunk := read():
        compressed += chunk
    with pa.CompressedInputStream(pa.BufferReader(bytes(compressed)), "zstd") as stream:
        while piece := stream.read(_OUT):
            yield piece


def check_head(data: bytes | bytearray, path: Path) -> None:
    """Binary data that is no ncu report is refused from its first bytes, before more is decompressed."""
    if data[:4] != NCU_REPORT_MAGIC and b"\x00" in data[:_SNIFF]:
        raise InputError(f"{path}: not an ncu report, CSV export or console log (binary data)")


def decode_text(data: bytes | bytearray | mmap.mmap) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def is_blank(data: bytes | bytearray | mmap.mmap) -> bool:
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
