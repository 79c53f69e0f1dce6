"""What a newcomer tripped over in the API and the CLI (issue 48, item 5): the API takes what the CLI takes and says
what it says, the commands agree on their options, the examples of --help run, and a read of a store that is not
there is said, not taken for an empty store."""

from __future__ import annotations

from pathlib import Path

import pytest

import hroofline
from hroofline.errors import StoreError

READ_COMMANDS = (
    ("runs",),
    ("summary", "x"),
    ("top", "x"),
    ("kernels", "x"),
    ("chart", "x"),
    ("report", "x", "--out", "REPORT"),
    ("query", "SELECT 1"),
    ("compare", "x", "y"),
    ("advise", "x"),
    ("ceilings", "--run", "x"),
    ("rm", "x"),
    ("rename", "x", "y"),
)


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda argv: argv[0])
def test_a_read_of_a_store_that_is_not_there_is_said(cli, tmp_path: Path, argv: tuple[str, ...]) -> None:
    missing = tmp_path / "no-such-store"
    words = [str(tmp_path / "report") if word == "REPORT" else word for word in argv]
    result = cli(*words, "--store", missing)
    assert result.code == 1 and result.out == ""
    assert result.err == f"hroofline: error: no store at {missing} (create one with `hroofline import` or `profile`)\n"
    assert not missing.exists() and not (tmp_path / "report").exists()


def test_the_api_reads_no_store_that_is_not_there(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-store"
    for read in (lambda: hroofline.load("x", store=missing), lambda: hroofline.runs(store=missing)):
        with pytest.raises(StoreError, match="no store at"):
            read()
    assert not missing.exists()


def test_a_misspelt_run_gets_the_cli_error_from_the_api(cli, deepcam_store: Path) -> None:
    said = cli("summary", "deepcam-O2", "--store", deepcam_store).err
    assert "did you mean deepcam-O1 or deepcam-O0?" in said
    with pytest.raises(StoreError) as raised:
        hroofline.load("deepcam-O2", store=deepcam_store)
    assert f"hroofline: error: {raised.value}\n" == said  # the same line, hint included
