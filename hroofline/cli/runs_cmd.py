"""``hroofline runs``: the store's runs, from their metadata alone (no pandas: listing a store is instant)."""

from __future__ import annotations

import argparse

from hroofline.cli.common import add_store_option, open_reader, say, write_out
from hroofline.render.text import FORMATS, records_table, to_json
from hroofline.store.listing import RUN_LISTING_COLUMNS, run_listing

RUNS_TABLE_COLUMNS = ("run", "kind", "gpu", "precision", "compile", "phases", "sources", "launches", "ncu", "updated")


def register(commands: argparse._SubParsersAction) -> None:
    runs = commands.add_parser(
        "runs",
        description="List the runs in the store: how each was collected (kind), GPU, precision, phases, sources, "
        "launches, ncu versions and dates, and the torch.compile mode of a compiled step (column compile, shown "
        "where a run has one). JSON has every column, as the runs table of `hroofline query`.",
    )
    runs.add_argument(
        "--format", choices=FORMATS, default="table", help="table: for people; csv and json: every column"
    )
    add_store_option(runs)
    runs.set_defaults(run_command=list_runs)


def list_runs(args: argparse.Namespace) -> int:
    store = open_reader(args)
    listing, broken = run_listing(store)
    for run in broken:
        say(f"hroofline: warning: run {run.name!r} cannot be read: {run.reason} ({run.hint})")
    if args.format == "json":
        write_out(to_json(listing))
    elif args.format == "csv":
        import pandas as pd

        from hroofline.render.text import render_frame

        write_out(render_frame(pd.DataFrame(listing, columns=list(RUN_LISTING_COLUMNS)), "csv"))
    elif listing:
        compiled = any(row["compile"] for row in listing)  # the column where a run was compiled, not on every store
        write_out(records_table(listing, [c for c in RUNS_TABLE_COLUMNS if compiled or c != "compile"]))
    elif not broken:
        write_out(f"no runs in {store.root}\n")
    return 0
