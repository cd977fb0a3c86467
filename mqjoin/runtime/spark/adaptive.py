"""Adaptivity on Spark (paper Section VI): the plan of every epoch, stores with one container
per epoch, queries added and removed while the deployment runs.

The executable specification is the adaptive reference executor
(:mod:`mqjoin.runtime.adaptive`); this engine reproduces its results *and its probe messages*
epoch by epoch (the tests compare both), with the delta-join machinery of :mod:`.engine`.  The
controller (:class:`mqjoin.adaptive.AdaptiveController`) runs on the driver, as in the
reference; only scalars (row counts, agreeing pairs, message counts) reach it.

Usage (a running Spark job, so not a doctest; tests/test_spark_adaptive.py runs it)::

    d = deploy(workload, "data/", "out/", adaptive=AdaptivePolicy(epoch=1.0),
               changes=[QueryChange(at=3.5, add={"q2": "S(b), T(b)"})], speedup=10)
    d.submit(add={"q3": "R(a), T(a)"})         # live: at the current event time
    d.wait(); d.snapshot().timeline()          # the AdaptiveRun interface of the reference

Mechanism
---------

* **Epoch slices.**  A micro-batch is cut into its epochs (one Spark aggregate per batch
  groups its rows by ``⌊(ts − origin) / epoch⌋`` — the floating-point formula of
  :meth:`~mqjoin.adaptive.AdaptivePolicy.epoch_of`; IEEE doubles give the JVM and Python the
  same epoch).  Arrivals are ordered by ``ts``, so every epoch is a contiguous ``_seq`` range
  and the slices run in arrival order, each with its epoch's plan; the ``_sseq < _seq`` rule of
  :mod:`.engine` keeps every slice exact.  When a slice starts a new epoch, the driver closes
  the previous one (its sample, its :class:`~mqjoin.runtime.adaptive.EpochRecord`) and enters
  the new one: the controller decides, and the reference executor's container bookkeeping
  (:class:`~mqjoin.runtime.adaptive.ContainerIndex`, the same code) does the reference counting.
* **Stores per layout.**  A physical store per *layout* — (namespace, MIR identity without
  selectivities, partition attribute): the reference's container key without the epoch — with
  an ``_ep`` column, the epoch of the entry's latest component; the container of epoch ℓ is
  the rows with ``_ep = ℓ``.  The stores are updated exactly as :mod:`.engine` updates its
  stores (partition-preserving union of the live part and the delta, checkpointed), so they
  stay hash-partitioned by their layout's attribute.  Reference counting drops whole epochs:
  a layout that loses all its epochs is released; older epochs that expired are filtered out
  (``_ep ≥ first live epoch``) the next time the store is rewritten.
* **Probes across epochs.**  A probe for the MIR ``M`` in epoch ``e`` reaches the epochs
  ``ℓ ≤ e`` that have a container of ``M``; per epoch the container is *chosen* as the
  reference chooses it (the plan's own layout, else one the travelling tuple can route to,
  else the first), and the chosen epochs are grouped by layout: one join per layout group,
  routed (the travelling side hashed into the store's partitions) when the travelling tuple
  knows that layout's partition attribute, else broadcast — each under its own layout's
  rules — restricted to ``_ep IN (group)`` and ``_ep ≥ reach(T)`` (the reference's window
  reach, computed per travelling row in SQL with the same formula).
* **Gaps** (epochs with data but no container of ``M``: not materialised then, or dropped) are
  probed iteratively as the reference does: through the base stores of ``M``'s relations,
  one relation at a time in the reference's order, filtered to epochs ≤ the latest gap, until
  the relations left form an MIR that has containers (probed as a whole, recursively); the
  rows whose latest component's epoch is a gap are kept.
* **Messages** are counted as the reference counts them: per travelling row, per layout group
  reached, 1 when routed and ``p`` when broadcast (reached depends on the row's ``T``: a
  ``CASE`` over its reach, summed in Spark), and per row of every iterative hop — the history
  messages.  One Spark job per slice sums them over the persisted travelling rows.
* **Sampling in Spark.**  Per epoch, value counts of the attributes the controller tracks
  (``tracked(epoch)`` at the epoch's start, as the reference fixes its counters then) are
  aggregated in Spark into a small checkpointed table (one row per attribute and value),
  accumulated over the epoch's slices; at the epoch's end one Spark job joins the counts of
  every tracked pair: ``Σ_v cnt_a(v)·cnt_b(v)``.  With ``policy.sample < 1`` the values are
  hash-sampled as :func:`mqjoin.adaptive.sampled` samples them: integers by the same
  multiplicative hash in SQL, other values (strings, fractional doubles) by a Python UDF calling
  ``sampled`` itself (Python's ``repr`` has no SQL equivalent).
* **Query changes** submitted live (:meth:`AdaptiveDeployment.submit`, at the current event
  time) go to the controller at once, under the lock the epoch transitions take, and are
  appended to ``CHECKPOINT/adaptive/changes.jsonl`` with the epoch the controller was in.
* **Exactly once across restarts.**  Results are written per slice to
  ``OUT/_batches/batch=b/epoch=e`` (overwrite: a re-executed batch replaces its own output).
  A restarted engine re-derives everything from the replay log: it drives a fresh controller
  through every epoch of the history with the same samples — recomputed in Spark — applying
  each persisted change right after entering the epoch it was submitted in, so it makes the
  same decisions (given a deterministic optimiser); epochs that no probe can reach any more
  (older than the largest window) only sample (one Spark job for all of them), the others
  re-run through the same slice logic without writing.  Per-slice metrics are persisted in
  ``CHECKPOINT/adaptive/slices`` so the epoch timeline survives restarts.

Latency and backlog
-------------------

An epoch's latency is the measured result latency — the commit time of the slice's output
minus the arrival (``_arrival``, from the paced replay) of the tuple that triggered the result
— with the mean and maximum exact over the epoch's results and the 95th percentile merged
from per-slice quantile sketches (``percentile_approx`` at 1 % steps; one slice gives the
engine's figure exactly).  ``backlog_max``: the largest number of input tuples that had
arrived (by the replay's pacing formula) but were not yet processed, sampled at every slice
commit; unpaced replays serve everything at once, so there it is 0 (not measurable).

Cost.  Every epoch of a micro-batch is a slice with its own Spark job (stores, counts and
messages), and every batch one write of all its slices' results, so the fixed cost is per
epoch, not per tuple.  Measured on the 2-core machine (local[2], load average 2–4 from other
jobs): a two-query workload over 4 relations, plans switching every epoch, 6 slices in 2
batches: 25–50 s per deployment; three queries over 5 relations, 10 slices: 100–200 s (the
write job of a batch ran 150–185 stages, ~670 tasks).  Merging the slices of a batch into
fewer jobs is the obvious next step; it was not done.

Alternatives considered:

* one physical store (DataFrame) per container, i.e. per (layout, epoch): no ``_ep`` filter,
  but a probe then joins every epoch's container separately or unions them (which loses the
  partitioning — see :mod:`.engine`, "Rejected", whose measurements these are): 1M rows in 4
  segments cost 0.66–0.76 s per probe vs 0.2–0.3 s in one, 16 segments 2.2–2.7 s; a 5 s
  window at 1 s epochs is 6+ containers per layout.  (The cost of the ``_ep IN (…)`` filter
  on one large store was not measured separately.)
* counting values on the driver (collecting the tracked columns of every slice) instead of
  count tables in Spark: moves every tuple's join values to the driver;
* a message count of ``rows × constant`` per probe (as :mod:`.engine` does): wrong whenever a
  slice's tuples straddle the reach of an older layout — the reference counts per tuple.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...adaptive import (
    AdaptiveController,
    AdaptivePolicy,
    EpochSample,
    Optimizer,
    QueryChange,
    lifetimes,
)
from ...candidates import MIR
from ...errors import AdaptiveError, DataError, EngineError, PlanError
from ...plan import Plan, ProbeRule, Store, route_attribute
from ...tables import Table, read_inputs, write_results
from ...workload import Attr, JoinClass, Workload, is_connected
from ..adaptive import AdaptiveRun, EpochRecord
from ..executor import ContainerIndex
from ..rules import Layout, MirKey, layout_of, mir_key, probe_pairs
from .deployment import Deployment, Pacing, committed_seq
from .engine import ARRIVAL_TYPE, StoreEngine, latencies, release_store, sql_literal, wiring, write_overwrite
from .source import row_col, ts_col

#: quantiles of the per-slice latency sketches (percentile_approx of the arrivals)
SKETCH = tuple(j / 100 for j in range(101))


# --------------------------------------------------------------------------------------------
# the reference executor's container bookkeeping, on the driver
# --------------------------------------------------------------------------------------------


class _Containers(ContainerIndex):
    """The reference executor's container bookkeeping (:class:`ContainerIndex`), with the
    window reach in SQL (the rows themselves live in Spark)."""

    def __init__(self, policy: AdaptivePolicy, windows):
        super().__init__(policy.epoch_of, windows)
        self.policy = policy

    def reach_sql(self, mk: MirKey, T: str) -> str | None:
        """:meth:`reach` of a travelling row's ``T`` in SQL (same double arithmetic), or None
        when a window is unbounded (every epoch is within reach)."""
        mw = self.maxwin(mk)
        if mw is None:
            return None
        return f"(FLOOR((({T} - {_dbl(mw)}) - {_dbl(self.policy.origin)}) / {_dbl(self.policy.epoch)}) - 1)"


def _dbl(x: float) -> str:
    """An exact double literal (``repr`` round-trips; the ``D`` suffix makes it a double)."""
    return f"{float(x)!r}D"


# --------------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------------


@dataclass
class _Slice:
    """The rows of one epoch in one batch: ``_seq`` in ``[s0, s1)``."""

    epoch: int
    s0: int
    s1: int
    t0: float
    t1: float
    per_rel: dict[int, int]  # relation rank → rows
    first: dict[int, int]  # relation rank → first _seq (order of first arrival)
    a0: float | None  # arrival (wall clock) of the row s0

    @property
    def rows(self) -> int:
        return self.s1 - self.s0


@dataclass
class _Target:
    """What a probe looks for: the MIR ``mir`` (identity ``mk``) from a travelling layout,
    with the predicate (travelling attribute, stored attribute); ``own`` is the plan's layout
    (preferred when an epoch has several) and ``own_route`` its edge's route."""

    mir: MIR
    mk: MirKey
    classes: tuple[JoinClass, ...]
    travelling: tuple[str, ...]
    pred: tuple[tuple[Attr, Attr], ...]
    own: Layout | None = None
    own_route: Attr | None = None
    routes: dict = field(default_factory=dict)


