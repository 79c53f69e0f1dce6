"""Every real ncu output in ../shared/fixtures/ncu imports, with the expected launches, phases,
quantities and totals. Totals are checked against the independent readers in reference.py."""

from __future__ import annotations

import gzip
import io
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from tests import reference

Launch = dict[str, float]
QUANTITIES = (
    "time_s",
    "flops_fp64",
    "flops_fp32",
    "flops_fp16",
    "flops_tensor",
    "flops_tensor_bf16",
    "ops_tensor_int8",
    "bytes_l1",
    "bytes_l2",
    "bytes_hbm",
)


def fp(prefix: str, p: str) -> Callable[[Launch], float]:
    def flops(m: Launch) -> float:
        base = f"{prefix}__sass_thread_inst_executed_op_{p}"
        return m[f"{base}add_pred_on.sum"] + m[f"{base}mul_pred_on.sum"] + 2 * m[f"{base}fma_pred_on.sum"]

    return flops


def fp_rate(p: str, cycles: Callable[[Launch], float]) -> Callable[[Launch], float]:
    def flops(m: Launch) -> float:
        base = f"smsp__sass_thread_inst_executed_op_{p}"
        per_cycle = [m[f"{base}{op}_pred_on.sum.per_cycle_elapsed"] for op in ("add", "mul", "fma")]
        return (per_cycle[0] + per_cycle[1] + 2 * per_cycle[2]) * cycles(m)

    return flops


def duration(m: Launch) -> float:
    return m["gpu__time_duration.sum"]


def cycles_time(m: Launch) -> float:
    return m["sm__cycles_elapsed.avg"] / m["sm__cycles_elapsed.avg.per_second"]


def clock_cycles(m: Launch) -> float:
    """Elapsed cycles where a report has none: SM clock x kernel time."""
    return m["sm__cycles_elapsed.avg.per_second"] * m["gpu__time_duration.sum"]


def hbm_rw(m: Launch) -> float:
    return m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]


def metric(name: str, scale: float = 1.0) -> Callable[[Launch], float]:
    return lambda m: scale * m[name]


def l2_sectors(m: Launch) -> float:
    return 32 * m["lts__t_sectors.sum"]


@dataclass
class Expect:
    launches: int
    reader: str  # "rep", "csv", "wide", "console" or "sections"
    phases: dict[str, int]
    totals: dict[str, Callable[[Launch], float]] = field(default_factory=dict)
    device: str | None = None  # the device name the file gives
    nvtx_example: str | None = None
    failed: int = 0  # launches with no values at all, left out


NERSC_CSV = {
    "time_s": cycles_time,
    "flops_fp64": fp("sm", "d"),
    "flops_fp32": fp("sm", "f"),
    "flops_fp16": fp("sm", "h"),
    "bytes_l1": metric("l1tex__t_bytes.sum"),
    "bytes_l2": metric("lts__t_bytes.sum"),
    "bytes_hbm": metric("dram__bytes.sum"),
}

