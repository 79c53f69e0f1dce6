"""A torch.compile'd step beside the eager one: which run is compiled, and how their layers meet.

Inductor fuses the kernels of many modules into one, so a compiled model's kernels carry the layer ``<compiled>``
(:data:`hroofline.model.layers.COMPILED`) where the eager run has module paths. Compared layer to layer, the eager
run's module paths that the compiled run lacks are the compiled region: they are folded into ``<compiled>``, so
that the region is compared with the modules it replaced (launches, bytes, time), and the loss and the optimizer,
which stay eager, with themselves. A module path both runs have (a compiled kernel placed on its module) stays.
"""

from __future__ import annotations

import pandas as pd

from hroofline.model.layers import COMPILED, MODEL, NON_MODULE_LABELS
from hroofline.model.run import Run

UNKNOWN_MODE = "unknown"  # a run with compiled kernels that does not say its mode (an imported trace)


def compile_mode(run: Run) -> str | None:
    """The torch.compile mode of a run's model: as ``profile --compile`` recorded it, ``unknown`` for a run whose
    kernels are in a compiled region but that does not say how, None for an eager run."""
    if run.meta.compile_mode is not None:
        return run.meta.compile_mode
    return UNKNOWN_MODE if _has_compiled_region(run) else None


def _has_compiled_region(run: Run) -> bool:
    return "layer" in run.launches and bool((run.launches["layer"].astype("string") == COMPILED).any())


def compiled_folds(run: Run, other: Run) -> frozenset[str]:
    """The layers of ``run`` that ``other`` ran in its compiled region: where ``other`` has one, ``run``'s module
    paths (and ``<model>``, the model's own code) that ``other`` lacks."""
    if not _has_compiled_region(other):
        return frozenset()
    own = set(run.launches["layer"].dropna().astype(str))
    theirs = set(other.launches["layer"].dropna().astype(str))
    return frozenset(layer for layer in own - theirs if layer == MODEL or layer not in NON_MODULE_LABELS)


def folded_layers(layers: pd.Series, folds: frozenset[str]) -> pd.Series:
    """``layers`` with those in ``folds`` as ``<compiled>``."""
    if not folds:
        return layers
    return layers.where(~layers.isin(folds), COMPILED)


def compiled_sides(base: Run, candidate: Run) -> dict[str, str]:
    """The compiled runs of a comparison and their modes ({"candidate": "default"}); empty when neither is."""
    modes = {side: compile_mode(run) for side, run in (("base", base), ("candidate", candidate))}
    return {side: mode for side, mode in modes.items() if mode is not None}
