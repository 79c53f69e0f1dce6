"""``hroofline doctor``: does hroofline put known work where it must be, on this GPU or in a calibration report?"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.cli.common import say, write_out
from hroofline.errors import InputError, MergeError, ProfilingError, UsageError
from hroofline.roofs.catalog import GpuName, gpu_from_display_name, refuse_for_ncu, resolve_gpu
from hroofline.roofs.metricset import load_metric_set

if TYPE_CHECKING:
    from hroofline.analyze.doctor import Check, Diagnosis
    from hroofline.importers.source import ImportedSource
    from hroofline.model.run import Run

HELP = """\
Check hroofline's counters and roofs on work whose answer is known: large cuBLAS GEMMs per precision (BF16,
FP16 and TF32 on the tensor cores, FP32 on the CUDA cores, FP64) and a 1 GiB device copy, one profiled step
under ncu. Each GEMM must reach 80-100% of its dense roof (65-100% for FP32 on the CUDA cores) and be bound by
it, with FLOPs within 2% of 2 x M x N x K (up to 5% above: tile padding); the copy's main-memory bytes within
5% of what it reads and writes. A GEMM near 47% of its tensor roof has a roof twice too high: the 2:4-sparse
rate taken as dense, what ncu's .peak_sustained gives on Hopper.

