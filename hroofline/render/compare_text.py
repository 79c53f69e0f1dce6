"""A comparison of two runs as text: the phase table, then the largest gains and regressions."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hroofline.analyze.compare import Comparison
from hroofline.model.numbers import plain, si
from hroofline.render.text import text_table

PHASE_CSV_COLUMNS: tuple[str, ...] = (
    "base_time_s",
    "candidate_time_s",
    "speedup",
    "time_ratio",
    "base_flops",
    "candidate_flops",
    "flops_ratio",
    "base_tensor_share",
    "candidate_tensor_share",
    "base_bytes_hbm",
    "candidate_bytes_hbm",
    "hbm_bytes_ratio",
    "base_bytes_l2",
    "candidate_bytes_l2",
    "base_bytes_l1",
    "candidate_bytes_l1",
)


ESTIMATE_CSV_COLUMNS: tuple[str, ...] = (
    "measured_over_estimated_time",
    "measured_over_bound",
    "measured_over_estimated_flops",
    "measured_over_estimated_bytes_hbm",
)


def phase_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per phase; a prediction against a measured run also has the measured/estimated ratios."""
    columns = PHASE_CSV_COLUMNS + (ESTIMATE_CSV_COLUMNS if comparison.estimate_versus_measured else ())
    rows = [{"phase": phase, **{k: values.get(k) for k in columns}} for phase, values in comparison.phases.items()]
    return pd.DataFrame(rows, columns=["phase", *columns])


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None = None  # what it sorts by, where the text is a number with its unit


@dataclass(frozen=True)
class TitledTable:
    title: str
    header: list[str]
    rows: list[list[Cell]]
    text_columns: int  # the leading columns that hold text


@dataclass(frozen=True)
class ComparisonTables:
    """A comparison laid out for people, as tables: ``comparison_text`` prints them, the report draws them."""

    heading: str
    tables: list[TitledTable]
    left_out: list[str]  # phases only one run has
    notes: list[str]


def _ratio(value: float | None) -> str:
    return plain(value)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _estimate_table(comparison: Comparison) -> TitledTable:
    """A prediction against a measured run: per phase, the measured run's time, FLOPs and HBM bytes over the
    prediction's, and its time over the prediction's roofline bound."""
    base_estimated = comparison.predicted == "base"
    rows = []
    for phase, v in comparison.phases.items():
        estimated = v["base_time_s"] if base_estimated else v["candidate_time_s"]
        measured = v["candidate_time_s"] if base_estimated else v["base_time_s"]
        time = v["measured_over_estimated_time"]
        rows.append(
            [
                Cell(phase),
                Cell(si(estimated, "s"), estimated),
                Cell(si(measured, "s"), measured),
                Cell(_ratio(time), time),
                Cell(_ratio(v["measured_over_bound"]), v["measured_over_bound"]),
                Cell(_ratio(v["measured_over_estimated_flops"]), v["measured_over_estimated_flops"]),
                Cell(_ratio(v["measured_over_estimated_bytes_hbm"]), v["measured_over_estimated_bytes_hbm"]),
            ]
        )
    header = ["phase", "estimated", "measured", "measured/estimated", "measured/bound", "FLOPs m/e", "HBM bytes m/e"]
    return TitledTable("estimated versus measured", header, rows, 1)


def _speedup_table(comparison: Comparison) -> TitledTable:
    """Per phase: both runs' times, the speedup, the FLOPs and HBM bytes ratios and the tensor shares."""
    phases = []
    for phase, v in comparison.phases.items():
        speedup = v["speedup"]
        phases.append(
            [
                Cell(phase),
                Cell(si(v["base_time_s"], "s"), v["base_time_s"]),
                Cell(si(v["candidate_time_s"], "s"), v["candidate_time_s"]),
                Cell("-" if speedup is None else f"{speedup:.2f}x", speedup),
                Cell(_ratio(v["flops_ratio"]), v["flops_ratio"]),
                Cell(_ratio(v["hbm_bytes_ratio"]), v["hbm_bytes_ratio"]),
                Cell(f"{_share(v['base_tensor_share'])} -> {_share(v['candidate_tensor_share'])}"),
            ]
        )
    header = ["phase", "base time", "cand. time", "speedup", "FLOPs ratio", "HBM bytes ratio", "tensor share"]
    return TitledTable("phases", header, phases, 1)


