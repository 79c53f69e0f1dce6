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

from hroofline.analyze.roofs import compute_roofs_present
from hroofline.ceilings import LEVEL_LABELS, ROOF_LABELS
from hroofline.render.numbers import si

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
    frame: pd.DataFrame, peaks: dict[str, float], levels: list[str], prefix: str = "", muted: bool = False
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
    dots = _dots(frame, levels)
    drawn_peaks = []
    above_at: float | None = None  # the last compute roof labelled above its line
    for precision in sorted(precisions, key=lambda p: -peaks[p]):
        peak = peaks[precision]
        drawn_peaks.append(peak)
        name = ROOF_LABELS[precision]
        x_start = peak / fastest if fastest else x_low
        colour = MUTED if muted else ROOF_GREY
        for x_value in (x_start, x_high):
            lines.append({"roof": prefix + name, "x": x_value, "y": peak, "colour": colour, "dash": "dash"})
        if muted:  # at the left end of its line, clear of the first GPU's labels at the right
            labels.append(
                {"x": x_start * 1.1, "y": peak, "label": f"{prefix}{name} {si(peak, 'FLOP/s', 4)}", "align": "left"}
                | {"rotate": False, "colour": colour, "below": False}
            )
            continue
        # Two roofs close together (FP32 and the halved FP16 roof on a V100): the lower one's label goes
        # under its line, so that the two labels do not print over each other.
        close = above_at is not None and above_at / peak < CLOSE_ROOFS
        text = f"{prefix}{name} {si(peak, 'FLOP/s', 4)}"
        # at the right end of the line, unless dots sit there: then where the fewest do, along the line,
        # above it or (where a close roof's label is above) below it, or above it left of that label
        places = [(x_high / 1.15, "right", close), (x_start * 1.1, "left", close)]
        places += [(x_start * 1.1 * (x_high / x_start) ** (k / 6), "left", close) for k in range(1, 5)]
        if close:
            places += [(x_start * 1.1 * (x_high / x_start) ** (k / 6), "left", False) for k in range(0, 3)]
        spot = min(places, key=lambda place: _dots_under(place[:2], peak, place[2], text, dots, (x_low, x_high)))
        below = spot[2]
        above_at = above_at if below else peak
        labels.append(
            {"x": spot[0], "y": peak, "label": text, "align": spot[1], "rotate": False, "colour": ROOF_GREY}
            | {"below": below}
        )
    return RoofRows(lines=lines, labels=labels, x_domain=[x_low, x_high], peaks=drawn_peaks)


LABEL_CHAR_PX, LABEL_HEIGHT_PX, LABEL_MARGIN_PX = 6.5, 14.0, 3.0
# Largest dot area in px^2; areas scale linearly from 0 so that area is proportional to time.
MAX_DOT_AREA = 900


def dot_radius_px(seconds: float, longest: float) -> float:
    """The radius of a dot of ``seconds`` when the longest dot's time is ``longest`` (area proportional)."""
    return math.sqrt(MAX_DOT_AREA * seconds / longest / math.pi) if longest > 0 else 0.0


def _dots_under(
    place: tuple[float, str],
    peak: float,
    below: bool,
    text: str,
    dots: list[tuple[float, float, float]],
    x_range: tuple[float, float],
) -> float:
    """How much of the dots a compute roof's label would cover at ``place`` (x, align): the radii, in pixels,
    of the dots its box (approximate pixels on the log axes) touches."""
    if not dots:
        return 0.0
    frame_axes = Axes(list(x_range), y_domain([rate for _, rate, _ in dots], [peak]))
    x0 = frame_axes.x_px(place[0])
    width = LABEL_CHAR_PX * len(text)
    left, right = (x0 - width, x0) if place[1] == "right" else (x0, x0 + width)
    top = frame_axes.y_px(peak) - (0 if below else LABEL_HEIGHT_PX)  # pixels grow downwards
    bottom = top + LABEL_HEIGHT_PX
    covered = 0.0
    for ai, rate, radius in dots:
        reach = radius + LABEL_MARGIN_PX
        x, y = frame_axes.x_px(ai), frame_axes.y_px(rate)
        if left - reach <= x <= right + reach and top - reach <= y <= bottom + reach:
            covered += max(radius, 1.0)
    return covered


