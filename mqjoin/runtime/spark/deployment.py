"""Deployments: a plan (or the native baseline) running as Spark streaming queries.

Started by :func:`mqjoin.runtime.spark.launch.deploy`; usage (a running Spark job, so not a
doctest; tests/test_spark_engine.py runs it)::

    d = deploy(optimize(w).plan, "data/", "out/", speedup=10)   # starts at once
    d.wait(); d.batches.tail()                                   # pandas metrics
    d.write_results()                                            # OUT/<query>.parquet

A :class:`Deployment` is a handle on running queries (the one mutable object of the engine):
``start``/``stop``/``wait``, metrics as pandas DataFrames (``batches``, ``queries``,
``stores``, ``progress``), a live feed (:meth:`Deployment.subscribe`, fed by the foreachBatch
reports and a ``StreamingQueryListener``), the Spark UI address, and the results, read back
from the per-batch output the sink committed — a failing deployment keeps what it committed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mqjoin.model.errors import DataError, EngineError
from mqjoin.planning.plan import Plan
from mqjoin.model.workload import Workload
from mqjoin.model.tables import ResultWriter, Table, read_inputs, result_counts, time_range
from mqjoin.runtime.contracts import BatchEngine
from mqjoin.runtime.partitions import partitions_summary
from mqjoin.runtime.rules import require_inputs
from mqjoin.runtime.spark.distributed import BatchReport, ShardedEngine, arrival_aggregates, latencies
from mqjoin.runtime.spark.session import (DEFAULT_MASTER, query_conf, spark_message,
                                         spark_session, ui_url)
from mqjoin.support.units import count, size
from mqjoin.runtime.spark.source import SOURCE_NAME, build_replay_log, pack_replay_log, write_replay_log

log = logging.getLogger(__name__)

ENGINES = ("mqjoin", "native")
NATIVE = "native"  # the name of the native baseline's one streaming query
MODES = ("auto", "driver", "distributed")  # where the plan's stores live (see spark_mode())


#: masters whose executors run on other machines: the stores go where the cluster's memory is
CLUSTER_MASTERS = ("spark://", "yarn", "k8s://", "mesos://")
#: bytes one store row takes in the driver mode's vectorised executor — its column arrays,
#: arrival number and key index — rounded up from the most measured on the TPC-H plans
#: (41–76 bytes of arrays, 41–79 bytes of resident memory per row at SF 0.1:
#: ``python benchmarks/state_bytes.py --sf 0.01,0.1``)
STATE_BYTES_PER_ROW = 100
#: the share of the driver's memory the estimated state may take before ``auto`` shards it:
#: the rest is the batch being processed, its results and Spark's own
DRIVER_SHARE = 0.5


@dataclass(frozen=True)
class ModeChoice:
    """Where a deployment keeps the plan's stores (``driver`` or ``distributed``) and why, in
    words that name the numbers."""

    mode: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


def choose_mode(mode: str, master: str, state_rows: float | None = None, memory: float | None = None,
                share: float = DRIVER_SHARE) -> ModeChoice:
    """The engine mode a deployment runs, and why.  ``driver`` keeps the stores in the
    in-process executor behind ``foreachBatch`` (:mod:`.driver`: one Spark job per
    micro-batch, exact restarts from its state journal), ``distributed`` shards every store
    over the executors (:mod:`.distributed`: state spread over the cluster).  ``auto``: on a
    cluster master (:data:`CLUSTER_MASTERS`) distributed; on a local master driver while the
    estimated state — ``state_rows`` (:func:`estimated_state_rows`) at
    :data:`STATE_BYTES_PER_ROW` — fits ``share`` of the ``memory`` bytes available to the
    driver's Python process (where the driver mode's stores live), else distributed.

    >>> choose_mode("auto", "local[2]", 2_212_771, 16 * 1024**3)
    ModeChoice(mode='driver', reason='estimated state 221 MB (2.2 million rows) ≤ 50 % of available memory 17 GB')
    >>> choose_mode("auto", "local[*]", 3e7, 2 * 1024**3).reason
    'estimated state 3.0 GB (30 million rows) > 50 % of available memory 2.1 GB'
    >>> choose_mode("auto", "spark://10.0.0.1:7077").to_dict()
    {'mode': 'distributed', 'reason': 'cluster master spark://10.0.0.1:7077: the stores are sharded over its executors'}
    >>> choose_mode("driver", "yarn").reason
    'asked for (--spark-mode driver)'
    """
    if mode not in MODES:
        raise EngineError(f"unknown Spark mode {mode!r}: choose one of {', '.join(MODES)}")
    if mode != "auto":
        return ModeChoice(mode, f"asked for (--spark-mode {mode})")
    if str(master).startswith(CLUSTER_MASTERS):
        return ModeChoice("distributed", f"cluster master {master}: the stores are sharded over its executors")
    if state_rows is None or memory is None:
        return ModeChoice("driver", f"local master {master}: the stores stay in the driver (no state estimate)")
    need, bound = state_rows * STATE_BYTES_PER_ROW, share * memory
    fits = need <= bound
    return ModeChoice("driver" if fits else "distributed",
                      f"estimated state {size(need)} ({count(state_rows)} rows) {'≤' if fits else '>'} "
                      f"{share * 100:g} % of available memory {size(memory)}")


def spark_mode(mode: str, master: str) -> str:
    """The mode :func:`choose_mode` picks without a state estimate (``auto``: distributed on a
    cluster master, driver on a local one).

    >>> spark_mode("auto", "local[2]"), spark_mode("auto", "spark://10.0.0.1:7077"), spark_mode("driver", "yarn")
    ('driver', 'distributed', 'driver')
    """
    return choose_mode(mode, master).mode


def estimated_state_rows(plan: Plan, tables: Mapping[str, Table] | None = None, span: float | None = None) -> float:
    """The rows the plan's stores hold at the end of a run over ``tables`` (or ``span`` time
    units of input at the workload's rates): the cost model's ``|⋈M| · Π min(w_R, S)`` per
    store over the input's event-time span ``S`` (:func:`mqjoin.planning.measured.memory_on`),
    or over the plan's horizon without either — its memory (docs/model.md §5)."""
    from mqjoin.planning.measured import memory_on

    if tables:
        span = time_range(tables)[1]
    return float(memory_on(plan, span=span if span and span > 0 else None))


