"""``hroofline gpus``: the GPU catalog and its datasheet peaks."""

from __future__ import annotations

import argparse

from hroofline.cli.common import write_out
from hroofline.metricset import load_gpu_names, load_metric_set
from hroofline.render.text import text_table, to_json

PEAK_COLUMNS = (
    "fp64",
    "fp32",
    "fp16",
    "tensor_tf32",
    "tensor_fp16",
    "tensor_bf16",
    "tensor_fp8",
    "tensor_fp64",
    "hbm",
    "l2",
    "l1",
)

BANDWIDTH_COLUMNS = ("hbm", "l2", "l1")


def register(commands: argparse._SubParsersAction) -> None:
    gpus = commands.add_parser(
        "gpus",
        help="list the GPUs hroofline knows, with their datasheet peaks",
        description="The GPU catalog (metrics/gpus.toml): names for --gpu, compute capability, architecture, "
        "and datasheet peaks in TFLOP/s (compute) and GB/s (HBM; L2 and L1 theoretical, where given) in the "
        "table, with the SM clock they are quoted at (compute, L1 and L2 roofs are scaled from it to the clock "
        "a kernel ran at); the JSON gives SI values (FLOP/s, byte/s, Hz) and each entry's source. "
        "Tensor peaks are dense, per input precision (H100 tensor peaks are quoted at 1.83 GHz).",
    )
    gpus.add_argument("--format", choices=("table", "json"), default="table")
    gpus.set_defaults(run_command=list_gpus)


def list_gpus(args: argparse.Namespace) -> int:
    metric_set = load_metric_set()
    catalog = load_gpu_names().values()
    if args.format == "json":
        write_out(
            to_json(
                [
                    {
                        "gpu": g.name,
                        "aliases": list(g.aliases),
                        "cc": g.cc,
                        "arch": metric_set.arch_of(g.cc),
                        "peaks": g.peaks,
                        "clocks": g.clocks,
                        "source": g.peak_source,
                    }
                    for g in catalog
                ]
            )
        )
        return 0
    header = ["gpu", "cc", "arch", "GHz", *(c + (" GB/s" if c in BANDWIDTH_COLUMNS else " TF/s") for c in PEAK_COLUMNS)]
    rows = [header]
    for gpu in catalog:
        peaks = [_scaled(gpu.peaks.get(c), 1e9 if c in BANDWIDTH_COLUMNS else 1e12) for c in PEAK_COLUMNS]
        clock = _scaled(gpu.clocks.get("default"), 1e9)
        rows.append([gpu.name, gpu.cc, metric_set.arch_of(gpu.cc) or "-", clock, *peaks])
    write_out(text_table(rows))
    return 0


def _scaled(value: float | None, unit: float) -> str:
    return "-" if value is None else f"{value / unit:g}"
