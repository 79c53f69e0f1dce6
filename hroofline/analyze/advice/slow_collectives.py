"""Collectives far below their link roof at messages big enough to be bandwidth-bound.

A collective takes about t = latency + bus bytes / link bandwidth: small messages are latency-bound (nccl-tests'
busbw rises with the size and flattens only at megabytes), so only launches whose bus bytes would take at least
``min_time_at_roof_s`` at the roof are judged; then a latency as long as that still leaves them half the roof,
and one below ``max_link_pct`` of it is slow for another reason (the protocol or algorithm NCCL chose, too few
channels, compute kernels holding the SMs, a slow rank it waits for, a group spanning nodes).
"""

from __future__ import annotations

import re

import pandas as pd

from hroofline.analyze.advice.base import (
    UPPER_BOUND,
    AdviceContext,
    Confirmation,
    Evidence,
    Finding,
    Rule,
)
from hroofline.analyze.communication import launch_roofs, link_roofs
from hroofline.model.names import short_kernel_name
from hroofline.model.run import ordered_phases

_PROTOCOL = re.compile(r"(RING|TREE|NVLS_TREE|NVLS|COLLNET_DIRECT|COLLNET_CHAIN|PAT)_(LL128|LL|SIMPLE)")


def slow_launches(run_launches: pd.DataFrame, roof: pd.Series, rule: Rule) -> pd.Series:
    """Communication launches with bus bytes, a time and a roof, big enough to judge and below the rule's % of roof."""
    time_at_roof = run_launches["bytes_link"] / roof
    big = time_at_roof >= float(rule.settings["min_time_at_roof_s"])
    slow = 100.0 * time_at_roof / run_launches["time_s"] < float(rule.settings["max_link_pct"])
    communication = run_launches["category"] == "communication"
    return (communication & big & slow).fillna(False).astype(bool)


def _judged(context: AdviceContext, rule: Rule) -> tuple[pd.DataFrame, pd.Series]:
    launches = context.run.launches
    roofs = launch_roofs(launches, link_roofs(context.run))
    frame = launches.join(roofs)
    return frame, slow_launches(frame, frame["link_roof_byte_per_s"], rule)


def detect(context: AdviceContext, rule: Rule) -> Finding | None:
    frame, mask = _judged(context, rule)
    if not mask.any():
        return None
    chosen = frame[mask]
    at_roof = chosen["bytes_link"] / chosen["link_roof_byte_per_s"]
    time = float(chosen["time_s"].sum())
    # of the step's GPU time: its kernels' and its communication's (collectives are left out of the kernel time)
    communication = float(frame.loc[frame["category"] == "communication", "time_s"].sum())
    step = context.step_time_s + communication
    if step <= 0 or time / step < rule.min_step_share:
        return None
    per_phase = chosen.groupby("phase", observed=True)["time_s"].sum()
    phase_time = (
        frame[frame["category"].isin(("kernel", "communication"))].groupby("phase", observed=True)["time_s"].sum()
    )
    per_phase = per_phase.reindex(ordered_phases({str(p) for p in per_phase.index}))
    recoverable = float((chosen["time_s"] - at_roof).clip(lower=0).sum())
    names = chosen["kernel"].astype(str).map(short_kernel_name)
    kernels = chosen.groupby(names)["time_s"].sum().sort_values(ascending=False, kind="stable")
    evidence = Evidence(
        launches=int(chosen["launches"].fillna(1).sum()),
        time_s=time,
        step_share=time / step,
        phase_time_s={str(p): float(t) for p, t in per_phase.items() if t > 0},
        phase_share={str(p): float(t) / phase_time[str(p)] for p, t in per_phase.items() if t > 0},
        roof_pct=100.0 * float(at_roof.sum()) / time,
        recoverable_s=recoverable,
        kernels=tuple((str(k), float(t)) for k, t in kernels.iloc[:5].items()),
        layers=(),
    )
    detail = {
        "collectives": _per_collective(chosen, at_roof),
        "min_time_at_roof_s": rule.settings["min_time_at_roof_s"],
    }
    return Finding(
        rule, evidence, recoverable, UPPER_BOUND, rule.text("change"), rule.text("code"), recoverable, detail
    )


def _per_collective(chosen: pd.DataFrame, at_roof: pd.Series) -> list[dict[str, object]]:
    """Per collective and roof: launches, smallest message, busbw and % of the roof (numbers; render says them)."""
    rows = []
    keys = [chosen["collective"].astype("string").fillna("unknown"), chosen["link_roof"]]
    for (name, roof), group in chosen.groupby(keys, observed=True, sort=False):
        seconds = float(group["time_s"].sum())
        rows.append(
            {
                "collective": str(name),
                "roof": str(roof),
                "launches": int(group["launches"].fillna(1).sum()),
                "time_s": seconds,
                "protocols": sorted(set(filter(None, group["kernel"].astype(str).map(nccl_protocol)))),
                # null for a run imported before message sizes were kept (its bus bytes are known)
                "smallest_message_bytes": None
                if group["bytes_message"].isna().all()
                else float(group["bytes_message"].min()),
                "busbw_byte_per_s": float(group["bytes_link"].sum()) / seconds,
                "roof_byte_per_s": float(group["link_roof_byte_per_s"].iloc[0]),
                "link_pct": 100.0 * float(at_roof.loc[group.index].sum()) / seconds,
            }
        )
    return sorted(rows, key=lambda r: -float(str(r["time_s"])))


def nccl_protocol(kernel: str) -> str | None:
    """The algorithm and protocol an NCCL kernel's name says (ncclKernel_AllReduce_RING_LL_Sum_float: RING_LL)."""
    found = _PROTOCOL.search(kernel)
    return f"{found[1]}_{found[2]}" if found else None


def confirm(finding: Finding, after: AdviceContext) -> Confirmation:
    """Confirmed where the later run's collectives that are big enough to judge reach the rule's % of roof (none
    of them is slow any more)."""
    frame, mask = _judged(after, finding.rule)
    after_s = float(frame.loc[mask, "time_s"].sum())
    return Confirmation(finding, finding.evidence.time_s, after_s, not mask.any())
