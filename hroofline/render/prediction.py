"""What ``hroofline predict`` prints: per phase the roofline bound, the estimate and memory; the step's time
with its error band and throughput; whether it fits the GPU; which ops went to the tensor cores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from hroofline.analyze.estimate import FITTED_HOST, FITTED_VENDOR, PerChannelShare, StepTime
from hroofline.analyze.layout import ConversionShare
from hroofline.analyze.memory_fit import MemoryFit
from hroofline.analyze.predict import CONVOLUTION_OPS, FlopSplit, Peaks
from hroofline.model.numbers import per_second, si
from hroofline.model.quantities import ROOF_LABELS
from hroofline.model.run import PhaseMemory
from hroofline.render.text import text_table
from hroofline.roofs.catalog import GIB

Summary = Mapping[str, Mapping[str, float | int | None]]


@dataclass(frozen=True)
class PredictionView:
    """Everything the text shows, computed beforehand."""

    run: str
    what: str  # "resnet18, batch 256, fp32 on t4"
    summary: Summary  # analyze.kernels.phase_summary of the run
    step: StepTime
    fit: MemoryFit | None
    peaks: Peaks
    tensor_share: float  # share of the FLOPs on the tensor roof
    split: FlopSplit
    estimate_source: str = ""  # what the estimate's parameters were fitted to
    peak_split: PhaseMemory | None = None  # the phase with the step's peak memory, by category
    inference: bool = False  # a forward pass in eval mode without gradients, not a training step's forward
    host_floors: Mapping[str, float] = field(default_factory=dict)  # the estimate's host time per kind of op
    host_source: str = FITTED_HOST  # or where it was measured (model.host.HostCost.describe)
    channels_last: bool = False  # the model and its images in NHWC
    conversions: ConversionShare | None = None  # cuDNN's layout conversions in an NCHW step
    batch_norm: PerChannelShare | None = None  # NCHW training batch norm, one thread block per channel
    op_counts: Mapping[str, int] = field(default_factory=dict)  # traced ops per phase, without the conversions


def prediction_text(view: PredictionView) -> str:
    lines = [f"{view.run}: {view.what}, predicted (bound: time at roof; estimate: fitted to measured steps)"]
    whole = "inference" if view.inference else "step"
    lines.append(_phase_table(view.summary, whole, view.op_counts))
    lines.append(_step_line(view.step, whole))
    vendor = untested_vendor_line(view.peaks.gpu.vendor)
    if vendor:
        lines.append(vendor)
    if not view.step.error_factor:
        lines.append(f"estimate {view.estimate_source}: its error is not known")
    if view.host_floors:
        lines.append(_host_line(view.host_floors, view.host_source))
    if view.fit is not None:
        lines.append(_fit_line(view.fit))
    if view.peak_split is not None and view.peak_split.peak_by_category:
        parts = sorted(view.peak_split.peak_by_category.items(), key=lambda item: -item[1])
        split = ", ".join(f"{name.replace('_', ' ')} {si(value, 'B')}" for name, value in parts if value > 0)
        lines.append(f"memory at the peak ({view.peak_split.phase}): {split}")
    lines.append(_tensor_line(view.peaks, view.tensor_share))
    layout = _layout_line(view, whole)
    if layout:
        lines.append(layout)
    if view.batch_norm is not None and view.batch_norm.added_s > 0:
        lines.append(_batch_norm_line(view.batch_norm, whole, view.step.estimate_s))
    split = view.split
    total = split.matmul + split.other
    if total > 0:
        top = ", ".join(
            f"{op.removeprefix('aten::')} {si(value, 'FLOP')}" for op, value in list(split.other_by_op.items())[:4]
        )
        lines.append(
            f"forward: {si(split.matmul, 'FLOP', 4)} in convolutions and matrix products (what model summaries count), "
            f"plus {si(split.other, 'FLOP')} ({100 * split.other / total:.1f}%) in other ops: {top}"
        )
    return "\n".join(lines) + "\n"


def untested_vendor_line(vendor: str) -> str | None:
    """Where the GPU is another vendor's than every step the estimate was fitted or checked on."""
    if vendor == FITTED_VENDOR:
        return None
    fitted, other = FITTED_VENDOR.upper(), vendor.upper()
    return (
        f"untested on {other}: every step the estimate was fitted or checked on ran on an {fitted} GPU; its "
        f"efficiencies, host floor and batch norm's rate are {fitted}'s, not measured on an {other} GPU (the bound "
        "is this GPU's own datasheet roofs)"
    )


