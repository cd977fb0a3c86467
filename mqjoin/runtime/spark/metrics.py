"""What a running deployment reports, kept as rows: one per micro-batch of the plan (its
engine's :class:`~.distributed.BatchReport`), per (batch, query), per (batch, store), and
Spark's own progress reports (a ``StreamingQueryListener``, :class:`Listener`), as pandas
frames, a live feed of events, and the run's summary (``--json``).

:class:`Metrics` is written by the engine's batches, the native sink and the listener (each
from its own thread, under one lock) and read by the deployment's frames and widgets.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from typing import Any, Callable, Mapping

from mqjoin.planning.plan import Plan
from mqjoin.runtime.partitions import partitions_summary
from mqjoin.runtime.spark.distributed import BatchReport

log = logging.getLogger(__name__)


class Metrics:
    """The rows a deployment's run reported so far (see the module doc) and its subscribers:
    ``engine`` and ``mode`` name the rows, ``plan`` maps a step's probe messages to the store
    it probes (None: the native baseline, no plan)."""

    def __init__(self, engine: str, mode: str, plan: Plan | None) -> None:
        self.engine, self.mode, self.plan = engine, mode, plan
        self.lock = threading.Lock()
        self._reports: list[dict] = []
        self._query_rows: list[dict] = []
        self._store_rows: list[dict] = []
        self._partitions: list[Mapping[str, Any]] = []  # per batch: store id → counts per logical partition
        self._progress: list[dict] = []
        self._subscribers: list[Callable[[dict], None]] = []

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every report (dicts with ``kind`` = ``batch``,
        ``query``, ``progress`` or ``status``); returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def emit(self, event: dict) -> None:
        for f in list(self._subscribers):
            try:
                f(event)
            except Exception:  # a broken widget must not stop the deployment, nor fail in silence
                log.exception("a subscriber of the deployment failed on a %s event", event.get("kind"))

    def add_batch(self, r: BatchReport) -> None:
        """A micro-batch of the plan's engine: its row, its queries' and its stores' rows."""
        msgs_by_store: dict[str, int] = {}
        if self.plan is not None:
            for lab, m in r.probe_messages.items():
                sid = self.plan.edge[lab].target
                msgs_by_store[sid] = msgs_by_store.get(sid, 0) + m
        row = {"engine": self.engine, "mode": self.mode, "batch": r.batch, "input_rows": r.input_rows,
               "started": r.started, "jobs": r.jobs, "stages": r.stages,
               "seconds": r.seconds, "rows_per_s": r.input_rows / r.seconds if r.seconds > 0 else None,
               "results": sum(r.results.values()), "probe_messages": sum(r.probe_messages.values()),
               "state_rows": sum(r.store_rows.values()), "state_bytes": r.state_bytes,
               "min_ts": r.min_ts, "max_ts": r.max_ts, "rebuilt": r.rebuilt}
        qrows = [{"engine": self.engine, "batch": r.batch, "query": q, "results": n, "started": r.started,
                  "seconds": r.seconds, "latency_mean": r.latency_mean.get(q), "latency_p95": r.latency_p95.get(q),
                  "latency_max": r.latency_max.get(q)} for q, n in r.results.items()]
        srows = [{"engine": self.engine, "batch": r.batch, "store": s, "rows": n,
                  "messages": msgs_by_store.get(s, 0),
                  **({"rows_per_shard": list(r.shards[s]["rows"]), "received_per_shard": list(r.shards[s]["received"])}
                     if s in r.shards else {})} for s, n in r.store_rows.items()]
        with self.lock:
            self._reports.append(row)
            self._query_rows.extend(qrows)
            self._store_rows.extend(srows)
            if r.partitions:
                self._partitions.append(r.partitions)
        self.emit({"kind": "batch", **row, "queries": qrows, "stores": srows})

    def add_queries(self, rows: list[dict]) -> None:
        """A micro-batch's rows per query (the native sink's, which has no batch report)."""
        with self.lock:
            self._query_rows.extend(rows)
        for row in rows:
            self.emit({"kind": "query", **row})

    def add_progress(self, name: str, d: Mapping[str, Any], served: int | None = None) -> None:
        """Spark's progress report ``d`` of the streaming query ``name``; ``served``: the input
        tuples of its micro-batch when the driver served them (:func:`served_rows`)."""
        state = d.get("stateOperators") or []
        rows, scale = served_rows(d, served)
        row = {"engine": self.engine, "query": name, "batch": d.get("batchId"),
               "input_rows": rows, "input_rows_per_s": _scaled(d.get("inputRowsPerSecond"), scale),
               "processed_rows_per_s": _scaled(d.get("processedRowsPerSecond"), scale),
               "duration_ms": (d.get("durationMs") or {}).get("triggerExecution"),
               "state_rows": sum(int(s.get("numRowsTotal") or 0) for s in state),
               "state_bytes": sum(int(s.get("memoryUsedBytes") or 0) for s in state),
               "timestamp": d.get("timestamp")}
        with self.lock:
            self._progress.append(row)
        self.emit({"kind": "progress", **row})

    def _frame(self, rows: list[dict]):
        import pandas as pd

        with self.lock:
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

    def summary(self, total: int, head: Mapping[str, Any], tail: Mapping[str, Any]) -> dict[str, Any]:
        """Throughput, latency and state figures of the rows so far, for ``total`` input tuples,
        between the deployment's own fields ``head`` and ``tail`` (``--json``'s order)."""
        import numpy as np

        b, q, p = self.batches, self.queries, self.progress
        busy = (float(b["seconds"].sum()) if len(b)
                else float(q.groupby("batch")["seconds"].max().sum()) if len(q) else 0.0)
        # rows with latencies (a run without results has none: native reports no latency columns then)
        lat = q.dropna(subset=["latency_mean"]) if "latency_mean" in q else q.iloc[:0]
        weights = lat["results"].to_numpy() if len(lat) else np.array([])
        out: dict[str, Any] = {
            **head,
            # native: its sink's per-query rows name every batch (the listener's reports may lag)
            "batches": int(len(b) or (q["batch"].nunique() if len(q) else 0)
                           or (p["batch"].nunique() if len(p) else 0)),
            "busy_seconds": busy, "throughput": total / busy if busy > 0 else None,
            "latency_mean": float(np.average(lat["latency_mean"], weights=weights)) if weights.sum() else None,
            "latency_p95_max": float(lat["latency_p95"].max()) if len(lat) and "latency_p95" in lat else None,
            **tail,
        }
        if self.engine == "mqjoin" and len(b):
            out["probe_messages"] = int(b["probe_messages"].sum())
            out["jobs_per_batch"] = float(b["jobs"].mean())
            out["stages_per_batch"] = float(b["stages"].mean())
            out["state_rows_max"] = int(b["state_rows"].max())
            out["state_bytes_max"] = int(b["state_bytes"].max())
            with self.lock:
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


