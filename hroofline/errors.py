"""Typed errors. The CLI prints each as one line on stderr (message, then hint) and exits 1."""

from __future__ import annotations

import errno
import os
import re


class HrooflineError(Exception):
    """A failure the user can act on. Never shown as a traceback."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message if not self.hint else f"{self.message} ({self.hint})"
        return " ".join(text.split())

    def __str__(self) -> str:
        """The line the CLI prints after ``hroofline: error:``, hint included: what Python shows of an error the
        API raises (a misspelt run's "did you mean ...?") is what the CLI says of it."""
        return self.one_line()


class InputError(HrooflineError):
    """A source file or folder that cannot be imported."""


class MergeError(InputError):
    """Per-metric files of one run that do not describe the same launches."""


class StoreError(HrooflineError):
    """The run store is missing, unreadable or does not hold what was asked for."""


class QueryError(HrooflineError):
    """SQL over the store that DuckDB cannot run."""


class UsageError(HrooflineError):
    """Arguments that do not make sense together; exit status 2 like argparse."""

    exit_code = 2


class ProfilingError(HrooflineError):
    """Profiling cannot start or did not produce data: a missing tool, GPU or permission."""


OUT_OF_MEMORY = HrooflineError(
    "out of memory; nothing was stored", "close other programs, or give the command fewer or smaller runs or sources"
)
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_PERMITTED = {errno.EACCES, errno.EPERM, errno.EROFS}


def system_error(error: OSError, writing: str | None = None) -> HrooflineError | None:
    """An operating-system fault (a full disk, a folder one may not write) in one line that names the file and
    says what to do; ``writing`` names what was being written where the error names no file (pyarrow's). None
    for other errors, which are bugs or are checked where they arise."""
    where = error.filename or writing
    what = f" {where}" if where else ""
    code = error.errno
    if code is None:  # pyarrow's errors carry the number in their text only
        found = re.search(r"\[errno (\d+)\]", str(error), re.IGNORECASE)
        code = int(found.group(1)) if found else None
    if code in _DISK_FULL:
        reason = "the disk is full" if code != errno.EFBIG else "the file is larger than this system allows"
        return HrooflineError(f"cannot write{what}: {reason}", "free space and run it again; nothing was half-written")
    if code == errno.ENOTDIR:
        return HrooflineError(f"{where}: a part of this path is a file, not a folder", "give a folder")
    if code in _NOT_PERMITTED:
        return HrooflineError(
            f"not permitted to write or read{what} ({os.strerror(code)})",
            "check its permissions, or give another folder with --store or --out",
        )
    return None


SHOWN_NAMES = 8  # known names listed in a hint, at most


def did_you_mean(name: str, known: list[str] | tuple[str, ...], what: str, listed_by: str | None = None) -> str:
    """A hint for an unknown ``name``: the closest known names, else a few of them and how many there are;
    then the command that lists them all."""
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if close:
        hint = "did you mean " + (", ".join(close[:-1]) + " or " + close[-1] if len(close) > 1 else close[0]) + "?"
    elif known:
        shown = ", ".join(sorted(known)[:SHOWN_NAMES])
        hint = f"known {what}: {shown}" + (f", ... ({len(known)} in all)" if len(known) > SHOWN_NAMES else "")
    else:
        hint = f"there are no {what}"
    if not (listed_by and known):
        return hint
    return f"{hint} `{listed_by}` lists them" if close else f"{hint}; `{listed_by}` lists them"
