"""What a newcomer tripped over in the API and the CLI (issue 48, item 5): the API takes what the CLI takes and says
what it says, the commands agree on their options, the examples of --help run, and a read of a store that is not
there is said, not taken for an empty store."""

from __future__ import annotations

import argparse
import inspect
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import hroofline
from hroofline.api.face import RunView
from hroofline.api.views import ComparisonView
from hroofline.errors import HrooflineError, StoreError, UsageError
from tests.conftest import need_package
from tools.docs_reference import command_parser

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


@pytest.fixture(scope="module")
def predicted_store(tmp_path_factory: pytest.TempPathFactory, deepcam_dir: Path) -> Path:
    """DeepCAM's FP32 forward pass measured on a V100, and resnet18 predicted on a V100 (forward)."""
    from hroofline.cli.main import main

    store = tmp_path_factory.mktemp("predicted") / "store"
    folder = deepcam_dir / "pt-O0-Adam-fw"
    assert (
        main(["import", str(folder), "--run", "measured", "--gpu", "v100", "--phase", "fw", "--store", str(store)]) == 0
    )
    predict = ["predict", "--arch", "resnet18", "--gpu", "v100", "--phases", "forward", "--batch-size", "1"]
    assert main([*predict, "--run", "estimated", "--store", str(store)]) == 0
    return store


def test_a_prediction_against_a_measured_run_is_no_speedup(cli, predicted_store: Path) -> None:
    said = cli("compare", "estimated", "measured", "--store", predicted_store)
    assert said.code == 0 and "speedup" not in said.out
    assert said.out.startswith("estimated (estimated) versus measured (measured)")
    header = said.out.splitlines()[2].split()
    assert header[:4] == ["phase", "estimated", "measured", "measured/estimated"]
    data = json.loads(cli("compare", "estimated", "measured", "--format", "json", "--store", predicted_store).out)
    forward = data["phases"]["forward"]
    assert data["predicted"] == "base"
    assert forward["measured_over_estimated_time"] == pytest.approx(
        forward["candidate_time_s"] / forward["base_time_s"]
    )
    flipped = json.loads(cli("compare", "measured", "estimated", "--format", "json", "--store", predicted_store).out)
    assert flipped["phases"]["forward"]["measured_over_estimated_time"] == pytest.approx(
        forward["measured_over_estimated_time"]
    )  # either way round
    assert "estimated versus measured" in cli("compare", "--help").out


def test_a_prediction_against_another_gpus_or_steps_run_is_no_estimate_error(
    cli, predicted_store: Path, tmp_path: Path
) -> None:
    """The estimated-versus-measured table is for a prediction of the step the other run measured: a prediction on
    another GPU, or of another model where both runs record theirs, is compared as two runs, with a note."""
    store = tmp_path / "store"
    shutil.copytree(predicted_store, store)
    on_a100 = ["predict", "--arch", "resnet18", "--gpu", "a100", "--phases", "forward", "--batch-size", "1"]
    assert cli(*on_a100, "--run", "on-a100", "--store", store).code == 0
    said = cli("compare", "on-a100", "measured", "--store", store)
    assert said.code == 0 and "estimated versus measured" not in said.out and "speedup" in said.out
    assert "another step or GPU (gpu: a100-40gb and v100-sxm2)" in said.out + said.err
    data = json.loads(cli("compare", "on-a100", "measured", "--format", "json", "--store", store).out)
    assert data["predicted"] is None and data["other_step"] == "gpu: a100-40gb and v100-sxm2"
    other_model = ["predict", "--arch", "alexnet", "--gpu", "v100", "--phases", "forward", "--batch-size", "1"]
    assert cli(*other_model, "--run", "alexnet", "--store", store).code == 0
    both_predicted = json.loads(cli("compare", "estimated", "alexnet", "--format", "json", "--store", store).out)
    assert both_predicted["predicted"] is None and both_predicted["other_step"] is None  # two predictions
    from hroofline.analyze.compare import other_step

    runs = [hroofline.load(name, store=store) for name in ("estimated", "alexnet")]
    assert other_step(runs[0], runs[1]) == "arch: resnet18 and alexnet"


