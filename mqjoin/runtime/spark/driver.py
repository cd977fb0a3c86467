"""The plan on Spark with its stores where the probes run: an in-process executor behind
``foreachBatch``, no Spark job per micro-batch (``--spark-mode driver``).

Spark only counts the micro-batches: the streaming query reads its built-in
``rate-micro-batch`` source (one row per batch, served by the JVM: no Python process on
Spark's side) and calls the engine's ``foreachBatch`` function, which never reads that row.
The driver chooses each batch's slice of the replay log itself (:class:`~.source.LogFeed`:
the pacing, the ``_arrival`` of every tuple and the cap on rows per batch, as the Python
source serves them to the distributed mode) and reads its rows from the log with pyarrow — the
rows never become JVM rows.  A static plan's batch is split per relation into
column arrays and run by the vectorised executor (:class:`VectorDriverEngine`,
:class:`~mqjoin.runtime.vector.BatchExecutor`): the plan's rules — the same
:mod:`~mqjoin.runtime.rules` values the reference executor runs tuple by tuple — applied to
the whole batch at once, each edge once per batch, the arrival order a column.  An adaptive
deployment (:mod:`.epochs`) feeds its batches in arrival order to the per-tuple
:class:`~mqjoin.runtime.executor.Executor` (epochs, iterative probing).  Results are written
to ``OUT/_batches/batch=b`` with pyarrow (overwrite: a batch Spark re-executes after a restart
replaces its own output).  The cost of a batch on Spark's side is its offset and commit
records, whatever the number of stores, edges and queries.

**State and restart.**  The plan's stores live in the executor, in the driver's memory.  After
every batch the entries it inserted are appended to a *state journal* in the checkpoint
(``CHECKPOINT/state/<batch>.pkl``, written before Spark commits the batch; column arrays for
the vectorised executor); when the journal holds twice the live entries the vectorised
executor's is compacted into one snapshot, which replaces the older records once Spark has
committed its batch.  A restarted deployment rebuilds its stores from the journal of the
batches Spark committed — no replay of the input — and Spark re-runs the batch it had not
committed, whose output is overwritten: nothing lost, nothing duplicated.  The journal also
says where the input goes on: a batch's slice starts at the arrival number after the last one
the state holds (``next_seq``), so the batch Spark runs again starts where the last committed
one ended, whatever slice its first run took.

**What scales out and what does not.**  Spark numbers the micro-batches and keeps their
commits; the reading, the probes and the output run in one Python process on the driver, so
one batch is bounded by one core.  The sharded engine (:mod:`.distributed`,
``--spark-mode distributed``) spreads every store over the cluster's executors and is the mode
for state larger than the driver's memory.

**Why behind foreachBatch.**  Spark's stateful operators (``applyInPandasWithState``,
``transformWithState``) were the alternative.  Their fixed cost per batch — a shuffle by the
grouping key, a state-store commit, and stores deserialised and serialised again by Python
workers that alternate between batches — is above the whole batch cost of this mode; they
would pay off only with the state partitioned over many executors by a key that every probe
of the plan can route by.  What keeps a batch cheap here: the vectorised executor, results
handed to pyarrow as arrays straight from the executor's buffers, a replay log packed by
position and type of which a batch reads only its own row groups, and the garbage collector
paused for the batch (:func:`~mqjoin.support.gcpause.paused_gc`).  The measurements behind
these choices, and this mode against the native baseline and Flink, are in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import logging
import pickle
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mqjoin.model.errors import EngineError
from mqjoin.model.tables import result_rows
from mqjoin.support.gcpause import paused_gc
from mqjoin.planning.plan import Plan
from mqjoin.runtime.executor import Executor, StaticSchedule
from mqjoin.runtime.partitions import PartitionTally, store_partitions
from mqjoin.runtime.rules import Layout, layout_of
from mqjoin.runtime.vector import BatchExecutor, Frame
from mqjoin.runtime.spark.distributed import BatchReport, job_cost, job_group
from mqjoin.runtime.spark.frames import log_frames, result_tables, write_parts
from mqjoin.runtime.spark.source import LogFeed, attr_col

log = logging.getLogger(__name__)

JOURNAL_FORMAT = 2
VECTOR_JOURNAL = "vector-1"


class DriverEngine:
    """Runs the plans of a schedule as a ``foreachBatch`` function with the per-tuple executor
    (see the module doc): a static plan (:class:`~mqjoin.runtime.executor.StaticSchedule`; a
    deployment runs static plans with :class:`VectorDriverEngine`), or the adaptive
    controller (:class:`AdaptiveDriverEngine`).  ``state_dir`` keeps the state journal;
    ``on_batch`` receives a :class:`~.engine.BatchReport` per batch; ``columns``: where the
    served rows hold each attribute when the log is packed (:func:`.source.pack_replay_log`);
    ``feed``: the :class:`~.source.LogFeed` its micro-batches take their tuples from."""

    def __init__(self, plan: Plan, out_dir: str, state_dir: str | Path,
                 on_batch: Callable[[BatchReport], None] | None = None, columns: Mapping[str, str] | None = None,
                 feed: LogFeed | None = None):
        self.plan = plan
        self.feed = feed  # where each micro-batch's tuples come from (:meth:`process`)
        self.columns = columns  # the served log's names of the attribute columns (a packed log)
        self.w = plan.workload
        self.out_dir = Path(out_dir)
        self.state_dir = Path(state_dir)
        self.on_batch = on_batch
        self.rank = self.w.relation_rank
        self.names = {k: r for r, k in self.rank.items()}
        self.attrs = {r.name: len(r.attributes) for r in self.w.relations}
        self.ex: Executor | None = None
        self.next_batch: int | None = None  # the batch the in-memory state is ready for
        self.next_seq = 0  # input tuples processed so far
        self.journal_rows = 0
        self.rebuilt = False  # the state was rebuilt from the journal for the next batch with tuples
        self.lock = threading.RLock()
        self._enters: list = []  # epochs entered in the batch being processed
        self._pre: dict = {}  # containers journaled in the batch being processed

    # -- hooks for the adaptive engine ----------------------------------------------------

    def new_executor(self) -> Executor:
        return Executor(StaticSchedule(self.plan), triggers=True)

    def current_plan(self) -> Plan:
        return self.plan

    def restored(self, records: list[dict]) -> None:
        """Called after the state was rebuilt from the journal ``records``."""

    def journal_extra(self) -> dict[str, Any]:
        """More to keep in the batch's journal record."""
        return {}

    def batch_done(self, batch_id: int, triggers: Mapping[str, np.ndarray], committed: float, seq: np.ndarray,
                   arrival: np.ndarray, ts: np.ndarray) -> None:
        """Called after a batch's results were written (before its journal); ``triggers``:
        query → the position in the batch (``seq``/``arrival``/``ts``) of each result's
        triggering tuple."""

    # -- state ----------------------------------------------------------------------------

    def _journals(self) -> list[tuple[int, Path]]:
        if not self.state_dir.is_dir():
            return []
        out = []
        for p in self.state_dir.glob("*.pkl"):
            try:
                out.append((int(p.stem), p))
            except ValueError:
                continue
        return sorted(out)

    def _committed(self, batch_id: int, fmt: Any) -> Iterator[tuple[int, dict]]:
        """The journal records of the batches before ``batch_id`` (Spark committed them), in
        order; the records of later batches are deleted (Spark runs them again)."""
        for b, path in self._journals():
            if b >= batch_id:
                path.unlink()
                continue
            try:
                with path.open("rb") as f:
                    rec = pickle.load(f)
            except Exception as e:  # a journal of another version names classes this one lacks, or is damaged
                raise EngineError(f"state journal {path} cannot be read ({type(e).__name__}: {e}); it was written by "
                                  "another engine or version, or damaged: delete the checkpoint to start over") from e
            if not isinstance(rec, dict) or rec.get("format") != fmt:
                raise EngineError(f"state journal {path} was written by another engine or version; delete the "
                                  "checkpoint to start over")
            yield b, rec

    def _restore(self, batch_id: int) -> None:
        """The executor as it was after batch ``batch_id − 1``: rebuilt from the journal of the
        batches before ``batch_id`` (entries of later, uncommitted batches are discarded)."""
        ex = self.new_executor()
        on_epoch, ex.on_epoch = ex.on_epoch, None  # epochs closed before were reported then
        rows, records, last = 0, [], None
        for _, rec in self._committed(batch_id, JOURNAL_FORMAT):
            rows += self._replay(ex, rec)
            records.append(rec)
            last = rec
        if last is not None:
            for key, n in last["messages"].items():
                ex.counters.setdefault(key, [0])[0] = n
            ex.history[0] = last["history"]
            ex.counts.clear()
            ex.counts.update(last["counts"])
            ex.clock[0] = last["T"]
            ex.ep = last["open"]
            self.next_seq = last["next_seq"]
        else:
            self.next_seq = 0
        ex.on_epoch = on_epoch
        self.ex, self.next_batch, self.journal_rows = ex, batch_id, rows
        self.restored(records)

    def _replay(self, ex: Executor, rec: dict) -> int:
        """Re-enter the epochs of one journal record and re-insert its entries; returns the
        entries inserted."""
        rows = 0

        def insert(groups) -> None:
            nonlocal rows
            for (layout, epoch), entries in groups:
                c = ex.containers[(Layout(*layout), epoch)]
                for e in entries:
                    c.insert(e)
                rows += len(entries)

        insert(rec["pre"])
        for e, T, sample, groups in rec["enters"]:
            ex.clock[0] = T
            ex._enter(e, T, sample)
            self.replayed_enter(ex, e)
            insert(groups)
        return rows

    def replayed_enter(self, ex: Executor, epoch: int) -> None:
        """Called when a restore re-enters ``epoch`` (the adaptive engine re-submits the query
        changes submitted during it)."""

    def _write_journal(self, batch_id: int) -> None:
        ex, pre = self.ex, self._pre
        pre_rec = [((tuple(lay), ep), j) for (lay, ep), j in pre.items() if j]
        enters = [(e, T, sample, [((tuple(lay), ep), j) for (lay, ep), j in groups.items() if j])
                  for e, T, sample, groups in self._enters]
        rec = {"format": JOURNAL_FORMAT, "batch": batch_id, "snapshot": False, "pre": pre_rec,
               "enters": enters, "open": ex.ep, "T": ex.clock[0], "next_seq": self.next_seq,
               "messages": {k: c[0] for k, c in ex.counters.items()}, "history": ex.history[0],
               "counts": dict(ex.counts), **self.journal_extra()}
        self._dump(batch_id, rec)
        self.journal_rows += sum(len(j) for _, j in pre_rec) + sum(len(j) for *_, groups in enters for _, j in groups)

    def _dump(self, batch_id: int, rec: dict) -> None:
        """Write batch ``batch_id``'s journal record (atomically: a crash leaves the old file)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / f"{batch_id}.tmp"
        with tmp.open("wb") as f:
            pickle.dump(rec, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(self.state_dir / f"{batch_id}.pkl")

    # -- one micro-batch ------------------------------------------------------------------

    def process(self, batch, batch_id: int) -> None:
        """Micro-batch ``batch_id`` (the ``foreachBatch`` function; ``batch``, the rate
        source's rows, is not read): its slice of the replay log from the feed, starting where
        the batch before it ended (the state journal says where after a restart)."""
        sc = batch.sparkSession.sparkContext
        group = job_group(sc, self, batch_id)
        with self.lock, paused_gc():
            self._ready(batch_id)
            start = self.next_seq
        assert self.feed is not None, "a driver engine's micro-batches need its feed"
        self.feed.started(batch_id, start)
        end, arrival = self.feed.slice(batch_id, start)  # waits for the next tuple when paced
        started = time.time()
        table = self.feed.rows(start, end, arrival)
        read = time.time()
        with self.lock, paused_gc():  # millions of entries per batch: no collections meanwhile
            self._process(table, batch_id, started, read, sc, group)

    def _ready(self, batch_id: int) -> None:
        """The state as batch ``batch_id`` needs it: in memory, or rebuilt from the journal of
        the batches Spark committed (a restart, or a batch Spark runs again)."""
        if self.ex is None or self.next_batch != batch_id:
            self._restore(batch_id)
            self.rebuilt = self.journal_rows > 0

    def _process(self, table: pa.Table, batch_id: int, started: float, read: float, sc, group: str) -> None:
        self.batch_started = started
        self._ready(batch_id)
        n = table.num_rows
        if n == 0:
            self.next_batch = batch_id + 1
            return
        rebuilt, self.rebuilt = self.rebuilt, False
        table = table.sort_by("_seq")
        seq = table["_seq"].to_numpy()
        arrival = table["_arrival"].to_numpy()
        rel = table["_rel"].to_numpy()
        ts = table["_ts"].to_numpy()
        t0 = time.time()
        results, msgs = self._execute(table, seq, rel, ts)
        self.next_seq = int(seq[-1]) + 1
        executed = time.time()
        where = {q: np.searchsorted(seq, trig) for q, (trig, _) in results.items()}
        self._write_results(batch_id, results, where, arrival, seq)
        committed = time.time()
        first = int(seq[0])
        lmean, lp95, lmax, counts = {}, {}, {}, {}
        for q, idx in where.items():
            counts[q] = len(idx)
            if len(idx):
                lat = committed - arrival[idx]
                lo, hi = float(lat.min()), float(lat.max())
                lmean[q] = min(max(float(lat.mean()), lo), hi)  # equal latencies: mean == max, exactly
                lp95[q], lmax[q] = float(np.percentile(lat, 95)), hi
        self.batch_done(batch_id, where, committed, seq, arrival, ts)
        self._write_journal(batch_id)
        state = time.time()
        jobs, stages = job_cost(sc, group)
        report = BatchReport(
            batch=batch_id, first_seq=first, input_rows=n, started=started, seconds=time.time() - started,
            min_ts=float(ts.min()), max_ts=float(ts.max()), results=counts, latency_mean=lmean, latency_p95=lp95,
            latency_max=lmax, probe_messages=msgs, rebuilt=rebuilt, store_rows=self._store_rows(),
            state_bytes=self._state_bytes(), phases={"read": read - started, "execute": executed - t0,
                                                     "write": committed - executed, "state": state - committed},
            jobs=jobs, stages=stages, partitions=self._partitions())
        self.next_batch = batch_id + 1
        if self.on_batch:
            self.on_batch(report)

    def _execute(self, table: pa.Table, seq: np.ndarray, rel: np.ndarray, ts: np.ndarray) -> tuple[dict, dict]:
        """Run the batch (sorted by arrival): query → (triggers, rows) of its results, and the
        probe messages per edge."""
        ex = self.ex
        arrivals = self._tuples(table, rel)
        self._pre = {key: c.open_journal() for key, c in ex.containers.items()}
        self._enters = []

        def entered(e: int, T: float) -> None:  # journal the containers the new epoch opens
            groups = {key: c.open_journal() for key, c in ex.containers.items()
                      if key not in self._pre and all(key not in g for *_, g in self._enters)}
            closed = max((k for k in ex.samples if k < e), default=None)
            self._enters.append((e, T, None if closed is None else ex.samples[closed], groups))

        ex.on_enter = entered
        before = {k: c[0] for k, c in ex.counters.items()}
        ex.feed(arrivals, triggers=seq.tolist())
        ex.purge_all(ex.clock[0])  # the stores hold what later tuples can still join, as reported
        for c in ex.containers.values():
            c.journal = None
            c.insert = c._compile_insert()
        results = result_arrays(ex.take_results(), {q.name: len(q.relations) for q in ex.w.queries})
        return results, {lab: c[0] - before.get((p, lab), 0) for (p, lab), c in ex.counters.items()}

    def _store_rows(self) -> dict[str, int]:
        plan = self.current_plan()
        store_rows = self.ex.store_rows(plan)
        return store_rows if plan is not self.plan else {s.id: store_rows.get(s.id, 0) for s in plan.stores}

    def _state_bytes(self) -> int:
        return _state_bytes(self.ex)

    def _partitions(self) -> dict[str, dict[str, Any]]:
        """The batch's counts per logical partition of every store (the vectorised executor's)."""
        return {}

    def _tuples(self, table: pa.Table, rel: np.ndarray) -> list[tuple[str, tuple]]:
        """(relation, base tuple) per row, in the table's order."""
        n = table.num_rows
        out: list = [None] * n
        cols = set(table.column_names)
        for k in np.unique(rel).tolist():
            name = self.names[k]
            where = np.nonzero(rel == k)[0]
            sub = table.take(pa.array(where))
            fields = [sub["_row"].to_pylist(), sub["_ts"].to_pylist()]
            for j in range(self.attrs[name]):
                c = attr_col(k, j)
                c = self.columns.get(c, c) if self.columns is not None else c
                fields.append(sub[c].to_pylist() if c in cols else [None] * len(where))
            for i, tup in zip(where.tolist(), zip(*fields)):
                out[i] = (name, tup)
        return out

    def _write_results(self, batch_id: int, results: Mapping[str, tuple[np.ndarray, np.ndarray]],
                       where: Mapping[str, np.ndarray], arrival: np.ndarray, seq: np.ndarray) -> None:
        """``OUT/_batches/batch=<id>`` (:func:`.frames.result_tables`, the distributed mode's
        format), marked complete."""
        path = self.out_dir / "_batches" / f"batch={batch_id}"
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        write_parts(result_tables(results, lambda trig: arrival[np.searchsorted(seq, trig)]), path, "part-0")
        (path / "_SUCCESS").touch()  # the batch's output is complete (as Spark's writer marks it)

    def close(self) -> None:
        self.ex = None


