"""The host's cost per op, as ``hroofline ceilings --measure`` measured it: what the estimate's host floor is.

Eager PyTorch spends host time on every op (Python, the dispatcher, autograd, a kernel launch); a step whose
kernels are short waits for it. The measurement is seconds of a host-bound step divided by the ops the
estimate counts in it (:func:`hroofline.collect.meta_trace.trace_step`), per kind of step: a training step or
an inference pass, without or with autocast (whose casts are ops of their own).
"""

from __future__ import annotations

from dataclasses import dataclass

# A host that spends 10 ms per op is not what was measured: seconds written as microseconds, or a machine so busy
# that the probes timed it instead.
LONGEST_OP_S = 0.01
STEP_KINDS: tuple[str, ...] = ("train_fp32", "train_amp", "forward_fp32", "forward_amp")
AUTOCAST_PRECISIONS: tuple[str, ...] = ("amp", "amp-bf16")  # the modes whose casts are traced ops


def step_phase(phases: str) -> str:
    """``forward`` for an inference pass, ``train`` for anything else: what a step is, as the host cost and the
    estimate's error band tell kinds of step apart."""
    return "forward" if phases == "forward" else "train"


def step_kind(phases: str, precision: str) -> str:
    """The key of :data:`STEP_KINDS` a prediction's host cost is read from."""
    return f"{step_phase(phases)}_{'amp' if precision in AUTOCAST_PRECISIONS else 'fp32'}"


@dataclass(frozen=True)
class HostCost:
    """Seconds per op of host-bound steps, per kind of step (:data:`STEP_KINDS`), and where they were measured."""

    seconds_per_op: dict[str, float]
    device: str  # cuda (the host launches kernels) or cpu (PyTorch's dispatch alone, no launch)
    measured_on: str  # the CPU, and the GPU where there was one
    probe: str  # what was timed
    origin: str = ""  # the file it was read from

    def per_op(self, phases: str, precision: str) -> float:
        return self.seconds_per_op[step_kind(phases, precision)]

    def describe(self, phases: str, precision: str) -> str:
        """``train_amp, measured on ... by hroofline ceilings --measure (FILE)``: where the number comes from."""
        where = f" ({self.origin})" if self.origin else ""
        launch = "" if self.device == "cuda" else " (PyTorch's dispatch on the CPU, without kernel launches)"
        kind = step_kind(phases, precision)
        return f"{kind}, measured on {self.measured_on}{launch} by hroofline ceilings --measure{where}"
