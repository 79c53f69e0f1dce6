"""The ranks of a run aggregated in SQL over its launches file: one query, the same text for DuckDB (here, on one
machine) and Spark SQL (:mod:`hroofline.store.spark_ranks`, on a cluster), so that both give the same numbers.

Per rank and phase: GPU time, communication time (launches of category ``communication``), compute time (the rest)
and launches, as ``analyze/ranks.py`` sums them (summed over launches: overlapping streams count twice); every rank
has a row in every phase of the run, zero where it launched nothing there (as ``rank_spread`` counts it). Per phase:
the ranks, the median and the median absolute deviation (MAD) of the ranks' compute time, and the slowest rank (by
compute time: a fast rank waits for a slow one inside its collectives, so totals would even out). A rank is a
**straggler** in a phase where its compute time exceeds the median by more than :data:`STRAGGLER_MADS` × MAD
(Iglewicz and Hoaglin's modified z-score, 0.6745 × (x − median) / MAD, above 3.5), the MAD taken as at least
:data:`MAD_FLOOR` of the median: where half the ranks or more tie (MAD = 0), any excess over the median, down
to a picosecond of jitter, would otherwise flag a rank; with the floor a rank needs more than 5.19% over the
median.

Why the same to the last digit on any engine: times are summed as whole picoseconds (``time_s`` rounded to 1 ps;
traces resolve 1 ns), exact in 64-bit integers whatever order the engine adds them in; the median and MAD are
taken by position (``ROW_NUMBER``) as sums of the middle values, kept doubled (integers) until one final IEEE
division to seconds; the straggler test compares integers with one IEEE product. Nothing depends on how an engine
splits, orders or interpolates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hroofline.errors import StoreError

if TYPE_CHECKING:
    import pandas as pd

    from hroofline.store.reading import StoreReader

STRAGGLER_MADS = 3.5 / 0.6745  # x - median > 5.19 MAD: a modified z-score above 3.5
MAD_FLOOR = 0.01  # the MAD is taken as at least 1% of the median
# x - median > k max(MAD, f median), times 4 (the SQL keeps 4 MAD and 2 median) and 1 / (2 f) = 50 to stay in
# integers: 50 (4 x - 2 median2) > k max(50 mad4, median2); 200 x stays below 2^63 up to 46,000 s per rank and phase.
_FLOOR_SCALE = round(1 / (2 * MAD_FLOOR))

_PICOSECONDS = "CAST(FLOOR(COALESCE(time_s, 0E0) * 1E12 + 5E-1) AS BIGINT)"
_MIDDLE = "(position = FLOOR((ranks + 1) / 2E0) OR position = FLOOR(ranks / 2E0) + 1)"

# Every literal is an integer or written with an exponent (a DOUBLE in both dialects: Spark reads 0.5 as a DECIMAL).
RANKS_SQL = f"""
WITH per_rank AS (
    SELECT CAST(rank AS BIGINT) AS rank_id, CAST(phase AS STRING) AS phase,
           SUM({_PICOSECONDS}) AS time_ps,
           SUM(CASE WHEN category = 'communication' THEN {_PICOSECONDS} ELSE 0 END) AS communication_ps,
           SUM(CAST(launches AS BIGINT)) AS launches
    FROM launches
    WHERE rank IS NOT NULL AND phase IS NOT NULL
    GROUP BY CAST(rank AS BIGINT), CAST(phase AS STRING)
), grid AS (
    SELECT r.rank_id, p.phase, COALESCE(x.time_ps, 0) AS time_ps,
           COALESCE(x.communication_ps, 0) AS communication_ps, COALESCE(x.launches, 0) AS launches
    FROM (SELECT DISTINCT rank_id FROM per_rank) r CROSS JOIN (SELECT DISTINCT phase FROM per_rank) p
    LEFT JOIN per_rank x ON x.rank_id = r.rank_id AND x.phase = p.phase
), ordered AS (
    SELECT rank_id, phase, time_ps, communication_ps, time_ps - communication_ps AS compute_ps, launches,
           ROW_NUMBER() OVER (PARTITION BY phase ORDER BY time_ps - communication_ps, rank_id) AS position,
           ROW_NUMBER() OVER (PARTITION BY phase ORDER BY time_ps - communication_ps DESC, rank_id) AS from_top,
           COUNT(*) OVER (PARTITION BY phase) AS ranks
    FROM grid
), medians AS (
    SELECT phase, MAX(ranks) AS ranks,
           SUM(CASE WHEN position = FLOOR((ranks + 1) / 2E0) THEN compute_ps ELSE 0 END)
           + SUM(CASE WHEN position = FLOOR(ranks / 2E0) + 1 THEN compute_ps ELSE 0 END) AS median2_ps,
           MAX(CASE WHEN from_top = 1 THEN rank_id END) AS slowest_rank
    FROM ordered GROUP BY phase
), deviations AS (
    SELECT o.phase, m.ranks, ABS(2 * o.compute_ps - m.median2_ps) AS deviation2_ps,
           ROW_NUMBER() OVER (PARTITION BY o.phase ORDER BY ABS(2 * o.compute_ps - m.median2_ps), o.rank_id)
               AS position
    FROM ordered o JOIN medians m ON o.phase = m.phase
), mads AS (
    SELECT phase,
           SUM(CASE WHEN position = FLOOR((ranks + 1) / 2E0) THEN deviation2_ps ELSE 0 END)
           + SUM(CASE WHEN position = FLOOR(ranks / 2E0) + 1 THEN deviation2_ps ELSE 0 END) AS mad4_ps
    FROM deviations GROUP BY phase
)
SELECT o.rank_id AS rank, o.phase,
       CAST(o.time_ps AS DOUBLE) / 1E12 AS time_s,
       CAST(o.communication_ps AS DOUBLE) / 1E12 AS communication_s,
       CAST(o.compute_ps AS DOUBLE) / 1E12 AS compute_s,
       o.launches,
       m.ranks AS phase_ranks,
       CAST(m.median2_ps AS DOUBLE) / 2E12 AS median_compute_s,
       CAST(d.mad4_ps AS DOUBLE) / 4E12 AS mad_compute_s,
       m.slowest_rank,
       ({_FLOOR_SCALE} * (4 * o.compute_ps - 2 * m.median2_ps) > {STRAGGLER_MADS!r}E0
           * (CASE WHEN {_FLOOR_SCALE} * d.mad4_ps > m.median2_ps THEN {_FLOOR_SCALE} * d.mad4_ps
                   ELSE m.median2_ps END)) AS straggler
