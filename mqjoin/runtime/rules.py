"""The runtime rules of a plan: what every edge does to a travelling tuple, computed once as values.

This module is the one answer to "where is the probe rule decided?" (docs/architecture.md §5).  A
:class:`~mqjoin.planning.plan.Plan` says which stores exist and how its labelled edges connect them;
:func:`plan_rules` turns every edge into a plain value that a backend executes without
looking at the plan again:

* :class:`Insert` — the tuple enters a store container (``ingest`` of an input tuple, or
  ``insert`` of a materialisation result into an MIR store), reordered to the store's layout;
* :class:`Probe` — the tuple probes the containers of an MIR: the equality key it brings
  (``key``, positions in the travelling tuple), the stored attributes it is compared with
  (``pattern``, positions in a stored entry), the windows every stored component must satisfy,
  its route into the store's own partitioning (``route``; ``None`` = broadcast to every
  partition), and the edges its results travel on (``outs``);
* :class:`Emit` — the tuple is a result of a query, reordered to the query's relations.

Filters (docs/model.md §7) are :class:`Admit` values on these rules: an input tuple enters a base
store, or starts a probe order, only when it passes the store's (or the order's start)
selection, and a result is emitted only when every tuple passes its query's own filter (a
query group's stores keep the union of its members' filters).

Tuples are tuples of *base tuples* ``(row, ts, attribute values…)``, one per relation of
the travelling layout; a position is ``(component, field)``.  Which containers of which
epochs a probe reaches (its own epoch's and older ones, iteratively through older stores
where a layout has no container) is decided by :func:`choose_layout` and
:class:`~mqjoin.runtime.containers.ContainerIndex`; the in-process executor
(:mod:`mqjoin.runtime.executor`) and the Spark backends execute these values.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> rules = plan_rules(optimize(w).plan)
>>> [type(rules.edges[lab]).__name__ for lab in rules.sources["R"]]
['Insert', 'Probe']
>>> probe = rules.edges[rules.sources["R"][1]]
>>> probe.key, probe.pattern, probe.route, probe.windows
(((0, 2),), ((0, 2),), (0, 2), ((0, 1.0),))
>>> partition_of("abc", 4) == partition_of("abc", 4), partition_of(5, 4), partition_of(5.0, 4)
(True, 3, 3)
"""

from __future__ import annotations

import datetime
import decimal
import math
import numbers
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from mqjoin.planning.candidates import MIR
from mqjoin.model.errors import DataError, PlanError
from mqjoin.model.filters import Comparison, Selection
from mqjoin.planning.plan import Plan, ProbeRule, Store, output_query
from mqjoin.planning.probe_trees import route_attribute
from mqjoin.model.tables import Table
from mqjoin.model.workload import Attr, JoinClass, Workload

Position = tuple[int, int]  # (component of the tuple, field of the base tuple)


class MirKey(NamedTuple):
    """An MIR's identity for containers: relations and class members, without selectivities
    (plans optimised on other statistics carry other selectivities in their classes)."""

    relations: tuple[str, ...]
    classes: tuple[tuple[Attr, ...], ...]
    selection: tuple[tuple, ...] = ()  # Selection.key of each filtered relation


class Layout(NamedTuple):
    """How a store is laid out: its namespace (``individual`` mode), MIR and partition attribute."""

    namespace: str
    mir: MirKey
    partition: Attr


def mir_key(m: MIR) -> MirKey:
    return MirKey(m.relations, tuple(c.members for c in m.classes), tuple(s.key for s in m.selection))


def layout_of(s: Store) -> Layout:
    return Layout(s.namespace, mir_key(s.mir), s.partition)


