"""The roof analysis's notes in sentences: kernels above a roof said once per kind (how many, how much time,
why), each listed on request, and the roofs that were missing."""

from __future__ import annotations

from hroofline.analyze.binding import (
    BEYOND_L2,
    CACHE_CEILING,
    CPU_COMPUTE_CEILING,
    FLUSHED,
    LESS_ARITHMETIC,
    MEASURED,
    RESIDENT,
    RoofNotes,
)
from hroofline.analyze.provenance import CounterProvenance
from hroofline.model.names import short_kernel_name
from hroofline.model.numbers import si

# Per kind: what it means, said once for all the kernel groups of that kind.
_ABOVE_WHY = {
    RESIDENT: "faster than their bytes allow at HBM: their bytes are the fewest their ops must move, counted at "
    "HBM, and data an earlier kernel left resident in the GPU's {l2}L2 cache served them",
    BEYOND_L2: "faster than their bytes allow at HBM, even were the GPU's {l2}L2 cache full of their data: their "
    "bytes are analytic (their op's, split over its kernels by duration) and too high for these kernels, or the "
    "HBM roof is too low",
    FLUSHED: "faster than their bytes allow at HBM: ncu counted those bytes with the caches flushed before each "
    "launch (an upper bound), and in the traced step data an earlier kernel left in the GPU's {l2}L2 cache "
    "served them",
    CACHE_CEILING: "faster than their bytes allow at a cache level: their bytes are the fewest their ops must move, "
    "and the ceiling measured there (a summing loop) is below what these ops reach",
    LESS_ARITHMETIC: "faster than their compute roof allows for their ops' FLOPs: the kernels did less arithmetic "
    "than the op's formula (Winograd or FFT convolutions, a fused kernel that skips masked work)",
    CPU_COMPUTE_CEILING: "faster than the compute roof measured on this CPU allows for their FLOPs: the roof (the best "
    "of a matrix product and two convolutions) is below what these ops reach, as a roof measured while other work "
    "held the cores is (profile --gpu cpu --measure-ceilings measures it again)",
    MEASURED: "faster than their roofs allow for what the counters measured: the ceilings or the metrics are "
    "wrong (check --ceilings, the clock, the metric formulas)",
}


LOUD_KERNELS = 3  # a measured kernel above its roof is an error: the line names the worst of them


def above_roof_lines(notes: RoofNotes) -> list[str]:
    """One line per kind of kernel above a roof: how many, how much time, why."""
    lines = []
    for kind, why in _ABOVE_WHY.items():
        found = [a for a in notes.above if a.kind == kind]
        if not found:
            continue
        launches = sum(a.launches_above for a in found)
        time_s = sum(a.time_s for a in found)
        at_roof = sum(a.time_at_roof_s for a in found)
        roofs = sorted({a.bound for a in found})
        l2 = f"{notes.l2_bytes / 2**20:g} MiB " if notes.l2_bytes else ""
        worst = sorted(found, key=lambda a: a.time_s - a.time_at_roof_s)[:LOUD_KERNELS] if kind == MEASURED else []
        named = f" ({', '.join(f'{short_kernel_name(a.kernel)} ({a.phase})' for a in worst)}...)" if worst else ""
        lines.append(
            f"{len(found)} kernel(s){named} in {launches} launch(es) ran {why.format(l2=l2)} ({si(time_s, 's')} "
            f"in all against {si(at_roof, 's')} at the {', '.join(roofs)} roof(s) of {notes.roofs_label}); "
            "--explain lists them"
        )
    return lines


def above_roof_details(notes: RoofNotes) -> list[str]:
    """One line per kernel group above a roof."""
    return [
        f"{short_kernel_name(a.kernel)} ({a.phase}) beats its {a.bound} roof in {a.launches_above} of "
        f"{a.count} launch(es): they took {si(a.time_s, 's')} against {si(a.time_at_roof_s, 's')} at roof [{a.kind}]"
        for a in notes.above
    ]


def provenance_line(provenance: CounterProvenance | None) -> str | None:
    """'168 of 1,118 kernel launches measured by ncu, 950 copied from identical launches', where any were copied."""
    if provenance is None:
        return None
    rest = provenance.launches - provenance.measured - provenance.copied
    return (
        f"{provenance.measured:,} of {provenance.launches:,} kernel launches measured by ncu, {provenance.copied:,} "
        "copied from identical launches (same kernel, grid, block, op and op inputs; column counters_from)"
        + (f", {rest:,} with no measured counters" if rest > 0 else "")
    )


def work_sources_line(shares: dict[str, float]) -> str | None:
    """'compute-kernel time by where its work came from: formula 53.8%, inductor 37.5%, unknown 8.7%'."""
    if not shares:
        return None
    listed = ", ".join(f"{source} {100.0 * share:.1f}%" for source, share in shares.items())
    return f"compute-kernel time by where its work came from (column work_source): {listed}"


def compiled_line(mode: str | None) -> str | None:
    """What summary says of a compiled step (profile --compile)."""
    if mode is None:
        return None
    return f"the model ran torch.compile'd (mode {mode}); the loss and the optimizer eager"
