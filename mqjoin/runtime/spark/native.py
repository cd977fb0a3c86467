"""The ``native`` baseline: what a Spark expert writes for a set of multi-way stream joins —
every query a chain of Spark's built-in stream-stream inner joins, all queries in ONE
streaming query (:func:`native_union`: the union of the per-query results, tagged by query,
into one ``foreachBatch`` sink), one replay source shared by every relation and query,
shuffle partitions sized to the session's cores and the state store that suits this state
(:func:`native_settings`).

The whole workload (see :func:`native_union`):

* **One source, one stream per relation**: the ``mqjoin_replay`` source is read once per
  micro-batch plan (one source instance: one offset, one Python planner process); relation
  ``Rk`` is its rows with ``_rel = k``, and its ``ts`` becomes an event-time column
  ``r<k>_et`` (a timestamp) with a watermark — one per relation, shared by the queries.

Per query (see :func:`native_queries`):

* **Joins chained left to right** — ``((R1 ⋈ R2) ⋈ R3) ⋈ …`` with ``df.join(other, cond,
  "inner")``.  Joining ``Rk`` to the relations already joined adds one equality per class with
  members on both sides and the window conditions of docs/model.md §6: ``T − ts(Rj) ≤ window(Rj)``
  for every ``j`` (``T`` the largest ``ts``) holds iff ``ts_i − ts_j ≤ window(Rj)`` for every
  ordered pair, so each new pair ``(Ri, Rk)`` gets ``ts_k − ts_i ≤ window(Ri)`` and
  ``ts_i − ts_k ≤ window(Rk)`` (an unbounded window gives no bound).  These are evaluated on the
  plain ``double`` columns, with the same floating-point arithmetic as the reference, so the
  result set is exact at window boundaries and ts ties.  Nulls never join (SQL ``=``).
* **Event-time range conditions for state eviction**: Spark evicts join state only from range
  conditions between two *watermarked timestamp* columns, and since Spark 3.4 (multiple
  stateful operators) each join input may carry at most one event-time column.  The joined
  stream therefore keeps one event-time column, that of the *anchor* relation ``c`` — the
  relation of the query with the smallest finite window, which is joined first (the chain
  then follows the query's relation order, each next relation sharing a class with the ones
  joined).  Each join adds ``et_c ≥ et_k − (window(c) + ε)`` and ``et_k ≥ et_c − (window(Rk) +
  ε)`` (``ε`` = 1 ms absorbs the microsecond rounding of timestamps; they only loosen the exact
  double conditions above, never change the result).  Spark's state-watermark solver reads
  them as "left state older than watermark − window(c) can go" and the same for the right.
* Output rows: ``rows`` (row indices in the query's relation order), ``_seq`` and
  ``_arrival`` of the latest tuple (the one that triggered the result; arrival is monotone in
  ``_seq``), as the plan engine's outputs; :func:`native_union` adds ``query``.
* A query whose windows are all unbounded keeps no event-time column in its joins (its
  relations' streams carry one when another query has a finite window): Spark then neither
  evicts its state nor filters its inputs as late, as the semantics require.

Why the anchor is a finite-window relation: a join's output watermark (Spark's watermark
propagation) is the minimum of its input watermark and both state watermarks, and the next
join drops a joined row as *late* when its event time is at or below that watermark of the
previous batch.  A joined row produced now contains a tuple newer than the previous global
watermark ``W``; since every pair satisfies ``ts_k − ts_c ≤ window(c)``, ``ts_c > W −
window(c)``, which the propagated watermark (at most ``W − window(c)``) never reaches — so no
joined row is ever dropped.  With an *unbounded* anchor a joined row may carry an arbitrarily
old ``et_c`` and Spark would drop it (a 3-way join with an unbounded first relation loses
results).  A query whose windows are all unbounded has no watermark at all (no state can
ever be evicted, nothing is late).

Watermark delay (default 1 ms of event time, ``watermark_delay``): Spark's global watermark is the minimum over the
streaming query's relation streams (all relations of the workload) (``spark.sql.streaming.multipleWatermarkPolicy=min``,
checked) of ``max event time seen − delay``, and a stream that has seen no tuple yet counts as the epoch.  The replay
log is in ``ts`` order, so every later tuple of a stream is at least as late as that stream's maximum so far, hence
strictly above the watermark for any delay > 0 — including a tuple tied with the latest ``ts`` of an earlier micro-batch
(Spark drops a tuple as late when its event time is *at or below* the watermark).  This holds however the streams'
readers are paced relative to each other (``rate``/``speedup``: each stream paces itself).  So no input tuple is ever
dropped, and the delay only postpones eviction by that much event time. Consequence of the minimum: a relation with rare
tuples holds back eviction in every query (Spark's behaviour; one streaming query per query would confine it to the
queries joining it).  :func:`native_state_metrics` reports Spark's ``numRowsDroppedByWatermark`` as ``late_rows``; the
tests assert it stays 0.

Event times are ``ts`` shifted by a whole number of seconds (only differences matter) so that
the earliest is at least 1 s after the epoch: Spark's initial watermark is the epoch and an
event time at or before it would be dropped.

Spark settings this relies on (Spark 4 defaults; the first two are checked, an
:class:`~mqjoin.model.errors.EngineError` says which to restore):
``spark.sql.streaming.statefulOperator.allowMultiple=true`` (chained stateful operators with
per-operator watermark propagation — with ``false`` every join would filter late rows against
the global watermark and drop joined rows), ``spark.sql.streaming.multipleWatermarkPolicy=min``
(see above) and ``spark.sql.streaming.statefulOperator.checkCorrectness.enabled=true`` (the
chained joins pass it); output mode append.  What cannot be expressed: a query whose relations
are not connected by equalities (Spark's stream-stream joins need an equi-join key;
``EngineError``).  Unbounded windows are expressed by leaving the bound out (Spark then never
evicts that relation's tuples, which the semantics require anyway).

Why this layout and these settings (:func:`native_settings`): one streaming query over one
source, because a query per workload query with a source per relation starts a Python planner
process per source, which Spark gives 10 s to connect back — on a loaded machine they did not;
Spark's HDFS-backed state store, because RocksDB spends a batch's time committing its many
small store instances on state of this size; shuffle partitions equal to the session's cores,
what scales on a cluster.  The measurements, and this baseline against the plan engine and
Flink, are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from mqjoin.model.errors import EngineError
from mqjoin.model.filters import sql_condition
from mqjoin.model.workload import Attr, Query, Workload
from mqjoin.runtime.spark.source import SOURCE_NAME, attr_col, row_col, ts_col
from mqjoin.runtime.windows import within

WATERMARK_DELAY = 0.001  # event-time seconds (see the module doc)
SLACK = 0.001  # seconds added to the event-time range conditions (rounding to microseconds)


def _seq(k: int) -> str:
    return f"r{k}_seq"


def _arr(k: int) -> str:
    return f"r{k}_arr"


def _et(k: int) -> str:
    return f"r{k}_et"


def _kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    return "number"


def join_order(workload: Workload, query: Query) -> list[str]:
    """The chain order: the anchor (the relation with the smallest finite window, the first
    in query order on ties; the first relation when every window is unbounded), then the
    query's relations in order, each next one sharing a class with the ones joined."""
    rels = list(query.relations)
    finite = [r for r in rels if workload.window(r) is not None]
    anchor = min(finite, key=lambda r: (workload.window(r), rels.index(r))) if finite else rels[0]
    order = [anchor]
    while len(order) < len(rels):
        for r in rels:
            if r not in order and any(r in c.relations and c.relations & set(order) for c in query.classes):
                order.append(r)
                break
        else:
            rest = ", ".join(r for r in rels if r not in order)
            raise EngineError(f"query {query.name}: {rest} share no equality with {', '.join(order)}; "
                              "Spark's stream-stream joins need an equality between the two sides")
    return order


