"""The analysis hot paths do their run-level work once: the report's roof tables share one run's utilisation and
link terms (hroofline/analyze/binding.py RunTerms), conform_launches builds its table in one go, phase_summary
sums a few columns and launch_terms sums on arrays. Their outputs are what they were: tests/test_golden.py holds
the pages and tables; these tests hold the costs and the contracts that let the work be shared. Data:
samples/store (a prediction of ResNet-50 on a V100, made by hroofline predict; in the repository)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hroofline.analyze.binding as binding_module
import hroofline.analyze.utilization as utilization_module
from hroofline.analyze.binding import RoofNotes, roof_table, run_terms
from hroofline.analyze.kernels import KernelQuery, _totals, phase_summary
from hroofline.analyze.utilization import launch_terms
from hroofline.api.report_page import _run_section as run_section
from hroofline.model.quantities import ROOF_KEYS
from hroofline.model.run import LAUNCH_COLUMNS, RAW_METRIC_PREFIX, Run, RunMeta, conform_launches
from hroofline.roofs.ceilings import RunRoofs, run_roofs
from hroofline.store.runs import RunStore

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "store"


@pytest.fixture(scope="module")
def predicted() -> Run:
    """Two of the sample prediction's phases (forward, 286 launches; optimizer, 3)."""
    run = RunStore(SAMPLES).load("resnet50-amp-v100-predicted")
    launches = run.launches
    return Run(run.meta, launches[launches["phase"].isin(["forward", "optimizer"])].reset_index(drop=True))


