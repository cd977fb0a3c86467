"""MJoin (Viglas et al.): one n-ary symmetric hash join per query, optionally decomposed.

An MJoin keeps base stores only; each input probes the others in a *probing sequence*, most
selective predicate first (:func:`mqjoin.planners.trees.probing_sequence`, shared with the
binary trees).  ``decompose=True`` applies the MJoin paper's appendix A.2 rule: split a
``k+l``-way MJoin into a ``k``- and an ``l``-way one, materialised as MIR stores, when
recomputing the parts costs more than storing them (``D(k, l) > S(k, l)``), recursively,
taking the split with the largest gain first.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
...             T: {attributes: [b], rate: 100}}
... queries: {q: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
... ''')
>>> mjoin_tree(w, "q")
(R ⋈ S ⋈ T)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from mqjoin.model.workload import Workload
from mqjoin.planning.cost import exposure, is_close, join_results
from mqjoin.planning.options import OptimizeOptions
from mqjoin.planners.trees import JoinTree, splits


@dataclass(frozen=True)
class UnitCosts:
    """The MJoin paper's per-operation costs (appendix A.2): hashing a tuple, moving it into a
    hash table, one key comparison."""

    hash: float = 1.0
    move: float = 1.0
    comp: float = 1.0


def decomposition_costs(workload: Workload, query: str, k: Iterable[str], l: Iterable[str],  # noqa: E741 — the paper's k, l
                        unit: UnitCosts = UnitCosts()) -> tuple[float, float]:
    """``(D(k, l), S(k, l))`` of MJoin's appendix A.2 (Equations 4 and 3) for splitting the
    MJoin over ``k ∪ l`` into one over ``k`` and one over ``l``; ``n_i`` is the rate ``λ_i``
    (arrivals per time unit) and a class with ``m`` members in a part counts as ``m − 1``
    predicates of selectivity ``s_c``, so a part's intermediate result is ``|⋈part|`` (docs/model.md §2).
    The paper's costs are per time unit; both terms here are totals over the horizon (docs/model.md
    §4), so that parts of different sizes weigh alike in any time unit: ``|⋈part|`` is the
    results a run produces (:func:`~mqjoin.planning.cost.join_results`, ``|⋈part| · H^|part|``
    under full history) and ``Π n`` the candidate combinations over the same time volume.

    ``S = (|⋈k| + |⋈l|) · (hash + move + comp)``: storing both intermediate results;
    ``D = (Σ_{pred ∈ l} (1 − σ) · Π_{l} n + Σ_{pred ∈ k} (1 − σ) · Π_{k} n) · comp``: recomputing them.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> d, s = decomposition_costs(w, "q", ["A", "B"], ["C", "D"])
    >>> round(d, 6), round(s, 6)
    (19800.0, 600.0)
    """
    q = workload.query(query)

    def part(rels: set[str]) -> tuple[float, float]:
        n = 1.0
        for r in rels:
            n *= workload.rate(r)
        discard = sum((c.count_in(rels) - 1) * (1 - c.selectivity) for c in q.classes if c.count_in(rels) >= 2)
        volume = sum(exposure(workload, rels, x) for x in rels)  # the time volume of the part's results
        return join_results(workload, rels, q.classes), discard * n * volume

    (size_k, disc_k), (size_l, disc_l) = part(set(k)), part(set(l))
    return (disc_l + disc_k) * unit.comp, (size_k + size_l) * (unit.hash + unit.move + unit.comp)


def mjoin_tree(workload: Workload, query: str, decompose: bool = False, unit: UnitCosts = UnitCosts()) -> JoinTree:
    """MJoin's operator tree of a query: one flat node over its relations, or, with
    ``decompose``, split by appendix A.2 wherever ``D(k, l) > S(k, l)`` (largest gain first,
    then recursively inside each part).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> mjoin_tree(w, "q"), mjoin_tree(w, "q", decompose=True)
    ((A ⋈ B ⋈ C ⋈ D), (((C ⋈ D) ⋈ B) ⋈ A))

    (Splitting off ``A`` saves recomputing ``B ⋈ C ⋈ D``'s million-fold cross product of
    equation 4, the largest gain; equation 4 counts a discarded result as ``Π n_i``.)
    """
    q = workload.query(query)
    rank = workload.relation_rank

    def build(rels: tuple[str, ...]) -> JoinTree:
        rels = tuple(sorted(rels, key=rank.__getitem__))
        if len(rels) == 1:
            return JoinTree.leaf(rels[0])
        if decompose and len(rels) >= 3:
            best, gain = None, 0.0
            for a, b in splits(q, rels):
                d, s = decomposition_costs(workload, query, a, b, unit)
                if d - s > gain and not is_close(d - s, gain):
                    best, gain = (a, b), d - s
            if best is not None:
                return JoinTree.join([build(best[0]), build(best[1])])
        return JoinTree.join(JoinTree.leaf(r) for r in rels)

    return build(tuple(q.relations))


def mjoin_rule(workload: Workload, query: str, options: OptimizeOptions) -> JoinTree:
    """The ``mjoin`` planner's :class:`~mqjoin.planners.contract.TreeRule`: :func:`mjoin_tree`,
    decomposed when ``options.decompose``."""
    return mjoin_tree(workload, query, options.decompose)
