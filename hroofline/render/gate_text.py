"""The compare gate's verdict in words (:class:`hroofline.analyze.gate.Verdict`): passed or failed, each run's
noise source, the regressions and improvements with their size, interval and what is behind them."""

from __future__ import annotations

from hroofline.analyze.gate import GatedItem, OneSided, Verdict
from hroofline.analyze.gate_noise import NOISE_LAUNCHES, NOISE_STEPS, RunNoise
from hroofline.model.numbers import si
from hroofline.render.text import text_table

NAME_WIDTH = 48  # kernel names run to hundreds of characters: the verdict shows their start
BEHIND_SHOWN = 3


def short(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def pct(value: float | None) -> str:
    return "?" if value is None else f"{100 * value:+.1f}%"


def interval(item: GatedItem) -> str:
    return f"[{pct(item.low)}, {pct(item.high)}]"


def noise_words(noise: RunNoise) -> str:
    if noise.noise == NOISE_STEPS:
        return f"from its {noise.steps} profiled steps"
    if noise.noise == NOISE_LAUNCHES:
        return f"from {noise.repeats:,} repeated launches of one step"
    return "unknown (one measurement: the percentage alone)"


def thresholds_words(verdict: Verdict) -> str:
    return ", ".join(f"{level} {value:g}%" for level, value in verdict.thresholds.items())


def headline(verdict: Verdict) -> str:
    if verdict.passed:
        return f"gate passed: nothing slower by more than its gate ({thresholds_words(verdict)}) and the noise"
    count = len(verdict.regressions)
    return (
        f"gate FAILED: {count} regression{'s' if count != 1 else ''} beyond the gate "
        f"({thresholds_words(verdict)}) and the runs' noise"
    )


def behind_words(item: GatedItem) -> str:
    return ", ".join(f"{short(name, 32)} {si(added, 's', 3) if added < 0 else '+' + si(added, 's', 3)}"
                     for name, added in item.behind[:BEHIND_SHOWN])  # fmt: skip


def items_table(items: list[GatedItem]) -> str:
    rows = [["level", "phase", "item", "base", "candidate", "change", "95% interval", "behind it"]]
    for item in items:
        rows.append(
            [
                item.level,
                item.phase,
                short(item.name),
                _time(item.base.time_s, item.base.half_width_s),
                _time(item.candidate.time_s, item.candidate.half_width_s),
                pct(item.change),
                interval(item),
                behind_words(item),
            ]
        )
    return text_table(rows)


def _time(time_s: float, half_width_s: float) -> str:
    return si(time_s, "s") + (f" ± {si(half_width_s, 's')}" if half_width_s > 0 else "")


def one_sided_lines(title: str, items: list[OneSided]) -> list[str]:
    if not items:
        return []
    shown = ", ".join(f"{item.phase} {short(item.name, 32)} {si(item.time_s, 's')}" for item in items[:8])
    more = f" and {len(items) - 8} more" if len(items) > 8 else ""
    return [f"{title}: {shown}{more}"]


def verdict_text(verdict: Verdict) -> str:
    """The verdict as ``compare --fail-on-regression`` prints it after the comparison."""
    lines = [headline(verdict)]
    for side, noise in verdict.noise.items():
        run = verdict.base if side == "base" else verdict.candidate
        lines.append(f"  noise of {side} {run}: {noise_words(noise)}")
    lines += [f"  note: {note}" for note in verdict.notes]
    if verdict.regressions:
        lines += ["", "regressions (time per step, candidate over base):", items_table(verdict.regressions).rstrip()]
    if verdict.improvements:
        lines += ["", "improvements:", items_table(verdict.improvements).rstrip()]
    extra = one_sided_lines("new in the candidate", verdict.new) + one_sided_lines("gone from it", verdict.gone)
    if extra:
        lines += ["", *extra]
    return "\n".join(lines) + "\n"
