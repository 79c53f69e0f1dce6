"""Two small models for the compare gate's tests (``hroofline profile --model tests/data/gate_models.py:mlp``):
``mlp`` and ``mlp_planted``, the same model with one layer more (``extra``: two Linears around GELU's tanh
formula written out op by op, the unfused op a refactor can plant), so the candidate's step is slower there."""

from __future__ import annotations

import math

import torch
from torch import nn

WIDTH = 1024
HIDDEN = 4096  # the planted layer's: eight times fc1's FLOPs, far above the CPU's timing noise


class TanhGelu(nn.Module):
    """GELU's tanh approximation op by op: what ``nn.GELU(approximate="tanh")`` computes in one kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + torch.tanh(inner))


class Mlp(nn.Module):
    def __init__(self, planted: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, WIDTH)
        self.act = nn.GELU(approximate="tanh")
        planted_layer = nn.Sequential(nn.Linear(WIDTH, HIDDEN), TanhGelu(), nn.Linear(HIDDEN, WIDTH))
        self.extra = planted_layer if planted else nn.Identity()
        self.fc2 = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.extra(self.act(self.fc1(x))))


def mlp() -> nn.Module:
    return Mlp(planted=False)


def mlp_planted() -> nn.Module:
    return Mlp(planted=True)
