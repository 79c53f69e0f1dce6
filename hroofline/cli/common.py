"""Options and helpers shared by the commands."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from hroofline.errors import UsageError
from hroofline.render.terminal import printable
from hroofline.roofs.metricset import bundled_ceiling_files
from hroofline.store.location import DEFAULT_STORE, STORE_ENV, existing_store_path, store_path

# The store needs pandas and the workload its model catalog: both are imported when a command runs, so
# that parsing the arguments (and a usage error) costs no more than the parser.

if TYPE_CHECKING:
    from hroofline.collect.workload import WorkloadConfig
    from hroofline.store.reading import StoreReader
    from hroofline.store.runs import RunStore


CEILINGS_HELP = (
    "roofs to use: a catalog GPU (see `hroofline gpus`), a bundled measured set ({bundled}) or a TOML file "
    "of your own measured ceilings (default: the report's own roofs, where its sources carry ncu peak "
    "metrics, else the datasheet of the run's GPU, scaled to the SM clock each kernel ran at)"
)


def roofs_option_help() -> str:
    """--ceilings's help, for every command that takes it (chart, top, report, advise)."""
    return CEILINGS_HELP.format(bundled=", ".join(bundled_ceiling_files()) or "none")


def workload_name(config: WorkloadConfig, gpu: str, batch_always: bool = False, forward: bool = False) -> str:
    """MODEL-PRECISION-GPU[-forward] and the settings that differ from the defaults, so that changing one alone
    names another run: -bN (a batch size other than 32, or any in a sweep over batch sizes: ``batch_always``),
    a shape other than the model's own (-3x299x299) or tokens other than 512 (-s1024), -channels-last, and
    -adam (a training step's: an inference pass has no optimizer)."""
    from hroofline.collect.models import DEFAULT_SEQ_LEN, default_input_shape
    from hroofline.collect.workload import DEFAULT_BATCH_SIZE, DEFAULT_OPTIMIZER

    name = f"{config.model.label}-{config.precision}-{gpu.lower()}" + ("-forward" if forward else "")
    if batch_always or config.batch_size != DEFAULT_BATCH_SIZE:
        name += f"-b{config.batch_size}"
    if config.input_shape is not None and config.input_shape != default_input_shape(config.model):
        name += "-" + "x".join(str(size) for size in config.input_shape)
    if config.seq_len is not None and not (config.model.kind == "hf" and config.seq_len == DEFAULT_SEQ_LEN):
        name += f"-s{config.seq_len}"
    if config.channels_last:
        name += "-channels-last"
    if not forward and config.optimizer != DEFAULT_OPTIMIZER:
        name += f"-{config.optimizer}"
    return name


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


