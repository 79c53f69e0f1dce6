"""Matrix products on fallback kernels because of a misaligned dimension: CUTLASS's ``align1``/``align2`` (no
multiple of the 16-byte access) and kernels of an architecture older than the GPU (``cutlass_75``, ``sm80`` on a
Hopper) where the op's recorded shapes (traces) show a dimension of the product that is no multiple of it. The
advice is to pad that dimension, so the rule fires only where padding can help: not on a kernel that names an
aligned access (``align8``, ``aligna4``), nor on the FP32 units' kernels (``ffma``, ``simt``: TF32's rule), nor on
cuDNN's convolutions, nor where the shapes show every dimension aligned."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from hroofline.analyze.advice.base import (
    ESTIMATE,
    UPPER_BOUND,
    AdviceContext,
    Confirmation,
    Finding,
    Rule,
    enough_evidence,
    matrix_products,
    names_matching,
    time_shrunk,
)

_SIXTEEN_BIT = re.compile(r"bf16|f16|fp16|half|h884|h1688|s1688gemm_bf16|s1688gemm_fp16", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_ALIGN = re.compile(r"align[a-z]?(\d+)")  # CUTLASS's and cuBLAS's elements per access: align1, aligna4_alignc4


def _alignment_needed(kernels: pd.Series, rule: Rule) -> pd.Series:
    elements = rule.settings["align_elements"]
    return kernels.str.contains(_SIXTEEN_BIT).map({True: int(elements["16"]), False: int(elements["32"])})


def _named_alignment(kernel: str) -> float:
    found = [int(n) for n in _ALIGN.findall(kernel)]
    return float(min(found)) if found else float("nan")


def _misaligned_dimensions(launches: pd.DataFrame, needed: pd.Series, rule: Rule) -> pd.Series:
    """Per launch of a matrix-product op with recorded shapes: the dimensions no multiple of ``needed`` elements
    (an empty tuple: all aligned); None where the launch has no such shapes (an ncu report, a convolution)."""
    if "shapes" not in launches.columns or "op" not in launches.columns:
        return pd.Series(None, index=launches.index, dtype=object)
    ops = set(rule.settings["gemm_ops"])
    out = []
    for shapes, op, align in zip(launches["shapes"], launches["op"], needed, strict=True):
        if not isinstance(shapes, str) or str(op) not in ops:
            out.append(None)
            continue
        out.append(tuple(sorted({n for n in map(int, _NUMBER.findall(shapes)) if n > align and n % align})))
    return pd.Series(out, index=launches.index, dtype=object)


def fallback_mask(context: AdviceContext, rule: Rule) -> pd.Series:
    return _fallbacks(context, rule)[0]


def _fallbacks(context: AdviceContext, rule: Rule) -> tuple[pd.Series, pd.Series]:
    launches = context.launches
    kernels = launches["kernel"].astype(str)
    needed = _alignment_needed(kernels, rule)
    named = kernels.map(_named_alignment)
    misaligned_name = named < needed
    older = pd.Series(False, index=kernels.index)
    if context.cc is not None:
        for token, cc in rule.settings["architectures"].items():
            if float(cc) < context.cc:
                older |= kernels.str.contains(rf"(?:^|[^A-Za-z0-9]){re.escape(token)}_", regex=True)
    candidate = matrix_products(launches) & ~names_matching(kernels, rule.settings["fp32_units"])
    candidate &= misaligned_name | (older & ~(named >= needed))
    dimensions = _misaligned_dimensions(launches, needed, rule)
    shaped = dimensions.notna()
    # with shapes: a dimension of the product to pad; without: only a kernel that names its misaligned access
    premise = dimensions.map(bool).where(shaped, misaligned_name).astype(bool)
    return candidate & premise, dimensions


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    if context.cc is None:
        return None
    mask, dimensions = _fallbacks(context, rule)
    evidence = enough_evidence(context, mask, rule)
    if evidence is None:
        return None
    chosen = context.launches[mask]
    # the run's other matrix products: the % of roof a well-shaped one reaches here
    others = matrix_products(context.launches) & ~mask & context.launches["time_at_roof_s"].notna()
    reached = _roof_fraction(context.launches[others])
    upper = evidence.recoverable_s
    win, kind = upper, UPPER_BOUND
    if reached is not None:
        at_their_pct = (chosen["time_s"] - chosen["time_at_roof_s"] / reached).clip(lower=0).fillna(0.0)
        win, kind = min(float(at_their_pct.sum()), upper), ESTIMATE
    bits = 16 if chosen["kernel"].astype(str).str.contains(_SIXTEEN_BIT).mean() >= 0.5 else 32
    detail: dict[str, object] = {"element_bits": bits, "others_roof_pct": 100 * reached if reached else None}
    dimension = _most_common(dimensions[mask], chosen["time_s"])
    if dimension is not None:
        pad_to = int(rule.settings["pad_to"])
        detail.update(dimension=dimension, padded=-(-dimension // pad_to) * pad_to)
    else:
        detail["no_shapes_in"] = "trace" if any(s.kind == "kineto" for s in context.run.meta.sources) else "ncu"
    return Finding(rule, evidence, win, kind, rule.text("change"), rule.text("code"), upper, detail)


def _roof_fraction(launches: pd.DataFrame) -> float | None:
    time = float(launches["time_s"].sum())
    if time <= 0:
        return None
    return min(float(launches["time_at_roof_s"].sum()) / time, 1.0)


def _most_common(dimensions: pd.Series, times: pd.Series) -> int | None:
    """The misaligned dimension of the launches' shapes that takes the most time; None without shapes."""
    found: Counter[int] = Counter()
    for numbers, time in zip(dimensions, times, strict=True):
        for number in numbers or ():
            found[number] += float(time)
    return found.most_common(1)[0][0] if found else None


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    return time_shrunk(finding, after, fallback_mask(after, finding.rule), 0.1)
