"""Measured ceilings of this machine: matmul FLOP/s per precision, read bandwidth per working-set size.

Compute: square matrix products of size n, 2 n^3 FLOPs each, best time of several; on a CPU also two
convolutions (oneDNN), 2 x C_out x C_in x H x W x k^2 FLOPs each, and the fastest of all counts. On a CPU each
is repeated for a time budget (``CPU_COMPUTE_SECONDS``), not a count, on PyTorch's threads and on one thread
(its rate times the threads counts too): a roof is the best rate the machine reaches, and on a shared machine
three tries can all fall in a busy moment, and a product on two threads waits for the one another process
holds up, leaving a roof that the profiled step's own convolutions beat.
Bandwidth: ``sum`` over a stride-0 view of a buffer, so one call reads the same working set over and
over (``repeats x size`` bytes from a ``size``-byte buffer); working sets sized to half of each cache
level, then one far larger than the last cache, so each level shows. Best time of several.
On a CUDA device the matmuls are timed with CUDA events (TF32, FP16 and BF16 on the tensor cores) and the
bandwidth of each level is read by a kernel of its own (:mod:`hroofline.collect.gpu_bandwidth`: every SM at
once, wide loads, working sets from the device's own L1 and L2 sizes).

On a GPU a level must be faster than the one below it (L1 above L2 above main memory): one that is not was
not measured at its level, and is left out of the ceilings with a note instead of being written. (On a CPU the
summing loop is bound by its adds in L1 and L2 alike, two cores at a time: both are kept as what ops reach.)
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from hroofline.collect.gpu_bandwidth import measure_levels, triton_available
from hroofline.collect.host_cost import measure_host_cost
from hroofline.errors import ProfilingError
from hroofline.model.host import HostCost
from hroofline.roofs.ceilings import Ceilings, from_peaks
from hroofline.roofs.host_file import host_table

BYTES_PER_CALL = 256 * 2**20  # each bandwidth call reads at least this much
DRAM_WORKING_SET = 512 * 2**20
# A CPU's main-memory working set: eight times its last cache (a cache that resists thrashing keeps little of
# it), but no more than this where twice the cache fits: a VM that reports its host's 480 MiB L3 made it 3.75 GiB,
# whose allocation and reads took 3.4 s of CPU here, two thirds of the roofs' measurement.
CPU_DRAM_CAP = 2 * 2**30
TARGET_SECONDS = 0.15  # per measurement, spread over repeats
# A CPU compute rate (and a cache level's read bandwidth) is the best of as many tries as fit in this many seconds
# (quick, full): at resnet18's convolution rate on two cores (about 280 GFLOP/s) a 1024 x 1024 FP32 product takes
# 8 ms, so 0.3 s is about 40 tries.
CPU_COMPUTE_SECONDS = (0.3, 1.0)


@dataclass(frozen=True)
class BandwidthPoint:
    working_set: int  # bytes
    level: str  # l1, l2, l3 or dram: the level this working set was sized for
    bytes_per_s: float


@dataclass(frozen=True)
class Measurement:
    device: str
    device_name: str
    matmul: dict[str, float]  # precision -> FLOP/s
    bandwidth: list[BandwidthPoint]
    notes: tuple[str, ...] = ()
    host: HostCost | None = None  # the host's seconds per op (the estimate's host floor)

    def ordered_levels(self) -> tuple[dict[str, float], list[str]]:
        """The levels' bandwidths that order L1 > L2 > main memory (on a GPU), and why any other was left out."""
        by_level = {point.level: point.bytes_per_s for point in self.bandwidth}
        if self.device != "cuda":
            return by_level, []
        kept: dict[str, float] = {}
        left_out = []
        below: tuple[str, float] | None = None
        for level in ("dram", "l3", "l2", "l1"):  # from the slowest up: each must beat the one below it
            if level not in by_level:
                continue
            value = by_level[level]
            if below is not None and value <= below[1]:
                left_out.append(
                    f"{level.upper()} not measured: its working set read at {value / 1e9:,.1f} GB/s, no faster "
                    f"than {below[0].upper()} ({below[1] / 1e9:,.1f} GB/s), so the read did not run at that level"
                )
                continue
            kept[level] = value
            below = (level, value)
        return kept, left_out

    def ceilings(self) -> Ceilings:
        """Roofs from the measurement: L1 and L2 from their working sets, HBM from main memory; a level that does
        not order above the one below it is left out."""
        peaks: dict[str, float] = {}
        by_level, _ = self.ordered_levels()
        for level, key in (("l1", "l1"), ("l2", "l2"), ("dram", "hbm")):
            if level in by_level:
                peaks[key] = by_level[level]
        for precision, rate in self.matmul.items():
            key = MATMUL_KEYS[self.device][precision]
            peaks[key] = max(rate, peaks.get(key, 0.0))  # BF16 and FP16 share the 16-bit roof: the faster
        when = time.strftime("%Y-%m-%d")
        return from_peaks(f"{self.device_name}, measured", f"hroofline ceilings --measure on {when}", peaks)

    def toml(self) -> str:
        """The measurement as a ceilings file (the format of metrics/ceilings/)."""
        ceilings = self.ceilings()
        lines = [
            "# Measured by `hroofline ceilings --measure`. SI units: byte/s and FLOP/s.",
            "# Bandwidth per working set: "
            + ", ".join(
                f"{p.working_set / 2**10:,.0f} KiB ({p.level}) {p.bytes_per_s / 1e9:.1f} GB/s" for p in self.bandwidth
            ),
            *(f"# {note}" for note in (*self.notes, *self.ordered_levels()[1])),
            f'name = "{ceilings.label}"',
            f'source = "{ceilings.source}"',
            "",
            "[ceilings]",
        ]
        lines += [f"{key} = {value:.6e}" for key, value in ceilings.peaks.items()]
        if self.host is not None:
            lines += host_table(self.host)
        return "\n".join(lines) + "\n"


