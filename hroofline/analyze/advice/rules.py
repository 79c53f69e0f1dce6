"""The advice rules, in one table (rule key -> its detector and confirmer), run over a run: the findings ranked
by what they can win; for two runs, whether the later one shows each finding of the earlier one acted on."""

from __future__ import annotations

from collections.abc import Callable

from hroofline.analyze.advice import (
    fp32_off_tensor_cores,
    gemm_fallbacks,
    layout_conversions,
    memory_bound_elementwise,
    optimizer_loops,
    small_grids,
)
from hroofline.analyze.advice.base import AdviceContext, Confirmation, Finding, Rule, advice_context, load_rules
from hroofline.model.run import Run

Detector = Callable[[AdviceContext, Rule], Finding | None]
Confirmer = Callable[[Finding, AdviceContext], Confirmation]
RULES: dict[str, tuple[Detector, Confirmer]] = {
    "layout_conversions": (layout_conversions.detect, layout_conversions.confirm),
    "gemm_fallbacks": (gemm_fallbacks.detect, gemm_fallbacks.confirm),
    "fp32_off_tensor_cores": (fp32_off_tensor_cores.detect, fp32_off_tensor_cores.confirm),
    "memory_bound_elementwise": (memory_bound_elementwise.detect, memory_bound_elementwise.confirm),
    "optimizer_loops": (optimizer_loops.detect, optimizer_loops.confirm),
    "small_grids": (small_grids.detect, small_grids.confirm),
}


def advise(run: Run, ceilings: str | None = None) -> list[Finding]:
    """Every rule that applies to ``run`` and fires, the one that can win most first, against the run's roofs (or
    ``ceilings``). A predicted run has no measured kernels: no advice."""
    if run.meta.predicted:
        return []
    context = advice_context(run, ceilings)
    if context.step_time_s <= 0:
        return []
    found = []
    for key, rule in load_rules().items():
        if rule.applies_to == "gpu" and not context.on_gpu:
            continue
        finding = RULES[key][0](context, rule)
        if finding is not None:
            found.append(finding)
    return sorted(found, key=lambda f: -f.win_s)


def confirm_advice(before: Run, after: Run) -> list[Confirmation]:
    """For each finding of ``before``, what ``after`` shows of it."""
    context = advice_context(after)
    return [RULES[finding.rule.key][1](finding, context) for finding in advise(before)]
