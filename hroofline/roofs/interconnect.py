"""The interconnect catalog (``metrics/interconnect.toml``): each GPU's links to other GPUs and its PCIe, and the
network per GPU of the common multi-node systems. Bandwidths are per direction (byte/s), as nccl-tests' busbw."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from hroofline.errors import UsageError, did_you_mean
from hroofline.roofs.metricset import metrics_dir

FABRIC_NAMES = {"nvlink": "NVLink", "infinity_fabric": "Infinity Fabric"}


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's interconnect: its GPU-to-GPU fabric (links x per-link rate) and its PCIe (lanes x per-lane rate)."""

    gpu: str
    fabric: str | None  # nvlink, infinity_fabric; None for a PCIe card
    generation: str | None
    links: int | None
    fabric_bandwidth: float | None  # links x per-link rate, per direction
    pcie: str | None  # the PCIe generation ("4.0")
    lanes: int | None
    pcie_bandwidth: float | None  # lanes x per-lane rate, per direction

    @property
    def fabric_label(self) -> str | None:
        if self.fabric is None:
            return None
        return f"{FABRIC_NAMES.get(self.fabric, self.fabric)} {self.generation} x{self.links}"

    @property
    def pcie_label(self) -> str | None:
        return f"PCIe {self.pcie} x{self.lanes}" if self.pcie else None


@dataclass(frozen=True)
class System:
    """A multi-node system: GPUs per node and the network bandwidth each GPU has to other nodes."""

    name: str
    gpus_per_node: int
    network_bandwidth: float  # NIC line rate / 8 / GPUs sharing it, per direction (byte/s)
    nic_bits_per_s: float
    gpus_per_nic: int
    default_for: tuple[str, ...]
    source: str


@cache
def _catalog() -> dict[str, Any]:
    return tomllib.loads((metrics_dir() / "interconnect.toml").read_text())


def gpu_links(gpu: str) -> GpuLinks | None:
    """The interconnect of catalog GPU ``gpu`` (a metrics/gpus.toml name), or None where the catalog has none."""
    data = _catalog()
    entry = data.get("gpu", {}).get(gpu)
    if entry is None:
        return None
    fabric, generation, links = entry.get("fabric"), entry.get("generation"), entry.get("links")
    per_link = data[fabric][str(generation)] if fabric else None
    pcie, lanes = entry.get("pcie"), entry.get("lanes")
    per_lane = data["pcie"][str(pcie)] if pcie else None
    return GpuLinks(
        gpu=gpu,
        fabric=fabric,
        generation=str(generation) if generation is not None else None,
        links=int(links) if links is not None else None,
        fabric_bandwidth=float(per_link) * int(links) if per_link is not None and links else None,
        pcie=str(pcie) if pcie else None,
        lanes=int(lanes) if lanes else None,
        pcie_bandwidth=float(per_lane) * int(lanes) if per_lane is not None and lanes else None,
    )


@cache
def load_systems() -> dict[str, System]:
    systems = {}
    for name, entry in _catalog().get("systems", {}).items():
        rate, sharing = float(entry["nic_bits_per_s"]), int(entry["gpus_per_nic"])
        systems[name] = System(
            name=name,
            gpus_per_node=int(entry["gpus_per_node"]),
            network_bandwidth=rate / 8 / sharing,
            nic_bits_per_s=rate,
            gpus_per_nic=sharing,
            default_for=tuple(entry.get("for", ())),
            source=f"metrics/interconnect.toml [systems.{name}]",
        )
    return systems


def default_system(gpu: str) -> System | None:
    """The system a GPU's multi-node collectives are judged in unless another is named (DGX H100 for an H100)."""
    return next((s for s in load_systems().values() if gpu in s.default_for), None)


def resolve_system(name: str) -> System:
    systems = load_systems()
    if name in systems:
        return systems[name]
    raise UsageError(f"unknown system {name!r}", did_you_mean(name, list(systems), "systems"))
