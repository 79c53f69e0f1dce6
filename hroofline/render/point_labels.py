"""Which dot is which, in every format: the top kernels by time get a number beside their dot, and the chart
a key from numbers to names.

A number sits at the upper right of the kernel's rightmost dot (its highest intensity: its other dots lie
left of it on the same row). Names would not fit: they are long, the dots crowd, and a label would cover a
roof or another kernel. The numbers are placed in screen pixels on the chart's log axes and turned back into
data coordinates, so they sit where they were placed in HTML, PNG and SVG alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hroofline.render.roofs import Axes

NUMBER_OFFSET_PX = 3  # beyond the dot's edge, up and to the right
MAX_NAME_CHARS = 60


@dataclass(frozen=True)
class NumberedDot:
    number: int
    label_x: float  # data coordinates of the number
    label_y: float
    name: str  # for the chart's key


def shortened(text: str) -> str:
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def number_dots(dots: list[tuple[float, float, float, str]], frame_axes: Axes) -> list[NumberedDot]:
    """Numbers 1, 2, ... for ``dots`` (intensity, FLOP/s, radius in pixels, name), in the order given."""
    numbered = []
    for number, (x, y, radius, name) in enumerate(dots, start=1):
        step = radius * math.sqrt(0.5) + NUMBER_OFFSET_PX  # along the diagonal, clear of the dot
        label_x = frame_axes.x_at(frame_axes.x_px(x) + step)
        label_y = frame_axes.y_at(frame_axes.y_px(y) - step)
        numbered.append(NumberedDot(number, label_x, label_y, shortened(name)))
    return numbered
