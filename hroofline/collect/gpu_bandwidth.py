"""Read bandwidth of each memory level of a CUDA GPU: one read kernel (Triton), every SM at once, wide loads.

Each program of the kernel reads its own chunk of a float32 buffer ``repeats`` times and keeps a running sum
(so nothing is optimised away): ``programs x chunk x 4 x repeats`` bytes per call. What level serves the reads
follows from the working set and the cache modifier:

- L1: a chunk per program small enough that an SM's programs together hold a quarter of its shared memory /
  L1 (the device's ``shared_memory_per_multiprocessor``), re-read with ordinary loads (``.ca``);
- L2: half the device's L2 in all, loads that bypass L1 (``.cg``);
- HBM: eight times the L2 (at least 512 MiB), read once per call.

The sizes come from the device's own properties. A level whose result does not fit the hierarchy (L1 above
L2 above HBM) is reported as not measured rather than written: a kernel that misses its level says nothing
about it. ``TRITON_INTERPRET=1`` runs the kernel on the CPU (tests check the bytes it reads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

BLOCK = 1024  # float32 elements a program loads per step: 4 KiB, 128-bit loads per thread
PROGRAMS_PER_SM = 4
BYTES_PER_CALL = 1 << 30  # each timed call reads at least this much
DRAM_MINIMUM = 512 * 2**20
FLOAT_BYTES = 4


@dataclass(frozen=True)
class LevelPlan:
    """One level's read: ``programs`` each reading ``chunk`` elements ``repeats`` times with ``cache`` loads."""

    level: str  # l1, l2 or dram
    programs: int
    chunk: int
    repeats: int
    cache: str

    @property
    def working_set(self) -> int:
        return self.programs * self.chunk * FLOAT_BYTES

    @property
    def bytes_read(self) -> int:
        return self.working_set * self.repeats


@dataclass(frozen=True)
class DeviceSizes:
    sms: int
    shared_per_sm: int  # bytes of shared memory / L1 per SM
    l2: int  # bytes


def device_sizes(device: torch.device) -> DeviceSizes:
    properties = torch.cuda.get_device_properties(device)
    shared = int(getattr(properties, "shared_memory_per_multiprocessor", 0) or 96 * 2**10)
    l2 = int(getattr(properties, "L2_cache_size", 0) or 6 * 2**20)
    return DeviceSizes(int(properties.multi_processor_count), shared, l2)


def _chunk(elements: int) -> int:
    return max(BLOCK, elements // BLOCK * BLOCK)


def plans(sizes: DeviceSizes) -> list[LevelPlan]:
    """The reads that measure L1, L2 and HBM on a device of these sizes."""
    programs = sizes.sms * PROGRAMS_PER_SM
    l1_chunk = _chunk(sizes.shared_per_sm // 4 // PROGRAMS_PER_SM // FLOAT_BYTES)
    l2_chunk = _chunk(sizes.l2 // 2 // programs // FLOAT_BYTES)
    dram_chunk = _chunk(max(DRAM_MINIMUM, 8 * sizes.l2) // programs // FLOAT_BYTES)
    result = []
    for level, chunk, loads in (("l1", l1_chunk, ".ca"), ("l2", l2_chunk, ".cg"), ("dram", dram_chunk, ".cg")):
        once = programs * chunk * FLOAT_BYTES
        repeats = 1 if level == "dram" else -(-BYTES_PER_CALL // once)  # at least BYTES_PER_CALL
        result.append(LevelPlan(level, programs, chunk, repeats, loads))
    return result


@cache
def _kernel() -> Callable[..., object]:
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(src, out, chunk, repeats, BLOCK: tl.constexpr, CACHE: tl.constexpr):
        program = tl.program_id(0)
        base = program * chunk
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for _ in range(repeats):
            for start in range(0, chunk, BLOCK):
                total += tl.load(src + base + start + tl.arange(0, BLOCK), cache_modifier=CACHE)
        tl.store(out + program * BLOCK + tl.arange(0, BLOCK), total)

    return read_kernel


def read_once(plan: LevelPlan, source: torch.Tensor, out: torch.Tensor) -> None:
    """One call of the read kernel: ``plan.bytes_read`` bytes of ``source`` summed into ``out``."""
    _kernel()[(plan.programs,)](source, out, plan.chunk, plan.repeats, BLOCK=BLOCK, CACHE=plan.cache)


def measure_levels(device: torch.device, repeats: int, say: Callable[[str], None]) -> list[tuple[LevelPlan, float]]:
    """Each level's read bandwidth (byte/s), best of ``repeats`` timed calls after a warm-up."""
    results = []
    for plan in plans(device_sizes(device)):
        say(f"read bandwidth, {plan.working_set / 2**10:,.0f} KiB working set ({plan.level}, {plan.cache} loads)")
        source = torch.ones(plan.programs * plan.chunk, dtype=torch.float32, device=device)
        out = torch.empty(plan.programs * BLOCK, dtype=torch.float32, device=device)
        read_once(plan, source, out)  # compiles the kernel, warms the caches
        best = float("inf")
        for _ in range(repeats):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            read_once(plan, source, out)
            end.record()
            torch.cuda.synchronize()
            best = min(best, begin.elapsed_time(end) / 1e3)
        results.append((plan, plan.bytes_read / best))
    return results


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
