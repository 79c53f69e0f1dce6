"""Hugging Face generation timed on a GPU (issue 47): random weights, bf16, greedy, 128 prompt + 128 new tokens.

    python generate_times.py OUT.csv SECONDS [MODEL...]     (models: hroofline's hf: configs; default three)

Per model and batch (1, 8, 32): TTFT is generate() with max_new_tokens=1 (median of 3), the whole generation
generate() with min_new_tokens = max_new_tokens = 128 (median of 2, after one warm-up of 8 tokens), TPOT the
difference over the 127 later tokens; CUDA synchronised around each call, wall clock (time.perf_counter). Peak
memory is torch.cuda.max_memory_allocated over the model's calls. Stops starting new rows after SECONDS.
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
import time

import torch
import transformers

from hroofline.collect.models import HF_CONFIGS

PROMPT, NEW = 128, 128
BATCHES = (1, 8, 32)
DEVICE = os.environ.get("GENERATE_DEVICE", "cuda")  # cpu: to try the script where there is no GPU


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(call) -> float:  # noqa: ANN001
    sync()
    start = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - start


def main() -> None:
    out, seconds = sys.argv[1], float(sys.argv[2])
    names = sys.argv[3:] or ["gpt2", "gpt2-large", "tinyllama-1.1b"]
    deadline = time.monotonic() + seconds
    transformers.logging.set_verbosity_error()
    fields = ["model", "params", "batch", "prompt_tokens", "new_tokens", "ttft_s", "total_s", "tpot_s",
              "tokens_per_s", "peak_bytes", "gpu", "torch", "transformers"]
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for name in names:
            class_name, _task, arguments = HF_CONFIGS[name]
            config = getattr(transformers, class_name)(**arguments)
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
            model = model.to(DEVICE, torch.bfloat16).eval()
            params = sum(p.numel() for p in model.parameters())
            for batch in BATCHES:
                if time.monotonic() > deadline:
                    print("out of time before", name, batch, flush=True)
                    return
                prompt = torch.randint(0, config.vocab_size, (batch, PROMPT), device=DEVICE)
                mask = torch.ones_like(prompt)

                def generate(tokens: int) -> None:
                    with torch.inference_mode():
                        model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=tokens,
                                       min_new_tokens=tokens, do_sample=False, pad_token_id=0)

                generate(8)
                if DEVICE == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                ttft = statistics.median(timed(lambda: generate(1)) for _ in range(3))
                total = statistics.median(timed(lambda: generate(NEW)) for _ in range(2))
                row = {"model": name, "params": params, "batch": batch, "prompt_tokens": PROMPT, "new_tokens": NEW,
                       "ttft_s": f"{ttft:.6f}", "total_s": f"{total:.6f}", "tpot_s": f"{(total - ttft) / (NEW - 1):.6f}",
                       "tokens_per_s": f"{batch * NEW / total:.1f}", "peak_bytes": torch.cuda.max_memory_allocated() if DEVICE == "cuda" else "",
                       "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "torch": torch.__version__,
                       "transformers": transformers.__version__}
                writer.writerow(row)
                handle.flush()
                print(row, flush=True)
            del model
            if DEVICE == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
