"""Compiled kernels of a trace placed on their layers, by the compile log's graphs
(:mod:`hroofline.importers.inductor_provenance`).

The profiler wraps each call of a compiled graph in ``## Call CompiledFxGraph KEY ##``; inside it, each launch
site of the graph's code is one op event (a Triton kernel's, named after it, or a library call's ATen op). The
events of one call of the graph, in order, are matched to the graph's launch sites in order, by name: a site that
launched nothing the trace recorded is passed over, an event no site names is left unplaced.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from hroofline.importers.inductor_provenance import CompiledGraph
from hroofline.importers.kineto_links import LaunchLink
from hroofline.model.layers import MODEL


@dataclass(frozen=True)
class Placement:
    """Each launch's layer and phase from the compile log (None: in no compiled graph, or not placed; the phase:
    its graph's, forward or backward), and the FX cache keys of the graphs the log does not hold."""

    layers: list[str | None]
    phases: list[str | None]
    graphs_missing: frozenset[str]


def place_compiled(links: list[LaunchLink], graphs: Mapping[str, CompiledGraph]) -> Placement:
    calls_of: dict[tuple[str, float], set[tuple[float, str]]] = defaultdict(set)
    for link in links:
        if link.compiled_call is not None:
            key, start, op, op_start = link.compiled_call
            calls_of[(key, start)].add((op_start, op))
    sites: dict[tuple[str, float, str, float], tuple[str | None, str]] = {}
    missing = set()
    for (key, start), calls in calls_of.items():
        graph = graphs.get(key)
        if graph is None:
            missing.add(key)
            continue
        phase = "backward" if graph.kind == "backward" else "forward"
        position = 0
        for op_start, op in sorted(calls):
            found = next((i for i in range(position, len(graph.calls)) if graph.calls[i].op == op), None)
            if found is None:
                continue
            layer = graph.calls[found].layer
            sites[(key, start, op, op_start)] = ((layer or MODEL) if layer is not None else None, phase)
            position = found + 1
    placed = [sites.get(link.compiled_call, (None, None)) if link.compiled_call else (None, None) for link in links]
    return Placement([p[0] for p in placed], [p[1] for p in placed], frozenset(missing))


def with_compiled_layers(
    frame: pd.DataFrame, links: list[LaunchLink], graphs: Mapping[str, CompiledGraph]
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The launches with their compiled kernels' layers from the compile log (and their graph's phase, where the
    trace names none), a note saying the share of the compiled graphs' kernel time placed, and a warning where
    launches ran in graphs the log does not hold."""
    placement = place_compiled(links, graphs)
    placed = pd.Series(placement.layers, index=frame.index, dtype=object)
    phases = pd.Series(placement.phases, index=frame.index, dtype=object)
    unnamed = (frame["phase"] == "other") & phases.notna()
    frame = frame.assign(
        layer=placed.where(placed.notna(), frame["layer"]), phase=phases.where(unnamed, frame["phase"])
    )
    compiled = pd.Series([link.compiled_call is not None for link in links], index=frame.index)
    kernels = compiled & (frame["category"] == "kernel")
    total = float(frame.loc[kernels, "time_s"].sum())
    if not compiled.any():
        nothing = (
            "the compile log places nothing: no launch of the trace ran in a compiled graph (no CompiledFxGraph range)"
        )
        return frame, [], [nothing]
    share = float(frame.loc[kernels & placed.notna(), "time_s"].sum()) / total if total > 0 else 0.0
    notes = [
        f"compiled kernels placed on their layers by the compile log: {100 * share:.1f}% of the compiled graphs' "
        f"kernel time ({int((kernels & placed.notna()).sum())} of {int(kernels.sum())} kernels); the rest keep "
        "the compiled region's label"
    ]
    warnings = []
    if placement.graphs_missing:
        keys = ", ".join(sorted(placement.graphs_missing))
        warnings.append(f"the compile log holds no graph of FX cache key {keys}: its kernels are not placed")
    return frame, notes, warnings
