"""The shard side of the distributed mode: the vectorised executor spread over ``P`` shards,
one micro-batch run in *waves* (the Spark plumbing that moves shards and frames is
:mod:`.distributed`).

**Shards.**  Shard ``p`` holds, for every store layout of the plan, the entries whose
partition attribute hashes to ``p`` (:func:`shard_of`: the value's partition key — the one
:func:`~mqjoin.runtime.rules.partition_of` takes modulo a store's parallelism — modulo ``P``,
so ``1`` and ``1.0`` land together and keys with a stride spread over every shard; nulls on
shard 0 — they never match a routed probe anyway).  Its stores, key indexes and
counters are those of a :class:`~mqjoin.runtime.vector.BatchExecutor`, which runs the plan's
rules on the shard exactly as the driver mode runs them on the driver
(:meth:`~mqjoin.runtime.vector.BatchExecutor.run`: the same inserts, probes with keys,
routes and windows, filters and emits).  The number of shards is physical — how many tasks
hold state — and independent of the stores' parallelism in the plan, which stays the cost
model's: probe messages are counted as the vectorised executor counts them, one per routed
probe and the store's parallelism per broadcast probe (the copy on shard 0 counts a
broadcast; the other shards' copies count nothing).

**Waves.**  Before an edge runs, the frame travelling on it is exchanged to the shards of its
target: an insert to the shard of the store's partition attribute, a routed probe to the
shard of its route value, a broadcast probe to every shard, an emit nowhere (it runs where
its frame is).  So an edge runs one wave after the probe that feeds it
(:func:`waves`: ``wave(edge) = wave(producer) + 1``, an emit in its producer's wave), and a
probe of a store no earlier than every insert into it (a frame that arrives early waits on
its shard).  Within a wave a shard runs its edges in :func:`~mqjoin.runtime.vector.edge_order`
(inserts before the probes of their store).  A batch's last wave ends it on every shard:
its entries join the stores, and the batch's largest ``ts`` — which every shard learns from
the input — expires what it can.

**What a wave yields.**  :func:`run_wave` reads its shard's state (wave 1: from the batch's
spec, :class:`Batch`; later waves: from the exchange) and the frames sent to it, runs the
wave, writes the results of its emits to ``OUT/_batches/batch=b/part-<wave>-<shard>
.<query>.parquet`` (atomically: a task run again writes the same rows), and yields the shard's state
(pickled, keyed by the shard), the frames for other shards (keyed by theirs), and after the
last wave a small :class:`ShardReport` — counts and a sample of result arrival times, never
a row.

**Stores as segment files.**  A shard's state names its stores' segments instead of holding
them (:attr:`Shard.files`).  The last wave of a batch writes every segment the batch made —
its new entries, or a merge or expiry of older segments — to a file of its own
(:func:`save_segment`: the columns' bytes after a small header, so :func:`load_segment` maps
them read-only), and the segments a batch did not touch keep their files.  A process keeps
the segments it mapped, with the key indexes it built on them, for as long as their shard
names them; the executor it is bound to sees a *view* of each (:func:`_view`), so expiring
entries never changes a cached segment.
:func:`route_input` turns the input rows of a batch into the frames of its source edges.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
... queries: {q: "R(a), S(a), T(a)"}
... ''')
>>> program = ShardProgram(optimize(w).plan, shards=2)
>>> sorted(set(program.wave.values())), program.last
([1, 2], 2)
>>> shard_of(np.array([1, 1.0, 2, np.nan]), 2).tolist()
[1, 1, 0, 0]

A segment's file maps back to the same entries, read-only:

>>> import tempfile
>>> seg = Segment(Frame(("R",), [{0: np.array([3, 4]), 2: np.array([1.5, np.nan])}], np.array([7, 9])))
>>> with tempfile.TemporaryDirectory() as d:
...     save_segment(Path(d) / "s.seg", seg)
...     got = load_segment(Path(d) / "s.seg").frame
>>> got.cols[0][2].tolist(), got.seq.tolist(), got.seq.flags.writeable
([1.5, nan], [7, 9], False)
"""

from __future__ import annotations

