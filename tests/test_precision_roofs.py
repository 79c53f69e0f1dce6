"""Right on every GPU and precision: each tensor input precision against its own roof, roofs at the clock a
kernel ran at, pipes that run concurrently, a kernel's time at roof summed over its launches, and roofs
from the report itself.

The four GEMMs in tests/data are the kinds of kernels every LLM run has, written as ncu long-format CSVs
with real metric names; the expected figures are computed here from the CSV values and the catalog file,
not through hroofline's roof code.
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from hroofline.model.run import SCHEMA_VERSION
from hroofline.roofs.catalog import gpu_from_display_name
from hroofline.roofs.metricset import metrics_dir
from tests import reference
from tests.conftest import REPO

DATA = REPO / "tests" / "data"
A100_GEMMS = DATA / "a100_llm_gemms_tf32_dmma_fp16_ncu_details.csv"
H100_FP8 = DATA / "h100_llm_gemm_fp8_ncu_details.csv"
CATALOG = tomllib.loads((metrics_dir() / "gpus.toml").read_text())


def _top(cli, run: str, *extra: str) -> tuple[pd.DataFrame, str]:
    result = cli("top", run, "-n", "100", "--format", "csv", *extra)
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out)), result.err


def _launch(path: Path, launch_id: int) -> dict[str, float]:
    return reference.long_csv_launches(path)[launch_id]


def _expected_pct(launch: dict[str, float], gpu: str, pipes: list[list[tuple[str, str]]]) -> float:
    """100 x time at roof / time, with the catalog peaks scaled to the launch's clock, each pipe's
    (metric, peak key) terms added up, the longest pipe and every memory level compared."""
    peaks, clocks = CATALOG[gpu]["peak"], CATALOG[gpu]["clock"]
    clock = launch["sm__cycles_elapsed.avg.per_second"]

    def peak(key: str) -> float:
        return peaks[key] * clock / clocks.get(key, clocks["default"])

    pipe_times = [sum(launch[metric] / peak(key) for metric, key in pipe) for pipe in pipes]
    memory = [launch["dram__bytes.sum"] / peaks["hbm"]]
    memory += [
        launch[f"{unit}__t_bytes.sum"] / peak(level)
        for unit, level in (("lts", "l2"), ("l1tex", "l1"))
        if level in peaks
    ]
    return 100 * max(pipe_times + memory) / launch["gpu__time_duration.sum"]


def test_a100_tf32_gemm_at_96_percent_of_its_tf32_roof(cli) -> None:
    assert cli("import", A100_GEMMS, "--run", "a100").code == 0
    top, err = _top(cli, "a100")
    row = top[top["kernel"].str.contains("tf32f32")].iloc[0]
    assert row["bound"] == "TF32 tensor"
    launch = _launch(A100_GEMMS, 0)
    expected = _expected_pct(
        launch,
        "a100-40gb",
        [
            [("sm__ops_path_tensor_src_tf32_dst_fp32.sum", "tensor_tf32")],
            [("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "fp32")],
        ],
    )
    assert row["roof_pct"] == pytest.approx(expected, rel=1e-9)
    assert row["roof_pct"] == pytest.approx(96, abs=0.01)
    # One tensor roof for all precisions (the FP16 one) would have put it at 48%.
    at_fp16_roof = 100 * launch["sm__ops_path_tensor_src_tf32_dst_fp32.sum"] / 312e12 / launch["gpu__time_duration.sum"]
    assert at_fp16_roof == pytest.approx(48, abs=0.1)
    assert "beats" not in err


def test_a100_dmma_gemm_at_97_percent_of_the_fp64_tensor_roof_at_its_clock(cli) -> None:
    assert cli("import", A100_GEMMS, "--run", "a100").code == 0
    top, _ = _top(cli, "a100")
    row = top[top["kernel"].str.contains("f64f64")].iloc[0]
    assert row["bound"] == "FP64 tensor"
    launch = _launch(A100_GEMMS, 1)
    assert launch["sm__cycles_elapsed.avg.per_second"] == 1.275e9  # below the 1.41 GHz the peak is quoted at
    # On GA100 FP64 and tensor instructions share one pipe: the DMMA and the DFMA epilogue add up.
    shared = [
        ("sm__ops_path_tensor_src_fp64.sum", "tensor_fp64"),
        ("sm__sass_thread_inst_executed_op_dmul_pred_on.sum", "fp64"),
        ("sm__sass_thread_inst_executed_op_dadd_pred_on.sum", "fp64"),
    ]
    assert row["roof_pct"] == pytest.approx(_expected_pct(launch, "a100-40gb", [shared]), rel=1e-9)
    assert row["roof_pct"] == pytest.approx(97, abs=0.05)


def test_fp16_gemm_with_fp32_work_on_another_pipe_is_not_above_its_roof(cli) -> None:
    assert cli("import", A100_GEMMS, "--run", "a100").code == 0
    top, err = _top(cli, "a100")
    row = top[top["kernel"].str.startswith("ampere_fp16_s16816gemm")].iloc[0]
    assert row["bound"] == "FP16 tensor" and row["roof_pct"] == pytest.approx(80, abs=1e-6)
    assert row["recoverable_s"] > 0 and "beats" not in err
    # Summing the pipes (one compute roof for all the work) would put it at 110%: "above its roof".
    launch = _launch(A100_GEMMS, 2)
    fp32_flops = (
        launch["sm__sass_thread_inst_executed_op_fmul_pred_on.sum"]
        + 2 * launch["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    )
    summed = launch["sm__ops_path_tensor_src_fp16_dst_fp32.sum"] / 312e12 + fp32_flops / 19.5e12
    assert 100 * summed / launch["gpu__time_duration.sum"] == pytest.approx(110, abs=1e-6)


def test_h100_fp8_gemm_at_95_percent_with_no_warning(cli) -> None:
    result = cli("import", H100_FP8, "--run", "h100")
    assert result.code == 0, result.err
    top, err = _top(cli, "h100")
    row = top.iloc[0]
    assert row["bound"] == "FP8 tensor"
    launch = _launch(H100_FP8, 0)
    # H100 SXM's tensor peaks are quoted at 1830 MHz (FP32 at 1980): the kernel ran at 1755 MHz.
    pipes = [
        [("sm__ops_path_tensor_src_fp8.sum", "tensor_fp8")],
        [("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "fp32")],
    ]
    assert row["roof_pct"] == pytest.approx(_expected_pct(launch, "h100-sxm", pipes), rel=1e-9)
    assert row["roof_pct"] == pytest.approx(95, abs=0.01)
    assert "beats" not in err
    # Judged against the FP16 tensor peak it would "beat its roof".
    assert launch["sm__ops_path_tensor_src_fp8.sum"] / 989.4e12 > launch["gpu__time_duration.sum"]
    assert "h100-sxm datasheet" in cli("top", "h100").out  # the GPU, from the file's display name


def test_per_precision_columns_in_kernels_and_summary(cli) -> None:
    assert cli("import", A100_GEMMS, "--run", "a100").code == 0
    summary = json.loads(cli("summary", "a100", "--format", "json").out)["total"]
    launches = reference.long_csv_launches(A100_GEMMS).values()
    for column, metric in (
        ("flops_tensor_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum"),
        ("flops_tensor_fp64", "sm__ops_path_tensor_src_fp64.sum"),
        ("flops_tensor_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"),
    ):
        assert summary[column] == pytest.approx(sum(m[metric] for m in launches), rel=1e-12)
    tensor = (
        "flops_tensor_tf32",
        "flops_tensor_fp64",
        "flops_tensor_fp16",
        "flops_tensor_fp16_acc16",
        "flops_tensor_bf16",
    )
    assert summary["flops_tensor"] == pytest.approx(sum(summary[c] for c in tensor), rel=1e-12)
    assert summary["flops_tensor_fp8"] is None  # not collected on this A100: not measured, not 0
    header = next(line for line in cli("summary", "a100").out.splitlines() if line.startswith("phase"))
    table = header.split()  # after the lines that give MFU's denominator
    assert "flops_tensor_tf32" in table and "flops_tensor_fp8" not in table  # the table shows what was measured


FP32_COUNTERS = {f"sm__sass_thread_inst_executed_op_f{op}_pred_on.sum": ("inst", 0.0) for op in ("add", "mul", "fma")}


def _write_long_csv(path: Path, launches: list[tuple[str, dict[str, tuple[str, float]]]], cc: str = "8.0") -> None:
    """A long-format ncu CSV; the FP32 instruction counters a launch does not give are written as 0."""
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device", "CC"]
    header += ["Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        for launch_id, (kernel, metrics) in enumerate(launches):
            for name, (unit, value) in {**FP32_COUNTERS, **metrics}.items():
                row = [launch_id, 1, "python", "host", kernel, 1, 7, 0, cc, "Command line profiler metrics"]
                writer.writerow([*row, name, unit, f"{value:.6f}"])


def test_a_kernels_time_at_roof_is_the_sum_over_its_launches(cli, tmp_path: Path) -> None:
    """One launch compute-bound, one memory-bound: the roof of the summed FLOPs and bytes would be 0.064 s,
    less than the 0.116 s its launches need at their roofs, and overstate the recoverable time."""
    common = {"sm__cycles_elapsed.avg.per_second": ("cycle/second", 1.41e9)}
    compute = {
        **common,
        "gpu__time_duration.sum": ("second", 0.1),
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", 5e11),
        "dram__bytes.sum": ("byte", 1e9),
    }
    memory = {
        **common,
        "gpu__time_duration.sum": ("second", 0.2),
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", 5e9),
        "dram__bytes.sum": ("byte", 1e11),
    }
    path = tmp_path / "two.csv"
    _write_long_csv(path, [("gemm_like", compute), ("gemm_like", memory)])
    assert cli("import", path, "--run", "two", "--gpu", "a100").code == 0
    top, _ = _top(cli, "two")
    row = top.iloc[0]
    per_launch = max(1e12 / 19.5e12, 1e9 / 1555e9) + max(1e10 / 19.5e12, 1e11 / 1555e9)
    assert row["count"] == 2 and row["time_at_roof_s"] == pytest.approx(per_launch, rel=1e-12)
    of_sums = max(1.01e12 / 19.5e12, 1.01e11 / 1555e9)
    assert of_sums < 0.6 * per_launch
    assert row["recoverable_s"] == pytest.approx(0.3 - per_launch, rel=1e-12)
    assert row["bound"] == "HBM"  # the memory-bound launch takes more of the time at roof


def test_roofs_scale_with_each_launchs_clock(cli, tmp_path: Path) -> None:
    """The same work at two clocks: each launch against the roof of its own clock."""
    launches = []
    for clock in (1.41e9, 0.705e9):
        metrics = {
            "sm__cycles_elapsed.avg.per_second": ("cycle/second", clock),
            "gpu__time_duration.sum": ("second", 0.2),
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", 9.75e11),  # 1.95e12 FLOPs
        }
        launches.append((f"k{clock:.0f}", metrics))
    path = tmp_path / "clocks.csv"
    _write_long_csv(path, launches)
    assert cli("import", path, "--run", "c", "--gpu", "a100").code == 0
    top, _ = _top(cli, "c")
    pct = dict(zip(top["kernel"], top["roof_pct"], strict=True))
    assert pct["k1410000000"] == pytest.approx(50.0, rel=1e-12)  # 1.95e12 / 19.5e12 / 0.2 s
    assert pct["k705000000"] == pytest.approx(100.0, rel=1e-12)  # at half the clock, half the roof


def test_measured_ceilings_are_taken_as_given(cli, tmp_path: Path) -> None:
    path = tmp_path / "slow.csv"
    metrics = {
        "sm__cycles_elapsed.avg.per_second": ("cycle/second", 0.705e9),
        "gpu__time_duration.sum": ("second", 0.2),
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", 9.75e11),
    }
    _write_long_csv(path, [("k", metrics)])
    assert cli("import", path, "--run", "s", "--gpu", "a100").code == 0
    mine = tmp_path / "mine.toml"
    mine.write_text('name = "mine"\n[ceilings]\nfp32 = 19.5e12\nhbm = 1.5e12\n')
    top, _ = _top(cli, "s", "--ceilings", str(mine))
    assert top.iloc[0]["roof_pct"] == pytest.approx(50.0, rel=1e-12)


def test_h800_gets_hierarchical_roofs_from_its_own_report(cli, ncu_dir: Path) -> None:
    """No --gpu, no --ceilings, a GPU the catalog does not know: L1, L2, HBM and compute roofs from the
    report's peak metrics, device attributes and clocks, per launch."""
    path = ncu_dir / "h800_podattn_flashfwd_fullset_nvtx.ncu-rep"
    result = cli("import", path, "--run", "h800")
    assert result.code == 0, result.err
    assert "1 launch(es) have no metric values at all" in result.err and "flash_fwd_kernel" in result.err
    top, _ = _top(cli, "h800")
    assert len(top) == 1 and top.iloc[0]["roof_pct"] > 0
    from hroofline.store.runs import RunStore

    launches = RunStore(cli.store).load("h800").launches
    expected = []
    for m in reference.report_launches(path)[:4]:
        sms, l2s = m["device__attribute_multiprocessor_count"], m["device__attribute_l2s_count"]
        seconds = m["gpu__time_duration.sum"]
        expected.append(
            {
                "peak_hbm": m["dram__bytes.sum.peak_sustained"] * m["dram__cycles_elapsed.avg.per_second"],
                "peak_fp32": 2
                * m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"]
                * m["sm__cycles_elapsed.avg.per_second"],
                "peak_fp64": 2
                * m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"]
                * m["sm__cycles_elapsed.avg.per_second"],
                # L2: 32-byte sectors x slices x the L2 clock (elapsed L2 cycles per slice over the kernel's time)
                "peak_l2": 32
                * m["lts__t_sectors.avg.peak_sustained"]
                * l2s
                * m["lts__cycles_elapsed.sum"]
                / l2s
                / seconds,
                # L1: one 128-byte writeback per L1 unit per cycle, at the L1 clock
                "peak_l1": 128 * sms * m["l1tex__cycles_elapsed.sum"] / sms / seconds,
            }
        )
    for column in expected[0]:
        assert launches[column].to_numpy() == pytest.approx([e[column] for e in expected], rel=1e-12), column
    chart = cli("chart", "h800", "--out", str(cli.store.parent / "h800.json"))
    assert chart.code == 0 and "at L1, L2, HBM" in chart.err and "from the report" in chart.err
    assert launches["peak_hbm"].iloc[0] == pytest.approx(3.34e12, rel=0.01)  # H800's 3.35 TB/s HBM3
    # At the 1.98 GHz boost clock the L1 roof is H100 SXM's ~30 TiB/s (../shared/reference, [ELVIS]).
    at_boost = launches["peak_l1"] * 1.98e9 / launches["clock_hz"]
    assert at_boost.to_numpy() == pytest.approx([30 * 2**40] * 4, rel=0.02)


