"""Fifth visit, for issue 24: run on the device, not by the tests (the call asked for no kind and got an H200).

``python3 fifth.py OUT SECONDS traces``: torch.profiler traces (record_shapes) of the NCHW training steps the
H200's batch-norm rate and layout-conversion cost were measured on (h200-layouts/layouts.py's TRACED, NCHW only),
each timed first (step-times.csv). ``... held-out``: steps of models no GPU run of this project timed, never
fitted to (held-out-steps.csv): training at batch 32 and 128, then batch 1, then inference.
Protocol of ../shared/reference/h100-step-times.csv: synthetic batch, CrossEntropyLoss, SGD momentum 0.9 foreach,
PyTorch's defaults, amp = float16 autocast + GradScaler; CUDA events, median of 10 after 3 warm-up (inference:
eval, inference_mode, 20 after 5); peak = max_memory_allocated over the timed steps. Rows are written as they
come, so a budget or timeout keeps what was measured."""

import csv
import json
import statistics
import sys
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

TRACED = [  # model, precision, batch: the NCHW training steps of h200-layouts (all but the forward passes)
    ("resnet50", "amp", 32), ("resnet50", "fp32", 32), ("resnet18", "fp32", 128), ("resnet18", "amp", 32),
    ("vgg16", "amp", 32), ("vgg16", "fp32", 32), ("densenet121", "amp", 32), ("efficientnet_b0", "amp", 32),
    ("regnet_y_1_6gf", "amp", 32), ("resnet101", "fp32", 32), ("convnext_tiny", "amp", 32),
]
HELD_OUT = ("resnext50_32x4d", "mobilenet_v3_large", "convnext_small", "efficientnet_v2_s", "densenet169",
            "swin_v2_t", "regnet_x_3_2gf", "alexnet")
FIELDS = ["source", "model", "gpu", "precision", "batch", "phases", "layout", "measured_s", "wall_s",
          "memory_bytes", "steps", "note"]


def build(name: str, precision: str, batch: int, train: bool):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().cuda().train(train)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp")
    autocast = torch.autocast("cuda", dtype=torch.float16, enabled=precision == "amp")

    def step():
        if train:
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


def timed(step, warmup: int, steps: int) -> tuple[float, float]:
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    gpu, wall = [], []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t0)
        gpu.append(a.elapsed_time(b) / 1e3)
    return statistics.median(gpu), statistics.median(wall)


def held_out_plan() -> list[tuple[str, str, int, bool]]:
    plan = [(m, p, b, True) for b in (32, 128) for m in HELD_OUT for p in ("fp32", "amp")]
    plan += [(m, p, 1, True) for m in HELD_OUT for p in ("fp32", "amp")]
    plan += [(m, p, b, False) for b in (1, 64) for m in HELD_OUT for p in ("fp32", "amp")]
    return plan


def main(out: str, budget: float, plan: str) -> None:
    start = time.time()
    info = {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name()}
    print(json.dumps(info), flush=True)
    steps = [(m, p, b, True) for m, p, b in TRACED] if plan == "traces" else held_out_plan()
    name = "step-times.csv" if plan == "traces" else "held-out-steps.csv"
    gpu = "h200" if "H200" in info["gpu"] else "h100-sxm"  # the catalog's name of the GPU the call got
    with open(f"{out}/{name}", "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for model, precision, batch, train in steps:
            if time.time() - start > budget:
                print("budget spent before", model, precision, batch, train, flush=True)
                break
            row = {"source": f"{gpu}-device-2026-11-27-fifth", "model": model, "gpu": gpu,
                   "precision": precision, "batch": batch,
                   "phases": "train" if train else "forward (eval, inference_mode)", "layout": "NCHW"}
            try:
                step = build(model, precision, batch, train)
                count = 10 if train else 20
                gpu_s, wall_s = timed(step, 3 if train else 5, count)
                row |= {"measured_s": f"{gpu_s:.6f}", "wall_s": f"{wall_s:.6f}",
                        "memory_bytes": torch.cuda.max_memory_allocated(), "steps": count, "note": ""}
                if plan == "traces":
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as p:
                        step()
                        torch.cuda.synchronize()
                    p.export_chrome_trace(f"{out}/traces/{model}-{precision}-b{batch}-train-nchw-trace.json")
                del step
            except Exception as e:  # noqa: BLE001 - keep measuring the rest
                row["note"] = f"{type(e).__name__}: {str(e)[:200]}"
            writer.writerow(row)
            f.flush()
            print(json.dumps(row), f"{time.time() - start:.0f}s", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
