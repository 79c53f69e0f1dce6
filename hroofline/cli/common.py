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


def add_workload_options(parser: argparse.ArgumentParser, gpu_help: str) -> None:
    """The training step a command runs or traces: model, GPU, precision, batch, optimizer."""
    parser.add_argument("--arch", required=True, help="torchvision model name, e.g. resnet18, vgg16, vit_b_16")
    parser.add_argument("--gpu", required=True, help=gpu_help)
    parser.add_argument(
        "--precision",
        default="fp32",
        help="fp32 (o0: PyTorch's defaults, i.e. cuDNN convolutions in TF32 from Ampere on, matrix products in "
        "FP32), fp32-strict (no TF32 at all), tf32 (matrix products in TF32 too), amp (o1: float16 autocast), "
        "amp-bf16, o2 (default fp32)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="images per step (32)")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="SGD with momentum, or Adam")
