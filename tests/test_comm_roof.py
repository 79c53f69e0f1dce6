"""Collectives against their link roof: algbw and busbw per launch (NCCL's conventions), the roof each is judged by
(the node's NVLink, or the network once the group spans nodes), and advise naming the slow ones.

The trace is rank 0 of a 2-rank DDP job on A100-PG509-200 (A100 SXM4 40GB) with NCCL 2.17.1, from
facebookresearch/HolisticTraceAnalysis tests/data/nccl_parser_config/nccl_data.json.gz (MIT; ../shared/fixtures/
kineto/PROVENANCE.md): 21 NCCL kernels, each with the collective's `Collective name`, `In msg nelems`,
`Out msg nelems`, `Group size` and `dtype`, and deviceProperties listing 8 GPUs.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hroofline.analyze.advice.base import advice_context, load_rules
from hroofline.analyze.advice.slow_collectives import detect
from hroofline.analyze.communication import NETWORK, NODE, collective_kinds, link_roofs
from hroofline.analyze.kernels import KernelQuery
from hroofline.analyze.utilization import utilization_table
from hroofline.api import load
from hroofline.model.run import Run, conform_launches
from hroofline.roofs.catalog import load_gpu_names
from hroofline.roofs.interconnect import gpu_links, load_systems
from tests.conftest import REPO, SHARED, need

TRACE = "kineto_a100_ddp2_nccl_rank0.json.gz"
# A100 SXM4: NVLink 3, 12 links of 25 GB/s each way: the datasheet's 600 GB/s both directions, halved
A100_NVLINK = 12 * 25e9
# DGX A100: one 200 Gb/s HDR InfiniBand ConnectX-6 per GPU (DGX A100 User Guide), in bytes per second
DGX_A100_NETWORK = 200e9 / 8
ELEMENT_BYTES = {"Float": 4, "Long": 8}  # the dtypes this trace's collectives carry
JUDGED_FROM_S = 20e-6  # metrics/advice.toml [slow_collectives] min_time_at_roof_s
SLOW_BELOW_PCT = 30.0


@cache
def nccl_events() -> tuple[dict[str, Any], ...]:
    path = need(SHARED / "fixtures" / "kineto" / TRACE)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return tuple(e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel"))


def expected(event: dict[str, Any]) -> tuple[float, float, float]:
    """Independently, from the raw args: (time s, algbw, busbw) as nccl-tests defines them (doc/PERFORMANCE.md)."""
    args = event["args"]
    n = args["Group size"]
    size = max(args["In msg nelems"], args["Out msg nelems"]) * ELEMENT_BYTES[args["dtype"]]
    factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0}[args["Collective name"]]
    seconds = event["dur"] * 1e-6
    return seconds, size / seconds, factor * size / seconds


@pytest.fixture(scope="module")
def store(kineto_store: Path) -> Path:
    """The session's store of Kineto traces (tests/conftest.py): run ddp is TRACE imported as it is; read only."""
    return kineto_store


def test_each_launch_has_the_algbw_and_busbw_of_its_recorded_sizes(store: Path) -> None:
    table = utilization_table(load("ddp", store), KernelQuery())  # what `hroofline kernels` prints, per launch
    rows = table[table["category"] == "communication"].to_dict("records")
    assert len(rows) == len(nccl_events()) == 21
    ours = sorted((r["time_s"], r["algbw_byte_per_s"], r["busbw_byte_per_s"]) for r in rows)
    theirs = sorted(expected(e) for e in nccl_events())
    for mine, independent in zip(ours, theirs, strict=True):
        assert mine == pytest.approx(independent, rel=1e-9)
    # a 2-rank all-reduce moves S over the links (2 (n - 1) / n = 1): busbw equals algbw, and is 2.2% of NVLink
    allreduce = [r for r in rows if "AllReduce" in r["kernel"]]
    assert all(r["busbw_byte_per_s"] == pytest.approx(r["algbw_byte_per_s"], rel=1e-12) for r in allreduce)
    for row in rows:
        assert row["link_pct"] == pytest.approx(100 * row["busbw_byte_per_s"] / A100_NVLINK, rel=1e-9)


