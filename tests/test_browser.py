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


def screenshot(path: Path, work: Path) -> Image.Image:
    shot = work / "shot.png"
    done = _open(path.resolve().as_uri(), work / "profile-shot", f"--screenshot={shot}", "--window-size=1280,1400")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return Image.open(shot).convert("RGB")


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


def assert_renders(path: Path, charts: int, work: Path) -> None:
    result = load_page(path, work)
    assert result.console == [], result.console
    assert f'data-charts="{charts}/{charts}"' in result.dom
    assert result.dom.count('data-rendered="ok"') == charts
    assert 'class="hr-error"' not in result.dom
    circles = result.dom.count('aria-roledescription="circle"')
    assert circles == expected_circles(path.read_text()) > 0
    image = screenshot(path, work)
    colours = image.getcolors(maxcolors=1 << 20) or []
    non_white = sum(n for n, rgb in colours if rgb != (255, 255, 255))
    assert len(colours) > 50
    assert non_white / (image.width * image.height) > 0.01  # a blank page is 0; the chart page is about 3%


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
    assert_renders(out, charts=1, work=tmp_path)
    assert "<select" in load_page(out, tmp_path / "again").dom  # the phase selector


def test_a_broken_chart_is_caught(tmp_path: Path) -> None:
    _chromium()
    broken = tmp_path / "broken.html"
    broken.write_text(page("broken", ChartBlock("chart-1", {"mark": "nonsense", "data": {"values": []}}).html()))
    result = load_page(broken, tmp_path)
    assert 'data-rendered="failed"' in result.dom
    assert "Chart failed to render" in result.dom
    assert result.console, "the failure must reach the console"


def test_report_tables_sort_and_filter_in_chromium(cli, deepcam_store: Path, tmp_path: Path) -> None:
    """The report's own table script, run in the browser: sorting by a column of SI text orders rows by value
    (24.0 ms after 6.68 ms, not before), the filter hides rows that do not match."""
    out = tmp_path / "report"
    assert cli("report", "deepcam-O1", "--out", str(out), "-n", "5", "--store", str(deepcam_store)).code == 0
    page_text = (out / "index.html").read_text()
    exercise = """<script>
(function () {
  const table = document.querySelector("table.hr-table");
  const time = Array.from(table.rows[0].cells).findIndex(th => th.textContent === "time");
  window.hrSortTable(table, time, false);
  document.body.dataset.sorted = Array.from(table.rows).slice(1).map(r => r.cells[time].dataset.value).join(",");
  const filter = table.previousElementSibling;
  filter.value = "col2im";
  filter.dispatchEvent(new Event("input"));
  document.body.dataset.shown = Array.from(table.rows).slice(1).filter(r => r.style.display !== "none").length;
})();
</script>
</body>"""
    tested = tmp_path / "tested.html"
    before, _, after = page_text.rpartition("</body>")
    tested.write_text(before + exercise + after)
    result = load_page(tested, tmp_path)
    sorted_values = [float(v) for v in re.search(r'data-sorted="([^"]+)"', result.dom)[1].split(",")]
    assert sorted_values == sorted(sorted_values) and len(sorted_values) == 5
    assert re.search(r'data-shown="(\d+)"', result.dom)[1] == "1"
    assert 'aria-sort="ascending"' in result.dom


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


@pytest.mark.parametrize("window", [1400, 900])
def test_chart_fills_its_column_and_its_labels_do_not_overlap(
    cli, deepcam_store: Path, tmp_path: Path, window: int
) -> None:
    """In a real browser at two window widths: the chart takes its column's width (the controls beside it, or
    under it when narrow), and no two labels on the plot (kernel numbers, compute roof labels) overlap or
    leave the plot."""
    _chromium()
    out = tmp_path / "chart.html"
    assert cli("chart", "deepcam-O1", "--out", str(out), "--store", str(deepcam_store)).code == 0
    before, _, after = out.read_text().rpartition("</body>")
    probed = tmp_path / "probed.html"
    probed.write_text(before + LAYOUT_PROBE + after)
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


def test_clicking_a_kernel_row_rings_its_dots(cli, deepcam_store: Path, tmp_path: Path) -> None:
    """A click on a top-kernels row rings that kernel's dots on the phase's chart (one per memory level it
    has), and a second click clears them."""
    _chromium()
    out = tmp_path / "report"
    assert cli("report", "deepcam-O1", "--out", str(out), "-n", "5", "--store", str(deepcam_store)).code == 0
    exercise = """<script>
(function () {
  function rings(chart) { return chart.querySelectorAll("g.highlight_marks path").length; }
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
      }, 300);
    }, 300);
  }
  const wait = () => document.body.dataset.charts ? run() : setTimeout(wait, 50);
  wait();
})();
</script>
</body>"""
    before, _, after = (out / "index.html").read_text().rpartition("</body>")
    tested = tmp_path / "clicked.html"
    tested.write_text(before + exercise + after)
    result = load_page(tested, tmp_path)
    kernel = re.search(r'data-kernel="([^"]+)"', result.dom.split("<body", 1)[1])[1]
    rings = [int(n) for n in re.search(r'data-rings="([^"]+)"', result.dom)[1].split(",")]
    levels = 3  # the DeepCAM runs measured L1, L2 and HBM bytes for every kernel shown
    assert rings == [0, levels, 0], (kernel, rings)
