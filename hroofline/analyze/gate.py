"""``compare --fail-on-regression``: whether a candidate run is slower than its base, per gated item, by more than a
percentage **and** by more than the runs' own noise.

Items are a level's keys, matched as ``compare`` matches them: the phases (and the whole step, ``total``), the
layers (when both runs are matched layer to layer), the kernel families (or NVTX context and family, or launching
op). Each run gives an item its time per step m and a 95% half-width h (:mod:`hroofline.analyze.gate_noise`). The
change is m_c / m_b - 1, its interval [(m_c - h_c) / (m_b + h_b) - 1, (m_c + h_c) / (m_b - h_b) - 1], and at a
gate of p (a fraction, PCT / 100):

* a **regression** when the candidate's lower bound exceeds the base's upper bound by p:
  m_c - h_c > (1 + p) · (m_b + h_b), i.e. the interval's low end is above p;
* an **improvement** when the base's lower bound exceeds the candidate's upper bound by p:
  m_b - h_b > (1 + p) · (m_c + h_c).

With no repeats in a run its h is 0, and the gate applies p alone; so too at a level whose items never hold a
repeated launch (a note says so). Items in one run only are listed (new, gone),
not gated on their own: their time shows in their phase's, and among the items behind its change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from hroofline.analyze.compare import MATCH_LAYER, Comparison, launch_keys, match_key, only_phases
from hroofline.analyze.compiled_step import compiled_folds
from hroofline.analyze.families import kernel_family
from hroofline.analyze.gate_noise import NOISE_NONE, RunNoise, Spread, Timed, item_spreads, timed
from hroofline.errors import UsageError
from hroofline.model.run import Run

LEVELS: tuple[str, ...] = ("phase", "layer", "family")
# 5%: above what two ncu profiles of one step differ by (kernel replay with caches flushed and clocks locked
# repeats a kernel within 1-2%), and the smallest slowdown worth a failed build; run-to-run drift the repeats
# cannot see (another process, a warmer GPU) is what the percentage is for.
DEFAULT_PCT = 5.0
BEHIND_COUNT = 5  # the finer items named behind a change
STEP_ITEM = "total"
SEP = "\x1f"  # between phase and name in an item's key (names may hold any printable character)


def parse_gate_spec(text: str) -> dict[str, float]:
    """``phase=5,layer=10,family=10`` as {level: PCT}; a malformed spec is a usage error."""
    thresholds: dict[str, float] = {}
    for part in text.split(","):
        level, _, value = part.partition("=")
        level = level.strip()
        if level not in LEVELS:
            raise UsageError(f"--gate: {level!r} is no level", f"give LEVEL=PCT, LEVEL one of {', '.join(LEVELS)}")
        thresholds[level] = check_pct(f"--gate {level}", value)
    return thresholds


def check_pct(option: str, value: str | float) -> float:
    """A gate percentage: a number, 0 or more; anything else is a usage error."""
    try:
        pct = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{option}: {value!r} is not a percentage", "give a number such as 5 (for 5%)") from None
    if not pct >= 0 or pct == float("inf"):
        raise UsageError(f"{option}: {value!r} is not a percentage", "give a number, 0 or more, such as 5")
    return pct


@dataclass(frozen=True)
class GatedItem:
    """One item of a level in both runs: its two spreads, the change (candidate / base - 1) and its interval
    (``high`` None where the base's interval reaches 0), the finer items behind the change (name, seconds added
    per step, negative when saved)."""

    level: str
    phase: str
    name: str
    base: Spread
    candidate: Spread
    change: float
    low: float
    high: float | None
    behind: list[tuple[str, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "level": self.level,
            "phase": self.phase,
            "name": self.name,
            "base": _spread_json(self.base),
            "candidate": _spread_json(self.candidate),
            "change": self.change,
            "change_low": self.low,
            "change_high": self.high,
            "behind": [{"name": name, "added_s": added} for name, added in self.behind],
        }


@dataclass(frozen=True)
class OneSided:
    """An item in one run only: its level, phase, name and time per step (s)."""

    level: str
    phase: str
    name: str
    time_s: float

    def to_json(self) -> dict[str, object]:
        return {"level": self.level, "phase": self.phase, "name": self.name, "time_s": self.time_s}


@dataclass
class Verdict:
    """The gate's answer: regressions (the largest change first), improvements, items new in the candidate or gone
    from it, each run's noise source, the levels gated and at what percentage, and notes (a level that cannot be
    gated, a run without repeats)."""

    base: str
    candidate: str
    thresholds: dict[str, float]
    noise: dict[str, RunNoise]  # "base", "candidate"
    regressions: list[GatedItem]
    improvements: list[GatedItem]
    new: list[OneSided]
    gone: list[OneSided]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.regressions

    def to_json(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "thresholds_pct": self.thresholds,
            "noise": {side: vars(noise) for side, noise in self.noise.items()},
            "regressions": [item.to_json() for item in self.regressions],
            "improvements": [item.to_json() for item in self.improvements],
            "new": [item.to_json() for item in self.new],
            "gone": [item.to_json() for item in self.gone],
            "notes": self.notes,
        }


def _spread_json(spread: Spread) -> dict[str, object]:
    return {
        "time_s": spread.time_s,
        "half_width_s": spread.half_width_s,
        "noise": spread.noise,
        "repeats": spread.repeats,
    }


def gate(base: Run, candidate: Run, comparison: Comparison, thresholds: dict[str, float]) -> Verdict:
    """The verdict on ``comparison`` (of ``base`` and ``candidate``) at ``thresholds`` ({level: PCT})."""
    phases = [phase for phase in comparison.phases if phase != STEP_ITEM]
    runs = [only_phases(run, phases) for run in (base, candidate)]
    match = match_key(*runs)
    measured = [timed(run) for run in runs]
    noise = {"base": measured[0].noise, "candidate": measured[1].noise}
    verdict = Verdict(base.name, candidate.name, dict(thresholds), noise, [], [], [], [])
    for side, found in noise.items():
        if found.noise == NOISE_NONE:
            verdict.notes.append(
                f"{side} {(base if side == 'base' else candidate).name} holds one measurement of each item (one "
                "step, no repeated launch): its noise cannot be told, the gate applies the percentage alone"
            )
    for level, pct in thresholds.items():
        if level == "layer" and match != MATCH_LAYER:
            verdict.notes.append(f"layer gate not applied: the runs are matched by {match}, not layer to layer")
            continue
        pairs = list(zip(runs, runs[::-1], strict=True))  # each run with the other (a compiled region's folds)
        keys = [_level_keys(run, other, level, match) for run, other in pairs]
        finer = [_level_keys(run, other, _finer(level, match), match) for run, other in pairs]
        _judge(verdict, level, pct / 100, (runs, measured), keys, finer)
    verdict.regressions.sort(key=lambda item: (LEVELS.index(item.level), -item.low))  # phases first, largest first
    verdict.improvements.sort(key=lambda item: (LEVELS.index(item.level), item.change))
    return verdict


def _finer(level: str, match: str) -> str:
    """What names the launches behind a level's change: layers or families behind a phase, kernel families
    behind a layer, layers (else kernels) behind a family."""
    if level == "phase":
        return "layer" if match == MATCH_LAYER else "family"
    if level == "layer":
        return "family"
    return "layer" if match == MATCH_LAYER else "kernel"


def _level_keys(run: Run, other: Run, level: str, match: str) -> pd.Series:
    """Each launch's item at ``level``, ``phase SEP name``; the step (``total``) is its own phase."""
    launches = run.launches
    phase = launches["phase"].astype(str)
    if level == "phase":
        return phase + SEP + phase
    if level == "layer":
        names = launch_keys(run, MATCH_LAYER, compiled_folds(run, other))
    elif level == "family":
        names = launches["kernel"].astype(str).map(kernel_family) if match == MATCH_LAYER else launch_keys(run, match)
    else:
        names = launches["kernel"].astype(str)
    return phase + SEP + names.astype(str)


