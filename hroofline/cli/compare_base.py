"""Where ``hroofline compare`` takes its base from: BASE, or ``--baseline NAME``; from --store, or from another store
(``--base-store DIR``: the last good store a CI job downloaded). And what it warns of: a base and candidate measured
on another GPU, driver, clock control or PyTorch version (:func:`hroofline.model.environment.environment_differences`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hroofline.cli.common import open_store, say
from hroofline.errors import UsageError
from hroofline.model.environment import environment_differences

if TYPE_CHECKING:
    from hroofline.model.run import Run
    from hroofline.store.runs import RunStore

BASE_FORMS = "give BASE and CAND, or --baseline NAME and CAND"


def add_base_arguments(parser: argparse.ArgumentParser) -> None:
    """BASE (left out with --baseline) and CAND, --baseline and --base-store."""
    parser.add_argument("base", metavar="BASE", nargs="?", help="the base run (not with --baseline)")
    parser.add_argument("candidate", metavar="CAND", nargs="?", help="the candidate run")
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help="compare CAND with the run baseline NAME names (`hroofline baseline set NAME RUN`), BASE left out",
    )
    parser.add_argument(
        "--base-store",
        metavar="DIR",
        help="read BASE or --baseline from this store (the last good one a CI job kept as an artifact); CAND from "
        "--store",
    )


def resolve_base(args: argparse.Namespace) -> None:
    """Sets ``args.base`` and ``args.candidate`` from either form: ``BASE CAND``, or ``--baseline NAME CAND``
    (whose one positional argument argparse gave to ``base``). Both forms, or neither, is a usage error."""
    given = [name for name in (args.base, args.candidate) if name is not None]
    if args.baseline is not None:
        if len(given) != 1:
            what = "BASE and --baseline: give one" if given else "--baseline NAME needs CAND"
            raise UsageError(what, BASE_FORMS)
        from hroofline.store.baselines import baseline_run

        args.candidate = given[0]
        args.base = baseline_run(base_store(args), args.baseline)
    elif len(given) != 2:
        raise UsageError("CAND missing" if given else "BASE and CAND missing", BASE_FORMS)


def base_store(args: argparse.Namespace) -> RunStore:
    """The store the base is read from: --base-store, else --store."""
    return open_store(argparse.Namespace(store=args.base_store)) if args.base_store else open_store(args)


def load_pair(args: argparse.Namespace) -> tuple[Run, Run]:
    """The base and candidate runs, from either form (:func:`resolve_base`), and a warning line for each way they
    were measured differently."""
    resolve_base(args)
    base, candidate = base_store(args).load(args.base), open_store(args).load(args.candidate)
    for difference in environment_differences(base.meta, candidate.meta):
        say(f"hroofline: warning: {difference.warning(base.name, candidate.name)}")
    return base, candidate
