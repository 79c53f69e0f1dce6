"""Ceilings and the roof analysis (`hroofline top`) on Yang et al.'s DeepCAM V100 data.

The reference numbers are computed here from the `kernels` CSV (itself checked against the authors'
tables in test_deepcam.py) and from the ceilings read straight from the TOML files, not through
hroofline's roof code.
"""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from hroofline.roofs.metricset import metrics_dir

ERT = metrics_dir() / "ceilings" / "v100-yang-ert.toml"


def _ert() -> dict[str, float]:
    return tomllib.loads(ERT.read_text())["ceilings"]


def _datasheet() -> dict[str, float]:
    return tomllib.loads((metrics_dir() / "gpus.toml").read_text())["v100-sxm2"]["peak"]


def _kernels(cli, store: Path, run: str, phase: str) -> pd.DataFrame:
    result = cli("kernels", run, "--group-by", "name", "--phase", phase, "--format", "csv", store_dir=store)
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out))


def _top(cli, store: Path, *args: str) -> pd.DataFrame:
    result = cli("top", *args, "--format", "csv", "--store", str(store))
    assert result.code == 0, result.err
    return pd.read_csv(io.StringIO(result.out))


def test_top_ranks_amp_forward_kernels_as_the_issue_expects(cli, deepcam_store: Path) -> None:
    top = _top(cli, deepcam_store, "deepcam-O1", "--phase", "forward", "-n", "3")
    first, second, third = top.to_dict(orient="records")
    assert "implicit_convolve_sgemm<__half" in first["kernel"]
    assert first["phase_share_pct"] == pytest.approx(23.1, abs=0.1)
    assert "col2im_kernel<c10::Half" in second["kernel"]
    assert second["phase_share_pct"] == pytest.approx(16.1, abs=0.1)
    assert second["ai_hbm"] < 1
    assert second["bound"] == "HBM"
    assert third["kernel"].startswith("volta_fp16_s884cudnn")
    assert 29.1816e12 < third["flop_rate"] < 106.496e12  # between the FP16 and tensor roofs
    assert third["flop_rate"] == pytest.approx(48.5e12, rel=0.01)
    assert third["bound"] == "FP16 tensor"


V100_BOOST_HZ = 1530e6


