"""A mixed FP8/BF16 step under torch.profiler: ``python3 record_float8_subclass.py OUT.json [cuda|cpu]``.

torchao's float8 training pattern without torchao: a tensor that shows itself as bfloat16 and runs aten::mm as
torch._scaled_mm on its e4m3 data (Float8Face, which tests/test_low_precision.py runs on the CPU too), beside a plain
bfloat16 product. It ran on the H200 as main() below, then at the module's top level.
"""

import sys
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

BF, E4 = torch.bfloat16, torch.float8_e4m3fn
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "cuda"  # where main() runs


class Float8Face(torch.Tensor):
    @staticmethod
    def __new__(cls, data: torch.Tensor, scale: torch.Tensor) -> "Float8Face":
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=BF, device=data.device)

    def __init__(self, data: torch.Tensor, scale: torch.Tensor) -> None:
        self.fp8, self.scale = data, scale

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten.mm.default:
            a, b = args
            return torch._scaled_mm(a.fp8, b.fp8, a.scale, b.scale, out_dtype=BF)
        raise NotImplementedError(func)


def main() -> None:
    one = torch.tensor(1.0, device=DEVICE)
    a = Float8Face(torch.randn(4096, 8192, device=DEVICE).to(E4), one)
    b = Float8Face(torch.randn(4096, 8192, device=DEVICE).to(E4).t(), one)
    x, w = torch.randn(4096, 8192, device=DEVICE, dtype=BF), torch.randn(8192, 4096, device=DEVICE, dtype=BF)

    def step() -> None:
        torch.mm(a, b)
        torch.mm(x, w)

    step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if DEVICE == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=activities, record_shapes=True) as prof:
        step()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
    prof.export_chrome_trace(sys.argv[1])
    print(torch.__version__, torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE)


if __name__ == "__main__":
    main()
