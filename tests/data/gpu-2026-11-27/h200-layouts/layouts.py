"""Steps in NCHW and channels_last on the GPU, for issue 24's layout conversions (run on the device, not by the
tests). ``python layouts.py OUT SECONDS traces``: a torch.profiler trace (record_shapes) of one step of each of
PLAN's steps in each layout, after timing it (step-times.csv); ``... held-out``: training steps at batch 128 of
models no trace saw (held-out-steps.csv). Timing: CUDA events, median of 10 after 3 warm-up, the protocol of
../shared/reference/h100-step-times.csv (synthetic batch, CrossEntropyLoss, SGD momentum 0.9 foreach, PyTorch's
defaults, amp = float16 autocast + GradScaler)."""

import csv
import json
import sys
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

TRACED = [  # model, precision, batch, phases
    ("resnet50", "amp", 32, "train"), ("resnet50", "fp32", 32, "train"), ("resnet18", "fp32", 128, "train"),
    ("resnet18", "amp", 32, "train"), ("vgg16", "amp", 32, "train"), ("vgg16", "fp32", 32, "train"),
    ("convnext_tiny", "amp", 32, "train"), ("densenet121", "amp", 32, "train"),
    ("efficientnet_b0", "amp", 32, "train"), ("regnet_y_1_6gf", "amp", 32, "train"),
    ("resnet101", "fp32", 32, "train"), ("resnet50", "amp", 64, "forward"), ("resnet50", "fp32", 64, "forward"),
]
HELD_OUT = [
    (name, precision, 128, "train")
    for name in ("resnet34", "resnet152", "wide_resnet50_2", "vgg11", "googlenet")
    for precision in ("amp", "fp32")
]


def build_step(name, precision, batch, phases, channels_last):
    """The model, batch and optimizer in one layout, and a function running one step (or forward pass)."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(**kwargs).cuda().to(memory_format=fmt)
    model.train(phases == "train")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp")
    autocast = torch.autocast("cuda", dtype=torch.float16, enabled=precision == "amp")

    def step():
        if phases == "train":
            opt.zero_grad(set_to_none=True)
            with autocast:
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            with torch.inference_mode(), autocast:
                model(x)

    return step


def median_step(step):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return (times[4] + times[5]) / 2


def main(out, budget, plan):
    start = time.time()
    rows = []
    steps = TRACED if plan == "traces" else HELD_OUT
    for name, precision, batch, phases in steps:
        for layout in ("nchw", "channels_last"):
            if time.time() - start > budget:
                print("budget spent before", name, precision, batch, phases, layout, flush=True)
                continue
            step = build_step(name, precision, batch, phases, layout == "channels_last")
            seconds = median_step(step)
            if plan == "traces":
                tag = f"{name}-{precision}-b{batch}-{phases}-{layout}"
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
                    step()
                    torch.cuda.synchronize()
                prof.export_chrome_trace(f"{out}/{tag}-trace.json")
                row = dict(model=name, precision=precision, batch=batch, phases=phases, layout=layout,
                           step_s=round(seconds, 6), peak_bytes=torch.cuda.max_memory_allocated())
            else:
                row = {"source": "h200-device-2026-11-27-layouts", "model": name, "gpu": "h200",
                       "precision": precision, "batch": batch, "phases": phases,
                       "layout": "NCHW" if layout == "nchw" else layout, "measured_s": f"{seconds:.6f}",
                       "memory_bytes": torch.cuda.max_memory_allocated(), "steps": 10, "note": ""}
            rows.append(row)
            print(json.dumps(row), f"{time.time() - start:.0f}s", flush=True)
            del step
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    name = "step-times.csv" if plan == "traces" else "held-out-steps.csv"
    with open(f"{out}/{name}", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
