"""The real files the session's read-only stores import (tests/conftest.py: h100_runs_store, kineto_store), by
the run names the tests read them under."""

from __future__ import annotations

# The H100 steps of ../shared/fixtures/h100 (recorded by hroofline on an H100 SXM; see its README), as imported into
# h100_runs_store: run name -> the file and the import's other arguments.
H100_RUNS = {
    "r34": ("resnet34-fp32-b32-step.ncu-rep", ()),
    "gpt2-trace": ("gpt2-amp-bf16-b8-s512-trace.json", ()),
    "gpt2": ("gpt2-amp-bf16-b8-s512-trace.json", ("--gpu", "h100-sxm")),  # the trace names no catalog GPU
    "gpt2-ncu": ("gpt2-amp-bf16-b8-s512-step.ncu-rep", ()),
    "gemm-calibration-base-clock": ("gemm-calibration-base-clock.ncu-rep", ()),
    "gemm-calibration-no-clock-control": ("gemm-calibration-no-clock-control.ncu-rep", ()),
}


# Kineto traces of ../shared/fixtures/kineto (see its README for where each came from): run name -> file
KINETO_TRACES = {
    "alexnet": "kineto_a100_alexnet_cupti_flop_counters.json.gz",
    "ddp": "kineto_a100_ddp2_nccl_rank0.json.gz",
    "recsys": "kineto_a100_recsys_trace_diff_control_rank3.json.gz",
    "volta": "kineto_volta_resnet50_tbplugin_worker0.json.gz",
}
