"""Numbers checked at the door: every reader's metric values pass here before a formula sees them.

A counter or time that is negative, not finite (``inf``, ``nan``) or larger than any kernel can give, or text
that is no number (a time of ``abc``), becomes unknown (NaN) for that launch, and the import says so in one
line per metric and reason ("3 launches had a negative gpu__time_duration.sum: left unknown"). Unknown stays
unknown downstream (sums skip it), so no total turns negative or overflows to infinity. A source in which no
value of time, FLOPs or bytes remains is refused.

Only metrics that feed a formula or a roof are checked: the others are not used, and some of them (device
attributes such as a NUMA id) may legitimately be -1.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.raw import RawProfile
from hroofline.importers.units import is_time_unit
from hroofline.roofs.metricset import MetricSet

# Physical bounds, in SI units. No kernel does 1e21 FLOPs, instructions or bytes: an H100 at 1e15 FLOP/s would
# run for 1e6 s (11.6 days) to do it, and the same holds for clocks (Hz), rates and device attributes, all far
# below. No launch runs 1e6 s. A million launches at these bounds sum to 1e27 (1e12 s), nowhere near float64's
# 1.8e308: no total can overflow to infinity.
MAX_VALUE = 1e21
MAX_SECONDS = 1e6
TIME_METRICS = ("gpu__time_duration",)

# Reasons a value is rejected, each a template for the metric's name.
NEGATIVE = "a negative {}"
NON_FINITE = "a non-finite {} (inf or nan)"


def not_a_number(example: str) -> str:
    """The reason for text that is no number, with one example of it."""
    shown = example if len(example) <= 20 else example[:17] + "..."
    return "a non-numeric {} (" + repr(shown).replace("{", "{{").replace("}", "}}") + ")"


def too_large(bound: float, seconds: bool) -> str:
    return f"an implausibly large {{}} (over 1e{round(math.log10(bound))}{' s' if seconds else ''})"


def check_values(profile: RawProfile, metric_set: MetricSet, where: str) -> RawProfile:
    """The profile with its impossible values made unknown and said in its warnings; refused when no value of
    time, FLOPs or bytes remains and some were rejected. The readers' own rejections (text that is no number)
    come in ``profile.rejected``."""
    rejected = {key: count for key, count in profile.rejected.items() if metric_set.feeds_a_formula(key[0])}
    metrics = profile.metrics
    for name in metrics.columns:
        if not metric_set.feeds_a_formula(str(name)):
            continue
        values = metrics[name].to_numpy(dtype=np.float64, na_value=np.nan)
        seconds = str(name).startswith(TIME_METRICS) or is_time_unit(profile.units.get(str(name)) or "")
        bound = MAX_SECONDS if seconds else MAX_VALUE
        with np.errstate(invalid="ignore"):
            infinite = np.isinf(values)
            negative = values < 0
            large = (values > bound) & ~infinite
        bad = infinite | negative | large
        if not bad.any():
            continue
        reasons = ((NON_FINITE, infinite), (NEGATIVE, negative & ~infinite), (too_large(bound, seconds), large))
        for reason, mask in reasons:
            count = int(mask.sum())
            if count:
                rejected[(str(name), reason)] = rejected.get((str(name), reason), 0) + count
        metrics[name] = np.where(bad, np.nan, values)
    profile.rejected = {}
    if not rejected:
        return profile
    lines = [_line(count, reason, name) for (name, reason), count in rejected.items()]
    if not _any_quantity_left(metrics, metric_set):
        raise InputError(f"{where}: no valid time, FLOP or byte count remains: {'; '.join(lines)}")
    profile.warnings.extend(f"{where}: {line}: left unknown" for line in lines)
    return profile


def _line(count: int, reason: str, metric: str) -> str:
    return f"{count} launch{'es' if count != 1 else ''} had {reason.format(metric)}"


def _any_quantity_left(metrics: pd.DataFrame, metric_set: MetricSet) -> bool:
    columns = [c for c in metrics.columns if metric_set.feeds_a_quantity(str(c))]
    return bool(columns) and bool(metrics[columns].notna().to_numpy().any())
