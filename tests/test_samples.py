"""The runs in samples/store are golden files: predicting them again gives the same ops, FLOPs, bytes
and times. A change in PyTorch's op decomposition or in hroofline's counting shows here first;
`make samples` rewrites them once the change is understood."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hroofline.model.quantities import FLOP_QUANTITIES
from hroofline.store.runs import RunStore
from tests.conftest import REPO

SAMPLES = RunStore(REPO / "samples" / "store")
COMPARED = ["kernel", "phase", *FLOP_QUANTITIES, "flops_tensor", "bytes_hbm", "time_bound_s", "time_s"]


@pytest.mark.parametrize("name", SAMPLES.run_names())
def test_sample_runs_are_reproduced(cli, tmp_path: Path, name: str) -> None:
    sample = SAMPLES.load(name)
    settings = sample.meta.sources[0].settings
    argv = [
        "predict",
        "--arch",
        sample.meta.sources[0].path.removeprefix("analytic:"),
        "--gpu",
        settings["gpu"],
        "--precision",
        settings["precision"],
        "--batch-size",
        settings["batch_size"],
        "--phases",
        settings["phases"],
        "--optimizer",
        settings["optimizer"],
        "--run",
        name,
    ]
    assert cli(*argv, "--store", str(tmp_path / "store")).code == 0
    again = RunStore(tmp_path / "store").load(name)
    pd.testing.assert_frame_equal(
        again.launches[COMPARED].astype({"kernel": str, "phase": str}),
        sample.launches[COMPARED].astype({"kernel": str, "phase": str}),
        rtol=1e-12,
    )
    assert again.meta.sources[0].memory == sample.meta.sources[0].memory  # every phase's bytes, by category


def test_there_are_samples() -> None:
    assert {"resnet50-fp32-v100-predicted", "resnet50-amp-v100-predicted"} <= set(SAMPLES.run_names())
