"""The roofs and log-log axes every roofline chart shares: bandwidth diagonals, compute ceilings, labels.

Roofs are built from a frame of drawn points (``ai_<level>`` and FLOP columns) and one value per roof:
only the compute roofs of precisions with FLOPs, each labelled, each bandwidth roof up to the highest
compute roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd

from hroofline.model.numbers import si
from hroofline.model.quantities import LEVEL_LABELS, ROOF_LABELS, compute_roofs_present

LEVEL_COLOURS: dict[str, str] = {"L1": "#e45756", "L2": "#54a24b", "HBM": "#4c78a8"}
ROOF_GREY = "#555555"
CLOSE_ROOFS = 1.6  # compute roofs nearer than this factor get their labels on either side of their lines
WIDTH, HEIGHT = 760, 480

Rows = list[dict[str, object]]


MUTED = "#a8a8a8"  # a second GPU's roofs, drawn behind the first's


@dataclass(frozen=True)
class RoofRows:
    lines: Rows
    labels: Rows
    x_domain: list[float]
    peaks: list[float]

    def merged(self, other: RoofRows) -> RoofRows:
        """Two GPUs' roofs on one chart (``other`` is the muted one)."""
        domain = [min(self.x_domain[0], other.x_domain[0]), max(self.x_domain[1], other.x_domain[1])]
        return RoofRows(
            lines=[*other.lines, *self.lines],
            labels=[*other.labels, *self.labels],
            x_domain=domain,
            peaks=[*self.peaks, *other.peaks],
        )


def roof_rows(
    frame: pd.DataFrame,
    peaks: dict[str, float],
    levels: list[str],
    prefix: str = "",
    muted: bool = False,
    width: float = WIDTH,
) -> RoofRows:
    """Line segments and labels of the roofs, in data coordinates, and the x range they need. ``prefix`` goes
    before each label (a GPU's name); ``muted`` roofs are grey, with their compute labels at their left end."""
    precisions = [p for p in compute_roofs_present(frame) if p in peaks] or [p for p in ("fp32",) if p in peaks]
    bandwidths = {lv: peaks[lv] for lv in levels if lv in peaks}
    top = max((peaks[p] for p in precisions), default=None)
    ais = pd.concat([frame[f"ai_{lv}"] for lv in levels]) if levels else pd.Series(dtype=float)
    ais = ais[ais > 0]
    x_low = _decade_below(float(ais.min()) / 3) if len(ais) else 1e-2
    right_edges = [float(ais.max()) * 3] if len(ais) else [1e3]
    if top:  # room for every ridge point, where a bandwidth roof meets the top compute roof
        right_edges += [top / b * 3 for b in bandwidths.values()]
    x_high = _decade_above(max(right_edges))
    lines: Rows = []
    labels: Rows = []
    for level, bandwidth in bandwidths.items():
        name = LEVEL_LABELS[level]
        x_end = top / bandwidth if top else x_high
        colour = MUTED if muted else LEVEL_COLOURS[name]
        for x_value in (x_low, x_end):
            lines.append(
                {"roof": prefix + name, "x": x_value, "y": bandwidth * x_value, "colour": colour, "dash": "solid"}
            )
        label_x = x_low * 1.6
        labels.append(
            {
                "x": label_x,
                "y": bandwidth * label_x,
                "label": f"{prefix}{name} {si(bandwidth, 'B/s', 4)}",
                "align": "left",
                "rotate": True,
                "colour": colour,
            }
        )
    fastest = max(bandwidths.values(), default=None)
    dots = dot_positions(frame, levels)
    # the chart's own axes (labels are placed before it is drawn): its y range is the dots' and the roofs'
    rates = [rate for _, rate, _ in dots]
    label_axes = Axes([x_low, x_high], y_domain(rates, [peaks[p] for p in precisions]), width)
    circles = [(label_axes.x_px(ai), label_axes.y_px(rate), radius) for ai, rate, radius in dots]
    taken: list[Box] = []  # the compute roofs' labels placed so far
    drawn_peaks = []
    above_at: float | None = None  # the last compute roof labelled above its line
    for peak, names in _equal_roofs(precisions, peaks):
        drawn_peaks.append(peak)
        name = ", ".join(names)
        x_start = peak / fastest if fastest else x_low
        colour = MUTED if muted else ROOF_GREY
        for x_value in (x_start, x_high):
            lines.append({"roof": prefix + name, "x": x_value, "y": peak, "colour": colour, "dash": "dash"})
        text = f"{prefix}{name} {si(peak, 'FLOP/s', 4)}"
        if muted:  # at the left end of its line, clear of the first GPU's labels at the right
            labels.append(
                {"x": x_start * 1.1, "y": peak, "label": text, "align": "left"}
                | {"rotate": False, "colour": colour, "below": False}
            )
            continue
        # Two roofs close together (FP32 and the halved FP16 roof on a V100): the lower one's label goes
        # under its line, so that the two labels do not print over each other.
        close = above_at is not None and above_at / peak < CLOSE_ROOFS
        # at the right end of the line, unless dots sit there: then where the fewest do, along the line,
        # above it or (where a close roof's label is above) below it, or above it left of that label
        places = [(x_high / 1.15, "right", close), (x_start * 1.1, "left", close)]
        places += [(x_start * 1.1 * (x_high / x_start) ** (k / 6), "left", close) for k in range(1, 5)]
        if close:
            places += [(x_start * 1.1 * (x_high / x_start) ** (k / 6), "left", False) for k in range(0, 3)]
        box, spot = min(
            ((_label_box(place, peak, text, label_axes), place) for place in places),
            key=lambda pair: _label_cost(pair[0], circles, taken, width),
        )
        taken.append(box)
        below = spot[2]
        above_at = above_at if below else peak
        labels.append(
            {"x": spot[0], "y": peak, "label": text, "align": spot[1], "rotate": False, "colour": ROOF_GREY}
            | {"below": below}
        )
    return RoofRows(lines=lines, labels=labels, x_domain=[x_low, x_high], peaks=drawn_peaks)


