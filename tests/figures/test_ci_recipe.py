"""The CI recipe of docs/guides/ci.md, run as a job would run it: the workflow's YAML is read from the page, and
every `hroofline` command of its `run:` steps runs in bash in a fresh folder (the repository the job checks out:
`model.py` is samples/train_tiny_cnn.py), on the CPU. The main branch's steps first; then a pull request of the same
model passes the gate, and one with two wide convolutions added fails it (exit 1, the layers named in the
summary). Minutes of profiles: here, not in make test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import yaml

from tests.conftest import REPO

GUIDE = REPO / "docs" / "guides" / "ci.md"
# What the test does not run, with why: the job's set-up, which GitHub provides.
NOT_RUN = {"pip install": "installs hroofline and PyTorch into the runner; here they are the test's own .venv"}
ON_MAIN = "github.ref == 'refs/heads/main'"
ON_PULL_REQUEST = "github.event_name == 'pull_request'"


def workflow() -> dict:
    (block,) = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    return yaml.safe_load(block)


def commands(condition: str) -> list[str]:
    """The shell lines of the job's `run:` steps under ``condition`` (or under none), in order."""
    (job,) = workflow()["jobs"].values()
    lines = []
    for step in job["steps"]:
        if "run" not in step or step.get("if", condition) != condition:
            continue
        for line in step["run"].splitlines():
            line = line.split("   # ")[0].strip()
            if line and not any(line.startswith(start) for start in NOT_RUN):
                assert line.startswith("hroofline "), f"{GUIDE.name}: a command the test does not know: {line}"
                lines.append(line)
    return lines


def run_job(folder: Path, condition: str) -> tuple[int, str, str]:
    """One job's steps in bash, stopping at the first that fails, as Actions runs a step's script (bash -e)."""
    (job,) = workflow()["jobs"].values()
    summary = folder / "summary.md"
    summary.write_text("", encoding="utf-8")
    env = {
        **os.environ,
        **{key: str(value) for key, value in job.get("env", {}).items()},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(summary),
        "PYTHONPATH": str(REPO),
    }
    script = "set -e\n" + "\n".join(commands(condition)) + "\n"
    done = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, summary.read_text(encoding="utf-8"), done.stderr


def test_the_recipe_gates_a_pull_request_on_the_cpu(tmp_path: Path) -> None:
    assert commands(ON_MAIN) and commands(ON_PULL_REQUEST)
    shutil.copy(REPO / "samples" / "train_tiny_cnn.py", tmp_path / "model.py")
    code, _, err = run_job(tmp_path, ON_MAIN)
    assert code == 0, err
    assert (tmp_path / "last-good-store" / "baselines.json").is_file()

    code, summary, err = run_job(tmp_path, ON_PULL_REQUEST)  # the same model: passes
    if code == 1 and "gate failed" in summary.lower():
        # The two jobs are timed minutes apart: a load that starts between them on this machine (another process,
        # a tool's own work) slowed a candidate of the same model 3x (2.30 -> 6.82 ms), beyond the noise its 8
        # steps show. The pair is measured once more (said in a warning); a false alarm of the recipe fails again.
        warnings.warn(f"the same model failed the gate once, measured again:\n{summary}", stacklevel=1)
        shutil.rmtree(tmp_path / "runs")
        assert run_job(tmp_path, ON_MAIN)[0] == 0
        code, summary, err = run_job(tmp_path, ON_PULL_REQUEST)
    assert code == 0, err + summary
    assert "| " in summary and "passed" in summary.lower()

    shutil.rmtree(tmp_path / "runs")
    model = tmp_path / "model.py"
    slower = model.read_text(encoding="utf-8").replace(
        "nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()]",
        "nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), "
        "nn.Conv2d(32, 256, 3, padding=1), nn.Conv2d(256, 32, 3, padding=1)]",
    )
    assert slower != model.read_text(encoding="utf-8"), "samples/train_tiny_cnn.py changed: plant the layer anew"
    model.write_text(slower, encoding="utf-8")
    code, summary, err = run_job(tmp_path, ON_PULL_REQUEST)
    assert code == 1, err + summary
    assert "gate failed" in summary.lower(), summary
    # the regressions' "behind it" cells start with a planted layer: nn.Sequential's 5 and 6 (after conv 3, relu 4)
    rows = [line.split("|") for line in summary.splitlines() if line.startswith("| phase | forward")]
    rows += [line.split("|") for line in summary.splitlines() if line.startswith("| phase | backward")]
    assert len(rows) == 2, summary
    assert all(row[-2].strip().split(" ")[0] in {"5", "6"} for row in rows), summary
