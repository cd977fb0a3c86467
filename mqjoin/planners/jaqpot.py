"""JAQPOT: join direction adaptation of binary join plans under a CPU limit μ (model only).

A binary plan (:class:`BinaryPlan`) joins streams pairwise; each join ``L ⋈ R`` has two
*half-way joins* ``l ⋉ S_R`` and ``r ⋉ S_L`` whose productivity is ``ρ_h = σ_R · |S_R|``
(Eq. 3: results per probing tuple).  With only μ tuples per second of probing capacity, each
half-way join gets a *probe allowance* ``λ'``; the plan's throughput is the root's output.
JAQPOT's insight: allocate along *input paths* (leaf to root), keeping producer and consumer
matched.  This module computes, after the paper (Sections 4.1–4.3):

* path cardinalities ``φ_j`` (Eq. 5), the division of a path's resources over its hops
  (Eq. 7) and the *path productivity* ``ρ_p`` (Eq. 8);
* the *path-productivity table* (Table 2): per path the smallest whole-number bundle of
  resources ``X`` whose every intermediate count and output are whole, its output, ``ρ_p``;
* **GrePP**, the greedy continuous knapsack (optimal when resources may be fractional);
  the **JAQPOT policy** on whole bundles (greedy, not optimal) and the **discrete DP
  knapsack** (optimal on whole bundles);
* **GH-WMSCP**, freshness as a weighted multiple set cover of the *staleness-susceptible*
  (intermediate) states, and **Algorithm 1**, cover first, then GrePP with what remains;
* the paper's ρ_h-based baselines (Appendix B: EqualHJ, GlobalHJPR, EBestHJP, SBestHJP) and
  :func:`evaluate`, the throughput of any allowance with producer–consumer capping.

The executor side (a probe budget enforced at run time) is :mod:`mqjoin.runtime.shedding`: this is
the model.

The paper's running example (Figure 4, Table 2; the figure's numbers are not in our copy of
the text, so the plan below is reconstructed from Table 2: ``ρ_h`` of ``a ⋉ S_B`` = 4/11, of
``b ⋉ S_A`` = 5/11, of ``ab ⋉ S_C`` = 1, of ``c ⋉ S_AB`` = 1/10):

>>> plan = running_example()
>>> [(r.stream, r.resources, r.output, round(r.productivity, 4)) for r in productivity_table(plan)]
[('A', 15, 4, 0.2667), ('B', 16, 5, 0.3125), ('C', 10, 1, 0.1)]
>>> jaqpot_policy(plan, 30).throughput, discrete_knapsack(plan, 30).throughput
(6.0, 8.0)
>>> g = grepp(plan, 30)
>>> g.throughput, g.allowances["b ⋉ S_A"], g.allowances["ab ⋉ S_C"]
(9.375, 20.625, 9.375)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Union

import numpy as np

from mqjoin.model.errors import JaqpotError

#: a plan tree: a stream name or a pair of subtrees
Tree = Union[str, tuple]


def label(tree: Tree) -> str:
    """A node's name: its streams in tree order.

    >>> label((("A", "B"), "C"))
    'ABC'
    """
    return tree if isinstance(tree, str) else label(tree[0]) + label(tree[1])


def _leaves(tree: Tree) -> list[str]:
    return [tree] if isinstance(tree, str) else _leaves(tree[0]) + _leaves(tree[1])


def _inner(tree: Tree) -> list[tuple]:
    """Inner nodes, children before parents."""
    if isinstance(tree, str):
        return []
    return _inner(tree[0]) + _inner(tree[1]) + [tree]


@dataclass(frozen=True)
class HalfJoin:
    """The half-way join ``input ⋉ S_partner`` (inputs and states named by their streams)."""

    input: str
    partner: str
    productivity: float  # ρ_h = σ_partner · |S_partner|  (Eq. 3)

    def render(self) -> str:
        return f"{self.input.lower()} ⋉ S_{self.partner}"

    __str__ = render

    def __repr__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class Path:
    """An input path (Definition 3): the half-way joins from stream ``stream`` to the root.

    >>> p = running_example().paths()["B"]
    >>> p, p.cardinalities, round(p.productivity, 4), p.split(16)
    (b ⋉ S_A ⋉ S_C, (0.45454545454545453, 0.45454545454545453), 0.3125, (11.0, 5.0))
    """

    stream: str
    hops: tuple[HalfJoin, ...]

    @property
    def cardinalities(self) -> tuple[float, ...]:
        """``φ_j``, the intermediate tuples per leaf tuple after hop ``j`` (Eq. 5)."""
        out, phi = [], 1.0
        for h in self.hops:
            phi *= h.productivity
            out.append(phi)
        return tuple(out)

    @property
    def work(self) -> float:
        """``1 + φ_1 + … + φ_{n−1}``: tuples processed along the path per leaf tuple (Eq. 6)."""
        return 1.0 + sum(self.cardinalities[:-1])

    @property
    def productivity(self) -> float:
        """``ρ_p = φ_n / (1 + φ_1 + … + φ_{n−1})`` (Eq. 8): outputs per tuple processed."""
        return self.cardinalities[-1] / self.work

    def split(self, resources: float) -> tuple[float, ...]:
        """The allowances of the hops for ``resources`` on this path (Eq. 7)."""
        x1 = resources / self.work
        return tuple(x1 * phi for phi in (1.0,) + self.cardinalities[:-1])

    def render(self) -> str:
        return " ⋉ ".join([self.hops[0].input.lower()] + [f"S_{h.partner}" for h in self.hops])

    __str__ = render

    def __repr__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class BinaryPlan:
    """A binary join plan: its tree, the streams' rates ``λ`` and, for every state but the
    root's, its size ``|S|`` (tuples) and the selectivity ``σ`` of a probe into it.

    >>> linear = BinaryPlan.build((("A", "B"), "C"), rates={"A": 10, "B": 10, "C": 10},
    ...     sizes={"A": 100, "B": 100, "C": 100, "AB": 100}, selectivities=0.01)
    >>> linear.halfway_joins()
    (a ⋉ S_B, b ⋉ S_A, ab ⋉ S_C, c ⋉ S_AB)
    >>> linear.susceptible_states()
    ('AB',)
    """

    tree: Tree
    rates: Mapping[str, float]
    sizes: Mapping[str, float]
    selectivities: Mapping[str, float]

    @staticmethod
    def build(tree: Tree, rates: Mapping[str, float], sizes: Mapping[str, float],
              selectivities: Mapping[str, float] | float) -> "BinaryPlan":
        """A validated plan (``selectivities``: one number for every state, or per state)."""
        _check_tree(tree)
        states = state_names(tree)
        if not isinstance(selectivities, Mapping):
            selectivities = {s: selectivities for s in states}
        for s in _leaves(tree):
            _positive(rates.get(s), f"rate of stream {s}")
        for s in states:
            _positive(sizes.get(s), f"size |S_{s}| of state {s}")
            v = _positive(selectivities.get(s), f"selectivity of state {s}")
            if v > 1:
                raise JaqpotError(f"selectivity of state {s} is {v}; a selectivity lies in (0, 1]")
        return BinaryPlan(tree, dict(rates), {s: sizes[s] for s in states}, {s: selectivities[s] for s in states})

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(_leaves(self.tree))

    def productivity(self, state: str) -> float:
        """``ρ_h`` of a probe into ``state``: ``σ · |S|``."""
        return self.selectivities[state] * self.sizes[state]

    def halfway_joins(self) -> tuple[HalfJoin, ...]:
        out = []
        for n in _inner(self.tree):
            left, right = label(n[0]), label(n[1])
            out.append(HalfJoin(left, right, self.productivity(right)))
            out.append(HalfJoin(right, left, self.productivity(left)))
        return tuple(out)

    def paths(self) -> dict[str, Path]:
        """Stream → its input path (leaf to root)."""
        out = {}
        for s in self.streams:
            hops, node = [], s
            for n in _inner(self.tree):  # children before parents: the path's order
                sides = [label(n[0]), label(n[1])]
                if node in sides:
                    other = sides[1 - sides.index(node)]
                    hops.append(HalfJoin(node, other, self.productivity(other)))
                    node = label(n)
            out[s] = Path(s, tuple(hops))
        return out

    def susceptible_states(self) -> tuple[str, ...]:
        """Staleness-susceptible states: intermediate results (neither a stream nor the root),
        ``k − 2`` of them for ``k`` streams (Lemma 2)."""
        return tuple(label(n) for n in _inner(self.tree) if n is not self.tree)

    def capacity(self, stream: str) -> float:
        """The most resources the path of ``stream`` can use: all its tuples, ``λ · work``."""
        return self.rates[stream] * self.paths()[stream].work

    def saturation(self) -> tuple[float, float]:
        """``(resources, throughput)`` with no CPU limit: every tuple probes (footnote 9).

        >>> figure_2b().saturation()  # 500·1.5 + 700·6 + 1000; 500·0.5·5 + 700·5·5 + 1000·1
        (5950.0, 19750.0)
        """
        paths = self.paths()
        return (sum(self.rates[s] * p.work for s, p in paths.items()),
                sum(self.rates[s] * p.cardinalities[-1] for s, p in paths.items()))


def state_names(tree: Tree) -> tuple[str, ...]:
    """The states of a plan: every node but the root (streams and intermediate results),
    children before parents.

    >>> state_names(((("A", "B"), "C"), "D"))
    ('A', 'B', 'AB', 'C', 'ABC', 'D')
    """
    return tuple(label(n) for n in _states(tree))


def _states(tree: Tree) -> list[Tree]:
    out: list[Tree] = []

    def rec(t: Tree) -> None:
        if not isinstance(t, str):
            rec(t[0])
            rec(t[1])
        out.append(t)
    rec(tree)
    return out[:-1]


def _check_tree(tree: Tree) -> None:
    if isinstance(tree, str) or not isinstance(tree, tuple) or len(tree) != 2:
        raise JaqpotError(f"a binary plan is a pair of subtrees, e.g. (('A', 'B'), 'C'); got {tree!r}")
    names = []

    def rec(t: Tree) -> None:
        if isinstance(t, str):
            names.append(t)
        elif isinstance(t, tuple) and len(t) == 2:
            rec(t[0])
            rec(t[1])
        else:
            raise JaqpotError(f"plan node {t!r} is neither a stream name nor a pair of subtrees")
    rec(tree)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise JaqpotError(f"stream {dup[0]} appears twice in the plan; use one copy per input (footnote 5)")


def _positive(v, what: str) -> float:
    if v is None:
        raise JaqpotError(f"{what} is missing")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise JaqpotError(f"{what} must be a number, got {v!r}") from None
    if not x > 0 or math.isinf(x):
        raise JaqpotError(f"{what} must be a positive number, got {v!r}")
    return x


def _resources(mu) -> float:
    try:
        x = float(mu)
    except (TypeError, ValueError):
        raise JaqpotError(f"resources μ must be a number of tuples per second, got {mu!r}") from None
    if x < 0 or math.isnan(x) or math.isinf(x):
        raise JaqpotError(f"resources μ must be a non-negative number of tuples per second, got {mu!r}")
    return x


def running_example() -> BinaryPlan:
    """The plan ``(A ⋈ B) ⋈ C`` of the paper's running example (Figure 4, Table 2),
    reconstructed from Table 2: ``ρ_h`` = 4/11, 5/11, 1 and 1/10; rates large enough
    (1,000 tuples/s) never to bind at μ = 30."""
    return BinaryPlan.build((("A", "B"), "C"), rates={"A": 1000, "B": 1000, "C": 1000},
                            sizes={"A": 50, "B": 40, "C": 100, "AB": 10},
                            selectivities={"A": 1 / 110, "B": 1 / 110, "C": 1 / 100, "AB": 1 / 100})


def figure_2b() -> BinaryPlan:
    """The 2-join plan of the paper's Figure 2.b / Appendix B (Table 4), reconstructed from
    Table 4's numbers: ``ρ_h`` of ``a ⋉ S_B`` = 0.5, ``b ⋉ S_A`` = 5, ``ab ⋉ S_C`` = 5,
    ``c ⋉ S_AB`` = 1; rates 500 and 700 (Figure 2.a), C 1,000."""
    return BinaryPlan.build((("A", "B"), "C"), rates={"A": 500, "B": 700, "C": 1000},
                            sizes={"A": 5000, "B": 100, "C": 1000, "AB": 200},
                            selectivities={"A": 0.001, "B": 0.005, "C": 0.005, "AB": 0.005})


# --------------------------------------------------------------------------------------------
# the path-productivity table and allocations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathRow:
    """One column of Table 2: a path's whole-number bundle of resources, its output, ``ρ_p``."""

    stream: str
    resources: int
    output: int
    productivity: float
    leaf: int  # leaf tuples in the bundle (``X_1``)


