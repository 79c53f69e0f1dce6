"""Numbers for people: SI prefixes with three significant digits (1 GB/s = 1e9 byte/s, never 2**30); values for
JSON (null for not measured, plain Python for numpy)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

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


def plain(value: float | None, digits: int = 3) -> str:
    """A number without a unit, to ``digits`` significant digits and never in e-notation: ``plain(1000.0) ==
    "1,000"``, ``plain(0.01234) == "0.0123"``; from a million on with an SI prefix (``plain(6.558e9) == "6.56 G"``)."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1e6:
        return si(value, "", digits).rstrip()
    rounded = float(f"{value:.{digits}g}")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:,.{decimals}f}"


def per_second(value: float | None, unit: str) -> str:
    """A throughput in plain numbers: ``per_second(1072.4, "images") == "1,072 images/s"``."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.0f} {unit}/s" if value >= 100 else f"{value:.3g} {unit}/s"


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: json_value(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def json_value(value: object) -> object:
    if isinstance(value, list | tuple) or (hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0):
        return [json_value(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]  # type: ignore[union-attr]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or type(value).__name__ == "NAType":  # pandas.NA, without importing pandas
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return json_value(value.item())  # numpy scalars
    return value
