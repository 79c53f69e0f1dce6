"""``hroofline gpus``: the GPU catalog and its datasheet peaks."""

from __future__ import annotations

import argparse

from hroofline.cli.common import write_out
from hroofline.model.numbers import plain
from hroofline.render.text import FORMATS, text_table, to_json
from hroofline.roofs.catalog import load_gpu_names
from hroofline.roofs.metricset import load_metric_set

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
        description="The GPU catalog (metrics/gpus.toml): names for --gpu, compute capability, architecture, "
        "and datasheet peaks in TFLOP/s (compute) and GB/s (HBM; L2 and L1 theoretical, where given) in the "
        "table, with the SM clock they are quoted at (compute, L1 and L2 roofs are scaled from it to the clock "
        "a kernel ran at); the JSON gives SI values (FLOP/s, byte/s, Hz) and each entry's source. "
        "Tensor peaks are dense (2:4 sparsity runs at twice them), per input precision (H100 tensor peaks are "
        "quoted at 1.83 GHz); each equals its per-SM rate (metrics/rates.toml) x SMs x that clock. Each GPU's "
        "sources follow the table; GPUs listed apart get their roofs from their own ncu reports only. AMD Instinct "
        "GPUs (MI300X, MI325X, MI355X; arch cdna3, cdna4) are judged from PyTorch profiler traces, not ncu: their "
        "SMs are compute units and their tensor peaks the Matrix Cores'.",
    )
    gpus.add_argument(
        "--format", choices=FORMATS, default="table", help="table: for people; csv: one row per GPU; json: as nested"
    )
    gpus.set_defaults(run_command=list_gpus)


def list_gpus(args: argparse.Namespace) -> int:
    metric_set = load_metric_set()
    catalog = load_gpu_names().values()
    if args.format != "table":
        records = [
            {
                "gpu": g.name,
                "aliases": list(g.aliases),
                "cc": g.cc,
                "arch": metric_set.arch_of(g.cc),
                "sms": g.sms,
                "peaks": g.peaks,
                "clocks": g.clocks,
                "source": g.peak_source,
                "clock_source": g.clock_source,
                "roofs_from_reports_only": g.roofs_from_reports_only,
            }
            for g in catalog
        ]
        write_out(to_json(records) if args.format == "json" else _csv(records))
        return 0
    header = ["gpu", "cc", "arch", "SMs", "GHz"]
    header += [c + (" GB/s" if c in BANDWIDTH_COLUMNS else " TF/s") for c in PEAK_COLUMNS]
    rows = [header]
    listed = [gpu for gpu in catalog if gpu.peaks]
    for gpu in listed:
        peaks = [_scaled(gpu.peaks.get(c), 1e9 if c in BANDWIDTH_COLUMNS else 1e12) for c in PEAK_COLUMNS]
        clock = _scaled(gpu.clocks.get("default"), 1e9)
        sms = str(gpu.sms) if gpu.sms else "-"
        rows.append([gpu.name, gpu.cc, metric_set.arch_of(gpu.cc) or "-", sms, clock, *peaks])
    lines = [text_table(rows).rstrip("\n"), "", "sources:"]
    lines += [f"  {gpu.name}: {gpu.peak_source}; clock: {gpu.clock_source}" for gpu in listed]
    apart = [gpu for gpu in catalog if not gpu.peaks]
    if apart:
        lines += ["", "roofs from their own ncu reports only (no datasheet peaks):"]
        lines += [f"  {gpu.name} (cc {gpu.cc}, {gpu.sms} SMs): {gpu.roofs_from_reports_only}" for gpu in apart]
    write_out("\n".join(lines) + "\n")
    return 0


def _scaled(value: float | None, unit: float) -> str:
    """Four significant digits, as the datasheets give them, without e-notation or trailing zeros."""
    if value is None:
        return "-"
    text = plain(value / unit, 4)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _csv(records: list[dict]) -> str:
    """One row per GPU, the peaks and clocks as columns of their own (peak_fp32, clock_default, ...)."""
    import pandas as pd

    from hroofline.render.text import render_frame

    rows = [
        {
            **{k: v for k, v in record.items() if k not in ("peaks", "clocks", "aliases")},
            "aliases": " ".join(record["aliases"]),
            **{f"peak_{k}": v for k, v in record["peaks"].items()},
            **{f"clock_{k}": v for k, v in record["clocks"].items()},
        }
        for record in records
    ]
    return render_frame(pd.DataFrame(rows), "csv")
