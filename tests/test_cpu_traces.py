"""A torch.profiler trace recorded on the CPU alone, as a newcomer makes one with the few lines a README shows,
imported as a CPU run (issue 48, item 5); and a GPU trace that names no GPU, said at import."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from hroofline.api import load
from hroofline.roofs.ceilings import load_ceilings_file
from hroofline.roofs.formulas import total_flops
from tests.conftest import SHARED, need, run_script_here, tree_digest

# The README's lines, with a small input so that the test is quick; the second trace leaves the shapes out.
SNIPPET = """\
import sys
import torch, torchvision
from torch.profiler import profile, ProfilerActivity
model = torchvision.models.resnet18()
x = torch.randn(2, 3, 32, 32)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    model(x).sum().backward()
prof.export_chrome_trace(sys.argv[1])
with profile(activities=[ProfilerActivity.CPU]) as prof:
    model(x).sum().backward()
prof.export_chrome_trace(sys.argv[2])
"""
CEILINGS = 'name = "fixed"\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\nfp16 = 800e9\nfp64 = 100e9\n'


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cpu-traces")
    (folder / "make_trace.py").write_text(SNIPPET)
    with_shapes, without = folder / "trace.json", folder / "no-shapes.json"
    run_script_here(folder / "make_trace.py", with_shapes, without)
    elsewhere = folder / "elsewhere.json"
    document = json.loads(with_shapes.read_text())
    document["host_name"] = "another-machine"
    elsewhere.write_text(json.dumps(document))
    ceilings = folder / "fixed.toml"
    ceilings.write_text(CEILINGS)
    return {"trace": with_shapes, "no-shapes": without, "elsewhere": elsewhere, "ceilings": ceilings}


def _ops(path: Path) -> list[dict[str, Any]]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def _outermost_time_s(ops: list[dict[str, Any]]) -> float:
    """Independently: the time of the ops no other op of their thread encloses (their self times add up to it)."""
    total, reach = 0.0, {}
    for op in sorted(ops, key=lambda e: (e["tid"], e["ts"], -e["dur"])):
        end = reach.get(op["tid"], float("-inf"))
        if op["ts"] >= end:
            total += op["dur"]
            reach[op["tid"]] = op["ts"] + op["dur"]
    return total * 1e-6


def test_a_cpu_trace_imports_as_a_cpu_run_and_charts(cli, traces: dict[str, Path], tmp_path: Path) -> None:
    """It was refused ('needs the CUDA activity'): now every op is a launch with its self time and the work of
    its recorded shapes, the run's GPU is cpu (said in one line) and its roofs the --ceilings file; summary, top
    and a chart follow."""
    result = cli("import", traces["trace"], "--run", "mine", "--ceilings", traces["ceilings"])
    assert result.code == 0, result.err
    assert "imported as a CPU run (--gpu cpu)" in result.err
    assert "has no roofs" not in result.err and "record_shapes" not in result.err
    run = load("mine", cli.store)
    assert run.meta.gpu == "cpu" and run.meta.ceilings["label"] == "fixed"
    ops = _ops(traces["trace"])
    launches = run.launches
    assert len(launches) == len(ops)
    # to Kineto's rounding: a child op that ends a nanosecond after its parent keeps that nanosecond
    assert launches["time_s"].sum() == pytest.approx(_outermost_time_s(ops), rel=1e-6)
    # the snippet marks no forward range: autograd's sequence numbers give it (the gradient's seed stays other)
    assert set(launches["phase"]) == {"forward", "backward", "other"}
    # the first convolution, 3 -> 64 channels, 7x7, stride 2: 2 N C_out H W C_in k k FLOPs on a 16x16 output
    first = launches[(launches["shapes"] == "2x3x32x32, 64x3x7x7") & (launches["phase"] != "backward")]
    assert total_flops(first).sum() == pytest.approx(2 * 2 * 64 * 16 * 16 * 3 * 7 * 7, rel=1e-12)
    assert launches.loc[launches["flops_fp32"].notna(), "time_s"].sum() / launches["time_s"].sum() > 0.8
    assert launches["bytes_l1"].notna().any() and launches["bytes_hbm"].isna().all()
    summary = cli("summary", "mine")
    assert summary.code == 0 and "backward" in summary.out, summary.err
    top = cli("top", "mine", "-n", "3")
    assert top.code == 0 and "roofs: fixed" in top.out, top.err
    chart = cli("chart", "mine", "--out", tmp_path / "mine.png")
    assert chart.code == 0, chart.err
    assert (tmp_path / "mine.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpu_cpu_is_accepted_by_import(cli, traces: dict[str, Path]) -> None:
    """`import --gpu cpu` said 'unknown GPU 'cpu''; it names the CPU run, and the line on taking it is not said."""
    result = cli("import", traces["trace"], "--run", "named", "--gpu", "cpu", "--ceilings", traces["ceilings"])
    assert result.code == 0, result.err
    assert "imported as a CPU run" not in result.err
    assert load("named", cli.store).meta.gpu == "cpu"


def test_a_cpu_trace_from_python(traces: dict[str, Path], tmp_path: Path) -> None:
    """The notebook's import_run takes gpu="cpu" (it said 'unknown GPU') and a ceilings file, as the command."""
    import hroofline

    store = tmp_path / "store"
    run = hroofline.import_run(traces["trace"], "py", gpu="cpu", ceilings=traces["ceilings"], store=store)
    assert run.meta.gpu == "cpu" and run.meta.ceilings["label"] == "fixed"
    assert len(run.launches) == len(_ops(traces["trace"]))


