"""The ``[host]`` table of a ceilings file: the host's seconds per op that ``hroofline ceilings --measure`` wrote,
read for ``predict --host FILE``."""

from __future__ import annotations

import math
from pathlib import Path

from hroofline.errors import InputError
from hroofline.model.host import LONGEST_OP_S, STEP_KINDS, HostCost
from hroofline.roofs.ceilings import read_toml_file

MEASURE_HINT = "write one with: hroofline ceilings --measure [--device cuda] --out FILE"


def host_table(cost: HostCost) -> list[str]:
    """The ``[host]`` table's lines (TOML), as :func:`load_host_cost` reads them."""
    lines = [
        "",
        "# The host's seconds per op in host-bound steps: predict --host FILE takes them as the estimate's host floor.",
        "[host]",
        f'device = "{cost.device}"',
        f'measured_on = "{cost.measured_on}"',
        f'probe = "{cost.probe}"',
    ]
    return lines + [f"{kind} = {cost.seconds_per_op[kind]:.4e}" for kind in STEP_KINDS]


def load_host_cost(path: Path) -> HostCost:
    """The host cost a ceilings file holds; a file without a ``[host]`` table, or with a wrong one, is refused."""
    if not path.is_file():
        raise InputError(f"host file {path} does not exist", MEASURE_HINT)
    data = read_toml_file(path, "host file")
    table = data.get("host")
    if not isinstance(table, dict):
        raise InputError(f"{path} has no [host] table", MEASURE_HINT)
    seconds: dict[str, float] = {}
    for kind in STEP_KINDS:
        value = table.get(kind)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise InputError(f"{path}: [host] {kind} must be a positive number of seconds, not {value!r}", MEASURE_HINT)
        if value > LONGEST_OP_S:
            raise InputError(
                f"{path}: [host] {kind} = {value:g} s per op is too long", "values are seconds: 30 us is 3e-05"
            )
        seconds[kind] = float(value)
    device = str(table.get("device", ""))
    if device not in ("cpu", "cuda"):
        raise InputError(f"{path}: [host] device must be cpu or cuda, not {device!r}", MEASURE_HINT)
    return HostCost(seconds, device, str(table.get("measured_on", "")), str(table.get("probe", "")), str(path))
