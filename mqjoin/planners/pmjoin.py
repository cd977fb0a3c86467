"""PMJoin (Zhou et al.): distributed multi-way stream joins placed by a rate-based model,
and value-partitioned plans where each group of join values gets its own placement.

Streams arrive at processing **nodes** (``relations: {S1: {node: n1, …}}``; a relation
without a node is its own node, named after it).  The goal is the least **communication
cost**: bytes per second shipped between nodes.

**Rate-based model** (Section 3.2).  A stream ``S_i`` has rate ``λ_i`` and ``W_i = λ_i · T_i``
tuples in its window (``T_i``: the relation's window, ``defaults.horizon`` when unbounded).
Joining two streams with selectivity ``f`` gives (Equations 2 and 3)::

    λ_ij = f · (λ_i · W_j + λ_j · W_i)        W_ij = f · W_i · W_j

Applied recursively, a set ``P`` of relations has ``W_P = F(P) · Π W_i`` and
``λ_P = F(P) · Σ_i λ_i · Π_{j≠i} W_j`` with ``F(P) = Π_c s_c^(k_c(P)−1)`` (docs/model.md §2's
factor): independent of how the join is done, as the paper notes.  With **per-value
rates** ``λ_i^v`` of a class (from data, :func:`value_rates`), that class is not a factor
``s_c`` but summed exactly over its values: ``λ_P = F'(P) · Σ_v Σ_i λ_i(v) · Π_{j≠i} W_j(v)``
(relations outside the class do not depend on ``v``).  This is how Table 1's
``λ_{1,2} = 9.003`` arises from the per-value rates of Example 1.

**Tuple sizes.**  A result tuple is as large as its inputs together (Example 1:
``sizes="sum"``, the default: a stream of ``k`` relations costs ``k`` bytes per tuple) or every
tuple has the same size (Example 2's simplification: ``sizes="unit"``).  Algorithm 1 uses the
same sizes ("we can always incorporate the tuple sizes … without changing the algorithm").

**Schemes** (Example 1): *centralized* — ship every stream to the one node where that is
cheapest; *distributed* — :func:`stream_join_opt` (the paper's Algorithm 1, STREAMJOINOPT);
*partition-based* — split the streams into ``D`` groups of join values and run Algorithm 1
on every group's substreams (:func:`partition_values`: hash, range or the paper's rate-based
partitioning by rank vectors).

**Which PMJoins** (multi-attribute queries): FINDPARTITION (Algorithm 2) marks operators
whose joins are all on one class, merging children partitionable on the same class; the
heuristic then keeps the ones with the largest input rates, under the two constraints (no
PMJoin is the right child of an operator, no PMJoin is the child of another PMJoin).

**In our plan vocabulary.**  Algorithm 1's output is an operator tree of MJoins; as for the
``mjoin``/``tree`` planners (:mod:`mqjoin.planners.trees`) it becomes an ordinary
:class:`~mqjoin.planning.plan.Plan` (every inner MJoin's output an MIR store, probing sequences inside
each MJoin), so ``--planner pmjoin`` optimises, runs and compares on every engine.  That plan
is the *unpartitioned* placement: our engines route by a store's partition attribute, not by
value group, so a deployed plan cannot switch shape per value.  The per-group plans are
reported beside it (:class:`PMJoinReport`); each is itself an ordinary plan (the query's tree
with the PMJoin replaced by the group's tree, :func:`group_plan`) that runs on that group's
substreams: :func:`group_results` runs every group's plan on its substreams and unites the
results, which equal the oracle's (the groups split the values of one class, so they split
the results).  The probe cost of these plans is CLASH's (docs/model.md §4); the communication cost
is this module's.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload(EXAMPLE_1)
>>> r = pmjoin_report(w, groups=3, method="range", rates=EXAMPLE_1_VALUE_RATES)
>>> qp = r.queries[0]
>>> qp.tree
((S3 ⋈ S2)@n2 ⋈ S1)@n1
>>> round(qp.centralized, 4), round(qp.distributed, 4), round(qp.partitioned, 4)
(100.1, 54.0316, 0.0696)
>>> for g in qp.pmjoins[0].groups:
...     print(g.values, g.tree, round(g.cost, 4))
('a',) ((S2 ⋈ S1)@n1 ⋈ S3)@n3 0.036
('b',) ((S3 ⋈ S1)@n1 ⋈ S2)@n2 0.012
('c',) ((S3 ⋈ S2)@n2 ⋈ S1)@n1 0.0216
"""

from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping

from mqjoin.planning.cost import is_close, window_of
from mqjoin.model.errors import PlannerError
from mqjoin.planning.plan import Plan
from mqjoin.planners.trees import JoinTree, plan_trees
from mqjoin.model.tables import Table
from mqjoin.model.workload import Attr, JoinClass, Query, Workload

SIZES = ("sum", "unit")
METHODS = ("hash", "range", "rate")

#: per-value arrival rates ``λ_i^v`` of attributes: attribute → value → tuples per second
ValueRates = Mapping[Attr, Mapping[Any, float]]

EXAMPLE_1 = """
defaults: {window: 0.5}
relations:
  S1: {attributes: [dest], rate: 100.2, node: n1}
  S2: {attributes: [dest], rate: 50.07, node: n2}
  S3: {attributes: [dest], rate: 50.03, node: n3}
queries: {q: "S1(dest), S2(dest), S3(dest)"}
selectivities: {S1.dest = S2.dest: 0.0018}
"""
"""The paper's Example 1: three routers, one query on ``dest``, windows of 0.5 s.  docs/model.md §1
needs one selectivity per class: 0.0018 is Table 1's ``f_{1,2}`` (9.003 / 5017), used only
without per-value rates (:data:`EXAMPLE_1_VALUE_RATES` sum the join exactly per value)."""

