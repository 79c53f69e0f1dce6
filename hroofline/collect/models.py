"""The models a workload can run: torchvision (classification and segmentation), Hugging Face
``transformers`` configs built offline, and the user's own module from a factory.

A model spec is a string, checked without importing torch where its form allows:

- ``resnet18``, ``deeplabv3_resnet50``: torchvision (``--arch``);
- ``hf:gpt2``, ``hf:bert-base-uncased``, ``hf:tinyllama-1.1b``: a config built in code, random weights;
  nothing is downloaded (``transformers`` is an optional extra: ``pip install 'hroofline[hf]'``);
- ``PKG.MODULE:FACTORY`` or ``FILE.py:FACTORY``: ``FACTORY()`` returns an ``nn.Module``.

Each comes with a synthetic batch of the input shape asked for (images, or token ids for a sequence
length) and a loss: cross-entropy over random labels for classifiers and per pixel for segmentation,
the model's own loss for transformers, and for a user module cross-entropy over dimension 1 of its output
(per position for token models) when its output looks like logits, else the mean square of its output.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hroofline.errors import UsageError, did_you_mean

HF_PREFIX = "hf:"
INSTANCE_PREFIX = "instance:"  # an nn.Module handed to the Python API, by registry key
# Transformer configs built in code (no download): name -> (transformers config class, task, arguments).
HF_CONFIGS: dict[str, tuple[str, str, dict[str, int]]] = {
    "gpt2": ("GPT2Config", "causal-lm", {}),
    "gpt2-medium": ("GPT2Config", "causal-lm", {"n_embd": 1024, "n_layer": 24, "n_head": 16}),
    "gpt2-large": ("GPT2Config", "causal-lm", {"n_embd": 1280, "n_layer": 36, "n_head": 20}),
    "bert-base-uncased": ("BertConfig", "masked-lm", {}),
    "bert-large-uncased": (
        "BertConfig",
        "masked-lm",
        {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
    ),
    "tinyllama-1.1b": (
        "LlamaConfig",
        "causal-lm",
        {
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_hidden_layers": 22,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "vocab_size": 32000,
            "max_position_embeddings": 2048,
        },
    ),
}
DEFAULT_SEQ_LEN = 512
LARGE_INPUT_MODELS: dict[str, int] = {"inception_v3": 299}
_FACTORY = re.compile(r"(?P<where>[^:]+):(?P<factory>[A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class ModelSpec:
    """What to build: ``kind`` torchvision, hf or python; ``name`` as given."""

    kind: str
    name: str

    @property
    def label(self) -> str:
        """A short name for runs: resnet18, gpt2, tiny_cnn.build."""
        if self.kind == "instance":
            return self.name.rsplit(":", 1)[-1].lower()
        if self.kind == "hf":
            return self.name.removeprefix(HF_PREFIX)
        if self.kind == "python":
            where, _, factory = self.name.rpartition(":")
            stem = Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]
            return re.sub(r"[^A-Za-z0-9._+-]", "-", f"{stem}.{factory}")
        return self.name

    @property
    def takes_tokens(self) -> bool:
        return self.kind == "hf"


def parse_model(text: str) -> ModelSpec:
    """A model spec from ``--model`` or ``--arch``, by its form (no import)."""
    text = text.strip()
    if text.startswith(INSTANCE_PREFIX) and text.split(":")[1] in _INSTANCES:
        return ModelSpec("instance", text)
    if text.startswith(HF_PREFIX):
        name = text.removeprefix(HF_PREFIX)
        if name not in HF_CONFIGS:
            raise UsageError(f"unknown transformers config {text!r}", "known: hf:" + ", hf:".join(HF_CONFIGS))
        return ModelSpec("hf", text)
    if _FACTORY.fullmatch(text):
        return ModelSpec("python", text)
    if ":" in text or text.endswith(".py") or "/" in text:
        raise UsageError(
            f"cannot read model {text!r}",
            "use a torchvision name (resnet18), hf:NAME, PKG.MODULE:FACTORY or FILE.py:FACTORY",
        )
    return ModelSpec("torchvision", text)


_INSTANCES: dict[str, Any] = {}


def register_instance(module: Any) -> str:
    """A model spec for an ``nn.Module`` object (the Python API's ``predict(module, ...)``)."""
    key = str(len(_INSTANCES))
    _INSTANCES[key] = module
    return f"{INSTANCE_PREFIX}{key}:{type(module).__name__}"


@cache
def _bundled_torchvision_names() -> dict[str, frozenset[str]] | None:
    """metrics/torchvision_models.toml, when it lists the torchvision installed (checked without importing it)."""
    import importlib.metadata
    import tomllib

    from hroofline.roofs.metricset import metrics_dir

    data = tomllib.loads((metrics_dir() / "torchvision_models.toml").read_text())
    try:
        installed = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return None
    if installed.split("+")[0] != data["torchvision"]:
        return None
    return {kind: frozenset(data[kind]) for kind in ("classification", "segmentation")}


def torchvision_names() -> dict[str, frozenset[str]]:
    """The classification and segmentation models torchvision builds: from the bundled list where it is the
    installed torchvision's, else from torchvision itself."""
    bundled = _bundled_torchvision_names()
    if bundled is not None:
        return bundled
    import torchvision

    return {
        "classification": frozenset(torchvision.models.list_models(module=torchvision.models)),
        "segmentation": frozenset(torchvision.models.list_models(module=torchvision.models.segmentation)),
    }


def torchvision_kind(name: str) -> str | None:
    """'classification', 'segmentation', or None for a name torchvision does not have (or another task)."""
    return next((kind for kind, names in torchvision_names().items() if name in names), None)


def check_model(spec: ModelSpec) -> None:
    """Refuses what cannot be built, before minutes of work: an unknown torchvision name, a missing file,
    transformers not installed."""
    if spec.kind == "torchvision" and torchvision_kind(spec.name) is None:
        known = sorted(set().union(*torchvision_names().values()))
        close = did_you_mean(spec.name, known, "torchvision models")
        raise UsageError(
            f"unknown model {spec.name!r}",
            close
            if close.startswith("did you mean")
            else "a torchvision classifier or segmentation model (resnet18, vit_b_16, deeplabv3_resnet50), hf:NAME, "
            "or your own with --model PKG.MODULE:FACTORY or FILE.py:FACTORY",
        )
    if spec.kind == "hf" and importlib.util.find_spec("transformers") is None:
        raise UsageError(f"{spec.name} needs the transformers package", "pip install 'hroofline[hf]' (or transformers)")
    if spec.kind == "python":
        where = spec.name.rpartition(":")[0]
        if where.endswith(".py") and not Path(where).is_file():
            raise UsageError(f"--model {spec.name}: no file {where}")


def parse_input_shape(text: str | None, spec: ModelSpec | None = None) -> tuple[int, ...] | None:
    """'3,512,512' (or '3x512x512') -> (3, 512, 512): one sample's shape, without the batch dimension; checked
    against ``spec``'s input where its form says it (torchvision models take C,H,W images; transformers take
    token ids), before anything is imported."""
    if text is None:
        return None
    parts = [part.strip() for part in text.replace("x", ",").split(",")]
    try:
        shape = tuple(int(part) for part in parts)
    except ValueError:
        shape = ()
    if not shape or any(size < 1 for size in shape):
        raise UsageError(f"--input-shape takes C,H,W (e.g. 3,224,224), got {text!r}", _SHAPE_HINT)
    check_input_shape(shape, spec, text)
    return shape


_SHAPE_HINT = "one sample's positive sizes without the batch: C,H,W for images; any sizes for your own --model"


def check_input_shape(shape: tuple[int, ...] | None, spec: ModelSpec | None, text: str | None = None) -> None:
    """Refuses an input shape the model cannot take, by its form: a torchvision model takes C,H,W (an image's
    channels, height and width), a transformer token ids (--seq-len)."""
    if shape is None or spec is None:
        return
    given = repr(text) if text is not None else repr(",".join(map(str, shape)))
    if spec.kind == "hf":
        raise UsageError(f"{spec.name} takes token ids: give --seq-len, not --input-shape")
    if spec.kind == "torchvision" and len(shape) != 3:
        raise UsageError(
            f"--input-shape takes C,H,W (e.g. 3,224,224), got {given}",
            f"{spec.name} takes images of channels, height and width, without the batch",
        )


@dataclass
class BuiltModel:
    """A model with its batch and loss: ``loss(model)`` runs the forward pass and returns the loss."""

    module: Any
    inputs: Any  # a tensor: images or token ids
    loss: Callable[[Any, Any], Any]  # (model, inputs) -> scalar loss
    floating_input: bool


def default_input_shape(spec: ModelSpec) -> tuple[int, ...]:
    """One sample's shape when none is given: ImageNet's 3x224x224, or the larger input a torchvision model
    was trained at."""
    size = LARGE_INPUT_MODELS.get(spec.name, 224) if spec.kind == "torchvision" else 224
    return (3, size, size)


def build_model(
    spec: ModelSpec, batch_size: int, input_shape: tuple[int, ...] | None, seq_len: int | None
) -> BuiltModel:
    """The model (built on the current default device: ``with torch.device(...)``), batch and loss."""
    import torch

    if spec.kind == "hf":
        if input_shape is not None:
            raise UsageError(f"{spec.name} takes token ids: give --seq-len, not --input-shape")
        return _build_hf(spec, batch_size, seq_len or DEFAULT_SEQ_LEN)
    shape = input_shape or default_input_shape(spec)
    if spec.kind == "torchvision":
        module = torchvision_model(spec.name)
    elif spec.kind == "instance":
        module = _INSTANCES[spec.name.split(":")[1]]
        device = torch.empty(0).device  # the default device of the caller's `with torch.device(...)`
        module = module.to_empty(device=device) if device.type == "meta" else module.to(device)
    else:
        module = _user_model(spec)
    if seq_len is not None:
        vocabulary = _vocabulary(module)
        inputs = torch.randint(0, vocabulary, (batch_size, seq_len))
        return BuiltModel(module, inputs, _logits_loss, floating_input=False)
    return BuiltModel(module, torch.randn(batch_size, *shape), _logits_loss, floating_input=True)


def torchvision_model(name: str) -> Any:
    """torchvision's model ``name`` with random weights, built on the caller's default device (the meta device
    included)."""
    import torchvision

    extra: dict[str, Any] = (
        {"aux_logits": False, "init_weights": False} if name in ("inception_v3", "googlenet") else {}
    )
    if torchvision_kind(name) == "segmentation":
        extra = {"weights_backbone": None, "aux_loss": False}
    with _regnet_widths_on_cpu() if name.startswith("regnet") else nullcontext():
        return torchvision.models.get_model(name, weights=None, **extra)


@contextmanager
def _regnet_widths_on_cpu() -> Iterator[None]:
    """RegNet computes its stage widths with tensors and reads them back (``.tolist()``), which the meta device
    cannot do: that arithmetic runs on the CPU, the model's own tensors stay on the caller's device."""
    import torch
    from torchvision.models import regnet

    original = regnet.BlockParams.__dict__["from_init_params"]

    def on_cpu(cls: type, *args: Any, **kwargs: Any) -> Any:
        with torch.device("cpu"):
            return original.__func__(cls, *args, **kwargs)

    regnet.BlockParams.from_init_params = classmethod(on_cpu)
    try:
        yield
    finally:
        regnet.BlockParams.from_init_params = original


def _user_model(spec: ModelSpec) -> Any:
    """``FACTORY()`` from a file (its folder importable while it loads) or a module (the current folder
    importable, as for ``python -m``)."""
    import torch

    where, _, factory_name = spec.name.rpartition(":")
    folder = str(Path(where).resolve().parent) if where.endswith(".py") else str(Path.cwd())
    saved_path = list(sys.path)
    sys.path.insert(0, folder)
    try:
        code = _load_code(spec, where)
        factory = getattr(code, factory_name, None)
        if not callable(factory):
            raise UsageError(f"--model {spec.name}: {where} has no function {factory_name}")
        # a factory that builds torchvision's RegNet (the user's code imported torchvision) needs its widths
        regnet = "torchvision.models.regnet" in sys.modules
        try:
            with _regnet_widths_on_cpu() if regnet else nullcontext():
                module = factory()
        except Exception as error:
            raise UsageError(f"--model {spec.name}: {factory_name}() failed: {type(error).__name__}: {error}") from None
    finally:
        sys.path[:] = saved_path
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"--model {spec.name}: {factory_name}() returned {type(module).__name__}, not an nn.Module")
    return module


