"""Every option a message names is one the command it sends the user to accepts (the review of issue 48): the hints
of a run without roofs (`--ceilings` for top, chart, report and advise), of this CPU's ceilings (`--measure-ceilings`
for profile and import), of --force-gpu and of a --store that is a file; and ceilings given to a run that has its own
are refused, not dropped."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from hroofline.roofs.ceilings import CPU_CEILINGS_HINT
from tools.docs_reference import command_parser

ROOF_COMMANDS = ("top", "chart", "report", "advise")  # the commands "top, chart, report and advise need roofs" names


def options_of(command: str) -> set[str]:
    return {name for action in command_parser(command)._actions for name in action.option_strings}


def named_options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))


def commands_named(text: str) -> tuple[str, ...]:
    listed = re.search(r"((?:\w+, )*\w+ and \w+) need roofs", text)
    assert listed, text
    return tuple(re.split(r", | and ", listed.group(1)))


EMBEDDED = re.compile(r"`?hroofline ([a-z]+)((?: [^ ,;)`]+)*)`?")  # a command the hint spells out, with its options


def assert_accepted(hint: str, commands: tuple[str, ...]) -> None:
    """Each option ``hint`` names is taken by the command it spells out with it (`hroofline ceilings --measure`),
    the others by every one of ``commands``."""
    for embedded in EMBEDDED.finditer(hint):
        assert not named_options(embedded.group(2)) - options_of(embedded.group(1)), embedded.group(0)
    named = named_options(EMBEDDED.sub("", hint))
    assert named, hint
    for command in commands:
        missing = named - options_of(command)
        assert not missing, f"the hint {hint!r} names {sorted(missing)}, which `hroofline {command}` refuses"


@pytest.fixture
def roofless_store(cli, tmp_path: Path, deepcam_dir: Path) -> Path:
    """A run without roofs: DeepCAM's forward pass imported without the GPU it ran on."""
    store = tmp_path / "store"
    said = cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "bare", "--store", store)
    assert said.code == 0, said.err
    return store


def test_the_roofless_hints_name_options_their_commands_take(cli, roofless_store: Path, deepcam_dir: Path) -> None:
    warned = cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "bare2", "--store", roofless_store).err
    (line,) = [line for line in warned.splitlines() if "has no roofs" in line]
    assert commands_named(line) == ROOF_COMMANDS
    assert_accepted(line.split(": ")[-1].split(", or pass ")[-1], ROOF_COMMANDS)
    assert_accepted(line.split(": ")[-1].split(", or pass ")[0], ("import",))
    assert_accepted(CPU_CEILINGS_HINT, ROOF_COMMANDS)
    refused = cli("advise", "bare", "--store", roofless_store)
    assert refused.code != 0 and "--ceilings" in refused.err
    assert_accepted(refused.err, ("advise",))


def test_advise_takes_ceilings_as_top_does(cli, roofless_store: Path) -> None:
    import hroofline

    said = cli("advise", "bare", "--ceilings", "v100", "--format", "json", "--store", roofless_store)
    assert said.code == 0, said.err
    found = json.loads(said.out)["findings"]
    run = hroofline.load("bare", store=roofless_store)
    assert [f["rule"] for f in found] == list(run.advise(ceilings="v100")["rule"])
    assert list(hroofline.advise("bare", store=roofless_store, ceilings="v100")["rule"]) == [f["rule"] for f in found]
    assert cli("top", "bare", "--ceilings", "v100", "--store", roofless_store).code == 0


def test_this_cpu_s_ceilings_hint_names_an_option_of_profile_and_import(monkeypatch: pytest.MonkeyPatch) -> None:
    import hroofline.collect.ceilings_cache as cache
    from hroofline.cli import profile_common

    said: list[str] = []
    monkeypatch.setattr(profile_common, "say", said.append)
    for busy in (None, "measured while the machine was busy"):
        found = SimpleNamespace(ceilings="C", path=Path("/c.toml"), busy=busy, measured_now=False, measured_on="x")
        monkeypatch.setattr(cache, "cpu_ceilings_cached", lambda say, again, found=found: found)
        assert profile_common.this_cpu_ceilings() == "C"
    assert len(said) == 2 and all("--measure-ceilings" in line for line in said)
    for line in said:  # profile --gpu cpu and import of a CPU trace both call it
        assert_accepted(line, ("profile", "import"))


def test_import_measures_this_cpu_s_ceilings_anew_when_asked() -> None:
    from hroofline.api.imports import _cpu_ceilings

    asked: list[bool] = []

    def this_cpu(again: bool) -> SimpleNamespace:
        asked.append(again)
        return SimpleNamespace(to_json=dict)

    here = SimpleNamespace(info=SimpleNamespace(settings={"host": socket.gethostname()}))
    for again in (False, True):
        assert _cpu_ceilings([], this_cpu, again)([here]) == {}
    assert asked == [False, True]


