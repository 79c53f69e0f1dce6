"""``hroofline kernels``, ``summary``, ``steps`` and ``query``, ``rm`` and ``rename``: a run's tables, SQL over the
store, and the store's upkeep."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import pandas as pd

from hroofline.analyze.communication import collective_kinds, communication_rows, link_roofs
from hroofline.analyze.kernels import (
    KERNEL_COLUMNS,
    RANKING_READS,
    SUMMARY_COLUMNS,
    SUMMARY_READS,
    empty_detail_columns,
    phase_summary,
    shown_columns,
)
from hroofline.analyze.overlap import run_overlap
from hroofline.analyze.provenance import counter_provenance
from hroofline.analyze.ranks import grouped_summary, rank_spread, work_source_shares
from hroofline.analyze.utilization import run_utilization, summary_with_utilization, utilization_table
from hroofline.api.options import (
    DEFAULT_KERNELS_GROUPING,
    FORMATS,
    KERNEL_GROUPINGS,
    SUMMARY_GROUPINGS,
    kernel_query,
)
from hroofline.api.outputs import summary_frame
from hroofline.cli.common import add_selection_options, add_store_option, open_store, positive_int, say, write_out
from hroofline.errors import InputError
from hroofline.model.names import with_table_names
from hroofline.model.quantities import UTILIZATION_COLUMNS
from hroofline.model.run import Run
from hroofline.render.communication import link_roofs_line
from hroofline.render.overlap import SPREAD_HEADING, overlap_text, wall_records
from hroofline.render.roof_notes import compiled_line, provenance_line, work_sources_line
from hroofline.render.text import render_frame, summary_table, to_json
from hroofline.render.utilization import utilization_lines
from hroofline.store.reading import BrokenRun


def register(commands: argparse._SubParsersAction) -> None:
    query = commands.add_parser(
        "query",
        description="Run SQL over the store with DuckDB (embedded: no server, nothing to set up). Two tables: "
        "launches (one row per launch of every run: run, phase, kernel, time_s, FLOPs per precision, bytes per "
        "level, ...; the columns are in docs/guides/store.md) and runs (one row per run: kind, gpu, precision, phases, "
        "launches, dates). The same Parquet files read as one table in DuckDB, Polars or Spark: "
        "read_parquet('STORE/runs/run=*/launches-*.parquet', hive_partitioning=true).",
        epilog="examples:\n"
        '  hroofline query "SELECT run, phase, sum(time_s) AS time_s FROM launches GROUP BY ALL ORDER BY ALL"\n'
        "  hroofline query \"SELECT kernel, sum(time_s) AS time_s FROM launches WHERE run = 'deepcam-fp32'\n"
        '                   GROUP BY kernel ORDER BY time_s DESC LIMIT 5"\n'
        '  hroofline query "SELECT r.gpu, r.precision, sum(l.flops_tensor) / sum(l.time_s) AS tensor_flop_per_s\n'
        '                   FROM launches l JOIN runs r USING (run) GROUP BY ALL" --format csv',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("sql", metavar="SQL", help="one SQL statement over the tables launches and runs")
    query.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table: for people, numbers in SI units by column name (time_s, flops..., bytes...); csv and "
        "json: full precision",
    )
    add_store_option(query)
    query.set_defaults(run_command=run_query)

    kernels = commands.add_parser(
        "kernels",
        description="Kernel table of a run: time (s), FLOPs per precision, bytes at L1/L2/HBM, "
        "arithmetic intensity per level (FLOP/byte) and achieved FLOP/s; for collectives with recorded sizes, "
        "algbw_byte_per_s, busbw_byte_per_s and link_pct (% of their link roof, docs/guides/traces.md). Empty cells "
        "were not measured.",
        epilog="columns: " + ", ".join(KERNEL_COLUMNS) + "\n\nexample:\n"
        "  hroofline kernels deepcam-fp32 --group-by name --phase forward --top 10\n"
        "  hroofline kernels r50-amp-a100 --group-by layer --phase backward --layer 'layer4*'\n"
        "  hroofline kernels r50-amp-a100 --layer layer4.1.conv2          every launch of one layer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kernels.add_argument("run", metavar="RUN")
    kernels.add_argument(
        "--group-by",
        choices=KERNEL_GROUPINGS,
        default=DEFAULT_KERNELS_GROUPING,
        help="one row per launch (default, with its layer, NVTX stack, grid, block and input shapes), per kernel "
        "name within a phase, or per layer (module path) within a phase",
    )
    add_selection_options(kernels)
    kernels.add_argument(
        "--phase", help="only this phase (forward, backward, optimizer, prefill, decode, mixed, other or an alias)"
    )
    kernels.add_argument("-n", "--top", type=positive_int, metavar="N", help="only the first N rows after sorting")
    kernels.add_argument(
        "--sort", default="time_s", metavar="COLUMN", help="column to sort by, largest first (default: time_s)"
    )
    kernels.add_argument("--format", choices=FORMATS, default="table")
    add_store_option(kernels)
    kernels.set_defaults(run_command=show_kernels)

    remove = commands.add_parser("rm", description="Remove runs from the store.")
    remove.add_argument("names", metavar="RUN", nargs="+")
    add_store_option(remove)
    remove.set_defaults(run_command=remove_runs)

    rename = commands.add_parser("rename", description="Rename a run in the store.")
    rename.add_argument("name", metavar="RUN")
    rename.add_argument("new_name", metavar="NEW")
    add_store_option(rename)
    rename.set_defaults(run_command=rename_run)

    summary = commands.add_parser(
        "summary",
        description="Per phase and in total: time (s), FLOPs, tensor FLOPs (all, and per input precision), "
        "integer tensor operations, bytes at L1/L2/HBM and the number of kernel launches; for a PyTorch "
        "profiler trace also work_known (the share of compute-kernel time whose work is known) and, where it has "
        "communication kernels, communication_s and bytes_link (their time and bus bytes); mfu_pct, hfu_pct "
        "and mbu_pct: model FLOPs (a trace's, from the ops' shapes), hardware FLOPs (ncu's counters) and HBM "
        "bytes at their dense "
        "peaks over the time, the peaks printed first (docs/numbers.md#mfu-and-mbu). The table leaves "
        "out per-precision columns that are zero or not measured everywhere; JSON has them all (null: not "
        "measured).",
    )
    summary.add_argument("run", metavar="RUN")
    summary.add_argument(
        "--by",
        choices=SUMMARY_GROUPINGS,
        default="phase",
        help="phase (default); rank: per rank and phase, with the slowest rank's extra time per phase over the "
        "median rank, and each rank's wall time split into compute, communication hidden and exposed, and idle, "
        "with the critical rank of each step and phase (traces of several ranks); step: per profiler step and "
        "phase (traces)",
    )
    summary.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table: for people (SI units); csv: the table in full precision, every column; json: also the counters' "
        "provenance, each collective kind's algbw, busbw and %% of its link roof (traces with NCCL's recorded sizes) "
        "and, --by rank, the slowest rank, the communication kernels and each rank's wall time (ranks: "
        "wall_s, compute_s, communication_hidden_s, communication_exposed_s, idle_s)",
    )
    add_store_option(summary)
    summary.set_defaults(run_command=show_summary)
    register_steps(commands)


def register_steps(commands: argparse._SubParsersAction) -> None:
    steps = commands.add_parser(
        "steps",
        description="A serving trace's steps (vLLM's execute_context_..._generation_... ranges), one row each:\n"
        "its phase (prefill, decode, or mixed: both kinds of request in one batch), batch (requests), query\n"
        "tokens and context (the tokens the requests attend to), time, FLOPs, HBM bytes, work_known, and the\n"
        "decode requests' attention bytes beside the KV cache they read. Context lengths need TraceLens'\n"
        "detailed range (vLLM's own gives requests and query tokens only).",
        epilog="examples:\n"
        "  hroofline import replay.json.gz --capture capture.pt.trace.json.gz --run vllm   # a trace and its capture\n"
        "  hroofline steps vllm\n"
        "  hroofline steps vllm --format csv   # with each kind of request's tokens and context",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps.add_argument("run", metavar="RUN")
    steps.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table: for people (SI units; the step numbered, its range name in csv and json); csv, json: every column",
    )
    add_store_option(steps)
    steps.set_defaults(run_command=show_steps)


def show_steps(args: argparse.Namespace) -> int:
    from hroofline.analyze.serving import serving_steps

    run = open_store(args).load(args.run)
    table = serving_steps(run)
    if table.empty:
        raise InputError(
            f"run {args.run!r} has no serving steps: no launch inside a vLLM execute_context_..._generation_... range",
            "import a vLLM trace profiled with its worker's ranges (vLLM 0.12 or later); `hroofline summary` shows "
            "any run's phases",
        )
    if args.format == "table":  # the step numbered: its range name is long
        table = table.assign(step=range(1, len(table) + 1))
        table = table[[c for c in table.columns if c not in STEP_DETAIL_COLUMNS]]
    write_out(render_frame(table, args.format))
    return 0


# What a terminal leaves out (csv and json have it): each kind of request's tokens, the attention's layers and bytes.
STEP_DETAIL_COLUMNS = frozenset(
    {
        "prefill_query_tokens",
        "decode_query_tokens",
        "prefill_context_tokens",
        "decode_context_tokens",
        "kernels",
        "attention_layers",
        "attention_bytes",
    }
)


def run_query(args: argparse.Namespace) -> int:
    from hroofline.store.query import query_store

    store = open_store(args)
    unreadable: list[BrokenRun] = []
    result = query_store(store, args.sql, unreadable)
    broken = store.readable_metas()[1]
    named = {run.name for run in broken}  # a cut-short file is found by both; one line per run
    for run in [*broken, *[run for run in unreadable if run.name not in named]]:
        say(f"hroofline: warning: run {run.name!r} left out: {run.reason} ({run.hint})")
    write_out(render_frame(result, args.format))
    return 0


def remove_runs(args: argparse.Namespace) -> int:
    store = open_store(args)
    names = list(dict.fromkeys(args.names))
    for name in names:  # every name checked before any run is removed; a broken run can be removed too
        store.check_removable(name)
    for name in names:
        store.remove_run(name)
        say(f"removed run {name!r} from {store.root}")
    return 0


def rename_run(args: argparse.Namespace) -> int:
    store = open_store(args)
    store.rename_run(args.name, args.new_name)
    say(f"renamed run {args.name!r} to {args.new_name!r} in {store.root}")
    return 0


def show_kernels(args: argparse.Namespace) -> int:
    run = open_store(args).load(args.run, RANKING_READS)
    table = utilization_table(run, kernel_query(args.group_by, args.phase, args.layer, args.nvtx, args.top, args.sort))
    if args.format == "table":  # a terminal gets readable names and no empty detail columns; csv and json keep all
        with_table_names(table)
        table = shown_columns(table)
    write_out(render_frame(table, args.format))
    return 0


def show_summary(args: argparse.Namespace) -> int:
    if args.by != "phase":
        return _show_grouped_summary(open_store(args).load(args.run, RANKING_READS), args.by, args.format)
    run = open_store(args).load(args.run, SUMMARY_READS)
    if args.format == "csv":
        write_out(render_frame(summary_frame(run).reset_index(), "csv"))
        return 0
    utilization = run_utilization(run)
    phases = summary_with_utilization(phase_summary(run), utilization)
    provenance = counter_provenance(run.launches)
    sources = work_source_shares(run.launches)
    if args.format == "json":
        total = phases.pop("total")
        counters = {"counters": asdict(provenance)} if provenance else {}
        work = {"work_sources": sources} if sources else {}
        compiled = {"compile": run.meta.compile_mode} if run.meta.compile_mode else {}
        kinds = collective_kinds(run, link_roofs(run))  # per collective: algbw, busbw and % of its link roof
        collectives = {"collectives": [asdict(k) for k in kinds]} if kinds else {}
        used = {
            "utilization": {
                "peaks": [asdict(p) for p in utilization.peaks],
                "hbm_byte_per_s": utilization.hbm_byte_per_s,
                "reasons": utilization.reasons,
            }
        }
        body = {"run": run.name, "phases": phases, "total": total, **counters, **work, **compiled, **collectives}
        write_out(to_json({**body, **used}))
    else:
        compiled_note = compiled_line(run.meta.compile_mode)
        if compiled_note:
            say(f"note: {compiled_note}")
        for line in utilization_lines(utilization):
            write_out(f"{line}\n")
        line = provenance_line(provenance)
        if line:
            write_out(f"note: {line}\n")
        sources_line = work_sources_line(sources)
        if sources_line:
            say(f"note: {sources_line}")  # a note on stderr: the table on stdout stays as it was
        empty = empty_detail_columns(phases)
        present = {
            c
            for values in phases.values()
            for c, value in values.items()
            if value is not None or c not in UTILIZATION_COLUMNS
        }
        write_out(summary_table(phases, [c for c in SUMMARY_COLUMNS if c not in empty and c in present]))
    return 0


def _show_grouped_summary(run: Run, by: str, output: str) -> int:
    table = summary_frame(run, by)
    if output == "csv":
        write_out(render_frame(table, "csv"))
        return 0
    spread = rank_spread(run) if by == "rank" else []
    roofs = link_roofs(run) if by == "rank" else None
    communication = communication_rows(run, roofs) if roofs is not None else []
    overlap = run_overlap(run) if by == "rank" else None
    if output == "json":
        data = {
            "run": run.name,
            "by": by,
            "rows": [asdict(r) for r in grouped_summary(run, by)],
            "spread": [asdict(s) for s in spread],
            "communication": [asdict(c) for c in communication],
        }
        if overlap is not None:
            data |= {
                "ranks": wall_records(overlap.ranks),
                "rank_phases": [asdict(r) for r in overlap.rank_phases],
                "critical": [asdict(c) for c in overlap.critical],
                "wall_unknown": overlap.unknown,
            }
        write_out(to_json(data))
        return 0
    write_out(render_frame(table, "table"))
    if overlap is not None:
        write_out(overlap_text(overlap))
    if spread:
        write_out(f"\n{SPREAD_HEADING}\n")
        write_out(render_frame(pd.DataFrame([asdict(s) for s in spread]), "table"))
    if communication and roofs is not None:
        write_out(f"\ncommunication kernels, each against its roof (node or network); {link_roofs_line(roofs)}:\n")
        # the roofs' bandwidths are the heading's: not a column of raw byte/s
        table = pd.DataFrame([asdict(c) for c in communication]).drop(columns=["roof_byte_per_s"])
        with_table_names(table)
        write_out(render_frame(table, "table"))
    return 0
