"""The advice rules, in one table (rule key -> its detector and confirmer), run over a run: the findings ranked
by what they can win; for two runs, whether the later one shows each finding of the earlier one acted on."""

from __future__ import annotations

from collections.abc import Callable

from hroofline.analyze.advice import (
    exposed_communication,
    fp32_off_tensor_cores,
    gemm_fallbacks,
    layout_conversions,
    memory_bound_elementwise,
    optimizer_loops,
    slow_collectives,
    small_grids,
)
from hroofline.analyze.advice.base import AdviceContext, Confirmation, Finding, Rule, advice_context, load_rules
from hroofline.analyze.compiled_step import compile_mode
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
    "exposed_communication": (exposed_communication.detect, exposed_communication.confirm),
    "slow_collectives": (slow_collectives.detect, slow_collectives.confirm),
}


# What advise judges a run as (advice_scope): what its rules could look at, for saying so where none fired.
ON_GPU = "gpu"
GPU_WITHOUT_CC = "gpu without compute capability"  # the rules that compare architectures stay silent
ON_CPU = "cpu"
PREDICTED = "predicted"  # not judged: its times are the roofs' own bound and fitted efficiencies


def advice_scope(run: Run, ceilings: str | None = None) -> str:
    if run.meta.predicted:
        return PREDICTED
    context = advice_context(run, ceilings)
    if not context.on_gpu:
        return ON_CPU
    return ON_GPU if context.cc is not None else GPU_WITHOUT_CC


def advise(run: Run, ceilings: str | None = None) -> list[Finding]:
    """Every rule that applies to ``run`` and fires with something to win, the one that can win most first, against
    the run's roofs (or ``ceilings``). A predicted run is not judged (advice_scope): its kernels' times come from
    the roofs the rules would compare them with, so a 'time above the roof' would only repeat the prediction."""
    if run.meta.predicted:
        return []
    context = advice_context(run, ceilings)
    if context.step_time_s <= 0:
        return []
    found = []
    done = {rule.key for rule in done_by_compiling(run)}
    for key, rule in load_rules().items():
        if (rule.applies_to == "gpu" and not context.on_gpu) or key in done:
            continue
        finding = RULES[key][0](context, rule)
        if finding is not None and finding.win_s > 0:  # a finding that can win nothing is no advice
            found.append(finding)
    return sorted(found, key=lambda f: -f.win_s)


def done_by_compiling(run: Run) -> list[Rule]:
    """The rules whose change is torch.compile and that the run's step has made: its model is compiled in a mode
    the rule lists (``done_when_compiled``; fusion for any mode, CUDA graphs for the modes that replay them)."""
    mode = compile_mode(run)
    if mode is None:
        return []
    return [rule for rule in load_rules().values() if mode in rule.settings.get("done_when_compiled", [])]


def confirm_advice(before: Run, after: Run) -> list[Confirmation]:
    """For each finding of ``before``, what ``after`` shows of it."""
    context = advice_context(after)
    return [RULES[finding.rule.key][1](finding, context) for finding in advise(before)]
