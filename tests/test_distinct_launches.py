"""Distinct-launch profiling: one launch per signature measured by ncu, the rest copied.

Proved on the shared H100 GPT-2 step, recorded both as a trace (every launch's op and inputs) and as a full
ncu report (every launch's counters); their 1,118 kernels match one to one in launch order. The ncu pass is
played by the stand-in ncu (tests/standin/ncu), which replays exactly the real report's results of the op calls
the workload marks."""

from __future__ import annotations

import copy
import json
import shutil
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hroofline.api.collection_cost import check_copy
from hroofline.collect.distinct_launches import (
    MISMATCH_WARNING_SHARE,
    join_distinct,
    mismatch_line,
    plan_distinct_launches,
    time_mismatch,
    write_measure_calls,
)
from hroofline.collect.ncu_backend import profile_with_ncu
from hroofline.collect.ncu_command import NcuSettings, ncu_passes, workload_command
from hroofline.collect.ncu_top import MEASURED_COLUMNS
from hroofline.collect.workload import STEP_PHASES, WorkloadConfig
from hroofline.errors import InputError
from hroofline.importers.build import ImportOptions, import_source
from hroofline.importers.source import ImportedSource
from hroofline.roofs.catalog import resolve_gpu
from hroofline.roofs.metricset import load_metric_set
from hroofline.store.runs import RunDefaults, RunStore

TRACE = "gpt2-amp-bf16-b8-s512-trace.json"
REPORT = "gpt2-amp-bf16-b8-s512-step.ncu-rep"
GPT2 = WorkloadConfig("hf:gpt2", batch_size=8, precision="amp-bf16", seq_len=512)


@cache
def _imported_once(folder: Path, name: str) -> ImportedSource:
    return import_source(folder / name, ImportOptions(), load_metric_set())


def _imported(folder: Path, name: str) -> ImportedSource:
    """The shared step's trace or report, imported once for the module (a second or more each); each test its own
    copy, for some change what they get."""
    return copy.deepcopy(_imported_once(folder, name))


def test_one_launch_per_signature_rebuilds_the_full_report(h100_runs_store: Path) -> None:
    """The acceptance: at most 1/6 of the launches profiled; per phase, FLOPs and bytes at every level within 2%
    of the full report, time at roof within 3%."""
    store = RunStore(h100_runs_store)
    check = check_copy(store.load("gpt2-trace"), store.load("gpt2-ncu"))
    plan = check.plan
    assert plan.launches == 1118
    assert plan.profiled <= plan.launches / 6, plan.profiled
    assert plan.signatures <= plan.profiled
    assert len(plan.counters_from) == plan.launches and plan.unplanned == 0
    assert set(check.per_phase.index) == {"forward", "backward", "optimizer"}
    assert check.flops_error < 0.02 and check.bytes_error < 0.02, check.per_phase
    assert check.time_at_roof_error < 0.03, check.per_phase
    # and not by luck: kernel, grid and block alone put the forward FLOPs 16% off
    launches = store.load("gpt2-trace").launches
    coarse = launches.assign(signature=launches["kernel"] + launches["grid"] + launches["block"])
    trace = store.load("gpt2-trace")
    trace.launches = coarse
    assert check_copy(trace, store.load("gpt2-ncu")).flops_error > 0.1


def _doubled_grid(grid: str) -> str:
    x, *rest = grid.strip("()").split(", ")
    return "(" + ", ".join([str(2 * int(x)), *rest]) + ")"


def test_a_trace_of_another_batch_is_refused(h100_runs_store: Path) -> None:
    """Issue 45 (11): the check compared kernel names only, so the GPT-2 trace with every grid doubled and the
    batch 8 -> 16 passed against the batch-8 report with identical figures. Grids and blocks must agree too."""
    store = RunStore(h100_runs_store)
    trace, report = store.load("gpt2-trace"), store.load("gpt2-ncu")
    launches = trace.launches
    kernel = launches["category"] == "kernel"
    doctored = launches.assign(shapes=launches["shapes"].str.replace("8x512", "16x512", regex=False))
    doctored.loc[kernel, "grid"] = doctored.loc[kernel, "grid"].map(_doubled_grid)
    assert (doctored.loc[kernel, "kernel"] == launches.loc[kernel, "kernel"]).all()  # the names alone agree
    trace.launches = doctored
    with pytest.raises(InputError, match=r"launch 0 has grid \(8192, 1, 1\) in the trace and \(4096, 1, 1\)"):
        check_copy(trace, report)
    trace.launches = launches.assign(block=launches["block"].where(~kernel, "(1024, 1, 1)"))
    with pytest.raises(InputError, match="has block"):
        check_copy(trace, report)


