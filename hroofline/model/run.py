"""The central type passed between the pipeline stages: a :class:`Run`.

A run is metadata plus one row per kernel launch (``Run.launches``, a pandas DataFrame). Every
importer produces the same launch columns; the store keeps them in Parquet; the analysis reads them.
All quantities are SI: seconds, FLOPs, bytes. A quantity that was not measured is null, never 0.

Beside the quantities a launch may carry its own roofs (``peak_<key>``: FLOP/s or byte/s at the clock it
ran at), derived from the report's peak metrics and device attributes (:mod:`hroofline.roofs.report`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hroofline.model.quantities import QUANTITIES, ROOF_KEYS, TENSOR_FLOP_QUANTITIES

# 2: tensor FLOPs per input precision (flops_tensor is their total), integer tensor ops, per-launch roofs.
# 3: the layer (module path) of every launch and the input shapes of analytic and CPU ops.
# 4: traces: the launching op (and the ATen op its work was counted as, as predict names it), the activity's
#    category (kernel, communication, memcpy, memset), the rank and
#    the profiler step of every launch, and the bytes a communication kernel moves over the links.
# 5: predicted runs: ``time_bound_s`` (the roofline bound) beside ``time_s`` (the estimate); per-phase memory
#    in each source's metadata.
# 6: the Parquet file has a run column and the raw metrics in one map column (hroofline/store/format.py),
# the metadata lists the run's phases.
# 7: 2:4-sparse tensor work apart (flops_tensor_<p>_sparse, ops_tensor_int8/int4_sparse); compute roofs from a
#    report checked against the dense rates (Hopper's tensor peaks were the sparse rate); an L1 count blind to
#    TMA is null (hroofline/store/upgrade.py corrects runs written before).
# 8: traces: each kernel's ``signature`` (what identifies the same work, hroofline/importers/launch_signature.py)
#    and the ``op_call`` that launched it; ``counters_from``: the launch whose measured counters a launch carries
#    (itself where ncu measured it, another launch of its signature where they were copied).
# 9: ``start_s``, each launch's start in seconds from its rank's first activity in its source (traces), so that
#    overlap, wall time and idle time can be told (hroofline/analyze/overlap.py); older runs read it as null.
SCHEMA_VERSION = 9

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "prefill", "decode", "mixed", "other")


def ordered_phases(present: set[str]) -> list[str]:
    """Phases in step order, any phase not in :data:`PHASES` after them by name."""
    return [p for p in PHASES if p in present] + sorted(present - set(PHASES))


# Identity of a launch. ``launches`` is 1 for a real launch and N for a row that stands for N launches
# of one kernel name (``--merge name``).
IDENTITY_COLUMNS: dict[str, str] = {
    "source": "int32",
    "launch_id": "int64",
    "kernel": "string",
    "phase": "string",
    "nvtx": "string",
    "layer": "string",
    "shapes": "string",
    "grid": "string",
    "block": "string",
    "device": "string",
    "cc": "string",
    "stream": "string",
    "launches": "int64",
    "op": "string",
    "work_op": "string",
    "work_source": "string",
    "category": "string",
    "rank": "Int64",
    "step": "Int64",
    "signature": "string",
    "op_call": "Int64",
    "counters_from": "Int64",
}
TIME_COLUMNS: dict[str, str] = {
    "time_s": "float64",
    "start_s": "float64",  # the launch's start: seconds from its rank's first activity in its source
    "time_method": "string",
    "clock_hz": "float64",
    "time_bound_s": "float64",  # predicted runs: the roofline bound, where time_s is the estimate
}
QUANTITY_COLUMNS: dict[str, str] = {q: "float64" for q in QUANTITIES}
# All tensor FLOPs, whatever the input precision: the sum of the per-precision columns.
TOTAL_COLUMNS: dict[str, str] = {"flops_tensor": "float64"}
# Bytes a communication kernel's rank sends over its links (nccl-tests' bus bytes), judged against the link roof;
# the collective's name as PyTorch records it, its message size S (bytes) and the ranks in its group
# (hroofline/importers/collectives.py). Files written before these three read them as unknown.
COMMUNICATION_COLUMNS: dict[str, str] = {
    "bytes_link": "float64",
    "collective": "string",
    "bytes_message": "float64",
    "group_size": "Int64",
}
# A trace source's setting: how many GPUs its rank's process saw on its host (the trace's deviceProperties), the
# GPUs per node that tells whether a collective's group spans nodes.
GPUS_ON_HOST_SETTING = "gpus_on_host"
PEAK_PREFIX = "peak_"
JOINED_KIND = "kineto+ncu"  # a trace whose launches (some or all) carry ncu's counters
NSYS_KIND = "nsys"  # an Nsight Systems export: a trace of every rank it holds, read as the PyTorch profiler's
# How a joined run's compute and L1 roofs were made (SourceInfo.roofs, after the report's own how); the roofs
# label reads the clock back from it.
HIGHEST_CLOCK_NOTE = "scaled from the clock ncu's launch ran at to the GPU's highest clock"
PEAK_COLUMNS: dict[str, str] = {PEAK_PREFIX + key: "float64" for key in ROOF_KEYS}
LAUNCH_COLUMNS: dict[str, str] = {
    **IDENTITY_COLUMNS,
    **TIME_COLUMNS,
    **QUANTITY_COLUMNS,
    **TOTAL_COLUMNS,
    **COMMUNICATION_COLUMNS,
    **PEAK_COLUMNS,
}
# Raw ncu metrics that fed a formula are kept beside the quantities, under this prefix, so every stored
# number can be traced back to what ncu measured.
RAW_METRIC_PREFIX = "metric:"


# What a phase's memory is made of (hroofline/collect/memory_tracking.py says how each is told apart).
MEMORY_CATEGORIES: tuple[str, ...] = (
    "parameters",
    "gradients",
    "optimizer_state",
    "inputs",
    "activations",
    "temporaries",
)


LIVENESS_METHOD = (
    "tensor storages alive, tracked at the dispatcher (each storage once, rounded to 512-byte blocks); "
    "workspaces inside an op are not seen"
)
CUDA_MEMORY_METHOD = "torch.cuda.memory_allocated and max_memory_allocated (peak reset at each phase start)"


@dataclass(frozen=True)
class PhaseMemory:
    """One phase's memory, bytes: allocated at its start, its peak and at its end; by category where known."""

    phase: str
    start_bytes: float
    peak_bytes: float
    end_bytes: float
    method: str
    peak_by_category: dict[str, float] = field(default_factory=dict)
    end_by_category: dict[str, float] = field(default_factory=dict)

    @property
    def retained_bytes(self) -> float:
        """What the phase leaves allocated: at its end minus at its start."""
        return self.end_bytes - self.start_bytes

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PhaseMemory:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def first_per_phase(phases: list[PhaseMemory]) -> list[PhaseMemory]:
    """Each phase once: the first time it was recorded (profiled steps repeat phases, runs hold sources)."""
    seen: dict[str, PhaseMemory] = {}
    for memory in phases:
        seen.setdefault(memory.phase, memory)
    return list(seen.values())