def _min_ts(log_path: str) -> float:
    """The earliest ``ts`` of a replay log, from the Parquet statistics when present."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    f = pq.ParquetFile(log_path)
    md = f.metadata
    if md.num_rows == 0:
        return 0.0
    i = f.schema_arrow.get_field_index("_ts")
    lows = []
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(i).statistics
        if st is None or not st.has_min_max:
            return float(pc.min(f.read(columns=["_ts"])["_ts"]).as_py())
        lows.append(st.min)
    return float(min(lows))


def _replay_options(log_path: str, rate: float | None, speedup: float | None,
                    max_rows_per_batch: int | None) -> dict[str, str]:
    options: dict[str, str] = {"path": str(log_path)}
    if rate:
        options["rate"] = repr(float(rate))
    if speedup:
        options["speedup"] = repr(float(speedup))
    if max_rows_per_batch:
        options["maxRowsPerBatch"] = str(int(max_rows_per_batch))
    return options


def native_queries(spark, workload: Workload, log_path: str, *, rate: float | None = None,
                   speedup: float | None = None, max_rows_per_batch: int | None = None,
                   queries: list[str] | None = None,
                   watermark_delay: float = WATERMARK_DELAY) -> dict[str, Any]:
    """One streaming DataFrame per query (all of the workload's unless ``queries`` names
    some), not started: columns ``rows`` (array<bigint>, row indices in the query's relation
    order), ``_seq`` and ``_arrival`` of the tuple that triggered the result.  ``log_path`` is
    a replay log (:func:`~mqjoin.runtime.spark.source.write_replay_log`); ``rate``,
    ``speedup`` and ``max_rows_per_batch`` pace its replay.  The frames share one stream per
    relation: started together (:func:`native_union`) they read each relation once; started
    as separate streaming queries each query gets its own sources.  See the module doc."""
    b = _Builder(spark, workload, log_path, _replay_options(log_path, rate, speedup, max_rows_per_batch),
                 watermark_delay)
    names = list(queries) if queries else list(workload.query_names)
    return {name: b.query_frame(workload.query(name)) for name in names}


def native_union(spark, workload: Workload, log_path: str, **kwargs):
    """All queries (or those ``queries`` names) as ONE streaming DataFrame — what a Spark
    user who knows the queries run together writes: the union of the per-query join chains
    of :func:`native_queries`, each row tagged with its query (``query``, ``rows``, ``_seq``,
    ``_arrival``), over one source per relation shared by every query that joins it, so a
    micro-batch plans, reads and commits once for the whole workload.  Same arguments as
    :func:`native_queries`."""
    from pyspark.sql import functions as F

    frames = native_queries(spark, workload, log_path, **kwargs)
    parts = [df.select(F.lit(name).alias("query"), "rows", "_seq", "_arrival") for name, df in frames.items()]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionAll(p)
    return out


class _Builder:
    """Builds the per-query join chains over one stream per relation (created once, reused by
    every query: the same logical source, hence one source instance in a streaming query)."""

    def __init__(self, spark, w: Workload, log_path: str, options: Mapping[str, str], delay: float):
        import pyarrow.parquet as pq

        if not delay > 0:
            raise EngineError(f"watermark_delay must be > 0 seconds (got {delay}): with 0 a tuple "
                              "tied with the latest ts of an earlier micro-batch would be dropped as late")
        policy = str(spark.conf.get("spark.sql.streaming.multipleWatermarkPolicy", "min")).lower()
        allow = str(spark.conf.get("spark.sql.streaming.statefulOperator.allowMultiple", "true")).lower()
        if policy != "min" or allow != "true":
            raise EngineError("the native baseline needs Spark's defaults spark.sql.streaming.multipleWatermarkPolicy="
                              "min and spark.sql.streaming.statefulOperator.allowMultiple=true (found "
                              f"{policy} and {allow}); otherwise Spark drops tuples as late")
        self.spark, self.w, self.options, self.delay = spark, w, dict(options), float(delay)
        schema = pq.read_schema(log_path)
        self.kinds = {f.name: _kind(f.type) for f in schema}
        self.offset = float(max(0, math.ceil(1.0 - _min_ts(log_path))))
        # a relation's stream carries every attribute some query joins on, and an event-time
        # column when some window is finite (one watermark per relation, shared by its queries)
        self.windowed = any(w.window(r) is not None for q in w.queries for r in q.relations)
        self.used: dict[str, set[str]] = {}
        for q in w.queries:
            for c in q.classes:
                for a in c.members:
                    self.used.setdefault(a.relation, set()).add(self.col_name(q, a))
            for f in q.filters:
                self.used.setdefault(f.relation, set()).update(self.col_name(q, c.attr) for c in f.comparisons)
        self.streams: dict[str, Any] = {}
        self.source = None

    def col_name(self, q: Query, a: Attr) -> str:
        name = attr_col(self.w.relation_rank[a.relation], self.w.relation(a.relation).attributes.index(a.name))
        if name not in self.kinds:
            raise EngineError(f"query {q.name} joins on {a}, but the replay log has no column {a.name} "
                              f"for {a.relation}")
        return name

    def stream(self, relation: str):
        """Relation ``relation``'s tuples out of the one replay stream of the workload (the
        source is created once: every relation and query reads the same source instance)."""
        from pyspark.sql import functions as F

        if relation in self.streams:
            return self.streams[relation]
        if self.source is None:
            reader = self.spark.readStream.format(SOURCE_NAME)
            for key, v in self.options.items():
                reader = reader.option(key, v)
            self.source = reader.load()
        k = self.w.relation_rank[relation]
        cols = [F.col("_seq").alias(_seq(k)), F.col("_arrival").alias(_arr(k)),
                F.col("_row").alias(row_col(k)), F.col("_ts").alias(ts_col(k))]
        cols += [F.col(c) for c in sorted(self.used.get(relation, ()))]
        df = self.source.where(F.col("_rel") == F.lit(k))
        if self.windowed:
            cols.append(F.timestamp_seconds(F.col("_ts") + F.lit(self.offset)).alias(_et(k)))
            df = df.select(*cols).withWatermark(_et(k), f"{round(self.delay * 1e6)} microseconds")
        else:
            df = df.select(*cols)
        self.streams[relation] = df
        return df

    def filtered(self, q: Query, relation: str):
        """Relation ``relation``'s stream restricted to ``q``'s filter on it (docs/model.md §7: a WHERE)."""
        from pyspark.sql import functions as F

        df = self.stream(relation)
        f = q.filter_of(relation)
        if f is None:
            return df
        return df.where(F.expr(sql_condition([f.comparisons], lambda a: self.col_name(q, a),
                                             lambda a: self.kinds[self.col_name(q, a)] == "string")))

    def query_frame(self, q: Query):
        from pyspark.sql import functions as F

        w, kinds, rank = self.w, self.kinds, self.w.relation_rank
        order = join_order(w, q)
        # event-time range conditions only where the query has a finite window (a query of
        # unbounded windows keeps all state anyway); its streams still carry the column when
        # another query needs it, and the joins drop it
        windowed = any(w.window(r) is not None for r in order)
        anchor = order[0]
        ka = rank[anchor]
        wa = w.window(anchor)

        def interval(seconds: float):
            return F.make_interval(secs=F.lit(round(seconds + SLACK, 6)).cast("decimal(18,6)"))

        df = self.filtered(q, anchor)
        if self.windowed and not windowed:
            df = df.drop(_et(ka))
        joined = [anchor]
        for r in order[1:]:
            k = rank[r]
            wk = w.window(r)
            right = self.filtered(q, r)
            if self.windowed and not windowed:
                right = right.drop(_et(k))
            cond = []
            for c in q.classes:
                mine = c.member_of(r)
                left = [a for a in c.members if a.relation in joined]
                if mine is None or not left:
                    continue
                b = self.col_name(q, mine)
                same = [a for a in left if kinds[self.col_name(q, a)] == kinds[b]]
                if same:
                    cond.append(F.col(self.col_name(q, same[0])) == F.col(b))
                else:  # "1" never equals 1 (docs/model.md §6: values compared as read); tagged strings never match
                    a = self.col_name(q, left[0])
                    cond.append(F.concat(F.lit(kinds[a] + ":"), F.col(a).cast("string"))
                                == F.concat(F.lit(kinds[b] + ":"), F.col(b).cast("string")))
            for i in joined:  # the exact window conditions (doubles, as the reference computes them)
                ki, wi = rank[i], w.window(i)
                if wi is not None:
                    cond.append(within(F.col(ts_col(k)), F.col(ts_col(ki)), F.lit(float(wi))))
                if wk is not None:
                    cond.append(within(F.col(ts_col(ki)), F.col(ts_col(k)), F.lit(float(wk))))
            if windowed:  # event-time ranges with the anchor: what lets Spark evict join state
                if wa is not None:
                    cond.append(F.col(_et(ka)) >= F.col(_et(k)) - interval(wa))
                if wk is not None:
                    cond.append(F.col(_et(k)) >= F.col(_et(ka)) - interval(wk))
            on = cond[0]
            for c in cond[1:]:
                on = on & c
            df = df.join(right, on, "inner")
            if windowed:  # one event-time column per stream: keep the anchor's
                df = df.drop(_et(k))
            joined.append(r)
        ks = [rank[r] for r in q.relations]
        seqs = [F.col(_seq(k)) for k in ks]
        arrs = [F.col(_arr(k)) for k in ks]
        return df.select(F.array(*[F.col(row_col(k)) for k in ks]).alias("rows"),
                         (F.greatest(*seqs) if len(seqs) > 1 else seqs[0]).alias("_seq"),
                         (F.greatest(*arrs) if len(arrs) > 1 else arrs[0]).alias("_arrival"))


# The state store of the joins (compared in benchmarks/RESULTS.md, "Spark native baseline"):
_PROVIDERS = "org.apache.spark.sql.execution.streaming.state."
STATE_STORE = {  # name → the settings that select it
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": _PROVIDERS + "HDFSBackedStateStoreProvider"},
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass": _PROVIDERS + "RocksDBStateStoreProvider",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"},
    "rocksdb-changelog": {"spark.sql.streaming.stateStore.providerClass": _PROVIDERS + "RocksDBStateStoreProvider",
                          "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
}
DEFAULT_STATE_STORE = "hdfs"


def native_settings(spark, partitions: int | None = None, state_store: str | None = None) -> dict[str, str]:
    """The Spark SQL settings the native streaming query starts with: ``partitions`` shuffle
    partitions (state partitions of every join; default: the session's task slots,
    :func:`~mqjoin.runtime.spark.session.session_cores`) and the ``state_store`` provider
    (``hdfs``, ``rocksdb`` or ``rocksdb-changelog``; default :data:`DEFAULT_STATE_STORE`).  A restarted query keeps
    the ones its checkpoint recorded.  With ``partitions`` given, no session is needed:

    >>> s = native_settings(None, partitions=2, state_store="rocksdb")
    >>> s["spark.sql.shuffle.partitions"], s["spark.sql.streaming.stateStore.providerClass"].rsplit(".", 1)[1]
    ('2', 'RocksDBStateStoreProvider')
    >>> native_settings(None, partitions=2, state_store="memory")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.EngineError: unknown state store 'memory': choose one of hdfs, rocksdb, rocksdb-changelog
    """
    from mqjoin.runtime.spark.session import session_cores

    state_store = state_store or DEFAULT_STATE_STORE
    if state_store not in STATE_STORE:
        raise EngineError(f"unknown state store {state_store!r}: choose one of {', '.join(STATE_STORE)}")
    n = int(partitions) if partitions is not None else session_cores(spark)
    if n < 1:
        raise EngineError(f"the native query needs at least 1 shuffle partition (got {n})")
    return {"spark.sql.shuffle.partitions": str(n), **STATE_STORE[state_store]}


def native_state_metrics(progress) -> dict[str, int]:
    """State of one streaming query from one progress report (pyspark's
    ``StreamingQueryProgress``, its JSON text, or its dict), summed over its stateful
    operators (the joins): ``state_rows`` (``numRowsTotal``), ``state_bytes``
    (``memoryUsedBytes``), ``state_operators`` and ``late_rows`` (``numRowsDroppedByWatermark``:
    must stay 0 for exact results)."""
    if isinstance(progress, (str, bytes)):
        d = json.loads(progress)
    elif isinstance(progress, Mapping):
        d = progress
    elif hasattr(progress, "json"):
        d = json.loads(progress.json)
    else:
        raise TypeError(f"not a streaming query progress: {type(progress).__name__}")
    ops = d.get("stateOperators") or []

    def total(key: str) -> int:
        return sum(int(o.get(key) or 0) for o in ops)

    return {"state_rows": total("numRowsTotal"), "state_bytes": total("memoryUsedBytes"),
            "state_operators": len(ops), "late_rows": total("numRowsDroppedByWatermark")}