import contextlib
import copy
import mmap
import os
import pickle
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from mqjoin.model.errors import EngineError
from mqjoin.planning.plan import Plan
from mqjoin.runtime.partitions import PartitionTally, store_partitions
from mqjoin.runtime.rules import Emit, Insert, Probe, field_positions, position
from mqjoin.runtime.vector import BatchExecutor, Frame, Segment, partition_keys
from mqjoin.runtime.spark.frames import log_frames, result_tables, write_parts
from mqjoin.runtime.spark.source import served_rows
from mqjoin.support.lru import LRU

# what an element of a wave's RDD carries: (shard, (kind, payload)); TIMES: the seconds a shard
# spent pickling its state for the next wave (which adds them to the shard's phases)
STATE, SENT, REPORT, TIMES = "state", "sent", "report", "times"
#: the executor's attributes that make up a shard's state (the rest is the plan's, rebuilt per process;
#: the stores' segments are kept as files, :func:`save_segment`, and named in :attr:`Shard.files`)
EXECUTOR_STATE = ("live", "T", "messages", "received", "counts", "max_rows", "delta", "sealed", "tally")
#: result arrival times kept per query and shard for the latency percentile
SAMPLE = 1000
#: the most entries a merge of a shard's segments makes (:attr:`BatchExecutor.merge_cap`): a
#: merge rewrites a segment file, and without a cap the doubling merge now and then rewrites
#: most of a store in one batch
MERGE_CAP = 1 << 18


def shard_of(values: np.ndarray, shards: int) -> np.ndarray:
    """The shard of every value of a column: its partition key
    (:func:`~mqjoin.runtime.vector.partition_keys`) modulo ``shards`` (nulls: 0)."""
    return np.remainder(partition_keys(values), shards)


def waves(ex: BatchExecutor) -> dict[str, int]:
    """The wave of every edge of the executor's plan (see the module doc)."""
    rules = ex.rules
    producer = {o: lab for lab, r in rules.edges.items() if isinstance(r, Probe) for o in r.outs}
    inserts: dict = {}
    for lab, r in rules.edges.items():
        if isinstance(r, Insert):
            inserts.setdefault(r.layout, []).append(lab)
    wave: dict[str, int] = {}
    for lab in ex.order:  # producers and the inserts of a probed store come first
        rule = rules.edges[lab]
        before = wave[producer[lab]] if lab in producer else 0
        w = before if isinstance(rule, Emit) and lab in producer else before + 1
        if isinstance(rule, Probe):
            w = max([w] + [wave[i] for i in inserts.get(rule.layout, ())])
        wave[lab] = w
    return wave


class ShardProgram:
    """What every task of the distributed mode needs of the plan: the executor (its rules,
    edge order and field needs), the wave of every edge and where an edge's frames go."""

    def __init__(self, plan: Plan, shards: int):
        self.plan = plan
        self.shards = shards
        self.ex = BatchExecutor(plan)
        self.ex.tally = PartitionTally(self.ex)  # a shard's messages per logical partition (in its state)
        self.ex.merge_cap = MERGE_CAP
        self.wave = waves(self.ex)
        self.last = max(self.wave.values(), default=1)
        self.by_wave = {w: [lab for lab in self.ex.order if self.wave[lab] == w] for w in range(1, self.last + 1)}
        fields = field_positions(plan.workload)
        self.route_at: dict[str, tuple[int, int] | None] = {}
        for lab, r in self.ex.rules.edges.items():
            if isinstance(r, Insert):
                self.route_at[lab] = position(fields, tuple(plan.edge[lab].layout), r.layout.partition)
            elif isinstance(r, Probe):
                self.route_at[lab] = r.route
        self.names = {k: r for r, k in plan.workload.relation_rank.items()}
        self.store_ids = dict(self.ex.names)
        self.empty = {k: copy.deepcopy(getattr(self.ex, k)) for k in EXECUTOR_STATE}  # a new shard's state

    def route(self, label: str, f: Frame) -> Iterator[tuple[int, Frame]]:
        """(shard, frame) for the frame travelling on ``label``: by the hash of the partition
        attribute (insert) or route value (routed probe), to every shard (broadcast probe),
        to shard 0 (an emit of an input tuple)."""
        rule = self.ex.rules.edges[label]
        if isinstance(rule, Emit):
            yield 0, f
            return
        at = self.route_at[label]
        if at is None:
            for p in range(self.shards):
                yield p, f
            return
        col = f.cols[at[0]].get(at[1])
        dest = np.zeros(len(f), dtype=np.int64) if col is None else shard_of(col, self.shards)
        if self.shards == 1:
            yield 0, f
            return
        order = np.argsort(dest, kind="stable")
        bounds = np.searchsorted(dest[order], np.arange(self.shards + 1))
        for p in range(self.shards):
            if bounds[p + 1] > bounds[p]:
                yield p, f.take(order[bounds[p]:bounds[p + 1]])


