"""torch.profiler traces of one resnet50 amp batch-32 training step, NCHW and channels_last."""
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

OUT = sys.argv[1]
for layout in ("nchw", "channels_last"):
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = torchvision.models.resnet50().cuda().to(memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x = torch.randn(32, 3, 224, 224, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (32,), device="cuda")
    scaler = torch.amp.GradScaler("cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(f"{OUT}/resnet50-amp-b32-{layout}-trace.json")
    print(layout, "traced", flush=True)
