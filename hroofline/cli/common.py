"""Options and helpers shared by the commands."""

from __future__ import annotations

import argparse
import sys

from hroofline.store import DEFAULT_STORE, STORE_ENV, RunStore, store_path


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="DIR",
        help=f"the run store (default: ${STORE_ENV}, else ./{DEFAULT_STORE})",
    )


def positive_int(text: str) -> int:
    """argparse type for counts such as --top."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def open_store(args: argparse.Namespace) -> RunStore:
    return RunStore(store_path(args.store))


def write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def progress(text: str) -> None:
    """Progress for people watching a terminal; kept out of logs so an error stays one line."""
    if sys.stderr.isatty():
        print(text, file=sys.stderr, flush=True)


def say(text: str) -> None:
    """Progress and notes go to stderr so that stdout stays machine-readable."""
    print(text, file=sys.stderr, flush=True)
