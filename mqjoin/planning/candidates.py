"""Candidates: MIRs, probe orders, partition candidates and steps (docs/model.md §3–§4).

This reproduces Figure 3 of the CLASH paper:

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
... relations:
...   R: {attributes: [b]}
...   S: {attributes: [b, c]}
...   T: {attributes: [c, d]}
...   U: {attributes: [d]}
... queries:
...   q1: R(b), S(b,c), T(c)
...   q2: S(c), T(c,d), U(d)
... ''')
>>> c = enumerate_candidates(w)
>>> [str(m) for m in c.mirs]
['R', 'S', 'T', 'U', 'RS', 'ST', 'TU']
>>> [str(o) for o in c.orders["q1"]["R"]]
['R » S » T', 'R » ST']
>>> [o.render() for o in partitioned_orders(c, "q1", "R")]
['R » S[b] » T[c]', 'R » S[b] » T[d]', 'R » S[c] » T[c]', 'R » S[c] » T[d]', 'R » ST[b]', 'R » ST[d]']
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar, Union

from mqjoin.planning.cost import broadcast_factor, memory_tuples, store_parallelism, unit_step_cost
from mqjoin.model.filters import Selection
from mqjoin.model.workload import Attr, JoinClass, Query, Workload, is_connected, restrict_classes

# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MIR:
    """A materialisable intermediate result: relations plus the classes restricted to them.

    A size-1 MIR is a base relation.  ``ambiguous`` lists attribute names that several of
    its relations declare (only used to render partition attributes unambiguously).
    ``selection``: what it keeps of its filtered relations (docs/model.md §7; part of its identity,
    so differently filtered stores are different stores).
    """

    relations: tuple[str, ...]
    classes: tuple[JoinClass, ...]
    ambiguous: frozenset[str] = field(default=frozenset(), compare=False, hash=False, repr=False)
    selection: tuple[Selection, ...] = ()

    @staticmethod
    def of(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass],
           selection: Iterable[Selection] = ()) -> "MIR":
        rels = tuple(sorted(set(relations)))
        names: dict[str, int] = {}
        for r in rels:
            for a in workload.relation(r).attributes:
                names[a] = names.get(a, 0) + 1
        return MIR(rels, restrict_classes(classes, rels), frozenset(a for a, n in names.items() if n > 1),
                   tuple(sorted((s for s in selection if s.relation in rels), key=lambda s: s.relation)))

    @cached_property
    def relation_set(self) -> frozenset[str]:
        return frozenset(self.relations)

    # MIRs key most of the optimiser's dicts: their hash and sort key are computed once
    # (:func:`_cached`; neither is pickled, as string hashes differ between processes)
    def __hash__(self) -> int:
        try:  # (the cached hash without a call: hashing is that frequent)
            cached: int = self.__dict__["_hash"]
            return cached
        except KeyError:
            return _cached(self, "_hash", lambda: hash((self.relations, self.classes, self.selection)))

    def __getstate__(self) -> dict[str, object]:
        return _state(self)

    @property
    def is_base(self) -> bool:
        return len(self.relations) == 1

    @cached_property
    def label(self) -> str:
        if self.selection:  # V⟨V.x < 10⟩, (V⟨V.x < 10⟩⋈W)
            sel = {s.relation: f"⟨{s}⟩" for s in self.selection}
            parts = [r + sel.get(r, "") for r in self.relations]
            return parts[0] if self.is_base else "(" + "⋈".join(parts) + ")"
        if all(len(r) == 1 for r in self.relations):
            return "".join(self.relations)
        if self.is_base:
            return self.relations[0]
        return "(" + "⋈".join(self.relations) + ")"

    def canonical(self, attr: Attr) -> Attr:
        """The representative of ``attr`` in this store: attributes equated by the MIR's own
        classes hold equal values, so partitioning by either is the same partitioning."""
        for c in self.classes:
            if attr in c.members:
                return c.members[0]
        return attr

    def render_partition(self, attr: Attr) -> str:
        """``S[b]``, or ``(a⋈b)[a.x]`` when the name alone would be ambiguous."""
        name = attr.name if attr.name not in self.ambiguous else str(attr)
        return f"{self.label}[{name}]"

    def __str__(self) -> str:
        return self.label

    def __repr__(self) -> str:
        return f"MIR({self.label})"

    def sort_key(self) -> tuple[Any, ...]:
        return _cached(self, "_sort_key", lambda: (len(self.relations), self.relations,
                                                   tuple(c.members for c in self.classes),
                                                   tuple(str(s) for s in self.selection)))


#: what frozen values keep in their ``__dict__`` once computed (:func:`_cached`)
_CACHES = ("_hash", "_sort_key", "_render")


_T = TypeVar("_T")


def _cached(obj: object, key: str, compute: Callable[[], _T]) -> _T:
    """``compute()`` of a frozen value, computed once and kept in its ``__dict__`` under ``key``
    (one of :data:`_CACHES`)."""
    value: _T | None = obj.__dict__.get(key)
    if value is None:
        value = obj.__dict__[key] = compute()
    return value


def _state(obj: object) -> dict[str, object]:
    """What pickles of a value with caches carry: not the caches."""
    return {k: v for k, v in obj.__dict__.items() if k not in _CACHES}


#: who a probe order answers: a query (by name) or a materialised MIR (its sub-query)
Owner = Union[str, MIR]


def owner_label(owner: Owner) -> str:
    return owner if isinstance(owner, str) else owner.label


@dataclass(frozen=True)
class ProbeOrder:
    """A probe order ``⟨X, M1, …, Mk⟩``; ``partitions`` (one attribute per element) when
    partitioned.

    >>> R, S, T = (MIR((n,), ()) for n in "RST")
    >>> ProbeOrder("R", (S, T), (Attr("S", "b"), Attr("T", "c")))
    R » S[b] » T[c]
    """

    start: str
    elements: tuple[MIR, ...]
    partitions: tuple[Attr, ...] | None = None

    def render(self) -> str:
        if self.partitions is None:
            return " » ".join([self.start] + [m.label for m in self.elements])
        return " » ".join([self.start] + [m.render_partition(a) for m, a in zip(self.elements, self.partitions)])

    def unpartitioned(self) -> "ProbeOrder":
        return ProbeOrder(self.start, self.elements)

    __str__ = render

    def __repr__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class Step:
    """One hop: the prefix's partial results probe the store of ``target`` (docs/model.md §4).

    Identity is the ordered prefix, the target and the owner's classes restricted to
    prefix ∪ target; the partition attribute is chosen separately (policy)."""

    prefix: tuple[MIR, ...]
    target: MIR
    classes: tuple[JoinClass, ...]

    # steps key the costs and the model's columns: their hash, sort key and rendering are
    # computed once (:func:`_cached`; not pickled).  The hash leaves the classes out (they are
    # slow to hash): steps of one prefix and target rarely differ in them, and equality tells
    # those apart.
    def __hash__(self) -> int:
        try:  # (as MIR.__hash__)
            cached: int = self.__dict__["_hash"]
            return cached
        except KeyError:
            return _cached(self, "_hash", lambda: hash((self.prefix, self.target)))

    def __getstate__(self) -> dict[str, object]:
        return _state(self)

    @cached_property
    def prefix_relations(self) -> frozenset[str]:
        return frozenset().union(*(m.relation_set for m in self.prefix))

    @cached_property
    def selection(self) -> tuple[Selection, ...]:
        """The selections of the prefix's and the target's relations (their pass fractions
        enter the step's cost, docs/model.md §7)."""
        return tuple(s for m in self.prefix + (self.target,) for s in m.selection)

    @cached_property
    def known(self) -> frozenset[Attr]:
        """Canonical target attributes whose class has a member in the prefix (``χ = 1``)."""
        out = set()
        pre = self.prefix_relations
        for c in self.classes:
            if c.relations & pre:
                for a in c.members:
                    if a.relation in self.target.relation_set:
                        out.add(self.target.canonical(a))
        return frozenset(out)

    def predicate(self) -> tuple[tuple[Attr, Attr], ...]:
        """The equalities the probe checks: one ``(prefix attribute, target attribute)`` per class
        that has members on both sides (classes inside the prefix or target hold already)."""
        pre = self.prefix_relations
        out = []
        for c in self.classes:
            left = [a for a in c.members if a.relation in pre]
            right = [a for a in c.members if a.relation in self.target.relation_set]
            if left and right:
                out.append((left[0], right[0]))
        return tuple(out)

    def render(self) -> str:
        return _cached(self, "_render", lambda: " » ".join(m.label for m in self.prefix) + " → " + self.target.label)

    __str__ = render

    def __repr__(self) -> str:
        return f"Step({self.render()})"

    def sort_key(self) -> tuple[Any, ...]:
        return _cached(self, "_sort_key", lambda: (len(self.prefix), tuple(m.sort_key() for m in self.prefix),
                                                   self.target.sort_key(), tuple(c.members for c in self.classes)))


# --------------------------------------------------------------------------------------------
# enumeration
# --------------------------------------------------------------------------------------------


def _join_of(owner: Owner, workload: Workload) -> tuple[frozenset[str], tuple[JoinClass, ...], tuple[Selection, ...]]:
    if isinstance(owner, MIR):
        return owner.relation_set, owner.classes, owner.selection
    q = workload.query(owner)
    return q.relation_set, q.classes, workload.selections(owner)


def owner_selection(owner: Owner, workload: Workload) -> tuple[Selection, ...]:
    """What an owner's stores keep of its filtered relations (docs/model.md §7): the query's
    selections (group unions), or the MIR's own."""
    return _join_of(owner, workload)[2]


def owner_classes(owner: Owner, workload: Workload) -> tuple[JoinClass, ...]:
    """The classes an owner's probe orders join on: the query's, or the MIR's restricted ones.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.1}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}''')
    >>> len(owner_classes("q", w))
    2
    >>> owner_classes(MIR.of(w, ["R", "S"], w.query("q").classes), w) == (w.query("q").classes[0],)
    True
    """
    return _join_of(owner, workload)[1]


class _Join:
    """An owner's join while its candidates are enumerated: its relations, classes and
    selection, with the classes restricted once per relation set (its MIRs and the steps of
    its probe orders ask for the same few sets again and again).  ``stores`` and ``steps``,
    shared by the owners of a workload, hold one MIR per relation set, classes and selection
    of a join, and one object per distinct step (equal ones of several owners are then found
    by identity in the dicts they key)."""

    def __init__(self, workload: Workload, owner: Owner, stores: dict[tuple[Any, ...], MIR], steps: dict[Step, Step]):
        self.workload = workload
        self.stores = stores
        self.steps = steps
        self.relations, self.classes, self.selection = _join_of(owner, workload)
        self._restricted: dict[frozenset[str], tuple[JoinClass, ...]] = {}
        self._reach: dict[frozenset[str], frozenset[str]] = {}

    def restricted(self, relations: frozenset[str]) -> tuple[JoinClass, ...]:
        """The join's classes restricted to ``relations`` (:func:`restrict_classes`)."""
        out = self._restricted.get(relations)
        if out is None:
            out = self._restricted[relations] = restrict_classes(self.classes, relations)
        return out

    def reach(self, relations: frozenset[str]) -> frozenset[str]:
        """The relations that share a class with ``relations`` (a set disjoint from
        ``relations`` joins them when it holds one of these)."""
        out = self._reach.get(relations)
        if out is None:
            out = self._reach[relations] = frozenset().union(*(c.relations for c in self.classes
                                                               if c.relations & relations))
        return out

    def step(self, prefix: tuple[MIR, ...], target: MIR, relations: frozenset[str]) -> Step:
        """The step of ``prefix`` into ``target`` (``relations``: theirs)."""
        step = Step(prefix, target, self.restricted(relations))
        return self.steps.setdefault(step, step)

    def store(self, relations: tuple[str, ...], classes: tuple[JoinClass, ...]) -> MIR:
        """The MIR of some of the join's ``relations`` (sorted), ``classes`` the join's restricted
        to them."""
        key = (relations, classes, self.selection)
        out = self.stores.get(key)
        if out is None:
            out = self.stores[key] = MIR.of(self.workload, relations, classes, self.selection)
        return out


def iter_mirs(join: _Join, max_size: int | None = None) -> Iterator[MIR]:
    """MIRs of a join: its connected proper subsets with the classes (and the join's
    selection) restricted to them, smallest first.  ``max_size=1`` gives only the base
    relations (MIRs disabled)."""
    rels = sorted(join.relations)
    top = len(rels) - 1 if max_size is None else min(max_size, len(rels) - 1)
    for k in range(1, top + 1):
        for subset in itertools.combinations(rels, k):
            restricted = join.restricted(frozenset(subset))
            if k == 1 or is_connected(subset, restricted):
                yield join.store(subset, restricted)


def probe_tree(join: _Join, start: str, mirs: Iterable[MIR]) -> list[tuple[ProbeOrder, tuple[Step, ...]]]:
    """Algorithm 1: probe orders of the join for ``start``, built head to tail, each with its
    steps (:func:`steps_of`).

    Each element is disjoint from the prefix and shares a class of the join with it.  The
    orders are the leaves of a prefix tree, walked depth first: a prefix's step into an element
    is built once and shared by every order that extends the prefix by it."""
    mirs = sorted(mirs, key=MIR.sort_key)
    out: list[tuple[ProbeOrder, tuple[Step, ...]]] = []

    def walk(head: frozenset[str], prefix: tuple[MIR, ...], steps: tuple[Step, ...]) -> None:
        reach = join.reach(head)
        for m in mirs:
            if m.relation_set & head or not m.relation_set & reach:
                continue
            new_head = head | m.relation_set
            path = steps + (join.step(prefix, m, new_head),)
            if new_head == join.relations:
                out.append((ProbeOrder(start, prefix[1:] + (m,)), path))
            else:
                walk(new_head, prefix + (m,), path)

    walk(frozenset([start]), (join.store((start,), ()),), ())
    return out


def steps_of(order: ProbeOrder, classes: Iterable[JoinClass], workload: Workload,
             selection: Iterable[Selection] = ()) -> tuple[Step, ...]:
    """The steps of a probe order of a join with ``classes`` (and ``selection``: the start
    relation's selection comes from it)."""
    classes = tuple(classes)
    prefix = [MIR.of(workload, [order.start], (), selection)]
    rels = {order.start}
    out = []
    for m in order.elements:
        out.append(Step(tuple(prefix), m, restrict_classes(classes, rels | m.relation_set)))
        prefix.append(m)
        rels |= m.relation_set
    return tuple(out)


def order_steps(order: ProbeOrder, classes: Iterable[JoinClass], workload: Workload,
                selection: Iterable[Selection] = ()) -> tuple[tuple[Step, Attr], ...]:
    """The steps of a partitioned probe order (:func:`steps_of`), each with the partition
    attribute of its target store."""
    return tuple(zip(steps_of(order, classes, workload, selection), order.partitions or ()))


def probe_order_cost(steps: Iterable[tuple[Step, Attr]], cost: Callable[[Step, Attr], float]) -> float:
    """A probe order's cost on its own: the sum of its steps' costs, each step costed with the
    partition of its target store (docs/model.md §4).  A step the order shares with others is
    counted in full: sharing is the plan's saving, not the order's.

    >>> probe_order_cost([("s1", "a"), ("s2", "b")], lambda step, partition: {"s1": 2.0, "s2": 3.5}[step])
    5.5
    """
    return sum(cost(s, a) for s, a in steps)


# --------------------------------------------------------------------------------------------
# all candidates of a workload
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidates:
    """Everything the optimiser chooses from (treat the mappings as read-only).

    ``orders[owner][start]``: candidate probe orders of every query and of every MIR that some
    candidate uses (its materialisation sub-query).  ``steps[owner][start][i]``: the steps of
    ``orders[owner][start][i]``.  ``partition_candidates[store]``: canonical attributes.
    ``step_cost[step]``: ``|⋈P| / |P|`` (cost with ``χ = 1``)."""

    workload: Workload
    use_mirs: bool
    orders: Mapping[Owner, Mapping[str, tuple[ProbeOrder, ...]]]
    steps: Mapping[Owner, Mapping[str, tuple[tuple[Step, ...], ...]]]
    partition_candidates: Mapping[MIR, tuple[Attr, ...]]
    step_cost: Mapping[Step, float]

    @cached_property
    def mirs(self) -> tuple[MIR, ...]:
        """Every store candidate (base relations and MIRs), smallest first."""
        seen: set[MIR] = set()
        for owner, by_start in self.orders.items():
            for start, orders in by_start.items():
                seen.add(MIR.of(self.workload, [start], (), owner_selection(owner, self.workload)))
                for o in orders:
                    seen.update(o.elements)
            if isinstance(owner, MIR):
                seen.add(owner)
        return tuple(sorted(seen, key=MIR.sort_key))

    @property
    def owners(self) -> tuple[Owner, ...]:
        return tuple(self.orders)

    def position(self, owner: Owner, order: ProbeOrder) -> int | None:
        """Where ``order`` (its partitions ignored) stands among ``owner``'s candidate orders
        from its start (``orders[owner][order.start]``; an owner's orders from a start are
        distinct), None when it is not among them."""
        plain = order.unpartitioned()
        for i, o in enumerate(self.orders.get(owner, {}).get(order.start, ())):
            if o == plain:
                return i
        return None

    def parallelism(self, store: MIR) -> int:
        """Partitions of ``store`` (:func:`mqjoin.planning.cost.store_parallelism`)."""
        return store_parallelism(self.workload, store.relations)

    def cost(self, step: Step, partition: Attr) -> float:
        """Cost of a step whose target is partitioned by ``partition``."""
        return self.step_cost[step] * broadcast_factor(partition in step.known, self.parallelism(step.target))

    def memory(self, store: MIR) -> float:
        return memory_tuples(self.workload, store.relations, store.classes, store.selection)

    def order_cost(self, owner: Owner, order: ProbeOrder) -> float:
        """Cost of a partitioned probe order on its own (no sharing)."""
        _, classes, selection = _join_of(owner, self.workload)
        return probe_order_cost(order_steps(order, classes, self.workload, selection), self.cost)

    @cached_property
    def size(self) -> dict[str, int]:
        return {
            "owners": len(self.orders),
            "probe_orders": sum(len(o) for by in self.orders.values() for o in by.values()),
            "steps": len(self.step_cost),
            "stores": len(self.partition_candidates),
        }


#: a query's join by content: its relations, classes and selections (what its candidates depend on,
#: with its relations' declarations)
JoinKey = tuple[frozenset[str], tuple[JoinClass, ...], tuple[Selection, ...]]


def _query_join(workload: Workload, query: Query) -> JoinKey:
    return query.relation_set, query.classes, workload.selections(query.name)


@dataclass(frozen=True)
class _Before:
    """What a change left of the candidates before it (:func:`enumerate_candidates` with
    ``previous``), each piece by what it depends on.

    ``joins``: each query's join before (:data:`JoinKey`) → its name there: an owner's probe
    orders and steps depend on its join and its relations' declarations (their attributes
    render its stores) alone.  ``redeclared``: the relations declared differently, or in one of
    the workloads only: owners and steps that touch one are enumerated and costed anew.
    ``recost``: every step costed anew (other defaults — the horizon —, or other measured
    sizes).  ``moved``: the relations of the queries added, removed or joined otherwise: a
    store's partition candidates depend on the store and the queries that hold its first
    relation."""

    cands: Candidates
    joins: Mapping[JoinKey, str]
    redeclared: frozenset[str]
    recost: bool
    moved: frozenset[str]

    @staticmethod
    def of(previous: Candidates | None, workload: Workload, mirs: bool) -> "_Before | None":
        """What of ``previous`` an enumeration of ``workload`` may take (None: nothing — no
        candidates before, or other MIRs or query groups)."""
        if previous is None or previous.use_mirs != mirs or previous.workload.groups != workload.groups:
            return None
        old = previous.workload
        declared = {r.name: r for r in old.relations}
        redeclared = {r.name for r in workload.relations if declared.pop(r.name, None) != r} | set(declared)
        joins = {q.name: _query_join(old, q) for q in old.queries}
        moved: set[str] = set()
        for q in workload.queries:
            join = joins.get(q.name)
            if join != (now := _query_join(workload, q)):
                moved |= now[0] | (join[0] if join is not None else frozenset())
        names = set(workload.query_names)
        for q in old.queries:
            if q.name not in names:
                moved |= q.relation_set
        return _Before(previous, {j: n for n, j in joins.items()}, frozenset(redeclared),
                       old.defaults != workload.defaults or not old.same_sizes(workload), frozenset(moved))

    def owner(self, owner: Owner, join: "_Join") -> tuple[Mapping[str, tuple[ProbeOrder, ...]],
                                                         Mapping[str, tuple[tuple[Step, ...], ...]]] | None:
        """The probe orders and steps of ``owner`` (its ``join``) before, where its join was
        there and none of its relations is declared differently."""
        if join.relations & self.redeclared:
            return None
        before = self.joins.get((join.relations, join.classes, join.selection)) if isinstance(owner, str) \
            else owner
        if before is None or before not in self.cands.orders:
            return None
        return self.cands.orders[before], self.cands.steps[before]

    def step_cost(self, step: Step) -> float | None:
        """The cost of ``step`` before, where nothing it depends on changed."""
        if self.recost or (self.redeclared and (step.prefix_relations | step.target.relation_set) & self.redeclared):
            return None
        return self.cands.step_cost.get(step)

    def partition_candidates(self, store: MIR) -> tuple[Attr, ...] | None:
        """The partition candidates of ``store`` before, where no query holding its first relation changed."""
        return None if store.relations[0] in self.moved else self.cands.partition_candidates.get(store)


def enumerate_candidates(workload: Workload, mirs: bool = True, previous: Candidates | None = None) -> Candidates:
    """Enumerate MIRs, probe orders (for queries and, recursively, the MIRs they use),
    partition candidates and step costs of a workload.

    ``previous``: the candidates of the workload before a change (a re-plan), whose pieces the
    change leaves as they were are taken from there (:class:`_Before`): the candidates are
    equal to those from scratch, owner order included, only sooner."""
    before = _Before.of(previous, workload, mirs)
    max_size = None if mirs else 1
    orders: dict[Owner, Mapping[str, tuple[ProbeOrder, ...]]] = {}
    steps: dict[Owner, Mapping[str, tuple[tuple[Step, ...], ...]]] = {}
    pending: collections.deque[Owner] = collections.deque(q.name for q in workload.queries)
    stores: dict[tuple[Any, ...], MIR] = {}
    distinct: dict[Step, Step] = {}
    while pending:
        owner = pending.popleft()
        if owner in orders:
            continue
        join = _Join(workload, owner, stores, distinct)
        kept = None if before is None else before.owner(owner, join)
        if kept is None:
            kept = _owner_candidates(join, max_size)
        orders[owner], steps[owner] = kept
        for os_ in kept[0].values():
            for o in os_:
                for m in o.elements:
                    if not m.is_base and m not in orders:
                        pending.append(m)

    step_cost: dict[Step, float] = {}
    targets: set[MIR] = set()
    holding: dict[str, list[Query]] = {}  # the queries of a relation
    for q in workload.queries:
        for r in q.relation_set:
            holding.setdefault(r, []).append(q)
    for steps_by_start in steps.values():
        for seqs in steps_by_start.values():
            for seq in seqs:
                for s in seq:
                    if s not in step_cost:
                        cost = None if before is None else before.step_cost(s)
                        step_cost[s] = unit_step_cost(workload, s) if cost is None else cost
                        targets.add(s.target)

    def store_partitions(m: MIR) -> tuple[Attr, ...]:
        kept = None if before is None else before.partition_candidates(m)
        return partition_candidates(workload, m, holding[m.relations[0]]) if kept is None else kept

    return Candidates(
        workload=workload,
        use_mirs=mirs,
        orders=orders,
        steps=steps,
        partition_candidates={m: store_partitions(m) for m in sorted(targets, key=MIR.sort_key)},
        step_cost=step_cost,
    )


def _owner_candidates(join: _Join, max_size: int | None) -> tuple[dict[str, tuple[ProbeOrder, ...]],
                                                                  dict[str, tuple[tuple[Step, ...], ...]]]:
    """The probe orders of an owner's ``join`` per start relation, and their steps."""
    owner_mirs = list(iter_mirs(join, max_size))
    by_start: dict[str, tuple[ProbeOrder, ...]] = {}
    st_by_start: dict[str, tuple[tuple[Step, ...], ...]] = {}
    for start in sorted(join.relations):
        pairs = probe_tree(join, start, owner_mirs)
        by_start[start] = tuple(o for o, _ in pairs)
        st_by_start[start] = tuple(st for _, st in pairs)
    return by_start, st_by_start


def partition_candidates(workload: Workload, store: MIR, queries: Iterable[Query] | None = None) -> tuple[Attr, ...]:
    """Attributes ``X.a`` of the store whose class, in some query containing the store as an
    MIR, has a member outside the store (canonical representatives, sorted).  ``queries``: the
    queries to look in (all of the workload's by default; those holding one of the store's
    relations are enough)."""
    out: set[Attr] = set()
    for q in workload.queries if queries is None else queries:
        if not _contains_as_mir(q, store, workload):
            continue
        for c in q.classes:
            inside = [a for a in c.members if a.relation in store.relation_set]
            if inside and len(inside) < len(c.members):
                out.update(store.canonical(a) for a in inside)
    return tuple(sorted(out))


def _contains_as_mir(q: Query, store: MIR, workload: Workload) -> bool:
    return (store.relation_set < q.relation_set
            and restrict_classes(q.classes, store.relations) == store.classes
            and tuple(s for s in workload.selections(q.name) if s.relation in store.relation_set) == store.selection)


def partitioned_orders(cands: Candidates, owner: Owner, start: str) -> Iterator[ProbeOrder]:
    """Every partitioning of every candidate order of ``(owner, start)`` (the paper's σ's)."""
    for o in cands.orders[owner][start]:
        for parts in itertools.product(*(cands.partition_candidates[m] for m in o.elements)):
            yield ProbeOrder(o.start, o.elements, tuple(parts))
