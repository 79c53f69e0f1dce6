"""The report and chart pages in a real browser: Debian's chromium, headless, with no network.

Every chart must render (the page marks each one), draw one circle per kernel and level, log nothing to
the console, and leave a screenshot that is not blank. A deliberately broken page shows that the checks
can fail. `make test` and `.ci/run` install chromium when it is missing; HROOFLINE_REQUIRE_BROWSER=1 turns
a missing browser into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from hroofline.render.html_page import ChartBlock, page


def _chromium() -> str:
    found = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if found:
        return found
    reason = "needs a headless chromium (make test installs Debian's chromium)"
    if os.environ.get("HROOFLINE_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + "; HROOFLINE_REQUIRE_BROWSER=1 makes this a failure")
    pytest.skip(reason)


@dataclass
class BrowserResult:
    dom: str
    console: list[str]


def headless_chromium(profile: Path, *extra: str) -> list[str]:
    """Chromium's command line headless, in a profile of its own, its console on stderr (the docs test's too)."""
    return [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
    ]


def _open(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [*headless_chromium(profile, "--virtual-time-budget=30000", *extra), url]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def load_page(path: Path, work: Path) -> BrowserResult:
    done = _open(path.resolve().as_uri(), work / "profile-dom", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return BrowserResult(dom=done.stdout, console=console)


def load_and_screenshot(path: Path, work: Path) -> tuple[BrowserResult, Image.Image]:
    """The page's DOM, console and a screenshot, from one launch of Chromium (a launch takes a second or more
    here): headless Chromium runs --dump-dom and --screenshot one after the other on the page it loaded."""
    shot = work / "shot.png"
    extra = ("--dump-dom", f"--screenshot={shot}", "--window-size=1280,1400")
    done = _open(path.resolve().as_uri(), work / "profile-shot", *extra)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return BrowserResult(dom=done.stdout, console=console), Image.open(shot).convert("RGB")


def expected_circles(html: str) -> int:
    """Dots a page should draw: one per kernel and level with a positive intensity, from its specs."""
    count = 0
    for text in re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', html, flags=re.S):
        spec = json.loads(text)
        layers = spec.get("layer", [])
        dots = next((layer for layer in layers if layer["mark"]["type"] == "circle"), None)
        if dots is None:  # runs on their GPUs' rooflines: symbols, one per run, not circles
            continue
        rows = spec["datasets"][dots["data"]["name"]]
        folds = [t["fold"] for t in dots.get("transform", []) if "fold" in t]
        if folds:  # a roofline: one dot per kernel and level, but for kernels below the y range drawn
            count += sum(1 for row in rows for key in folds[0] if (row.get(key) or 0) > 0 and not row.get("clipped"))
        else:  # a comparison: one dot per kernel family and run
            count += len(rows)
    return count


def assert_renders(path: Path, charts: int, work: Path) -> str:
    """Every chart of the page rendered, its dots all drawn, nothing logged, and its screenshot not blank; its DOM."""
    result, image = load_and_screenshot(path, work)
    assert result.console == [], result.console
    assert f'data-charts="{charts}/{charts}"' in result.dom
    assert result.dom.count('data-rendered="ok"') == charts
    assert 'class="hr-error"' not in result.dom
    circles = result.dom.count('aria-roledescription="circle"')
    assert circles == expected_circles(path.read_text()) > 0
    colours = image.getcolors(maxcolors=1 << 20) or []
    non_white = sum(n for n, rgb in colours if rgb != (255, 255, 255))
    assert len(colours) > 50
    assert non_white / (image.width * image.height) > 0.01  # a blank page is 0; the chart page is about 3%
    return result.dom


def test_report_renders_every_chart_in_chromium(cli, deepcam_store: Path, tmp_path: Path) -> None:
    _chromium()
    out = tmp_path / "report"
    result = cli(
        "report",
        "deepcam-O0",
        "deepcam-O1",
        "--compare",
        "deepcam-O0",
        "deepcam-O1",
        "--out",
        str(out),
        "--store",
        str(deepcam_store),
    )
    assert result.code == 0, result.err
    assert_renders(out / "index.html", charts=8, work=tmp_path)  # all runs, 3 phases x 2 runs, the comparison


def test_chart_page_with_phase_selector_renders_in_chromium(cli, deepcam_store: Path, tmp_path: Path) -> None:
    _chromium()
    out = tmp_path / "chart.html"
    title = "all phases <!--<script> & </script>"  # must not break the page's scripts
    assert cli("chart", "deepcam-O1", "--out", str(out), "--title", title, "--store", str(deepcam_store)).code == 0
    assert "<select" in assert_renders(out, charts=1, work=tmp_path)  # the phase selector


def test_a_broken_chart_is_caught(tmp_path: Path) -> None:
    _chromium()
    broken = tmp_path / "broken.html"
    broken.write_text(page("broken", ChartBlock("chart-1", {"mark": "nonsense", "data": {"values": []}}).html()))
    result = load_page(broken, tmp_path)
    assert 'data-rendered="failed"' in result.dom
    assert "Chart failed to render" in result.dom
    assert result.console, "the failure must reach the console"


# Run on the report's own page once its charts are drawn: first a click on a top-kernels row and a second click
# (the rings on the phase's chart before, between and after), then a sort by the time column and a filter.
EXERCISE = """<script>
(function () {
  function rings(chart) { return chart.querySelectorAll("g.highlight_marks path").length; }
  function sortAndFilter() {
    const table = document.querySelector("table.hr-table");
    const time = Array.from(table.rows[0].cells).findIndex(th => th.textContent === "time");
    window.hrSortTable(table, time, false);
    document.body.dataset.sorted = Array.from(table.rows).slice(1).map(r => r.cells[time].dataset.value).join(",");
    const filter = table.previousElementSibling;
    filter.value = "col2im";
    filter.dispatchEvent(new Event("input"));
    document.body.dataset.shown = Array.from(table.rows).slice(1).filter(r => r.style.display !== "none").length;
  }
  function run() {
    const table = document.querySelector("table[data-chart]");
    const chart = document.getElementById(table.dataset.chart);
    const row = table.querySelector("tr[data-kernel]");
    const before = rings(chart);
    row.click();
    setTimeout(() => {
      const after = rings(chart);
      row.click();
      setTimeout(() => {
        document.body.dataset.rings = [before, after, rings(chart)].join(",");
        document.body.dataset.kernel = row.dataset.kernel;
        sortAndFilter();
      }, 300);
    }, 300);
  }
  const wait = () => document.body.dataset.charts ? run() : setTimeout(wait, 50);
  wait();
})();
</script>
</body>"""


@pytest.fixture(scope="module")
def exercised_report(deepcam_store: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The DOM of deepcam-O1's report (top 5 kernels) after EXERCISE ran on it in Chromium: one report and one
    launch for the two tests that click and sort (each a second or more of Chromium here)."""
    from hroofline.cli.main import main

    _chromium()
    work = tmp_path_factory.mktemp("exercised")
    out = work / "report"
    assert main(["report", "deepcam-O1", "--out", str(out), "-n", "5", "--store", str(deepcam_store)]) == 0
    before, _, after = (out / "index.html").read_text().rpartition("</body>")
    tested = work / "exercised.html"
    tested.write_text(before + EXERCISE + after)
    return load_page(tested, work).dom


