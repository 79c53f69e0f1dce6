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

from hroofline.render.roofs import HEIGHT, WIDTH, Axes, Box

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
    circles = [(frame_axes.x_px(x), frame_axes.y_px(y), r) for x, y, r in all_dots]
    placed: list[Box] = []
    numbered = []
    for number, (x, y, radius, name) in enumerate(dots, start=1):
        cx, cy = frame_axes.x_px(x), frame_axes.y_px(y)
        own = (cx, cy, radius)
        box = min(
            (_number_box(cx, cy, radius, direction, len(str(number))) for direction in DIRECTIONS),
            key=lambda candidate: _cost(candidate, obstacles, placed, [c for c in circles if c != own]),
        )
        placed.append(box)
        # the text is drawn left-aligned on its baseline: the box's lower left corner
        numbered.append(NumberedDot(number, frame_axes.x_at(box.left), frame_axes.y_at(box.bottom), shortened(name)))
    return numbered


def _number_box(cx: float, cy: float, radius: float, direction: tuple[int, int], digits: int) -> Box:
    """The box of a number beside a dot, in ``direction`` from its centre, just clear of its edge."""
    width, height = DIGIT_WIDTH_PX * digits, NUMBER_HEIGHT_PX
    dx, dy = direction
    reach = radius * (math.sqrt(0.5) if dx and dy else 1.0) + NUMBER_OFFSET_PX
    anchor_x, anchor_y = cx + dx * reach, cy + dy * reach
    left = anchor_x if dx > 0 else anchor_x - width if dx < 0 else anchor_x - width / 2
    top = anchor_y - height if dy < 0 else anchor_y if dy > 0 else anchor_y - height / 2
    return Box(left, top, left + width, top + height)


def _cost(
    box: Box, labels: Sequence[Box], numbers: Sequence[Box], circles: Sequence[tuple[float, float, float]]
) -> float:
    cost = 100.0 * box.outside(WIDTH, HEIGHT)
    cost += COVER_COST["label"] * sum(box.overlap(other) for other in labels)
    cost += COVER_COST["number"] * sum(box.overlap(other) for other in numbers)
    for x, y, r in circles:
        cost += COVER_COST["dot"] * box.overlap(Box(x - r, y - r, x + r, y + r))
    return cost
