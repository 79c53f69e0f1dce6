"""The API's import takes what ``hroofline import`` takes (issue 48, item 5): each option through
``hroofline.import_run``, by name or as an ``ImportSettings``, checked against the files themselves. The command
is a layer over the same function (``api.imports.import_with``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

import hroofline
from hroofline.errors import InputError, UsageError
from tests.conftest import REPO, SHARED, need
from tests.test_kineto import kernels_in_steps, read_events, trace_path

# One H100 training step this project traced (tests/data/gpu-2026-11-27/README.md): no distributedInfo, so no rank.
VGG16 = REPO / "tests/data/gpu-2026-11-27/h100-sixth/vgg16-fp32-b32-train-nchw-trace.json.xz"
# Two one-metric passes over the same 8 launches of the GENE code on a V100 (fixtures/ncu/PROVENANCE.md).
GENE = ("v100_gene_dgdxy_time_dram.csv", "v100_gene_dgdxy_dpflops.csv")


def test_steps_pick_profiler_steps(tmp_path: Path) -> None:
    """steps="5-6" (or [5, 6]) as --steps 5-6: the kernels whose runtime call lies in ProfilerStep#5 or #6 of the
    DDP trace, counted here from its JSON."""
    expected = kernels_in_steps(read_events("ddp"), [5, 6])
    run = hroofline.import_run(trace_path("ddp"), "two-steps", steps="5-6", store=tmp_path)
    assert len(run.launches) == len(expected) and set(run.launches["step"]) == {5, 6}
    listed = hroofline.import_run(trace_path("ddp"), "listed", hroofline.ImportSettings(steps=[5, 6]), store=tmp_path)
    assert listed.launches["launch_id"].tolist() == run.launches["launch_id"].tolist()
    with pytest.raises(InputError, match="holds steps 4, 5, 6"):
        hroofline.import_run(trace_path("ddp"), "none", steps=[9], store=tmp_path)


def test_rank_names_the_rank_of_a_trace_that_does_not_say(tmp_path: Path) -> None:
    run = hroofline.import_run(need(VGG16), "assumed", store=tmp_path)
    assert set(run.launches["rank"]) == {0} and any("rank 0 assumed" in n for n in run.meta.sources[0].notes)
    ranked = hroofline.import_run(need(VGG16), "ranked", rank=3, store=tmp_path)
    assert set(ranked.launches["rank"]) == {3} and not any("rank 0 assumed" in n for n in ranked.meta.sources[0].notes)
    with pytest.raises(UsageError, match="--rank -1"):
        hroofline.import_run(need(VGG16), "negative", rank=-1, store=tmp_path)


def test_merge_name_joins_passes_per_kernel_name(tmp_path: Path) -> None:
    """merge="name": one row per kernel name, its launches counted; by launch, one row per launch. Both from the
    files' own rows (ID, Kernel Name), read here with csv."""
    files = [need(SHARED / "fixtures" / "ncu" / name) for name in GENE]
    text = files[0].read_text()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID","Process ID"') :])))
    launches = {row["ID"]: row["Kernel Name"] for row in rows}
    by_launch = hroofline.import_run(files, "by-launch", gpu="v100", store=tmp_path)
    assert len(by_launch.launches) == len(launches) == 8
    by_name = hroofline.import_run(files, "by-name", gpu="v100", merge="name", store=tmp_path)
    counted = by_name.launches.set_index("kernel")["launches"].to_dict()
    assert counted == {name: list(launches.values()).count(name) for name in set(launches.values())}
    assert by_name.launches["flops_fp64"].sum() == pytest.approx(by_launch.launches["flops_fp64"].sum(), rel=1e-12)
    with pytest.raises(UsageError, match="--merge 'kernel': not one of launch, name"):
        hroofline.import_run(files, "bad", gpu="v100", merge="kernel", store=tmp_path)


def test_precision_labels_the_run_and_replace_makes_it_anew(tmp_path: Path) -> None:
    first = hroofline.import_run(need(VGG16), "vgg", precision="fp32", store=tmp_path)
    assert first.meta.precision == "fp32"
    again = hroofline.import_run(need(VGG16), "vgg", replace=True, precision="tf32", store=tmp_path)
    assert again.meta.precision == "tf32" and len(again.meta.sources) == 1
    assert len(again.launches) == len(first.launches)


def test_force_gpu_judges_a_report_as_another_gpu(tmp_path: Path) -> None:
    """The H800 report states 132 SMs; an H20 has 78: refused, as by the command, unless forced."""
    h800 = need(SHARED / "fixtures" / "ncu" / "h800_podattn_flashfwd_fullset_nvtx.ncu-rep")
    with pytest.raises(InputError, match="has 132 SMs, --gpu h20 has 78"):
        hroofline.import_run(h800, "h", gpu="h20", store=tmp_path)
    forced = hroofline.import_run(h800, "h", gpu="h20", force_gpu=True, store=tmp_path)
    assert forced.meta.gpu == "h20"
    with pytest.raises(UsageError, match="--force-gpu needs --gpu"):
        hroofline.import_run(h800, "h2", force_gpu=True, store=tmp_path)


def test_an_option_the_command_lacks_is_refused_with_the_closest(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        hroofline.import_run(need(VGG16), "x", step="5", store=tmp_path)
    assert "'step': not an option of import" in str(refused.value) and "did you mean steps?" in refused.value.hint
    with pytest.raises(UsageError, match="not an ImportSettings"):
        hroofline.import_run(need(VGG16), "x", "h100-sxm", store=tmp_path)  # the GPU where settings go
    assert not (tmp_path / "runs").exists()
