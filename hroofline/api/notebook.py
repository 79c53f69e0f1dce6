"""The store through the API: runs loaded as :class:`~hroofline.api.face.RunView` (a run with its analyses as
methods), their names, SQL over all of them, and two runs compared."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hroofline.api.face import RunView
from hroofline.api.imports import ImportSettings
from hroofline.api.options import DEFAULT_TOP
from hroofline.errors import UsageError
from hroofline.model.run import Run
from hroofline.store.location import existing_store_path, store_path
from hroofline.store.runs import RunStore

if TYPE_CHECKING:
    import pandas as pd


def store_at(store: str | Path | None, writing: bool = False) -> RunStore:
    """The store ``store``, else $HROOFLINE_STORE, else ./hroofline-runs: one that must exist to be read, as the
    CLI's read commands say, or (``writing``) one created on the first write."""
    option = str(store) if store is not None else None
    return RunStore(store_path(option) if writing else existing_store_path(option))


def load(run: str, store: str | Path | None = None) -> RunView:
    """A run from the store (``store``, else $HROOFLINE_STORE, else ./hroofline-runs), with its analyses as
    methods (``.summary()``, ``.top()``, ``.chart()``, ...)."""
    return RunView.of(store_at(store).load(run))


def runs(store: str | Path | None = None) -> list[str]:
    """The names of the runs in the store."""
    return store_at(store).run_names()


def query(sql: str, store: str | Path | None = None) -> pd.DataFrame:
    """SQL over the store with DuckDB, as ``hroofline query``: tables ``launches`` (one row per launch of every
    run) and ``runs`` (one row per run); a run whose launches file cannot be read is left out, with a warning."""
    import warnings

    from hroofline.store.query import query_store

    left_out: list = []
    result = query_store(store_at(store), sql, left_out)
    for run in left_out:
        warnings.warn(f"run {run.name!r} left out: {run.reason} ({run.hint})", stacklevel=2)
    return result


def compare(
    base: Run | str | None = None,
    candidate: Run | str | None = None,
    store: str | Path | None = None,
    n: int = 8,
    baseline: str | None = None,
    base_store: str | Path | None = None,
) -> Any:
    """Two runs side by side, as ``hroofline compare`` (``n``: its -n, the gains and regressions shown): a
    :class:`hroofline.analyze.compare.Comparison`'s fields, printed as the command prints it and shown in a
    notebook as its tables, with ``phase_table`` its phases as a DataFrame; per phase, and layer to layer when
    both have layers, else by kernel family. ``baseline``: the run a baseline names instead of ``base``
    (``compare(candidate="new", baseline="last-good")``); ``base_store``: the store the base or baseline is read
    from (else ``store``). Where the runs were measured on another GPU, driver, clock control or PyTorch, a
    warning says so."""
    import warnings

    from hroofline.analyze.compare import compare_runs
    from hroofline.api.options import check_count
    from hroofline.api.views import ComparisonView
    from hroofline.model.environment import environment_differences
    from hroofline.store.baselines import baseline_run

    def as_run(value: Run | str, where: str | Path | None) -> Run:
        return value if isinstance(value, Run) else load(value, where)

    check_count("n", n)
    if candidate is None or (base is None) == (baseline is None):
        raise UsageError("give base and candidate, or baseline= and candidate")
    where = base_store if base_store is not None else store
    first = as_run(base, where) if base is not None else load(baseline_run(store_at(where), str(baseline)), where)
    second = as_run(candidate, store)
    for difference in environment_differences(first.meta, second.meta):
        warnings.warn(difference.warning(first.name, second.name), stacklevel=2)
    return ComparisonView(compare_runs(first, second), first, second, n)


def advise(run: Run | str, store: str | Path | None = None, ceilings: str | None = None) -> pd.DataFrame:
    """What to change in ``run``'s step, one row per finding, the most to win first, as ``hroofline advise``,
    against the run's roofs (or ``ceilings``: a GPU name, a bundled set or a ceilings file)."""
    from hroofline.api.advice import advise as findings_table

    return findings_table(run if isinstance(run, Run) else load(run, store), ceilings)


def import_run(
    sources: list[str | Path] | str | Path,
    run: str,
    settings: ImportSettings | None = None,
    store: str | Path | None = None,
    **options: Any,
) -> RunView:
    """Imports ncu reports, exports, logs or profiler traces into ``run``, as ``hroofline import``, and returns the
    run. It takes what the command takes, by the options' names, as an
    :class:`~hroofline.api.imports.ImportSettings` or one by one::

        hroofline.import_run("trace.json.gz", "ddp", gpu="a100", steps="5,6")   # import ... --gpu a100 --steps 5,6
        hroofline.import_run(["rank0.json", "rank1.json"], "two", hroofline.ImportSettings(gpu="a100", rank=1))

    (``gpu``, ``phase``, ``ceilings``, ``measure_ceilings``, ``force_gpu``, ``merge``, ``steps``, ``rank``,
    ``capture``, ``compile_log``, ``precision``, ``replace``). A trace recorded on the CPU alone (or
    ``gpu="cpu"``) makes a CPU run, its roofs ``ceilings`` or, where the trace was recorded here, this CPU's."""
    from hroofline.api.imports import import_with

    paths = [sources] if isinstance(sources, str | Path) else list(sources)
    chosen = ImportSettings.named(settings, **options)
    target = store_at(store, writing=True)
    import_with(target, run, paths, chosen)
    return RunView.of(target.load(run))


def report(
    runs: list[Run | str],
    out: str | Path,
    compare: list[tuple[Run | str, Run | str]] | None = None,
    title: str = "hroofline report",
    store: str | Path | None = None,
    top: int = DEFAULT_TOP,
    ceilings: str | None = None,
) -> Path:
    """One self-contained HTML page (``out/index.html``) of ``runs`` and the comparisons ``compare``, as
    ``hroofline report`` (``top``: its -n/--top, kernels per table; ``ceilings``: its --ceilings); returns the
    page's path."""
    from hroofline.api.options import check_count
    from hroofline.api.report_page import report as compose

    def as_run(value: Run | str) -> Run:
        return value if isinstance(value, Run) else load(value, store)

    check_count("top", top)
    pairs = [(as_run(base), as_run(candidate)) for base, candidate in compare or []]
    return compose([as_run(run) for run in runs], pairs, title, top, ceilings).write(Path(out))
