"""Replayed input streams: a Spark 4 Python streaming data source over a *replay log*.

The replay log is every input tuple of a run in arrival order — ``(ts, relation declaration
rank, row index)``, the tie-break of docs/model.md §6 — written once as Parquet with one union schema:

    _seq (long, 0-based arrival number), _rel (int, relation rank), _ts (double), _row (long),
    r<k>_a<j> (relation k's attribute j, typed as read)

The source ``mqjoin_replay`` serves it micro-batch by micro-batch.  Offsets are arrival
numbers ``{"seq": n}``, so a restarted query resumes exactly where the checkpoint says.
Pacing (options):

* ``rate`` — input tuples per wall-clock second;
* ``speedup`` — event-time seconds per wall-clock second (arrivals follow ``ts``);
* neither — as fast as Spark asks (``maxRowsPerBatch`` caps a micro-batch).

Every served row gets ``_arrival``: the wall-clock time (epoch seconds) at which the tuple
became available — from the pacing formula, or the time its micro-batch was planned when
unpaced.  Result latency is measured against it.  The option ``relations`` (comma-separated
ranks) serves only those relations (one stream per relation for the native baseline).

With the option ``serve`` = ``slices`` the source serves, instead of the rows, one row per
input partition that says which rows it holds (:data:`SLICE_SCHEMA`: the arrival numbers
``start`` … ``end − 1`` and how their arrival times follow); :func:`slice_rows` reads them,
``_arrival`` included, exactly as the source serves them — for a reader that runs in Python
beside the log (the distributed mode's tasks), so the rows never become JVM rows.

The driver mode serves itself, without this source: :class:`LogFeed` chooses each micro-batch's
slice on the driver and reads it with :func:`slice_rows`, while Spark's own
``rate-micro-batch`` source only numbers the micro-batches — no Python process on Spark's side
and no Spark job per batch.  Both pace alike (:class:`Pacer`).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from mqjoin.model.errors import DataError
from mqjoin.model.tables import Column, Table
from mqjoin.model.workload import Workload
from mqjoin.runtime.rules import arrival_permutation
from mqjoin.support.lru import LRU

SOURCE_NAME = "mqjoin_replay"
#: the rows of a source with ``serve`` = ``slices``: one per input partition
SLICE_SCHEMA = "path string, start bigint, end bigint, arrival string"
META = ("_seq", "_rel", "_ts", "_row")

_SPARK_TYPES = {pa.int32(): "int", pa.int64(): "bigint", pa.float64(): "double", pa.string(): "string",
                pa.bool_(): "boolean"}


def ts_col(k: int) -> str:
    return f"r{k}_ts"


def row_col(k: int) -> str:
    return f"r{k}_row"


def attr_col(k: int, j: int) -> str:
    return f"r{k}_a{j}"


def _column(values: Sequence[Any], where: str) -> pa.Array:
    if isinstance(values, Column):  # numbers already in one array: no Python object per row
        return pa.array(values.array)
    try:
        arr = pa.array(list(values))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataError(f"{where} mixes strings and numbers; make the column one type") from None
    if arr.type == pa.null():
        return arr.cast(pa.string())
    if pa.types.is_integer(arr.type):
        return arr.cast(pa.int64())
    if pa.types.is_floating(arr.type):
        return arr.cast(pa.float64())
    if arr.type not in _SPARK_TYPES:
        raise DataError(f"{where} has values of type {arr.type}, which the Spark engine does not "
                        "support; use numbers or strings")
    return arr


def build_replay_log(workload: Workload, tables: Mapping[str, Table]) -> pa.Table:
    """All input tuples in arrival order with the union schema described in the module doc."""
    return _in_arrival_order(_relation_parts(workload, tables))


def packed_replay_log(workload: Workload, tables: Mapping[str, Table]) -> tuple[pa.Table, dict[str, str]]:
    """:func:`pack_replay_log` of :func:`build_replay_log`, built without the union schema:
    each relation's columns are packed before the relations are put together, so the log is
    never held with a column per attribute of every relation.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload("{defaults: {selectivity: 0.5}, relations: {R: {attributes: [a]}, S: {attributes: [b, a]}},"
    ...                    " queries: {q: 'R(a), S(a)'}}")
    >>> tables = {"R": Table.from_columns("R", {"ts": [0.0, 2.0], "a": [1, 2]}),
    ...           "S": Table.from_columns("S", {"ts": [1.0], "a": [2], "b": ["x"]})}
    >>> log, names = packed_replay_log(w, tables)
    >>> union = pack_replay_log(build_replay_log(w, tables))
    >>> log.equals(union[0]), names == union[1]
    (True, True)
    """
    parts = _relation_parts(workload, tables)
    names = {f.name: _packed_name(f) for part in parts for f in part.schema if _ATTR.fullmatch(f.name)}
    return _in_arrival_order([p.rename_columns([names.get(c, c) for c in p.column_names]) for p in parts]), names


def _relation_parts(workload: Workload, tables: Mapping[str, Table]) -> list[pa.Table]:
    """One table per relation: ``_rel``, ``_ts``, ``_row`` and its attributes under their
    union names, join classes' types unified (:func:`_unify_join_types`)."""
    ranks = workload.relation_rank
    parts = []
    for name, t in tables.items():
        k = ranks[name]
        rel = workload.relation(name)
        n = len(t)
        cols: dict[str, pa.Array] = {
            "_rel": pa.array(np.full(n, k, dtype=np.int32)),
            "_ts": pa.array(np.asarray(t.ts, dtype=np.float64)),
            "_row": pa.array(np.arange(n, dtype=np.int64)),
        }
        for j, a in enumerate(rel.attributes):
            if a in t.columns:
                cols[attr_col(k, j)] = _column(t.columns[a], f"column {a} of {name}")
        parts.append(pa.table(cols))
    if not parts:
        raise DataError("no input tables to replay")
    return _unify_join_types(workload, parts)


