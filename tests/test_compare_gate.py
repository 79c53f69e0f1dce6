"""``compare --fail-on-regression``: the noise rule on runs built by hand (every interval counted here from its
formula), the t table against the t density, the exit codes, and the DeepCAM runs (../shared/fixtures/deepcam,
Yang et al.'s V100 ncu reports, PROVENANCE.md there): FP32 -> AMP passes, AMP -> FP32 fails naming its phases
and families, the JSON validates against docs/reference/compare.schema.json and the Markdown parses as GFM with
its tables whole."""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from hroofline.analyze.compare import Comparison, compare_runs
from hroofline.analyze.gate import compare_json, gate
from hroofline.analyze.gate_noise import T_975, item_spreads, t_975, timed
from hroofline.api.views import markdown_summary
from hroofline.model.run import Run, RunMeta, conform_launches
from hroofline.render.compare_markdown import comparison_markdown
from hroofline.render.gate_text import verdict_text
from hroofline.render.text import to_json
from hroofline.store.runs import RunStore

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "reference" / "compare.schema.json"
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "compare.md"
MS = 1e-3


def _t_cdf(t: float, degrees: int) -> float:
    """Student's t distribution function by Simpson's rule over its density (no statistics package)."""
    norm = math.gamma((degrees + 1) / 2) / (math.sqrt(degrees * math.pi) * math.gamma(degrees / 2))
    steps = 20000
    width = t / steps
    total = 0.0
    for index in range(steps + 1):
        x = index * width
        weight = 1 if index in (0, steps) else (4 if index % 2 else 2)
        total += weight * (1 + x * x / degrees) ** (-(degrees + 1) / 2)
    return 0.5 + norm * total * width / 3


@pytest.mark.parametrize("degrees", [1, 2, 3, 4, 9, 29, 30, 31, 60])
def test_the_t_quantiles_leave_two_and_a_half_percent_above(degrees: int) -> None:
    assert _t_cdf(t_975(degrees), degrees) == pytest.approx(0.975, abs=2e-4)
    assert len(T_975) == 30


def _run(name: str, rows: list[tuple[str, str, float, int | None]]) -> Run:
    """A CPU run of (phase, kernel, seconds, step) launches, each its own signature by kernel."""
    frame = pd.DataFrame(
        {
            "source": 0,
            "launch_id": range(len(rows)),
            "phase": [row[0] for row in rows],
            "nvtx": [row[0] for row in rows],
            "kernel": [row[1] for row in rows],
            "time_s": [row[2] for row in rows],
            "step": pd.array([row[3] for row in rows], dtype="Int64"),
            "launches": 1,
            "flops_fp32": 1e6,
        }
    )
    return Run(RunMeta(name, gpu="cpu"), conform_launches(frame))


def _stepped(name: str, times_ms: list[float]) -> Run:
    return _run(name, [("forward", "aten::mm", t * MS, step) for step, t in enumerate(times_ms)])


def _verdict(base: Run, candidate: Run, pct: float = 5.0):
    return gate(base, candidate, compare_runs(base, candidate), {"phase": pct})


def test_steps_give_the_mean_and_its_95_percent_interval() -> None:
    base = _stepped("base", [10, 11, 12])
    spread = item_spreads(timed(base), base.launches["phase"].astype(str))["forward"]
    half = 4.303 * statistics.stdev([10, 11, 12]) / math.sqrt(3)  # t(0.975, 2) s / sqrt(k)
    assert spread.time_s == pytest.approx(11 * MS)
    assert spread.half_width_s == pytest.approx(half * MS)
    assert (spread.noise, spread.repeats) == ("steps", 3)


