"""Self-contained HTML pages holding Vega-Lite charts: the JavaScript is inlined, nothing is fetched.

Each chart is a ``<div class="hr-chart">`` whose spec sits in a JSON script element beside it. The page
script embeds every chart, marks each div ``data-rendered="ok"`` or ``"failed"`` and shows a failure as
a visible message, so that a broken chart is never a silently empty box (and a browser test can tell).

A chart of one plot fills the width of its column and keeps its aspect: its spec takes the container's
width and the page makes its height follow (a Vega signal). Its controls (the phase, the memory level) sit
in a box of their own beside it, or under it where the window is narrow.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1280px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0 1em; display: block; overflow-x: auto;
        max-width: 100%; }  /* a table wider than the window scrolls on its own; the page does not */
table.hr-facts td { white-space: normal; }
/* a table that scrolls shows a shadow at the edge that hides columns (the classic local/scroll backgrounds) */
table.hr-table { background: linear-gradient(to right, #fff 30%, rgba(255,255,255,0)),
  linear-gradient(to left, #fff 30%, rgba(255,255,255,0)) 100% 0,
  radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.25), rgba(0,0,0,0)),
  radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.25), rgba(0,0,0,0)) 100% 0;
  background-repeat: no-repeat; background-size: 40px 100%, 40px 100%, 14px 100%, 14px 100%;
  background-attachment: local, local, scroll, scroll; }
ol.advice pre { white-space: pre-wrap; margin: 0.3em 0 0.8em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
td.kernel { max-width: 22em; overflow: hidden; text-overflow: ellipsis; text-align: left; }
.hr-figure { display: flex; flex-wrap: wrap; gap: 0.5em 1.5em; align-items: flex-start; margin: 1em 0; }
.hr-figure .hr-chart { flex: 1 1 780px; min-width: min(780px, 100%); }
.hr-controls { flex: 0 0 12em; font-size: 0.9em; padding-top: 3em; }
.hr-controls:empty { display: none; }
.hr-controls .vega-bind { display: block; margin-bottom: 0.8em; }
.hr-controls .vega-bind-name { display: block; font-weight: 600; margin-bottom: 0.2em; }
.hr-controls select { font-size: 1em; min-width: 8em; }
.hr-chart { margin: 1em 0; } .note { color: #555; font-size: 0.9em; }
.hr-error, .warning { color: #a00000; } .warning { font-size: 0.9em; }
table.hr-table th { cursor: pointer; user-select: none; }
details { margin: 0.5em 0 1em; } summary { cursor: pointer; color: #1a4f8a; }
table.hr-provenance { margin: 0.5em 0 1em 1em; } table.hr-provenance td { white-space: normal; max-width: 70em; }
table.hr-table th[aria-sort="ascending"]::after { content: " ▲"; }
table.hr-table th[aria-sort="descending"]::after { content: " ▼"; }
table[data-chart] tr[data-kernel] { cursor: pointer; }
tr.hr-picked td { background: #fff1b8; }
input.hr-filter { font-size: 0.8em; padding: 0.2em 0.4em; margin-top: 0.5em; width: 18em; }
"""

# Report tables: click a header to sort by it (numbers by their value, not their text), type to filter rows.
TABLE_SCRIPT = """
(function () {
  function cellKey(row, column) {
    const cell = row.cells[column];
    if (!cell) { return ""; }
    const value = cell.dataset.value;
    return value !== undefined && value !== "" ? Number(value) : cell.textContent.trim().toLowerCase();
  }
  function sortTable(table, column, descending) {
    const rows = Array.from(table.rows).slice(1);
    rows.sort((a, b) => {
      const x = cellKey(a, column), y = cellKey(b, column);
      const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return descending ? -order : order;
    });
    rows.forEach(row => row.parentNode.appendChild(row));
    Array.from(table.rows[0].cells).forEach((th, i) => {
      if (i === column) { th.setAttribute("aria-sort", descending ? "descending" : "ascending"); }
      else { th.removeAttribute("aria-sort"); }
    });
  }
  window.hrSortTable = sortTable;
  document.querySelectorAll("table.hr-table").forEach(table => {
    Array.from(table.rows[0].cells).forEach((th, column) => {
      th.title = "sort by " + th.textContent;
      th.addEventListener("click", () => sortTable(table, column, th.getAttribute("aria-sort") === "ascending"));
    });
    const filter = document.createElement("input");
    filter.className = "hr-filter";
    filter.type = "search";
    filter.placeholder = "filter rows";
    filter.addEventListener("input", () => {
      const wanted = filter.value.trim().toLowerCase();
      Array.from(table.rows).slice(1).forEach(row => {
        row.style.display = !wanted || row.textContent.toLowerCase().includes(wanted) ? "" : "none";
      });
    });
    table.parentNode.insertBefore(filter, table);
    if (table.dataset.chart) {  // a click on a kernel's row rings its dots on the chart; a second click clears
      table.addEventListener("click", event => {
        const row = event.target.closest("tr[data-kernel]");
        if (!row) { return; }
        const picked = !row.classList.contains("hr-picked");
        table.querySelectorAll("tr.hr-picked").forEach(other => other.classList.remove("hr-picked"));
        row.classList.toggle("hr-picked", picked);
        const view = (window.hrViews || {})[table.dataset.chart];
        if (view) { view.signal("highlight", picked ? row.dataset.kernel : "").runAsync(); }
      });
    }
  });
})();
"""

