"""`profile --backend ncu --kernels top:N`: which kernels ncu profiles, how it is told, and how its counters
join the trace's launches. (The trace pass itself needs a GPU; the pieces are checked here on real data.)"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hroofline.collect.ncu_command import NcuSettings, ncu_passes
from hroofline.collect.ncu_top import (
    MEASURED_COLUMNS,
    KernelSelection,
    join_counters,
    kernel_filter_arguments,
    top_kernel_names,
)
from hroofline.importers import ImportOptions, import_source
from hroofline.metricset import load_metric_set
from tests.conftest import SHARED, need

RECSYS = "kineto_a100_recsys_trace_diff_control_rank3.json.gz"


@pytest.fixture(scope="module")
def recsys():
    path = need(SHARED / "fixtures" / "kineto" / RECSYS)
    return import_source(path, ImportOptions(), load_metric_set())


def test_top_names_are_the_longest_compute_kernels(recsys) -> None:
    events = json.loads(gzip.decompress((SHARED / "fixtures" / "kineto" / RECSYS).read_bytes()))["traceEvents"]
    totals: dict[str, float] = {}
    for event in events:
        if event.get("cat") == "kernel" and not event["name"].startswith("nccl"):
            totals[event["name"]] = totals.get(event["name"], 0.0) + event["dur"]
    expected = sorted(totals, key=totals.get, reverse=True)[:3]
    selection = top_kernel_names(recsys.launches, 3)
    assert list(selection.names) == expected
    counts = sum(1 for e in events if e.get("cat") == "kernel" and e["name"] in expected)
    assert selection.launches == counts
    assert selection.share == pytest.approx(sum(totals[n] for n in expected) / sum(totals.values()), rel=1e-9)


def test_the_filter_matches_exactly_the_chosen_names(recsys) -> None:
    selection = top_kernel_names(recsys.launches, 5)
    arguments = kernel_filter_arguments(selection)
    assert arguments[:2] == ["--kernel-name-base", "demangled"]
    assert arguments[4:] == ["--launch-count", str(selection.launches)]
    pattern = re.compile(arguments[3].removeprefix("regex:"))
    names = set(recsys.launches["kernel"])
    assert {name for name in names if pattern.search(name)} == set(selection.names)
    settings = replace(NcuSettings(), kernel_filter=tuple(arguments))
    metric_set = load_metric_set()
    (one,) = ncu_passes("ncu", metric_set, "ampere", ["python", "-m", "x"], settings, Path("out"))
    assert one.command[one.command.index("--kernel-name") + 1] == arguments[3]
    assert one.command.index("--launch-count") < one.command.index("python")  # ncu's options, then the program
    assert settings.recorded()["kernel_filter"] == " ".join(arguments)


@pytest.mark.parametrize("text", ["top:0", "all", "top:x", "top5"])
def test_bad_kernels_option(cli, text: str) -> None:
    result = cli("profile", "--arch", "resnet18", "--gpu", "a100", "--kernels", text, "--store", "unused")
    assert result.code == 2 and result.err.count("\n") == 1 and "--kernels" in result.err, result.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpu", "cpu"], "only for profiling a GPU"),
        (["--gpu", "a100", "--dry-run"], "not with --dry-run"),
        (["--gpu", "a100", "--backend", "trace"], "only for --backend ncu"),
    ],
)
def test_kernels_only_where_ncu_runs(cli, extra: list[str], message: str) -> None:
    result = cli("profile", "--arch", "resnet18", "--kernels", "top:3", *extra, "--store", "unused")
    assert result.code == 2 and message in result.err and result.err.count("\n") == 1, result.err


def test_counters_join_launch_by_launch(ncu_dir: Path) -> None:
    """ncu's counters land on the trace's launches of the same names, the k-th on the k-th; a name whose
    launch counts differ gets ncu's mean per launch and a warning. The 'trace' here is the same real launches
    with their work unknown, as a trace pass of them would have it."""
    measured = import_source(ncu_dir / "a100_vgg11_train_ncu_console.txt", ImportOptions(), load_metric_set())
    launches = measured.launches.assign(category="kernel")
    for column in MEASURED_COLUMNS:
        launches[column] = np.nan
    first, second = launches["kernel"].value_counts().index[:2]
    chosen = launches["kernel"].isin([first, second])
    selection = KernelSelection(names=(first, second), launches=int(chosen.sum()), share=0.0)
    dropped = launches.index[launches["kernel"] == second][-1]
    trace = replace(measured, launches=launches.drop(index=dropped).reset_index(drop=True))
    joined = join_counters(trace, measured, selection)
    mine = joined.launches[joined.launches["kernel"] == first]
    theirs = measured.launches[measured.launches["kernel"] == first]
    assert len(theirs) >= 2 and theirs[["flops_fp32", "bytes_hbm"]].notna().all().all()
    for column in MEASURED_COLUMNS:
        np.testing.assert_array_equal(mine[column].to_numpy(dtype=float), theirs[column].to_numpy(dtype=float))
    means = joined.launches.loc[joined.launches["kernel"] == second, "bytes_hbm"]
    expected = measured.launches.loc[measured.launches["kernel"] == second, "bytes_hbm"].mean()
    assert means.to_numpy() == pytest.approx(np.full(len(means), expected))
    assert any("gets ncu's mean per launch" in w for w in joined.info.warnings)
    others = joined.launches[~joined.launches["kernel"].isin(selection.names)]
    assert others["bytes_hbm"].isna().all()
    assert joined.info.kind == "kineto+ncu"
