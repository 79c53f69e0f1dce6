"""The compile log's warnings name the log, not the import option: `profile --compile` writes its own log and reads
it back (collect/compile_log.py), and its user never typed --compile-log."""

from __future__ import annotations

import pandas as pd

from hroofline.importers.compiled_layers import with_compiled_layers
from hroofline.importers.kineto_links import LaunchLink


def test_a_trace_with_no_compiled_launch_is_told_in_words_both_commands_fit() -> None:
    eager = LaunchLink(launch_s=0.0, op=None, candidates=(), ranges=(), phase="forward", step=None, layer="model.fc")
    frame = pd.DataFrame({"phase": ["forward"], "layer": ["model.fc"], "category": ["kernel"], "time_s": [1e-3]})
    placed, notes, (warning,) = with_compiled_layers(frame, [eager], {})
    assert warning.startswith("the compile log places nothing: no launch of the trace ran in a compiled graph")
    assert notes == [] and placed["layer"].tolist() == ["model.fc"]