@dataclass
class SourceInfo:
    """One imported source: a file, or a folder of one-metric-per-run logs."""

    path: str
    kind: str
    source_hash: str  # the identity: "blake3:<hex>", or a bare hex SHA-256 (hroofline/importers/source_hash.py)
    launches: int
    files: list[dict[str, str]] = field(default_factory=list)
    ncu_version: str | None = None
    phase: str | None = None
    formulas_used: dict[str, str] = field(default_factory=dict)
    time_methods: dict[str, int] = field(default_factory=dict)
    extra_metrics: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)  # how it was collected (clock control, ...)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the user must know about the numbers
    roofs: dict[str, str] = field(default_factory=dict)  # roof key -> how the report gave it
    memory: list[PhaseMemory] = field(default_factory=list)  # per phase, predicted or measured

    @property
    def collection(self) -> str:
        """How the source was collected, in a word: ncu, trace (trace+ncu with ncu's counters), cpu, predicted."""
        if self.kind == "analytic":
            return "predicted"
        if self.kind == JOINED_KIND:
            return "trace+ncu"
        if self.kind.startswith("kineto") or self.kind == NSYS_KIND:
            return "trace"
        return "cpu" if self.kind == "cpu" else "ncu"

    @property
    def analytic_work(self) -> bool:
        """A trace's FLOPs and bytes come from its ops' shapes (all of them, or all but ncu's top kernels)."""
        return self.kind in ("kineto", JOINED_KIND, NSYS_KIND)

    @property
    def counted_work(self) -> bool:
        """FLOPs and bytes from hardware counters (ncu, CUPTI), not from the ops' shapes."""
        return self.kind.startswith("ncu") or "cupti" in self.kind

    @property
    def counts_fp16_instructions(self) -> bool:
        """ncu's FP16 counters (and CUPTI's, in a trace) count a packed half2 instruction once; analytic sources
        count arithmetic. A trace joined with ncu's counters counts so on the launches that carry them."""
        return self.kind.startswith("ncu") or "cupti" in self.kind or self.kind == JOINED_KIND


