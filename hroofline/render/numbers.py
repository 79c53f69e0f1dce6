"""Numbers for people: SI prefixes with three significant digits (1 GB/s = 1e9 byte/s, never 2**30)."""

from __future__ import annotations

import math

_PREFIXES = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
)


def si(value: float | None, unit: str, digits: int = 3) -> str:
    """``si(4.85e13, "FLOP/s") == "48.5 TFLOP/s"``; ``si(0.024, "s") == "24.0 ms"``."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return f"0 {unit}"
    magnitude = abs(value)
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * 0.9995:
            scaled = value / scale
            rounded = f"{scaled:.{digits}g}"  # decide on trailing zeros after rounding: 99.96 -> "100", not "100."
            text = rounded if abs(float(rounded)) >= 10 ** (digits - 1) else f"{scaled:#.{digits}g}"
            return f"{text} {prefix}{unit}"
    scale, prefix = _PREFIXES[-1]
    return f"{value / scale:.{digits}g} {prefix}{unit}"


def per_second(value: float | None, unit: str) -> str:
    """A throughput in plain numbers: ``per_second(1072.4, "images") == "1,072 images/s"``."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.0f} {unit}/s" if value >= 100 else f"{value:.3g} {unit}/s"