# Which ceilings key each matmul precision feeds: on a GPU the 16-bit and TF32 products are tensor-core work.
MATMUL_KEYS: dict[str, dict[str, str]] = {
    "cpu": {"fp64": "fp64", "fp32": "fp32", "bf16": "fp16", "fp16": "fp16"},
    "cuda": {"fp64": "fp64", "fp32": "fp32", "tf32": "tensor_tf32", "fp16": "tensor_fp16", "bf16": "tensor_bf16"},
}
DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def cache_sizes() -> dict[str, int]:
    """Data cache sizes per level of CPU 0, from sysfs (empty where sysfs does not say)."""
    sizes: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind in ("Data", "Unified") and size.endswith("K"):
            sizes[f"l{level}"] = int(size[:-1]) * 1024
    return sizes


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _timer(device: torch.device) -> Callable[[Callable[[], object]], float]:
    def cpu_time(action: Callable[[], object]) -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    def cuda_time(action: Callable[[], object]) -> float:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        action()
        end.record()
        torch.cuda.synchronize()
        return begin.elapsed_time(end) / 1e3

    return cuda_time if device.type == "cuda" else cpu_time


def _best(device: torch.device, action: Callable[[], object], repeats: int, budget_s: float = 0.0) -> float:
    """The shortest of ``repeats`` timings, or of as many more as fit in ``budget_s`` seconds."""
    timer = _timer(device)
    timer(action)  # warm-up: allocation, kernel selection, caches
    best, spent, tries = float("inf"), 0.0, 0
    while tries < repeats or spent < budget_s:
        seconds = timer(action)
        best, spent, tries = min(best, seconds), spent + seconds, tries + 1
    return best


def matmul_rate(device: torch.device, precision: str, size: int, repeats: int, budget_s: float = 0.0) -> float:
    dtype = DTYPES[precision]
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    left = torch.randn(size, size, device=device).to(dtype)
    right = torch.randn(size, size, device=device).to(dtype)
    seconds = _best(device, lambda: torch.mm(left, right), repeats, budget_s)
    return 2.0 * size**3 / seconds