def _layout_line(view: PredictionView, whole: str) -> str | None:
    if view.channels_last:
        return "layout: channels_last (NHWC): cuDNN's tensor-core convolutions need no layout conversion"
    share = view.conversions
    if share is None:
        return None
    added = (
        f"they add {si(share.estimate_s, 's')} to the {whole}'s estimate of {si(view.step.estimate_s, 's')} (what "
        "the host's time per op does not hide)"
        if share.estimate_s > 0
        else f"the host's time per op hides them in the {whole}'s estimate of {si(view.step.estimate_s, 's')}"
    )
    return (
        f"layout: NCHW: cuDNN converts the tensors of {share.convolutions} convolution ops to NHWC and back, "
        f"{share.kernels} kernels moving {si(share.bytes, 'B')} (bound {si(share.bound_s, 's')}): {added}; "
        "--channels-last removes them"
    )


def _batch_norm_line(share: PerChannelShare, whole: str, estimate_s: float) -> str:
    return (
        f"batch norm: NCHW: cuDNN runs the {share.ops} batch norm ops of training one thread block per channel; "
        f"that adds {si(share.added_s, 's')} to the {whole}'s estimate of {si(estimate_s, 's')} (a block's rate "
        "measured on an H200, metrics/batch_norm.toml); --channels-last spreads them over the GPU"
    )


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _host_line(floors: Mapping[str, float], source: str) -> str:
    (first, first_s), *rest = floors.items()
    kinds = ", ".join(
        [f"{_article(first)} takes at least {si(first_s, 's')}", *(f"{_article(k)} {si(s, 's')}" for k, s in rest)]
    )
    if source == FITTED_HOST:
        return (
            f"host: {kinds} (the element-wise op's fitted to the published steps' hosts, the others' measured "
            "multiples of it; --host FILE: your host's, from hroofline ceilings --measure)"
        )
    return f"host: {kinds} ({source})"


def _phase_table(summary: Summary, whole: str, op_counts: Mapping[str, int]) -> str:
    rows = [["phase", "bound", "estimate", "FLOPs", "bytes", "ops", "peak memory", "retained"]]
    for phase, values in summary.items():
        retained = values.get("memory_retained_bytes")
        ops = op_counts.get(phase, values.get("kernels"))  # the traced ops, not the conversions between them
        rows.append(
            [
                whole if phase == "total" else phase,
                si(_number(values.get("time_bound_s")), "s"),
                si(_number(values.get("time_s")), "s"),
                si(_number(values.get("flops")), "FLOP"),
                si(_number(values.get("bytes_hbm")), "B"),
                "-" if ops is None else str(ops),
                si(_number(values.get("memory_peak_bytes")), "B"),
                ("+" if retained is not None and retained > 0 else "") + si(_number(retained), "B"),
            ]
        )
    return text_table(rows).rstrip("\n")


PHASE_COLUMNS = (
    "run",
    "phase",
    "time_bound_s",
    "time_s",
    "flops",
    "bytes_hbm",
    "ops",
    "memory_peak_bytes",
    "memory_retained_bytes",
)


