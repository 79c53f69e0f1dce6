"""``hroofline`` entry point: parser, dispatch, and the one-line error contract.

Errors print one line on stderr and exit 1; usage errors exit 2; no traceback reaches the user unless
HROOFLINE_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from hroofline import __version__
from hroofline.errors import OUT_OF_MEMORY, HrooflineError, did_you_mean, system_error
from hroofline.render.terminal import printable

# Each command: its module (in hroofline/cli/) and its line in --help, in the order --help lists them. A
# command's own module is all that is imported to run it; `hroofline --help` and a misspelt command import
# none (the modules' imports, pandas for the store, the importers, the model catalog, cost more than some
# commands take).
COMMANDS: dict[str, tuple[str, str]] = {
    "import": ("import_cmd", "import ncu reports, CSV exports, console logs or per-metric log folders into a run"),
    "runs": ("runs_cmd", "list the runs in the store"),
    "query": ("query_cmds", "SQL over all runs of the store (DuckDB, embedded)"),
    "kernels": ("query_cmds", "per-launch or per-kernel-name table of time, FLOPs, bytes and intensities"),
    "rm": ("query_cmds", "remove runs from the store"),
    "rename": ("query_cmds", "rename a run"),
    "summary": ("query_cmds", "time, FLOPs and bytes per phase and in total"),
    "spark": ("spark_cmd", "aggregate a run's ranks with Spark (or DuckDB): stragglers, spread, communication"),
    "steps": ("query_cmds", "a serving trace's steps: prefill, decode or mixed, batch, query tokens and context"),
    "chart": (
        "chart_cmds",
        "draw the hierarchical roofline of a run, or many runs on their GPUs' rooflines (HTML, PNG, SVG, JSON)",
    ),
    "top": ("chart_cmds", "the kernels worth your time: ranked by time, with binding roof and recoverable time"),
    "advise": ("advise_cmd", "what to change in the step, with the evidence and what each change can win"),
    "report": (
        "chart_cmds",
        "write one self-contained HTML page: summary, a chart per phase and the top kernels of each run",
    ),
    "profile": (
        "profile_cmds",
        "profile one training step of a model or your script (ncu on a GPU, or --gpu cpu) into a run",
    ),
    "ceilings": ("ceilings_cmd", "measure this machine's roofs, or show the roofs a run or GPU uses"),
    "predict": (
        "predict_cmd",
        "predict a training step of a model on any catalog GPU from a trace of its ops (no GPU needed)",
    ),
    "baseline": ("baseline_cmd", "name a run as a baseline (set, list, rm): what `compare --baseline` compares with"),
    "compare": (
        "compare_cmd",
        "compare two runs: speedup, FLOPs, tensor share and bytes per phase; gains and regressions per kernel",
    ),
    "gpus": ("catalog_cmds", "list the GPUs hroofline knows, with their datasheet peaks"),
    "doctor": (
        "doctor_cmd",
        "check hroofline's counters and roofs on GEMMs and a copy of known work (this GPU, or a report)",
    ),
}
COMMAND_MODULES: dict[str, str] = {command: module for command, (module, _) in COMMANDS.items()}

DESCRIPTION = """\
Hierarchical roofline analysis of the GPU kernels of deep-learning workloads.

