"""A source's identity: a cryptographic hash of its file (or of its files' names and hashes), which a run keeps per
source so that importing the same file again adds nothing.

The value names its algorithm: ``blake3:<64 hex digits>`` is BLAKE3 (256 bits), the hash of runs begun with this
version on (BLAKE3 hashes a file about 2.6x as fast as SHA-256 on one core: 0.23 s against 0.59 s of CPU for the
823 MB CSV of ``bench/import_speed.py``); a bare 64-digit hex value is SHA-256, what every run begun before holds. A run
keeps the algorithm it began with (:func:`run_algorithm`), so that a file imported again into an older run is
hashed as it was then and recognised. Folders of one-metric-per-run logs keep SHA-256 over their small files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import blake3

from hroofline.errors import InputError
from hroofline.importers.raw import check_regular_file

BLAKE3 = "blake3"
SHA256 = "sha256"
_BLAKE3_PREFIX = BLAKE3 + ":"
_BLOCK = 1 << 20


def algorithm_of(identity: str) -> str:
    """The hash algorithm of a stored identity: BLAKE3 where it says so, else SHA-256 (a bare hex digest)."""
    return BLAKE3 if identity.startswith(_BLAKE3_PREFIX) else SHA256


def run_algorithm(identities: Iterable[str]) -> str:
    """The algorithm a run hashes its sources with: SHA-256 where it holds any SHA-256 identity (a run begun
    before BLAKE3, whose sources must be recognised again, or one holding a folder of logs), else BLAKE3."""
    return SHA256 if any(algorithm_of(identity) == SHA256 for identity in identities) else BLAKE3


def file_hash(path: Path, algorithm: str = BLAKE3) -> str:
    """The identity of one file: ``blake3:<hex>``, or the bare hex SHA-256. Read in 1 MiB blocks; both hashes
    release the GIL on each block, so that hashing runs beside the parsing on another core."""
    check_regular_file(path)
    digest = blake3.blake3() if algorithm == BLAKE3 else hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    return _named(digest.hexdigest(), algorithm)


def files_hash(files: list[dict[str, str]], algorithm: str) -> str:
    """The identity of a source made of several files: one hash over their names and identities (for SHA-256
    the same bytes as before BLAKE3, so that older runs recognise it)."""
    text = "".join(f"{f['name']}\0{entry_hash(f)}\n" for f in files).encode()
    digest = blake3.blake3(text) if algorithm == BLAKE3 else hashlib.sha256(text)
    return _named(digest.hexdigest(), algorithm)


def file_entry(name: str, identity: str) -> dict[str, str]:
    """One file of a source made of several, as its metadata lists it."""
    return {"name": name, "source_hash": identity}


def entry_hash(entry: dict[str, str]) -> str:
    """A listed file's identity (runs written before BLAKE3 list it as ``sha256``)."""
    return entry.get("source_hash") or entry[SHA256]


def _named(hexdigest: str, algorithm: str) -> str:
    return _BLAKE3_PREFIX + hexdigest if algorithm == BLAKE3 else hexdigest
