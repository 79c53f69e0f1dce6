"""Two runs side by side: per phase (time, FLOPs, tensor share, bytes, speedup, ratios) and per kernel
family (largest gains and regressions).

When both runs have layers (module paths), they are matched layer to layer within a phase: exact, whatever
kernels each layer ran. Otherwise kernels are matched by family (:mod:`hroofline.analyze.families`) within
a phase; when both runs carry NVTX ranges below the phase (an op or layer context), the context is part of
the match, so the same layer is compared with itself. Ratios are candidate / base; speedup is base time /
candidate time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from hroofline.analyze.compiled_step import compiled_folds, compiled_sides, folded_layers
from hroofline.analyze.families import kernel_family
from hroofline.analyze.kernels import NO_LAYER, phase_summary
from hroofline.errors import HrooflineError
from hroofline.model.layers import OUTSIDE
from hroofline.model.phases import canonical_phase
from hroofline.model.quantities import BYTE_QUANTITIES, COMPUTE_ROOF_OF
from hroofline.model.run import Run
from hroofline.roofs.formulas import total_flops

PHASE_FIELDS: tuple[str, ...] = ("time_s", "flops", "flops_tensor", "bytes_l1", "bytes_l2", "bytes_hbm", "kernels")
FAMILY_COLUMNS: tuple[str, ...] = (
    "phase",
    "family",
    "base_time_s",
    "candidate_time_s",
    "saved_s",
    "speedup",
    "base_flops",
    "candidate_flops",
    "base_kernels",
    "candidate_kernels",
    "base_bytes",  # at the comparison's bytes_level (None where there is none)
    "candidate_bytes",
    "status",
)


@dataclass
class Comparison:
    base: str
    candidate: str
    phases: dict[str, dict[str, float | None]]
    families: pd.DataFrame  # FAMILY_COLUMNS, largest saving first
    matched_on: str  # "family", "nvtx context and family" or "layer"
    only_in_base: list[str]  # phases the candidate lacks: left out of every figure
    only_in_candidate: list[str]
    notes: list[str] = field(default_factory=list)
    predicted: str | None = None  # "base" or "candidate": the side that predicts the step the other measured
    # a prediction against a measured run of another GPU or step: what differs (its ratios are no estimate's error)
    other_step: str | None = None
    predictions: list[str] = field(default_factory=list)  # the runs (one or both) that are predictions
    compiled: dict[str, str] = field(default_factory=dict)  # the torch.compile'd side(s) and their modes
    bytes_level: str | None = None  # the deepest memory level both runs have bytes at ("hbm", "l2", "l1")

    @property
    def estimate_versus_measured(self) -> bool:
        """A prediction against a measured run: its figures are how far the measurement is from the estimate."""
        return self.predicted is not None

    def to_json(self) -> dict[str, object]:
        from hroofline.model.numbers import frame_records

        return {
            "base": self.base,
            "candidate": self.candidate,
            "predicted": self.predicted,
            "other_step": self.other_step,
            "predictions": self.predictions,
            "compiled": self.compiled,
            "bytes_level": self.bytes_level,
            "matched_on": self.matched_on,
            "phases": self.phases,
            "phases_only_in_base": self.only_in_base,
            "phases_only_in_candidate": self.only_in_candidate,
            "notes": self.notes,
            "families": frame_records(self.families),
        }


def _ratio(numerator: float | int | None, denominator: float | int | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return float(numerator) / float(denominator)


# What a run's sources record of the step it holds (predict and profile record them), compared where both say.
STEP_SETTINGS = ("arch", "model", "batch_size", "precision", "seq_len")


def other_step(base: Run, candidate: Run) -> str | None:
    """Why two runs are not the same step on the same GPU (the setting that differs and its two values), where
    their metadata says so; None where nothing recorded differs."""
    gpus = [_gpu_of(run) for run in (base, candidate)]
    if gpus[0] != gpus[1]:
        return f"gpu: {gpus[0] or 'unknown'} and {gpus[1] or 'unknown'}"
    return _differing_setting(base, candidate, STEP_SETTINGS)


# How much of each run's time two runs of one model have on layers (module paths), else on launching ops (traces),
# else on kernel families, that the other run has too. Measured: DeepCAM FP32 against AMP share 94% by family (AMP
# adds layout conversions), ResNet-34 against GPT-2 on one H100 2% by layer, and 49% by family (both have
# element-wise kernels). A layout change replaces most kernels but not the ops that launch them: the H100
# resnet50 AMP traces, NCHW against channels_last, share 38% by family, all but a few percent by op.
SAME_MODEL_LAYERS = 0.5
SAME_MODEL_OPS = 0.8
SAME_MODEL_FAMILIES = 0.8


def unlike_models(base: Run, candidate: Run) -> str | None:
    """Why two runs are not one model: a model their sources record that differs, or too little of either run's
    time on layers (both on modules), else launching ops (both traces or ops), else kernel families, that the other
    has. None where they share it."""
    differs = _differing_setting(base, candidate, ("model", "arch"))
    if differs:
        return differs
    runs = (base, candidate)
    if all(_mostly_on_modules(run) for run in runs):
        what, least = "layers", SAME_MODEL_LAYERS  # a compiled region against the modules it replaced
        keys = [_layer_keys(run, compiled_folds(run, other)) for run, other in ((base, candidate), (candidate, base))]
    elif all(_op_kind(run) != "kernels" for run in runs):
        what, least = "launching ops", SAME_MODEL_OPS
        keys = [run.launches["op"].astype("string").fillna(run.launches["kernel"].astype(str)) for run in runs]
    else:
        what, least = "kernel families", SAME_MODEL_FAMILIES
        keys = [run.launches["kernel"].astype(str).map(kernel_family) for run in runs]
    for run, own, other in ((base, keys[0], keys[1]), (candidate, keys[1], keys[0])):
        weights = _weights(run.launches)
        total = float(weights.sum())
        shared = float(weights[own.isin(set(other)).to_numpy()].sum()) / total if total > 0 else 0.0
        if shared < least:
            return f"{shared:.0%} of {run.name}'s time is on {what} that the other run has"
    return None


def _gpu_of(run: Run) -> str | None:
    """The catalog GPU a run ran on, named as --gpu names it: an ncu report imported without --gpu says it by its
    device name ("NVIDIA H100 80GB HBM3" is h100-sxm, as a prediction for it names it)."""
    from hroofline.roofs.ceilings import CPU, run_gpu

    if run.meta.gpu == CPU:
        return CPU
    gpu = run_gpu(run.meta)
    return gpu.name if gpu else run.meta.gpu


def _weights(launches: pd.DataFrame) -> pd.Series:
    """Each launch's weight in a run's shares: its time, or one per launch where the run has no times."""
    weights = launches["time_s"] if launches["time_s"].notna().any() else launches["launches"]
    return weights.fillna(0).astype(float)


def _differing_setting(base: Run, candidate: Run, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` both runs record with different values, said with the two values."""
    settings = [_step_settings(run) for run in (base, candidate)]
    for name in names:
        values = [found.get(name) for found in settings]
        if None not in values and values[0] != values[1]:
            return f"{name}: {values[0]} and {values[1]}"
    return None


