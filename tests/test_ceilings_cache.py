"""This CPU's ceilings, measured once per machine and cached (issue 48): the second profile reads them, another
machine key or a damaged file measures anew, and each stage of a profile says its time."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from hroofline.collect import ceilings_cache
from hroofline.collect.ceilings_cache import cache_file, cpu_ceilings_cached, machine_key

STAND_IN = 'name = "stand-in CPU, measured"\nsource = "a test"\n\n[ceilings]\nl1 = 400e9\nhbm = 40e9\nfp32 = 400e9\n'


@pytest.fixture
def measurements(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """The cache in tmp_path, and a stand-in for the measurement that counts its calls (one entry per call)."""
    monkeypatch.setenv("HROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []

    def measure(progress: Callable[[str], None]) -> str:
        calls.append(1)
        return STAND_IN

    monkeypatch.setattr(ceilings_cache, "_quick_measurement", measure)
    return calls


def test_the_second_time_the_ceilings_are_read_not_measured(measurements: list[int]) -> None:
    said: list[str] = []
    first = cpu_ceilings_cached(said.append)
    path = cache_file(machine_key())
    assert first.measured_now and first.path == path and path.is_file()
    assert first.ceilings.peaks["fp32"] == 400e9 and measurements == [1]
    written = path.stat().st_mtime_ns
    second = cpu_ceilings_cached(said.append)
    assert measurements == [1] and not second.measured_now and path.stat().st_mtime_ns == written
    assert second.ceilings.peaks == first.ceilings.peaks and second.measured_on == first.measured_on
    assert not [name for name in os.listdir(path.parent) if name != path.name]  # no temporary left behind
    again = cpu_ceilings_cached(said.append, remeasure=True)  # --measure-ceilings
    assert again.measured_now and measurements == [1, 1]


def test_another_machine_key_measures_anew(measurements: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_ceilings_cached(lambda text: None)
    key = {**machine_key(), "torch": "9.9.9"}  # another PyTorch: another machine, as far as its roofs go
    monkeypatch.setattr(ceilings_cache, "machine_key", lambda: key)
    found = cpu_ceilings_cached(lambda text: None)
    assert found.measured_now and measurements == [1, 1] and found.path == cache_file(key)
    assert len(list(found.path.parent.iterdir())) == 2


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("name = [\n", "is not valid TOML"),
        ('name = "x"\n[ceilings]\nfp32 = "fast"\n', "must be a positive number"),
        (STAND_IN, "is not this machine's"),  # ceilings without the key they were measured under
    ],
)
def test_a_damaged_cache_file_is_measured_anew_in_one_line(measurements: list[int], damage: str, said: str) -> None:
    path = cache_file(machine_key())
    path.parent.mkdir(parents=True)
    path.write_text(damage)
    lines: list[str] = []
    found = cpu_ceilings_cached(lines.append)
    assert found.measured_now and measurements == [1] and found.ceilings.peaks["fp32"] == 400e9
    assert len([line for line in lines if said in line]) == 1, lines
    assert cpu_ceilings_cached(lines.append).measured_now is False  # the file was replaced with a good one


def test_a_cache_folder_that_cannot_be_written_still_gives_ceilings(
    measurements: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HROOFLINE_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    lines: list[str] = []
    found = cpu_ceilings_cached(lines.append)
    assert found.path is None and found.ceilings.peaks["fp32"] == 400e9
    assert any("could not keep the ceilings" in line for line in lines)


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HROOFLINE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ceilings_cache.cache_dir() == tmp_path / "hroofline"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ceilings_cache.cache_dir() == Path.home() / ".cache" / "hroofline"


SECONDS = r"[0-9.]+ (s|ms|µs)"


def test_profile_measures_once_then_says_whose_roofs_it_uses_and_times_each_stage(
    cli, measurements: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    argv = ["profile", "--arch", "resnet18", "--gpu", "cpu", "--batch-size", "1", "--warmup", "0", "--run", "r"]
    argv += ["--store", str(tmp_path / "store")]
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 0.0)  # a quiet machine: no word of a busy one
    first = cli(*argv)
    assert first.code == 0, first.err
    assert measurements == [1]
    assert re.search(rf"^measured this CPU's ceilings: {SECONDS} \(cached in .*cpu-ceilings-", first.err, re.M)
    assert re.search(rf"^ran resnet18's 0 warm-up and 1 profiled step\(s\): {SECONDS}$", first.err, re.M)
    assert re.search(rf"^stored the run: {SECONDS}$", first.err, re.M)
    second = cli(*argv, "--replace")
    assert second.code == 0, second.err
    assert measurements == [1]  # read back, not measured
    path = cache_file(machine_key())
    assert "roofs: this CPU's, measured 20" in second.err and f"cached in {path}" in second.err
    assert "measuring" not in second.err
    third = cli(*argv, "--replace", "--measure-ceilings")
    assert third.code == 0 and measurements == [1, 1], third.err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--gpu", "v100"], "--measure-ceilings: measures this CPU's ceilings, not with --gpu v100"),
        (["--gpu", "cpu", "--ceilings", "x.toml"], "not with --ceilings FILE"),
    ],
)
def test_measure_ceilings_is_for_the_cpus_own(cli, extra: list[str], said: str) -> None:
    shown = cli("profile", "--arch", "resnet18", "--measure-ceilings", *extra)
    assert shown.code == 2 and said in shown.err and len(shown.err.strip().splitlines()) == 1


def test_a_cpu_compute_roof_is_the_best_of_a_time_budget_not_of_three_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a shared machine the first tries can all fall in a busy moment: three slow timings, then fast ones.
    The roof is the fastest seen in the budget (it was the best of the three: a roof the step's own
    convolutions beat, the warning the demo printed twice)."""
    import torch

    from hroofline.collect import measure

    timings = iter([0.05] + [0.05] * 3 + [0.01] * 1000)  # warm-up, three busy tries, then quiet ones
    monkeypatch.setattr(measure, "_timer", lambda device: lambda action: next(timings))
    assert measure._best(torch.device("cpu"), lambda: None, 3, budget_s=0.3) == pytest.approx(0.01)
    assert next(timings) == 0.01  # it stopped once the budget was spent: 0.15 s busy, then 15 quiet tries