def _load_code(spec: ModelSpec, where: str) -> Any:
    try:
        if not where.endswith(".py"):
            return importlib.import_module(where)
        path = Path(where).resolve()
        module_name = f"hroofline_user_model_{path.stem}"
        loader = importlib.util.spec_from_file_location(module_name, path)
        if loader is None or loader.loader is None:
            raise UsageError(f"--model {spec.name}: cannot load {where}")
        code = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = code
        loader.loader.exec_module(code)
        return code
    except UsageError:
        raise
    except ImportError as error:
        raise UsageError(f"--model {spec.name}: cannot import {where} ({error})") from None
    except Exception as error:
        raise UsageError(f"--model {spec.name}: {where} failed to load: {type(error).__name__}: {error}") from None


def _vocabulary(module: Any) -> int:
    import torch

    embeddings = [m for m in module.modules() if isinstance(m, torch.nn.Embedding)]
    if not embeddings:
        raise UsageError("--seq-len is for models that take token ids: this model has no nn.Embedding")
    return int(embeddings[0].num_embeddings)


def _build_hf(spec: ModelSpec, batch_size: int, seq_len: int) -> BuiltModel:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()  # no chatter about configs on the user's terminal
    class_name, task, arguments = HF_CONFIGS[spec.name.removeprefix(HF_PREFIX)]
    config = getattr(transformers, class_name)(**arguments)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if positions is not None and seq_len > positions:
        raise UsageError(f"--seq-len {seq_len}: {spec.name} takes at most {positions} tokens")
    auto = transformers.AutoModelForCausalLM if task == "causal-lm" else transformers.AutoModelForMaskedLM
    module = auto.from_config(config, attn_implementation="sdpa")
    inputs = torch.randint(0, config.vocab_size, (batch_size, seq_len))

    def loss(model: Any, tokens: Any) -> Any:
        return model(input_ids=tokens, labels=tokens).loss

    return BuiltModel(module, inputs, loss, floating_input=False)