SCRIPT = """
(function () {
  function fail(div, message) {
    if (div) { div.dataset.rendered = "failed"; }
    const p = document.createElement("p");
    p.className = "hr-error";
    p.textContent = "Chart failed to render: " + message;
    (div || document.body).appendChild(p);
    console.error("hroofline chart: " + message);
  }
  const charts = Array.from(document.querySelectorAll(".hr-chart"));
  if (typeof vegaEmbed !== "function") { charts.forEach(div => fail(div, "Vega-Embed did not load")); return; }
  window.hrViews = {};
  function keepAspect(aspect) {  // the height follows the width the container gives the chart
    return vg => {
      vg.signals = (vg.signals || []).filter(signal => signal.name !== "height");
      vg.signals.push({name: "height", update: "round(width * " + aspect + ")"});
      delete vg.height;
      return vg;
    };
  }
  Promise.all(charts.map(div => {
    const spec = JSON.parse(document.getElementById(div.dataset.spec).textContent);
    const actions = {export: true, source: false, compiled: false, editor: false};
    const embedOptions = {renderer: div.dataset.renderer, actions: actions};
    if (div.dataset.aspect) { embedOptions.patch = keepAspect(Number(div.dataset.aspect)); }
    return vegaEmbed(div, spec, embedOptions)
      .then(result => { window.hrViews[div.id] = result.view; div.dataset.rendered = "ok"; })
      .catch(error => fail(div, error && error.message ? error.message : String(error)));
  })).then(() => {
    document.body.dataset.charts = charts.filter(d => d.dataset.rendered === "ok").length + "/" + charts.length;
  });
})();
"""


# SVG keeps every mark in the page (crisp, searchable, testable); canvas draws big charts faster.
SVG_MAX_ROWS = 5000


@dataclass(frozen=True)
class ChartBlock:
    """One chart on a page: its DOM id and its Vega-Lite spec."""

    chart_id: str
    spec: dict[str, Any]

    def html(self) -> str:
        spec, aspect = _fill_width(self.spec)
        spec, controls = _controls_beside(spec, f"{self.chart_id}-controls")
        spec_json = json.dumps(spec, allow_nan=False, separators=(",", ":"))
        # In a script element "</script" ends it and "<!--" changes how it is parsed: no raw <, >, & at all.
        spec_json = spec_json.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        rows = _data_rows(self.spec)
        renderer = "svg" if rows <= SVG_MAX_ROWS else "canvas"
        sized = f' data-aspect="{aspect:.4f}"' if aspect else ""
        chart = (
            f'<div class="hr-chart" id="{self.chart_id}" data-spec="{self.chart_id}-spec" '
            f'data-renderer="{renderer}"{sized}></div>'
        )
        beside = f'<div class="hr-controls" id="{self.chart_id}-controls"></div>' if controls else ""
        return (
            f'<div class="hr-figure">{chart}{beside}</div>\n'
            f'<script type="application/json" id="{self.chart_id}-spec">{spec_json}</script>\n'
        )


def _fill_width(spec: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """A chart of one plot (a number for width and height) made to take its container's width; its aspect,
    height over width, for the page to keep. Concatenated charts keep their sizes."""
    width, height = spec.get("width"), spec.get("height")
    if not (isinstance(width, int | float) and isinstance(height, int | float)) or width <= 0:
        return spec, None
    return {**spec, "width": "container", "autosize": {"type": "fit-x", "contains": "padding"}}, height / width


def _controls_beside(spec: dict[str, Any], element_id: str) -> tuple[dict[str, Any], bool]:
    """Bound parameters (a phase selector, ...) drawn in the element beside the chart instead of under it."""
    params = spec.get("params", [])
    bound = [p for p in params if isinstance(p.get("bind"), dict) and "input" in p["bind"]]
    if not bound:
        return spec, False
    moved = [{**p, "bind": {**p["bind"], "element": f"#{element_id}"}} if p in bound else p for p in params]
    return {**spec, "params": moved}, True


def _data_rows(spec: dict[str, Any]) -> int:
    """Rows of inline data in a spec, its layers included."""
    rows = sum(len(values) for values in spec.get("datasets", {}).values())
    rows += len(spec.get("data", {}).get("values", []))
    return rows + sum(_data_rows(layer) for layer in spec.get("layer", []))


def vega_lite_version() -> str:
    """The Vega-Lite major.minor version Altair writes specs for, e.g. '6.4'."""
    import altair as alt  # imported on use: it takes a quarter of a second

    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


BUNDLE_MARK = "vegaEmbed"  # named at the end of every whole bundle: a kept file without it is made again


@cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script, for pages that work offline. vl-convert takes about 2 s to make
    it, the same each time for its version and Vega-Lite's: made once per machine, kept in the cache folder."""
    import vl_convert  # imported on use: it is large and only pages and images need it

    from hroofline.collect.cache_folder import kept_text

    version = vega_lite_version()
    return kept_text(
        f"vega-embed-vl-convert-{vl_convert.__version__}-vega-lite-{version}.js",
        lambda: vl_convert.javascript_bundle(vl_version=version),
        BUNDLE_MARK,
    )


def page(title: str, body: str) -> str:
    """A whole HTML document; ``body`` is trusted HTML built with :func:`escape` and :class:`ChartBlock`."""
    bundle = re.sub(r"</(script)", lambda found: "<\\/" + found.group(1), javascript_bundle(), flags=re.IGNORECASE)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{escape(title)}</title>\n'
        f"<style>{STYLE}</style>\n<script>{bundle}</script>\n</head>\n<body>\n{body}\n"
        f"<script>{SCRIPT}</script>\n<script>{TABLE_SCRIPT}</script>\n</body>\n</html>\n"
    )


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)
