"""Prints the pins of pyproject.toml's ``docs`` extra that this environment lacks (not installed, or another
version), space-separated, so that ``make docs`` installs them: nothing when all are there."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def docs_pins() -> list[str]:
    """The docs extra: ``name==version`` each."""
    with PYPROJECT.open("rb") as file:
        return list(tomllib.load(file)["project"]["optional-dependencies"]["docs"])


def missing(pins: list[str]) -> list[str]:
    out = []
    for pin in pins:
        name, _, version = pin.partition("==")
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or (version and installed != version):
            out.append(pin)
    return out


if __name__ == "__main__":
    print(" ".join(missing(docs_pins())))