def _judge(
    verdict: Verdict,
    level: str,
    fraction: float,
    sides: tuple[list[Run], list[Timed]],
    keys: list[pd.Series],
    finer: list[pd.Series],
) -> None:
    runs, measured = sides
    spreads = [item_spreads(run, key) for run, key in zip(measured, keys, strict=True)]
    if level == "phase":  # the whole step, as one more item
        steps = [pd.Series(STEP_ITEM + SEP + STEP_ITEM, index=run.launches.index) for run in runs]
        whole = [item_spreads(run, key) for run, key in zip(measured, steps, strict=True)]
        spreads = [{**found, **step} for found, step in zip(spreads, whole, strict=True)]
    for side, run, found in zip(("base", "candidate"), measured, spreads, strict=True):
        if run.noise.noise != NOISE_NONE and any(spread.noise == NOISE_NONE for spread in found.values()):
            verdict.notes.append(
                f"{level} gate: {side} {runs[0 if side == 'base' else 1].name}'s repeated launches repeat across "
                f"{level}s but never inside one: its noise at this level cannot be told, the gate applies the "
                "percentage alone"
            )
    finer_times = [_per_step_times(run, key, fine) for run, key, fine in zip(runs, keys, finer, strict=True)]
    for key in [k for k in spreads[1] if k not in spreads[0]]:
        verdict.new.append(OneSided(level, *key.split(SEP), spreads[1][key].time_s))
    for key in [k for k in spreads[0] if k not in spreads[1]]:
        verdict.gone.append(OneSided(level, *key.split(SEP), spreads[0][key].time_s))
    for key, b in spreads[0].items():
        c = spreads[1].get(key)
        if c is None or b.time_s <= 0:
            continue
        low = (c.time_s - c.half_width_s) / (b.time_s + b.half_width_s) - 1
        floor = b.time_s - b.half_width_s
        high = (c.time_s + c.half_width_s) / floor - 1 if floor > 0 else None
        regressed = c.time_s - c.half_width_s > (1 + fraction) * (b.time_s + b.half_width_s)
        improved = b.time_s - b.half_width_s > (1 + fraction) * (c.time_s + c.half_width_s)
        if not (regressed or improved):
            continue
        phase, name = key.split(SEP)
        behind = _behind(finer_times, key, regressed)
        item = GatedItem(level, phase, name, b, c, c.time_s / b.time_s - 1, low, high, behind)
        (verdict.regressions if regressed else verdict.improvements).append(item)


