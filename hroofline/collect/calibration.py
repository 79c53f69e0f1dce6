"""The calibration `hroofline doctor` profiles: workloads whose work is known, so the counters and roofs that
judge them can be checked.

- Large GEMMs per precision (cuBLAS): 2 x M x N x K FLOPs (plus the tiles' padding), and cuBLAS reaches 85-95%
  of the dense tensor peak on them (H100: BF16 and FP16 93.8%, TF32 93.5%, FP64 DMMA 94.9%; ../shared/fixtures/h100).
- A device-to-device copy: it reads and writes its bytes once each, at main memory.

The cases (:mod:`hroofline.work.calibration`) are the shared H100 calibration's (``gemm_calibration.py``): a
report made with that script is a calibration report too. Run as a script under ncu (``python .../calibration.py
CASE ...``), it marks one profiled step with ``hroofline.profiled_step`` and the phase ``forward``.
"""

from __future__ import annotations

import sys

from hroofline.work.calibration import CASES

STEPS = 3  # profiled_step entries: the first warms up, the session collects the one it is told to


def run(names: list[str]) -> None:
    import torch

    import hroofline

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
    dtypes["fp64"] = torch.float64
    chosen = [case for case in CASES if case.name in names]
    operands = {}
    for case in chosen:
        if case.name == "copy":
            # float32 into int32: a conversion kernel that reads and writes 4 bytes per element and does no
            # floating-point arithmetic. A same-dtype copy_ is a cudaMemcpy, which ncu does not profile (an
            # H100 calibration of 2026-11-27 had no copy launch).
            target = torch.empty(case.size, device="cuda", dtype=torch.int32)
            operands[case.name] = (torch.ones(case.size, device="cuda"), target)
        else:
            shape = (case.size, case.size)
            operands[case.name] = tuple(torch.randn(shape, device="cuda", dtype=dtypes[case.name]) for _ in "ab")
    for _ in range(STEPS):
        with hroofline.profiled_step(), hroofline.phase("forward"):
            for case in chosen:
                torch.backends.cuda.matmul.allow_tf32 = case.name == "tf32"
                first, second = operands[case.name]
                for _ in range(case.launches):
                    if case.name == "copy":
                        second.copy_(first)
                    else:
                        torch.mm(first, second)
    torch.cuda.synchronize()


if __name__ == "__main__":
    run(sys.argv[1:] or [case.name for case in CASES])
