"""The CLI contract: commands, columns, JSON shapes, help."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.kernels import KERNEL_COLUMNS, LAUNCH_CONTEXT, LINK_COLUMNS
from hroofline.model.quantities import UTILIZATION_COLUMNS
from tests.conftest import run_program

SOURCE = "a100_sam_decoder_fp32_nersc_metrics_profpreamble.csv"


@pytest.fixture
def sam(cli, ncu_dir: Path):
    assert cli("import", ncu_dir / SOURCE, "--run", "sam", "--phase", "fw").code == 0
    return cli


def test_kernels_per_launch(sam) -> None:
    table = pd.read_csv(io.StringIO(sam("kernels", "sam", "--format", "csv").out))
    # MFU, HFU, MBU, then the collectives' busbw, algbw and % of link roof (empty here: no communication)
    assert list(table.columns) == [*KERNEL_COLUMNS, *LAUNCH_CONTEXT, *UTILIZATION_COLUMNS, *LINK_COLUMNS]
    assert len(table) == 72 and (table["count"] == 1).all()
    assert table["time_s"].is_monotonic_decreasing
    assert (table["phase"] == "forward").all()
    flops = table[["flops_fp64", "flops_fp32", "flops_fp16"]].sum(axis=1)
    assert (table["flops"] == flops).all()  # no tensor counts collected: the sum skips them
    with_bytes = table[table["bytes_hbm"] > 0]
    assert (with_bytes["ai_hbm"] == with_bytes["flops"] / with_bytes["bytes_hbm"]).all()
    assert (table["flop_rate"] == table["flops"] / table["time_s"]).all()


def test_kernels_by_name_top_and_sort(sam) -> None:
    full = pd.read_csv(io.StringIO(sam("kernels", "sam", "--group-by", "name", "--format", "csv").out))
    launches = pd.read_csv(io.StringIO(sam("kernels", "sam", "--format", "csv").out))
    assert full["count"].sum() == 72 and len(full) == launches["kernel"].nunique()
    assert full["time_s"].sum() == pytest.approx(launches["time_s"].sum(), rel=1e-12)
    top = json.loads(
        sam("kernels", "sam", "--group-by", "name", "--top", "3", "--sort", "bytes_hbm", "--format", "json").out
    )
    assert [row["kernel"] for row in top] == list(full.sort_values("bytes_hbm", ascending=False)["kernel"][:3])
    assert sam("kernels", "sam", "--phase", "backward", "--format", "csv").out.count("\n") == 1  # header only


def test_unknown_sort_column(sam) -> None:
    result = sam("kernels", "sam", "--sort", "speed")
    assert result.code == 2 and "flop_rate" in result.err


def test_summary_json_shape(sam) -> None:
    data = json.loads(sam("summary", "sam", "--format", "json").out)
    assert set(data) == {"run", "phases", "total", "utilization"}  # utilization: MFU's peaks, why any is missing
    assert list(data["phases"]) == ["forward"]
    per_precision = {"flops_tensor_" + p for p in ("tf32", "fp16", "fp16_acc16", "bf16", "fp8", "fp4", "fp64")}
    per_precision |= {f"flops_tensor_{p}_sparse" for p in ("tf32", "fp16", "fp16_acc16", "bf16", "fp8")}
    assert set(data["total"]) == {
        "ops_tensor_int8_sparse",
        "ops_tensor_int4_sparse",
        "time_s",
        "flops",
        "flops_tensor",
        *per_precision,
        "ops_tensor_int8",
        "ops_tensor_int4",
        "ops_tensor_int1",
        "bytes_l1",
        "bytes_l2",
        "bytes_hbm",
        "kernels",
        *UTILIZATION_COLUMNS,
    }
    assert data["total"]["flops_tensor"] is None  # not measured: null, not 0
    assert all(data["total"][column] is None for column in per_precision)
    assert data["total"]["kernels"] == 72


def test_summary_table(sam) -> None:
    lines = sam("summary", "sam").out.splitlines()
    # no GPU named, no ncu peaks: it says why it has no MFU instead of guessing one, above the table
    assert lines[0].startswith("no MFU or MBU: run 'sam' has no roofs: it does not say which GPU it ran on")
    lines = lines[1:]
    assert lines[0].split() == [
        "phase",
        "time_s",
        "flops",
        "flops_tensor",
        "bytes_l1",
        "bytes_l2",
        "bytes_hbm",
        "kernels",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["forward", "total"]


def test_help_teaches() -> None:
    top = run_program("--help")
    assert top.code == 0
    for word in ("import", "runs", "kernels", "summary", "HROOFLINE_STORE"):
        assert word in top.out
    help_import = run_program("import", "--help").out
    for word in ("--merge", "--phase", "--gpu", ".ncu-rep", "gzip"):
        assert word in help_import
    assert "ai_hbm" in run_program("kernels", "--help").out
    bare = run_program()  # `hroofline` alone lists the commands, as --help does
    assert bare.code == 0 and bare.out == top.out


def test_table_shows_short_kernel_names(cli, deepcam_dir: Path) -> None:
    cli("import", deepcam_dir / "pt-O1-Adam-fw", "--run", "o1", "--gpu", "v100", "--phase", "fw")
    lines = cli("kernels", "o1", "--group-by", "name", "--top", "2").out.splitlines()
    assert lines[1].startswith("implicit_convolve_sgemm<__half, ...>  forward")
    assert lines[2].startswith("col2im_kernel<c10::Half, ...>")


def test_each_command_is_registered_by_the_module_main_imports_for_it() -> None:
    """main imports only the running command's module: its table must say where every command lives."""
    import argparse
    import importlib

    from hroofline.cli.main import COMMAND_MODULES

    registered: dict[str, str] = {}
    for module in set(COMMAND_MODULES.values()):
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"hroofline.cli.{module}").register(commands)
        registered.update(dict.fromkeys(commands.choices, module))
    assert registered == COMMAND_MODULES


def test_version_prints_the_package_version() -> None:
    from hroofline import __version__

    shown = run_program("--version")
    assert shown.code == 0 and shown.out == f"hroofline {__version__}\n" and shown.err == ""


def test_every_help_ends_with_its_commands_docs_page(cli) -> None:
    """`hroofline` alone, `hroofline --help` and each command's --help (in COMMANDS) end with the page of the
    documentation that command has (docs/reference/cli/, made from the parsers)."""
    from hroofline.cli.main import COMMANDS

    for argv, page in [((), "index"), (("--help",), "index"), *(((name, "--help"), name) for name in COMMANDS)]:
        shown = cli(*argv)
        assert shown.code == 0, (argv, shown.err)
        assert shown.out.endswith(f"\n\ndocumentation: docs/reference/cli/{page}.md\n"), (argv, shown.out[-200:])
