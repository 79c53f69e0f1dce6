"""What ``torch.autocast`` does to a model's convolutions and linear layers, on the meta device where it does
not act (autocast dispatches on the CUDA and CPU keys, meta tensors have neither).

Autocast keeps the weights in float32 and casts, at each convolution, linear layer and attention projection,
the weight, the bias
and a float32 input to 16 bit; the casts are ops of their own, in forward and (as their gradients) in backward,
and the 16-bit weight copies live until backward. This emulation does the same with forward hooks: before the
layer runs, its float32 parameters are swapped for 16-bit casts of them (autograd carries their gradients back
to the float32 parameters) and a float32 input is cast; after it, the parameters are put back.

What it leaves out: autocast's float32 list (softmax, layer norm and the like run in float32 under autocast;
here they run in the dtype of their input) and its cache of weight casts across repeated uses in one forward.
"""

from __future__ import annotations

from typing import Any

import torch

CAST_PARAMETERS = ("weight", "bias")
CAST_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear, torch.nn.MultiheadAttention)
# nn.MultiheadAttention runs its projections with F.linear on its own parameters and on out_proj's.
ATTENTION_PARAMETERS = ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight", "v_proj_weight")


class AutocastEmulation:
    """Hooks on every convolution and linear layer of ``model`` that cast as autocast would, to ``dtype``."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self._saved: dict[int, list[tuple[torch.nn.Module, str, torch.nn.Parameter]]] = {}
        self.layers = 0
        for module in model.modules():
            if isinstance(module, CAST_MODULES):
                module.register_forward_pre_hook(self._cast)
                module.register_forward_hook(self._restore)
                self.layers += 1

    def _cast(self, module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        owners = [(module, name) for name in CAST_PARAMETERS]
        if isinstance(module, torch.nn.MultiheadAttention):
            owners = [(module, name) for name in ATTENTION_PARAMETERS]
            owners += [(module.out_proj, name) for name in CAST_PARAMETERS]
        saved = []
        for owner, name in owners:
            parameter = owner._parameters.get(name)
            if parameter is not None and parameter.dtype == torch.float32:
                saved.append((owner, name, parameter))
                del owner._parameters[name]
                object.__setattr__(owner, name, parameter.to(self.dtype))
        self._saved[id(module)] = saved
        cast: dict[int, Any] = {}  # one cast per input tensor, however often it is passed (q, k, v)
        return tuple(self._input(a, cast) for a in args)

    def _input(self, value: Any, cast: dict[int, Any]) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
            if id(value) not in cast:
                cast[id(value)] = value.to(self.dtype)
            return cast[id(value)]
        return value

    def _restore(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        for owner, name, parameter in self._saved.pop(id(module), []):
            object.__delattr__(owner, name)
            owner._parameters[name] = parameter