def test_top_sums_a_kernel_name_and_summarises_each_collective(cli, store: Path) -> None:
    allreduce = [expected(e) for e in nccl_events() if "AllReduce" in e["name"]]
    seconds = sum(a[0] for a in allreduce)
    bus = sum(a[2] * a[0] for a in allreduce)  # busbw x time: each launch's bus bytes
    table = json.loads(cli("top", "ddp", "--format", "json", "--store", store).out)
    row = next(r for r in table if r["kernel"].startswith("ncclKernel_AllReduce"))
    assert row["busbw_byte_per_s"] == pytest.approx(bus / seconds, rel=1e-9)
    assert row["link_pct"] == pytest.approx(100 * bus / A100_NVLINK / seconds, rel=1e-9)
    assert row["link_pct"] == pytest.approx(2.19, abs=0.01)
    run = load("ddp", store)
    kinds = {k.collective: k for k in collective_kinds(run, link_roofs(run))}
    assert set(kinds) == {"allreduce", "broadcast"}
    assert kinds["allreduce"].launches == len(allreduce) == 15
    assert kinds["allreduce"].busbw_byte_per_s == pytest.approx(bus / seconds, rel=1e-9)
    assert kinds["allreduce"].roof_byte_per_s == A100_NVLINK
    summary = json.loads(cli("summary", "ddp", "--format", "json", "--store", store).out)
    allreduce_kind = next(k for k in summary["collectives"] if k["collective"] == "allreduce")
    assert allreduce_kind["busbw_byte_per_s"] == pytest.approx(bus / seconds, rel=1e-9)
    assert allreduce_kind["link"] == "NVLink 3 x12" and allreduce_kind["roof"] == "node"
    text = cli("top", "ddp", "--store", store).out
    assert "allreduce (within a node): 15 launches" in text
    assert "NVLink 3 x12 300 GB/s" in text


def test_each_collective_kind_carries_its_mean_message_size(cli, store: Path) -> None:
    """S per launch from the raw args (max of in and out elements x the dtype's bytes), averaged by hand: the
    kind carries it, and ``top`` prints it as is (docs/guides/traces.md's 20.4 MB and 106 kB)."""
    run = load("ddp", store)
    kinds = {k.collective: k for k in collective_kinds(run, link_roofs(run))}
    text = cli("top", "ddp", "--store", store).out
    for name, shown in (("allreduce", "20.4 MB"), ("broadcast", "106 kB")):
        args = [e["args"] for e in nccl_events() if e["args"]["Collective name"] == name]
        sizes = [max(a["In msg nelems"], a["Out msg nelems"]) * ELEMENT_BYTES[a["dtype"]] for a in args]
        assert kinds[name].bytes_per_message == pytest.approx(sum(sizes) / len(sizes), rel=1e-12)
        assert f"{name} (within a node): {len(sizes)} launches" in text and f"{shown} per message" in text


def test_the_roof_is_the_nodes_link_until_the_group_spans_nodes(store: Path) -> None:
    run = load("ddp", store)
    roofs = link_roofs(run)
    assert roofs.node == A100_NVLINK and roofs.node_link == "NVLink 3 x12"
    assert roofs.gpus_per_node == 8 and roofs.gpus_per_node_from == "trace"  # deviceProperties lists 8 GPUs
    assert roofs.roof_of(2) == (NODE, A100_NVLINK)  # this job: 2 ranks in one node
    assert roofs.roof_of(8) == (NODE, A100_NVLINK)
    assert roofs.roof_of(16) == (NETWORK, DGX_A100_NETWORK)  # two DGX A100s: each GPU's 200 Gb/s NIC
    spanning = run.launches.assign(group_size=run.launches["group_size"] * 8)  # the groups over 16 ranks
    kinds = collective_kinds(Run(meta=run.meta, launches=spanning), roofs)
    assert {k.roof for k in kinds} == {NETWORK}
    allreduce = next(k for k in kinds if k.collective == "allreduce")
    # judged at the NIC's 25 GB/s (the bus bytes are the import's, of 2 ranks: only the roof changed here)
    assert allreduce.roof_byte_per_s == DGX_A100_NETWORK and allreduce.link == "dgx-a100"
    assert allreduce.link_pct == pytest.approx(100 * allreduce.busbw_byte_per_s / DGX_A100_NETWORK, rel=1e-12)


