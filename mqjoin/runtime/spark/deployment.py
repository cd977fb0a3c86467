"""Deployments: a plan (or the native baseline) running as Spark streaming queries.

Started by :func:`mqjoin.runtime.spark.launch.deploy`; usage (a running Spark job, so not a
doctest; tests/test_spark_engine.py runs it)::

    d = deploy(optimize(w).plan, "data/", "out/", speedup=10)   # starts at once
    d.wait(); d.batches.tail()                                   # pandas metrics
    d.write_results()                                            # OUT/<query>.parquet

A :class:`Deployment` is a handle on running queries (the one mutable object of the engine):
``start``/``stop``/``wait`` here, in the mode :mod:`.mode` chooses; metrics as pandas
DataFrames (``batches``, ``queries``, ``stores``, ``progress``) and a live feed
(:meth:`Deployment.subscribe`), fed by the foreachBatch reports and a
``StreamingQueryListener`` (:mod:`.metrics`); the Spark UI address; and the results, read
back from the per-batch output the sink committed (:mod:`.results`) — a failing deployment
keeps what it committed.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mqjoin.model.errors import DataError, EngineError
from mqjoin.planning.plan import Plan
from mqjoin.model.workload import Workload
from mqjoin.model.tables import Table, read_inputs, result_counts
from mqjoin.runtime.contracts import BatchEngine
from mqjoin.runtime.rules import require_inputs
from mqjoin.runtime.spark.distributed import BatchReport, ShardedEngine, arrival_aggregates, latencies
from mqjoin.runtime.spark.metrics import Listener, Metrics, seq_of
from mqjoin.runtime.spark.mode import MODES, ModeChoice, mode_choice
from mqjoin.runtime.spark.results import Committed
from mqjoin.runtime.spark.session import query_conf, spark_message, spark_session, ui_url
from mqjoin.runtime.spark.source import (SOURCE_NAME, LogFeed, build_replay_log, packed_replay_log,
                                         write_replay_log)

log = logging.getLogger(__name__)

ENGINES = ("mqjoin", "native")
NATIVE = "native"  # the name of the native baseline's one streaming query



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
        self.metrics = Metrics(engine, self.mode, plan)
        self._queries: dict[str, Any] = {}  # name → StreamingQuery
        self._consumed: dict[str, int] = {}
        self.error: EngineError | None = None
        self.status = "created"
        self._stopping = False
        self.started_at: float | None = None
        self.total = 0
        self.engine: BatchEngine | None = None
        self.feed: LogFeed | None = None  # the driver mode's input
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
        if self.engine_name == "mqjoin":  # a plan's engine reads every served column: serve few
            log, self.columns = packed_replay_log(self.workload, self.tables)
        else:
            log = build_replay_log(self.workload, self.tables)
        self.total = len(log)
        path = write_replay_log(log, self.checkpoint / "replay.parquet")
        del log
        self.timings["replay_log"] = time.perf_counter() - t0
        opts = {"path": str(path), **self.pacing.options()}
        if self.engine_name == "mqjoin":  # the engines read the log's rows themselves, never as JVM rows
            opts["serve"] = "slices"
        listener = Listener.of(self.spark)
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

    def _feed(self, opts: Mapping[str, str]) -> LogFeed:
        """The driver mode's input (:class:`~.source.LogFeed`): the replay log's slice of
        every micro-batch, chosen and read by the driver."""
        self.feed = LogFeed(opts["path"], self.total, self.pacing.rate, self.pacing.speedup,
                            self.pacing.max_rows_per_batch)
        return self.feed

    def _batch_ids(self):
        """The stream that drives the driver mode: Spark's ``rate-micro-batch`` source, one
        row per micro-batch, served by the JVM — no Python process, no Spark job on its rows
        (the driver's :class:`~.source.LogFeed` holds the input)."""
        return (self.spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1)
                .option("numPartitions", 1).load())

    def _stream(self, opts: Mapping[str, str]):
        """The replay log through the Python source (:mod:`.source`)."""
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
        if self.mode == "driver":
            from mqjoin.runtime.spark.driver import VectorDriverEngine

            self.engine = VectorDriverEngine(self.plan, str(self.out), self.checkpoint / "state",
                                             on_batch=self._on_report, columns=self.columns, feed=self._feed(opts))
            stream = self._batch_ids()
        else:  # the stream resumes at the committed offset: the shards are rebuilt for it
            self._consumed["plan"] = committed_seq(self.checkpoint / "spark" / "plan")
            self.engine = ShardedEngine(self.spark, self.plan, opts["path"], str(self.out), on_batch=self._on_report,
                                        start_seq=self._consumed["plan"], columns=self.columns)
            stream = self._stream(opts)
        q = self._writer(stream, "plan", self._guard(self.engine.process)).start()
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
            self.metrics.add_queries(rows)
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
        """The input tuples of the query ``name`` whose micro-batches Spark committed."""
        if self.feed is not None:
            return self.feed.committed_seq
        q = self._queries[name]
        prog = q.lastProgress
        best = self._consumed.get(name, 0)
        if prog:
            offs = [o for o in (seq_of(s.get("endOffset")) for s in prog["sources"]) if o is not None]
            if offs:
                best = max(best, min(int(o) for o in offs))
        return best

    def stop(self) -> None:
        """Stop the queries (committed results and metrics stay)."""
        # a batch running now is interrupted (its Spark jobs cancelled): that error is the stop,
        # not a failure — the batch was not committed and runs again after a restart
        self._stopping = True
        if self.feed is not None:  # a batch waiting for input returns: its query can stop
            self.feed.close()
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

    def _fail(self, exc: BaseException, ended: bool | None = None) -> None:
        """Record the deployment's first error and report it (``status`` = ``failed``), saying
        whether its queries have ended (``ended``: asked of Spark unless the caller knows).  A
        failure first reported while a query still ran is reported again when the query ends:
        a watcher that read the first report as a warning Spark recovers from learns otherwise."""
        if self._stopping:  # the interrupted batch of stop()
            return
        if self.error is None:
            self.error = exc if isinstance(exc, EngineError) else EngineError(
                f"the {self.engine_name} deployment failed: {spark_message(exc)}")
            if self.error is not exc:
                self.error.__cause__ = exc  # what failed: bad data found in a batch, or Spark
            self.status = "failed"
        elif not ended:
            return
        self._emit({"kind": "status", "status": "failed", "error": str(self.error),
                    "ended": not self.live if ended is None else ended})

    @property
    def live(self) -> bool:
        """Whether any of the deployment's streaming queries still runs."""
        try:
            return any(q.isActive for q in self._queries.values())
        except Exception:  # noqa: BLE001 — a session that is gone runs no query
            return False

    # -- metrics --------------------------------------------------------------------------------

    @property
    def ui_url(self) -> str | None:
        return ui_url(self.spark)

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every report (dicts with ``kind`` = ``batch``,
        ``query``, ``progress`` or ``status``); returns a function that unsubscribes."""
        return self.metrics.subscribe(callback)

    def _emit(self, event: dict) -> None:
        self.metrics.emit(event)

    def _on_report(self, r: BatchReport) -> None:
        self.metrics.add_batch(r)

    def _on_listener(self, name: str, kind: str, d: dict) -> None:
        if kind == "terminated":
            if d.get("exception"):
                self._fail(EngineError(f"the {self.engine_name} deployment failed: "
                                       f"{spark_message(Exception(d['exception']))}"), ended=True)
            return
        served = None
        if self.feed is not None and isinstance(d.get("batchId"), int):  # the feed's tuples, not the rate source's row
            self.feed.committed(d["batchId"])
            served = self.feed.rows_of(d["batchId"])
            if served == 0:  # a tick after the end of input (or a stop): no micro-batch of the input
                return
        self.metrics.add_progress(name, d, served)

    @property
    def batches(self):
        """One row per micro-batch of the plan (engine ``mqjoin``)."""
        return self.metrics.batches

    @property
    def queries(self):
        """One row per (micro-batch, query): results and latency (seconds)."""
        return self.metrics.queries

    @property
    def stores(self):
        """One row per (micro-batch, store): rows held and probe messages received."""
        return self.metrics.stores

    @property
    def progress(self):
        """Spark's own progress reports (StreamingQueryListener), one row per query and batch."""
        return self.metrics.progress

    # -- results ------------------------------------------------------------------------------

    @property
    def committed(self) -> Committed:
        """The per-batch results the sink committed so far."""
        return Committed(self.out, self.engine_name)

    def _output_workload(self) -> Workload:
        """The workload whose queries the output files are written for."""
        return self.workload

    def results(self) -> dict[str, set[tuple[int, ...]]]:
        """Query → set of result tuples (row indices in the query's relation order) committed
        so far: to compare result sets (tests, notebooks); the run's own path —
        :meth:`write_results`, :meth:`result_counts`, :meth:`summary` — never builds them."""
        return self.committed.sets(self._result_queries())

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
        return self.committed.counts(self._result_queries())

    def write_results(self) -> Path:
        """Write ``OUT/<query>.parquet`` in the CLI's output format from the committed batches
        (:meth:`.results.Committed.write`: memory bounded by a record batch, not by the results)."""
        path = self.committed.write(self._output_workload())
        self._written = True
        return path

    def summary(self) -> dict[str, Any]:
        """Throughput, latency and state figures of the run so far (``--json`` output)."""
        return self.metrics.summary(
            self.total, {"engine": self.engine_name, "mode": self.mode, "spark_mode": self.mode_choice.to_dict(),
                         "input_tuples": self.total},
            {"results": self.result_counts(), "ui": self.ui_url})


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