def available_memory() -> float | None:
    """The machine's available memory in bytes (``MemAvailable``; None where it is unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def mode_choice(plan: Plan | None, tables: Mapping[str, Table] | None, mode: str = "auto", master: str | None = None,
                spark=None, span: float | None = None) -> ModeChoice:
    """:func:`choose_mode` for ``plan`` over ``tables`` (or ``span`` time units of input at the
    workload's rates: :func:`estimated_state_rows`) on the master of the running session
    ``spark``, else ``master``.  The memory is the machine's available memory: on a local
    master the driver mode's stores live in the driver's Python process, which
    ``spark.driver.memory`` (the JVM's heap) does not bound."""
    if spark is not None:
        master = spark.sparkContext.master
    if mode == "auto" and plan is None:
        return ModeChoice("driver", "adaptive: the plans of every epoch keep their stores in the driver's executor")
    if mode != "auto":
        return choose_mode(mode, master or DEFAULT_MASTER)
    return choose_mode(mode, master or DEFAULT_MASTER, estimated_state_rows(plan, tables, span), available_memory())


@dataclass(frozen=True)
class Pacing:
    """How fast the replay serves input: ``rate`` tuples/s, or ``speedup`` × event time, or
    neither (as fast as the engine takes it, ``max_rows_per_batch`` per micro-batch)."""

    rate: float | None = None
    speedup: float | None = None
    max_rows_per_batch: int | None = None
    trigger_seconds: float | None = None

    def options(self) -> dict[str, str]:
        if self.rate is not None and self.rate <= 0:
            raise DataError(f"rate must be positive, got {self.rate}")
        if self.speedup is not None and self.speedup <= 0:
            raise DataError(f"speedup must be positive, got {self.speedup}")
        if self.max_rows_per_batch is not None and self.max_rows_per_batch < 1:
            raise DataError(f"max rows per batch must be at least 1, got {self.max_rows_per_batch}")
        opts = {}
        if self.rate:
            opts["rate"] = repr(float(self.rate))
        if self.speedup:
            opts["speedup"] = repr(float(self.speedup))
        if self.max_rows_per_batch:
            opts["maxRowsPerBatch"] = str(int(self.max_rows_per_batch))
        return opts


class _Listener:
    """One StreamingQueryListener per session, dispatching progress events by query id.

    The registry holds each session weakly (a collected session's entry goes with it, so a new
    session that Python places at the same address never inherits it) and drops the sessions
    whose context has stopped: their listener belonged to a streaming query manager that is
    gone, and a query of a new session must report to a listener of its own.  A query's route
    goes when the query terminates (Spark reports its progress before), so a listener does not
    keep every deployment of a long-lived session alive."""

    _installed: "weakref.WeakKeyDictionary[Any, _Listener]" = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[str, dict], None]] = {}

    @classmethod
    def of(cls, spark) -> "_Listener":
        from pyspark.sql.streaming import StreamingQueryListener

        with cls._lock:
            for stopped in [s for s in cls._installed if _stopped(s)]:
                del cls._installed[stopped]
            me = cls._installed.get(spark)
            if me is None:
                me = cls()

                class L(StreamingQueryListener):
                    def onQueryStarted(self, event):
                        pass

                    def onQueryProgress(self, event):
                        f = me.routes.get(str(event.progress.id))
                        if f:
                            f("progress", json.loads(event.progress.json))

                    def onQueryIdle(self, event):
                        pass

                    def onQueryTerminated(self, event):  # its last event: the route (and deployment) go
                        f = me.routes.pop(str(event.id), None)
                        if f:
                            f("terminated", {"exception": event.exception})

                spark.streams.addListener(L())
                cls._installed[spark] = me
            return me


