"""What the profiling commands share: this CPU's ceilings, storing a finished run and its one-line account."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.analyze.kernels import phase_summary
from hroofline.cli.common import open_store, say, stage
from hroofline.model.numbers import si
from hroofline.model.run import Run
from hroofline.roofs.ceilings import CPU, Ceilings, load_ceilings_file
from hroofline.store.location import store_path

if TYPE_CHECKING:
    from hroofline.importers.source import ImportedSource
    from hroofline.store.runs import RunDefaults


def cpu_ceilings(args: argparse.Namespace) -> Ceilings:
    """The run's CPU ceilings: the file --ceilings names, else this CPU's (measured once per machine and cached;
    --measure-ceilings measures them anew)."""
    if args.ceilings:
        return load_ceilings_file(Path(args.ceilings))
    return this_cpu_ceilings(bool(getattr(args, "measure_ceilings", False)))


def this_cpu_ceilings(measure_again: bool = False) -> Ceilings:
    """The ceilings of this machine's CPU, for a run made on it (profile --gpu cpu, an imported CPU trace recorded
    here): measured once per machine and cached, or measured now with ``measure_again``."""
    from hroofline.collect.ceilings_cache import cpu_ceilings_cached

    start = time.perf_counter()
    found = cpu_ceilings_cached(say, measure_again)
    kept = f"cached in {found.path}" if found.path is not None else "not cached"
    again = "--measure-ceilings measures them again"
    if found.busy:
        again = "the first profile on a quiet machine measures them again, as --measure-ceilings does"
    busy = f"; {found.busy} ({again})" if found.busy else ""
    if found.measured_now:
        say(f"measured this CPU's ceilings: {si(time.perf_counter() - start, 's')} ({kept}){busy}")
    else:
        say(f"roofs: this CPU's, measured {found.measured_on}, {kept}{busy or f' ({again})'}")
    return found.ceilings


def store_profiled(args: argparse.Namespace, run: str, source: ImportedSource, defaults: RunDefaults) -> None:
    """A profile's run, replacing any of that name, and its one-line account; the source records the profiled code's
    commit and the versions it ran with (:mod:`hroofline.collect.environment`)."""
    from hroofline.collect.environment import profile_environment

    code, why_none = profiled_code(args)
    settings = source.info.settings
    settings.update(profile_environment(code, why_none, defaults.gpu != CPU, settings))
    store = open_store(args, writing=True)
    with stage("stored the run"):
        result = store.replace_run(run, [source], defaults)
    report_phases(result.run, store.root)


def profiled_code(args: argparse.Namespace) -> tuple[Path | None, str]:
    """The file whose repository versions the profiled code (``--script FILE``, ``--model FILE.py:F``), else None
    and why there is none."""
    if getattr(args, "script", None):
        return Path(args.script[0]), ""
    model = getattr(args, "model", None)
    if model and model.rpartition(":")[0].endswith(".py"):
        return Path(model.rpartition(":")[0]), ""
    if model:
        return None, f"--model {model}: a package or a built-in config, not a file of a repository"
    return None, f"--arch {args.arch}: torchvision's code, versioned by torchvision's version"


def report_phases(run: Run, root: Path) -> None:
    phases = {p: v for p, v in phase_summary(run).items() if p != "total"}
    parts = [f"{phase} {values['kernels']} ({si(values['time_s'], 's')})" for phase, values in phases.items()]
    say(f"run {run.name!r} in {root}: " + ", ".join(parts))
    empty = [phase for phase in ("forward", "backward", "optimizer") if phase not in phases]
    if empty:
        say(f"hroofline: warning: no kernels in phase(s) {', '.join(empty)}: the NVTX phases did not reach them")
    name = run.name
    store = "" if root == store_path(None) else f" --store {shlex.quote(str(root))}"  # the next commands find it
    say(
        f"next: hroofline summary {name}{store}; hroofline top {name}{store}; "
        f"hroofline chart {name} --out {name}.html{store}"
    )
