"""`hroofline ceilings --measure --device cuda`: each cache level read by a kernel of its own, sized from the
device, and a level that does not order above the one below it left out.

No GPU here: the read kernel runs under Triton's interpreter (on the CPU) to check the bytes it reads; the
ordering rule is checked on what the old measurement wrote on a real H100 (../shared/fixtures/h100)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from hroofline.collect.gpu_bandwidth import BYTES_PER_CALL, DeviceSizes, plans
from hroofline.collect.measure import BandwidthPoint, Measurement
from tests.conftest import REPO, SHARED, need

H100 = DeviceSizes(sms=132, shared_per_sm=233_472, l2=50 * 2**20)  # the H100 report's device attributes


def test_working_sets_come_from_the_devices_sizes() -> None:
    l1, l2, dram = plans(H100)
    assert (l1.level, l2.level, dram.level) == ("l1", "l2", "dram")
    assert l1.programs == l2.programs == 4 * 132  # every SM at once
    per_sm = l1.working_set / 132
    assert 16 * 2**10 <= per_sm <= H100.shared_per_sm / 4  # a quarter of an SM's L1 / shared memory
    assert l2.working_set == pytest.approx(H100.l2 / 2, rel=0.01) and l2.cache == ".cg"  # past L1, into L2
    assert dram.working_set >= 8 * H100.l2 and dram.repeats == 1
    assert l1.bytes_read >= BYTES_PER_CALL and l2.bytes_read >= BYTES_PER_CALL


def test_the_read_kernel_reads_every_byte_of_its_plan() -> None:
    """Under TRITON_INTERPRET=1 the kernel runs on the CPU: its sums are the buffer's, once per repeat."""
    pytest.importorskip("triton")
    script = textwrap.dedent(
        """
        import torch
        from hroofline.collect.gpu_bandwidth import BLOCK, LevelPlan, read_once
        plan = LevelPlan("l2", programs=3, chunk=2 * BLOCK, repeats=5, cache=".cg")
        source = torch.arange(plan.programs * plan.chunk, dtype=torch.float32) % 97
        out = torch.zeros(plan.programs * BLOCK)
        read_once(plan, source, out)
        per_program = out.view(plan.programs, BLOCK).sum(dim=1)
        expected = plan.repeats * source.view(plan.programs, plan.chunk).sum(dim=1)
        assert torch.equal(per_program, expected), (per_program, expected)
        print(plan.bytes_read)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) == 3 * 2 * 1024 * 4 * 5


def test_a_level_slower_than_the_one_below_is_left_out() -> None:
    """What the old measurement wrote on an H100: L2 at 731 GB/s, below HBM's 2,884: not written now."""
    recorded = need(SHARED / "fixtures" / "h100" / "ceilings-measured.toml").read_text()
    points = [
        BandwidthPoint(int(float(size) * 1024), level, float(rate) * 1e9)
        for size, level, rate in re.findall(r"([\d.]+) KiB \((\w+)\) ([\d.]+) GB/s", recorded)
    ]
    assert [p.level for p in points] == ["l1", "l2", "dram"]
    measurement = Measurement("cuda", "NVIDIA H100 80GB HBM3", {"bf16": 769e12}, points)
    peaks = measurement.ceilings().peaks
    # L1 orders above HBM, so the rule keeps it; that it is a quarter of the H100's L1 bandwidth, no ordering can
    # tell: the new read kernel is what changes it
    assert "l2" not in peaks and peaks["hbm"] == pytest.approx(2884.2e9) and peaks["l1"] > peaks["hbm"]
    (note,) = measurement.ordered_levels()[1]
    assert note.startswith("L2 not measured: its working set read at 731.2 GB/s, no faster than DRAM (2,884.2 GB/s)")
    assert "# L2 not measured" in measurement.toml()