def _in_arrival_order(parts: list[pa.Table]) -> pa.Table:
    """The relations' parts as one log in arrival order (``ts``, relation rank, row), numbered
    by ``_seq``; its attribute columns sorted by position, then name (those a part lacks are
    null in its rows)."""
    log = pa.concat_tables(parts, promote_options="permissive")
    del parts
    attrs = [c for c in log.column_names if c not in META]
    log = log.select([c for c in META if c in log.column_names] + sorted(attrs, key=_column_order))
    order = arrival_permutation(log["_ts"].to_numpy(), log["_rel"].to_numpy(), log["_row"].to_numpy())
    log = log.take(pa.array(order))
    return log.add_column(0, "_seq", pa.array(np.arange(len(log), dtype=np.int64)))


def _column_order(name: str) -> tuple[int, int, str]:
    """Union columns ``r<k>_a<j>`` by relation, then position; packed ``a<j>_<type>`` by
    position, then name."""
    m = _ATTR.fullmatch(name)
    if m:
        return int(m.group(1)), int(m.group(2)), name
    return 0, int(name[1:].split("_")[0]), name


def _unify_join_types(workload: Workload, parts: list[pa.Table]) -> list[pa.Table]:
    """Members of one class that mix integers and floats become floats: 1 and 1.0 join
    (docs/model.md §6), and equal types keep a store's hash partitioning usable by every probe
    (Spark would otherwise cast one side and reshuffle the store)."""
    ranks = workload.relation_rank
    types = {f.name: f.type for p in parts for f in p.schema}
    floats: set[str] = set()
    for q in workload.queries:
        for c in q.classes:
            cols = [attr_col(ranks[a.relation], workload.relation(a.relation).attributes.index(a.name))
                    for a in c.members]
            cols = [n for n in cols if n in types]
            if {pa.float64(), pa.int64()} <= {types[n] for n in cols}:
                floats.update(n for n in cols if types[n] == pa.int64())
    out = []
    for p in parts:
        for n in floats & set(p.column_names):
            p = p.set_column(p.column_names.index(n), n, p[n].cast(pa.float64()))
        out.append(p)
    return out


_PACKED_SUFFIX = {pa.int64(): "i", pa.float64(): "d", pa.string(): "s", pa.bool_(): "b"}
_ATTR = re.compile(r"r(\d+)_a(\d+)")


def _packed_name(field: pa.Field) -> str:
    """Where :func:`pack_replay_log` puts a union column: ``a<j>_<type>``."""
    m = _ATTR.fullmatch(field.name)
    assert m is not None
    return f"a{m.group(2)}_{_PACKED_SUFFIX.get(field.type, str(field.type))}"


