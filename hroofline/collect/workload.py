"""The profiled workload: one training step of a torchvision classifier, its phases marked.

Random weights and a synthetic ImageNet-sized batch, so nothing is downloaded. A step is forward (model
and loss), backward, optimizer (zero_grad, step, scaler update). Each phase runs inside
``PhaseMarks.phase(name)``; listeners turn that into NVTX ranges for ncu or into the current phase of
the CPU op recorder, so both backends see the same phases.

NVTX ranges are *start/end* (process-wide) ranges in the ``hroofline`` domain: PyTorch runs backward
on autograd worker threads, where a push/pop range opened on the main thread would not be seen.

Run as a program (``python -m hroofline.collect.workload --help``) it is the command ncu profiles.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hroofline.collect import compiling
from hroofline.collect.models import (
    ModelSpec,
    build_model,
    check_input_shape,
    check_model,
    parse_input_shape,
    parse_model,
)
from hroofline.errors import UsageError

if TYPE_CHECKING:
    from hroofline.collect.memory_tracking import StorageLiveness
    from hroofline.collect.module_tracking import LayerTracker
    from hroofline.work.autocast import AutocastEmulation

NVTX_DOMAIN = "hroofline"
STEP_PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")
# fp32 is what a PyTorch script gets by default: cuDNN convolutions in TF32 from Ampere on, matrix
# products in FP32. fp32-strict turns TF32 off; tf32 turns it on for matrix products too.
PRECISION_ALIASES: dict[str, str] = {
    "fp32": "fp32",
    "o0": "fp32",
    "fp32-strict": "fp32-strict",
    "tf32": "tf32",
    "amp": "amp",
    "o1": "amp",
    "amp-bf16": "amp-bf16",
    "o2": "o2",
}
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")
DEFAULT_BATCH_SIZE = 32  # a step's samples when none is said (the CLI, the API, run names)
DEFAULT_OPTIMIZER = "sgd"
# O2 scales the loss by a constant: Apex scales dynamically, which only matters over many steps.
O2_LOSS_SCALE = 1024.0
AMP_INIT_SCALE = 1024.0


def canonical_precision(name: str) -> str:
    key = name.strip().lower()
    if key not in PRECISION_ALIASES:
        raise UsageError(f"unknown precision {name!r}", "use fp32 (o0), fp32-strict, tf32, amp (o1), amp-bf16 or o2")
    return PRECISION_ALIASES[key]


def tf32_switches(precision: str) -> tuple[bool, bool]:
    """(torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) for a precision mode:
    PyTorch's defaults (False, True) for fp32 and the mixed-precision modes; fp32-strict turns TF32 off,
    tf32 turns it on for matrix products too. They act on compute capability 8.0 and later only."""
    return precision == "tf32", precision != "fp32-strict"


@dataclass(frozen=True)
class WorkloadConfig:
    """``arch`` is a model spec (:mod:`hroofline.collect.models`): a torchvision name, ``hf:NAME``,
    ``PKG.MODULE:FACTORY`` or ``FILE.py:FACTORY``; ``input_shape`` one sample's shape (C,H,W);
    ``seq_len`` the tokens per sample of a model that takes token ids; ``channels_last`` keeps the model and its
    images in NHWC (``torch.channels_last``), where cuDNN's tensor-core convolutions need no layout conversion;
    ``compile`` a torch.compile mode (:mod:`hroofline.collect.compiling`) for the model, None: eager."""

    arch: str
    batch_size: int = DEFAULT_BATCH_SIZE
    precision: str = "fp32"
    optimizer: str = DEFAULT_OPTIMIZER
    device: str = "cpu"
    seed: int = 0
    input_shape: tuple[int, ...] | None = None
    seq_len: int | None = None
    channels_last: bool = False
    compile: str | None = None

    @property
    def model(self) -> ModelSpec:
        return parse_model(self.arch)

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", canonical_precision(self.precision))
        compiling.check_compile_mode(self.compile)
        if self.optimizer not in OPTIMIZERS:
            raise UsageError(f"unknown optimizer {self.optimizer!r}", "use sgd (with momentum) or adam")
        if self.batch_size < 1:
            raise UsageError("the batch size must be 1 or more")
        if self.seq_len is not None and self.seq_len < 1:
            raise UsageError("the sequence length must be 1 or more")
        if self.seq_len is not None and self.input_shape is not None:
            raise UsageError("give --input-shape (images) or --seq-len (token ids), not both")
        check_input_shape(self.input_shape, self.model)
        if self.channels_last and (self.seq_len is not None or self.model.kind == "hf"):
            raise UsageError("--channels-last is for images (N,C,H,W), not for token ids")
        if self.channels_last and self.input_shape is not None and len(self.input_shape) != 3:
            shape = ",".join(map(str, self.input_shape))
            raise UsageError(f"--channels-last is for images of C,H,W; --input-shape {shape} is not one")


Listener = Callable[[str, bool], None]  # (phase, entering)


@dataclass
class PhaseMarks:
    """Phase boundaries of a step, broadcast to listeners (NVTX, the CPU recorder, ...)."""

    listeners: list[Listener] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        for listener in self.listeners:
            listener(name, True)
        try:
            yield
        finally:
            for listener in reversed(self.listeners):
                listener(name, False)


class NvtxListener:
    """Process-wide NVTX start/end ranges named after the phases, in the ``hroofline`` domain."""

    def __init__(self) -> None:
        import nvtx

        self._nvtx = nvtx
        self._open: dict[str, Any] = {}

    def __call__(self, phase: str, entering: bool) -> None:
        if entering:
            self._open[phase] = self._nvtx.start_range(message=phase, domain=NVTX_DOMAIN)
        else:
            self._nvtx.end_range(self._open.pop(phase))


class LayerRange:
    """One range at a time, named after the innermost open module (its layer path): a layer listener of
    :class:`LayerTracker`. ``start(layer)`` opens a range and returns its handle, ``end(handle)`` closes it."""

    def __init__(self, start: Callable[[str], Any], end: Callable[[Any], None]) -> None:
        self._start, self._end = start, end
        self._open: tuple[str, Any] | None = None

    def __call__(self, layer: str | None) -> None:
        if self._open is not None and self._open[0] == layer:
            return
        if self._open is not None:
            self._end(self._open[1])
            self._open = None
        if layer is not None:
            self._open = (layer, self._start(layer))


class NvtxLayerRanges(LayerRange):
    """The layer as a process-wide NVTX start/end range in the ``hroofline`` domain: ncu records it per kernel,
    in backward too (start/end ranges are not per thread). One range at a time, so a kernel's layer never
    depends on the order ncu lists open ranges in."""

    def __init__(self) -> None:
        import nvtx

        super().__init__(lambda layer: nvtx.start_range(message=layer, domain=NVTX_DOMAIN), nvtx.end_range)


class TrainingStep:
    """Model, batch, loss and optimizer for one precision mode; ``run()`` does one marked step."""

    def __init__(
        self, config: WorkloadConfig, marks: PhaseMarks | None = None, tracker: LayerTracker | None = None
    ) -> None:
        import torch

        self.config = config
        self.marks = marks or PhaseMarks()
        self.torch = torch
        spec = config.model
        check_model(spec)
        device = torch.device(config.device)
        torch.manual_seed(config.seed)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32_switches(config.precision)
        with device:  # built where it runs: on the meta device a model of any size costs no memory
            built = build_model(spec, config.batch_size, config.input_shape, config.seq_len)
        model = built.module
        model.train()
        self.built = built
        self.images = built.inputs
        if config.channels_last:
            model, self.images = self._channels_last(model, built.inputs)
        self.autocast_emulation: AutocastEmulation | None = None
        self.model = model
        if tracker is not None:
            tracker.add_root(model)
        self.master_params: list[Any] = []
        # autocast's 16-bit type for the AMP modes (none for the others)
        self.amp_dtype = {"amp": torch.float16, "amp-bf16": torch.bfloat16}.get(config.precision)
        if config.precision == "o2":
            self._to_half(torch.float16)
        elif device.type == "meta" and self.amp_dtype is not None:
            # Autocast does not act on meta tensors: its casts at convolutions and linear layers are emulated.
            from hroofline.work.autocast import AutocastEmulation

            self.autocast_emulation = AutocastEmulation(model, self.amp_dtype)
        trained = self.master_params or list(model.parameters())
        # A traced step stands for a CUDA one: PyTorch's optimizers default to their foreach (multi-tensor)
        # implementation on CUDA, a few ops per step instead of a few per parameter.
        foreach = True if device.type == "meta" else None
        if config.optimizer == "adam":
            self.optimizer = torch.optim.Adam(trained, lr=1e-3, foreach=foreach)
        else:
            self.optimizer = torch.optim.SGD(trained, lr=0.01, momentum=0.9, foreach=foreach)
        if config.compile is not None:  # the wrapper, once the model is as it runs (layout, O2's half precision)
            self.model = compiling.compiled_module(self.model, config.compile)
        scaled = config.precision == "amp" and device.type != "meta"
        # A modest first scale: at PyTorch's 65536 the first steps often overflow and skip the optimizer,
        # and a profiled step that skipped it would show no optimizer phase.
        self.scaler = torch.amp.GradScaler(device.type, init_scale=AMP_INIT_SCALE) if scaled else None

    def _channels_last(self, model: Any, images: Any) -> tuple[Any, Any]:
        """The model's 4-D weights and the batch in NHWC, as ``model.to(memory_format=torch.channels_last)``."""
        torch = self.torch
        if not self.built.floating_input or images.dim() != 4:
            shape = "x".join(map(str, images.shape))
            raise UsageError(
                f"--channels-last needs a batch of images (N,C,H,W); {self.config.arch} takes {shape}",
                "leave --channels-last out for this model",
            )
        return model.to(memory_format=torch.channels_last), images.contiguous(memory_format=torch.channels_last)

    def _to_half(self, dtype: Any) -> None:
        """Apex O2: a 16-bit model with float32 batch norm, float32 master weights for the optimizer."""
        torch = self.torch
        self.model.to(dtype)
        for module in self.model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.float()
        if self.built.floating_input:
            self.images = self.images.to(dtype)
        self.master_params = [p.detach().float().requires_grad_(True) for p in self.model.parameters()]

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_emulation is not None:  # on the meta device
            return self.autocast_emulation.region()
        if self.amp_dtype is not None:
            return self.torch.autocast(self.images.device.type, dtype=self.amp_dtype)
        return contextlib.nullcontext()

    def forward(self) -> Any:
        """The forward phase of a training step: model and loss; returns the loss."""
        with self.marks.phase("forward"), self._autocast():
            return self._checked(lambda: self.built.loss(self.model, self.images))

    def infer(self) -> Any:
        """An inference pass, as a deployed model runs: eval mode (batch norm uses its running statistics, no
        dropout or stochastic depth), no gradients, no loss; returns the output."""
        self.model.eval()
        with self.marks.phase("forward"), self._autocast(), self.torch.no_grad():
            return self._checked(lambda: self.model(self.images))

    def _checked(self, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except (RuntimeError, ValueError, TypeError) as error:  # the model refuses this batch
            shape = "x".join(map(str, self.images.shape))
            raise UsageError(
                f"{self.config.arch} failed on a batch of shape {shape}: {str(error).splitlines()[0]}",
                "check --input-shape / --seq-len and --batch-size (batch norm in training needs 2 or more)",
            ) from None

    def run(self) -> None:
        """One training step; every op of it runs inside a phase."""
        loss = self.forward()
        with self.marks.phase("backward"):
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
            elif self.master_params:
                (loss * O2_LOSS_SCALE).backward()
            else:
                loss.backward()
        with self.marks.phase("optimizer"):
            self._optimizer_step()

    def _optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif self.master_params:
            self._o2_step()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master_params:
            self.model.zero_grad(set_to_none=True)

    def _o2_step(self) -> None:
        """Float32 gradients unscaled and checked in one fused op; an overflowing step is skipped."""
        torch = self.torch
        pairs = [(m, p) for m, p in zip(self.master_params, self.model.parameters(), strict=True) if p.grad is not None]
        for master, param in pairs:
            master.grad = param.grad.float()
        grads = [master.grad for master, _ in pairs]
        device = grads[0].device if grads else self.images.device
        found_inf = torch.zeros(1, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(
            grads, found_inf, torch.full((1,), 1 / O2_LOSS_SCALE, device=device)
        )
        if device.type == "meta" or not bool(found_inf.item()):  # a traced step has no values to check
            self.optimizer.step()
            with torch.no_grad():
                for master, param in pairs:
                    param.copy_(master)

    def prime_optimizer(self) -> None:
        """The optimizer's state (momentum, Adam's moments) as a first step leaves it, without running the model:
        one step on zero gradients."""
        for param in [*self.model.parameters(), *self.master_params]:
            param.grad = self.torch.zeros_like(param)
        self._optimizer_step()

    def track_memory(self) -> StorageLiveness:
        """A storage tracker that starts from the tensors the step holds between steps (weights, gradients,
        optimizer state, the batch) and follows the phases; enter it around the step."""
        from hroofline.collect.memory_tracking import StepTensors, StorageLiveness

        state = [
            value
            for per_param in self.optimizer.state.values()
            for value in per_param.values()
            if isinstance(value, self.torch.Tensor)
        ]
        weights = [*self.model.parameters(), *self.model.buffers(), *self.master_params]
        liveness = StorageLiveness(StepTensors(weights, list(self.gradients()), state, [self.images]), self.gradients)
        self.marks.listeners.append(liveness.listen)
        return liveness

    def gradients(self) -> list[Any]:
        return [p.grad for p in [*self.model.parameters(), *self.master_params] if p.grad is not None]

    def loss_scale(self) -> float | None:
        """The AMP loss scale (None without a scaler); it drops when a step overflowed and was skipped."""
        return float(self.scaler.get_scale()) if self.scaler is not None else None

    def synchronize(self) -> None:
        if self.images.device.type == "cuda":
            self.torch.cuda.synchronize()


def run_profiled_steps(
    step: TrainingStep,
    warmup: int,
    steps: int,
    cuda_profiler: bool,
    tracker: LayerTracker | None = None,
    marks: Any | None = None,
) -> None:
    """Warm-up steps unmarked and unprofiled, then the profiled steps between profiler start and stop
    (with ``tracker``, inside its module tracking; with ``marks``, the op-call marks of
    :mod:`hroofline.collect.op_calls`)."""
    from hroofline.collect.op_calls import marking

    listeners = step.marks.listeners
    step.marks.listeners = []
    with compiling.tracked_throughout(tracker, step.config.compile is not None) as tracking:
        with compiling.quiet_layers(tracker):
            for _ in range(warmup):
                step.run()
        step.synchronize()
        step.marks.listeners = listeners
        profiler = step.torch.cuda.profiler if cuda_profiler else None
        scale = step.loss_scale()
        if profiler is not None:
            profiler.start()
        try:
            with tracking, marking(marks):
                for _ in range(steps):
                    step.run()
                step.synchronize()
        finally:
            if profiler is not None:
                profiler.stop()
    warn_if_skipped(step, scale)


def warn_if_skipped(step: TrainingStep, scale_before: float | None) -> None:
    after = step.loss_scale()
    if scale_before is not None and after is not None and after < scale_before:
        print(
            "hroofline workload: warning: a profiled AMP step overflowed and skipped the optimizer "
            f"(loss scale {scale_before:g} -> {after:g}); profile again with more --warmup steps",
            file=sys.stderr,
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hroofline.collect.workload",
        description="One marked training step of a torchvision model (the command `hroofline profile` runs "
        "under ncu). Phases are NVTX start/end ranges forward, backward, optimizer in the 'hroofline' domain.",
    )
    parser.add_argument(
        "--arch", required=True, help="torchvision name, hf:NAME, PKG.MODULE:FACTORY or FILE.py:FACTORY"
    )
    parser.add_argument("--input-shape", help="one sample's shape, C,H,W")
    parser.add_argument("--seq-len", type=int, help="tokens per sample (models taking token ids)")
    parser.add_argument("--no-layers", action="store_true", help="no NVTX range per module")
    parser.add_argument("--channels-last", action="store_true", help="model and images in NHWC (channels_last)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--optimizer", default=DEFAULT_OPTIMIZER, choices=OPTIMIZERS)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile", choices=compiling.COMPILE_MODES, help="torch.compile the model in this mode")
    parser.add_argument("--no-cuda-profiler-range", action="store_true", help="do not call cudaProfilerStart/Stop")
    parser.add_argument(
        "--measure-calls",
        metavar="FILE",
        help="a JSON list of op-call numbers: only these calls of the profiled steps in the NVTX range "
        "hroofline@measure (ncu's distinct-launch pass)",
    )
    parser.add_argument(
        "--memory-out", metavar="FILE", help="write each phase's CUDA memory (first profiled step) here, as JSON"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = WorkloadConfig(
            args.arch,
            args.batch_size,
            args.precision,
            args.optimizer,
            args.device,
            input_shape=parse_input_shape(args.input_shape),
            seq_len=args.seq_len,
            channels_last=args.channels_last,
            compile=args.compile,
        )
        import torch

        from hroofline.collect.module_tracking import LayerTracker
        from hroofline.collect.op_calls import measure_marks

        if config.device.startswith("cuda") and not torch.cuda.is_available():
            print("hroofline workload: error: PyTorch sees no CUDA GPU", file=sys.stderr)
            return 3
        tracker = None if args.no_layers else LayerTracker(listeners=[NvtxLayerRanges()])
        listeners: list[Listener] = [NvtxListener()]
        if tracker is not None:
            listeners.append(tracker.phase_changed)
        memory = None
        if args.memory_out and config.device.startswith("cuda"):
            from hroofline.collect.memory_tracking import CudaPhaseMemory

            memory = CudaPhaseMemory()
            listeners.append(memory)
        step = TrainingStep(config, PhaseMarks(listeners), tracker)
        print(
            f"hroofline workload: {config.arch}, batch {config.batch_size}, {config.precision}"
            f"{', channels_last' if config.channels_last else ''}"
            f"{f', compiled ({config.compile})' if config.compile else ''}, "
            f"{args.warmup} warm-up + {args.steps} profiled step(s)",
            file=sys.stderr,
            flush=True,
        )
        marks = measure_marks(Path(args.measure_calls), NVTX_DOMAIN) if args.measure_calls else None
        run_profiled_steps(step, args.warmup, args.steps, not args.no_cuda_profiler_range, tracker, marks)
        if memory is not None:
            from hroofline.collect.memory_tracking import write_memory

            write_memory(Path(args.memory_out), memory.phases)
    except UsageError as error:
        print(f"hroofline workload: error: {error.one_line()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