_labels: dict[tuple[Any, ...], Any] = {}
_criterion: list[Any] = []  # one nn.CrossEntropyLoss: a module, so that layers label its work <loss>


def _logits_loss(model: Any, inputs: Any) -> Any:
    """Cross-entropy over random labels where the output looks like logits (dimension 1 for images,
    the last for token sequences), else the mean square of the output."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    output = model(inputs)
    if isinstance(output, dict):
        output = output["out"] if "out" in output else next(iter(output.values()))
    output = getattr(output, "logits", output)
    if isinstance(output, tuple | list):  # the first floating tensor of the outputs
        output = next((t for t in output if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
    if not isinstance(output, torch.Tensor) or not output.is_floating_point():
        raise UsageError(
            f"the model's output is {type(output).__name__}"
            + (f" of {output.dtype}" if isinstance(output, torch.Tensor) else "")
            + ": hroofline trains on a floating-point tensor output (logits)"
        )
    if torch.is_grad_enabled() and not output.requires_grad:
        raise UsageError("the model's output needs no gradient: there is nothing to train (no parameters used?)")
    if output.dim() < 2:
        return output.float().square().mean()
    logits = output.float()
    if not inputs.is_floating_point():  # token ids in, (batch, sequence, vocabulary) out
        logits = logits.flatten(0, -2)
        classes, target_shape = logits.shape[-1], logits.shape[:1]
    else:
        classes, target_shape = logits.shape[1], (logits.shape[0], *logits.shape[2:])
    key = (tuple(target_shape), classes, logits.device)
    if key not in _labels:
        with _disable_current_modes():  # the labels are data, not work of the step
            _labels[key] = torch.randint(0, classes, target_shape, device=logits.device)
    if not _criterion:
        _criterion.append(torch.nn.CrossEntropyLoss())
    return _criterion[0](logits, _labels[key])
