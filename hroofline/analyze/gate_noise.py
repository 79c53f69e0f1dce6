"""A run's own noise, per gated item (a phase, layer or kernel family): the item's time per step and the
half-width of a 95% interval around it, from the repeats the run holds.

* **steps**: a run with two or more profiled steps (a trace's ``step`` column, ``profile --steps N``). The item's
  time in each step, x_1..x_k, gives its mean m and standard deviation s; the interval is the mean's 95%
  confidence interval, m ± t(0.975, k-1) · s / sqrt(k).
* **launches**: one step, with kernels launched more than once with the same work (a trace's ``signature``,
  else the same kernel, grid, block and input shapes). A repeated group of n launches, standard deviation s_g,
  adds n · s_g² to the item's variance (independent launches); a launch without repeats adds (c · t)², c² the
  run's pooled squared coefficient of variation, Σ(n_g - 1)(s_g / m_g)² / Σ(n_g - 1). The half-width is
  t(0.975, Σ(n_g - 1)) · sqrt(variance). Launches that repeat across items but never inside one (identical
  kernels once per layer of a one-step run, gated by layer) leave no degree of freedom at that level: its
  items fall back to **none**.
* **none**: a single measurement of everything: the half-width is 0 and the gate applies its percentage alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from hroofline.model.run import Run
from hroofline.roofs.formulas import total_flops

NOISE_STEPS, NOISE_LAUNCHES, NOISE_NONE = "steps", "launches", "none"

# Student's t, the 0.975 quantile, for 1..30 degrees of freedom (any statistics table; tests/test_compare_gate.py
# checks each against the t density integrated numerically).
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
Z_975 = 1.959964  # the normal distribution's 0.975 quantile


def t_975(degrees: int) -> float:
    """Student's t 0.975 quantile: the table to 30 degrees of freedom, beyond it the Cornish-Fisher expansion
    z + (z³ + z) / 4ν + (5z⁵ + 16z³ + 3z) / 96ν² (within 0.001 of the exact value for ν > 30)."""
    if degrees < 1:
        raise ValueError("t needs one degree of freedom or more")
    if degrees <= len(T_975):
        return T_975[degrees - 1]
    z = Z_975
    return z + (z**3 + z) / (4 * degrees) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * degrees**2)


@dataclass(frozen=True)
class Spread:
    """One run's time for one item: per step (s), the 95% half-width (s; 0 when the noise is unknown), how the
    noise was told (:data:`NOISE_STEPS`, :data:`NOISE_LAUNCHES`, :data:`NOISE_NONE`) and from how many repeats
    (steps, or launches in repeated groups)."""

    time_s: float
    half_width_s: float
    noise: str
    repeats: int


@dataclass(frozen=True)
class RunNoise:
    """Where a run's noise comes from, as a whole: the source, its repeats and the steps its times are over."""

    noise: str
    repeats: int
    steps: int


@dataclass(frozen=True)
class Timed:
    """A run's launches as the gate reads them (time, step, launches, and ``repeat``: what makes two launches the
    same work), and its noise source: made once per run, read per level."""

    launches: pd.DataFrame
    noise: RunNoise


def timed(run: Run) -> Timed:
    """The run's launches with a time (an unmeasured one counts 0 s and repeats nothing) and its noise source:
    its profiled steps where it holds two or more, else its repeated launches, else none."""
    launches = run.launches
    frame = pd.DataFrame(
        {
            "time_s": launches["time_s"].fillna(0.0).astype(float).to_numpy(),
            "step": launches["step"].to_numpy(),
            "launches": launches["launches"].fillna(1).to_numpy(),
            "repeat": _repeat_key(launches).to_numpy(),
        }
    )
    steps = int(frame["step"].dropna().nunique())
    if steps >= 2:
        return Timed(frame, RunNoise(NOISE_STEPS, steps, steps))
    groups = _repeat_groups(frame)
    repeated = int(groups["n"][groups["n"] >= 2].sum())
    return Timed(frame, RunNoise(NOISE_LAUNCHES if repeated else NOISE_NONE, repeated, 1))


