"""The README runs top to bottom after `make demo`, as it says: every shell command in it that needs no GPU is run in
order, in a fresh working folder and store, and what it prints is compared with what the README shows. Output of
runs measured on this machine's CPU is compared without its numbers (with their units), and its tables' rows are
only counted, since its times, and so what ranks first, are this machine's: its words, names and columns must be
the README's; everything else (imports of recorded files, predictions) must print what the README shows, to the last
digit. The README's torch.profiler snippet is run too, and its trace imported and read as the README says; the
notebook guide's Python example (docs/guides/notebook.md) runs as a notebook. What the reader runs, not every
variant: the guides' sessions (docs/guides/*.md) run in tests/figures/test_guides.py (make check-figures). The
`hroofline` commands run through the CLI's main() in the test's process, as `make demo` runs its own, the set-up's
`hroofline runs` as the program on PATH; the chart command the README says `make demo` runs is the demo's own."""

from __future__ import annotations

import ast
import contextlib
import html as html_module
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED, main_status, need

README = REPO / "README.md"
NOTEBOOK_GUIDE = REPO / "docs" / "guides" / "notebook.md"  # the Python API's example, run as a notebook here

# Commands the test does not run, each with why.
NOT_RUN = {
    "make demo": "the fixture ran it",
    "make test": "this is it",
    "make bench": "benchmarks time this machine; CI runs the tests",
    "make check-figures": "minutes of recomputed figures; CI runs it beside make test",
    "make docs": "tests/test_docs.py builds the site and opens it in Chromium",
    ". .venv/bin/activate": "the test's PATH starts with the virtual environment",
    "export HROOFLINE_STORE=demo-runs": "the test's environment sets it",
}
# Files that stand for the user's own (their script on a GPU), and the runs made of them: commands naming them are
# not run.
PLACEHOLDERS = {"train.py"}
# The trace the README's torch.profiler snippet writes, and the run made of it: those commands are run by
# test_the_readme_trace_snippet_makes_a_trace_that_imports, after the snippet.
SNIPPET_TRACE = {"trace.json", "my-step"}
# The set-up's check that `hroofline` is on PATH: run as the program there, in bash (the other commands run through
# the CLI's main() in the test's process: in_this_process).
ON_PATH = "hroofline runs"
# README commands that `make demo` runs, as the README says ("`make demo` draws it"): the fixture checks that the demo
# printed each as its command line, and does not run them a second time.
RUN_BY_THE_DEMO = (
    "hroofline chart deepcam-amp-o1 --phase forward --ceilings v100-yang-ert --out docs/deepcam-amp-o1-forward.png",
)
# Runs made on this machine's CPU: their times (and the order of what they rank) are this machine's.
MEASURED_HERE = ("resnet18-cpu", "train_tiny_cnn-cpu", "--gpu cpu")
SKIPPED_LINE = "..."  # in an output block: lines left out


@dataclass
class Step:
    line: int  # of the command in README.md
    command: str
    expected: list[str] | None  # the output the README shows, or None where it shows none


