"""Plain-loop step times on the GPU, the protocol of ../shared/reference/h100-step-times.csv.

Synthetic batch 3x224x224, CrossEntropyLoss, SGD momentum 0.9 (foreach), PyTorch defaults (cuDNN TF32);
amp = float16 autocast + GradScaler; median of 10 steps after 3 warm-up, CUDA events; peak memory =
max_memory_allocated over the timed steps. Also: forward-only inference, channels_last, and the host's
per-op dispatch cost for small ops. Writes rows as it goes (a timeout keeps what was measured).

Run as ``python3 step_times.py OUT BUDGET_S [PLAN]``, PLAN one of: h100 (the default: the H100 rows of
h100-step-times.csv), h200 (h200-step-times.csv), host (h200-host-bound-steps.csv: the h200 plan's steps at
batch 1 and 32 in NCHW, without the dispatch timing).
"""

import csv
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

OUT = sys.argv[1]
BUDGET_S = float(sys.argv[2]) if len(sys.argv) > 2 else 170.0
PLAN = sys.argv[3] if len(sys.argv) > 3 else "h100"
SOURCE, GPU = ("h100-device-2026-11-27", "h100-sxm") if PLAN == "h100" else ("h200-device-2026-11-27", "h200")
START = time.perf_counter()
DEV = "cuda"
FIELDS = ["source", "model", "gpu", "precision", "batch", "phases", "layout", "measured_s", "wall_s",
          "memory_bytes", "steps", "note"]


def out_of_time() -> bool:
    return time.perf_counter() - START > BUDGET_S


def timed(fn, warmup: int, steps: int) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    gpu, wall = [], []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t0)
        gpu.append(a.elapsed_time(b) / 1e3)
    return statistics.median(gpu), statistics.median(wall)


def train_step_fn(name: str, precision: str, batch: int, channels_last: bool):
    model = getattr(torchvision.models, name)(num_classes=1000).to(DEV)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x = torch.randn(batch, 3, 224, 224, device=DEV).to(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device=DEV)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = precision == "amp"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def infer_fn(name: str, precision: str, batch: int):
    model = getattr(torchvision.models, name)(num_classes=1000).to(DEV).eval()
    x = torch.randn(batch, 3, 224, 224, device=DEV)
    amp = precision == "amp"

    def step():
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            model(x)

    return step