def _equal_roofs(precisions: list[str], peaks: dict[str, float]) -> list[tuple[float, list[str]]]:
    """The compute roofs, fastest first, those of one height as one (FP32 and the FP16 roof halved to ncu's
    counting on a V100 are both 13.46 TFLOP/s: one line, one label naming both, not two labels on one line)."""
    groups: list[tuple[float, list[str]]] = []
    for precision in sorted(precisions, key=lambda p: -peaks[p]):
        peak = peaks[precision]
        if groups and si(groups[-1][0], "FLOP/s", 4) == si(peak, "FLOP/s", 4):  # the label prints one value
            groups[-1][1].append(ROOF_LABELS[precision])
        else:
            groups.append((peak, [ROOF_LABELS[precision]]))
    return groups


LABEL_CHAR_PX, LABEL_HEIGHT_PX, LABEL_MARGIN_PX = 6.5, 14.0, 3.0
OUTSIDE_COST = 100.0  # per pixel of a label outside the plot
FIT_MARGIN = 0.9  # labels are kept within this share of the plot's width
# Largest dot area in px^2; areas scale linearly from 0 so that area is proportional to time.
MAX_DOT_AREA = 900


SUBTITLE_CHARS = 105  # a subtitle line at most as wide as the plot (11 px text), so that a chart sized to its
# container is not pushed narrow by its own title


def subtitle_lines(lines: list[str]) -> list[str]:
    """Subtitle lines wrapped to the plot's width; a wrapped line's rest is indented."""
    import textwrap

    wrapped: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        wrapped += textwrap.wrap(line, SUBTITLE_CHARS, subsequent_indent=indent + "  ", break_on_hyphens=False) or [""]
    return wrapped


def dot_radius_px(seconds: float, longest: float, max_area: float = MAX_DOT_AREA) -> float:
    """The radius of a dot of ``seconds`` when the longest dot's time is ``longest`` (area proportional, the
    longest's ``max_area``)."""
    return math.sqrt(max_area * seconds / longest / math.pi) if longest > 0 else 0.0


def _label_box(place: tuple[float, str, bool], peak: float, text: str, frame_axes: Axes) -> Box:
    """Where a compute roof's label at ``place`` (x, align, below its line) is drawn, in pixels."""
    return _horizontal_label_box(frame_axes.x_px(place[0]), frame_axes.y_px(peak), place[1], place[2], text)


def _horizontal_label_box(x: float, y: float, align: str, below: bool, text: str, gap: float = 0.0) -> Box:
    """The box of a horizontal label anchored at pixel (x, y) on its line: starting or ending there (``align``
    left or right), above or below the line, ``gap`` pixels off it (pixels grow downwards)."""
    width = LABEL_CHAR_PX * len(text)
    left = x - width if align == "right" else x
    top = y + gap if below else y - gap - LABEL_HEIGHT_PX
    return Box(left, top, left + width, top + LABEL_HEIGHT_PX)


def _label_cost(box: Box, circles: list[tuple[float, float, float]], taken: list[Box], width: float) -> float:
    """How bad a place a label's ``box`` is: the radii of the dots (pixel circles) it touches; far worse, every
    pixel outside the plot or over a label already placed."""
    # The chart may be drawn narrower than ``width`` (a page sized to its window), and text does not shrink
    # with it: a margin on the right.
    cost = OUTSIDE_COST * (max(0.0, -box.left) + max(0.0, box.right - width * FIT_MARGIN))
    cost += OUTSIDE_COST * sum(box.overlap(other) for other in taken)
    for x, y, radius in circles:
        reach = radius + LABEL_MARGIN_PX
        if box.left - reach <= x <= box.right + reach and box.top - reach <= y <= box.bottom + reach:
            cost += max(radius, 1.0)
    return cost