class VectorDriverEngine(DriverEngine):
    """The driver mode of a static plan: the batch runs through the vectorised executor
    (:class:`~mqjoin.runtime.vector.BatchExecutor`, the same rules as the per-tuple one), and
    the state journal keeps the entries each batch stored, as column arrays (compacted into
    one snapshot when it holds ``snapshot_ratio`` times the live entries)."""

    snapshot_ratio, snapshot_floor = 2.0, 1000
    last_snapshot: int | None = None  # the batch of the newest snapshot in the journal

    def new_executor(self) -> BatchExecutor:
        ex = BatchExecutor(self.plan)
        ex.tally = PartitionTally(ex)
        return ex

    def _execute(self, table: pa.Table, seq: np.ndarray, rel: np.ndarray, ts: np.ndarray) -> tuple[dict, dict]:
        ex = self.ex
        ex.tally.reset()
        before = dict(ex.messages)
        results = ex.feed(self._frames(table, seq, rel, ts))
        return results, {lab: n - before.get(lab, 0) for lab, n in ex.messages.items()}

    def _frames(self, table: pa.Table, seq: np.ndarray, rel: np.ndarray, ts: np.ndarray) -> dict[str, Frame]:
        """The batch's arrivals per relation, with the fields the plan reads."""
        return log_frames(table, seq, rel, ts, self.names, self.ex.source_need, self.columns)

    def _restore(self, batch_id: int) -> None:
        ex = self.new_executor()
        by_id = {s.id: layout_of(s) for s in self.plan.stores}
        rows, last = 0, None
        for b, rec in self._committed(batch_id, VECTOR_JOURNAL):
            if rec["snapshot"]:
                ex, rows, self.last_snapshot = self.new_executor(), 0, b
            for sid, (rels, cols, seq) in rec["stores"].items():
                if sid not in by_id:
                    raise EngineError(f"the state journal of batch {b} holds store {sid}, which the plan does not "
                                      "have; "
                                      "delete the checkpoint to start over")
                ex.load(by_id[sid], Frame(tuple(rels), cols, seq))
                rows += len(seq)
            last = rec
        if last is not None:
            ex.messages.update(last["messages"])  # the executor is new: its counters are 0
            ex.counts.update(last["counts"])
            ex.max_rows.update(last["max_rows"])
            ex.T = last["T"]
            self.next_seq = last["next_seq"]
            ex.purge()
        else:
            self.next_seq = 0
        self.ex, self.next_batch, self.journal_rows = ex, batch_id, rows
        self.restored([])

    def _write_journal(self, batch_id: int) -> None:
        ex = self.ex
        live = sum(ex.live.values())
        if self.last_snapshot is not None and self.last_snapshot < batch_id:
            # Spark committed the snapshot's batch (it runs batch_id): what it replaces can go
            for b, p in self._journals():
                if b < self.last_snapshot:
                    p.unlink()
        snapshot = self.journal_rows > self.snapshot_ratio * max(live, self.snapshot_floor)
        frames = {layout: ex.entries(layout) for layout in ex.stores} if snapshot else ex.deltas
        stores = {ex.names[layout]: (f.rels, f.cols, f.seq) for layout, f in frames.items() if f is not None and len(f)}
        self._dump(batch_id, {"format": VECTOR_JOURNAL, "batch": batch_id, "snapshot": snapshot, "stores": stores,
                              "T": ex.T, "next_seq": self.next_seq, "messages": dict(ex.messages),
                              "counts": dict(ex.counts), "max_rows": dict(ex.max_rows)})
        written = sum(len(seq) for _, _, seq in stores.values())
        if snapshot:
            self.last_snapshot = batch_id
            self.journal_rows = written
        else:
            self.journal_rows += written

    def _store_rows(self) -> dict[str, int]:
        return self.ex.store_rows()

    def _state_bytes(self) -> int:
        return self.ex.state_bytes()

    def _partitions(self) -> dict[str, dict[str, Any]]:
        return store_partitions(self.ex, self.ex.tally)