def partition_of(value: Any, parallelism: int) -> int:
    """The partition of a value: deterministic across processes for every value type (strings,
    bytes, dates and anything else hash by CRC32, never by Python's salted ``hash``), and equal
    values (``1``, ``1.0``, ``True``, ``Decimal(1)``) land in the same partition: its
    :func:`partition_key` modulo ``parallelism``.

    >>> [partition_of(v, 4) for v in (5, 5.0, decimal.Decimal(5), None)]
    [3, 3, 3, 0]
    >>> partition_of(True, 4) == partition_of(1, 4)
    True
    >>> partition_of(datetime.date(2026, 1, 2), 7) == partition_of(datetime.date(2026, 1, 2), 7)
    True
    """
    if value.__class__ is int:
        return int_partition_key(value) % parallelism
    if parallelism == 1 or value is None:
        return 0
    return partition_key(value) % parallelism


PARTITION_MULTIPLIER = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd: see int_partition_key
_MASK64 = (1 << 64) - 1


def int_partition_key(value: int) -> int:
    """An integer's partition key: the top 32 bits of ``value · 2⁶⁴/φ mod 2⁶⁴`` (Fibonacci
    hashing). Keys with a stride — TPC-H's order keys use 8 of every 32 numbers — would
    otherwise fill only some partitions when the count shares a factor with the stride; the
    multiplication spreads them.

    >>> strided = [k for k in range(1, 3201) if k % 32 < 8]  # 800 keys, 8 of every 32
    >>> len({k % 32 for k in strided}), len({int_partition_key(k) % 32 for k in strided})
    (8, 32)
    >>> int_partition_key(-1) == int_partition_key((1 << 64) - 1)  # two's complement, as numpy
    True
    """
    return ((value * PARTITION_MULTIPLIER) & _MASK64) >> 32


def int_partition_expr(var: str) -> str:
    """:func:`int_partition_key` as a Python expression over the variable ``var``, for compiled
    inserts and probes.

    >>> eval(int_partition_expr("v"), {"v": 12345}) == int_partition_key(12345)
    True
    """
    return f"((({var} * {PARTITION_MULTIPLIER}) & {_MASK64}) >> 32)"


def partition_key(value: Any) -> int:
    """The integer whose remainder modulo a store's parallelism is a value's partition
    (:func:`partition_of`), for every parallelism at once: an integral number's
    :func:`int_partition_key`, a string's, bytes' or date's CRC32, another number's (unsalted)
    hash; ``None``: 0.

    >>> (partition_key(7) == partition_key(7.0) == int_partition_key(7), partition_key("abc") == zlib.crc32(b"abc"),
    ...  partition_key(None))
    (True, True, 0)
    """
    if value.__class__ is int:
        return int_partition_key(value)
    if value is None:
        return 0
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray)):
        return zlib.crc32(value)
    if isinstance(value, numbers.Integral):  # bool, numpy integers
        return int_partition_key(int(value))
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        if math.isfinite(value) and value == int(value):
            return int_partition_key(int(value))  # 1.0 joins 1, so both land in one partition
        return hash(value)  # numeric hashes are not salted
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return zlib.crc32(str(value).encode("utf-8"))
    return zlib.crc32(repr(value).encode("utf-8"))


# --------------------------------------------------------------------------------------------
# input tuples
# --------------------------------------------------------------------------------------------


def field_positions(workload: Workload) -> dict[str, dict[str, int]]:
    """Relation → attribute → field of the base tuple ``(row, ts, attribute values…)``."""
    return {r.name: {a: 2 + i for i, a in enumerate(r.attributes)} for r in workload.relations}


def join_attributes(workload: Workload) -> dict[str, set[str]]:
    """Relation → the attributes its queries join on or filter (the columns its input must have)."""
    return workload.input_attributes()


def require_inputs(workload: Workload, tables: Mapping[str, Table], relations: Iterable[str] | None = None) -> None:
    """Every relation some query joins (or ``relations``) has an input with every column the
    queries join on — else a :class:`~mqjoin.model.errors.DataError` naming it: the same error on
    every engine (a missing column must never join nothing in silence)."""
    needed = join_attributes(workload)
    rels = relations if relations is not None else [r for r, attrs in needed.items() if attrs]
    for r in rels:
        t = tables.get(r)
        if t is None:
            users = [q.name for q in workload.queries if r in q.relations]
            raise DataError(f"no input table for relation {r}" +
                            (f", which query {users[0]} joins" if users else "") + "; pass its table")
        t.require(sorted(needed.get(r, ())))


