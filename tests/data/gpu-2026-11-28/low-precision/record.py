"""FP8 and grouped GEMMs under torch.profiler: ``python3 record.py OUT.json [cuda|cpu]``.

Each product's inputs are made, and the product run once to warm up, before the profiled region, which runs each
product that worked once. The shapes are those tests/test_low_precision.py counts. The script that ran on the
H200 travelled to the device xz-compressed; this is it laid out for reading, with the same calls, shapes and
order (it made each product's inputs inline, fresh ones for each product, where this shares them).
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

E4, E5, BF = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "cuda"
G, GROUPS = 8, [512, 1536, 1024, 1024, 768, 1280, 1024, 1024]  # rows per expert, 8,192 in all


def rand(*shape: int, dtype: torch.dtype = BF) -> torch.Tensor:
    return torch.randn(*shape, device=DEVICE).to(dtype)


def ones(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, device=DEVICE).to(dtype)


offs = torch.tensor(GROUPS, device=DEVICE).cumsum(0).to(torch.int32)
one = torch.tensor(1.0, device=DEVICE)
scaled_mm, scaled_grouped_mm, grouped_mm = torch._scaled_mm, torch._scaled_grouped_mm, torch._grouped_mm
a8, a8_small = rand(4096, 8192, dtype=E4), rand(2048, 4096, dtype=E4)
b8, b8_small = rand(8192, 8192, dtype=E4).t(), rand(4096, 4096, dtype=E5).t()
experts8, experts16 = rand(G, 2048, 4096, dtype=E4).transpose(-2, -1), rand(G, 2048, 4096).transpose(-2, -1)
mx_scales = ones(512, dtype=torch.float8_e8m0fnu)
calls = {
    "per-tensor e4m3 -> bf16 4096x8192x8192": (scaled_mm, a8, b8, one, one),
    "rowwise e4m3 -> bf16": (scaled_mm, a8, b8, ones(4096, 1), ones(1, 8192)),
    "e4m3 x e5m2 -> fp32 2048x4096x4096": (scaled_mm, a8_small, b8_small, one, one),
    "scaled grouped 2Dx3D e4m3": (scaled_grouped_mm, rand(8192, 4096, dtype=E4), experts8, ones(8192), ones(G, 2048)),
    "grouped 2Dx3D bf16": (grouped_mm, rand(8192, 4096), experts16),
    "grouped 3Dx3D bf16": (grouped_mm, rand(G, 1024, 4096), experts16),
    "grouped 2Dx2D bf16": (grouped_mm, rand(4096, 8192), rand(2048, 8192).t()),
    "mxfp8 (sm_100 only)": (scaled_mm, rand(128, 128, dtype=E4), rand(128, 128, dtype=E4).t(), mx_scales, mx_scales),
}
keywords = {
    name: {"out_dtype": torch.float32 if "fp32" in name else BF} if call[0] is not grouped_mm else {}
    for name, call in calls.items()
}
for name in calls:
    if "2Dx3D" in name or "2Dx2D" in name:
        keywords[name]["offs"] = offs
print(torch.__version__, torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE)
works = {}
for name, (op, *args) in calls.items():
    try:
        op(*args, **keywords[name])
    except Exception as error:
        print("FAILED", name, type(error).__name__, str(error)[:300])
        continue
    works[name] = (op, args, keywords[name])
    print("ok", name)
if DEVICE == "cuda":
    torch.cuda.synchronize()
activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if DEVICE == "cuda" else [ProfilerActivity.CPU]
with profile(activities=activities, record_shapes=True) as prof:
    for op, args, kwargs in works.values():
        op(*args, **kwargs)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