EXPECTED: dict[str, Expect] = {
    "v100_gene_dgdxy_time_dram_nvtx.ncu-rep": Expect(
        8,
        "rep",
        {"other": 8},
        {"time_s": cycles_time, "bytes_hbm": metric("dram__bytes.sum")},
        device="Tesla V100-SXM2-16GB",
        nvtx_example="GENE/gsub/timeloop/t_loop/eRK_standard/eRK_stage_1/CalFRhs0/dgdxy",
    ),
    "v100_gene_dgdxy_dpflops_nvtx.ncu-rep": Expect(
        8, "rep", {"other": 8}, {"time_s": cycles_time, "flops_fp64": fp("sm", "d")}, device="Tesla V100-SXM2-16GB"
    ),
    "v100_gene_dgdxy_time_dram.csv": Expect(
        8, "csv", {"other": 8}, {"time_s": cycles_time, "bytes_hbm": metric("dram__bytes.sum")}
    ),
    "v100_gene_dgdxy_dpflops.csv": Expect(8, "csv", {"other": 8}, {"time_s": cycles_time, "flops_fp64": fp("sm", "d")}),
    "rtx3060ti_llmc_adamw_fullset.ncu-rep": Expect(
        4,
        "rep",
        {"other": 4},
        {
            "time_s": duration,
            "flops_fp32": fp_rate("f", metric("smsp__cycles_elapsed.avg")),
            "flops_fp64": fp_rate("d", metric("smsp__cycles_elapsed.avg")),
            "bytes_l1": metric("l1tex__lsu_writeback_active_mem_lg.sum", 128),
            "bytes_l2": l2_sectors,
            "bytes_hbm": hbm_rw,
        },
        device="NVIDIA GeForce RTX 3060 Ti",
    ),
    "titanv_cnn_conv_fp32_fullset.ncu-rep": Expect(
        10,
        "rep",
        {"other": 10},
        {
            "time_s": duration,
            # No elapsed-cycle count in this report: cycles = SM clock x kernel time.
            "flops_fp32": fp_rate("f", clock_cycles),
            "flops_fp64": fp_rate("d", clock_cycles),
            "bytes_hbm": hbm_rw,
            # Volta: ncu 2020's L1 definition (no _mem_lg split), and L2 sectors x 32
            "bytes_l1": metric("l1tex__lsu_writeback_active.sum", 128),
            "bytes_l2": l2_sectors,
        },
        device="TITAN V",
    ),
    "rtx3070_manual_nvtx_daxpy.ncu-rep": Expect(
        3, "rep", {"other": 3}, {"time_s": duration}, device="NVIDIA GeForce RTX 3070", nvtx_example="run_test/daxpy"
    ),
    "rtx4060laptop_gpp_hier_dp_roofline.ncu-rep": Expect(
        2,
        "rep",
        {"other": 2},
        {
            "time_s": duration,
            "bytes_hbm": lambda m: m["dram__bytes.sum.per_second"] * m["gpu__time_duration.sum"],
            "bytes_l2": lambda m: m["derived__lts__lts2xbar_bytes.sum.per_second"] * m["gpu__time_duration.sum"],
            "bytes_l1": lambda m: (
                m["derived__l1tex__lsu_writeback_bytes_mem_lg.sum.per_second"] * m["gpu__time_duration.sum"]
            ),
            "flops_fp64": fp_rate("d", clock_cycles),
        },
        device="NVIDIA GeForce RTX 4060 Laptop GPU",
    ),
    "a100_cutlass_int8_gemm_fullset_nvtx.ncu-rep": Expect(
        3,
        "rep",
        {"other": 3},
        {
            "time_s": duration,
            "bytes_hbm": hbm_rw,
            "flops_fp32": fp_rate("f", metric("smsp__cycles_elapsed.avg")),
            "flops_fp64": fp_rate("d", metric("smsp__cycles_elapsed.avg")),
            "bytes_l1": metric("l1tex__lsu_writeback_active_mem_lg.sum", 128),
            "bytes_l2": l2_sectors,
        },
        device="NVIDIA A100 80GB PCIe",
        nvtx_example="Fused-GEMM",
    ),
    "h800_podattn_flashfwd_fullset_nvtx.ncu-rep": Expect(
        4,
        "rep",
        {"other": 4},
        {
            "time_s": duration,
            "flops_fp32": fp_rate("f", clock_cycles),
            "flops_fp64": fp_rate("d", clock_cycles),
            "bytes_hbm": hbm_rw,
            "bytes_l1": metric("l1tex__lsu_writeback_active_mem_lgds.sum", 128),  # Hopper's definition
            "bytes_l2": l2_sectors,
        },
        device="NVIDIA H800",
        failed=1,
    ),
    "a40_ece408_lenet_conv_basicset.ncu-rep": Expect(6, "rep", {"other": 6}, {"time_s": duration}, device="NVIDIA A40"),
    "rtx3070_gcn_torch_nvtx_startend_csv.txt": Expect(
        14, "csv", {"other": 14}, {"time_s": duration}, nvtx_example="convLayer"
    ),
    "rtxpro6000_bf16_proj_gemm_ncu2026_raw.csv": Expect(
        2,
        "wide",
        {"other": 2},
        {
            "time_s": duration,
            "bytes_hbm": lambda m: m["dram__bytes_op_read.sum"] + m["dram__bytes_op_write.sum"],
            "bytes_l2": metric("lts__t_bytes.sum"),
        },
        device="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    ),
    "a100_dropout_fp64_nersc_metrics.csv": Expect(162, "csv", {"other": 162}, {**NERSC_CSV, "time_s": duration}),
    "a100pcie_torch_bmm_softmax_fp16_sections_console.txt": Expect(4, "sections", {"other": 4}, {"time_s": duration}),
    "t4_resnet18_trainstep_nvtx_details.csv": Expect(
        112,
        "csv",
        {"forward": 103, "backward": 1, "optimizer": 6, "other": 2},
        {"time_s": duration},
        nvtx_example="train_step/forward",
    ),
    "a100_bert_attention_fp32_nersc_metrics.csv": Expect(26, "csv", {"other": 26}, NERSC_CSV),
    "a100_sam_decoder_fp32_nersc_metrics_profpreamble.csv": Expect(72, "csv", {"other": 72}, NERSC_CSV),
    "rtx5090_dsocr_cutlass_bf16_gemm_metrics.csv": Expect(
        1,
        "csv",
        {"other": 1},
        {
            "time_s": duration,
            "flops_tensor": metric("sm__ops_path_tensor_src_bf16_dst_fp32.sum"),
            "flops_tensor_bf16": metric("sm__ops_path_tensor_src_bf16_dst_fp32.sum"),
            "bytes_hbm": hbm_rw,
        },
    ),
    "a100_vgg11_train_ncu_console.txt": Expect(
        170,
        "console",
        {"other": 170},
        {
            "flops_fp64": fp("smsp", "d"),
            "flops_fp32": fp("smsp", "f"),
            "flops_fp16": fp("smsp", "h"),
            "bytes_hbm": metric("dram__bytes.sum"),
        },
    ),
}
REFUSED = {
    "rtx5090_dsocr_cutlass_bf16_gemm_roofline_section.csv": "section export",
}


def test_every_fixture_is_covered(ncu_dir: Path) -> None:
    files = {p.name for p in ncu_dir.iterdir() if p.suffix != ".md"}
    assert files == set(EXPECTED) | set(REFUSED)


def _reference(path: Path, reader: str) -> list[Launch]:
    if reader == "rep":
        return reference.report_launches(path)
    if reader == "console":
        return reference.console_launches(path)
    if reader == "sections":
        return reference.section_console_launches(path)
    if reader == "wide":
        return reference.wide_csv_launches(path)
    return list(reference.long_csv_launches(path).values())


def _import(cli, path: Path, run: str, *extra: str) -> pd.DataFrame:
    result = cli("import", path, "--run", run, *extra)
    assert result.code == 0, result.err
    table = cli("kernels", run, "--format", "csv")
    return pd.read_csv(io.StringIO(table.out))


# each fixture's kernel table as test_fixture_imports imported it: the plain file that its gzip copy is compared
# with, not imported a second time (a test run alone imports it itself)
PLAIN_TABLES: dict[str, pd.DataFrame] = {}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_imports(cli, ncu_dir: Path, name: str) -> None:
    expect = EXPECTED[name]
    path = ncu_dir / name
    table = _import(cli, path, "r")
    PLAIN_TABLES[name] = table.copy()
    assert int(table["count"].sum()) == expect.launches
    assert table["phase"].value_counts().to_dict() == expect.phases

    present = {q for q in QUANTITIES if table[q].notna().any()}
    assert present == set(expect.totals), f"measured quantities {sorted(present)}"

    launches = _reference(path, expect.reader)
    assert len(launches) == expect.launches + expect.failed
    # A failed replay leaves a launch without values: left out of the run and of its totals.
    launches = [m for m in launches if not math.isnan(m.get("gpu__time_duration.sum", 0.0))]
    assert len(launches) == expect.launches
    for quantity, formula in expect.totals.items():
        assert table[quantity].sum() == pytest.approx(sum(formula(m) for m in launches), rel=1e-9), quantity

    summary = json.loads(cli("summary", "r", "--format", "json").out)
    assert summary["total"]["kernels"] == expect.launches
    from hroofline.store.runs import RunStore

    assert RunStore(cli.store).load_meta("r").device_name == expect.device


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e.nvtx_example))
def test_nvtx_stacks(cli, ncu_dir: Path, name: str) -> None:
    from hroofline.store.runs import RunStore

    _import(cli, ncu_dir / name, "r")
    stacks = set(RunStore(cli.store).load("r").launches["nvtx"].dropna())
    assert EXPECTED[name].nvtx_example in stacks


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gzip_copy_imports_the_same(cli, ncu_dir: Path, tmp_path: Path, name: str) -> None:
    plain = PLAIN_TABLES[name].copy() if name in PLAIN_TABLES else _import(cli, ncu_dir / name, "plain")
    packed = tmp_path / (name + ".gz")
    with (ncu_dir / name).open("rb") as source, gzip.open(packed, "wb") as target:
        shutil.copyfileobj(source, target)
    compressed = _import(cli, packed, "packed")
    pd.testing.assert_frame_equal(plain.drop(columns=["source"]), compressed.drop(columns=["source"]))