def base_tuples(workload: Workload, tables: Mapping[str, Table], relations: Iterable[str]) -> dict[str, list[tuple]]:
    """The base tuples ``(row, ts, attribute values…)`` of ``relations`` (checked by
    :func:`require_inputs`); declared attributes no query joins on read as null when absent."""
    relations = list(relations)
    require_inputs(workload, tables, relations)
    out: dict[str, list[tuple]] = {}
    for r in relations:
        t = tables[r]
        rel = workload.relation(r)
        cols = [t.columns.get(a, (None,) * len(t)) for a in rel.attributes]
        out[r] = list(zip(range(len(t)), t.ts, *cols))
    return out


def arrival_permutation(ts: np.ndarray, rank: np.ndarray, row: np.ndarray) -> np.ndarray:
    """The permutation that puts arrivals in arrival order (docs/model.md §6): by ``ts``, equal
    timestamps by the relation's declaration rank, equal ranks by the row — three equally long
    arrays in, the indices of the arrivals in order out (every executor and the Spark source
    replay the input in this one order).

    >>> import numpy as np
    >>> ts, rank, row = np.array([1.0, 0.5, 0.5, 0.5]), np.array([0, 1, 0, 0]), np.array([0, 0, 2, 1])
    >>> arrival_permutation(ts, rank, row).tolist()  # ts 0.5 first: rank 0 (rows 1, 2), then rank 1
    [3, 2, 1, 0]
    """
    return np.lexsort((row, rank, ts))


def arrival_order(base: Mapping[str, list[tuple]], rank: Mapping[str, int]) -> list[tuple[str, int]]:
    """(relation, row) of every base tuple in arrival order (:func:`arrival_permutation`).

    >>> arrival_order({"R": [(0, 1.0), (1, 0.5)], "S": [(0, 0.5)]}, {"R": 0, "S": 1})
    [('R', 1), ('S', 0), ('R', 0)]
    """
    rels = [r for r in base if base[r]]
    if not rels:
        return []
    ts = np.concatenate([np.fromiter((t[1] for t in base[r]), float, len(base[r])) for r in rels])
    rk = np.concatenate([np.full(len(base[r]), rank[r]) for r in rels])
    rows = np.concatenate([np.arange(len(base[r])) for r in rels])
    idx = arrival_permutation(ts, rk, rows)
    names = {rank[r]: r for r in rels}
    return [(names[k], int(i)) for k, i in zip(rk[idx].tolist(), rows[idx].tolist())]


# --------------------------------------------------------------------------------------------
# edge rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admit:
    """Which travelling tuples pass (docs/model.md §7): per component, a disjunction of conjunctions
    of ``(field, comparison)`` its base tuple must satisfy.

    >>> a = admit(("R", "S"), [Selection("S", ((Comparison(Attr("S", "x"), "<", (5,)),),), 0.5)],
    ...           {"R": {"a": 2}, "S": {"a": 2, "x": 3}})
    >>> a(((0, 0.0, 1), (0, 0.0, 1, 4))), a(((0, 0.0, 1), (0, 0.0, 1, 9)))
    (True, False)
    """

    tests: tuple[tuple[int, tuple[tuple[tuple[int, Comparison], ...], ...]], ...]

    def __call__(self, t: tuple) -> bool:
        for comp, disjunction in self.tests:
            b = t[comp]
            if not any(all(c.holds(b[f]) for f, c in conj) for conj in disjunction):
                return False
        return True


def admit(layout: tuple[str, ...], selections: Iterable[Selection],
          fields: Mapping[str, Mapping[str, int]]) -> Admit | None:
    """The :class:`Admit` of ``selections`` over tuples laid out as ``layout`` (``None``: all pass)."""
    tests = tuple((layout.index(s.relation),
                   tuple(tuple((fields[c.attr.relation][c.attr.name], c) for c in conj) for conj in s.filters))
                  for s in selections if s.relation in layout)
    return Admit(tests) if tests else None