class Listener:
    """One StreamingQueryListener per session, dispatching progress events by query id.

    The registry holds each session weakly (a collected session's entry goes with it, so a new
    session that Python places at the same address never inherits it) and drops the sessions
    whose context has stopped: their listener belonged to a streaming query manager that is
    gone, and a query of a new session must report to a listener of its own.  A query's route
    goes when the query terminates (Spark reports its progress before), so a listener does not
    keep every deployment of a long-lived session alive."""

    _installed: "weakref.WeakKeyDictionary[Any, Listener]" = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[str, dict], None]] = {}

    @classmethod
    def of(cls, spark) -> "Listener":
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


def _stopped(spark) -> bool:
    """Whether a session's context has stopped (pyspark's own test: its Java handle is gone)."""
    return getattr(spark.sparkContext, "_jsc", None) is None


def seq_of(offset) -> int | None:
    """The ``seq`` of a replay source's offset as a progress report gives it (JSON text or dict)."""
    if offset is None:
        return None
    try:
        return int((json.loads(offset) if isinstance(offset, str) else offset)["seq"])
    except (ValueError, TypeError, KeyError):
        return None


def served_rows(progress: Mapping[str, Any], served: int | None = None) -> tuple[int | None, float]:
    """Tuples a micro-batch read, from its progress report: the replay sources' offsets moved
    by that many, and ``numInputRows`` scaled to it (the factor is returned).  Spark counts a
    source once per branch that reads it — the native baseline reads its one replay source in
    every relation's branch — so its ``numInputRows`` exceeds the input; the offsets do not.
    ``served``: the tuples when the driver served them itself (the driver mode: Spark's source
    counted one row per micro-batch).

    >>> p = {"numInputRows": 600, "sources": [{"startOffset": '{"seq": 100}', "endOffset": {"seq": 300}}]}
    >>> served_rows(p)
    (200, 0.3333333333333333)
    >>> served_rows({"numInputRows": 5, "sources": [{"startOffset": None, "endOffset": None}]})
    (5, 1.0)
    >>> served_rows({"numInputRows": 1, "sources": [{"startOffset": 3, "endOffset": 4}]}, served=700)
    (700, 700.0)
    """
    reported = progress.get("numInputRows")
    if served is not None:
        return served, served / reported if reported else 1.0
    moved = None
    for src in progress.get("sources") or ():
        end = seq_of(src.get("endOffset"))
        if end is None:
            continue
        start = seq_of(src.get("startOffset")) or 0
        moved = (moved or 0) + max(0, end - start)
    if moved is None:
        return reported, 1.0
    scale = moved / reported if reported else 1.0
    return moved, scale


def _scaled(x, scale: float):
    return None if x is None else x * scale
