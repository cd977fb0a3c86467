"""The ``native`` baseline: what a Spark user writes today — every query its own streaming query,
a chain of Spark's built-in stream-stream inner joins over one stream per relation.

Per query ``R1, …, Rm`` (in the query's order):

* one replay stream per relation (the ``mqjoin_replay`` source with option ``relations``),
  event time ``ts`` as a timestamp column with a watermark;
* the joins are chained left to right; joining ``Rj`` to the relations already joined adds one
  equality per class with members on both sides, and the time-range conditions of DESIGN A6:
  ``T − ts(Ri) ≤ window(Ri)`` for all ``i`` (``T`` the largest ``ts``) is the same as
  ``ts(Rj) − ts(Ri) ≤ window(Ri)`` for every ordered pair — so each pair gets
  ``ts_i ≥ ts_j − window_i`` and ``ts_j ≥ ts_i − window_j`` (a relation with an unbounded
  window gives no bound, and Spark keeps its join state forever — as a Spark user's would);
* a stream may carry only one event-time column, so a joined stream keeps the first
  relation's; pairs with the first relation get event-time range conditions (Spark evicts
  join state with them), the other pairs are filtered on the plain ``ts`` columns;
* watermark delay 1 ms: the replay is in ``ts`` order across all relations and every relation
  stream advances to the same arrival number in each micro-batch, so no tuple is ever older
  than the global watermark (the minimum over the streams; a tie with the previous batch's
  latest ``ts`` is 1 ms younger than it), while the range conditions let Spark evict join
  state once the watermark passes a tuple's window.

Each result row carries ``rows`` (row indices in the query's relation order), ``_seq`` and
``_arrival`` of its latest tuple (the one that triggered it), as the plan engine's outputs do.
"""

from __future__ import annotations

from typing import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...errors import EngineError
from ...workload import Query, Workload
from .source import SOURCE_NAME, attr_col, row_col, ts_col


# Spark treats event times at or before the watermark as late, and the first watermark is the
# epoch: event time 0 would be dropped.  ts is shifted (only differences matter) and the delay
# is one millisecond, so a tuple tied with the latest ts of an earlier batch is still on time.
EPOCH_OFFSET = 1_000_000.0
WATERMARK_DELAY = "1 millisecond"


def _event(k: int) -> str:
    return f"r{k}_et"


def _relation_stream(spark: SparkSession, w: Workload, relation: str, log_path: str,
                     options: Mapping[str, str], types: Mapping[str, str]) -> DataFrame:
    k = w.relation_rank[relation]
    reader = spark.readStream.format(SOURCE_NAME).option("path", log_path).option("relations", str(k))
    for key, v in options.items():
        reader = reader.option(key, v)
    df = reader.load()
    cols = [F.col("_seq").alias(f"r{k}_seq"), F.col("_arrival").alias(f"r{k}_arr"),
            F.col("_row").alias(row_col(k)), F.col("_ts").alias(ts_col(k)),
            F.timestamp_seconds(F.col("_ts") + F.lit(EPOCH_OFFSET)).alias(_event(k))]
    rel = w.relation(relation)
    cols += [F.col(attr_col(k, j)) for j in range(len(rel.attributes)) if attr_col(k, j) in types]
    return df.select(*cols).withWatermark(_event(k), WATERMARK_DELAY)


def _query_frame(spark: SparkSession, w: Workload, q: Query, log_path: str, options: Mapping[str, str],
                 types: Mapping[str, str]) -> DataFrame:
    rank = w.relation_rank

    def col_of(a) -> str:
        j = w.relation(a.relation).attributes.index(a.name)
        name = attr_col(rank[a.relation], j)
        if name not in types:
            raise EngineError(f"query {q.name} joins on {a}, but the input has no column {a.name} for {a.relation}")
        return name

    joined = [q.relations[0]]
    df = _relation_stream(spark, w, q.relations[0], log_path, options, types)
    for r in q.relations[1:]:
        right = _relation_stream(spark, w, r, log_path, options, types)
        cond = []
        for c in q.classes:
            left = [a for a in c.members if a.relation in joined]
            mine = [a for a in c.members if a.relation == r]
            if left and mine:
                a, b = col_of(left[0]), col_of(mine[0])
                if (types[a] == "string") != (types[b] == "string"):  # "1" never equals 1
                    cond.append(F.lit(False))
                else:
                    cond.append(F.col(a) == F.col(b))
        kj = rank[r]
        for i in joined:
            ki = rank[i]
            wi, wj = w.relation(i).window, w.relation(r).window
            if i == q.relations[0]:  # event-time conditions: Spark evicts join state with them
                if wi is not None:
                    cond.append(F.col(_event(ki)) >= F.col(_event(kj)) - F.make_dt_interval(secs=F.lit(float(wi))))
                if wj is not None:
                    cond.append(F.col(_event(kj)) >= F.col(_event(ki)) - F.make_dt_interval(secs=F.lit(float(wj))))
            else:  # the other pairs filter on the plain ts columns
                if wi is not None:
                    cond.append(F.col(ts_col(kj)) - F.col(ts_col(ki)) <= F.lit(float(wi)))
                if wj is not None:
                    cond.append(F.col(ts_col(ki)) - F.col(ts_col(kj)) <= F.lit(float(wj)))
        if not cond:
            raise EngineError(f"query {q.name}: {r} shares no class with {', '.join(joined)}; "
                              "Spark cannot join streams without a condition")
        on = cond[0]
        for c in cond[1:]:
            on = on & c
        # a stream may carry one event-time column: the joined stream keeps the first
        # relation's (its windows bound how long a joined row can still match)
        df = df.join(right, on, "inner").drop(_event(kj))
        joined.append(r)
    ks = [rank[r] for r in q.relations]
    seqs = [F.col(f"r{k}_seq") for k in ks]
    arrs = [F.col(f"r{k}_arr") for k in ks]
    return df.select(F.array(*[F.col(row_col(k)) for k in ks]).alias("rows"),
                     (F.greatest(*seqs) if len(seqs) > 1 else seqs[0]).alias("_seq"),
                     (F.greatest(*arrs) if len(arrs) > 1 else arrs[0]).alias("_arrival"))


def native_queries(spark: SparkSession, workload: Workload, log_path: str, *, rate: float | None = None,
                   speedup: float | None = None, max_rows_per_batch: int | None = None,
                   queries: list[str] | None = None) -> dict[str, DataFrame]:
    """One streaming DataFrame per query (see the module doc), not yet started."""
    import pyarrow.parquet as pq

    from .engine import column_types
    from .source import spark_schema

    types = column_types(spark_schema(pq.read_schema(log_path)))
    options: dict[str, str] = {}
    if rate:
        options["rate"] = repr(float(rate))
    if speedup:
        options["speedup"] = repr(float(speedup))
    if max_rows_per_batch:
        options["maxRowsPerBatch"] = str(int(max_rows_per_batch))
    names = queries or workload.query_names
    return {q: _query_frame(spark, workload, workload.query(q), log_path, options, types) for q in names}


def native_state_metrics(progress) -> dict[str, int]:
    """State rows and bytes of one query's progress report (pyspark object or its JSON dict)."""
    import json

    d = progress if isinstance(progress, Mapping) else json.loads(progress.json)
    ops = d.get("stateOperators") or []
    return {"state_rows": sum(int(o.get("numRowsTotal") or 0) for o in ops),
            "state_bytes": sum(int(o.get("memoryUsedBytes") or 0) for o in ops)}