@dataclass
class RunMeta:
    name: str
    gpu: str | None = None
    device_name: str | None = None
    cc: str | None = None
    arch: str | None = None
    precision: str | None = None
    metric_set: str = "hierarchical"
    schema_version: int = SCHEMA_VERSION
    created: str | None = None
    updated: str | None = None
    sources: list[SourceInfo] = field(default_factory=list)
    ceilings: dict[str, Any] | None = None  # roofs measured with the run (CPU runs): label, source, peaks
    phases: list[str] = field(default_factory=list)  # the phases its launches are in, as last written

    @property
    def predicted(self) -> bool:
        """A run made by ``predict``: every source analytic, its times estimates, no kernel ran."""
        return bool(self.sources) and all(source.kind == "analytic" for source in self.sources)

    @property
    def gpu_name(self) -> str | None:
        """The catalog GPU it ran on, else the device name its sources gave."""
        return self.gpu or self.device_name

    @property
    def compile_mode(self) -> str | None:
        """The torch.compile mode its model was profiled in (``profile --compile``), None for an eager step or one
        that does not say."""
        return next((s.settings["compile"] for s in self.sources if s.settings.get("compile")), None)

    @property
    def ncu_versions(self) -> list[str]:
        return sorted({s.ncu_version for s in self.sources if s.ncu_version})

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ncu_versions"] = self.ncu_versions
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMeta:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "sources"}
        sources = [
            SourceInfo(**{**_renamed_legacy(s), "memory": [PhaseMemory.from_json(m) for m in s.get("memory", [])]})
            for s in data.get("sources", [])
        ]
        return cls(**fields, sources=sources)


def _renamed_legacy(source: dict[str, Any]) -> dict[str, Any]:
    """A source's metadata as written before its identity was ``source_hash`` (``sha256``, a bare hex SHA-256)."""
    if "sha256" not in source:
        return source
    renamed = {k: v for k, v in source.items() if k != "sha256"}
    renamed.setdefault("source_hash", source["sha256"])
    return renamed


@dataclass
class Run:
    """A run: metadata and one row per launch. Data only: its analyses are the stages' (the notebook face,
    :class:`hroofline.api.face.RunView`, adds them as methods)."""

    meta: RunMeta
    launches: pd.DataFrame

    @property
    def name(self) -> str:
        return self.meta.name


if TYPE_CHECKING:
    import pandas as pd


def empty_launches() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in LAUNCH_COLUMNS.items()})


def upgrade_launches(frame: pd.DataFrame, schema_version: int, analytic: bool = False) -> pd.DataFrame:
    """A launch table written by an older hroofline, in today's layout. Schema 1 kept one tensor column;
    its runs were judged against the FP16 tensor peak, so that is where their tensor FLOPs go. Before
    schema 5 a prediction's ``time_s`` was its roofline bound: it is the bound still, and has no estimate."""
    if schema_version < 5 and analytic and "time_s" in frame and "time_bound_s" not in frame:
        frame = frame.assign(time_bound_s=frame["time_s"])
    if schema_version < 2 and "flops_tensor" in frame and not any(q in frame for q in TENSOR_FLOP_QUANTITIES):
        frame = frame.assign(flops_tensor_fp16=frame["flops_tensor"])
    return frame


def conform_launches(frame: pd.DataFrame, columns: Collection[str] | None = None) -> pd.DataFrame:
    """Give a launch table exactly the standard columns and dtypes, raw metric columns last; with ``columns``,
    only those of the standard columns (a run read in part: the others are not made up as empty columns).

    The table is built once from its columns, each taken as it is where its dtype is right: the caller's frame is
    never changed, nothing is copied twice (copy-on-write), and no column is set one by one (each ``out[name] =``
    costs as much as the table's width). A selection by list (``frame[names]``) would copy every column into one
    block, and a million-launch run is a gigabyte."""
    import pandas as pd

    index = pd.RangeIndex(len(frame))
    frame = frame.set_axis(index)  # once for the table, not once per column; copy-on-write: nothing copied
    tensor = [q for q in TENSOR_FLOP_QUANTITIES if q in frame.columns]
    present = set(frame.columns) - {"flops_tensor"}  # the total is always made again from its parts
    total = frame[tensor].sum(axis=1, min_count=1) if tensor else None
    wanted = {name: dtype for name, dtype in LAUNCH_COLUMNS.items() if columns is None or name in columns}
    raw = sorted(c for c in frame.columns if c.startswith(RAW_METRIC_PREFIX)) if columns is None else []
    data: dict[str, pd.Series] = {}
    for name, dtype in [*wanted.items(), *((name, "float64") for name in raw)]:
        column = total if name == "flops_tensor" else frame[name] if name in present else None
        if column is None:  # filled from one value, not from a list as long as the table
            data[name] = pd.Series(float("nan") if dtype == "float64" else pd.NA, index=index, dtype=dtype)
            continue
        data[name] = column.astype(dtype) if column.dtype != dtype else column
    return pd.DataFrame(data, index=index, copy=False)
