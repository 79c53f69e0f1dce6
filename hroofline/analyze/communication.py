"""Collectives against their link roof: algorithm and bus bandwidth per launch, and the roof each is judged by.

NCCL's conventions (NVIDIA/nccl-tests, doc/PERFORMANCE.md), for a collective of message size S bytes over n ranks
that took t seconds (:mod:`hroofline.importers.collectives` records S, n and the bus bytes at import):

    algorithm bandwidth   algbw = S / t
    bus bandwidth         busbw = bus bytes / t = f(n) x algbw, with f(n) = 2 (n - 1) / n for all_reduce,
                          (n - 1) / n for all_gather, reduce_scatter and all_to_all, 1 for broadcast, reduce,
                          send and recv

busbw is what one rank moves over its links per second, whatever n: it compares with the link's bandwidth per
direction. The roof is the GPU's GPU-to-GPU fabric (NVLink, Infinity Fabric: metrics/gpus.toml [NAME.link]) or,
on a card without one, its PCIe, while the group fits in one node; the network bandwidth per GPU
(metrics/interconnect.toml [systems]) once the group is larger than a node (n > GPUs per node). GPUs per node
come from the trace (the GPUs its deviceProperties lists, where more than one) or else from the system.

A group of launches (a kernel name in a phase) has the sums: busbw = sum of bus bytes / sum of time, link_pct =
100 x sum of (bus bytes / roof) / sum of time, over the launches that have bus bytes and a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hroofline.analyze.kernels import LINK_COLUMNS
from hroofline.model.run import GPUS_ON_HOST_SETTING, Run
from hroofline.roofs.catalog import GpuName
from hroofline.roofs.ceilings import run_gpu
from hroofline.roofs.interconnect import System, default_system, gpu_links, resolve_system

__all__ = ["LINK_COLUMNS", "collective_kinds", "communication_rows", "link_roofs", "link_terms", "with_link_columns"]
# Per launch, summed per kernel name or layer (kernel_table's ``extra``) and turned into LINK_COLUMNS.
LINK_TERMS: tuple[str, ...] = (
    "link_timed_s",
    "link_bus_bytes",
    "link_message_bytes",
    "link_time_at_roof_s",
    "link_unpriced",  # launches with bus bytes and a time but no roof known
)
NODE, NETWORK = "node", "network"  # within one node (NVLink, Infinity Fabric or PCIe), or across nodes


@dataclass(frozen=True)
class LinkRoofs:
    """The roofs a run's collectives are judged against, per direction (byte/s), and where each came from."""

    node: float | None  # within a node: the GPU-to-GPU fabric, else PCIe
    node_link: str | None  # "NVLink 3 x12", "PCIe 4.0 x16"
    network: float | None  # per GPU, across nodes
    system: System | None
    gpus_per_node: int | None
    gpus_per_node_from: str  # "trace" (its deviceProperties), "system", or "unknown"

    def roof_of(self, group_size: int | None) -> tuple[str, float | None]:
        """The roof of a collective over ``group_size`` ranks: the node's while the group fits in one node (or
        where GPUs per node are unknown), the network's once it spans nodes."""
        if group_size is not None and self.gpus_per_node is not None and group_size > self.gpus_per_node:
            return NETWORK, self.network
        return NODE, self.node


def link_roofs(run: Run, system: str | None = None) -> LinkRoofs:
    """The link roofs of ``run``'s GPU; ``system`` names the multi-node system (default: the GPU's in
    metrics/interconnect.toml)."""
    gpu = run_gpu(run.meta)
    chosen = resolve_system(system) if system else (default_system(gpu.name) if gpu else None)
    node, label = _node_roof(gpu)
    seen = _gpus_on_host(run)
    if seen is not None and seen > 1:
        per_node, origin = seen, "trace"
    elif chosen is not None:
        per_node, origin = chosen.gpus_per_node, "system"
    else:
        per_node, origin = None, "unknown"
    network = chosen.network_bandwidth if chosen else None
    return LinkRoofs(node, label, network, chosen, per_node, origin)


