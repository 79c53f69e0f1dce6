"""The calibration's known work: large cuBLAS GEMMs per precision and a device copy, what one launch of each
must do (:mod:`hroofline.collect.calibration` runs them; :mod:`hroofline.analyze.doctor` checks them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One kind of calibration launch: what it runs, how many times, and the work one launch must do."""

    name: str  # bf16, fp16, tf32, fp32, fp64, copy
    size: int  # GEMMs: M = N = K; the copy: float32 elements
    launches: int = 2

    @property
    def flops(self) -> float:
        """2 x M x N x K (no FLOPs for the copy)."""
        return 0.0 if self.name == "copy" else 2.0 * self.size**3

    @property
    def bytes(self) -> float:
        """The copy's bytes at main memory: it reads and writes each float32 once."""
        return 2.0 * 4 * self.size if self.name == "copy" else 0.0


CASES: tuple[Case, ...] = (
    Case("bf16", 8192),
    Case("fp16", 8192),
    Case("tf32", 8192),
    Case("fp32", 4096),
    Case("fp64", 4096),
    Case("copy", 2**28),  # 1 GiB each way
)
