"""``hroofline predict``: a training step's cost on any catalog GPU, traced on the meta device."""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.analyze.sweep import SweepEntry, sweep_table
from hroofline.cli.common import (
    add_store_option,
    add_workload_options,
    open_store,
    say,
    workload_config,
    workload_name,
    write_out,
)
from hroofline.cli.predict_generate import GENERATE_EXAMPLES, add_generate_options, run_generate, wants_generation
from hroofline.collect.workload import WorkloadConfig
from hroofline.errors import UsageError
from hroofline.model.numbers import si
from hroofline.render.prediction import prediction_table, prediction_text, sweep_text
from hroofline.render.text import FORMATS, render_frame
from hroofline.roofs.catalog import GpuName, resolve_gpu
from hroofline.store.files import check_run_name
from hroofline.store.runs import RunDefaults

if TYPE_CHECKING:
    from hroofline.analyze.estimate import EstimateModel
    from hroofline.api.prediction import Prediction
    from hroofline.model.run import Run
    from hroofline.store.runs import RunStore

EPILOG = (
    """\
examples:
  hroofline predict --arch resnet18 --gpu v100 --batch-size 256 --phases forward --run r18-fw
  hroofline predict --arch resnet50 --gpu a100 --run r50-fp32-a100
  hroofline predict --arch resnet50 --gpu a100 --precision amp --run r50-amp-a100
  hroofline compare r50-fp32-a100 r50-amp-a100
  hroofline predict --arch resnet18,resnet50 --gpu v100,a100 --batch-size 64,256
  hroofline chart resnet18-fp32-v100-sxm2-b256-predicted resnet18-fp32-a100-40gb-b256-predicted --by run
generation (TTFT, TPOT, tokens/s, KV cache; docs/guides/predict.md):
"""
    + GENERATE_EXAMPLES
    + """
The run's kernels are ATen ops (aten::convolution, ...); time_s is the estimate and time_bound_s the
roofline's lower bound (`summary --format json` gives both, per phase, with memory_peak_bytes and
memory_retained_bytes), so `compare` against a measured run shows how far the real step is from them.
"""
)


def register(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        description="Trace a model's forward pass or training step on PyTorch's meta device (no "
        "memory, no arithmetic), count FLOPs per precision and the fewest bytes of every op, and bound its "
        "time = max(FLOPs / peak of its precision, bytes / HBM bandwidth) with the GPU's datasheet peaks. "
        "The estimate beside the bound divides each op's bound by the efficiency of its class (tensor-core "
        "matmul/conv, FP32 matmul/conv, depthwise convolutions, the rest), each op taking at least its host time "
        "(a host floor per element-wise op, a measured multiple of it for a convolution, a matrix product or a "
        "batch norm: metrics/host_cost.toml), fitted to published step times "
        "(metrics/estimate.toml; its error on held-out measurements is printed with it); "
        "a batch norm in training over NCHW takes N*H*W over one thread block's measured rate where that is "
        "longer, its kernels running a block per channel (metrics/batch_norm.toml). Memory per phase comes "
        "from the tensors the traced step keeps alive; the step is checked against the GPU's memory. "
        "Tensor cores as PyTorch uses them: fp32 is PyTorch's default (cuDNN convolutions in TF32 from "
        "Ampere on, matrix products in FP32), fp32-strict turns TF32 off, tf32 also runs matrix products in "
        "TF32, amp/o2/amp-bf16 run them in 16 bit. Stored as a run whose source is 'analytic'. "
        "Lists make a sweep: one run per combination, and a table of them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_workload_options(predict, "a catalog GPU with datasheet peaks (see `hroofline gpus`)", lists=True)
    predict.add_argument(
        "--phases",
        choices=("forward", "train"),
        default="train",
        help="an inference pass (eval mode, no gradients, no loss), or a training step",
    )
    predict.add_argument(
        "--run",
        help="run name (default: MODEL-PRECISION-GPU[-forward][-bN][-CxHxW|-sN][-adam]-predicted: -forward for "
        "--phases forward, and what differs from the defaults: a batch size other than 32 (or any, in a sweep "
        "over batch sizes), an --input-shape or --seq-len other than the model's own, the adam optimizer)",
    )
    predict.add_argument("--replace", action="store_true", help="replace the run(s) if they exist")
    predict.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table: the prediction in sentences (a sweep: its table); csv, json: one row per phase and one for the "
        "total (a sweep: one row per configuration)",
    )
    predict.add_argument(
        "--calibrate",
        metavar="RUN",
        help="estimate with efficiencies measured on a run of yours in the store (profiled or imported on a GPU): "
        "per op class, its kernels' bound at the datasheet roofs over their measured time",
    )
    predict.add_argument(
        "--host",
        metavar="FILE",
        help="estimate with the host time per op measured on your machine: a file written by "
        "`hroofline ceilings --measure [--device cuda] --out FILE`, its seconds per probe op over the probe's "
        "mean host weight taken as the element-wise op's floor (default: the floor fitted to published steps)",
    )
    add_generate_options(predict)
    add_store_option(predict)
    predict.set_defaults(run_command=run_predict)


