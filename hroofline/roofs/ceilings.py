"""The roofs a run is drawn and judged against: bandwidth per memory level and compute per precision.

Three kinds of roofs, all SI (byte/s, FLOP/s; operations/s for integer tensor work):

- the report's own (ncu's peak metrics x the clocks each launch ran at, :mod:`hroofline.roofs.report`),
  used first, so every GPU ncu can profile gets a hierarchical roofline;
- a GPU's datasheet peaks (``metrics/gpus.toml``), quoted at a boost clock: compute, L1 and L2 roofs are
  scaled to the SM clock each launch ran at where the source measured it (``--clock-control base``
  locks it well below boost); HBM is not;
- measured ceilings (ERT and the like) from a TOML file, bundled in ``metrics/ceilings/`` or the user's
  own, taken as given.

``--ceilings`` picks a set for the whole run; without it, the report's roofs and then the datasheet of
the run's GPU are used, key by key.
"""

from __future__ import annotations

import math
import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hroofline.errors import InputError, UsageError
from hroofline.model.quantities import COMPUTE_ROOF_OF, LEVEL_LABELS, LEVELS, ROOF_KEYS, ROOF_LABELS
from hroofline.model.run import HIGHEST_CLOCK_NOTE, JOINED_KIND, PEAK_PREFIX, Run, RunMeta
from hroofline.roofs.catalog import GpuName, gpu_from_display_name, load_gpu_names, resolve_gpu
from hroofline.roofs.metricset import bundled_ceiling_files
from hroofline.roofs.rates import SPARSE_SUFFIX

CPU = "cpu"  # the --gpu name of CPU runs
# "tensor" is the FP16 tensor peak in ceilings files written before tensor peaks had a precision.
FILE_KEYS: frozenset[str] = frozenset({*ROOF_KEYS, "tensor"})
# Where a GPU has one rate for both accumulators the catalog gives only the FP32-accumulator peak.
FALLBACK_KEYS: dict[str, str] = {"tensor_fp16_acc16": "tensor_fp16"}
# 2:4-sparse tensor work runs at twice the dense rate (metrics/rates.toml sparse_factor); sets give dense peaks.
SPARSE_FACTOR = 2.0
# ncu's FP16 counters count a packed half2 instruction once (metrics/hierarchical.toml): the FP16 roof of
# FLOPs counted that way is half the packed rate datasheets, ERT and ncu's own Half roofline quote.
COUNTED_FP16_FACTOR = 0.5
REPORT = "report"


@dataclass(frozen=True)
class Ceilings:
    """One set of roofs; ``label`` and ``source`` say which. ``quoted_clock`` gives, per key, the SM clock
    a peak is quoted at (datasheets); keys without one are taken as given (measured sets)."""

    label: str
    source: str
    peaks: dict[str, float]
    quoted_clock: dict[str, float] = field(default_factory=dict)
    gpu: str | None = None  # the catalog GPU of a datasheet set

    def peak(self, key: str) -> float | None:
        value = self.peaks.get(key)
        if value is None and key in FALLBACK_KEYS:
            return self.peaks.get(FALLBACK_KEYS[key])
        if value is None and key.endswith(SPARSE_SUFFIX):
            dense = self.peak(key.removesuffix(SPARSE_SUFFIX))
            return dense * SPARSE_FACTOR if dense is not None else None
        return value

    def clock_of(self, key: str) -> float | None:
        if key not in self.peaks and key.endswith(SPARSE_SUFFIX):
            return self.clock_of(key.removesuffix(SPARSE_SUFFIX))
        if key in self.peaks or key not in FALLBACK_KEYS:
            return self.quoted_clock.get(key)
        return self.quoted_clock.get(FALLBACK_KEYS[key])

    @property
    def bandwidth(self) -> dict[str, float]:
        return {level: self.peaks[level] for level in LEVELS if level in self.peaks}

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "source": self.source, "peaks": dict(self.peaks)}

    def describe(self) -> str:
        return f"{self.label}; source: {readable_source(self.source)}"


_CITATION = re.compile(r"\s*\[[A-Z][A-Z0-9-]*(?:-copy)?\]|,? see the header")


