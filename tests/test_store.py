"""The Parquet run store: append, idempotence, atomic writes, metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hroofline.model.run import SCHEMA_VERSION
from hroofline.store import files as store_module
from hroofline.store.location import store_path
from hroofline.store.runs import RunStore
from tests.conftest import tree_digest

TIME = "v100_gene_dgdxy_time_dram_nvtx.ncu-rep"
FLOPS = "v100_gene_dgdxy_dpflops_nvtx.ncu-rep"


def test_same_source_twice_adds_nothing(cli, ncu_dir: Path) -> None:
    assert cli("import", ncu_dir / TIME, "--run", "r").code == 0
    before = tree_digest(cli.store)
    again = cli("import", ncu_dir / TIME, "--run", "r")
    assert again.code == 0 and "already in run" in again.err
    assert tree_digest(cli.store) == before


def test_a_renamed_copy_is_still_the_same_source(cli, ncu_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "renamed.ncu-rep"
    copy.write_bytes((ncu_dir / TIME).read_bytes())
    cli("import", ncu_dir / TIME, "--run", "r")
    assert "already in run" in cli("import", copy, "--run", "r").err


OTHER = "titanv_cnn_conv_fp32_fullset.ncu-rep"  # other launches, on a GPU of the same compute capability


def test_another_source_appends(cli, ncu_dir: Path) -> None:
    assert cli("import", ncu_dir / TIME, "--run", "r", "--phase", "forward").code == 0
    assert cli("import", ncu_dir / OTHER, "--run", "r", "--phase", "backward").code == 0
    run = RunStore(cli.store).load("r")
    assert len(run.launches) == 18
    assert [s.path.endswith(n) for s, n in zip(run.meta.sources, (TIME, OTHER), strict=True)] == [True, True]
    assert sorted(run.launches.groupby("source")["phase"].first()) == ["backward", "forward"]
    summary = json.loads(cli("summary", "r", "--format", "json").out)
    assert summary["phases"]["forward"]["kernels"] == 8 and summary["phases"]["backward"]["kernels"] == 10


def test_metadata_records_sources_and_formulas(cli, ncu_dir: Path, deepcam_dir: Path) -> None:
    cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "r", "--gpu", "v100", "--phase", "fw", "--precision", "fp32")
    meta = RunStore(cli.store).load_meta("r")
    assert (meta.gpu, meta.cc, meta.arch, meta.precision) == ("v100-sxm2", "7.0", "volta", "fp32")
    source = meta.sources[0]
    assert source.kind == "ncu-metric-logs" and len(source.files) == 12
    assert all(len(f["sha256"]) == 64 for f in source.files)
    assert source.formulas_used["flops_tensor_fp16"].startswith("512 x tensor-pipe instructions")
    assert "2 * sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in source.formulas_used["flops_fp32"]
    assert source.time_methods == {"sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second": 633}
    assert meta.schema_version == SCHEMA_VERSION and meta.metric_set == "hierarchical"


def test_unused_metrics_are_kept_in_metadata(cli, ncu_dir: Path) -> None:
    cli("import", ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv", "--run", "r")
    extra = RunStore(cli.store).load_meta("r").sources[0].extra_metrics
    assert extra["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == "%"
    assert "gpu__time_duration.sum" not in extra


def test_raw_metrics_are_stored_beside_quantities(cli, ncu_dir: Path) -> None:
    cli("import", ncu_dir / TIME, "--run", "r")
    launches = RunStore(cli.store).load("r").launches
    assert (launches["bytes_hbm"] == launches["metric:dram__bytes.sum"]).all()
    assert (
        launches["time_s"]
        == launches["metric:sm__cycles_elapsed.avg"] / launches["metric:sm__cycles_elapsed.avg.per_second"]
    ).all()


def test_an_interrupted_write_leaves_the_store_as_it_was(cli, ncu_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli("import", ncu_dir / TIME, "--run", "r")
    before = tree_digest(cli.store)
    real_replace = os.replace

    def interrupted(src: str | Path, dst: str | Path) -> None:
        if str(dst).endswith("meta.json"):
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", interrupted)
    result = cli("import", ncu_dir / OTHER, "--run", "r")
    assert result.code == 130 and "unchanged" in result.err
    fresh = cli("import", ncu_dir / FLOPS, "--run", "new")
    assert fresh.code == 130
    assert tree_digest(cli.store) == before
    monkeypatch.undo()
    assert len(RunStore(cli.store).load("r").launches) == 8


def test_runs_from_different_gpus_do_not_mix(cli, ncu_dir: Path) -> None:
    cli("import", ncu_dir / TIME, "--run", "r")
    result = cli("import", ncu_dir / "rtx3070_manual_nvtx_daxpy.ncu-rep", "--run", "r")
    assert result.code == 1 and "compute capability" in result.err


def test_gpu_option_must_match_the_report(cli, ncu_dir: Path) -> None:
    result = cli("import", ncu_dir / TIME, "--run", "r", "--gpu", "a100")
    assert result.code == 1 and "compute capability 8.0" in result.err


def test_a_source_naming_no_gpu_says_which_gpu_the_run_keeps(cli, ncu_dir: Path) -> None:
    """An A100 CSV that names no GPU, appended to a T4 run, is judged as a T4: nothing in it can tell, so the
    import says so (it once appended silently)."""
    cli("import", ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv", "--run", "r", "--gpu", "t4")
    result = cli("import", ncu_dir / "a100_dropout_fp64_nersc_metrics.csv", "--run", "r")
    assert result.code == 0
    (note,) = [line for line in result.err.splitlines() if "names no GPU" in line]
    assert "run 'r' keeps its GPU, t4 (compute capability 7.5)" in note and "another run with --gpu" in note
    stated = cli("import", ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv", "--run", "r", "--gpu", "t4")
    assert stated.code == 0 and "names no GPU" not in stated.err  # the user said which GPU it is


def test_store_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HROOFLINE_STORE", raising=False)
    assert store_path(None) == Path("hroofline-runs")
    monkeypatch.setenv("HROOFLINE_STORE", str(tmp_path))
    assert store_path(None) == tmp_path
    assert store_path("elsewhere") == Path("elsewhere")


def test_runs_listing(cli, ncu_dir: Path) -> None:
    missing = cli("runs")  # no store yet: said, not listed as empty
    assert missing.code == 1 and "no store at" in missing.err and not cli.store.exists()
    cli("import", ncu_dir / "rtx3060ti_llmc_adamw_fullset.ncu-rep", "--run", "adamw")
    rows = json.loads(cli("runs", "--format", "json").out)
    assert rows == [
        {
            "run": "adamw",
            "kind": "ncu",
            "gpu": "NVIDIA GeForce RTX 3060 Ti",
            "cc": "8.6",
            "arch": "ampere",
            "precision": None,
            "compile": None,  # an eager step, or one that does not say
            "phases": "other",
            "sources": 1,
            "launches": 4,
            "ncu": "2024.3.0",
            "created": rows[0]["created"],
            "updated": rows[0]["updated"],
        }
    ]


def test_a_prediction_stored_before_the_estimate_keeps_its_bound(tmp_path: Path) -> None:
    """Schema 4 predictions stored the roofline bound as time_s: read today, it is their time_bound_s too."""
    import json
    import shutil

    import pyarrow.parquet as pq

    from tests.conftest import REPO

    store = tmp_path / "store"
    shutil.copytree(REPO / "samples" / "store", store)
    run_dir = store / "runs" / "run=resnet50-fp32-v100-predicted"
    meta = json.loads((run_dir / "meta.json").read_text())
    meta["schema_version"] = 4
    (run_dir / "meta.json").write_text(json.dumps(meta))
    parquet = next(run_dir.glob("launches-*.parquet"))
    table = pq.read_table(parquet)
    bound = table.column("time_bound_s").to_pylist()
    table = table.drop_columns(["time_bound_s"]).set_column(
        table.schema.get_field_index("time_s"), "time_s", table.column("time_bound_s")
    )
    pq.write_table(table, parquet)
    launches = RunStore(store).load("resnet50-fp32-v100-predicted").launches
    assert launches["time_bound_s"].tolist() == bound == launches["time_s"].tolist()


def test_summary_and_rankings_read_fewer_columns_with_the_same_results(deepcam_store: Path) -> None:
    """`summary` reads the numbers and phases only, `top` and `kernels` no raw metrics: what they print is what
    a read of every column gives, on DeepCAM's ncu runs."""
    from hroofline.analyze.kernels import RANKING_READS, SUMMARY_READS, KernelQuery, kernel_table, phase_summary
    from hroofline.analyze.provenance import counter_provenance
    from hroofline.analyze.utilization import run_utilization

    store = RunStore(deepcam_store)
    for name in store.run_names():
        whole, numbers, ranked = store.load(name), store.load(name, SUMMARY_READS), store.load(name, RANKING_READS)
        assert any(c.startswith("metric:") for c in whole.launches.columns)
        assert not any(c.startswith("metric:") for c in numbers.launches.columns)
        # names not read; the FLOP and HBM roofs are (MFU, MBU)
        assert "kernel" not in numbers.launches.columns and len(numbers.launches.columns) < 50
        assert phase_summary(numbers) == phase_summary(whole)
        assert run_utilization(numbers) == run_utilization(whole)  # MFU reads the FLOP and HBM roofs only
        assert counter_provenance(numbers.launches) == counter_provenance(whole.launches)
        query = KernelQuery(group_by="name")
        assert kernel_table(ranked, query).equals(kernel_table(whole, query))
