"""Typed errors. The CLI prints each as one line on stderr (message, then hint) and exits 1."""

from __future__ import annotations


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
