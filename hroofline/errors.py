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


class UsageError(HrooflineError):
    """Arguments that do not make sense together; exit status 2 like argparse."""

    exit_code = 2


class ProfilingError(HrooflineError):
    """Profiling cannot start or did not produce data: a missing tool, GPU or permission."""
