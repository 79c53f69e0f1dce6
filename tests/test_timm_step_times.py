"""The second source of published step times (bench/data/timm-step-times.csv, timm's benchmark tables): that its
models are torchvision's architectures, that hroofline counts their work as timm did, and that the bundled
estimate, fitted to NVIDIA's tables only, meets the step-time goal on these rows it never saw."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from hroofline.analyze.calibrate import error_factors, percentiles
from hroofline.analyze.estimate import load_estimate_model
from hroofline.analyze.predict import MATMUL_OPS
from hroofline.collect.meta_trace import trace_step
from hroofline.collect.workload import WorkloadConfig
from hroofline.metricset import FLOP_QUANTITIES

REPO = Path(__file__).resolve().parent.parent
ROWS = pd.read_csv(REPO / "bench" / "data" / "timm-step-times.csv")
MODELS = sorted(ROWS["model"].unique())


def estimate_error_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("estimate_error", REPO / "bench" / "estimate_error.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rows_are_what_the_readme_says() -> None:
    assert len(ROWS) == 48 and len(MODELS) == 16
    assert set(ROWS["source"]) == {"timm-pt112-rtx3090", "timm-pt240-rtx3090", "timm-pt291-rtx4090"}
    assert set(ROWS["precision"]) == {"amp"} and set(ROWS["gpu"]) == {"rtx3090", "rtx4090"}
    assert (ROWS.groupby("source")["model"].nunique() == 16).all()  # every model in every table
    assert ROWS["setup"].str.contains("224 px").all()


@pytest.mark.parametrize("model", MODELS)
def test_each_model_is_the_torchvision_architecture(model: str) -> None:
    """timm's parameter count (millions, two decimals) is torchvision's, and timm's multiply-accumulates per
    image (fvcore's count: convolutions and matrix products, plus one per element of the normalisation layers)
    lie between hroofline's multiply-accumulates in convolutions and matrix products and half its FLOPs of all
    ops, within timm's rounding."""
    import torch
    import torchvision

    with torch.device("meta"):
        network = torchvision.models.get_model(model)
    parameters = sum(p.numel() for p in network.parameters()) / 1e6
    rows = ROWS[ROWS["model"] == model]
    assert rows["param_count_m"].nunique() == 1
    assert rows["param_count_m"].iloc[0] == pytest.approx(parameters, abs=0.0051)

    ops = trace_step(WorkloadConfig(model, 1, "fp32", "sgd", "meta"), "forward")
    flops = ops[[c for c in FLOP_QUANTITIES if c in ops]].fillna(0.0).sum(axis=1)
    products = ops["kernel"].isin(MATMUL_OPS) | ops["kernel"].str.contains("attention")
    macs_products, macs_all = flops[products].sum() / 2e9, flops.sum() / 2e9
    for gmacs in rows["gmacs"].dropna().unique():
        assert macs_products - 0.005 <= gmacs <= macs_all + 0.005
        assert gmacs / macs_products < 1.07  # the normalisation layers add a few percent (mobile networks)


def test_the_bundled_estimate_meets_the_goal_on_another_source() -> None:
    """Fitted to NVIDIA's tables, judged on timm's: median error factor <= 1.2 and 90th percentile <= 1.6, the
    issue's goal, and the roofline bound alone does not meet it (the estimate adds what the bound leaves out)."""
    bench = estimate_error_bench()
    samples = bench.samples(ROWS)
    median, p90 = percentiles(error_factors(samples, load_estimate_model()))
    assert median <= 1.2 and p90 <= 1.6
    bound_median, bound_p90 = percentiles(bench.bound_error_factors(samples))
    assert bound_median > 1.3 and bound_p90 > 1.9