def main() -> None:
    info = {
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
        "sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "cpu_count": os.cpu_count(),
        "tf32_conv": torch.backends.cudnn.allow_tf32, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    print(json.dumps(info), flush=True)
    host = host_dispatch() if PLAN != "host" else {}
    host["info"] = info
    with open(f"{OUT}/host-dispatch.json", "w") as f:
        json.dump(host, f, indent=1)
    print(json.dumps(host), flush=True)
    plan = h100_plan() if PLAN == "h100" else h200_plan()
    if PLAN == "host":  # the host-bound steps only: batch 1, and 32
        plan = [entry for entry in plan if entry[3] in (1, 32) and not entry[4]]

    path = f"{OUT}/step-times.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for kind, m, p, b, cl in plan:
            if out_of_time():
                print(f"out of time before {kind} {m} {p} {b}", flush=True)
                break
            try:
                if kind == "train":
                    fn, warm, steps = train_step_fn(m, p, b, cl), 3, 10
                else:
                    fn, warm, steps = infer_fn(m, p, b), 5, 20
                gpu_s, wall_s = timed(fn, warm, steps)
                mem = torch.cuda.max_memory_allocated()
                row = {"source": SOURCE, "model": m, "gpu": GPU, "precision": p,
                       "batch": b, "phases": "train" if kind == "train" else "forward (eval, inference_mode)",
                       "layout": "channels_last" if cl else "NCHW", "measured_s": f"{gpu_s:.6f}",
                       "wall_s": f"{wall_s:.6f}", "memory_bytes": mem, "steps": steps, "note": ""}
            except Exception as e:  # noqa: BLE001 - keep measuring the rest
                row = {"source": SOURCE, "model": m, "precision": p, "batch": b,
                       "note": f"{type(e).__name__}: {str(e)[:200]}"}
            w.writerow(row)
            f.flush()
            print(kind, m, p, b, "CL" if cl else "", row.get("measured_s"), row.get("memory_bytes"),
                  row["note"], f"t={time.perf_counter() - START:.0f}s", flush=True)
            del fn
            torch.cuda.empty_cache()


HELD_OUT = ["resnet101", "densenet121", "efficientnet_b0", "swin_t", "regnet_y_1_6gf"]  # not in the shared file


def h100_plan() -> list[tuple]:
    """(kind, model, precision, batch, channels_last) of the H100 visit."""
    plan: list[tuple] = []
    for m in HELD_OUT:
        for p in ("fp32", "amp"):
            for b in (32, 128):
                plan.append(("train", m, p, b, False))
    for m in ("resnet50", "resnet101"):
        for p in ("fp32", "amp"):
            plan.append(("train", m, p, 128, True))
    for m in ("resnet50", "efficientnet_b0", "vit_b_16"):
        for p in ("fp32", "amp"):
            for b in (1, 64):
                plan.append(("forward", m, p, b, False))
    for m in HELD_OUT:
        for p in ("fp32", "amp"):
            plan.append(("train", m, p, 1, False))
    return plan


def h200_plan() -> list[tuple]:
    """The H200 visit's: the host-bound steps first, then the shared file's six models and the five more."""
    plan: list[tuple] = []
    shared = ["resnet18", "resnet50", "vgg16", "mobilenet_v2", "convnext_tiny", "vit_b_16"]
    for m in HELD_OUT:
        for p in ("fp32", "amp"):
            plan.append(("train", m, p, 1, False))
    for m in ("resnet50", "efficientnet_b0", "vit_b_16"):
        for p in ("fp32", "amp"):
            plan.append(("forward", m, p, 1, False))
    for m in shared + HELD_OUT:
        for p in ("fp32", "amp"):
            for b in (32, 128):
                plan.append(("train", m, p, b, False))
    for m in ("resnet50", "convnext_tiny", "resnet18"):
        for p in ("fp32", "amp"):
            for b in (32, 128):
                plan.append(("train", m, p, b, True))
    for m in ("resnet50", "efficientnet_b0", "vit_b_16"):
        for p in ("fp32", "amp"):
            plan.append(("forward", m, p, 64, False))
    return plan


def host_dispatch() -> dict:
    """Seconds per op from Python to a queued kernel, for small ops whose GPU time is below the host's."""
    x = torch.ones(256, device=DEV)
    img = torch.randn(1, 16, 8, 8, device=DEV)
    weight = torch.randn(16, 16, 3, 3, device=DEV)
    lin = torch.nn.Linear(64, 64).to(DEV)
    bn = torch.nn.BatchNorm2d(16).to(DEV).train()
    v = torch.randn(4, 64, device=DEV)
    ops = {
        "add": lambda: x + 1,
        "relu": lambda: torch.relu(x),
        "add_inplace": lambda: x.add_(0),
        "linear": lambda: lin(v),
        "conv2d_3x3": lambda: F.conv2d(img, weight, padding=1),
        "batch_norm_train": lambda: bn(img),
    }
    res: dict = {"unit": "seconds per op, wall clock over N ops then one synchronize"}
    n = 3000
    for label, amp in (("fp32", False), ("autocast_fp16", True)):
        per = {}
        for name, op in ops.items():
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                for _ in range(200):
                    op()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(n):
                    op()
                torch.cuda.synchronize()
                per[name] = (time.perf_counter() - t0) / n
        res[label] = per
    # the same ops with nothing on the GPU: the CPU side alone (dispatch without a launch)
    xc = torch.ones(256)
    t0 = time.perf_counter()
    for _ in range(n):
        xc + 1
    res["cpu_add"] = (time.perf_counter() - t0) / n
    # a forward+backward of a small MLP: launches per second through autograd
    mlp = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).to(DEV)
    inp = torch.randn(4, 64, device=DEV)
    for _ in range(20):
        mlp(inp).sum().backward()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        mlp(inp).sum().backward()
    torch.cuda.synchronize()
    res["mlp8_fwd_bwd_s"] = (time.perf_counter() - t0) / 200
    return res


if __name__ == "__main__":
    main()
