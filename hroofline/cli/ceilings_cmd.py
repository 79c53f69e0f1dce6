"""``hroofline ceilings``: measure this machine's roofs, or show the roofs a run or GPU uses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hroofline.cli.common import add_store_option, open_store, say, write_out
from hroofline.errors import ProfilingError, UsageError
from hroofline.model.numbers import si
from hroofline.model.quantities import LEVEL_LABELS, ROOF_LABELS
from hroofline.model.run import RunMeta
from hroofline.roofs.ceilings import ceilings_for_run, run_roofs


def register(commands: argparse._SubParsersAction) -> None:
    ceilings = commands.add_parser(
        "ceilings",
        description="With --measure: matmul FLOP/s per precision, read bandwidth for working sets sized to "
        "each cache level and to main memory, on the CPU or a CUDA GPU, and the host's time per op (small "
        "networks' host-bound steps, training and inference, without and with autocast); --out writes them as a "
        "ceilings file for --ceilings, and for predict --host. Without: the roofs of a catalog GPU, bundled set "
        "or file (--show), or of a run.",
        epilog="examples:\n  hroofline ceilings --measure --out my-machine.toml\n"
        "  hroofline ceilings --show v100-yang-ert\n  hroofline ceilings --run deepcam-fp32",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = ceilings.add_mutually_exclusive_group(required=True)
    what.add_argument("--measure", action="store_true", help="measure this machine")
    what.add_argument("--show", metavar="GPU|SET|FILE", help="show a catalog GPU's, bundled or file ceilings")
    what.add_argument("--run", metavar="RUN", help="show the ceilings a run is drawn against")
    ceilings.add_argument("--device", default="cpu", help="with --measure: cpu (default) or cuda")
    ceilings.add_argument("--quick", action="store_true", help="with --measure: fewer repeats")
    ceilings.add_argument("--out", metavar="FILE", help="with --measure: write a ceilings file (TOML)")
    add_store_option(ceilings)
    ceilings.set_defaults(run_command=run_ceilings)


def run_ceilings(args: argparse.Namespace) -> int:
    if args.measure:
        return _measure(args)
    if args.run:
        run = open_store(args).load(args.run)
        roofs = run_roofs(run)
        write_out(f"{roofs.label}\nsource: {roofs.source}\n")
        for note in roofs.notes:
            write_out(f"note: {note}\n")
        write_out("roofs (time-weighted median over the run's launches):\n")
        for key, value in roofs.representative(run.launches).items():
            origin = "the report" if roofs.origins.get(key) == "report" else roofs.origins.get(key, "")
            halved = " (half the packed rate: ncu counts a packed half2 instruction once)"
            extra = halved if key == "fp16" and roofs.fp16_halved else ""
            write_out(f"  {key:<18} {_roof_value(key, value):>14}  {ROOF_LABELS[key]}, from {origin}{extra}\n")
        return 0
    ceilings = ceilings_for_run(RunMeta(name="-"), args.show)
    write_out(f"{ceilings.label}\nsource: {ceilings.source}\n")
    for key, value in ceilings.peaks.items():
        clock = ceilings.clock_of(key)
        at = f"  at {clock / 1e9:.4g} GHz" if clock else ""
        write_out(f"  {key:<18} {_roof_value(key, value):>14}{at}\n")
    return 0


def _roof_value(key: str, value: float) -> str:
    unit = "B/s" if key in LEVEL_LABELS else "op/s" if key.startswith("tensor_int") else "FLOP/s"
    return si(value, unit, 4)


def _measure(args: argparse.Namespace) -> int:
    from hroofline.collect.measure import measure
    from hroofline.render.output import write_atomically

    device = args.device.lower()
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r}: use cpu or cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ProfilingError("no CUDA GPU visible to PyTorch", "measure the CPU with --device cpu")
    show = (lambda text: say(f"  {text}")) if sys.stderr.isatty() else None
    result = measure(device, quick=args.quick, progress=show)
    write_out(f"{result.device_name} ({result.device})\nmatmul peaks:\n")
    for precision, rate in result.matmul.items():
        write_out(f"  {precision:<6} {si(rate, 'FLOP/s')}\n")
    write_out("read bandwidth by working set:\n")
    for point in result.bandwidth:
        write_out(f"  {point.working_set / 2**10:>10,.0f} KiB  {point.level:<5} {si(point.bytes_per_s, 'B/s')}\n")
    # What the ceilings file holds: a roof fed by two precisions (bf16 and fp16 share the 16-bit one) takes the
    # faster, so the file's value can differ from a line above.
    write_out("ceilings (what --out writes and --ceilings uses):\n")
    for key, value in result.ceilings().peaks.items():
        write_out(f"  {key:<12} {_roof_value(key, value):>14}\n")
    if result.host is not None:
        floor = "predict --host FILE takes it as the estimate's host floor"
        write_out(f"host time per op ({floor}), {result.host.probe}:\n")
        for kind, seconds in result.host.seconds_per_op.items():
            write_out(f"  {kind:<12} {si(seconds, 's'):>10}\n")
    for note in (*result.notes, *result.ordered_levels()[1]):
        say(f"hroofline: note: {note}")
    if args.out:
        write_atomically(Path(args.out), result.toml().encode())
        say(f"wrote {args.out}: use it with --ceilings {args.out}")
    return 0
