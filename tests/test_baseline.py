"""Baselines (issue 44, point 3): ``hroofline baseline set|list|rm`` kept in the store, ``compare --baseline NAME
CAND`` and ``--base-store DIR``, and what ``rm`` and ``rename`` do to a run a baseline names.

The runs are real torch.profiler traces of one VGG-16 FP32 batch-32 training step in this repository
(tests/data/gpu-2026-11-27/README.md: recorded with hroofline on an H200 and an H100 the same day): the H200's
"fifth visit" trace is the base, the H200's "layouts" trace (the same step on the same GPU, another process) and the
H100's the candidates.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from hroofline.errors import StoreError, UsageError
from hroofline.store.runs import RunStore
from tests.conftest import main_status


@pytest.fixture
def store(vgg_traces_store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(vgg_traces_store, copy)
    return copy


def hroofline(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main_status([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_set_list_and_rm_keep_the_baseline_in_the_store_and_leave_its_run(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)[0] == 0
    assert hroofline(capsys, "baseline", "set", "nightly", "vgg-h100", "--store", store)[0] == 0
    saved = json.loads((store / "baselines.json").read_text())["baselines"]
    assert {name: entry["run"] for name, entry in saved.items()} == {"last-good": "vgg-h200", "nightly": "vgg-h100"}
    code, out, _ = hroofline(capsys, "baseline", "list", "--format", "json", "--store", store)
    listed = json.loads(out)
    assert code == 0 and [(row["name"], row["run"], row["run_present"]) for row in listed] == [
        ("last-good", "vgg-h200", True),
        ("nightly", "vgg-h100", True),
    ]
    # set again: the name moves to the other run
    assert hroofline(capsys, "baseline", "set", "nightly", "vgg-h200-again", "--store", store)[0] == 0
    code, _, err = hroofline(capsys, "baseline", "rm", "nightly", "--store", store)
    assert code == 0 and "run 'vgg-h200-again' stays" in err
    assert list(json.loads((store / "baselines.json").read_text())["baselines"]) == ["last-good"]
    assert (store / "runs" / "run=vgg-h200-again" / "meta.json").is_file()
    assert not list(store.glob(".baselines.json.*.tmp"))  # the file was replaced whole, nothing left beside it


def test_an_unknown_run_or_baseline_is_one_line_with_did_you_mean(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = hroofline(capsys, "baseline", "set", "last-good", "vgg-h20", "--store", store)
    assert (code, out) == (1, "") and len(err.splitlines()) == 1
    assert "no run named 'vgg-h20'" in err and "did you mean vgg-h200" in err
    assert not (store / "baselines.json").exists()  # nothing written
    hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)
    code, _, err = hroofline(capsys, "baseline", "rm", "last-god", "--store", store)
    assert code == 1 and len(err.splitlines()) == 1 and "did you mean last-good?" in err
    code, _, err = hroofline(capsys, "baseline", "set", "../up", "vgg-h200", "--store", store)
    assert code == 2 and "invalid baseline name" in err


def test_removing_a_run_a_baseline_names_is_refused_until_the_baseline_goes(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)
    code, _, err = hroofline(capsys, "rm", "vgg-h100", "vgg-h200", "--store", store)
    assert code == 1 and len(err.splitlines()) == 1
    assert "run 'vgg-h200' is the baseline 'last-good'" in err and "hroofline baseline rm last-good" in err
    # every name is checked before any run goes: vgg-h100, named first, is still there too
    assert (store / "runs" / "run=vgg-h100").is_dir() and (store / "runs" / "run=vgg-h200").is_dir()
    with pytest.raises(StoreError, match="is the baseline 'last-good'"):  # the store refuses too, under the locks
        RunStore(store).remove_run("vgg-h200")
    assert (store / "runs" / "run=vgg-h200" / "meta.json").is_file()
    assert hroofline(capsys, "baseline", "rm", "last-good", "--store", store)[0] == 0
    assert hroofline(capsys, "rm", "vgg-h200", "--store", store)[0] == 0
    assert not (store / "runs" / "run=vgg-h200").exists()


def test_renaming_a_run_carries_its_baselines(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)
    hroofline(capsys, "baseline", "set", "other", "vgg-h100", "--store", store)
    assert hroofline(capsys, "rename", "vgg-h200", "vgg-good", "--store", store)[0] == 0
    _, out, _ = hroofline(capsys, "baseline", "list", "--format", "json", "--store", store)
    assert {row["name"]: row["run"] for row in json.loads(out)} == {"last-good": "vgg-good", "other": "vgg-h100"}


def test_a_baseline_whose_run_is_gone_is_listed_and_said(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run removed behind the store's back (an older hroofline, a hand): listed as absent, and compare says so."""
    hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)
    shutil.rmtree(store / "runs" / "run=vgg-h200")
    code, out, _ = hroofline(capsys, "baseline", "list", "--format", "csv", "--store", store)
    assert code == 0 and out.splitlines()[1].startswith("last-good,vgg-h200,") and out.strip().endswith(",False")
    code, _, err = hroofline(capsys, "compare", "--baseline", "last-good", "vgg-h100", "--store", store)
    assert code == 1 and "baseline 'last-good' names run 'vgg-h200', which is no longer in store" in err