def _expected_time_at_roof(store: Path, run: str, phase: str, peaks: dict[str, float], scaled: bool) -> pd.Series:
    """Time at roof per kernel name, computed here launch by launch from the stored launches: Volta's FP32
    pipe apart from the pipe FP16, FP64 and tensor work share; the FP16 roof at half the packed rate (ncu
    counts a packed instruction once); datasheet compute and cache roofs at each launch's measured clock."""
    from hroofline.store.runs import RunStore

    launches = RunStore(store).load(run).launches
    launches = launches[launches["phase"] == phase]
    scale = launches["clock_hz"] / V100_BOOST_HZ if scaled else 1.0
    flops = launches[["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]].fillna(0)
    fp32_pipe = flops["flops_fp32"] / (peaks["fp32"] * scale)
    shared_pipe = flops["flops_fp16"] / (peaks["fp16"] / 2 * scale) + flops["flops_tensor"] / (
        peaks["tensor_fp16"] * scale
    )
    compute = pd.concat([fp32_pipe, shared_pipe], axis=1).max(axis=1)
    memory = pd.DataFrame(
        {
            level: launches[f"bytes_{level}"] / (peaks[level] * (scale if level != "hbm" else 1.0))
            for level in ("l1", "l2", "hbm")
        }
    )
    at_roof = pd.concat([compute.where(compute > 0), memory], axis=1).max(axis=1)
    return at_roof.groupby(launches["kernel"]).sum()


@pytest.mark.parametrize("ceilings", ["v100-yang-ert", None])
def test_roof_columns_follow_the_roofline_formula(cli, deepcam_store: Path, ceilings: str | None) -> None:
    peaks = _ert() if ceilings else _datasheet()
    option = ["--ceilings", ceilings] if ceilings else []
    top = _top(cli, deepcam_store, "deepcam-O1", "--phase", "forward", "-n", "1000", *option).set_index("kernel")
    kernels = _kernels(cli, deepcam_store, "deepcam-O1", "forward").set_index("kernel")
    assert len(top) == len(kernels)
    # ERT ceilings are measured: taken as given; the datasheet is scaled to the clock each launch ran at.
    at_roof = _expected_time_at_roof(deepcam_store, "deepcam-O1", "forward", peaks, scaled=ceilings is None)
    joined = top.join(at_roof.rename("expected"))
    assert joined["time_at_roof_s"].to_numpy() == pytest.approx(joined["expected"].to_numpy(), rel=1e-12)
    assert joined["recoverable_s"].to_numpy() == pytest.approx((joined["time_s"] - joined["expected"]).to_numpy())
    assert joined["roof_pct"].to_numpy() == pytest.approx((100 * joined["expected"] / joined["time_s"]).to_numpy())
    # No DeepCAM kernel beats a roof: every kernel takes at least its time at roof.
    assert (joined["recoverable_s"] >= 0).all()
    share = 100 * kernels["time_s"] / kernels["time_s"].sum()
    assert top["phase_share_pct"].to_numpy() == pytest.approx(share.loc[top.index].to_numpy())
    assert list(top["time_s"]) == sorted(top["time_s"], reverse=True)


def test_implicit_convolve_sgemm_at_its_measured_clock(cli, deepcam_store: Path) -> None:
    """The issue's figure: at the 1.30 GHz it ran at, not the 1.53 GHz boost, the FP32 convolution of DeepCAM's
    AMP forward pass is at about 61% of the datasheet FP32 roof (52% against the boost-clock roof)."""
    top = _top(cli, deepcam_store, "deepcam-O1", "--phase", "forward", "-n", "1")
    first = top.iloc[0]
    assert first["kernel"].startswith("void cudnn::detail::implicit_convolve_sgemm<__half")
    assert first["bound"] == "FP32"
    assert 60 < first["roof_pct"] < 62
    at_boost = 100 * first["flop_rate"] / _datasheet()["fp32"]
    assert 51 < at_boost < 53
    table = cli("top", "deepcam-O1", "--phase", "forward", "-n", "1", "--store", str(deepcam_store))
    assert "scaled to each launch's measured SM clock (median 1.31 GHz; quoted at 1.53 GHz)" in table.out


def test_top_without_phase_ranks_all_phases_and_shares_are_per_phase(cli, deepcam_store: Path) -> None:
    top = _top(cli, deepcam_store, "deepcam-O0", "-n", "1000")
    assert set(top["phase"]) == {"forward", "backward", "optimizer"}
    sums = top.groupby("phase")["phase_share_pct"].sum()
    assert sums.to_numpy() == pytest.approx([100.0, 100.0, 100.0])


def test_top_json_and_table(cli, deepcam_store: Path) -> None:
    result = cli("top", "deepcam-O1", "--phase", "fw", "-n", "2", "--format", "json", "--store", str(deepcam_store))
    rows = json.loads(result.out)
    assert [r["bound"] for r in rows] == ["FP32", "HBM"]
    table = cli("top", "deepcam-O1", "--phase", "forward", "-n", "2", "--store", str(deepcam_store))
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].startswith("roofs: v100-sxm2 datasheet")
    assert lines[1].startswith("note: FP16 roof halved to match ncu's FP16 counters")
    assert lines[2].startswith("HFU: hardware FLOPs")  # ncu's counters: the denominator of hfu_pct, then the table
    header = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    assert "hfu_pct" in lines[header] and "mfu_pct" not in lines[header]
    assert lines[header + 1].startswith("implicit_convolve_sgemm<__half, ...>")


def test_wrong_ceilings_put_dots_above_roofs_and_say_so(cli, deepcam_store: Path, tmp_path: Path) -> None:
    # An HBM bandwidth 100x too low: kernels now "beat" it, and every one of them must be named.
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('name = "too low"\n[ceilings]\nhbm = 8.28e9\nl2 = 2996.77e9\nl1 = 14336e9\nfp32 = 15158.6e9\n')
    result = cli(
        "top", "deepcam-O0", "-n", "1000", "--ceilings", str(wrong), "--format", "csv", "--store", str(deepcam_store)
    )
    assert result.code == 0
    top = pd.read_csv(io.StringIO(result.out))
    beaten = top[top["recoverable_s"] < 0]
    # Said once for all of them (a wrong roof is one error, not one per kernel), each one listed on request.
    (warning,) = [line for line in result.err.splitlines() if "faster than their roofs allow" in line]
    assert warning.startswith(f"hroofline: warning: {len(beaten)} kernel(s) (")  # a real error: the worst named
    worst = beaten.assign(gain=beaten["recoverable_s"]).nsmallest(1, "gain")["kernel"].iloc[0]
    assert worst.split("<")[0].split("(")[0].split("::")[-1] in warning
    assert "ceilings or the metrics are wrong" in warning and "HBM roof(s) of too low" in warning
    explained = cli(
        "top", "deepcam-O0", "-n", "1000", "--ceilings", str(wrong), "--explain", "--store", str(deepcam_store)
    )
    listed = [line for line in explained.err.splitlines() if "beats its HBM roof" in line]
    assert len(beaten) > 20 and len(listed) == len(beaten)
    assert (top.loc[top["flop_rate"].fillna(0) == 0, "recoverable_s"] < 0).any()  # zero-FLOP kernels count too
    assert "no FP16 peak" not in result.err  # FP32 run: no FP16 FLOPs to miss a roof for


def test_missing_cache_roofs_are_reported(cli, deepcam_store: Path) -> None:
    result = cli("top", "deepcam-O1", "--phase", "fw", "--ceilings", "h100-sxm", "--store", str(deepcam_store))
    assert result.code == 0
    assert "no L1 bandwidth roof for 797 launch(es)" in result.err
    assert "no L2 bandwidth roof for 797 launch(es)" in result.err
    assert "h100-sxm datasheet (another GPU: at its quoted clocks)" in result.out


def test_a_phase_without_kernels(cli, deepcam_store: Path) -> None:
    top = cli("top", "deepcam-O0", "--phase", "other", "--format", "json", "--store", str(deepcam_store))
    assert top.code == 0 and json.loads(top.out) == []
    chart = cli("chart", "deepcam-O0", "--phase", "other", "--out", "x.json", "--store", str(deepcam_store))
    assert chart.code == 1 and "has no kernels in phase other" in chart.err and chart.err.count("\n") == 1


def test_missing_peak_is_reported(cli, deepcam_store: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial.toml"
    partial.write_text('name = "no tensor"\n[ceilings]\nhbm = 900e9\nfp32 = 15.7e12\nfp16 = 31.4e12\n')
    result = cli("top", "deepcam-O1", "--phase", "forward", "--ceilings", str(partial), "--store", str(deepcam_store))
    assert result.code == 0
    assert "do FP16 tensor work but have no FP16 tensor roof" in result.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[ceilings]\nhbm = 828.76\n", "far too small"),
        ("[ceilings]\nhbm = -1e9\n", "must be a positive number"),
        ("[ceilings]\nhbm_bw = 1e12\n", "unknown key(s) hbm_bw"),
        ("name = 'x'\n", "has no [ceilings] table"),
        ("[ceilings\n", "is not valid TOML"),
    ],
)
def test_bad_ceilings_file_is_one_line(cli, deepcam_store: Path, tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(content)
    result = cli("top", "deepcam-O0", "--ceilings", str(bad), "--store", str(deepcam_store))
    assert result.code == 1
    assert result.err.count("\n") == 1 and message in result.err, result.err
    assert result.out == ""


def test_unknown_ceilings_name_is_a_usage_error(cli, deepcam_store: Path) -> None:
    result = cli("top", "deepcam-O0", "--ceilings", "v99", "--store", str(deepcam_store))
    assert result.code == 2
    assert "v100-yang-ert" in result.err and result.err.count("\n") == 1


def test_another_gpu_datasheet_can_be_chosen(cli, deepcam_store: Path) -> None:
    result = cli(
        "top", "deepcam-O1", "--phase", "forward", "-n", "1", "--ceilings", "a100", "--store", str(deepcam_store)
    )
    assert result.code == 0
    assert result.out.startswith("roofs: a100-40gb datasheet")


def test_ert_file_is_in_si_units() -> None:
    values = _ert()
    assert values["hbm"] == 828.758e9
    assert values["l2"] == 2996.77e9
    assert values["l1"] == 14336e9
    assert values["fp32"] == 15158.6e9
    assert values["fp16"] == 29181.6e9
    assert values["tensor_fp16"] == 106496e9


def test_theoretical_cache_bandwidths_follow_their_formula() -> None:
    catalog = tomllib.loads((metrics_dir() / "gpus.toml").read_text())
    # L1 = SMs x 128 B/clk x boost; L2 = L2 bytes/clk x boost (V100 2048, A100 5120)
    expected = {
        "v100-sxm2": (80, 1530e6, 2048),
        "v100-pcie": (80, 1380e6, 2048),
        "a100-40gb": (108, 1410e6, 5120),
        "a100-80gb": (108, 1410e6, 5120),
    }
    for name, (sms, clock, l2_width) in expected.items():
        peak = catalog[name]["peak"]
        assert peak["l1"] == pytest.approx(sms * 128 * clock, rel=1e-12)
        assert peak["l2"] == pytest.approx(l2_width * clock, rel=1e-12)
        assert peak["hbm"] < peak["l2"] < peak["l1"]
    ert = _ert()  # measured stays below theoretical
    assert ert["l1"] < catalog["v100-sxm2"]["peak"]["l1"] and ert["l2"] < catalog["v100-sxm2"]["peak"]["l2"]


def test_top_ranks_by_what_is_asked(cli, deepcam_store: Path) -> None:
    by_recoverable = _top(cli, deepcam_store, "deepcam-O1", "--phase", "forward", "-n", "5", "--sort", "recoverable_s")
    assert list(by_recoverable["recoverable_s"]) == sorted(by_recoverable["recoverable_s"], reverse=True)
    assert "col2im_kernel" in by_recoverable.iloc[0]["kernel"]  # 15.7 of its 16.8 ms


def test_top_refuses_to_rank_by_a_time_nobody_measured(cli, ncu_dir: Path) -> None:
    """The VGG-11 console log holds FLOP and byte counts but no kernel time."""
    assert cli("import", ncu_dir / "a100_vgg11_train_ncu_console.txt", "--run", "vgg", "--gpu", "a100").code == 0
    result = cli("top", "vgg")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "has no kernel times" in result.err and "--sort flops" in result.err
    by_flops = cli("top", "vgg", "--sort", "flops", "-n", "3", "--format", "csv")
    assert by_flops.code == 0 and by_flops.out.count("\n") == 4
