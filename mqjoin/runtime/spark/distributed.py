"""The plan on Spark with its stores spread over the executors (``--spark-mode distributed``):
the vectorised executor sharded, one micro-batch run in a few waves of tasks (the driver mode,
:mod:`.driver`, keeps every store in the driver's executor).

**One probe semantics.**  Every shard runs the plan's rules with the same
:class:`~mqjoin.runtime.vector.BatchExecutor` the driver mode runs (the values of
:func:`mqjoin.runtime.rules.plan_rules`: inserts, probes with keys, routes and windows,
filters, emits); :mod:`.sharded` says which entries a shard holds, in which *wave* an edge
runs and where its frames go.  Probe messages are counted as the vectorised executor counts
them, whatever the number of shards.

**A batch is one Spark job of waves.**  The replay source serves this mode not the batch's
rows but one row per input partition naming its range of arrival numbers
(:func:`.source.slice_rows`); the task of a partition (``mapInArrow``,
:func:`.sharded.route_input`) reads those rows from the replay log itself, turns them into
the frames of the plan's source edges and writes each shard's share to a file of the state
directory, so only the files' names pass through the JVM and the exchange (``partitionBy``
on the shard number) — rows there are copied several times between the JVM and Python
workers, a file once.  Wave 1 is one ``mapPartitionsWithIndex`` (:func:`.sharded.run_wave`)
over them that runs the wave's edges on every shard; the driver deletes the input files
once the batch's job is done.  A wave yields its shard's state keyed by the shard itself and the frames for
other shards keyed by theirs, so the next exchange hands every shard its own state together
with what was sent to it.  The whole batch is the DAG of one job — the input's stage and one
stage per wave — a number of stages that follows the depth of the probe trees, not the number
of stores, edges or queries.

**The stores stay where they are written.**  What travels through a wave's exchange is the
batch: the frames and a shard's *small* state — its counters, the batch's own entries and
the names of its stores' segments.  A store's segments are immutable files in the state
directory (``OUT/_state/<engine>/``, :func:`.sharded.save_segment`), written once by the
last wave of the batch that made them (its new entries, or a merge or expiry of older
segments) and mapped, not read, by a process that needs them; the executors' Python workers
outlive their tasks and keep the segments they mapped, with their key indexes, for the next
batch.  So a batch costs its input, its frames and the segments it writes, not the state it
probes.  The last wave's output — every shard's state and report, a few kilobytes — is
collected by the driver and handed to the next batch's tasks in their spec: no store entry,
input tuple or result passes through the driver, and the driver deletes the segment files
no shard names any more once the batch that dropped them is complete.

**Exactly once and lost executors.** The tasks of the waves write the batch's results to
``OUT/_batches/batch=b/part-<wave>-<shard>.<query>.parquet`` and its segments under names fixed by the run, shard,
store and position (both atomically: a task run again writes the same bytes), the driver clears the batch's result
directory before the batch and marks it ``_SUCCESS`` after it, so a batch run again replaces its own output. A batch's
lineage starts at its input and its spec, and its segments live in a shared directory, so Spark recovers a lost
executor by itself: it runs the lost tasks and map outputs again, and they map the same segment files (and write and
read the same input files). A restarted deployment (``start_seq`` > 0, or a batch that does not start where the state
ends) first rebuilds the shards from the replay log: the tuples before the batch that lie within the largest window,
run as one batch that writes nothing; so does a batch whose segment files are gone (:func:`lost_state`), which then
runs again.

>>> lost_state(RuntimeError("MQJOIN_SEGMENT_LOST: /out/_state/x/7-1-2-0.seg is gone"))
True
>>> merged_p05([(np.array([1.0, 2.0]), np.ones(2)), (np.array([3.0]), np.full(1, 18.0))])
1.0
"""

from __future__ import annotations

import logging
import pickle
import shutil
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mqjoin.planning.plan import Plan
from mqjoin.runtime.partitions import add_partitions
from mqjoin.runtime.spark.session import session_cores, spark_message
from mqjoin.runtime.spark.sharded import (LOST_SEGMENT, REPORT, SENT, STATE, Batch, ShardProgram, ShardReport,
                                          exchange_file, route_input, run_wave)

