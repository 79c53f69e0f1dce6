"""cuDNN's NCHW <-> NHWC conversions around each tensor-core convolution of an NCHW model: channels_last
removes them, so what they take is what the change can win (an upper bound: they vanish)."""

from __future__ import annotations

import pandas as pd

from hroofline.analyze.advice.base import (
    UPPER_BOUND,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    load_rules,
    names_matching,
    time_shrunk,
)


def conversion_kernels(kernels: pd.Series, rule: Rule | None = None) -> pd.Series:
    """Which measured kernels are cuDNN's layout conversions (by name, metrics/advice.toml)."""
    rule = rule or load_rules()["layout_conversions"]
    return names_matching(kernels, rule.settings["kernels"]) & ~names_matching(kernels, rule.settings["not_kernels"])


def _mask(context: AdviceContext, rule: Rule) -> pd.Series:
    return conversion_kernels(context.launches["kernel"], rule)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    evidence = enough_evidence(context, _mask(context, rule), rule)
    if evidence is None:
        return None
    return Finding(
        rule, evidence, evidence.time_s, UPPER_BOUND, rule.text("change"), rule.text("code"), evidence.time_s
    )


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    return time_shrunk(finding, after, _mask(after, finding.rule), 0.1)