# On CPUs PyTorch runs matmuls through BLAS (MKL) and convolutions through oneDNN, and either may be the
# faster (MKL is slow on some AMD CPUs): the compute roof is the best of a matmul and these convolutions.
CPU_CONVOLUTIONS: tuple[tuple[int, int, int], ...] = ((512, 32, 1), (128, 56, 3))  # channels, height=width, kernel


def convolution_rate(precision: str, shape: tuple[int, int, int], repeats: int, budget_s: float = 0.0) -> float:
    channels, size, kernel = shape
    dtype = DTYPES[precision]
    images = torch.randn(1, channels, size, size).to(dtype)
    weights = torch.randn(channels, channels, kernel, kernel).to(dtype)
    seconds = _best(
        torch.device("cpu"),
        lambda: torch.nn.functional.conv2d(images, weights, padding=kernel // 2),
        repeats,
        budget_s,
    )
    return 2.0 * channels * channels * size * size * kernel * kernel / seconds


def read_bandwidth(device: torch.device, working_set: int, repeats: int, budget_s: float = 0.0) -> float:
    elements = max(working_set // 4, 1024)
    buffer = torch.ones(elements, dtype=torch.float32, device=device)
    rows = max(BYTES_PER_CALL // (elements * 4), 1)
    if rows == 1:  # larger than any cache: one full reduction streams it from memory
        seconds = _best(device, lambda: buffer.sum(), repeats, budget_s)
        return elements * 4 / seconds
    view = buffer.as_strided((rows, elements), (0, 1))
    # Summing the rows into one row streams the buffer through the cache with one add per element.
    seconds = _best(device, lambda: view.sum(dim=0), repeats, budget_s)
    return rows * elements * 4 / seconds


def working_sets(device: torch.device) -> list[tuple[int, str]]:
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        l2 = int(getattr(properties, "L2_cache_size", 0) or 6 * 2**20)
        return [(max(DRAM_WORKING_SET, 8 * l2), "dram")]
    sizes = cache_sizes()
    if not sizes:
        return [(16 * 2**10, "l1"), (DRAM_WORKING_SET, "dram")]
    sets = [(size // 2, level) for level, size in sorted(sizes.items())]
    largest = max(sizes.values())
    return [*sets, (max(DRAM_WORKING_SET, 2 * largest, min(8 * largest, CPU_DRAM_CAP)), "dram")]


def usable_cpus() -> int:
    """The cores this process may run on: the fewest of PyTorch's threads, the CPUs it is pinned to and a cgroup's
    CPU quota (PyTorch takes its threads from the cores it sees, not from a container's limit)."""
    counts = [torch.get_num_threads(), os.cpu_count() or 1]
    if hasattr(os, "sched_getaffinity"):
        counts.append(len(os.sched_getaffinity(0)))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            counts.append(max(1, int(float(quota) / float(period))))
    except (OSError, ValueError):
        pass
    return max(1, min(counts))


def contended(cores: int) -> bool:
    """Whether other work competes for the cores as a measurement begins (the 1-minute load average is at least
    half the cores): then the threads of a product wait for the one another process holds up."""
    try:
        return os.getloadavg()[0] >= max(1.0, cores / 2)
    except OSError:
        return False


def _scaled_best(rate_on: Callable[[], float]) -> float:
    """A rate that scales with the cores (compute, a per-core cache): measured on PyTorch's threads and, where
    other work competes for the cores, also on one thread times the usable cores, the better taken. One thread's
    rate times the cores holds where another process takes a core: the threads of a product wait for the
    slowest, so two threads measured 111 to 379 GFLOP/s minutes apart on this 2-core machine while one thread's
    rate times two stayed 361 to 378. On a quiet machine the threads' own rate is the roof: one core's turbo
    clock would overstate many cores, and a container's quota is fewer cores than PyTorch's threads."""
    threads = torch.get_num_threads()
    best = rate_on()
    cores = usable_cpus()
    if threads > 1 and contended(cores):
        torch.set_num_threads(1)
        try:
            best = max(best, rate_on() * cores)
        finally:
            torch.set_num_threads(threads)
    return best


def _cpu_compute_rate(precision: str, size: int, repeats: int, budget_s: float) -> float:
    """The best of a matmul and (FP32, FP64, BF16) two convolutions, scaled as _scaled_best says."""

    def rate() -> float:
        rates = [matmul_rate(torch.device("cpu"), precision, size, repeats, budget_s)]
        if precision in ("fp32", "fp64", "bf16"):
            rates += [convolution_rate(precision, shape, repeats, budget_s) for shape in CPU_CONVOLUTIONS]
        return max(rates)

    return _scaled_best(rate)


# A CPU's caches that each core has of its own: their bandwidth scales with the cores, as compute does.
PER_CORE_LEVELS = ("l1", "l2")


def _per_core_bandwidth(working_set: int, repeats: int, budget_s: float) -> float:
    """A per-core cache level's read bandwidth, scaled as _scaled_best says (the summing loop on two threads waits
    for the one another process holds up: L1 read 67 to 392 GB/s minutes apart here)."""
    return _scaled_best(lambda: read_bandwidth(torch.device("cpu"), working_set, repeats, budget_s))


def measure(
    device_name: str = "cpu", quick: bool = False, progress: Callable[[str], None] | None = None, host: bool = True
) -> Measurement:
    """The machine's roofs; with ``host``, also the host's time per op (predict --host's floor: a minute and
    more of probe networks' steps on a CPU, which the roofs of a profile do not need)."""
    device = torch.device(device_name)
    say = progress or (lambda text: None)
    repeats = 3 if quick else 7
    budget = 0.0 if device.type == "cuda" else CPU_COMPUTE_SECONDS[0 if quick else 1]
    precisions = list(MATMUL_KEYS["cuda" if device.type == "cuda" else "cpu"])
    matmul: dict[str, float] = {}
    for precision in precisions:
        # GPUs: large enough that launch overhead vanishes at tensor-core rates; CPUs: 16-bit may be slow
        size = 8192 if device.type == "cuda" else 512 if precision in ("fp16", "bf16") else 1024
        convolutions = device.type == "cpu" and precision in ("fp32", "fp64", "bf16")
        say(f"matmul {precision} ({size} x {size})" + (", convolutions (oneDNN)" if convolutions else ""))
        if device.type == "cuda":
            matmul[precision] = matmul_rate(device, precision, size, repeats)
            continue
        matmul[precision] = _cpu_compute_rate(precision, size, repeats, budget / 2)
    bandwidth: list[BandwidthPoint] = []
    notes: list[str] = []
    if device.type == "cuda" and triton_available():
        for plan, rate in measure_levels(device, repeats, say):
            bandwidth.append(BandwidthPoint(plan.working_set, plan.level, rate))
    else:
        sets = working_sets(device)
        if device.type == "cuda":  # without Triton, a PyTorch reduction reads main memory only
            sets = [entry for entry in sets if entry[1] == "dram"]
            notes.append("L1 and L2 not measured: their read kernel needs Triton (pip install triton)")
        for working_set, level in sets:
            say(f"read bandwidth, {working_set / 2**10:,.0f} KiB working set ({level})")
            spend = budget if level != "dram" else 0.0  # main memory: a few reads of gigabytes are enough
            if device.type == "cpu" and level in PER_CORE_LEVELS:
                rate = _per_core_bandwidth(working_set, repeats, spend / 2)
            else:
                rate = read_bandwidth(device, working_set, repeats, spend)
            bandwidth.append(BandwidthPoint(working_set, level, rate))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    measured_on = f"{cpu_name()} with an {name}" if device.type == "cuda" else name
    if not host:
        return Measurement(device.type, name, matmul, bandwidth, tuple(notes))
    try:
        host: HostCost | None = measure_host_cost(device.type, measured_on, 10 if quick else 30, progress)
    except ProfilingError as error:  # the roofs stand without it: written, with the reason it is missing
        host = None
        notes.append(f"{error.message}: the file has no [host] table ({error.hint})")
    return Measurement(device.type, name, matmul, bandwidth, tuple(notes), host)
