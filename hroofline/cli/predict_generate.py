"""``hroofline predict --generate``: TTFT, TPOT, tokens/s and the KV cache of generation on a catalog GPU."""

from __future__ import annotations

import argparse

from hroofline.cli.common import positive_int, write_out
from hroofline.errors import UsageError
from hroofline.render.text import render_frame

GENERATE_EXAMPLES = """\
  hroofline predict --generate --model hf:gpt2 --gpu h200 --prompt-tokens 128 --new-tokens 128 --batch-size 8
  hroofline predict --generate --model hf:tinyllama-1.1b --gpu h100 --precision fp8 --batch-size 32
"""
# predict's options that a generation request has no use for: (attribute, option)
NOT_FOR_GENERATION = (
    ("arch", "--arch"),
    ("seq_len", "--seq-len"),
    ("input_shape", "--input-shape"),
    ("optimizer", "--optimizer"),
    ("channels_last", "--channels-last"),
    ("calibrate", "--calibrate"),
    ("host", "--host"),
    ("run", "--run"),
    ("replace", "--replace"),
)


def add_generate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--generate",
        action="store_true",
        help="predict text generation instead of a step (--model hf:NAME, a causal language model; "
        "--precision bf16 or fp8, weights and KV cache alike; default bf16): time to first token, time per "
        "output token, tokens/s, the KV cache and how much of it fits; printed, not stored",
    )
    parser.add_argument(
        "--prompt-tokens", type=positive_int, metavar="P", help="with --generate: tokens per prompt (128)"
    )
    parser.add_argument(
        "--new-tokens", type=positive_int, metavar="N", help="with --generate: tokens generated per sequence (128)"
    )


def wants_generation(args: argparse.Namespace) -> bool:
    return bool(args.generate or args.prompt_tokens or args.new_tokens)


def run_generate(args: argparse.Namespace) -> int:
    from hroofline.api.prediction import generation_prediction, generation_request

    if not args.generate:
        raise UsageError("--prompt-tokens and --new-tokens are for --generate", "add --generate")
    for attribute, option in NOT_FOR_GENERATION:
        if getattr(args, attribute, None):
            raise UsageError(
                f"{option} is not for --generate",
                "--generate takes --model hf:NAME, --gpu, --precision, --batch-size, --prompt-tokens, --new-tokens",
            )
    if args.phases != "train":  # predict's default; generation has its own steps
        raise UsageError("--phases is not for --generate: it predicts the prefill and the decode steps")
    if not args.model:
        raise UsageError("--generate needs --model hf:NAME (a causal language model: hf:gpt2, hf:tinyllama-1.1b)")
    batches = args.batch_size or [1]
    if len(batches) > 1 or "," in args.model + args.gpu + (args.precision or ""):
        raise UsageError("--generate predicts one model, GPU, precision and batch size: no lists")
    name, gpu, request = generation_request(
        args.model, args.gpu, args.prompt_tokens or 128, args.new_tokens or 128, batches[0], args.precision or "bf16"
    )
    prediction = generation_prediction(name, gpu, request)  # after every check: this imports torch
    if args.format == "table":
        from hroofline.render.generation import generation_text

        write_out(generation_text(prediction))
    else:
        from hroofline.render.generation import generation_table

        write_out(render_frame(generation_table(prediction), args.format))
    return 0