def test_roofs_measured_on_a_busy_machine_say_so_when_measured_and_when_read_back(
    measurements: list[int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from hroofline.cli.profile_common import cpu_ceilings

    cores = os.cpu_count() or 1
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 4.0 * cores)
    args = argparse.Namespace(ceilings=None, measure_ceilings=False)
    cpu_ceilings(args)
    busy = f"the machine was busy, load average {4.0 * cores:.1f} on {cores} core(s): the roofs may be low"
    measured = capsys.readouterr().err
    assert busy in measured and "the first profile on a quiet machine measures them again" in measured
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 3.0 * cores)  # busy still: the kept ones, said so
    cpu_ceilings(args)
    read_back = capsys.readouterr().err
    assert read_back.startswith("roofs: this CPU's, measured 20") and busy in read_back and measurements == [1]
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 0.0)
    cpu_ceilings(argparse.Namespace(ceilings=None, measure_ceilings=True))
    capsys.readouterr()
    cpu_ceilings(args)
    assert "the machine was busy" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("caches", "dram"),
    [
        ({"l1": 48 * 2**10, "l2": 2 * 2**20, "l3": 480 * 2**20}, 2 * 2**30),  # a VM's 480 MiB: capped at 2 GiB
        ({"l1": 32 * 2**10, "l3": 32 * 2**20}, 512 * 2**20),  # small caches: 512 MiB at least
        ({"l1": 32 * 2**10, "l3": 128 * 2**20}, 1 * 2**30),  # eight times the last cache
        ({"l3": 1536 * 2**20}, 3 * 2**30),  # twice the cache, at least, over the cap
    ],
)
def test_the_main_memory_working_set_outgrows_the_last_cache_within_a_cap(
    monkeypatch: pytest.MonkeyPatch, caches: dict[str, int], dram: int
) -> None:
    import torch

    from hroofline.collect import measure

    monkeypatch.setattr(measure, "cache_sizes", lambda: caches)
    assert measure.working_sets(torch.device("cpu"))[-1] == (dram, "dram")


