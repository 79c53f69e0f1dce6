"""The options of the read commands, once for the CLI and the API: their choices, defaults and checks, so that
``hroofline top RUN --by layer -n 5`` and ``run.top(by="layer", n=5)`` take the same names and are refused for
the same reasons. The CLI's parsers take their choices and defaults from here; the API checks with the same
functions (argparse checks the CLI's choices first, with its usage line)."""

from __future__ import annotations

from hroofline.analyze.binding import TOP_SORTS
from hroofline.analyze.kernels import GROUPINGS as KERNEL_GROUPINGS
from hroofline.analyze.kernels import KernelQuery
from hroofline.analyze.ranks import GROUPINGS as RANK_GROUPINGS
from hroofline.analyze.step_points import GROUPINGS as STEP_GROUPINGS
from hroofline.errors import UsageError
from hroofline.model.phases import parse_phase_option
from hroofline.model.quantities import LEVELS
from hroofline.render.text import FORMATS

TOP_GROUPINGS: tuple[str, ...] = ("name", "layer")
RANK_CHART = "rank"  # a stacked bar per rank: its wall time's parts (hroofline/analyze/overlap.py)
CHART_GROUPINGS: tuple[str, ...] = (*KERNEL_GROUPINGS, *STEP_GROUPINGS, RANK_CHART)
SUMMARY_GROUPINGS: tuple[str, ...] = ("phase", *RANK_GROUPINGS)
DEFAULT_KERNELS_GROUPING = "launch"
DEFAULT_TOP = 10  # top's and report's -n
__all__ = ["CHART_GROUPINGS", "FORMATS", "KERNEL_GROUPINGS", "RANK_CHART", "STEP_GROUPINGS", "TOP_SORTS"]


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UsageError(f"{option} {value!r}: not one of {', '.join(choices)}")
    return value


def check_count(option: str, value: int | None) -> int | None:
    """A count such as -n: a whole number, 1 or more (None: no limit, where the option allows it)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"{option} {value!r}: must be a whole number, 1 or more")
    return value


def kernel_query(
    group_by: str,
    phase: str | None = None,
    layer: str | None = None,
    nvtx: str | None = None,
    n: int | None = None,
    sort: str = "time_s",
) -> KernelQuery:
    """The launches a command selects and how it groups them (``group_by``, checked by the caller against its
    choices), checked: the phase a known one or an alias, ``n`` a count."""
    return KernelQuery(
        group_by=group_by,
        phase=parse_phase_option(phase) if phase else None,
        top=check_count("n", n),
        sort=sort,
        layer=layer,
        nvtx=nvtx,
    )


LEVEL_ALIASES = {"l1": "l1", "l2": "l2", "hbm": "hbm", "dram": "hbm"}


def chart_levels(text: str) -> tuple[str, ...]:
    """--level l2,hbm: the memory levels to draw, in the order of the hierarchy."""
    wanted = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - set(LEVEL_ALIASES))
    if unknown or not wanted:
        raise UsageError(f"--level {text!r}: unknown level {', '.join(unknown) or '(none)'}", "use l1, l2 and hbm")
    chosen = {LEVEL_ALIASES[w] for w in wanted}
    return tuple(level for level in LEVELS if level in chosen)


def check_whole_run(
    by: str, phase: str | None, layer: str | None, nvtx: str | None, per_launch: bool, levels: tuple[str, ...] | None
) -> None:
    """A chart of whole runs (--by run or phase): one memory level, and none of the options that pick kernels."""
    if levels is not None and len(levels) > 1:
        raise UsageError("--level: runs are compared at one memory level", "give one of l1, l2, hbm")
    if phase or layer or nvtx or per_launch:
        raise UsageError(f"--by {by} draws whole runs", "leave out --phase, --layer, --nvtx and --per-launch")
