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
from dataclasses import dataclass
from pathlib import Path

import pytest

from hroofline.cli.main import COMMANDS
from tests.conftest import REPO
from tests.test_browser import headless_chromium
from tools import docs_reference
from tools.check_site import check_site

DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")
# For every page of the site to load in Chromium (about 10 s here; the machine may be busy with other tests).
PAGES_TIMEOUT_S = 150
FRAMES = 4  # pages loaded at once by the harness


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
            problems.append(f"docs/{relative.as_posix()} is stale ({_source(relative)} changed)")
    cli = REPO / "docs" / docs_reference.CLI_DIR
    left = sorted(set(cli.glob("*.md")) - {REPO / "docs" / p.relative_to(tmp_path) for p in written})
    problems += [f"docs/{p.relative_to(REPO / 'docs').as_posix()} has no command any more" for p in left]
    assert not problems, "; ".join(problems) + f": run `{docs_reference.REGENERATE}` and commit docs/reference"


def _source(page: Path) -> str:
    """What a generated page is made from."""
    if page == docs_reference.API_PAGE:
        return "hroofline._API"
    return "the list of commands" if page.stem == "index" else f"the parser of `hroofline {page.stem}`"


def test_nav_lists_every_command() -> None:
    """mkdocs.yml's nav names the command pages by hand: in the order of `hroofline --help`, none missing."""
    nav = re.findall(r"reference/cli/([\w-]+)\.md", (REPO / "mkdocs.yml").read_text())
    assert nav == ["index", *COMMANDS], "mkdocs.yml: Reference > Commands must list reference/cli/COMMAND.md"


def test_generated_pages_say_what_help_says() -> None:
    """A command's page holds its options, their defaults and its examples (checked on one command, by hand)."""
    page = docs_reference.command_page("compare")
    assert page.startswith("# hroofline compare\n")
    assert "| `-n N`, `--top N` | `8` | gains/regressions shown (8) |" in page
    assert "| `--level {l1,l2,hbm}` | `hbm` | memory level of the chart |" in page
    assert "```text\nhroofline compare deepcam-fp32 deepcam-amp-o1 " in page
    assert "usage: hroofline compare [-h]" in page
    assert "[`compare`](compare.md)" in docs_reference.index_page()


def test_rest_markup_becomes_markdown() -> None:
    """The API reference's docstring rewrite (tools/griffe_rest.py): roles as code, "::" as a colon."""
    pytest.importorskip("griffe")
    from tools.griffe_rest import rest_to_markdown

    assert rest_to_markdown("a :class:`~hroofline.api.face.RunView` or :func:`hroofline.load`") == (
        "a `RunView` or `hroofline.load`"
    )
    assert rest_to_markdown("aliases: fw, ...)::\n\n    code\n") == "aliases: fw, ...):\n\n    code\n"
    assert rest_to_markdown("it does nothing ::\n\n    code\n") == "it does nothing\n\n    code\n"
    assert rest_to_markdown("a::b, and ``x``") == "a::b, and ``x``"


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


# Loads every page of the site into iframes, FRAMES pages at a time (a page waits on its files and scripts more
# than on the CPU), and posts what it found to the server: per page, whether it has a heading, its broken images,
# its element ids and its links; then the status of each link to a file that is not a page. It posts each page's
# address before loading it, so that a hang names its page.
HARNESS = """<!doctype html><html><head><link rel="icon" href="data:,"></head><body><script>
const pages = %s;
const post = (what, body) => fetch("/__harness__/" + what, {method: "POST", body: body});
function loaded(frame, url) {
  return new Promise(resolve => { frame.onload = resolve; frame.src = url; });
}
async function visit(frame, url) {
  await post("progress", url);
  await loaded(frame, url);
  const doc = frame.contentDocument;
  const images = [...doc.images];
  images.forEach(img => { img.loading = "eager"; });  // a lazy image out of the frame's view would never load
  await Promise.all(images.map(img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })));
  return {
    heading: !!doc.querySelector("article h1"),
    broken: images.filter(img => img.naturalWidth === 0).map(img => img.getAttribute("src")),
    ids: [...doc.querySelectorAll("[id]")].map(e => e.id),
    links: [...doc.querySelectorAll("a[href]")].map(a => a.href),
  };
}
async function worker(queue, found) {
  const frame = document.createElement("iframe");
  frame.width = 1280; frame.height = 800;
  document.body.appendChild(frame);
  for (let page = queue.shift(); page !== undefined; page = queue.shift())
    found[new URL(page, location.href).href] = await visit(frame, page);
}
(async () => {
  const found = {}, queue = [...pages];
  await Promise.all(Array.from({length: %d}, () => worker(queue, found)));
  const extra = {};
  for (const info of Object.values(found)) for (const link of info.links) {
    const target = link.split("#")[0];
    if (target.startsWith(location.origin) && !(target in found) && !(target in extra))
      extra[target] = (await fetch(target)).status;
  }
  await post("result", JSON.stringify({found, extra}));
})().catch(e => post("result", JSON.stringify({error: String(e)})));
</script></body></html>
"""


class _Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves the site, records the status of every request, and takes the harness's posts."""

    requests: list[tuple[str, int]]
    posts: dict[str, str]
    done: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        what = self.path.removeprefix("/__harness__/")
        self.posts[what] = body
        self.send_response(204)
        self.end_headers()
        if what == "result":
            self.done.set()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if not self.path.startswith("/__harness__/"):
            self.requests.append((self.path, int(code)))

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test reads self.requests
        pass


@dataclass
class Served:
    root: str
    requests: list[tuple[str, int]]
    posts: dict[str, str]
    done: threading.Event


@pytest.fixture
def served(site: Path) -> Iterator[Served]:
    """The site on 127.0.0.1, as a web server would serve it."""
    served = Served("", [], {}, threading.Event())
    handler = type("Handler", (_Recorder,), {"requests": served.requests, "posts": served.posts, "done": served.done})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    served.root = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def test_every_page_opens_in_chromium(site: Path, served: Served, tmp_path: Path) -> None:
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name != "404.html")
    (site / "__harness__.html").write_text(HARNESS % (json.dumps(pages), FRAMES))
    log = tmp_path / "chromium.log"
    with log.open("w") as stderr:
        browser = subprocess.Popen(
            headless_chromium(tmp_path / "profile", served.root + "__harness__.html"),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            finished = served.done.wait(timeout=PAGES_TIMEOUT_S)
        finally:
            browser.terminate()
            try:
                browser.wait(timeout=10)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait()
            (site / "__harness__.html").unlink()
    assert finished, f"the pages did not all load in {PAGES_TIMEOUT_S} s: last {served.posts.get('progress')}"
    report = json.loads(served.posts["result"])
    assert "error" not in report, report
    found, extra = report["found"], report["extra"]
    assert len(found) == len(pages)

    root = served.root
    problems = sorted({f"request {path}: {code}" for path, code in served.requests if code >= 400})
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
    problems += [f"console: {line}" for line in log.read_text().splitlines() if ":CONSOLE" in line]
    assert not problems, "\n".join(problems)


def test_search_works_from_the_file_system(site: Path, tmp_path: Path) -> None:
    """Opened as files (no server), the search finds the command reference: the offline plugin's index and the
    worker shim kept in docs/assets."""
    url = (site / "index.html").as_uri() + "?q=roofline"
    command = headless_chromium(tmp_path / "profile", "--virtual-time-budget=30000", "--dump-dom", url)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    hits = re.findall(r'class="md-search-result__item"', done.stdout)
    assert len(hits) > 0, done.stdout[-3000:]
