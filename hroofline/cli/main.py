"""``hroofline`` entry point: parser, dispatch, and the one-line error contract.

Errors print one line on stderr and exit 1; usage errors exit 2; no traceback reaches the user unless
HROOFLINE_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from hroofline import __version__
from hroofline.cli import (
    catalog_cmds,
    ceilings_cmd,
    chart_cmds,
    compare_cmd,
    import_cmd,
    predict_cmd,
    profile_cmds,
    query_cmds,
)
from hroofline.errors import HrooflineError, did_you_mean

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
  hroofline import prof/fw.ncu-rep --run resnet34-fp32 --gpu v100 --phase forward
  hroofline import prof/bw.ncu-rep --run resnet34-fp32 --phase backward
  hroofline summary resnet34-fp32
  hroofline kernels resnet34-fp32 --group-by name --top 10
  hroofline top resnet34-fp32 --phase forward -n 5
  hroofline chart resnet34-fp32 --phase forward --out forward.html
  hroofline report resnet34-fp32 --out report/
  hroofline compare resnet34-fp32 resnet34-amp

the store: runs live in --store DIR, else $HROOFLINE_STORE, else ./hroofline-runs
units: seconds, FLOPs, bytes, FLOP/byte and FLOP/s throughout (SI, no 1024s)
"""


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error, with where to read more; a misspelt command gets
    "did you mean"."""

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice and self.prog == "hroofline":
            commands = [c.strip(" '") for c in choice[2].split(",")]
            message = f"unknown command {choice[1]!r} ({did_you_mean(choice[1], commands, 'commands')})"
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="hroofline",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hroofline {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    import_cmd.register(commands)
    query_cmds.register(commands)
    chart_cmds.register(commands)
    profile_cmds.register(commands)
    ceilings_cmd.register(commands)
    predict_cmd.register(commands)
    compare_cmd.register(commands)
    catalog_cmds.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run_command(args) or 0)
    except HrooflineError as error:
        print(f"hroofline: error: {error.one_line()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("hroofline: interrupted; the store is unchanged", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        sys.stderr.close()
        return 0
    except Exception as error:  # the one-line contract holds for bugs too
        if os.environ.get("HROOFLINE_DEBUG"):
            raise
        print(
            f"hroofline: internal error: {type(error).__name__}: {error} (set HROOFLINE_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


def run() -> NoReturn:
    """The ``hroofline`` program: :func:`main`, then a quick exit. Everything is written and closed by then;
    what is skipped is the interpreter's teardown of PyTorch's modules, which takes longer (0.6 s here) than
    many commands do."""
    code = main()
    if "torch" not in sys.modules:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed pipe, or stderr closed after one
        pass
    os._exit(code)
