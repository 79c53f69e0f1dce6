"""``predict --generate`` and ``hroofline.predict_generation``: the KV cache, a decode step's FLOPs and bytes and the
memory fit against hand counts from the models' configs (hroofline/collect/models.py HF_CONFIGS, and transformers'
GPT-2 defaults: 12 layers, 12 heads, 768 wide, 3072 in the MLP, 50,257 tokens, 1,024 positions); bad requests exit
2 before torch is imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hroofline
from tests.conftest import REPO

GIB = 2**30
H200_BYTES = 141 * GIB  # metrics/gpus.toml memory_gib
H200_HBM = 4800e9  # metrics/gpus.toml [h200.peak] hbm
H200_BF16 = 989.4e12  # tensor_bf16

# GPT-2 by hand: per layer the QKV projection (d x 3d), the output projection (d x d) and the MLP (d x 4d, 4d x d)
D, LAYERS, VOCAB = 768, 12, 50257
GPT2_BODY = LAYERS * (D * 3 * D + D * D + 2 * D * 4 * D)
GPT2_HEAD = D * VOCAB  # the LM head, tied to the token table
GPT2_PARAMETERS = 124_439_808  # the real model's, tests/data/gpu-2026-11-28/generate-times.csv


def tinyllama_by_hand() -> dict[str, int]:
    """TinyLlama-1.1B (HF_CONFIGS): 22 layers of width 2048, 32 query heads and 4 KV heads of 64, MLP 5632
    (gate, up, down), 32,000 tokens, an untied LM head."""
    d, layers, heads, kv_heads, ffn, vocab = 2048, 22, 32, 4, 5632, 32000
    head_dim = d // heads
    per_layer = d * d + 2 * d * kv_heads * head_dim + d * d + 3 * d * ffn  # q, k, v, o, MLP
    return {"body": layers * per_layer, "head": d * vocab, "kv_token_bf16": 2 * layers * kv_heads * head_dim * 2}


@pytest.fixture(scope="module")
def gpt2_batch8():
    return hroofline.predict_generation("hf:gpt2", "h200", prompt_tokens=128, new_tokens=128, batch_size=8)


def test_gpt2_kv_cache_decode_work_and_bound_by_hand(gpt2_batch8) -> None:
    p = gpt2_batch8
    kv_token = 2 * LAYERS * 12 * 64 * 2  # keys and values, 12 heads of 64, bf16
    assert p.kv_bytes_per_token == kv_token == 36_864
    assert p.kv_cache_bytes == kv_token * 8 * 256
    # a decode step: 2 FLOPs per weight of the matrix products per token, + attention 4 x layers x d x context;
    # TPOT is the mean over the steps at contexts 129 ... 255 (the first token is the prefill's)
    contexts = range(129, 256)
    flops = [8 * (2 * (GPT2_BODY + GPT2_HEAD) + 4 * LAYERS * D * c) for c in contexts]
    assert p.tpot.work.flops == pytest.approx(sum(flops) / len(flops), rel=1e-12)
    # ~ 2 x parameters per token: the real model's count differs by the position table, biases and norms
    assert pytest.approx(2 * GPT2_PARAMETERS, rel=0.01) == 2 * (GPT2_BODY + GPT2_HEAD)
    # bytes: every weight but the position table (1024 x 768), bf16, and the cache of 8 sequences
    weights = (GPT2_PARAMETERS - 1024 * D) * 2
    cache = [kv_token * 8 * c for c in contexts]
    assert p.tpot.work.bytes == pytest.approx(weights + sum(cache) / len(cache), rel=1e-12)
    # decode is bandwidth-bound: the bound is the bytes over HBM's 4.8 TB/s
    bounds = [max(f / H200_BF16, (weights + c) / H200_HBM) for f, c in zip(flops, cache, strict=True)]
    assert p.tpot.bound_s == pytest.approx(sum(bounds) / len(bounds), rel=1e-12)
    assert p.tpot.bound_s == pytest.approx(63.3e-6, abs=0.05e-6)
    # the prefill: 8 x 128 tokens through the layers, the last token's logits, causal attention
    prefill = 2 * GPT2_BODY * 8 * 128 + 2 * GPT2_HEAD * 8 + 4 * LAYERS * D * 8 * 128 * 129 / 2
    assert p.ttft.work.flops == pytest.approx(prefill, rel=1e-12)
    assert p.ttft.bound_s == pytest.approx(prefill / H200_BF16, rel=1e-12)  # compute-bound
    # tokens/s: 8 x 128 tokens over the prefill and 127 decode steps
    total = p.ttft.estimate_s + 127 * p.tpot.estimate_s
    assert p.tokens_per_s_estimate == pytest.approx(8 * 128 / total)


def test_the_fit_limit_by_hand(gpt2_batch8) -> None:
    fit = gpt2_batch8.fit
    budget = 0.9 * H200_BYTES  # vLLM's default gpu_memory_utilization
    tokens = int((budget - GPT2_PARAMETERS * 2) // 36_864)
    assert fit.cache_tokens == tokens == 3_689_479
    assert fit.largest_batch == tokens // 256
    assert fit.largest_context == tokens // 8
    assert fit.fits


def test_tinyllama_grouped_query_attention_and_fp8() -> None:
    hand = tinyllama_by_hand()
    bf16 = hroofline.predict_generation("hf:tinyllama-1.1b", "h200", 100, 28, 4)
    assert bf16.kv_bytes_per_token == hand["kv_token_bf16"] == 22_528  # 4 KV heads, not 32
    assert bf16.kv_cache_bytes == 22_528 * 4 * 128
    assert bf16.shape.body_matmul_weights == hand["body"]
    assert bf16.shape.head_weights == hand["head"]
    context = 101  # one request with two new tokens has a single decode step
    one_step = hroofline.predict_generation("hf:tinyllama-1.1b", "h200", 100, 2, 4)
    assert one_step.tpot.work.flops == 4 * (2 * (hand["body"] + hand["head"]) + 4 * 22 * 2048 * context)
    fp8 = hroofline.predict_generation("hf:tinyllama-1.1b", "h200", 100, 28, 4, precision="fp8")
    assert fp8.kv_bytes_per_token == 22_528 / 2  # one byte a value
    assert fp8.roofs.tensor_flops == 1979e12  # metrics/gpus.toml tensor_fp8
    # the same model on a 40 GiB A100 at a batch of 8,000 x 128 tokens: 23.1 GB of cache beside 2.2 GB of weights
    # fits 90% of 42.9 GB; at 16,000 (46.1 GB of cache) it does not
    assert hroofline.predict_generation("hf:tinyllama-1.1b", "a100", 100, 28, 8000).fit.fits
    big = hroofline.predict_generation("hf:tinyllama-1.1b", "a100", 100, 28, 16000).fit
    assert not big.fits
    assert big.largest_batch == int((0.9 * 40 * GIB - 1_100_048_384 * 2) // 22_528) // 128 == 12_642


def test_predict_generate_prints_ttft_tpot_throughput_cache_and_fit(cli) -> None:
    for model in ("hf:gpt2", "hf:tinyllama-1.1b"):
        result = cli("predict", "--generate", "--model", model, "--gpu", "h200", "--batch", "8")
        assert result.code == 0, result.err
        for what in ("TTFT (prefill): estimate", "TPOT (decode", "tokens/s: estimate", "KV cache:", "largest batch"):
            assert what in result.out, (model, what)
    gpt2 = cli("predict", "--generate", "--model", "hf:gpt2", "--gpu", "h200", "--batch-size", "8", "--format", "csv")
    assert "kv_cache_bytes_per_token,B,36864" in gpt2.out
    assert "largest_batch,sequences,14412" in gpt2.out
    as_json = cli("predict", "--generate", "--model", "hf:gpt2", "--gpu", "h200", "--format", "json")
    rows = {row["quantity"]: row for row in json.loads(as_json.out)}
    assert rows["kv_cache_bytes"]["bound"] == 36_864 * 256  # batch 1 by default, 128 + 128 tokens
    assert rows["tpot"]["estimate"] > rows["tpot"]["bound"] > 0


BAD_REQUESTS = [
    (["--generate", "--arch", "resnet18"], "--arch is not for --generate"),
    (["--generate", "--model", "resnet18"], "--generate needs a transformer config built in code"),
    (["--generate", "--model", "hf:bert-base-uncased"], "is not a causal language model"),
    (["--generate", "--model", "hf:gpt2", "--new-tokens", "0"], "--new-tokens: must be 1 or more"),
    (["--model", "hf:gpt2", "--new-tokens", "4"], "--prompt-tokens and --new-tokens are for --generate"),
    (["--generate", "--model", "hf:gpt2", "--precision", "amp"], "generation runs in bf16 or fp8"),
    (["--generate", "--model", "hf:gpt2", "--batch-size", "1,2"], "no lists"),
    (["--generate", "--model", "hf:gpt2", "--phases", "forward"], "--phases is not for --generate"),
    (["--generate", "--model", "hf:gpt2", "--gpu", "a100", "--precision", "fp8"], "no FP8 tensor or HBM peak"),
]


@pytest.mark.parametrize(("arguments", "said"), BAD_REQUESTS)
def test_bad_requests_exit_2_before_torch(arguments: list[str], said: str) -> None:
    """torch made unimportable: a check that came after importing it would fail otherwise."""
    argv = ["predict", *arguments] + ([] if "--gpu" in arguments else ["--gpu", "h200"])
    code = f"import sys; sys.modules['torch'] = None; from hroofline.cli.main import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_positions_beyond_the_model_are_a_usage_error(cli) -> None:
    result = cli("predict", "--generate", "--model", "hf:gpt2", "--gpu", "h200", "--prompt-tokens", "1000")
    assert result.code == 2
    assert "hf:gpt2 takes at most 1024 positions" in result.err


def test_the_measured_error_printed_is_the_files() -> None:
    """metrics/generation.toml's measured / estimate, recomputed from the measured files it names (an H200's, their
    READMEs in tests/data/gpu-2026-11-28 and -28b), to its printed two decimals: a loop of the model alone was
    faster than the estimate, Hugging Face generate slower (its own work per token is not modelled)."""
    import pandas as pd

    from hroofline.analyze.generation import load_measured_generation

    loop, generate = load_measured_generation()
    for recorded, requests in ((loop, 9), (generate, 9)):
        measured = pd.concat([pd.read_csv(REPO / source) for source in recorded.sources])
        first_token = measured["ttft_s"] if "ttft_s" in measured else measured["prefill_s"]
        ttft, tpot = [], []
        for row, first in zip(measured.itertuples(index=False), first_token, strict=True):
            p = hroofline.predict_generation(f"hf:{row.model}", "h200", row.prompt_tokens, row.new_tokens, row.batch)
            ttft.append(first / p.ttft.estimate_s)
            tpot.append(row.tpot_s / p.tpot.estimate_s)
        assert len(ttft) == requests
        assert recorded.ttft == pytest.approx((min(ttft), max(ttft)), abs=0.005)
        assert recorded.tpot == pytest.approx((min(tpot), max(tpot)), abs=0.005)
    assert max(loop.tpot) < 1 < min(generate.tpot)


def test_an_amd_gpu_is_told_the_estimate_was_fitted_on_nvidia_only(gpt2_batch8) -> None:
    """Every step the estimate was fitted or checked on ran on an NVIDIA GPU (metrics/estimate.toml's sources):
    a prediction for an MI300X says so, once, in generation and step predictions; an NVIDIA GPU's does not."""
    from hroofline.render.generation import generation_text

    on_amd = hroofline.predict_generation("hf:gpt2", "mi300x", prompt_tokens=128, new_tokens=128, batch_size=8)
    said = [line for line in generation_text(on_amd).splitlines() if line.startswith("untested on AMD")]
    assert len(said) == 1 and "NVIDIA GPU" in said[0]
    assert "untested" not in generation_text(gpt2_batch8)
    step = hroofline.predict("resnet18", gpu="mi300x", batch_size=2)
    assert sum(line.startswith("untested on AMD") for line in step.describe().splitlines()) == 1