_LEVEL_NAMES = {"hbm": "HBM", "l2": "L2", "l1": "L1"}


def _compiled_table(comparison: Comparison) -> TitledTable | None:
    """Eager against compiled: per phase, both runs' launches, bytes at the deepest level both have (fusion's
    saving: one kernel reads and writes each tensor once) and time."""
    if not comparison.compiled:
        return None
    level = comparison.bytes_level
    rows = []
    for phase, v in comparison.phases.items():
        launches = [v.get(f"{side}_kernels") for side in ("base", "candidate")]
        moved = [v.get(f"{side}_bytes_{level}") if level else None for side in ("base", "candidate")]
        saved = moved[0] - moved[1] if None not in moved else None
        saved = 0.0 if saved is not None and abs(saved) < 1 else saved  # float sums of equal bytes: none saved
        rows.append(
            [
                Cell(phase),
                *(Cell("-" if n is None else f"{int(n):,}", n) for n in launches),
                *(Cell(si(b, "B"), b) for b in moved),
                Cell(si(saved, "B"), saved),
                Cell(si(v["base_time_s"], "s"), v["base_time_s"]),
                Cell(si(v["candidate_time_s"], "s"), v["candidate_time_s"]),
            ]
        )
    bytes_at = _LEVEL_NAMES.get(level or "", "")
    header = ["phase", "base launches", "cand. launches", f"base {bytes_at} bytes", f"cand. {bytes_at} bytes"]
    header += ["bytes saved", "base time", "cand. time"]
    sides = ", ".join(f"{getattr(comparison, side)} (mode {mode})" for side, mode in comparison.compiled.items())
    return TitledTable(f"torch.compile'd: {sides}: launches, bytes and time", header, rows, 1)


def _compiled_layers_table(comparison: Comparison, count: int) -> TitledTable | None:
    """Eager against compiled, layer by layer (the compiled kernels placed on their modules): the ``count``
    layers with the most time in either run, per phase, with both runs' launches, bytes and time."""
    if not comparison.compiled or comparison.matched_on != "layer":
        return None
    families = comparison.families
    busiest = families.assign(most=families[["base_time_s", "candidate_time_s"]].max(axis=1))
    busiest = busiest.sort_values("most", ascending=False, kind="stable").head(count)
    order = {phase: index for index, phase in enumerate(comparison.phases)}
    busiest = busiest.sort_values("phase", key=lambda phases: phases.map(order), kind="stable")
    rows = []
    for record in busiest.to_dict(orient="records"):
        moved = [record["base_bytes"], record["candidate_bytes"]]
        rows.append(
            [
                Cell(str(record["phase"])),
                Cell(str(record["family"])),
                *(Cell(f"{int(n):,}", n) for n in (record["base_kernels"], record["candidate_kernels"])),
                *(Cell(si(b, "B"), b) for b in moved),
                Cell(si(record["base_time_s"], "s"), record["base_time_s"]),
                Cell(si(record["candidate_time_s"], "s"), record["candidate_time_s"]),
            ]
        )
    bytes_at = _LEVEL_NAMES.get(comparison.bytes_level or "", "")
    header = ["phase", "layer", "base launches", "cand. launches", f"base {bytes_at} bytes", f"cand. {bytes_at} bytes"]
    header += ["base time", "cand. time"]
    return TitledTable(f"torch.compile'd, layer by layer (the {count} with the most time)", header, rows, 2)


