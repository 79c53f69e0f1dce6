"""Every example of every --help runs when copied (issue 48, item 5): against a store that holds the DeepCAM runs
the examples name (Yang et al.'s V100 data, as `make demo` imports it), in a folder where the files they import
stand for the user's own (the shared fixtures, linked under the examples' names), in the order the help lists
them (predict's first: other examples read the runs its examples make). Examples that need a GPU, ncu, or minutes
of this machine are left out, each with its reason."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from hroofline.cli.main import COMMANDS, EPILOG, main
from tests.conftest import REPO, SHARED, main_status
from tools.docs_reference import command_parser

# An example that is not run, by how it starts, and why.
LEFT_OUT = {
    "hroofline profile --arch resnet34 --gpu v100": "ncu on a V100",
    "hroofline profile --arch resnet34 --gpu h100-sxm": "ncu on an H100",
    "hroofline profile --arch vit_b_16 --gpu h100-sxm": "ncu on an H100",
    "hroofline profile --arch resnet50 --gpu a100 --kernels": "ncu on an A100",
    "hroofline profile --arch resnet18 --gpu cpu": "a CPU profile: about 4 minutes here (test_cpu_profile runs one)",
    "hroofline profile --arch deeplabv3_resnet50": "a CPU profile of a 512x512 segmentation step: many minutes",
    "hroofline profile --model mypkg.models:build": "a CPU profile (test_layers predicts a FILE.py:F model)",
    "hroofline profile --gpu cpu --script": "a CPU profile of a script (test_layers runs samples/)",
    "hroofline profile --gpu h100 --backend trace --script": "torch.profiler on an H100",
    "hroofline profile --model hf:gpt2 --gpu h100 --compile": "ncu on an H100",
    "hroofline import trace.json --run mine --ceilings": "a CPU trace of the user's (test_cpu_traces records one)",
    "hroofline ceilings --measure": "measures this machine for minutes (test_roofs and bench measure it)",
    "hroofline import rank0.json.gz rank1.json.gz": "two ranks of one job; the shared traces hold one rank each",
    "hroofline import traces/ --run ddp-1k": "a folder of a job's rank traces; the shared traces hold one rank each "
    "(tests/test_many_ranks.py imports ranks synthesised from them)",
    "hroofline spark ranks": "the run ddp-1k of the import left out above (tests/test_spark.py runs the command)",
    "hroofline compare r50-fp32-a100 r50-fp32-a100-measured": "a measured ResNet-50 step needs an A100",
    "hroofline compare --baseline last-good deepcam-amp-o1 --base-store": "a CI job's downloaded store (test_baseline)",
    "hroofline doctor --keep": "ncu on a GPU",
}
WHOLE = {"hroofline doctor": "ncu on a GPU"}

# The user's files the examples import, stood for by the shared data.
FILES = {
    "pt-O0-Adam-fw": "fixtures/deepcam/pt-O0-Adam-fw",
    "pt-O0-Adam-bw": "fixtures/deepcam/pt-O0-Adam-bw",
    "fw.ncu-rep": "fixtures/ncu/titanv_cnn_conv_fp32_fullset.ncu-rep",
    "time_dram.ncu-rep": "fixtures/ncu/v100_gene_dgdxy_time_dram_nvtx.ncu-rep",
    "dpflops.ncu-rep": "fixtures/ncu/v100_gene_dgdxy_dpflops_nvtx.ncu-rep",
    "logs": "fixtures/deepcam/pt-O1-Adam-opt",
    "trace.json.gz": "fixtures/kineto/kineto_a100_ddp2_nccl_rank0.json.gz",
    "replay.json.gz": "fixtures/compiled/vllm-mi300x-piecewise-replay.json.gz",
    "capture.pt.trace.json.gz": "fixtures/compiled/vllm-mi300x-piecewise-capture.json.gz",
    "profile.sqlite": "fixtures/nsys/h100-2gpu-1s.sqlite",
}

# ... and by the repository's own GPU data (tests/data/gpu-2026-11-28/README.md: an H200's compiled resnet50 step)
COMPILED_STEP = "tests/data/gpu-2026-11-28"
REPO_FILES = {
    "compiled.json.xz": f"{COMPILED_STEP}/traces/resnet50-bf16-compiled-trace.json.xz",
    "torch-trace.tar.xz": f"{COMPILED_STEP}/compile-logs/resnet50-bf16-compiled-torch-trace.tar.xz",
}


def _epilogs() -> Iterator[tuple[str, str]]:
    yield "hroofline", EPILOG
    for command in ("predict", *[c for c in COMMANDS if c != "predict"]):
        yield command, command_parser(command).epilog or ""


def _cut(line: str) -> tuple[str, str | None]:
    """The command of an example line, without the comment after it (three spaces or a #, outside quotes), and
    the quote left open at its end (the example goes on on the next line)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif line.startswith("   ", i) or line.startswith(" #", i):
            return line[:i], None
    return line, quote


def examples() -> list[tuple[str, str]]:
    found = []
    for where, text in _epilogs():
        lines = text.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index].strip()
            index += 1
            if not line.startswith("hroofline "):
                continue
            command, open_quote = _cut(line)
            while open_quote and index < len(lines):
                command, open_quote = _cut(command + " " + lines[index].strip())
                index += 1
            found.append((where, command.strip()))
    return found


def _left_out(example: str) -> str | None:
    if example in WHOLE:
        return WHOLE[example]
    return next((why for start, why in LEFT_OUT.items() if example.startswith(start)), None)


def test_every_example_is_found_and_every_reason_is_used() -> None:
    found = [example for _, example in examples()]
    assert len(found) > 40 and all(shlex.split(example) for example in found)  # every one parses as shell words
    for start in [*LEFT_OUT, *WHOLE]:
        assert any(example.startswith(start) for example in found), f"no example starts {start!r} any more"


def test_every_help_example_runs_when_copied(
    deepcam_store_copy: Path, h100_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = deepcam_store_copy
    for old, new in (("deepcam-O0", "deepcam-fp32"), ("deepcam-O1", "deepcam-amp-o1")):
        assert main(["rename", old, new, "--store", str(store)]) == 0
    work = tmp_path / "work"
    work.mkdir()
    for name, path in FILES.items():
        (work / name).symlink_to(SHARED / path)
    (work / "gemm-calibration.ncu-rep").symlink_to(h100_dir / "gemm-calibration-base-clock.ncu-rep")
    for name, path in REPO_FILES.items():
        (work / name).symlink_to(REPO / path)
    monkeypatch.chdir(work)
    monkeypatch.setenv("HROOFLINE_STORE", str(store))
    failed, ran = [], set()
    for where, example in examples():
        if _left_out(example) or example in ran:  # the same line in two commands' helps: run once
            continue
        ran.add(example)
        code = main_status(shlex.split(example)[1:])
        if code != 0:
            failed.append(f"{where}: {example} (exit {code})")
    assert not failed, "\n".join(failed)
