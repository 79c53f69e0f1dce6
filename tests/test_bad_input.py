"""Bad input: one clear line on stderr, exit 1, and the store exactly as it was."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_program, tree_digest

BASE = "v100_gene_dgdxy_time_dram.csv"


@pytest.fixture
def store_with_run(cli, ncu_dir: Path) -> Path:
    assert cli("import", ncu_dir / BASE, "--run", "base").code == 0
    return cli.store


def _assert_refused(cli, store: Path, source: Path, expected: str, *extra: str) -> None:
    before = tree_digest(store)
    for run in ("base", "fresh"):
        result = cli("import", source, "--run", run, *extra)
        assert result.code == 1, result
        assert result.err.count("\n") == 1, result.err
        assert result.err.startswith("hroofline: error: ")
        assert expected in result.err, result.err
        assert "Traceback" not in result.err
        assert tree_digest(store) == before


def test_truncated_report(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes((ncu_dir / "rtx3070_manual_nvtx_daxpy.ncu-rep").read_bytes()[:80_000])
    _assert_refused(cli, store_with_run, cut, "truncated")


def test_csv_cut_mid_row(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    data = (ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv").read_bytes()
    middle = data.index(b"\n", len(data) // 2) + 40  # 40 bytes into a row
    cut = tmp_path / "cut.csv"
    cut.write_bytes(data[:middle])
    _assert_refused(cli, store_with_run, cut, "middle of a row")


def test_csv_cut_mid_row_of_a_ragged_file(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    data = (ncu_dir / "a100_bert_attention_fp32_nersc_metrics.csv").read_bytes()
    middle = data.index(b"\n", len(data) // 2) + 60
    cut = tmp_path / "cut.csv"
    cut.write_bytes(data[:middle])
    _assert_refused(cli, store_with_run, cut, "middle of a row")


def test_csv_cut_at_a_line_boundary(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    """A file cut between two rows parses cleanly but ends with a launch that lacks most of its metrics."""
    lines = (ncu_dir / "a100_dropout_fp64_nersc_metrics.csv").read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.csv"
    cut.write_bytes(b"".join(lines[: len(lines) - 7]))
    _assert_refused(cli, store_with_run, cut, "ends inside launch 162")


def test_console_log_cut_at_a_line_boundary(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    lines = (ncu_dir / "a100_vgg11_train_ncu_console.txt").read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if ", Context " in line)
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(lines[: last + 6]))
    _assert_refused(cli, store_with_run, cut, "ends inside launch 170")


def test_csv_without_kernels(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    header_only = tmp_path / "header.csv"
    header_only.write_bytes((ncu_dir / BASE).read_bytes().split(b"\n", 1)[0] + b"\n")
    _assert_refused(cli, store_with_run, header_only, "no kernel rows")
    log = tmp_path / "nothing.log"
    log.write_text("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    _assert_refused(cli, store_with_run, log, "profiled no kernels")


def test_empty_file(cli, store_with_run: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    _assert_refused(cli, store_with_run, empty, "empty")


@pytest.mark.parametrize("kind", ["markdown", "png", "python"])
def test_file_of_another_kind(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path, kind: str) -> None:
    other = {
        "markdown": ncu_dir / "PROVENANCE.md",
        "python": Path(__file__),
        "png": tmp_path / "x.png",
    }[kind]
    if kind == "png":
        other.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    _assert_refused(cli, store_with_run, other, "not an ncu report")


def test_corrupt_gzip(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    packed = gzip.compress((ncu_dir / BASE).read_bytes())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    _assert_refused(cli, store_with_run, cut, "gzip")


def test_missing_source(cli, store_with_run: Path, tmp_path: Path) -> None:
    _assert_refused(cli, store_with_run, tmp_path / "nope.ncu-rep", "no such file")


def test_one_bad_source_imports_nothing(cli, store_with_run: Path, ncu_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    before = tree_digest(store_with_run)
    result = cli("import", ncu_dir / "rtx3070_manual_nvtx_daxpy.ncu-rep", empty, "--run", "base")
    assert result.code == 1
    assert tree_digest(store_with_run) == before


def _metric_folder(deepcam_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    shutil.copytree(deepcam_dir / "pt-O1-Adam-fw", folder)
    return folder


def test_per_metric_files_that_disagree(cli, store_with_run: Path, deepcam_dir: Path, tmp_path: Path) -> None:
    folder = _metric_folder(deepcam_dir, tmp_path)
    # One metric taken from the backward pass: other launches altogether.
    shutil.copy(deepcam_dir / "pt-O1-Adam-bw" / "out.dram__bytes.sum.gz", folder / "out.dram__bytes.sum.gz")
    _assert_refused(cli, store_with_run, folder, "disagree on the launch sequence")
    result = cli("import", folder, "--run", "x")
    assert "--merge name" in result.err
    # Per-name sums cannot be joined either: the launch counts per name differ.
    _assert_refused(cli, store_with_run, folder, "same launch count per kernel name", "--merge", "name")


def test_reordered_per_metric_file_merges_by_name(cli, deepcam_dir: Path, tmp_path: Path) -> None:
    folder = _metric_folder(deepcam_dir, tmp_path)
    target = folder / "out.dram__bytes.sum.gz"
    lines = gzip.decompress(target.read_bytes()).decode().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = [line for line in lines[start + 1 :] if line.startswith('"')]
    target.write_bytes(gzip.compress("".join(lines[: start + 1] + rows[::-1]).encode()))
    assert cli("import", folder, "--run", "x", "--gpu", "v100").code == 1
    result = cli("import", folder, "--run", "x", "--gpu", "v100", "--merge", "name")
    assert result.code == 0, result.err
    assert "797 launches" in result.err


def test_errors_reach_a_real_process_as_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    result = run_program("import", empty, "--run", "r", "--store", tmp_path / "s")
    assert result.code == 1
    assert result.err.strip().count("\n") == 0 and "empty" in result.err
    assert not (tmp_path / "s" / "runs" / "run=r").exists()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["kernels"], 2),
        (["import", "x.csv"], 2),
        (["kernels", "r", "--group-by", "day"], 2),
        (["kernels", "r", "--top", "0"], 2),
        (["import", "x.csv", "--run", "bad/name"], 2),
        (["import", "x.csv", "--run", "r", "--phase", "lunch"], 2),
        (["import", "x.csv", "--run", "r", "--gpu", "p4000"], 2),
        (["kernels", "missing-run"], 1),
    ],
)
def test_usage_and_lookup_errors(cli, tmp_path: Path, args: list[str], code: int) -> None:
    """In this process (an exception main() let out fails the test as a traceback would; a real process's one line:
    test_errors_reach_a_real_process_as_one_line)."""
    result = cli(*args, "--store", tmp_path / "s")
    assert result.code == code, result
    assert "Traceback" not in result.err


# main() of each command line in turn, in one program (one start, not one per case): per case its exit code, its
# stderr, and whether torch was imported by then (the first case that imports it is the one that fails, named)
MAINS_IN_ONE_PROGRAM = """
import contextlib, io, json, sys
from hroofline.cli.main import main
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    print(json.dumps([code, err.getvalue(), "torch" in sys.modules]))
"""


def _mains_in_one_program(argvs: list[list[str]], env: dict[str, str] | None = None) -> list[tuple[int, str, bool]]:
    command = [sys.executable, "-c", MAINS_IN_ONE_PROGRAM, json.dumps(argvs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert done.returncode == 0 and len(done.stdout.splitlines()) == len(argvs), done.stderr[-2000:]
    return [tuple(json.loads(line)) for line in done.stdout.splitlines()]


def test_unknown_names_get_did_you_mean_before_torch_is_imported(tmp_path: Path) -> None:
    """A misspelt model, GPU or run: one line naming the closest known names, before torch is imported (a torch
    that fails on import is first on the path: the line must come without it; a time limit here was flaky under
    load and measured the machine, not the order)."""
    blocker = tmp_path / "no-torch" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('torch was imported')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")])}
    store = str(tmp_path / "s")
    (tmp_path / "s").mkdir()  # a store (an empty one): the run is what is misspelt
    argvs = [
        ["predict", "--arch", "resnt50", "--gpu", "v100", "--store", store],
        ["predict", "--arch", "resnet50", "--gpu", "a1000", "--store", store],
        ["summary", "resnet5O", "--store", store],
    ]
    model, gpu, run = _mains_in_one_program(argvs, env)
    assert model[0] == 2 and "did you mean resnet50" in model[1] and model[1].count("\n") == 1
    assert gpu[0] == 2 and "did you mean a100" in gpu[1] and "`hroofline gpus` lists them" in gpu[1]
    assert run[0] == 1 and "no run named 'resnet5O'" in run[1] and run[1].count("\n") == 1
    assert "torch was imported" not in model[1] + gpu[1] + run[1]
    assert not (model[2] or gpu[2] or run[2])


def test_torchvision_names_are_checked_without_torchvision() -> None:
    """The bundled list is the installed torchvision's own."""
    import torchvision

    from hroofline.collect.models import _bundled_torchvision_names

    bundled = _bundled_torchvision_names()
    assert bundled is not None
    assert bundled["classification"] == set(torchvision.models.list_models(module=torchvision.models))
    assert bundled["segmentation"] == set(torchvision.models.list_models(module=torchvision.models.segmentation))


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    """argparse's own errors too: one line, the way to --help, exit 2; a misspelt command gets did-you-mean."""
    top = run_program("top", "x", "-n", "0", "--store", str(tmp_path / "s"))
    assert top.code == 2 and top.err.count("\n") == 1 and "must be 1 or more" in top.err
    assert "`hroofline top --help`" in top.err
    command = run_program("summry", "x")
    assert command.code == 2 and command.err.count("\n") == 1 and "did you mean summary?" in command.err