def item_spreads(run: Timed, keys: pd.Series) -> dict[str, Spread]:
    """Each item's :class:`Spread`, the item of a launch being its entry in ``keys`` (aligned with the run's
    launches)."""
    launches = run.launches.assign(item=keys.astype(str).to_numpy())
    if run.noise.noise == NOISE_STEPS:
        return _by_steps(launches, run.noise.steps)
    if run.noise.noise == NOISE_LAUNCHES:
        found = _by_launches(launches)
        if found is not None:
            return found
    totals = launches.groupby("item", sort=False)["time_s"].sum()
    return {item: Spread(float(total), 0.0, NOISE_NONE, 1) for item, total in totals.items()}


def _by_steps(launches: pd.DataFrame, steps: int) -> dict[str, Spread]:
    stepped = launches[launches["step"].notna()]
    per_step = stepped.pivot_table(index="item", columns="step", values="time_s", aggfunc="sum", fill_value=0.0)
    totals = launches.groupby("item", sort=False)["time_s"].sum()
    spread = t_975(steps - 1) / math.sqrt(steps)
    result: dict[str, Spread] = {}
    for item, total in totals.items():
        deviation = float(per_step.loc[item].std(ddof=1)) if item in per_step.index else 0.0
        result[item] = Spread(float(total) / steps, spread * deviation, NOISE_STEPS, steps)
    return result


def _repeat_key(launches: pd.DataFrame) -> pd.Series:
    """What makes two launches the same work: a trace's signature, else kernel, grid, block, input shapes and
    the work counted (FLOPs and DRAM bytes to three significant digits: one kernel at one grid runs layers of
    other widths)."""
    names = [
        launches[column].astype("string").fillna("").to_numpy() for column in ("kernel", "grid", "block", "shapes")
    ]
    work = [values.astype(float).to_numpy() for values in (total_flops(launches), launches["bytes_hbm"])]
    rows = zip(*names, *work, strict=True)
    fallback = ["|".join(parts) + f"|{flops:.3g}|{moved:.3g}" for *parts, flops, moved in rows]
    return launches["signature"].astype("string").fillna(pd.Series(fallback, index=launches.index)).astype(str)


def _repeat_groups(launches: pd.DataFrame) -> pd.DataFrame:
    """Per item (where the frame has one) and repeat key, over single launches (a row standing for N merged
    launches has no spread): n, mean and variance of the launch times."""
    single = launches[launches["launches"] == 1]
    by = ["item", "repeat"] if "item" in single.columns else ["repeat"]
    groups = single.groupby(by, sort=False)["time_s"].agg(["count", "mean", "var"]).reset_index()
    return groups.rename(columns={"count": "n"})


def _by_launches(launches: pd.DataFrame) -> dict[str, Spread] | None:
    """The spreads from launches repeated inside an item; None where no launch repeats inside any item."""
    groups = _repeat_groups(launches)
    repeated = groups[groups["n"] >= 2]
    degrees = int((repeated["n"] - 1).sum())
    if degrees == 0:
        return None
    relative = (repeated["var"] / repeated["mean"].where(repeated["mean"] > 0) ** 2).fillna(0.0)
    pooled_cv2 = float(((repeated["n"] - 1) * relative).sum()) / degrees
    # a repeated group adds n·s²; a launch of its own, and a merged row, (c·t)²
    alone = launches[launches["launches"] != 1]
    variance = (repeated["n"] * repeated["var"].fillna(0.0)).groupby(repeated["item"]).sum()
    singles = groups[groups["n"] < 2]
    lone = (singles["mean"] ** 2 * pooled_cv2).groupby(singles["item"]).sum()
    merged = (alone["time_s"] ** 2 * pooled_cv2).groupby(alone["item"]).sum()
    counts = repeated.groupby("item")["n"].sum()
    totals = launches.groupby("item", sort=False)["time_s"].sum()
    quantile = t_975(degrees)
    result: dict[str, Spread] = {}
    for item, total in totals.items():
        item_variance = sum(float(part.get(item, 0.0)) for part in (variance, lone, merged))
        repeats = int(counts.get(item, 0))
        result[item] = Spread(float(total), quantile * math.sqrt(item_variance), NOISE_LAUNCHES, repeats)
    return result
