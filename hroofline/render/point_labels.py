"""Which dot is which, in every format: the top kernels by time get a number beside their dot, and the chart
a key from numbers to names.

A number sits beside the kernel's rightmost dot (its highest intensity: its other dots lie left of it on the
same row): at its upper right where that is free, else at the first of the other sides around it that covers
no roof label, number or other dot and stays inside the plot. Names would not fit: they are long, the dots
crowd, and a label would cover a roof or another kernel. The numbers are placed in screen pixels on the
chart's log axes and turned back into data coordinates, so they sit where they were placed in HTML, PNG and
SVG alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hroofline.render.axes import HEIGHT, Axes, Box

NUMBER_OFFSET_PX = 4  # beyond the dot's edge: clear of it down to 85% of the chart's size
MAX_NAME_CHARS = 60
DIGIT_WIDTH_PX, NUMBER_HEIGHT_PX = 8.0, 13.0
# Directions tried, best first: (dx, dy) on screen, y downwards. Upper right first: a kernel's other dots
# lie left of its rightmost one.
DIRECTIONS = ((1, -1), (1, 0), (1, 1), (0, -1), (-1, -1), (0, 1), (-1, 1), (-1, 0))
COVER_COST = {"label": 10.0, "number": 10.0, "dot": 1.0}


@dataclass(frozen=True)
class NumberedDot:
    number: int
    label_x: float  # data coordinates of the number
    label_y: float
    name: str  # for the chart's key


def shortened(text: str) -> str:
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def number_dots(
    dots: list[tuple[float, float, float, str]],
    frame_axes: Axes,
    obstacles: Sequence[Box] = (),
    all_dots: Sequence[tuple[float, float, float]] = (),
) -> list[NumberedDot]:
    """Numbers 1, 2, ... for ``dots`` (intensity, FLOP/s, radius in pixels, name), in the order given, each
    where it covers least of ``obstacles`` (roof labels), the numbers placed before it and ``all_dots``
    (intensity, FLOP/s, radius)."""
    anchors = [(x, y, radius, DIGIT_WIDTH_PX * len(str(n))) for n, (x, y, radius, _) in enumerate(dots, start=1)]
    corners = place_texts(anchors, frame_axes, obstacles, all_dots)
    return [
        NumberedDot(number, x, y, shortened(dot[3]))
        for number, ((x, y), dot) in enumerate(zip(corners, dots, strict=True), start=1)
    ]


def place_texts(
    anchors: Sequence[tuple[float, float, float, float]],
    frame_axes: Axes,
    obstacles: Sequence[Box] = (),
    all_dots: Sequence[tuple[float, float, float]] = (),
) -> list[tuple[float, float]]:
    """For texts beside dots (intensity, FLOP/s, the dot's radius and the text's width in pixels): the data
    coordinates of each text's lower left corner (draw it left-aligned on its baseline there), in the first
    direction around its dot that covers least of the obstacles, the texts placed before it and the other dots."""
    circles = [(frame_axes.x_px(x), frame_axes.y_px(y), r) for x, y, r in all_dots]
    placed: list[Box] = []
    corners = []
    for x, y, radius, width in anchors:
        cx, cy = frame_axes.x_px(x), frame_axes.y_px(y)
        # only the dots a box beside this one can reach: the others add nothing to any candidate's cost
        reach = radius + NUMBER_OFFSET_PX + max(width, NUMBER_HEIGHT_PX)
        others = [
            c
            for c in circles
            if c != (cx, cy, radius) and abs(c[0] - cx) <= reach + c[2] and abs(c[1] - cy) <= reach + c[2]
        ]
        box = min(
            (_text_box(cx, cy, radius, direction, width) for direction in DIRECTIONS),
            key=lambda candidate: _cost(candidate, frame_axes, obstacles, placed, others),
        )
        placed.append(box)
        corners.append((frame_axes.x_at(box.left), frame_axes.y_at(box.bottom)))
    return corners


def _text_box(cx: float, cy: float, radius: float, direction: tuple[int, int], width: float) -> Box:
    """The box of a text beside a dot, in ``direction`` from its centre, just clear of its edge."""
    height = NUMBER_HEIGHT_PX
    dx, dy = direction
    reach = radius * (math.sqrt(0.5) if dx and dy else 1.0) + NUMBER_OFFSET_PX
    anchor_x, anchor_y = cx + dx * reach, cy + dy * reach
    left = anchor_x if dx > 0 else anchor_x - width if dx < 0 else anchor_x - width / 2
    top = anchor_y - height if dy < 0 else anchor_y if dy > 0 else anchor_y - height / 2
    return Box(left, top, left + width, top + height)


def _cost(
    box: Box,
    frame_axes: Axes,
    labels: Sequence[Box],
    texts: Sequence[Box],
    circles: Sequence[tuple[float, float, float]],
) -> float:
    cost = 100.0 * box.outside(frame_axes.width, HEIGHT)
    cost += COVER_COST["label"] * sum(box.overlap(other) for other in labels)
    cost += COVER_COST["number"] * sum(box.overlap(other) for other in texts)
    for x, y, r in circles:
        cost += COVER_COST["dot"] * box.overlap(Box(x - r, y - r, x + r, y + r))
    return cost
