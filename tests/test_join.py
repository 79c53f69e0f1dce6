"""Passes over the same launches are joined launch by launch, never appended: NERSC's time/DRAM pass and
instruction pass of GENE's dgdxy kernels on a V100 (real files), as files, as a folder, in any format."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests import reference
from tests.conftest import tree_digest

TIME_DRAM = "v100_gene_dgdxy_time_dram_nvtx.ncu-rep"
DPFLOPS = "v100_gene_dgdxy_dpflops_nvtx.ncu-rep"


def _expected(ncu_dir: Path) -> tuple[float, float, float]:
    """Time from the time pass (cycles / clock), FP64 FLOPs from the instruction pass, DRAM bytes."""
    time_pass = reference.report_launches(ncu_dir / TIME_DRAM)
    flop_pass = reference.report_launches(ncu_dir / DPFLOPS)
    seconds = sum(m["sm__cycles_elapsed.avg"] / m["sm__cycles_elapsed.avg.per_second"] for m in time_pass)
    base = "sm__sass_thread_inst_executed_op_d"
    flops = sum(
        m[f"{base}add_pred_on.sum"] + m[f"{base}mul_pred_on.sum"] + 2 * m[f"{base}fma_pred_on.sum"] for m in flop_pass
    )
    nbytes = sum(m["dram__bytes.sum"] for m in time_pass)
    return seconds, flops, nbytes


def _check_joined(cli, run: str, ncu_dir: Path, rel: float = 1e-12) -> dict[str, float]:
    """``rel``: the CSV exports print the clock to fewer digits than the reports hold."""
    summary = json.loads(cli("summary", run, "--format", "json").out)["total"]
    seconds, flops, nbytes = _expected(ncu_dir)
    assert summary["kernels"] == 8
    assert summary["time_s"] == pytest.approx(seconds, rel=rel)
    assert 7.85e-3 < summary["time_s"] < 7.95e-3  # the time pass's 7.9 ms, not the instruction pass's 1.16 s
    assert summary["flops"] == pytest.approx(flops, rel=1e-12) and flops > 0
    assert summary["bytes_hbm"] == pytest.approx(nbytes, rel=1e-12)
    return summary


def test_two_report_passes_are_joined(cli, ncu_dir: Path) -> None:
    result = cli("import", ncu_dir / TIME_DRAM, ncu_dir / DPFLOPS, "--run", "gene")
    assert result.code == 0, result.err
    _check_joined(cli, "gene", ncu_dir)
    assert f"kernel time from {TIME_DRAM}" in result.err
    # The instruction pass timed the same launches ~146x longer: said, and not used.
    warning = next(line for line in result.err.splitlines() if "timed these launches" in line)
    assert DPFLOPS in warning and "146x" in warning and "inflates elapsed cycles" in warning
    kernels = pd.read_csv(io.StringIO(cli("kernels", "gene", "--format", "csv").out))
    assert len(kernels) == 8 and kernels["flops_fp64"].notna().all() and kernels["bytes_hbm"].notna().all()


def test_the_order_of_the_passes_does_not_matter(cli, ncu_dir: Path) -> None:
    assert cli("import", ncu_dir / DPFLOPS, ncu_dir / TIME_DRAM, "--run", "gene").code == 0
    _check_joined(cli, "gene", ncu_dir)


def test_a_folder_of_report_passes_is_joined(cli, ncu_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "passes"
    folder.mkdir()
    for name in (TIME_DRAM, DPFLOPS):
        shutil.copyfile(ncu_dir / name, folder / name)
    result = cli("import", folder, "--run", "gene")
    assert result.code == 0, result.err
    _check_joined(cli, "gene", ncu_dir)


def test_csv_passes_are_joined_and_by_name_too(cli, ncu_dir: Path) -> None:
    files = [ncu_dir / "v100_gene_dgdxy_time_dram.csv", ncu_dir / "v100_gene_dgdxy_dpflops.csv"]
    assert cli("import", *files, "--run", "gene", "--gpu", "v100").code == 0
    _check_joined(cli, "gene", ncu_dir, rel=1e-6)
    by_name = cli("import", *files, "--run", "byname", "--gpu", "v100", "--merge", "name")
    assert by_name.code == 0, by_name.err
    kernels = pd.read_csv(io.StringIO(cli("kernels", "byname", "--format", "csv").out))
    assert int(kernels["count"].sum()) == 8 and len(kernels) == kernels["kernel"].nunique()
    _, flops, nbytes = _expected(ncu_dir)
    assert kernels["flops_fp64"].sum() == pytest.approx(flops, rel=1e-12)
    assert kernels["bytes_hbm"].sum() == pytest.approx(nbytes, rel=1e-12)


def test_passes_that_disagree_are_refused_showing_where(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """The instruction pass with one launch renamed deep inside its long name: refused, the store unchanged,
    and the message shows the part of the names that differs."""
    source = ncu_dir / "v100_gene_dgdxy_dpflops.csv"
    lines = source.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    kernel = header.index("Kernel Name")
    fourth = [r for r in rows[1:] if r and r[0] == "3"]
    original = fourth[0][kernel]
    assert len(original) > 80
    changed = original[:70] + "XYZ" + original[73:]
    for row in fourth:
        row[kernel] = changed
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    bad = tmp_path / "dpflops_renamed.csv"
    bad.write_text("".join(lines[:start]) + buffer.getvalue())
    assert cli("import", ncu_dir / "v100_gene_dgdxy_time_dram.csv", "--run", "keep").code == 0
    before = tree_digest(cli.store)
    result = cli("import", ncu_dir / "v100_gene_dgdxy_time_dram.csv", bad, "--run", "gene")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "disagree" in result.err and "launch 4" in result.err and "XYZ" in result.err
    assert "--merge name" in result.err
    assert tree_digest(cli.store) == before


def test_really_different_launches_are_appended(cli, ncu_dir: Path) -> None:
    files = [
        ncu_dir / "a100_sam_decoder_fp32_nersc_metrics_profpreamble.csv",
        ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv",
    ]
    result = cli("import", *files, "--run", "two", "--gpu", "a100")
    assert result.code == 0, result.err
    summary = json.loads(cli("summary", "two", "--format", "json").out)
    assert summary["total"]["kernels"] == 72 + 26
    from hroofline.store.runs import RunStore

    assert len(RunStore(cli.store).load_meta("two").sources) == 2


def test_group_passes_take_time_from_the_time_pass(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """`profile --passes groups` writes one log per metric group; the folder's time comes from time.csv, the
    pass with no other metrics, not from the first file (dram.csv)."""
    folder = tmp_path / "groups"
    folder.mkdir()
    time_dram = (ncu_dir / "v100_gene_dgdxy_time_dram.csv").read_text()
    shutil.copyfile(ncu_dir / "v100_gene_dgdxy_dpflops.csv", folder / "flops.csv")
    (folder / "dram.csv").write_text(time_dram)
    # the time pass: the same launches with their time metrics only
    lines = time_dram.splitlines(keepends=True)
    (folder / "time.csv").write_text("".join(line for line in lines if "dram__bytes" not in line))
    result = cli("import", folder, "--run", "groups", "--gpu", "v100")
    assert result.code == 0, result.err
    assert "kernel time from time.csv" in result.err
    _check_joined(cli, "groups", ncu_dir, rel=1e-6)


def test_a_second_pass_imported_later_is_refused_not_appended(cli, ncu_dir: Path) -> None:
    assert cli("import", ncu_dir / TIME_DRAM, "--run", "gene").code == 0
    before = tree_digest(cli.store)
    result = cli("import", ncu_dir / DPFLOPS, "--run", "gene")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "another pass over them" in result.err and "in one command" in result.err
    assert tree_digest(cli.store) == before
    # The same measurement again (the CSV export of the same report) would count every launch twice.
    again = cli("import", ncu_dir / "v100_gene_dgdxy_time_dram.csv", "--run", "gene")
    assert again.code == 1 and "the same measurement twice" in again.err
    together = cli("import", ncu_dir / TIME_DRAM, ncu_dir / "v100_gene_dgdxy_time_dram.csv", "--run", "both")
    assert together.code == 1 and "the same measurement twice" in together.err
    assert tree_digest(cli.store) == before


def test_a_repeated_measurement_appends(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """The same kernels measured again (other values): more launches of the run."""
    source = ncu_dir / "v100_gene_dgdxy_time_dram.csv"
    repeat = tmp_path / "repeat.csv"
    repeat.write_text(
        source.read_text().replace('"sm__cycles_elapsed.avg","cycle","', '"sm__cycles_elapsed.avg","cycle","1')
    )
    assert cli("import", source, "--run", "r").code == 0
    again = cli("import", repeat, "--run", "r")
    assert again.code == 0, again.err
    assert json.loads(cli("summary", "r", "--format", "json").out)["total"]["kernels"] == 16


def test_full_set_reports_joined_by_name_keep_their_roofs_and_rates(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """--merge name over two copies of a --set full report (FLOP counts as per-cycle rates only): the FLOPs
    are the per-name sums of one pass, converted with its own cycles; device attributes and per-cycle peaks
    are not summed, so the roofs are those of one launch, not grown with the launch count."""
    source = ncu_dir / "a100_cutlass_int8_gemm_fullset_nvtx.ncu-rep"
    copies = [tmp_path / "c1.ncu-rep", tmp_path / "c2.ncu-rep"]
    for copy in copies:
        shutil.copyfile(source, copy)
    assert cli("import", source, "--run", "one").code == 0
    result = cli("import", *copies, "--run", "byname", "--merge", "name")
    assert result.code == 0, result.err
    single = pd.read_csv(io.StringIO(cli("kernels", "one", "--group-by", "name", "--format", "csv").out))
    joined = pd.read_csv(io.StringIO(cli("kernels", "byname", "--group-by", "name", "--format", "csv").out))
    by_name = single.merge(joined, on="kernel", suffixes=("", "_joined")).set_index("kernel")
    assert (by_name["count"] == by_name["count_joined"]).all()
    for column in ("flops_fp32", "bytes_hbm", "bytes_l1", "time_s"):
        assert by_name[f"{column}_joined"].to_numpy() == pytest.approx(by_name[column].to_numpy(), rel=1e-9), column
    from hroofline.store.runs import RunStore

    one = RunStore(cli.store).load("one").launches
    merged = RunStore(cli.store).load("byname").launches.set_index("kernel")
    mean_l1 = one.groupby("kernel")["peak_l1"].mean()
    # The name's L1 clock is its summed elapsed cycles over its summed time, a time-weighted mean of the
    # launches' clocks: within 0.1% of their plain mean here, where summing attributes would give 4x.
    assert merged.loc[mean_l1.index, "peak_l1"].to_numpy() == pytest.approx(mean_l1.to_numpy(), rel=1e-3)
    assert "inflates" not in result.err  # its time is gpu__time_duration, measured in a pass of its own


def test_a_pass_with_rates_it_cannot_convert_is_said_and_left_out(cli, ncu_dir: Path, tmp_path: Path) -> None:
    """A one-metric pass holding FP64 FLOPs only as a per-cycle rate, with no cycles of its own: another
    pass's cycles would convert it wrongly, so it is left out, with a warning."""
    time_pass = ncu_dir / "v100_gene_dgdxy_time_dram.csv"
    lines = time_pass.read_text().splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = [line for line in lines[header + 1 :] if '"dram__bytes.sum"' in line]
    rate_rows = [
        line.replace(
            '"dram__bytes.sum","byte"',
            '"sm__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed","inst/cycle"',
        )
        for line in rows
    ]
    rate_pass = tmp_path / "dfma_rate.csv"
    rate_pass.write_text(lines[header] + "".join(rate_rows))
    result = cli("import", time_pass, rate_pass, "--run", "r", "--gpu", "v100")
    assert result.code == 0, result.err
    assert "only as rates" in result.err and "dfma_pred_on.sum.per_cycle_elapsed" in result.err
    summary = json.loads(cli("summary", "r", "--format", "json").out)["total"]
    assert summary["kernels"] == 8 and summary["flops"] is None
