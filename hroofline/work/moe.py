"""The work of a serving engine's fused mixture-of-experts op: vLLM's ``vllm::moe_forward``.

vLLM wraps a whole MoE layer in one custom op, ``moe_forward(hidden_states, router_logits, ...layer name)``
(``vllm/model_executor/layers/fused_moe/``): routing (top-k of the router logits), each token's experts' gate/up
product, the activation, the down product and the weighted sum of the experts' outputs. A trace records its
tensor arguments only.

Read from the trace (the op's ``Input Dims`` and ``Input type``): the tokens (the hidden states' rows), the hidden
width as passed (padded, where vLLM pads it for the kernel), the number of experts (the router logits' width) and
the activations' dtype.

Assumed from the model (``metrics/moe_models.toml``; the import's note names the model): the expert width
(intermediate size), how many experts each token goes to (top-k), the model's unpadded hidden width, the
activation (SwiGLU), the weights' storage format and bits per element (MXFP4: 4.25 bits with its scales) and the
experts' biases. The model is recognised by the experts and the hidden width the op records; a MoE op of a model
not listed keeps its work unknown.

FLOPs (model FLOPs, of the unpadded sizes): per routed token (tokens x top-k), the gate and up products
2 x d x 2F and the down product 2 x F x d: 6 x tokens x k x d x F. The activation, the routing and the weighted
sum (under 0.1% of it for gpt-oss) are left out. They run as matrix products in the activations' precision (the
MXFP4 weights are dequantised to it in the kernel on a GPU without FP4 matrix cores).

Bytes (fewest): the weights and biases of the experts the tokens can reach, min(experts, tokens x k), each read
once at its stored bits; the hidden states and router logits read and the output written once. The
intermediate activations (tokens x k x 2F) are not counted: a kernel that keeps them on chip does not move them.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache

from hroofline.roofs.metricset import metrics_dir
from hroofline.work.fused_ops import LIST_DTYPE, Argument, Formula, FusedWork
from hroofline.work.ops import PRECISION_COLUMN

MOE_OPS = ("vllm::moe_forward",)


@dataclass(frozen=True)
class MoeModel:
    """One model's MoE layer sizes, as its published config gives them."""

    name: str
    source: str
    hidden_size: int
    intermediate_size: int
    experts: int
    experts_per_token: int
    layers: int
    weight_format: str
    weight_bits: float
    expert_bias: bool
    bias_bits: float
    hidden_padded_to: int

    def recorded_as(self, hidden: int, experts: int) -> bool:
        """Whether an op recording this hidden width and number of experts is this model's MoE layer."""
        padded = math.ceil(self.hidden_size / self.hidden_padded_to) * self.hidden_padded_to
        return experts == self.experts and hidden in (self.hidden_size, padded)

    @property
    def assumption(self) -> str:
        return (
            f"{self.name} ({self.source}): {self.experts_per_token} of {self.experts} experts a token, expert "
            f"width {self.intermediate_size}, hidden {self.hidden_size}, SwiGLU, {self.weight_format} weights at "
            f"{self.weight_bits:g} bits an element"
        )


@cache
def moe_models() -> tuple[MoeModel, ...]:
    data = tomllib.loads((metrics_dir() / "moe_models.toml").read_text())
    return tuple(
        MoeModel(
            name=name,
            source=entry["source"],
            hidden_size=int(entry["hidden_size"]),
            intermediate_size=int(entry["intermediate_size"]),
            experts=int(entry["experts"]),
            experts_per_token=int(entry["experts_per_token"]),
            layers=int(entry["layers"]),
            weight_format=entry["weight_format"],
            weight_bits=float(entry["weight_bits"]),
            expert_bias=bool(entry["expert_bias"]),
            bias_bits=float(entry["bias_bits"]),
            hidden_padded_to=int(entry["hidden_padded_to"]),
        )
        for name, entry in data.items()
        if isinstance(entry, dict)
    )


def moe_model(args: list[Argument]) -> MoeModel | None:
    """The listed model whose MoE layer a ``moe_forward`` call with these arguments is, or None."""
    hidden, logits = (args[i] if i < len(args) else Argument() for i in (0, 1))
    if hidden.tensor is None or logits.tensor is None or len(hidden.tensor) != 2 or len(logits.tensor) != 2:
        return None
    if hidden.tensor[0] != logits.tensor[0]:
        return None
    return next((m for m in moe_models() if m.recorded_as(hidden.tensor[1], logits.tensor[1])), None)


def moe_forward(args: list[Argument]) -> FusedWork | None:
    """vllm::moe_forward(hidden_states [tokens, d], router_logits [tokens, experts], ...): see the module."""
    model = moe_model(args)
    if model is None:
        return None
    hidden, logits = args[0], args[1]
    tokens = hidden.tensor[0] if hidden.tensor else 0
    routed = tokens * model.experts_per_token
    d, f = model.hidden_size, model.intermediate_size
    flops = 2.0 * routed * (d * 2 * f + f * d)
    reached = min(model.experts, routed)
    weights = reached * (d * 2 * f + f * d) * model.weight_bits / 8
    biases = reached * (2 * f + d) * model.bias_bits / 8 if model.expert_bias else 0.0
    moved = weights + biases + 2 * hidden.bytes + logits.bytes  # the output has the hidden states' shape
    return FusedWork(flops, moved, PRECISION_COLUMN.get(hidden.dtype or LIST_DTYPE, "flops_fp32"), matmul=True)


MOE_FORMULAS: dict[str, Formula] = {name: moe_forward for name in MOE_OPS}
