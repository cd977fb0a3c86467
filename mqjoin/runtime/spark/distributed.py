"""The plan on Spark with its stores as partitioned DataFrames (``--spark-mode distributed``):
every store spread over the cluster's executors, each micro-batch evaluated as delta joins
(the driver mode, :mod:`.driver`, keeps the stores in the driver's in-process executor).

**One probe semantics.**  The engine executes the edge rules of
:func:`mqjoin.runtime.rules.plan_rules` — the values the reference and vectorised executors run —
written as Spark SQL: an :class:`~mqjoin.runtime.rules.Insert` adds the tuples travelling on
its edge to a store, a :class:`~mqjoin.runtime.rules.Probe` joins them with a store on its key
and pattern positions, its route and its windows, an :class:`~mqjoin.runtime.rules.Emit` writes
a query's results in the query's relation order, and every rule's
:class:`~mqjoin.runtime.rules.Admit` becomes a WHERE condition (:meth:`StoreEngine.admit_sql`).
A position ``(component, field)`` names a column of the replay log (:meth:`StoreEngine.pos_col`).

**Stores** are DataFrames hash-partitioned by the store's partition attribute into its
``parallelism`` partitions and cut from their lineage with ``localCheckpoint``: their rows stay
on the executors, never on the driver.  A micro-batch replaces a store by ``live part of the
old contents ∪ delta`` (the delta hashed into the same partitions), checkpointed again; Spark's
partition-aware union zips the two inputs partition by partition, so old rows are copied where
they lie and never reshuffled.  Entries out of every window of the batch's smallest ``ts`` are
dropped in the same pass.  The union is built with DataFrame calls on the store's own
DataFrame, not in SQL over its view: Spark compares partitionings by their attributes
(qualifier and nullability included), and a view's qualifier made the union forget the store's
partitioning, after which every probe reshuffled the whole store.

**Probes.**  A routed probe joins the travelling tuples with the store on its key plus ``route
= partition attribute``, the travelling tuples explicitly hashed by the route into the store's
partitions, so only they move (one message per tuple); an unrouted probe broadcasts the
travelling tuples to every partition (one message per tuple and partition).

**Delta join semantics.**  Every input tuple has its arrival number ``_seq`` (the tie order of
docs/model.md §6).  Store entries carry the ``_seq`` of the tuple that created them, and a
tuple travelling for the trigger ``(_seq = s, ts = T)`` joins only entries with ``_sseq < s``
whose components are within their windows of ``T`` — what the reference executor sees when
that tuple arrives, so each result is produced once, by its latest tuple.  Stores are
maintained bottom-up within the batch: a store's delta is computed (probing smaller stores)
before anything probes it.

**Shared steps** (a probe's results feeding several edges, or counted as the messages of the
next probe) are persisted for the batch and read through a temp view.  Replacing a temp view
uncaches every plan that refers to it, so no view a persisted step refers to is replaced within
its batch: a store's view is replaced right after its update, stores are updated bottom-up,
and the batch and step views only at the start of the next batch.

**Exactly once and lost executors.**  Query results of batch ``b`` are written to
``OUT/_batches/batch=b`` (overwrite: a batch run again replaces its own output).  The stores of
a restarted deployment are rebuilt from the replay log (the tuples before the batch that lie
within the largest window) before the batch runs.  The same rebuild recovers from a lost
executor, whose checkpoint blocks are gone with it: a batch that fails because Spark cannot
find store blocks (:func:`lost_state`) rebuilds every store and runs again.

The wiring of a two-query plan (stores bottom-up, their insert edges, the emit edges):

>>> from mqjoin.model.workload import Workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = Workload.build({"A": {"attributes": ["x"]}, "B": {"attributes": ["x"]}, "C": {"attributes": ["x"]}},
...                    {"q1": "A.x = B.x", "q2": "B.x = C.x"}, defaults={"selectivity": 0.1, "rate": 10})
>>> order, incoming, parent, outputs = wiring(plan_rules(optimize(w).plan))
>>> [s.id for s in order], sorted(e.target for e in outputs)
(['A[x]', 'B[x]', 'C[x]'], ['output:q1', 'output:q1', 'output:q2', 'output:q2'])
>>> lost_state(RuntimeError("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_9_0 not found"))
True
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from mqjoin.model.errors import PlanError
from mqjoin.model.filters import sql_condition, sql_literal
from mqjoin.model.workload import Attr, Workload
from mqjoin.planning.plan import Edge, Plan, Store
from mqjoin.runtime.rules import Admit, Emit, Insert, PlanRules, Position, Probe, plan_rules, windows_of
from mqjoin.runtime.spark.session import spark_message
from mqjoin.runtime.spark.source import attr_col, row_col, ts_col

log = logging.getLogger(__name__)

TRAVEL_META = ("_seq", "_T", "_arrival")


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did (all counts measured in Spark)."""

    batch: int
    first_seq: int
    input_rows: int
    started: float  # wall clock, epoch seconds
    seconds: float
    min_ts: float
    max_ts: float
    results: Mapping[str, int]
    latency_mean: Mapping[str, float]  # query → seconds (result commit − trigger arrival)
    latency_p95: Mapping[str, float]
    latency_max: Mapping[str, float]
    probe_messages: Mapping[str, int]  # probe edge label → messages shipped
    store_rows: Mapping[str, int]  # store id → rows held after the batch
    state_bytes: int
    rebuilt: bool = False  # stores were rebuilt from the replay log first (restart)
    phases: Mapping[str, float] = field(default_factory=dict)  # seconds: plan_stores, stores, …
    jobs: int = -1  # Spark jobs the batch ran (-1: unknown)
    stages: int = -1  # Spark stages of those jobs

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}