def comparison_tables(comparison: Comparison, count: int) -> ComparisonTables:
    by_layer = comparison.matched_on == "layer"
    base, candidate = (
        f"{name} ({role}{', predicted' if name in comparison.predictions else ''})"
        for name, role in ((comparison.base, "base"), (comparison.candidate, "candidate"))
    )
    heading = f"{base} -> {candidate}"
    if comparison.predicted:
        measured = comparison.candidate if comparison.predicted == "base" else comparison.base
        estimated = comparison.base if comparison.predicted == "base" else comparison.candidate
        heading = f"{estimated} (estimated) versus {measured} (measured)"
    heading += "; matched layer to layer" if by_layer else f"; kernels matched by {comparison.matched_on}"
    key = "layer" if by_layer else "kernel family"
    # no "speedup" for a prediction against the step it predicts: how far the measurement is from the estimate
    tables = [_estimate_table(comparison) if comparison.estimate_versus_measured else _speedup_table(comparison)]
    tables += [table for table in (_compiled_table(comparison), _compiled_layers_table(comparison, count)) if table]
    left_out = [
        f"phases only in {side}, left out: {', '.join(names)}"
        for names, side in (
            (comparison.only_in_base, comparison.base),
            (comparison.only_in_candidate, comparison.candidate),
        )
        if names
    ]
    families = comparison.families
    matched = families[families["status"] == "matched"]
    plural = f"{key.replace('family', 'families')}{'s' if by_layer else ''}"
    gains, regressions = "largest gains", "largest regressions"
    if comparison.estimate_versus_measured:  # no gain or regression: the measurement under or over the estimate
        under, over = "measured under the estimate", "measured over the estimate"
        gains, regressions = (under, over) if comparison.predicted == "base" else (over, under)
    sections = (
        (gains, matched[matched["saved_s"] > 0].head(count)),
        (regressions, matched[matched["saved_s"] < 0].sort_values("saved_s", kind="stable").head(count)),
        (
            f"{plural} only in {comparison.base}",
            families[families["status"] == "only in base"]
            .sort_values("base_time_s", ascending=False, kind="stable")
            .head(count),
        ),
        (
            f"{plural} only in {comparison.candidate}",
            families[families["status"] == "only in candidate"]
            .sort_values("candidate_time_s", ascending=False, kind="stable")
            .head(count),
        ),
    )
    roles = [
        "estimated" if name in comparison.predictions and comparison.predicted else role
        for name, role in ((comparison.base, "base"), (comparison.candidate, "candidate"))
    ]
    # the change: candidate - base; measured - estimated for a prediction against the step it predicts
    change, sign = "change", -1.0
    if comparison.predicted:
        roles = [role if role == "estimated" else "measured" for role in roles]
        change, sign = "measured - estimated", (1.0 if comparison.predicted == "candidate" else -1.0)
    for title, part in sections:
        if part.empty:
            continue
        rows = [
            [
                Cell(str(record["phase"])),
                Cell(str(record["family"])),
                Cell(si(record["base_time_s"], "s"), record["base_time_s"]),
                Cell(si(record["candidate_time_s"], "s"), record["candidate_time_s"]),
                _change(sign * record["saved_s"]),
            ]
            for record in part.to_dict(orient="records")
        ]
        tables.append(TitledTable(title, ["phase", key, *roles, change], rows, 2))
    notes = list(comparison.notes)
    if comparison.other_step:
        notes.append(
            f"one run is a prediction, the other measured another step or GPU ({comparison.other_step}): its "
            "ratios are no measure of the estimate's error (compare a prediction with the step it predicts)"
        )
    return ComparisonTables(heading, tables, left_out, notes)


def _change(seconds: float) -> Cell:
    return Cell(("+" if seconds >= 0 else "-") + si(abs(seconds), "s"), seconds)


def comparison_text(comparison: Comparison, count: int) -> str:
    laid_out = comparison_tables(comparison, count)
    phases, *others = laid_out.tables
    text = laid_out.heading + "\n\n" + text_table([phases.header, *[[c.text for c in row] for row in phases.rows]])
    text += "".join(f"({line})\n" for line in laid_out.left_out)
    text += "".join(f"note: {note}\n" for note in laid_out.notes)
    for table in others:
        rows = [[c.text[:60] if i == 1 else c.text for i, c in enumerate(row)] for row in table.rows]
        text += f"\n{table.title}:\n" + text_table([table.header, *rows])
    return text
