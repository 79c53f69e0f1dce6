"""What an import must say about its numbers: failed launches, and tensor-core work it could not count."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hroofline.model.quantities import OP_QUANTITIES, TENSOR_FLOP_QUANTITIES
from hroofline.roofs.metricset import MetricSet, TensorKernelHints

LISTED = 3  # kernel names quoted in one warning


def short_name(name: str, width: int = 60) -> str:
    """A kernel name cut to ``width`` characters, keeping its start."""
    return name if len(name) <= width else name[: width - 3] + "..."


def failed_launches(seconds: pd.Series, quantities: pd.DataFrame) -> np.ndarray:
    """Launches with no time and no quantity while others have some: a failed replay, not a kernel that
    did nothing. They are left out of the run."""
    has_data = (seconds.notna() | quantities.notna().any(axis=1)).to_numpy()
    return ~has_data if has_data.any() else np.zeros(len(has_data), dtype=bool)


def failed_launch_warning(identity: pd.DataFrame, metrics: pd.DataFrame, failed: np.ndarray, where: str) -> str:
    """Why launches were left out, truthfully: no values at all (a failed replay), or only metrics that give no
    time, FLOPs or bytes (another section, or another ncu run pasted into the same file)."""
    rows = identity[failed]
    names = ", ".join(
        f"ID {lid} {short_name(str(k))!r}"
        for lid, k in zip(rows["launch_id"][:LISTED], rows["kernel"][:LISTED], strict=True)
    )
    more = f" and {int(failed.sum()) - LISTED} more" if failed.sum() > LISTED else ""
    held = metrics[failed].notna()
    # Device attributes, launch settings and peak rates come without a replay: they say nothing of a failed one.
    measured = [str(c) for c in held.columns[held.any(axis=0).to_numpy()]]
    present = [
        name
        for name in measured
        if not name.startswith(("device__attribute", "launch__")) and "peak_sustained" not in name
    ]
    if not present:
        why = "have no metric values at all (a failed replay?)"
    else:
        shown = ", ".join(present[:3]) + (f" and {len(present) - 3} more" if len(present) > 3 else "")
        why = (
            f"hold only metrics that give no time, FLOPs or bytes ({shown}: another section, or another ncu run "
            "in the same file?)"
        )
    return f"{where}: {int(failed.sum())} launch(es) {why} and are left out of the run: {names}{more}"


@dataclass(frozen=True)
class UncountedWork:
    """Launches whose tensor-core work the source shows but does not count."""

    kind: str  # "floating-point", "floating-point (TF32)" (one precision not counted) or "integer"
    launches: np.ndarray  # mask
    examples: list[str]
    time_share: float | None


def uncounted_tensor_work(
    kernels: pd.Series, metrics: pd.DataFrame, quantities: pd.DataFrame, seconds: pd.Series, metric_set: MetricSet
) -> list[UncountedWork]:
    """Tensor-core kernels (by name, or by tensor-pipe utilisation metrics) in a source that counted no
    tensor work of that kind: their FLOPs (or integer operations) are missing from every total."""
    hints = metric_set.tensor_hints
    names = _KernelNames.of(kernels)
    found = []
    checks = (
        ("floating-point", list(TENSOR_FLOP_QUANTITIES), hints.float_names, ()),
        ("integer", list(OP_QUANTITIES), hints.integer_names, hints.integer_metrics),
    )
    evidence = {kind: _evidence(names, metrics, fragments, pipe) for kind, _, fragments, pipe in checks}
    for kind, columns, _, _ in checks:
        if quantities[columns].notna().any().any():
            if kind == "floating-point":  # some precisions counted: any a kernel shows that was not?
                found += _uncounted_precisions(kernels, names, metrics, quantities, seconds, evidence, hints)
            continue
        mask = evidence[kind] & ~evidence["integer"] if kind == "floating-point" else evidence[kind]
        if mask.any():
            found.append(_work(kind, mask, kernels, seconds))
    return found


def _uncounted_precisions(
    kernels: pd.Series,
    names: _KernelNames,
    metrics: pd.DataFrame,
    quantities: pd.DataFrame,
    seconds: pd.Series,
    evidence: dict[str, np.ndarray],
    hints: TensorKernelHints,
) -> list[UncountedWork]:
    found = []
    for column, fragments in hints.precision_names.items():
        if column in quantities and quantities[column].notna().any():
            continue
        mask = evidence["floating-point"] & ~evidence["integer"] & _evidence(names, metrics, fragments, ())
        if mask.any():
            precision = column.removeprefix("flops_tensor_").upper()
            found.append(_work(f"floating-point ({precision})", mask, kernels, seconds))
    return found


def _work(kind: str, mask: np.ndarray, kernels: pd.Series, seconds: pd.Series) -> UncountedWork:
    total = seconds.sum(min_count=1)
    share = float(seconds[mask].sum() / total) if pd.notna(total) and total > 0 else None
    examples = list(dict.fromkeys(short_name(str(k)) for k in kernels[mask]))[:LISTED]
    return UncountedWork(kind, mask, examples, share)


@dataclass(frozen=True)
class _KernelNames:
    """The launches' kernel names as codes into their distinct names, lower-cased: factorized and lowered once
    (100,000 launches of a few hundred names), not per launch and per check."""

    codes: np.ndarray
    lowered: list[str]

    @classmethod
    def of(cls, kernels: pd.Series) -> _KernelNames:
        codes, distinct = pd.factorize(kernels, use_na_sentinel=False)
        return cls(np.asarray(codes), [str(name).lower() for name in distinct])


def _evidence(
    names: _KernelNames, metrics: pd.DataFrame, fragments: tuple[str, ...], pipe: tuple[str, ...]
) -> np.ndarray:
    """Launches whose kernel name (checked once per distinct name) or pipe metrics show this kind of work."""
    matches = np.array([any(fragment in name for fragment in fragments) for name in names.lowered], dtype=bool)
    found = matches[names.codes] if len(matches) else np.zeros(len(names.codes), dtype=bool)
    for column in metrics.columns:
        if str(column).startswith(tuple(f"{m}." for m in pipe)):
            found |= (metrics[column].fillna(0) > 0).to_numpy()
    return found


def uncounted_work_warning(work: UncountedWork, where: str, metrics_to_collect: list[str]) -> str:
    share = f", {100 * work.time_share:.1f}% of the time" if work.time_share is not None else ""
    what = "integer operations" if work.kind == "integer" else "FLOPs"
    collect = ", ".join(metrics_to_collect) if metrics_to_collect else "the sm__ops_path_tensor_* metrics"
    return (
        f"{where}: {int(work.launches.sum())} launch(es){share} run {work.kind} tensor-core work "
        f"(e.g. {', '.join(repr(e) for e in work.examples)}) that this source does not count: their tensor "
        f"{what} are missing from every total, and their FLOP/s and intensities are too low. "
        f"Collect {collect} (see `hroofline profile --dry-run`)"
    )