def test_rtx_pro_6000_hbm_roof_from_its_memory_bus(cli, ncu_dir: Path) -> None:
    """An ncu 2026 raw CSV: DRAM bytes under their new names, the GPU from its display-name column, and an
    HBM roof from the device attributes: 14.001 GHz x 2 x 512 bits / 8 = 1.792 TB/s."""
    result = cli("import", ncu_dir / "rtxpro6000_bf16_proj_gemm_ncu2026_raw.csv", "--run", "pro")
    assert result.code == 0, result.err
    from hroofline.store.runs import RunStore

    run = RunStore(cli.store).load("pro")
    assert run.meta.device_name == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition" and run.meta.cc == "12.0"
    assert run.launches["peak_hbm"].tolist() == pytest.approx([14.001e9 * 2 * 512 / 8] * 2, rel=1e-12)
    assert run.launches["bytes_hbm"].sum() == 256 + 327_936 + 182_528
    # Its roofs come from device attributes; the SM clock was not measured, and the roofs say so.
    top = cli("top", "pro")
    assert "HBM: memory clock x bus width (device attributes)" in top.out
    shown = cli("ceilings", "--run", "pro", "--store", cli.store)
    assert (
        "fp32: dense rate per SM per cycle (metrics/rates.toml) x SMs x device__attribute_clock_rate (maximum, "
        "not measured)" in shown.out
    )
    # Its cutlass bf16 GEMM runs on tensor cores, which this file did not count: said so, once.
    assert result.err.count("tensor-core work") == 1 and "cutlass_80_tensorop_s16816gemm_bf16" in result.err


