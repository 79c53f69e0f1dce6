"""AMD Instinct GPUs (issue 46, item 6): the MI300X, MI325X and MI355X in the catalog with the dense peaks of AMD's
data sheets, a ROCm trace's GPU named by its properties, HIP runtime launches linked like CUDA's, and ncu refusing
an AMD GPU in one line.

The trace is vLLM's piecewise-graph replay on an MI300-class GPU from AMD-AGI/TraceLens (MIT), copied byte for byte
into ../shared/fixtures/compiled/ (its README gives the repository, path, commit and blob)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from hroofline.importers.kineto import parse_trace
from hroofline.importers.kineto_links import link_activities
from hroofline.importers.source import ImportedSource
from hroofline.importers.trace_source import TraceOptions, trace_source
from hroofline.roofs.catalog import GIB, gpu_from_properties, load_gpu_names
from hroofline.roofs.metricset import load_metric_set
from hroofline.roofs.rates import rates_for
from tests.conftest import REPO, SHARED, need, run_program

VLLM = SHARED / "fixtures" / "compiled" / "vllm-mi300x-piecewise-replay.json.gz"
TFLOPS = 1e12

# AMD's dense peaks in TFLOP/s (TOP/s for INT8), typed from its sheets, not read from metrics/: the MI300X and
# MI325X data sheets and the CDNA 3 white paper's Table 1 (304 CUs, 2100 MHz peak engine clock), the MI355X
# product page (256 CUs, 2400 MHz; 2.5 and 5.0 PFLOP/s as AMD rounds them, MXFP4 half the 20.1 quoted with
# sparsity).
CDNA3_SHEET = {
    "fp64": 81.7,
    "fp32": 163.4,
    "tensor_fp64": 163.4,
    "tensor_tf32": 653.7,
    "tensor_fp16": 1307.4,
    "tensor_bf16": 1307.4,
    "tensor_fp8": 2614.9,
    "tensor_int8": 2614.9,
}
SHEETS = {
    "mi300x": (304, 2100e6, CDNA3_SHEET, 0.001),
    "mi325x": (304, 2100e6, CDNA3_SHEET, 0.001),
    "mi355x": (
        256,
        2400e6,
        {
            "fp64": 78.6,
            "fp32": 157.3,
            "tensor_fp64": 78.6,
            "tensor_fp16": 2500,
            "tensor_bf16": 2500,
            "tensor_fp8": 5000,
            "tensor_int8": 5000,
            "tensor_fp4": 10050,
        },
        0.01,  # the sheet rounds to 2.5 and 5.0 PFLOP/s
    ),
}


@pytest.mark.parametrize("name", list(SHEETS))
def test_cus_times_dense_rate_times_clock_give_the_sheets_dense_peaks(name: str) -> None:
    """CU count x the per-CU dense rate (metrics/rates.toml) x the peak engine clock reproduces each dense figure of
    AMD's sheet; the catalog holds those figures, not the 2:4-sparse ones AMD quotes beside them (twice)."""
    cus, clock, sheet, tolerance = SHEETS[name]
    gpu = load_gpu_names()[name]
    rates = rates_for(gpu.cc, gpu)
    assert gpu.vendor == "amd" and gpu.sms == cus and gpu.quoted_clock("tensor_fp16") == clock
    for key, tflops in sheet.items():
        assert rates.get(key) * cus * clock == pytest.approx(tflops * TFLOPS, rel=tolerance), (name, key)
        assert gpu.peaks[key] == pytest.approx(tflops * TFLOPS, rel=tolerance), (name, key)
    assert set(gpu.peaks) - {"hbm", "l2"} == set(sheet)  # no peak the sheet does not give
    # MI300X: 1307.4 TFLOP/s dense FP16 = 2048 FLOP per CU per clock x 304 CUs x 2.1 GHz; 2614.9 is its sparse one
    if name == "mi300x":
        assert rates.get("tensor_fp16") == 2048
        assert gpu.peaks["tensor_fp16"] == pytest.approx(2614.9e12 / 2, rel=1e-4)
    if name == "mi355x":  # gfx950 has no XF32 (TF32) matrix instructions
        assert rates.get("tensor_tf32") is None and "tensor_tf32" not in gpu.peaks


def test_amd_memory_bandwidth_and_caches_are_the_sheets() -> None:
    gpus = load_gpu_names()
    # (memory as sold in GB, HBM TB/s): 192 GB HBM3 at 5.3, 256 GB HBM3E at 6.0, 288 GB HBM3E at 8.0
    for name, (memory, hbm) in {"mi300x": (192, 5.3), "mi325x": (256, 6.0), "mi355x": (288, 8.0)}.items():
        assert gpus[name].memory_bytes == memory * GIB and gpus[name].peaks["hbm"] == hbm * 1e12, name
        assert gpus[name].l2_bytes == 8 * 4 * 2**20, name  # 4 MB of L2 per XCD, 8 XCDs
    # CDNA 3 white paper: each XCD's L2 reads 2 KB per clock, up to 34.4 TB/s over 8 XCDs at 2.1 GHz
    assert gpus["mi300x"].peaks["l2"] == pytest.approx(8 * 2048 * 2.1e9)
    assert load_metric_set().arch_of("9.4") == "cdna3" and load_metric_set().arch_of("9.5") == "cdna4"


def test_properties_tell_the_mi300x_from_its_siblings() -> None:
    """Compute units, memory and HIP's compute capability (gfx942: 9.4): the MI325X has 256 GB, the MI300A APU 228
    CUs and 128 GB (not in the catalog), the MI355X is gfx950 (9.5)."""
    assert gpu_from_properties("9.4", 304, 206141652992).name == "mi300x"  # the vLLM trace's 192 GiB
    assert gpu_from_properties("9.4", 304, 0.98 * 256 * GIB).name == "mi325x"
    assert gpu_from_properties("9.4", 228, 0.98 * 128 * GIB) is None
    assert gpu_from_properties("9.5", 256, 0.98 * 288 * GIB).name == "mi355x"
    assert gpu_from_properties("9.0", 304, 206141652992) is None