@dataclass(frozen=True)
class Planned:
    config: WorkloadConfig
    gpu: GpuName
    run: str


def planned_runs(args: argparse.Namespace) -> list[Planned]:
    """Every combination of the listed models, GPUs, precisions and batch sizes, checked and named."""
    models = _items(args.arch) if args.arch else [None]
    specs = _items(args.model) if args.model else [None]
    if "cpu" in (item.lower() for item in _items(args.gpu)):
        raise UsageError(
            "--gpu cpu: predict estimates a step on a catalog GPU (hroofline gpus)",
            "measure the CPU instead: hroofline profile --arch NAME --gpu cpu",
        )
    gpus = [resolve_gpu(name) for name in _items(args.gpu)]
    precisions = _items(args.precision) if args.precision else [None]
    batches = args.batch_size or [None]
    several_batches = len(batches) > 1
    planned = []
    for arch, spec, precision, batch, gpu in itertools.product(models, specs, precisions, batches, gpus):
        one = argparse.Namespace(**{**vars(args), "arch": arch, "model": spec, "precision": precision})
        one.batch_size = batch
        config = workload_config(one, "meta")
        # an inference pass is not the training step: -forward
        name = workload_name(config, gpu.variant or gpu.name, several_batches, args.phases == "forward")
        name += "-predicted"
        planned.append(Planned(config, gpu, check_run_name(args.run or name)))
    if args.run and len(planned) > 1:
        raise UsageError(
            f"--run names one run, and this is a sweep of {len(planned)}",
            "leave --run out: a sweep names its runs MODEL-PRECISION-GPU[-forward][-bN]...-predicted",
        )
    names = [p.run for p in planned]
    if len(set(names)) < len(names):
        raise UsageError("the sweep lists a model, GPU, precision or batch size twice")
    return planned