def _step_settings(run: Run) -> dict[str, str]:
    found: dict[str, str] = {}
    for source in run.meta.sources:
        for name in STEP_SETTINGS:
            if name in source.settings:
                found.setdefault(name, source.settings[name])
    return found


def compare_phases(base: Run, candidate: Run, side: str | None) -> dict[str, dict[str, float | None]]:
    """Per phase: both runs' figures, candidate/base ratios, the time's change (``time_change``, the ratio - 1)
    and the speedup; where ``side`` ("base" or "candidate") predicts the step the other run measured, also the
    measured run's time, FLOPs and HBM bytes over the prediction's (``measured_over_estimated_*``) and its time
    over the prediction's roofline bound (``measured_over_bound``)."""
    base_phases, cand_phases = phase_summary(base), phase_summary(candidate)
    result: dict[str, dict[str, float | None]] = {}
    for phase in [p for p in base_phases if p in cand_phases]:
        b, c = base_phases[phase], cand_phases[phase]
        row: dict[str, float | None] = {}
        for name in PHASE_FIELDS:
            row[f"base_{name}"] = b.get(name)
            row[f"candidate_{name}"] = c.get(name)
        row["speedup"] = _ratio(b.get("time_s"), c.get("time_s"))
        row["time_ratio"] = _ratio(c.get("time_s"), b.get("time_s"))
        row["time_change"] = None if row["time_ratio"] is None else row["time_ratio"] - 1  # +0.05: 5% slower
        row["flops_ratio"] = _ratio(c.get("flops"), b.get("flops"))
        row["hbm_bytes_ratio"] = _ratio(c.get("bytes_hbm"), b.get("bytes_hbm"))
        row["base_tensor_share"] = _ratio(b.get("flops_tensor"), b.get("flops"))
        row["candidate_tensor_share"] = _ratio(c.get("flops_tensor"), c.get("flops"))
        if side is not None:
            estimated, measured = (b, c) if side == "base" else (c, b)
            row["measured_over_estimated_time"] = _ratio(measured.get("time_s"), estimated.get("time_s"))
            row["measured_over_estimated_flops"] = _ratio(measured.get("flops"), estimated.get("flops"))
            row["measured_over_estimated_bytes_hbm"] = _ratio(measured.get("bytes_hbm"), estimated.get("bytes_hbm"))
            row["measured_over_bound"] = _ratio(measured.get("time_s"), estimated.get("time_bound_s"))
        result[phase] = row
    return result