def result_arrays(taken: list[tuple[str, list[tuple[int, ...]]]],
                  arity: Mapping[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Query → (triggers, rows) as arrays from :meth:`Executor.take_results` of an executor
    with ``triggers=True``: ``rows[i]`` holds the row indices of result ``i`` in the query's
    relation order, ``triggers[i]`` the arrival number of the tuple that produced it.
    ``arity``: query → number of relations (every query gets an entry, empty or not).

    >>> trig, rows = result_arrays([("q", [(7, 4, 3)])], {"q": 2, "p": 3})["q"]
    >>> trig.tolist(), rows.tolist()
    ([7], [[4, 3]])
    """
    parts: dict[str, list] = {q: [] for q in arity}
    for q, entries in taken:
        parts.setdefault(q, []).append(result_rows(entries, arity[q] + 1))
    out = {}
    for q, got in parts.items():
        a = np.concatenate(got) if got else np.empty((0, arity[q] + 1), dtype=np.int64)
        out[q] = (a[:, 0], a[:, 1:])
    return out


def _state_bytes(ex: Executor) -> int:
    """An estimate of the stores' size: 8 bytes per field of every stored base tuple (a base
    tuple shared by several entries counted in each)."""
    total = 0
    for c in ex.containers.values():
        rows = c.rows()
        if rows:
            width = sum(len(b) for b in next(e for part in c.entries for e in part))
            total += rows * 8 * width
    return total