def test_advice_names_the_big_slow_all_reduces_and_not_the_small_broadcasts(store: Path) -> None:
    rule = load_rules()["slow_collectives"]
    assert rule.settings["min_time_at_roof_s"] == JUDGED_FROM_S
    assert rule.settings["max_link_pct"] == SLOW_BELOW_PCT
    judged = []
    for event in nccl_events():
        seconds, _, busbw = expected(event)
        bus = busbw * seconds
        if bus / A100_NVLINK >= JUDGED_FROM_S and 100 * bus / A100_NVLINK / seconds < SLOW_BELOW_PCT:
            judged.append(event)
    assert {e["args"]["Collective name"] for e in judged} == {"allreduce"}  # the broadcasts: 424 B and 212 kB
    finding = detect(advice_context(load("ddp", store)), rule)
    assert finding is not None
    assert finding.evidence.launches == len(judged) == 15
    assert finding.evidence.time_s == pytest.approx(sum(e["dur"] for e in judged) * 1e-6, rel=1e-12)
    [collective] = finding.detail["collectives"]
    assert collective["collective"] == "allreduce" and collective["protocols"] == ["RING_LL"]
    assert collective["smallest_message_bytes"] == 2049000 * 4
    # a threshold above every launch's time at roof: nothing is big enough to judge, so nothing fires
    biggest = max(expected(e)[2] * expected(e)[0] for e in nccl_events()) / A100_NVLINK
    strict = type(rule)(rule.key, rule.title, rule.applies_to, rule.min_step_share, {**rule.settings})
    strict.settings["min_time_at_roof_s"] = biggest * 1.01
    assert detect(advice_context(load("ddp", store)), strict) is None


def test_a_run_imported_before_message_sizes_were_kept_keeps_its_busbw(store: Path) -> None:
    """An older file has bus bytes but no collective, message size or group (read as null): busbw and the node's
    roof still judge it; algbw is unknown, not zero."""
    run = load("ddp", store)
    unknown = {"collective": pd.NA, "bytes_message": float("nan"), "group_size": pd.NA}
    older = Run(meta=run.meta, launches=conform_launches(run.launches.assign(**unknown)))
    [kind] = collective_kinds(older, link_roofs(older))
    allreduce = [expected(e) for e in nccl_events() if "AllReduce" in e["name"]]
    assert kind.algbw_byte_per_s is None and kind.launches == 21
    assert kind.roof_byte_per_s == A100_NVLINK
    finding = detect(advice_context(older), load_rules()["slow_collectives"])
    assert finding is not None and finding.evidence.launches == len(allreduce) == 15


def test_advise_says_it_in_words(cli, store: Path) -> None:
    text = cli("advise", "ddp", "--store", store).out
    assert "collectives far below their link roof" in text
    assert "allreduce (within a node): 15 launches of 8.20 MB or more" in text
    assert "NCCL ran RING_LL" in text


def test_link_bandwidths_are_links_times_the_per_link_rate() -> None:
    """Every [NAME.link] of metrics/gpus.toml is its fabric's links x per-link rate (metrics/interconnect.toml),
    and the PCIe roof is lanes x transfer rate x 128b/130b / 8 from the PCI-SIG rates."""
    data = tomllib.loads((REPO / "metrics" / "interconnect.toml").read_text())
    for name, gpu in load_gpu_names().items():
        links = gpu_links(name)
        assert links is not None, name
        if gpu.link_bandwidth is not None:
            assert links.fabric_bandwidth == pytest.approx(gpu.link_bandwidth, rel=1e-12), name
        else:
            assert links.fabric is None, name  # a PCIe card: judged at PCIe
    for generation, transfers in (("3.0", 8e9), ("4.0", 16e9), ("5.0", 32e9)):
        assert data["pcie"][generation] == pytest.approx(transfers * 128 / 130 / 8, rel=1e-6)
    assert gpu_links("a100-80gb-pcie").pcie_bandwidth == pytest.approx(31.5e9, rel=1e-3)  # "64 GB/s" both ways
    assert gpu_links("h100-sxm").fabric_bandwidth == 450e9  # 900 GB/s both directions
    assert load_systems()["dgx-h100"].network_bandwidth == 400e9 / 8  # one 400 Gb/s ConnectX-7 per GPU