def test_report_tables_sort_and_filter_in_chromium(exercised_report: str) -> None:
    """The report's own table script, run in the browser: sorting by a column of SI text orders rows by value
    (24.0 ms after 6.68 ms, not before), the filter hides rows that do not match."""
    sorted_values = [float(v) for v in re.search(r'data-sorted="([^"]+)"', exercised_report)[1].split(",")]
    assert sorted_values == sorted(sorted_values) and len(sorted_values) == 5
    assert re.search(r'data-shown="(\d+)"', exercised_report)[1] == "1"
    assert 'aria-sort="ascending"' in exercised_report


LAYOUT_PROBE = """<script>
(function () {
  function box(r) { return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }
  function measure() {
    const div = document.querySelector(".hr-chart");
    const svg = div.querySelector("svg");
    const grids = Array.from(svg.querySelectorAll("g.role-axis-grid")).map(g => g.getBoundingClientRect());
    const plot = {left: Math.min(...grids.map(r => r.left)), top: Math.min(...grids.map(r => r.top)),
                  right: Math.max(...grids.map(r => r.right)), bottom: Math.max(...grids.map(r => r.bottom))};
    const controls = document.querySelector(".hr-controls");
    const seen = new Set();
    const labels = [];
    svg.querySelectorAll("g.role-mark text").forEach(text => {
      if ((text.getAttribute("transform") || "").includes("rotate")) { return; }  // along a diagonal roof
      const r = text.getBoundingClientRect();
      const key = text.textContent + "@" + Math.round(r.left) + "," + Math.round(r.top);
      if (seen.has(key) || !text.textContent.trim()) { return; }  // a label's halo is drawn under it
      seen.add(key);
      labels.push({text: text.textContent, ...box(r)});
    });
    document.body.dataset.layout = JSON.stringify({
      window: window.innerWidth, column: document.body.getBoundingClientRect().width,
      chart: div.getBoundingClientRect().width, svg: svg.getBoundingClientRect().width, plot: plot, labels: labels,
      controls: controls && box(controls.getBoundingClientRect()),
    });
  }
  const wait = () => document.body.dataset.charts ? measure() : setTimeout(wait, 50);
  wait();
})();
</script>
</body>"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    width = min(a["right"], b["right"]) - max(a["left"], b["left"])
    height = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    return max(0.0, width) * max(0.0, height)


@pytest.fixture(scope="module")
def probed_chart(deepcam_store: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """deepcam-O1's chart page (all phases) with LAYOUT_PROBE, written once for both window widths."""
    from hroofline.cli.main import main

    _chromium()
    out = tmp_path_factory.mktemp("layout") / "chart.html"
    assert main(["chart", "deepcam-O1", "--out", str(out), "--store", str(deepcam_store)]) == 0
    before, _, after = out.read_text().rpartition("</body>")
    return before + LAYOUT_PROBE + after