Profile a training step (ncu on a GPU, or the CPU), import Nsight Compute (ncu) output, or predict a
model's cost on any GPU; then ask which kernels take the time, how they use the L1, L2 and HBM bandwidth
and the FP64/FP32/FP16/tensor compute, draw the hierarchical roofline, and compare runs.
"""

EPILOG = """\
typical use:
  hroofline profile --arch resnet18 --gpu cpu --batch-size 2     (or --gpu v100 with ncu on a GPU machine)
  hroofline predict --arch resnet50 --gpu a100 --precision amp   (no GPU needed)
  hroofline import pt-O0-Adam-fw/ --run deepcam-fp32 --gpu v100 --phase forward   (ncu's reports, CSV or logs)
  hroofline import pt-O0-Adam-bw/ --run deepcam-fp32 --phase backward
  hroofline summary deepcam-fp32
  hroofline kernels deepcam-fp32 --group-by name -n 10
  hroofline top deepcam-fp32 --phase forward -n 5
  hroofline chart deepcam-fp32 --phase forward --out forward.html
  hroofline report deepcam-fp32 --out report/
  hroofline compare deepcam-fp32 deepcam-amp-o1

the store: runs live in --store DIR, else $HROOFLINE_STORE, else ./hroofline-runs
units: seconds, FLOPs, bytes, FLOP/byte and FLOP/s throughout (SI, no 1024s)
"""


DOCS_PAGES = "docs/reference/cli"  # one page per command, made from the parsers, and index.md for them all


def docs_page(prog: str) -> str:
    """The page of the documentation for a parser's ``prog``: ``hroofline summary`` -> its command's page,
    ``hroofline`` -> the index of the commands."""
    words = prog.split()
    return f"{DOCS_PAGES}/{words[1] if len(words) > 1 else 'index'}.md"


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error, with where to read more; a misspelt command gets
    "did you mean". Its help ends with the line that names its page of the documentation: every command's parser
    is one of these (the subparsers' class), so none can miss it."""

    def format_help(self) -> str:
        return super().format_help().rstrip("\n") + f"\n\ndocumentation: {docs_page(self.prog)}\n"

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice and self.prog == "hroofline":  # an unknown command: every command was registered
            message = f"unknown command {choice[1]!r} ({did_you_mean(choice[1], list(COMMAND_MODULES), 'commands')})"
        print(printable(f"{self.prog}: error: {message} (see `{self.prog} --help`)"), file=sys.stderr)
        sys.exit(2)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with a known ``command``, that command's module registers its commands, else each command
    is named with its line of help."""
    parser = OneLineParser(
        prog="hroofline",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hroofline {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    if command in COMMANDS:
        importlib.import_module(f"hroofline.cli.{COMMANDS[command][0]}").register(commands)
    else:  # --help, or no or an unknown command: each command's name and line, no module imported
        for name, (_, line) in COMMANDS.items():
            commands.add_parser(name, help=line)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (options before it take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(words))
    if not words:  # `hroofline` alone: what it does and its commands, as --help says it
        parser.print_help()
        return 0
    args = parser.parse_args(words)
    try:
        return int(args.run_command(args) or 0)
    except HrooflineError as error:
        print(f"hroofline: error: {printable(error.one_line())}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("hroofline: interrupted; the store is unchanged", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        sys.stderr.close()
        return 0
    except MemoryError:  # its message is empty; the store's writes are atomic, so nothing was half-written
        print(f"hroofline: error: {printable(OUT_OF_MEMORY.one_line())}", file=sys.stderr)
        return 1
    except OSError as error:  # a full disk, a read-only folder: ordinary faults, said as such
        fault = system_error(error)
        if fault is None:
            return _internal_error(error)
        print(f"hroofline: error: {printable(fault.one_line())}", file=sys.stderr)
        return 1
    except Exception as error:
        return _internal_error(error)


def _internal_error(error: Exception) -> int:
    """The one-line contract holds for bugs too."""
    if os.environ.get("HROOFLINE_DEBUG"):
        raise error
    text = f"hroofline: internal error: {type(error).__name__}: {error} (set HROOFLINE_DEBUG=1 for the traceback)"
    print(printable(text), file=sys.stderr)
    return 1


def run() -> NoReturn:
    """The ``hroofline`` program: :func:`main`, then a quick exit. Everything is written, synced and closed
    by then; what is skipped is the interpreter's teardown of the modules, which takes longer than some
    commands do (pandas and pyarrow: 60 ms here; PyTorch: 0.6 s)."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed pipe, or stderr closed after one
        pass
    os._exit(code)
