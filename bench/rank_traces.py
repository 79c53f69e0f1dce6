"""Synthetic ranks from a real multi-rank trace: for ``bench/many_ranks.py`` and the tests of the rank import.

The base is rank 0 of a real 2-GPU DDP training job (``../shared/fixtures/kineto/kineto_a100_ddp2_nccl_rank0.json.gz``,
from facebookresearch/HolisticTraceAnalysis, MIT; PROVENANCE.md there) cut to one profiler step to keep each rank
small: the CPU events inside ``ProfilerStep#5``, the GPU activities their runtime calls launched (matched by
correlation id) and the flow events between them. Rank ``r`` of ``N`` is a copy with ``distributedInfo`` saying
rank ``r`` of ``N``, every GPU activity's duration times ``1 + u`` (``u`` uniform in ±``jitter``, seeded by the
rank), and on the straggler rank every compute kernel (not NCCL, not a copy or set) stretched by ``stretch``.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

BASE_TRACE = "kineto_a100_ddp2_nccl_rank0.json.gz"
BASE_STEP = "ProfilerStep#5"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def one_step(document: dict[str, Any], step: str = BASE_STEP, keep_every: int = 1) -> dict[str, Any]:
    """The trace cut to one profiler step: CPU events inside it, the GPU activities they launched, their flows.
    With ``keep_every`` k > 1, only every k-th top-level CPU op of each thread is kept, with the ops and runtime
    calls inside it: a thinner step with the same phases (its ranges are kept whole)."""
    events = document["traceEvents"]
    marker = next(e for e in events if e.get("name") == step and e.get("ph") == "X")
    start, end = marker["ts"], marker["ts"] + marker["dur"]
    inside = [e for e in events if e.get("ph") == "X" and start <= e.get("ts", -1) <= end]
    ranges = [e for e in inside if e.get("cat") == "user_annotation"]
    calls = [e for e in inside if e.get("cat") in ("cpu_op", "cuda_runtime")]
    kept_cpu = ranges + _thinned(calls, keep_every, ranges)
    launched = {e["args"]["correlation"] for e in kept_cpu if e.get("cat") == "cuda_runtime" and "args" in e}
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES and e.get("args", {}).get("correlation") in launched]
    flows = [e for e in events if e.get("cat") == "ac2g" and e.get("id") in launched]
    flows += [e for e in events if e.get("cat") == "fwdbwd" and start <= e["ts"] <= end and keep_every == 1]
    metadata = [e for e in events if e.get("ph") == "M"]
    rest = {k: v for k, v in document.items() if k != "traceEvents"}
    return {**rest, "traceEvents": metadata + kept_cpu + gpu + flows}


def _thinned(calls: list[dict[str, Any]], keep_every: int, ranges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``keep_every``-th top-level op of each thread with what lies inside it, and every top-level op that
    holds a collective (``nccl``, ``c10d``) or lies in the optimizer's range (a handful: kept, so that each phase
    and the communication stay); runtime calls outside any op kept."""
    if keep_every == 1:
        return calls
    optimizer = [(r["ts"], r["ts"] + r["dur"]) for r in ranges if "optimizer" in r.get("name", "").lower()]
    groups: list[list[dict[str, Any]]] = []
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for event in calls:
        by_thread.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        top_end = float("-inf")
        for event in thread:
            if event["ts"] > top_end or not groups:  # a new top-level event (an op, or a call outside any)
                groups.append([])
                top_end = event["ts"] + event.get("dur", 0) if event.get("cat") == "cpu_op" else float("-inf")
            groups[-1].append(event)
    kept = []
    for index, group in enumerate(groups):
        top = group[0]
        collective = any(w in e.get("name", "").lower() for e in group for w in ("nccl", "c10d"))
        in_optimizer = any(a <= top["ts"] <= b for a, b in optimizer)
        if top.get("cat") != "cpu_op" or index % keep_every == 0 or collective or in_optimizer:
            kept += group
    return kept


def base_step(shared: Path, keep_every: int = 1) -> dict[str, Any]:
    with gzip.open(shared / "fixtures" / "kineto" / BASE_TRACE, "rt") as handle:
        return one_step(json.load(handle), keep_every=keep_every)


def is_compute_kernel(event: dict[str, Any]) -> bool:
    return event.get("cat") == "kernel" and "nccl" not in str(event.get("name", "")).lower()


class RankTemplate:
    """``base`` as JSON text with a hole for every GPU duration and for the rank, so that a rank's copy is one
    join of strings rather than a deep copy and a dump of thousands of events."""

    def __init__(self, base: dict[str, Any]) -> None:
        document = copy.deepcopy(base)
        self.durations: list[float] = []
        self.compute: list[bool] = []
        for event in document["traceEvents"]:
            if event.get("cat") in GPU_CATEGORIES:
                self.durations.append(float(event["dur"]))
                event["dur"] = f"@DUR{len(self.durations) - 1}@"
                self.compute.append(is_compute_kernel(event))
        document["distributedInfo"] = {**document.get("distributedInfo", {}), "rank": "@RANK@", "world_size": "@RANKS@"}
        text = json.dumps(document, separators=(",", ":"))
        self.pieces = re.split(r'"@(DUR\d+|RANK|RANKS)@"', text)

    def text(self, rank: int, ranks: int, straggler: int, jitter: float, stretch: float) -> str:
        """Rank ``rank`` of ``ranks``: its GPU durations jittered (and its compute stretched on the straggler)."""
        noise = random.Random(rank)
        durations = []
        for duration, compute in zip(self.durations, self.compute, strict=True):
            factor = 1.0 + noise.uniform(-jitter, jitter)
            if rank == straggler and compute:
                factor *= stretch
            durations.append(round(duration * factor, 3))  # Kineto's resolution: 1 ns
        values = {"RANK": str(rank), "RANKS": str(ranks)}
        out = list(self.pieces)
        for index in range(1, len(out), 2):
            hole = out[index]
            out[index] = values[hole] if hole in values else repr(durations[int(hole[3:])])
        return "".join(out)


def write_ranks(
    template: RankTemplate,
    folder: Path,
    ranks: range,
    total: int,
    straggler: int,
    jitter: float = 0.02,
    stretch: float = 1.5,
) -> list[Path]:
    """Writes ranks ``ranks`` of ``total`` as ``rank-NNNNN.json.gz`` files into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in ranks:
        path = folder / f"rank-{rank:05d}.json.gz"
        with gzip.open(path, "wt", compresslevel=1) as handle:
            handle.write(template.text(rank, total, straggler, jitter, stretch))
        paths.append(path)
    return paths