def pack_replay_log(log: pa.Table) -> tuple[pa.Table, dict[str, str]]:
    """The replay log with the attribute columns of all relations packed by position: relation
    ``k``'s attribute ``j`` goes to column ``a<j>_<type>`` (one column per position and type),
    so a row carries its relation's attributes in a few columns instead of the union of every
    relation's (the driver mode's read converts every served column, null or not).  Returns
    the packed log and the map from the union schema's names to the packed ones.

    >>> log = pa.table({"_seq": [0, 1], "r0_a0": [5, None], "r1_a0": [None, 7], "r1_a1": [None, "x"]})
    >>> packed, names = pack_replay_log(log)
    >>> packed.column_names, names["r1_a0"], packed["a0_i"].to_pylist()
    (['_seq', 'a0_i', 'a1_s'], 'a0_i', [5, 7])
    """
    names: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    for f in log.schema:
        if _ATTR.fullmatch(f.name):
            names[f.name] = _packed_name(f)
            groups.setdefault(names[f.name], []).append(f.name)
    packed = log.drop_columns(list(names))
    for name, cols in sorted(groups.items(), key=lambda x: _column_order(x[0])):
        packed = packed.append_column(name, pc.coalesce(*[log[c] for c in cols]) if len(cols) > 1 else log[cols[0]])
    return packed, names