def _dots(frame: pd.DataFrame, levels: list[str]) -> list[tuple[float, float, float]]:
    """(intensity, FLOP/s, radius in pixels) of every dot drawn, where the frame has FLOP/s (and time: dots
    are taken at most 17 px across, area proportional to time, as the charts draw them)."""
    if "flop_rate" not in frame:
        return []
    longest = float(frame["time_s"].max()) if "time_s" in frame and frame["time_s"].notna().any() else 0.0
    found = []
    for level in levels:
        for ai, rate, seconds in frame[[f"ai_{level}", "flop_rate", "time_s"]].itertuples(index=False):
            if ai > 0 and rate > 0:
                radius = dot_radius_px(float(seconds), longest) if seconds == seconds else 0.0
                found.append((float(ai), float(rate), radius))
    return found


@dataclass(frozen=True)
class Axes:
    """Log-log scales with decade ticks, fixed so that roofs, labels and points line up."""

    x_domain: list[float]
    y_domain: list[float]

    def x(self, field: str) -> alt.X:
        axis = alt.Axis(values=_decades(self.x_domain), format="~g", title="arithmetic intensity (FLOP/byte)")
        return alt.X(f"{field}:Q", axis=axis, scale=alt.Scale(type="log", domain=self.x_domain))

    def y(self, field: str) -> alt.Y:
        axis = alt.Axis(values=_decades(self.y_domain), format="~s", title="performance (FLOP/s)")
        return alt.Y(f"{field}:Q", axis=axis, scale=alt.Scale(type="log", domain=self.y_domain))

    def x_px(self, value: float) -> float:
        """Pixels from the plot's left edge to intensity ``value``."""
        low, high = self.x_domain
        return WIDTH * math.log10(value / low) / math.log10(high / low)

    def y_px(self, value: float) -> float:
        """Pixels from the plot's top edge to ``value`` FLOP/s."""
        low, high = self.y_domain
        return HEIGHT * (1 - math.log10(value / low) / math.log10(high / low))

    def x_at(self, pixels: float) -> float:
        low, high = self.x_domain
        return low * (high / low) ** (pixels / WIDTH)

    def y_at(self, pixels: float) -> float:
        low, high = self.y_domain
        return low * (high / low) ** (1 - pixels / HEIGHT)

    def screen_angle(self, x_ratio: float, y_ratio: float) -> float:
        """Degrees (clockwise, as Vega rotates text and shapes) of a step by these factors in x and y."""
        dx = math.log10(x_ratio) * WIDTH / math.log10(self.x_domain[1] / self.x_domain[0])
        dy = math.log10(y_ratio) * HEIGHT / math.log10(self.y_domain[1] / self.y_domain[0])
        return math.degrees(math.atan2(-dy, dx))


def y_domain(rates: list[float], peaks: list[float]) -> list[float]:
    """Whole decades from a third of the slowest dot to twice the highest dot or roof."""
    return [_decade_below(min(rates, default=1e9) / 3), _decade_above(max([*rates, *peaks], default=1e12) * 2)]


def axes(roofs: RoofRows, rates: list[float]) -> Axes:
    return Axes(x_domain=list(roofs.x_domain), y_domain=y_domain(rates, roofs.peaks))


def roof_layers(roofs: RoofRows, frame_axes: Axes) -> list[alt.Chart]:
    """The roof lines, then their labels: bandwidth labels along their diagonal, compute labels above."""
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
    groups = sorted({(str(r["align"]), bool(r.get("below")), bool(r.get("rotate"))) for r in roofs.labels})
    labels = [
        alt.Chart(
            alt.Data(
                values=[
                    r
                    for r in roofs.labels
                    if (r["align"], bool(r.get("below")), bool(r.get("rotate"))) == (side, below, rotate)
                ]
            )
        )
        .mark_text(
            fontSize=11,
            clip=True,
            baseline="top" if below else "bottom",
            dy=3 if below else -3,
            align=side,
            angle=diagonal % 360 if rotate else 0,
        )
        .encode(x=frame_axes.x("x"), y=frame_axes.y("y"), text="label:N", color=alt.Color("colour:N", scale=None))
        for side, below, rotate in groups
    ]
    return [lines, *labels]


def _decades(domain: list[float]) -> list[float]:
    low, high = (round(math.log10(v)) for v in domain)
    return [10.0**k for k in range(low, high + 1)]


def _decade_below(value: float) -> float:
    return 10.0 ** math.floor(math.log10(value)) if value > 0 else 1e-3


def _decade_above(value: float) -> float:
    return 10.0 ** math.ceil(math.log10(value)) if value > 0 else 1.0