def test_section_export_is_refused(cli, ncu_dir: Path) -> None:
    result = cli("import", ncu_dir / "rtx5090_dsocr_cutlass_bf16_gemm_roofline_section.csv", "--run", "r")
    assert result.code == 1
    assert result.err.count("\n") == 1 and "section export" in result.err
    assert not cli.store.exists() or not (cli.store / "runs" / "run=r").exists()


def test_same_run_in_csv_and_report_agrees(cli, ncu_dir: Path) -> None:
    """The GENE time/DRAM run exported both ways gives the same launches and totals."""
    csv_table = _import(cli, ncu_dir / "v100_gene_dgdxy_time_dram.csv", "csv")
    rep_table = _import(cli, ncu_dir / "v100_gene_dgdxy_time_dram_nvtx.ncu-rep", "rep")
    assert list(csv_table["kernel"]) == list(rep_table["kernel"])
    assert csv_table["bytes_hbm"].sum() == rep_table["bytes_hbm"].sum()
    assert csv_table["time_s"].sum() == pytest.approx(rep_table["time_s"].sum(), rel=1e-6)


def test_tensor_flops_need_the_architecture(cli, ncu_dir: Path) -> None:
    """sm__inst_executed_pipe_tensor.sum x 512 is Volta's factor: unknown GPU -> no tensor FLOPs and a note;
    an A100 -> still none (the counter also counts FP16 FMAs there)."""
    path = ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv"
    result = cli("import", path, "--run", "unknown")
    assert "--gpu" in result.err
    assert pd.read_csv(io.StringIO(cli("kernels", "unknown", "--format", "csv").out))["flops_tensor"].isna().all()
    result = cli("import", path, "--run", "a100", "--gpu", "a100")
    assert result.code == 0 and "Volta" in result.err
