"""hroofline as a library: the same compositions the CLI runs, returning runs, DataFrames and Altair charts.

    import hroofline
    run = hroofline.load("resnet18-cpu")              # a run from the store, with its analyses as methods
    run.summary()                                     # per phase: time, FLOPs, bytes (a DataFrame)
    run.top(n=5, by="layer")                          # ranked, with binding roof and recoverable time
    run.kernels(group_by="layer", phase="backward")   # kernel table per launch, name or layer
    run.chart(by="layer")                             # hierarchical roofline (Altair; inline in Jupyter)
    run.report("report/")                             # the HTML page, as `hroofline report`
    run.advise()                                      # what to change, with evidence and win (a DataFrame)
    hroofline.import_run("step.ncu-rep", "r1", gpu="h100")   # as `hroofline import` (its options by name)
    hroofline.predict(model, input_shape=(3, 32, 32), gpu="a100", precision="amp")
    hroofline.compare(base, candidate)                # a Comparison (.phases, .phase_table, .families)
    hroofline.compare(base, candidate).gate(phase=5)  # compare --fail-on-regression's verdict (.passed)
    hroofline.set_baseline("last-good", "r1")         # as `hroofline baseline set` (baselines, remove_baseline)
    hroofline.report(["r1", "r2"], "report/", compare=[("r1", "r2")])
    hroofline.query("SELECT run, phase, sum(time_s) FROM launches GROUP BY ALL")   # SQL over all runs (DuckDB)

``notebook`` (the functions above), ``face`` (:class:`~hroofline.api.face.RunView`), ``outputs`` (roofline, top),
``report_page``, ``imports`` and ``prediction`` (the compositions the CLI calls). Loaded on first use.
"""

from __future__ import annotations

from typing import Any

_HOMES: dict[str, str] = {
    "load": "notebook",
    "runs": "notebook",
    "query": "notebook",
    "compare": "notebook",
    "advise": "notebook",
    "import_run": "notebook",
    "report": "notebook",
    "store_at": "notebook",
    "set_baseline": "baselines",
    "baselines": "baselines",
    "remove_baseline": "baselines",
    "load_baseline": "baselines",
    "predict": "prediction",
    "predict_run": "prediction",
    "predict_generation": "prediction",
    "describe_generation": "prediction",
    "PredictOptions": "prediction",
    "Prediction": "prediction",
    "RunView": "face",
    "import_files": "imports",
    "import_with": "imports",
    "ImportSettings": "imports",
    "roofline": "outputs",
    "top": "outputs",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'hroofline.api' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"hroofline.api.{_HOMES[name]}"), name)