def test_the_readme_is_a_short_guide() -> None:
    """A guide, not a lab notebook: at most 300 lines (issue 48); reference and figures live in docs/."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail to docs/ (at most 300)"


def readme_steps(text: str, prose_checked: bool = True) -> list[Step]:
    """The shell commands of the README in order, each with the output shown after it: in a block of `$ `
    lines, the lines up to the next `$ `; for a ```sh block, the plain block right after it (its last
    command's output), if any. ``prose_checked``: fail on a command in the prose (a fence out of place; the
    guides' prose names commands)."""
    lines = text.splitlines()
    blocks: list[tuple[int, str, list[str]]] = []  # (first line number, language, lines)
    start, language, prose = None, "", []
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if start is None:
                start, language = number, line[3:].strip()
            else:
                blocks.append((start, language, lines[start : number - 1]))
                start = None
        elif start is None:
            prose.append(line)
    assert start is None, f"README.md:{start}: a code block that is never closed"
    outside = [line for line in prose if re.match(r"(\$ )?hroofline [a-z]+ .*--[a-z]", line)]
    assert not (outside and prose_checked), f"commands outside code blocks (a fence out of place?): {outside[:3]}"
    steps: list[Step] = []
    for index, (first, language, body) in enumerate(blocks):
        if any(line.startswith("$ ") for line in body):
            shown: list[Step] = []
            for offset, line in enumerate(body):
                if line.startswith("$ "):
                    shown.append(Step(first + 1 + offset, line[2:], []))
                elif shown and shown[-1].expected is not None:
                    shown[-1].expected.append(line)
            for step in shown:  # blank lines between a command's output and the next command are not output
                while step.expected and not step.expected[-1].strip():
                    step.expected.pop()
                steps.append(Step(step.line, step.command, step.expected or None))
        elif language == "sh":
            commands: list[Step] = []
            continued = False
            for offset, line in enumerate(body):
                if continued:
                    commands[-1].command += " " + line.strip().removesuffix("\\").strip()
                elif line.strip() and not line.startswith((" ", "#")):
                    commands.append(Step(first + 1 + offset, line.removesuffix("\\").strip(), None))
                continued = line.endswith("\\")
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            if commands and following and following[1] == "" and following[0] == first + len(body) + 3:
                commands[-1].expected = following[2]  # a plain block one blank line below: its output
            steps.extend(commands)
    return steps


def why_not_run(command: str) -> str | None:
    words = shlex.split(command, comments=True)
    if PLACEHOLDERS & set(words):
        return "stands for the user's own files"
    if SNIPPET_TRACE & set(words):
        return "the trace snippet's test runs it"
    if command in RUN_BY_THE_DEMO:
        return "make demo runs it (the fixture checks that it did)"
    if words[0] == "ncu":
        return "needs a GPU and ncu"
    if command.startswith("hroofline doctor") and "--report" not in command:
        return "needs a GPU and ncu"
    for start, reason in NOT_RUN.items():
        if command.startswith(start):
            return reason
    return None


# A number as the CLI prints one, with its SI unit: 47.5, 1,024, 5.05 ms, 183 GFLOP/s, 41.5%
# (not the digits of a name: resnet18, fp32, -b2, ai_l1)
NUMBER = re.compile(r"(?<![\w.])[+-]?\d[\d,]*(?:\.\d+)?(?: ?[kMGTPmuµn]?(?:FLOP/s|FLOP|B/s|B|s)\b)?%?(?!\w)")
TABLE_HEADER = re.compile(r"(^|\s)time_s(\s|$)")


def without_numbers(lines: list[str]) -> list[str]:
    """Lines of output measured here with what depends on this machine taken out: numbers (with their units),
    the CPU's name, the spacing that their widths give a table, and which ops or layers a table's rows name
    (what ranks first is this machine's): a row is its count of cells, a README row cut short with ``...``
    any row."""
    shown, in_table = [], False
    for line in lines:
        line = re.sub(r"roofs: .*?, measured", "roofs: <this CPU>, measured", line)
        header = bool(TABLE_HEADER.search(line))
        in_table = header or (in_table and bool(line.strip()) and not line.startswith("what to change"))
        if in_table and not header and line.strip() != SKIPPED_LINE:
            cells = len(re.split(r" {2,}", line.strip()))
            shown.append(f"<a row of {SKIPPED_LINE if SKIPPED_LINE in line else cells} cells>")
        else:
            shown.append(" ".join(NUMBER.sub("#", line).split()))
    return shown


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line for line, where an expected line of ``...`` stands for any number of lines, and ``...`` in a line
    for any text (a long line or a table's right-hand columns, left out)."""
    if not expected:
        return not actual
    if expected[0].strip() == SKIPPED_LINE:
        return any(matches(expected[1:], actual[skip:]) for skip in range(len(actual) + 1))
    pattern = ".*".join(re.escape(part) for part in expected[0].rstrip().split(SKIPPED_LINE))
    return bool(actual) and re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(expected[1:], actual[1:])


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder as the README's reader has it after `make demo`: the demo's store, the samples, and
    ../shared beside it (a link)."""
    need(SHARED / "fixtures" / "deepcam")
    root = tmp_path_factory.mktemp("readme")
    (root / "shared").symlink_to(SHARED.resolve())
    work = root / "work"
    (work / "docs").mkdir(parents=True)
    (work / "samples").symlink_to(REPO / "samples")
    overrides = [f"DEMO_STORE={work / 'demo-runs'}", f"DEMO_REPORT={work / 'demo-report'}"]
    chart = work / "docs" / "deepcam-amp-o1-forward.png"  # where the README's reader's make demo draws it
    overrides += [f"SHARED={root / 'shared'}", f"README_CHART={chart}"]
    overrides += [f"BIN={Path(sys.executable).parent}"]  # this interpreter's environment, set up as it is:
    make = ["make", "-C", str(REPO), "-o", ".venv/.installed", "demo", *overrides]  # no pip install mid-test
    demo = subprocess.run(make, capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    ran = demo.stdout.replace(f"{work}/", "").replace(" --store demo-runs", "").splitlines()
    for command in RUN_BY_THE_DEMO:  # in the reader's folder, the demo's store the default: the README's line
        assert f"$ {command}" in ran, f"make demo no longer runs the README's `{command}`"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "make demo drew no PNG"
    return work


@pytest.fixture(scope="module")
def reader_env() -> dict[str, str]:
    """The README's reader's shell after its set-up lines: hroofline on PATH, the demo's store the default."""
    env = {**os.environ, "HROOFLINE_STORE": "demo-runs", "COLUMNS": "200"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


# Shell syntax (pipes, redirections, variables, globs): a command holding any runs in bash, not in this process.
SHELL_SYNTAX = re.compile(r"[|&;<>$`*?(){}]")