def readable_source(source: str) -> str:
    """A roof's source for people: without the catalog's citation tags (``[AMP-BLOG-copy]``) and pointers into
    its file header, which ``metrics/gpus.toml`` keeps for whoever checks the numbers."""
    text = " ".join(_CITATION.sub("", source).split()).replace("()", "")
    text = re.sub(r"^[,;\s]+|(?<=[,;])\s*,", "", text).strip()
    return text or "datasheet (metrics/gpus.toml)"


def from_peaks(label: str, source: str, peaks: dict[str, float]) -> Ceilings:
    """A set taken as given: measured ceilings, or the roofs a CPU run measured."""
    values = dict(peaks)
    if "tensor" in values:  # files from before tensor peaks had a precision
        values.setdefault("tensor_fp16", values.pop("tensor"))
    return Ceilings(label=label, source=source, peaks=values)


def datasheet_ceilings(gpu: GpuName) -> Ceilings:
    if not gpu.peaks:
        why = f" ({gpu.roofs_from_reports_only})" if gpu.roofs_from_reports_only else ""
        raise UsageError(
            f"the catalog has no datasheet peaks for {gpu.name}{why}",
            "pass --ceilings FILE with measured ceilings (format: metrics/ceilings/v100-yang-ert.toml)",
        )
    clocks = {key: clock for key in gpu.peaks if (clock := gpu.quoted_clock(key)) is not None}
    return Ceilings(f"{gpu.name} datasheet", gpu.peak_source or "metrics/gpus.toml", dict(gpu.peaks), clocks, gpu.name)


def read_toml_file(path: Path, what: str) -> dict:
    """A TOML file's tables; one that cannot be read or parsed is an input error naming ``what`` it is."""
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {what} {path}: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{what} {path} is not valid TOML: {error}") from error


def load_ceilings_file(path: Path) -> Ceilings:
    """A measured-ceilings file: ``name``, ``source``, optional ``gpu``, and ``[ceilings]`` in SI units."""
    return ceilings_from_toml(read_toml_file(path, "ceilings file"), path)


def ceilings_from_toml(data: dict[str, Any], path: Path) -> Ceilings:
    """A ceilings file's parsed TOML, checked as load_ceilings_file checks it (``path`` names it in errors)."""
    values = data.get("ceilings")
    if not isinstance(values, dict) or not values:
        raise InputError(
            f"ceilings file {path} has no [ceilings] table", "see metrics/ceilings/v100-yang-ert.toml for the format"
        )
    unknown = sorted(set(values) - FILE_KEYS)
    if unknown:
        raise InputError(
            f"ceilings file {path}: unknown key(s) {', '.join(unknown)}", "known: " + ", ".join(sorted(FILE_KEYS))
        )
    peaks: dict[str, float] = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise InputError(f"ceilings file {path}: {key} must be a positive number in SI units, not {value!r}")
        if value < 1e6:  # GB/s or GFLOP/s written without the 1e9
            raise InputError(
                f"ceilings file {path}: {key} = {value:g} is far too small for byte/s or FLOP/s",
                "values are SI: write 828.76 GB/s as 828.76e9",
            )
        peaks[key] = float(value)
    label = str(data.get("name") or path.stem)
    return from_peaks(label, str(data.get("source") or path.name), peaks)


def run_gpu(meta: RunMeta) -> GpuName | None:
    if meta.gpu == CPU:
        return None
    if meta.gpu:
        return load_gpu_names().get(meta.gpu) or resolve_gpu(meta.gpu)
    return gpu_from_display_name(meta.device_name) if meta.device_name else None


def named_ceilings(choice: str) -> Ceilings:
    """``--ceilings``: a file, a bundled measured set or a catalog GPU's datasheet."""
    path = Path(choice)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise InputError(f"ceilings file {path} does not exist")
        return load_ceilings_file(path)
    bundled = bundled_ceiling_files()
    if choice in bundled:
        return load_ceilings_file(bundled[choice])
    try:
        gpu = resolve_gpu(choice)
    except UsageError:
        raise UsageError(
            f"--ceilings {choice!r} is neither a file, a bundled set nor a catalog GPU",
            "bundled sets: " + ", ".join(bundled) + "; GPUs: see `hroofline gpus`",
        ) from None
    return datasheet_ceilings(gpu)


