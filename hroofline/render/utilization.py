"""MFU, HFU and MBU in words: the denominator a run's utilisations are taken against, once per run, and why one is
missing (the numbers: :mod:`hroofline.analyze.utilization`)."""

from __future__ import annotations

from hroofline.analyze.utilization import HARDWARE, MODEL, PeakTerm, RunUtilization
from hroofline.model.numbers import si

WHAT = {
    MODEL: "MFU: model FLOPs (the ops' analytic work), each precision at its dense peak, over the time; against",
    HARDWARE: "HFU: hardware FLOPs (ncu's counters: padding and recomputation included), each precision at its dense "
    "peak, over the time; against",
}


def peak_text(peak: PeakTerm) -> str:
    """'773 TFLOP/s BF16 tensor dense: 4,096 FLOP/SM/cycle × 132 SMs × 1.43 GHz, the clock the kernels ran at'."""
    text = f"{si(peak.flop_per_s, 'FLOP/s')} {peak.label} dense"
    if peak.per_sm_cycle and peak.sms and peak.clock_hz:
        unit = peak.unit
        text += f": {peak.per_sm_cycle:,.0f} FLOP/{unit}/cycle × {peak.sms} {unit}s × {peak.clock_hz / 1e9:.3g} GHz"
    return f"{text}, {peak.clock}"


def utilization_lines(utilization: RunUtilization) -> list[str]:
    """One line per kind of utilisation the run has, with its denominator; then why any is missing."""
    lines = []
    for basis in (MODEL, HARDWARE):
        peaks = sorted(  # tensor-core work first: where most model FLOPs are
            (peak for peak in utilization.peaks if peak.basis == basis), key=lambda p: not p.key.startswith("tensor_")
        )
        if peaks:
            lines += [WHAT[basis], *(f"  {peak_text(peak)}" for peak in peaks)]
    if utilization.hbm_byte_per_s:
        lines.append(f"MBU: HBM bytes over the time at {si(utilization.hbm_byte_per_s, 'B/s')}")
    if lines and utilization.estimated:
        lines.append(
            "time: the ops' estimated times (a prediction, no kernel ran: each op's time at roof over its class's "
            "fitted efficiency, or the host's floor for its kind, whichever is longer)"
        )
    elif lines:
        lines.append("time: the kernels' summed GPU time (gaps between kernels left out)")
    return lines + utilization.reasons


def utilization_sentence(utilization: RunUtilization) -> str:
    """The same in one paragraph (a report's facts): each kind's peaks separated by semicolons, kinds by full stops."""
    parts: list[str] = []
    for line in utilization_lines(utilization):
        if line.startswith("  ") and parts:
            parts[-1] += (" " if parts[-1].endswith("against") else "; ") + line.strip()
        else:
            parts.append(line)
    return ". ".join(parts) + "."
