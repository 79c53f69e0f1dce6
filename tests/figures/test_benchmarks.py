"""The validation page's list of benchmarks (docs/validation.md, key ``benchmarks``), compared figure by figure with
the goals and defaults of bench/*.py, the row counts of the step-time files the estimate's bench judges, and the
held-out table's figures it repeats (tests/figures/test_validation_page.py compares those with the code)."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from tests.conftest import REPO, SHARED, need
from tests.validation_page import Figure, assert_page_shows, page_figures, table_row

BENCH = REPO / "bench"


def constants(path: Path) -> dict[str, object]:
    """A bench's module-level constants (``NAME = literal``) and its ``--launches`` default, read from its source
    (not imported: a bench builds large files when run)."""
    found: dict[str, object] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            values = [value] if isinstance(target, ast.Name) else list(value)
            found.update({name.id: v for name, v in zip(names, values, strict=True) if isinstance(name, ast.Name)})
        launches = isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
        if launches and node.args[0].value == "--launches":  # type: ignore[attr-defined]
            found["--launches"] = next(k.value.value for k in node.keywords if k.arg == "default")  # type: ignore[attr-defined]
    return found


def repeated(label: str, *positions: int) -> list[float]:
    """The held-out table's figures of the row ``label`` at ``positions`` (its median, its 90th percentile)."""
    row: list[Figure] = table_row("held-out", label)
    return [row[position].value for position in positions]


def test_the_page_shows_the_benchmarks_goals() -> None:
    speed, big, chart = (constants(BENCH / f"{name}.py") for name in ("import_speed", "big_import", "chart_scale"))
    overhead, predict, error = (
        constants(BENCH / f"{name}.py") for name in ("cpu_overhead", "predict_speed", "estimate_error")
    )
    published = pd.read_csv(need(SHARED / "reference" / "published-step-times.csv"))
    timm = pd.read_csv(BENCH / "data" / "timm-step-times.csv")
    computed = [
        speed["--launches"],
        speed["MAX_RATIO"],
        speed["MAX_PEAK_MB"] / 1e3,
        big["MAX_IMPORT_MB"] / 1e3,
        big["MAX_SUMMARY_MB"] / 1e3,
        big["MAX_SUMMARY_S"],
        chart["--launches"],
        chart["MAX_HTML_BYTES"] / 1e6,
        chart["MAX_CLI_SECONDS"],
        overhead["MAX_RATIO"],
        predict["MAX_SECONDS"],
        predict["MAX_PEAK_MB"] / 1e3,
        len(published),
        *repeated("each NVIDIA table", 0, 1),
        *repeated("each NVIDIA GPU left out", 0, 2),
        *repeated("each of NVIDIA's two models left out", 0, 1),
        len(timm),
        *repeated("another source, never fitted to", 0, 1),
        *repeated("both sources, each of the 58 models left out", 0, 1),
        error["GOAL_MEDIAN"],
        error["GOAL_P90"],
    ]
    assert_page_shows(page_figures("benchmarks"), computed, "the benchmarks and their goals")  # type: ignore[arg-type]
