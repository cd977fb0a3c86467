"""The vectorised executor: a static plan's rules run over a micro-batch at a time (docs/architecture.md §5).

The per-tuple :class:`~mqjoin.runtime.executor.Executor` sends every arriving tuple along
the edges of the plan one at a time.  This backend executes the same
:mod:`~mqjoin.runtime.rules` — the same :class:`~mqjoin.runtime.rules.Insert`,
:class:`~mqjoin.runtime.rules.Probe` and :class:`~mqjoin.runtime.rules.Emit` values — for
all the arrivals of a batch at once, as column arrays (numpy):

* **Arrival order as a column.**  Every travelling tuple carries ``seq``, the arrival number
  of the input tuple that started it (its *trigger*), and ``T``, that tuple's ``ts``; every
  store entry carries the ``seq`` of the arrival that created it.  A probe of a batch joins
  its travelling tuples with the store entries *of earlier arrivals* (``entry.seq <
  seq``) whose components satisfy their windows at ``T`` — exactly what the per-tuple
  executor sees when the trigger arrives, since a probe order never probes a store holding
  its own relation, so no tuple sees an entry its own arrival made.
* **Edges in dependency order.**  An edge runs once per batch, over the travelling tuples
  of every arrival; a probe runs after every insert into the store it probes (a topological
  order of the plan's edges), so an MIR store holds its batch's entries before it is probed.
* **Stores as indexed runs.**  A store is a list of *segments* (column arrays); each keeps,
  per access pattern, its entries grouped by key code with the distinct codes in a hash table
  (:class:`KeyIndex`, built on first use), so a probe costs a hash look-up per travelling
  tuple and a small batch does not pay for a large store.  Segments of similar size are
  merged, their indexes with them (a log-structured merge: a store of ``n`` entries has ``O(log n)`` segments; with
  ``merge_cap`` set, no merge makes a segment of more entries than that, so no batch rewrites
  a large part of a store, for ``n / merge_cap`` more segments);
  entries outside every window are dropped when a quarter of a segment has expired (probes
  check windows themselves).
* **Only what is read travels.**  A join gathers, per component, only the fields later edges
  read (rows for results, keys, filters, timestamps where windows check them;
  :func:`field_needs`).
* **Keys.**  Equal values join, nulls never do, ``1`` joins ``1.0`` (docs/model.md §6): integer keys
  are their own codes, integral floats their integer value, other values hash
  (:func:`pandas.util.hash_array`, not salted) and a match is confirmed by comparing the
  values themselves.

Probe messages are counted as the per-tuple executor counts them (one per routed probe, the
store's parallelism per broadcast one) and store rows as the entries a later tuple can still
join; results are the same set (:func:`run_vector` against the oracle in the tests).  What
stays with the per-tuple executor: adaptive schedules (epochs, iterative probing), CPU
budgets, operation counts.

The hash look-up and the gathering of only the fields later edges read were chosen by
measurement over a binary search of sorted key codes and over gathering every field;
``python benchmarks/executors.py`` compares this executor with the per-tuple one (the numbers
are in ``benchmarks/RESULTS.md``).

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> from mqjoin.model.tables import Column, Table
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 1]})}
>>> run = run_vector(optimize(w).plan, tables, batch=2)
>>> run.results["q"], run.total_probe_messages
([(0, 0)], 4)
"""

from __future__ import annotations

import math
import numbers
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from mqjoin.model.errors import PlanError
from mqjoin.model.filters import Comparison
from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Column, Table
from mqjoin.runtime.rules import (Admit, Insert, Layout, Probe, arrival_permutation, field_positions, layout_of,
                                  require_inputs, PARTITION_MULTIPLIER, partition_key, plan_rules, position, windows_of)
from mqjoin.runtime.windows import window_mask