def test_compare_against_a_baseline_is_compare_against_its_run(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hroofline(capsys, "baseline", "set", "last-good", "vgg-h200", "--store", store)
    code, by_name, _ = hroofline(
        capsys, "compare", "--baseline", "last-good", "vgg-h200-again", "--format", "json", "--store", store
    )
    assert code == 0
    code, by_run, _ = hroofline(capsys, "compare", "vgg-h200", "vgg-h200-again", "--format", "json", "--store", store)
    assert code == 0 and by_name == by_run and json.loads(by_run)["base"] == "vgg-h200"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["vgg-h200", "vgg-h100", "--baseline", "last-good"], "BASE and --baseline: give one"),
        (["--baseline", "last-good"], "--baseline NAME needs CAND"),
        (["vgg-h100"], "CAND missing"),
        ([], "BASE and CAND missing"),
    ],
)
def test_compare_takes_base_or_baseline_not_both_nor_neither(
    vgg_traces_store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    code, out, err = hroofline(capsys, "compare", *argv, "--store", vgg_traces_store)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and said in err


def test_the_base_comes_from_another_store_with_base_store(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI job's last good store (downloaded as an artifact) holds the baseline; the job's own store the candidate."""
    last_good = tmp_path / "last-good-store"
    shutil.copytree(store, last_good)
    hroofline(capsys, "baseline", "set", "main", "vgg-h200", "--store", last_good)
    hroofline(capsys, "rm", "vgg-h200", "--store", store)  # the candidate's store lacks the base run
    argv = ["compare", "--baseline", "main", "vgg-h200-again", "--format", "json", "--store", store]
    code, out, _ = hroofline(capsys, *argv, "--base-store", last_good)
    assert code == 0 and (json.loads(out)["base"], json.loads(out)["candidate"]) == ("vgg-h200", "vgg-h200-again")
    code, out, _ = hroofline(
        capsys, "compare", "vgg-h200", "vgg-h200-again", "--store", store, "--base-store", last_good
    )
    assert code == 0 and out.startswith("vgg-h200 (base) -> vgg-h200-again (candidate)")
    code, _, err = hroofline(capsys, *argv)  # without --base-store: the candidate's store has no baseline
    assert code == 1 and "no baseline named 'main'" in err
    code, _, err = hroofline(capsys, *argv, "--base-store", tmp_path / "nowhere")
    assert code == 1 and "no store at" in err and len(err.splitlines()) == 1


def test_the_python_api_sets_lists_loads_and_removes_baselines(store: Path) -> None:
    import hroofline

    baseline = hroofline.set_baseline("last-good", "vgg-h200", store=store)
    assert (baseline.name, baseline.run) == ("last-good", "vgg-h200")
    table = hroofline.baselines(store=store)
    assert list(table.columns) == ["name", "run", "set_at", "run_present"]
    assert table[["name", "run"]].values.tolist() == [["last-good", "vgg-h200"]]
    assert hroofline.load_baseline("last-good", store=store).name == "vgg-h200"
    assert hroofline.remove_baseline("last-good", store=store).run == "vgg-h200"
    assert hroofline.baselines(store=store).empty and "vgg-h200" in hroofline.runs(store=store)


def test_the_python_api_compares_with_a_baseline_from_another_store(store: Path, tmp_path: Path) -> None:
    import hroofline

    last_good = tmp_path / "last-good-store"
    shutil.copytree(store, last_good)
    hroofline.set_baseline("main", "vgg-h200", store=last_good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same GPU: no warning
        compared = hroofline.compare(candidate="vgg-h200-again", baseline="main", store=store, base_store=last_good)
    assert (compared.base, compared.candidate) == ("vgg-h200", "vgg-h200-again")
    with pytest.warns(
        UserWarning, match=r"differ in GPU \(device name\): NVIDIA H200 \(vgg-h200\) against NVIDIA H100"
    ):
        hroofline.compare("vgg-h200", "vgg-h100", store=store)
    with pytest.raises(UsageError, match="give base and candidate, or baseline= and candidate"):
        hroofline.compare("vgg-h200", "vgg-h100", store=store, baseline="main")