@pytest.mark.parametrize("window", [1400, 900])
def test_chart_fills_its_column_and_its_labels_do_not_overlap(probed_chart: str, tmp_path: Path, window: int) -> None:
    """In a real browser at two window widths: the chart takes its column's width (the controls beside it, or
    under it when narrow), and no two labels on the plot (kernel numbers, compute roof labels) overlap or
    leave the plot."""
    probed = tmp_path / "probed.html"
    probed.write_text(probed_chart)
    done = _open(probed.resolve().as_uri(), tmp_path / "profile", "--dump-dom", f"--window-size={window},1000")
    layout = json.loads(re.search(r'data-layout="([^"]+)"', done.stdout)[1].replace("&quot;", '"'))
    assert layout["svg"] >= 0.95 * layout["chart"]  # the drawing fills its box ...
    if window >= 1400:  # ... and the box its column, the controls beside it
        assert layout["chart"] + layout["controls"]["right"] - layout["controls"]["left"] >= 0.85 * layout["column"]
        assert layout["controls"]["left"] > layout["plot"]["right"]
    else:  # narrow: the chart takes the whole column, the controls go under it
        assert layout["chart"] >= 0.95 * layout["column"]
        assert layout["controls"]["top"] > layout["plot"]["bottom"]
    labels = layout["labels"]
    numbers = [label for label in labels if label["text"].isdigit()]
    assert [n["text"] for n in numbers] == list("12345")
    assert any("TFLOP/s" in label["text"] for label in labels)
    plot = layout["plot"]
    for label in labels:
        assert plot["left"] - 1 <= label["left"] and label["right"] <= plot["right"] + 1, label
        assert plot["top"] - 1 <= label["top"] and label["bottom"] <= plot["bottom"] + 1, label
    for index, first in enumerate(labels):
        for second in labels[index + 1 :]:
            assert _overlap(first, second) < 1.0, (first, second)


def test_clicking_a_kernel_row_rings_its_dots(exercised_report: str) -> None:
    """A click on a top-kernels row rings that kernel's dots on the phase's chart (one per memory level it
    has), and a second click clears them."""
    kernel = re.search(r'data-kernel="([^"]+)"', exercised_report.split("<body", 1)[1])[1]
    rings = [int(n) for n in re.search(r'data-rings="([^"]+)"', exercised_report)[1].split(",")]
    levels = 3  # the DeepCAM runs measured L1, L2 and HBM bytes for every kernel shown
    assert rings == [0, levels, 0], (kernel, rings)
