"""What the meta-device trace counts, against independent figures, compared with the validation page
(docs/validation.md, keys ``flops``, ``flops-reproduce`` and ``gpt2-flops``) figure by figure: convolution and
matrix-product FLOPs against torchvision's published GMACs, what the other ops add, the forward memory at batch 256
against a course report's A100 measurements (../shared/background/004_*.txt), and GPT-2's forward FLOPs against
2 x parameters x tokens plus causal attention. tests/test_predict.py, tests/test_memory.py and tests/test_layers.py
hold the same agreements within their bands in make test."""

from __future__ import annotations

import pytest

from hroofline.analyze.predict import flop_split
from hroofline.collect.meta_trace import trace_step, trace_step_memory
from hroofline.collect.workload import TrainingStep, WorkloadConfig
from tests.conftest import need_package
from tests.test_memory import _course_table
from tests.test_predict import FLOP_COLUMNS, _published_flops
from tests.validation_page import assert_page_shows, page_figures

MATCHING = (
    "resnet18",
    "resnet50",
    "vgg16",
    "vit_b_16",
    "convnext_tiny",
    "swin_t",
    "regnet_x_3_2gf",
    "maxvit_t",
    "mobilenet_v2",
)
MEMORY_BATCH = 256
MEMORY_MODELS = ("resnet18", "alexnet", "vgg16")


def forward_split(arch: str) -> tuple[float, float]:
    """A forward pass at batch 1: its convolution and matrix-product FLOPs, and the other ops'."""
    split = flop_split(trace_step(WorkloadConfig(arch, batch_size=1), "forward").assign(flops_tensor=0.0))
    return split.matmul, split.other


def test_the_page_shows_the_flops_and_memory_against_independent_figures() -> None:
    splits = {arch: forward_split(arch) for arch in MATCHING}
    off = max(abs(matmul / _published_flops(arch) - 1) for arch, (matmul, _) in splits.items())
    assert off < 0.001  # the page's "to 0.1%"
    added = {arch: 100 * other / matmul for arch, (matmul, other) in splits.items()}
    ordinary = {arch: share for arch, share in added.items() if arch != "mobilenet_v2"}
    assert min(ordinary, key=ordinary.get) == "vgg16" and max(ordinary, key=ordinary.get) == "maxvit_t"
    course = _course_table()
    predicted = []
    for arch in MEMORY_MODELS:
        trace = trace_step_memory(WorkloadConfig(arch, MEMORY_BATCH), "train")
        predicted.append(next(m for m in trace.memory if m.phase == "forward").retained_bytes / 1e9)
    computed = [
        0.1,  # the bound asserted above
        added["vgg16"],
        added["maxvit_t"],
        added["mobilenet_v2"],
        MEMORY_BATCH,
        *predicted,
        *(course[arch] / 1e9 for arch in MEMORY_MODELS),
    ]
    assert_page_shows(page_figures("flops"), computed, "the trace against independent figures")
    assert_page_shows(page_figures("flops-reproduce"), [MEMORY_BATCH], "the memory check's batch")


def test_the_page_shows_gpt2s_forward_flops() -> None:
    need_package("transformers")
    tokens = 1024
    config = WorkloadConfig("hf:gpt2", 1, device="meta", seq_len=tokens)
    launches = trace_step(config, "forward").assign(flops_tensor=0.0)
    split = flop_split(launches)
    total = float(launches[FLOP_COLUMNS].sum().sum())
    model = TrainingStep(config).model
    parameters = sum(p.numel() for p in model.parameters())  # tied: the token table once
    counted = parameters - model.config.n_positions * model.config.n_embd
    layers, d_model = model.config.n_layer, model.config.n_embd
    expected = 2 * counted * tokens + 4 * layers * tokens**2 * d_model / 2
    assert split.matmul + split.other == pytest.approx(total, rel=1e-9)
    computed = [
        tokens,
        total / 1e9,
        split.matmul / 1e9,
        2,
        counted / 1e6,
        tokens,
        4,
        layers,
        d_model,
        2,
        expected / 1e9,
        100 * abs(split.matmul / expected - 1),
        split.other / 1e9,
        100 * split.other / total,
    ]
    assert_page_shows(page_figures("gpt2-flops"), computed, "GPT-2's forward FLOPs")