#: plan token → its :class:`ShardProgram`, built once per process and reused by every task of the
#: plan; the programs of the last :data:`PROGRAMS_KEPT` plans are kept (a Python worker outlives
#: deployments, and a program holds its plan's executor)
PROGRAMS_KEPT = 4
_PROGRAMS: LRU[str, ShardProgram] = LRU(PROGRAMS_KEPT)


@dataclass(frozen=True)
class Batch:
    """What the tasks of one run of a batch need: the plan (a Spark broadcast of it, or the
    plan itself; its :class:`ShardProgram` is built once per process and ``token``), the shard
    count, the batch's number and where its results go (``out``: None for a rebuild, which
    writes nothing)."""

    plan: object
    token: str
    shards: int
    batch: int
    out: str | None
    state: str = ""  # the directory of the shards' segment files (under it, one per ``token``)
    run: int = 0  # the engine's run of a batch (names the segment files it writes)
    shards_in: tuple = ()  # per shard: its pickled :class:`Shard` after the last batch (empty: new shards)
    columns: dict | None = None  # where a packed replay log holds each attribute column (None: not packed)

    def program(self) -> ShardProgram:
        prog = _PROGRAMS.get(self.token)
        if prog is None:
            plan = self.plan if isinstance(self.plan, Plan) else self.plan.value
            prog = ShardProgram(plan, self.shards)
            _PROGRAMS[self.token] = prog
        return prog

    @property
    def part_dir(self) -> Path:
        return Path(self.out) / "_batches" / f"batch={self.batch}"

    @property
    def state_dir(self) -> Path:
        return Path(self.state) / self.token


@dataclass(frozen=True)
class InputInfo:
    """One input partition's share of a batch, sent to every shard: its rows, first arrival
    number, ``ts`` range and rows per relation, and the arrival times of its tuples (for the
    results' latency) as runs: ``arrival[i]`` is the arrival time of the consecutive arrival
    numbers from ``seq[i]`` up to the next run's start (:func:`arrival_runs`)."""

    rows: int
    first_seq: int
    min_ts: float
    max_ts: float
    per_relation: dict[str, int]
    seq: np.ndarray
    arrival: np.ndarray
    phases: dict[str, float] = field(default_factory=dict)  # seconds of route_input's steps


@dataclass(frozen=True)
class ShardReport:
    """What a shard tells the driver after a batch: counts, never rows."""

    shard: int
    inputs: tuple[tuple[int, int, float, float, dict[str, int], dict[str, float]], ...]  # shard 0: InputInfo
    # without arrivals
    messages: dict[str, int]  # probe edge → messages counted here
    received: dict[str, int]  # probe edge → travelling tuples it ran on this shard
    store_rows: dict[str, int]  # store id → live entries on this shard
    state_bytes: int
    results: dict[str, int]  # query → results emitted here
    arrivals: dict[str, tuple[float, float, float, np.ndarray, np.ndarray]]  # query → sum, min, max, sample, weights
    seconds: tuple[float, ...]  # per wave: time spent in the wave's edges
    partitions: dict = field(default_factory=dict)  # store id → this shard's share per logical partition
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step of the batch on this shard


@dataclass
class Shard:
    """One shard's state between waves and batches (pickled: its stores are named, not held)."""

    index: int
    state: dict = field(default_factory=dict)  # the executor's (EXECUTOR_STATE)
    files: dict = field(default_factory=dict)  # store layout → its segments' files (:func:`save_segment`)
    pending: dict[str, list[Frame]] = field(default_factory=dict)  # frames for edges of later waves
    inputs: list[InputInfo] = field(default_factory=list)
    # query → the arrival times of its results: (distinct times, how many results each)
    results: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step, summed over the batch's waves


