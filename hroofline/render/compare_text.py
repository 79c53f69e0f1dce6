"""A comparison of two runs as text: the phase table, then the largest gains and regressions."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.compare import Comparison
from hroofline.render.numbers import si
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


def phase_frame(comparison: Comparison) -> pd.DataFrame:
    rows = [
        {"phase": phase, **{k: values.get(k) for k in PHASE_CSV_COLUMNS}} for phase, values in comparison.phases.items()
    ]
    return pd.DataFrame(rows, columns=["phase", *PHASE_CSV_COLUMNS])


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def comparison_text(comparison: Comparison, count: int) -> str:
    header = f"{comparison.base} (base) -> {comparison.candidate} (candidate)"
    by_layer = comparison.matched_on == "layer"
    header += "; matched layer to layer\n\n" if by_layer else f"; kernels matched by {comparison.matched_on}\n\n"
    key = "layer" if by_layer else "kernel family"
    rows = [["phase", "base time", "cand. time", "speedup", "FLOPs ratio", "HBM bytes ratio", "tensor share"]]
    for phase, v in comparison.phases.items():
        rows.append(
            [
                phase,
                si(v["base_time_s"], "s"),
                si(v["candidate_time_s"], "s"),
                "-" if v["speedup"] is None else f"{v['speedup']:.2f}x",
                _ratio(v["flops_ratio"]),
                _ratio(v["hbm_bytes_ratio"]),
                f"{_share(v['base_tensor_share'])} -> {_share(v['candidate_tensor_share'])}",
            ]
        )
    text = header + text_table(rows)
    for phases, side in (
        (comparison.only_in_base, comparison.base),
        (comparison.only_in_candidate, comparison.candidate),
    ):
        if phases:
            text += f"(phases only in {side}, left out: {', '.join(phases)})\n"
    for note in comparison.notes:
        text += f"note: {note}\n"
    families = comparison.families
    matched = families[families["status"] == "matched"]
    gains = matched[matched["saved_s"] > 0].head(count)
    losses = matched[matched["saved_s"] < 0].sort_values("saved_s").head(count)
    only_base = families[families["status"] == "only in base"].sort_values("base_time_s", ascending=False).head(count)
    only_cand = families[families["status"] == "only in candidate"].sort_values("candidate_time_s", ascending=False)
    sections = (
        ("largest gains", gains),
        ("largest regressions", losses),
        (f"{key.replace('family', 'families')}{'s' if by_layer else ''} only in {comparison.base}", only_base),
        (
            f"{key.replace('family', 'families')}{'s' if by_layer else ''} only in {comparison.candidate}",
            only_cand.head(count),
        ),
    )
    for title, part in sections:
        if part.empty:
            continue
        lines = [["phase", key, "base", "candidate", "change"]]
        for record in part.to_dict(orient="records"):
            lines.append(
                [
                    str(record["phase"]),
                    str(record["family"])[:60],
                    si(record["base_time_s"], "s"),
                    si(record["candidate_time_s"], "s"),
                    ("-" if record["saved_s"] > 0 else "+") + si(abs(record["saved_s"]), "s"),
                ]
            )
        text += f"\n{title}:\n" + text_table(lines)
    return text