def test_print_of_a_comparison_is_what_the_cli_prints(cli, deepcam_store: Path, tmp_path: Path) -> None:
    said = cli("compare", "deepcam-O0", "deepcam-O1", "-n", "3", "--store", deepcam_store).out
    compared = hroofline.compare("deepcam-O0", "deepcam-O1", store=deepcam_store, n=3)
    assert str(compared) == said and repr(compared) == said and said.count("\n") > 10
    assert "<table" in compared._repr_html_()  # Jupyter still gets the tables
    out = tmp_path / "cli.json"
    assert cli("compare", "deepcam-O0", "deepcam-O1", "--out", out, "--level", "l2", "--store", deepcam_store).code == 0
    assert compared.chart(level="l2").to_dict() == json.loads(out.read_text())  # compare --out's chart


def test_a_saved_chart_opens_offline(deepcam_store: Path, tmp_path: Path) -> None:
    chart = hroofline.load("deepcam-O1", store=deepcam_store).chart(phase="forward")
    page = chart.save(tmp_path / "x.html").read_text()
    assert "vegaEmbed" in page and len(page) > 500_000  # Vega, Vega-Lite and Vega-Embed inlined
    assert re.search(r"<script[^>]+src=", page) is None and "cdn.jsdelivr" not in page
    assert "text/html" in chart._repr_mimebundle_()  # still inline in Jupyter
    with pytest.raises(UsageError, match="cannot tell the chart format"):
        chart.save(tmp_path / "x.pdf")


# What the API leaves to the caller: how the CLI prints (the API returns data; a chart's .save(path) is --out),
# which store (hroofline.load's store=), which run (the method's own), --explain (lines on stderr).
NOT_PARAMETERS = {"format", "store", "run", "runs", "explain", "out"}
API_OF_COMMAND: dict[str, tuple[Callable[..., object], ...]] = {
    "summary": (RunView.summary,),
    "top": (RunView.top,),
    "kernels": (RunView.kernels,),
    "chart": (RunView.chart,),
    "advise": (RunView.advise,),
    "report": (hroofline.report,),
    "compare": (hroofline.compare, ComparisonView.chart, ComparisonView.gate),  # and its chart (--out, ...), its gate
}
# CLI options the API takes under another name: compare's gate levels are ComparisonView.gate's arguments (--gate's
# "phase=5,layer=10" spec is those arguments in one string).
API_NAMES = {
    "fail_on_regression": "phase",
    "phase_gate": "phase",
    "layer_gate": "layer",
    "family_gate": "family",
    "gate": "phase",
}


