"""A run imported rank by rank: each rank's launches written on its own as a part, then all of them committed as
the run's one launches file, streamed part by part.

Layout, inside the run's folder while an import of many ranks is under way (or was killed)::

    runs/run=<run>/.ranks/<digest>.json       the rank's source metadata (a one-source run's meta.json)
    runs/run=<run>/.ranks/<digest>.parquet    its launches, in the store's schema (written last)

A part is written as ``.<digest>.*.tmp`` files, synced, the JSON renamed into place and then the Parquet file:
a part is complete exactly when its ``.parquet`` is there, and a half-written one is only ever a ``.tmp`` file,
removed by the next import (:func:`sweep_half_written`). An import that is killed keeps its complete parts; run
again, it skips them. The commit streams the parts, in rank order, into a new launches file (row groups of
50,000 launches) and replaces ``meta.json`` (the store's one commit point,
:func:`hroofline.store.files.commit_run`), so readers see the run as any other; then the parts go. The folder
starts with a dot, so Spark, DuckDB and pyarrow leave it out of ``runs/**`` (the ``launches-*.parquet`` files are
the run's data).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hroofline.errors import StoreError
from hroofline.model.run import RunMeta, ordered_phases
from hroofline.store.files import WRITE_ROWS, commit_run, fsync_file

if TYPE_CHECKING:
    import pyarrow as pa

    from hroofline.importers.source import ImportedSource

PARTS_FOLDER = ".ranks"


@dataclass(frozen=True)
class RankPart:
    """One rank's stored part: its source metadata and the Parquet file of its launches."""

    digest: str
    meta: RunMeta  # one source; the part's device as the source gave it
    parquet: Path
    rank: int | None  # the rank its launches are of (None: the trace does not say)


def parts_dir(run_dir: Path) -> Path:
    return run_dir / PARTS_FOLDER


def write_part(run_dir: Path, run: str, source: ImportedSource) -> None:
    """Writes one rank's source as a part (atomically: complete, or a ``.tmp`` file :func:`sweep_half_written`
    removes)."""
    from hroofline.store.files import write_launches

    folder = parts_dir(run_dir)
    folder.mkdir(exist_ok=True)
    digest = source.info.source_hash
    meta = RunMeta(name=run, gpu=source.gpu, device_name=source.device_name, cc=source.cc, sources=[source.info])
    working = f".{digest}.{uuid.uuid4().hex[:8]}"
    text, table = folder / f"{working}.json.tmp", folder / f"{working}.parquet.tmp"
    try:
        ranks = source.launches["rank"].dropna()
        rank = int(ranks.iloc[0]) if len(ranks) else None
        text.write_text(json.dumps({**meta.to_json(), "rank": rank}, sort_keys=True))
        fsync_file(text)
        write_launches(source.launches.assign(source=0), run, table)
        fsync_file(table)
        os.replace(text, folder / f"{digest}.json")
        os.replace(table, folder / f"{digest}.parquet")  # the part's commit point
    finally:
        text.unlink(missing_ok=True)
        table.unlink(missing_ok=True)


def sweep_half_written(run_dir: Path) -> int:
    """Removes what a killed part write left (its ``.tmp`` files, a JSON without its Parquet); returns how many
    parts were half-written. Called under the run's lock, before workers start."""
    folder = parts_dir(run_dir)
    if not folder.is_dir():
        return 0
    half = {path.name.split(".")[1] for path in folder.glob(".*.tmp")}
    for path in folder.glob(".*.tmp"):
        path.unlink(missing_ok=True)
    for path in folder.glob("*.json"):
        if not path.with_suffix(".parquet").exists():
            half.add(path.stem)
            path.unlink(missing_ok=True)
    return len(half)


def stored_parts(run_dir: Path) -> list[RankPart]:
    """The complete parts, by rank (then digest)."""
    folder = parts_dir(run_dir)
    if not folder.is_dir():
        return []
    parts = []
    for parquet in folder.glob("*.parquet"):
        try:
            data = json.loads(parquet.with_suffix(".json").read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise StoreError(f"unreadable part {parquet.with_suffix('.json')} ({error})") from None
        parts.append(RankPart(parquet.stem, RunMeta.from_json(data), parquet, data.get("rank")))
    return sorted(parts, key=lambda p: (-1 if p.rank is None else p.rank, p.digest))


def commit_parts(run_dir: Path, existing: RunMeta | None, existing_file: Path | None) -> RunMeta:
    """The run made of its stored parts (after ``existing``'s launches, where the run was there already): one
    new launches file, streamed in row groups of :data:`WRITE_ROWS` launches, then the metadata; the parts
    removed once committed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = stored_parts(run_dir)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    name = run_dir.name.split("=", 1)[1]
    meta = existing or RunMeta(name=name, created=now)
    inputs: list[tuple[Path, int | None]] = [(existing_file, None)] if existing_file is not None else []
    for part in parts:
        _check_same_device(meta, part)
        meta.gpu, meta.cc = meta.gpu or part.meta.gpu, meta.cc or part.meta.cc
        meta.device_name = meta.device_name or part.meta.device_name
        inputs.append((part.parquet, len(meta.sources)))
        meta.sources.extend(part.meta.sources)
    schema = _unified_schema([path for path, _ in inputs])
    phases = {p for path, _ in inputs for p in pq.read_table(path, columns=["phase"]).column("phase").to_pylist()}
    meta.phases = ordered_phases(phases - {None})

    def write(path: Path) -> None:
        # ranks gathered into row groups of WRITE_ROWS launches: a row group per rank would make the file's footer
        # (statistics per row group and column) grow with the ranks, to 90 MB for 1,000 small ones
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            gathered: list[pa.Table] = []
            for table in _tables(inputs, schema):
                gathered.append(table)
                if sum(len(t) for t in gathered) >= WRITE_ROWS:
                    writer.write_table(pa.concat_tables(gathered), row_group_size=WRITE_ROWS)
                    gathered = []
            if gathered:
                writer.write_table(pa.concat_tables(gathered), row_group_size=WRITE_ROWS)

    from hroofline.roofs.metricset import load_metric_set

    meta.arch = load_metric_set(meta.metric_set).arch_of(meta.cc)
    meta.updated = now
    written = commit_run(run_dir, meta, write)
    shutil.rmtree(parts_dir(run_dir), ignore_errors=True)
    return written


def _tables(inputs: list[tuple[Path, int | None]], schema: pa.Schema) -> Iterator[pa.Table]:
    """Each input's launches, :data:`WRITE_ROWS` at a time, in the run's schema, with its source index (None: the
    run's own file, as it is)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path, source in inputs:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=WRITE_ROWS):
            table = pa.Table.from_batches([batch]).cast(schema)
            if source is not None:
                where = table.column_names.index("source")
                column = pa.array([source] * len(table), table.schema.field("source").type)
                table = table.set_column(where, table.schema.field("source"), column)
            yield table


def _unified_schema(paths: list[Path]) -> pa.Schema:
    """One schema for every input (a column of nulls in one rank is typed by the others)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    metadata = pq.read_schema(paths[0]).metadata
    schemas = [pq.read_schema(path).remove_metadata() for path in paths]  # pandas' metadata: 35 kB each
    return pa.unify_schemas(schemas, promote_options="permissive").with_metadata(metadata)


def _check_same_device(meta: RunMeta, part: RankPart) -> None:
    if meta.cc and part.meta.cc and meta.cc != part.meta.cc:
        raise StoreError(
            f"run {meta.name!r} holds data of a compute capability {meta.cc} GPU; "
            f"{part.meta.sources[0].path} is from {part.meta.cc}",
            "import it into another run",
        )