def _items(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise UsageError(f"{text!r}: an empty item in a comma-separated list")
    return items


def run_predict(args: argparse.Namespace) -> int:
    from hroofline.analyze.predict import prediction_peaks
    from hroofline.api.prediction import PredictOptions, predict_run
    from hroofline.collect.models import check_model
    from hroofline.roofs.host_file import load_host_cost

    if wants_generation(args):
        return run_generate(args)
    planned = planned_runs(args)
    store = open_store(args, writing=True)
    estimate_model = _calibration(store.load(args.calibrate)) if args.calibrate else None
    host_cost = load_host_cost(Path(args.host)) if args.host else None
    for plan in planned:  # every combination checked before any is traced or stored
        prediction_peaks(plan.gpu, plan.config.precision)
        check_model(plan.config.model)
    # after the arguments: a mistake is said first; a prediction a sweep names may hold the same (reused, below)
    existing = [p.run for p in planned if store.has_run(p.run) and (args.run or not store.load_meta(p.run).predicted)]
    if existing and not args.replace:
        raise UsageError(f"run {existing[0]!r} exists already", "pass --replace, or --run NAME")
    traces: dict[object, object] = {}
    predictions = []
    notes: dict[str, None] = {}
    for number, plan in enumerate(planned, 1):
        config = plan.config
        if len(planned) > 1:
            say(f"[{number}/{len(planned)}] {plan.run}")
        gpu = plan.gpu.variant or plan.gpu.name  # a variant (v100-sxm2-32gb) keeps its own memory
        options = PredictOptions(
            gpu,
            config.precision,
            config.batch_size,
            args.phases,
            config.optimizer,
            estimate_model,
            host_cost,
            config.channels_last,
        )
        prediction = predict_run(config.arch, options, config.input_shape, config.seq_len, plan.run, say, traces)
        predictions.append(prediction)
        notes.update(dict.fromkeys(prediction.source.info.notes))
    # a configuration a run of the store predicts already (the same trace and estimate) is not stored again under
    # the name a sweep gives it; --run NAME asks for a run of that name, and gets it
    known = {} if args.replace or args.run else _predicted_configurations(store)
    reused = {}
    for plan, prediction in zip(planned, predictions, strict=True):
        info = prediction.source.info
        same = known.get((info.source_hash, info.formulas_used.get("time_s", "")))
        if same is not None:
            reused[plan.run] = same
        elif not args.replace and store.has_run(plan.run):
            raise UsageError(
                f"run {plan.run!r} exists already, a prediction of another configuration", "pass --replace"
            )
    for plan, prediction in zip(planned, predictions, strict=True):  # stored once every one has been traced
        if plan.run in reused:
            said = "" if reused[plan.run] == plan.run else f": {plan.run} not stored again"
            say(
                f"hroofline: note: run {reused[plan.run]!r} predicts this configuration already{said} (--replace: anew)"
            )
            prediction.name = reused[plan.run]
            continue
        store.replace_run(plan.run, [prediction.source], RunDefaults(plan.gpu.name, plan.config.precision, None))
    for note in notes:
        say(f"hroofline: note: {note}")
    if len(predictions) == 1 and args.format == "table":
        write_out(prediction_text(predictions[0].view()))
    elif len(predictions) == 1:
        write_out(render_frame(prediction_table(predictions[0].view()), args.format))
    else:
        table = sweep_table([sweep_entry(p) for p in predictions])
        write_out(sweep_text(table) if args.format == "table" else render_frame(table, args.format))
    return 0


def _predicted_configurations(store: RunStore) -> dict[tuple[str, str], str]:
    """The store's predictions: (their configuration's identity, how their time was estimated) -> the run."""
    metas, _ = store.readable_metas()
    known: dict[tuple[str, str], str] = {}
    for meta in metas:
        if meta.predicted and len(meta.sources) == 1:
            source = meta.sources[0]
            known.setdefault((source.source_hash, source.formulas_used.get("time_s", "")), meta.name)
    return known


def _calibration(run: Run) -> EstimateModel:
    from hroofline.analyze.calibrate import calibrate_on_run
    from hroofline.analyze.estimate import load_estimate_model

    calibration = calibrate_on_run(run, load_estimate_model())
    for name, share in calibration.classes.items():
        efficiency = calibration.model.efficiency[name]
        how = "measured" if name in calibration.measured else "bundled (too little of the run's kernel time)"
        if not share.launches:
            how = "bundled (none in the run)"
        say(
            f"calibrate: {name}: {share.launches} kernels, {si(share.measured_s, 's')} measured, "
            f"{si(share.bound_s, 's')} at roof: efficiency {efficiency:.2f}, {how}"
        )
    return calibration.model


def sweep_entry(prediction: Prediction) -> SweepEntry:
    settings = prediction.source.info.settings
    return SweepEntry(
        run=prediction.name,
        model=settings["model"],
        gpu=prediction.gpu,
        precision=prediction.precision,
        batch=prediction.batch_size,
        launches=prediction.source.launches,
        step=prediction.step_time(),
        fit=prediction.fit,
        memory=prediction.source.info.memory,
    )
