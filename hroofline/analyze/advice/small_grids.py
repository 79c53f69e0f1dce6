"""Kernels too small to fill the GPU: fewer thread blocks than it has SMs, and a few microseconds each, so the
launches between them, not their work, set the pace."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import (
    ESTIMATE,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    time_shrunk,
)

_BLOCKS = r"\((\d+), (\d+), (\d+)\)"


def _mask(context: AdviceContext, rule: Rule) -> pd.Series:
    sms = context.gpu.sms if context.gpu is not None else None
    launches = context.launches
    if not sms or launches["grid"].isna().all():
        return pd.Series(False, index=launches.index)
    parts = launches["grid"].astype("string").str.extract(_BLOCKS).astype(float)
    blocks = parts[0] * parts[1] * parts[2]
    return ((blocks < sms) & (launches["time_s"] < float(rule.settings["max_time_s"]))).fillna(False)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    evidence = enough_evidence(context, _mask(context, rule), rule)
    if evidence is None:
        return None
    win = evidence.recoverable_s
    sms = context.gpu.sms if context.gpu is not None else None
    return Finding(rule, evidence, win, ESTIMATE, rule.text("change"), rule.text("code"), win, {"sms": sms})


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    return time_shrunk(finding, after, _mask(after, finding.rule), 0.5)
