"""Build bench/data/timm-step-times.csv from timm's published benchmark tables (see README.md beside this file).

The rule (see README.md for how it came about):
- files: timm's eager (not ``-dynamo``) NCHW AMP tables, for each GPU that hroofline's catalog has peaks for and
  each mode (training, inference), the one of the newest PyTorch: the closest to the PyTorch hroofline traces
  with, and each GPU and model counted once;
- rows: every model at 224 px (what ``predict`` traces) that is a torchvision classifier under the same name or
  the timm name in ``TIMM_NAMES``, and has torchvision's parameter count to timm's two decimals (the same
  architecture; a different one, such as timm's paper-width RegNet-X 400MF, differs there).

Run as ``.venv/bin/python bench/data/build_timm_step_times.py PATH/TO/pytorch-image-models/results``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parent / "timm-step-times.csv"


@dataclass(frozen=True)
class Table:
    file: str
    commit: str  # pytorch-image-models commit that last changed the file
    source: str  # the source key in the output
    gpu: str  # hroofline's catalog name
    software: str


TABLES = (
    Table(
        "benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv",
        "c865028c34",
        "timm-pt112-rtx3090",
        "rtx3090",
        "PyTorch 1.12, CUDA 11.3",
    ),
    Table(
        "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
        "5c33776aa5",
        "timm-pt240-rtx3090",
        "rtx3090",
        "PyTorch 2.4, CUDA 12.4",
    ),
    Table(
        "benchmark-infer-amp-nchw-pt291-cu128-4090.csv",
        "90cae8c5ab",
        "timm-pt291-rtx4090",
        "rtx4090",
        "PyTorch 2.9.1, CUDA 12.8",
    ),
)

# torchvision name: timm's name for the same network, where they differ (the parameter count checks it).
TIMM_NAMES = {
    "mobilenet_v2": "mobilenetv2_100",
    "mobilenet_v3_large": "mobilenetv3_large_100",
    "mobilenet_v3_small": "mobilenetv3_small_100",
    "mnasnet0_5": "mnasnet_050",
    "mnasnet0_75": "mnasnet_075",
    "mnasnet1_0": "mnasnet_100",
    "vit_b_16": "vit_base_patch16_224",
    "vit_b_32": "vit_base_patch32_224",
    "vit_l_16": "vit_large_patch16_224",
    "vit_l_32": "vit_large_patch32_224",
    "vit_h_14": "vit_huge_patch14_224",
    "swin_t": "swin_tiny_patch4_window7_224",
    "swin_s": "swin_small_patch4_window7_224",
    "swin_b": "swin_base_patch4_window7_224",
    "maxvit_t": "maxvit_tiny_tf_224",
    # timm names RegNets by their FLOPs in hundreds of MFLOP; its *_tv models are torchvision's variants
    "regnet_x_400mf": "regnetx_004_tv",
    "regnet_x_800mf": "regnetx_008",
    "regnet_x_1_6gf": "regnetx_016",
    "regnet_x_3_2gf": "regnetx_032",
    "regnet_x_8gf": "regnetx_080",
    "regnet_x_16gf": "regnetx_160",
    "regnet_x_32gf": "regnetx_320",
    "regnet_y_400mf": "regnety_004",
    "regnet_y_800mf": "regnety_008_tv",
    "regnet_y_1_6gf": "regnety_016",
    "regnet_y_3_2gf": "regnety_032",
    "regnet_y_8gf": "regnety_080_tv",
    "regnet_y_16gf": "regnety_160",
    "regnet_y_32gf": "regnety_320",
    "regnet_y_128gf": "regnety_1280",
}


def torchvision_parameters(timm_names: set[str]) -> dict[str, float]:
    """The parameter count in millions, counted on the meta device, of each torchvision classifier that one of
    ``timm_names`` may be."""
    import torch
    import torchvision

    from hroofline.collect.models import torchvision_model

    counts = {}
    for name in torchvision.models.list_models(module=torchvision.models):
        if TIMM_NAMES.get(name, name) in timm_names:
            with torch.device("meta"):
                network = torchvision_model(name)
            counts[name] = sum(p.numel() for p in network.parameters()) / 1e6
    return counts


def rows_of(table: Table, published: pd.DataFrame, parameters: dict[str, float]) -> list[dict[str, object]]:
    mode = "train" if "-train-" in table.file else "infer"
    by_timm_name = {TIMM_NAMES.get(name, name): name for name in parameters}
    rows = []
    for row in published.to_dict("records"):
        model = by_timm_name.get(row["model"])
        if model is None or row[f"{mode}_img_size"] != 224 or round(parameters[model], 2) != row["param_count"]:
            continue
        milliseconds = row[f"{mode}_step_time"]
        rows.append(
            {
                "source": table.source,
                "model": model,
                "gpu": table.gpu,
                "precision": "amp",
                "batch": row[f"{mode}_batch_size"],
                "phases": "train" if mode == "train" else "forward",
                "measured": "step" if mode == "train" else "fwd",
                "measured_s": round(milliseconds / 1e3, 9),
                "as_published": f"{milliseconds} ms/step ({row[f'{mode}_samples_per_sec']} samples/s)",
                "setup": f"timm results/{table.file} @ {table.commit}: {table.software}, AMP, NCHW, 224 px",
                "timm_model": row["model"],
                "param_count_m": row["param_count"],
                "gmacs": row.get("infer_gmacs"),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the results/ folder of a pytorch-image-models checkout")
    args = parser.parse_args(argv)
    missing = [t.file for t in TABLES if not (args.results / t.file).exists()]
    if missing:
        print(f"error: not in {args.results}: {', '.join(missing)}", file=sys.stderr)
        return 1
    tables = {t: pd.read_csv(args.results / t.file) for t in TABLES}
    parameters = torchvision_parameters({name for published in tables.values() for name in published["model"]})
    rows = [r for t, published in tables.items() for r in rows_of(t, published, parameters)]
    pd.DataFrame(rows).to_csv(OUT, index=False)
    print(f"wrote {OUT}: {len(rows)} rows, {len({r['model'] for r in rows})} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
