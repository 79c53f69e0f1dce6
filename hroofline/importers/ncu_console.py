"""ncu console logs (``--log-file`` or captured stdout without ``--csv``).

Per launch a header line, indented by two spaces, then sections of fixed-width rows::

      void implicit_convolve_sgemm<...>(...), 2023-Oct-29 22:56:31, Context 1, Stream 7
        Section: Command line profiler metrics
        ---------------------------------------------------------------------- --------------- ---------
        dram__bytes.sum                                                                  Mbyte      208.82

Newer ncu prints ``  name (grid)x(block), Context 1, Stream 7, Device 0, CC 8.6`` and a
``Metric Name  Metric Unit  Metric Value`` title row. Units are auto-scaled per row.

Logs printed with ncu's default sections name their rows by display name (``Duration  usecond  11.65``,
``SM Frequency  cycle/usecond  671.26``); ``[display_names]`` in ``metrics/hierarchical.toml`` says which
metric each one is, and ``Block Size`` / ``Grid Size`` rows give the launch's shape.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from hroofline.errors import InputError
from hroofline.importers.raw import RawProfile, check_last_launch_complete
from hroofline.importers.units import parse_number_text, text_problem, unit_scale
from hroofline.importers.values import NON_FINITE, not_a_number

_LAUNCH = re.compile(r"^  (?! )(?P<head>.+?), Context (?P<context>\d+), Stream (?P<stream>\d+)(?P<rest>.*)$")
_DATE_SUFFIX = re.compile(r", \d{4}-[A-Za-z]{3}-\d{1,2} \d{1,2}:\d{2}:\d{2}$")
_LAUNCH_DIMS = re.compile(r"^(?P<name>.+) \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\)$")
_DEVICE = re.compile(r"Device (?P<device>\d+)")
_CC = re.compile(r"CC (?P<cc>\d+\.\d+)")
_ROW = re.compile(r"^    (?! )(?P<name>\S+)\s{2,}(?:(?P<unit>\S+)\s{2,})?(?P<value>\S+)\s*$")
# A section row named by display name: words with single spaces, then unit (optional) and value.
_DISPLAY_ROW = re.compile(r"^    (?! )(?P<name>\S+(?: \S+)*?)\s{2,}(?:(?P<unit>\S+)\s{2,})?(?P<value>\S+)\s*$")
_SHAPE_ROWS = {"Block Size": "block", "Grid Size": "grid"}


def looks_like_console_log(text: str) -> bool:
    return bool(re.search(r"(?m)^    Section: ", text)) and any(_LAUNCH.match(line) for line in text.splitlines())


def read_ncu_console(text: str, where: str, display_names: dict[str, str] | None = None) -> RawProfile:
    """``display_names`` maps section display names (``Duration``) to metric names."""
    launches: list[dict[str, object]] = []
    values: list[dict[str, float]] = []
    units: dict[str, str] = {}
    rows_per_launch: list[int] = []
    rejected: dict[tuple[str, str], int] = {}
    reasons: dict[tuple[str, str], str] = {}  # (metric, kind of problem) -> the reason said, its first example
    for line in text.splitlines():
        header = _LAUNCH.match(line)
        if header:
            launches.append(_launch_identity(header, len(launches)))
            values.append({})
            rows_per_launch.append(0)
            continue
        if not launches:
            continue
        found = _metric_row(line, display_names or {}, launches[-1])
        if found is None:
            continue
        name, unit, value = found
        rows_per_launch[-1] += 1
        units.setdefault(name, unit)
        number = parse_number_text(value)
        values[-1][name] = number * unit_scale(unit)
        # only a value that did not parse to a finite number (or parsed past an underscore) can be a problem
        problem = text_problem(value) if not math.isfinite(number) or "_" in value else None
        if problem is not None:
            reason = reasons.setdefault(
                (name, problem), NON_FINITE if problem == "non-finite" else not_a_number(value.strip())
            )
            rejected[(name, reason)] = rejected.get((name, reason), 0) + 1
    if not launches:
        raise InputError(f"{where}: no kernel launches found in the ncu console log")
    if not any(values):
        raise InputError(
            f"{where}: the ncu console log names kernels but holds no metric values hroofline knows",
            "collect metrics by name (ncu --metrics ...) or at least the SpeedOfLight section",
        )
    check_last_launch_complete(rows_per_launch, where, "metric rows")
    identity = pd.DataFrame(launches)
    metrics = pd.DataFrame(values).astype(np.float64)
    return RawProfile(kind="ncu-console", identity=identity, metrics=metrics, units=units, rejected=rejected)


def _metric_row(line: str, display_names: dict[str, str], launch: dict[str, object]) -> tuple[str, str, str] | None:
    """(metric name, unit, value text) of a metric row; shape rows fill the launch's grid and block."""
    row = _ROW.match(line)
    if row and row.group("name") not in ("Metric", "Section:") and set(row.group("name")) != {"-"}:
        name = row.group("name")
        if re.search(r"__|\.", name):
            return name, row.group("unit") or "", row.group("value")
    row = _DISPLAY_ROW.match(line)
    if row is None:
        return None
    name, unit = row.group("name"), row.group("unit") or ""
    if name in _SHAPE_ROWS:
        launch[_SHAPE_ROWS[name]] = launch.get(_SHAPE_ROWS[name]) or row.group("value").replace(",", "")
        return None
    kind = "%" if unit == "%" else "byte/second" if re.fullmatch(r"[KMGT]?byte/(second|[mun]?second|s)", unit) else ""
    metric = display_names.get(f"{name} [{kind}]") or display_names.get(name)
    return (metric, unit, row.group("value")) if metric else None


def _launch_identity(match: re.Match[str], index: int) -> dict[str, object]:
    head = _DATE_SUFFIX.sub("", match.group("head"))
    grid = block = None
    dims = _LAUNCH_DIMS.match(head)
    if dims:
        head, grid, block = dims.group("name"), f"({dims.group('grid')})", f"({dims.group('block')})"
    rest = match.group("rest")
    device = _DEVICE.search(rest)
    cc = _CC.search(rest)
    return {
        "launch_id": index,
        "kernel": head.strip(),
        "grid": grid,
        "block": block,
        "device": device.group("device") if device else None,
        "cc": cc.group("cc") if cc else None,
        "stream": match.group("stream"),
        "nvtx_ranges": (),
    }
