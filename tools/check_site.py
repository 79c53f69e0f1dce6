"""The built documentation site's links, checked offline: every local ``href`` and ``src`` of every page resolves to a
file of the site, and every ``#anchor`` to an element of its page; nothing (stylesheet, script, image) is loaded from
another site. Links to other sites are listed, not fetched.

``python tools/check_site.py [SITE]`` (``make docs`` runs it on site/) prints the problems, one a line, and exits 1
when there is one.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# The attributes that load or lead to something, per tag.
LINKING = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}
# The page a web server shows for a missing address, at any depth: its links are from the site's root.
SERVER_PAGE = "404.html"


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (tag, url)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if values.get(key):
                self.ids.add(values[key] or "")
        wanted = LINKING.get(tag)
        url = values.get(wanted) if wanted else None
        if url is not None:
            self.links.append((tag, url))
        if tag == "img" and values.get("srcset"):
            for candidate in (values["srcset"] or "").split(","):
                if candidate.strip():
                    self.links.append((tag, candidate.split()[0]))


@dataclass
class SiteCheck:
    pages: int = 0
    links: int = 0
    problems: list[str] = field(default_factory=list)
    external: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # url -> pages


def _parse(path: Path, cache: dict[Path, _Page]) -> _Page:
    if path not in cache:
        parser = _Page()
        parser.feed(path.read_text(encoding="utf-8"))
        cache[path] = parser
    return cache[path]


def check_site(site: Path) -> SiteCheck:
    """Every page's local links and anchors; what is wrong, in words, naming the page and the link."""
    site = site.resolve()
    result = SiteCheck()
    parsed: dict[Path, _Page] = {}
    for page in sorted(site.rglob("*.html")):
        result.pages += 1
        name = page.relative_to(site).as_posix()
        for tag, url in _parse(page, parsed).links:
            result.links += 1
            if urlsplit(url).scheme in ("http", "https") or url.startswith("//"):
                result.external[url].add(name)
            problem = _problem(site, page, tag, url, parsed)
            if problem:
                result.problems.append(f"{name}: <{tag}> {url}: {problem}")
    if result.pages == 0:
        result.problems.append(f"{site}: no page (build the site first: make docs)")
    return result


def _problem(site: Path, page: Path, tag: str, url: str, parsed: dict[Path, _Page]) -> str | None:
    """What is wrong with one link of ``page``, or None."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") or url.startswith("//"):
        # a link to another site is fine; a stylesheet, script or image from one needs the network
        return None if tag == "a" else "loaded from the network (the site must work offline)"
    if parts.scheme:
        return None if parts.scheme in ("mailto", "data", "javascript", "tel") else f"a {parts.scheme}: link"
    if parts.path.startswith("/") and page.relative_to(site).as_posix() != SERVER_PAGE:
        return "an absolute path breaks when the site is opened as files"
    base = site if parts.path.startswith("/") else page.parent
    target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else page
    if target.is_dir():
        target = target / "index.html"
    if not target.is_relative_to(site):
        return "outside the site"
    if not target.is_file():
        return "no such file"
    if parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target, parsed).ids:
        return f"no element #{parts.fragment} in {target.relative_to(site).as_posix()}"
    return None


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "site"
    result = check_site(site)
    for url in sorted(result.external):
        print(f"external (not fetched): {url} (on {len(result.external[url])} pages)")
    for problem in result.problems:
        print(problem)
    print(f"{result.pages} pages, {result.links} links: {len(result.problems) or 'no'} broken")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
