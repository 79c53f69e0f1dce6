"""The documentation site: its generated reference is up to date, it builds strict and offline, and every page opens
in a real browser with nothing broken.

The CLI and API reference pages are generated from the parsers and ``hroofline._API`` (tools/docs_reference.py) and
committed: regenerating them must change nothing. The site is built with ``mkdocs build --strict`` (broken links
and anchors between pages fail it), its links checked offline (tools/check_site.py), then served on 127.0.0.1 and
every page loaded in headless Chromium: no request of a page may fail, no image may be broken, no link may lead
to a missing page or anchor, and nothing may be logged to the console. The search must work from the file
system, with no server. Without the docs extra (mkdocs, Material, mkdocstrings) the site's tests are skipped;
HROOFLINE_REQUIRE_DOCS=1 (CI) turns that into a failure, as HROOFLINE_REQUIRE_BROWSER=1 does for Chromium.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_browser import _chromium
from tools import docs_reference
from tools.check_site import check_site

DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")


def test_generated_reference_is_up_to_date(tmp_path: Path) -> None:
    """The committed CLI and API pages are what the parsers and the API make now, byte for byte, and no page of a
    command that is gone is left."""
    written = docs_reference.write(tmp_path)
    problems = []
    for fresh in written:
        relative = fresh.relative_to(tmp_path)
        committed = REPO / "docs" / relative
        if not committed.is_file():
            problems.append(f"docs/{relative.as_posix()} is missing")
        elif committed.read_bytes() != fresh.read_bytes():
            source = relative.stem if relative.parent == docs_reference.CLI_DIR else "the API"
            about = f"hroofline {source}" if source not in ("index", "the API") else source
            problems.append(f"docs/{relative.as_posix()} is stale ({about} changed)")
    cli = REPO / "docs" / docs_reference.CLI_DIR
    left = sorted(set(cli.glob("*.md")) - {REPO / "docs" / p.relative_to(tmp_path) for p in written})
    problems += [f"docs/{p.relative_to(REPO / 'docs').as_posix()} has no command any more" for p in left]
    assert not problems, "; ".join(problems) + f": run `{docs_reference.REGENERATE}` and commit docs/reference"


def test_generated_pages_say_what_help_says() -> None:
    """A command's page holds its options, their defaults and its examples (checked on one command, by hand)."""
    page = docs_reference.command_page("compare")
    assert page.startswith("# hroofline compare\n")
    assert "| `-n N`, `--top N` | `8` | gains/regressions shown (8) |" in page
    assert "| `--level {l1,l2,hbm}` | `hbm` | memory level of the chart |" in page
    assert "```text\nhroofline compare deepcam-fp32 deepcam-amp-o1 " in page
    assert "usage: hroofline compare [-h]" in page
    assert "[`compare`](compare.md)" in docs_reference.index_page()


