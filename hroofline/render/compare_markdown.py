"""``compare --format markdown``: a summary for a pull-request comment or a CI job summary, as GitHub-flavoured
Markdown: the verdict (where gated), the phases with a Unicode bar of each change (no image, no link), the
regressions and improvements, and the advice for the candidate run."""

from __future__ import annotations

from collections.abc import Sequence

from hroofline.analyze.advice.base import Finding
from hroofline.analyze.compare import Comparison
from hroofline.analyze.gate import GatedItem, Verdict
from hroofline.model.numbers import si
from hroofline.render.gate_text import behind_words, headline, interval, noise_words, pct

BAR_WIDTH = 20  # characters of the longest bar
ADVICE_SHOWN = 3
FAMILIES_SHOWN = 8


def cell(text: str) -> str:
    """Text safe in a table cell: a pipe would split the cell, a newline the row."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def code(text: str) -> str:
    return "`" + cell(text).replace("`", "'") + "`"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def bar(change: float | None, largest: float) -> str:
    """A bar as long as the change is, against the largest change shown: red slower, green faster."""
    if change is None or largest <= 0:
        return ""
    blocks = max(1, round(BAR_WIDTH * abs(change) / largest)) if change else 0
    return ("🟥" if change > 0 else "🟩") + "█" * blocks


def phase_rows(comparison: Comparison) -> list[list[str]]:
    changes = {phase: row["time_change"] for phase, row in comparison.phases.items()}
    largest = max((abs(value) for value in changes.values() if value is not None), default=0.0)
    rows = []
    for phase, row in comparison.phases.items():
        rows.append(
            [
                phase,
                si(row.get("base_time_s"), "s"),
                si(row.get("candidate_time_s"), "s"),
                pct(changes[phase]),
                bar(changes[phase], largest),
            ]
        )
    return rows


def item_rows(items: list[GatedItem]) -> list[list[str]]:
    return [
        [
            item.level,
            item.phase,
            code(item.name),
            si(item.base.time_s, "s"),
            si(item.candidate.time_s, "s"),
            f"**{pct(item.change)}**",
            interval(item),
            cell(behind_words(item)),
        ]
        for item in items
    ]


ITEM_HEADER = ("level", "phase", "item", "base", "candidate", "change", "95% interval", "behind it")


def verdict_lines(verdict: Verdict) -> list[str]:
    mark = "✅" if verdict.passed else "❌"
    lines = [f"**{mark} {cell(headline(verdict))}**", ""]
    for side, noise in verdict.noise.items():
        run = verdict.base if side == "base" else verdict.candidate
        lines.append(f"- noise of {side} {code(run)}: {noise_words(noise)}")
    lines += [f"- note: {cell(note)}" for note in verdict.notes]
    lines.append("")
    if verdict.regressions:
        lines += ["### Regressions", "", *table(ITEM_HEADER, item_rows(verdict.regressions))]
    if verdict.improvements:
        lines += ["### Improvements", "", *table(ITEM_HEADER, item_rows(verdict.improvements))]
    return lines


def family_lines(comparison: Comparison) -> list[str]:
    """Without a gate: the largest regressions by time added, as ``compare`` lists them."""
    slower = comparison.families[comparison.families["saved_s"] < 0].sort_values("saved_s").head(FAMILIES_SHOWN)
    if slower.empty:
        return []
    rows = [
        [row.phase, code(str(row.family)), si(row.base_time_s, "s"), si(row.candidate_time_s, "s"),
         "+" + si(-row.saved_s, "s")]
        for row in slower.itertuples()
    ]  # fmt: skip
    return ["### Largest regressions", "", *table(("phase", "matched on " + comparison.matched_on, "base",
                                                   "candidate", "added"), rows)]  # fmt: skip


def advice_lines(findings: Sequence[Finding], run: str) -> list[str]:
    if not findings:
        return []
    lines = [f"### Advice for {code(run)}", ""]
    for finding in findings[:ADVICE_SHOWN]:
        lines.append(f"- **{cell(finding.rule.title)}**: can win {si(finding.win_s, 's')}; {cell(finding.change)}")
    return [*lines, ""]


def comparison_markdown(comparison: Comparison, verdict: Verdict | None, findings: Sequence[Finding]) -> str:
    """The summary: heading, verdict (where gated), phases, regressions and improvements (else the largest
    regressions by family), and ``findings`` (the advice for the candidate run)."""
    lines = [f"## hroofline compare: {code(comparison.base)} → {code(comparison.candidate)}", ""]
    if verdict is not None:
        lines += verdict_lines(verdict)
    lines += ["### Phases (time per profile)", ""]
    lines += table(("phase", "base", "candidate", "change", "slower 🟥 / faster 🟩"), phase_rows(comparison))
    if verdict is None:
        lines += family_lines(comparison)
    lines += advice_lines(findings, comparison.candidate)
    return "\n".join(lines).rstrip() + "\n"