EXAMPLE_1_VALUE_RATES: ValueRates = {
    Attr("S1", "dest"): {"a": 0.1, "b": 0.1, "c": 100.0},
    Attr("S2", "dest"): {"a": 0.03, "b": 50.0, "c": 0.04},
    Attr("S3", "dest"): {"a": 50.0, "b": 0.01, "c": 0.02},
}
"""Table 1's per-value rates ``λ_i^a, λ_i^b, λ_i^c``."""


def node_of(workload: Workload, relation: str) -> str:
    """The node a relation's stream arrives at (a relation without one is its own node).

    >>> from mqjoin.model.workload import parse_workload
    >>> node_of(parse_workload(EXAMPLE_1), "S2")
    'n2'
    """
    return workload.relation(relation).node or relation


# --------------------------------------------------------------------------------------------
# the rate-based model
# --------------------------------------------------------------------------------------------


def _sort_key(v: Any) -> tuple[str, Any]:
    return (type(v).__name__, v)


def _check_sizes(sizes: str) -> None:
    if sizes not in SIZES:
        raise PlannerError(f"unknown tuple sizes {sizes!r} (choose one of {', '.join(SIZES)})")


@dataclass(frozen=True)
class StreamModel:
    """Rates and window sizes of joined streams of one query (Equations 2 and 3, applied to
    a set of relations at once).  ``rates``/``cls``: per-value rates of the class ``cls``,
    summed exactly instead of its selectivity (a member's rate is then the sum of its per-value
    rates); ``group``: only the substreams whose ``cls`` value lies in ``group``.

    Example 2 (Table 2): ``λ_{S0⋈S1} = 70``, ``λ_{S2⋈S3} = 15``, ``W_{S2⋈S3} = 75``.

    >>> from mqjoin.model.workload import parse_workload
    >>> m = StreamModel(parse_workload(EXAMPLE_2), "q", sizes="unit")
    >>> m.rate({"S0", "S1"}), m.rate({"S2", "S3"}), m.window({"S2", "S3"}), m.rate({"S0", "S2", "S3"})
    (70.0, 15.0, 75.0, 9.0)
    """

    workload: Workload
    query: str
    rates: ValueRates | None = None
    cls: JoinClass | None = None
    group: frozenset | None = None
    sizes: str = "sum"

    def __post_init__(self) -> None:
        _check_sizes(self.sizes)
        if self.cls is not None:
            missing = [str(a) for a in self.cls.members if a not in (self.rates or {})]
            if missing:
                raise PlannerError(f"query {self.query}: no per-value rates of {', '.join(missing)} "
                                   f"(the class {self.cls} is partitioned by value); estimate them from data")
        elif self.group is not None:
            raise PlannerError("a value group needs the class whose values it holds")

    @property
    def q(self) -> Query:
        return self.workload.query(self.query)

    def _span(self, relation: str) -> float:
        return window_of(self.workload, [relation])

    @cached_property
    def _values(self) -> list[Any]:
        vals = {v for a in self.cls.members for v in self.rates[a]} if self.cls else set()
        if self.group is not None:
            vals &= set(self.group)
        return sorted(vals, key=_sort_key)

    def _lambda(self, relation: str, value: Any = None) -> float:
        """``λ_i`` — for a member of ``cls`` the sum of its per-value rates (over the group) —
        or ``λ_i^v`` for one value."""
        attr = self.cls.member_of(relation) if self.cls else None
        if attr is None:
            return self.workload.rate(relation)
        per = self.rates[attr]
        if value is not None:
            return per.get(value, 0.0)
        return sum(per.get(v, 0.0) for v in self._values)

    def _both(self, relations: Iterable[str]) -> tuple[float, float]:
        rels = sorted(set(relations))
        per_value = self.cls is not None and self.cls.count_in(rels) >= 2
        factor = 1.0
        for c in self.q.classes:
            k = c.count_in(rels)
            if k >= 2 and not (per_value and c == self.cls):
                factor *= c.selectivity ** (k - 1)

        def terms(value: Any) -> tuple[float, float]:
            lam = {r: self._lambda(r, value) for r in rels}
            win = {r: lam[r] * self._span(r) for r in rels}
            rate = sum(lam[i] * math.prod(win[j] for j in rels if j != i) for i in rels)
            return rate, math.prod(win.values())

        if not per_value:
            rate, win = terms(None)
        else:
            both = [terms(v) for v in self._values]
            rate, win = sum(b[0] for b in both), sum(b[1] for b in both)
        return factor * rate, factor * win

    def rate(self, relations: Iterable[str]) -> float:
        """``λ_P``: tuples per second of the join of ``relations`` (one relation: its rate)."""
        return self._both(relations)[0]

    def window(self, relations: Iterable[str]) -> float:
        """``W_P``: expected tuples in the window of the join of ``relations``."""
        return self._both(relations)[1]

    def size(self, relations: Iterable[str]) -> int:
        """Bytes of one tuple of the join of ``relations`` (``sum``: one per relation)."""
        return len(set(relations)) if self.sizes == "sum" else 1

    def load(self, relations: Iterable[str]) -> float:
        """Bytes per second of the stream ``relations``: ``λ_P · size``."""
        rels = tuple(relations)
        return self.rate(rels) * self.size(rels)

    def joinable(self, a: Iterable[str], b: Iterable[str]) -> bool:
        """Whether some class of the query links ``a`` and ``b`` (an edge of the join graph)."""
        a, b = set(a), set(b)
        return any(c.relations & a and c.relations & b for c in self.q.classes)