def test_a_trace_recorded_here_gets_this_cpus_ceilings(
    cli, traces: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --ceilings, a trace whose host is this machine takes this CPU's ceilings (what profile --gpu cpu
    measures), through the one function that knows them."""
    assert json.loads(traces["trace"].read_text())["host_name"] == socket.gethostname()
    asked: list[bool] = []

    def this_cpu(measure_again: bool = False) -> Any:
        asked.append(measure_again)
        return load_ceilings_file(traces["ceilings"])

    monkeypatch.setattr("hroofline.cli.import_cmd.this_cpu_ceilings", this_cpu)
    result = cli("import", traces["trace"], "--run", "here")
    assert result.code == 0 and asked == [False], result.err
    assert load("here", cli.store).meta.ceilings["label"] == "fixed"
    assert cli("top", "here").code == 0
    again = cli("import", traces["trace"], "--run", "here", "--measure-ceilings", "--replace")
    assert again.code == 0 and asked == [False, True], again.err  # --measure-ceilings: measured anew


def test_the_api_gives_a_trace_recorded_here_this_cpus_ceilings(
    traces: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """import_run, as the command: a trace recorded on this machine takes this CPU's ceilings (cached; it had
    none), and measure_ceilings=True (--measure-ceilings) measures them anew; a trace of another host gets none."""
    import hroofline
    from hroofline.collect.ceilings_cache import CpuCeilings

    asked: list[bool] = []

    def cached(progress: Any, remeasure: bool = False) -> CpuCeilings:
        asked.append(remeasure)
        return CpuCeilings(load_ceilings_file(traces["ceilings"]), None, remeasure, "2026-11-28")

    monkeypatch.setattr("hroofline.collect.ceilings_cache.cpu_ceilings_cached", cached)
    store = tmp_path / "store"
    run = hroofline.import_run(traces["trace"], "here", store=store)
    assert asked == [False] and run.meta.ceilings["label"] == "fixed"
    hroofline.import_run(traces["trace"], "here", measure_ceilings=True, replace=True, store=store)
    assert asked == [False, True]
    away = hroofline.import_run(traces["elsewhere"], "away", store=store)
    assert asked == [False, True] and not away.meta.ceilings


def test_a_trace_from_another_machine_says_how_to_get_its_ceilings(
    cli, traces: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another host's CPU: its ceilings are not this one's. The import says so in one warning line with the way to
    get them; top then takes them with --ceilings."""
    monkeypatch.setattr("hroofline.cli.import_cmd.this_cpu_ceilings", lambda: pytest.fail("not this CPU's"))
    result = cli("import", traces["elsewhere"], "--run", "away")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if line.startswith("hroofline: warning:")]
    assert len(warnings) == 1, result.err
    assert "'another-machine'" in warnings[0] and "hroofline ceilings --measure --out cpu.toml" in warnings[0]
    assert "--ceilings cpu.toml" in warnings[0]
    refused = cli("top", "away")
    assert refused.code == 1 and "hroofline ceilings --measure" in refused.err
    assert cli("top", "away", "--ceilings", traces["ceilings"]).code == 0