def _node_roof(gpu: GpuName | None) -> tuple[float | None, str | None]:
    if gpu is None:
        return None, None
    links = gpu_links(gpu.name)
    if gpu.link_bandwidth:
        return gpu.link_bandwidth, links.fabric_label if links else "GPU-to-GPU link"
    if links is not None and links.pcie_bandwidth:
        return links.pcie_bandwidth, links.pcie_label
    return None, None


def _gpus_on_host(run: Run) -> int | None:
    counts = [source.settings.get(GPUS_ON_HOST_SETTING) for source in run.meta.sources]
    known = [int(c) for c in counts if c and str(c).isdigit()]
    return max(known) if known else None


def launch_roofs(launches: pd.DataFrame, roofs: LinkRoofs) -> pd.DataFrame:
    """Per communication launch: which roof (node or network) and its bandwidth; null for other launches."""
    communication = launches["category"] == "communication"
    groups = launches["group_size"]
    kinds = pd.Series(pd.NA, index=launches.index, dtype="string")
    bandwidth = pd.Series(np.nan, index=launches.index, dtype="float64")
    for size in groups[communication].astype("object").unique():
        kind, roof = roofs.roof_of(None if pd.isna(size) else int(size))
        chosen = communication & (groups.isna() if pd.isna(size) else (groups == size).fillna(False))
        kinds[chosen] = kind
        bandwidth[chosen] = roof if roof is not None else np.nan
    return pd.DataFrame({"link_roof": kinds, "link_roof_byte_per_s": bandwidth}, index=launches.index)


def link_terms(run: Run, roofs: LinkRoofs) -> pd.DataFrame:
    """Per launch (indexed as the run's), the terms LINK_COLUMNS are made of; zero where a launch has no bus bytes
    or no time, so a kernel group sums only the launches that have them."""
    launches = run.launches
    timed = launches["bytes_link"].notna() & launches["time_s"].notna() & (launches["time_s"] > 0)
    roof = launch_roofs(launches, roofs)["link_roof_byte_per_s"]
    at_roof = (launches["bytes_link"] / roof).where(timed)
    return pd.DataFrame(
        {
            "link_timed_s": launches["time_s"].where(timed),
            "link_bus_bytes": launches["bytes_link"].where(timed),
            "link_message_bytes": launches["bytes_message"].where(timed),
            "link_time_at_roof_s": at_roof,
            "link_unpriced": (timed & roof.isna()).astype("float64").where(timed),
        },
        index=launches.index,
    )


def with_link_columns(table: pd.DataFrame) -> pd.DataFrame:
    """A table of summed LINK_TERMS (per launch or group) with busbw, algbw and % of link roof; the terms dropped.
    A group's % of roof is given only where every timed launch of it has a roof."""
    out = table.copy()
    seconds = out["link_timed_s"].where(out["link_timed_s"] > 0)
    out["busbw_byte_per_s"] = out["link_bus_bytes"] / seconds
    out["algbw_byte_per_s"] = out["link_message_bytes"] / seconds
    out["link_pct"] = (100.0 * out["link_time_at_roof_s"] / seconds).where(out["link_unpriced"] == 0)
    return out.drop(columns=[c for c in LINK_TERMS if c in out.columns])


@dataclass(frozen=True)
class CollectiveKind:
    """One collective (as PyTorch names it) on one roof: its launches, sizes, bandwidths and % of the roof."""

    collective: str
    roof: str  # node or network
    link: str | None  # what the roof is: "NVLink 3 x12", "PCIe 4.0 x16", or the system whose network it is
    launches: int
    time_s: float
    message_bytes: float | None
    bus_bytes: float
    algbw_byte_per_s: float | None
    busbw_byte_per_s: float
    roof_byte_per_s: float | None
    link_pct: float | None

    @property
    def bytes_per_message(self) -> float | None:
        """The mean message size S over the launches (byte); unknown where a launch's size is."""
        return self.message_bytes / self.launches if self.message_bytes is not None and self.launches else None


