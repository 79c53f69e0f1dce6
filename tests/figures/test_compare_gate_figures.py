"""False alarms of the compare gate at its default (5%, phases and the step): tests/data/gate_models.py's small
model profiled on the CPU twice, five times over, compared pair by pair; none may fail (0 of 5). The planted
layer against each first profile fails each time (5 of 5). tests/test_compare_gate_cpu.py does one pair in
make test."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_compare_gate_cpu import one_thread, profile_gate_model

PAIRS = 5


def test_the_same_model_never_fails_the_default_gate(cli, tmp_path: Path, cpu_profile_args: list[str]) -> None:
    ceilings = Path(cpu_profile_args[cpu_profile_args.index("--ceilings") + 1])
    store = tmp_path / "gate-store"
    alarms, caught, widest = [], 0, 0.0
    for pair in range(PAIRS):
        with one_thread():
            for factory, run in (("mlp", f"base{pair}"), ("mlp", f"again{pair}"), ("mlp_planted", f"planted{pair}")):
                profile_gate_model(cli, store, factory, run, ceilings)
        same = cli(
            "compare", f"base{pair}", f"again{pair}", "--fail-on-regression", "--format", "json", "--store", store
        )
        if same.code != 0:
            alarms.append(json.loads(same.out)["gate"]["regressions"])
        phases = json.loads(same.out)["phases"]
        widest = max(widest, max(abs(row["candidate_time_s"] / row["base_time_s"] - 1) for row in phases.values()))
        planted = cli("compare", f"base{pair}", f"planted{pair}", "--fail-on-regression", "--store", store)
        caught += planted.code == 1
    print(f"false alarms {len(alarms)} of {PAIRS}; planted caught {caught} of {PAIRS}; widest same-model phase "
          f"change {100 * widest:.0f}%")  # fmt: skip
    assert alarms == [] and caught == PAIRS
