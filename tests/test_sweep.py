"""Sweeps of predictions, many runs on their GPUs' rooflines, and comparisons across GPUs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from hroofline.store.runs import RunStore
from tests.conftest import tree_digest

MODELS = "resnet18,resnet34,resnet50"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    import contextlib

    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("sweep") / "store"
    out = io.StringIO()
    argv = ["predict", "--arch", MODELS, "--gpu", "v100,a100", "--batch-size", "16,32", "--format", "csv"]
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--store", str(store)]) == 0
    return store, pd.read_csv(io.StringIO(out.getvalue()))


def test_a_sweep_stores_one_predictably_named_run_per_combination(swept: tuple[Path, pd.DataFrame]) -> None:
    store, table = swept
    expected = {
        f"{model}-fp32-{gpu}-b{batch}-predicted"
        for model in MODELS.split(",")
        for gpu in ("v100-sxm2", "a100-40gb")
        for batch in (16, 32)
    }
    assert set(RunStore(store).run_names()) == expected == set(table["run"])
    for row in table.itertuples():
        totals = json.loads(json.dumps(_summary_total(store, row.run)))
        assert row.time_s == pytest.approx(totals["time_s"]) and row.time_bound_s == pytest.approx(
            totals["time_bound_s"]
        )
        assert row.intensity == pytest.approx(row.flops / row.bytes_hbm)
        assert row.attainable_flop_per_s == pytest.approx(row.flops / row.time_bound_s)
        assert row.per_s == pytest.approx(row.batch / row.time_s)
        assert row.memory_peak_bytes == pytest.approx(totals["memory_peak_bytes"])
    # the same model and batch traced once: the same FLOPs on both GPUs
    pairs = table.groupby(["model", "batch"])["flops"].nunique()
    assert (pairs == 1).all()


def _summary_total(store: Path, run: str) -> dict[str, float]:
    from hroofline.analyze.kernels import phase_summary

    return phase_summary(RunStore(store).load(run))["total"]  # type: ignore[return-value]


def test_sweep_mistakes_are_refused_before_anything_is_stored(cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    bf16 = cli("predict", "--arch", "resnet18", "--gpu", "a100,v100", "--precision", "amp-bf16", "--store", str(store))
    assert bf16.code == 2 and "v100-sxm2 has no BF16 tensor cores" in bf16.err and bf16.err.count("\n") == 1
    named = cli("predict", "--arch", "resnet18,resnet34", "--gpu", "t4", "--run", "x", "--store", str(store))
    assert named.code == 2 and "--run names one run" in named.err
    twice = cli("predict", "--arch", "resnet18", "--gpu", "t4,tesla-t4", "--store", str(store))
    assert twice.code == 2 and "twice" in twice.err
    batches = cli("predict", "--arch", "resnet18", "--gpu", "t4", "--batch-size", "8,x", "--store", str(store))
    assert batches.code == 2 and "not a list of whole numbers" in batches.err
    assert not store.exists() or RunStore(store).run_names() == []


def test_runs_on_their_gpus_rooflines(cli, swept: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    store, table = swept
    runs = [f"{m}-fp32-{g}-b32-predicted" for g in ("v100-sxm2", "a100-40gb") for m in MODELS.split(",")]
    out = tmp_path / "resnets.json"
    result = cli("chart", *runs, "--out", str(out), "--format", "csv", "--store", str(store))
    assert result.code == 0, result.err
    spec = json.loads(out.read_text())
    assert len(spec["hconcat"]) == 2  # one chart per GPU
    subtitles = [chart["title"]["text"] for chart in spec["hconcat"]]
    assert subtitles[0].startswith("v100-sxm2:") and subtitles[1].startswith("a100-40gb:")
    labels = json.dumps(spec)
    assert "HBM 900.0 GB/s" in labels and "HBM 1.555 TB/s" in labels and "TF32 tensor 156.0 TFLOP/s" in labels
    printed = pd.read_csv(io.StringIO(result.out))
    assert list(printed["run"]) == runs
    by_run = table.set_index("run").loc[runs]
    assert printed["intensity"].to_numpy() == pytest.approx(by_run["intensity"].to_numpy(), rel=1e-3)
    # attainable: every op at its roof, the same as the sweep's FLOPs / bound
    assert printed["attainable_flop_rate"].to_numpy() == pytest.approx(
        by_run["attainable_flop_per_s"].to_numpy(), rel=1e-3
    )
    phases = cli("chart", *runs[:2], "--by", "phase", "--out", str(tmp_path / "p.json"), "--store", str(store))
    assert phases.code == 0 and phases.out.count("backward") == 2 and "% of attainable" in phases.out


def test_chart_refusals_change_nothing(cli, swept: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    store, table = swept
    before = tree_digest(store)
    runs = list(table["run"][:2])
    kernels = cli("chart", *runs, "--by", "name", "--store", str(store))
    assert kernels.code == 2 and "--by run" in kernels.err
    levels = cli("chart", *runs, "--level", "l1,hbm", "--store", str(store))
    assert levels.code == 2 and "one memory level" in levels.err
    gpus = ["resnet18-fp32-v100-sxm2-b16-predicted", "resnet18-fp32-a100-40gb-b16-predicted"]
    ceilings = cli("chart", *gpus, "--ceilings", "v100", "--store", str(store))
    assert ceilings.code == 2 and "ran on several GPUs" in ceilings.err
    missing = cli("chart", runs[0], "no-such-run", "--out", str(tmp_path / "x.html"), "--store", str(store))
    assert missing.code == 1 and not (tmp_path / "x.html").exists()
    assert tree_digest(store) == before


def test_compare_across_gpus_draws_both_gpus_roofs(cli, swept: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    store, _ = swept
    out = tmp_path / "cmp.json"
    base, candidate = "resnet50-fp32-v100-sxm2-b32-predicted", "resnet50-fp32-a100-40gb-b32-predicted"
    assert cli("compare", base, candidate, "--out", str(out), "--store", str(store)).code == 0
    text = out.read_text()
    assert "v100-sxm2 HBM 900.0 GB/s" in text and "a100-40gb HBM 1.555 TB/s" in text
    same = tmp_path / "same.json"
    other = "resnet18-fp32-v100-sxm2-b32-predicted"
    assert cli("compare", other, base, "--out", str(same), "--store", str(store)).code == 0
    assert "a100-40gb" not in same.read_text()  # one GPU: one set of roofs


def test_the_report_shows_every_run_on_its_roofline(cli, swept: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    store, _ = swept
    runs = ["resnet18-fp32-v100-sxm2-b32-predicted", "resnet18-fp32-a100-40gb-b32-predicted"]
    assert cli("report", *runs, "--out", str(tmp_path / "report"), "--store", str(store)).code == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "All runs on their GPUs' rooflines" in page and "attainable FLOP/s" in page
    assert "peak memory" in page and "bound" in page


def test_the_report_says_which_runs_do_not_fit(cli, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("predict", "--arch", "vgg16", "--gpu", "t4,a100", "--batch-size", "256", "--store", store).code == 0
    runs = ["vgg16-fp32-t4-b256-predicted", "vgg16-fp32-a100-40gb-b256-predicted"]
    assert cli("report", *runs, "--out", str(tmp_path / "report"), "--store", store).code == 0
    page = (tmp_path / "report" / "index.html").read_text()
    overview = page[page.index('id="all-runs"') : page.index('id="run-1"')]
    rows = re.findall(r'<tr><td class="text">([^<]+)</td>.*?<td>(yes|no|-)</td></tr>', overview)
    assert dict(rows) == {"vgg16-fp32-t4-b256-predicted": "no", "vgg16-fp32-a100-40gb-b256-predicted": "yes"}


def test_runs_says_how_each_run_was_collected(cli, deepcam_store: Path, tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "store"
    shutil.copytree(deepcam_store, store)
    assert cli("predict", "--arch", "resnet18", "--gpu", "v100", "--batch-size", "2", "--store", str(store)).code == 0
    listed = {row["run"]: row for row in json.loads(cli("runs", "--format", "json", "--store", str(store)).out)}
    assert listed["resnet18-fp32-v100-sxm2-b2-predicted"]["kind"] == "predicted"
    assert listed["deepcam-O1"]["kind"] == "ncu" and listed["deepcam-O1"]["gpu"] == "v100-sxm2"
    assert "kind" in cli("runs", "--store", str(store)).out.splitlines()[0]


def test_an_inference_pass_and_a_training_step_do_not_share_a_name(cli, tmp_path: Path) -> None:
    """Predicting a model's training step, then its inference pass, into one store: two runs (the second used
    to be refused as 'exists already')."""
    store = tmp_path / "store"
    common = ["--arch", "resnet18", "--gpu", "h100", "--batch-size", "1,8", "--store", store]
    assert cli("predict", *common).code == 0
    forward = cli("predict", *common, "--phases", "forward")
    assert forward.code == 0, forward.err
    names = set(RunStore(store).run_names())
    assert names == {
        f"resnet18-fp32-h100-sxm{phases}-b{batch}-predicted" for phases in ("", "-forward") for batch in (1, 8)
    }
    assert RunStore(store).load("resnet18-fp32-h100-sxm-forward-b8-predicted").meta.sources[0].settings["phases"] == (
        "forward"
    )


def test_a_run_is_named_after_the_settings_that_differ_from_the_defaults(cli, tmp_path: Path) -> None:
    """Changing the batch size, the input shape or the optimizer alone makes another run, not 'exists already'."""
    store = tmp_path / "store"
    common = ["--arch", "resnet18", "--gpu", "t4", "--store", store]
    for extra in ([], ["--batch-size", "8"], ["--batch-size", "8", "--input-shape", "3,64,64", "--optimizer", "adam"]):
        result = cli("predict", *common, *extra)
        assert result.code == 0, result.err
    forward = cli("predict", *common, "--batch-size", "32", "--optimizer", "adam", "--phases", "forward")
    assert forward.code == 0, forward.err  # batch 32 is the default; an inference pass has no optimizer
    assert set(RunStore(store).run_names()) == {
        "resnet18-fp32-t4-predicted",
        "resnet18-fp32-t4-b8-predicted",
        "resnet18-fp32-t4-b8-3x64x64-adam-predicted",
        "resnet18-fp32-t4-forward-predicted",
    }
    again = cli("predict", *common, "--batch-size", "8", "--input-shape", "3,224,224")  # the model's own shape
    assert again.code == 2 and "'resnet18-fp32-t4-b8-predicted' exists already" in again.err