@dataclass
class _Prepared:
    plan: Plan
    order: list[Store]
    incoming: dict[str, list[str]]
    parent: dict[str, str | None]
    outputs: list
    targets: dict[str, _Target]


@dataclass
class _SliceState:
    sl: _Slice
    pidx: int
    prep: _Prepared
    write: bool
    tag: str
    results: dict[str, str] = field(default_factory=dict)  # probe edge → FROM item
    persisted: list[DataFrame] = field(default_factory=list)
    counters: list = field(default_factory=list)  # (FROM item, SQL messages per row, history?)
    new_stores: dict[Layout, DataFrame] = field(default_factory=dict)
    fresh: set = field(default_factory=set)
    retired: list = field(default_factory=list)
    seq: int = 0
    started: float = 0.0
    phases: dict = field(default_factory=dict)
    frame: DataFrame | None = None
    obs: dict = field(default_factory=dict)
    store_rows: dict = field(default_factory=dict)
    messages: int = 0
    history: int = 0
    written: float = 0.0
    seconds: float = 0.0


@dataclass
class _Open:
    """The epoch being processed: tuples per relation, the attributes counted (tracked at its
    start), the value counts so far (a checkpointed DataFrame) or — for epochs the restart
    only samples — their agreeing pairs, computed for all of history at once."""

    epoch: int
    plan: int
    attrs: tuple[Attr, ...]
    n: dict[str, int] = field(default_factory=dict)
    counts: DataFrame | None = None
    sums: dict | None = None  # pair → agreeing pairs over the counts so far
    store_rows: dict[str, int] = field(default_factory=dict)
    containers: int | None = None