def dot_positions(
    frame: pd.DataFrame, levels: list[str], max_area: float = MAX_DOT_AREA
) -> list[tuple[float, float, float]]:
    """(intensity, FLOP/s, radius in pixels) of every dot drawn, where the frame has FLOP/s (and time: dots
    take ``max_area`` px² at most, area proportional to time, as the charts draw them)."""
    if "flop_rate" not in frame:
        return []
    longest = float(frame["time_s"].max()) if "time_s" in frame and frame["time_s"].notna().any() else 0.0
    found = []
    for level in levels:
        for ai, rate, seconds in frame[[f"ai_{level}", "flop_rate", "time_s"]].itertuples(index=False):
            if ai > 0 and rate > 0:
                radius = dot_radius_px(float(seconds), longest, max_area) if seconds == seconds else 0.0
                found.append((float(ai), float(rate), radius))
    return found


@dataclass(frozen=True)
class Box:
    """A rectangle in screen pixels of the plot (y grows downwards)."""

    left: float
    top: float
    right: float
    bottom: float

    def overlap(self, other: Box) -> float:
        """The area both cover, in px^2."""
        width = min(self.right, other.right) - max(self.left, other.left)
        height = min(self.bottom, other.bottom) - max(self.top, other.top)
        return max(0.0, width) * max(0.0, height)

    def outside(self, width: float, height: float) -> float:
        """How far, in pixels, the box reaches beyond a plot of this size."""
        horizontal = max(0.0, -self.left) + max(0.0, self.right - width)
        return horizontal + max(0.0, -self.top) + max(0.0, self.bottom - height)


def label_boxes(roofs: RoofRows, frame_axes: Axes) -> list[Box]:
    """Where the roofs' labels are drawn, as boxes: one per horizontal label, a row of small ones along a
    label written on a diagonal."""
    boxes = []
    diagonal = math.radians(frame_axes.screen_angle(10.0, 10.0))
    for label in roofs.labels:
        x, y = frame_axes.x_px(float(label["x"])), frame_axes.y_px(float(label["y"]))  # type: ignore[arg-type]
        width = LABEL_CHAR_PX * len(str(label["label"]))
        if label.get("rotate"):
            for step in range(0, int(width), int(LABEL_HEIGHT_PX)):
                # the text sits on its baseline, above the line: its middle half a line height up
                cx = x + step * math.cos(diagonal) + LABEL_HEIGHT_PX / 2 * math.sin(diagonal)
                cy = y + step * math.sin(diagonal) - LABEL_HEIGHT_PX / 2 * math.cos(diagonal)
                half = LABEL_HEIGHT_PX / 2
                boxes.append(Box(cx - half, cy - half, cx + half, cy + half))
            continue
        align, below = str(label["align"]), bool(label.get("below"))
        boxes.append(_horizontal_label_box(x, y, align, below, str(label["label"]), gap=3.0))  # drawn 3 px off
    return boxes


@dataclass(frozen=True)
class Axes:
    """Log-log scales with decade ticks, fixed so that roofs, labels and points line up."""

    x_domain: list[float]
    y_domain: list[float]
    width: float = WIDTH  # of the plot, pixels

    def x(self, field: str) -> alt.X:
        # Below 1000 as written (0.01, 0.1, 100), from 1000 on with an SI prefix (1k, 10k, 1M); labels that would
        # touch are left out rather than run together.
        axis = alt.Axis(
            values=_decades(self.x_domain),
            labelExpr="datum.value >= 1000 ? format(datum.value, '~s') : format(datum.value, '~g')",
            labelOverlap=True,
            title="arithmetic intensity (FLOP/byte)",
        )
        return alt.X(f"{field}:Q", axis=axis, scale=alt.Scale(type="log", domain=self.x_domain))

    def y(self, field: str) -> alt.Y:
        axis = alt.Axis(values=_decades(self.y_domain), format="~s", title="performance (FLOP/s)")
        return alt.Y(f"{field}:Q", axis=axis, scale=alt.Scale(type="log", domain=self.y_domain))

    def x_px(self, value: float) -> float:
        """Pixels from the plot's left edge to intensity ``value``."""
        low, high = self.x_domain
        return self.width * math.log10(value / low) / math.log10(high / low)

    def y_px(self, value: float) -> float:
        """Pixels from the plot's top edge to ``value`` FLOP/s."""
        low, high = self.y_domain
        return HEIGHT * (1 - math.log10(value / low) / math.log10(high / low))

    def x_at(self, pixels: float) -> float:
        low, high = self.x_domain
        return low * (high / low) ** (pixels / self.width)

    def y_at(self, pixels: float) -> float:
        low, high = self.y_domain
        return low * (high / low) ** (1 - pixels / HEIGHT)

    def screen_angle(self, x_ratio: float, y_ratio: float) -> float:
        """Degrees (clockwise, as Vega rotates text and shapes) of a step by these factors in x and y."""
        dx = math.log10(x_ratio) * self.width / math.log10(self.x_domain[1] / self.x_domain[0])
        dy = math.log10(y_ratio) * HEIGHT / math.log10(self.y_domain[1] / self.y_domain[0])
        return math.degrees(math.atan2(-dy, dx))


