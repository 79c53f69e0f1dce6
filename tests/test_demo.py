"""make demo's runner (hroofline/cli/demo.py): one process, each stage with its commands and its time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hroofline.cli import demo


def test_each_stage_shows_its_commands_and_ends_with_its_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(demo, "hroofline", lambda argv: ran.append(list(argv)) or 0)
    demo.Demo("store").stage("resnet18-cpu: phases", ["summary", "resnet18-cpu"], ["top", "resnet18-cpu"])
    lines = capsys.readouterr().out.splitlines()
    assert ran == [["summary", "resnet18-cpu", "--store", "store"], ["top", "resnet18-cpu", "--store", "store"]]
    assert lines[:4] == [
        "",
        "== resnet18-cpu: phases",
        "$ hroofline summary resnet18-cpu --store store",
        "$ hroofline top resnet18-cpu --store store",
    ]
    assert re.fullmatch(r"-- resnet18-cpu: [0-9.]+ (s|ms|µs)", lines[4])


def test_a_failed_command_stops_the_demo_with_its_code_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "hroofline", lambda argv: 1)
    with pytest.raises(SystemExit) as stopped:
        demo.Demo("store").stage("report", ["report", "r"], ["never", "run"])
    assert stopped.value.code == 1
    assert capsys.readouterr().err == "make demo: `hroofline report r --store store` failed (exit 1)\n"


def test_the_demo_runs_every_stage_in_order_and_says_its_total(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without DeepCAM's data (no ../shared), its stages are skipped in one line; the rest run, then the total."""
    ran: list[str] = []
    monkeypatch.setattr(demo, "hroofline", lambda argv: ran.append(argv[0]) or 0)
    demo.run_demo("store", "report", tmp_path / "no-shared", str(tmp_path / "chart.png"))
    out = capsys.readouterr().out
    assert ran == ["profile", "summary", "top", "top", "predict", "predict", "compare", "query", "report"]
    assert "not found: skipping Yang et al.'s DeepCAM V100 data" in out
    assert re.search(r"^the demo took [0-9.]+ (s|ms|µs); open report/index.html", out, re.M)