class AdaptiveEngine(StoreEngine):
    """Runs a workload adaptively as a ``foreachBatch`` function (see the module doc).

    ``state_dir`` holds the submitted changes and the per-slice metrics (for restarts);
    ``on_event`` receives the events of :class:`AdaptiveDeployment` (``epoch``, ``switch``,
    ``batch``)."""

    def __init__(self, spark, workload: Workload, policy: AdaptivePolicy, changes: Iterable[QueryChange],
                 optimizer: Optimizer | None, full: Workload, replay_log: str, out_dir: str,
                 column_types: Mapping[str, str], state_dir: Path, pacing: Pacing,
                 on_event: Callable[[dict], None] | None = None):
        super().__init__(spark, full, replay_log, out_dir, column_types)
        self.base = workload
        self.policy = policy
        self.changes = list(changes)
        self.optimizer = optimizer
        self.state_dir = Path(state_dir)
        self.pacing = pacing
        self.on_event = on_event
        self.lock = threading.RLock()
        import pyarrow.parquet as pq

        self.log_ts = pq.read_table(replay_log, columns=["_ts"])["_ts"].to_numpy()
        self.total = len(self.log_ts)
        self.attr_ids: dict[Attr, int] = {}
        self.slices: dict[tuple[int, int], dict] = {}  # (batch, epoch) → persisted slice metrics
        self._load_slices()
        self.submitted = self._load_changes()  # (change, epoch) in submission order
        self.ss = spark
        self._reset()

    # -- state --------------------------------------------------------------------------------

    def _reset(self) -> None:
        """A fresh start: no stores, a new controller with the changes known before the first
        epoch; the changes submitted later wait for their epochs."""
        for df in getattr(self, "stores", {}).values():
            release_store(df)
        early = [c for c, e in self.submitted if e is None]
        self.ctl = AdaptiveController(self.base, self.policy, self.changes + early, self.optimizer)
        self.pending: dict[int, list[QueryChange]] = {}
        for c, e in self.submitted:
            if e is not None:
                self.pending.setdefault(e, []).append(c)
        self.meta = _Containers(self.policy, self.windows)
        self.stores: dict[Layout, DataFrame] = {}
        self.layout_ids: dict[Layout, int] = getattr(self, "layout_ids", {})
        self.min_live: dict[Layout, int] = {}
        self.samples: dict[int, EpochSample] = {}
        self.records: list[EpochRecord] = []
        self.prepared: dict[int, _Prepared] = {}
        self.open: _Open | None = None
        self.closing: list[_Open] = []  # ended epochs whose records wait for their results' commit
        self.deferred = False  # True while a batch's slices run (their results are written at its end)
        self.retire: list[DataFrame] = []  # replaced stores, freed once the batch's results are written
        self.event_time: float | None = None
        self.next_seq = 0
        self.switches_seen = 0
        self.finished = False

    def close(self) -> None:
        for df in self.stores.values():
            release_store(df)
        self.stores = {}
        if self.open is not None and self.open.counts is not None:
            release_store(self.open.counts)

    def _load_slices(self) -> None:
        d = self.state_dir / "slices"
        if d.is_dir():
            for p in sorted(d.glob("*.json")):
                rec = json.loads(p.read_text())
                self.slices[(rec["batch"], rec["epoch"])] = rec

    def _load_changes(self) -> list[tuple[QueryChange, int | None]]:
        p = self.state_dir / "changes.jsonl"
        out = []
        if p.exists():
            for line in p.read_text().splitlines():
                if line.strip():
                    d = json.loads(line)
                    c = d["change"]
                    out.append((QueryChange(c["at"], c["add"], tuple(c["remove"]), c["selectivities"]), d["epoch"]))
        return out

    def _save_json(self, path: Path, data: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, default=str))
        tmp.replace(path)

    # -- query changes ------------------------------------------------------------------------

    def submit(self, change: QueryChange) -> int:
        """Give ``change`` to the controller now and persist it with the controller's epoch."""
        with self.lock:
            epoch = self.ctl.submit(change)
            rec = {"change": change.to_dict(), "epoch": self.ctl.epoch}
            p = self.state_dir / "changes.jsonl"
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.submitted.append((change, self.ctl.epoch))
            return epoch

    # -- one micro-batch ----------------------------------------------------------------------

    def process(self, batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        batch = batch.persist()
        try:
            self.ss = batch.sparkSession
            slices = self._slices(batch)
            if not slices:
                return
            rebuilt = False
            if slices[0].s0 != self.next_seq:  # a restart (or a re-executed batch): rebuild
                self._rebuild(slices[0].s0, slices[0].t0, batch.sparkSession)
                rebuilt = True
                self.ss = batch.sparkSession
            batch.createOrReplaceTempView(self._view("batch", 0))
            self._register_udfs()
            states = [self._slice(sl, batch_id, write=True) for sl in slices]
            if slices[-1].s1 >= self.total:  # the input is consumed: its last epoch ends
                with self.lock:
                    self._close_epoch(sample=False)
                    self.finished = True
            done = self._commit(states, batch_id, started)
        finally:
            batch.unpersist()
        if self.on_event:
            self.on_event({"kind": "batch", "batch": batch_id, "started": started,
                           "seconds": time.time() - started, "rebuilt": rebuilt, "slices": done,
                           "state_bytes": self._state_bytes()})
        self.next_seq = slices[-1].s1  # last: a deployment is done once this covers the input

    def _commit(self, states: list, batch_id: int, started: float) -> list[dict]:
        """Write the batch's results (one write; overwrite: a re-executed batch replaces its
        own output), then the slices' metrics, the epochs that ended, and free the stores the
        slices replaced."""
        union = None
        for st in states:
            if st.frame is not None:
                union = st.frame if union is None else union.unionByName(st.frame)
        if union is not None:
            write_overwrite(union, f"{self.out_dir}/_batches/batch={batch_id}")
        committed = time.time()
        done = []
        for st in states:
            sl = st.sl
            lat, results = {}, {}
            for q, ob in st.obs.items():
                m = ob.get
                n = int(m.get("n") or 0)
                results[q] = n
                if n:
                    mean, p95, mx = latencies(m, committed)
                    lat[q] = {"n": n, "mean": mean, "p95": p95, "max": mx,
                              "sketch": [committed - float(x) for x in reversed(m["qs"])]}
            record = {"batch": batch_id, "epoch": sl.epoch, "s0": sl.s0, "s1": sl.s1, "rows": sl.rows,
                      "t0": sl.t0, "t1": sl.t1, "started": st.started, "committed": committed,
                      "seconds": st.seconds + (committed - st.written) / len(states), "results": results,
                      "latency": lat, "messages": st.messages, "history": st.history,
                      "backlog": self._backlog(sl, committed), "plan": st.pidx, "store_rows": st.store_rows,
                      "phases": st.phases}
            self.slices[(batch_id, sl.epoch)] = record
            self._save_json(self.state_dir / "slices" / f"{batch_id}_{sl.epoch}.json", record)
            done.append(record)
        for st in states:
            for df in st.persisted:
                df.unpersist()
        for df in self.retire:
            release_store(df)
        self.retire = []
        with self.lock:
            self._finish_records()
        return done

    def _slices(self, rows: DataFrame, view: str | None = None) -> list[_Slice]:
        """The epochs of ``rows`` as contiguous ``_seq`` ranges (one Spark aggregate)."""
        pol = self.policy
        ep = f"FLOOR((_ts - {_dbl(pol.origin)}) / {_dbl(pol.epoch)})"
        name = view or self._view("stats", 0)
        rows.createOrReplaceTempView(name)
        got = self.ss.sql(f"SELECT _rel, {ep} AS e, count(1) AS n, min(_seq) AS s0, max(_seq) AS s1, "
                          f"min(_ts) AS t0, max(_ts) AS t1, min_by(_arrival, _seq) AS a0 FROM {name} "
                          f"GROUP BY _rel, {ep}").collect()
        by: dict[int, list] = {}
        for r in got:
            by.setdefault(int(r["e"]), []).append(r)
        out = []
        for e in sorted(by):
            rs = by[e]
            s0 = min(int(r["s0"]) for r in rs)
            first = min(rs, key=lambda r: int(r["s0"]))
            out.append(_Slice(e, s0, max(int(r["s1"]) for r in rs) + 1, float(min(r["t0"] for r in rs)),
                              float(max(r["t1"] for r in rs)), {int(r["_rel"]): int(r["n"]) for r in rs},
                              {int(r["_rel"]): int(r["s0"]) for r in rs},
                              None if first["a0"] is None else float(first["a0"])))
        for a, b in zip(out, out[1:]):
            if a.s1 != b.s0 or a.rows != sum(a.per_rel.values()):
                raise EngineError(f"the replayed rows of epoch {a.epoch} are not contiguous in arrival order "
                                  f"(_seq {a.s0}–{a.s1 - 1}, next epoch from {b.s0}): is the replay log sorted?")
        return out

    # -- epochs -------------------------------------------------------------------------------

    def _transition(self, epoch: int, T: float) -> None:
        """Close the open epoch, enter ``epoch`` (the controller decides), reference counting."""
        self._close_epoch(sample=True)
        ctl = self.ctl
        plan = ctl.enter(epoch, self.samples)
        pidx = ctl.plan_of[epoch]
        self.meta.open_epoch(epoch, plan, ctl.retained(epoch), T, ctl.full)
        for layout in list(self.stores):
            eps = self.meta.epochs(layout)
            if not eps:  # freed once the results of the batch's slices so far are written
                self.retire.append(self.stores.pop(layout))
                self.min_live.pop(layout, None)
            else:
                self.min_live[layout] = eps[0]
        attrs = tuple(dict.fromkeys(a for p in ctl.tracked(epoch) for a in p))
        for a in attrs:
            self.attr_ids.setdefault(a, len(self.attr_ids))
        self.open = _Open(epoch, pidx, attrs)
        for change in self.pending.pop(epoch, []):  # replay: submitted while this epoch ran
            ctl.submit(change)
        self._emit_switches()

    def _close_epoch(self, sample: bool) -> None:
        op = self.open
        if op is None:
            return
        self.open = None
        e = op.epoch
        if sample:
            present = set(op.attrs)
            pairs = [p for p in self.ctl.tracked(e) if p[0] in present and p[1] in present]
            sums = dict(op.sums or {})
            todo = [p for p in pairs if p not in sums and (p[1], p[0]) not in sums]
            if todo and op.counts is not None:  # pairs that appeared after the epoch's last slice
                sums.update(self._pair_sums(op.counts, todo).get(e, {}))
            frac = self.policy.sample
            self.samples[e] = EpochSample(e, dict(op.n), {p: sums.get(p, sums.get((p[1], p[0]), 0)) / frac
                                                          for p in pairs})
        if op.counts is not None:
            self.retire.append(op.counts)
        op.containers = self.meta.count()
        self.closing.append(op)
        if not self.deferred:
            self._finish_records()

    def _finish_records(self) -> None:
        """The records of the epochs that ended, once their slices' metrics are known."""
        for op in self.closing:
            rec = self._record(op)
            self.records.append(rec)
            self._emit_switches()
            if self.on_event:
                self.on_event({"kind": "epoch", **rec.to_dict()})
        self.closing = []

    def _emit_switches(self) -> None:
        switches = [d for d in self.ctl.decisions if d.switched]
        new = switches[self.switches_seen:]
        self.switches_seen = len(switches)
        if self.on_event:
            for d in new:
                self.on_event({"kind": "switch", **d.to_dict()})

    def _record(self, op: _Open) -> EpochRecord:
        e = op.epoch
        plan = self.ctl.plans[op.plan]
        queries = tuple(plan.workload.query_names)
        parts = [r for (b, ep), r in sorted(self.slices.items()) if ep == e]
        results = {q: sum(r["results"].get(q, 0) for r in parts) for q in queries}
        lat = _merge_latencies([x for r in parts for x in r["latency"].values()])
        return EpochRecord(
            epoch=e, start=self.policy.start(e), plan=op.plan, queries=queries,
            input_tuples=sum(r["rows"] for r in parts) if parts else sum(op.n.values()),
            results=results, probe_messages=sum(r["messages"] for r in parts),
            history_messages=sum(r["history"] for r in parts),
            state_rows=sum(op.store_rows.values()), containers=op.containers if op.containers is not None
            else self.meta.count(), stores=dict(op.store_rows),
            busy_seconds=sum(r["seconds"] for r in parts), latency_mean=lat[0], latency_p95=lat[1],
            latency_max=lat[2], backlog_max=max((r["backlog"] for r in parts), default=0))

    # -- one epoch slice ----------------------------------------------------------------------

    def _slice(self, sl: _Slice, batch_id: int, write: bool, light: dict | None = None) -> _SliceState | None:
        """Run the rows of one epoch of a batch with that epoch's plan: the stores (Spark
        computes them in the slice's one job, with every count the driver needs), and — when
        ``write`` — the results as a DataFrame that the batch writes at its end."""
        started = time.time()
        with self.lock:
            self.deferred = write
            if self.open is None or self.open.epoch != sl.epoch:
                self._transition(sl.epoch, sl.t0)
            self.event_time = sl.t0
            op = self.open
            names = {k: r for r, k in self.rank.items()}
            for k in sorted(sl.per_rel, key=lambda k: sl.first[k]):
                op.n[names[k]] = op.n.get(names[k], 0) + sl.per_rel[k]
        if light is not None:  # a history epoch no probe can reach: its sample only
            op.sums = light.get(sl.epoch, {})
            with self.lock:
                self.event_time = sl.t1
            return None
        prep = self._prepare(op.plan)
        st = _SliceState(sl, op.plan, prep, write, f"{batch_id}_{sl.epoch}_{id(sl)}", started=started)
        tick = time.time()

        def phase(name: str) -> None:
            nonlocal tick
            now = time.time()
            st.phases[name] = now - tick
            tick = now

        for layout, df in self.stores.items():  # the contents before this slice
            df.createOrReplaceTempView(self._store_view(layout))
        # 1. stores of the epoch's plan, bottom-up (the _seq rule keeps later probes exact)
        for store in prep.order:
            self._update_store(store, st)
        # 2. value counts of the tracked attributes
        counts = self._update_counts(op, sl, st)
        # 3. results of the epoch's queries (a DataFrame: the batch writes all its slices at once)
        if write:
            per_query: dict[str, list[str]] = {}
            for e in prep.outputs:
                q = prep.plan.workload.query(e.target.split(":", 1)[1])
                cols = ", ".join(row_col(self.rank[r]) for r in q.relations)
                per_query.setdefault(q.name, []).append(
                    f"SELECT {sql_literal(q.name)} AS query, array({cols}) AS rows, _seq, _arrival "
                    f"FROM {self._travelling(e.label, st)} t")
            st.frame, st.obs = self._result_frame(per_query, st.tag, _sketch)
            for lab, e in prep.plan.edge.items():  # every probe: its messages
                if e.kind == "probe":
                    self._probe_result(lab, st)
        phase("plan")
        # 4. one Spark job: the new stores and counts, rows per store, messages, agreeing pairs
        layouts = list({**self.stores, **st.new_stores})
        scalars = {f"s{i}": f"SELECT 1 AS v FROM {self._store_view(layout)}" for i, layout in enumerate(layouts)}
        pairs = []
        if counts is not None:
            scalars["counts"] = f"SELECT 1 AS v FROM {self._view('counts', 0)}"
            with self.lock:
                present = set(op.attrs)
                pairs = [p for p in self.ctl.tracked(sl.epoch) if p[0] in present and p[1] in present]
            for k, (a, b) in enumerate(pairs):
                sql = self._pair_sql(self._view("counts", 0), a, b, grouped=False)
                if sql is not None:
                    scalars[f"p{k}"] = sql
        if write:
            for k, (src, expr, _) in enumerate(st.counters):
                scalars[f"m{k}"] = f"SELECT {expr} AS v FROM {src} x"
        got = self._scalars(scalars)
        phase("job")
        rows: dict[str, int] = {}
        for i, layout in enumerate(layouts):
            label = self._label(layout)
            rows[label] = rows.get(label, 0) + got.get(f"s{i}", 0)
        st.store_rows = op.store_rows = rows
        if counts is not None:
            op.sums = {p: got.get(f"p{k}", 0) for k, p in enumerate(pairs)}
        if write:
            msgs = [got.get(f"m{k}", 0) for k in range(len(st.counters))]
            st.messages = sum(msgs)
            st.history = sum(n for (_, _, h), n in zip(st.counters, msgs) if h)
        # 5. the new stores replace the old ones (freed once the batch's results are written)
        for layout, df in st.new_stores.items():
            old = self.stores.get(layout)
            if old is not None and old is not df:
                (self.retire if write else []).append(old)
                if not write:
                    release_store(old)
            self.stores[layout] = df
        for df in st.retired:
            release_store(df)
        if not write:
            for df in st.persisted:
                df.unpersist()
        st.written = time.time()
        st.seconds = st.written - started
        with self.lock:
            self.event_time = sl.t1
        return st

    def _scalars(self, parts: Mapping[str, str]) -> dict[str, int]:
        """The sum of the column ``v`` of each query of ``parts``, all in one Spark job with one
        aggregation (a union of per-query aggregates costs a shuffle stage each)."""
        if not parts:
            return {}
        rows = " UNION ALL ".join(f"SELECT {sql_literal(k)} AS k, CAST(v AS BIGINT) AS v FROM ({q}) q{i}"
                                  for i, (k, q) in enumerate(parts.items()))
        return {r["k"]: int(r["n"] or 0) for r in self.ss.sql(f"SELECT k, sum(v) AS n FROM ({rows}) u GROUP BY k").collect()}

    def _backlog(self, sl: _Slice, when: float) -> int:
        """Tuples arrived by ``when`` (by the replay's pacing) but not processed (``_seq ≥ s1``)."""
        if sl.a0 is None or not (self.pacing.rate or self.pacing.speedup):
            return 0
        import numpy as np

        if self.pacing.rate:
            arrived = min(self.total, sl.s0 + math.floor((when - sl.a0) * self.pacing.rate) + 1)
        else:
            horizon = float(self.log_ts[sl.s0]) + (when - sl.a0) * self.pacing.speedup
            arrived = int(np.searchsorted(self.log_ts, horizon, side="right"))
        return max(0, arrived - sl.s1)

    # -- plans --------------------------------------------------------------------------------

    def _prepare(self, pidx: int) -> _Prepared:
        got = self.prepared.get(pidx)
        if got is not None:
            return got
        plan = self.ctl.plans[pidx]
        order, incoming, parent, outputs = wiring(plan)
        nodes = {n.edge: n for n in plan.nodes}
        targets = {}
        for e in plan.edges:
            if e.kind == "probe":
                st = plan.store[e.target]
                rule = plan.rules[e.target][e.label]
                if not isinstance(rule, ProbeRule):
                    raise PlanError(f"edge {e.label} probes {e.target} but its rule is not a probe rule")
                targets[e.label] = _Target(st.mir, mir_key(st.mir), nodes[e.label].step.classes, e.layout,
                                           rule.predicate, layout_of(st), e.route)
        got = self.prepared[pidx] = _Prepared(plan, order, incoming, parent, outputs, targets)
        return got

    # -- stores -------------------------------------------------------------------------------

    def _store_view(self, layout: Layout) -> str:
        return self._view("L", self.layout_ids.setdefault(layout, len(self.layout_ids)))

    def _label(self, layout: Layout) -> str:
        plan = self.ctl.plans[self.open.plan] if self.open else None
        if plan is not None:
            for s in plan.stores:
                if layout_of(s) == layout:
                    return s.id
        mir = self.meta.mirs.get(layout[1])
        name = mir.render_partition(layout[2]) if mir is not None else str(layout[1][0])
        return (f"{layout[0]}:" if layout[0] else "") + name

    def layout_cols(self, layout: Layout) -> list[str]:
        return ["_sseq", "_ep"] + [c for r in layout[1][0] for c in self.rel_cols(r)]

    def _partition_col(self, layout: Layout) -> str:
        try:
            return self.col(layout[2])
        except PlanError:  # a never-written store of a relation whose first attribute is not in the input
            return row_col(self.rank[layout[2].relation])

    def _physical(self, layout: Layout, st: _SliceState) -> str:
        """The view of ``layout``'s store (an empty store is created on first use)."""
        if layout not in self.stores and layout not in st.new_stores:
            df = self._empty_store(self.layout_cols(layout), self.meta.p[layout], self._partition_col(layout))
            st.new_stores[layout] = df
            st.fresh.add(layout)
            df.createOrReplaceTempView(self._store_view(layout))
        return self._store_view(layout)

    def _update_store(self, store: Store, st: _SliceState) -> None:
        layout = layout_of(store)
        self._physical(layout, st)
        old = st.new_stores.get(layout, self.stores.get(layout))
        cols = self.layout_cols(layout)
        data_cols = ", ".join(cols[2:])
        base_rel = store.mir.relations[0] if store.mir.is_base else None
        if base_rel is not None and not st.sl.per_rel.get(self.rank[base_rel]):
            return  # nothing arrived: keep it as is (eviction can wait)
        e = st.sl.epoch
        deltas = [f"SELECT _seq AS _sseq, CAST({e} AS BIGINT) AS _ep, {data_cols} FROM {self._travelling(lab, st)} d"
                  for lab in st.prep.incoming[store.id]]
        live = [f"{ts_col(self.rank[r])} >= {_dbl(st.sl.t0 - float(self.windows[r]))}"
                for r in store.mir.relations if self.windows[r] is not None]
        if self.min_live.get(layout) is not None and layout not in st.fresh:
            live.append(f"_ep >= {self.min_live[layout]}")
        new = self._replace_store(old, deltas, store.parallelism, self._partition_col(layout), " AND ".join(live),
                                  layout in st.fresh)
        st.new_stores[layout] = new
        new.createOrReplaceTempView(self._store_view(layout))

    # -- sampling -----------------------------------------------------------------------------

    def _value_cols(self, a: Attr) -> tuple[str, str, str] | None:
        """(vl, vd, vs) select expressions of attribute ``a``'s value in the count table."""
        try:
            c = self.col(a)
        except PlanError:
            return None
        t = self.types[c]
        if t == "string":
            return "CAST(NULL AS BIGINT)", "CAST(NULL AS DOUBLE)", c
        if t == "double":
            return "CAST(NULL AS BIGINT)", c, "CAST(NULL AS STRING)"
        return f"CAST({c} AS BIGINT)", "CAST(NULL AS DOUBLE)", "CAST(NULL AS STRING)"

    def _sampled_sql(self, c: str) -> str:
        f = self.policy.sample
        if f >= 1:
            return ""
        if self.types[c] in ("bigint", "int"):
            # mqjoin.adaptive.sampled: (v · 2654435761) mod 2^32, low 24 bits < f · 2^24; the low
            # 24 bits of the product only depend on the low 24 bits of v (no 64-bit overflow)
            return f" AND (((CAST({c} AS BIGINT) & 16777215) * 2654435761) & 16777215) < {_dbl(f * 0x1000000)}"
        return f" AND {self._view('sampled', 0)}({c})"

    def _register_udfs(self) -> None:
        if self.policy.sample >= 1:
            return
        from pyspark.sql.types import BooleanType

        from ...adaptive import sampled

        frac = self.policy.sample
        self.ss.udf.register(self._view("sampled", 0), lambda v: None if v is None else sampled(v, frac),
                             BooleanType())

    def _counts_sql(self, source: str, where: str, ep: str, attrs: Iterable[Attr]) -> list[str]:
        parts = []
        for a in attrs:
            vc = self._value_cols(a)
            if vc is None:
                continue
            c = self.col(a)
            parts.append(f"SELECT {ep} AS ep, {self.attr_ids[a]} AS a, {vc[0]} AS vl, {vc[1]} AS vd, {vc[2]} AS vs, "
                         f"CAST(1 AS BIGINT) AS c FROM {source} WHERE _rel = {self.rank[a.relation]} AND {c} IS NOT NULL"
                         f"{where}{self._sampled_sql(c)}")
        return parts

    def _update_counts(self, op: _Open, sl: _Slice, st: _SliceState) -> DataFrame | None:
        parts = self._counts_sql(self._view("batch", 0), f" AND _seq >= {sl.s0} AND _seq < {sl.s1}",
                                 f"CAST({sl.epoch} AS BIGINT)", op.attrs)
        if not parts:
            return None
        view = self._view("counts", 0)
        if op.counts is not None:
            op.counts.createOrReplaceTempView(self._view("counts_old", 0))
            parts.append(f"SELECT * FROM {self._view('counts_old', 0)}")
        new = self.ss.sql(f"SELECT ep, a, vl, vd, vs, CAST(sum(c) AS BIGINT) AS c FROM ({' UNION ALL '.join(parts)}) x "
                          "GROUP BY ep, a, vl, vd, vs").localCheckpoint(eager=False)
        if op.counts is not None:
            st.retired.append(op.counts)  # released once the new counts are materialised
        op.counts = new
        new.createOrReplaceTempView(view)
        return new

    def _pair_sql(self, cnt: str, a: Attr, b: Attr, grouped: bool = True) -> str | None:
        va, vb = self._value_cols(a), self._value_cols(b)
        if va is None or vb is None:
            return None
        ta, tb = self.types[self.col(a)], self.types[self.col(b)]
        fam = lambda t: "s" if t == "string" else ("d" if t == "double" else "l")  # noqa: E731
        fa, fb = fam(ta), fam(tb)
        if (fa == "s") != (fb == "s"):  # "1" never equals 1
            return None
        if fa == fb:
            eq = f"x.v{fa} = y.v{fb}"
        else:
            eq = f"CAST(x.v{fa} AS DOUBLE) = CAST(y.v{fb} AS DOUBLE)"
        on = f"x.ep = y.ep AND x.a = {self.attr_ids[a]} AND y.a = {self.attr_ids[b]} AND {eq}"
        if not grouped:  # the counts of one epoch, rows to sum
            return f"SELECT x.c * y.c AS v FROM {cnt} x JOIN {cnt} y ON {on}"
        return (f"SELECT x.ep AS ep, {self.attr_ids[a]} AS a, {self.attr_ids[b]} AS b, CAST(sum(x.c * y.c) AS BIGINT) AS m "
                f"FROM {cnt} x JOIN {cnt} y ON {on} GROUP BY x.ep")

    def _pair_sums(self, counts: DataFrame, pairs: Iterable[tuple[Attr, Attr]]) -> dict[int, dict]:
        """epoch → pair → Σ_v cnt_a(v)·cnt_b(v) (one Spark job; only the sums reach the driver)."""
        view = self._view("pairs_in", 0)
        counts.createOrReplaceTempView(view)
        ids = {}
        parts = []
        for a, b in pairs:
            sql = self._pair_sql(view, a, b)
            if sql is not None:
                parts.append(sql)
                ids[(self.attr_ids[a], self.attr_ids[b])] = (a, b)
        out: dict[int, dict] = {}
        if not parts:
            return out
        for r in self.ss.sql(" UNION ALL ".join(parts)).collect():
            out.setdefault(int(r["ep"]), {})[ids[(int(r["a"]), int(r["b"]))]] = int(r["m"] or 0)
        return out

    # -- probes -------------------------------------------------------------------------------

    def _trav_cols(self, rels: Iterable[str]) -> list[str]:
        return ["_seq", "_T", "_arrival"] + [c for r in rels for c in self.rel_cols(r)]

    def _travelling(self, label: str, st: _SliceState) -> str:
        parent = st.prep.parent.get(label, "missing")
        if parent == "missing":
            raise PlanError(f"edge {label} is not reachable from any input or probe rule")
        if parent is None:
            rel = st.prep.plan.edge[label].source.split(":", 1)[1]
            return f"({self._input_sql(rel, f' AND _seq >= {st.sl.s0} AND _seq < {st.sl.s1}')})"
        return self._probe_result(parent, st)

    def _probe_result(self, label: str, st: _SliceState) -> str:
        if label in st.results:
            return st.results[label]
        plan = st.prep.plan
        tgt = st.prep.targets[label]
        trav = self._travelling(label, st)
        sql = self._probe_sql(trav, tgt, st.sl.epoch, st, history=False)
        rule = plan.rules[plan.edge[label].target][label]
        feeds_probe = any(plan.edge[o].kind == "probe" for o in rule.out)
        if not feeds_probe and len(rule.out) == 1:
            ref = st.results[label] = f"({sql})"
            return ref
        # persisted: computed once per slice, and its rows' messages are summed from the cache
        df = self.ss.sql(sql).persist()
        st.persisted.append(df)
        st.seq += 1
        view = self._view("r", f"{label}_{st.seq}")
        df.createOrReplaceTempView(view)
        st.results[label] = view
        return view

    def _route(self, tgt: _Target, layout: Layout) -> Attr | None:
        if layout not in tgt.routes:
            tgt.routes[layout] = tgt.own_route if layout == tgt.own else \
                route_attribute(tgt.classes, tgt.travelling, tgt.mir, layout[2])
        return tgt.routes[layout]

    def _choose(self, tgt: _Target, layouts: list[Layout]) -> Layout:
        if tgt.own is not None and tgt.own in layouts:
            return tgt.own
        for layout in layouts:
            if self._route(tgt, layout) is not None:
                return layout
        return layouts[0]

    def _empty_sql(self, trav: str, trav_rels: Iterable[str], rels: Iterable[str]) -> str:
        cols = [f"t.{c}" for c in self._trav_cols(trav_rels)]
        for r in rels:
            for c in self.rel_cols(r):
                t = self.types.get(c) or ("double" if c.endswith("_ts") else "bigint")
                cols.append(f"CAST(NULL AS {t}) AS {c}")
        return f"SELECT {', '.join(cols)} FROM {trav} t WHERE false"

    def _messages_sql(self, terms: list[tuple[int, int]], reach: str | None) -> str:
        """Messages per travelling row: ``k`` for every layout group whose latest epoch is
        within the row's reach."""
        if not terms:
            return "0"
        if reach is None:
            return str(sum(k for k, _ in terms))
        return " + ".join(f"CASE WHEN {reach} <= {m} THEN {k} ELSE 0 END" for k, m in terms)

    def _probe_sql(self, trav: str, tgt: _Target, bound: int, st: _SliceState, history: bool) -> str:
        """SQL of the probe of ``tgt`` by the rows ``trav`` reaching epochs ≤ ``bound``: one join
        per layout group, plus the iterative probing of the gaps (reference ``probe``)."""
        meta = self.meta
        groups: dict[Layout, list[int]] = {}
        for e2, layouts in sorted(meta.by_mir.get(tgt.mk, {}).items()):
            if e2 <= bound:
                groups.setdefault(self._choose(tgt, layouts), []).append(e2)
        reach = meta.reach_sql(tgt.mk, "t._T")
        select = ", ".join([f"t.{c}" for c in self._trav_cols(tgt.travelling)] +
                           [f"s.{c}" for r in tgt.mir.relations for c in self.rel_cols(r)])
        parts, terms = [], []
        for layout, eps in groups.items():
            route = self._route(tgt, layout)
            keys = [(self.col(a), self.col(b)) for a, b in tgt.pred]
            if route is not None:
                pk = (self.col(route), self.col(layout[2]))
                keys = [pk] + [k for k in keys if k != pk]
            extra = [f"s._ep IN ({', '.join(map(str, eps))})"] + ([f"s._ep >= {reach}"] if reach else [])
            view = self._physical(layout, st)
            p = meta.p[layout]
            parts.append(self._probe_join(trav, view, keys, route is not None, p, tgt.mir.relations, select,
                                          tuple(extra)))
            terms.append((1 if route is not None else p, max(eps)))
        st.counters.append((trav, self._messages_sql(terms, meta.reach_sql(tgt.mk, "_T")), history))
        if len(tgt.mir.relations) > 1:
            missing = meta.missing(tgt.mk, bound)
            if missing:
                parts.append(self._expand_sql(trav, tgt, missing, st))
        if not parts:
            return self._empty_sql(trav, tgt.travelling, tgt.mir.relations)
        return " UNION ALL ".join(parts)

    def _expand_sql(self, trav: str, tgt: _Target, missing: list[int], st: _SliceState) -> str:
        """Iterative probing of older partners (reference ``expand``): the MIR's combinations
        whose latest component arrived in a gap, joined one relation at a time from the base
        stores (epochs ≤ the latest gap) until the relations left have containers themselves."""
        w = self.ctl.full
        rels = list(tgt.mir.relations)
        joined = list(tgt.travelling)
        order: list[str] = []
        classes = tgt.classes
        while len(order) < len(rels):
            nxt = [r for r in rels if r not in order and any(c.member_of(r) and c.relations & set(joined)
                                                              for c in classes)]
            if not nxt:
                raise PlanError(f"cannot probe {tgt.mir.label} from {', '.join(joined)}: not connected")
            r = min(nxt, key=lambda x: self.rank[x])
            order.append(r)
            joined.append(r)
        top = max(missing)
        reach = self.meta.reach_sql(tgt.mk, "t._T")
        # the travelling rows that expand: a key without nulls, a gap within reach
        conds = [f"t.{self.col(a)} IS NOT NULL" for a, _ in tgt.pred]
        if reach is not None:
            conds.append(f"{reach} <= {top}")
        partials = f"(SELECT * FROM {trav} t WHERE {' AND '.join(conds) or 'true'})"
        layout_rels = list(tgt.travelling)
        for k, r in enumerate(order):
            rest = order[k:]
            if k > 0 and len(rest) > 1:
                sub = MIR.of(w, rest, tgt.mir.classes)
                if mir_key(sub) in self.meta.by_mir and is_connected(sub.relations, sub.classes):
                    pred = []
                    for c in classes:
                        left = [a for a in c.members if a.relation in layout_rels]
                        right = [a for a in c.members if a.relation in sub.relation_set]
                        if left and right:
                            pred.append((left[0], right[0]))
                    subt = _Target(sub, mir_key(sub), classes, tuple(layout_rels), tuple(pred))
                    partials = f"({self._probe_sql(partials, subt, top, st, history=True)})"
                    layout_rels.extend(sub.relations)
                    break
            partials = f"({self._base_hop_sql(classes, r, layout_rels, partials, top, st)})"
            layout_rels.append(r)
        pol = self.policy
        latest = f"GREATEST({', '.join(f'x.{ts_col(self.rank[r])}' for r in rels)})"
        ep = f"FLOOR(({latest} - {_dbl(pol.origin)}) / {_dbl(pol.epoch)})"
        cols = [f"x.{c}" for c in self._trav_cols(tgt.travelling)] + \
               [f"x.{c}" for r in rels for c in self.rel_cols(r)]
        where = [f"{ep} IN ({', '.join(map(str, missing))})"]
        reach_x = self.meta.reach_sql(tgt.mk, "x._T")
        if reach_x is not None:
            where.append(f"{ep} >= {reach_x}")
        return f"SELECT {', '.join(cols)} FROM {partials} x WHERE {' AND '.join(where)}"

    def _base_hop_sql(self, classes: tuple[JoinClass, ...], r: str, layout_rels: list[str], partials: str,
                      top: int, st: _SliceState) -> str:
        """One hop of iterative probing (reference ``_probe_base``): the partial rows probe
        relation ``r``'s base containers of the epochs up to ``top``."""
        pred = probe_pairs(classes, r, layout_rels)
        w = self.ctl.full
        mk = mir_key(MIR.of(w, [r], ()))
        meta = self.meta
        groups: dict[Layout, list[int]] = {}
        for e2, layouts in sorted(meta.by_mir.get(mk, {}).items()):
            if e2 <= top:
                layout = layouts[0]
                for cand in layouts:
                    if route_attribute(classes, layout_rels, meta.mirs[mk], cand[2]) is not None:
                        layout = cand
                        break
                groups.setdefault(layout, []).append(e2)
        reach = meta.reach_sql(mk, "t._T")
        select = ", ".join([f"t.{c}" for c in self._trav_cols(layout_rels)] + [f"s.{c}" for c in self.rel_cols(r)])
        parts, terms = [], []
        for layout, eps in groups.items():
            ra = route_attribute(classes, layout_rels, meta.mirs[mk], layout[2])
            keys = [(self.col(a), self.col(b)) for a, b in pred]
            if ra is not None:
                pk = (self.col(ra), self.col(layout[2]))
                keys = [pk] + [k for k in keys if k != pk]
            extra = [f"s._ep IN ({', '.join(map(str, eps))})"] + ([f"s._ep >= {reach}"] if reach else [])
            p = meta.p[layout]
            parts.append(self._probe_join(partials, self._physical(layout, st), keys, ra is not None, p, (r,),
                                          select, tuple(extra)))
            terms.append((1 if ra is not None else p, max(eps)))
        st.counters.append((partials, self._messages_sql(terms, meta.reach_sql(mk, "_T")), True))
        if not parts:
            return self._empty_sql(partials, layout_rels, (r,))
        return " UNION ALL ".join(parts)

    # -- restart ------------------------------------------------------------------------------

    def _rebuild(self, first_seq: int, T_first: float, session) -> None:
        """Re-derive the state before ``first_seq`` from the replay log: the controller's
        decisions (samples recomputed in Spark, changes applied where they were submitted),
        the container bookkeeping, and the stores of the epochs still within reach."""
        with self.lock:  # submissions wait: they must not land in the middle of the replay
            self.close()
            self._reset()
            if first_seq == 0:
                return
            self._replay(first_seq, T_first, session)

    def _replay(self, first_seq: int, T_first: float, session) -> None:
        self.ss = session
        hist = self._history(first_seq, None, session).persist()
        try:
            slices = self._slices(hist, self._view("hist_stats", 0))
            ws = list(self.windows.values())
            cutoff = -math.inf if any(x is None for x in ws) else self.policy.epoch_of(T_first - max(ws, default=0.0)) - 1
            light = [sl for sl in slices if sl.epoch < cutoff]
            sums: dict[int, dict] = {}
            hist.createOrReplaceTempView(self._view("batch", 0))
            self._register_udfs()
            if light:
                sums = self._history_sums(light)
            for sl in slices:
                self._slice(sl, -1, write=False, light=sums if sl.epoch < cutoff else None)
            self.next_seq = first_seq
        finally:
            hist.unpersist()
        for df in self.retire:
            release_store(df)
        self.retire = []

    def _history_sums(self, light: list[_Slice]) -> dict[int, dict]:
        """Agreeing pairs of every pair the full workload could track, per epoch of ``light``."""
        from ...adaptive import tracked_pairs

        full, _ = lifetimes(self.base, self.changes + [c for c, _ in self.submitted], self.policy)
        pairs = tracked_pairs(full)
        attrs = tuple(dict.fromkeys(a for p in pairs for a in p))
        for a in attrs:
            self.attr_ids.setdefault(a, len(self.attr_ids))
        pol = self.policy
        ep = f"CAST(FLOOR((_ts - {_dbl(pol.origin)}) / {_dbl(pol.epoch)}) AS BIGINT)"
        parts = self._counts_sql(self._view("batch", 0), f" AND _seq < {light[-1].s1}", ep, attrs)
        if not parts:
            return {}
        counts = self.ss.sql(f"SELECT ep, a, vl, vd, vs, CAST(count(*) AS BIGINT) AS c FROM "
                             f"({' UNION ALL '.join(parts)}) x GROUP BY ep, a, vl, vd, vs")
        return self._pair_sums(counts, pairs)

    # -- snapshot -----------------------------------------------------------------------------

    def partial_record(self) -> EpochRecord | None:
        """The epoch in progress, as it stands (for a stopped or failed deployment)."""
        with self.lock:
            return None if self.open is None else self._record(self.open)


def _sketch() -> list:
    a = F.col("_arrival").cast(ARRIVAL_TYPE)
    return [F.percentile_approx(a, list(SKETCH), 1000).alias("qs")]


def _merge_latencies(parts: list[dict]) -> tuple[float, float, float]:
    """(mean, p95, max) over the results of several slices: the mean and maximum exactly, the
    95th percentile from the slices' quantile sketches weighted by their result counts."""
    parts = [p for p in parts if p["n"]]
    if not parts:
        return 0.0, 0.0, 0.0
    n = sum(p["n"] for p in parts)
    mx = max(p["max"] for p in parts)
    mean = min(mx, sum(p["n"] * p["mean"] for p in parts) / n)
    if len(parts) == 1:
        return mean, min(mx, parts[0]["p95"]), mx
    points = sorted((v, p["n"] / len(p["sketch"])) for p in parts for v in p["sketch"])
    need, acc, p95 = 0.95 * n, 0.0, points[-1][0]
    for v, wgt in points:
        acc += wgt
        if acc >= need - 1e-9:
            p95 = v
            break
    return mean, min(mx, p95), mx


# --------------------------------------------------------------------------------------------
# the deployment
# --------------------------------------------------------------------------------------------


class AdaptiveDeployment(Deployment):
    """An adaptive deployment: the :class:`Deployment` of a workload whose plan the controller
    chooses every epoch, with the live interface of
    :class:`mqjoin.runtime.adaptive.AdaptiveReplay` — :meth:`submit`, :meth:`subscribe` (events
    ``epoch``, ``switch``, ``change``, ``status``, plus ``batch`` and ``progress``),
    :meth:`snapshot` (an :class:`~mqjoin.runtime.adaptive.AdaptiveRun`), :meth:`timeline`,
    :meth:`wait_for_epoch`, :attr:`controller`, :attr:`event_time` — so the explorer's
    views work with either.  Create with :func:`mqjoin.runtime.spark.deploy.deploy`
    (``adaptive=…``, ``changes=…``).

    ``optimizer`` must be deterministic in its sequence of calls: a restart re-derives every
    decision by calling a fresh run's optimiser in the same order (pass a new instance of a
    stateful one)."""

    def __init__(self, workload: Workload | Plan, data, out, *, policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), optimizer: Optimizer | None = None, spark=None,
                 master: str | None = None, checkpoint=None, pacing: Pacing = Pacing(), conf=None):
        if isinstance(workload, Plan):
            workload = workload.workload
        if not isinstance(workload, Workload):
            raise AdaptiveError(f"an adaptive deployment needs a workload or a plan, got {type(workload).__name__}")
        self.policy = policy or AdaptivePolicy()
        if not isinstance(self.policy, AdaptivePolicy):
            raise AdaptiveError(f"adaptive= takes an AdaptivePolicy, got {type(self.policy).__name__}")
        self.base = workload
        self.changes = list(changes)
        for c in self.changes:
            if not isinstance(c, QueryChange):
                raise AdaptiveError(f"changes must be QueryChange values (or a changelog file read with "
                                    f"mqjoin.adaptive.load_changes), got {type(c).__name__}")
        full, _ = lifetimes(workload, self.changes, self.policy)  # a bad changelog fails before Spark starts
        self.optimizer = optimizer
        self._ctl0: AdaptiveController | None = None
        super().__init__(None, data, out, engine="mqjoin", spark=spark, master=master, checkpoint=checkpoint,
                         pacing=pacing, conf=conf, workload=full)
        for q in full.queries:
            for r in q.relations:
                if r not in self.tables:
                    raise DataError(f"no input table for relation {r}, which query {q.name} joins")
        self.state_dir = self.checkpoint / "adaptive"
        self._check_config()
        self._slice_rows: list[dict] = []
        self.engine: AdaptiveEngine | None = None

    def _read_inputs(self, data) -> dict[str, Table]:
        """The relations the queries use, and every other declared relation with an input file
        (queries submitted later may join them)."""
        d = Path(data)
        needed = list(self.workload.used_relations)
        extra = [r.name for r in self.workload.relations if r.name not in needed and
                 ((d / f"{r.name}.parquet").exists() or (d / f"{r.name}.csv").exists())]
        return read_inputs(self.workload, d, needed + extra)

    def _check_config(self) -> None:
        """A checkpoint resumes only the deployment that wrote it (same policy and changelog)."""
        p = self.state_dir / "config.json"
        cfg = {"policy": self.policy.to_dict(), "changes": [c.to_dict() for c in self.changes],
               "queries": {q.name: q.text for q in self.base.queries}}
        cfg = json.loads(json.dumps(cfg, default=str))
        if p.exists():
            old = json.loads(p.read_text())
            for key, what in (("policy", "adaptive policy"), ("changes", "changelog"), ("queries", "queries")):
                if old.get(key) != cfg[key]:
                    raise AdaptiveError(f"the checkpoint {self.checkpoint} was written by a deployment with another "
                                        f"{what}; resume it with the same settings or use a new checkpoint directory")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(cfg, indent=1))

    def _start_mqjoin(self, opts, ddl, listener) -> None:
        from .engine import column_types

        self.engine = AdaptiveEngine(self.spark, self.base, self.policy, self.changes, self.optimizer, self.workload,
                                     opts["path"], str(self.out), column_types(ddl), self.state_dir, self.pacing,
                                     on_event=self._on_engine_event)
        self._consumed["plan"] = committed_seq(self.checkpoint / "spark" / "plan")
        q = self._writer(self._stream(opts), "plan", self._guard(self.engine.process)).start()
        self._queries["plan"] = q
        listener.routes[str(q.id)] = lambda kind, d: self._on_listener("plan", kind, d)

    # -- the live interface ---------------------------------------------------------------------

    @property
    def controller(self) -> AdaptiveController:
        if self.engine is not None:
            return self.engine.ctl
        if self._ctl0 is None:
            self._ctl0 = AdaptiveController(self.base, self.policy, self.changes, self.optimizer)
        return self._ctl0

    @property
    def event_time(self) -> float | None:
        return None if self.engine is None else self.engine.event_time

    def _first_ts(self) -> float:
        return min((min(t.ts) for t in self.tables.values() if len(t)), default=0.0)

    def submit(self, change: QueryChange | None = None, *, add: Mapping[str, str] | None = None,
               remove: Iterable[str] = (), selectivities: Mapping[str, float] | None = None) -> int:
        """Add/remove queries now (at the current event time; before the start: at the first
        tuple's time); returns the activation epoch.  Errors (unknown names, invalid queries,
        relations without input) are raised here and change nothing."""
        eng = self.engine
        lock = eng.lock if eng is not None else threading.RLock()
        with lock:
            if change is None:
                at = eng.event_time if eng is not None and eng.event_time is not None else self._first_ts()
                change = QueryChange(at=at, add=dict(add or {}), remove=tuple(remove),
                                     selectivities=dict(selectivities or {}))
            ctl = self.controller
            full, _ = lifetimes(ctl.base, [*ctl.changes, change], self.policy)  # validates
            for name in change.add:
                for r in full.query(name).relations:
                    if r not in self.tables:
                        raise DataError(f"query {name} joins {r}, which has no input in this run")
            if eng is not None:
                epoch = eng.submit(change)
            else:  # not started: part of the deployment's changelog
                epoch = ctl.submit(change)
                self.changes.append(change)
                self._rewrite_config()
        self._emit({"kind": "change", "change": change.to_dict(), "activation_epoch": epoch})
        return epoch

    def _rewrite_config(self) -> None:
        p = self.state_dir / "config.json"
        p.unlink(missing_ok=True)
        self._check_config()

    def wait_for_epoch(self, epoch: int, timeout: float | None = None) -> bool:
        """Wait until ``epoch`` has finished (False on timeout or if the run ended before)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.engine is not None and any(r.epoch >= epoch for r in list(self.engine.records)):
                return True
            if self.status in ("finished", "stopped", "failed") or self.error is not None or \
                    (self.engine is not None and self.engine.finished):
                return False
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def snapshot(self) -> AdaptiveRun:
        """The run so far: committed results, finished epochs (and, once stopped or failed, the
        epoch in progress), decisions and plans."""
        results = {q: sorted(r) for q, r in self.results().items()}
        ctl = self.controller
        eng = self.engine
        with (eng.lock if eng is not None else threading.RLock()):
            epochs = list(eng.records) if eng is not None else []
            if eng is not None and self.status in ("stopped", "failed") and eng.open is not None:
                part = eng.partial_record()
                if part is not None and all(r.epoch != part.epoch for r in epochs):
                    epochs.append(part)
            n = eng.next_seq if eng is not None else 0
            seconds = 0.0 if self.started_at is None else time.time() - self.started_at
            return AdaptiveRun(ctl.full, self.policy, results, tuple(epochs), tuple(ctl.decisions),
                               tuple(ctl.plans), ctl.lives, n, seconds, float(self.pacing.speedup or 1.0))

    def timeline(self):
        return self.snapshot().timeline()

    def _result_queries(self) -> list[str]:
        return list(self.controller.full.query_names)

    def write_results(self) -> Path:
        return write_results(self.controller.full, self.results(), self.out)

    # -- metrics ------------------------------------------------------------------------------

    @property
    def epochs(self):
        """One row per finished epoch (pandas): the timeline."""
        return self.timeline()

    def _on_engine_event(self, ev: dict) -> None:
        if ev["kind"] != "batch":
            self._emit(ev)
            return
        slices = [s for s in ev["slices"] if s is not None]
        n = sum(s["rows"] for s in slices)
        row = {"engine": "mqjoin-adaptive", "batch": ev["batch"], "input_rows": n, "started": ev["started"],
               "seconds": ev["seconds"], "rows_per_s": n / ev["seconds"] if ev["seconds"] > 0 else None,
               "results": sum(sum(s["results"].values()) for s in slices),
               "probe_messages": sum(s["messages"] for s in slices),
               "history_messages": sum(s["history"] for s in slices),
               "state_rows": sum(slices[-1]["store_rows"].values()) if slices else 0,
               "state_bytes": ev["state_bytes"], "min_ts": min((s["t0"] for s in slices), default=None),
               "max_ts": max((s["t1"] for s in slices), default=None), "rebuilt": ev["rebuilt"],
               "epochs": [s["epoch"] for s in slices]}
        qrows = []
        for s in slices:
            for q, k in s["results"].items():
                lat = s["latency"].get(q, {})
                qrows.append({"engine": "mqjoin-adaptive", "batch": ev["batch"], "epoch": s["epoch"], "query": q,
                              "results": k, "started": s["started"], "seconds": s["seconds"],
                              "latency_mean": lat.get("mean"), "latency_p95": lat.get("p95"),
                              "latency_max": lat.get("max")})
        srows = [{"engine": "mqjoin-adaptive", "batch": ev["batch"], "store": st, "rows": k}
                 for st, k in (slices[-1]["store_rows"].items() if slices else ())]
        with self._lock:
            self._reports.append(row)
            self._query_rows.extend(qrows)
            self._store_rows.extend(srows)
        self._emit({"kind": "batch", **row, "queries": qrows, "stores": srows})

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        b = self.batches
        if len(b):
            out["history_messages"] = int(b["history_messages"].sum())
        out["engine"] = "mqjoin-adaptive"
        out["backlog_measured"] = bool(self.pacing.rate or self.pacing.speedup)
        return out
