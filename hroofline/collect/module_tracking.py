"""Module tracking for layers: PyTorch's own ``ModuleTracker``, ordered and listened to.

:class:`torch.utils.module_tracker.ModuleTracker` (what ``FlopCounterMode`` attributes FLOPs with) follows
the module hierarchy through forward hooks and, in backward, through gradient hooks on each module's inputs
and outputs, so backward work belongs to the module whose forward created it. :class:`LayerTracker` adds
the order modules were entered (so the innermost is known), names the model's modules by path and tells
listeners when the open modules change: the CPU recorder reads the current layer per op, the NVTX listener
keeps one process-wide start/end range open, named after the innermost module, which ncu records per kernel.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.nn.modules.loss import _Loss
from torch.utils._pytree import tree_flatten
from torch.utils.module_tracker import ModuleTracker

from hroofline.model.layers import COMPILED, LOSS, MODEL, OPTIMIZER, label_outside_modules, layer_name

_GLOBAL = "Global"  # ModuleTracker's name for "no module"

ChangeListener = Callable[[str], None]  # the layer of what runs now


class LayerTracker(ModuleTracker):
    """ModuleTracker that knows the order modules were entered and names the model's modules by path.

    ``roots`` are the models whose submodules are named by path (``layer1.0.conv1``); a loss module is
    ``<loss>``; any other module keeps ModuleTracker's name (its class, then the path below it)."""

    def __init__(self, roots: Iterable[Any] = (), listeners: Sequence[ChangeListener] = ()) -> None:
        super().__init__()
        self._roots = list(roots)
        self._entered: dict[str, tuple[int, int]] = {}  # name -> (order entered, 0; or -1 for a shadow)
        self._count = 0
        # id(tensor) -> (the tensor, its version then, the module that made it)
        self._output_owner: dict[int, tuple[weakref.ref[Any], int, str]] = {}
        self._shadow_of: dict[str, str] = {}  # module -> the module that made the output it returned
        self.listeners: list[ChangeListener] = list(listeners)
        self.phase = "other"
        self._model_done = False  # a root finished its forward in this phase: what follows is the loss
        self._entered_at_reset = 0

    def __enter__(self) -> LayerTracker:
        # torch.compile(module) warns that global hooks (these) fire once more, on its wrapper: that call is what
        # labels the compiled region <compiled>, so the warning would only puzzle the user of a compiled script.
        warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
        super().__enter__()
        return self

    def add_root(self, module: Any) -> None:
        if all(module is not root for root in self._roots):
            self._roots.append(module)

    def _get_mod_name(self, mod: Any) -> str:
        if mod not in self._known_modules:
            if any(mod is root for root in self._roots):
                self._known_modules[mod] = MODEL
            elif isinstance(mod, _Loss):
                self._known_modules[mod] = LOSS
            elif type(mod).__name__ == "OptimizedModule" and hasattr(mod, "_orig_mod"):
                self._known_modules[mod] = COMPILED  # torch.compile's wrapper: its inner modules are never entered
        return super()._get_mod_name(mod)

    def _fw_pre_hook(self, mod: Any, input: Any) -> None:
        if torch.compiler.is_compiling():
            return  # see _fw_post_hook
        super()._fw_pre_hook(mod, input)

    def _fw_post_hook(self, mod: Any, input: Any, output: Any) -> None:
        """Notes which module made each output first: a module that returns a tensor another module made
        (a parent returning its last child's output, a Dropout(0) or Identity passing its input on) is
        entered by the same gradient in backward, and is then that module's shadow. A tensor changed in place
        after it was returned (an in-place ReLU after ``out += identity``) is the changer's own.

        Inside a torch.compile'd region both hooks step aside: Dynamo would trace this bookkeeping (PyTorch
        2.11's failed on its weak dictionary), and the region's kernels run fused, outside any one module."""
        if torch.compiler.is_compiling():
            return
        name = self._get_mod_name(mod)
        tensors = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)]
        owners = [self._owner(t) for t in tensors]
        maker = next((o for o in owners if o is not None), None)
        if maker is not None and maker != name:
            self._shadow_of[name] = maker
        else:
            self._shadow_of.pop(name, None)
            for tensor in tensors:
                self._output_owner[id(tensor)] = (weakref.ref(tensor), tensor._version, name)
        super()._fw_post_hook(mod, input, output)

    def _owner(self, tensor: Any) -> str | None:
        """The module that returned this tensor as it is now: one changed in place since (``out += x``, an
        in-place ReLU) was made anew by whoever changed it."""
        entry = self._output_owner.get(id(tensor))
        if entry is None or entry[0]() is not tensor or entry[1] != tensor._version:
            return None
        return entry[2]

    def _get_append_fn(self, name: str, is_bw: bool) -> Callable[..., None]:
        append = super()._get_append_fn(name, is_bw)

        def fn(*args: Any) -> None:
            append(*args)
            self._count += 1
            maker = self._shadow_of.get(name) if is_bw else None
            if maker is not None and maker in self._entered:
                self._entered[name] = (self._entered[maker][0], -1)
            else:
                self._entered[name] = (self._count, 0)
            self._changed()

        return fn

    def _get_pop_fn(self, name: str, is_bw: bool) -> Callable[..., None]:
        pop = super()._get_pop_fn(name, is_bw)

        def fn(*args: Any) -> None:
            pop(*args)
            if name == MODEL and not is_bw:
                self._model_done = True
            self._changed()

        return fn

    def phase_changed(self, phase: str, entering: bool) -> None:
        """A phase listener: open modules are forgotten at each boundary (backward's first layers are never
        popped: their inputs need no gradient)."""
        self.phase = phase if entering else "other"
        self.parents = {_GLOBAL}
        self._model_done = False
        self._entered_at_reset = self._count
        self._output_owner.clear()
        self._changed()

    def layer(self) -> str:
        """The layer of what runs now: the working module's path, or the label of what is in none."""
        if self.phase == "optimizer":
            return OPTIMIZER
        inner = self.innermost()
        if inner is not None:
            return inner
        return label_outside_modules(self.phase, self._model_done, self._count > self._entered_at_reset)

    def _changed(self) -> None:
        if self.listeners:
            layer = self.layer()
            for listener in self.listeners:
                listener(layer)

    def innermost(self) -> str | None:
        """The module working now, as a layer name; None outside every module.

        The module entered last. In backward a module stays open until the gradient of its inputs is
        complete (a block's ``downsample`` conv stays open while the block's other convolutions, which
        share its input, run), so the one entered last is working; modules entered by one gradient (a
        shadow and the module that made the tensor) count as entered when that module was, behind it."""
        names = [n for n in self.parents if n != _GLOBAL]
        if not names:
            return None
        return layer_name(max(names, key=lambda n: self._entered.get(n, (0, 0))))