def ceilings_for_run(meta: RunMeta, choice: str | None = None) -> Ceilings:
    """One set for the whole run: ``choice``, else the run's own measured set, else its GPU's datasheet."""
    if choice is not None:
        return named_ceilings(choice)
    if meta.ceilings:
        return from_peaks(str(meta.ceilings["label"]), str(meta.ceilings["source"]), dict(meta.ceilings["peaks"]))
    gpu = run_gpu(meta)
    if gpu is None:
        raise UsageError(
            f"run {meta.name!r} does not say which GPU it ran on",
            "pass --ceilings with a GPU name, a bundled set or a file (see `hroofline gpus`)",
        )
    return datasheet_ceilings(gpu)


@dataclass
class RunRoofs:
    """The roofs of each launch of a run, and what a chart and a table must say about them.

    ``per_launch`` has the run's launch index and one column per roof key (NaN: no roof). ``origins``
    says per key where it came from; ``label`` says at which clock."""

    label: str
    source: str
    per_launch: pd.DataFrame
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    fp16_halved: bool = False  # the FP16 roof of ncu-counted launches is half the packed rate

    def levels(self) -> tuple[str, ...]:
        """The memory levels with a roof for some launch; all three when there is none."""
        return tuple(level for level in LEVELS if self.per_launch[level].notna().any()) or LEVELS

    def describe(self) -> str:
        return f"{self.label}; source: {readable_source(self.source)}"

    def representative(self, launches: pd.DataFrame) -> dict[str, float]:
        """One value per roof for the given launches (a chart draws one line per roof): the
        time-weighted median of their roofs."""
        rows = self.per_launch.loc[launches.index] if len(launches) else self.per_launch
        weights = launches["time_s"] if len(launches) else pd.Series(1.0, index=rows.index)
        values = {}
        for key in ROOF_KEYS:
            value = weighted_median(rows[key], weights.reindex(rows.index))
            if value is not None:
                values[key] = value
        return values