def test_a_slowdown_inside_the_noise_passes_and_one_beyond_it_fails() -> None:
    base = _stepped("base", [10, 11, 12])
    half = 4.303 / math.sqrt(3)  # ms, both runs: s = 1 ms, k = 3
    inside = _verdict(base, _stepped("inside", [13, 14, 15]))  # +27% by the means, but (14 - h) < 1.05 (11 + h)
    assert inside.passed and (14 - half) < 1.05 * (11 + half)
    beyond = _verdict(base, _stepped("beyond", [20, 21, 22]))
    assert not beyond.passed
    found = {item.name: item for item in beyond.regressions}
    assert set(found) == {"forward", "total"}
    item = found["forward"]
    assert item.change == pytest.approx(21 / 11 - 1)
    assert item.low == pytest.approx((21 - half) / (11 + half) - 1)
    assert item.high == pytest.approx((21 + half) / (11 - half) - 1)
    assert item.behind == [("mm", pytest.approx(10 * MS))]  # the kernel family of aten::mm
    assert _verdict(base, _stepped("beyond", [20, 21, 22]), pct=40).passed  # low = +37.3% < 40%
    faster = _verdict(_stepped("slow", [20, 21, 22]), base)
    assert faster.passed and {item.name for item in faster.improvements} == {"forward", "total"}


def test_one_measurement_applies_the_percentage_alone_and_says_so() -> None:
    base = _run("base", [("forward", "aten::mm", 10 * MS, None)])
    slower = _verdict(base, _run("cand", [("forward", "aten::mm", 10.6 * MS, None)]))
    assert not slower.passed and slower.regressions[0].low == pytest.approx(0.06)
    assert any("cannot be told" in note for note in slower.notes)
    assert _verdict(base, _run("cand", [("forward", "aten::mm", 10.4 * MS, None)])).passed


def test_launches_repeated_across_items_but_not_inside_one_fall_back_to_the_percentage() -> None:
    """aten::mm once in forward, once in backward (one step): the run repeats a launch, but no phase holds two
    of it, so the phases have no degree of freedom: noise 'none', +6% fails a 5% gate (6 > 5), +4% passes."""
    base = _run("base", [("forward", "aten::mm", 1.0 * MS, None), ("backward", "aten::mm", 1.0 * MS, None)])
    slower = _verdict(
        base, _run("cand", [("forward", "aten::mm", 1.06 * MS, None), ("backward", "aten::mm", MS, None)])
    )
    assert timed(base).noise.noise == "launches"
    assert [(item.name, item.base.noise, item.candidate.noise) for item in slower.regressions] == [
        ("forward", "none", "none")
    ]
    assert slower.regressions[0].low == pytest.approx(0.06) and slower.regressions[0].base.half_width_s == 0
    assert sum("never inside one" in note and note.startswith("phase gate") for note in slower.notes) == 2
    within = _run("cand", [("forward", "aten::mm", 1.04 * MS, None), ("backward", "aten::mm", MS, None)])
    assert _verdict(base, within).passed


def test_repeated_launches_give_the_noise_of_a_single_step() -> None:
    """Four launches of one kernel (1.0, 1.2, 0.8, 1.0 ms) and one of another (2.0 ms): the group adds
    n s² = 4 (0.08 / 3); the lone launch its time² times the pooled squared variation, (0.08 / 3) / 1²."""
    rows = [("forward", "aten::mm", t * MS, None) for t in (1.0, 1.2, 0.8, 1.0)]
    run = _run("launches", [*rows, ("forward", "aten::add", 2.0 * MS, None)])
    spread = item_spreads(timed(run), run.launches["phase"].astype(str))["forward"]
    group_var = statistics.variance([1.0, 1.2, 0.8, 1.0])
    variance = 4 * group_var + 2.0**2 * group_var / 1.0**2
    assert spread.time_s == pytest.approx(6.0 * MS)
    assert spread.half_width_s == pytest.approx(3.182 * math.sqrt(variance) * MS)  # t(0.975, 3)
    assert (spread.noise, spread.repeats) == ("launches", 4)


@pytest.fixture(scope="module")
def schema() -> dict:
    from jsonschema import Draft202012Validator

    loaded = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(loaded)
    return loaded


@pytest.fixture(scope="module")
def amp_then_fp32(deepcam_store: Path) -> tuple[Run, Run, Comparison]:
    """AMP O1 as the base, FP32 as the candidate: what a change back to FP32 would show."""
    store = RunStore(deepcam_store)
    base, candidate = store.load("deepcam-O1"), store.load("deepcam-O0")
    return base, candidate, compare_runs(base, candidate)


