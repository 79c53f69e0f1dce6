"""Advice in words: each finding with its evidence, the change, its code and what it can win; and what a later
run shows of each (``compare``). Everything here is formatting: the numbers come from
:mod:`hroofline.analyze.advice`."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from hroofline.analyze.advice.base import Confirmation, Finding, Rule
from hroofline.analyze.advice.rules import GPU_WITHOUT_CC, ON_CPU, ON_GPU, PREDICTED
from hroofline.model.numbers import si
from hroofline.render.communication import slow_collective_lines

_KERNELS_SHOWN = 3


def finding_lines(rank: int, finding: Finding) -> list[str]:
    evidence = finding.evidence
    phases = ", ".join(f"{100 * share:.1f}% of {phase}" for phase, share in evidence.phase_share.items())
    roof = f", at {evidence.roof_pct:.0f}% of their roofs" if evidence.roof_pct is not None else ""
    lines = [
        f"{rank}. {finding.rule.title}",
        f"   can win: {si(finding.win_s, 's')} ({_win_text(finding)})",
        f"   evidence: {evidence.launches:,} launches, {si(evidence.time_s, 's')} = "
        f"{100 * evidence.step_share:.1f}% of the step ({phases}){roof}",
    ]
    for kernel, time in evidence.kernels[:_KERNELS_SHOWN]:
        lines.append(f"     {si(time, 's'):>9}  {kernel}")
    if evidence.layers:
        layers = ", ".join(f"{layer} {si(time, 's')}" for layer, time in evidence.layers[:_KERNELS_SHOWN])
        lines.append(f"     layers: {layers}")
    lines += [f"     {line}" for line in detail_lines(finding)]
    lines += [f"   change: {finding.change}", f"     {finding.code}"]
    return lines


def _win_text(finding: Finding) -> str:
    """The rule's words for the kind of win the finding has (a rule may have one text per kind)."""
    per_kind = finding.rule.settings.get("win_" + finding.win_kind.replace(" ", "_"))
    return str(per_kind) if per_kind else finding.rule.text("win")


def detail_lines(finding: Finding) -> list[str]:
    """What a rule found besides its kernels, in words."""
    detail = finding.detail
    lines = []
    if detail.get("dimension"):
        lines.append(
            f"dimension to pad: {detail['dimension']:,} (no multiple of "
            f"{8 if detail.get('element_bits') == 16 else 4} elements) -> {detail['padded']:,}"
        )
    elif detail.get("no_shapes_in") == "trace":
        lines.append("dimension to pad: the trace recorded no shapes (record_shapes=True names it)")
    elif detail.get("no_shapes_in") == "ncu":
        lines.append("dimension to pad: an ncu report records no shapes; a trace of the step names it")
    if detail.get("others_roof_pct") is not None:
        lines.append(f"this run's other matrix products reach {detail['others_roof_pct']:.0f}% of their roof")
    if detail.get("families"):
        lines.append("kernel families: " + ", ".join(detail["families"]))
    if detail.get("sms"):
        lines.append(f"fewer thread blocks than the GPU's {detail['sms']} SMs, under 10 us each")
    if detail.get("hidden_s") is not None:
        lines.append(
            f"over {detail['ranks']} rank(s)' profiled steps: {si(detail['hidden_s'], 's')} of communication already "
            f"hidden behind compute, {si(finding.evidence.time_s, 's')} exposed (hroofline summary RUN --by rank)"
        )
    return lines + slow_collective_lines(detail)


_NOTHING_FOUND = {
    ON_GPU: "",
    GPU_WITHOUT_CC: " (the GPU's compute capability is unknown: the rules that compare architectures, fallback "
    "matrix products and FP32 off the tensor cores, did not judge)",
    ON_CPU: " (a CPU run: the GPU rules do not apply)",
}
NOT_JUDGED = {
    PREDICTED: "not judged: a predicted run's kernel times are the roofs' own bound and fitted efficiencies, so "
    "advise's 'time above the roof' would only repeat the prediction; predict's output names what it found (layout "
    "conversions, tensor cores); advise a measured run of the step (hroofline profile or import)",
}


def advice_text(
    run: str, findings: Sequence[Finding], scope: str, done: Sequence[Rule] = (), mode: str | None = None
) -> str:
    """The findings; where there are none, why (``scope``: what advise judged the run as, advice_scope); then the
    advice the step has taken already (``done``: its model torch.compile'd in ``mode``)."""
    if scope in NOT_JUDGED:
        return f"{run}: {NOT_JUDGED[scope]}\n"
    taken = [f"  done: {rule.title}: the model is torch.compile'd (mode {mode})" for rule in done]
    taken = [f"done in {run}'s step (advise does not repeat it):", *taken] if taken else []
    if not findings:
        lines = [f"{run}: no advice: no rule found enough time to win{_NOTHING_FOUND[scope]}"]
        return "\n".join([*lines, *taken]) + "\n"
    total = sum(f.win_s for f in findings)
    lines = [f"{run}: {len(findings)} finding(s), the most to win first (wins overlap: {si(total, 's')} is no sum)"]
    for rank, finding in enumerate(findings, start=1):
        lines += ["", *finding_lines(rank, finding)]
    return "\n".join([*lines, *(["", *taken] if taken else [])]) + "\n"


def confirmation_lines(confirmations: Sequence[Confirmation], base: str, candidate: str) -> list[str]:
    if not confirmations:
        return []
    lines = [f"advice for {base}, as {candidate} shows it:"]
    for c in confirmations:
        verdict = "done" if c.confirmed else "not seen"
        share = c.detail.get("tensor_share")
        extra = f"; {100 * share:.0f}% of their FP32 FLOPs off the FP32 units" if share is not None else ""
        lines.append(f"  {verdict:>8}: {c.finding.rule.title}: {si(c.before_s, 's')} -> {si(c.after_s, 's')}{extra}")
    return lines


def not_judged_lines(findings: Sequence[Finding], base: str, candidate: str, why: str) -> list[str]:
    """The advice for ``base`` where ``candidate`` is not the same model: listed, not judged."""
    if not findings:
        return []
    lines = [f"advice for {base}, not judged: {candidate} is not the same model ({why}):"]
    return lines + [f"  not judged: {finding.rule.title}" for finding in findings]


def no_roofs_line(base: str, run: str, why: str) -> str:
    """The advice for ``base`` where one of the runs has no roofs to judge it against."""
    hint = f"hroofline import FILE --run {run} --replace --gpu NAME gives it the roofs of its GPU"
    return f"advice for {base}: not judged: run {run!r} has no roofs ({why}; {hint})"


def advice_html(findings: Sequence[Finding]) -> str:
    """The report's 'What to change' list."""
    if not findings:
        return ""
    items = []
    for rank, finding in enumerate(findings, start=1):
        head, *rest = finding_lines(rank, finding)
        body = escape("\n".join(line.removeprefix("   ") for line in rest))
        items.append(f"<li><b>{escape(head.split('. ', 1)[1])}</b><pre>{body}</pre></li>")
    return '<h3 class="advice">What to change</h3><ol class="advice">' + "".join(items) + "</ol>"