@dataclass
class _BatchState:
    stores: dict[str, DataFrame] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)  # probe edge → FROM item of its results
    persisted: list[DataFrame] = field(default_factory=list)
    counted: dict[str, str] = field(default_factory=dict)  # probe edge → view of its results
    per_rel: Mapping[int, int] = field(default_factory=dict)  # relation rank → tuples in the batch
    fresh: set[str] = field(default_factory=set)  # stores created empty in this batch


class StoreEngine:
    """The plan-independent machinery of :class:`DeltaJoinEngine`: the replay log's columns
    (and the column of a rule's position), the batch statistics, reading history back for a
    rebuild, probe joins (routed or broadcast, ``_sseq`` exactness and windows), the
    partition-preserving store update, counting views in one job, and a batch's results with
    their latency aggregates."""

    def __init__(self, spark: SparkSession, workload: Workload, replay_log: str, out_dir: str,
                 column_types: Mapping[str, str]):
        self.spark = spark
        self.w = workload
        self.replay_log = replay_log
        self.out_dir = out_dir.rstrip("/")
        self.types = dict(column_types)
        self.rank = workload.relation_rank
        self.windows = {r.name: r.window for r in workload.relations}
        self.next_seq = 0
        self.ss = spark  # the session of the batch being processed

    # -- columns ----------------------------------------------------------------------------

    def rel_cols(self, relation: str) -> list[str]:
        k = self.rank[relation]
        rel = self.w.relation(relation)
        attrs = [attr_col(k, j) for j in range(len(rel.attributes)) if attr_col(k, j) in self.types]
        return [row_col(k), ts_col(k)] + attrs

    def col(self, a: Attr) -> str:
        k = self.rank[a.relation]
        try:
            j = self.w.relation(a.relation).attributes.index(a.name)
        except ValueError:
            raise PlanError(f"plan refers to {a}, which relation {a.relation} does not have") from None
        name = attr_col(k, j)
        if name not in self.types:
            raise PlanError(f"plan joins on {a}, but the input has no column {a.name} for {a.relation}")
        return name

    def pos_col(self, layout: tuple[str, ...], p: Position) -> str:
        """The column of position ``p`` = (component, field) of a tuple laid out as ``layout``
        (:mod:`mqjoin.runtime.rules`: field 0 the row, 1 the ts, 2… the attributes)."""
        relation, f = layout[p[0]], p[1]
        k = self.rank[relation]
        if f < 2:
            return row_col(k) if f == 0 else ts_col(k)
        name = attr_col(k, f - 2)
        if name not in self.types:
            attr = self.w.relation(relation).attributes[f - 2]
            raise PlanError(f"plan joins on {relation}.{attr}, but the input has no column {attr} for {relation}")
        return name

    def admit_sql(self, admit: Admit | None, layout: tuple[str, ...], alias: str = "") -> str:
        """SQL of an :class:`~mqjoin.runtime.rules.Admit` over tuples laid out as ``layout``
        ('' when everything passes), to append to a WHERE clause."""
        if admit is None:
            return ""
        out = []
        for comp, disjunction in admit.tests:
            conjs = [tuple(c for _, c in conj) for conj in disjunction]
            cols = {c.attr: alias + self.pos_col(layout, (comp, f)) for conj in disjunction for f, c in conj}
            out.append(sql_condition(conjs, cols.__getitem__, lambda a: self.types[cols[a].removeprefix(alias)] == "string"))
        return "".join(" AND " + c for c in out)

    def _view(self, kind: str, key: str | int) -> str:
        return f"mq{id(self):x}_{kind}_{key}".replace(":", "_").replace("-", "_")

    def _equal(self, a: str, b: str, left: str = "t", right: str = "s") -> str:
        ta, tb = self.types[a], self.types[b]
        if (ta == "string") != (tb == "string"):  # "1" never equals 1 (values compare as read)
            return "false"
        return f"{left}.{a} = {right}.{b}"

    # -- batches ----------------------------------------------------------------------------

    def _stats(self, batch: DataFrame):
        """(rows, first _seq, min ts, max ts, rows per relation rank) of a batch, or None if empty."""
        rows = batch.groupBy("_rel").agg(F.count(F.lit(1)).alias("n"), F.min("_seq").alias("s0"),
                                         F.min("_ts").alias("t0"), F.max("_ts").alias("t1")).collect()
        if not rows:
            return None
        per_rel = {int(r["_rel"]): int(r["n"]) for r in rows}
        return (sum(per_rel.values()), int(min(r["s0"] for r in rows)), float(min(r["t0"] for r in rows)),
                float(max(r["t1"] for r in rows)), per_rel)

    def _history(self, first_seq: int, since: float | None, session) -> DataFrame:
        """The replayed tuples before ``first_seq`` (with ``ts ≥ since`` unless None), read in
        the batch's session: the rebuilt stores' views must live where it runs."""
        hist = session.read.parquet(self.replay_log).filter(F.col("_seq") < first_seq)
        if since is not None:
            hist = hist.filter(F.col("_ts") >= since)
        return hist.withColumn("_arrival", F.lit(0.0))

    # -- probes -----------------------------------------------------------------------------

    def _probe_join(self, trav: str, view: str, keys: list[tuple[str, str]], routed: bool, parallelism: int,
                    windows: Iterable[tuple[str, float]], select: str, extra: tuple[str, ...] = ()) -> str:
        """SQL of a probe: the travelling tuples ``trav`` (a FROM item, alias ``t``) joined with
        the store ``view`` (alias ``s``) on ``keys`` (travelling column, stored column) — the
        first pair being the route and the store's partition attribute when ``routed`` —
        entries older than the trigger (``_sseq < _seq``) whose ``windows`` (stored ts column,
        window) hold at the trigger's time, and ``extra`` conditions."""
        cond = [self._equal(a, b) for a, b in keys] + ["s._sseq < t._seq"]
        cond.extend(f"t._T - s.{c} <= {float(w)!r}" for c, w in windows)
        cond.extend(extra)
        hint = "SHUFFLE_HASH(t)" if routed else "BROADCAST(t)"
        if routed:
            # the travelling tuples, hashed by the route into the store's p partitions.  Left to
            # itself Spark may instead move the store: when the travelling side is already
            # partitioned (the output of an earlier probe, into that store's p' partitions) it
            # keeps the side with more partitions and reshuffles the other, and a one-partition
            # store (SinglePartition to Spark) gets both sides reshuffled into
            # spark.sql.shuffle.partitions.  Spark drops this exchange when the tuples are
            # already in place (same hash, same p).
            trav = f"(SELECT /*+ REPARTITION({parallelism}, {keys[0][0]}) */ * FROM {trav} x)"
        return f"SELECT /*+ {hint} */ {select} FROM {trav} t JOIN {view} s ON {' AND '.join(cond)}"

    # -- stores -----------------------------------------------------------------------------

    def _replace_store(self, old: DataFrame, deltas: list[str], parallelism: int, partition: str,
                       live: str, fresh: bool) -> DataFrame:
        """A store's next contents: ``old`` filtered by ``live`` (a condition, or '' to keep
        all), then the ``deltas`` (SQL, in the store's columns) hashed into its partitions, cut
        from their lineage — see :meth:`DeltaJoinEngine._update_store` for why it is built
        with DataFrame calls on the store's own DataFrame."""
        if not deltas and not live:
            return old
        kept = old.filter(live) if live else old
        if deltas:
            delta = self.ss.sql(" UNION ALL ".join(deltas)).repartition(parallelism, partition)
            # a store created in this batch holds nothing yet: the delta alone is the store
            new = delta if fresh else kept.union(delta)
        else:
            new = kept
        return new.localCheckpoint(eager=False)

    def _empty_store(self, cols: list[str], parallelism: int, partition: str) -> DataFrame:
        from pyspark.sql.types import StructType

        schema = StructType.fromDDL(", ".join(
            f"`{c}` {self.types.get(c) or ('double' if c.endswith('_ts') else 'bigint')}" for c in cols))
        return self.ss.createDataFrame([], schema).repartition(parallelism, partition).localCheckpoint(eager=False)

    def _count(self, froms: Mapping[str, str], expr: str = "count(*)") -> dict[str, int]:
        """``expr`` (default: rows) of every FROM item in ``froms``, in one Spark job (one job
        per item costs ~0.15–0.6 s each on a local session)."""
        if not froms:
            return {}
        sql = " UNION ALL ".join(f"SELECT {sql_literal(k)} AS k, CAST({expr} AS BIGINT) AS n FROM {f}"
                                 for k, f in froms.items())
        return {r["k"]: int(r["n"] or 0) for r in self.ss.sql(sql).collect()}

    def _input_sql(self, relation: str, where: str = "") -> str:
        """The batch's input tuples of ``relation`` as travelling tuples (``where``: more conditions)."""
        k = self.rank[relation]
        attrs = "".join(f", {c}" for c in self.rel_cols(relation)[2:])
        return (f"SELECT _seq, _ts AS _T, _arrival, _row AS {row_col(k)}, _ts AS {ts_col(k)}{attrs} "
                f"FROM {self._view('batch', 0)} WHERE _rel = {k}{where}")

    def _result_frame(self, per_query: Mapping[str, list[str]], tag: str,
                      extra_aggregates: Callable[[], list] | None = None):
        """The result rows (``query, rows, _seq, _arrival``) of every query's SQL parts, one
        DataFrame, and per query an :class:`Observation` of :func:`arrival_aggregates` (plus
        ``extra_aggregates()``), reported once the frame is written (:func:`_write_overwrite`)."""
        obs: dict[str, Observation] = {}
        union = None
        for qname, parts in per_query.items():
            ob = obs[qname] = Observation(f"out_{qname}_{tag}")
            aggs = arrival_aggregates() + (extra_aggregates() if extra_aggregates else [])
            df = self.ss.sql(" UNION ALL ".join(parts)).observe(ob, *aggs)
            union = df if union is None else union.unionByName(df)
        return union, obs

    def _state_bytes(self) -> int:
        try:
            infos = self.spark.sparkContext._jsc.sc().getRDDStorageInfo()
            return int(sum(i.memSize() + i.diskSize() for i in infos))
        except Exception as exc:  # noqa: BLE001 - a metric, never a failure (not on every cluster manager)
            log.warning("the stores' size is unknown (reported as -1): %s", exc)
            return -1