def productivity_table(plan: BinaryPlan) -> tuple[PathRow, ...]:
    """Table 2: per path the smallest bundle of ``X_1`` leaf tuples whose every intermediate
    count ``X_1 · φ_j`` and output ``X_1 · φ_n`` is whole, ``X = X_1 + Σ_{j<n} X_1 · φ_j``,
    its output and ``ρ_p`` (Eq. 8).

    Productivities measured on real data are no ratios of small whole numbers, so "whole" is
    read within :data:`BUNDLE_TOLERANCE`: an intermediate count is rounded up and the output
    down, each by at most that share (see :func:`bundle`).  A bundle therefore never promises
    more than its path delivers (``output / X ≤ ρ_p``: the continuous GrePP bounds every
    discrete policy), and the paper's exact ratios (4/11, 5/11, …) give its exact bundles.

    >>> productivity_table(running_example())[0]
    PathRow(stream='A', resources=15, output=4, productivity=0.26666666666666666, leaf=11)
    """
    rows = []
    for s, p in plan.paths().items():
        leaf, counts = bundle(p.cardinalities)
        rows.append(PathRow(s, leaf + sum(counts[:-1]), counts[-1], p.productivity, leaf))
    return tuple(rows)


#: the share by which a bundle's whole counts may differ from a path's real cardinalities
BUNDLE_TOLERANCE = 0.01
#: the largest bundle (leaf tuples) :func:`bundle` looks at
MAX_LEAF = 1 << 22