_MIX = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = np.empty(0, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# frames: travelling tuples and store entries as columns
# --------------------------------------------------------------------------------------------


class Frame:
    """Tuples laid out as ``rels`` (one component per relation) in columns: ``cols[i]`` maps a
    field of component ``i`` (0 row, 1 ts, 2… attributes, as :func:`~.rules.field_positions`)
    to its values; ``seq``: the arrival that started (or stored) each tuple; ``T``: the
    trigger's ``ts`` (travelling tuples only)."""

    __slots__ = ("rels", "cols", "seq", "T")

    def __init__(self, rels: tuple[str, ...], cols: list[dict[int, np.ndarray]], seq: np.ndarray,
                 T: np.ndarray | None = None):
        self.rels, self.cols, self.seq, self.T = rels, cols, seq, T

    def __len__(self) -> int:
        return len(self.seq)

    def take(self, idx: np.ndarray) -> "Frame":
        return Frame(self.rels, [{f: a[idx] for f, a in c.items()} for c in self.cols], self.seq[idx],
                     None if self.T is None else self.T[idx])

    def reorder(self, order: tuple[int, ...] | None) -> "Frame":
        if order is None:
            return self
        return Frame(tuple(self.rels[i] for i in order), [self.cols[i] for i in order], self.seq, self.T)

    def width(self) -> int:
        return sum(len(c) for c in self.cols)

    @staticmethod
    def concat(frames: list["Frame"]) -> "Frame":
        if len(frames) == 1:
            return frames[0]
        f0 = frames[0]
        # the fields every part carries (parts from different edges may carry more)
        cols = [{f: np.concatenate([fr.cols[i][f] for fr in frames]) for f in c
                 if all(f in fr.cols[i] for fr in frames)}
                for i, c in enumerate(f0.cols)]
        T = None if f0.T is None else np.concatenate([fr.T for fr in frames])
        return Frame(f0.rels, cols, np.concatenate([fr.seq for fr in frames]), T)


def values_array(values: Any) -> np.ndarray:
    """A column as numpy: integers as int64 (with nulls: float64, NaN = null), floats as
    float64, strings and anything else as objects (None = null).

    >>> values_array([1, None, 3]).tolist(), values_array(["x", None]).tolist()
    ([1.0, nan, 3.0], ['x', None])
    """
    if isinstance(values, Column):  # numbers already in one array (Parquet input): no Python object each
        arr = pa.array(values.array)
    elif isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values
    else:
        values = list(values)
        try:
            arr = pa.array(values, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # values of several types (an in-memory table)
            return np.array(values + [None], dtype=object)[:-1]
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_integer(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_floating(t):
        arr = arr.cast(pa.float64())
    elif pa.types.is_null(t):
        return np.full(len(arr), np.nan)
    elif pa.types.is_boolean(t) and arr.null_count:
        arr = arr.cast(pa.float64())
    out = arr.to_numpy(zero_copy_only=False)
    if out.dtype.kind == "b" or out.dtype.kind in "iuf":
        return out
    return out.astype(object, copy=False)


# --------------------------------------------------------------------------------------------
# keys
# --------------------------------------------------------------------------------------------


def _codes1(a: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """(valid mask or None: all valid, int64 codes, exact: equal codes ⇔ equal values)."""
    k = a.dtype.kind
    if k in "iub":
        return None, a.astype(np.int64, copy=False), True
    if k == "f":
        valid = ~np.isnan(a)
        with np.errstate(invalid="ignore", over="ignore"):
            integral = (a == np.floor(a)) & (np.abs(a) < 9.2e18)
            codes = np.where(integral, a.astype(np.int64), a.view(np.int64))
        return (None if valid.all() else valid), codes, bool(integral[valid].all())
    kind = pd.api.types.infer_dtype(a, skipna=True)
    if kind in ("integer", "floating", "mixed-integer-float", "boolean", "empty"):
        return _codes1(_as_float(a))
    valid = ~pd.isna(a)
    if kind == "string":
        codes = pd.util.hash_array(np.where(valid, a, ""), categorize=False).view(np.int64)
    else:  # numbers beside other values: numbers code as numbers (True = 1 = 1.0), the rest hash
        num = np.fromiter((isinstance(v, numbers.Real) for v in a), dtype=bool, count=len(a))
        ncodes = _codes1(_as_float(np.where(num, a, None)))[1]
        hcodes = pd.util.hash_array(np.where(valid & ~num, a, "").astype(str).astype(object),
                                    categorize=False).view(np.int64)
        codes = np.where(num, ncodes, hcodes)
    return (None if valid.all() else valid), codes, False


def _as_float(a: np.ndarray) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in a.tolist()], dtype=np.float64)


def key_codes(arrays: list[np.ndarray]) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """The codes of a (multi-column) key: ``(valid, codes, exact)`` — rows with a null in any
    column are not valid; ``exact``: equal codes mean equal keys (else a match is confirmed
    on the values).

    >>> valid, codes, exact = key_codes([np.array([1.0, np.nan, 2.5])])
    >>> valid.tolist(), int(codes[0]), exact
    ([True, False, True], 1, False)
    """
    valid, codes, exact = _codes1(arrays[0])
    for a in arrays[1:]:
        v, c, _ = _codes1(a)
        codes = (codes.view(np.uint64) * _MIX + c.view(np.uint64)).view(np.int64)
        exact = False
        if v is not None:
            valid = v if valid is None else valid & v
    return valid, codes, exact


def partition_keys(values: np.ndarray) -> np.ndarray:
    """:func:`~mqjoin.runtime.rules.partition_key` of every value of a column (nulls: 0), so
    that ``partition_keys(a) % P`` are the values' partitions among ``P``: integers and
    integral floats in numpy (the multiplication wraps modulo 2⁶⁴ as the Python function's
    mask does), other values once per distinct value.

    >>> from mqjoin.runtime.rules import partition_of
    >>> ([int(k % 4) for k in partition_keys(np.array([3, 1.0, 2.5, np.nan]))]
    ...  == [partition_of(v, 4) for v in (3, 1, 2.5, None)])
    True
    >>> values = ["x", "y", "x", None, 5, -7, 2**70]
    >>> (partition_keys(np.array(values, dtype=object)) % 7).tolist() == [partition_of(v, 7) for v in values]
    True
    """
    k = values.dtype.kind
    if k in "iub":
        return _int_partition_keys(values.astype(np.int64, copy=False))
    if k == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            integral = (values == np.floor(values)) & (np.abs(values) < 9.2e18)
            keys = _int_partition_keys(np.where(integral, values, 0).astype(np.int64))
        keys[~integral] = 0  # nulls
        other = np.flatnonzero(~integral & ~np.isnan(values))
        if len(other):
            keys[other] = [hash(float(v)) for v in values[other].tolist()]
        return keys
    codes, uniques = pd.factorize(values)  # nulls (None, NaN): code -1, the 0 appended last
    mapped = [partition_key(v) for v in uniques.tolist()] + [0]  # every key fits 64 bits
    return np.asarray(mapped, dtype=np.int64)[codes]


def _int_partition_keys(ints: np.ndarray) -> np.ndarray:
    """:func:`~mqjoin.runtime.rules.int_partition_key` of an int64 array."""
    with np.errstate(over="ignore"):
        return ((ints.view(np.uint64) * np.uint64(PARTITION_MULTIPLIER)) >> np.uint64(32)).astype(np.int64)


class KeyIndex:
    """A run's entries grouped by key code: the distinct codes in a hash table
    (:class:`pandas.Index`), each with its entries ``rows[start:start + count]`` (ascending
    codes; equal codes in the order of ``rows`` given).  ``presorted``: ``codes`` ascend
    already and ``rows`` follow them (:meth:`merge`)."""

    __slots__ = ("codes", "start", "count", "rows", "exact")

    def __init__(self, codes: np.ndarray, rows: np.ndarray, exact: bool, presorted: bool = False):
        if not presorted:
            order = np.argsort(codes, kind="stable")
            codes, rows = codes[order], rows[order]
        first = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else _EMPTY
        self.codes = pd.Index(codes[first])
        self.start = first
        self.count = np.diff(np.r_[first, len(codes)])
        self.rows = rows
        self.exact = exact

    @staticmethod
    def merge(a: "KeyIndex", b: "KeyIndex", offset: int) -> "KeyIndex":
        """The index of two runs put one after the other (``b``'s rows ``offset`` on), from
        their indexes: their sorted codes are two ascending runs, which a stable sort merges
        in one linear pass (no sort again) — the same index as built from the joined run.

        >>> a = KeyIndex(np.array([5, 3, 5]), np.arange(3), True)
        >>> b = KeyIndex(np.array([3, 9]), np.arange(2), True)
        >>> m, whole = KeyIndex.merge(a, b, 3), KeyIndex(np.array([5, 3, 5, 3, 9]), np.arange(5), True)
        >>> m.codes.tolist(), m.rows.tolist(), m.count.tolist(), whole.rows.tolist()
        ([3, 5, 9], [1, 3, 0, 2, 4], [2, 2, 1], [1, 3, 0, 2, 4])
        """
        codes = np.concatenate([np.repeat(a.codes.to_numpy(), a.count), np.repeat(b.codes.to_numpy(), b.count)])
        order = np.argsort(codes, kind="stable")  # timsort: two ascending runs, merged
        return KeyIndex(codes[order], np.concatenate([a.rows, b.rows + offset])[order], a.exact and b.exact,
                        presorted=True)

    def match(self, pcodes: np.ndarray, pidx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (probe row of ``pidx``, entry row) with equal codes."""
        g = self.codes.get_indexer(pcodes)
        hit = np.flatnonzero(g >= 0)
        if not len(hit):
            return _EMPTY, _EMPTY
        g = g[hit]
        cnt, lo = self.count[g], self.start[g]
        if len(self.codes) == len(self.rows):  # one entry per key (e.g. a primary key)
            return pidx[hit], self.rows[lo]
        ends = np.cumsum(cnt)
        pos = np.repeat(lo - (ends - cnt), cnt) + np.arange(int(ends[-1]))
        return np.repeat(pidx[hit], cnt), self.rows[pos]


class Segment:
    """A run of a store's entries with its key index per access pattern (built on first use)."""

    __slots__ = ("frame", "indexes", "max_seq")

    def __init__(self, frame: Frame):
        self.frame = frame
        self.indexes: dict[tuple, KeyIndex] = {}
        self.max_seq = int(frame.seq.max()) if len(frame) else -1

    def __len__(self) -> int:
        return len(self.frame)

    def index(self, pattern: tuple[tuple[int, int], ...]) -> KeyIndex:
        got = self.indexes.get(pattern)
        if got is None:
            valid, codes, exact = key_codes([self.frame.cols[c][f] for c, f in pattern])
            rows = np.arange(len(codes)) if valid is None else np.flatnonzero(valid)
            got = self.indexes[pattern] = KeyIndex(codes if valid is None else codes[valid], rows, exact)
        return got

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the entries of ``mask`` (the indexes are rebuilt when next used)."""
        self.frame = self.frame.take(np.flatnonzero(mask))
        self.indexes = {}
        self.max_seq = int(self.frame.seq.max()) if len(self.frame) else -1


# --------------------------------------------------------------------------------------------
# filters (docs/model.md §7) over columns
# --------------------------------------------------------------------------------------------


def holds_mask(c: Comparison, a: np.ndarray) -> np.ndarray:
    """``c.holds`` of every value of a column (nulls never pass).

    >>> from mqjoin.model.workload import Attr
    >>> holds_mask(Comparison(Attr("R", "x"), "!=", (2,)), np.array([1.0, 2.0, np.nan])).tolist()
    [True, False, False]
    """
    consts = c.constants
    if a.dtype.kind in "iuf" and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in consts):
        ok = ~np.isnan(a) if a.dtype.kind == "f" else np.ones(len(a), dtype=bool)
        op = c.op
        if op == "IN":
            m = np.isin(a, np.array(consts, dtype=float))
        elif op == "BETWEEN":
            m = (consts[0] <= a) & (a <= consts[1])
        else:
            m = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                 ">=": np.greater_equal}[op](a, consts[0])
        return m & ok
    vals = a.tolist()
    if a.dtype.kind == "f":
        vals = [None if v != v else v for v in vals]
    return np.fromiter((c.holds(v) for v in vals), dtype=bool, count=len(vals))


def admit_mask(admit: Admit, f: Frame) -> np.ndarray:
    """Which tuples of ``f`` an :class:`~.rules.Admit` lets pass."""
    m = np.ones(len(f), dtype=bool)
    for comp, disjunction in admit.tests:
        any_ = np.zeros(len(f), dtype=bool)
        for conj in disjunction:
            all_ = np.ones(len(f), dtype=bool)
            for field, c in conj:
                all_ &= holds_mask(c, f.cols[comp][field])
            any_ |= all_
        m &= any_
    return m


# --------------------------------------------------------------------------------------------
# the executor
# --------------------------------------------------------------------------------------------


def edge_order(rules) -> list[str]:
    """The plan's edges in an order where every edge follows the edges that feed it and every
    probe follows every insert into the store it probes (deterministic: by label)."""
    deps: dict[str, set[str]] = {lab: set() for lab in rules.edges}
    inserts: dict[Layout, set[str]] = {}
    for lab, r in rules.edges.items():
        if isinstance(r, Insert):
            inserts.setdefault(r.layout, set()).add(lab)
    for lab, r in rules.edges.items():
        if isinstance(r, Probe):
            deps[lab] |= inserts.get(r.layout, set())
            for o in r.outs:
                deps[o].add(lab)
    order: list[str] = []
    done: set[str] = set()
    ready = sorted(lab for lab, d in deps.items() if not d)
    waiting = {lab: set(d) for lab, d in deps.items() if d}
    while ready:
        lab = ready.pop(0)
        order.append(lab)
        done.add(lab)
        freed = [x for x, d in waiting.items() if lab in d and not (d - done)]
        for x in freed:
            del waiting[x]
        ready = sorted(ready + freed)
    if waiting:
        raise PlanError(f"the plan's edges {', '.join(sorted(waiting))} depend on each other in a cycle "
                        "(a store probed before it is filled); the plan is inconsistent — re-optimise it")
    return order


Need = dict[str, frozenset[int]]  # relation → the fields of its base tuples still read


def _union(*needs: Need) -> Need:
    out: dict[str, set[int]] = {}
    for n in needs:
        for r, fs in n.items():
            out.setdefault(r, set()).update(fs)
    return {r: frozenset(fs) for r, fs in out.items()}


def _admit_need(admit: Admit | None, rels: tuple[str, ...]) -> Need:
    if admit is None:
        return {}
    return _union(*({rels[comp]: frozenset(f for conj in disj for f, _ in conj)} for comp, disj in admit.tests))


def field_needs(rules, order: list[str]) -> tuple[dict[str, Need], dict[Layout, Need]]:
    """Which fields of which relations each edge's travelling tuples, and each store's
    entries, must carry: the rows (results), the keys and filters of later edges, the
    timestamps windows check, and the store's partition attribute on an insert edge (where
    the sharded executor sends it) and in the store (its rows per partition are counted) —
    nothing else is gathered when tuples join."""
    plan = rules.plan
    fields = field_positions(plan.workload)
    edge: dict[str, Need] = {}
    store: dict[Layout, Need] = {}
    for lab in reversed(order):  # a probe before the inserts of its store, an edge after its outs
        r = rules.edges[lab]
        rels = tuple(plan.edge[lab].layout)
        if isinstance(r, Insert):
            c, f = position(fields, rels, r.layout.partition)
            part = {rels[c]: frozenset([f])}
            edge[lab] = _union({x: frozenset() for x in rels}, store.get(r.layout, {}), _admit_need(r.admit, rels),
                               part)
            store[r.layout] = _union(store.get(r.layout, {}), part)  # rows are counted per partition
        elif isinstance(r, Probe):
            after = _union(*(edge[o] for o in r.outs))
            mine = {x: fs for x, fs in after.items() if x in rels}
            keys = _union(*({rels[c]: frozenset([f])} for c, f in r.key))
            edge[lab] = _union({x: frozenset() for x in rels}, mine, keys, _admit_need(r.admit, rels))
            stored = r.mir.relations
            pattern = _union(*({stored[c]: frozenset([f])} for c, f in r.pattern))
            windows = {stored[c]: frozenset([1]) for c, _ in r.windows}
            store[r.layout] = _union({x: frozenset() for x in stored}, store.get(r.layout, {}),
                                     {x: fs for x, fs in after.items() if x in stored}, pattern, windows)
        else:
            edge[lab] = _union({x: frozenset([0]) for x in rels}, _admit_need(r.admit, rels))
    return edge, store


class BatchExecutor:
    """Runs a static plan a batch of arrivals at a time (see the module doc)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.w = plan.workload
        self.rules = plan_rules(plan)
        self.order = edge_order(self.rules)
        self.p = {layout: p for layout, _, p in self.rules.layouts}
        self.windows = {layout: windows_of(self.w, mir.relations) for layout, mir, _ in self.rules.layouts}
        self.stores: dict[Layout, list[Segment]] = {layout: [] for layout, _, _ in self.rules.layouts}
        self.live: dict[Layout, int] = {layout: 0 for layout in self.stores}
        self.messages: Counter = Counter({lab: 0 for lab, r in self.rules.edges.items() if isinstance(r, Probe)})
        self.received: Counter = Counter()  # travelling tuples each probe edge ran here (a shard's share)
        #: counts each probe per partition when set (:class:`mqjoin.runtime.partitions.PartitionTally`)
        self.tally = None
        #: the most entries a merge of segments may make (None: merge whatever doubles)
        self.merge_cap: int | None = None
        self.counts: Counter = Counter({q.name: 0 for q in self.w.queries})
        self.max_rows: Counter = Counter()
        self.T = -math.inf
        self.deltas: dict[Layout, Frame] = {}  # the entries the last batch inserted
        self.width = {r.name: 2 + len(r.attributes) for r in self.w.relations}
        self.names = {layout_of(s): s.id for s in plan.stores}
        self.need, self.store_need = field_needs(self.rules, self.order)
        self.after = {lab: _union(*(self.need[o] for o in r.outs)) for lab, r in self.rules.edges.items()
                      if isinstance(r, Probe)}
        # the fields each relation's input must carry
        self.source_need: Need = _union(*({r: self.need[lab][r]} for r, labs in self.rules.sources.items()
                                           for lab in labs))
        self.begin()

    # -- one batch --------------------------------------------------------------------------

    def feed(self, batch: Mapping[str, Frame]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Process one batch: relation → its arrivals as a one-component :class:`Frame`
        (``seq`` the arrival numbers, after every earlier batch's; ``T`` = ``ts``).  Returns
        query → (the arrival number of each result's trigger, its rows in the query's
        relation order)."""
        self.begin()
        out, _ = self.run(self.order, self.source_inputs(batch))
        self.finish(max([self.T] + [float(f.T.max()) for f in batch.values() if len(f)]))
        return self.results(out)

    def source_inputs(self, batch: Mapping[str, Frame]) -> dict[str, list[Frame]]:
        """Edge → the frames travelling on it: every relation's arrivals on its source edges."""
        inputs: dict[str, list[Frame]] = {}
        for r, labs in self.rules.sources.items():
            f = batch.get(r)
            if f is not None and len(f):
                for lab in labs:
                    inputs.setdefault(lab, []).append(f)
        return inputs

    def begin(self) -> None:
        """Start a batch: no store holds entries of it yet."""
        self.delta: dict[Layout, list[Frame]] = {}
        self.sealed: dict[Layout, Segment] = {}  # a store's entries of this batch, one segment once complete

    def _seal(self, layout: Layout) -> Segment:
        seg = self.sealed.get(layout)
        if seg is None:
            seg = self.sealed[layout] = Segment(Frame.concat(self.delta[layout]))
        return seg

    def run(self, labels: Iterable[str], inputs: dict[str, list[Frame]], broadcasts: bool = True
            ) -> tuple[dict[str, list[tuple[np.ndarray, np.ndarray]]], dict[str, list[Frame]]]:
        """Run the edges ``labels`` (in :func:`edge_order`) of the batch over ``inputs`` (edge →
        the frames travelling on it; consumed).  Returns the results (query → parts of
        (triggers, rows)) and the frames the probes sent on edges outside ``labels`` (edge →
        frames).  A probe counts its messages (``broadcasts`` False: only its routed ones —
        a shard that receives a copy of a broadcast leaves counting it to another).  Every
        insert into a store runs before a probe of it, in this call or an earlier one of the
        batch (:meth:`begin`)."""
        rules, run = self.rules, set(labels)
        out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        sent: dict[str, list[Frame]] = {}
        for lab in labels:
            parts = inputs.pop(lab, None)
            if not parts:
                continue
            rule = rules.edges[lab]
            f = Frame.concat(parts)
            if rule.admit is not None:
                f = f.take(np.flatnonzero(admit_mask(rule.admit, f)))
                if not len(f):
                    continue
            if isinstance(rule, Insert):
                f = f.reorder(rule.order)
                keep = self.store_need[rule.layout]
                self.delta.setdefault(rule.layout, []).append(
                    Frame(f.rels, [{x: c[x] for x in keep[r]} for r, c in zip(f.rels, f.cols)], f.seq))
            elif isinstance(rule, Probe):
                self.received[lab] += len(f)
                if self.tally is not None:
                    self.tally.probe(rule, f, broadcasts)
                if rule.route is not None:
                    self.messages[lab] += len(f)
                elif broadcasts:
                    self.messages[lab] += len(f) * self.p[rule.layout]
                segs = self.stores[rule.layout]
                if rule.layout in self.delta:  # every insert into the store ran: its batch is complete
                    segs = segs + [self._seal(rule.layout)]
                got = self._probe(f, rule, segs)
                if got is not None:
                    for o in rule.outs:
                        (inputs if o in run else sent).setdefault(o, []).append(got)
            else:  # Emit
                rows = np.column_stack([f.cols[i][0] for i in rule.order]).astype(np.int64, copy=False)
                out.setdefault(rule.query, []).append((f.seq, rows))
        return out, sent

    def finish(self, T: float) -> None:
        """End a batch: its entries join their stores, and ``T`` (the largest ``ts`` so far)
        expires what it can (:meth:`purge`)."""
        self.deltas = {}
        for layout in self.delta:
            seg = self._seal(layout)
            self.deltas[layout] = seg.frame
            self.stores[layout].append(seg)
            self._compact(layout)
        self.delta, self.sealed = {}, {}
        self.T = max(self.T, T)
        self.purge()

    def results(self, out: Mapping[str, list[tuple[np.ndarray, np.ndarray]]]
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Query → (triggers, rows) of the result parts of :meth:`run` (every query, counted)."""
        results = {}
        for q in self.w.queries:
            parts = out.get(q.name, [])
            if parts:
                trig = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
                rows = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
            else:
                trig, rows = _EMPTY, np.empty((0, len(q.relations)), dtype=np.int64)
            self.counts[q.name] += len(trig)
            results[q.name] = (trig, rows)
        return results

    def _probe(self, f: Frame, rule: Probe, segs: list[Segment]) -> Frame | None:
        valid, codes, pexact = key_codes([f.cols[c][fl] for c, fl in rule.key])
        first = int(f.seq.min()) if len(f) else None
        pidx = np.arange(len(f)) if valid is None else np.flatnonzero(valid)
        if valid is not None:
            codes = codes[valid]
        got: list[Frame] = []
        for seg in segs:
            if not len(seg) or not len(pidx):
                continue
            index = seg.index(rule.pattern)
            pi, si = index.match(codes, pidx)
            if not len(pi):
                continue
            e = seg.frame
            keep = np.ones(len(pi), dtype=bool)
            if not (pexact and index.exact):  # codes that hash: confirm on the values
                for (c, fl), (c2, fl2) in zip(rule.key, rule.pattern):
                    keep &= np.asarray(f.cols[c][fl][pi] == e.cols[c2][fl2][si], dtype=bool)
            if first is not None and seg.max_seq >= first:  # entries of the batch: of earlier arrivals only
                keep &= e.seq[si] < f.seq[pi]
            if rule.windows:
                keep &= window_mask(f.T[pi], ((e.cols[c][1][si], win) for c, win in rule.windows), len(pi))
            if not keep.all():
                k = np.flatnonzero(keep)
                pi, si = pi[k], si[k]
                if not len(pi):
                    continue
            after = self.after[rule.label]
            got.append(Frame(f.rels + e.rels,
                             [{x: c[x][pi] for x in after.get(r, ())} for r, c in zip(f.rels, f.cols)] +
                             [{x: c[x][si] for x in after.get(r, ())} for r, c in zip(e.rels, e.cols)],
                             f.seq[pi], f.T[pi]))
        if not got:
            return None
        return Frame.concat(got)

    # -- state ------------------------------------------------------------------------------

    def _compact(self, layout: Layout) -> None:
        """Merge the newest segments while the older of the two is less than twice the newer
        (and their merge holds at most ``merge_cap`` entries)."""
        segs, cap = self.stores[layout], self.merge_cap
        while len(segs) >= 2 and len(segs[-2]) < 2 * len(segs[-1]) and (
                cap is None or len(segs[-2]) + len(segs[-1]) <= cap):
            b = segs.pop()
            a = segs.pop()
            merged = Segment(Frame.concat([a.frame, b.frame]))
            for pattern, index in a.indexes.items():  # built once, then merged: never sorted again
                merged.indexes[pattern] = KeyIndex.merge(index, b.index(pattern), len(a))
            segs.append(merged)

    def purge(self) -> None:
        """Count the entries a later arrival can still join (``T − ts ≤ window`` for every
        component), and drop the expired ones of a segment once a quarter of it expired."""
        T = self.T
        for layout, segs in self.stores.items():
            wins = self.windows[layout]
            live = 0
            for seg in segs:
                n = len(seg)
                if not wins or not n:
                    live += n
                    continue
                ok = window_mask(T, ((seg.frame.cols[c][1], win) for c, win in wins), n)
                alive = int(ok.sum())
                live += alive
                if alive < n and (n - alive) * 4 >= n:
                    seg.keep(ok)
            self.stores[layout] = [s for s in segs if len(s)]
            self.live[layout] = live
            name = self.names.get(layout)
            if name is not None:
                self.max_rows[name] = max(self.max_rows[name], live)

    def store_rows(self) -> dict[str, int]:
        """Entries a later arrival can still join, per store of the plan."""
        return {s.id: self.live.get(layout_of(s), 0) for s in self.plan.stores}

    def state_bytes(self) -> int:
        """An estimate of the stores' size as the per-tuple executor counts it: 8 bytes per
        field of every stored base tuple."""
        return sum(n * 8 * sum(self.width[r] for r in layout.mir.relations) for layout, n in self.live.items())

    def entries(self, layout: Layout) -> Frame | None:
        """All entries of a store (for a snapshot)."""
        segs = [s.frame for s in self.stores[layout] if len(s)]
        return Frame.concat(segs) if segs else None

    def load(self, layout: Layout, frame: Frame) -> None:
        """Add entries to a store (a restore from a journal)."""
        if layout not in self.stores:
            raise PlanError("the state journal holds a store this plan does not have; delete the checkpoint "
                            "to start over")
        if len(frame):
            self.stores[layout].append(Segment(frame))
            self._compact(layout)


class Arrivals:
    """Every input tuple of a run in arrival order (``ts``, relation declaration rank, row: the
    tie-break of docs/model.md §6) as arrays, cut into batches of :class:`Frame` values
    (:meth:`frames`): a relation's fields are converted once, from the columns of its
    :class:`~mqjoin.model.tables.Table` (a Parquet column's numpy array as it is), and a batch
    takes its rows from them — no input tuple becomes a Python tuple.  ``need``: the fields
    each relation's frames carry (:attr:`BatchExecutor.source_need`); the tables are checked
    as every engine checks them (:func:`~mqjoin.runtime.rules.require_inputs`).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload("{defaults: {selectivity: 0.5}, relations: {R: {attributes: [a]}, S: {attributes: [a]}},"
    ...                    " queries: {q: 'R(a), S(a)'}}")
    >>> tables = {"R": Table.from_columns("R", {"ts": [1.0, 0.5], "a": [1, 2]}),
    ...           "S": Table.from_columns("S", {"ts": [0.5], "a": [2]})}
    >>> arr = Arrivals(w, tables, {"R": {0, 2}, "S": {0, 2}})
    >>> len(arr), arr.span
    (3, 0.5)
    >>> {r: (f.seq.tolist(), f.cols[0][0].tolist(), f.cols[0][2].tolist()) for r, f in arr.frames(0, 3).items()}
    {'R': ([0, 2], [1, 0], [2, 1]), 'S': ([1], [0], [2])}
    """

    def __init__(self, workload, tables: Mapping[str, Table], need: Mapping[str, Iterable[int]]):
        rels = sorted((r for r in need), key=workload.relation_rank.__getitem__)
        require_inputs(workload, tables, rels)
        self.names = rels
        self.need = [frozenset(need[r]) for r in rels]
        self.fields: list[dict[int, np.ndarray]] = []
        for r in rels:
            t, attrs = tables[r], workload.relation(r).attributes
            n = len(t)
            cols: dict[int, np.ndarray] = {1: np.asarray(t.ts, dtype=np.float64)}
            for f in need[r]:
                if f == 0:
                    cols[0] = np.arange(n, dtype=np.int64)
                elif f >= 2:  # declared attributes no query joins on read as null when absent
                    a = attrs[f - 2]
                    cols[f] = values_array(t.columns[a]) if a in t.columns else np.full(n, np.nan)
            self.fields.append(cols)
        ts = np.concatenate([c[1] for c in self.fields]) if rels else np.empty(0)
        rank = np.concatenate([np.full(len(c[1]), k, dtype=np.int32) for k, c in enumerate(self.fields)]) \
            if rels else np.empty(0, dtype=np.int32)
        row = np.concatenate([np.arange(len(c[1])) for c in self.fields]) if rels else _EMPTY
        order = arrival_permutation(ts, rank, row)
        self.rel, self.row = rank[order], row[order]
        #: the input's event-time span (max ts − min ts)
        self.span = float(ts.max() - ts.min()) if len(ts) else 0.0

    def __len__(self) -> int:
        return len(self.rel)

    def frames(self, lo: int, hi: int) -> dict[str, Frame]:
        """The arrivals ``lo`` … ``hi − 1`` as one :class:`Frame` per relation (``seq``: their
        arrival numbers; ``T``: their ``ts``)."""
        rel, row = self.rel[lo:hi], self.row[lo:hi]
        out = {}
        for k in np.unique(rel).tolist():
            pos = np.flatnonzero(rel == k)
            rows = row[pos]
            fields = self.fields[k]
            cols = {f: fields[f][rows] for f in self.need[k]}
            out[self.names[k]] = Frame((self.names[k],), [cols], pos + lo, cols[1] if 1 in cols else fields[1][rows])
        return out

    def batches(self, size: int | None = None) -> Iterator[dict[str, Frame]]:
        """The arrivals in order, ``size`` at a time (None or 0: all in one batch), each batch as
        :meth:`frames` gives it — what :meth:`BatchExecutor.feed` takes."""
        n = len(self)
        step = max(size or n, 1)
        for lo in range(0, n, step):
            yield self.frames(lo, min(lo + step, n))


def run_vector(plan: Plan, tables: Mapping[str, Table], batch: int | None = None,
               sink: Callable[[str, np.ndarray], None] | None = None):
    """Run ``plan`` over ``tables`` with the vectorised executor, ``batch`` arrivals at a time
    (None: all in one batch) — a :class:`~mqjoin.runtime.reference.RunResult` whose results
    equal the reference executor's (``store_rows``: the most entries held after a batch).
    ``sink(query, rows)``: each batch's results are handed over as an ``n × k`` array of row
    indices (e.g. to :class:`~mqjoin.model.tables.ResultWriter`) and not kept, so the run
    holds its stores and one batch, whatever the number of results (``results`` is then empty)."""
    from mqjoin.runtime.reference import RunResult, store_messages
    from mqjoin.support.gcpause import paused_gc

    w = plan.workload
    ex = BatchExecutor(plan)
    arrivals = Arrivals(w, tables, ex.source_need)
    results: dict[str, list] = {q.name: [] for q in w.queries}
    t0 = time.perf_counter()
    with paused_gc():  # millions of entries per batch: no collections meanwhile
        for frames in arrivals.batches(batch):
            got = ex.feed(frames)
            for q, (_, rows) in got.items():
                if sink is not None:
                    if len(rows):
                        sink(q, rows)
                else:
                    results[q].extend(map(tuple, rows.tolist()))
    seconds = time.perf_counter() - t0
    messages = dict(ex.messages)
    return RunResult(results=results, probe_messages=messages, store_messages=store_messages(plan, messages),
                     store_rows={s.id: ex.max_rows.get(s.id, 0) for s in plan.stores}, input_tuples=len(arrivals),
                     seconds=seconds, duration=arrivals.span, counts=dict(ex.counts))