def context_below_phase(stack: str) -> str:
    """The NVTX ranges below the innermost phase range: 'step/forward/layer1/conv' -> 'layer1/conv'."""
    ranges = stack.split("/") if stack else []
    for index in range(len(ranges) - 1, -1, -1):
        if canonical_phase(ranges[index]) not in (None, "other"):
            return "/".join(ranges[index + 1 :])
    return ""


def _context(nvtx: pd.Series) -> pd.Series:
    stacks = nvtx.astype("string").fillna("")
    return stacks.map(context_below_phase, na_action=None).astype(str)


def _has_context(run: Run) -> bool:
    return bool((_context(run.launches["nvtx"]) != "").mean() > 0.5)


WORK_COLUMNS = list(COMPUTE_ROOF_OF)  # FLOPs per precision and integer tensor operations
BYTE_COLUMNS = list(BYTE_QUANTITIES)


MATCH_FAMILY, MATCH_CONTEXT, MATCH_LAYER = "family", "nvtx context and family", "layer"
# one run's ATen ops (a prediction's, a CPU trace's) against the other's kernels, each by the op that launched it
MATCH_OP = "launching op (each launch by the ATen op that ran or launched it)"


def _mostly_on_modules(run: Run) -> bool:
    """Whether most of the run's time (or launches, untimed) has a layer: a module path or the step's own
    labels (loss, autograd, optimizer), not ``<outside>`` or none (a report whose NVTX ranges name a few
    kernels only)."""
    layers = run.launches["layer"].astype("string")
    on_modules = (layers.notna() & (layers != OUTSIDE)).fillna(False).astype(bool)
    weights = _weights(run.launches)
    total = float(weights.sum())
    return total > 0 and float(weights[on_modules].sum()) > 0.5 * total


def _op_kind(run: Run) -> str:
    """'ops' for a run whose launches are ATen ops (predicted, CPU-recorded), 'kernels with ops' for a trace
    whose kernels mostly know their launching op, else 'kernels'."""
    launches = run.launches
    weights = _weights(launches)
    total = float(weights.sum())
    if total <= 0:
        return "kernels"
    if float(weights[launches["kernel"].astype(str).str.startswith("aten::")].sum()) > 0.5 * total:
        return "ops"
    return "kernels with ops" if float(weights[launches["op"].notna()].sum()) > 0.5 * total else "kernels"


def match_key(base: Run, candidate: Run) -> str:
    """How two runs' kernels are matched: layer to layer when most of both runs' time is on layers (exact:
    the same module in both, whatever kernels it ran), else by kernel family, within the NVTX context when
    both have one."""
    if _mostly_on_modules(base) and _mostly_on_modules(candidate):
        return MATCH_LAYER
    if {_op_kind(base), _op_kind(candidate)} == {"ops", "kernels with ops"}:
        return MATCH_OP
    return MATCH_CONTEXT if _has_context(base) and _has_context(candidate) else MATCH_FAMILY


def _layer_keys(run: Run, folds: frozenset[str]) -> pd.Series:
    return folded_layers(run.launches["layer"].astype("string").fillna(NO_LAYER).astype(str), folds)


def launch_keys(run: Run, match: str, folds: frozenset[str] = frozenset()) -> pd.Series:
    """Each launch's match key (:func:`match_key`'s kind): its layer (those in ``folds`` as the compiled region),
    its launching op, or its kernel family, within its NVTX context for ``MATCH_CONTEXT``."""
    launches = run.launches
    if match == MATCH_LAYER:
        return _layer_keys(run, folds)
    if match == MATCH_OP:  # a trace's kernels as the op predict would name; a prediction's ops are their own
        named = launches["work_op"].astype("string").fillna(launches["op"].astype("string"))
        return named.fillna(launches["kernel"].astype("string")).astype(str)
    family = launches["kernel"].astype(str).map(kernel_family)
    if match == MATCH_CONTEXT:
        family = _context(launches["nvtx"]) + " · " + family
    return family