EXAMPLE_2 = """
defaults: {window: 10}
relations:
  S0: {attributes: [a, b, d], rate: 10, node: n0}
  S1: {attributes: [a], rate: 35, node: n0}
  S2: {attributes: [b, c], rate: 25, node: n1}
  S3: {attributes: [c], rate: 30, node: n1}
  S4: {attributes: [d], rate: 15, node: n2}
queries: {q: "S0(a,b,d), S1(a), S2(b,c), S3(c), S4(d)"}
selectivities: {S0.a = S1.a: 0.01, S0.b = S2.b: 0.004, S2.c = S3.c: 0.001, S0.d = S4.d: 0.01}
"""
"""The paper's Example 2 (Figure 2(a), Table 2).  The figure is not in our copy of the paper;
the join graph and nodes are reconstructed from the text: ``S0, S1`` at ``n0`` and ``S2, S3``
at ``n1`` (the two locally evaluable joins), ``S4`` at ``n2``; the edges ``S0–S1`` (f = 0.01
gives 70), ``S2–S3`` (0.001 gives 15 and ``W = 75``), ``S0–S2`` (0.004 gives ``S_{0,2,3}``'s
9 and 30) and ``S0–S4`` (``S_{0,2,3}`` is joinable with ``S1`` and ``S4``)."""


# --------------------------------------------------------------------------------------------
# operator trees placed at nodes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operator:
    """A stream at a node: a source stream (a leaf) or an MJoin operator placed at ``node``
    over two or more input streams; the last input (the *right* one) is at the operator's
    node, the others are shipped there.

    >>> Operator.source("S1", "n1")
    S1
    >>> Operator.mjoin([Operator.source("S2", "n2"), Operator.source("S1", "n1")], "n1")
    (S2 ⋈ S1)@n1
    """

    relations: tuple[str, ...]
    node: str
    children: tuple["Operator", ...] = ()

    @staticmethod
    def source(relation: str, node: str) -> "Operator":
        return Operator((relation,), node)

    @staticmethod
    def mjoin(children: Iterable["Operator"], node: str) -> "Operator":
        kids = tuple(children)
        return Operator(tuple(sorted(r for k in kids for r in k.relations)), node, kids)

    @property
    def is_source(self) -> bool:
        return not self.children

    def operators(self) -> Iterable["Operator"]:
        """Every MJoin operator, children before parents."""
        for k in self.children:
            yield from k.operators()
        if self.children:
            yield self

    def join_tree(self) -> JoinTree:
        """The operator tree in :mod:`mqjoin.planners.trees`' vocabulary (placement dropped)."""
        if self.is_source:
            return JoinTree.leaf(self.relations[0])
        return JoinTree.join(k.join_tree() for k in self.children)

    def render(self) -> str:
        if self.is_source:
            return self.relations[0]
        return "(" + " ⋈ ".join(k.render() for k in self.children) + f")@{self.node}"

    __str__ = render

    def __repr__(self) -> str:
        return self.render()


def communication_cost(model: StreamModel, tree: Operator, given: Iterable[Operator] = ()) -> float:
    """Bytes per second the tree ships: every input of an operator at another node sends its
    stream there (``λ · size``); the final results stay where they are produced.  ``given``:
    input streams whose own operators are not counted (a PMJoin group's inputs).

    Example 1's distributed plan: ``λ_3 + λ_{2,3} · 2 ≈ 54.03``.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_1)
    >>> m = StreamModel(w, "q", EXAMPLE_1_VALUE_RATES, w.query("q").classes[0])
    >>> s = {r: Operator.source(r, node_of(w, r)) for r in ("S1", "S2", "S3")}
    >>> round(communication_cost(m, Operator.mjoin([Operator.mjoin([s["S3"], s["S2"]], "n2"), s["S1"]], "n1")), 4)
    54.0316
    """
    stop = {x.relations for x in given}

    def cost(op: Operator) -> float:
        if op.is_source or op.relations in stop:
            return 0.0
        return sum((model.load(k.relations) if k.node != op.node else 0.0) + cost(k) for k in op.children)

    return cost(tree)


def centralized_cost(model: StreamModel, inputs: Iterable[Operator]) -> tuple[float, str]:
    """The centralized scheme: ship every input to one node, the cheapest (ties: first name).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_1)
    >>> m = StreamModel(w, "q")
    >>> cost, node = centralized_cost(m, [Operator.source(r, node_of(w, r)) for r in ("S1", "S2", "S3")])
    >>> round(cost, 4), node
    (100.1, 'n1')
    """
    inputs = tuple(inputs)
    costs = {n: sum(model.load(x.relations) for x in inputs if x.node != n) for n in sorted({x.node for x in inputs})}
    best = min(costs.values())
    return best, min(n for n, c in costs.items() if is_close(c, best))


# --------------------------------------------------------------------------------------------
# Algorithm 1: STREAMJOINOPT
# --------------------------------------------------------------------------------------------


