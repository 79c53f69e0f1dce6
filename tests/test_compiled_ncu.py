"""ncu's measured FLOPs against the trace's analytic ones on the same compiled step (issue 46): GPT-2 (batch 8 x 512
tokens, bf16 autocast, the model torch.compile'd in its default mode), one training step on an H200, once under
ncu (every launch, tests/data/gpu-2026-11-28/ncu/, the third device call) and once under torch.profiler
(tests/data/gpu-2026-11-28/traces/, the second call), both by tests/data/gpu-2026-11-28/compiled_step.py (README
there). The trace's FLOPs come from the ops' shapes, Inductor's kernel_flop and the fused kernels' tensors; ncu's
are the instructions the kernels executed, so they also hold what the model does not ask for (padding, masked
attention blocks)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

import hroofline
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "gpu-2026-11-28"
REPORT = DATA / "ncu" / "gpt2-bf16-compiled.ncu-rep.xz"
TRACE = DATA / "traces" / "gpt2-bf16-compiled-trace.json.xz"


@cache
def _kernels(path: Path) -> pd.DataFrame:
    import tempfile

    launches = hroofline.import_run(path, "step", gpu="h200", store=Path(tempfile.mkdtemp())).launches
    # an ncu report holds kernels alone (no category); a trace its copies and sets too
    return launches[launches["category"].fillna("kernel") == "kernel"]


def _flops_by_phase(kernels: pd.DataFrame) -> pd.Series:
    columns = [c for c in kernels.columns if c.startswith("flops_") and c != "flops_tensor"]
    return kernels[columns].sum(axis=1).groupby(kernels["phase"]).sum()


def test_the_compiled_steps_flops_under_ncu_and_in_its_trace_agree_within_5_percent() -> None:
    measured, analytic = _kernels(REPORT), _kernels(TRACE)
    # the same step: the same kernels launched, phase by phase (239 forward, 435 backward, 21 optimizer)
    assert measured.groupby("phase").size().to_dict() == analytic.groupby("phase").size().to_dict()
    assert len(measured) == 695
    # ... and the same Inductor kernels by name (other names are demangled differently: "<unnamed>" in one,
    # "(anonymous namespace)" in the other)
    triton = [sorted(k.loc[k["kernel"].str.startswith("triton_"), "kernel"]) for k in (measured, analytic)]
    assert triton[0] == triton[1] and len(triton[0]) > 400
    by_phase = pd.concat({"ncu": _flops_by_phase(measured), "trace": _flops_by_phase(analytic)}, axis=1)
    for phase in ("forward", "backward"):
        ncu, trace = by_phase.at[phase, "ncu"], by_phase.at[phase, "trace"]
        assert trace == pytest.approx(ncu, rel=0.05), f"{phase}: trace {trace:.4g} vs ncu {ncu:.4g}"
        assert ncu >= trace  # the kernels do at least the model's work (Inductor pads lm_head to 50,264 columns)
    total_ncu, total_trace = by_phase["ncu"].sum(), by_phase["trace"].sum()
    assert total_trace == pytest.approx(total_ncu, rel=0.05)
    # the optimizer's foreach kernels: ncu counts their FP32 arithmetic; the trace's tensor lists have no shapes
    # (over 30 tensors: PyTorch's profiler records none), so their work is unknown, not 0
    assert by_phase.at["optimizer", "ncu"] > 0
    optimizer = analytic[analytic["phase"] == "optimizer"]
    assert optimizer["flops_fp32"].isna().all()