def test_profile_script_reads_the_cached_roofs_and_times_its_stages(
    cli, measurements: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`profile --script` on the CPU took 1 min 50 s for a 66 ms step, measuring the roofs (and the host's time per
    op) first, without a word of what took the time: now the roofs are the cached ones, and each stage says its
    time."""
    from tests.conftest import REPO

    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 0.0)
    script = REPO / "samples" / "train_tiny_cnn.py"
    store = str(tmp_path / "store")
    for run in ("first", "second"):
        shown = cli("profile", "--gpu", "cpu", "--run", run, "--store", store, "--script", str(script))
        assert shown.code == 0, shown.err
        assert re.search(rf"^ran {re.escape(str(script))}: {SECONDS}$", shown.err, re.M), shown.err
        assert re.search(rf"^stored the run: {SECONDS}$", shown.err, re.M)
    assert measurements == [1] and "roofs: this CPU's, measured" in shown.err


def test_roofs_measured_on_a_busy_machine_are_measured_again_once_it_is_quiet(
    measurements: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    cores = os.cpu_count() or 1
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 4.0 * cores)
    assert cpu_ceilings_cached(lambda text: None).busy is not None
    assert not cpu_ceilings_cached(lambda text: None).measured_now  # busy still: the cached ones
    monkeypatch.setattr(ceilings_cache, "_load_average", lambda: 0.5 * cores)
    lines: list[str] = []
    quiet = cpu_ceilings_cached(lines.append)
    assert quiet.measured_now and quiet.busy is None and measurements == [1, 1]
    assert "again, on a quiet machine (they were measured on a busy one)" in lines[0]
    assert not cpu_ceilings_cached(lambda text: None).measured_now and measurements == [1, 1]


def test_a_profile_measures_the_roofs_alone_quickly_and_without_step_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """No host time per op (a minute and more of probe networks, which the roofs do not need), the quick
    repeats, and none of the measurement's eleven step lines: the profile says 'measuring' and 'measured: TIME'."""
    from hroofline.collect import measure

    asked: dict[str, object] = {}

    def stand_in(device: str, quick: bool = False, progress: object = None, host: bool = True) -> measure.Measurement:
        asked.update(device=device, quick=quick, progress=progress, host=host)
        return measure.Measurement("cpu", "stand-in CPU", {"fp32": 1e11}, [])

    monkeypatch.setattr(measure, "measure", stand_in)
    lines: list[str] = []
    text = ceilings_cache._quick_measurement(lines.append)
    assert asked == {"device": "cpu", "quick": True, "progress": None, "host": False}
    assert lines == [] and "fp32 = 1.000000e+11" in text


@pytest.mark.parametrize(
    ("load", "usable", "expected"),
    [
        (1.8, 2, 378e9),  # contended: one thread's rate times the usable cores
        (0.2, 2, 111e9),  # quiet: the threads' own rate (one core's turbo would overstate many)
        (1.8, 1, 189e9),  # contended, but a quota of one core: one thread's rate times one
    ],
)
def test_a_cpu_compute_roof_counts_one_threads_rate_times_the_cores_only_when_contended(
    monkeypatch: pytest.MonkeyPatch, load: float, usable: int, expected: float
) -> None:
    """A product on two threads waits for the thread another process holds up (111 to 379 GFLOP/s minutes apart
    here), one thread's rate does not (181 to 189): where other work competes for the cores the roof is the better
    of the threads' rate and one thread's times the usable cores; on a quiet machine it is the threads' rate."""
    import torch

    from hroofline.collect import measure

    def rate(*args: object) -> float:  # two threads held up by another process; one thread at its full rate
        return {2: 111e9, 1: 189e9}[torch.get_num_threads()]

    monkeypatch.setattr(measure, "matmul_rate", rate)
    monkeypatch.setattr(measure, "convolution_rate", rate)
    monkeypatch.setattr(measure.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(measure, "usable_cpus", lambda: usable)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert measure._cpu_compute_rate("fp32", 1024, 3, 0.0) == pytest.approx(expected)
        assert torch.get_num_threads() == 2  # as it was
    finally:
        torch.set_num_threads(threads)


def test_a_per_core_caches_bandwidth_counts_one_threads_read_times_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from hroofline.collect import measure

    monkeypatch.setattr(measure, "read_bandwidth", lambda *args: {2: 67e9, 1: 196e9}[torch.get_num_threads()])
    monkeypatch.setattr(measure.os, "getloadavg", lambda: (1.5, 1.5, 1.5))
    monkeypatch.setattr(measure, "usable_cpus", lambda: 2)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert measure._per_core_bandwidth(24 * 2**10, 3, 0.0) == pytest.approx(392e9)
    finally:
        torch.set_num_threads(threads)
    assert measure.PER_CORE_LEVELS == ("l1", "l2")  # L3 and main memory are shared: not scaled


def test_usable_cpus_follow_a_cgroup_quota_and_the_affinity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PyTorch takes its threads from the cores it sees; a container's quota (cpu.max) or a pinning is fewer."""
    import torch

    from hroofline.collect import measure

    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
    monkeypatch.setattr(measure.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(measure.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    real_path = measure.Path
    quota = tmp_path / "cpu.max"

    def path(name: object) -> Path:
        return quota if str(name) == "/sys/fs/cgroup/cpu.max" else real_path(name)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "Path", path)
    quota.write_text("200000 100000\n")
    assert measure.usable_cpus() == 2
    quota.write_text("max 100000\n")
    assert measure.usable_cpus() == 64
    monkeypatch.setattr(measure.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert measure.usable_cpus() == 3


def test_busy_means_a_load_average_over_twice_the_cores() -> None:
    """Up to twice the cores (the minute after make venv's pip, a test run's two workers) one thread's rate times
    the threads holds the roofs: not said busy, not measured again."""
    from hroofline.roofs.ceilings import from_peaks

    cores = os.cpu_count() or 1
    kept = ceilings_cache.CpuCeilings(from_peaks("x", "y", {"fp32": 1e11}), None, False, "2026-11-28")
    assert replace_load(kept, 1.5 * cores).busy is None and replace_load(kept, None).busy is None
    assert "load average" in (replace_load(kept, 2.5 * cores).busy or "")


def replace_load(kept: ceilings_cache.CpuCeilings, load: float | None) -> ceilings_cache.CpuCeilings:
    from dataclasses import replace

    return replace(kept, load=load)


def test_the_charts_javascript_is_made_once_per_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """vl-convert's bundle of Vega (about 2 s to make, the same for its version) is kept in the cache folder: a
    later process (the function's in-memory cache cleared) reads the file and does not call vl-convert again."""
    import vl_convert

    from hroofline.render import html_page

    monkeypatch.setenv("HROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    made: list[str] = []
    real = vl_convert.javascript_bundle

    def counted(**options: str) -> str:
        made.append(options["vl_version"])
        return real(**options)

    monkeypatch.setattr(vl_convert, "javascript_bundle", counted)
    html_page.javascript_bundle.cache_clear()
    first = html_page.javascript_bundle()
    (kept,) = (tmp_path / "cache").iterdir()
    assert kept.read_text(encoding="utf-8") == first and vl_convert.__version__ in kept.name
    assert made == [html_page.vega_lite_version()] and "vegaEmbed" in first
    html_page.javascript_bundle.cache_clear()
    assert html_page.javascript_bundle() == first and len(made) == 1  # read back, not made again
    kept.write_text("")  # an empty file (a full disk) is made anew
    html_page.javascript_bundle.cache_clear()
    assert html_page.javascript_bundle() == first and len(made) == 2
    kept.write_text(first[: len(first) // 3])  # and so is one cut short (the bundle names vegaEmbed only at its end)
    html_page.javascript_bundle.cache_clear()
    assert html_page.javascript_bundle() == first and len(made) == 3
    html_page.javascript_bundle.cache_clear()  # the tests after this one make or read their own
