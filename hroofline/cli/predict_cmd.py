"""``hroofline predict``: a training step's cost on any catalog GPU, traced on the meta device."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hroofline.analyze.kernels import phase_summary
from hroofline.analyze.predict import flop_split, tensor_share
from hroofline.cli.common import add_store_option, add_workload_options, open_store, say, workload_config, write_out
from hroofline.errors import UsageError
from hroofline.metricset import resolve_gpu
from hroofline.render.prediction import PredictionView, prediction_text
from hroofline.store import RunDefaults, check_run_name

if TYPE_CHECKING:
    from hroofline.api import Prediction

EPILOG = """\
examples:
  hroofline predict --arch resnet18 --gpu v100 --batch-size 256 --phases forward --run r18-fw
  hroofline predict --arch resnet50 --gpu a100 --precision amp --run r50-amp-a100
  hroofline compare r50-fp32-a100 r50-amp-a100

The run's kernels are ATen ops (aten::convolution, ...); its time is the roofline's lower bound, so
`compare` against a measured run shows how far the real step is from it.
"""


def register(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        help="predict a training step of a model on any catalog GPU from a trace of its ops (no GPU needed)",
        description="Trace a model's forward pass or training step on PyTorch's meta device (no "
        "memory, no arithmetic), count FLOPs per precision and the fewest bytes of every op, and predict its "
        "time = max(FLOPs / peak of its precision, bytes / HBM bandwidth) with the GPU's datasheet peaks. "
        "Tensor cores as PyTorch uses them: fp32 is PyTorch's default (cuDNN convolutions in TF32 from "
        "Ampere on, matrix products in FP32), fp32-strict turns TF32 off, tf32 also runs matrix products in "
        "TF32, amp/o2/amp-bf16 run them in 16 bit. Stored as a run whose source is 'analytic'.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_workload_options(predict, "a catalog GPU with datasheet peaks (see `hroofline gpus`)")
    predict.add_argument("--phases", choices=("forward", "train"), default="train", help="forward only, or a step")
    predict.add_argument("--run", help="run name (default: MODEL-PRECISION-GPU-predicted)")
    predict.add_argument("--replace", action="store_true", help="replace the run if it exists")
    add_store_option(predict)
    predict.set_defaults(run_command=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    from hroofline.api import PredictOptions, predict_run

    config = workload_config(args, "meta")
    gpu = resolve_gpu(args.gpu)
    run = check_run_name(args.run or f"{config.model.label}-{config.precision}-{gpu.name}-predicted")
    store = open_store(args)
    if not args.replace and store.has_run(run):
        raise UsageError(f"run {run!r} exists already", "pass --replace, or --run NAME")
    options = PredictOptions(gpu.name, config.precision, config.batch_size, args.phases, config.optimizer)
    prediction = predict_run(config.arch, options, config.input_shape, config.seq_len, run, progress=say)
    store.replace_run(run, [prediction.source], RunDefaults(gpu.name, config.precision, None))
    for note in prediction.peaks.notes:
        say(f"hroofline: note: {note}")
    write_out(prediction_text(prediction_view(prediction)))
    return 0


def prediction_view(prediction: Prediction) -> PredictionView:
    launches = prediction.source.launches
    settings = prediction.source.info.settings
    what = f"{settings['model']}, batch {prediction.batch_size}, {prediction.precision} on {prediction.gpu}"
    if settings.get("phases") == "forward":
        what += ", forward pass"
    return PredictionView(
        run=prediction.name,
        what=what,
        summary=phase_summary(prediction.as_run()),
        step=prediction.step_time(),
        fit=prediction.fit,
        peaks=prediction.peaks,
        tensor_share=tensor_share(launches, prediction.peaks),
        split=flop_split(launches),
    )