@functools.lru_cache(maxsize=1024)
def bundle(cardinalities: tuple[float, ...]) -> tuple[int, tuple[int, ...]]:
    """The smallest whole number of leaf tuples ``X_1`` whose counts after every hop are whole
    within :data:`BUNDLE_TOLERANCE` — intermediate counts ``⌈X_1 · φ_j⌉``, the output
    ``⌊X_1 · φ_n⌋ ≥ 1`` — and those counts; past :data:`MAX_LEAF` the closest one found.

    >>> bundle((4 / 11, 4 / 11))
    (11, (4, 4))
    >>> bundle((0.16618, 0.0046))  # 435 · 0.16618 = 72.29 → 73 (+1.0 %), 435 · 0.0046 = 2.001 → 2
    (435, (73, 2))
    """
    phis = np.asarray(cardinalities, dtype=float)
    start = 1
    while start <= MAX_LEAF:
        stop = min(MAX_LEAF, max(2 * start, 1024))
        d = np.arange(start, stop + 1, dtype=float)[:, None]
        x = d * phis
        counts = np.concatenate([np.ceil(x[:, :-1] - 1e-9), np.floor(x[:, -1:] + 1e-9)], axis=1)
        err = np.where(counts > 0, np.abs(counts - x) / np.maximum(counts, x), 1.0).max(axis=1)
        ok = np.nonzero(err <= BUNDLE_TOLERANCE)[0]
        if ok.size:
            k = int(ok[0])
            return start + k, tuple(int(c) for c in counts[k])
        if stop == MAX_LEAF:
            k = int(np.argmin(err))
            return start + k, tuple(int(c) for c in counts[k])
        start = stop + 1
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Allocation:
    """Resources given by a policy: per path (``X^I``; empty for half-way-join baselines) and
    per half-way join (probe allowances ``λ'``), the predicted throughput, and the resources
    ``freshness`` spent on covering staleness-susceptible states (``Δμ``)."""

    policy: str
    mu: float
    paths: Mapping[str, float]
    allowances: Mapping[str, float]
    throughput: float
    freshness: float = 0.0
    feasible: bool = True
    multiples: Mapping[str, int] = field(default_factory=dict)  # discrete policies: bundles per path

    @property
    def used(self) -> float:
        return sum(self.allowances.values())