def test_malformed_input_shapes_are_refused_before_torch(tmp_path: Path) -> None:
    """An --input-shape a torchvision model cannot take (224x224: no channels), or no shape at all, is one line
    naming the C,H,W form, exit 2, from every command that takes it, before torch is imported (it used to trace
    for seconds first and then name no form); a transformer's --input-shape is refused as early."""
    cases = [
        (["predict", "--arch", "resnet18", "--gpu", "t4"], "224x224", "got '224x224'"),
        (["profile", "--arch", "resnet18", "--gpu", "cpu"], "224x224", "got '224x224'"),
        (["profile", "--arch", "resnet18", "--gpu", "cpu", "--backend", "trace"], "3,224", "got '3,224'"),
        (["predict", "--arch", "resnet18,vgg11", "--gpu", "t4"], "3,224,224,1", "got '3,224,224,1'"),
        (["predict", "--model", "mymodel.py:build", "--gpu", "t4"], "3,,224", "got '3,,224'"),
        (["predict", "--model", "mymodel.py:build", "--gpu", "t4"], "three", "got 'three'"),
        (["predict", "--model", "hf:gpt2", "--gpu", "t4"], "3,4,4", "give --seq-len, not --input-shape"),
    ]
    argvs = [[*argv, "--input-shape", shape, "--store", str(tmp_path / "s")] for argv, shape, _ in cases]
    for (argv, shape, expected), (code, err, torch_imported) in zip(cases, _mains_in_one_program(argvs), strict=True):
        assert (code, torch_imported) == (2, False), (argv, shape, code, torch_imported)
        assert err.count("\n") == 1 and expected in err, (argv, shape, err)
        if "seq-len" not in expected:
            assert "--input-shape takes C,H,W (e.g. 3,224,224)" in err
    assert not (tmp_path / "s").exists()