def prediction_table(view: PredictionView) -> pd.DataFrame:
    """The text's phase table as data (``predict --format csv|json``): one row per phase and one for the whole
    step (``total``), in SI base units."""
    rows = []
    for phase, values in view.summary.items():
        ops = view.op_counts.get(phase, values.get("kernels"))
        rows.append(
            {
                "run": view.run,
                "phase": phase,
                "time_bound_s": _number(values.get("time_bound_s")),
                "time_s": _number(values.get("time_s")),
                "flops": _number(values.get("flops")),
                "bytes_hbm": _number(values.get("bytes_hbm")),
                "ops": ops,
                "memory_peak_bytes": _number(values.get("memory_peak_bytes")),
                "memory_retained_bytes": _number(values.get("memory_retained_bytes")),
            }
        )
    return pd.DataFrame(rows, columns=list(PHASE_COLUMNS))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _step_line(step: StepTime, whole: str) -> str:
    unit = step.unit
    estimate = f"{whole}: estimate {si(step.estimate_s, 's')}, {per_second(step.throughput(step.estimate_s), unit)}"
    if step.error_factor:
        slow, fast = per_second(step.throughput(step.high_s), unit), per_second(step.throughput(step.low_s), unit)
        # the band was measured with the fitted host floor: with yours the error is not known
        fitted = "with the fitted host floor, " if step.host_measured else ""
        if step.not_validated_for:  # the band is other models': said as theirs, not as this estimate's
            estimate += (
                f" (not validated for {step.not_validated_for}: the estimate's error was measured on "
                f"{step.error_measured_on or 'other steps'}, 90% within x{step.error_factor:.2f}; "
                f"no error band is known for this model)"
            )
        else:
            estimate += (
                f" ({fitted}90% of held-out measured {step.error_measured_on or 'steps'} were within "
                f"x{step.error_factor:.2f}: "
                f"{si(step.low_s, 's')} to "
                f"{si(step.high_s, 's')}, {slow} to {fast})"
            )
    return f"{estimate}\nbound: {si(step.bound_s, 's')}, at most {per_second(step.throughput(step.bound_s), unit)}"


def _fit_line(fit: MemoryFit) -> str:
    sold = f"{si(fit.capacity_bytes, 'B')} = {fit.capacity_bytes / GIB:g} GiB"
    gpu = f"{fit.gpu} ({sold}, {si(fit.usable_bytes, 'B')} usable)"
    peak = f"peak {si(fit.peak_bytes, 'B')} in {fit.peak_phase}"
    how = "traced" if fit.largest_batch_traced else "scaling activations and temporaries with the batch"
    largest = (
        f"largest batch that fits: {fit.largest_batch:,} ({how})"
        if fit.largest_batch >= 1
        else "not even a batch of 1 fits"
    )
    verdict = "fits" if fit.fits else "DOES NOT FIT"
    return f"memory: {peak}: {verdict} the {gpu}; {largest}"


def _tensor_line(peaks: Peaks, share: float) -> str:
    """Which ops the prediction put on which tensor roof, and their share of the FLOPs."""
    route = peaks.route
    if route is None:
        return "tensor cores: none (every op on the FP32 / FP16 / FP64 units)"
    what = "convolutions" if route.ops == CONVOLUTION_OPS else "convolutions and matrix products"
    if share == 0 and route.ops == CONVOLUTION_OPS:  # PyTorch's fp32: TF32 for convolutions, and there are none
        return (
            f"tensor cores: none used (this precision puts only convolutions on the {ROOF_LABELS[route.roof]} roof, "
            "and the model has none; --precision tf32 puts its matrix products there too)"
        )
    return (
        f"tensor cores: {what} on the {ROOF_LABELS[route.roof]} roof ({si(peaks.values[route.roof], 'FLOP/s')}), "
        f"{100 * share:.1f}% of the FLOPs"
    )


def sweep_text(table: pd.DataFrame) -> str:
    """A sweep's table (:func:`hroofline.analyze.sweep.sweep_table`) for a terminal, SI units."""
    rows = [
        [
            "run",
            "bound",
            "estimate",
            "per second",
            "FLOPs",
            "bytes",
            "FLOP/B",
            "attainable",
            "peak memory",
            "after forward",
            "fits",
        ]
    ]
    for row in table.itertuples(index=False):
        fits = "-" if row.fits is None else ("yes" if row.fits else f"no (<= {row.largest_batch})")
        rows.append(
            [
                row.run,
                si(row.time_bound_s, "s"),
                si(row.time_s, "s"),
                per_second(row.per_s, row.unit),
                si(row.flops, "FLOP"),
                si(row.bytes_hbm, "B"),
                f"{row.intensity:.1f}" if row.intensity else "-",
                si(row.attainable_flop_per_s, "FLOP/s"),
                si(row.memory_peak_bytes, "B"),
                si(row.memory_forward_retained_bytes, "B"),
                fits,
            ]
        )
    notes = (
        "bound: every op at its roof; estimate: fitted to measured steps; attainable: FLOPs / bound; after forward: "
        "what the forward pass leaves allocated; fits: peak memory within the GPU's usable memory (no: the "
        "largest batch that fits)"
    )
    return text_table(rows) + notes + "\n"