@dataclass(frozen=True)
class Insert:
    """Keep the travelling tuple in the store container of ``layout`` (``order``: the store's
    relation order as positions of the travelling tuple; None when it is already in order)."""

    label: str
    layout: Layout
    mir: MIR
    order: tuple[int, ...] | None
    admit: Admit | None = None  # an input tuple enters a filtered base store only when it passes


@dataclass(frozen=True)
class Probe:
    """Probe the containers of ``layout.mir`` (see the module doc)."""

    label: str
    layout: Layout
    mir: MIR
    classes: tuple[JoinClass, ...]  # the classes of the step (prefix ∪ target)
    travelling: tuple[str, ...]  # relation order of the travelling tuple
    key: tuple[Position, ...]  # positions in the travelling tuple
    pattern: tuple[Position, ...]  # positions in a stored entry, pairwise equal to ``key``
    route: Position | None  # position of the route into ``layout``'s partitioning; None: broadcast
    windows: tuple[tuple[int, float], ...]  # (component of a stored entry, window) to check
    outs: tuple[str, ...]
    admit: Admit | None = None  # an input tuple starts a filtered probe order only when it passes

    def route_into(self, layout: Layout, fields: Mapping[str, Mapping[str, int]]) -> Position | None:
        """The route of this probe into a container laid out as ``layout`` (a store of another
        plan, or of this plan under another partition attribute)."""
        if layout == self.layout:
            return self.route
        a = route_attribute(self.classes, self.travelling, self.mir, layout.partition)
        return None if a is None else (self.travelling.index(a.relation), fields[a.relation][a.name])


@dataclass(frozen=True)
class Emit:
    """The travelling tuple is a result of ``query``; ``order``: the query's relations as
    positions of the travelling tuple."""

    label: str
    query: str
    order: tuple[int, ...]
    admit: Admit | None = None  # the query's own filters (a group's stores keep their union)


EdgeRule = Insert | Probe | Emit


@dataclass(frozen=True)
class PlanRules:
    """Every edge of a plan as a rule, and the edges each relation's input tuples start on."""

    plan: Plan
    edges: Mapping[str, EdgeRule]
    sources: Mapping[str, tuple[str, ...]]
    layouts: tuple[tuple[Layout, MIR, int], ...]  # the plan's store layouts with their parallelism

    def probes(self) -> list[Probe]:
        return [r for r in self.edges.values() if isinstance(r, Probe)]


def position(fields: Mapping[str, Mapping[str, int]], layout: tuple[str, ...], a: Attr) -> Position:
    try:
        return layout.index(a.relation), fields[a.relation][a.name]
    except (ValueError, KeyError):
        raise PlanError(f"plan refers to {a}, which is not in the tuple layout {' ⋈ '.join(layout)}") from None


def windows_of(workload: Workload, relations: tuple[str, ...]) -> tuple[tuple[int, float], ...]:
    win = {r.name: r.window for r in workload.relations}
    return tuple((i, win[r]) for i, r in enumerate(relations) if win[r] is not None)