def in_this_process(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``hroofline ARGS`` run through the CLI's main() in this process, in ``cwd`` with ``env``, as the shell would
    run the program: its exit status, stdout and stderr. One process for all of a page's commands, as `make demo`
    runs its own (hroofline/cli/demo.py): a program started anew imports PyTorch and pandas again, 0.5 to 2 s a
    command, which tests the start-up of a program, not what the page shows (test_the_readme_set_up_puts_hroofline
    _on_path runs the program on PATH)."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main_status(shlex.split(command, comments=True)[1:])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def run_step(
    step: Step,
    where: str,
    cwd: Path,
    env: dict[str, str],
    measured: tuple[str, ...] = MEASURED_HERE,
    shell: str = "",
    in_process: bool = False,
) -> str | None:
    """Runs a page's command as its reader would (after ``shell``: the page's earlier variables) and compares what it
    prints with what the page shows: None, or what differs. Output of a command naming one of ``measured`` (runs made
    on this machine) is compared without its numbers. ``in_process``: an ``hroofline`` command with no shell syntax
    runs through main() here (:func:`in_this_process`), any other in bash."""
    if in_process and not shell and step.command.startswith("hroofline ") and not SHELL_SYNTAX.search(step.command):
        done = in_this_process(step.command, cwd, env)
    else:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", f"{shell}{step.command}"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    where = f"{where}:{step.line}: {step.command}"
    if done.returncode != 0:
        return f"{where}\n  exit {done.returncode}: {done.stderr[-600:]}"
    if step.expected is None:
        return None
    expected, actual, notes = step.expected, done.stdout.rstrip("\n").splitlines(), done.stderr.splitlines()
    if any(name in step.command for name in measured):
        expected, actual, notes = without_numbers(expected), without_numbers(actual), without_numbers(notes)
    expected = [line for line in expected if line.rstrip() not in notes]  # notes the page shows (stderr)
    if not matches(expected, actual):
        shown, printed = "\n".join(expected), "\n".join(actual)
        return f"{where}\n  the page shows:\n{shown}\n  it prints:\n{printed}"
    return None


