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
    function_name,
    join_counters,
    kernel_filter_arguments,
    top_kernel_names,
)
from hroofline.errors import ProfilingError
from hroofline.importers.build import ImportOptions, import_source
from hroofline.roofs.metricset import load_metric_set
from tests.conftest import SHARED, need

RECSYS = "kineto_a100_recsys_trace_diff_control_rank3.json.gz"


@pytest.fixture(scope="module")
def recsys():
    path = need(SHARED / "fixtures" / "kineto" / RECSYS)
    return import_source(path, ImportOptions(), load_metric_set())


def test_top_names_are_the_longest_compute_kernels(recsys) -> None:
    launches = recsys.launches
    in_phases = launches[launches["phase"].isin(["forward", "backward", "optimizer"])]
    events = json.loads(gzip.decompress((SHARED / "fixtures" / "kineto" / RECSYS).read_bytes()))["traceEvents"]
    nccl = {e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")}
    totals = in_phases[~in_phases["kernel"].isin(nccl)].groupby("kernel")["time_s"].sum()
    expected = list(totals.sort_values(ascending=False).index[:3])
    selection = top_kernel_names(launches, 3)
    assert list(selection.names) == expected
    functions = set(map(function_name, expected))
    assert set(selection.functions) == functions
    compute = in_phases[~in_phases["kernel"].isin(nccl)]
    assert selection.launches == int(compute["kernel"].map(function_name).isin(functions).sum())


def test_kineto_and_ncu_spell_the_same_function_alike(ncu_dir: Path) -> None:
    """GCC's demangler (Kineto) writes <4, ...>, ncu's own <(int)4, ...>; (anonymous namespace) is <unnamed>
    in ncu: the function names, and so the filter and the join, agree."""
    ncu_names = set(
        import_source(ncu_dir / "t4_resnet18_trainstep_nvtx_details.csv", ImportOptions(), load_metric_set()).launches[
            "kernel"
        ]
    )
    events = json.loads(gzip.decompress((SHARED / "fixtures" / "kineto" / RECSYS).read_bytes()))["traceEvents"]
    kineto_names = {e["name"] for e in events if e.get("cat") == "kernel"}
    shared = {function_name(n) for n in ncu_names} & {function_name(n) for n in kineto_names}
    assert "at::native::vectorized_elementwise_kernel" in shared
    assert not ({n for n in ncu_names if "vectorized_elementwise" in n} & kineto_names)  # the full names differ
    selection = KernelSelection(("x",), ("at::native::vectorized_elementwise_kernel",), 1, 0.0)
    pattern = re.compile(kernel_filter_arguments(selection)[3].removeprefix("regex:"))
    assert pattern.search("vectorized_elementwise_kernel") and pattern.search(
        "at::native::vectorized_elementwise_kernel"
    )
    assert not pattern.search("unrolled_elementwise_kernel")
    assert function_name("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int)") == (
        function_name("void at::native::<unnamed>::max_pool_forward_nchw<float, float>(int)")
    )


def test_the_filter_matches_exactly_the_chosen_functions(recsys) -> None:
    selection = top_kernel_names(recsys.launches, 5)
    arguments = kernel_filter_arguments(selection)
    assert arguments[:2] == ["--kernel-name-base", "function"]
    assert arguments[4:] == ["--launch-count", str(selection.launches)]
    pattern = re.compile(arguments[3].removeprefix("regex:"))
    functions = {function_name(name) for name in recsys.launches["kernel"]}
    assert {f for f in functions if pattern.search(f)} == set(selection.functions)
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
    """ncu's counters land on the trace's launches of the same functions in the step's phases, the k-th on the
    k-th; a function whose launches do not pair gets ncu's mean per launch and a warning; FP16 FLOPs, peaks and
    times stay the trace's. The 'trace' here is the same real launches with their work unknown, as a trace
    pass of them would have it."""
    measured = import_source(ncu_dir / "a100_vgg11_train_ncu_console.txt", ImportOptions(), load_metric_set())
    launches = measured.launches.assign(category="kernel", phase="forward")
    for column in (*MEASURED_COLUMNS, "flops_fp16"):
        launches[column] = np.nan
    first, second = launches["kernel"].value_counts().index[:2]
    functions = (function_name(first), function_name(second))
    assert functions[0] != functions[1]
    selection = KernelSelection(names=(first, second), functions=functions, launches=0, share=0.0)
    dropped = launches.index[launches["kernel"] == second][-1]
    trace = replace(measured, launches=launches.drop(index=dropped).reset_index(drop=True))
    joined = join_counters(trace, measured, selection)
    of = joined.launches["kernel"].map(function_name)
    in_report = measured.launches["kernel"].map(function_name)
    mine, theirs = joined.launches[of == functions[0]], measured.launches[in_report == functions[0]]
    assert len(theirs) >= 2 and theirs[["flops_fp32", "bytes_hbm"]].notna().all().all()
    for column in MEASURED_COLUMNS:
        np.testing.assert_array_equal(mine[column].to_numpy(dtype=float), theirs[column].to_numpy(dtype=float))
    assert "flops_fp16" in MEASURED_COLUMNS  # ncu's (packed-half2-once) counts: the FP16 roof is halved to match
    means = joined.launches.loc[of == functions[1], "bytes_hbm"]
    expected = measured.launches.loc[in_report == functions[1], "bytes_hbm"].mean()
    assert means.to_numpy() == pytest.approx(np.full(len(means), expected))
    assert any("mean per launch" in w for w in joined.info.warnings)
    assert joined.info.kind == "kineto+ncu"
    nothing = KernelSelection(names=("x",), functions=("no_such_kernel",), launches=0, share=0.0)
    with pytest.raises(ProfilingError, match="none of the chosen"):
        join_counters(trace, measured, nothing)


def test_the_measured_launches_take_the_reports_roofs_at_the_highest_clock() -> None:
    """On an H100 the datasheet gives no L1 or L2 roof: the launches ncu measured take the report's, compute and
    L1 at the GPU's highest SM clock (ncu ran at its base clock), L2 and HBM as ncu measured them. Real launches:
    the H100 GEMM calibration, its work and roofs blanked as a trace pass would have them."""
    from hroofline.model.quantities import ROOF_KEYS
    from hroofline.model.run import PEAK_PREFIX

    report = need(SHARED / "fixtures" / "h100" / "gemm-calibration-base-clock.ncu-rep.xz")
    measured = import_source(report, ImportOptions(), load_metric_set())
    launches = measured.launches.assign(category="kernel", phase="forward")
    roofs = [PEAK_PREFIX + key for key in ROOF_KEYS]
    launches[[*MEASURED_COLUMNS, *roofs]] = np.nan
    name = launches["kernel"].value_counts().index[0]
    selection = KernelSelection(names=(name,), functions=(function_name(name),), launches=0, share=0.0)
    top_clock = 1.98e9  # the H100 SXM's highest SM clock
    joined = join_counters(replace(measured, launches=launches), measured, selection, top_clock)
    mine = joined.launches[joined.launches["kernel"] == name]
    theirs = measured.launches[measured.launches["kernel"] == name]
    assert theirs[PEAK_PREFIX + "l1"].notna().all() and theirs[PEAK_PREFIX + "l2"].notna().all()
    scale = top_clock / theirs["clock_hz"].to_numpy()
    assert (scale > 1.2).all()  # ncu's base clock is well under the highest
    for key, factor in (("l1", scale), ("fp32", scale), ("l2", 1.0), ("hbm", 1.0)):
        expected = theirs[PEAK_PREFIX + key].to_numpy() * factor
        assert mine[PEAK_PREFIX + key].to_numpy() == pytest.approx(expected, rel=1e-9), key
    assert "highest" in joined.info.roofs["l1"] and "1.98 GHz" in joined.info.roofs["fp32"]
    others = joined.launches[joined.launches["kernel"] != name]
    assert others[PEAK_PREFIX + "l2"].isna().all()  # not measured: no report roof