On a machine with an NVIDIA GPU and ncu, `hroofline doctor` profiles the calibration there and keeps its
report (--keep DIR). Without one, `hroofline doctor --report FILE` checks a calibration report made on a GPU
(by `hroofline doctor --keep DIR`, or ../shared/fixtures/h100/gemm-calibration-*.ncu-rep); any other report
(the calibration's NVTX ranges and GEMM shapes tell it) is refused. Exit 0 when every check passes, 1 when one
fails (each failure says what to look at).
"""

EPILOG = """\
examples:
  hroofline doctor                                         profile the calibration on this machine's GPU
  hroofline doctor --keep doctor-h100/                     ... and keep its report to share
  hroofline doctor --report gemm-calibration.ncu-rep       check a report made elsewhere
"""

WHAT = {
    "roof": "% of its roof",
    "l1": "L1 bytes vs L2",
    "bound": "bound by",
    "flops": "FLOPs vs 2·M·N·K",
    "bytes": "bytes vs the copy's",
    "present": "launches",
}


# doctor's options: a note or error of the import it reuses that names another command's option (import's
# --rank, top's --ceilings) says what doctor cannot do (tests/test_hints.py checks this against the parser).
OPTIONS = frozenset({"--report", "--gpu", "--ncu", "--keep", "--force-gpu"})
_ASIDE = re.compile(r"\s*\(([^()]*)\)")  # a parenthetical aside of a note


def register(commands: argparse._SubParsersAction) -> None:
    doctor = commands.add_parser(
        "doctor",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.add_argument("--report", metavar="FILE", help="check this calibration report instead of profiling")
    doctor.add_argument("--gpu", help="the GPU (default: the one the report states, or this machine's)")
    doctor.add_argument("--ncu", metavar="PATH", help="the ncu to profile with (default: ncu on PATH)")
    doctor.add_argument("--keep", metavar="DIR", help="keep the calibration's ncu report and logs in DIR")
    doctor.add_argument(
        "--force-gpu",
        action="store_true",
        help="judge it as --gpu even where its device name or SM count differs (a MIG slice)",
    )
    doctor.set_defaults(run_command=run)


def run(args: argparse.Namespace) -> int:
    if args.gpu and args.gpu.lower() == "cpu":
        raise UsageError("--gpu cpu: doctor checks a GPU's counters and roofs", "give the GPU, or leave --gpu out")
    gpu = resolve_gpu(args.gpu) if args.gpu else None
    if gpu is not None:
        refuse_for_ncu(gpu, "doctor")
    if args.report and args.keep:
        raise UsageError("--keep: only when doctor profiles (without --report)")
    profiled: tuple[str, ...] = ()
    if args.report:
        source = _read_report(Path(args.report), gpu, args.force_gpu)
        where = args.report
    elif args.keep:
        source, profiled = _profile_calibration(args, gpu, Path(args.keep))
        where = f"the calibration profiled here, kept in {args.keep}"
    else:
        with tempfile.TemporaryDirectory(prefix="hroofline-doctor-") as folder:
            source, profiled = _profile_calibration(args, gpu, Path(folder))
        where = "the calibration profiled here (--keep DIR keeps its report)"
    calibration = _run_of(source, gpu)
    from hroofline.analyze.doctor import diagnose, not_calibration

    if args.report:
        why = not_calibration(calibration)
        if why is not None:
            raise InputError(
                f"{where} is not hroofline's calibration run: {why} (how it knows: the calibration script's NVTX "
                "ranges and GEMM shapes)",
                "doctor judges only its calibration: run `hroofline doctor` on the GPU, or `hroofline doctor "
                "--report FILE` on the report `hroofline doctor --keep DIR` wrote",
            )
    from hroofline.roofs.ceilings import roofs_unknown, run_roofs

    unknown = roofs_unknown(calibration)
    if unknown:  # the report's fault, not the command line's: exit 1, and an option doctor has
        raise InputError(f"{where} has no roofs: {unknown}", "pass --gpu with the GPU it ran on (`hroofline gpus`)")
    roofs = run_roofs(calibration)
    diagnosis = diagnose(calibration, roofs, profiled)
    device = calibration.meta.device_name or (gpu.name if gpu else "an unknown GPU")
    versions = ", ".join(f"ncu {v}" for v in calibration.meta.ncu_versions)
    write_out(f"hroofline doctor: {where} ({device}{', ' + versions if versions else ''})\n")
    write_out(f"roofs: {roofs.label}\n")
    for note in source.info.notes:
        say(f"  note: {doctor_note(note)}")
    write_out(_table(diagnosis))
    if not diagnosis.passed:
        failed = diagnosis.failed
        if not failed:
            raise InputError(f"{where} holds no calibration GEMM", "make one on a GPU: hroofline doctor --keep DIR")
        for check in failed:
            say(f"hroofline: doctor: {check.case} {WHAT.get(check.what, check.what)} failed: {check.hint}")
        return 1
    write_out(f"all {sum(1 for c in diagnosis.checks if c.passed)} checks passed\n")
    return 0


def _read_report(path: Path, gpu: GpuName | None, force_gpu: bool) -> ImportedSource:
    from hroofline.importers.build import ImportOptions, import_source

    if not path.exists():
        raise InputError(f"--report {path}: no such file")
    try:
        return import_source(path, ImportOptions(gpu=gpu, force_gpu=force_gpu), load_metric_set())
    except MergeError as error:  # its hint names import's --merge, which a calibration cannot use
        raise InputError(error.message, "give the calibration's one ncu report (hroofline doctor --keep DIR)") from None


def doctor_note(note: str) -> str:
    """An import note without the asides that name options doctor does not take."""

    def kept(aside: re.Match[str]) -> str:
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", aside.group(1)))
        return aside.group(0) if named <= OPTIONS else ""

    return _ASIDE.sub(kept, note)


def _profile_calibration(
    args: argparse.Namespace, named: GpuName | None, out: Path
) -> tuple[ImportedSource, tuple[str, ...]]:
    """ncu on the calibration on this machine's GPU, its report and logs written to ``out``; the cases it ran."""
    from hroofline.collect.ncu_backend import profile_with_ncu
    from hroofline.collect.ncu_command import NcuSettings, ncu_passes, script_command
    from hroofline.collect.preflight import gpu_visible, preflight, visible_device

    if not gpu_visible():
        raise ProfilingError(
            "no NVIDIA GPU here: doctor profiles its calibration on one",
            "check a calibration report made on a GPU instead: hroofline doctor --report FILE",
        )
    name, _ = visible_device()
    gpu = named or gpu_from_display_name(name)
    if gpu is None:
        raise UsageError(f"the catalog does not know {name}", "pass --gpu with the catalog GPU it is (hroofline gpus)")
    metric_set = load_metric_set()
    arch = metric_set.arch_of(gpu.cc)
    if arch is None or arch not in metric_set.collect:
        raise UsageError(f"no ncu metric list for {gpu.name} (compute capability {gpu.cc})")
    tool = preflight(args.ncu, arch, gpu, args.force_gpu)
    settings = NcuSettings(warmup=1, steps=1)
    from hroofline.collect import calibration

    cases = [case.name for case in calibration.CASES if _runs_here(case.name, gpu)]
    workload = script_command(Path(calibration.__file__), cases, settings, layers=False)
    say(f"doctor: profiling the calibration ({', '.join(cases)}) on {gpu.name} with {tool.path}")
    passes = ncu_passes(tool.path, metric_set, arch, workload, settings, out)
    return profile_with_ncu(passes, settings, metric_set, gpu, say, force_gpu=args.force_gpu), tuple(cases)


def _runs_here(case: str, gpu: GpuName) -> bool:
    """The tensor precisions this GPU has (a V100 has no BF16 or TF32 tensor cores); the others always run."""
    from hroofline.roofs.rates import rates_for

    tensor = {"bf16": "tensor_bf16", "tf32": "tensor_tf32", "fp16": "tensor_fp16"}.get(case)
    return tensor is None or rates_for(gpu.cc, gpu).get(tensor) is not None


def _run_of(source: ImportedSource, gpu: GpuName | None) -> Run:
    """The calibration as a run in no store."""
    from hroofline.model.run import Run, RunMeta

    meta = RunMeta(name="doctor", gpu=gpu.name if gpu else None, device_name=source.device_name, cc=source.cc)
    meta.arch = load_metric_set().arch_of(meta.cc)
    meta.sources.append(source.info)
    return Run(meta, source.launches.assign(source=0))


def _table(diagnosis: Diagnosis) -> str:
    from hroofline.render.text import text_table

    rows = [["case", "launches", "check", "measured", "must be", "result"]]
    for check in diagnosis.checks:
        launches = str(diagnosis.launches.get(check.case, 0))
        if check.what == "present":
            result = "not in this run" if check.passed is None else "FAILED: none recorded"
            rows.append([check.case, launches, "-", "-", "-", result])
            continue
        if check.passed is None:
            rows.append([check.case, launches, WHAT[check.what], str(check.measured), _band(check), "not measured"])
            continue
        rows.append([check.case, launches, WHAT[check.what], _value(check), _band(check), _result(check)])
    return text_table(rows)


def _value(check: Check) -> str:
    if isinstance(check.measured, str) or check.measured is None:
        return str(check.measured or "-")
    return f"{check.measured:+.1f}%" if check.what in ("flops", "bytes") else f"{check.measured:.1f}%"


def _band(check: Check) -> str:
    if check.what == "bound":
        return str(check.low)
    if check.what == "l1":
        return f"at least {check.low:g}%"
    if check.what == "bytes":
        return f"within {check.high:g}%"
    return f"{check.low:+g}% to {check.high:+g}%" if check.what == "flops" else f"{check.low:g}% to {check.high:g}%"


def _result(check: Check) -> str:
    return "ok" if check.passed else "FAILED"