def _options(command: str) -> list[argparse.Action]:
    return [a for a in command_parser(command)._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("command", sorted(API_OF_COMMAND))
def test_the_api_takes_what_the_cli_takes(command: str) -> None:
    parameters = {
        name: parameter
        for function in API_OF_COMMAND[command]
        for name, parameter in inspect.signature(function).parameters.items()
    }
    for action in _options(command):
        if action.dest in NOT_PARAMETERS:
            continue
        names = {name.lstrip("-").replace("-", "_") for name in action.option_strings} | {action.dest}
        names |= {API_NAMES[name] for name in names if name in API_NAMES}
        found = names & set(parameters)
        assert found, f"`hroofline {command}` takes {action.option_strings}, its API has no such parameter"
        parameter = parameters[found.pop()]
        if action.default is not None and action.default is not False and parameter.default is not None:
            assert parameter.default == action.default, f"{command} {action.option_strings}: defaults differ"


def test_the_api_refuses_what_the_cli_refuses(deepcam_store: Path) -> None:
    run = hroofline.load("deepcam-O1", store=deepcam_store)
    assert len(run.top(phase="fw", n=2, sort="flops")) == 2 and len(run.kernels(n=3)) == 3
    for call in (
        lambda: run.top(by="launch"),
        lambda: run.top(sort="nope"),
        lambda: run.top(n=0),
        lambda: run.kernels(group_by="nope"),
        lambda: run.summary(by="nope"),
        lambda: run.chart(by="nope"),
        lambda: run.top(phase="nope"),
    ):
        with pytest.raises(UsageError):
            call()
    with pytest.raises(HrooflineError, match="no layers"):  # top(layer=...) was a TypeError
        run.top(layer="layer4*")


READ_FORMAT_COMMANDS = ("runs", "query", "kernels", "summary", "chart", "top", "advise", "compare", "predict", "gpus")


@pytest.mark.parametrize("command", READ_FORMAT_COMMANDS)
def test_every_format_option_takes_table_csv_and_json(command: str) -> None:
    (option,) = [a for a in _options(command) if "--format" in a.option_strings]
    extra = ("markdown",) if command == "compare" else ()  # compare's verdict as a pull-request comment
    assert tuple(option.choices) == ("table", "csv", "json", *extra) and option.default == "table"


def test_every_count_is_n_or_top() -> None:
    from hroofline.cli.main import COMMANDS

    counts = 0
    for command in COMMANDS:
        for action in _options(command):
            if {"-n", "--top"} & set(action.option_strings):
                assert set(action.option_strings) == {"-n", "--top"}, (command, action.option_strings)
                counts += 1
    assert counts >= 4  # kernels, top, report, compare


def test_advise_takes_table_csv_json_and_text(cli, deepcam_store: Path) -> None:
    table = cli("advise", "deepcam-O0", "--store", deepcam_store).out
    assert cli("advise", "deepcam-O0", "--format", "text", "--store", deepcam_store).out == table
    rows = pd.read_csv(io.StringIO(cli("advise", "deepcam-O0", "--format", "csv", "--store", deepcam_store).out))
    assert len(rows) == table.count("\n1. ") + table.count("\n2. ") + table.count("\n3. ") and "win_s" in rows
    summary = cli("summary", "deepcam-O0", "--format", "csv", "--store", deepcam_store).out
    frame = pd.read_csv(io.StringIO(summary)).set_index("phase")
    data = json.loads(cli("summary", "deepcam-O0", "--format", "json", "--store", deepcam_store).out)
    assert frame.loc["total", "time_s"] == pytest.approx(data["total"]["time_s"], rel=1e-12)
    assert "deepcam-O0" in cli("runs", "--format", "csv", "--store", deepcam_store).out


def test_report_warns_once_per_kind_as_top_does(cli, deepcam_store: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.toml"  # an HBM bandwidth 100x too low: kernels "beat" it
    wrong.write_text('name = "too low"\n[ceilings]\nhbm = 8.28e9\nl2 = 2996.77e9\nl1 = 14336e9\nfp32 = 15158.6e9\n')
    args = ("--ceilings", wrong, "--store", deepcam_store)
    top = cli("top", "deepcam-O0", *args).err.splitlines()
    report = cli("report", "deepcam-O0", "--out", tmp_path / "report", *args).err.splitlines()
    warned = [line for line in report if line.startswith("hroofline: warning:")]
    assert len(warned) == len(top) == 1 and warned[0] == top[0].replace("warning: ", "warning: deepcam-O0: ")
    assert len(report) == 2  # the warning and "wrote ..."
    explained = cli("report", "deepcam-O0", "--out", tmp_path / "report", "--explain", *args).err
    assert explained.count("beats its HBM roof") > 20


def test_a_sweep_reuses_a_configuration_already_predicted(cli, predicted_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(predicted_store, store)
    sweep = cli(
        "predict", "--arch", "resnet18", "--gpu", "v100", "--phases", "forward", "--batch-size", "1,2", "--store", store
    )
    assert sweep.code == 0, sweep.err
    assert (
        "run 'estimated' predicts this configuration already: resnet18-fp32-v100-sxm2-forward-b1-predicted not "
        "stored again" in sweep.err
    )
    names = json.loads(cli("runs", "--format", "json", "--store", store).out)
    assert sorted(r["run"] for r in names) == ["estimated", "measured", "resnet18-fp32-v100-sxm2-forward-b2-predicted"]
    assert "estimated " in sweep.out  # the sweep's table names the run that holds it


def test_a_sweep_does_not_reuse_the_prediction_of_an_edited_model_file(cli, tmp_path: Path) -> None:
    model = tmp_path / "small_net.py"
    model.write_text("import torch\n\ndef build():\n    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))\n")
    store = tmp_path / "store"
    sweep = ("predict", "--model", f"{model}:build", "--gpu", "v100", "--phases", "forward", "--batch-size", "1,2")
    sweep = (*sweep, "--input-shape", "3,8,8", "--store", store)
    assert cli(*sweep).code == 0
    again = cli(*sweep)
    assert again.code == 0 and again.err.count("predicts this configuration already") == 2, again.err
    model.write_text(model.read_text().replace("Conv2d(3, 4, 3)", "Conv2d(3, 16, 3)"))
    edited = cli(*sweep)
    assert edited.code == 2 and "predicts this configuration already" not in edited.err
    assert "exists already, a prediction of another configuration" in edited.err


def test_a_prediction_s_identity_holds_hroofline_s_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from hroofline.collect.meta_trace import trace_identity
    from hroofline.collect.workload import WorkloadConfig

    config = WorkloadConfig("resnet18", 1, "fp32", "sgd", "meta")
    before = trace_identity(config, "v100-sxm2", "forward")
    assert trace_identity(config, "v100-sxm2", "forward") == before
    monkeypatch.setattr(hroofline, "__version__", "99.0")
    assert trace_identity(config, "v100-sxm2", "forward") != before


def test_a_single_prediction_honours_format(cli, tmp_path: Path) -> None:
    argv = ("predict", "--arch", "resnet18", "--gpu", "v100", "--batch-size", "1", "--store", tmp_path / "store")
    text = cli(*argv)
    rows = pd.read_csv(io.StringIO(cli(*argv, "--format", "csv", "--replace").out))
    data = json.loads(cli(*argv, "--format", "json", "--replace").out)
    assert list(rows["phase"]) == [row["phase"] for row in data] == ["forward", "backward", "optimizer", "total"]
    assert list(rows.columns) == list(data[0]) and {"time_bound_s", "time_s", "flops", "bytes_hbm"} <= set(rows)
    stored = json.loads(
        cli("summary", "resnet18-fp32-v100-sxm2-b1-predicted", "--format", "json", "--store", tmp_path / "store").out
    )
    for row in data:
        values = stored["total"] if row["phase"] == "total" else stored["phases"][row["phase"]]
        assert row["time_s"] == pytest.approx(values["time_s"], rel=1e-12)
        assert row["flops"] == pytest.approx(values["flops"], rel=1e-12)
    (step,) = [line for line in text.out.splitlines() if line.startswith("step ")]  # the text table's total row
    assert step.split()[3:5] == [f"{data[-1]['time_s'] * 1e3:.2f}", "ms"] and step.split()[-5] == str(data[-1]["ops"])


def test_a_dev_package_that_is_missing_fails_when_fixtures_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HROOFLINE_REQUIRE_FIXTURES", "1")
    with pytest.raises(pytest.fail.Exception, match="HROOFLINE_REQUIRE_FIXTURES=1"):
        need_package("no_such_package_hroofline")
    monkeypatch.delenv("HROOFLINE_REQUIRE_FIXTURES")
    with pytest.raises(pytest.skip.Exception):
        need_package("no_such_package_hroofline")
    assert need_package("json") is json


def test_a_transformer_s_estimate_is_not_given_the_cnns_error_band(cli, tmp_path: Path) -> None:
    need_package("transformers")  # in the dev extras: HROOFLINE_REQUIRE_FIXTURES=1 fails without it, not skips
    said = cli(
        "predict",
        "--model",
        "hf:gpt2",
        "--gpu",
        "v100",
        "--batch-size",
        "1",
        "--seq-len",
        "64",
        "--store",
        tmp_path / "store",
    )
    assert said.code == 0, said.err
    (step,) = [line for line in said.out.splitlines() if line.startswith("step: estimate")]
    assert "not validated for transformers" in step and "measured on ResNet-50" in step
    assert "were within" not in step  # no band is offered as this estimate's


@pytest.mark.parametrize(
    "argv",
    [
        ("predict", "--arch", "resnet18", "--gpu", "cpu"),
        ("predict", "--arch", "resnet18", "--gpu", "v100,CPU"),
        ("doctor", "--gpu", "cpu", "--report", "x.ncu-rep"),
    ],
    ids=["predict", "predict-sweep", "doctor"],
)
def test_gpu_cpu_is_refused_clearly_where_it_cannot_be(cli, tmp_path: Path, argv: tuple[str, ...]) -> None:
    said = cli(*argv, "--store", tmp_path / "store") if argv[0] == "predict" else cli(*argv)
    assert said.code == 2 and said.err.count("\n") == 1 and "--gpu cpu:" in said.err and "unknown GPU" not in said.err
    assert not (tmp_path / "store").exists()
