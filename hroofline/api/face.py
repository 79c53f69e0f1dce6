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

        return pd.DataFrame(phase_summary(self)).T.rename_axis("phase")

    def kernels(
        self, group_by: str = "name", phase: str | None = None, layer: str | None = None, sort: str = "time_s"
    ) -> pd.DataFrame:
        """The kernel table: per ``launch``, kernel ``name`` or ``layer`` (within each phase), optionally of one
        phase and of the layers matching ``layer`` (a module path and below it, or a glob)."""
        from hroofline.analyze.kernels import KernelQuery, kernel_table

        chosen = parse_phase_option(phase) if phase else None
        return kernel_table(self, KernelQuery(group_by=group_by, phase=chosen, sort=sort, layer=layer))

    def top(
        self, n: int = 10, by: str = "name", phase: str | None = None, sort: str = "time_s", ceilings: str | None = None
    ) -> pd.DataFrame:
        """Kernel names (or layers: ``by="layer"``) ranked by ``sort``, with binding roof, % of roof, time at
        roof and recoverable time, against the run's roofs (or ``ceilings``)."""
        from hroofline.analyze.kernels import KernelQuery
        from hroofline.api.outputs import top

        chosen = parse_phase_option(phase) if phase else None
        return top(self, KernelQuery(group_by=by, phase=chosen, top=n, sort=sort), ceilings).table

    def chart(self, by: str = "name", phase: str | None = None, ceilings: str | None = None) -> Any:
        """The hierarchical roofline as an Altair chart (displayed inline in Jupyter; ``.save("x.html")``)."""
        from hroofline.analyze.kernels import KernelQuery
        from hroofline.api.outputs import roofline

        chosen = parse_phase_option(phase) if phase else None
        return roofline(self, KernelQuery(group_by=by, phase=chosen), ceilings).chart

    def report(self, out: str | Path, title: str | None = None, top: int = 10, ceilings: str | None = None) -> Path:
        """This run's report page (``out/index.html``, one file that opens offline), as ``hroofline report``."""
        from hroofline.api.report_page import report

        return report([self], [], title or f"hroofline report: {self.name}", top, ceilings).write(Path(out))

    def advise(self) -> pd.DataFrame:
        """What to change in the step, one row per finding, the most to win first, as ``hroofline advise``."""
        from hroofline.api.advice import advise

        return advise(self)

    def _repr_html_(self) -> str:
        from html import escape

        return f"<p><b>{escape(self.name)}</b></p>" + self.summary().to_html(na_rep="-")
