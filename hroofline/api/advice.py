"""Advice as one composition for the CLI, the notebook and the report: the findings of a run, as data or as a
table (one row per finding)."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import Finding
from hroofline.analyze.advice.rules import advise as find
from hroofline.analyze.advice.rules import done_by_compiling
from hroofline.analyze.compiled_step import compile_mode
from hroofline.model.run import Run

COLUMNS = (
    "rule",
    "title",
    "win_s",
    "win_kind",
    "upper_bound_s",
    "time_s",
    "step_share",
    "phase_share",
    "roof_pct",
    "kernels",
    "layers",
    "change",
    "code",
    "detail",
)


def findings(run: Run, ceilings: str | None = None) -> list[Finding]:
    return find(run, ceilings)


def advise(run: Run, ceilings: str | None = None) -> pd.DataFrame:
    """One row per finding, the most to win first: what to change, the evidence, and what it can win (s), against
    the run's roofs (or ``ceilings``: a GPU name, a bundled set or a ceilings file)."""
    rows = [
        {
            "rule": f.rule.key,
            "title": f.rule.title,
            "win_s": f.win_s,
            "win_kind": f.win_kind,
            "upper_bound_s": f.upper_bound_s,
            "time_s": f.evidence.time_s,
            "step_share": f.evidence.step_share,
            "phase_share": dict(f.evidence.phase_share),
            "roof_pct": f.evidence.roof_pct,
            "kernels": [name for name, _ in f.evidence.kernels],
            "layers": [name for name, _ in f.evidence.layers],
            "change": f.change,
            "code": f.code,
            "detail": dict(f.detail),
        }
        for f in findings(run, ceilings)
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def done_advice(run: Run) -> list[dict[str, str]]:
    """The advice the run's step has taken already, which advise does not repeat: the rules whose change is
    torch.compile, where its model is compiled (``compile``: the mode, ``unknown`` where the run does not say)."""
    mode = compile_mode(run) or ""
    return [{"rule": rule.key, "title": rule.title, "compile": mode} for rule in done_by_compiling(run)]