def test_deepcam_amp_passes_the_gate_and_fp32_after_it_fails(cli, deepcam_store: Path) -> None:
    store = ("--store", deepcam_store, "--format", "csv")  # CSV on stdout, the verdict on stderr (no advice to judge)
    amp = cli("compare", "deepcam-O0", "deepcam-O1", "--fail-on-regression", "5", *store)
    assert amp.code == 0 and "gate passed" in amp.err
    back = cli("compare", "deepcam-O1", "deepcam-O0", "--fail-on-regression", *store)  # PCT left out: 5
    assert back.code == 1 and "gate FAILED: 3 regressions beyond the gate (phase 5%)" in back.err
    # backward: convolution 255 - 130 ms, gemm 39.0 - 6.65 ms, as compare's own table has them
    assert "convolution +125 ms, gemm +32.4 ms" in back.err
    assert back.out.startswith("phase,")


def test_the_json_names_the_phases_and_families_and_follows_the_schema(
    amp_then_fp32: tuple[Run, Run, Comparison], schema: dict
) -> None:
    from jsonschema import Draft202012Validator

    base, candidate, comparison = amp_then_fp32
    verdict = gate(base, candidate, comparison, {"phase": 5, "family": 10})
    data = json.loads(to_json(compare_json(comparison, verdict)))
    Draft202012Validator(schema).validate(data)
    assert data["schema_version"] == 1 and data["gate"]["passed"] is False
    phases = {item["name"]: item for item in data["gate"]["regressions"] if item["level"] == "phase"}
    assert set(phases) == {"forward", "backward", "total"}  # the optimizer: 17.0 ms -> 16.9 ms
    for phase in ("forward", "backward"):
        row = data["phases"][phase]  # one step each: the gate's change is compare's time ratio
        assert phases[phase]["change"] == pytest.approx(row["candidate_time_s"] / row["base_time_s"] - 1)
        assert phases[phase]["change_low"] > 0.05
        assert [behind["name"] for behind in phases[phase]["behind"][:2]] == ["convolution", "gemm"]
    # the guide's and the validation page's figures (docs/validation.md, compare-gate)
    assert phases["forward"]["change"] == pytest.approx(0.637, abs=5e-4)
    assert phases["forward"]["change_low"] == pytest.approx(0.607, abs=5e-4)
    assert phases["backward"]["change"] == pytest.approx(0.754, abs=5e-4)
    assert phases["backward"]["change_low"] == pytest.approx(0.685, abs=5e-4)
    families = {(i["phase"], i["name"]) for i in data["gate"]["regressions"] if i["level"] == "family"}
    assert {("forward", "convolution"), ("backward", "convolution"), ("backward", "gemm")} <= families
    assert ("backward", "nchwtonhwckernel") in {(i["phase"], i["name"]) for i in data["gate"]["gone"]}
    ungated = json.loads(to_json(compare_json(comparison, None)))
    Draft202012Validator(schema).validate(ungated)
    assert ungated["gate"] is None


