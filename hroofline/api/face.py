"""The notebook face of a run: :class:`RunView` is a :class:`~hroofline.model.run.Run` with its analyses as methods,
what ``hroofline.load`` and ``hroofline.predict`` return. Each method is one call into the composition the CLI
runs (:mod:`hroofline.api.outputs`, :mod:`hroofline.api.report_page`); the run itself stays data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hroofline.model.phases import parse_phase_option
from hroofline.model.run import Run

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class RunView(Run):
    """A run, shown: ``.summary()``, ``.kernels()``, ``.top()``, ``.chart()``, ``.report()``; a notebook displays
    its summary."""

    @classmethod
    def of(cls, run: Run) -> RunView:
        return run if isinstance(run, RunView) else cls(run.meta, run.launches)

    def summary(self) -> pd.DataFrame:
        """Per phase and in total: time (s), FLOPs, tensor FLOPs, bytes per level, launches."""
        import pandas as pd

        from hroofline.analyze.kernels import phase_summary
        from hroofline.api.views import Table

        frame = pd.DataFrame(phase_summary(self)).T.rename_axis("phase")
        return Table(frame.infer_objects())

    def kernels(
        self, group_by: str = "name", phase: str | None = None, layer: str | None = None, sort: str = "time_s"
    ) -> pd.DataFrame:
        """The kernel table: per ``launch``, kernel ``name`` or ``layer`` (within each phase), optionally of one
        phase and of the layers matching ``layer`` (a module path and below it, or a glob)."""
        from hroofline.analyze.kernels import KernelQuery, kernel_table
        from hroofline.api.views import Table

        chosen = parse_phase_option(phase) if phase else None
        return Table(kernel_table(self, KernelQuery(group_by=group_by, phase=chosen, sort=sort, layer=layer)))

    def top(
        self, n: int = 10, by: str = "name", phase: str | None = None, sort: str = "time_s", ceilings: str | None = None
    ) -> pd.DataFrame:
        """Kernel names (or layers: ``by="layer"``) ranked by ``sort``, with binding roof, % of roof, time at
        roof and recoverable time, against the run's roofs (or ``ceilings``)."""
        from hroofline.analyze.kernels import KernelQuery
        from hroofline.api.outputs import top
        from hroofline.api.views import Table

        chosen = parse_phase_option(phase) if phase else None
        return Table(top(self, KernelQuery(group_by=by, phase=chosen, top=n, sort=sort), ceilings).table)

    def chart(self, by: str = "name", phase: str | None = None, ceilings: str | None = None) -> Any:
        """The hierarchical roofline: the Altair chart, shown inline in Jupyter with no network (its JavaScript
        travels with it, in the notebook and its HTML export); ``.save("x.html")`` writes it."""
        from hroofline.analyze.kernels import KernelQuery
        from hroofline.api.outputs import roofline
        from hroofline.api.views import ChartView

        chosen = parse_phase_option(phase) if phase else None
        drawn = roofline(self, KernelQuery(group_by=by, phase=chosen), ceilings)
        return ChartView(drawn.chart, drawn.title)

    def report(self, out: str | Path, title: str | None = None, top: int = 10, ceilings: str | None = None) -> Path:
        """This run's report page (``out/index.html``, one file that opens offline), as ``hroofline report``."""
        from hroofline.api.report_page import report

        return report([self], [], title or f"hroofline report: {self.name}", top, ceilings).write(Path(out))

    def advise(self) -> pd.DataFrame:
        """What to change in the step, one row per finding, the most to win first, as ``hroofline advise``."""
        from hroofline.api.advice import advise

        return advise(self)

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