def _allowances(plan: BinaryPlan, per_path: Mapping[str, float]) -> dict[str, float]:
    out = {h.render(): 0.0 for h in plan.halfway_joins()}
    paths = plan.paths()
    for s, x in per_path.items():
        for h, a in zip(paths[s].hops, paths[s].split(x)):
            out[h.render()] += a
    return out


def _order(plan: BinaryPlan) -> list[str]:
    """Paths by productivity, most productive first (ties: stream order)."""
    paths = plan.paths()
    rank = {s: i for i, s in enumerate(plan.streams)}
    return sorted(paths, key=lambda s: (-paths[s].productivity, rank[s]))


def grepp(plan: BinaryPlan, mu: float, taken: Mapping[str, float] | None = None) -> Allocation:
    """GrePP: the greedy continuous knapsack — all of ``mu`` to the most productive path until
    its stream is exhausted (``λ · work``), then the next.  ``taken``: resources paths already
    have (their capacity shrinks accordingly; not counted in the result).

    >>> g = grepp(figure_2b(), 300)  # all to Path^B (ρ_p = 25/6): b 50, ab 250
    >>> g.paths, g.throughput
    ({'B': 300.0}, 1250.0)
    """
    mu = _resources(mu)
    taken = taken or {}
    paths = plan.paths()
    left, per_path = mu, {}
    for s in _order(plan):
        give = min(left, max(0.0, plan.capacity(s) - taken.get(s, 0.0)))
        if give > 0:
            per_path[s] = give
            left -= give
    return Allocation("GrePP", mu, per_path, _allowances(plan, per_path),
                      sum(x * paths[s].productivity for s, x in per_path.items()))


