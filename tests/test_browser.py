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


def _open(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=30000",
        *extra,
        url,
    ]
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