CLIP_TIME_SHARE = 0.005  # the slowest kernels holding this share of the time do not set the y range alone
CLIP_DECADES = 2  # room left below the slowest of the others


def clip_floor(rates: list[float], times: list[float]) -> float | None:
    """The FLOP/s below which dots lie outside the y range drawn, or None when all fit: two decades under the
    slowest rate among the kernels that hold 99.5% of the time. A few kernels of no weight far below the rest
    would otherwise stretch the axis over decades of empty plot."""
    pairs = sorted((rate, seconds if seconds == seconds else 0.0) for rate, seconds in zip(rates, times, strict=True))
    pairs = [(rate, seconds) for rate, seconds in pairs if rate > 0]
    total = sum(seconds for _, seconds in pairs)
    if not pairs or total <= 0:
        return None
    running, slowest_of_the_rest = 0.0, pairs[-1][0]
    for rate, seconds in pairs:
        running += seconds
        if running > CLIP_TIME_SHARE * total:
            slowest_of_the_rest = rate
            break
    floor = _decade_below(slowest_of_the_rest / 10**CLIP_DECADES)
    return floor if pairs[0][0] < floor else None


def y_domain(rates: list[float], peaks: list[float]) -> list[float]:
    """Whole decades from a third of the slowest dot to twice the highest dot or roof."""
    return [_decade_below(min(rates, default=1e9) / 3), _decade_above(max([*rates, *peaks], default=1e12) * 2)]


def axes(roofs: RoofRows, rates: list[float], width: float = WIDTH) -> Axes:
    return Axes(x_domain=list(roofs.x_domain), y_domain=y_domain(rates, roofs.peaks), width=width)


def roof_layers(roofs: RoofRows, frame_axes: Axes) -> list[alt.Chart]:
    """The roof lines, then their labels (to be drawn after the dots): bandwidth labels along their diagonal,
    compute labels above or below their line, each on a white halo."""
    lines = (
        alt.Chart(alt.Data(values=roofs.lines))
        .mark_line(clip=True)
        .encode(
            x=frame_axes.x("x"),
            y=frame_axes.y("y"),
            detail="roof:N",
            color=alt.Color("colour:N", scale=None),
            strokeDash=alt.StrokeDash("dash:N", scale=None, legend=None),
            strokeWidth=alt.value(1.5),
        )
    )
    diagonal = frame_axes.screen_angle(10.0, 10.0)
    groups: dict[tuple[str, bool, bool], Rows] = {}  # one text mark per alignment, side of the line, angle
    for r in roofs.labels:
        groups.setdefault((str(r["align"]), bool(r.get("below")), bool(r.get("rotate"))), []).append(r)
    labels = []
    for (side, below, rotate), rows in sorted(groups.items()):
        text = alt.Chart(alt.Data(values=rows)).encode(x=frame_axes.x("x"), y=frame_axes.y("y"), text="label:N")
        style = {
            "fontSize": 11,
            "clip": True,
            "baseline": "top" if below else "bottom",
            "dy": 3 if below else -3,
            "align": side,
            "angle": diagonal % 360 if rotate else 0,
        }
        # drawn over the dots, on a white halo, so that a dot never hides a roof's label
        labels.append(text.mark_text(**style, stroke="white", strokeWidth=3, strokeJoin="round", opacity=0.85))
        labels.append(text.mark_text(**style).encode(color=alt.Color("colour:N", scale=None)))
    return [lines, *labels]


def _decades(domain: list[float]) -> list[float]:
    low, high = (round(math.log10(v)) for v in domain)
    return [10.0**k for k in range(low, high + 1)]


def _decade_below(value: float) -> float:
    return 10.0 ** math.floor(math.log10(value)) if value > 0 else 1e-3


def _decade_above(value: float) -> float:
    return 10.0 ** math.ceil(math.log10(value)) if value > 0 else 1.0