def test_import_says_measure_ceilings_did_nothing_for_a_gpu_run(cli, tmp_path: Path, deepcam_dir: Path) -> None:
    said = cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "r", "--measure-ceilings", "--store", tmp_path / "s")
    assert said.code == 0 and "note: --measure-ceilings: nothing measured: run 'r' is not a CPU run" in said.err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--measure-ceilings", "--ceilings", "c.toml"), "--measure-ceilings: measures this CPU's ceilings"),
        (("--measure-ceilings", "--gpu", "a100"), "--measure-ceilings: measures this CPU's ceilings"),
        (("--gpu", "cpu", "--force-gpu"), "--force-gpu: not with --gpu cpu"),
        (("--force-gpu",), "--force-gpu needs --gpu"),
    ],
    ids=["measure-with-ceilings", "measure-with-gpu", "force-gpu-cpu", "force-gpu-alone"],
)
def test_import_refuses_options_that_do_not_go_together(cli, tmp_path: Path, extra: tuple[str, ...], said: str) -> None:
    result = cli("import", "trace.json", "--run", "r", *extra, "--store", tmp_path / "store")
    assert result.code == 2 and result.err.count("\n") == 1 and said in result.err, result.err
    assert not (tmp_path / "store").exists()


def test_a_store_that_is_a_file_is_said_for_reads_and_writes(cli, tmp_path: Path) -> None:
    file = tmp_path / "store.txt"
    file.write_text("")
    read = cli("runs", "--store", file)
    write = cli("import", "x.ncu-rep", "--run", "r", "--store", file)
    assert read.code == write.code == 1
    assert "is a file, not a folder" in read.err and "created if missing" not in read.err
    assert "give the folder of a store" in read.err
    assert "creates it if missing" in write.err


def test_ceilings_for_a_run_that_has_its_own_are_refused(cli, tmp_path: Path, deepcam_dir: Path) -> None:
    from hroofline import load

    store = tmp_path / "store"
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    for path, hbm in ((first, 828e9), (second, 700e9)):
        path.write_text(f'name = "{path.stem}"\n[ceilings]\nhbm = {hbm}\nl2 = 2996.77e9\nl1 = 14336e9\nfp32 = 15e12\n')
    base = ("--gpu", "v100", "--store", store)
    assert cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "r", "--ceilings", first, *base).code == 0
    refused = cli("import", deepcam_dir / "pt-O0-Adam-bw", "--run", "r", "--ceilings", second, *base)
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert "--ceilings: run 'r' has ceilings already (first)" in refused.err and "--replace" in refused.err
    again_with, judge_with = refused.err.split("(import ")[1].split(", or pass ")
    assert_accepted(again_with, ("import",))
    assert_accepted(judge_with, ROOF_COMMANDS)
    assert load("r", store=store).meta.ceilings["label"] == "first"
    same = cli("import", deepcam_dir / "pt-O0-Adam-bw", "--run", "r", "--ceilings", first, *base)
    assert same.code == 0, same.err
    again = cli("import", deepcam_dir / "pt-O0-Adam-fw", "--run", "r", "--ceilings", second, "--replace", *base)
    assert again.code == 0, again.err
    assert load("r", store=store).meta.ceilings["label"] == "second"


def test_doctor_s_errors_and_notes_name_only_its_options(
    cli, deepcam_dir: Path, h100_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45 (8): doctor on a report without roofs named its internal run 'doctor' and --ceilings, which it
    lacks, and exited 2 (a usage error) for a problem of the data; its notes named --ceilings and import's
    --rank. Now: exit 1, one line, only doctor's options; every note's options are doctor's."""
    import hroofline.analyze.doctor as doctor
    from hroofline.cli.doctor_cmd import OPTIONS, doctor_note

    assert options_of("doctor") - {"-h", "--help"} == OPTIONS
    refused = cli("doctor", "--report", deepcam_dir / "pt-O0-Adam-fw")  # no calibration run: refused as such
    assert refused.code == 1 and refused.err.count("\n") == 1 and "'doctor'" not in refused.err, refused.err
    assert not named_options(refused.err) - OPTIONS, refused.err
    # a calibration report that names no GPU and carries no peaks (DeepCAM's forward, taken for one)
    monkeypatch.setattr(doctor, "not_calibration", lambda run: None)
    roofless = cli("doctor", "--report", deepcam_dir / "pt-O0-Adam-fw")
    assert roofless.code == 1 and roofless.err.count("\n") == 1, roofless.err
    assert "has no roofs" in roofless.err and "'doctor'" not in roofless.err
    assert_accepted(roofless.err, ("doctor",))
    monkeypatch.undo()
    calibration = cli("doctor", "--report", h100_dir / "gemm-calibration-base-clock.ncu-rep")
    assert calibration.code == 0 and "2:4-sparse rate" in calibration.err, calibration.err
    assert not named_options(calibration.err) - OPTIONS, calibration.err
    rank = "rank 0 assumed: the trace has no distributedInfo and its file name no rank (--rank N sets it)"
    assert doctor_note(rank) == "rank 0 assumed: the trace has no distributedInfo and its file name no rank"
    kept = "the GPU is not the report's (leave out --gpu)"
    assert doctor_note(kept) == kept