def weighted_median(values: pd.Series, weights: pd.Series) -> float | None:
    """The value below which half the weight lies (unweighted where weights are missing)."""
    ok = values.notna() & (values > 0)
    if not ok.any():
        return None
    v = values[ok].to_numpy(dtype=float)
    w = weights[ok].fillna(0).clip(lower=0).to_numpy(dtype=float)
    if w.sum() <= 0:
        w = np.ones_like(v)
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(w[order])
    return float(v[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def run_roofs(run: Run, choice: str | None = None) -> RunRoofs:
    """The roofs every launch of ``run`` is judged against (see the module docstring for the order)."""
    launches = run.launches
    if choice is not None or run.meta.ceilings:
        chosen = ceilings_for_run(run.meta, choice)
        own = run_gpu(run.meta)
        if chosen.gpu is not None and (own is None or own.name != chosen.gpu):
            # Another GPU's datasheet: its peaks at its own quoted clocks, not at this run's clock.
            chosen = replace(chosen, label=f"{chosen.label} (another GPU: at its quoted clocks)", quoted_clock={})
        return _counted_fp16(run, _from_set(launches, chosen))
    report = launches[[PEAK_PREFIX + key for key in ROOF_KEYS]].rename(columns=lambda c: c[len(PEAK_PREFIX) :])
    from_report = [key for key in ROOF_KEYS if report[key].notna().any()]
    gpu = run_gpu(run.meta)
    datasheet = datasheet_ceilings(gpu) if gpu is not None and gpu.peaks else None
    if datasheet is None and not from_report:  # what roofs_unknown says, known here already
        # a problem of the run's data, not of the command line: exit 1, as doctor's for the same run
        raise InputError(f"run {run.name!r} has no roofs: {roofs_unknown(run)}", _no_roofs_hint(run))
    if datasheet is None:
        roofs = RunRoofs(label="", source="", per_launch=report.copy())
    else:
        roofs = _from_set(launches, datasheet)
        # the report's roof where it gave one, else the datasheet's (both per launch, on the launches' index): as
        # report.where(report.notna(), ...), which takes 13 ms on 5,081 launches where this takes 0.3
        given = report.to_numpy(dtype="float64", na_value=np.nan)
        datasheet_roofs = roofs.per_launch[list(report.columns)].to_numpy(dtype="float64", na_value=np.nan)
        merged = np.where(np.isnan(given), datasheet_roofs, given)
        roofs.per_launch = pd.DataFrame(merged, index=report.index, columns=report.columns)
    for key in from_report:
        roofs.origins[key] = REPORT
    roofs.label, roofs.source = _report_label(run, roofs, datasheet, from_report)
    return _counted_fp16(run, roofs)


def _no_roofs_hint(run: Run) -> str:
    """How to give a run roofs: a CPU's measured ceilings; for a GPU run, the GPU it ran on, named at import (the
    run's own sources again) or the ceilings to judge it against."""
    if run.meta.gpu == CPU:
        return CPU_CEILINGS_HINT
    sources = " ".join(shlex.quote(str(source.path)) for source in run.meta.sources) or "SOURCE"
    return (
        f"import it again with the GPU it ran on: hroofline import {sources} --run {run.name} --gpu NAME --replace "
        "(`hroofline gpus` lists them), or pass --ceilings with a GPU name, a bundled set or a ceilings file"
    )


CPU_CEILINGS_HINT = (
    "measure the ceilings of the CPU it ran on, on that machine (hroofline ceilings --measure --out cpu.toml), "
    "and pass --ceilings cpu.toml"
)


def roofs_unknown(run: Run) -> str | None:
    """Why ``run`` has no roofs of its own, for commands that draw or rank against them: no measured set, no
    catalog GPU with datasheet peaks, no peaks in its reports. None where it has some."""
    if run.meta.ceilings:
        return None
    peaks = run.launches[[PEAK_PREFIX + key for key in ROOF_KEYS]]
    if peaks.notna().to_numpy().any():
        return None
    if run.meta.gpu == CPU:
        return "no ceilings of the CPU it ran on were measured or given"
    gpu = run_gpu(run.meta)
    if gpu is not None and gpu.peaks:
        return None
    if gpu is not None:
        what = f"the catalog has no datasheet peaks for {gpu.name}"
    elif run.meta.cc:
        what = f"it names no GPU, only compute capability {run.meta.cc}"
    else:
        what = "it does not say which GPU it ran on"
    return f"{what}, and its sources carry no ncu peak metrics"


def _from_set(launches: pd.DataFrame, ceilings: Ceilings) -> RunRoofs:
    """Each launch's roofs from one set, datasheet peaks scaled to the launch's measured SM clock."""
    clock = launches["clock_hz"].where(launches["clock_hz"] > 0)
    columns: dict[str, pd.Series] = {}
    origins: dict[str, str] = {}
    scaled_any = False
    for key in ROOF_KEYS:
        value = ceilings.peak(key)
        if value is None:
            columns[key] = pd.Series(np.nan, index=launches.index)
            continue
        quoted = ceilings.clock_of(key)
        if quoted:
            columns[key] = (value * clock / quoted).where(clock.notna(), value)
            scaled_any = scaled_any or bool(clock.notna().any())
        else:
            columns[key] = pd.Series(value, index=launches.index, dtype=float)
        origins[key] = ceilings.label
    quoted_default = _quoted_clocks_text(ceilings)
    median = weighted_median(clock, launches["time_s"]) if scaled_any else None
    label = ceilings.label
    if ceilings.quoted_clock:
        label += _clock_phrase(median, quoted_default, bool(clock.notna().any()))
    return RunRoofs(
        label=label,
        source=ceilings.source,
        per_launch=pd.DataFrame(columns, index=launches.index),
        origins=origins,
    )


def _quoted_clocks_text(ceilings: Ceilings) -> str:
    """The SM clocks a set's compute peaks are quoted at: '1.98 GHz', or '1.98 GHz; tensor 1.83 GHz'."""
    clocks = ceilings.quoted_clock
    main = clocks.get("fp32") or next(iter(clocks.values()), None)
    if main is None:
        return "boost"
    text = f"{main / 1e9:.3g} GHz"
    others = sorted({c for k, c in clocks.items() if k.startswith("tensor_") and c != main})
    return text + "".join(f"; tensor {c / 1e9:.3g} GHz" for c in others)


def _clock_phrase(median: float | None, quoted_text: str, measured: bool) -> str:
    if measured and median:
        return f", scaled to each launch's measured SM clock (median {median / 1e9:.3g} GHz; quoted at {quoted_text})"
    return f", at the quoted SM clocks ({quoted_text}; no clock measured)"


# How a report roof was derived, from the formula its source recorded: what the label must say about it.
REPORT_KINDS: tuple[tuple[str, str], ...] = (
    ("not measured", "device attributes at the GPU's maximum clock (not measured)"),
    ("device__attribute_memory_clock_rate", "memory clock x bus width (device attributes)"),
    ("units x", "device attributes x the clocks each launch ran at"),
    ("is not dense", "dense rates (metrics/rates.toml) x SMs x the clocks each launch ran at"),
    ("rates.toml", "dense rates (metrics/rates.toml) x SMs x the clocks each launch ran at"),
    ("", "ncu peak metrics x the clocks each launch ran at"),
)


_HIGHEST_CLOCK = re.compile(re.escape(HIGHEST_CLOCK_NOTE) + r", ([\d.]+) GHz")


def _report_kind(how: str) -> str:
    first = how.split("; else ")[0]  # how most launches got it: the first alternative that gave a value
    kind = next(kind for marker, kind in REPORT_KINDS if marker in first)
    highest = _HIGHEST_CLOCK.search(how)  # a trace joined with ncu's counters: its times ran unlocked
    if highest:
        kind = kind.replace("x the clocks each launch ran at", f"at the GPU's highest clock ({highest.group(1)} GHz)")
    return kind


def _report_label(run: Run, roofs: RunRoofs, datasheet: Ceilings | None, from_report: list[str]) -> tuple[str, str]:
    """Which roofs came from the report and how (peak metrics or device attributes, measured clock or the
    maximum one), which from the datasheet."""
    if not from_report:
        return roofs.label, roofs.source
    used = _roofs_in_use(run)  # the label names these; the source says how every roof was made
    how = {k: h for s in run.meta.sources for k, h in s.roofs.items() if k in from_report}
    kinds: dict[str, list[str]] = {}
    for key in ROOF_KEYS:
        if key in from_report and key in used:
            kinds.setdefault(_report_kind(how.get(key, "")), []).append(ROOF_LABELS[key])
    parts = [f"{', '.join(names)}: {kind}" for kind, names in kinds.items()]
    clock = weighted_median(run.launches["clock_hz"], run.launches["time_s"])
    at = f"; median SM clock {clock / 1e9:.3g} GHz" if clock else ""
    label = f"from the report ({'; '.join(parts)}{at})"
    source = "; ".join(f"{k}: {h}" for k, h in sorted(how.items())) or "ncu peak metrics"
    rest = [k for k in ROOF_KEYS if k not in from_report and k in used and roofs.per_launch[k].notna().any()]
    if datasheet is not None and rest:
        label += f"; {', '.join(ROOF_LABELS[k] for k in rest)} from the {roofs.label}"
        source += f"; {datasheet.source}"
    return label, source


def _roofs_in_use(run: Run) -> set[str]:
    """The roofs some launch of the run has work or bytes for: the ones worth naming."""
    launches = run.launches
    used = {level for level in LEVELS if (launches[f"bytes_{level}"].fillna(0) > 0).any()}
    used |= {key for column, key in COMPUTE_ROOF_OF.items() if (launches[column].fillna(0) > 0).any()}
    return used


def _counted_fp16(run: Run, roofs: RunRoofs) -> RunRoofs:
    """Halve the FP16 roof of launches whose FP16 FLOPs are ncu's counted (packed-once) instructions."""
    counted = {i for i, s in enumerate(run.meta.sources) if s.counts_fp16_instructions}
    joined = {i for i, s in enumerate(run.meta.sources) if s.kind == JOINED_KIND}
    mask = run.launches["source"].isin(counted)
    # A joined trace's launches carry ncu's counters where counters_from says where they came from
    mask &= ~run.launches["source"].isin(joined) | run.launches["counters_from"].notna()
    if mask.any() and roofs.per_launch["fp16"].notna().any():
        roofs.per_launch.loc[mask, "fp16"] *= COUNTED_FP16_FACTOR
        roofs.fp16_halved = True
        if (run.launches.loc[mask, "flops_fp16"].fillna(0) > 0).any():
            roofs.notes.append(
                "FP16 roof halved to match ncu's FP16 counters, which count a packed half2 instruction once"
            )
    return roofs


__all__ = [
    "CPU",
    "LEVEL_LABELS",
    "ROOF_LABELS",
    "Ceilings",
    "RunRoofs",
    "bundled_ceiling_files",
    "ceilings_for_run",
    "datasheet_ceilings",
    "from_peaks",
    "load_ceilings_file",
    "named_ceilings",
    "roofs_unknown",
    "run_roofs",
]