def stream_join_opt(model: StreamModel, inputs: Iterable[Operator] | None = None) -> Operator:
    """The paper's Algorithm 1 over ``inputs`` (default: the query's source streams at their
    nodes).  Lines 2–9: at every node, join co-located joinable streams (slowest first) when
    the result is slower than the slower input.  Lines 10–28: repeatedly take the slowest
    stream ``Σ_p`` and the joinable stream ``S_j`` with the least Equation-4 cost
    ``C = min(Σ_p to a third site with S_j, Σ_p to S_j's node + shipping the result on)``;
    case 1 places the pending joins at ``S_j``'s node, case 2 keeps them pending.  Our
    reading: the result of the join that completes the inputs is not shipped on (the final
    results stay at their node, as in Example 1's costs), so its second term is 0.  Ties: the
    stream first in (rate, declaration) order; case 1 on equal costs.

    Example 2 (Figure 3): ``S2 ⋈ S3`` is local at ``n1``; ``S0`` is shipped to ``n1``; then
    ``S_{0,2,3}`` and ``S4`` are pending and go to ``S1``'s node ``n0``.

    >>> from mqjoin.model.workload import parse_workload
    >>> stream_join_opt(StreamModel(parse_workload(EXAMPLE_2), "q", sizes="unit"))
    ((S0 ⋈ (S2 ⋈ S3)@n1)@n1 ⋈ S4 ⋈ S1)@n0
    """
    w, q = model.workload, model.q
    rank = w.relation_rank
    streams = list(inputs) if inputs is not None else [Operator.source(r, node_of(w, r)) for r in q.relations]
    if len(streams) < 2:
        raise PlannerError(f"query {model.query}: STREAMJOINOPT needs two or more streams to join")

    def order(s: Operator) -> tuple[float, int]:
        return (model.rate(s.relations), min(rank[r] for r in s.relations))

    # lines 2-9: locally evaluable joins that shrink the stream
    placed: list[Operator] = []
    for node in sorted({s.node for s in streams}):
        local = sorted((s for s in streams if s.node == node), key=order)
        j = 0
        while j < len(local):
            k = j + 1
            while k < len(local):
                a, b = local[j], local[k]
                if model.joinable(a.relations, b.relations) and \
                        model.rate(a.relations + b.relations) < model.rate(a.relations):
                    local[j] = Operator.mjoin([a, b], node)
                    del local[k]
                else:
                    k += 1
            j += 1
        placed.extend(local)

    # lines 10-28: place the remaining joins, slowest stream first
    sigma = sorted(placed, key=order)
    everything = frozenset(r for s in streams for r in s.relations)
    while len(sigma) > 1:
        pending = [sigma.pop(0)]
        while True:
            shipped = sum(model.load(p.relations) for p in pending)
            best: tuple[float, bool, Operator] | None = None
            for s in sigma:
                if not any(model.joinable(p.relations, s.relations) for p in pending):
                    continue
                joined = frozenset(s.relations).union(*(p.relations for p in pending))
                onward = 0.0 if joined == everything else model.load(joined)
                case1 = sum(model.load(p.relations) for p in pending if p.node != s.node) + onward
                case2 = shipped + model.load(s.relations)
                cost = min(case1, case2)
                if best is None or (cost < best[0] and not is_close(cost, best[0])):
                    best = (cost, case1 <= case2 or is_close(case1, case2), s)
            if best is None:
                raise PlannerError(f"query {model.query}: no stream joins {', '.join(map(str, pending))}")
            _, placed_here, s = best
            sigma.remove(s)
            if placed_here:
                sigma.append(Operator.mjoin(pending + [s], s.node))
                sigma.sort(key=order)
                break
            pending.append(s)
    return sigma[0]


def optimal_plan(model: StreamModel, inputs: Iterable[Operator] | None = None) -> Operator:
    """The cheapest placement by exhaustive search (the paper's *Optimal* baseline): dynamic
    programming over the connected sets of inputs and the node each set's join runs at, one
    binary join at a time (an MJoin of ``k`` inputs at a node ships what ``k − 1`` binary
    joins there ship, so binary trees cover every MJoin tree).  A join runs at a node of one
    of the inputs (a third node would only ship more).  Exponential in the number of inputs.
    Ties: the first split found, then the node name.

    Example 1's distributed optimum is the paper's 54.03 — STREAMJOINOPT finds it:

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_1)
    >>> m = StreamModel(w, "q", EXAMPLE_1_VALUE_RATES, w.query("q").classes[0])
    >>> best = optimal_plan(m)
    >>> best, round(communication_cost(m, best), 4), round(communication_cost(m, stream_join_opt(m)), 4)
    (((S3 ⋈ S2)@n2 ⋈ S1)@n1, 54.0316, 54.0316)
    """
    atoms = list(inputs) if inputs is not None else \
        [Operator.source(r, node_of(model.workload, r)) for r in model.q.relations]
    nodes = sorted({a.node for a in atoms})
    rels = [frozenset(a.relations) for a in atoms]
    best: dict[frozenset[int], dict[str, tuple[float, Operator]]] = {
        frozenset([i]): {a.node: (0.0, a)} for i, a in enumerate(atoms)}

    def load(part: frozenset[int]) -> float:
        return model.load(sorted(r for i in part for r in rels[i]))

    for size in range(2, len(atoms) + 1):
        for combo in itertools.combinations(range(len(atoms)), size):
            whole = frozenset(combo)
            found: dict[str, tuple[float, Operator]] = {}
            first, rest = combo[0], combo[1:]
            for k in range(len(rest)):
                for more in itertools.combinations(rest, k):
                    a = frozenset((first,) + more)
                    b = whole - a
                    if a not in best or b not in best or \
                            not model.joinable(set().union(*(rels[i] for i in a)), set().union(*(rels[i] for i in b))):
                        continue
                    la, lb = load(a), load(b)
                    for na, (ca, ta) in best[a].items():
                        for nb, (cb, tb) in best[b].items():
                            for n in nodes:
                                cost = ca + cb + (la if na != n else 0.0) + (lb if nb != n else 0.0)
                                if n not in found or (cost < found[n][0] and not is_close(cost, found[n][0])):
                                    kids = [ta, tb] if nb == n else [tb, ta]  # the input at n is the right one
                                    found[n] = (cost, Operator.mjoin(kids, n))
            if found:
                best[whole] = found
    everything = frozenset(range(len(atoms)))
    if everything not in best:
        raise PlannerError(f"query {model.query}: the inputs {', '.join(map(str, atoms))} are not connected")
    cost = min(c for c, _ in best[everything].values())
    return next(t for n, (c, t) in sorted(best[everything].items()) if is_close(c, cost))


