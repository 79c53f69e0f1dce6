"""The guides' shell sessions (docs/guides/*.md: `$ command` lines with the output they show) run as the README's
do (tests/test_readme.py's reading and comparison), in the folder a reader has after `make demo`, each guide in
order in a copy of it: what a command prints must be what the guide shows (output measured on this machine's CPU
without its numbers). Here, not in make test: the demo and the profiles take minutes. The commands not run are
listed with why, as the README's are. The notebook guide's Python runs as a notebook here too (21 s)."""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests import test_readme
from tests.conftest import REPO
from tests.test_readme import (
    NOTEBOOK_GUIDE,
    _Tables,
    empty_columns,
    readme_notebook_cells,
    readme_steps,
    run_step,
    why_not_run,
)

after_demo, reader_env = test_readme.after_demo, test_readme.reader_env  # the README test's fixtures

GUIDES = sorted((REPO / "docs" / "guides").glob("*.md"))


# Guide commands not run, each with why (besides the README's, tests/test_readme.why_not_run).
MEASURED_ELSEWHERE = (
    "profiles this CPU into the default store with ceilings cached in ~/.cache, as the guide shows them; here the "
    "store and the cache are the test's own, and its speedups are this machine's (tests/test_cpu_traces.py and "
    "tests/test_trace_profile.py run the trace backend)"
)
NOT_RUN = {
    "hroofline profile --backend trace --arch resnet18 --gpu cpu": MEASURED_ELSEWHERE,
    "hroofline compare resnet18-fp32-cpu-b2-trace resnet18-amp-bf16-cpu-b2-trace": "compares the two profiles above",
    "hroofline profile --gpu cpu --backend trace --script": MEASURED_ELSEWHERE,
}


def guide_why_not_run(command: str) -> str | None:
    for start, reason in NOT_RUN.items():
        if command.startswith(start):
            return reason
    return why_not_run(command)


def guide_sessions(path: Path) -> list:
    """The guide's `$ ` commands (its ```sh blocks are what to type, not sessions with their output)."""
    steps = readme_steps(path.read_text(encoding="utf-8"), prose_checked=False)
    text = path.read_text(encoding="utf-8").splitlines()
    sessions = [step for step in steps if text[step.line - 1].startswith("$ ")]
    for step in sessions:  # a command continued on the lines below it (a quoted query): they are not output
        while step.expected and not complete(step.command):
            step.command += " " + step.expected.pop(0).strip()
    return sessions


def complete(command: str) -> bool:
    try:
        shlex.split(command)
    except ValueError:  # no closing quotation
        return False
    return True


@pytest.mark.parametrize("guide", GUIDES, ids=[path.stem for path in GUIDES])
def test_each_guide_prints_what_it_shows(guide: Path, after_demo: Path, reader_env: dict, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(after_demo, work, symlinks=True)
    (tmp_path / "shared").symlink_to((after_demo.parent / "shared").resolve())
    assignments, failures, run = "", [], 0
    for step in guide_sessions(guide):
        words = shlex.split(step.command, comments=True)
        if len(words) == 1 and "=" in words[0] and not words[0].startswith("-"):
            assignments += f"{step.command}; "  # N=...: the guide's shell keeps it for the next commands
            continue
        if guide_why_not_run(step.command):
            continue
        run += 1
        failure = run_step(step, str(guide.relative_to(REPO)), work, reader_env, shell=assignments)
        if failure:
            failures.append(failure)
    assert not failures, f"{len(failures)} of {run} commands of {guide.name} differ:\n\n" + "\n\n".join(failures)


def test_the_guide_commands_left_out_are_the_trace_snippets() -> None:
    """What the guides show and this test does not run is said here: the commands on the trace the README's
    torch.profiler snippet makes (tests/test_readme.py runs the snippet and those commands) and the CPU profiles
    whose output names the default store and cache (NOT_RUN), nothing else."""
    left_out = sorted(
        (guide.name, guide_why_not_run(step.command))
        for guide in GUIDES
        for step in guide_sessions(guide)
        if guide_why_not_run(step.command)
    )  # by guide and reason, not line: a guide's lines move as it is edited
    snippet = "the trace snippet's test runs it"
    assert left_out == sorted(
        [("traces.md", snippet)] * 2
        + [("traces.md", MEASURED_ELSEWHERE)] * 3
        + [("traces.md", "compares the two profiles above")]
    )


def test_the_notebook_guide_runs_as_a_notebook_whose_html_export_works_offline(
    after_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executed with nbclient, exported with nbconvert, opened in Chromium with the network cut: each chart
    renders (its page inside the export, offline), no output is longer than 60 lines, no table shows a column
    that says nothing, and Tab completion (`dir(hroofline)`) offers the API."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    from tests.test_browser import _chromium, _open
    from tests.test_notebook import chart_page

    _chromium()  # skip or fail (HROOFLINE_REQUIRE_BROWSER=1) before a minute of notebook, not after
    kernels = tmp_path / "jupyter" / "kernels" / "hroofline-test"  # this interpreter, whatever is installed
    kernels.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps({**spec, "display_name": "hroofline test"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    cells = [*readme_notebook_cells(NOTEBOOK_GUIDE.read_text()), "dir(hroofline)"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells])
    # run in the reader's folder: demo-runs/, samples/ and ../shared
    NotebookClient(notebook, timeout=600, kernel_name="hroofline-test").execute(cwd=str(after_demo))
    export = tmp_path / "readme.html"
    export.write_text(HTMLExporter().from_notebook_node(notebook)[0])

    charts: list[str] = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/plain", output.get("text", ""))
            shown = data.get("text/html", "")
            assert output.get("output_type") != "error", f"{cell.source}: {output.get('evalue')}"
            lines = shown.count("<tr") if shown else text.count("\n") + 1  # a notebook shows the HTML when there is
            assert lines <= 60, f"{cell.source}: {lines} lines"
            if shown.startswith("<iframe"):
                charts.append(chart_page(shown))
            parser = _Tables()
            parser.feed(shown)
            for table in parser.tables:
                assert not empty_columns(table), f"{cell.source}: columns saying nothing: {empty_columns(table)}"
    assert len(charts) == 1  # run.chart(...)
    listed = ast.literal_eval(notebook.cells[-1].outputs[0]["data"]["text/plain"])  # dir(hroofline)
    assert {"load", "predict", "compare", "report", "import_run"} <= set(listed)

    offline = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--dump-dom"]
    opened = _open(export.resolve().as_uri(), tmp_path / "profile-export", *offline)
    assert opened.returncode == 0 and "Error loading script" not in opened.stdout + opened.stderr
    for number, page in enumerate(charts):
        path = tmp_path / f"chart-{number}.html"
        path.write_text(page)
        shown = _open(path.resolve().as_uri(), tmp_path / f"profile-{number}", *offline)
        assert shown.returncode == 0 and 'data-rendered="ok"' in shown.stdout, shown.stderr[-1000:]
        assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