@pytest.mark.parametrize(
    ("display_name", "gpu"),
    [
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA GeForce RTX 3090", "rtx3090"),
        ("NVIDIA GeForce RTX 3090 Ti", None),
        ("NVIDIA GeForce RTX 4090 D", None),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", None),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None),
        ("Tesla V100-SXM2-16GB", "v100-sxm2"),
    ],
)
def test_display_names_match_only_the_part_they_name(display_name: str, gpu: str | None) -> None:
    found = gpu_from_display_name(display_name)
    assert (found.name if found else None) == gpu


def test_a100_80gb_pcie_gets_its_own_bandwidth(cli, ncu_dir: Path) -> None:
    assert cli("import", ncu_dir / "a100_cutlass_int8_gemm_fullset_nvtx.ncu-rep", "--run", "p").code == 0
    shown = cli("ceilings", "--run", "p", "--store", str(cli.store))
    assert shown.code == 0, shown.err
    assert "from the report" in shown.out  # its own roofs first
    # Without its report's roofs, the catalog: the PCIe card's 1935 GB/s, not the SXM4's 2039 GB/s.
    top = cli("top", "p", "--ceilings", "a100-80gb-pcie")
    assert top.code == 0
    from hroofline.roofs.ceilings import run_gpu
    from hroofline.store.runs import RunStore

    gpu = run_gpu(RunStore(cli.store).load_meta("p"))
    assert gpu is not None and gpu.name == "a100-80gb-pcie" and gpu.peaks["hbm"] == 1935e9