def collective_kinds(run: Run, roofs: LinkRoofs) -> list[CollectiveKind]:
    """Per collective and roof: the launches with recorded sizes and a time, summed (busbw = bus bytes / time);
    most time first."""
    launches = run.launches
    timed = launches["bytes_link"].notna() & launches["time_s"].notna() & (launches["time_s"] > 0)
    rows = launches[timed].join(launch_roofs(launches[timed], roofs))
    kinds = []
    for (name, roof), group in rows.groupby(["collective", "link_roof"], sort=False, observed=True, dropna=False):
        seconds = float(group["time_s"].sum())
        bandwidth = group["link_roof_byte_per_s"]
        at_roof = float((group["bytes_link"] / bandwidth).sum()) if bandwidth.notna().all() else None
        moved = float(group["bytes_link"].sum())
        # unknown for a run imported before message sizes were kept (its bus bytes are known)
        message = float(group["bytes_message"].sum()) if group["bytes_message"].notna().all() else None
        kinds.append(
            CollectiveKind(
                collective=str(name) if not pd.isna(name) else "unknown",
                roof=str(roof),
                link=_link_label(roofs, str(roof)),
                launches=int(group["launches"].sum()),
                time_s=seconds,
                message_bytes=message,
                bus_bytes=moved,
                algbw_byte_per_s=message / seconds if message is not None else None,
                busbw_byte_per_s=moved / seconds,
                roof_byte_per_s=float(bandwidth.iloc[0]) if bandwidth.nunique() == 1 else None,
                link_pct=100.0 * at_roof / seconds if at_roof is not None else None,
            )
        )
    return sorted(kinds, key=lambda k: -k.time_s)


def _link_label(roofs: LinkRoofs, roof: str) -> str | None:
    if roof == NETWORK:
        return roofs.system.name if roofs.system else None
    return roofs.node_link


@dataclass(frozen=True)
class CommunicationRow:
    """One communication kernel name of one rank in one phase, on one roof: its bus bandwidth against that roof."""

    rank: int | None
    phase: str
    kernel: str
    launches: int
    time_s: float
    bytes_link: float | None
    bus_byte_per_s: float | None  # bytes_link / time_s, of the launches that have bytes
    roof: str | None  # node (within a node: NVLink, Infinity Fabric or PCIe) or network (the group spans nodes)
    roof_byte_per_s: float | None
    roof_pct: float | None


def communication_rows(run: Run, roofs: LinkRoofs) -> list[CommunicationRow]:
    """Per rank, phase, communication kernel name and roof: time, bus bytes and bus bandwidth (nccl-tests' busbw),
    against the roof of each launch's group size (:func:`link_roofs`, as ``top`` and ``advise`` judge them)."""
    launches = run.launches[run.launches["category"] == "communication"]
    launches = launches.join(launch_roofs(launches, roofs))
    rows = []
    keys = ["rank", "phase", "kernel", "link_roof"]
    for (rank, phase, kernel, roof), group in launches.groupby(keys, sort=True, observed=True, dropna=False):
        with_bytes = group[group["bytes_link"].notna()]
        moved = float(with_bytes["bytes_link"].sum()) if len(with_bytes) else None
        seconds = float(with_bytes["time_s"].sum()) if len(with_bytes) else 0.0
        rate = moved / seconds if moved is not None and seconds > 0 else None
        bandwidth = group["link_roof_byte_per_s"].iloc[0]  # one per roof: the node's or the network's
        roof_byte_per_s = None if pd.isna(bandwidth) else float(bandwidth)
        rows.append(
            CommunicationRow(
                rank=None if pd.isna(rank) else int(rank),
                phase=str(phase),
                kernel=str(kernel),
                launches=int(group["launches"].sum()),
                time_s=float(group["time_s"].sum()),
                bytes_link=moved,
                bus_byte_per_s=rate,
                roof=None if pd.isna(roof) else str(roof),
                roof_byte_per_s=roof_byte_per_s,
                roof_pct=100.0 * rate / roof_byte_per_s if rate is not None and roof_byte_per_s else None,
            )
        )
    return sorted(rows, key=lambda r: -r.time_s)
