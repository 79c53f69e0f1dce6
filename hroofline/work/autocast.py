"""What ``torch.autocast`` does to a model, on the meta device where it does not act (autocast dispatches on
the CUDA and CPU keys, meta tensors have neither).

Autocast keeps the weights in float32. At each op of its 16-bit list (convolutions, matrix products, linear
layers, attention) it casts float32 arguments to 16 bit; at each op of its float32 list (softmax, layer and
group norm, losses, exp, log, pow, ...) it casts 16-bit arguments to float32. The casts are ops of their own,
in forward and (as their gradients) in backward, and 16-bit weight copies live until backward.

The emulation does the same at the same level, above autograd: a ``TorchFunctionMode`` over the forward pass
casts the arguments of those functions, and forward hooks on ``nn.MultiheadAttention`` (whose projections run
inside one Python function the mode sees whole) and on convolutions and linear layers swap their float32
parameters for 16-bit casts while they run (autograd carries the gradients back to the float32 parameters).
Each input tensor is cast once per call. Left out: autocast's cache of weight casts across repeated uses of
one weight in a forward pass (tied embeddings cast twice here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_ACTIVE: ContextVar[torch.dtype | None] = ContextVar("hroofline_autocast_dtype", default=None)

CAST_PARAMETERS = ("weight", "bias")
CAST_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear, torch.nn.MultiheadAttention)
# nn.MultiheadAttention runs its projections with F.linear on its own parameters and on out_proj's.
ATTENTION_PARAMETERS = ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight", "v_proj_weight")


def _functions(*items: Any) -> frozenset[Callable[..., Any]]:
    return frozenset(item for item in items if item is not None)


# Autocast's CUDA lists (aten/src/ATen/autocast_mode.cpp), as the Python functions a model calls.
LOWER_PRECISION = _functions(
    F.linear, F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d,
    torch.addmm, torch.mm, torch.bmm, torch.baddbmm, torch.addbmm, torch.matmul, torch.einsum, torch.mv,
    torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__, torch.Tensor.mm, torch.Tensor.bmm,
    torch.Tensor.addmm, torch.Tensor.baddbmm,
)  # fmt: skip
FLOAT32 = _functions(
    F.softmax, F.log_softmax, torch.softmax, torch.log_softmax, torch.Tensor.softmax, torch.Tensor.log_softmax,
    F.layer_norm, F.group_norm, F.cross_entropy, F.nll_loss, F.mse_loss, F.l1_loss, F.smooth_l1_loss,
    F.binary_cross_entropy_with_logits, F.kl_div, torch.exp, torch.log, torch.pow, torch.rsqrt, torch.logsumexp,
    torch.Tensor.exp, torch.Tensor.log, torch.Tensor.pow, torch.Tensor.__pow__, torch.Tensor.rsqrt,
    torch.Tensor.logsumexp, torch.cumsum, torch.Tensor.cumsum,
)  # fmt: skip


def active_dtype() -> torch.dtype | None:
    """The 16-bit dtype of the emulated autocast region we are in (fused attention casts to it), if any."""
    return _ACTIVE.get()


def _cast_tensors(values: Any, source: tuple[torch.dtype, ...], target: torch.dtype, cast: dict[int, Any]) -> Any:
    if isinstance(values, torch.Tensor):
        if values.dtype in source:
            if id(values) not in cast:
                cast[id(values)] = values.to(target)
            return cast[id(values)]
        return values
    if isinstance(values, list | tuple):
        return type(values)(_cast_tensors(v, source, target, cast) for v in values)
    return values


class AutocastFunctions(TorchFunctionMode):
    """Casts the arguments of autocast's 16-bit and float32 functions, as autocast does."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in LOWER_PRECISION:
            source, target = (torch.float32,), self.dtype
        elif func in FLOAT32:
            source, target = (torch.float16, torch.bfloat16), torch.float32
        else:
            return func(*args, **kwargs)
        cast: dict[int, Any] = {}
        args = _cast_tensors(args, source, target, cast)
        kwargs = {k: _cast_tensors(v, source, target, cast) for k, v in kwargs.items()}
        return func(*args, **kwargs)


class AutocastEmulation:
    """Autocast for ``model`` at ``dtype``: hooks on its layers now, the function mode during :meth:`region`."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self._saved: dict[int, list[tuple[torch.nn.Module, str, torch.nn.Parameter]]] = {}
        for module in model.modules():
            if isinstance(module, CAST_MODULES):
                module.register_forward_pre_hook(self._cast)
                module.register_forward_hook(self._restore)

    @contextlib.contextmanager
    def region(self) -> Iterator[None]:
        """The forward pass under autocast."""
        token = _ACTIVE.set(self.dtype)
        try:
            with AutocastFunctions(self.dtype):
                yield
        finally:
            _ACTIVE.reset(token)

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
        return _cast_tensors(args, (torch.float32,), self.dtype, {})  # one cast per input, however often passed

    def _restore(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        for owner, name, parameter in self._saved.pop(id(module), []):
            object.__delattr__(owner, name)
            owner._parameters[name] = parameter