def test_integer_tensor_work_is_never_silently_zero(cli, ncu_dir: Path) -> None:
    """CUTLASS int4/int8 GEMMs profiled without sm__ops_path_tensor_src_int*: their operations are not
    counted, and the import says so, once, naming the metric to collect."""
    result = cli("import", ncu_dir / "a100_cutlass_int8_gemm_fullset_nvtx.ncu-rep", "--run", "i")
    assert result.code == 0
    warnings = [line for line in result.err.splitlines() if "tensor-core work" in line]
    assert len(warnings) == 1 and "integer tensor-core work" in warnings[0]
    assert "sm__ops_path_tensor_src_int8.sum" in warnings[0]


def test_counted_integer_tensor_operations_are_shown_and_not_flops(cli, tmp_path: Path) -> None:
    metrics = {
        "sm__cycles_elapsed.avg.per_second": ("cycle/second", 1.41e9),
        "gpu__time_duration.sum": ("second", 1e-3),
        "sm__ops_path_tensor_src_int8.sum": ("", 4.0e11),
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum": ("", 0.0),
    }
    path = tmp_path / "imma.csv"
    _write_long_csv(path, [("cutlass_80_tensorop_i16832gemm_s8_256x128_64x3_tn_align16", metrics)])
    result = cli("import", path, "--run", "imma", "--gpu", "a100")
    assert result.code == 0 and "tensor-core work" not in result.err
    summary = json.loads(cli("summary", "imma", "--format", "json").out)["total"]
    assert summary["ops_tensor_int8"] == 4.0e11 and summary["ops_tensor_int4"] is None and summary["flops"] == 0
    top, _ = _top(cli, "imma", "--ceilings", str(_int8_ceilings(tmp_path)))
    assert top.iloc[0]["bound"] == "INT8 tensor" and top.iloc[0]["roof_pct"] == pytest.approx(64.1025641, rel=1e-6)