# PCIe 4.0 x16: 16 GT/s per lane, 128b/130b encoding, 16 lanes, in bytes per second each way (PCI-SIG)
PCIE4_X16 = 16e9 * 128 / 130 / 8 * 16


def _summary_by_rank(run: Run, capsys: pytest.CaptureFixture[str]) -> str:
    from hroofline.cli.query_cmds import _show_grouped_summary

    assert _show_grouped_summary(run, "rank", "table") == 0
    return capsys.readouterr().out


def _rates(run: Run) -> dict[str, float]:
    """Per communication kernel name (as the table shortens it): its bus bytes over its time, from the launches."""
    timed = run.launches[(run.launches["category"] == "communication") & run.launches["bytes_link"].notna()]
    sums = timed.groupby("kernel")[["bytes_link", "time_s"]].sum()
    return {str(k).split("(")[0]: row["bytes_link"] / row["time_s"] for k, row in sums.iterrows()}


def _percent_column(text: str) -> dict[str, float]:
    """The printed communication table's roof % per kernel name (one rank, one phase per kernel here)."""
    table = text.split("communication kernels", 1)[1].splitlines()[2:]
    return {line.split()[2]: float(line.split()[-1].rstrip("%")) for line in table if line.strip()}


def test_summary_by_rank_judges_a_pcie_card_at_its_pcie_as_top_does(store: Path, capsys) -> None:
    """The DDP trace judged as an A100 PCIe card (no NVLink): summary --by rank's roof is the card's PCIe 4.0 x16, as
    collective_kinds (top, advise) judge it; main printed 'no link roof known'. The bus bandwidth column has its
    unit (B/s)."""
    run = load("ddp", store)
    pcie = Run(meta=dataclasses.replace(run.meta, gpu="a100-80gb-pcie"), launches=run.launches)
    text = _summary_by_rank(pcie, capsys)
    assert "no link roof known" not in text and "within a node PCIe 4.0 x16 31.5 GB/s" in text
    shown = _percent_column(text)
    for kernel, rate in _rates(pcie).items():
        assert shown[kernel] == pytest.approx(100 * rate / PCIE4_X16, abs=0.05), kernel
    assert shown["ncclKernel_AllReduce_RING_LL_Sum_float"] == pytest.approx(20.8, abs=0.05)
    header = text.split("communication kernels", 1)[1].splitlines()[1].split()
    assert header[-3:] == ["bus_byte_per_s", "roof", "roof_pct"]
    assert "6.56 GB/s" in text  # the all-reduces' 307 MB in 46.8 ms, printed with its unit (main: "6.56 G")
    kinds = {k.collective: k for k in collective_kinds(pcie, link_roofs(pcie))}
    assert kinds["allreduce"].roof_byte_per_s == pytest.approx(PCIE4_X16, rel=1e-6)  # metrics/ keeps 8 digits


def test_summary_by_rank_judges_a_group_spanning_nodes_at_the_network(store: Path, capsys) -> None:
    """The same collectives over 16 ranks (two 8-GPU nodes): the roof is each GPU's NIC (DGX A100: 25 GB/s), not
    NVLink's 300 GB/s; main judged them at NVLink."""
    run = load("ddp", store)
    spanning = Run(meta=run.meta, launches=run.launches.assign(group_size=run.launches["group_size"] * 8))
    text = _summary_by_rank(spanning, capsys)
    shown = _percent_column(text)
    rows = [line.split() for line in text.split("communication kernels", 1)[1].splitlines()[2:] if line.strip()]
    assert {row[-2] for row in rows} == {NETWORK}
    for kernel, rate in _rates(spanning).items():
        assert shown[kernel] == pytest.approx(100 * rate / DGX_A100_NETWORK, abs=0.05), kernel
