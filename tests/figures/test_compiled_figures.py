"""The validation page's figures of compiled steps (docs/validation.md, keys ``compiled-layers`` and
``compiled-ncu``), recomputed from the H200 traces, compile logs and ncu report of tests/data/gpu-2026-11-28 and
compared with the page figure by figure (the behaviour is tests/test_compiled_layers.py's and
test_compiled_ncu.py's, in make test)."""

from __future__ import annotations

import re

from tests.test_compiled_layers import _imported, _launches, _matmul_flops_by_layer, _placed_share
from tests.validation_page import assert_page_shows, page_figures

PLACED_NOTE = re.compile(r"([\d.]+)% of the compiled graphs' kernel time \((\d+) of (\d+) kernels\)")


def _graphs_placed(model: str) -> list[float]:
    """The import's own count of the compiled graphs' kernels it placed: share of their time, placed, all."""
    notes = [PLACED_NOTE.search(note) for note in _imported(model, "compiled", True).info.notes]
    found = [match for match in notes if match]
    assert len(found) == 1, f"{model}: no note on the compiled graphs' placed kernels"
    share, placed, kernels = found[0].groups()
    return [float(share), float(placed), float(kernels)]


def test_compiled_kernels_on_their_layers() -> None:
    models = ("resnet50", "gpt2")
    graphs = [figure for model in models for figure in _graphs_placed(model)]
    on_a_layer = [100 * _placed_share(_launches(model, "compiled", True)) for model in models]
    before = [100 * _placed_share(_launches(model, "compiled")) for model in models]
    layers = []
    for model in models:
        compiled = _matmul_flops_by_layer(_launches(model, "compiled", True))
        eager = _matmul_flops_by_layer(_launches(model, "eager"))
        both = eager.index.union(compiled.index)
        compiled, eager = compiled.reindex(both, fill_value=0.0), eager.reindex(both, fill_value=0.0)
        within = int(((compiled - eager).abs() <= 0.01 * eager).sum())
        total = eager.sum() / (1e9 if model == "resnet50" else 1e12)  # GFLOP, TFLOP as the page prints them
        layers.append([float(within), float(len(both)), total])
    computed = [*graphs, *on_a_layer, *before, 1.0, *layers[0], *layers[1]]
    assert_page_shows(page_figures("compiled-layers"), computed, "compiled kernels on their layers")


def test_a_compiled_step_under_ncu_and_in_its_trace() -> None:
    from tests.test_compiled_ncu import REPORT, TRACE, _flops_by_phase, _kernels

    measured, analytic = _kernels(REPORT), _kernels(TRACE)
    ncu, trace = _flops_by_phase(measured) / 1e12, _flops_by_phase(analytic) / 1e12
    computed = [
        float(len(measured)),
        ncu["forward"],
        trace["forward"],
        ncu["backward"],
        trace["backward"],
        ncu.sum(),
        trace.sum(),
        ncu["optimizer"] * 1e3,
    ]
    assert_page_shows(page_figures("compiled-ncu"), computed, "a compiled step under ncu and in its trace")