def _int8_ceilings(tmp_path: Path) -> Path:
    path = tmp_path / "int8.toml"
    path.write_text('name = "A100 int8"\n[ceilings]\ntensor_int8 = 624e12\nfp32 = 19.5e12\nhbm = 1555e9\n')
    return path


def test_tf32_kernels_without_tensor_metrics_get_one_warning(cli, ncu_dir: Path) -> None:
    result = cli("import", ncu_dir / "a100pcie_torch_bmm_softmax_fp16_sections_console.txt", "--run", "s")
    assert result.code == 0
    warnings = [line for line in result.err.splitlines() if "tensor-core work" in line]
    assert len(warnings) == 1 and "2 launch(es)" in warnings[0] and "ampere_fp16_s16816gemm" in warnings[0]
    clean = cli("import", ncu_dir / "rtx5090_dsocr_cutlass_bf16_gemm_metrics.csv", "--run", "b")
    assert clean.code == 0 and "tensor-core work" not in clean.err  # its BF16 path was collected


def test_schema_1_runs_keep_their_tensor_flops(tmp_path: Path) -> None:
    """A run written before tensor FLOPs had a precision: its tensor FLOPs are the FP16 ones it was judged by."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hroofline.store.runs import RunStore

    run_dir = tmp_path / "runs" / "old"
    run_dir.mkdir(parents=True)
    frame = pd.DataFrame(
        {
            "source": [0],
            "launch_id": [0],
            "kernel": ["k"],
            "phase": ["forward"],
            "launches": [1],
            "time_s": [1e-3],
            "flops_tensor": [5e10],
        }
    )
    pq.write_table(pa.Table.from_pandas(frame), run_dir / "launches-1.parquet")
    meta = {
        "name": "old",
        "schema_version": 1,
        "launches_file": "launches-1.parquet",
        "sources": [],
        "gpu": "v100-sxm2",
    }
    (run_dir / "meta.json").write_text(json.dumps(meta))
    run = RunStore(tmp_path).load("old")
    assert run.launches["flops_tensor_fp16"].tolist() == [5e10] and run.launches["flops_tensor"].tolist() == [5e10]
    assert run.meta.schema_version == SCHEMA_VERSION


def test_pipes_are_data(tmp_path: Path) -> None:
    from hroofline.roofs.metricset import load_metric_set

    metric_set = load_metric_set()
    volta = metric_set.pipes_of("7.0")
    assert ("fp32",) in volta and any({"fp16", "fp64", "tensor_fp16"} <= set(g) for g in volta)
    hopper = metric_set.pipes_of("9.0")
    assert any({"fp64", "tensor_fp8"} <= set(g) and "fp16" not in g for g in hopper)
    assert all(len(g) == 1 or g[0].startswith("tensor") for g in metric_set.pipes_of("8.6")[:3])


def test_blackwell_collects_its_fp8_and_fp4_paths_with_their_peaks() -> None:
    from hroofline.roofs.metricset import load_metric_set

    metrics = load_metric_set().metrics_to_collect("blackwell")
    for path in ("src_fp4_fp6_fp8_dst_fp32", "src_fp4_dst_fp32", "src_int8"):
        assert f"sm__ops_path_tensor_{path}.sum" in metrics
        assert f"sm__ops_path_tensor_{path}.sum.peak_sustained" in metrics
    assert "dram__bytes.sum.peak_sustained" in metrics and "lts__cycles_elapsed.avg.per_second" in metrics


def test_launches_without_a_time_stay_out_of_time_at_roof_and_flop_rate(cli, tmp_path: Path) -> None:
    """Two launches of one kernel, the second with n/a for its time: the kernel's time at roof, % of roof and
    FLOP/s come from the timed launch alone, and top says so."""
    timed = {
        "sm__cycles_elapsed.avg.per_second": ("cycle/second", 1.41e9),
        "gpu__time_duration.sum": ("second", 0.1),
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", 4.875e11),  # 0.975 TFLOP: 50% of FP32
    }
    path = tmp_path / "partial.csv"
    _write_long_csv(path, [("gemm", timed), ("gemm", {**timed, "gpu__time_duration.sum": ("second", float("nan"))})])
    path.write_text(path.read_text().replace('"nan"', '"n/a"'))
    assert cli("import", path, "--run", "p", "--gpu", "a100").code == 0
    top, err = _top(cli, "p")
    row = top.iloc[0]
    assert row["count"] == 2 and row["time_s"] == pytest.approx(0.1)
    assert row["roof_pct"] == pytest.approx(50.0, rel=1e-9)
    assert row["flop_rate"] == pytest.approx(9.75e11 / 0.1, rel=1e-12)  # the timed launch's FLOPs only
    assert "1 launch(es) have no kernel time" in err and "beats" not in err


def test_a_report_of_a_run_without_kernel_times(cli, ncu_dir: Path, tmp_path: Path) -> None:
    assert cli("import", ncu_dir / "a100_vgg11_train_ncu_console.txt", "--run", "vgg", "--gpu", "a100").code == 0
    result = cli("report", "vgg", "--out", str(tmp_path / "report"))
    assert result.code == 0, result.err
    page = (tmp_path / "report" / "index.html").read_text()
    assert "the table ranks them by FLOPs" in page


def test_a_precision_left_uncollected_is_said(cli, tmp_path: Path) -> None:
    """FP16 paths collected, the TF32 one not: a TF32 GEMM's tensor FLOPs are missing, and said so."""
    metrics = {
        "sm__cycles_elapsed.avg.per_second": ("cycle/second", 1.41e9),
        "gpu__time_duration.sum": ("second", 1e-3),
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum": ("", 0.0),
    }
    path = tmp_path / "no_tf32.csv"
    _write_long_csv(path, [("sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_stage3_kernel", metrics)])
    result = cli("import", path, "--run", "t", "--gpu", "a100")
    assert result.code == 0
    warning = next(line for line in result.err.splitlines() if "tensor-core work" in line)
    assert "floating-point (TF32)" in warning and "sm__ops_path_tensor_src_tf32_dst_fp32.sum" in warning
    assert "fp16_dst_fp32" not in warning


