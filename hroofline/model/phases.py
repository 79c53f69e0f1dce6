"""Canonical phases (a training step's; a serving step's: prefill, decode or mixed) and the names that map to
them."""

from __future__ import annotations

from collections.abc import Sequence

from hroofline.errors import UsageError

ALIASES: dict[str, str] = {
    "forward": "forward",
    "fw": "forward",
    "fwd": "forward",
    "backward": "backward",
    "bw": "backward",
    "bwd": "backward",
    "optimizer": "optimizer",
    "opt": "optimizer",
    "optimizer_step": "optimizer",
    "step": "optimizer",
    "prefill": "prefill",
    "decode": "decode",
    "mixed": "mixed",  # a serving step with requests in prefill and in decode
    "other": "other",
}


def canonical_phase(name: str) -> str | None:
    """'FWD' -> 'forward'; None for a name that is no phase."""
    return ALIASES.get(name.strip().lower())


def parse_phase_option(name: str) -> str:
    phase = canonical_phase(name)
    if phase is None:
        raise UsageError(
            f"unknown phase {name!r}",
            "use forward (fw, fwd), backward (bw, bwd), optimizer (opt, optimizer_step, step), prefill, decode, "
            "mixed or other",
        )
    return phase


def phase_from_ranges(ranges: Sequence[str]) -> str | None:
    """The phase named by an NVTX range stack, outermost first; the innermost phase name wins."""
    for name in reversed(ranges):
        phase = canonical_phase(name)
        if phase is not None and phase != "other":
            return phase
    return None
