"""The guides' shell sessions (docs/guides/*.md: `$ command` lines with the output they show) run as the README's
do (tests/test_readme.py's reading and comparison), in the folder a reader has after `make demo`, each guide in
order in a copy of it: what a command prints must be what the guide shows (output measured on this machine's CPU
without its numbers). Here, not in make test: the demo and the profiles take minutes. The commands not run are
listed with why, as the README's are."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from tests import test_readme
from tests.conftest import REPO
from tests.test_readme import readme_steps, run_step, why_not_run

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
    left_out = {
        f"{guide.name}:{step.line}": guide_why_not_run(step.command)
        for guide in GUIDES
        for step in guide_sessions(guide)
        if guide_why_not_run(step.command)
    }
    snippet = "the trace snippet's test runs it"
    assert left_out == {
        "traces.md:65": snippet,
        "traces.md:69": snippet,
        "traces.md:141": MEASURED_ELSEWHERE,
        "traces.md:145": MEASURED_ELSEWHERE,
        "traces.md:146": "compares the two profiles above",
        "traces.md:172": MEASURED_ELSEWHERE,
    }
