"""What generation needs of a decoder-only transformer: its shape, its weights by role, and the host's work per
forward pass, read from a model built on the meta device (no weights, no network).

``predict --generate`` (:mod:`hroofline.analyze.generation`) counts a token's work from these: the matrix
products' weights (2 FLOPs per weight per token), the attention's width and the KV cache's heads, and the
ops one forward pass of one token launches (each costing the host its kind's time).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from hroofline.collect.models import HF_CONFIGS, HF_PREFIX, parse_model
from hroofline.errors import UsageError

# Transformers' modules that multiply by a weight matrix: nn.Linear, and GPT-2's Conv1D (a transposed Linear).
MATMUL_MODULES = ("Linear", "Conv1D")


@dataclass(frozen=True)
class DecoderShape:
    """A decoder-only transformer as generation sees it; counts of weights are elements, not bytes."""

    name: str
    layers: int
    heads: int
    kv_heads: int  # fewer than heads with grouped-query attention (Llama); the KV cache holds these
    head_dim: int
    vocab: int
    max_positions: int | None  # the longest context its position embeddings allow, None: no limit known
    body_matmul_weights: int  # the decoder layers' matrix products: 2 FLOPs each per token
    head_weights: int  # the output projection onto the vocabulary (lm_head), per token whose logits are needed
    read_weights: int  # what one forward pass reads: every weight but the untied embedding tables (rows gathered)
    parameters: int  # all of them, once (a tied lm_head is the token embedding)
    forward_ops: int  # ops one forward pass of one token launches (traced, KV cache updates included)
    forward_host_weight: float  # those ops' host time in element-wise ops' (metrics/host_cost.toml)

    @property
    def attention_width(self) -> int:
        """Query heads x head size: a token's attention does 2 FLOPs per element of it per context token, twice
        (scores Q K^T, then the weighted sum of V)."""
        return self.heads * self.head_dim


def check_generation_model(text: str) -> str:
    """The name of a bundled causal language model (``hf:gpt2``), or a usage error; torch is not imported."""
    spec = parse_model(text)
    if spec.kind != "hf":
        raise UsageError(
            f"--generate needs a transformer config built in code, not {text!r}",
            "use --model hf:NAME: " + ", ".join(_causal_names()),
        )
    name = spec.name.removeprefix(HF_PREFIX)
    if HF_CONFIGS[name][1] != "causal-lm":
        raise UsageError(f"{text} is not a causal language model: it does not generate", ", ".join(_causal_names()))
    return name


def _causal_names() -> list[str]:
    return [HF_PREFIX + name for name, (_, task, _) in HF_CONFIGS.items() if task == "causal-lm"]


@cache  # a trace each: a session's predictions of one model share it
def decoder_shape(name: str) -> DecoderShape:
    """The shape of the bundled config ``name`` (``gpt2``, ``tinyllama-1.1b``), its weights counted on the meta
    device and one token's forward pass traced there."""
    import torch
    import transformers

    from hroofline.collect.meta_trace import trace_step
    from hroofline.collect.workload import WorkloadConfig
    from hroofline.work.host_weights import load_host_weights

    transformers.logging.set_verbosity_error()
    class_name, _, arguments = HF_CONFIGS[name]
    config = getattr(transformers, class_name)(**arguments)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    # fp32: the ops of a model held in one dtype (amp's traced casts are not generation's)
    forward = trace_step(WorkloadConfig(HF_PREFIX + name, 1, "fp32", "sgd", "meta", seq_len=1), "forward")
    host_weight = float(load_host_weights().of(forward["kernel"]).sum())  # per op, as the step estimate's floors
    return DecoderShape(
        name=name,
        layers=int(config.num_hidden_layers),
        heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
        head_dim=head_dim,
        vocab=int(config.vocab_size),
        max_positions=getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None),
        **_weights(model),
        forward_ops=len(forward),
        forward_host_weight=host_weight,
    )


def _weights(model: Any) -> dict[str, int]:
    """Weights by role, each storage counted once (a tied lm_head is the token embedding's storage)."""
    import torch

    head = model.get_output_embeddings()
    head_storage = id(head.weight)
    matmul: dict[int, int] = {}
    embedding: dict[int, int] = {}
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if weight is None:
            continue
        if isinstance(module, torch.nn.Embedding):
            embedding[id(weight)] = weight.numel()
        elif type(module).__name__ in MATMUL_MODULES:
            matmul[id(weight)] = weight.numel()
    everything = {id(p): p.numel() for p in model.parameters()}
    untied_tables = sum(n for key, n in embedding.items() if key not in matmul and key != head_storage)
    return {
        "body_matmul_weights": sum(n for key, n in matmul.items() if key != head_storage),
        "head_weights": head.weight.numel(),
        "read_weights": sum(everything.values()) - untied_tables,
        "parameters": sum(everything.values()),
    }