def _rows(text: str, level: str) -> list[list[str]]:
    """The rows of a verdict table (in text) at ``level``, as their cells (columns are two or more spaces apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.startswith(level + "  ")]


def test_the_verdict_prints_half_widths_to_three_digits_as_the_guide_shows(
    amp_then_fp32: tuple[Run, Run, Comparison],
) -> None:
    base, candidate, comparison = amp_then_fp32
    both = verdict_text(gate(base, candidate, comparison, {"phase": 5, "family": 10}))
    assert "e+" not in both  # si(h, "s", 2) printed 14.1 ms ± 1.8e+02 µs
    # backward gemm, FP32: 39.0 ms; its half-width 182 µs (launches of one step), three digits like its time
    gemm = [row for row in _rows(both, "family") if row[1:3] == ["backward", "gemm"]]
    assert gemm and re.fullmatch(r"39\.0 ms ± \d{3} µs", gemm[0][4])
    # the guide's example (docs/guides/compare.md) is what the phase gate prints, row for row
    guide = GUIDE.read_text().split("hroofline compare deepcam-amp-o1 deepcam-fp32 --fail-on-regression")[1]
    shown = _rows(verdict_text(gate(base, candidate, comparison, {"phase": 5})), "phase")
    assert _rows(guide.split("```")[0], "phase") == shown and len(shown) == 3


@pytest.mark.parametrize(
    "options",
    [
        ["--fail-on-regression", "fast"],
        ["--phase-gate", "-1"],
        ["--gate", "speed=5"],
        ["--gate", "layer=ten"],
        ["--format", "html"],
    ],
)
def test_bad_gate_options_exit_2_with_one_line(cli, deepcam_store: Path, options: list[str]) -> None:
    result = cli("compare", "deepcam-O0", "deepcam-O1", *options, "--store", deepcam_store)
    assert result.code == 2
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 2


def _tables(markdown: str) -> list[list[list[str]]]:
    """Each table of GitHub-flavoured Markdown as its rows of cell texts (markdown-it-py, its GFM table rule)."""
    from markdown_it import MarkdownIt

    tables: list[list[list[str]]] = []
    in_cell = False
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            tables[-1].append([])
        elif token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type == "inline" and in_cell:
            tables[-1][-1].append(token.content)
    return tables


def test_the_markdown_summary_parses_with_its_tables_whole(amp_then_fp32: tuple[Run, Run, Comparison]) -> None:
    base, candidate, comparison = amp_then_fp32
    verdict = gate(base, candidate, comparison, {"phase": 5, "family": 10})
    markdown = markdown_summary(comparison, base, candidate, verdict)
    regressions, improvements, phases = _tables(markdown)
    assert len(regressions) == 1 + len(verdict.regressions) and {len(row) for row in regressions} == {8}
    assert len(improvements) == 1 + len(verdict.improvements) and {len(row) for row in improvements} == {8}
    assert [row[0] for row in phases] == ["phase", "forward", "backward", "optimizer", "total"]
    assert {len(row) for row in phases} == {5}
    assert {"`forward`", "`backward`", "`convolution`", "`gemm`"} <= {row[2] for row in regressions[1:]}
    assert "### Advice for `deepcam-O0`" in markdown  # its FP32 convolutions off the tensor cores
    assert "http" not in markdown and "![" not in markdown  # link-free


def test_the_comparison_carries_each_phases_change_and_the_markdown_formats_it(
    amp_then_fp32: tuple[Run, Run, Comparison],
) -> None:
    comparison = amp_then_fp32[2]
    forward = comparison.phases["forward"]
    # the guide's figure (docs/validation.md, compare-gate), counted from compare's own two times
    assert forward["time_change"] == pytest.approx(forward["candidate_time_s"] / forward["base_time_s"] - 1)
    assert forward["time_change"] == pytest.approx(0.637, abs=5e-4)
    phases = _tables(comparison_markdown(comparison, None, []))[0]
    assert phases[1][:4] == ["forward", "104 ms", "170 ms", "+63.7%"]
    # rendering only formats: a change the comparison carries is the one printed, whatever the times say
    carried = {name: {**row, "time_change": 0.25} for name, row in comparison.phases.items()}
    shown = _tables(comparison_markdown(replace(comparison, phases=carried), None, []))[0]
    assert {row[3] for row in shown[1:]} == {"+25.0%"}


def test_the_api_gives_the_verdict_and_the_summary(deepcam_store: Path) -> None:
    import hroofline

    comparison = hroofline.compare("deepcam-O1", "deepcam-O0", store=deepcam_store)
    verdict = comparison.gate(phase=5)
    assert not verdict.passed
    assert sorted(item.name for item in verdict.regressions) == ["backward", "forward", "total"]
    assert str(verdict).startswith("gate FAILED: 3 regressions")
    assert "| level | phase | item |" in comparison.markdown(verdict)
