"""PMJoin's rate-based model (Section 3.2) and its operator trees placed at nodes, with the
paper's Algorithm 1 (STREAMJOINOPT) and the exhaustive optimum it is checked against.

A :class:`StreamModel` gives the rate and window size of every set of a query's relations
(Equations 2 and 3, per join value where per-value rates are known); an :class:`Operator` is
a stream at a node (a source or an MJoin); :func:`communication_cost` prices a placed tree in
bytes per second shipped between nodes.  The worked examples of the paper (:data:`EXAMPLE_1`,
:data:`EXAMPLE_2`) live here as workloads.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload(EXAMPLE_1)
>>> m = StreamModel(w, "q", EXAMPLE_1_VALUE_RATES, w.query("q").classes[0])
>>> tree = stream_join_opt(m)
>>> tree, round(communication_cost(m, tree), 4)
(((S3 ⋈ S2)@n2 ⋈ S1)@n1, 54.0316)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping

from mqjoin.planning.cost import is_close, join_size, window_of
from mqjoin.model.errors import PlannerError
from mqjoin.planners.trees import JoinTree
from mqjoin.model.workload import Attr, JoinClass, Query, Workload

SIZES = ("sum", "unit")

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


def value_sort_key(v: Any) -> tuple[str, Any]:
    return (type(v).__name__, v)


def check_sizes(sizes: str) -> None:
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
        check_sizes(self.sizes)
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

    def _exposure(self, relations: list[str], arriving: str) -> float:
        """``Π_{j ≠ i} T_j`` of Equation 2 for a tuple of ``arriving`` (``i``), averaged over the
        horizon ``H``: a sliding window holds ``T_j`` time units of its stream (the paper's
        steady state); an unbounded one the history so far, ``t`` at time ``t``, whose
        product with ``m − 1`` others averages to ``H^m / (m + 1)`` for ``m`` of them.  So a
        join of unbounded streams ships, over the horizon, the results a run produces
        (:func:`~mqjoin.planning.cost.join_results`), not ``|P|`` times as many."""
        windows = [self.workload.window(j) for j in relations if j != arriving]
        m = sum(1 for x in windows if x is None)
        return math.prod(x for x in windows if x is not None) * self.workload.defaults.horizon ** m / (m + 1)

    @cached_property
    def _values(self) -> list[Any]:
        vals = {v for a in self.cls.members for v in self.rates[a]} if self.cls else set()
        if self.group is not None:
            vals &= set(self.group)
        return sorted(vals, key=value_sort_key)

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
        if per_value:  # the class summed over its values, the others independent
            factor = 1.0
            for c in self.q.classes:
                k = c.count_in(rels)
                if k >= 2 and c != self.cls:
                    factor *= c.selectivity ** (k - 1)
        else:  # F(P) = |⋈P| / Π λ_i: a measured size of the set where the workload gives one
            factor = join_size(self.workload, rels, self.q.classes) / math.prod(self.workload.rate(r) for r in rels)

        def terms(value: Any) -> tuple[float, float]:
            lam = {r: self._lambda(r, value) for r in rels}
            rate = math.prod(lam.values()) * sum(self._exposure(rels, i) for i in rels)
            return rate, math.prod(lam[r] * self._span(r) for r in rels)

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


