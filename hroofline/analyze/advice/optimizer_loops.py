"""An optimizer that launches its element-wise kernels per parameter (no foreach or fused kernel in its phase):
the foreach and fused implementations update many parameters per kernel."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import (
    UPPER_BOUND,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    names_matching,
)


def _optimizer(context: AdviceContext) -> pd.Series:
    return context.launches["phase"] == "optimizer"


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    mask = _optimizer(context)
    kernels = context.launches.loc[mask, "kernel"]
    if len(kernels) < int(rule.settings["min_launches"]) or names_matching(kernels, rule.settings["fused"]).any():
        return None
    evidence = enough_evidence(context, mask, rule)
    if evidence is None:
        return None
    win = evidence.recoverable_s
    return Finding(rule, evidence, win, UPPER_BOUND, rule.text("change"), rule.text("code"), win)


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    mask = _optimizer(after)
    fused = bool(names_matching(after.launches.loc[mask, "kernel"], finding.rule.settings["fused"]).any())
    return Confirmation(finding, finding.evidence.time_s, float(after.launches.loc[mask, "time_s"].sum()), fused)
