"""ncu numbers and units to SI base values.

ncu prints values with thousands separators (``690,974,304``; a European locale gives ``27.595.520``
and ``65,77``), ``n/a`` for unsupported metrics, and units that change from row to row
(``byte``/``Kbyte``/``Mbyte``, ``nsecond``/``usecond``/``us``, ``cycle/nsecond``, ``Ghz``). Prefixes are
decimal: ncu's ``Kbyte`` is 1000 bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12}
_TIME = {"second": 1.0, "s": 1.0, "msecond": 1e-3, "ms": 1e-3, "usecond": 1e-6, "us": 1e-6, "nsecond": 1e-9, "ns": 1e-9}
_WORD = re.compile(r"^([KMGTPmunp]?)([a-z%]+)$")


@cache
def unit_scale(unit: str) -> float:
    """Factor from a value in ``unit`` to the SI base unit (bytes, seconds, cycles, Hz, ...)."""
    text = unit.strip()
    if not text or text == "%":
        return 1.0
    numerator, _, denominator = text.partition("/")
    scale = _numerator_scale(numerator)
    if denominator:
        scale /= _TIME.get(denominator, 1.0)
    return scale


def _numerator_scale(word: str) -> float:
    if word in _TIME:
        return _TIME[word]
    lower = word.lower()
    if lower.endswith("hz"):
        prefix = word[:-2].upper()
        return _PREFIX.get(prefix, 1.0)
    match = _WORD.match(word)
    if match and match.group(1) and len(match.group(2)) > 1:
        return _PREFIX[match.group(1)]
    return 1.0


# Only a decimal comma explains these: "27.595.520", "65,77", "0,1234", "1.234,5".
_EUROPEAN_HINTS = re.compile(
    r"^-?\d{1,3}(\.\d{3}){2,}(,\d+)?$|^-?\d+,\d{1,2}$|^-?\d+,\d{4,}$|^-?\d{1,3}(\.\d{3})+,\d+$"
)


def uses_decimal_comma(values: pa.Array) -> bool:
    """Whether a column of number strings was written in a locale with a decimal comma."""
    return bool(decimal_comma(values))


def decimal_comma(values: pa.Array) -> bool | None:
    """Whether a column of number strings uses a decimal comma; None while no value has a separator to tell
    (a wide CSV read in batches decides on its first batch that has one)."""
    sample = values.filter(pc.match_substring_regex(values, r"\d[.,]\d")) if len(values) else values
    if len(sample) == 0:
        return None
    return bool(pc.any(pc.match_substring_regex(sample.slice(0, 200_000), _EUROPEAN_HINTS.pattern)).as_py())


_NUMBER = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"
_NO_VALUE = r"^(|n/a|N/A|-|--)$"  # what ncu prints where a metric has no value: not an error
_NON_FINITE = r"^[-+]?(inf|infinity|nan)$"


def parse_numbers(values: pa.Array, decimal_comma: bool) -> np.ndarray:
    """Strings such as ``1,209,826.20`` or ``n/a`` to float64 (NaN where there is no number)."""
    return parse_numbers_checked(values, decimal_comma).numbers


@dataclass(frozen=True)
class Parsed:
    """Numbers parsed from text, and where the text was neither a number nor ncu's "no value": ``non_finite``
    (``inf``, ``nan``) and ``unreadable`` (anything else, ``example`` one of them) masks."""

    numbers: np.ndarray
    non_finite: np.ndarray | None = None
    unreadable: np.ndarray | None = None
    example: str | None = None


def parse_numbers_checked(values: pa.Array, decimal_comma: bool) -> Parsed:
    """:func:`parse_numbers`, telling text that is no number from an empty or ``n/a`` cell."""
    if not decimal_comma:  # the common case, plain numbers with thousands separators: one cast
        try:
            plain = pc.cast(pc.replace_substring(values, ",", ""), pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            plain = None
        if plain is not None and not np.isnan(plain).any():
            return Parsed(plain)
    strings = pc.utf8_trim_whitespace(values.cast(pa.string()))
    if decimal_comma:
        strings = pc.replace_substring(strings, ".", "")
        strings = pc.replace_substring(strings, ",", ".")
    else:
        strings = pc.replace_substring(strings, ",", "")
    is_number = pc.fill_null(pc.match_substring_regex(strings, _NUMBER), False)
    cleaned = pc.if_else(is_number, strings, pa.scalar(None, pa.string()))
    numbers = cleaned.cast(pa.float64()).to_numpy(zero_copy_only=False)
    if pc.all(is_number).as_py():
        return Parsed(numbers)
    no_value = pc.fill_null(pc.match_substring_regex(strings, _NO_VALUE), True)
    junk = pc.and_(pc.invert(is_number), pc.invert(no_value))
    if not pc.any(junk).as_py():
        return Parsed(numbers)
    non_finite = pc.and_(junk, pc.fill_null(pc.match_substring_regex(strings, _NON_FINITE, ignore_case=True), False))
    unreadable = pc.and_(junk, pc.invert(non_finite))
    examples = pc.filter(values.cast(pa.string()), unreadable)
    return Parsed(
        numbers,
        non_finite.to_numpy(zero_copy_only=False),
        unreadable.to_numpy(zero_copy_only=False),
        str(examples[0].as_py()).strip() if len(examples) else None,
    )


def is_time_unit(unit: str) -> bool:
    """Whether a unit is a time (``ns``, ``usecond``, ``second``), so its values are seconds in SI."""
    text = unit.strip()
    return bool(text) and "/" not in text and text in _TIME


def unit_factors(units: pa.DictionaryArray) -> np.ndarray:
    """Per row, the factor from the row's own unit to SI."""
    factors = np.array([unit_scale(u or "") for u in units.dictionary.to_pylist()], dtype=np.float64)
    if len(factors) == 0:
        return np.ones(len(units))
    codes = pc.fill_null(units.indices, 0).to_numpy(zero_copy_only=False)
    return factors[codes]


def parse_number_text(text: str) -> float:
    """One value from a console log (US separators; ncu console output is not localized)."""
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return float("nan")


def text_problem(text: str) -> str | None:
    """Why a console log's value text is no usable number: "non-finite" (``inf``, ``nan``), "unreadable"
    (``abc``), or None (a number, or ncu's ``n/a``)."""
    cleaned = text.strip().replace(",", "")
    if re.match(_NUMBER, cleaned) or re.match(_NO_VALUE, cleaned):
        return None
    return "non-finite" if re.match(_NON_FINITE, cleaned, re.IGNORECASE) else "unreadable"