@pytest.fixture(scope="module")
def readme_ran(after_demo: Path, reader_env: dict[str, str]) -> tuple[int, list[str]]:
    """The README's commands run in order in the reader's folder after `make demo`: how many ran, and what differed
    from what the README shows. The runs they make stay in the demo's store (the SI test reads them)."""
    run, failures = 0, []
    for step in readme_steps(README.read_text()):
        if why_not_run(step.command):
            continue
        run += 1
        failure = run_step(step, "README.md", after_demo, reader_env, in_process=step.command != ON_PATH)
        if failure:
            failures.append(failure)
    return run, failures


def test_the_readme_runs_in_order_and_prints_what_it_shows(readme_ran: tuple[int, list[str]]) -> None:
    run, failures = readme_ran
    assert not failures, f"{len(failures)} of {run} README commands differ:\n\n" + "\n\n".join(failures)
    assert run >= 10, f"only {run} README commands ran: is the README parsed as it is written?"


def test_the_commands_left_out_are_the_ones_that_need_a_gpu_or_the_users_files() -> None:
    """What is not run is said here, so that a README command is never left out by accident: the set-up lines, the
    script on a GPU, and the snippet's trace (run by its own test)."""
    left_out = {step.command: why_not_run(step.command) for step in readme_steps(README.read_text())}
    left_out = {command: reason for command, reason in left_out.items() if reason}
    programs = {shlex.split(command, comments=True)[0] for command in left_out}
    assert programs <= {"make", "hroofline", ".", "export"}
    assert len(left_out) <= 14, left_out


def readme_notebook_cells(text: str) -> list[str]:
    """The notebook guide's Python API example (docs/guides/notebook.md) as a user types it into a notebook: one
    cell per statement (a comment above a statement goes with it), so that each expression's value is displayed."""
    start = text.index('```python\nimport hroofline\n\nrun = hroofline.load("resnet18-cpu"')
    source = text[start + len("```python\n") : text.index("\n```", start)]
    lines = source.splitlines()
    cells, begin = [], 0
    for node in ast.parse(source).body:
        cells.append("\n".join(lines[begin : node.end_lineno]).strip())
        begin = node.end_lineno or begin
    return cells