def family_sums(run: Run, match: str, folds: frozenset[str] = frozenset()) -> pd.DataFrame:
    """Per phase and match key (kernel family, NVTX context and family, or layer, those in ``folds`` as the
    compiled region: :mod:`hroofline.analyze.compiled_step`): time, FLOPs, bytes, kernels. The key is in the
    ``family`` column."""
    launches = run.launches
    family = launch_keys(run, match, folds)
    columns = ["time_s", *WORK_COLUMNS, *BYTE_COLUMNS, "launches"]
    frame = launches[columns].assign(phase=launches["phase"].astype(str), family=family)
    sums = frame.groupby(["phase", "family"], sort=False).sum(min_count=1).reset_index()
    sums["flops"] = total_flops(sums)
    return sums.rename(columns={"launches": "kernels"})


def _phases(run: Run) -> list[str]:
    return [p for p in phase_summary(run) if p != "total"]


def only_phases(run: Run, phases: list[str]) -> Run:
    """``run`` with only the launches of ``phases``."""
    return Run(run.meta, run.launches[run.launches["phase"].isin(phases)].reset_index(drop=True))


def compare_runs(base: Run, candidate: Run) -> Comparison:
    """Both runs restricted to the phases they share (the totals too); no shared phase is an error."""
    shared = [p for p in _phases(base) if p in _phases(candidate)]
    if not shared:
        raise HrooflineError(
            f"runs {base.name!r} ({', '.join(_phases(base))}) and {candidate.name!r} "
            f"({', '.join(_phases(candidate))}) have no phase in common"
        )
    only_in_base = [p for p in _phases(base) if p not in shared]
    only_in_candidate = [p for p in _phases(candidate) if p not in shared]
    base, candidate = only_phases(base, shared), only_phases(candidate, shared)
    match = match_key(base, candidate)
    b = family_sums(base, match, compiled_folds(base, candidate))
    c = family_sums(candidate, match, compiled_folds(candidate, base))
    merged = b.merge(c, on=["phase", "family"], how="outer", suffixes=("_b", "_c"))
    # One run predicting the step the other measured: "estimated versus measured"; a prediction against another
    # GPU's or step's run is no measure of the estimate's error, and the comparison says what differs.
    one_predicted = base.meta.predicted != candidate.meta.predicted
    differs = other_step(base, candidate) if one_predicted else None
    side = ("base" if base.meta.predicted else "candidate") if one_predicted and differs is None else None
    phases = compare_phases(base, candidate, side)
    level = _common_bytes_level(phases)
    moved = [merged[f"bytes_{level}_{suffix}"] if level else pd.Series(None, index=merged.index) for suffix in "bc"]
    families = pd.DataFrame(
        {
            "phase": merged["phase"],
            "family": merged["family"],
            "base_time_s": merged["time_s_b"].fillna(0.0),
            "candidate_time_s": merged["time_s_c"].fillna(0.0),
            "base_flops": merged["flops_b"],
            "candidate_flops": merged["flops_c"],
            "base_kernels": merged["kernels_b"].fillna(0).astype("int64"),
            "candidate_kernels": merged["kernels_c"].fillna(0).astype("int64"),
            "base_bytes": moved[0],
            "candidate_bytes": moved[1],
        }
    )
    families["saved_s"] = families["base_time_s"] - families["candidate_time_s"]
    families["status"] = "matched"
    families.loc[merged["time_s_c"].isna().to_numpy(), "status"] = "only in base"
    families.loc[merged["time_s_b"].isna().to_numpy(), "status"] = "only in candidate"
    families["speedup"] = families["base_time_s"] / families["candidate_time_s"].where(families["candidate_time_s"] > 0)
    families = families.sort_values("saved_s", ascending=False, kind="stable").reset_index(drop=True)
    return Comparison(
        base=base.name,
        candidate=candidate.name,
        phases=phases,
        families=families[list(FAMILY_COLUMNS)],
        matched_on=match,
        only_in_base=only_in_base,
        only_in_candidate=only_in_candidate,
        notes=_convention_notes(base, candidate),
        other_step=differs,
        predicted=side,
        predictions=[run.name for run in (base, candidate) if run.meta.predicted],
        compiled=compiled_sides(base, candidate),
        bytes_level=level,
    )