def _bind(prog: "ShardProgram", shard: Shard, where: Path) -> BatchExecutor:
    """The process's executor of the plan holding the shard's state (a new shard: empty), its
    stores' segments from this process's cache or their files in ``where``."""
    if not shard.state:
        shard.state = copy.deepcopy(prog.empty)
        shard.files = {layout: [] for layout in prog.ex.stores}
    for k in EXECUTOR_STATE:
        setattr(prog.ex, k, shard.state[k])
    if str(where) not in {d for d, _ in _HELD}:  # a new deployment: forget those whose state is gone
        for d in {d for d, _ in _HELD if not os.path.isdir(d)}:
            for cache in (_SEGMENTS, _VIEWS, _HELD, _TALLIES):
                for key in [k for k in cache if k[0] == d]:
                    del cache[key]
    prog.ex.stores = {layout: [_held_view(where, name) for name in names] for layout, names in shard.files.items()}
    # the rows per logical partition of the segments counted in earlier batches (the tally's cache
    # refers to segments, so it is not pickled with the shard: this process keeps it)
    prog.ex.tally.held = _TALLIES.setdefault((str(where), shard.index), {})
    held = _HELD.setdefault((str(where), shard.index), set())
    for name in held - {n for names in shard.files.values() for n in names}:
        _SEGMENTS.pop((str(where), name), None)  # a segment the shard no longer holds
        _VIEWS.pop((str(where), name), None)
    held.clear()
    held.update(n for names in shard.files.values() for n in names)
    return prog.ex


def _unbind(ex: BatchExecutor, shard: Shard) -> None:
    # a sealed store's batch entries travel once: its segment stands for its delta (no insert
    # into a store runs after a probe of it, so nothing is added to that delta any more)
    ex.delta = {layout: [ex.sealed[layout].frame] if layout in ex.sealed else fs for layout, fs in ex.delta.items()}
    shard.state = {k: getattr(ex, k) for k in EXECUTOR_STATE}
    ex.stores = {layout: [] for layout in ex.stores}
    ex.deltas = {}  # the journal's, which this mode does not keep


#: per process: (state directory, file name) → the :class:`Segment` of a segment file — the
#: executor's Python workers live across tasks and batches, so a shard's stores are read from
#: their files only by a process that has not seen them yet
_SEGMENTS: dict[tuple[str, str], Segment] = {}
_HELD: dict[tuple[str, int], set[str]] = {}  # (state directory, shard) → its files this process read
#: (state directory, file name) → the view the shard's executor saw in the last batch (the same
#: object again while its entries are the file's: the partition counts' cache knows it)
_VIEWS: dict[tuple[str, str], Segment] = {}
_TALLIES: dict[tuple[str, int], dict] = {}  # (state directory, shard) → its tally's cache of row counts


def _segment(where: Path, name: str) -> Segment:
    key = (str(where), name)
    seg = _SEGMENTS.get(key)
    if seg is None:
        seg = _SEGMENTS[key] = load_segment(where / name)
    return seg


def _held_view(where: Path, name: str) -> Segment:
    """The view of a segment file the executor sees: last batch's, unless its entries were
    expired since (then a new one)."""
    key = (str(where), name)
    seg = _segment(where, name)
    view = _VIEWS.get(key)
    if view is None or view.frame is not seg.frame:
        view = _VIEWS[key] = _view(seg)
    return view


def _view(seg: Segment) -> Segment:
    """A segment sharing ``seg``'s entries and key indexes: expiring entries from it
    (:meth:`Segment.keep`) leaves the cached one as its file holds it."""
    out = Segment.__new__(Segment)
    out.frame, out.indexes, out.max_seq = seg.frame, seg.indexes, seg.max_seq
    return out


def _save_stores(ex: BatchExecutor, shard: Shard, batch: Batch) -> None:
    """After a batch: write the segments the batch made (its new entries, merged or expired
    segments) to files, and name every store's segments in ``shard.files``."""
    where = batch.state_dir
    where.mkdir(parents=True, exist_ok=True)
    kept = {}
    for names in shard.files.values():
        for name in names:
            kept[id(_SEGMENTS[(str(where), name)].frame)] = name
    files = {}
    for i, (layout, segs) in enumerate(ex.stores.items()):
        names = []
        for k, seg in enumerate(segs):
            name = kept.get(id(seg.frame))
            if name is None:  # deterministic: a task run again writes the same file
                name = f"{batch.run}-{shard.index}-{i}-{k}.seg"
                save_segment(where / name, seg)
                _SEGMENTS[(str(where), name)] = _view(seg)
            names.append(name)
        files[layout] = names
    shard.files = files


_HEADER = struct.Struct("<Q")  # the length of a segment file's pickled header
_ALIGN = 64