#: the longest period :func:`bundle_period` chooses (seconds)
MAX_PERIOD = 60.0


def bundle_period(plan: BinaryPlan, longest: float = MAX_PERIOD) -> float:
    """The period ``T`` (whole seconds, at least 1) over which the discrete policies count
    whole bundles: the shortest in which every path's stream supplies one bundle
    (``X_1 ≤ λ · T``), at most ``longest`` (a path whose bundle needs longer gets none).
    With 1,000 tuples/s per stream the running example needs 1 s; a stream of 0.8 tuples/s
    whose bundle has 18 leaf tuples needs 23 s.

    >>> bundle_period(running_example())
    1.0
    """
    need = max(r.leaf / plan.rates[r.stream] for r in productivity_table(plan))
    return float(min(max(1, math.ceil(need - 1e-9)), max(1, math.floor(longest))))


def _period(period) -> float:
    return _positive(period, "the period of whole bundles (seconds)")


def _supply(plan: BinaryPlan, row: PathRow, period: float) -> int:
    """The bundles the stream of ``row`` supplies in ``period`` seconds."""
    return int(plan.rates[row.stream] * period // row.leaf)


def jaqpot_policy(plan: BinaryPlan, mu: float, period: float = 1.0) -> Allocation:
    """The JAQPOT policy on whole bundles (Table 2): the most productive path first, as many
    of its bundles as fit (and its stream supplies), then the next — greedy, not optimal.
    Bundles are counted over ``period`` seconds (:func:`bundle_period`): ``μ · T`` resources,
    ``λ · T`` tuples of each stream; the allocation is per second.

    >>> jaqpot_policy(running_example(), 30).multiples
    {'B': 1, 'C': 1}
    """
    mu, period = _resources(mu), _period(period)
    rows = {r.stream: r for r in productivity_table(plan)}
    left, mult = mu * period, {}
    for s in _order(plan):
        r = rows[s]
        m = min(int(left // r.resources), _supply(plan, r, period))
        if m > 0:
            mult[s] = m
            left -= m * r.resources
    return _discrete("JAQPOT policy", plan, mu, mult, rows, period)


def discrete_knapsack(plan: BinaryPlan, mu: float, period: float = 1.0) -> Allocation:
    """The optimum on whole bundles and whole resources ``μ · T`` over ``period`` seconds (as
    :func:`jaqpot_policy`): a bounded knapsack by dynamic programming (ties: the first
    optimum found, streams in plan order).

    >>> discrete_knapsack(running_example(), 30).multiples
    {'A': 2}
    """
    mu, period = _resources(mu), _period(period)
    best, choose = knapsack_table(plan, mu * period, period)
    rows = {r.stream: r for r in productivity_table(plan)}
    return _discrete("discrete DP knapsack", plan, mu, choose(int(mu * period + 1e-9)), rows, period)


def knapsack_table(plan: BinaryPlan, resources: float, period: float = 1.0):
    """The bounded knapsack of :func:`discrete_knapsack` for every whole capacity up to
    ``resources``: ``(best, choose)`` with ``best[c]`` the most output of whole bundles in
    ``c`` resources and ``choose(c)`` its bundles per path.  Each path's bundles are split
    into items of 1, 2, 4, … bundles (every count up to the supply is a sum of them), each a
    0/1 knapsack step over all capacities at once: ``O(k · log(supply) · resources)``.

    >>> best, choose = knapsack_table(running_example(), 30)
    >>> int(best[30]), choose(30), int(best[26])
    (8, {'A': 2}, 6)
    """
    cap = int(_resources(resources) + 1e-9)
    rows = productivity_table(plan)
    best = np.zeros(cap + 1, dtype=np.int64)
    items: list[tuple[str, int, np.ndarray]] = []  # (stream, bundles, taken at capacity c)
    for r in rows:
        left, k = _supply(plan, r, _period(period)), 1
        while left > 0:
            n = min(k, left)
            size, value = n * r.resources, n * r.output
            take = np.zeros(cap + 1, dtype=bool)
            if size <= cap:
                cand = best[:cap + 1 - size] + value
                take[size:] = cand > best[size:]
                best = best.copy()
                best[size:] = np.where(take[size:], cand, best[size:])
            items.append((r.stream, n, take))
            left, k = left - n, 2 * k

    def choose(c: int) -> dict[str, int]:
        mult: dict[str, int] = {}
        c = min(max(0, c), cap)
        for stream, n, take in reversed(items):
            if take[c]:
                mult[stream] = mult.get(stream, 0) + n
                c -= n * next(r.resources for r in rows if r.stream == stream)
        return {s: mult[s] for s in plan.streams if s in mult}

    return best, choose


def _discrete(policy: str, plan: BinaryPlan, mu: float, mult: Mapping[str, int],
              rows: Mapping[str, PathRow], period: float = 1.0) -> Allocation:
    per_path = {s: m * rows[s].resources / period for s, m in mult.items()}
    return Allocation(policy, mu, per_path, _allowances(plan, per_path),
                      sum(m * rows[s].output for s, m in mult.items()) / period, multiples=dict(mult))


# --------------------------------------------------------------------------------------------
# throughput of any allowance, and the paper's ρ_h baselines (Appendix B)
# --------------------------------------------------------------------------------------------


def evaluate(plan: BinaryPlan, allowances: Mapping[str, float]) -> float:
    """The root's output for probe allowances (half-way join → tuples/s): a half-way join
    probes ``min(allowance, tuples available)``, a stream supplying ``λ`` and a join its
    output (producer–consumer capping; unmatched intermediate results are only stored).

    >>> evaluate(figure_2b(), {"a ⋉ S_B": 13, "b ⋉ S_A": 130, "ab ⋉ S_C": 130, "c ⋉ S_AB": 27})
    677.0
    """
    known = {h.render() for h in plan.halfway_joins()}
    for k in allowances:
        if k not in known:
            raise JaqpotError(f"no half-way join {k!r} in the plan (it has {', '.join(sorted(known))})")

    def out(t: Tree) -> float:
        if isinstance(t, str):
            return float(plan.rates[t])
        total = 0.0
        for me, other in ((t[0], t[1]), (t[1], t[0])):
            h = HalfJoin(label(me), label(other), plan.productivity(label(other)))
            total += min(allowances.get(h.render(), 0.0), out(me)) * h.productivity
        return total

    return out(plan.tree)


def baseline(plan: BinaryPlan, mu: float, policy: str) -> Allocation:
    """The paper's ρ_h-based heuristics (Appendix B, Table 4): ``EqualHJ`` (μ split equally
    over the half-way joins), ``GlobalHJPR`` (in proportion to ``ρ_h``), ``EBestHJP`` (equally
    over the joins, each giving its share to its more productive half-way join), ``SBestHJP``
    (over the joins in proportion to their selectivities — a join's the smaller of its two
    states' σ, Table 4's 0.001 : 0.005 — each giving its share to its more productive half-way
    join).

    >>> [baseline(figure_2b(), 300, p).throughput for p in ("EqualHJ", "EBestHJP")]
    [450.0, 750.0]
    >>> baseline(figure_2b(), 300, "SBestHJP").allowances  # Table 4: λ'_b = 50, λ'_ab = 250
    {'a ⋉ S_B': 0.0, 'b ⋉ S_A': 50.0, 'ab ⋉ S_C': 250.0, 'c ⋉ S_AB': 0.0}
    """
    mu = _resources(mu)
    hjs = plan.halfway_joins()
    if policy == "EqualHJ":
        alloc = {h.render(): mu / len(hjs) for h in hjs}
    elif policy == "GlobalHJPR":
        total = sum(h.productivity for h in hjs)
        alloc = {h.render(): mu * h.productivity / total for h in hjs}
    elif policy in ("EBestHJP", "SBestHJP"):
        alloc = {h.render(): 0.0 for h in hjs}
        pairs = list(zip(hjs[::2], hjs[1::2]))  # the two half-way joins of each join
        weights = [1.0 if policy == "EBestHJP" else min(plan.selectivities[a.input], plan.selectivities[b.input])
                   for a, b in pairs]
        for (a, b), wgt in zip(pairs, weights):
            best = a if a.productivity >= b.productivity else b
            alloc[best.render()] = mu * wgt / sum(weights)
    else:
        raise JaqpotError(f"unknown baseline policy {policy!r} (choose {', '.join(BASELINES)})")
    return Allocation(policy, mu, {}, alloc, evaluate(plan, alloc))


BASELINES = ("EqualHJ", "GlobalHJPR", "EBestHJP", "SBestHJP")


# --------------------------------------------------------------------------------------------
# freshness: refresh rates, GH-WMSCP, Algorithm 1
# --------------------------------------------------------------------------------------------


def refresh_rates(plan: BinaryPlan, freshness: Mapping[str, float] | float) -> dict[str, float]:
    """Refresh rates ``R_S`` of the staleness-susceptible states that fulfil the freshness
    predicates ``∮^I`` (seconds; one number for every stream, or per stream).  Lemma 1 asks
    ``∮^I ≥ |S_I| / λ_I + Σ_j |S_j| / λ'_j`` along the path; we split the slack
    ``∮^I − |S_I| / λ_I`` equally over the path's susceptible states (the paper leaves the
    split open) and take, per state, the largest rate any path asks of it.

    >>> refresh_rates(BinaryPlan.build((("A", "B"), "C"), {"A": 10, "B": 10, "C": 10},
    ...     {"A": 10, "B": 10, "C": 10, "AB": 40}, 0.1), 3.0)
    {'AB': 20.0}
    """
    if not isinstance(freshness, Mapping):
        freshness = {s: freshness for s in plan.streams}
    susceptible = set(plan.susceptible_states())
    out = {s: 0.0 for s in plan.susceptible_states()}
    for s, p in plan.paths().items():
        f = _positive(freshness.get(s), f"freshness predicate of stream {s}")
        slack = f - plan.sizes[s] / plan.rates[s]
        own = [h.input for h in p.hops[1:] if h.input in susceptible]
        if not own:
            continue
        if slack <= 0:
            raise JaqpotError(f"freshness predicate of stream {s} ({f:g}s) is shorter than the time its tuples stay "
                              f"in S_{s} ({plan.sizes[s] / plan.rates[s]:g}s): it cannot be fulfilled")
        for st in own:
            out[st] = max(out[st], plan.sizes[st] * len(own) / slack)
    return out


def coverage(plan: BinaryPlan) -> dict[str, dict[str, float]]:
    """Path → susceptible state → tuples refreshing it per unit of resources on the path (the
    path's share at the hop whose own state it is: ``X_j^I / X^I``, the coefficients of
    Problem 2's constraint 12).

    >>> coverage(running_example())
    {'A': {'AB': 0.26666666666666666}, 'B': {'AB': 0.3125}, 'C': {}}
    """
    susceptible = set(plan.susceptible_states())
    out = {}
    for s, p in plan.paths().items():
        shares = p.split(1.0)
        out[s] = {h.input: a for h, a in zip(p.hops, shares) if h.input in susceptible}
    return out


def gh_wmscp(plan: BinaryPlan, refresh: Mapping[str, float]) -> tuple[dict[str, float], bool]:
    """Cover the refresh rates with the fewest resources (Problem 2, weighted multiple set
    cover, continuous ``M_I``) by the greedy of GH-WMSCP: repeatedly give resources to the path
    that refreshes the most still-uncovered demand per resource, until a state is covered or
    the path's stream is exhausted.  Returns (resources per path, whether all is covered).

    >>> gh_wmscp(running_example(), {"AB": 5.0})
    ({'B': 16.0}, True)
    """
    for st, r in refresh.items():
        if st not in plan.susceptible_states():
            raise JaqpotError(f"{st} is not a staleness-susceptible state of the plan (they are: "
                              f"{', '.join(plan.susceptible_states()) or 'none'})")
        if r < 0:
            raise JaqpotError(f"refresh rate of state {st} must be non-negative, got {r}")
    cover = coverage(plan)
    residual = {st: float(r) for st, r in refresh.items() if r > 0}
    given: dict[str, float] = {}
    rank = {s: i for i, s in enumerate(plan.streams)}
    while residual:
        best, gain = None, 0.0
        for s in sorted(cover, key=rank.__getitem__):
            room = plan.capacity(s) - given.get(s, 0.0)
            g = sum(c for st, c in cover[s].items() if st in residual)
            if room > 1e-12 and g > gain * (1 + 1e-12):
                best, gain = s, g
        if best is None:
            return given, False
        room = plan.capacity(best) - given.get(best, 0.0)
        step = min([room] + [residual[st] / c for st, c in cover[best].items() if st in residual and c > 0])
        given[best] = given.get(best, 0.0) + step
        for st, c in cover[best].items():
            if st in residual:
                residual[st] -= c * step
                if residual[st] <= 1e-9 * max(1.0, refresh[st]):
                    del residual[st]
    return given, True


def jaqpot(plan: BinaryPlan, mu: float, refresh: Mapping[str, float] | None = None) -> Allocation:
    """Algorithm 1: ``Δμ`` to the freshness cover (GH-WMSCP), the rest by GrePP.  When the
    cover needs more than ``mu`` the allocation is infeasible: the cover is scaled down to
    ``mu`` (every resource spent on freshness, which is still not met).

    >>> a = jaqpot(running_example(), 30, {"AB": 5.0})
    >>> a.freshness, a.paths, a.throughput
    (16.0, {'B': 30.0}, 9.375)
    """
    mu = _resources(mu)
    cover, ok = gh_wmscp(plan, refresh or {})
    delta = sum(cover.values())
    paths = plan.paths()
    if not ok or delta > mu * (1 + 1e-12):
        scale = min(1.0, mu / delta) if delta > 0 else 0.0
        per_path = {s: x * scale for s, x in cover.items()}
        return Allocation("JAQPOT", mu, per_path, _allowances(plan, per_path),
                          sum(x * paths[s].productivity for s, x in per_path.items()), min(delta, mu), False)
    rest = grepp(plan, mu - delta, taken=cover)
    per_path = {s: cover.get(s, 0.0) + rest.paths.get(s, 0.0) for s in plan.streams
                if cover.get(s, 0.0) + rest.paths.get(s, 0.0) > 0}
    return Allocation("JAQPOT", mu, per_path, _allowances(plan, per_path),
                      sum(x * paths[s].productivity for s, x in per_path.items()), delta, True)


def staleness(plan: BinaryPlan, allowances: Mapping[str, float]) -> dict[str, float]:
    """Per stream, the predicted time (seconds) before its tuples leave every state they or
    their intermediate results occupy (Lemma 1's ``Σ |S_j| / λ_j``): its own state at rate
    ``λ``, each intermediate state at the allowance of the half-way join it probes with
    (``inf`` when that half-way join gets nothing: the state never refreshes).

    >>> staleness(running_example(), grepp(running_example(), 30).allowances)  # A: 50/1000 + 10/9.375
    {'A': 1.1166666666666667, 'B': 1.1066666666666667, 'C': 0.1}
    """
    out = {}
    for s, p in plan.paths().items():
        t = plan.sizes[s] / plan.rates[s]
        for h in p.hops[1:]:
            a = allowances.get(h.render(), 0.0)
            t += plan.sizes[h.input] / a if a > 0 else math.inf
        out[s] = t
    return out


def linear_plan(streams: Iterable[str]) -> Tree:
    """The left-deep plan ``((A ⋈ B) ⋈ C) ⋈ …`` over ``streams``.

    >>> linear_plan("ABCD")
    ((('A', 'B'), 'C'), 'D')
    """
    names = list(streams)
    if len(names) < 2:
        raise JaqpotError("a join plan needs at least two streams")
    tree: Tree = names[0]
    for n in names[1:]:
        tree = (tree, n)
    return tree
