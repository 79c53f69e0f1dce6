"""Writing charts to files, chosen by extension: a registry of one writer per format.

.html  self-contained interactive page (JavaScript inlined, works offline)
.png   image rendered without a browser by vl-convert (2x scale)
.svg   vector image rendered by vl-convert
.json  the Vega-Lite spec itself
Every file is written to a temporary name beside the target and renamed over it, so a failed or
interrupted write never leaves a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hroofline.errors import HrooflineError, UsageError
from hroofline.render.html_page import ChartBlock, page, vega_lite_version

PNG_SCALE = 2.0

Spec = dict[str, Any]


def _html(spec: Spec, title: str) -> bytes:
    return page(title, ChartBlock("chart-1", spec).html()).encode()


def _png(spec: Spec, title: str) -> bytes:
    import vl_convert

    return bytes(vl_convert.vegalite_to_png(spec, vl_version=vega_lite_version(), scale=PNG_SCALE))


def _svg(spec: Spec, title: str) -> bytes:
    import vl_convert

    return vl_convert.vegalite_to_svg(spec, vl_version=vega_lite_version()).encode()


def _json(spec: Spec, title: str) -> bytes:
    return (json.dumps(spec, indent=2, allow_nan=False) + "\n").encode()


CHART_WRITERS: dict[str, Callable[[Spec, str], bytes]] = {".html": _html, ".png": _png, ".svg": _svg, ".json": _json}


def chart_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in CHART_WRITERS:
        raise UsageError(f"cannot tell the chart format of {path}", "use a file ending in .html, .png, .svg or .json")
    return suffix


def write_chart(spec: Spec, path: Path, title: str) -> None:
    data = CHART_WRITERS[chart_format(path)](spec, title)
    write_atomically(path, data)


def write_atomically(path: Path, data: bytes) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise HrooflineError(f"cannot write {path}: folder {folder} does not exist")
    if path.is_dir():
        raise HrooflineError(f"cannot write {path}: it is a folder")
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise HrooflineError(f"cannot write {path}: {error.strerror}") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; an output file should read like any other
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise HrooflineError(f"cannot write {path}: {error.strerror}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