FROM ordered o JOIN medians m ON o.phase = m.phase JOIN mads d ON o.phase = d.phase
ORDER BY o.phase, o.rank_id
"""

RANK_COLUMNS = (
    "rank",
    "phase",
    "time_s",
    "communication_s",
    "compute_s",
    "launches",
    "phase_ranks",
    "median_compute_s",
    "mad_compute_s",
    "slowest_rank",
    "straggler",
)


def ranks_duckdb(store: StoreReader, run: str) -> pd.DataFrame:
    """:data:`RANKS_SQL` on run ``run``'s committed launches file, with DuckDB: one row per rank and phase."""
    import duckdb
    import pyarrow.dataset

    _, path = store.committed(run)
    connection = duckdb.connect(":memory:")
    try:
        connection.register("launches", pyarrow.dataset.dataset(str(path), format="parquet"))
        frame = connection.execute(RANKS_SQL).df()
    except duckdb.Error as error:
        raise StoreError(f"run {run!r}: the rank aggregation failed ({str(error).splitlines()[0]})") from None
    finally:
        connection.close()
    return conformed(frame)


def conformed(frame: pd.DataFrame) -> pd.DataFrame:
    """The aggregation's rows in one set of column types, whichever engine computed them."""
    frame = frame[list(RANK_COLUMNS)].copy()
    for column in ("rank", "launches", "phase_ranks", "slowest_rank"):
        frame[column] = frame[column].astype("int64")
    for column in ("time_s", "communication_s", "compute_s", "median_compute_s", "mad_compute_s"):
        frame[column] = frame[column].astype("float64")
    frame["phase"] = frame["phase"].astype(str)
    frame["straggler"] = frame["straggler"].astype(bool)
    return frame.reset_index(drop=True)
