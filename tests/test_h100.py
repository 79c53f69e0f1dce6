"""Right on a real H100: what hroofline recorded there (../shared/fixtures/h100) must give the facts its
README measured. cuBLAS's GEMMs are a known answer: 90-97% of the DENSE tensor roof (ncu's tensor
``.peak_sustained`` on Hopper is the 2:4-sparse rate, twice that); Hopper's L1 counter misses TMA traffic.

The expected roofs are computed here from the dense rates NVIDIA's H100 whitepaper gives per SM per clock
(4,096 FP16/BF16, 2,048 TF32, 256 FP64 tensor, 256 FP32 FLOP), 132 SMs and each launch's measured clock.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

H100_SMS = 132
DENSE_PER_SM_CYCLE = {"tensor_bf16": 4096, "tensor_fp16": 4096, "tensor_tf32": 2048, "tensor_fp64": 256, "fp32": 256}
CALIBRATIONS = ("gemm-calibration-base-clock", "gemm-calibration-no-clock-control")
# runs of the session's h100_runs_store (tests/conftest.py), each imported as a user would (no --gpu: the reports say)
R34 = "r34"  # resnet34-fp32-b32-step.ncu-rep


def _csv(cli, *args: str) -> pd.DataFrame:
    result = cli(*args)
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out))


@pytest.mark.parametrize("report", CALIBRATIONS)
def test_cublas_gemms_sit_where_they_must(cli, h100_runs_store: Path, report: str) -> None:
    top = _csv(cli, "top", report, "-n", "20", "--format", "csv", "--store", str(h100_runs_store))
    bands = {"BF16 tensor": (90, 97), "FP16 tensor": (90, 97), "TF32 tensor": (90, 97), "FP64 tensor": (94, 96)}
    bands["FP32"] = (72, 82)
    assert len(top) == 5 and sorted(top["bound"]) == sorted(bands)  # one GEMM kernel per precision
    for row in top.to_dict(orient="records"):
        low, high = bands[row["bound"]]
        assert low <= row["roof_pct"] <= high, row["kernel"]
    assert not {"L1", "L2", "HBM"} & set(top["bound"])


@pytest.mark.parametrize("report", CALIBRATIONS)
def test_tensor_roofs_are_the_dense_rates_at_each_launchs_clock(cli, h100_runs_store: Path, report: str) -> None:
    launches = _csv(cli, "kernels", report, "--format", "csv", "--store", str(h100_runs_store))
    from hroofline.store.runs import RunStore

    stored = RunStore(h100_runs_store).load(report).launches
    for key, rate in DENSE_PER_SM_CYCLE.items():
        column = "flops_" + key if key != "fp32" else "flops_fp32"
        working = stored[stored[column].fillna(0) > 0]
        if key != "fp32":
            assert len(working) == 2, key  # two launches per precision
        expected = rate * H100_SMS * working["clock_hz"]
        assert (working["peak_" + key] / expected).between(0.99, 1.01).all(), key
    assert len(launches) == 10


def test_the_sparse_peaks_are_said_once_at_import(cli, h100_dir: Path) -> None:
    result = cli("import", h100_dir / "gemm-calibration-base-clock.ncu-rep", "--run", "g")
    assert result.code == 0, result.err
    (note,) = [line for line in result.err.splitlines() if "differ from the dense rates" in line]
    assert "tensor_bf16 8,192 vs 4,096" in note and "tensor_tf32 4,096 vs 2,048" in note and "2:4-sparse" in note
    assert "tensor_fp64" not in note  # DMMA's peak is dense: it agrees


def test_tma_gemms_have_no_l1_intensity(cli, h100_runs_store: Path) -> None:
    stored = _csv(cli, "kernels", CALIBRATIONS[0], "--format", "csv", "--store", str(h100_runs_store))
    nvjet = stored[stored["kernel"].str.startswith("nvjet_sm90")]
    assert len(nvjet) == 4 and nvjet["bytes_l1"].isna().all() and nvjet["ai_l1"].isna().all()
    assert nvjet["bytes_l2"].gt(8e9).all()  # the L2 level still counts what TMA moved
    sgemm = stored[stored["kernel"].str.startswith("sm80_xmma_gemm_f32f32")]
    assert sgemm["ai_l1"].between(30, 60).all()  # no TMA: its L1 count stands


def test_resnet34_every_tf32_launch_against_the_dense_tf32_roof(cli, h100_runs_store: Path) -> None:
    from hroofline.store.runs import RunStore

    launches = RunStore(h100_runs_store).load(R34).launches
    tf32 = launches[launches["flops_tensor_tf32"].fillna(0) > 0]
    assert len(tf32) > 100
    expected = 2048 * H100_SMS * tf32["clock_hz"]
    assert (tf32["peak_tensor_tf32"] / expected).between(0.99, 1.01).all()
    per_launch = _csv(cli, "kernels", R34, "--format", "csv", "--store", str(h100_runs_store))
    assert per_launch["ai_l1"].dropna().max() <= 1e4  # no TMA kernel's L1 intensity printed as measured
    assert per_launch["ai_l1"].isna().sum() >= 87
    top = _csv(cli, "top", R34, "-n", "1000", "--format", "csv", "--store", str(h100_runs_store))
    assert top["roof_pct"].max() <= 100
    from hroofline.analyze.binding import launch_roof_terms
    from hroofline.roofs.ceilings import run_roofs
    from hroofline.roofs.metricset import load_metric_set

    run = RunStore(h100_runs_store).load(R34)
    terms = launch_roof_terms(run.launches, run_roofs(run).per_launch, load_metric_set().pipes_of("9.0"))
    assert (terms["time_at_roof_s"].fillna(0) <= run.launches["time_s"]).all()  # no launch above 100% of its roof
    fprop = top[top["kernel"].str.contains("sm90_xmma_fprop") & (top["count"] >= 6)]
    # At the sparse roof's height the L2 line passed under it: they were called L2-bound
    assert len(fprop) == 2 and (fprop["bound"] == "TF32 tensor").all()


def test_a_report_of_another_gpu_is_refused_unless_forced(cli, ncu_dir: Path) -> None:
    h800 = ncu_dir / "h800_podattn_flashfwd_fullset_nvtx.ncu-rep"  # 132 SMs
    refused = cli("import", h800, "--run", "h", "--gpu", "h20")  # 78 SMs
    assert refused.code == 1 and not refused.out
    (line,) = refused.err.splitlines()
    assert "has 132 SMs, --gpu h20 has 78" in line and "--force-gpu" in line
    assert not (cli.store / "runs").exists() or not any((cli.store / "runs").iterdir())
    forced = cli("import", h800, "--run", "h", "--gpu", "h20", "--force-gpu")
    assert forced.code == 0, forced.err
    assert cli("import", h800, "--run", "h2", "--force-gpu").code == 2  # --force-gpu needs --gpu


def test_a_gpu_of_the_same_sm_count_but_another_name_is_refused_unless_forced(cli, h100_dir: Path) -> None:
    """An H100 SXM and an H200 both have 132 SMs and compute capability 9.0: the device name the file records tells
    them apart (issue 45). Refused for an ncu report, a trace, doctor --report, either way round."""
    from tests.conftest import REPO

    h200 = REPO / "tests" / "data" / "gpu-2026-11-27" / "h200-doctor-calibration.ncu-rep.xz"
    cases = [
        (("import", h100_dir / "gemm-calibration-base-clock.ncu-rep", "--run", "a", "--gpu", "h200"), "H100", "h200"),
        (("import", h100_dir / "gpt2-amp-bf16-b8-s512-trace.json", "--run", "b", "--gpu", "h200"), "H100", "h200"),
        (("import", h200, "--run", "c", "--gpu", "h100-sxm"), "H200", "h100-sxm"),
        (("doctor", "--report", h100_dir / "gemm-calibration-base-clock.ncu-rep", "--gpu", "h200"), "H100", "h200"),
    ]
    for args, device, named in cases:
        refused = cli(*args)
        assert refused.code == 1 and not refused.out, args
        (line,) = refused.err.splitlines()
        assert f"the profiled device is NVIDIA {device}" in line and f"not --gpu {named}" in line, line
        assert "--force-gpu" in line
    forced = cli(
        "import", h100_dir / "gemm-calibration-base-clock.ncu-rep", "--run", "a", "--gpu", "h200", "--force-gpu"
    )
    assert forced.code == 0, forced.err
    assert cli("import", h100_dir / "gemm-calibration-base-clock.ncu-rep", "--run", "d", "--gpu", "h100-sxm").code == 0


def test_a_device_the_catalog_cannot_name_is_told_apart_by_its_memory(cli, h100_dir: Path, tmp_path: Path) -> None:
    """The GPT-2 trace with its device renamed to one the catalog does not know: its 132 SMs fit an H200 as well
    as an H100, its 79 GiB of memory (totalGlobalMem) only the H100's 80 GiB, not the H200's 141."""
    text = (h100_dir / "gpt2-amp-bf16-b8-s512-trace.json").read_text()
    assert text.count('"NVIDIA H100 80GB HBM3"') >= 1 and '"totalGlobalMem": 85017493504' in text
    renamed = tmp_path / "renamed-trace.json"
    renamed.write_text(text.replace('"NVIDIA H100 80GB HBM3"', '"NVIDIA Hopper Engineering Sample"'))
    refused = cli("import", renamed, "--run", "a", "--gpu", "h200")
    assert refused.code == 1 and not refused.out
    (line,) = refused.err.splitlines()
    assert "has 79 GiB of memory, --gpu h200 has 141 GiB" in line and "--force-gpu" in line
    assert cli("import", renamed, "--run", "b", "--gpu", "h100-sxm").code == 0


def test_a_kernel_without_flop_counts_has_no_bound(cli, ncu_dir: Path) -> None:
    """A console log of ncu's default sections: durations and throughputs, no FLOP counters. Its kernels'
    HBM bytes alone do not make them HBM-bound."""
    log = ncu_dir / "a100pcie_torch_bmm_softmax_fp16_sections_console.txt"
    assert cli("import", log, "--run", "c", "--gpu", "a100").code == 0
    top = _csv(cli, "top", "c", "--format", "csv")
    assert top["bound"].isna().all() and top["roof_pct"].isna().all()


def test_runs_stored_before_dense_roofs_are_corrected_on_reading(h100_dir: Path, tmp_path: Path) -> None:
    """A store an older hroofline wrote (schema 6): no 2:4-sparse columns, the sparse tensor roofs and the
    TMA-blind L1 counts as it kept them. Reading it migrates it, with dense roofs and null L1 counts."""
    import json as json_module

    import pyarrow.parquet as pq

    from hroofline.cli.main import main
    from hroofline.model.run import SCHEMA_VERSION
    from hroofline.store.format import SCHEMA_VERSION_KEY
    from hroofline.store.runs import RunStore

    store = tmp_path / "store"
    assert main(["import", str(h100_dir / f"{CALIBRATIONS[0]}.ncu-rep"), "--run", "g", "--store", str(store)]) == 0
    today = RunStore(store).load("g")
    folder = store / "runs" / "run=g"
    meta = json_module.loads((folder / "meta.json").read_text())
    path = folder / meta["launches_file"]
    table = pq.read_table(path)
    sparse = [c for c in table.column_names if c.endswith("_sparse")]
    frame = table.drop_columns([*sparse, "raw_metrics"]).to_pandas()
    for key in ("tensor_bf16", "tensor_fp16", "tensor_tf32"):
        frame["peak_" + key] *= 2  # what ncu's .peak_sustained gave and schema 6 kept
    frame["bytes_l1"] = today.launches["metric:l1tex__t_bytes.sum"].to_numpy()
    old = pa.Table.from_pandas(frame, preserve_index=False).append_column("raw_metrics", table["raw_metrics"])
    pq.write_table(old.replace_schema_metadata({SCHEMA_VERSION_KEY: b"6"}), path)
    meta["schema_version"] = 6
    (folder / "meta.json").write_text(json_module.dumps(meta))
    (store / "store.json").write_text(json_module.dumps({"layout": 2, "schema_version": 6}))
    read = RunStore(store).load("g")  # migrates the store
    for key in ("tensor_bf16", "tensor_fp16", "tensor_tf32", "tensor_fp64", "fp32"):
        pd.testing.assert_series_equal(read.launches["peak_" + key], today.launches["peak_" + key], rtol=1e-9)
    pd.testing.assert_series_equal(read.launches["bytes_l1"], today.launches["bytes_l1"])
    note = read.meta.sources[0].notes[-1]
    assert "not the dense rates" in note and "L1 unknown for 6 launch(es)" in note
    assert json_module.loads((store / "store.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_gpt2_trace_puts_its_matmuls_and_fused_attention_on_the_tensor_roof(
    cli, h100_dir: Path, h100_runs_store: Path
) -> None:
    """The same GPT-2 bf16 step as a trace (analytic work from each op's shapes and dtypes) and under ncu
    (counters): the trace's FLOPs within 5% of ncu's, at least 97% of them tensor work, causal attention as one
    fused kernel at half the FLOPs of full attention, no attention or embedding kernel above a roof, and at
    most three warning lines."""
    imported = cli("import", h100_dir / "gpt2-amp-bf16-b8-s512-trace.json", "--run", "trace")
    assert imported.code == 0, imported.err
    trace = json.loads(cli("summary", "trace", "--format", "json").out)["total"]
    # the step's ncu report, imported once a session (tests/conftest.py)
    counted = json.loads(cli("summary", "gpt2-ncu", "--format", "json", store_dir=h100_runs_store).out)["total"]
    assert 3.2e12 < counted["flops"] < 3.3e12 and counted["flops_tensor"] / counted["flops"] > 0.99
    assert trace["flops"] == pytest.approx(counted["flops"], rel=0.05)
    assert trace["flops_tensor_bf16"] / trace["flops"] >= 0.97
    launches = _csv(cli, "kernels", "trace", "--format", "csv")
    attention = launches[launches["kernel"].str.contains("sdpa_sm90_flash_fprop")]
    batch, heads, tokens, head_dim, layers = 8, 12, 512, 64, 12
    full = layers * 2 * (2 * batch * heads * tokens * tokens * head_dim)  # QK^T and PV
    causal = full * (tokens + 1) / (2 * tokens)  # the keys up to each query's own position
    assert attention["flops_tensor_bf16"].sum() == pytest.approx(causal, rel=1e-9)
    # ncu's counters on the same kernels (forward and backward) lie between the causal count and the full one:
    # the fused kernels compute the diagonal's tiles whole
    counted_attention = _csv(
        cli, "kernels", "gpt2-ncu", "--group-by", "name", "--format", "csv", "--store", str(h100_runs_store)
    )
    measured = counted_attention[counted_attention["kernel"].str.contains("sdpa_sm90_flash")]["flops"].sum()
    traced = launches[launches["kernel"].str.contains("sdpa_sm90_flash")]["flops"].sum()
    assert traced < measured < traced / causal * full
    qkvo = layers * 4 * batch * heads * tokens * head_dim * 2  # Q, K, V and O once, bf16
    assert attention["bytes_hbm"].sum() == pytest.approx(qkvo, rel=0.05)
    top = cli("top", "trace", "-n", "5", "--explain")
    assert top.code == 0
    listed = [line for line in top.err.splitlines() if line.startswith("  ")]
    assert not [line for line in listed if re.search("sdpa|flash|gather|embedding|nvjet|cutlass", line)]
    # element-wise kernels above HBM only (L2-resident data), none above a compute roof
    assert listed and all(line.endswith("[resident]") for line in listed)
    warnings = [line for text in (imported.err, cli("top", "trace").err) for line in text.splitlines()]
    assert len([line for line in warnings if "warning" in line]) <= 3
