"""The roofline chart: spec-level checks, the four output formats, and the report file."""

from __future__ import annotations

import json
import re
import struct
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

from hroofline.render.roofline_chart import HEIGHT, MAX_DOT_AREA, WIDTH
from tests.conftest import tree_digest

DATASHEET_V100 = {"l1": 15.6672e12, "l2": 3.13344e12, "hbm": 900e9, "fp32": 15.7e12, "fp16": 31.4e12, "tensor": 125e12}
V100_BOOST_HZ = 1530e6


def _median_clock(store: Path, run: str, phase: str) -> float:
    """The time-weighted median SM clock of a phase's launches, computed here from the stored launches."""
    from hroofline.store.runs import RunStore

    launches = RunStore(store).load(run).launches
    rows = launches[launches["phase"] == phase].sort_values("clock_hz")
    cumulative = rows["time_s"].cumsum().to_numpy()
    return float(rows["clock_hz"].to_numpy()[(cumulative >= cumulative[-1] / 2).argmax()])


@pytest.fixture(scope="module")
def amp_forward_spec(deepcam_store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from hroofline.cli.main import main

    out = tmp_path_factory.mktemp("spec") / "fw.json"
    assert main(["chart", "deepcam-O1", "--phase", "forward", "--out", str(out), "--store", str(deepcam_store)]) == 0
    return json.loads(out.read_text())


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["layer"]


def _points_layer(spec: dict[str, Any]) -> dict[str, Any]:
    return next(layer for layer in _layers(spec) if layer["mark"]["type"] == "circle")


def _roof_lines(spec: dict[str, Any]) -> list[dict[str, Any]]:
    layer = next(lay for lay in _layers(spec) if lay["mark"]["type"] == "line" and "values" in lay.get("data", {}))
    return layer["data"]["values"]


def test_axes_are_log_log(amp_forward_spec: dict[str, Any]) -> None:
    encoding = _points_layer(amp_forward_spec)["encoding"]
    assert encoding["x"]["scale"]["type"] == "log"
    assert encoding["y"]["scale"]["type"] == "log"
    assert "FLOP/byte" in encoding["x"]["axis"]["title"]
    assert "FLOP/s" in encoding["y"]["axis"]["title"]


def test_roofs_sit_at_the_catalog_values_at_the_measured_clock(
    amp_forward_spec: dict[str, Any], deepcam_store: Path
) -> None:
    """Datasheet peaks are quoted at the 1.53 GHz boost clock; Yang's kernels ran at about 1.30 GHz. The
    chart draws compute, L1 and L2 roofs at the phase's time-weighted median clock, HBM as quoted, and the
    FP16 roof at half the packed rate, to match ncu's FP16 counters."""
    scale = _median_clock(deepcam_store, "deepcam-O1", "forward") / V100_BOOST_HZ
    assert 0.84 < scale < 0.87
    expected = {key: value * scale for key, value in DATASHEET_V100.items()}
    expected["hbm"] = DATASHEET_V100["hbm"]
    expected["fp16"] = DATASHEET_V100["fp16"] * scale / 2
    lines = _roof_lines(amp_forward_spec)
    by_roof: dict[str, list[dict[str, Any]]] = {}
    for point in lines:
        by_roof.setdefault(point["roof"], []).append(point)
    for level, name in (("l1", "L1"), ("l2", "L2"), ("hbm", "HBM")):
        for point in by_roof[name]:  # a bandwidth roof is y = bandwidth * x
            assert point["y"] / point["x"] == pytest.approx(expected[level], rel=1e-12)
    # precisions present in AMP forward: FP32, FP16 and FP16-input tensor work (no FP64); FP32 and the halved FP16
    # roof are one height: one line and one label naming both, not two labels printed over one line
    assert expected["fp32"] == pytest.approx(expected["fp16"], rel=1e-12)
    for name, key in (("FP32, FP16", "fp32"), ("FP16 tensor", "tensor")):
        assert [p["y"] for p in by_roof[name]] == pytest.approx([expected[key]] * 2, rel=1e-12)
    assert "FP32" not in by_roof and "FP16" not in by_roof
    assert "FP64" not in by_roof and "TF32 tensor" not in by_roof
    # each bandwidth roof ends where it meets the highest compute roof
    for name in ("L1", "L2", "HBM"):
        assert max(p["y"] for p in by_roof[name]) == pytest.approx(expected["tensor"])
    text_layers = [layer for layer in _layers(amp_forward_spec) if layer["mark"]["type"] == "text"]
    labels = [t for layer in text_layers if "values" in layer["data"] for t in layer["data"]["values"]]
    texts = {row["label"] for row in labels}
    assert "HBM 900.0 GB/s" in texts
    assert f"FP16 tensor {expected['tensor'] / 1e12:.1f} TFLOP/s" in texts
    assert f"FP32, FP16 {expected['fp32'] / 1e12:.2f} TFLOP/s" in texts
    assert not any(text.startswith(("FP32 ", "FP16 1")) for text in texts)
    subtitle = " ".join(" ".join(amp_forward_spec["title"]["subtitle"]).split())  # wrapped lines joined
    assert "scaled to each launch's measured SM clock" in subtitle and "quoted at 1.53 GHz" in subtitle
    assert "FP16 roof halved" in subtitle
    # the five kernels with the most time are numbered on the chart and named in the key, slowest first
    numbers = next(layer for layer in text_layers if "values" not in layer["data"])
    assert [row["number"] for row in amp_forward_spec["datasets"][numbers["data"]["name"]]] == list("12345")
    key = subtitle.split("Numbered, most time first: ")[1]
    assert key.startswith("1 implicit_convolve_sgemm") and "; 2 col2im_kernel" in key
    assert len(amp_forward_spec["title"]["subtitle"]) <= 9  # was 13: a few lines over the plot, not a page


def test_dot_area_is_proportional_to_time(amp_forward_spec: dict[str, Any]) -> None:
    size = _points_layer(amp_forward_spec)["encoding"]["size"]
    assert size["field"] == "time_s"
    assert size["scale"]["type"] == "linear" and size["scale"]["zero"] is True
    assert size["scale"]["range"] == [0, MAX_DOT_AREA]
    values = _data(amp_forward_spec)
    assert size["scale"]["domain"] == [0, max(row["time_s"] for row in values)]


def _data(spec: dict[str, Any]) -> list[dict[str, Any]]:
    layer = _points_layer(spec)
    data = layer.get("data") or spec.get("data")
    if "name" in data:  # Altair hoists inline data into top-level datasets
        return spec["datasets"][data["name"]]
    return data["values"]


def test_every_kernel_has_a_dot_per_level_at_one_height(
    amp_forward_spec: dict[str, Any], cli, deepcam_store: Path
) -> None:
    layer = _points_layer(amp_forward_spec)
    fold = next(t for t in layer.get("transform", []) + amp_forward_spec.get("transform", []) if "fold" in t)
    assert fold["fold"] == ["ai_l1", "ai_l2", "ai_hbm"]
    rows = _data(amp_forward_spec)
    kernels = cli(
        "kernels",
        "deepcam-O1",
        "--group-by",
        "name",
        "--phase",
        "forward",
        "--format",
        "json",
        "--store",
        str(deepcam_store),
    )
    expected = [k for k in json.loads(kernels.out) if (k["flop_rate"] or 0) > 0]
    assert len(rows) == len(expected) == 34
    by_name = {(k["kernel"]): k for k in expected}
    for row in rows:
        kernel = by_name[row["name"]]
        assert row["flop_rate"] == pytest.approx(kernel["flop_rate"], rel=1e-12)
        for level in ("l1", "l2", "hbm"):
            assert row[f"ai_{level}"] == pytest.approx(kernel[f"ai_{level}"], rel=1e-12)
    # The tensor-core kernels: the two that take most of the family's time, and 94% of it in all, lie
    # between the FP16 and tensor roofs (a few small launches run below the FP16 roof).
    tensor = sorted((r for r in rows if r["name"].startswith("volta_fp16_s884cudnn")), key=lambda r: -r["time_s"])
    between = [DATASHEET_V100["fp16"] < r["flop_rate"] < DATASHEET_V100["tensor"] for r in tensor]
    assert between[:2] == [True, True]
    assert tensor[0]["flop_rate"] == pytest.approx(48.5e12, rel=0.01)
    share = sum(r["time_s"] for r, inside in zip(tensor, between, strict=True) if inside) / sum(
        r["time_s"] for r in tensor
    )
    assert share > 0.9
    joins = [lay for lay in _layers(amp_forward_spec) if lay["mark"]["type"] == "line"]
    assert [lay["encoding"]["detail"]["field"] for lay in joins] == ["roof", "kid"]  # roofs, then kernel joins


def test_tooltip_and_interaction(amp_forward_spec: dict[str, Any]) -> None:
    layer = _points_layer(amp_forward_spec)
    titles = [t["title"] for t in layer["encoding"]["tooltip"]]
    assert titles == [
        "kernel",
        "full name",
        "phase",
        "launches",
        "time",
        "performance",
        "this dot",
        "intensity (FLOP/byte)",
        "binding roof",
    ]
    params = {p["name"]: p for p in amp_forward_spec["params"]}
    assert params["hover"]["select"]["on"] == "pointerover" and params["hover"]["select"]["fields"] == ["kid"]
    assert params["levels"]["bind"] == "legend"
    assert params["zoom"]["bind"] == "scales"
    row = next(r for r in _data(amp_forward_spec) if "col2im" in r["name"])
    assert re.fullmatch(r"16\.8 ms \(16\.1% of forward\)", row["time_text"])
    assert row["roof_text"].startswith("HBM, ")


def test_phase_selector_when_a_run_has_several_phases(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    assert cli("chart", "deepcam-O0", "--out", str(out), "--store", str(deepcam_store)).code == 0
    spec = json.loads(out.read_text())
    params = {p["name"]: p for p in spec["params"]}
    assert params["phase_pick"]["bind"]["options"] == ["all", "forward", "backward", "optimizer"]
    assert {r["phase"] for r in _data(spec)} == {"forward", "backward", "optimizer"}


def test_levels_option_limits_dots_and_roofs(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "l2hbm.json"
    result = cli(
        "chart",
        "deepcam-O1",
        "--phase",
        "forward",
        "--level",
        "hbm,L2",
        "--out",
        str(out),
        "--ceilings",
        "v100-yang-ert",
        "--store",
        str(deepcam_store),
    )
    assert result.code == 0, result.err
    spec = json.loads(out.read_text())
    fold = next(t for t in _points_layer(spec).get("transform", []) + spec.get("transform", []) if "fold" in t)
    assert fold["fold"] == ["ai_l2", "ai_hbm"]
    roofs = {p["roof"] for p in _roof_lines(spec)}
    assert "L1" not in roofs and {"L2", "HBM"} <= roofs
    assert "V100 SXM2, ERT (Yang et al.)" in " ".join(spec["title"]["subtitle"])


def test_above_roof_dots_are_marked_and_warned(cli, deepcam_store: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('name = "too low"\n[ceilings]\nhbm = 8.28e9\nl2 = 2996.77e9\nl1 = 14336e9\nfp32 = 15158.6e9\n')
    out = tmp_path / "above.json"
    result = cli(
        "chart",
        "deepcam-O0",
        "--phase",
        "forward",
        "--ceilings",
        str(wrong),
        "--out",
        str(out),
        "--store",
        str(deepcam_store),
    )
    assert result.code == 0
    assert "faster than their roofs allow" in result.err and "HBM roof(s) of too low" in result.err
    spec = json.loads(out.read_text())
    assert any(row["above_hbm"] for row in _data(spec))
    assert not any(row["above_l1"] for row in _data(spec))
    diamond = next(lay for lay in _layers(spec) if lay["mark"]["type"] == "point")
    assert diamond["mark"]["shape"] == "diamond"
    assert any("beat a roof" in line for line in spec["title"]["subtitle"])


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_png_svg_html_outputs(cli, deepcam_store: Path, tmp_path: Path) -> None:
    for extension in ("png", "svg", "html"):
        out = tmp_path / f"fw.{extension}"
        result = cli("chart", "deepcam-O1", "--phase", "forward", "--out", str(out), "--store", str(deepcam_store))
        assert result.code == 0, result.err
        assert f"wrote {out}" in result.err
    width, height = _png_size((tmp_path / "fw.png").read_bytes())
    # 2x scale of the plot area plus axes, title and legend
    assert 2 * WIDTH < width < 2 * (WIDTH + 400) and 2 * HEIGHT < height < 2 * (HEIGHT + 300)
    svg = ElementTree.parse(tmp_path / "fw.svg").getroot()
    assert svg.tag.endswith("svg") and float(svg.get("width")) > WIDTH
    page = (tmp_path / "fw.html").read_text()
    assert not re.search(r"<script[^>]+src=", page)  # nothing fetched: the page works offline
    assert "cdn.jsdelivr" not in page and "window.vegaEmbed=" in page
    assert page.count('class="hr-chart"') == 1
    assert 500_000 < len(page) < 5_000_000
    assert oct((tmp_path / "fw.html").stat().st_mode & 0o777) != "0o600"


def test_chart_default_name_and_bad_requests(cli, deepcam_store: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("chart", "deepcam-O1", "--phase", "fw", "--store", str(deepcam_store)).code == 0
    assert (tmp_path / "deepcam-O1-forward.html").is_file()
    before = tree_digest(tmp_path)
    bad_extension = cli("chart", "deepcam-O1", "--out", "x.pdf", "--store", str(deepcam_store))
    assert bad_extension.code == 2 and ".html, .png, .svg or .json" in bad_extension.err
    bad_level = cli("chart", "deepcam-O1", "--level", "l3", "--store", str(deepcam_store))
    assert bad_level.code == 2 and "l3" in bad_level.err
    no_folder = cli("chart", "deepcam-O1", "--out", "nowhere/x.html", "--store", str(deepcam_store))
    assert no_folder.code == 1 and "does not exist" in no_folder.err
    missing = cli("chart", "no-such-run", "--out", "y.html", "--store", str(deepcam_store))
    assert missing.code == 1
    for result in (bad_extension, bad_level, no_folder, missing):
        assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert tree_digest(tmp_path) == before


def test_report_holds_every_run_phase_chart_and_table(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = cli("report", "deepcam-O0", "deepcam-O1", "--out", str(out), "-n", "5", "--store", str(deepcam_store))
    assert result.code == 0, result.err
    page = (out / "index.html").read_text()
    assert page.count('class="hr-chart"') == 7  # all runs on one roofline, then two runs x forward, backward, optimizer
    assert page.count("<h3>") == 6
    assert page.count('<td class="kernel"') == 30
    assert "implicit_convolve_sgemm&lt;__half, ...&gt;" in page
    specs = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, flags=re.S)
    assert len(specs) == 7 and all(
        json.loads(s)["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6") for s in specs
    )
    assert not re.search(r"<script[^>]+src=", page)
    assert len(page) < 5_000_000


def test_report_with_a_missing_run_writes_nothing(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = cli("report", "deepcam-O0", "nope", "--out", str(out), "--store", str(deepcam_store))
    assert result.code == 1 and result.err.count("\n") == 1
    assert not out.exists()


def test_per_launch_draws_one_dot_per_launch(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "launches.json"
    result = cli(
        "chart", "deepcam-O1", "--phase", "forward", "--per-launch", "--out", str(out), "--store", str(deepcam_store)
    )
    assert result.code == 0, result.err
    rows = _data(json.loads(out.read_text()))
    launches = cli("kernels", "deepcam-O1", "--phase", "forward", "--format", "json", "--store", str(deepcam_store))
    with_flops = [k for k in json.loads(launches.out) if (k["flop_rate"] or 0) > 0]
    assert len(rows) == len(with_flops) > 34
    assert {row["launches"] for row in rows} == {1}
    assert "One dot per kernel launch" in " ".join(json.loads(out.read_text())["title"]["subtitle"])


def test_roofless_levels_are_left_out_by_default(cli, deepcam_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "h100.json"
    result = cli(
        "chart",
        "deepcam-O1",
        "--phase",
        "forward",
        "--ceilings",
        "h100-sxm",
        "--out",
        str(out),
        "--store",
        str(deepcam_store),
    )
    assert result.code == 0, result.err
    assert "at HBM;" in result.err and "no L1 bandwidth" in result.err
    spec = json.loads(out.read_text())
    fold = next(t for t in _points_layer(spec).get("transform", []) if "fold" in t)
    assert fold["fold"] == ["ai_hbm"]
    assert any("no L2 bandwidth" in line for line in spec["title"]["subtitle"])


def test_write_failures_are_one_line(cli, deepcam_store: Path, tmp_path: Path) -> None:
    folder = tmp_path / "taken.html"
    folder.mkdir()
    result = cli("chart", "deepcam-O1", "--out", str(folder), "--store", str(deepcam_store))
    assert result.code == 1 and "is a folder" in result.err and result.err.count("\n") == 1
    blocker = tmp_path / "file"
    blocker.write_text("x")
    report = cli("report", "deepcam-O1", "--out", str(blocker / "sub"), "--store", str(deepcam_store))
    assert report.code == 1 and "cannot create" in report.err and report.err.count("\n") == 1


def test_the_all_runs_chart_says_whose_roofs_it_draws(deepcam_store: Path) -> None:
    """Runs of one GPU with other roofs (a prediction at the quoted clock, measured runs at their own clocks):
    the chart draws the first run's, and says so; runs with the same roofs need no word."""
    from hroofline.analyze.step_points import step_points
    from hroofline.store.runs import RunStore

    samples = RunStore(Path(__file__).resolve().parent.parent / "samples" / "store")
    predicted = [samples.load(name) for name in samples.run_names()]
    measured = RunStore(deepcam_store).load("deepcam-O0")
    alike = step_points(predicted, "run").roof_labels["v100-sxm2"]
    assert "drawn:" not in alike
    mixed = step_points([*predicted, measured], "run").roof_labels["v100-sxm2"]
    assert f"(drawn: {predicted[0].name}'s roofs; each run is judged against its own)" in mixed