@cache
def _events() -> list[dict]:
    return json.loads(gzip.decompress(need(VLLM).read_bytes()))["traceEvents"]


@cache
def _vllm() -> ImportedSource:
    path = need(VLLM)
    return trace_source(
        parse_trace(gzip.decompress(path.read_bytes()), path), "test", TraceOptions(), load_metric_set()
    )


def test_the_vllm_rocm_trace_names_its_gpu_by_its_properties_and_gets_mi300x_roofs(cli) -> None:
    """The ROCm trace records an empty device name: before, no GPU, no roofs ("it names no GPU, only compute
    capability 9.4"). Its deviceProperties, read here from the JSON: 304 CUs, 206,141,652,992 bytes, 9.4."""
    properties = json.loads(gzip.decompress(need(VLLM).read_bytes()))["deviceProperties"][0]
    assert properties["name"] == "" and (properties["computeMajor"], properties["computeMinor"]) == (9, 4)
    assert properties["numSms"] == 304 and properties["totalGlobalMem"] == 206141652992
    source = _vllm()
    assert source.gpu == "mi300x" and source.cc == "9.4"
    (note,) = [n for n in source.info.notes if "by its properties" in n]
    assert note.startswith("the trace records no device name; judged as mi300x by its properties (304 compute units")
    assert "192.0 GiB, compute capability 9.4" in note
    imported = cli("import", VLLM, "--run", "vllm")
    assert imported.code == 0 and "has no roofs" not in imported.err
    roofs = cli("ceilings", "--run", "vllm", "--store", cli.store).out
    assert roofs.startswith("mi300x datasheet, at the quoted SM clocks (2.1 GHz")
    assert re.search(r"tensor_bf16 +1\.307 PFLOP/s", roofs) and re.search(r"hbm +5\.300 TB/s", roofs)


HIP_LAUNCHES = ("hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync")


def test_hip_launches_link_their_kernels_and_copies_to_the_op_around_them() -> None:
    """Each kernel or copy launched by a HIP runtime call (not a graph) is linked, as a CUDA launch is, to the
    innermost CPU op open on the launching thread at the call: counted here from the JSON by hand."""
    events = _events()
    calls = {
        e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and e["name"] in HIP_LAUNCHES
    }
    ops: dict[tuple, list[dict]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            ops.setdefault((e["pid"], e["tid"]), []).append(e)
    trace = parse_trace(gzip.decompress(need(VLLM).read_bytes()), VLLM)
    links = link_activities(trace, trace.gpu)
    launched: Counter[str] = Counter()
    for activity, link in zip(trace.gpu, links, strict=True):
        call = calls.get(activity.correlation)
        if call is None:
            continue
        launched[call["name"]] += 1
        around = [o for o in ops.get((call["pid"], call["tid"]), []) if o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        innermost = max(around, key=lambda o: (o["ts"], -o["dur"]))
        assert link.op is not None and link.op.name == innermost["name"], activity.name
    assert launched == {
        "hipLaunchKernel": 27,
        "hipModuleLaunchKernel": 24,
        "hipExtModuleLaunchKernel": 1,
        "hipMemcpyAsync": 10,
    }
    # the kernels of the 25 hipGraphLaunch calls are the rest: linked to none (their capture trace is another item)
    linked = sum(link.op is not None for link in links)
    assert linked == sum(launched.values()) and len(trace.gpu) - linked == 361


def test_ncu_refuses_an_amd_gpu_in_one_line(tmp_path: Path) -> None:
    """ncu profiles NVIDIA GPUs only: an ncu report imported as an MI300X, an ncu profile of one and doctor on one are
    refused before anything is written; `profile --gpu mi300x` with no backend would trace instead."""
    report = REPO / "tests" / "data" / "h100_llm_gemm_fp8_ncu_details.csv"
    store = tmp_path / "store"
    for args in (
        ("import", report, "--run", "x", "--gpu", "mi300x", "--store", store),
        ("profile", "--arch", "resnet18", "--gpu", "mi325x", "--backend", "ncu", "--store", store),
        ("profile", "--arch", "resnet18", "--gpu", "mi300x", "--clock-control", "base", "--store", store),
        ("doctor", "--gpu", "mi355x", "--report", report),
    ):
        result = run_program(*args)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1, args
        assert "is an AMD GPU, and ncu profiles NVIDIA GPUs only" in result.err and "Traceback" not in result.err
    assert not store.exists()


def test_the_gpus_command_lists_the_amd_gpus_with_their_sources(cli) -> None:
    table = cli("gpus").out
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.startswith("mi3")}
    # gpu, cc, arch, SMs (CUs), GHz, fp64, fp32, fp16, tensor_tf32, tensor_fp16 ... in TFLOP/s
    assert rows["mi300x"][:10] == ["mi300x", "9.4", "cdna3", "304", "2.1", "81.7", "163.4", "-", "653.7", "1,307"]
    assert rows["mi355x"][:10] == ["mi355x", "9.5", "cdna4", "256", "2.4", "78.6", "157.3", "-", "-", "2,500"]
    assert rows["mi325x"][1:4] == ["9.4", "cdna3", "304"]
    (source,) = [line for line in table.splitlines() if line.startswith("  mi300x: ")]
    assert "[AMD-CDNA3] Table 1 (dense)" in source and "2100 MHz" in source