def _per_step_times(run: Run, keys: pd.Series, finer: pd.Series) -> pd.Series:
    """Seconds per step of each (item, finer item); the step item holds every launch."""
    steps = max(1, int(run.launches["step"].dropna().nunique()))
    times = run.launches["time_s"].fillna(0.0).astype(float) / steps
    names = finer.str.split(SEP).str[1]
    by_item = times.groupby([keys, names]).sum()
    whole = times.groupby(names).sum()
    whole.index = pd.MultiIndex.from_product([[STEP_ITEM + SEP + STEP_ITEM], whole.index])
    return pd.concat([by_item, whole])


def _behind(finer_times: list[pd.Series], key: str, regressed: bool) -> list[tuple[str, float]]:
    """The finer items with the most time added (a regression) or saved (an improvement) per step."""
    parts = []
    for times in finer_times:
        parts.append(times.xs(key, level=0) if key in times.index.get_level_values(0) else pd.Series(dtype=float))
    added = parts[1].sub(parts[0], fill_value=0.0)
    added = added[added > 0] if regressed else added[added < 0]
    ordered = added.sort_values(ascending=not regressed, kind="stable").head(BEHIND_COUNT)
    return [(str(name), float(seconds)) for name, seconds in ordered.items()]


# ``compare --format json``'s layout, described by docs/reference/compare.schema.json: a new field is a minor
# change that keeps the version; a renamed, removed or retyped one raises it.
COMPARE_SCHEMA_VERSION = 1


def compare_json(comparison: Comparison, verdict: Verdict | None) -> dict[str, object]:
    """``compare --format json``: the comparison's fields, ``schema_version`` and ``gate`` (None ungated)."""
    return {"schema_version": COMPARE_SCHEMA_VERSION, **comparison.to_json(), "gate": verdict and verdict.to_json()}
