"""Communication that no compute hides, in a trace of ranks with start times: per rank and step, the time only
communication kernels run (:mod:`hroofline.analyze.overlap`). Hiding it behind compute wins at most that time, and
at most the compute time beside it that no communication overlaps yet."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import UPPER_BOUND, AdviceContext, Confirmation, Evidence, Finding, Rule
from hroofline.analyze.overlap import ALL_PHASES, RunOverlap, run_overlap
from hroofline.model.names import short_kernel_name

_LISTED = 5  # collectives named in the evidence


def _exposed_s(overlap: RunOverlap) -> float:
    return sum(row.communication_exposed_s for row in overlap.ranks)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    overlap = run_overlap(context.run)
    if overlap.unknown is not None:
        return None
    exposed = _exposed_s(overlap)
    share = exposed / context.step_time_s if context.step_time_s > 0 else 0.0
    if exposed <= 0 or share < rule.min_step_share:
        return None
    steps = [row for row in overlap.rows if row.phase == ALL_PHASES]
    win = sum(min(row.communication_exposed_s, row.compute_s) for row in steps)
    per_phase: dict[str, float] = {}
    for row in overlap.rank_phases:
        per_phase[row.phase] = per_phase.get(row.phase, 0.0) + row.communication_exposed_s
    launches = context.run.launches
    collectives = launches[launches["category"] == "communication"]
    names = collectives["kernel"].astype(str).map(short_kernel_name)
    times = collectives["time_s"].groupby(names).sum().sort_values(ascending=False, kind="stable")
    evidence = Evidence(
        launches=int(collectives["launches"].fillna(1).sum()),
        time_s=exposed,
        step_share=share,
        phase_time_s={phase: time for phase, time in per_phase.items() if time > 0},
        phase_share={
            phase: time / context.phase_time_s[phase]
            for phase, time in per_phase.items()
            if time > 0 and context.phase_time_s.get(phase)
        },
        roof_pct=None,
        recoverable_s=win,
        kernels=tuple((str(name), float(time)) for name, time in times.iloc[:_LISTED].items()),
        layers=(),
    )
    detail = {"hidden_s": sum(row.communication_hidden_s for row in overlap.ranks), "ranks": len(overlap.ranks)}
    return Finding(rule, evidence, win, UPPER_BOUND, rule.text("change"), rule.text("code"), exposed, detail)


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    """Confirmed where the later run's exposed communication is half the earlier one's or less."""
    overlap = run_overlap(after.run)
    after_s = _exposed_s(overlap) if overlap.unknown is None else float("nan")
    before_s = finding.evidence.time_s
    return Confirmation(finding, before_s, after_s, bool(pd.notna(after_s) and after_s <= 0.5 * before_s))
