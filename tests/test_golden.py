"""Golden files: the demo's deterministic outputs, byte for byte. The DeepCAM runs (imported from ../shared as
`make demo` does) and the two predicted ResNet-50 runs of samples/store give the README's chart, a comparison
chart and the report; a change of layout that changes a byte of them fails here.

What varies between machines is normalised first: dates, the path of ../shared, the inlined Vega library.
`HROOFLINE_UPDATE_GOLDEN=1 pytest tests/test_golden.py` rewrites the files after a deliberate change."""

from __future__ import annotations

import difflib
import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED, need

GOLDEN = REPO / "tests" / "golden"
PREDICTED = ("resnet50-fp32-v100-predicted", "resnet50-amp-v100-predicted")
DEEPCAM = (("deepcam-fp32", "O0", "fp32"), ("deepcam-amp-o1", "O1", "amp-o1"))


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hroofline.cli.main import main

    deepcam = need(SHARED / "fixtures" / "deepcam")
    store = tmp_path_factory.mktemp("golden") / "store"
    shutil.copytree(REPO / "samples" / "store", store)
    for run, config, precision in DEEPCAM:
        for phase in ("fw", "bw", "opt"):
            folder = deepcam / f"pt-{config}-Adam-{phase}"
            argv = ["import", str(folder), "--run", run, "--gpu", "v100", "--phase", phase, "--precision", precision]
            assert main([*argv, "--store", str(store)]) == 0
    return store


def normalised(text: str) -> str:
    text = text.replace(str(SHARED.resolve()), "../shared").replace(str(SHARED), "../shared")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?", "<time>", text)
    text = re.sub(r"\b20\d\d-\d\d-\d\d\b", "<date>", text)
    return re.sub(r"<script>(?:(?!</script>).){100000,}?</script>", "<script><library></script>", text, flags=re.S)


def check_golden(name: str, text: str, tmp_path: Path) -> None:
    path = GOLDEN / f"{name}.gz"
    if os.environ.get("HROOFLINE_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
        return
    expected = gzip.decompress(path.read_bytes()).decode()
    if text != expected:
        (tmp_path / name).write_text(text)
        diff = difflib.unified_diff(expected.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=1)
        pytest.fail(f"{name} differs from {path} (now: {tmp_path / name}):\n" + "\n".join(list(diff)[:40]))


def test_readme_chart_spec_is_unchanged(cli, demo_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "chart.json"
    args = ["chart", "deepcam-amp-o1", "--phase", "forward", "--ceilings", "v100-yang-ert", "--out", out]
    assert cli(*args, "--store", demo_store).code == 0
    check_golden("deepcam-amp-o1-forward.json", normalised(json.dumps(json.loads(out.read_text()), indent=1)), tmp_path)


def test_comparison_chart_spec_is_unchanged(cli, demo_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    assert cli("compare", *PREDICTED, "--out", out, "--store", demo_store).code == 0
    check_golden(
        "resnet50-fp32-amp-compare.json", normalised(json.dumps(json.loads(out.read_text()), indent=1)), tmp_path
    )


def test_report_is_unchanged(cli, demo_store: Path, tmp_path: Path) -> None:
    runs = [*PREDICTED, *(run for run, _, _ in DEEPCAM)]
    args = ["report", *runs, "--compare", *PREDICTED, "--compare", "deepcam-fp32", "deepcam-amp-o1"]
    args += ["--title", "golden", "--out", tmp_path / "report"]
    assert cli(*args, "--store", demo_store).code == 0
    check_golden("report.html", normalised((tmp_path / "report" / "index.html").read_text()), tmp_path)