def positive_int_list(text: str) -> list[int]:
    """argparse type for a comma-separated list of counts, such as --batch-size 32,64."""
    try:
        return [positive_int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers (32,64,128)") from None


def open_store(args: argparse.Namespace, writing: bool = False) -> RunStore:
    """The store of --store: one that must exist to be read, or (``writing``) one that is created on the first
    write."""
    from hroofline.store.runs import RunStore

    return RunStore(store_path(args.store) if writing else existing_store_path(args.store))


def open_reader(args: argparse.Namespace) -> StoreReader:
    """The store for reading runs' metadata alone (no pandas); it must exist."""
    from hroofline.store.reading import StoreReader

    return StoreReader(existing_store_path(args.store))


def write_out(text: str) -> None:
    """Output as it is to a file or pipe (CSV and JSON keep their data); to a terminal with control characters
    shown escaped (text tables escape their cells whatever the output)."""
    sys.stdout.write(printable(text) if sys.stdout.isatty() else text)
    sys.stdout.flush()


def progress(text: str) -> None:
    """Progress for people watching a terminal; kept out of logs so an error stays one line."""
    if sys.stderr.isatty():
        print(printable(text), file=sys.stderr, flush=True)


def say(text: str) -> None:
    """Progress and notes go to stderr so that stdout stays machine-readable."""
    print(printable(text), file=sys.stderr, flush=True)


@contextmanager
def stage(done: str) -> Iterator[None]:
    """Says ``done`` and the seconds the block took ("measured this CPU's ceilings: 4.10 s") when it ends well."""
    from hroofline.model.numbers import si

    start = time.perf_counter()
    yield
    say(f"{done}: {si(time.perf_counter() - start, 's')}")


def add_workload_options(parser: argparse.ArgumentParser, gpu_help: str, lists: bool = False) -> None:
    """The training step a command runs or traces: model, GPU, precision, batch, optimizer. With ``lists``,
    --arch, --model, --gpu, --precision and --batch-size take comma-separated lists (a sweep)."""
    several = " (a comma-separated list: one run per combination)" if lists else ""
    parser.add_argument(
        "--arch",
        metavar="NAME",
        help="a torchvision model: a classifier (resnet18, vgg16, vit_b_16) or a segmentation model "
        "(deeplabv3_resnet50, fcn_resnet50)" + several,
    )
    parser.add_argument(
        "--model",
        metavar="SPEC",
        help="your own model: PKG.MODULE:FACTORY or FILE.py:FACTORY (FACTORY() returns an nn.Module), or a "
        "transformer built offline with random weights: hf:gpt2, hf:gpt2-medium, hf:gpt2-large, "
        "hf:bert-base-uncased, hf:bert-large-uncased, hf:tinyllama-1.1b (needs transformers)" + several,
    )
    parser.add_argument(
        "--input-shape", metavar="C,H,W", help="one sample's shape without the batch (default 3,224,224)"
    )
    parser.add_argument(
        "--seq-len", type=positive_int, metavar="N", help="tokens per sample, for models that take token ids (512)"
    )
    parser.add_argument("--gpu", required=True, help=gpu_help + several)
    parser.add_argument(
        "--precision",
        help="fp32 (o0: PyTorch's defaults, i.e. cuDNN convolutions in TF32 from Ampere on, matrix products in "
        "FP32), fp32-strict (no TF32 at all), tf32 (matrix products in TF32 too), amp (o1: float16 autocast), "
        "amp-bf16, o2 (default fp32)" + several,
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int_list if lists else positive_int,
        metavar="N,N" if lists else "N",
        help="samples (images, sequences) per step (32)" + several,
    )
    parser.add_argument("--optimizer", choices=("sgd", "adam"), help="SGD with momentum (default), or Adam")
    parser.add_argument(
        "--channels-last",
        action="store_true",
        default=None,
        help="model and images in NHWC (torch.channels_last): cuDNN's tensor-core convolutions then need no "
        "NCHW <-> NHWC conversion kernels around them (default NCHW, PyTorch's)",
    )


def workload_config(args: argparse.Namespace, device: str) -> WorkloadConfig:
    """The workload of --arch or --model, checked by form (torch is not imported here)."""
    from hroofline.collect.models import parse_input_shape, parse_model
    from hroofline.collect.workload import DEFAULT_BATCH_SIZE, DEFAULT_OPTIMIZER, WorkloadConfig

    if bool(args.arch) == bool(args.model):
        raise UsageError("give the model with --arch NAME (torchvision) or --model SPEC (your own, hf:NAME)")
    if args.arch and parse_model(args.arch).kind != "torchvision":
        raise UsageError(f"--arch {args.arch}: --arch takes torchvision names", f"use --model {args.arch}")
    config = WorkloadConfig(
        arch=args.arch or args.model,
        batch_size=args.batch_size or DEFAULT_BATCH_SIZE,
        precision=args.precision or "fp32",
        optimizer=args.optimizer or DEFAULT_OPTIMIZER,
        device=device,
        input_shape=parse_input_shape(args.input_shape, parse_model(args.arch or args.model)),
        seq_len=args.seq_len,
        channels_last=bool(args.channels_last),
    )
    if args.model and not args.input_shape and not args.seq_len:  # a default shape is said, not assumed silently
        _say_default_shape(args.model)
    return config


@functools.cache  # once per model, however many runs of a sweep it is in
def _say_default_shape(model: str) -> None:
    from hroofline.collect.models import DEFAULT_SEQ_LEN, default_input_shape, parse_model

    spec = parse_model(model)
    if spec.kind == "hf":
        say(f"note: {model} gets sequences of {DEFAULT_SEQ_LEN} tokens (--seq-len changes it)")
    else:
        shape = "x".join(map(str, default_input_shape(spec)))
        say(f"note: {model} gets inputs of {shape} (--input-shape changes it; --seq-len for token ids)")


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """Which launches: by layer and by NVTX range."""
    parser.add_argument(
        "--layer",
        metavar="GLOB",
        help="only these layers: a module path and everything below it (layer4.1), or a glob (layer4.*.conv*, "
        "'<optimizer>')",
    )
    parser.add_argument(
        "--nvtx", metavar="GLOB", help="only launches whose NVTX stack ('outer/inner') matches (a substring or a glob)"
    )