def _require_docs_extra() -> None:
    missing = [name for name in DOCS_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return
    reason = f"needs the docs extra ({', '.join(missing)} missing; `make docs` installs it)"
    if os.environ.get("HROOFLINE_REQUIRE_DOCS") == "1":
        pytest.fail(reason + "; HROOFLINE_REQUIRE_DOCS=1 makes this a failure")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `make docs` builds it (strict), into a temporary folder."""
    _require_docs_extra()
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_site_links_resolve_offline(site: Path) -> None:
    result = check_site(site)
    assert result.problems == []
    assert result.pages >= len(docs_reference.pages())  # each generated page, and the written ones
    for path in docs_reference.pages():
        assert (site / path.with_suffix(".html")).is_file(), path


def test_site_checker_finds_broken_links(tmp_path: Path) -> None:
    """The checker itself: a missing image, a missing anchor, a missing page and a script from the network."""
    (tmp_path / "other.html").write_text('<h1 id="here">x</h1>')
    (tmp_path / "index.html").write_text(
        '<a href="other.html#here">ok</a> <a href="other.html#gone">anchor</a> <a href="nowhere.html">page</a>'
        '<img src="missing.png"> <script src="https://cdn.example.com/x.js"></script> <a href="https://a.org">ok</a>'
    )
    problems = check_site(tmp_path).problems
    assert len(problems) == 4, problems
    assert any("#gone" in p and "no element" in p for p in problems)
    assert any("nowhere.html" in p for p in problems) and any("missing.png" in p for p in problems)
    assert any("network" in p for p in problems)


# Loads every page of the site into an iframe, one after the other, and writes what it found into #result:
# per page, its title, whether it has a heading, its broken images, its element ids and its links.
HARNESS = """<!doctype html><html><head><link rel="icon" href="data:,"></head>
<body><pre id="result">running</pre><script>
const pages = %s;
function loaded(frame, url) {
  return new Promise(resolve => { frame.onload = resolve; frame.src = url; });
}
async function visit(frame, url) {
  await loaded(frame, url);
  const doc = frame.contentDocument;
  const images = [...doc.images];
  await Promise.all(images.map(img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })));
  return {
    title: doc.title,
    heading: !!doc.querySelector("article h1"),
    broken: images.filter(img => img.naturalWidth === 0).map(img => img.getAttribute("src")),
    ids: [...doc.querySelectorAll("[id]")].map(e => e.id),
    links: [...doc.querySelectorAll("a[href]")].map(a => a.href),
  };
}
(async () => {
  const frame = document.createElement("iframe");
  document.body.appendChild(frame);
  const found = {};
  for (const page of pages) found[new URL(page, location.href).href] = await visit(frame, page);
  const extra = {};  // links to files that are not pages (images, downloads): they must load
  for (const info of Object.values(found)) for (const link of info.links) {
    const target = link.split("#")[0];
    if (target.startsWith(location.origin) && !(target in found) && !(target in extra))
      extra[target] = (await fetch(target)).status;
  }
  document.getElementById("result").textContent = JSON.stringify({found, extra});
})().catch(e => { document.getElementById("result").textContent = "error: " + e; });
</script></body></html>
"""


class _Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves the site and records the status of every request."""

    requests: list[tuple[str, int]]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.requests.append((self.path, int(code)))

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test reads self.requests
        pass


@pytest.fixture
def served(site: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    requests: list[tuple[str, int]] = []
    handler = type("Handler", (_Recorder,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requests
    finally:
        server.shutdown()
        server.server_close()


def _dump_dom(url: str, profile: Path) -> subprocess.CompletedProcess[str]:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=60000",
        "--dump-dom",
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def test_every_page_opens_in_chromium(site: Path, served: tuple[str, list[tuple[str, int]]], tmp_path: Path) -> None:
    root, requests = served
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name != "404.html")
    (site / "__check__.html").write_text(HARNESS % json.dumps(pages))
    try:
        done = _dump_dom(root + "__check__.html", tmp_path / "profile")
    finally:
        (site / "__check__.html").unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    result = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert result and result[1].startswith("{"), (result[1] if result else done.stdout)[-2000:]
    report = json.loads(result[1].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    found, extra = report["found"], report["extra"]
    assert len(found) == len(pages)

    problems = sorted({f"request {path}: {code}" for path, code in requests if code >= 400})
    for url, info in found.items():
        page = url.removeprefix(root)
        problems += [f"{page}: no heading"] if not info["heading"] else []
        problems += [f"{page}: broken image {src}" for src in info["broken"]]
        for link in info["links"]:
            target, _, anchor = link.partition("#")
            if not target.startswith(root):
                continue
            if target in found and anchor and anchor not in found[target]["ids"]:
                problems.append(f"{page}: link to {link.removeprefix(root)}: no such anchor")
            elif target not in found and extra.get(target) != 200:
                problems.append(f"{page}: link to {link.removeprefix(root)}: {extra.get(target)}")
    problems += [f"console: {line}" for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not problems, "\n".join(problems)


def test_search_works_from_the_file_system(site: Path, tmp_path: Path) -> None:
    """Opened as files (no server), the search finds the command reference: the offline plugin's index and the
    worker shim kept in docs/assets."""
    done = _dump_dom((site / "index.html").as_uri() + "?q=roofline", tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    hits = re.findall(r'class="md-search-result__item"', done.stdout)
    assert len(hits) > 0, done.stdout[-3000:]
