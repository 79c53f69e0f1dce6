"""``hroofline import``: sources into a run, all or nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

from hroofline.cli.common import add_store_option, open_store, progress, say
from hroofline.importers import ImportedSource, ImportOptions, import_source, source_digest
from hroofline.metricset import load_metric_set, resolve_gpu
from hroofline.phases import parse_phase_option
from hroofline.store import check_run_name

HELP = """\
Import ncu output into a run. A SOURCE is a .ncu-rep report, an ncu CSV export (long --page details
or wide --page raw, any ncu version from 2020 on), an ncu console log, or a folder of
one-metric-per-run logs (Yang et al.'s method); each may be gzip-compressed.

Importing into an existing run appends to it: that is how a run gathers forward, backward and
optimizer data collected separately. A source already in the run is skipped. Either every source
is imported or, on any error, none is and the store is unchanged.
"""

EPILOG = """\
examples:
  hroofline import fw.ncu-rep --run deepcam-fp32 --gpu v100 --phase forward
  hroofline import pt-O0-Adam-bw/ --run deepcam-fp32 --gpu v100 --phase bw
  hroofline import logs/ --run r1 --merge name     # files disagree launch by launch
"""


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        help="import ncu reports, CSV exports, console logs or per-metric log folders into a run",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="file or folder to import")
    parser.add_argument("--run", required=True, help="run to create or append to")
    parser.add_argument(
        "--phase",
        help="phase of launches whose NVTX ranges name none: forward|fw|fwd, backward|bw|bwd, "
        "optimizer|opt|optimizer_step|step, other (default: from NVTX, else other)",
    )
    parser.add_argument(
        "--gpu",
        help="the GPU that was profiled, e.g. v100, a100, h100 (needed when the file does not say, "
        "e.g. for tensor FLOPs from old CSV exports)",
    )
    parser.add_argument(
        "--merge",
        choices=("launch", "name"),
        default="launch",
        help="for a folder of per-metric logs: join launch by launch (default), or join "
        "per-kernel-name sums when the files' launch sequences differ",
    )
    parser.add_argument("--precision", help="label for the run's precision, e.g. fp32, amp (metadata only)")
    add_store_option(parser)
    parser.set_defaults(run_command=run)


def run(args: argparse.Namespace) -> int:
    name = check_run_name(args.run)
    options = ImportOptions(
        phase=parse_phase_option(args.phase) if args.phase else None,
        gpu=resolve_gpu(args.gpu) if args.gpu else None,
        merge=args.merge,
    )
    store = open_store(args)
    already = {s.sha256 for s in store.load_meta(name).sources} if store.has_run(name) else set()
    metric_set = load_metric_set()
    imported: list[ImportedSource] = []
    for index, source in enumerate(args.sources, start=1):
        path = Path(source)
        prefix = f"[{index}/{len(args.sources)}] {source}"
        # Only an existing run can already hold the source; then its digest is needed up front.
        digest = source_digest(path) if already and path.exists() else None
        if digest in already:
            say(f"{prefix}: already in run {name!r}, nothing added")
            continue
        progress(f"{prefix}: reading")
        imported.append(import_source(path, options, metric_set, digest))
    if not imported:
        return 0
    result = store.add_sources(name, imported, gpu=options.gpu.name if options.gpu else None, precision=args.precision)
    for source in result.added:
        info = source.info
        phases = source.launches["phase"].value_counts()
        phase_text = ", ".join(f"{p} {n}" for p, n in phases.items())
        measured = ", ".join(info.formulas_used) or "time only"
        say(f"imported {info.path}: {info.launches} launches ({phase_text}); {measured}")
        for note in info.notes:
            say(f"  note: {note}")
    for source in result.already_present:
        say(f"{source.info.path}: already in run {name!r}, nothing added")
    total = int(result.run.launches["launches"].sum())
    say(f"run {name!r}: {total} launches from {len(result.run.meta.sources)} sources in {store.root}")
    return 0
