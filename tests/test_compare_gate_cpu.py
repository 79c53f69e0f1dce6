"""The compare gate on the CPU, for real: a small model (tests/data/gate_models.py) profiled twice passes the
default gate, and the same model with a layer planted in it (two Linears around an unfused GELU) fails it, the
planted layer named behind the slower phases. tests/figures/test_compare_gate_figures.py repeats the pair five
times (false alarms 0 of 5)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Result

MODELS = Path(__file__).resolve().parent / "data" / "gate_models.py"
# Small enough to profile in about a second; --steps 8 gives the gate each phase's spread over eight steps.
PROFILE = ["--gpu", "cpu", "--input-shape", "1024", "--batch-size", "32", "--warmup", "1", "--steps", "8"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch on one thread while profiling: on a machine shared with other processes a thread preempted
    stalls a multi-threaded op until it runs again (a loaded 2-core machine: 1 ms ops taking 10-60 ms),
    while one thread loses only its own time slice."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def profile_gate_model(cli, store: Path, factory: str, run: str, ceilings: Path) -> None:
    argv = ["profile", "--model", f"{MODELS}:{factory}", *PROFILE, "--ceilings", ceilings, "--run", run]
    result: Result = cli(*argv, "--store", store)
    assert result.code == 0, result.err


@pytest.fixture
def gate_store(cli, tmp_path: Path, cpu_profile_args: list[str]) -> Path:
    ceilings = Path(cpu_profile_args[cpu_profile_args.index("--ceilings") + 1])
    store = tmp_path / "gate-store"
    with one_thread():
        for factory, run in (("mlp", "base"), ("mlp", "again"), ("mlp_planted", "planted")):
            profile_gate_model(cli, store, factory, run, ceilings)
    return store


def test_a_planted_layer_fails_the_gate_and_the_same_model_passes(cli, gate_store: Path) -> None:
    store = ("--store", gate_store)
    same = cli("compare", "base", "again", "--fail-on-regression", "--format", "json", *store)
    assert same.code == 0, same.out
    verdict = json.loads(same.out)["gate"]
    assert verdict["noise"]["base"] == {"noise": "steps", "repeats": 8, "steps": 8}
    planted = cli(
        "compare", "base", "planted", "--fail-on-regression", "--layer-gate", "10", "--format", "json", *store
    )
    assert planted.code == 1
    gate = json.loads(planted.out)["gate"]
    slower = {item["name"]: item for item in gate["regressions"] if item["level"] == "phase"}
    assert {"forward", "backward"} <= set(slower)
    for phase in ("forward", "backward"):  # the planted layer's Linears and GELU are what these phases hold more of
        assert slower[phase]["behind"][0]["name"].startswith("extra.")
    new_layers = {item["name"] for item in gate["new"] if item["level"] == "layer"}
    assert {"extra.0", "extra.1", "extra.2"} <= new_layers
    text = cli("compare", "base", "planted", "--fail-on-regression", *store)
    assert text.code == 1 and "gate FAILED" in text.out and "extra." in text.out


def test_a_profiled_script_records_the_step_of_each_op(tmp_path: Path) -> None:
    """`profile --gpu cpu --script` with --steps 2: each op knows its profiled step, the repeats the gate reads."""
    from hroofline.collect.cpu_backend import profile_script_cpu

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport hroofline\nmodel = torch.nn.Linear(4, 4)\nfor _ in range(3):\n"
        "    with hroofline.profiled_step():\n        with hroofline.phase('forward'):\n"
        "            model(torch.ones(2, 4)).sum()\n"
    )
    launches = profile_script_cpu(script, [], 1, 2, lambda _: None).launches
    per_step = launches.groupby("step")["kernel"].agg(list)
    assert list(per_step.index) == [0, 1]  # the warm-up entry left out, the two profiled ones numbered
    assert per_step[0] == per_step[1] and "aten::addmm" in per_step[0]  # the same ops each step