def check_deployment(engine: str, mode: str, partitions: int | None) -> None:
    """Typed errors for an unknown engine or Spark mode, and for shuffle partitions given to
    an engine other than the native baseline (or fewer than one)."""
    if engine not in ENGINES:
        raise EngineError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if partitions is not None and (engine != "native" or int(partitions) < 1):
        raise EngineError(f"partitions={partitions!r}: the shuffle partitions of the native baseline's joins "
                          "(a whole number ≥ 1, engine 'native' only)")
    if mode not in MODES:
        raise EngineError(f"unknown Spark mode {mode!r}: choose one of {', '.join(MODES)}")


def _stopped(spark) -> bool:
    """Whether a session's context has stopped (pyspark's own test: its Java handle is gone)."""
    return getattr(spark.sparkContext, "_jsc", None) is None


class Deployment:
    """A running (or finished) deployment; see the module doc.  Create with :func:`deploy`."""

    def __init__(self, plan: Plan | None, data: str | Path | Mapping[str, Table], out: str | Path, *,
                 engine: str = "mqjoin", spark=None, master: str | None = None,
                 checkpoint: str | Path | None = None, pacing: Pacing = Pacing(),
                 conf: Mapping[str, Any] | None = None, workload: Workload | None = None, mode: str = "auto",
                 partitions: int | None = None):
        check_deployment(engine, mode, partitions)
        self.partitions = partitions
        self.mode_asked = mode
        self.plan, self.engine_name, self.pacing = plan, engine, pacing
        self.workload = workload if workload is not None else plan.workload
        pacing.options()  # bad pacing fails before Spark starts (and before a temporary directory exists)
        self.out = Path(out)
        self._tmp = None
        if checkpoint is None:
            self._tmp = tempfile.mkdtemp(prefix="mqjoin-ckpt-")
            checkpoint = self._tmp
        self.checkpoint = Path(checkpoint)
        #: where the deployment's own seconds went: ``replay_log`` (building, packing and
        #: writing the replay log), ``session_wait`` (waiting for a session started ahead)
        self.timings: dict[str, float] = {}
        self.tables = dict(data) if isinstance(data, Mapping) else self._read_inputs(data)
        require_inputs(self.workload, self.tables)
        self._spark = spark
        if spark is None:
            try:
                self._spark = spark_session(master, conf)
            except BaseException:
                self.cleanup()  # nothing was written yet: the temporary checkpoint goes
                raise
        ahead = isinstance(self._spark, Future)  # the session still starting (start_ahead): its master is asked for
        self.mode_choice = ModeChoice("native", "Spark's own stream-stream joins (engine native)") \
            if engine != "mqjoin" else mode_choice(plan, self.tables, mode, master=master) if ahead else \
            mode_choice(plan, self.tables, mode, spark=self.spark)
        self.mode = self.mode_choice.mode
        self._lock = threading.Lock()
        self._reports: list[dict] = []
        self._query_rows: list[dict] = []
        self._store_rows: list[dict] = []
        self._partitions: list[Mapping[str, Any]] = []  # per batch: store id → counts per logical partition
        self._progress: list[dict] = []
        self._subscribers: list[Callable[[dict], None]] = []
        self._queries: dict[str, Any] = {}  # name → StreamingQuery
        self._consumed: dict[str, int] = {}
        self.error: EngineError | None = None
        self.status = "created"
        self._stopping = False
        self.started_at: float | None = None
        self.total = 0
        self.engine: BatchEngine | None = None
        self.columns: dict[str, str] | None = None  # the packed log's attribute columns (plan engines)
        self._written = False  # OUT/<query>.parquet written from every committed batch

    def _read_inputs(self, data: str | Path) -> dict[str, Table]:
        return read_inputs(self.workload, data)

    @property
    def spark(self):
        """The Spark session (waited for here when it was started ahead, :func:`.session.start_ahead`)."""
        if isinstance(self._spark, Future):
            t0 = time.perf_counter()
            try:
                self._spark = self._spark.result()
            except BaseException:
                self.cleanup()
                raise
            finally:
                self.timings["session_wait"] = time.perf_counter() - t0
        return self._spark

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "Deployment":
        if self.status == "running":
            return self
        t0 = time.perf_counter()
        log = build_replay_log(self.workload, self.tables)
        self.total = len(log)
        if self.engine_name == "mqjoin":  # a plan's engine reads every served column: serve few
            log, self.columns = pack_replay_log(log)
        path = write_replay_log(log, self.checkpoint / "replay.parquet")
        del log
        self.timings["replay_log"] = time.perf_counter() - t0
        opts = {"path": str(path), **self.pacing.options()}
        listener = _Listener.of(self.spark)
        self.started_at = time.time()
        try:
            if self.engine_name == "mqjoin":
                self._start_mqjoin(opts, listener)
            else:
                self._start_native(opts, listener)
        except Exception as exc:  # recorded as the deployment's error, raised with its cause
            self._fail(exc)
            if self.error is None or self.error is exc:  # stopped meanwhile, or already an EngineError
                raise
            raise self.error from exc
        self.status = "running"
        self._emit({"kind": "status", "status": self.status, "ui": self.ui_url})
        return self

    def _stream(self, opts: Mapping[str, str]):
        reader = self.spark.readStream.format(SOURCE_NAME)
        for k, v in opts.items():
            reader = reader.option(k, v)
        return reader.load()

    def _writer(self, df, name: str, fn):
        w = df.writeStream.queryName(f"mqjoin_{self.engine_name}_{name}_{id(self)}").foreachBatch(fn)
        w = w.option("checkpointLocation", str(self.checkpoint / "spark" / name))
        if self.pacing.trigger_seconds:
            w = w.trigger(processingTime=f"{self.pacing.trigger_seconds} seconds")
        return w

    def _start_mqjoin(self, opts, listener) -> None:
        self._consumed["plan"] = committed_seq(self.checkpoint / "spark" / "plan")
        if self.mode == "driver":
            from mqjoin.runtime.spark.driver import VectorDriverEngine

            self.engine = VectorDriverEngine(self.plan, str(self.out), self.checkpoint / "state",
                                             on_batch=self._on_report, columns=self.columns)
        else:  # the stream resumes at the committed offset: the shards are rebuilt for it
            self.engine = ShardedEngine(self.spark, self.plan, opts["path"], str(self.out), on_batch=self._on_report,
                                        start_seq=self._consumed["plan"], columns=self.columns)
            opts = {**opts, "serve": "slices"}  # its tasks read the log's rows themselves
        q = self._writer(self._stream(opts), "plan", self._guard(self.engine.process)).start()
        self._queries["plan"] = q
        listener.routes[str(q.id)] = lambda kind, d: self._on_listener("plan", kind, d)

    def _start_native(self, opts, listener) -> None:
        from mqjoin.runtime.spark.native import native_settings, native_union

        df = native_union(self.spark, self.workload, opts["path"], rate=self.pacing.rate,
                          speedup=self.pacing.speedup, max_rows_per_batch=self.pacing.max_rows_per_batch)
        self._consumed[NATIVE] = committed_seq(self.checkpoint / "spark" / NATIVE)
        settings = native_settings(self.spark, self.partitions)
        with query_conf(self.spark, settings):
            q = self._writer(df, NATIVE, self._guard(self._native_sink())).start()
        self._queries[NATIVE] = q
        listener.routes[str(q.id)] = lambda kind, d: self._on_listener(NATIVE, kind, d)

    def _guard(self, fn):
        """Keep a Python error from a batch readable: it is re-raised (Spark stops the query)
        after being recorded with its own message."""
        def run(df, batch_id):
            try:
                fn(df, batch_id)
            except Exception as exc:
                self._fail(exc)
                raise
        return run

    def _native_sink(self):
        """The one foreachBatch sink of the native query: one write of every query's results
        (tagged by query) to ``OUT/_native/batch=<id>`` (overwrite: a batch re-run after a
        restart replaces its own output), with one Observation holding each query's count and
        arrival aggregates — one Spark job per micro-batch."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        names = self._result_queries()

        def sink(df, batch_id):
            started = time.time()
            ob = Observation(f"native_{batch_id}_{id(self)}")
            aggs = [a for i, q in enumerate(names) for a in arrival_aggregates(F.col("query") == q, f"_{i}")]
            df.observe(ob, *aggs).write.mode("overwrite").parquet(str(self.out / "_native" / f"batch={batch_id}"))
            committed = time.time()
            m = ob.get
            rows = []
            for i, qname in enumerate(names):
                n = int(m.get(f"n_{i}") or 0)
                row = {"engine": "native", "batch": batch_id, "query": qname, "results": n, "started": started,
                       "seconds": committed - started}
                if n:
                    lat = latencies({k: m[f"{k}_{i}"] for k in ("mean", "min", "p05")}, committed)
                    row.update(latency_mean=lat[0], latency_p95=lat[1], latency_max=lat[2])
                rows.append(row)
            with self._lock:
                self._query_rows.extend(rows)
            for row in rows:
                self._emit({"kind": "query", **row})
        return sink

    def wait(self, timeout: float | None = None, poll: float = 0.2) -> bool:
        """Block until all input is consumed (True), the deployment failed (raises
        :class:`EngineError`) or ``timeout`` seconds passed (False)."""
        deadline = None if timeout is None else time.time() + timeout
        while True:
            if self.error is not None:
                raise self.error
            for q in self._queries.values():
                exc = q.exception()
                if exc is not None:
                    self._fail(exc)
                    raise self.error
            if self.done:
                return True
            if deadline is not None and time.time() > deadline:
                return False
            time.sleep(poll)

    @property
    def done(self) -> bool:
        """All input is consumed *and committed by Spark*: a stop after this interrupts no batch
        (the engine's own counters advance before Spark commits the batch and before its
        metrics are recorded; stopping then lost the last batch's report)."""
        if not self._queries or not self.total:
            return bool(self._queries) and not self.total
        return all(self._source_offset(n) >= self.total for n in self._queries)

    def _source_offset(self, name: str) -> int:
        q = self._queries[name]
        prog = q.lastProgress
        best = self._consumed.get(name, 0)
        if prog:
            offs = [o for o in (_seq_of(s.get("endOffset")) for s in prog["sources"]) if o is not None]
            if offs:
                best = max(best, min(int(o) for o in offs))
        return best

    def stop(self) -> None:
        """Stop the queries (committed results and metrics stay)."""
        # a batch running now is interrupted (its Spark jobs cancelled): that error is the stop,
        # not a failure — the batch was not committed and runs again after a restart
        self._stopping = True
        for name, q in self._queries.items():
            try:
                q.stop()
            except Exception as exc:  # noqa: BLE001 — stop the others all the same, and say which one is left
                log.warning("could not stop the streaming query %r of the %s deployment: %s",
                            name, self.engine_name, spark_message(exc))
        if self.engine:
            self.engine.close()
        if self.status == "running":
            self.status = "finished" if self.done else "stopped"
        self._emit({"kind": "status", "status": self.status, "error": None if self.error is None else str(self.error)})

    def cleanup(self) -> None:
        """Remove the temporary checkpoint directory (only one the deployment created)."""
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _fail(self, exc: BaseException) -> None:
        if self._stopping:  # the interrupted batch of stop()
            return
        if self.error is None:
            self.error = exc if isinstance(exc, EngineError) else EngineError(
                f"the {self.engine_name} deployment failed: {spark_message(exc)}")
            if self.error is not exc:
                self.error.__cause__ = exc  # what failed: bad data found in a batch, or Spark
            self.status = "failed"
            self._emit({"kind": "status", "status": "failed", "error": str(self.error)})

    # -- metrics --------------------------------------------------------------------------------

    @property
    def ui_url(self) -> str | None:
        return ui_url(self.spark)

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every report (dicts with ``kind`` = ``batch``,
        ``query``, ``progress`` or ``status``); returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _emit(self, event: dict) -> None:
        for f in list(self._subscribers):
            try:
                f(event)
            except Exception:  # a broken widget must not stop the deployment, nor fail in silence
                log.exception("a subscriber of the deployment failed on a %s event", event.get("kind"))

    def _on_report(self, r: BatchReport) -> None:
        msgs_by_store: dict[str, int] = {}
        for lab, m in r.probe_messages.items() if self.plan is not None else ():
            sid = self.plan.edge[lab].target
            msgs_by_store[sid] = msgs_by_store.get(sid, 0) + m
        row = {"engine": self.engine_name, "mode": self.mode, "batch": r.batch, "input_rows": r.input_rows,
               "started": r.started, "jobs": r.jobs, "stages": r.stages,
               "seconds": r.seconds, "rows_per_s": r.input_rows / r.seconds if r.seconds > 0 else None,
               "results": sum(r.results.values()), "probe_messages": sum(r.probe_messages.values()),
               "state_rows": sum(r.store_rows.values()), "state_bytes": r.state_bytes,
               "min_ts": r.min_ts, "max_ts": r.max_ts, "rebuilt": r.rebuilt}
        qrows = [{"engine": self.engine_name, "batch": r.batch, "query": q, "results": n, "started": r.started,
                  "seconds": r.seconds, "latency_mean": r.latency_mean.get(q), "latency_p95": r.latency_p95.get(q),
                  "latency_max": r.latency_max.get(q)} for q, n in r.results.items()]
        srows = [{"engine": self.engine_name, "batch": r.batch, "store": s, "rows": n,
                  "messages": msgs_by_store.get(s, 0),
                  **({"rows_per_shard": list(r.shards[s]["rows"]), "received_per_shard": list(r.shards[s]["received"])}
                     if s in r.shards else {})} for s, n in r.store_rows.items()]
        with self._lock:
            self._reports.append(row)
            self._query_rows.extend(qrows)
            self._store_rows.extend(srows)
            if r.partitions:
                self._partitions.append(r.partitions)
        self._emit({"kind": "batch", **row, "queries": qrows, "stores": srows})

    def _on_listener(self, name: str, kind: str, d: dict) -> None:
        if kind == "terminated":
            if d.get("exception"):
                self._fail(EngineError(f"the {self.engine_name} deployment failed: "
                                       f"{spark_message(Exception(d['exception']))}"))
            return
        state = d.get("stateOperators") or []
        rows, scale = served_rows(d)
        row = {"engine": self.engine_name, "query": name, "batch": d.get("batchId"),
               "input_rows": rows, "input_rows_per_s": _scaled(d.get("inputRowsPerSecond"), scale),
               "processed_rows_per_s": _scaled(d.get("processedRowsPerSecond"), scale),
               "duration_ms": (d.get("durationMs") or {}).get("triggerExecution"),
               "state_rows": sum(int(s.get("numRowsTotal") or 0) for s in state),
               "state_bytes": sum(int(s.get("memoryUsedBytes") or 0) for s in state),
               "timestamp": d.get("timestamp")}
        with self._lock:
            self._progress.append(row)
        self._emit({"kind": "progress", **row})

    def _frame(self, rows: list[dict]):
        import pandas as pd

        with self._lock:
            return pd.DataFrame(list(rows))

    @property
    def batches(self):
        """One row per micro-batch of the plan (engine ``mqjoin``)."""
        return self._frame(self._reports)

    @property
    def queries(self):
        """One row per (micro-batch, query): results and latency (seconds)."""
        return self._frame(self._query_rows)

    @property
    def stores(self):
        """One row per (micro-batch, store): rows held and probe messages received."""
        return self._frame(self._store_rows)

    @property
    def progress(self):
        """Spark's own progress reports (StreamingQueryListener), one row per query and batch."""
        return self._frame(self._progress)

    # -- results ------------------------------------------------------------------------------

    def _parts(self) -> list[Path]:
        """The committed per-batch result files, in batch order."""
        from mqjoin.runtime.spark.frames import committed_parts

        return committed_parts(self.out / ("_batches" if self.engine_name == "mqjoin" else "_native"))

    def _output_workload(self) -> Workload:
        """The workload whose queries the output files are written for."""
        return self.workload

    def results(self) -> dict[str, set[tuple[int, ...]]]:
        """Query → set of result tuples (row indices in the query's relation order) committed
        so far: to compare result sets (tests, notebooks); the run's own path —
        :meth:`write_results`, :meth:`result_counts`, :meth:`summary` — never builds them."""
        from mqjoin.runtime.spark.frames import read_parts

        out: dict[str, set[tuple[int, ...]]] = {q: set() for q in self._result_queries()}
        for q, rows in read_parts(self._parts()):
            out[q].update(map(tuple, rows.tolist()))
        return out

    def result_sets(self) -> dict[str, set[tuple[int, ...]]]:
        """:meth:`results` under the name of the :class:`~mqjoin.runtime.contracts.EngineRun`
        contract (a finished deployment is an engine's run)."""
        return self.results()

    def _result_queries(self) -> list[str]:
        return [q.name for q in self.workload.queries]

    def result_counts(self) -> dict[str, int]:
        """Query → results committed so far: from ``OUT/<query>.parquet``'s metadata once
        :meth:`write_results` wrote them, else from the committed batches' ``query`` column."""
        if self._written:
            return result_counts(self._output_workload(), self.out)
        from mqjoin.runtime.spark.frames import count_parts

        counts = count_parts(self._parts())
        return {q: counts.get(q, 0) for q in self._result_queries()}

    def write_results(self) -> Path:
        """Write ``OUT/<query>.parquet`` in the CLI's output format from the committed batches,
        one record batch of a part at a time (memory bounded by that, not by the results);
        rows in batch order, then as each batch's parts hold them."""
        from mqjoin.runtime.spark.frames import read_parts

        with ResultWriter(self._output_workload(), self.out) as put:
            for q, rows in read_parts(self._parts()):
                put.add(q, rows)
        self._written = True
        return put.dir

    def summary(self) -> dict[str, Any]:
        """Throughput, latency and state figures of the run so far (``--json`` output)."""
        import numpy as np

        b, q, p = self.batches, self.queries, self.progress
        busy = float(b["seconds"].sum()) if len(b) else float(q.groupby("batch")["seconds"].max().sum()) if len(q) else 0.0
        # rows with latencies (a run without results has none: native reports no latency columns then)
        lat = q.dropna(subset=["latency_mean"]) if "latency_mean" in q else q.iloc[:0]
        weights = lat["results"].to_numpy() if len(lat) else np.array([])
        out = {
            # native: its sink's per-query rows name every batch (the listener's reports may lag)
            "engine": self.engine_name, "mode": self.mode, "spark_mode": self.mode_choice.to_dict(),
            "input_tuples": self.total,
            "batches": int(len(b) or (q["batch"].nunique() if len(q) else 0) or (p["batch"].nunique() if len(p) else 0)),
            "busy_seconds": busy, "throughput": self.total / busy if busy > 0 else None,
            "latency_mean": float(np.average(lat["latency_mean"], weights=weights)) if weights.sum() else None,
            "latency_p95_max": float(lat["latency_p95"].max()) if len(lat) and "latency_p95" in lat else None,
            "results": self.result_counts(), "ui": self.ui_url,
        }
        if self.engine_name == "mqjoin" and len(b):
            out["probe_messages"] = int(b["probe_messages"].sum())
            out["jobs_per_batch"] = float(b["jobs"].mean())
            out["stages_per_batch"] = float(b["stages"].mean())
            out["state_rows_max"] = int(b["state_rows"].max())
            out["state_bytes_max"] = int(b["state_bytes"].max())
            with self._lock:
                batches = list(self._partitions)
            if batches:  # every store's probe messages (summed) and rows (last batch) per logical partition
                out["partitions"] = partitions_summary(batches)
            st = self.stores
            if "rows_per_shard" in st:  # distributed: each store's rows (last batch) and probe tuples per shard
                out["shards"] = {sid: {"rows": list(g["rows_per_shard"].iloc[-1]),
                                       "received": [int(x) for x in np.sum(list(g["received_per_shard"]), axis=0)]}
                                 for sid, g in st.groupby("store", sort=True)}
        elif len(p):
            per_batch = p.groupby("query")[["state_rows", "state_bytes"]].max()
            out["state_rows_max"] = int(per_batch["state_rows"].sum())
            out["state_bytes_max"] = int(per_batch["state_bytes"].sum())
        return out


def _seq_of(offset) -> int | None:
    """The ``seq`` of a replay source's offset as a progress report gives it (JSON text or dict)."""
    if offset is None:
        return None
    try:
        return int((json.loads(offset) if isinstance(offset, str) else offset)["seq"])
    except (ValueError, TypeError, KeyError):
        return None


def served_rows(progress: Mapping[str, Any]) -> tuple[int | None, float]:
    """Tuples a micro-batch read, from its progress report: the replay sources' offsets moved
    by that many, and ``numInputRows`` scaled to it (the factor is returned).  Spark counts a
    source once per branch that reads it — the native baseline reads its one replay source in
    every relation's branch — so its ``numInputRows`` exceeds the input; the offsets do not.

    >>> p = {"numInputRows": 600, "sources": [{"startOffset": '{"seq": 100}', "endOffset": {"seq": 300}}]}
    >>> served_rows(p)
    (200, 0.3333333333333333)
    >>> served_rows({"numInputRows": 5, "sources": [{"startOffset": None, "endOffset": None}]})
    (5, 1.0)
    """
    reported = progress.get("numInputRows")
    moved = None
    for src in progress.get("sources") or ():
        end = _seq_of(src.get("endOffset"))
        if end is None:
            continue
        start = _seq_of(src.get("startOffset")) or 0
        moved = (moved or 0) + max(0, end - start)
    if moved is None:
        return reported, 1.0
    scale = moved / reported if reported else 1.0
    return moved, scale


def _scaled(x, scale: float):
    return None if x is None else x * scale


def committed_seq(spark_checkpoint: Path) -> int:
    """The source offset a restarted query resumes from (0 for a new checkpoint)."""
    commits = spark_checkpoint / "commits"
    offsets = spark_checkpoint / "offsets"
    if not commits.is_dir():
        return 0
    ids = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    if not ids:
        return 0
    try:
        lines = (offsets / str(ids[-1])).read_text().splitlines()
        seqs = [json.loads(line)["seq"] for line in lines[2:] if line.startswith("{") and '"seq"' in line]
        return min(int(s) for s in seqs) if seqs else 0
    except (OSError, ValueError, KeyError):
        return 0