def save_segment(path: Path, seg: Segment) -> None:
    """Write a store segment's entries to ``path`` (atomically): a pickled header — the
    components, fields, dtypes, shapes and offsets — then the columns' bytes, aligned, so
    :func:`load_segment` maps them instead of reading them (columns of Python objects go in
    the header)."""
    f = seg.frame
    arrays = [f.seq] + [c[x] for c in f.cols for x in sorted(c)]
    layout, offset, raw = [], 0, []
    for a in arrays:
        if a.dtype.hasobject:
            layout.append(a)
            continue
        a = np.ascontiguousarray(a)
        layout.append((a.dtype.str, a.shape, offset))
        raw.append((offset, a))
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    header = pickle.dumps((f.rels, [sorted(c) for c in f.cols], layout), protocol=pickle.HIGHEST_PROTOCOL)
    start = -(-(_HEADER.size + len(header)) // _ALIGN) * _ALIGN
    with _atomic(path) as out:
        out.write(_HEADER.pack(len(header)) + header)
        for at, a in raw:
            out.seek(start + at)
            out.write(a.data)
        out.truncate(start + offset)


def load_segment(path: Path) -> Segment:
    """The segment :func:`save_segment` wrote to ``path``, its columns mapped read-only."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError as exc:
        raise EngineError(f"{LOST_SEGMENT}: {path} is gone (the shards are rebuilt from the replay log)") from exc
    with fh:
        (n,) = _HEADER.unpack(fh.read(_HEADER.size))
        rels, fields, layout = pickle.loads(fh.read(n))
        size = os.fstat(fh.fileno()).st_size
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    start = -(-(_HEADER.size + n) // _ALIGN) * _ALIGN
    arrays = [a if isinstance(a, np.ndarray) else
              np.frombuffer(mm, np.dtype(a[0]), int(np.prod(a[1])), start + a[2]).reshape(a[1]) for a in layout]
    cols, at = [], 1
    for names in fields:
        cols.append(dict(zip(names, arrays[at:at + len(names)])))
        at += len(names)
    return Segment(Frame(tuple(rels), cols, arrays[0]))


#: what a task says when a segment file of a shard is missing (the driver then rebuilds the shards)
LOST_SEGMENT = "MQJOIN_SEGMENT_LOST"


def _dumps(obj) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def exchange_file(run: int | str, origin: str, shard: int | str) -> str:
    """The name of the file holding what ``origin`` (an input partition, ``i<first arrival
    number>``, or a shard's wave, ``w<wave>.<shard>``) sends to ``shard`` in a run of a batch
    (``*``: a pattern)."""
    return f"x-{run}-{origin}-{shard}.pkl"


def _send(where: Path, name: str, items: list) -> bytes:
    """Write ``items`` to the exchange file ``name`` (atomically: a task run again writes the
    same file) and return what the exchange carries instead: its pickled path."""
    where.mkdir(parents=True, exist_ok=True)  # a batch without input rows made no directory yet
    path = where / name
    with _atomic(path) as out:
        out.write(_dumps(items))
    return _dumps(str(path))


@contextlib.contextmanager
def _atomic(path: Path):
    """A file to write ``path`` through: a temporary file of this process beside it, renamed
    to ``path`` once written, so a reader sees the whole file or none (a task run again
    replaces it with the same bytes)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        yield out
    os.replace(tmp, path)


def _received(payload: bytes) -> list:
    """What a SENT or STATE element carries — frames by edge, an :class:`InputInfo` or a
    :class:`Shard` — as a list: the element itself, or what the exchange file it names holds."""
    got = pickle.loads(payload)
    if isinstance(got, str):
        try:
            with open(got, "rb") as fh:
                return pickle.load(fh)
        except FileNotFoundError as exc:
            raise EngineError(f"{LOST_SEGMENT}: {got} is gone (the batch runs again)") from exc
    return [got]


def route_input(batch: Batch, record_batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """An input partition of a batch (replay-log rows as Arrow) as the frames of the plan's
    source edges, each for its shard, plus its :class:`InputInfo` for every shard: both go
    to a file per shard (:func:`input_file`, in the state directory), and the partition
    yields a row ``(shard, payload)`` per shard, the payload the file's pickled name."""
    clock = _Clock()
    parts = served_rows(record_batches)  # the source's slices: the rows read here
    if not parts:
        return
    table = pa.Table.from_batches(parts).sort_by("_seq")
    clock.lap("read")
    prog = batch.program()
    seq = table["_seq"].to_numpy()
    rel = table["_rel"].to_numpy()
    ts = table["_ts"].to_numpy()
    frames = log_frames(table, seq, rel, ts, prog.names, prog.ex.source_need, batch.columns)
    per_rel = {prog.names[k]: int(n) for k, n in zip(*np.unique(rel, return_counts=True))}
    write = batch.out is not None
    sent: dict[int, dict[str, list[Frame]]] = {}
    for lab, fs in prog.ex.source_inputs(frames).items():
        for p, f in prog.route(lab, Frame.concat(fs)):
            sent.setdefault(p, {}).setdefault(lab, []).append(f)
    clock.lap("frames")
    runs = arrival_runs(seq, table["_arrival"].to_numpy()) if write else (seq[:0], ts[:0])
    info = InputInfo(len(seq), int(seq[0]), float(ts.min()), float(ts.max()), per_rel, *runs, clock.phases)
    where = batch.state_dir
    where.mkdir(parents=True, exist_ok=True)
    # the partition's share of shard p in a file of its own: only its name crosses the JVM,
    # whose rows would copy the frames several times
    names = [_send(where, exchange_file(batch.run, f"i{info.first_seq}", p), [info] + ([sent[p]] if p in sent else []))
             for p in range(batch.shards)]
    yield pa.RecordBatch.from_pydict({"shard": pa.array(range(batch.shards), pa.int32()),
                                      "payload": pa.array(names, pa.binary())})


def run_wave(batch: Batch, wave: int, index: int, items: Iterable[tuple[int, tuple[str, bytes]]]
             ) -> Iterator[tuple[int, tuple[str, object]]]:
    """Wave ``wave`` of a batch on shard ``index``: ``items`` what was sent to it and (after
    wave 1, which takes it from ``batch.shards_in``) its state; yields its new state, the
    frames for later waves by shard, and after the last wave its :class:`ShardReport`."""
    clock = _Clock()
    prog = batch.program()
    shard, received, pickling = None, [], {}
    if wave == 1:
        got = batch.shards_in[index] if batch.shards_in else None
        shard = pickle.loads(got) if got is not None else Shard(index)
    for _, (kind, payload) in items:
        if kind == STATE:
            shard = _received(payload)[0]
        elif kind == SENT:
            received.extend(_received(payload))
        elif kind == TIMES:
            pickling = payload
    if shard is None:
        raise EngineError(f"shard {index} of the distributed mode has no state in wave {wave} of batch "
                          f"{batch.batch}: its state did not come with the frames sent to it")
    if wave == 1:
        shard.phases = {}
    clock.phases = shard.phases
    clock.add(pickling)
    clock.lap("unpickle")
    ex = _bind(prog, shard, batch.state_dir)
    clock.lap("bind")
    if wave == 1:
        ex.begin()
        shard.pending, shard.inputs, shard.results, shard.counted, shard.seconds = {}, [], {}, {}, []
        ex.messages = type(ex.messages)({lab: 0 for lab in ex.messages})  # this batch's (reported)
        ex.received = type(ex.received)()
        ex.tally.reset()
    for got in received:
        if isinstance(got, InputInfo):
            shard.inputs.append(got)
        else:
            for lab, frames in got.items():
                shard.pending.setdefault(lab, []).extend(frames)
    t0 = time.perf_counter()
    labels = prog.by_wave.get(wave, [])
    inputs = {lab: shard.pending.pop(lab) for lab in labels if lab in shard.pending}
    out, sent = ex.run(labels, inputs, broadcasts=index == 0)
    results = {q: r for q, r in ex.results(out).items() if len(r[0])}
    clock.lap("edges")
    if results and batch.out is not None:
        arrival = _arrivals(shard.inputs)
        write_parts(result_tables(results, arrival), batch.part_dir, f"part-{wave}-{index}")
        for q, (trig, _) in results.items():  # as distinct arrival times and their counts
            shard.results.setdefault(q, []).append(np.unique(arrival(trig), return_counts=True))
        clock.lap("results")
    outbox: dict[int, dict[str, list[Frame]]] = {}
    for lab, frames in sent.items():
        for p, f in prog.route(lab, Frame.concat(frames)):
            outbox.setdefault(p, {}).setdefault(lab, []).append(f)
    outbox = {p: _send(batch.state_dir, exchange_file(batch.run, f"w{wave}.{index}", p), [frames])
              for p, frames in outbox.items()}
    clock.lap("route")
    report = None
    if wave == prog.last:
        ex.finish(max((i.max_ts for i in shard.inputs), default=-np.inf))
        clock.lap("finish")
        _save_stores(ex, shard, batch)
        clock.lap("segments")
        shard.seconds.append(time.perf_counter() - t0)
        report = _report(prog, ex, shard)
        shard.inputs, shard.results, shard.pending = [], {}, {}  # the batch's: the state is its stores
    else:
        shard.seconds.append(time.perf_counter() - t0)
    _unbind(ex, shard)
    if report is None:  # the batch's entries and pending frames: through a file to the next wave
        state = _send(batch.state_dir, exchange_file(batch.run, f"w{wave}.{index}", f"{index}.state"), [shard])
    else:
        state = _dumps(shard)
    yield index, (STATE, state)
    if report is None:
        yield index, (TIMES, {"pickle": time.perf_counter() - clock.t})
    for p, frames in outbox.items():
        yield p, (SENT, frames)
    if report is not None:
        yield index, (REPORT, report)


class _Clock:
    """Seconds per step of a task, added to ``phases`` (what :class:`ShardReport` reports)."""

    def __init__(self):
        self.t = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.t
        self.t = now

    def add(self, phases: dict[str, float]) -> None:
        for k, v in phases.items():
            self.phases[k] = self.phases.get(k, 0.0) + v


def arrival_runs(seq: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The arrival times of sorted arrival numbers as runs of consecutive numbers with one
    arrival time: (each run's first number, its arrival time) — one run per input partition
    of an unpaced batch.

    >>> arrival_runs(np.array([3, 4, 5, 8, 9]), np.array([1.0, 1.0, 2.0, 2.0, 2.0]))
    (array([3, 5, 8]), array([1., 2., 2.]))
    """
    if not len(seq):
        return seq, arrival
    start = np.flatnonzero(np.r_[True, (arrival[1:] != arrival[:-1]) | (seq[1:] != seq[:-1] + 1)])
    return seq[start], arrival[start]


def _arrivals(inputs: list[InputInfo]):
    """Arrival number → arrival time, for arrival numbers of the inputs' runs."""
    seq = np.concatenate([i.seq for i in inputs]) if inputs else np.empty(0, np.int64)
    arr = np.concatenate([i.arrival for i in inputs]) if inputs else np.empty(0)
    order = np.argsort(seq, kind="stable")
    seq, arr = seq[order], arr[order]
    return lambda trig: arr[np.searchsorted(seq, trig, side="right") - 1]


def _report(prog: ShardProgram, ex: BatchExecutor, shard: Shard) -> ShardReport:
    arrivals = {}
    for q, parts in shard.results.items():
        values = np.concatenate([v for v, _ in parts])
        counts = np.concatenate([c for _, c in parts])
        order = np.argsort(values, kind="stable")
        values, counts = values[order], counts[order]
        n = int(counts.sum())
        if n > SAMPLE:  # a sample of the sorted arrivals, each standing for its share
            at = np.linspace(0, n - 1, SAMPLE).round().astype(np.int64)
            sample, weights = values[np.searchsorted(np.cumsum(counts), at, side="right")], np.full(SAMPLE, n / SAMPLE)
        else:
            sample, weights = np.repeat(values, counts), np.ones(n)
        arrivals[q] = (float(values @ counts), float(values[0]), float(values[-1]), sample, weights)
    inputs = tuple((i.rows, i.first_seq, i.min_ts, i.max_ts, i.per_relation, i.phases) for i in shard.inputs)
    return ShardReport(shard=shard.index, inputs=inputs if shard.index == 0 else (),
                       messages={lab: int(n) for lab, n in ex.messages.items()},
                       received={lab: int(n) for lab, n in ex.received.items() if n},
                       store_rows={prog.store_ids[layout]: int(n) for layout, n in ex.live.items()
                                   if layout in prog.store_ids},
                       state_bytes=int(ex.state_bytes()),
                       results={q: sum(int(c.sum()) for _, c in parts) for q, parts in shard.results.items()},
                       arrivals=arrivals, seconds=tuple(shard.seconds), partitions=store_partitions(ex, ex.tally),
                       phases=dict(shard.phases))