log = logging.getLogger(__name__)


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
    # store id → per shard: "rows" held after the batch, "received" travelling tuples its probes ran
    shards: Mapping[str, Mapping[str, tuple[int, ...]]] = field(default_factory=dict)
    # store id → its logical partitions: "partitions" (the plan's parallelism), the batch's probe
    # "messages" and the "rows" held after it, per partition (mqjoin.runtime.partitions)
    partitions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}


def _shard_key(shard: int) -> int:
    """The partition of an element keyed by its shard (one partitioner object for every RDD
    of the engine: Spark combines partitions by partitioner equality)."""
    return shard


def _sent(row) -> tuple[int, tuple[str, bytes]]:
    return row[0], (SENT, row[1])


class ShardedEngine:
    """Runs a :class:`~mqjoin.planning.plan.Plan` as a ``foreachBatch`` function over the
    replay stream with its stores sharded over the executors (see the module doc).

    ``replay_log``: the replay log's path (read back to rebuild the shards); ``start_seq``:
    the arrival number the stream resumes from (a restart); ``shards``: the number of shards
    (default: the session's task slots when the engine starts, :func:`.session.session_cores`); ``on_batch`` receives a
    :class:`BatchReport` after every micro-batch; ``columns``: where a packed replay log
    (:func:`.source.pack_replay_log`) holds each attribute column."""

    def __init__(self, spark: SparkSession, plan: Plan, replay_log: str, out_dir: str,
                 on_batch: Callable[[BatchReport], None] | None = None, start_seq: int = 0, shards: int | None = None,
                 columns: Mapping[str, str] | None = None):
        self.spark = spark
        self.plan = plan
        self.replay_log = replay_log
        self.out_dir = out_dir.rstrip("/")
        self.on_batch = on_batch
        self.columns = dict(columns) if columns else None
        self.shards = max(int(shards or session_cores(spark)), 1)
        self.program = ShardProgram(plan, self.shards)  # the waves (and the plan checked) on the driver
        self.token = uuid.uuid4().hex
        # the tasks' closures carry the plan as a broadcast: fetched once per executor, not per task
        self.shipped = spark.sparkContext.broadcast(plan)
        self.shard_states = None  # per shard: its pickled state after the last batch (None: no shard yet)
        self.state_dir = f"{self.out_dir}/_state"  # the shards' segment files, under the token
        self.runs = 0  # batches run (each names the segment files it writes)
        self.next_seq = start_seq  # the arrival the state is ready for
        windows = [r.window for r in plan.workload.relations if r.name in plan.workload.used_relations]
        self.horizon = None if any(w is None for w in windows) else max(windows, default=0.0)

    # -- one micro-batch --------------------------------------------------------------------

    def process(self, batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        sc = batch.sparkSession.sparkContext
        group = job_group(sc, self, batch_id)
        rebuilt, lost, moved = False, 0, False
        while True:
            try:
                if self.shard_states is None and self.next_seq > 0:
                    self._rebuild(batch.sparkSession)
                    rebuilt = True
                expected = self.next_seq
                reports, phases = self._run(batch, batch_id, write=True)
            except Exception as exc:
                if lost == LOST_STATE_RETRIES or not lost_state(exc):
                    raise
                # shards are lost: they are rebuilt from the replayed history and the batch runs
                # again (its output is overwritten)
                log.warning("micro-batch %d lost store partitions (%s); rebuilding the stores from the replay "
                            "log and running the batch again", batch_id, spark_message(exc))
                lost += 1
                self._drop()
                continue
            inputs = [i for r in reports for i in r.inputs]
            first = min((i[1] for i in inputs), default=expected)
            if first == expected or moved:
                break
            # the stream resumed elsewhere than the state ends (a restart the engine was not
            # told of): the shards are rebuilt for this batch's start and it runs again
            log.warning("micro-batch %d starts at arrival %d, the shards hold the arrivals before %d: rebuilding "
                        "them from the replay log", batch_id, first, expected)
            moved = True
            self._drop()
            self.next_seq = first
        committed = time.time()
        n = sum(i[0] for i in inputs)
        if n:
            report = self._report(batch_id, reports, inputs, started, committed, rebuilt, phases)
            jobs, stages = job_cost(sc, group)
            report = BatchReport(**{**report.__dict__, "jobs": jobs, "stages": stages})
            if self.on_batch:
                self.on_batch(report)
            self.next_seq = first + n  # last, once the batch is written and reported

    def _run(self, df: DataFrame, batch_id: int, write: bool) -> tuple[list[ShardReport], dict[str, float]]:
        """Run ``df`` (replay-log rows) as one batch over the shards: one Spark job; returns
        the shards' reports and the phases' seconds.  ``write``: the batch's results are
        written (a rebuild writes nothing)."""
        t0 = time.time()
        P, last = self.shards, self.program.last
        self.runs += 1
        spec = Batch(self.shipped, self.token, P, batch_id, self.out_dir if write else None, self.state_dir,
                     self.runs, self.shard_states or (), self.columns)
        if write:
            shutil.rmtree(spec.part_dir, ignore_errors=True)
            spec.part_dir.mkdir(parents=True, exist_ok=True)
        state = (df.mapInArrow(partial(route_input, spec), "shard int, payload binary").rdd
                 .map(_sent).partitionBy(P, _shard_key))
        # wave 1 takes every shard's state from the batch's spec, every later wave receives it
        # through the exchange with the frames sent to it; the last wave yields the next state
        for w in range(1, last + 1):
            out = state.mapPartitionsWithIndex(partial(run_wave, spec, w))
            if w < last:
                state = out.partitionBy(P, _shard_key)
        try:
            got = out.collect()
        finally:
            for f in spec.state_dir.glob(exchange_file(spec.run, "*", "*")):  # what its waves sent, read by now
                f.unlink(missing_ok=True)
        reports = [payload for _, (kind, payload) in got if kind == REPORT]
        states = {shard: payload for shard, (kind, payload) in got if kind == STATE}
        old = self.shard_states
        self.shard_states = tuple(states[p] for p in range(P))
        self._forget(old, self.shard_states)
        if write:
            (spec.part_dir / "_SUCCESS").touch()  # the batch's output is complete
        spent = [max((r.seconds[w] for r in reports if len(r.seconds) > w), default=0.0) for w in range(last)]
        phases = {"job": time.time() - t0, "waves": sum(spent)}
        # each step's seconds on the slowest shard (input partition), the tasks' own timers
        for prefix, steps in (("input ", [i[5] for r in reports for i in r.inputs]),
                              ("shard ", [r.phases for r in reports])):
            for k in sorted({k for d in steps for k in d}):
                phases[prefix + k] = max(d.get(k, 0.0) for d in steps)
        return reports, phases

    def _forget(self, old: tuple | None, new: tuple | None) -> None:
        """Delete the segment files the shards held before a batch and no longer hold."""
        def files(states):
            return {n for s in states or () for names in pickle.loads(s).files.values() for n in names}
        for name in files(old) - files(new):
            (Path(self.state_dir) / self.token / name).unlink(missing_ok=True)

    def _rebuild(self, session: SparkSession) -> None:
        """The shards as they were after the arrivals before ``next_seq``: the replay log's
        tuples before it (within the largest window of the last of them) run as one batch."""
        self._drop()
        hist = session.read.parquet(self.replay_log).filter(F.col("_seq") < self.next_seq)
        if self.horizon is not None:
            last = hist.agg(F.max("_ts")).first()[0]
            if last is not None:
                hist = hist.filter(F.col("_ts") >= float(last) - self.horizon)
        self._run(hist, -1, write=False)

    def _drop(self) -> None:
        self._forget(self.shard_states, None)
        self.shard_states = None

    def _report(self, batch_id: int, reports: list[ShardReport], inputs: list, started: float, committed: float,
                rebuilt: bool, phases: Mapping[str, float]) -> BatchReport:
        msgs: dict[str, int] = {}
        rows: dict[str, int] = {s.id: 0 for s in self.plan.stores}
        counts: dict[str, int] = {}
        arrivals: dict[str, list] = {}
        for r in reports:
            for lab, m in r.messages.items():
                msgs[lab] = msgs.get(lab, 0) + m
            for sid, m in r.store_rows.items():
                rows[sid] = rows.get(sid, 0) + m
            for q, m in r.results.items():
                counts[q] = counts.get(q, 0) + m
            for q, a in r.arrivals.items():
                arrivals.setdefault(q, []).append(a)
        shards: dict[str, dict[str, list[int]]] = {
            s.id: {"rows": [0] * self.shards, "received": [0] * self.shards} for s in self.plan.stores}
        for r in reports:
            for sid, m in r.store_rows.items():
                shards[sid]["rows"][r.shard] += m
            for lab, m in r.received.items():
                shards[self.plan.edge[lab].target]["received"][r.shard] += m
        partitions: dict = {}
        for r in reports:
            partitions = add_partitions(partitions, r.partitions)
        lmean, lp95, lmax = {}, {}, {}
        for q, parts in arrivals.items():
            n = counts[q]
            lo, hi = min(p[1] for p in parts), max(p[2] for p in parts)
            mean = min(max(sum(p[0] for p in parts) / n, lo), hi)
            p05 = merged_p05([(p[3], p[4]) for p in parts])
            lmean[q], lp95[q], lmax[q] = committed - mean, committed - p05, committed - lo
        return BatchReport(batch=batch_id, first_seq=min(i[1] for i in inputs), input_rows=sum(i[0] for i in inputs),
                           started=started, seconds=committed - started, min_ts=min(i[2] for i in inputs),
                           max_ts=max(i[3] for i in inputs),
                           results={q.name: counts.get(q.name, 0) for q in self.plan.workload.queries},
                           latency_mean=lmean, latency_p95=lp95, latency_max=lmax, probe_messages=msgs,
                           store_rows=rows, state_bytes=sum(r.state_bytes for r in reports), rebuilt=rebuilt,
                           phases=dict(phases),
                           shards={sid: {k: tuple(v) for k, v in d.items()} for sid, d in shards.items()},
                           partitions=partitions)

    def close(self) -> None:
        self._drop()
        shutil.rmtree(Path(self.state_dir) / self.token, ignore_errors=True)
        try:
            self.shipped.unpersist()
        except Exception as exc:  # noqa: BLE001 - its JVM may be gone
            log.debug("the plan's broadcast left to Spark's cleaner: %s", exc)


def merged_p05(samples: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The 5th percentile of weighted samples (values, weights) of several shards."""
    values = np.concatenate([v for v, _ in samples])
    weights = np.concatenate([w for _, w in samples])
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][min(int(np.searchsorted(cum, 0.05 * cum[-1])), len(cum) - 1)])


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


#: how often a micro-batch is run again after it lost shards
LOST_STATE_RETRIES = 2
#: what a failed job says when shards are lost: a segment file gone, an executor lost more
#: often than Spark retries a task, blocks of a locally checkpointed RDD gone with their
#: executor (the shards are then rebuilt from the replay log)
LOST_STATE_MARKERS = (LOST_SEGMENT, "ExecutorLostFailure", "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND")


def lost_state(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark failing a job because shards were lost.

    >>> lost_state(RuntimeError("MQJOIN_SEGMENT_LOST: /out/_state/x/3-0-1-0.seg is gone"))
    True
    >>> lost_state(RuntimeError("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_5_1 not found!"))
    True
    >>> lost_state(RuntimeError("java.io.IOException: Mkdirs failed"))
    False
    """
    text = str(getattr(exc, "desc", None) or exc)
    return any(m in text for m in LOST_STATE_MARKERS)

