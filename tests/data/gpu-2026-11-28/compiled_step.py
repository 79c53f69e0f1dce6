"""One bf16 training step of resnet50 or GPT-2, eager or torch.compile'd, marked for hroofline (issue 46).

    hroofline profile --gpu h200 --backend trace --warmup 3 --script compiled_step.py MODEL [--compile MODE]
    hroofline profile --gpu h200 --warmup 3 --script compiled_step.py MODEL --compile default   # under ncu

MODEL: resnet50 (batch 32, 3x224x224) or hf:gpt2 (batch 8, 512 tokens; hroofline's offline config, random
weights). bf16 autocast, SGD with momentum (foreach). Compiled, only the model is compiled (the loss of resnet50
and the optimizer stay eager) and it is not annotated: hroofline's per-module marks would break the graph.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import torch

import hroofline
from hroofline.collect.models import build_model, parse_model

SHAPES = {"resnet50": (32, None), "hf:gpt2": (8, 512)}


def record(name: str, on: bool) -> contextlib.AbstractContextManager:
    return torch.profiler.record_function(name) if on else contextlib.nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(SHAPES))
    parser.add_argument("--compile", default="none", choices=["none", "default", "max-autotune", "reduce-overhead"])
    parser.add_argument("--steps", type=int, default=5, help="steps run (hroofline --warmup/--steps pick)")
    parser.add_argument("--trace", help="without hroofline: torch.profiler over the last step, written here")
    parser.add_argument("--device", default=os.environ.get("STEP_DEVICE", "cuda"))
    args = parser.parse_args()

    torch.manual_seed(0)
    batch, seq_len = SHAPES[args.model]
    with torch.device(args.device):
        built = build_model(parse_model(args.model), batch, None, seq_len)
    module = built.module.to(args.device).train()
    inputs = built.inputs.to(args.device)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9, foreach=True)
    if args.compile == "none":
        model = hroofline.annotate(module)
    else:
        mode = None if args.compile == "default" else args.compile
        model = torch.compile(module, mode=mode)
    for number in range(args.steps):
        last = args.trace and number == args.steps - 1
        profiler = torch.profiler.profile(record_shapes=True) if last else contextlib.nullcontext()
        with profiler, hroofline.profiled_step():
            with hroofline.phase("forward"), record("forward", last), torch.autocast(args.device, dtype=torch.bfloat16):
                loss = built.loss(model, inputs)
            with hroofline.phase("backward"), record("backward", last):
                loss.backward()
            with hroofline.phase("optimizer"), record("optimizer", last):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            if args.device == "cuda":
                torch.cuda.synchronize()
        if last:
            profiler.export_chrome_trace(args.trace)


if __name__ == "__main__":
    main()
