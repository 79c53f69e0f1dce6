"""hroofline: hierarchical roofline analysis of the GPU kernels of deep-learning workloads.

The pipeline, one stage per subpackage: collect -> importers -> store -> analyze -> render, on the roof domain
(``roofs``), the work of ops (``work``) and the ground (``model``: the run and its vocabulary); the API
(``api``) and the CLI (``cli``) compose them. ``docs/architecture.md`` draws it. The central type passed between
the stages is :class:`hroofline.model.run.Run`.

As a library (nothing heavy is imported until used)::

    import hroofline

    # in your training script: mark the step, its phases and the model's layers
    model = hroofline.annotate(model)
    with hroofline.profiled_step():
        with hroofline.phase("forward"):
            loss = loss_fn(model(x), y)
        ...

    # afterwards, or in a notebook
    run = hroofline.load("resnet18-cpu")
    run.top(n=5)                      # a DataFrame
    run.kernels(group_by="layer")     # a DataFrame
    run.chart()                       # an Altair chart (shown inline in Jupyter)
    run.report("report/")             # the HTML page
    run.advise()                      # what to change, with its evidence and what it can win
    predicted = hroofline.predict(model, input_shape=(3, 32, 32), gpu="a100")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; imported on first use so that `import hroofline` stays instant.
_API: dict[str, str] = {
    "phase": "hroofline.collect.session",
    "annotate": "hroofline.collect.session",
    "profiled_step": "hroofline.collect.session",
    "load": "hroofline.api.notebook",
    "predict": "hroofline.api.prediction",
    "predict_generation": "hroofline.api.prediction",
    "compare": "hroofline.api.notebook",
    "advise": "hroofline.api.notebook",
    "runs": "hroofline.api.notebook",
    "query": "hroofline.api.notebook",
    "import_run": "hroofline.api.notebook",
    "set_baseline": "hroofline.api.baselines",
    "baselines": "hroofline.api.baselines",
    "remove_baseline": "hroofline.api.baselines",
    "load_baseline": "hroofline.api.baselines",
    "ImportSettings": "hroofline.api.imports",
    "report": "hroofline.api.notebook",
    "Run": "hroofline.model.run",
    "RunView": "hroofline.api.face",
}
__all__ = ["__version__", *_API]


def __dir__() -> list[str]:
    """What Tab completion offers: the API, not only what is imported yet."""
    return sorted(["__version__", *_API])


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'hroofline' has no attribute {name!r}")
