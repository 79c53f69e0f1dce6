"""Matrix products on fallback kernels: CUTLASS's ``align1``/``align2`` (a dimension that is no multiple of the
16-byte access) and kernels of an architecture older than the GPU (``cutlass_75``, ``sm80`` on a Hopper), which
cuBLAS picks when none of its own fits. The dimension to pad comes from the op's recorded shapes (traces)."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from hroofline.analyze.advice.base import (
    ESTIMATE,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    names_matching,
    time_shrunk,
)

_SIXTEEN_BIT = re.compile(r"bf16|f16|fp16|half|h884|h1688|s1688gemm_bf16|s1688gemm_fp16", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")


def fallback_mask(context: AdviceContext, rule: Rule) -> pd.Series:
    kernels = context.launches["kernel"].astype(str)
    gemm = names_matching(kernels, rule.settings["gemm"]) & ~names_matching(kernels, rule.settings["not_gemm"])
    misaligned = names_matching(kernels, rule.settings["misaligned"])
    older = pd.Series(False, index=kernels.index)
    if context.cc is not None:
        for token, cc in rule.settings["architectures"].items():
            if float(cc) < context.cc:
                older |= kernels.str.contains(rf"(?:^|[^A-Za-z0-9]){re.escape(token)}_", regex=True)
    return gemm & (misaligned | older)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    if context.cc is None:
        return None
    kernels = context.launches["kernel"].astype(str)
    mask = fallback_mask(context, rule)
    evidence = enough_evidence(context, mask, rule)
    if evidence is None:
        return None
    chosen = context.launches[mask]
    # the run's other matrix products: the % of roof a well-shaped one reaches here
    others = names_matching(kernels, rule.settings["gemm"]) & ~names_matching(kernels, rule.settings["not_gemm"])
    others &= ~mask & context.launches["time_at_roof_s"].notna()
    reached = _roof_fraction(context.launches[others])
    upper = evidence.recoverable_s
    win = upper
    if reached is not None:
        at_their_pct = (chosen["time_s"] - chosen["time_at_roof_s"] / reached).clip(lower=0).fillna(0.0)
        win = min(float(at_their_pct.sum()), upper)
    bits = 16 if kernels[mask].str.contains(_SIXTEEN_BIT).mean() >= 0.5 else 32
    detail: dict[str, object] = {"element_bits": bits, "others_roof_pct": 100 * reached if reached else None}
    dimension = _misaligned_dimension(chosen, int(rule.settings["align_elements"][str(bits)]))
    if dimension is not None:
        pad_to = int(rule.settings["pad_to"])
        detail.update(dimension=dimension, padded=-(-dimension // pad_to) * pad_to)
    return Finding(rule, evidence, win, ESTIMATE, rule.text("change"), rule.text("code"), upper, detail)


def _roof_fraction(launches: pd.DataFrame) -> float | None:
    time = float(launches["time_s"].sum())
    if time <= 0:
        return None
    return min(float(launches["time_at_roof_s"].sum()) / time, 1.0)


def _misaligned_dimension(launches: pd.DataFrame, align: int) -> int | None:
    """The dimension of the ops' recorded shapes that is no multiple of ``align`` elements, the most common one
    (weighted by time); None where no shapes were recorded (an ncu report)."""
    if "shapes" not in launches.columns:
        return None
    found: Counter[int] = Counter()
    for shapes, time in zip(launches["shapes"], launches["time_s"], strict=True):
        if isinstance(shapes, str):
            for number in {int(n) for n in _NUMBER.findall(shapes)}:
                if number > align and number % align:
                    found[number] += float(time)
    return found.most_common(1)[0][0] if found else None


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    return time_shrunk(finding, after, fallback_mask(after, finding.rule), 0.1)
