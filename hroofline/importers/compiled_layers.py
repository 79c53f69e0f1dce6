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
    """Each launch's layer from the compile log (None: in no compiled graph, or not placed), and how many
    launches ran in compiled graphs, were placed, and ran in graphs the log does not hold."""

    layers: list[str | None]
    compiled: int
    placed: int
    graphs_missing: frozenset[str]


def place_compiled(links: list[LaunchLink], graphs: Mapping[str, CompiledGraph]) -> Placement:
    calls_of: dict[tuple[str, float], set[tuple[float, str]]] = defaultdict(set)
    for link in links:
        if link.compiled_call is not None:
            key, start, op, op_start = link.compiled_call
            calls_of[(key, start)].add((op_start, op))
    site_layer: dict[tuple[str, float, float, str], str | None] = {}
    missing = set()
    for (key, start), calls in calls_of.items():
        graph = graphs.get(key)
        if graph is None:
            missing.add(key)
            continue
        position = 0
        for op_start, op in sorted(calls):
            found = next((i for i in range(position, len(graph.calls)) if graph.calls[i].op == op), None)
            if found is None:
                continue
            layer = graph.calls[found].layer
            site_layer[(key, start, op_start, op)] = (layer or MODEL) if layer is not None else None
            position = found + 1
    layers: list[str | None] = []
    for link in links:
        call = link.compiled_call
        layers.append(site_layer.get((call[0], call[1], call[3], call[2])) if call is not None else None)
    compiled = sum(link.compiled_call is not None for link in links)
    return Placement(layers, compiled, sum(layer is not None for layer in layers), frozenset(missing))


def with_compiled_layers(
    frame: pd.DataFrame, links: list[LaunchLink], graphs: Mapping[str, CompiledGraph]
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The launches with their compiled kernels' layers from the compile log, a note saying the share of the
    compiled graphs' kernel time placed, and a warning where launches ran in graphs the log does not hold."""
    placement = place_compiled(links, graphs)
    placed = pd.Series(placement.layers, index=frame.index, dtype=object)
    frame = frame.assign(layer=placed.where(placed.notna(), frame["layer"]))
    compiled = pd.Series([link.compiled_call is not None for link in links], index=frame.index)
    kernels = compiled & (frame["category"] == "kernel")
    total = float(frame.loc[kernels, "time_s"].sum())
    if not compiled.any():
        return frame, [], ["--compile-log: no launch of the trace ran in a compiled graph (no CompiledFxGraph range)"]
    share = float(frame.loc[kernels & placed.notna(), "time_s"].sum()) / total if total > 0 else 0.0
    notes = [
        f"compiled kernels placed on their layers by the compile log: {100 * share:.1f}% of the compiled graphs' "
        f"kernel time ({int((kernels & placed.notna()).sum())} of {int(kernels.sum())} kernels); the rest keep "
        "the compiled region's label"
    ]
    warnings = []
    if placement.graphs_missing:
        keys = ", ".join(sorted(placement.graphs_missing))
        warnings.append(f"--compile-log holds no graph of FX cache key {keys}: its kernels are not placed")
    return frame, notes, warnings
