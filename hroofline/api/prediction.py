"""Prediction through the API: what a model's step should cost on a catalog GPU, traced on the meta device
(``hroofline.predict``, and ``predict_run`` that the CLI's ``predict`` and the sweep call)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hroofline.api.face import RunView
from hroofline.api.notebook import store_at
from hroofline.collect.workload import DEFAULT_BATCH_SIZE, DEFAULT_OPTIMIZER
from hroofline.model.run import Run
from hroofline.store.files import check_run_name
from hroofline.store.runs import RunDefaults


@dataclass(frozen=True)
class PredictOptions:
    gpu: str
    precision: str = "fp32"
    batch_size: int = DEFAULT_BATCH_SIZE
    phases: str = "train"
    optimizer: str = DEFAULT_OPTIMIZER
    estimate_model: Any = None  # an analyze.estimate.EstimateModel; None: the bundled fit (metrics/estimate.toml)
    host_cost: Any = None  # a model.host.HostCost measured by ceilings --measure; None: the fitted host floor
    channels_last: bool = False  # model and images in NHWC: no layout conversions around tensor-core convolutions


def predict(
    model: Any,
    gpu: str,
    input_shape: tuple[int, ...] | None = None,
    seq_len: int | None = None,
    precision: str = "fp32",
    batch_size: int = DEFAULT_BATCH_SIZE,
    phases: str = "train",
    run: str | None = None,
    store: str | Path | None = None,
    replace: bool = False,
    calibrate: Run | str | None = None,
    host: str | Path | None = None,
    channels_last: bool = False,
) -> PredictedRun:
    """What a training step (or an inference pass, eval mode without gradients: ``phases="forward"``) of ``model``
    should cost on ``gpu``: ``model`` is an ``nn.Module`` (copied to the meta device; yours is untouched), a
    torchvision name or a model spec (``hf:gpt2``, ``FILE.py:FACTORY``). The run is returned; with ``run`` it is
    also stored (an existing run of that name only with ``replace=True``). Its summary has the estimate
    (``time_s``), the roofline bound (``time_bound_s``) and memory per phase; ``calibrate`` (a measured run, or its
    name in the store) takes the estimate's efficiencies from it, as ``predict --calibrate``; ``host`` (a file of
    ``hroofline ceilings --measure --out``) its host floor, as ``predict --host``; ``channels_last`` predicts the
    model and its images in NHWC, as ``predict --channels-last`` (NCHW, PyTorch's default, pays cuDNN's layout
    conversions around each convolution on tensor cores)."""
    from hroofline.collect.models import register_instance
    from hroofline.errors import UsageError

    target = store_at(store, writing=True)
    if run is not None:
        check_run_name(run)
        if not replace and target.has_run(run):
            raise UsageError(f"run {run!r} exists already", "pass replace=True, or another run name")
    estimate_model = None
    if calibrate is not None:
        from hroofline.analyze.calibrate import calibrate_on_run
        from hroofline.analyze.estimate import load_estimate_model

        measured = calibrate if isinstance(calibrate, Run) else target.load(calibrate)
        estimate_model = calibrate_on_run(measured, load_estimate_model()).model
    spec = register_instance(_meta_copy(model)) if not isinstance(model, str) else model
    host_cost = None
    if host is not None:
        from hroofline.roofs.host_file import load_host_cost

        host_cost = load_host_cost(Path(host))
    options = PredictOptions(
        gpu, precision, batch_size, phases, DEFAULT_OPTIMIZER, estimate_model, host_cost, channels_last
    )
    result = predict_run(spec, options, input_shape, seq_len, run or "predicted")
    if run is not None:
        target.replace_run(run, [result.source], RunDefaults(result.gpu, result.precision, None))
        return PredictedRun.of_prediction(target.load(run), result.view())
    unstored = result.as_run()
    return PredictedRun.of_prediction(unstored, result.view(unstored))


@dataclass(repr=False)
class PredictedRun(RunView):
    """A predicted run with what ``hroofline predict`` prints beside it: ``.step`` (the bound, the estimate with
    its error band, ``.step.throughput(seconds)``), ``.fit`` (the peak memory against the GPU's, the largest
    batch that fits; None where the catalog lacks its memory) and ``.describe()`` (the CLI's text). What
    :func:`predict` returns; ``hroofline.load`` of the stored run gives the plain run (predict again for these)."""

    view: Any = field(default=None, compare=False)  # render.prediction.PredictionView

    @classmethod
    def of_prediction(cls, run: Run, view: Any) -> PredictedRun:
        return cls(run.meta, run.launches, view)

    def _shown(self) -> Any:
        if self.view is None:
            from hroofline.errors import UsageError

            raise UsageError(f"run {self.name!r} carries no prediction to describe", "hroofline.predict(...) makes one")
        return self.view

    @property
    def step(self) -> Any:
        """analyze.estimate.StepTime: bound_s, estimate_s, low_s, high_s, throughput(seconds), unit."""
        return self._shown().step

    @property
    def fit(self) -> Any:
        """analyze.memory_fit.MemoryFit: peak_bytes, usable_bytes, fits, largest_batch; or None."""
        return self._shown().fit

    def describe(self) -> str:
        """The text ``hroofline predict`` prints for this prediction."""
        from hroofline.render.prediction import prediction_text

        return prediction_text(self._shown())

    def facts(self) -> dict[str, object]:
        from hroofline.model.numbers import per_second, si

        facts = super().facts()
        if self.view is None:
            return facts
        step, fit = self.view.step, self.view.fit
        facts["estimate"] = f"{si(step.estimate_s, 's')}, {per_second(step.throughput(step.estimate_s), step.unit)}"
        if fit is not None:
            facts["memory"] = f"{si(fit.peak_bytes, 'B')}, " + (
                f"fits, largest batch {fit.largest_batch:,}" if fit.fits else f"does not fit {fit.gpu}"
            )
        return facts


def _meta_copy(model: Any) -> Any:
    """A copy of the module whose parameters and buffers live on the meta device: no memory for weights."""
    import torch

    tensors = [*model.parameters(), *model.buffers()]
    memo: dict[int, Any] = {}
    for tensor in tensors:
        empty = torch.empty_like(tensor, device="meta")
        memo[id(tensor)] = (
            torch.nn.Parameter(empty, tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter) else empty
        )
    return copy.deepcopy(model, memo)


@dataclass
class Prediction:
    source: Any  # ImportedSource
    gpu: str
    precision: str
    name: str
    peaks: Any  # hroofline.analyze.predict.Peaks: what the prediction used, with its notes
    estimate_model: Any  # hroofline.analyze.estimate.EstimateModel: the estimate's parameters and error
    fit: Any  # hroofline.analyze.memory_fit.MemoryFit, or None where the catalog lacks the GPU's memory
    batch_size: int

    def step_time(self) -> Any:
        """The step's bound, estimate with its error band, and throughput (an analyze.estimate.StepTime)."""
        from hroofline.analyze.estimate import step_time
        from hroofline.collect.models import DEFAULT_SEQ_LEN, parse_model

        settings = self.source.info.settings
        spec = parse_model(settings["arch"])
        if spec.takes_tokens:
            items, unit = self.batch_size * int(settings.get("seq_len", DEFAULT_SEQ_LEN)), "tokens"
        else:
            items, unit = float(self.batch_size), "images" if spec.kind == "torchvision" else "samples"
        # the error band was measured on torchvision models' steps: it says nothing of other models
        untested = {"hf": "transformers", "torchvision": ""}.get(spec.kind, "models of your own")
        phases = str(settings.get("phases", "train"))
        return step_time(self.source.launches, self.estimate_model, items, unit, phases, untested)

    def view(self, run: Run | None = None) -> Any:
        """What ``hroofline predict`` prints, computed (a render.prediction.PredictionView); ``run`` is this
        prediction's :meth:`as_run`, where the caller has made it already."""
        from hroofline.analyze.estimate import per_channel_share
        from hroofline.analyze.kernels import phase_summary
        from hroofline.analyze.layout import step_layout
        from hroofline.analyze.memory_fit import peak_phase
        from hroofline.analyze.predict import flop_split, tensor_share
        from hroofline.render.prediction import PredictionView
        from hroofline.work.host_weights import load_host_weights

        launches = self.source.launches
        settings = self.source.info.settings
        what = f"{settings['model']}, batch {self.batch_size}, {self.precision} on {self.gpu}"
        inference = settings.get("phases") == "forward"
        if inference:
            what += ", inference (eval, no grad)"
        memory = self.source.info.memory
        layout = step_layout(launches)
        return PredictionView(
            run=self.name,
            what=what,
            summary=phase_summary(run or self.as_run()),
            step=self.step_time(),
            fit=self.fit,
            peaks=self.peaks,
            tensor_share=tensor_share(launches, self.peaks),
            split=flop_split(launches),
            estimate_source=self.estimate_model.source,
            host_floors=load_host_weights().floors(self.estimate_model.host_floor_s),
            host_source=self.estimate_model.host_source,
            peak_split=peak_phase(memory) if memory else None,
            inference=inference,
            channels_last=settings.get("layout") == "channels_last",
            conversions=layout.conversions,
            batch_norm=per_channel_share(launches, self.estimate_model),
            op_counts=layout.op_counts,
        )

    def as_run(self) -> Run:
        """The prediction as a run that is in no store."""
        from hroofline.model.run import RunMeta, conform_launches
        from hroofline.roofs.metricset import load_metric_set

        meta = RunMeta(name=self.name, gpu=self.gpu, cc=self.source.cc, precision=self.precision)
        meta.sources.append(self.source.info)
        meta.arch = load_metric_set().arch_of(meta.cc)
        return Run(meta, conform_launches(self.source.launches.assign(source=0)))


def predict_run(
    spec: str,
    options: PredictOptions,
    input_shape: tuple[int, ...] | None,
    seq_len: int | None,
    name: str,
    progress: Callable[[str], None] | None = None,
    traces: dict[Any, Any] | None = None,
) -> Prediction:
    """Checks the request, traces the step on the meta device (saying so to ``progress``), bounds each op's
    time at the GPU's datasheet roofs and estimates it, and says whether the step fits the GPU's memory.
    ``traces`` keeps traced steps between calls (a sweep traces each model, batch and precision once); a
    torchvision or built-in transformers model's step is also looked up in, and kept in, the process's last
    traced steps (:mod:`hroofline.collect.recent_steps`), so that predicting it on another GPU traces it once."""
    from hroofline.analyze.estimate import estimate_method, load_estimate_model, with_estimate, with_host_cost
    from hroofline.analyze.layout import predicted_ops
    from hroofline.analyze.memory_fit import memory_fit, peak_phase
    from hroofline.analyze.predict import prediction_peaks
    from hroofline.collect.meta_trace import trace_identity, trace_step_memory
    from hroofline.collect.models import check_model
    from hroofline.collect.recent_steps import RECENT_STEPS, keeps
    from hroofline.collect.workload import WorkloadConfig
    from hroofline.importers.source import ImportedSource
    from hroofline.model.run import SourceInfo
    from hroofline.roofs.catalog import resolve_gpu

    config = WorkloadConfig(
        spec,
        options.batch_size,
        options.precision,
        options.optimizer,
        "meta",
        input_shape=input_shape,
        seq_len=seq_len,
        channels_last=options.channels_last,
    )
    gpu = resolve_gpu(options.gpu)
    check_model(config.model)
    peaks = prediction_peaks(gpu, config.precision)
    traces = {} if traces is None else traces

    def traced(config: WorkloadConfig) -> Any:
        key = (config, options.phases)
        step = traces.get(key)
        if step is None and keeps(config):
            step = RECENT_STEPS.get(key)
        if step is None:
            if progress is not None:
                what = f"{options.phases}, batch {config.batch_size}, {config.precision}"
                progress(f"tracing {config.arch} ({what}) on the meta device")
            step = trace_step_memory(config, options.phases)
            if keeps(config):
                RECENT_STEPS.keep(key, step)
        traces[key] = step
        return step

    trace = traced(config)
    estimate_model = options.estimate_model or load_estimate_model().for_cc(gpu.cc)
    if options.host_cost is not None:
        from hroofline.collect.host_cost import probe_host_weight
        from hroofline.model.host import step_kind

        host = options.host_cost
        weight = probe_host_weight(step_kind(options.phases, config.precision), host.device)
        estimate_model = with_host_cost(estimate_model, host, options.phases, config.precision, weight)
    converted = predicted_ops(trace.launches, peaks)
    launches = with_estimate(converted.launches, estimate_model)
    fit = None
    if gpu.memory_bytes is not None and trace.memory:

        def peak_at(batch: int) -> float:
            return peak_phase(traced(replace(config, batch_size=batch)).memory).peak_bytes

        fit = memory_fit(gpu.name, gpu.memory_bytes, trace.memory, config.batch_size, peak_at)
    info = SourceInfo(
        path=f"analytic:{config.arch}",
        kind="analytic",
        source_hash=trace_identity(config, gpu.name, options.phases),
        launches=len(launches),
        formulas_used={
            "flops": "PyTorch FLOP formulas (torch.utils.flop_counter) and metrics/cpu_ops.toml",
            "bytes_hbm": "fewest bytes an op must move: each distinct input read once, each output written once",
            "time_bound_s": "time at roof: max(longest pipe of FLOPs per precision / peak, bytes / HBM bandwidth)",
            "time_s": estimate_method(estimate_model),
            "memory": "tensor storages alive through the traced step (hroofline/collect/memory_tracking.py)",
        },
        settings={
            "gpu": gpu.name,
            **({"gpu_variant": gpu.variant} if gpu.variant else {}),
            **({"gpu_memory_bytes": f"{gpu.memory_bytes:.0f}"} if gpu.memory_bytes else {}),
            "precision": config.precision,
            "batch_size": str(config.batch_size),
            "model": config.model.label,
            "arch": config.arch,
            **({"input_shape": ",".join(map(str, config.input_shape))} if config.input_shape else {}),
            **({"seq_len": str(config.seq_len)} if config.seq_len else {}),
            "phases": options.phases,
            "optimizer": config.optimizer,
            "layout": "channels_last" if config.channels_last else "NCHW",
            "tensor_peak": peaks.tensor_key or "none",
            "peak_source": gpu.peak_source or "metrics/gpus.toml",
        },
        notes=[*peaks.notes, *([converted.note] if converted.note else [])],
        memory=list(trace.memory),  # a list of its own: the traced step may be kept for later predictions
    )
    source = ImportedSource(info=info, launches=launches, cc=gpu.cc, device_name=None)
    return Prediction(source, gpu.name, config.precision, name, peaks, estimate_model, fit, config.batch_size)


def predict_generation(
    model: str,
    gpu: str,
    prompt_tokens: int = 128,
    new_tokens: int = 128,
    batch_size: int = 1,
    precision: str = "bf16",
) -> Any:
    """What generating ``new_tokens`` after a ``prompt_tokens`` prompt, ``batch_size`` sequences at once, should
    cost on ``gpu``, as ``hroofline predict --generate``: ``model`` a bundled causal language model
    (``hf:gpt2``, ``hf:tinyllama-1.1b``), ``precision`` ``bf16`` or ``fp8`` (weights and KV cache). Returns an
    analyze.generation.GenerationPrediction: ``.ttft`` and ``.tpot`` (bound_s, estimate_s, host_s),
    ``.tokens_per_s_estimate``, ``.tokens_per_s_bound``, ``.kv_bytes_per_token``, ``.kv_cache_bytes``, ``.fit``
    (tokens of KV cache that fit, the largest batch and context); :func:`describe_generation` gives its text."""
    name, resolved, request = generation_request(model, gpu, prompt_tokens, new_tokens, batch_size, precision)
    return generation_prediction(name, resolved, request)


def describe_generation(prediction: Any) -> str:
    """The text ``hroofline predict --generate`` prints for a :func:`predict_generation`."""
    from hroofline.render.generation import generation_text

    return generation_text(prediction)


def generation_request(
    model: str, gpu: str, prompt_tokens: int, new_tokens: int, batch_size: int, precision: str
) -> tuple[str, Any, Any]:
    """The model's config name, the catalog GPU and the request, checked (torch is not imported)."""
    from hroofline.analyze.generation import GENERATION_PRECISIONS, GenerationRequest
    from hroofline.collect.decoder_shape import check_generation_model
    from hroofline.errors import UsageError
    from hroofline.model.quantities import ROOF_LABELS
    from hroofline.roofs.catalog import resolve_gpu

    if precision not in GENERATION_PRECISIONS:
        raise UsageError(f"generation runs in {' or '.join(GENERATION_PRECISIONS)}, not {precision!r}")
    counts = {"prompt tokens": prompt_tokens, "new tokens": new_tokens, "batch size": batch_size}
    for what, value in counts.items():
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"{what} must be 1 or more, not {value!r}")
    name = check_generation_model(model)
    resolved = resolve_gpu(gpu)
    tensor_key = GENERATION_PRECISIONS[precision][1]
    if tensor_key not in resolved.peaks or "hbm" not in resolved.peaks:
        raise UsageError(
            f"the catalog has no {ROOF_LABELS[tensor_key]} or HBM peak for {resolved.name}",
            "--precision bf16, or a GPU with FP8 tensor cores: hroofline gpus",
        )
    return name, resolved, GenerationRequest(prompt_tokens, new_tokens, batch_size, precision)


def generation_prediction(name: str, gpu: Any, request: Any) -> Any:
    """Reads the model's shape on the meta device and predicts the request on ``gpu`` (a catalog GpuName)."""
    from hroofline.analyze.estimate import load_estimate_model
    from hroofline.analyze.generation import GENERATION_PRECISIONS, Roofs, predict_generation
    from hroofline.collect.decoder_shape import decoder_shape
    from hroofline.errors import UsageError

    shape = decoder_shape(name)
    if shape.max_positions and request.context > shape.max_positions:
        raise UsageError(
            f"{request.prompt_tokens} prompt + {request.new_tokens} new tokens: hf:{name} takes at most "
            f"{shape.max_positions} positions"
        )
    tensor_key = GENERATION_PRECISIONS[request.precision][1]
    roofs = Roofs(gpu.peaks[tensor_key], tensor_key, gpu.peaks["hbm"], load_estimate_model().for_cc(gpu.cc))
    return predict_generation(shape, request, gpu, roofs)
