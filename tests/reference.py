"""Independent readers of real ncu output, for checking hroofline's importers.

Deliberately simple and separate from hroofline: Python's csv module and NVIDIA's ncu_report, with
units scaled from a plain table. They read the straightforward files only.
"""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from pathlib import Path

UNIT = {
    "": 1,
    "byte": 1,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "inst": 1,
    "cycle": 1,
    "%": 1,
    "nsecond": 1e-9,
    "usecond": 1e-6,
    "msecond": 1e-3,
    "second": 1,
    "ns": 1e-9,
    "us": 1e-6,
    "cycle/second": 1,
    "cycle/nsecond": 1e9,
    "cycle/usecond": 1e6,
    "hz": 1,
    "Ghz": 1e9,
    "byte/s": 1,
    "inst/cycle": 1,
    "byte/second": 1,
    "sector": 1,
    "byte/cycle": 1,
    "sector/cycle": 1,
}


def long_csv_launches(path: Path) -> dict[int, dict[str, float]]:
    """{launch ID: {metric: SI value}} from a long-format ncu CSV (text before the header allowed)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        lines = handle.read().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    reader = csv.reader(lines[start:])
    header = next(reader)
    col = {name: i for i, name in enumerate(header)}
    launches: dict[int, dict[str, float]] = defaultdict(dict)
    for row in reader:
        if len(row) <= col["Metric Value"] or not row[col["Metric Name"]]:
            continue
        text = row[col["Metric Value"]].replace(",", "")
        scale = UNIT.get(row[col["Metric Unit"]])
        try:
            value = float(text) * scale if scale is not None else None
        except ValueError:
            continue  # n/a
        if value is None:
            continue  # a unit the metrics used here never have
        launches[int(row[col["ID"]])].setdefault(row[col["Metric Name"]], value)
    return dict(launches)


def report_launches(path: Path) -> list[dict[str, float]]:
    """[{metric: SI value}] per launch of a .ncu-rep, read with ncu_report."""
    import ncu_report

    context = ncu_report.load_report(str(path))
    launches = []
    for r in range(context.num_ranges()):
        report_range = context.range_by_idx(r)
        for a in range(report_range.num_actions()):
            action = report_range.action_by_idx(a)
            values = {}
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                value = metric.value()
                if isinstance(value, (int, float)) and metric.unit() in UNIT:
                    values[name] = float(value) * UNIT[metric.unit()]
            launches.append(values)
    return launches


def console_launches(path: Path) -> list[dict[str, float]]:
    """[{metric: SI value}] per launch of an ncu console log."""
    launches: list[dict[str, float]] = []
    for line in path.read_text().splitlines():
        if line.startswith("  ") and not line.startswith("   ") and ", Context " in line:
            launches.append({})
        elif line.startswith("    ") and "__" in line and launches:
            parts = line.split()
            name, value = parts[0], parts[-1].replace(",", "")
            unit = parts[1] if len(parts) == 3 else ""
            launches[-1][name] = float(value) * UNIT[unit]
    return launches


def wide_csv_launches(path: Path) -> list[dict[str, float]]:
    """[{metric: SI value}] per launch of a wide (--page raw) ncu CSV: header row, units row, launch rows."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header, units = rows[0], rows[1]
    launches = []
    for row in rows[2:]:
        values = {}
        for name, unit, text in zip(header, units, row, strict=True):
            scale = UNIT.get(unit)
            try:
                number = float(text.replace(",", ""))
            except ValueError:
                continue
            if "__" in name and scale is not None:
                values[name] = number * scale
        launches.append(values)
    return launches


def section_console_launches(path: Path) -> list[dict[str, float]]:
    """[{"gpu__time_duration.sum": seconds}] per launch of a console log printed with ncu's default
    sections, from its "Duration" rows."""
    launches: list[dict[str, float]] = []
    for line in path.read_text().splitlines():
        if line.startswith("  ") and not line.startswith("   ") and ", Context " in line:
            launches.append({})
        elif line.strip().startswith("Duration ") and launches:
            parts = line.split()
            launches[-1]["gpu__time_duration.sum"] = float(parts[-1].replace(",", "")) * UNIT[parts[-2]]
    return launches
