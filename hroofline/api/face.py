"""The notebook face of a run: :class:`RunView` is a :class:`~hroofline.model.run.Run` with its analyses as methods,
what ``hroofline.load`` and ``hroofline.predict`` return. Each method is one call into the composition the CLI
runs (:mod:`hroofline.api.outputs`, :mod:`hroofline.api.report_page`); the run itself stays data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hroofline.api.options import DEFAULT_KERNELS_GROUPING, DEFAULT_TOP, check_count, check_whole_run
from hroofline.model.run import Run

if TYPE_CHECKING:
    import pandas as pd

    from hroofline.analyze.overlap import RunOverlap
    from hroofline.analyze.utilization import RunUtilization


@dataclass
class RunView(Run):
    """A run, shown: ``.summary()``, ``.kernels()``, ``.top()``, ``.chart()``, ``.report()``, ``.mfu``,
    ``.utilization()`` and ``.wall_time()``; a notebook displays its summary."""

    @classmethod
    def of(cls, run: Run) -> RunView:
        return run if isinstance(run, RunView) else cls(run.meta, run.launches)

    def summary(self, by: str = "phase") -> pd.DataFrame:
        """As ``hroofline summary``: per phase and in total, time (s), FLOPs, tensor FLOPs, bytes per level,
        launches; ``by="rank"`` or ``"step"``: per rank or profiler step and phase (traces)."""
        from hroofline.api.options import SUMMARY_GROUPINGS, check_choice
        from hroofline.api.outputs import summary_frame
        from hroofline.api.views import Table

        return Table(summary_frame(self, check_choice("by", by, SUMMARY_GROUPINGS)))

    def wall_time(self) -> RunOverlap:
        """As ``hroofline summary --by rank``'s wall time: per rank (``.ranks``), per rank, step and phase
        (``.rows``), each ``wall_s`` split into ``compute_s``, ``communication_hidden_s``,
        ``communication_exposed_s`` and ``idle_s``; the critical rank of each step and phase (``.critical``) with its
        lag (own work over the median rank's) and the waiting it causes; ``.unknown`` says why there is none (a run
        without start times)."""
        from hroofline.analyze.overlap import run_overlap

        return run_overlap(self)

    @property
    def mfu(self) -> float | None:
        """The run's model FLOPs utilisation, a fraction: its model FLOPs, each precision at its dense peak at the
        clock its kernels ran at, over their time (None where it has none: ``utilization().reasons`` says why)."""
        total = self.utilization().total
        return total.mfu if total is not None else None

    def utilization(self) -> RunUtilization:
        """MFU, HFU (hardware FLOPs) and MBU per phase and in total (``.groups``), the dense peaks they are taken
        against (``.peaks``) and why any is missing (``.reasons``); per kernel or layer: ``top()`` and
        ``kernels()`` have ``mfu_pct``, ``hfu_pct`` and ``mbu_pct`` columns."""
        from hroofline.analyze.utilization import run_utilization

        return run_utilization(self)

    def kernels(
        self,
        group_by: str = DEFAULT_KERNELS_GROUPING,
        phase: str | None = None,
        layer: str | None = None,
        nvtx: str | None = None,
        n: int | None = None,
        sort: str = "time_s",
    ) -> pd.DataFrame:
        """As ``hroofline kernels``: the kernel table per ``launch`` (default), kernel ``name`` or ``layer`` (within
        each phase), optionally of one phase, of the layers matching ``layer`` (a module path and below it, or a
        glob) and the launches whose NVTX stack matches ``nvtx``; sorted by ``sort``, its first ``n`` rows."""
        from hroofline.analyze.utilization import utilization_table
        from hroofline.api.options import KERNEL_GROUPINGS, check_choice, kernel_query
        from hroofline.api.views import Table

        check_choice("group_by", group_by, KERNEL_GROUPINGS)
        return Table(utilization_table(self, kernel_query(group_by, phase, layer, nvtx, n, sort)))

    def top(
        self,
        n: int = DEFAULT_TOP,
        by: str = "name",
        phase: str | None = None,
        layer: str | None = None,
        nvtx: str | None = None,
        sort: str = "time_s",
        ceilings: str | None = None,
    ) -> pd.DataFrame:
        """As ``hroofline top``: kernel names (or layers: ``by="layer"``) ranked by ``sort``, with binding roof, %
        of roof, time at roof and recoverable time, against the run's roofs (or ``ceilings``); of one phase, of
        the layers matching ``layer`` and the launches whose NVTX stack matches ``nvtx``."""
        from hroofline.api.options import TOP_GROUPINGS, TOP_SORTS, check_choice, kernel_query
        from hroofline.api.outputs import top
        from hroofline.api.views import Table

        check_choice("by", by, TOP_GROUPINGS)
        check_choice("sort", sort, TOP_SORTS)
        return Table(top(self, kernel_query(by, phase, layer, nvtx, n, sort), ceilings).table)

    def chart(
        self,
        by: str = "name",
        phase: str | None = None,
        level: str | None = None,
        ceilings: str | None = None,
        layer: str | None = None,
        nvtx: str | None = None,
        per_launch: bool = False,
        title: str | None = None,
    ) -> Any:
        """As ``hroofline chart``: the hierarchical roofline, one dot per kernel name and phase (``by``: per
        layer, per launch; ``"run"`` or ``"phase"``: the whole run, or each phase, as one dot; ``"rank"``: a stacked
        bar per rank of its wall time), at the memory
        levels ``level`` ("l2,hbm"; default those with a roof). Shown inline in Jupyter with no network (its
        JavaScript travels with it, in the notebook and its HTML export); ``.save("x.html")`` writes the page the
        command writes, which opens offline."""
        from hroofline.api.options import (
            CHART_GROUPINGS,
            RANK_CHART,
            STEP_GROUPINGS,
            chart_levels,
            check_choice,
            kernel_query,
        )
        from hroofline.api.outputs import rank_chart, roofline, runs_chart
        from hroofline.api.views import ChartView

        check_choice("by", by, CHART_GROUPINGS)
        if by == RANK_CHART:
            return ChartView(rank_chart(self, title or ""), title or f"{self.name}: wall time per rank")
        levels = chart_levels(level) if level else None
        if by in STEP_GROUPINGS:
            check_whole_run(by, phase, layer, nvtx, per_launch, levels)
            drawn = runs_chart([self], by, levels[0] if levels else None, ceilings, title or "")
            return ChartView(drawn.chart, drawn.title)
        query = kernel_query("launch" if per_launch else by, phase, layer, nvtx)
        shown = roofline(self, query, ceilings, levels, title or "")
        return ChartView(shown.chart, shown.title)

    def report(
        self, out: str | Path, title: str | None = None, top: int = DEFAULT_TOP, ceilings: str | None = None
    ) -> Path:
        """This run's report page (``out/index.html``, one file that opens offline), as ``hroofline report``
        (``top``: its -n/--top, the kernels per table)."""
        from hroofline.api.report_page import report

        check_count("top", top)
        return report([self], [], title or f"hroofline report: {self.name}", top, ceilings).write(Path(out))

    def serving_steps(self) -> pd.DataFrame:
        """A serving trace's steps (vLLM's execute ranges), one row each: phase (prefill, decode, mixed), batch,
        query tokens and context per group, time, FLOPs, bytes, and the decode requests' attention bytes beside
        the KV cache they read; empty for a run without serving steps."""
        from hroofline.analyze.serving import serving_steps
        from hroofline.api.views import Table

        return Table(serving_steps(self))

    def advise(self, ceilings: str | None = None) -> pd.DataFrame:
        """What to change in the step, one row per finding, the most to win first, as ``hroofline advise``, against
        the run's roofs (or ``ceilings``: a GPU name, a bundled set or a ceilings file)."""
        from hroofline.api.advice import advise

        return advise(self, ceilings)

    def facts(self) -> dict[str, object]:
        """The run in a line: how it was collected, GPU, precision, phases, launches."""
        meta = self.meta
        kinds = "+".join(dict.fromkeys(source.collection for source in meta.sources))
        return {
            "": kinds,
            "on": meta.gpu_name,
            "precision": meta.precision,
            "phases": ", ".join(meta.phases),
            "launches": f"{len(self.launches):,}",
        }

    def __repr__(self) -> str:
        facts = "; ".join(f"{k} {v}".strip() for k, v in self.facts().items() if v)
        return f"<run {self.name!r}: {facts}; .summary(), .top(), .chart(), .report(), .advise()>"

    def _repr_html_(self) -> str:
        from hroofline.render.notebook import card_html, frame_html

        return card_html(self.name, self.facts(), frame_html(self.summary()))