def test_sparse_tensor_work_is_its_own_quantity_against_the_sparse_roof(cli, tmp_path: Path) -> None:
    """A100 2:4-sparse FP16 work (ncu's _sparsity_on path) is counted apart from the dense work and judged
    against twice the dense roof: from the report's sparse peak where it has one, else the datasheet's x 2."""
    clock = 1.41e9
    dense, sparse = 1.0e12, 3.0e12
    launch = {
        "sm__cycles_elapsed.avg.per_second": ("cycle/second", clock),
        "gpu__time_duration.sum": ("second", 0.01),
        "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_off.sum": ("", dense),
        "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_on.sum": ("", sparse),
    }
    with_peak = {**launch, "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_on.sum.peak_sustained": ("", 4096 * 108)}
    for name, metrics in (("peak", with_peak), ("datasheet", launch)):
        path = tmp_path / f"{name}.csv"
        _write_long_csv(path, [("sm80_sparse_gemm", metrics)])
        assert cli("import", path, "--run", name, "--gpu", "a100").code == 0
        kernels = pd.read_csv(io.StringIO(cli("kernels", name, "--format", "csv").out))
        assert kernels["flops_tensor_fp16"].iloc[0] == dense
        assert kernels["flops_tensor_fp16_sparse"].iloc[0] == sparse
        top, err = _top(cli, name)
        # FP16 tensor work, dense and sparse, share the tensor pipe: their times at roof add up
        expected = dense / (2048 * 108 * clock) + sparse / (4096 * 108 * clock)
        assert top["time_at_roof_s"].iloc[0] == pytest.approx(expected, rel=2e-3), name
        assert top["bound"].iloc[0] == "FP16 tensor 2:4 sparse" and "beats" not in err
