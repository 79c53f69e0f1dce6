"""A notebook's session through the API alone (``import hroofline`` and nothing else of the package): a file imported,
its summary and chart shown as Jupyter shows them, a report written. Each is the composition the CLI runs, so each
is checked against the CLI's output on the same store: the same numbers, the same chart spec, the same page."""

from __future__ import annotations

import html as html_module
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.test_golden import normalised


@pytest.fixture(scope="module")
def notebook(deepcam_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The cells, run in order as a user types them; once for the module's tests, which only read its store."""
    import hroofline

    tmp_path = tmp_path_factory.mktemp("notebook")
    store = tmp_path / "store"
    run = hroofline.import_run(deepcam_dir / "pt-O1-Adam-fw", run="deepcam-o1", gpu="v100", phase="fw", store=store)
    chart = run.chart(phase="forward")
    return {
        "store": store,
        "run": run,
        "html": run._repr_html_(),  # what a cell holding `run` displays
        "chart": chart,
        "bundle": chart._repr_mimebundle_(),  # what a cell holding the chart displays
        "page": hroofline.report([run], tmp_path / "report", title="notebook", store=store),
        "again": hroofline.load("deepcam-o1", store=store),
    }


def test_the_imported_run_is_the_one_the_cli_imports(notebook: dict, cli, deepcam_dir: Path, tmp_path: Path) -> None:
    store = notebook["store"]
    summary = json.loads(cli("summary", "deepcam-o1", "--format", "json", "--store", store).out)
    forward = notebook["run"].summary().loc["forward"]
    assert summary["phases"]["forward"]["kernels"] == forward["kernels"] == 797
    assert summary["phases"]["forward"]["time_s"] == pytest.approx(forward["time_s"], rel=1e-12)
    assert summary["phases"]["forward"]["flops_tensor"] == pytest.approx(forward["flops_tensor"], rel=1e-12)
    by_cli_store = tmp_path / "store"  # the notebook's store stays as its cells left it
    argv = ("import", deepcam_dir / "pt-O1-Adam-fw", "--run", "by-cli", "--gpu", "v100", "--phase", "fw")
    assert cli(*argv, "--store", by_cli_store).code == 0
    by_cli = cli("summary", "by-cli", "--format", "json", "--store", by_cli_store).out
    assert json.loads(by_cli)["phases"] == summary["phases"]
    assert notebook["again"].launches.equals(notebook["run"].launches)  # what load() reads is what was stored


def test_the_run_and_its_chart_display_inline(notebook: dict, cli, tmp_path: Path) -> None:
    html = notebook["html"]
    assert html.startswith("<div><p><b>deepcam-o1</b>") and "<table" in html and "forward" in html
    spec = notebook["chart"].to_dict()
    shown = chart_page(notebook["bundle"]["text/html"])
    found = re.search(r'<script type="application/json" id="chart-1-spec">(.*?)</script>', shown, re.DOTALL)
    assert found and json.loads(found.group(1))["datasets"] == spec["datasets"]  # the page Jupyter shows draws it
    out = tmp_path / "chart.json"
    assert cli("chart", "deepcam-o1", "--phase", "forward", "--out", out, "--store", notebook["store"]).code == 0
    assert spec == json.loads(out.read_text())  # the CLI's chart


def test_the_report_is_the_cli_report(notebook: dict, cli, tmp_path: Path) -> None:
    page = notebook["page"]
    assert page == page.parent / "index.html" and page.stat().st_size > 100_000  # the chart library inlined
    out = tmp_path / "cli-report"
    args = ["report", "deepcam-o1", "--title", "notebook", "--out", out, "--store", notebook["store"]]
    assert cli(*args).code == 0
    assert normalised(page.read_text()) == normalised((out / "index.html").read_text())


def chart_page(shown: str) -> str:
    """The page inside the iframe a notebook shows a chart in."""
    found = re.fullmatch(r'<iframe title="[^"]*" srcdoc="([^"]*)" style="[^"]*" loading="lazy"></iframe>', shown)
    assert found, shown[:300]
    return html_module.unescape(found.group(1))


def test_a_notebook_shows_charts_offline_and_tables_in_si(notebook: dict) -> None:
    """Charts carry their JavaScript (a notebook's HTML export opens with no network); a run shows as a line and
    a card, its tables in SI units without their empty columns; Tab completion offers the API."""
    import hroofline

    page = chart_page(notebook["bundle"]["text/html"])
    assert "vegaEmbed" in page and len(page) > 500_000  # Vega, Vega-Lite and Vega-Embed inlined
    assert re.search(r"<script[^>]+src=", page) is None and "cdn.jsdelivr" not in page
    run = notebook["run"]
    text = repr(run)
    assert text.startswith("<run 'deepcam-o1': ") and len(text) < 300 and "launches 797" in text
    top = run.top(n=3)
    assert isinstance(top, pd.DataFrame) and len(top) == 3
    shown = top._repr_html_()
    assert " ms<" in shown or " µs<" in shown
    assert "flops_fp64" not in shown and "e+" not in shown  # an all-zero column left out; no e-notation
    assert {"load", "predict", "compare", "report", "import_run"} <= set(dir(hroofline))
    assert "annotations" not in dir(hroofline)
    compared = hroofline.compare(run, run)
    assert repr(compared).startswith("deepcam-o1 (base) -> deepcam-o1 (candidate)") and "total" in compared.phases
    assert compared.phase_table.loc["total", "speedup"] == pytest.approx(1.0)  # the phases as a table
    assert "e+" not in compared.phase_table._repr_html_() and " ms<" in compared.phase_table._repr_html_()
    assert "<table" in compared._repr_html_()