def plan_rules(plan: Plan, workload: Workload | None = None) -> PlanRules:
    """The rules of every edge of ``plan`` (see the module doc).  ``workload`` supplies the
    windows and field positions (default: the plan's; the adaptive executor passes the
    workload of every query ever active, a superset)."""
    w = workload or plan.workload
    fields = field_positions(w)
    classes_of = {n.edge: n.step.classes for n in plan.nodes}
    start_of = {n.edge: n.step.prefix[0] for n in plan.nodes}
    edges: dict[str, EdgeRule] = {}
    for e in plan.edges:
        if e.kind in ("ingest", "insert"):
            st = _store(plan, e.target, e.label)
            order = tuple(_index(e.layout, r, e.label) for r in st.mir.relations)
            edges[e.label] = Insert(e.label, layout_of(st), st.mir, None if order == tuple(range(len(order)))
                                    else order,
                                    admit(e.layout, st.mir.selection, fields) if e.kind == "ingest" else None)
        elif e.kind == "probe":
            st = _store(plan, e.target, e.label)
            rule = plan.rules.get(e.target, {}).get(e.label)
            if not isinstance(rule, ProbeRule):
                raise PlanError(f"edge {e.label} probes {e.target} but the store has no probe rule for it")
            if e.label not in classes_of:
                raise PlanError(f"probe edge {e.label} has no probe-tree node; the plan is incomplete")
            edges[e.label] = Probe(
                e.label, layout_of(st), st.mir, classes_of[e.label], e.layout,
                key=tuple(position(fields, e.layout, a) for a, _ in rule.predicate),
                pattern=tuple(position(fields, st.mir.relations, b) for _, b in rule.predicate),
                route=None if e.route is None else position(fields, e.layout, e.route),
                windows=windows_of(w, st.mir.relations), outs=tuple(rule.out),
                admit=admit(e.layout, start_of[e.label].selection, fields) if len(e.layout) == 1 else None)
        elif e.kind == "output":
            query = output_query(e.target)
            if query not in w.query_names:
                raise PlanError(f"edge {e.label} outputs to query {query}, which the workload does not have")
            q = w.query(query)
            edges[e.label] = Emit(e.label, query, tuple(_index(e.layout, r, e.label) for r in q.relations),
                                  admit(e.layout, [Selection.union([f]) for f in q.filters], fields))
        else:
            raise PlanError(f"edge {e.label} has unknown kind {e.kind!r} (expected ingest, insert, probe or output)")
    for r in edges.values():
        for o in getattr(r, "outs", ()):
            if o not in edges:
                raise PlanError(f"probe edge {r.label} sends results on edge {o}, which the plan does not have")
    sources = {}
    for rel, labs in plan.sources.items():
        for lab in labs:
            if lab not in edges:
                raise PlanError(f"relation {rel}'s input starts on edge {lab}, which the plan does not have")
        sources[rel] = tuple(labs)
    layouts = tuple((layout_of(s), s.mir, s.parallelism) for s in plan.stores)
    return PlanRules(plan, edges, sources, layouts)


def _store(plan: Plan, sid: str, label: str) -> Store:
    try:
        return plan.store[sid]
    except KeyError:
        raise PlanError(f"edge {label} targets store {sid}, which the plan does not have") from None


def _index(layout: tuple[str, ...], relation: str, label: str) -> int:
    try:
        return layout.index(relation)
    except ValueError:
        raise PlanError(f"edge {label} carries {' ⋈ '.join(layout)} but its target needs {relation}") from None


def choose_layout(probe: Probe, layouts: Iterable[Layout], fields: Mapping[str, Mapping[str, int]]) -> Layout:
    """The container of an epoch a probe reaches when the epoch keeps its MIR in several
    layouts: the probe's own layout, else one the travelling tuple can route to, else the first
    (layouts in the order they were established: deterministic)."""
    layouts = list(layouts)
    if probe.layout in layouts:
        return probe.layout
    for layout in layouts:
        if probe.route_into(layout, fields) is not None:
            return layout
    return layouts[0]


def probe_pairs(classes: Iterable[JoinClass], relation: str, joined: list[str]) -> list[tuple[Attr, Attr]]:
    """The equalities of one hop of iterative probing into ``relation``: per class with a
    member of ``relation``, the first member among the ``joined`` relations and the relation's.

    >>> c = JoinClass((Attr("R", "a"), Attr("S", "a")), 0.1)
    >>> probe_pairs([c], "S", ["R"])
    [(R.a, S.a)]
    """
    pred = []
    for c in classes:
        mine = c.member_of(relation)
        if mine is None:
            continue
        left = [a for a in c.members if a.relation in joined]
        if left:
            pred.append((left[0], mine))
    return pred
