"""A compiled step's compile log: what ``TORCH_TRACE=DIR INDUCTOR_PROVENANCE=1`` writes, switched on in this process
around the compilation, so that ``profile --compile`` places its compiled kernels on their modules
(:mod:`hroofline.importers.inductor_provenance`).

The trace backend runs the step in this process, and torch reads both variables once: ``TORCH_TRACE`` when it is
imported (``torch._logging._init_logs`` makes the trace log's handler then), ``INDUCTOR_PROVENANCE`` when
``torch._inductor.config`` is (the option's default). In a notebook, in the tests, in any caller of the API, torch
is imported before the profile starts, so setting them then changes nothing. What they switch on is switched on
here instead, for the compilation only: a handler on torch's structured trace log writing into the folder (its
entries are written only while the log has a handler), and Inductor's ``trace.provenance_tracking_level`` 1. And
the compilation gets a fresh Inductor cache: a graph found in the cache, compiled without provenance, logs output
code that names no launch site's provenance (the cache key leaves the ``trace.*`` options out).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from hroofline.errors import InputError
from hroofline.importers.inductor_provenance import CompiledGraph, layers_from_compile_log
from hroofline.model.layers import COMPILED

PROVENANCE_OPTION = "trace.provenance_tracking_level"  # what INDUCTOR_PROVENANCE=1 sets
COMPILE_LOG_DIR = "compile-log"  # beside the trace: ``hroofline import trace.json --compile-log compile-log``


@contextlib.contextmanager
def compile_logged(folder: Path) -> Iterator[None]:
    """torch.compile's structured log with Inductor's provenance, into ``folder`` (emptied first), while inside;
    the compilation's cache a fresh one in the temporary folder, removed after. A PyTorch without the provenance
    option (an older one) logs no provenance: :func:`read_compile_log` then says so."""
    import torch._inductor.config as inductor_config
    import torch._inductor.utils as inductor_utils
    from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter, trace_log

    shutil.rmtree(folder, ignore_errors=True)  # an earlier profile's log is not this compilation's
    folder.mkdir(parents=True)
    handler = LazyTraceHandler(str(folder))
    handler.setFormatter(TorchLogsFormatter(trace=True))
    provenance = {PROVENANCE_OPTION: 1} if hasattr(inductor_config.trace, "provenance_tracking_level") else {}
    fresh_cache = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache  # its older name
    trace_log.addHandler(handler)
    try:
        with inductor_config.patch(provenance), fresh_cache():
            yield
    finally:
        trace_log.removeHandler(handler)
        handler.close()


def read_compile_log(folder: Path) -> tuple[Mapping[str, CompiledGraph] | None, list[str]]:
    """The compiled graphs of the log written in ``folder``, or None and the one warning saying why not (the
    compiled kernels then keep the compiled region's label)."""
    try:
        return layers_from_compile_log(folder), []
    except InputError as error:
        unread = f"--compile: the compile log is not readable ({error.one_line()})"
        return None, [f"{unread}: the compiled kernels keep the layer {COMPILED}"]