# --------------------------------------------------------------------------------------------
# value partitioning
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueGroups:
    """``D`` groups of the values of one class (PMJoin's substream groups).  ``groups`` holds
    the values seen in the per-value rates; :meth:`group_of` also places unseen values (hash:
    their hash; range: the group of the largest seen value below them; rate: the first group).

    >>> g = partition_values(EXAMPLE_1_VALUE_RATES, 2, "range")
    >>> g.groups, g.group_of("b"), g.group_of("zz")
    ((('a', 'b'), ('c',)), 0, 1)
    """

    method: str
    count: int
    groups: tuple[tuple[Any, ...], ...]

    def group_of(self, value: Any) -> int:
        for i, g in enumerate(self.groups):
            if value in g:
                return i
        if self.method == "hash":
            return _hash(value, self.count)
        if self.method == "range":
            numeric = all(_is_number(v) for v in (value, *(g[0] for g in self.groups)))
            key = (lambda v: v) if numeric else _sort_key
            return max([i for i, g in enumerate(self.groups) if key(g[0]) <= key(value)], default=0)
        return 0


def plain_value(v: Any) -> Any:
    """A join value as JSON can hold it (numbers, strings and booleans as they are, others as text).

    >>> import datetime
    >>> plain_value(3), plain_value("a"), plain_value(datetime.date(2026, 1, 2))
    (3, 'a', '2026-01-02')
    """
    return v if isinstance(v, (int, float, str, bool)) else str(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _hash(value: Any, count: int) -> int:
    """A stable hash bucket (Python's ``hash`` of strings changes between runs)."""
    return zlib.crc32(repr(value).encode()) % count


def rank_vector(rates: ValueRates, attrs: Iterable[Attr], value: Any) -> tuple[int, ...]:
    """The paper's ``V_k`` of one value: the position (1-based) of each stream's FStream in the
    FStreams sorted by increasing rate (ties: the order of ``attrs``).

    Sorted list ``⟨FS_3, FS_1, FS_2⟩`` gives ``V = ⟨2, 3, 1⟩``:

    >>> a = [Attr("S1", "x"), Attr("S2", "x"), Attr("S3", "x")]
    >>> rank_vector({a[0]: {7: 2.0}, a[1]: {7: 3.0}, a[2]: {7: 1.0}}, a, 7)
    (2, 3, 1)
    """
    attrs = list(attrs)
    by_rate = sorted(range(len(attrs)), key=lambda i: (rates[attrs[i]].get(value, 0.0), i))
    pos = {i: p + 1 for p, i in enumerate(by_rate)}
    return tuple(pos[i] for i in range(len(attrs)))


def _kmeans(points: Mapping[Any, tuple[int, ...]], weight: Mapping[Any, float], k: int) -> list[list[Any]]:
    """Lloyd's k-means over the values' rank vectors, deterministic: the first centre is the
    vector carrying the most tuples, each next one the distinct vector farthest from the
    centres so far (ties: more tuples, then value order)."""
    vectors: dict[tuple[int, ...], float] = {}
    for v, p in points.items():
        vectors[p] = vectors.get(p, 0.0) + weight[v]
    distinct = sorted(vectors, key=lambda p: (-vectors[p], p))
    centres = [tuple(float(x) for x in distinct[0])]

    def dist(p: tuple[float, ...], c: tuple[float, ...]) -> float:
        return math.dist(p, c)

    while len(centres) < min(k, len(distinct)):
        far = max(distinct, key=lambda p: (min(dist(p, c) for c in centres), vectors[p], tuple(-x for x in p)))
        centres.append(tuple(float(x) for x in far))
    values = sorted(points, key=_sort_key)
    assign: dict[Any, int] = {}
    for _ in range(100):
        new = {v: min(range(len(centres)), key=lambda i: (dist(points[v], centres[i]), i)) for v in values}
        if new == assign:
            break
        assign = new
        for i in range(len(centres)):
            members = [points[v] for v in values if assign[v] == i]
            if members:
                centres[i] = tuple(sum(x) / len(members) for x in zip(*members))
    clusters = [[v for v in values if assign[v] == i] for i in range(len(centres))]
    return [c for c in clusters if c]


def _check_partitioning(count: int, method: str) -> None:
    if method not in METHODS:
        raise PlannerError(f"unknown value partitioning {method!r} (choose one of {', '.join(METHODS)})")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PlannerError(f"the number of value groups must be a positive integer, got {count!r}")


def partition_values(rates: ValueRates, count: int, method: str = "rate",
                     attrs: Iterable[Attr] | None = None) -> ValueGroups:
    """Cluster the values of a class (its FStreams) into at most ``count`` groups:

    * ``hash`` — a stable hash of the value, modulo ``count`` (random partitioning);
    * ``range`` — ``count`` equal sub-ranges of the numeric value range (values that are not
      all numbers: equal runs of the sorted values);
    * ``rate`` — k-means over the values' rank vectors (:func:`rank_vector`): values whose
      streams rank alike are expected to have alike optimal plans.  Fewer distinct vectors
      than ``count`` give fewer groups (the paper's zero distances).

    Empty groups are dropped; groups are listed in order of their first value.

    >>> partition_values(EXAMPLE_1_VALUE_RATES, 2, "rate").groups
    (('a',), ('b', 'c'))
    >>> partition_values(EXAMPLE_1_VALUE_RATES, 3, "hash").groups
    (('a',), ('b', 'c'))
    """
    _check_partitioning(count, method)
    attrs = tuple(attrs) if attrs is not None else tuple(sorted(rates))
    values = sorted({v for a in attrs for v in rates[a]}, key=_sort_key)
    if not values:
        raise PlannerError(f"no values of {', '.join(map(str, attrs))} to partition: the per-value rates are empty")
    if method == "hash":
        buckets = [[v for v in values if _hash(v, count) == i] for i in range(count)]
    elif method == "range":
        if all(_is_number(v) for v in values):
            lo, hi = values[0], values[-1]
            width = (hi - lo) / count or 1.0
            buckets = [[v for v in values if min(int((v - lo) / width), count - 1) == i] for i in range(count)]
        else:
            buckets = [[v for j, v in enumerate(values) if j * count // len(values) == i] for i in range(count)]
    else:
        weight = {v: sum(rates[a].get(v, 0.0) for a in attrs) for v in values}
        buckets = _kmeans({v: rank_vector(rates, attrs, v) for v in values}, weight, count)
    groups = sorted((tuple(b) for b in buckets if b), key=lambda g: _sort_key(g[0]))
    return ValueGroups(method, count, tuple(groups))


def value_rates(workload: Workload, tables: Mapping[str, Table],
                attrs: Iterable[Attr] | None = None) -> dict[Attr, dict[Any, float]]:
    """Per-value rates from data: ``λ_i^v = λ_i · n_v / n`` with ``λ_i`` estimated as
    ``mqjoin stats`` does (``(n − 1) / span``; the declared rate when the tuples span no time).
    ``attrs``: default every attribute of a join class; nulls join nothing and are left out.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_1)
    >>> t = Table.from_columns("S1", {"ts": [0, 1, 2, 3, 4], "dest": ["a", "c", "c", "c", None]})
    >>> value_rates(w, {"S1": t}, [Attr("S1", "dest")])
    {S1.dest: {'a': 0.2, 'c': 0.6}}
    """
    from mqjoin.datasets.stats import RateEstimate

    if attrs is None:
        attrs = sorted({a for q in workload.queries for c in q.classes for a in c.members})
    out: dict[Attr, dict[Any, float]] = {}
    for a in attrs:
        t = tables[a.relation]
        est = RateEstimate(a.relation, len(t), min(t.ts, default=0.0), max(t.ts, default=0.0)).rate
        rate = workload.rate(a.relation) if est is None else est
        counts: dict[Any, int] = {}
        for v in t.columns[a.name]:
            if v is not None:
                counts[v] = counts.get(v, 0) + 1
        out[a] = {v: rate * n / len(t) for v, n in sorted(counts.items(), key=lambda kv: _sort_key(kv[0]))}
    return out


def render_value_rates(rates: ValueRates, top: int = 5) -> str:
    """Per-value rates as text: per attribute, its number of values and the fastest ``top``.

    >>> print(render_value_rates(EXAMPLE_1_VALUE_RATES, top=2))
    rates per value (tuples/s):
      S1.dest: 3 values, total 100.2; c 100, a 0.1, …
      S2.dest: 3 values, total 50.07; b 50, c 0.04, …
      S3.dest: 3 values, total 50.03; a 50, c 0.02, …
    """
    lines = ["rates per value (tuples/s):"]
    for a in sorted(rates):
        per = rates[a]
        fastest = sorted(per.items(), key=lambda kv: (-kv[1], _sort_key(kv[0])))[:top]
        shown = ", ".join(f"{v} {r:.6g}" for v, r in fastest) + (", …" if len(per) > top else "")
        lines.append(f"  {a}: {len(per)} values, total {sum(per.values()):.6g}; {shown}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Algorithm 2 and the choice of PMJoins
# --------------------------------------------------------------------------------------------


def partition_class(q: Query, op: Operator) -> JoinClass | None:
    """The class an MJoin operator is *partitionable* on: its joins (the classes linking two of
    its inputs) are all on it; ``None`` otherwise."""
    linking = [c for c in q.classes if sum(1 for k in op.children if c.relations & set(k.relations)) >= 2]
    return linking[0] if len(linking) == 1 else None


@dataclass(frozen=True)
class GroupPlan:
    """One value group of a PMJoin: its values, the STREAMJOINOPT tree of its substreams and
    the bytes per second it ships (the joins of its tree, not those inside its inputs, plus its
    results to the parent operator's node)."""

    values: tuple[Any, ...]
    tree: Operator
    cost: float


@dataclass(frozen=True)
class PMJoin:
    """A partition-based multi-way join over ``inputs`` on the class ``cls``: ``top`` is the
    region of the unpartitioned tree it replaces (an operator and the merged descendants
    partitionable on the same class)."""

    cls: JoinClass
    top: Operator
    inputs: tuple[Operator, ...]
    parent_node: str | None
    groups: tuple[GroupPlan, ...] = ()
    partition: ValueGroups | None = None  # the values' groups (None: one group, no per-value rates)

    def __str__(self) -> str:
        return f"PMJoin on {self.cls} over {', '.join(map(str, self.inputs))}"


def find_pmjoins(model: StreamModel, tree: Operator) -> list[PMJoin]:
    """FINDPARTITION (Algorithm 2) from the root, then the paper's heuristic under its two
    constraints: sort the PMJoins by total input rate (largest first), keep the largest and
    restore its parent PMJoin to MJoins, until none is left.  A right child (the input at its
    parent's node) is never a PMJoin.  The paper's step 3 names the parent only; we also
    restore the kept one's child PMJoins, since a child kept later would have to undo its kept
    parent (and the ranking would then decide nothing).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_2)
    >>> m = StreamModel(w, "q", sizes="unit")
    >>> [str(p) for p in find_pmjoins(m, stream_join_opt(m))]
    ['PMJoin on {S0.b=S2.b} over S0, (S2 ⋈ S3)@n1']
    """
    q = model.q
    found: list[tuple[PMJoin, PMJoin | None]] = []  # with the parent PMJoin

    def visit(op: Operator, right: bool, parent_node: str | None, parent_pm: PMJoin | None) -> None:
        if op.is_source:
            return
        cls = None if right else partition_class(q, op)
        mine = None
        children = list(op.children)
        if cls is not None:
            merged = True
            while merged:
                merged = False
                for i, k in enumerate(children):
                    if not k.is_source and partition_class(q, k) == cls:
                        children[i:i + 1] = list(k.children)
                        merged = True
                        break
            mine = PMJoin(cls, op, tuple(children), parent_node)
            found.append((mine, parent_pm))
        for i, k in enumerate(children):
            visit(k, i == len(children) - 1, op.node, mine)

    visit(tree, False, None, None)
    ranked = sorted(found, key=lambda pp: (-sum(model.rate(x.relations) for x in pp[0].inputs), pp[0].top.render()))
    left = [p for p, _ in ranked]
    parent = {id(p): pp for p, pp in found}
    kept: list[PMJoin] = []
    while left:
        p = left.pop(0)
        kept.append(p)
        left = [x for x in left if x is not parent[id(p)] and parent[id(x)] is not p]
    return kept


# --------------------------------------------------------------------------------------------
# the planner: schemes, PMJoins with their groups, plans
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PMJoinOptions:
    """What the ``pmjoin`` planner needs beyond the workload: per-value rates (from data),
    the number ``groups`` of value groups ``D``, the partitioning ``method`` and tuple
    ``sizes``."""

    rates: ValueRates | None = None
    groups: int = 1
    method: str = "rate"
    sizes: str = "sum"

    def __post_init__(self) -> None:
        _check_partitioning(self.groups, self.method)
        _check_sizes(self.sizes)


@dataclass(frozen=True)
class QueryPMJoin:
    """PMJoin's plan of one query: Algorithm 1's unpartitioned tree, the communication cost of
    the three schemes (bytes per second) and the chosen PMJoins with their per-group trees."""

    query: str
    tree: Operator
    centralized: float
    centralized_node: str
    distributed: float
    partitioned: float
    pmjoins: tuple[PMJoin, ...]

    def lines(self) -> list[str]:
        out = [f"{self.query}: {self.tree}",
               f"  communication (bytes/s): centralized {self.centralized:.6g} (at {self.centralized_node}), "
               f"distributed {self.distributed:.6g}, partition-based {self.partitioned:.6g}"]
        for pm in self.pmjoins:
            out.append(f"  {pm}")
            for g in pm.groups:
                vals = ("values {" + ", ".join(map(repr, g.values[:5])) + (", …" if len(g.values) > 5 else "")
                        + f"}} ({len(g.values)})") if g.values else "all values"
                out.append(f"    {vals}: {g.tree}  cost {g.cost:.6g}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "tree": str(self.tree), "centralized": self.centralized,
                "centralized_node": self.centralized_node, "distributed": self.distributed,
                "partitioned": self.partitioned,
                "pmjoins": [{"class": str(pm.cls), "inputs": [str(x) for x in pm.inputs],
                             "groups": [{"values": [plain_value(v) for v in g.values], "tree": str(g.tree),
                                         "cost": g.cost}
                                        for g in pm.groups]} for pm in self.pmjoins]}


@dataclass(frozen=True)
class PMJoinReport:
    """PMJoin's plans of every query of a workload (the report beside the deployed plan)."""

    options: PMJoinOptions
    queries: tuple[QueryPMJoin, ...]

    def query(self, name: str) -> QueryPMJoin:
        for qp in self.queries:
            if qp.query == name:
                return qp
        raise PlannerError(f"no PMJoin plan of query {name!r}")

    def summary(self) -> str:
        o = self.options
        head = f"PMJoin: {o.groups} value group(s) by {o.method} partitioning, tuple sizes {o.sizes}"
        return "\n".join([head] + [line for qp in self.queries for line in qp.lines()])

    def to_dict(self) -> dict[str, Any]:
        o = self.options
        return {"groups": o.groups, "method": o.method, "sizes": o.sizes,
                "queries": [qp.to_dict() for qp in self.queries]}


def _covers(rates: ValueRates | None, cls: JoinClass) -> bool:
    return rates is not None and all(a in rates for a in cls.members)


def _groups(model: StreamModel, pm: PMJoin, options: PMJoinOptions) -> PMJoin:
    """``pm`` with one STREAMJOINOPT tree per value group of its class."""
    w = model.workload
    if not _covers(options.rates, pm.cls):
        if options.groups != 1:
            raise PlannerError(f"query {model.query}: partitioning {pm.cls} into {options.groups} value groups needs "
                               f"the rates per value of its attributes (estimate them from data: --data DIR)")
        parts: list[tuple[tuple[Any, ...], StreamModel]] = [((), StreamModel(w, model.query, sizes=options.sizes))]
        partition = None
    else:
        partition = partition_values(options.rates, options.groups, options.method, pm.cls.members)
        parts = [(g, StreamModel(w, model.query, options.rates, pm.cls, frozenset(g), options.sizes))
                 for g in partition.groups]
    groups = []
    for values, gm in parts:
        tree = stream_join_opt(gm, pm.inputs)
        out = gm.load(tree.relations) if pm.parent_node is not None and tree.node != pm.parent_node else 0.0
        groups.append(GroupPlan(values, tree, communication_cost(gm, tree, pm.inputs) + out))
    return PMJoin(pm.cls, pm.top, pm.inputs, pm.parent_node, tuple(groups), partition)


def _cost_outside(model: StreamModel, op: Operator, pms: Mapping[tuple[str, ...], PMJoin]) -> float:
    """Bytes per second of the operators outside the PMJoins' regions (their groups pay the
    rest, including shipping their results to the parent)."""
    if op.is_source:
        return 0.0
    if op.relations in pms:
        return sum(_cost_outside(model, x, pms) for x in pms[op.relations].inputs)
    return sum((model.load(k.relations) if k.relations not in pms and k.node != op.node else 0.0)
               + _cost_outside(model, k, pms) for k in op.children)


def plan_query(workload: Workload, query: str, options: PMJoinOptions = PMJoinOptions()) -> QueryPMJoin:
    """PMJoin's plan of one query.  Without partitioning the model uses the class
    selectivities, except for a query on one class whose per-value rates are given (Example 1):
    then its rates are summed per value, as in Table 1.

    >>> from mqjoin.model.workload import parse_workload
    >>> qp = plan_query(parse_workload(EXAMPLE_2), "q", PMJoinOptions(sizes="unit"))
    >>> qp.tree, qp.distributed, qp.centralized
    (((S0 ⋈ (S2 ⋈ S3)@n1)@n1 ⋈ S4 ⋈ S1)@n0, 34.0, 60.0)
    """
    q = workload.query(query)
    cls = q.classes[0] if len(q.classes) == 1 and _covers(options.rates, q.classes[0]) else None
    model = StreamModel(workload, query, options.rates if cls else None, cls, sizes=options.sizes)
    tree = stream_join_opt(model)
    central, node = centralized_cost(model, [Operator.source(r, node_of(workload, r)) for r in q.relations])
    pms = tuple(_groups(model, pm, options) for pm in find_pmjoins(model, tree))
    by_top = {pm.top.relations: pm for pm in pms}
    partitioned = _cost_outside(model, tree, by_top) + sum(g.cost for pm in pms for g in pm.groups)
    return QueryPMJoin(query, tree, central, node, communication_cost(model, tree), partitioned, pms)


def pmjoin_report(workload: Workload, options: PMJoinOptions | None = None, **kw: Any) -> PMJoinReport:
    """PMJoin's plans of every query (each planned alone, as in the paper); ``kw`` are the
    fields of :class:`PMJoinOptions` when ``options`` is not given.

    >>> from mqjoin.model.workload import parse_workload
    >>> r = pmjoin_report(parse_workload(EXAMPLE_1), groups=3, rates=EXAMPLE_1_VALUE_RATES)
    >>> round(r.queries[0].partitioned, 4), [g.values for g in r.queries[0].pmjoins[0].groups]
    (0.0696, [('a',), ('b',), ('c',)])
    """
    options = options or PMJoinOptions(**kw)
    return PMJoinReport(options, tuple(plan_query(workload, q.name, options) for q in workload.queries))


def _replace(tree: Operator, top: Operator, new: Operator) -> Operator:
    if tree == top:
        return new
    if tree.is_source:
        return tree
    return Operator.mjoin([_replace(k, top, new) for k in tree.children], tree.node)


def group_tree(qp: QueryPMJoin, pm: PMJoin, group: int) -> Operator:
    """The query's tree with the PMJoin ``pm`` replaced by the tree of its ``group``."""
    return _replace(qp.tree, pm.top, pm.groups[group].tree)


def pmjoin_plan(workload: Workload, report: PMJoinReport, mode: str = "individual",
                partitioning: str = "single") -> Plan:
    """The deployed plan: every query's unpartitioned tree as an ordinary plan
    (:func:`mqjoin.planners.trees.plan_trees`).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_2)
    >>> pmjoin_plan(w, pmjoin_report(w, sizes="unit")).probe_orders()["q"]["S1"]
    'S1 » (S0⋈S2⋈S3)[a] » S4[d]'
    """
    return plan_trees(workload, {qp.query: qp.tree.join_tree() for qp in report.queries}, mode, partitioning)


def group_plan(workload: Workload, qp: QueryPMJoin, pm: PMJoin, group: int) -> Plan:
    """The ordinary plan of one value group of a PMJoin: the query alone, with the group's tree."""
    return plan_trees(workload.restricted_to([qp.query]), {qp.query: group_tree(qp, pm, group).join_tree()})


def group_results(workload: Workload, qp: QueryPMJoin, pm: PMJoin, tables: Mapping[str, Table]) -> set[tuple[int, ...]]:
    """Run every value group's plan (:func:`group_plan`) on the reference engine over its
    substreams — the rows of the PMJoin's relations whose value of its class lies in the group
    — and unite the results (row indices of the full inputs).

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.runtime.oracle import oracle_results
    >>> w = parse_workload(EXAMPLE_1)
    >>> rows = {"ts": [0.0, 0.1, 0.2], "dest": ["a", "b", "a"]}
    >>> tables = {r: Table.from_columns(r, rows) for r in ("S1", "S2", "S3")}
    >>> qp = plan_query(w, "q", PMJoinOptions(value_rates(w, tables), groups=2, method="hash"))
    >>> group_results(w, qp, qp.pmjoins[0], tables) == oracle_results(w, tables)["q"]
    True
    """
    from mqjoin.runtime.reference import run_reference

    q = workload.query(qp.query)
    inside = set(pm.top.relations)
    out: set[tuple[int, ...]] = set()
    for k in range(len(pm.groups)):
        rows: dict[str, list[int]] = {}
        for a in pm.cls.members:
            if a.relation in inside:
                col = tables[a.relation].columns[a.name]
                rows[a.relation] = [i for i, v in enumerate(col) if v is not None and
                                    (pm.partition is None or pm.partition.group_of(v) == k)]
        sub = {r: _rows(t, rows[r]) if r in rows else t for r, t in tables.items()}
        run = run_reference(group_plan(workload, qp, pm, k), sub)
        for res in run.results[qp.query]:
            out.add(tuple(rows[r][i] if r in rows else i for r, i in zip(q.relations, res)))
    return out


def _rows(table: Table, rows: list[int]) -> Table:
    return Table(table.relation, tuple(table.ts[i] for i in rows),
                 {c: tuple(vs[i] for i in rows) for c, vs in table.columns.items()}, table.source)
