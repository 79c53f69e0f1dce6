"""``hroofline baseline set|list|rm``: names for the runs a CI job compares with (store/baselines.py)."""

from __future__ import annotations

import argparse

from hroofline.cli.common import add_store_option, open_reader, say, write_out
from hroofline.render.text import FORMATS, records_table, to_json

EPILOG = """\
examples:
  hroofline baseline set last-good deepcam-fp32        name the run a CI job compares against
  hroofline baseline set nightly deepcam-amp-o1
  hroofline baseline list
  hroofline baseline rm nightly                        the run deepcam-amp-o1 stays
  hroofline compare --baseline last-good deepcam-amp-o1

A baseline is kept in the store (baselines.json) and names a run of that store. Setting a name again moves it
to the new run. `hroofline rm` refuses a run that a baseline names (remove or move the baseline first);
`hroofline rename` carries its baselines to the new name. In CI, keep the store that holds the baseline as a
job artifact and read it with `compare --base-store DIR`.
"""


def register(commands: argparse._SubParsersAction) -> None:
    baseline = commands.add_parser(
        "baseline",
        description="Name a run of the store as a baseline (set), list the baselines (list) or remove one (rm); "
        "`hroofline compare --baseline NAME CAND` compares a candidate with it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = baseline.add_subparsers(dest="baseline_action", metavar="ACTION", required=True)
    chosen = _action(actions, "set", "make NAME the baseline of RUN (a run of the store)")
    chosen.add_argument("name", metavar="NAME", help="the baseline's name (main, last-good): letters, digits, . _ + -")
    chosen.add_argument("run", metavar="RUN", help="a run of the store (`hroofline runs` lists them)")
    add_store_option(chosen)
    chosen.set_defaults(run_command=set_baseline)
    listed = _action(actions, "list", "the baselines: name, run, when set, whether the run is there")
    listed.add_argument(
        "--format", choices=FORMATS, default="table", help="table: for people; csv and json: for a CI job's scripts"
    )
    add_store_option(listed)
    listed.set_defaults(run_command=list_baselines)
    removed = _action(actions, "rm", "remove baseline NAME (its run stays)")
    removed.add_argument("name", metavar="NAME", help="a baseline (`hroofline baseline list` lists them)")
    add_store_option(removed)
    removed.set_defaults(run_command=remove_baseline)


def _action(actions: argparse._SubParsersAction, name: str, line: str) -> argparse.ArgumentParser:
    """One action of ``hroofline baseline``: its line in the command's help is its description too."""
    return actions.add_parser(name, help=line, description=line[0].upper() + line[1:] + ".")


def set_baseline(args: argparse.Namespace) -> int:
    from hroofline.store.baselines import set_baseline as set_in_store

    store = open_reader(args)
    baseline = set_in_store(store, args.name, args.run)
    say(f"baseline {baseline.name!r} is run {baseline.run!r} in {store.root}")
    return 0


def list_baselines(args: argparse.Namespace) -> int:
    from hroofline.store.baselines import BASELINE_COLUMNS, baseline_rows

    store = open_reader(args)
    rows = baseline_rows(store)
    if args.format == "json":
        write_out(to_json(rows))
    elif args.format == "csv":
        import pandas as pd

        from hroofline.render.text import render_frame

        write_out(render_frame(pd.DataFrame(rows, columns=list(BASELINE_COLUMNS)), "csv"))
    elif rows:
        write_out(records_table(rows, BASELINE_COLUMNS))
    else:
        write_out(f"no baselines in {store.root}\n")
    return 0


def remove_baseline(args: argparse.Namespace) -> int:
    from hroofline.store.baselines import remove_baseline as remove_from_store

    store = open_reader(args)
    removed = remove_from_store(store, args.name)
    say(f"removed baseline {removed.name!r} from {store.root} (run {removed.run!r} stays)")
    return 0