def wiring(rules: PlanRules) -> tuple[list[Store], dict[str, list[str]], dict[str, str | None], list[Edge]]:
    """How a plan's edge rules connect, as the distributed engine runs them: the stores in
    dependency order (base stores first, then MIRs by size), each store's :class:`Insert`
    edges, each edge's parent (the :class:`Probe` whose results it carries; None for a source
    edge) and the :class:`Emit` edges."""
    plan = rules.plan
    order = sorted(plan.stores, key=lambda s: (len(s.mir.relations), plan.stores.index(s)))
    incoming: dict[str, list[str]] = {s.id: [] for s in plan.stores}
    parent: dict[str, str | None] = {lab: None for labs in rules.sources.values() for lab in labs}
    for rule in rules.edges.values():
        if isinstance(rule, Probe):
            parent.update((o, rule.label) for o in rule.outs)
        elif isinstance(rule, Insert):
            incoming[plan.edge[rule.label].target].append(rule.label)
    return order, incoming, parent, [plan.edge[r.label] for r in rules.edges.values() if isinstance(r, Emit)]


class DeltaJoinEngine(StoreEngine):
    """Runs a :class:`~mqjoin.planning.plan.Plan` as a ``foreachBatch`` function over the replay stream.

    Construct with the plan, the replay log's path and the output directory; pass
    :meth:`process` to ``writeStream.foreachBatch``.  ``on_batch`` receives a
    :class:`BatchReport` after every micro-batch."""

    def __init__(self, spark: SparkSession, plan: Plan, replay_log: str, out_dir: str,
                 column_types: Mapping[str, str], on_batch: Callable[[BatchReport], None] | None = None):
        super().__init__(spark, plan.workload, replay_log, out_dir, column_types)
        self.plan = plan
        self.rules = plan_rules(plan)  # what every edge does: the values every executor runs
        self.on_batch = on_batch
        self.stores: dict[str, DataFrame] = {}  # live, checkpointed store contents
        self.order, self.incoming, self.parent, self.outputs = wiring(self.rules)
        windows = [w for w in self.windows.values()]
        self.horizon = None if any(w is None for w in windows) else max(windows, default=0.0)

    # -- columns ----------------------------------------------------------------------------

    def store_cols(self, store: Store) -> list[str]:
        return ["_sseq"] + [c for r in store.mir.relations for c in self.rel_cols(r)]

    # -- one micro-batch --------------------------------------------------------------------

    def process(self, batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        group = job_group(batch.sparkSession.sparkContext, self, batch_id)
        batch = batch.persist()
        try:
            stats = self._stats(batch)
            if stats is None:
                return
            n, s0, t0, t1, per_rel = stats
            # a restart (or a re-executed batch) first rebuilds the stores from the replay log
            rebuilt = s0 != self.next_seq
            for attempt in range(LOST_STATE_RETRIES + 1):
                try:
                    if rebuilt:
                        self._rebuild(s0, t0, batch.sparkSession)
                    report = self._run(batch, batch_id, s0, n, t0, t1, per_rel, started, write=True)
                    break
                except Exception as exc:
                    if attempt == LOST_STATE_RETRIES or not lost_state(exc):
                        raise
                    # an executor died with store partitions: every store is rebuilt from the
                    # replayed history and the batch runs again (its output is overwritten)
                    log.warning("micro-batch %d lost store partitions with an executor (%s); rebuilding the "
                                "stores from the replay log and running the batch again", batch_id,
                                spark_message(exc))
                    rebuilt = True
        finally:
            batch.unpersist()
        jobs, stages = job_cost(batch.sparkSession.sparkContext, group)
        report = BatchReport(**{**report.__dict__, "rebuilt": rebuilt, "jobs": jobs, "stages": stages})
        if self.on_batch:
            self.on_batch(report)
        self.next_seq = s0 + n  # last, once the batch is written and reported

    def _rebuild(self, first_seq: int, t0: float, session) -> None:
        self._drop_all()
        self.next_seq = 0
        if first_seq == 0:
            return
        hist = self._history(first_seq, None if self.horizon is None else t0 - self.horizon, session).persist()
        try:
            stats = self._stats(hist)
            if stats is not None:
                n, s0, h0, h1, per_rel = stats
                self._run(hist, -1, s0, n, h0, h1, per_rel, time.time(), write=False)
        finally:
            hist.unpersist()

    def _drop_all(self) -> None:
        for df in self.stores.values():
            release_store(df)
        self.stores = {}

    # SQL text is generated per batch: one `spark.sql` call per store and per shared result
    # instead of hundreds of DataFrame calls over py4j (measured: ~0.6 ms each, 2–3 s a batch).

    def _store_view(self, store: Store) -> str:
        return self._view("s", self.plan.stores.index(store))

    def _run(self, batch: DataFrame, batch_id: int, first_seq: int, n: int, t0: float, t1: float,
             per_rel: Mapping[int, int], started: float, write: bool) -> BatchReport:
        bs = _BatchState(per_rel=per_rel)
        try:
            return self._run_batch(bs, batch, batch_id, first_seq, n, t0, t1, started, write)
        except BaseException:
            # a failed batch leaves nothing behind: its persisted steps and the stores it built
            for df in bs.persisted:
                df.unpersist()
            kept = {id(df) for df in self.stores.values()}
            for df in bs.stores.values():
                if id(df) not in kept:
                    release_store(df)
            raise

    def _run_batch(self, bs: _BatchState, batch: DataFrame, batch_id: int, first_seq: int, n: int, t0: float,
                   t1: float, started: float, write: bool) -> BatchReport:
        per_rel = bs.per_rel
        phases: dict[str, float] = {}
        tick = time.time()

        def phase(name: str) -> None:
            nonlocal tick
            now = time.time()
            phases[name] = now - tick
            tick = now

        # foreachBatch hands each batch over in a cloned session: views live there
        self.ss = batch.sparkSession
        batch.createOrReplaceTempView(self._view("batch", 0))
        for store in self.order:  # the contents before this batch
            if store.id not in self.stores:
                self.stores[store.id] = self._empty(store)
                bs.fresh.add(store.id)
            self.stores[store.id].createOrReplaceTempView(self._store_view(store))
        # 1. stores, bottom-up: evict, add this batch's delta; the new contents replace the view
        #    at once, so later steps of this batch probe them (the _seq filter keeps it exact)
        for store in self.order:
            new = self._update_store(store, t0, bs)
            bs.stores[store.id] = new
            new.createOrReplaceTempView(self._store_view(store))
        phase("plan_stores")
        # 2. query outputs (all probe paths to outputs, shared results persisted once)
        lat_obs: dict[str, Observation] = {}
        union = None
        if write:
            per_query: dict[str, list[str]] = {}
            for e in self.outputs:
                emit = self.rules.edges[e.label]
                rows = ", ".join(self.pos_col(e.layout, (i, 0)) for i in emit.order)
                own = self.admit_sql(emit.admit, e.layout, "t.")
                per_query.setdefault(emit.query, []).append(
                    f"SELECT {sql_literal(emit.query)} AS query, array({rows}) AS rows, _seq, _arrival "
                    f"FROM {self._travelling(e.label, bs)} t" + (f" WHERE {own[5:]}" if own else ""))
            union, lat_obs = self._result_frame(per_query, f"{batch_id}_{id(bs)}")
            phase("plan_outputs")
        # one job counts the stores (materialising their checkpoints), the rows of every step
        # that feeds further probes (their messages; the steps stay cached for the write) and
        # the input tuples a filtered probe order admits (only those start it)
        admitted = [p.label for p in self.rules.probes() if self.parent.get(p.label) is None and p.admit is not None]
        counts = self._count({**{f"s{sid}": self._store_view(self.plan.store[sid]) for sid in bs.stores},
                              **({f"e{lab}": view for lab, view in bs.counted.items()} if write else {}),
                              **({f"a{lab}": self._travelling(lab, bs) for lab in admitted} if write else {})})
        store_rows = {sid: counts[f"s{sid}"] for sid in bs.stores}
        fed = {lab: counts[f"e{lab}"] for lab in bs.counted} if write else {}
        starts = {lab: counts[f"a{lab}"] for lab in admitted} if write else {}
        phase("stores")
        if union is not None:
            write_overwrite(union, f"{self.out_dir}/_batches/batch={batch_id}")
        phase("outputs")
        committed = time.time()
        # 3. release the old stores and the batch's temporaries
        for sid, df in bs.stores.items():
            old = self.stores.get(sid)
            if old is not None and old is not df:
                release_store(old)
        self.stores = bs.stores
        for df in bs.persisted:
            df.unpersist()
        results, lmean, lp95, lmax = {}, {}, {}, {}
        for qname, ob in lat_obs.items():
            m = ob.get
            results[qname] = int(m.get("n") or 0)
            if results[qname]:
                lmean[qname], lp95[qname], lmax[qname] = latencies(m, committed)
        msgs = {}
        if write:
            for probe in self.rules.probes():
                parent = self.parent.get(probe.label)
                if parent is None:  # the batch's input tuples of its relation (those admitted, if filtered)
                    rows_in = starts.get(probe.label, per_rel.get(self.rank[probe.travelling[0]], 0))
                else:
                    rows_in = fed.get(parent, 0)
                k = 1 if probe.route is not None else self.plan.store[self.plan.edge[probe.label].target].parallelism
                msgs[probe.label] = k * rows_in
        phase("metrics")
        return BatchReport(phases=phases, batch=batch_id, first_seq=first_seq, input_rows=n, started=started,
                           seconds=time.time() - started, min_ts=t0, max_ts=t1, results=results,
                           latency_mean=lmean, latency_p95=lp95, latency_max=lmax, probe_messages=msgs,
                           store_rows=store_rows if write else {}, state_bytes=self._state_bytes())

    def _travelling(self, label: str, bs: _BatchState) -> str:
        """A FROM item (a view or a parenthesised query) for the tuples travelling along ``label``."""
        parent = self.parent.get(label, "missing")
        if parent == "missing":
            raise PlanError(f"edge {label} is not reachable from any input or probe rule")
        if parent is None:  # an input tuple: it enters a store, or starts a probe order, if admitted
            rule = self.rules.edges[label]
            relation = self.plan.edge[label].layout[0]
            return f"({self._input_sql(relation, self.admit_sql(rule.admit, (relation,)))})"
        return self._probe_result(parent, bs)

    def _probe_result(self, label: str, bs: _BatchState) -> str:
        if label in bs.results:
            return bs.results[label]
        e = self.plan.edge[label]
        store = self.plan.store[e.target]
        rule = self.rules.edges[label]
        if not isinstance(rule, Probe):
            raise PlanError(f"edge {label} carries probe results but is no probe edge")
        if store.id not in bs.stores:
            # its view is still the old contents and will be replaced in this batch: that would
            # drop the cache of every step built on it (see the module doc, Shared steps)
            raise PlanError(f"edge {label} probes {e.target} before that store is updated in the batch "
                            "(a probe's target must be a smaller store than the one it feeds)")
        trav = self._travelling(label, bs)
        stored = rule.mir.relations
        keys = [(self.pos_col(rule.travelling, a), self.pos_col(stored, b)) for a, b in zip(rule.key, rule.pattern)]
        if rule.route is not None:
            pk = (self.pos_col(rule.travelling, rule.route), self.col(rule.layout.partition))
            keys = [pk] + [k for k in keys if k != pk]
        windows = [(self.pos_col(stored, (i, 1)), w) for i, w in rule.windows]
        scols = "".join(f", s.{c}" for c in self.store_cols(store)[1:])
        sql = self._probe_join(trav, self._store_view(store), keys, rule.route is not None, store.parallelism,
                               windows, f"t.*{scols}")
        feeds_probe = any(isinstance(self.rules.edges[o], Probe) for o in rule.outs)
        if not feeds_probe and len(rule.outs) == 1:
            ref = bs.results[label] = f"({sql})"
            return ref
        # persisted: a shared step is computed once per batch, and the rows of a result that
        # feeds probes (their messages) are counted from the cache after the batch.  (Spark's
        # Observation does not report metrics computed inside a cached plan: it would hang.)
        df = self._step_frame(label, sql).persist()
        bs.persisted.append(df)
        view = self._view("r", label)
        df.createOrReplaceTempView(view)
        if feeds_probe:
            bs.counted[label] = view
        bs.results[label] = view
        return view

    def _step_frame(self, label: str, sql: str) -> DataFrame:
        """The results of the shared step ending in probe edge ``label`` (its ``sql``), before
        they are persisted for the batch."""
        return self.ss.sql(sql)

    def _update_store(self, store: Store, t0: float, bs: _BatchState) -> DataFrame:
        """The store's contents after this batch: the live part of the old contents, then this
        batch's delta hashed into the store's partitions, cut from its lineage.

        Built with DataFrame calls on the store's own checkpointed DataFrame (not through its
        SQL view): the union keeps the store's hash partitioning only if the partitioning of
        its first input is expressed in exactly that input's output attributes (Spark 4.3
        compares them with ``==``, qualifiers and nullability included: SPARK-58819), and a
        view would qualify the attributes.  Induction: a checkpoint's partitioning is its
        output attribute — the first checkpoint is the delta (or an empty DataFrame)
        repartitioned by the DataFrame API, which resolves the key to the output attribute
        itself; every later one is ``old ∪ delta`` whose partitioning Spark maps onto the
        union's output, the first input's attributes.  The same identity is what lets Spark
        rename the partitioning along with the columns when a plan scans the store twice."""
        old = self.stores[store.id]
        cols = self.store_cols(store)
        data_cols = ", ".join(cols[1:])
        deltas = [f"SELECT _seq AS _sseq, {data_cols} FROM {self._travelling(lab, bs)} d"
                  for lab in self.incoming[store.id]
                  if not (store.mir.is_base and not bs.per_rel.get(self.rank[store.mir.relations[0]]))]
        if not deltas and store.mir.is_base:  # nothing arrived: keep it as is (eviction can wait)
            return old
        live = " AND ".join(f"{self.pos_col(store.mir.relations, (i, 1))} >= {t0 - float(w)!r}"
                            for i, w in windows_of(self.w, store.mir.relations))
        return self._replace_store(old, deltas, store.parallelism, self.col(store.partition), live,
                                   store.id in bs.fresh)

    def _empty(self, store: Store) -> DataFrame:
        return self._empty_store(self.store_cols(store), store.parallelism, self.col(store.partition))

    def close(self) -> None:
        self._drop_all()


def job_group(sc, engine: object, batch_id: int) -> str:
    """Tag the Spark jobs of a micro-batch (:func:`job_cost` counts them)."""
    group = f"mqjoin-{type(engine).__name__}-{id(engine):x}-{batch_id}"
    # keep the streaming query's own job description ("… batch = N"): the UI and the tests read it
    description = sc.getLocalProperty("spark.job.description") or f"mqjoin micro-batch {batch_id}"
    sc.setJobGroup(group, description, interruptOnCancel=True)
    return group


def job_cost(sc, group: str) -> tuple[int, int]:
    """The Spark jobs and stages a micro-batch ran (its job group), or (-1, -1) when Spark's
    status tracker cannot tell."""
    try:
        tracker = sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(group)
        stages: set[int] = set()
        for j in jobs:
            info = tracker.getJobInfo(j)
            if info is not None:
                stages.update(info.stageIds)
        return len(jobs), len(stages)
    except Exception as exc:  # noqa: BLE001 - a metric, never a failure
        log.warning("the Spark jobs of %s are unknown (reported as -1): %s", group, exc)
        return -1, -1


ARRIVAL_TYPE = "decimal(20,9)"  # epoch seconds to the nanosecond, summed exactly


def arrival_aggregates(where=None, suffix: str = "") -> list:
    """Aggregates over a batch's result rows for :func:`latencies`: ``n`` and the mean, minimum
    and 5th percentile of ``_arrival`` (only over the rows where the boolean column ``where``
    holds, when given; every alias gets ``suffix``, so one aggregation can hold several sets).

    Taken over ``_arrival`` as a decimal: a double sum of n epoch times (~1.8e9 s) is rounded
    to a few microseconds, so a double mean of n *equal* arrivals came out up to ~6 µs away
    from their minimum (measured: 1000 rows, mean − min = 5.96e-6) and the reported mean
    latency exceeded the maximum.  The decimal sum is exact and its mean is rounded to a scale
    finer than the inputs', so ``min ≤ mean ≤ max`` and the percentile (an input value) holds
    exactly."""
    a = F.col("_arrival").cast(ARRIVAL_TYPE)
    one = F.lit(1)
    if where is not None:
        a, one = F.when(where, a), F.when(where, one)
    return [F.count(one).alias("n" + suffix), F.avg(a).alias("mean" + suffix), F.min(a).alias("min" + suffix),
            F.percentile_approx(a, 0.05, 1000).alias("p05" + suffix)]


def latencies(metrics: Mapping[str, Any], committed: float) -> tuple[float, float, float]:
    """(mean, p95, max) result latency in seconds — commit time minus the arrival of the tuple
    that triggered the result — from :func:`arrival_aggregates`.  Rounding to float and
    subtracting are monotone, so ``mean ≤ max`` and ``p95 ≤ max`` hold exactly (and all three
    are equal when every result of the batch has the same arrival)."""
    return (committed - float(metrics["mean"]), committed - float(metrics["p05"]),
            committed - float(metrics["min"]))


def write_overwrite(df: DataFrame, path: str) -> None:
    """Write a batch's results (overwrite: a batch re-executed after a restart replaces its own
    output).  No coalesce: merging partitions would keep every join's hash table of the merged
    partitions in one task's memory until it ends — measured: OOM."""
    df.write.mode("overwrite").parquet(path)


def release_store(df: DataFrame) -> None:
    """Free the blocks of a locally checkpointed store (the driver holds no rows).  When Spark
    cannot be asked (its JVM gone), Spark's cleaner frees them once the RDD is collected."""
    try:
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception as exc:  # noqa: BLE001 - freeing early is an optimisation, never a failure
        log.debug("store blocks left to Spark's cleaner: %s", exc)


#: how often a micro-batch is run again after it lost store partitions with an executor
LOST_STATE_RETRIES = 2
#: what Spark says when a task needs blocks of a locally checkpointed store that an executor
#: took with it (the store is then rebuilt from the replay log)
LOST_STATE_MARKERS = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "ExecutorLostFailure")


def lost_state(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark failing a job because an executor was lost with state.

    >>> lost_state(RuntimeError("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_5_1 not found!"))
    True
    >>> lost_state(RuntimeError("java.io.IOException: Mkdirs failed"))
    False
    """
    text = str(getattr(exc, "desc", None) or exc)
    return any(m in text for m in LOST_STATE_MARKERS)


def column_types(spark_ddl: str) -> dict[str, str]:
    """``{column: spark type}`` from the replay source's DDL."""
    out = {}
    for part in spark_ddl.split(", "):
        name, typ = part.rsplit(" ", 1)
        out[name.strip("`")] = typ
    return out
