"""The second source of published step times (bench/data/timm-step-times.csv, from timm's benchmark tables): that
the rows say what timm published, and that its models are torchvision's architectures, whose work hroofline counts
as timm did (here five of them; tests/figures/test_timm_step_times.py, run by make check-figures, checks all 58 and
the bundled estimate's error on these rows it never saw)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.predict import MATMUL_OPS
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.models import torchvision_model
from hroofline.collect.workload import WorkloadConfig
from hroofline.model.quantities import FLOP_QUANTITIES

REPO = Path(__file__).resolve().parent.parent
ROWS = pd.read_csv(REPO / "bench" / "data" / "timm-step-times.csv")
MODELS = sorted(ROWS["model"].unique())
# A residual network, a depthwise one with squeeze-excitation, a transformer, a ConvNeXt, and one in timm's
# training table only (no count of multiply-accumulates): each way the check below goes
FEW_MODELS = ["resnet50", "efficientnet_b0", "vit_b_16", "convnext_tiny", "vit_h_14"]


def test_the_rows_say_what_timm_published() -> None:
    assert len(ROWS) == 165 and len(MODELS) == 58
    assert set(ROWS["source"]) == {"timm-pt112-rtx3090", "timm-pt240-rtx3090", "timm-pt291-rtx4090"}
    assert set(ROWS["precision"]) == {"amp"} and set(ROWS["gpu"]) == {"rtx3090", "rtx4090"}
    for row in ROWS.itertuples():
        published = re.fullmatch(r"([\d.]+) ms/step \(([\d.]+) samples/s\)", row.as_published)
        assert published, row.as_published
        milliseconds, per_second = map(float, published.groups())
        assert row.measured_s * 1e3 == pytest.approx(milliseconds, rel=1e-9)
        # timm's samples/s is over the whole timed run (step times and the gaps between steps): within 1%
        assert row.batch / row.measured_s == pytest.approx(per_second, rel=0.01)


@pytest.mark.parametrize("model", FEW_MODELS)
def test_each_model_is_the_torchvision_architecture(model: str) -> None:
    assert_is_the_torchvision_architecture(model)


def assert_is_the_torchvision_architecture(model: str) -> None:
    """timm's parameter count (millions, two decimals) is torchvision's, and timm's multiply-accumulates per
    image (fvcore's count: convolutions and matrix products, plus one per element of the normalisation layers)
    lie between hroofline's multiply-accumulates in convolutions and matrix products and half its FLOPs of all
    ops, within timm's rounding."""
    import torch

    with torch.device("meta"):
        network = torchvision_model(model)
    parameters = sum(p.numel() for p in network.parameters()) / 1e6
    rows = ROWS[ROWS["model"] == model]
    assert rows["param_count_m"].nunique() == 1
    assert rows["param_count_m"].iloc[0] == pytest.approx(parameters, abs=0.0051)

    gmacs = rows["gmacs"].dropna().unique()
    if not len(gmacs):
        return  # in the training table only, which gives no count
    ops = trace_step(WorkloadConfig(model, 1, "fp32", "sgd", "meta"), "forward")
    flops = ops[[c for c in FLOP_QUANTITIES if c in ops]].fillna(0.0).sum(axis=1)
    products = ops["kernel"].isin(MATMUL_OPS) | ops["kernel"].str.contains("attention")
    macs_products, macs_all = flops[products].sum() / 2e9, flops.sum() / 2e9
    for count in gmacs:
        assert macs_products - 0.005 <= count <= macs_all + 0.005
        # the normalisation layers add a few percent (mobile networks); timm rounds to 0.01 GMAC
        assert count <= 1.07 * macs_products + 0.005