def _common_bytes_level(phases: dict[str, dict[str, float | None]]) -> str | None:
    """The deepest memory level (HBM, L2, L1) where both runs' step has bytes: the level fusion's savings show at."""
    total = phases.get("total", {})
    for level in ("hbm", "l2", "l1"):
        if all((total.get(f"{side}_bytes_{level}") or 0) > 0 for side in ("base", "candidate")):
            return level
    return None


def _counts_fp16_instructions(run: Run) -> bool:
    return any(source.counts_fp16_instructions for source in run.meta.sources)


def _convention_notes(base: Run, candidate: Run) -> list[str]:
    """What the two runs count differently, said once: FP16 FLOPs (ncu's counters count a packed half2
    instruction once, analytic runs count arithmetic: the ratio can be off by up to 2x), and a prediction's
    time against a measured run's (the estimate holds each op's launch cost, the measurement kernels alone)."""
    notes = []
    if base.meta.predicted != candidate.meta.predicted:
        notes.append(
            "a prediction's time is its ops' estimates, each at least the host's cost of launching it; the measured "
            "run's is its kernels' GPU time alone, so a layer of many small ops is estimated over its kernels' time "
            "by that cost"
        )
    counted_fp16 = [run.name for run in (base, candidate) if _counts_fp16_instructions(run)]
    both_fp16 = all((run.launches["flops_fp16"].fillna(0) > 0).any() for run in (base, candidate))
    if len(counted_fp16) == 1 and both_fp16:
        notes.append(
            f"FP16 FLOPs are counted two ways: {counted_fp16[0]}'s are ncu's counted instructions (a packed half2 "
            "once), the other's are arithmetic, so the FLOPs ratio of non-tensor FP16 work can be off by up to 2x"
        )
    return notes


def family_points(run: Run, level: str, match: str = MATCH_FAMILY, folds: frozenset[str] = frozenset()) -> pd.DataFrame:
    """:func:`family_sums` with the intensity at ``level`` and the FLOP/s of each family."""
    sums = family_sums(run, match, folds)
    sums[f"ai_{level}"] = sums["flops"] / sums[f"bytes_{level}"].where(sums[f"bytes_{level}"] > 0)
    sums["flop_rate"] = sums["flops"] / sums["time_s"].where(sums["time_s"] > 0)
    return sums


def matched_points(base: Run, candidate: Run, level: str, count: int) -> pd.DataFrame:
    """The ``count`` families with the most time in either run that both runs can place at ``level``."""
    match = match_key(base, candidate)
    b = family_points(base, level, match, compiled_folds(base, candidate))
    c = family_points(candidate, level, match, compiled_folds(candidate, base))
    merged = b.merge(c, on=["phase", "family"], suffixes=("_base", "_candidate"))
    placeable = pd.Series(True, index=merged.index)
    for side in ("base", "candidate"):
        placeable &= (merged[f"ai_{level}_{side}"] > 0) & (merged[f"flop_rate_{side}"] > 0)
    merged = merged[placeable]
    merged = merged.assign(weight=merged["time_s_base"] + merged["time_s_candidate"])
    # Ties (repeated blocks take the same time) are broken by name: numpy's default sort is not stable, and its
    # order of ties depends on the CPU's vector instructions, so charts would differ between machines.
    merged = merged.sort_values(["weight", "phase", "family"], ascending=[False, True, True], kind="stable")
    return merged.drop(columns="weight").head(count).reset_index(drop=True)


@dataclass(frozen=True)
class ComparisonRoofs:
    """The roofs a comparison chart draws: the base run's, and the candidate's too when it ran on another GPU
    (one value per roof: the time-weighted median over each run's launches)."""

    peaks: dict[str, float]
    label: str
    candidate_peaks: dict[str, float] | None = None
    candidate_label: str | None = None
    gpus: tuple[str, str] | None = None  # (base GPU, candidate GPU) when they differ


def comparison_roofs(base: Run, candidate: Run, ceilings: str | None = None) -> ComparisonRoofs:
    from hroofline.roofs.ceilings import run_roofs

    roofs = run_roofs(base, ceilings)
    peaks = roofs.representative(base.launches)
    base_gpu, candidate_gpu = (run.meta.gpu_name for run in (base, candidate))
    if ceilings is not None or base_gpu == candidate_gpu:
        return ComparisonRoofs(peaks, roofs.label)
    other = run_roofs(candidate)
    return ComparisonRoofs(
        peaks,
        roofs.label,
        other.representative(candidate.launches),
        other.label,
        (base_gpu or "base GPU", candidate_gpu or "candidate GPU"),
    )
