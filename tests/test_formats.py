"""CSV layouts and the traps of real ncu output, built from real rows of the shared fixtures."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from hroofline.importers.units import unit_scale
from hroofline.model.phases import canonical_phase, phase_from_ranges

QUANTITIES = ["time_s", "flops_fp64", "flops_fp32", "flops_fp16", "bytes_l1", "bytes_l2", "bytes_hbm"]


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    text = path.read_text()
    start = text.index('"ID","Process ID"')
    rows = list(csv.reader(io.StringIO(text[start:])))
    return rows[0], rows[1:]


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return path


def _totals(cli, source: Path, run: str) -> pd.Series:
    result = cli("import", source, "--run", run)
    assert result.code == 0, result.err
    table = pd.read_csv(io.StringIO(cli("kernels", run, "--format", "csv").out))
    return table[QUANTITIES].sum(min_count=1)


def _wide_from_long(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    """What `ncu --page raw --csv` prints: identity columns, then one column per metric, and a units row."""
    col = {name: i for i, name in enumerate(header)}
    identity = [
        h
        for h in header
        if h
        not in {
            "Section Name",
            "Metric Name",
            "Metric Unit",
            "Metric Value",
            "Rule Name",
            "Rule Type",
            "Rule Description",
            "Kernel Time",
        }
    ]
    launches: dict[str, dict[str, str]] = {}
    units: dict[str, str] = {}
    metrics: list[str] = []
    for row in rows:
        if len(row) <= col["Metric Value"] or not row[col["Metric Name"]]:
            continue
        name = row[col["Metric Name"]]
        launch = launches.setdefault(row[col["ID"]], {h: row[col[h]] for h in identity})
        if name not in launch:
            launch[name] = row[col["Metric Value"]]
        if name not in units:
            units[name] = row[col["Metric Unit"]]
            metrics.append(name)
    table = [identity + metrics, [""] * len(identity) + [units[m] for m in metrics]]
    table += [[launch.get(h, "") for h in identity + metrics] for launch in launches.values()]
    return table


def test_wide_format_matches_long(cli, ncu_dir: Path, tmp_path: Path) -> None:
    source = ncu_dir / "a100_sam_decoder_fp32_nersc_metrics_profpreamble.csv"
    header, rows = _rows(source)
    wide = _write(tmp_path / "wide.csv", _wide_from_long(header, rows))
    pd.testing.assert_series_equal(_totals(cli, source, "long"), _totals(cli, wide, "wide"))


def test_wide_format_keeps_nvtx_phases(cli, ncu_dir: Path, tmp_path: Path) -> None:
    header, rows = _rows(ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv")
    wide = _write(tmp_path / "wide.csv", _wide_from_long(header, rows))
    assert cli("import", wide, "--run", "w").code == 0
    summary = json.loads(cli("summary", "w", "--format", "json").out)
    assert {p: v["kernels"] for p, v in summary["phases"].items()} == {
        "forward": 103,
        "backward": 1,
        "optimizer": 6,
        "other": 2,
    }


def test_quoted_newlines_in_rule_descriptions(cli, ncu_dir: Path, tmp_path: Path) -> None:
    source = ncu_dir / "rtx5090_dsocr_cutlass_bf16_gemm_metrics.csv"
    header, rows = _rows(source)
    rule = header.index("Rule Description")
    for row in rows:
        if len(row) > rule and row[rule]:
            row[rule] = row[rule][:40] + "\nsecond line, with a comma\n" + row[rule][40:]
    edited = _write(tmp_path / "newlines.csv", [header, *rows])
    assert edited.read_text().count("\n") > len(rows) + 1
    pd.testing.assert_series_equal(_totals(cli, source, "a"), _totals(cli, edited, "b"))


def test_european_number_format(cli, ncu_dir: Path, tmp_path: Path) -> None:
    source = ncu_dir / "v100_gene_dgdxy_time_dram.csv"
    header, rows = _rows(source)
    value = header.index("Metric Value")
    swap = str.maketrans({",": ".", ".": ","})
    for row in rows:
        row[value] = row[value].translate(swap)  # 690,974,304 -> 690.974.304; 1,209,826.20 -> 1.209.826,20
    edited = _write(tmp_path / "eu.csv", [header, *rows])
    assert "1.309.471.763,30" in edited.read_text()
    expected, got = _totals(cli, source, "us"), _totals(cli, edited, "eu")
    assert got["bytes_hbm"] == expected["bytes_hbm"]
    assert got["time_s"] == pytest.approx(expected["time_s"], rel=1e-12)


def test_units_that_change_from_row_to_row(cli, ncu_dir: Path, tmp_path: Path) -> None:
    source = ncu_dir / "v100_gene_dgdxy_time_dram.csv"
    header, rows = _rows(source)
    name, unit, value = (header.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
    for i, row in enumerate(rows):
        number = float(row[value].replace(",", ""))
        if row[name] == "dram__bytes.sum" and i % 2:
            row[unit], row[value] = "Kbyte", f"{number / 1e3:,.3f}"
        if row[name] == "sm__cycles_elapsed.avg.per_second":
            row[unit], row[value] = "cycle/usecond", f"{number / 1e6:.12g}"
    edited = _write(tmp_path / "units.csv", [header, *rows])
    expected, got = _totals(cli, source, "base"), _totals(cli, edited, "scaled")
    assert got["bytes_hbm"] == pytest.approx(expected["bytes_hbm"], rel=1e-12)
    assert got["time_s"] == pytest.approx(expected["time_s"], rel=1e-9)


def test_ragged_rows_are_read(cli, ncu_dir: Path) -> None:
    """ncu 2021.2 leaves the trailing rule fields off metric rows (13 fields under a 15-column header)."""
    header, rows = _rows(ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv")
    assert len(header) == 15 and {len(r) for r in rows} >= {13, 15}
    assert cli("import", ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv", "--run", "r").code == 0


@pytest.mark.parametrize(
    ("unit", "scale"),
    [
        ("byte", 1),
        ("Kbyte", 1e3),
        ("Mbyte", 1e6),
        ("Gbyte", 1e9),
        ("nsecond", 1e-9),
        ("usecond", 1e-6),
        ("us", 1e-6),
        ("ns", 1e-9),
        ("msecond", 1e-3),
        ("cycle/nsecond", 1e9),
        ("cycle/usecond", 1e6),
        ("cycle/second", 1),
        ("hz", 1),
        ("Ghz", 1e9),
        ("Mhz", 1e6),
        ("byte/s", 1),
        ("Gbyte/s", 1e9),
        ("Gbyte/second", 1e9),
        ("inst/cycle", 1),
        ("inst", 1),
        ("%", 1),
        ("", 1),
        ("Kinst", 1e3),
    ],
)
def test_unit_scale(unit: str, scale: float) -> None:
    assert unit_scale(unit) == pytest.approx(scale, rel=1e-15)


def test_phase_names() -> None:
    for alias in ("forward", "FW", "fwd", "Forward"):
        assert canonical_phase(alias) == "forward"
    for alias in ("backward", "bw", "BWD"):
        assert canonical_phase(alias) == "backward"
    for alias in ("optimizer", "opt", "optimizer_step", "Step"):
        assert canonical_phase(alias) == "optimizer"
    assert canonical_phase("loss") is None
    assert phase_from_ranges(("train_step", "forward")) == "forward"
    assert phase_from_ranges(("train", "step", "layer3")) == "optimizer"
    assert phase_from_ranges(("fw", "bw")) == "backward"
    assert phase_from_ranges(()) is None
