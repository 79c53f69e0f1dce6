"""Collectives in words: per collective kind its bandwidths against the link roof, and the slow ones advise names.
Formatting only: the numbers come from :mod:`hroofline.analyze.communication` and the slow_collectives rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hroofline.analyze.communication import NETWORK, CollectiveKind, LinkRoofs
from hroofline.model.numbers import si


def link_roofs_line(roofs: LinkRoofs) -> str:
    """Which roofs a run's collectives are judged against and why (GPUs per node from the trace or the system)."""
    node = f"{roofs.node_link} {si(roofs.node, 'B/s')}" if roofs.node else "none known"
    if roofs.system is not None:
        network = (
            f"{si(roofs.system.nic_bits_per_s, 'b/s')} NIC per {roofs.system.gpus_per_nic} GPU(s) = "
            f"{si(roofs.system.network_bandwidth, 'B/s')} ({roofs.system.name}, metrics/interconnect.toml)"
        )
    else:
        network = "none known"
    per_node = {
        "trace": f"{roofs.gpus_per_node} GPUs per node (the trace's deviceProperties)",
        "system": f"{roofs.gpus_per_node} GPUs per node (assumed: {roofs.system.name if roofs.system else ''})",
        "unknown": "GPUs per node unknown: every group judged within a node",
    }[roofs.gpus_per_node_from]
    return (
        f"link roofs per direction: within a node {node}; across nodes {network}; {per_node}; "
        "busbw = bus bytes / time (NCCL's convention, docs/guides/traces.md)"
    )


def collective_kind_lines(kinds: Sequence[CollectiveKind]) -> list[str]:
    """One line per collective kind and roof: launches, time, message size, algbw, busbw and % of roof."""
    lines = []
    for kind in kinds:
        where = "across nodes" if kind.roof == NETWORK else "within a node"
        roof = (
            f"{kind.link_pct:.1f}% of {kind.link} {si(kind.roof_byte_per_s or 0, 'B/s')}"
            if kind.link_pct is not None
            else "no roof"
        )
        lines.append(
            f"  {kind.collective} ({where}): {kind.launches} launches, {si(kind.time_s, 's')}, "
            f"{_per_message(kind)}algbw {_rate(kind.algbw_byte_per_s)}, "
            f"busbw {si(kind.busbw_byte_per_s, 'B/s')} = {roof}"
        )
    return lines


def slow_collective_lines(detail: Mapping[str, object]) -> list[str]:
    """advise's slow_collectives finding: per collective its busbw against its roof, and the NCCL protocol run."""
    rows = detail.get("collectives")
    if not isinstance(rows, list):
        return []
    lines = []
    for row in rows:
        protocols = ", ".join(row["protocols"]) if row["protocols"] else "not in the kernel names"
        lines.append(
            f"{row['collective']} ({'across nodes' if row['roof'] == NETWORK else 'within a node'}): "
            f"{row['launches']} launches{_smallest(row['smallest_message_bytes'])}, busbw "
            f"{si(row['busbw_byte_per_s'], 'B/s')} = {row['link_pct']:.1f}% of {si(row['roof_byte_per_s'], 'B/s')}; "
            f"NCCL ran {protocols}"
        )
    floor = detail.get("min_time_at_roof_s")
    if isinstance(floor, float | int):
        lines.append(
            f"judged: launches whose bus bytes take {si(float(floor), 's')} or more at the roof "
            "(smaller ones are latency-bound)"
        )
    return lines


def _smallest(message_bytes: object) -> str:
    return f" of {si(float(message_bytes), 'B')} or more" if isinstance(message_bytes, float) else ""


def _per_message(kind: CollectiveKind) -> str:
    return f"{si(kind.bytes_per_message, 'B')} per message; " if kind.bytes_per_message is not None else ""


def _rate(byte_per_s: float | None) -> str:
    return si(byte_per_s, "B/s") if byte_per_s is not None else "unknown"