def test_signatures_need_the_ops_inputs(h100_runs_store: Path) -> None:
    launches = RunStore(h100_runs_store).load("gpt2-trace").launches
    kernels = launches[launches["category"] == "kernel"]
    # the optimizer's _foreach_ ops take tensor lists, whose shapes the trace does not record: no signature
    foreach = kernels["op"].astype(str).str.startswith("aten::_foreach_")
    assert foreach.any() and kernels.loc[foreach, "signature"].isna().all()
    # one signature, one kernel, grid, block and op
    same = kernels.dropna(subset=["signature"]).groupby("signature")[["kernel", "grid", "block", "op"]].nunique()
    assert (same == 1).all().all()
    # the same GEMM kernel and grid on other shapes is another signature
    per_kernel = kernels.dropna(subset=["signature"]).groupby(["kernel", "grid", "block"])["shapes"].nunique()
    assert (per_kernel > 1).any()


def _standin_replays(trace: ImportedSource, h100_dir: Path, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """Tells the stand-in ncu what ncu would see: the k-th kernel of the trace's step is the k-th result of the
    full report, launched in its op call. Returns the trace's kernels in launch order."""
    kernels = trace.launches[trace.launches["category"] == "kernel"].sort_values("launch_id")
    launched: dict[str, list[int]] = {}
    for result, call in enumerate(kernels["op_call"]):
        launched.setdefault(str(int(call)), []).append(result)
    monkeypatch.setenv("HROOFLINE_STANDIN_CALLS", json.dumps(launched))
    monkeypatch.setenv("HROOFLINE_STANDIN_REPORT", str(h100_dir / REPORT))
    return kernels


def test_the_ncu_pass_measures_exactly_the_planned_launches(
    cli, h100_dir: Path, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in ncu sees the NVTX filter and the workload's calls file, and replays the real report's
    results launched in those calls; the joined run has every launch, measured or copied."""
    metric_set = load_metric_set()
    trace = _imported(h100_dir, TRACE)
    plan = plan_distinct_launches(trace.launches)
    kernels = _standin_replays(trace, h100_dir, monkeypatch)
    arguments = tmp_path / "ncu-args"
    monkeypatch.setenv("HROOFLINE_STANDIN_ARGS", str(arguments))
    calls = write_measure_calls(plan, tmp_path / "prof" / "measure-calls.json")
    settings = NcuSettings(distinct=True)
    workload = workload_command(GPT2, settings, measure_calls=calls)
    arch = metric_set.arch_of(resolve_gpu("h100-sxm").cc)
    assert arch is not None
    passes = ncu_passes(str(standin), metric_set, arch, workload, settings, tmp_path / "prof")
    said: list[str] = []
    measured = profile_with_ncu(
        passes, settings, metric_set, resolve_gpu("h100-sxm"), said.append, False, plan.profiled
    )
    given = arguments.read_text().splitlines()
    assert given[given.index("--nvtx-include") + 1] == "hroofline@measure/"
    assert given.count("--nvtx-include") == 1
    # exactly the planned launches, in order
    positions = {launch: i for i, launch in enumerate(kernels["launch_id"])}
    assert len(measured.launches) == plan.profiled
    full = _imported(h100_dir, REPORT).launches
    expected = full.iloc[[positions[launch] for launch in plan.measured]]
    assert np.allclose(measured.launches["time_s"], expected["time_s"]) and np.allclose(
        measured.launches["bytes_l2"], expected["bytes_l2"]
    )
    assert f"done, {plan.profiled} launches profiled" in " ".join(said)
    assert any(f"of {plan.profiled} launches profiled" in line for line in said)

    joined = join_distinct(trace, measured, plan).launches
    assert len(joined) == len(trace.launches)
    # each measured launch carries the counters ncu measured on that very launch of the full report
    mine = joined.set_index("launch_id").loc[list(plan.measured)]
    for column in ("flops_tensor_bf16", "bytes_l2", "bytes_hbm"):
        assert np.allclose(mine[column].to_numpy(float), expected[column].to_numpy(float), equal_nan=True)
    in_phases = joined[(joined["category"] == "kernel") & joined["phase"].isin(STEP_PHASES)]
    assert in_phases["counters_from"].notna().all()
    own = in_phases["counters_from"] == in_phases["launch_id"]
    assert set(in_phases.loc[own, "launch_id"]) == set(plan.measured)
    # a copied launch carries its source's counters and keeps its own trace time
    by_id = joined.set_index("launch_id")
    copied = in_phases[~own]
    source = by_id.loc[copied["counters_from"].astype(int)]
    for column in ("flops_tensor_bf16", "bytes_l1", "bytes_l2", "bytes_hbm"):
        assert column in MEASURED_COLUMNS
        assert np.allclose(copied[column].to_numpy(float), source[column].to_numpy(float), equal_nan=True)
    trace_times = trace.launches.set_index("launch_id").loc[copied["launch_id"], "time_s"]
    assert np.array_equal(copied["time_s"].to_numpy(), trace_times.to_numpy())

    # stored, the run says how many launches were measured: summary (table and JSON), top, report
    store = tmp_path / "store"
    RunStore(store).replace_run(
        "gpt2", [join_distinct(trace, measured, plan)], RunDefaults("h100-sxm", "amp-bf16", None)
    )
    copies = len(plan.counters_from) - plan.profiled
    line = f"{plan.profiled:,} of {plan.launches:,} kernel launches measured by ncu, {copies:,} copied"
    assert line in cli("summary", "gpt2", "--store", str(store)).out
    counters = json.loads(cli("summary", "gpt2", "--format", "json", "--store", str(store)).out)["counters"]
    assert counters == {"launches": plan.launches, "measured": plan.profiled, "copied": copies}
    assert line in cli("top", "gpt2", "--store", str(store)).out
    page = tmp_path / "report"
    assert cli("report", "gpt2", "--out", str(page), "--store", str(store)).code == 0
    assert line in (page / "index.html").read_text()


def test_a_pass_that_ran_other_kernels_is_refused(h100_dir: Path) -> None:
    from hroofline.errors import ProfilingError

    trace = _imported(h100_dir, TRACE)
    plan = plan_distinct_launches(trace.launches)
    full = _imported(h100_dir, REPORT)
    shifted = full.launches.iloc[1 : plan.profiled + 1]  # as many results, other kernels
    with pytest.raises(ProfilingError, match=r"different kernels|did not line up"):
        join_distinct(trace, type(full)(full.info, shifted, full.cc, full.device_name), plan)


def test_copies_far_from_their_measured_launchs_time_are_said(h100_dir: Path) -> None:
    """The copy check: on the real step a few first calls differ (a note); a signature that missed something,
    its copies twice as long, is a warning pointing to --every-launch."""
    trace = _imported(h100_dir, TRACE)
    plan = plan_distinct_launches(trace.launches)
    frame = trace.launches.assign(
        counters_from=pd.array(trace.launches["launch_id"].map(plan.counters_from), dtype="Int64")
    )
    off, copied, share = time_mismatch(frame)
    assert copied == plan.launches - plan.profiled and 0 < off < 20 and share < MISMATCH_WARNING_SHARE
    assert "--every-launch" not in mismatch_line(off, copied, share)
    copies = frame["counters_from"].notna() & (frame["counters_from"] != frame["launch_id"])
    largest = frame.loc[copies].groupby("counters_from")["time_s"].sum().idxmax()
    frame.loc[copies & (frame["counters_from"] == largest), "time_s"] *= 2
    off, copied, share = time_mismatch(frame)
    assert share > MISMATCH_WARNING_SHARE and "--every-launch" in mismatch_line(off, copied, share)
    measured_only = frame.assign(counters_from=frame["launch_id"])
    assert time_mismatch(measured_only) is None


def test_profile_plans_measures_and_copies(
    cli, h100_dir: Path, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hroofline profile` on a GPU as a user runs it: the trace pass (here the shared trace of that step), the
    plan, ncu (the stand-in), the join and the store; its output says what it measured and what it copied."""
    import hroofline.collect.preflight as preflight
    import hroofline.collect.trace_backend as trace_backend
    from hroofline.importers.trace_source import MARKED_CALLS_SETTING

    trace = _imported(h100_dir, TRACE)
    trace.info.settings[MARKED_CALLS_SETTING] = "the trace's External ids stand for hroofline's call numbers here"
    monkeypatch.setattr(trace_backend, "profile_trace", lambda *args: trace)
    monkeypatch.setattr(preflight, "gpu_visible", lambda: True)
    kernels = _standin_replays(trace, h100_dir, monkeypatch)
    store = tmp_path / "store"
    result = cli(
        *("profile", "--model", "hf:gpt2", "--seq-len", "512", "--batch-size", "8", "--precision", "amp-bf16"),
        *("--gpu", "h100-sxm", "--force-gpu", "--run", "gpt2", "--out-dir", str(tmp_path / "prof")),
        *("--store", str(store)),
    )
    assert result.code == 0, result.err
    assert "ncu pass: 168 of 1,118 launches (15.0%), at least one of each of 168 signatures" in result.err
    assert "all metrics: done, 168 launches profiled" in result.err
    assert "168 of 1,118 launches measured by ncu (168 signatures), 950 copied" in result.err
    assert json.loads((tmp_path / "prof" / "measure-calls.json").read_text()) == sorted(
        {
            int(c)
            for c in kernels.set_index("launch_id").loc[
                list(plan_distinct_launches(trace.launches).measured), "op_call"
            ]
        }
    )
    summary = cli("summary", "gpt2", "--store", str(store)).out
    assert "168 of 1,118 kernel launches measured by ncu, 950 copied" in summary


def test_summary_counts_kernels_apart_from_copies(cli, h100_runs_store: Path) -> None:
    """Issue 45 (minor): the trace's summary counted its 107 memsets as kernels (1,225). Its kernels per phase are
    the ncu report's launches of the same step (ncu profiles kernels only); the memsets are counted apart."""
    trace = json.loads(cli("summary", "gpt2-trace", "--format", "json", store_dir=h100_runs_store).out)
    report = json.loads(cli("summary", "gpt2-ncu", "--format", "json", store_dir=h100_runs_store).out)
    for phase, values in report["phases"].items():
        assert trace["phases"][phase]["kernels"] == values["kernels"], phase
    assert trace["total"]["kernels"] == report["total"]["kernels"] == 1118
    launches = RunStore(h100_runs_store).load("gpt2-trace").launches
    assert trace["total"]["copies"] == int((launches["category"] == "memset").sum()) == 107
    assert "copies" not in report["total"]  # an ncu report has no copies to count


def test_a_trace_and_the_report_of_its_step_are_joined_not_added(
    h100_runs_store: Path, h100_dir: Path, tmp_path: Path, cli
) -> None:
    """Issue 45: imported into one run, the GPT-2 trace and the ncu report of the same step gave 2,343 launches and
    71.7 ms (every launch twice). In one import they are joined launch for launch: the step's time once (the
    trace's), ncu's counters on its kernels; a second import into a run holding the other is refused."""
    store = RunStore(h100_runs_store)
    trace, report = store.load("gpt2-trace").launches, store.load("gpt2-ncu").launches
    joined = cli("import", h100_dir / TRACE, h100_dir / REPORT, "--run", "both", store_dir=tmp_path / "s")
    assert joined.code == 0, joined.err
    assert "1,118 launches joined with" in joined.err
    run = RunStore(tmp_path / "s").load("both")
    assert len(run.meta.sources) == 1 and run.meta.sources[0].collection == "trace+ncu"
    assert [Path(f["name"]).name for f in run.meta.sources[0].files] == [TRACE, REPORT]
    assert len(run.launches) == len(trace) and run.launches["time_s"].sum() == pytest.approx(trace["time_s"].sum())
    assert 0.030 < run.launches["time_s"].sum() < 0.040  # one ~34 ms step, not 71.7 ms
    kernels = run.launches[run.launches["category"] == "kernel"].sort_values("launch_id")
    ncu = report.sort_values("launch_id")
    for column in ("flops_tensor_bf16", "bytes_hbm", "bytes_l2"):
        assert np.allclose(kernels[column].fillna(0), ncu[column].fillna(0), rtol=1e-9), column
    assert set(kernels["work_source"]) == {"ncu"}  # measured, not the trace's formulas (review of issue 45)
    again = cli("import", h100_dir / REPORT, "--run", "both", store_dir=tmp_path / "s")
    assert again.code == 1 and "joined with ncu's counters already" in again.err
    # two imports into one run: the second refused, the run left as it was
    copy = tmp_path / "copy"

    shutil.copytree(h100_runs_store, copy)
    refused = cli("import", h100_dir / REPORT, "--run", "gpt2-trace", store_dir=copy)
    assert refused.code == 1 and not refused.out
    (line,) = refused.err.splitlines()
    assert "holds" in line and "of the same step (1,118 launches)" in line and "--replace" in line
    assert len(RunStore(copy).load("gpt2-trace").meta.sources) == 1
