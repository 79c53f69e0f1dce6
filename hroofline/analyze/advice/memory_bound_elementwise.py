"""Element-wise, copy and normalisation kernels far below their memory roof: each reads and writes whole tensors
for little arithmetic, and many short ones waste the bandwidth they are bound by; fusion (torch.compile) is
what moves them."""

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
    time_shrunk,
)
from hroofline.analyze.families import kernel_family

_HEAVY_FAMILIES = ("gemm", "convolution", "depthwise_convolution")


def _mask(context: AdviceContext, rule: Rule) -> pd.Series:
    launches = context.launches
    kernels = launches["kernel"].astype(str)
    light = names_matching(kernels, rule.settings["kernels"]) & ~kernels.map(kernel_family).isin(_HEAVY_FAMILIES)
    roof_pct = 100.0 * launches["time_at_roof_s"] / launches["time_s"]
    return light & (roof_pct < float(rule.settings["max_roof_pct"])).fillna(False)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    evidence = enough_evidence(context, _mask(context, rule), rule)
    if evidence is None:
        return None
    win = evidence.recoverable_s
    return Finding(rule, evidence, win, UPPER_BOUND, rule.text("change"), rule.text("code"), win)


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    return time_shrunk(finding, after, _mask(after, finding.rule), 0.5)