def write_replay_log(log: pa.Table, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # written once and read once, next to the run: uncompressed, without dictionaries or
    # statistics (nothing reads them) it is written and read several times faster
    pq.write_table(log, tmp, row_group_size=64 * 1024, compression="none", use_dictionary=False,
                   write_statistics=False)
    tmp.replace(path)
    return path


def spark_schema(schema: pa.Schema) -> str:
    """DDL of the served rows: the replay log's columns plus ``_arrival``."""
    cols = [f"`{f.name}` {_SPARK_TYPES.get(f.type, 'string')}" for f in schema]
    return ", ".join(cols + ["`_arrival` double"])


#: path → (version, open file, first arrival number of each row group) of the replay logs read
#: last in this process, at most :data:`FILES_KEPT` (a Python worker outlives deployments: each
#: new log would keep one more file open); a file is closed when it leaves.  A log rewritten at
#: the same path (a restarted deployment writes its replay log again) has another version and
#: is read anew
FILES_KEPT = 8
_FILES: LRU[str, tuple[tuple[int, int, int], pq.ParquetFile, np.ndarray]] = LRU(FILES_KEPT,
                                                                                  evicted=lambda e: e[1].close())
_GROUPS: LRU[tuple[str, int], pa.Table] = LRU(4)  # the row groups read last, per process
_CACHE_LOCK = threading.Lock()


def _version(path: str) -> tuple[int, int, int]:
    """What changes when a file is rewritten: its inode (:func:`write_replay_log` replaces
    the file), modification time and size."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def _rows(path: str, start: int, end: int) -> pa.Table:
    """Arrival numbers ``start`` … ``end − 1`` of the replay log: only the row groups that hold
    them are read (once per process and version of the log; the last few stay cached for the
    next micro-batch)."""
    version = _version(path)
    with _CACHE_LOCK:
        got = _FILES.get(path)
        if got is None or got[0] != version:
            for key in [k for k in _GROUPS if k[0] == path]:
                _GROUPS.pop(key)
            f = pq.ParquetFile(path)
            sizes = [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]
            got = (version, f, np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))
            _FILES[path] = got
        _, f, firsts = got
        lo = max(0, int(np.searchsorted(firsts, start, side="right")) - 1)
        hi = int(np.searchsorted(firsts, end, side="left"))
        parts = []
        for g in range(lo, hi):
            t = _GROUPS.get((path, g))
            if t is None:
                t = f.read_row_group(g, use_threads=False)
                _GROUPS[(path, g)] = t
            parts.append(t)
        if not parts:
            return f.schema_arrow.empty_table()
    t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return t.slice(start - int(firsts[lo]), end - start)


def slice_rows(path: str, start: int, end: int, arrival, relations: frozenset[int] | None = None) -> pa.Table:
    """The rows the source serves for arrival numbers ``start`` … ``end − 1`` of the log at
    ``path`` (only those of ``relations``, when given), with their ``_arrival``: ``arrival``
    says how it follows (``("rate", first, t0, rate)``, ``("speedup", ts0, t0, speedup)`` or
    ``("fixed", t)``; a list, as JSON gives it back, is as good).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_replay_log(pa.table({"_seq": [0, 1, 2], "_rel": [0, 1, 0], "_ts": [0.0, 1.0, 2.0]}), d + "/l")
    ...     t = slice_rows(str(p), 1, 3, ["rate", 0, 100.0, 2.0])
    >>> t["_seq"].to_pylist(), t["_arrival"].to_pylist()
    ([1, 2], [100.5, 101.0])
    """
    part = _rows(path, start, end)
    if relations is not None and len(part):
        mask = np.isin(part["_rel"].to_numpy(), list(relations))
        part = part.filter(pa.array(mask))
    kind = arrival[0]
    if kind == "rate":
        _, b, t0, rate = arrival
        times = t0 + (part["_seq"].to_numpy() - b) / rate
    elif kind == "speedup":
        _, ts0, t0, speedup = arrival
        times = t0 + (part["_ts"].to_numpy() - ts0) / speedup
    else:
        times = np.full(len(part), arrival[1])
    return part.append_column("_arrival", pa.array(np.asarray(times, dtype=np.float64)))


def served_rows(parts: Iterable[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The replay-log rows of a micro-batch as the source served them: the rows themselves,
    or, with ``serve`` = ``slices``, read here from the log each slice names
    (:func:`slice_rows`) — the rows never pass through the JVM.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_replay_log(pa.table({"_seq": [0, 1, 2], "_rel": [0, 1, 0], "_ts": [0.0, 1.0, 2.0]}), d + "/l")
    ...     s = pa.RecordBatch.from_pydict({"path": [str(p)], "start": [1], "end": [3], "arrival": ['["fixed", 5.0]']})
    ...     [b["_seq"].to_pylist() for b in served_rows([s])]
    [[1, 2]]
    """
    parts = [b for b in parts if b.num_rows]
    if parts and "_seq" not in parts[0].schema.names:
        slices = pa.Table.from_batches(parts).to_pylist()
        parts = [b for s in slices for b in slice_rows(s["path"], s["start"], s["end"], json.loads(s["arrival"]))
                 .to_batches() if b.num_rows]
    return parts


class Pacer:
    """When the tuples of a replay log of ``total`` arrival numbers arrive, for wall-clock
    pacing at ``rate`` tuples/s or ``speedup`` × event time (``ts``: every tuple's, in arrival
    order), or unpaced (neither: all there at once).  The clock starts at the first question
    (:meth:`available`, :meth:`arrival` or :meth:`due`): arrival number ``b`` asked first at
    wall time ``t0`` arrives at ``t0``, and arrival ``s`` at ``t0 + (s − b) / rate`` or
    ``t0 + (ts[s] − ts[b]) / speedup``; a tuple counts as available once the clock passed one
    more interval (``rate``) or its event time (``speedup``).  The Python source and the driver
    mode's feed (:class:`LogFeed`) pace alike through it.

    >>> p = Pacer(10, rate=2.0)
    >>> p.available(4, now=100.0), p.available(4, now=101.2), p.arrival(101.2)
    (4, 6, ('rate', 4, 100.0, 2.0))
    >>> p.due(6), Pacer(10).available(0, now=5.0)
    (101.5, 10)
    >>> s = Pacer(3, speedup=10.0, ts=np.array([0.0, 5.0, 20.0]))
    >>> s.available(0, now=50.0), s.available(0, now=50.6), s.due(2), s.arrival(50.6)
    (1, 2, 52.0, ('speedup', 0.0, 50.0, 10.0))
    """

    def __init__(self, total: int, rate: float | None = None, speedup: float | None = None,
                 ts: np.ndarray | None = None):
        self.total, self.rate, self.speedup, self.ts = total, rate, speedup, ts
        self.base: tuple[int, float] | None = None  # (first arrival number asked for, wall time)

    def _base(self, start: int, now: float) -> tuple[int, float]:
        if self.base is None:
            self.base = (start, now)
        return self.base

    def available(self, start: int, now: float) -> int:
        """How many arrival numbers have arrived by wall time ``now`` (``start``: the first
        not yet served, where the clock starts)."""
        b, t0 = self._base(start, now)
        if self.rate:
            return min(self.total, b + int((now - t0) * self.rate))
        if self.speedup and self.ts is not None:
            if b >= self.total:
                return self.total
            horizon = self.ts[b] + (now - t0) * self.speedup
            return int(np.searchsorted(self.ts, horizon, side="right"))
        return self.total

    def due(self, seq: int) -> float | None:
        """The wall time by which arrival number ``seq`` is available (None: unpaced, or the
        clock not started)."""
        if self.base is None or seq >= self.total:
            return None
        b, t0 = self.base
        if self.rate:
            return t0 + (seq + 1 - b) / self.rate
        if self.speedup and self.ts is not None:
            return t0 + (float(self.ts[seq]) - float(self.ts[min(b, self.total - 1)])) / self.speedup
        return None

    def arrival(self, now: float, start: int = 0) -> tuple:
        """How the ``_arrival`` of the tuples served at ``now`` follows (:func:`slice_rows`)."""
        b, t0 = self._base(start, now)
        if self.rate:
            return ("rate", b, t0, self.rate)
        if self.speedup and self.ts is not None:
            return ("speedup", float(self.ts[min(b, self.total - 1)]) if self.total else 0.0, t0, self.speedup)
        return ("fixed", now)


def pacer_of(path: str, total: int, rate: float | None, speedup: float | None) -> Pacer:
    """The :class:`Pacer` of the replay log at ``path`` (its arrival times read only where
    pacing follows them)."""
    ts = pq.read_table(path, columns=["_ts"], use_threads=False)["_ts"].to_numpy() if speedup else None
    return Pacer(total, rate, speedup, ts)


class LogFeed:
    """The driver mode's input, served by the driver itself: the slice of the replay log at
    ``path`` (``total`` tuples) each micro-batch takes, and its rows with ``_arrival`` — as
    the Python source would serve them (:class:`Pacer`; ``max_rows`` caps a batch when
    unpaced or behind), but chosen without a Spark job.  The streaming query that calls the
    driver's ``foreachBatch`` only counts micro-batches (Spark's ``rate-micro-batch`` source,
    in the JVM); where a batch starts is the engine's: after what it processed before, which
    the state journal records, so a batch Spark runs again after a restart starts where the
    last committed one ended.

    :meth:`slice` waits for the next tuple when none has arrived yet (a paced replay), so every
    micro-batch but those after the end of input carries tuples; :meth:`close` ends the wait.
    What Spark committed is told by :meth:`started` (a batch starts only once the one before
    it was committed) and :meth:`committed` (Spark's progress report of a batch):
    :attr:`committed_seq` — the end of input reached when it equals ``total``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_replay_log(pa.table({"_seq": [0, 1, 2], "_rel": [0, 1, 0], "_ts": [0.0, 1.0, 2.0]}), d + "/l")
    ...     feed = LogFeed(str(p), 3, max_rows=2)
    ...     feed.started(0, 0)
    ...     a = feed.rows(0, *feed.slice(0, 0)); feed.started(1, a.num_rows)
    ...     b = feed.rows(2, *feed.slice(1, 2)); feed.committed(1)
    >>> a["_seq"].to_pylist(), b["_seq"].to_pylist(), feed.committed_seq, feed.rows_of(1)
    ([0, 1], [2], 3, 1)
    """

    #: seconds a micro-batch after the end of input waits before it returns (no tuple will
    #: come: Spark's next empty batch need not follow at once)
    IDLE = 1.0

    def __init__(self, path: str, total: int, rate: float | None = None, speedup: float | None = None,
                 max_rows: int | None = None):
        self.path, self.total, self.max_rows = path, total, max_rows
        self.pacer = pacer_of(path, total, rate, speedup)
        self.committed_seq = 0  # tuples whose micro-batches Spark committed
        self._ends: dict[int, int] = {}  # batch → the arrival number after its slice, until committed
        self._rows: dict[int, int] = {}  # batch → tuples in its slice (read by its progress report)
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def close(self) -> None:
        """End a wait (the deployment stops): the micro-batch takes nothing more."""
        self._closed.set()

    def started(self, batch_id: int, start: int) -> None:
        """Micro-batch ``batch_id`` starts at arrival number ``start``: Spark committed every
        batch before it."""
        with self._lock:
            self.committed_seq = max(self.committed_seq, start)
            for b in [b for b in self._ends if b < batch_id]:
                del self._ends[b]

    def committed(self, batch_id: int) -> None:
        """Spark committed micro-batch ``batch_id`` (its progress report)."""
        with self._lock:
            end = self._ends.pop(batch_id, None)
            if end is not None:
                self.committed_seq = max(self.committed_seq, end)

    def rows_of(self, batch_id: int) -> int | None:
        """Tuples in the slice of micro-batch ``batch_id`` (None: not served here); asked once."""
        with self._lock:
            return self._rows.pop(batch_id, None)

    def slice(self, batch_id: int, start: int) -> tuple[int, tuple]:
        """The end of micro-batch ``batch_id``'s slice from arrival number ``start`` — what
        has arrived, at most ``max_rows``, after waiting for the next tuple when none has (and
        one will come) — and how its ``_arrival`` follows (:meth:`rows`)."""
        while True:
            now = time.time()
            end = self.pacer.available(start, now)
            if self.max_rows:
                end = min(end, start + self.max_rows)
            if end > start or self._closed.is_set():
                break
            due = self.pacer.due(start)
            if self._closed.wait(self.IDLE if due is None else max(0.0, due - now)) or start >= self.total:
                break
        end = max(start, end)
        with self._lock:
            self._ends[batch_id] = end
            self._rows[batch_id] = end - start
            for b in sorted(self._rows)[:-64]:  # batches whose progress report never asked
                del self._rows[b]
        return end, self.pacer.arrival(now, start)

    def rows(self, start: int, end: int, arrival: tuple) -> pa.Table:
        """The rows of arrival numbers ``start`` … ``end − 1`` with their ``_arrival``
        (:func:`slice_rows`; no columns when the slice is empty)."""
        return slice_rows(self.path, start, end, arrival) if end > start else pa.table({})


class _Slice(InputPartition):
    def __init__(self, start: int, end: int, arrival: tuple):
        super().__init__(None)
        self.start, self.end, self.arrival = start, end, arrival


class _Reader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]):
        self.path = options["path"]
        self.relations = (frozenset(int(x) for x in options["relations"].split(","))
                          if options.get("relations") else None)
        self.max_rows = int(options["maxRowsPerBatch"]) if options.get("maxRowsPerBatch") else None
        self.splits = max(1, int(options.get("splits", "2")))
        self.slices = options.get("serve") == "slices"
        self.total = pq.ParquetFile(self.path).metadata.num_rows
        self.pacer: Pacer = pacer_of(self.path, self.total, float(options["rate"]) if options.get("rate") else None,
                                            float(options["speedup"]) if options.get("speedup") else None)

    def __getstate__(self) -> dict:
        # Spark pickles the reader for every input partition's task: without the pacer (the
        # whole log's arrival times, read on the driver for pacing; a task needs none of them)
        return {**self.__dict__, "pacer": None}

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        s = int(start["seq"])
        end = max(s, self.pacer.available(s, time.time()))
        if isinstance(limit, ReadMaxRows):
            end = min(end, s + int(limit.max_rows))
        return {"seq": end}

    def partitions(self, start: dict, end: dict):
        s, e = int(start["seq"]), int(end["seq"])
        arrival = self.pacer.arrival(time.time(), s)
        n = max(1, min(self.splits, (e - s) // 5000 + 1))
        cuts = [s + (e - s) * i // n for i in range(n + 1)]
        return [_Slice(cuts[i], cuts[i + 1], arrival) for i in range(n)]

    def read(self, partition: _Slice) -> Iterator[pa.RecordBatch]:
        if self.slices:
            yield pa.RecordBatch.from_pydict({"path": [self.path], "start": [partition.start], "end": [partition.end],
                                              "arrival": [json.dumps(partition.arrival)]})
            return
        part = slice_rows(self.path, partition.start, partition.end, partition.arrival, self.relations)
        yield from part.to_batches(max_chunksize=64 * 1024)

    def commit(self, end: dict) -> None:
        pass


class ReplaySource(DataSource):
    """``spark.readStream.format("mqjoin_replay").option("path", LOG)`` — see the module doc."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        if self.options.get("serve") == "slices":
            return SLICE_SCHEMA
        return spark_schema(pq.read_schema(self.options["path"]))

    def streamReader(self, schema) -> DataSourceStreamReader:
        return _Reader(self.options)