def test_a_trace_without_shapes_says_what_is_missing(cli, traces: dict[str, Path]) -> None:
    """record_shapes=False: the times import, and one line says that FLOPs and bytes are unknown and why, rather
    than the run showing no work silently."""
    result = cli("import", traces["no-shapes"], "--run", "bare", "--ceilings", traces["ceilings"])
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if line.startswith("hroofline: warning:")]
    assert len(warnings) == 1 and "record_shapes=False" in warnings[0], result.err
    assert "FLOPs and bytes are unknown" in warnings[0] and "record_shapes=True" in warnings[0]
    launches = load("bare", cli.store).launches
    assert launches["flops_fp32"].isna().all() and launches["time_s"].sum() > 0


def _gpu_trace(tmp_path: Path, name: str, change: Any) -> Path:
    document = json.loads(gzip.decompress(need(SHARED / "fixtures" / "kineto" / DDP).read_bytes()))
    change(document)
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


DDP = "kineto_a100_ddp2_nccl_rank0.json.gz"


def _refused(cli, argv: list[Any], expected: str) -> None:
    before = tree_digest(cli.store) if cli.store.exists() else None
    result = cli(*argv)
    assert result.code in (1, 2) and result.err.count("\n") == 1, result.err
    assert expected in result.err and "Traceback" not in result.err, result.err
    assert (tree_digest(cli.store) if cli.store.exists() else None) == before


def test_cpu_and_gpu_are_not_mixed(cli, traces: dict[str, Path], tmp_path: Path) -> None:
    """--gpu NAME on a CPU trace, --gpu cpu on a GPU trace, a GPU trace into a CPU run and a trace that names a
    GPU but holds none of its activity: one line each, the store unchanged."""
    gpu_trace = need(SHARED / "fixtures" / "kineto" / DDP)
    assert cli("import", traces["trace"], "--run", "cpu-run", "--ceilings", traces["ceilings"]).code == 0
    _refused(cli, ["import", traces["trace"], "--run", "x", "--gpu", "a100"], "recorded with the CPU activity alone")
    _refused(cli, ["import", gpu_trace, "--run", "x", "--gpu", "cpu"], "leave out --gpu cpu")
    _refused(cli, ["import", gpu_trace, "--run", "cpu-run"], "holds data measured on the CPU")

    def without_gpu_activity(document: dict[str, Any]) -> None:
        document["traceEvents"] = [
            e
            for e in document["traceEvents"]
            if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime")
        ]

    no_activity = _gpu_trace(tmp_path, "no-cuda-activity.json", without_gpu_activity)
    _refused(cli, ["import", no_activity, "--run", "x"], "import it with --gpu cpu")


def test_a_gpu_trace_that_names_no_gpu_is_said_at_import(cli, tmp_path: Path) -> None:
    """It imported silently and failed one command later ('has no roofs'). It still imports (summary needs no
    roofs; an AMD GPU or one the catalog lacks gets --ceilings FILE), with one warning line naming the commands
    that need roofs and --gpu NAME; --gpu gives them."""
    nameless = _gpu_trace(tmp_path, "nameless.json", lambda document: document.pop("deviceProperties"))
    result = cli("import", nameless, "--run", "nameless")
    assert result.code == 0, result.err
    # (the DDP trace recorded no shapes either: a line of its own says so)
    warnings = [line for line in result.err.splitlines() if line.startswith("hroofline: warning: run")]
    assert len(warnings) == 1, result.err
    assert "has no roofs" in warnings[0] and "--replace and --gpu NAME" in warnings[0] and "top, chart" in warnings[0]
    assert cli("summary", "nameless").code == 0
    # the commands that need roofs: exit 1 (the run's data, as doctor's), one line, the import that names the GPU
    again = f"hroofline import {nameless} --run nameless --gpu NAME --replace"
    for command in (
        ("top", "nameless"),
        ("advise", "nameless", "--store", cli.store),
        ("chart", "nameless", "--out", tmp_path / "c.html"),
    ):
        refused = cli(*command)
        assert refused.code == 1 and not refused.out and refused.err.count("\n") == 1, refused.err
        assert "run 'nameless' has no roofs" in refused.err and again in refused.err, refused.err
    named = cli("import", nameless, "--run", "nameless", "--gpu", "a100", "--replace")
    assert named.code == 0 and "has no roofs" not in named.err, named.err
    assert cli("top", "nameless").code == 0