class _Tables(HTMLParser):
    """The tables of an HTML fragment: each a list of rows, each a list of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None


NOTHING = re.compile(r"(|-|nan|NaN|None|<NA>|0|0\.0+%?|0 \S+)")  # a cell that says nothing: empty or zero


def empty_columns(table: list[list[str]]) -> list[str]:
    """The header of each column whose every body cell is empty or zero."""
    header, body = table[0], [row for row in table[1:] if len(row) == len(table[0])]
    if not body:
        return []
    return [
        header[i] for i in range(1, len(header)) if header[i] and all(NOTHING.fullmatch(row[i]) for row in body)
    ]  # column 0 is the index


def readme_trace_snippet(text: str) -> tuple[str, list[str]]:
    """The README's torch.profiler snippet (its ```python block that writes trace.json) and the shell commands of
    the ```sh block right after it, which read that trace."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S)
    index = next(i for i, (language, body) in enumerate(blocks) if language == "python" and "torch.profiler" in body)
    language, commands = blocks[index + 1]
    assert language == "sh" and "trace.json" in commands, "the README's trace snippet is not followed by its commands"
    lines = [line.split("  #")[0].strip() for line in commands.splitlines()]
    return blocks[index][1], [line for line in lines if line and not line.startswith("#")]


def test_the_readme_trace_snippet_makes_a_trace_that_imports(tmp_path: Path, reader_env: dict[str, str]) -> None:
    """Issue 48: a CPU trace of a small model made with the README's own torch.profiler snippet imports and gives
    `summary`, `top` and a chart. The snippet runs on the CPU here, as a reader without a GPU runs it, then the
    README's commands after it, in order, into a fresh store (`hroofline import trace.json --gpu cpu` takes a trace
    recorded on the CPU alone, with this machine's ceilings as its roofs)."""
    snippet, commands = readme_trace_snippet(README.read_text())
    (tmp_path / "snippet.py").write_text(snippet)
    env = {**reader_env, "HROOFLINE_STORE": str(tmp_path / "runs"), "CUDA_VISIBLE_DEVICES": ""}
    made = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    assert (tmp_path / "trace.json").stat().st_size > 10_000
    assert [shlex.split(command)[:2] for command in commands] == [
        ["hroofline", "import"],
        ["hroofline", "summary"],
        ["hroofline", "top"],
        ["hroofline", "chart"],
    ], commands
    printed = {}
    for command in commands:  # as the README test runs its commands: through main(), in this process
        done = in_this_process(command, tmp_path, env)
        assert done.returncode == 0, f"{command}: exit {done.returncode}: {done.stderr[-1500:]}"
        printed[shlex.split(command)[1]] = done.stdout
    phases = [line.split()[0] for line in printed["summary"].splitlines()[1:] if line.strip()]
    assert {"forward", "backward", "optimizer"} <= set(phases) and phases[-1] == "total", printed["summary"]
    assert "convolution" in printed["top"] and TABLE_HEADER.search(printed["top"]), printed["top"]
    chart = tmp_path / shlex.split(commands[-1])[-1]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000


E_NOTATION = re.compile(r"\b\d+(\.\d+)?e[+-]\d+\b")  # as Python prints 6.558e+09 and 1e-05


def test_the_demo_stores_tables_print_numbers_in_si(
    cli, after_demo: Path, readme_ran: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run of the demo's store after the README's commands (the demo's, and the README's ncu report, CPU
    profile, prediction and traces), through the commands that print tables (in-process: this is about what they
    print), and the demo's report: no e-notation (6.558e+09 is 6.56 GFLOP), shares in % (work_known 22.6%, not
    0.2262), checked on the README's H100 GPT-2 trace."""
    store = after_demo / "demo-runs"
    monkeypatch.chdir(after_demo)  # the reader's folder, with ../shared beside it

    def printed(*argv: str) -> str:
        done = cli(*argv, "--store", store)
        assert done.code == 0, f"{argv}: {done.err[-500:]}"
        return done.out + done.err

    runs = [row["run"] for row in json.loads(printed("runs", "--format", "json"))]
    assert "gpt2-h100" in runs and len(runs) >= 10, (runs, readme_ran[1])  # the README's trace, and the demo's runs
    texts = {"runs": printed("runs")}
    for run in runs:  # (no run of the demo has ranks: `summary --by rank` is tested on traces)
        for command, *options in (("summary",), ("top",), ("kernels", "--top", "20"), ("advise",)):
            texts[f"{command} {run}"] = printed(command, run, *options)
        if not run.startswith(("deepcam", "vllm")):  # Yang et al.'s logs and vLLM's graphs have no layers
            texts[f"layers {run}"] = printed("kernels", run, "--group-by", "layer")
    page = (after_demo / "demo-report" / "index.html").read_text()
    shown = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)  # its text and tables, not chart specs
    texts["report"] = html_module.unescape(re.sub(r"<[^>]+>", " ", shown))
    for what, text in texts.items():
        assert not E_NOTATION.search(text), f"{what}: {E_NOTATION.search(text)} in {text[:2000]}"
    shares = column_cells(texts["summary gpt2-h100"], "work_known")
    assert shares and all(re.fullmatch(r"\d+\.\d%|-", cell) for cell in shares), shares


def column_cells(text: str, column: str) -> list[str]:
    """The cells of ``column`` in a text table (columns apart by two spaces or more, right-aligned)."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if re.search(rf"(^|\s){column}(\s|$)", line))
    end = lines[header].index(column) + len(column)  # right-aligned: a cell ends where its header ends
    cells = []
    for line in lines[header + 1 :]:
        if len(line) < end or not line.strip():
            break
        cells.append(re.split(r" {2,}", line[:end].strip())[-1])
    return cells