def test_the_report_computes_a_runs_utilization_terms_once_per_use(
    predicted: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per run: once for its MFU per phase, once for every roof table of its section; before, once per table
    too (2 phases x (chart + layers) + the notes' table = 5, and the phase MFU's: 6)."""
    calls = []
    original = utilization_module.launch_terms

    def counted(run: Run, roofs: object) -> pd.DataFrame:
        calls.append(run.name)
        return original(run, roofs)  # type: ignore[arg-type]

    monkeypatch.setattr(utilization_module, "launch_terms", counted)
    section = run_section(predicted, run_roofs(predicted), 10)  # the report's part that is the run's
    assert [phase.phase for phase in section.phases] == ["forward", "optimizer"]
    assert all(phase.layers is not None for phase in section.phases)  # drawn from the same terms
    assert calls == [predicted.name, predicted.name]


def test_terms_made_before_give_the_tables_made_without(predicted: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table of some of the run's launches takes their terms from the whole run's: it computes no time at roof
    and no utilisation of its own, and it is the table made without them, notes and all."""
    roofs = run_roofs(predicted)
    known = run_terms(predicted, roofs)
    queries = (KernelQuery(group_by="name", phase="forward"), KernelQuery(group_by="layer", phase="optimizer"))
    expected = [(roof_table(predicted, roofs, query, notes := RoofNotes()), notes) for query in queries]

    def computed(*args: object) -> None:
        raise AssertionError("computed again")

    monkeypatch.setattr(binding_module, "_roof_times_and_gaps", computed)
    monkeypatch.setattr(utilization_module, "launch_terms", computed)
    for query, (table, notes) in zip(queries, expected, strict=True):
        with_known = RoofNotes()
        pd.testing.assert_frame_equal(roof_table(predicted, roofs, query, with_known, known), table)
        assert with_known == notes


def test_terms_made_before_count_a_tables_missing_roofs_and_times_over_its_own_launches(predicted: Run) -> None:
    """The notes of a table count its own launches: the first 4 (forward) without a time, and every launch from
    the 201st on without an HBM roof: 86 of the 286 forward ones and the 3 of the optimizer (launches are in step
    order); said as a table made without terms says them."""
    untimed = predicted.launches.index[:4]
    run = Run(
        predicted.meta,
        predicted.launches.assign(time_s=predicted.launches["time_s"].mask(predicted.launches.index.isin(untimed))),
    )
    roofs = run_roofs(run)
    roofs = replace(
        roofs, per_launch=roofs.per_launch.assign(hbm=roofs.per_launch["hbm"].where(run.launches.index < 200))
    )
    known = run_terms(run, roofs)
    sentences = {}
    for phase in ("forward", "optimizer"):
        query = KernelQuery(group_by="name", phase=phase)
        with_known, without = RoofNotes(), RoofNotes()
        pd.testing.assert_frame_equal(
            roof_table(run, roofs, query, with_known, known), roof_table(run, roofs, query, without)
        )
        assert with_known.missing_roofs == without.missing_roofs
        sentences[phase] = with_known.missing_roofs
    assert [s.split(" launch")[0] for s in sentences["forward"]] == ["no HBM bandwidth roof for 86", "4"]
    assert [s.split(" launch")[0] for s in sentences["optimizer"]] == ["no HBM bandwidth roof for 3"]


def test_terms_of_another_launch_table_are_not_used(predicted: Run) -> None:
    """Terms are the launch table's they were made from: a run whose table was replaced since (here every time
    doubled) is judged on its new table, as if no terms were given."""
    stale = run_terms(predicted, run_roofs(predicted))
    doubled = Run(predicted.meta, predicted.launches.assign(time_s=2 * predicted.launches["time_s"]))
    roofs = run_roofs(doubled)
    query = KernelQuery(group_by="name", phase="forward")
    table = roof_table(doubled, roofs, query, None, stale)
    pd.testing.assert_frame_equal(table, roof_table(doubled, roofs, query))
    # the MFU halves with the time: the stale terms (the old times) would have kept it
    before = roof_table(predicted, roofs, query).set_index("kernel")["mfu_pct"]
    after = table.set_index("kernel")["mfu_pct"]
    np.testing.assert_allclose(after.dropna(), before.dropna().loc[after.dropna().index] / 2, rtol=1e-12)


def test_conform_launches_builds_its_table_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every standard column in its dtype, the tensor total made from its parts, the raw metrics last in name
    order, a fresh index; the caller's frame untouched and a column of the right dtype not copied; and no column
    set one by one (each ``frame[name] =`` costs as much as the table's width: 80 of them before)."""
    frame = pd.DataFrame(
        {
            "metric:b": ["1.5", "2"],
            "kernel": ["gemm", "relu"],
            "time_s": [1.0e-3, 2.0e-3],
            "launch_id": [7, 8],
            "source": [0, 0],
            "launches": [1, 1],
            "flops_tensor_fp16": [4.0e9, None],
            "flops_tensor_bf16": [1.0e9, None],
            "flops_tensor": [9.0, 9.0],  # a stale total: made again
            "metric:a": [3, 4],
            "unknown column": [1, 2],
        },
        index=[10, 11],
    )
    kept = frame.copy()
    sets = []
    original = pd.DataFrame.__setitem__

    def counted(self: pd.DataFrame, key: object, value: object) -> None:
        sets.append(key)
        original(self, key, value)

    monkeypatch.setattr(pd.DataFrame, "__setitem__", counted)
    out = conform_launches(frame)
    monkeypatch.undo()
    assert sets == []
    assert list(out.columns) == [*LAUNCH_COLUMNS, RAW_METRIC_PREFIX + "a", RAW_METRIC_PREFIX + "b"]
    # pandas' own equality of dtypes: its default text dtype ('str', a plain list of names' here) is one of 'string'
    assert [c for c, dtype in LAUNCH_COLUMNS.items() if out[c].dtype != dtype] == []
    assert out["launch_id"].dtype == "int64" and out["source"].dtype == "int32" and out["rank"].dtype == "Int64"
    assert list(out.index) == [0, 1] and isinstance(out.index, pd.RangeIndex)
    assert out["flops_tensor"].tolist()[0] == 5.0e9 and pd.isna(out["flops_tensor"].iloc[1])
    assert out["metric:b"].tolist() == [1.5, 2.0] and out["metric:a"].dtype == "float64"
    assert out["phase"].isna().all() and out["clock_hz"].isna().all()
    assert np.shares_memory(out["time_s"].to_numpy(), frame["time_s"].to_numpy())
    out.loc[0, "time_s"] = 5.0  # copy-on-write: the caller's frame keeps its value
    pd.testing.assert_frame_equal(frame, kept)


def test_the_phase_summary_sums_what_it_sums_over_every_column(predicted: Run) -> None:
    """phase_summary reads only the columns its sums need: every figure of it, phase by phase, equals the sums
    over the phase's whole rows (every column kept), and its time, FLOPs and launches are the sums by hand."""
    summary = phase_summary(predicted)
    launches = predicted.launches
    trace = bool(launches["category"].notna().any())
    communicates = bool((launches["category"] == "communication").any())
    assert set(summary) - {"total"} == set(launches["phase"].dropna()) and len(summary) > 2
    for phase in set(summary) - {"total"}:
        rows = launches[launches["phase"] == phase]  # every column: what phase_summary filtered before
        whole = _totals(rows, trace, communicates)
        assert {key: summary[phase][key] for key in whole} == whole  # (the phase's memory is added beside them)
        assert summary[phase]["time_s"] == pytest.approx(float(rows["time_s"].sum()), rel=1e-15)
        assert summary[phase]["kernels"] == int(rows["launches"].sum())
        flops = rows[["flops_fp32", "flops_fp16", "flops_fp64", "flops_tensor"]].sum().sum()
        assert summary[phase]["flops"] == pytest.approx(float(flops), rel=1e-12)
    whole = _totals(launches, trace, communicates)
    assert {key: summary["total"][key] for key in whole} == whole


def test_launch_terms_on_arrays_are_the_sums_counted_by_hand() -> None:
    """launch_terms sums its FLOP columns on arrays: three launches whose terms are counted here. Launch 0: 2 GFLOP
    of FP32 at 10 TFLOP/s and 4 GFLOP of FP16 tensor work (2:4-sparse, judged at the dense FP16 tensor roof) at 100
    TFLOP/s; launch 1: 1 GFLOP of FP64 where the GPU has no FP64 roof (unpriced) and 3 GFLOP of FP32; launch 2:
    no time, so no terms but its unpriced FLOPs count as none."""
    frame = pd.DataFrame(
        {
            "source": [0, 0, 0],
            "launch_id": [0, 1, 2],
            "launches": [1, 1, 1],
            "time_s": [1.0e-3, 2.0e-3, None],
            "flops_fp32": [2.0e9, 3.0e9, 5.0e9],
            "flops_tensor_fp16_sparse": [4.0e9, None, None],
            "flops_fp64": [None, 1.0e9, 1.0e9],
            "bytes_hbm": [1.0e6, None, 2.0e6],
        }
    )
    run = Run(RunMeta("by-hand"), conform_launches(frame))
    peaks = pd.DataFrame({key: [float("nan")] * 3 for key in ROOF_KEYS})
    peaks["fp32"], peaks["tensor_fp16"], peaks["hbm"] = 10.0e12, 100.0e12, 1.0e12
    terms = launch_terms(run, RunRoofs("by hand", "test", peaks))
    assert terms["model_time_at_peak_s"].tolist()[:2] == pytest.approx([2e9 / 10e12 + 4e9 / 100e12, 3e9 / 10e12])
    assert terms["model_flops"].tolist()[:2] == [6.0e9, 3.0e9]  # the unpriced FP64 left out
    assert terms["unpriced_flops"].tolist() == [0.0, 1.0e9, 0.0]
    assert terms[["model_time_at_peak_s", "model_flops"]].iloc[2].isna().all()
    assert terms["hbm_time_at_peak_s"].tolist()[0] == pytest.approx(1e6 / 1e12)
    assert terms["model_launches"].tolist() == [1.0, 1.0, 0.0]
