"""A CPU budget for the reference executor: JAQPOT's probe allowances enforced at run time.

:mod:`mqjoin.planners.jaqpot` is the model: how μ tuples per second of probing should be divided over
the half-way joins of a binary plan.  This module makes the limit real.  A plan of the
``tree`` planner (one query, every inner node an MIR store) *is* a binary plan: the probe
edge that sends a tuple of ``X`` into the store of its sibling ``Y`` is the half-way join
``x ⋉ S_Y``.  :func:`binary_model` reads the JAQPOT model off such a plan (rates ``λ``,
``σ`` of a join from docs/model.md §2, state sizes by Appendix A's ``λ · T`` for time-based windows), an
allocation policy divides the budget
(:data:`ALLOCATIONS`: Algorithm 1, GrePP alone, and the paper's ρ_h baselines of
Appendix B), and :class:`ProbeBudget` is the executor's admission hook: per **cycle** of
event time (1 s by default) each half-way join may probe ``allowance · cycle`` times
(fractions carry over: the cumulative quota is ``⌊allowance · cycle · (c + 1)⌋`` after cycle
``c``, the paper's "mega cycle"); later probes of the cycle are **shed**.  Tuples are never
shed: every arrival and every intermediate result produced is still stored (insert and
purge are cheap, Section 2), so shed probes cost results, and results alone: a budgeted run's
results are a subset of the unbounded run's (:func:`deficit`).

What the budget costs is measured, not predicted: :class:`BudgetReport` has the probes
offered and admitted per half-way join and **staleness**: Lemma 1's
``|S_I| / λ_I + Σ_j |S_j| / λ_j`` per stream with the *measured* refresh rate ``λ_j`` of each
staleness-susceptible state (the intermediate results that reached it per second; ``inf``
when none did), against the freshness predicate ``∮^I`` (a multiple of the stream's window,
1.5× as in the paper's Section 5.1: see :func:`predicates`).

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planners.trees import JoinTree, plan_trees
>>> w = parse_workload('''
... defaults: {rate: 10, window: 2, selectivity: 0.1}
... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b]}}
... queries: {q: "A(a), B(a,b), C(b)"}
... ''')
>>> A, B, C = (JoinTree.leaf(r) for r in "ABC")
>>> plan = plan_trees(w, {"q": JoinTree.join([JoinTree.join([A, B]), C])})
>>> binary_tree_of(plan)
(('A', 'B'), 'C')
>>> m = binary_model(plan)
>>> m.halfway_joins(), m.sizes["AB"], m.selectivities["AB"]
((a ⋉ S_B, b ⋉ S_A, ab ⋉ S_C, c ⋉ S_AB), 40.0, 0.1)
>>> b = ProbeBudget(plan, 12, "GrePP")
>>> b.allocation.paths
{'C': 10.0, 'A': 2.0}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from mqjoin.planning.cost import join_size, window_of
from mqjoin.model.errors import JaqpotError
from mqjoin.planners.jaqpot import (BASELINES, Allocation, BinaryPlan, Tree, baseline, grepp, jaqpot, label,
                                    refresh_rates, staleness)
from mqjoin.planning.plan import Plan
from mqjoin.planners.trees import JoinTree
from mqjoin.runtime.rules import Probe
from mqjoin.model.workload import Workload

#: relative rounding of a ratio of statistics written with six significant digits
STATISTICS_ROUNDING = 1e-5

#: the allocation policies a budget can enforce: JAQPOT (Algorithm 1: freshness cover, then
#: GrePP), GrePP alone (throughput only), and the paper's ρ_h-based baselines
ALLOCATIONS = ("JAQPOT", "GrePP") + BASELINES

#: the freshness predicate as a multiple of each stream's window (the paper's Section 5.1)
FRESHNESS = 1.5


def binary_tree_of(plan: Plan) -> Tree:
    """The binary join tree a one-query plan executes (JAQPOT's nested pairs of relation
    names, larger child first, then by declaration order), read off its stores: the inner
    nodes are its MIR stores.  A typed error for any other plan.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.1}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b]}}
    ... queries: {q: "A(a), B(a,b), C(b)"}
    ... ''')
    >>> binary_tree_of(optimize(w, planner="mjoin").plan)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.JaqpotError: a CPU budget divides μ over the half-way joins of a binary join tree, but query q's
    plan joins A, B, C in one step: run it with planner 'tree' (--planner tree)
    """
    w = plan.workload
    if len(w.queries) != 1:
        raise JaqpotError(f"a CPU budget divides μ over the half-way joins of one binary join tree; the workload has "
                          f"{len(w.queries)} queries ({', '.join(w.query_names)}): run one query with planner 'tree'")
    q = w.queries[0]
    rank = w.relation_rank
    nodes = {frozenset(s.mir.relations) for s in plan.stores} | {frozenset(q.relations)}

    def build(rels: frozenset) -> Tree:
        if len(rels) == 1:
            return next(iter(rels))
        inside = [n for n in nodes if n < rels]
        kids = sorted((n for n in inside if not any(n < m for m in inside)),
                      key=lambda n: (-len(n), min(rank[r] for r in n)))
        if len(kids) != 2 or kids[0] | kids[1] != rels or kids[0] & kids[1]:
            raise JaqpotError(f"a CPU budget divides μ over the half-way joins of a binary join tree, but query "
                              f"{q.name}'s plan joins {', '.join(sorted(rels, key=rank.__getitem__))} in one step: "
                              "run it with planner 'tree' (--planner tree)")
        return (build(kids[0]), build(kids[1]))

    return build(frozenset(q.relations))


def _relations(tree: Tree) -> frozenset[str]:
    return frozenset([tree]) if isinstance(tree, str) else _relations(tree[0]) | _relations(tree[1])


def binary_model(plan: Plan) -> BinaryPlan:
    """JAQPOT's model of a binary tree plan as the executor runs it: stream rates ``λ``, per
    join ``X ⋈ Y`` the selectivity ``σ = |⋈(X ∪ Y)| / (|⋈X| · |⋈Y|)`` (docs/model.md §2; both states of an
    equi-join share it), and every state's size by Appendix A (``|S| = λ · T``): a stream's
    ``λ_X · w_X``; an intermediate state's production rate (its children's half-way joins,
    bottom-up) times the time an entry stays — until its *oldest* component leaves its window,
    ``w_X / |X|`` on average for uniform arrivals (the other components' ages are uniform over
    the window; ``w_X`` the smallest window, docs/model.md §5).  §2's ``|⋈X| · w_X`` would count
    combinations spread over ``|X|`` windows that the executor's windows never hold.

    >>> from mqjoin.datasets.jaqpot_paper import table3_linear
    >>> m = binary_model(table3_linear(duration=1).plan)  # ab: 300 · 2 + 300 · 2 per s, for 2/3 s / 2
    >>> {s: round(v) for s, v in m.sizes.items()}, m.saturation()
    ({'A': 200, 'B': 200, 'AB': 400, 'C': 200, 'ABC': 800, 'D': 200}, (6000.0, 9600.0))
    """
    return tree_model(plan.workload, plan.workload.queries[0].name, binary_tree_of(plan))


def tree_model(workload: Workload, query: str, tree: Tree | JoinTree) -> BinaryPlan:
    """:func:`binary_model` of query ``query`` joined by ``tree`` (nested pairs, or a binary
    :class:`~mqjoin.planners.trees.JoinTree`), without building the plan.

    >>> from mqjoin.datasets.jaqpot_paper import table3_linear
    >>> from mqjoin.planners.trees import binary_tree
    >>> w = table3_linear(duration=1).workload
    >>> tree_model(w, "q", binary_tree(w, "q", "bushy")).tree
    (('A', 'B'), ('C', 'D'))
    """
    w = workload
    if isinstance(tree, JoinTree):
        tree = _pairs(tree)
    classes = w.query(query).classes
    sizes: dict[str, float] = {}
    sel: dict[str, float] = {}

    def rec(node: Tree) -> float:
        """The production rate of ``node`` (filling ``sizes`` and ``sel`` below it)."""
        x = _relations(node)
        if isinstance(node, str):
            rate = w.rate(node)
        else:
            (left, right), (lx, rx) = node, (_relations(node[0]), _relations(node[1]))
            ratio = join_size(w, x, classes) / (join_size(w, lx, classes) * join_size(w, rx, classes))
            # the ratio of two products of the same statistics: 1 (every class at 1) comes out
            # 1.0000000000000002 by float rounding, or 1.000001 on statistics written with six
            # significant digits (a workload's YAML) — which is 1, not a selectivity above 1
            sel[label(left)] = sel[label(right)] = 1.0 if 1.0 < ratio <= 1.0 + STATISTICS_ROUNDING else ratio
            rl, rr = rec(left), rec(right)
            rate = rl * sel[label(right)] * sizes[label(right)] + rr * sel[label(left)] * sizes[label(left)]
        if node is not tree:
            sizes[label(node)] = rate * window_of(w, x) / len(x)
        return rate
    rec(tree)
    return BinaryPlan.build(tree, {r: w.rate(r) for r in _relations(tree)}, sizes, sel)


def _pairs(tree: JoinTree) -> Tree:
    if tree.is_leaf:
        return tree.relations[0]
    if len(tree.children) != 2:
        raise JaqpotError(f"JAQPOT allocates over binary join trees; {tree} joins {len(tree.children)} inputs at once")
    return (_pairs(tree.children[0]), _pairs(tree.children[1]))


def production(model: BinaryPlan) -> dict[str, float]:
    """Tuples per second every state receives with no CPU limit: a stream's rate, a join's
    output (both half-way joins probing everything).

    >>> from mqjoin.planners.jaqpot import figure_2b
    >>> production(figure_2b())  # ab: 500 · 0.5 + 700 · 5
    {'A': 500.0, 'B': 700.0, 'AB': 3750.0, 'C': 1000.0}
    """
    out: dict[str, float] = {}

    def rec(node: Tree) -> float:
        if isinstance(node, str):
            rate = float(model.rates[node])
        else:
            left, right = rec(node[0]), rec(node[1])
            rate = left * model.productivity(label(node[1])) + right * model.productivity(label(node[0]))
        if node is not model.tree:
            out[label(node)] = rate
        return rate
    rec(model.tree)
    return out


def predicates(model: BinaryPlan, freshness: float = FRESHNESS) -> dict[str, float]:
    """The freshness predicate ``∮^I`` of every stream: ``freshness`` times its staleness with
    no CPU limit (Lemma 1 at full refresh rates).  With time-based windows (Appendix A:
    ``|S| = λ · T``) a state refreshed at its full rate holds a tuple for its window ``T``, so
    this is ``freshness`` times the windows summed along the stream's path — the paper's
    "1.5× the window" for a one-hop path.  (Against the stream's own window alone, as the
    paper states it for count-based windows, the predicate of a path through ``n`` states
    would be unreachable even without a limit: Lemma 1 adds a window per state.)

    >>> from mqjoin.planners.jaqpot import figure_2b
    >>> predicates(figure_2b())  # A: 1.5 · (5000/500 + 200/3750)
    {'A': 15.08, 'B': 0.294285714286, 'C': 1.5}
    """
    f = _number(freshness, "the freshness predicate (a multiple of the window)")
    if not f > 1 or math.isinf(f):
        raise JaqpotError(f"the freshness predicate must be a finite multiple of the windows above 1 (the paper uses "
                          f"1.5 to 5), got {freshness!r}")
    full = production(model)
    hops = {h.render(): full[h.input] for h in model.halfway_joins()}
    return {s: round(f * t, 12) for s, t in staleness(model, hops).items()}


def policy_name(policy: str) -> str:
    """The allocation policy ``policy`` names, case-insensitively.

    >>> policy_name("jaqpot"), policy_name("globalhjpr")
    ('JAQPOT', 'GlobalHJPR')
    """
    for p in ALLOCATIONS:
        if isinstance(policy, str) and policy.lower() == p.lower():
            return p
    raise JaqpotError(f"unknown allocation policy {policy!r} (choose one of {', '.join(ALLOCATIONS)})")


def allocate(model: BinaryPlan, mu: float, policy: str = "JAQPOT", freshness: float = FRESHNESS) -> Allocation:
    """The allowances of ``policy`` for ``mu`` probes per second (``inf``: unlimited, every
    half-way join probes everything).

    >>> from mqjoin.planners.jaqpot import figure_2b
    >>> allocate(figure_2b(), 300, "ebesthjp").throughput, allocate(figure_2b(), math.inf).allowances["a ⋉ S_B"]
    (750.0, inf)
    """
    name = policy_name(policy)
    mu = budget_value(mu)
    if math.isinf(mu):
        return Allocation(name, mu, {}, {h.render(): math.inf for h in model.halfway_joins()},
                          model.saturation()[1])
    if name == "JAQPOT":
        return jaqpot(model, mu, refresh_rates(model, predicates(model, freshness)))
    if name == "GrePP":
        return grepp(model, mu)
    return baseline(model, mu, name)


def _number(value, what: str) -> float:
    if isinstance(value, bool):
        raise JaqpotError(f"{what} must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise JaqpotError(f"{what} must be a number, got {value!r}") from None
    if math.isnan(x):
        raise JaqpotError(f"{what} must be a number, got {value!r}")
    return x


def budget_value(mu) -> float:
    """A CPU budget μ (probes per second; ``inf`` = unlimited), checked.

    >>> budget_value(-1)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.JaqpotError: the CPU budget must be a non-negative number of probes per second, got -1
    """
    x = _number(mu, "the CPU budget (probes per second)")
    if x < 0:
        raise JaqpotError(f"the CPU budget must be a non-negative number of probes per second, got {mu!r}")
    return x


class _Gate:
    """The admission of one half-way join: its quota per cycle, and what it offered and
    admitted."""

    def __init__(self, allowance: float, cycle: float):
        self.per_cycle = allowance * cycle
        self.cycle = cycle
        self.current: int | None = None
        self.left = 0
        self.offered = 0
        self.admitted = 0

    def __call__(self, T: float) -> bool:
        self.offered += 1
        if math.isinf(self.per_cycle):
            self.admitted += 1
            return True
        c = math.floor(T / self.cycle)
        if c != self.current:
            self.current = c
            self.left = math.floor(self.per_cycle * (c + 1)) - math.floor(self.per_cycle * c)
        if self.left <= 0:
            return False
        self.left -= 1
        self.admitted += 1
        return True


@dataclass(frozen=True)
class BudgetReport:
    """What a budgeted run did: the policy's allocation, per half-way join the probes offered
    and admitted, per stream the freshness predicate and the staleness measured (Lemma 1 with
    the measured refresh rates; see the module doc)."""

    allocation: Allocation
    cycle: float
    duration: float
    offered: Mapping[str, int]
    admitted: Mapping[str, int]
    predicates: Mapping[str, float]
    staleness: Mapping[str, float]

    @property
    def probes(self) -> int:
        return sum(self.admitted.values())

    @property
    def shed(self) -> int:
        return sum(self.offered.values()) - self.probes

    @property
    def stale(self) -> tuple[str, ...]:
        """Streams whose measured staleness exceeds their freshness predicate."""
        return tuple(s for s, t in self.staleness.items() if t > self.predicates[s] * (1 + 1e-9))

    def summary(self) -> dict:
        """The report as JSON values; JSON has no infinity, so ``null`` stands for it: an
        unlimited budget or allowance, or a stream whose path has a state never refreshed."""
        return {"cpu_budget": _finite(self.allocation.mu), "allocation": self.allocation.policy, "cycle": self.cycle,
                "probes": self.probes, "shed": self.shed,
                "allowances": {h: _finite(a) for h, a in self.allocation.allowances.items()},
                "admitted": dict(self.admitted), "offered": dict(self.offered),
                "freshness": dict(self.predicates),
                "staleness": {s: _finite(t) for s, t in self.staleness.items()},
                "stale": list(self.stale)}


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else x


class ProbeBudget:
    """The executor's admission hook (``Executor(..., admission=budget)``): one gate per
    half-way join, shared by every probe edge that is that half-way join.

    ``mu``: probes per second (``inf``: unlimited); ``policy``: one of :data:`ALLOCATIONS`;
    ``cycle``: seconds of event time per execution cycle; ``freshness``: the predicates as a
    multiple of the windows (JAQPOT covers them; every policy is measured against them)."""

    def __init__(self, plan: Plan, mu: float, policy: str = "JAQPOT", cycle: float = 1.0,
                 freshness: float = FRESHNESS):
        c = _number(cycle, "the cycle (seconds of event time)")
        if not c > 0 or math.isinf(c):
            raise JaqpotError(f"the cycle must be a positive number of seconds, got {cycle!r}")
        self.model = binary_model(plan)
        self.cycle = c
        self.predicates = predicates(self.model, freshness)
        self.allocation = allocate(self.model, mu, policy, freshness)
        self.gates: dict[str, _Gate] = {}
        self.sets = {_relations(n): label(n) for n in _subtrees(self.model.tree)}

    def __call__(self, rule: Probe) -> Callable[[float], bool]:
        x, y = frozenset(rule.travelling), frozenset(rule.mir.relations)
        hj = f"{self.sets[x].lower()} ⋉ S_{self.sets[y]}" if x in self.sets and y in self.sets else None
        if hj not in self.allocation.allowances:
            raise JaqpotError(f"the probe {rule.label} of {', '.join(sorted(x))} into {', '.join(sorted(y))} is no "
                              "half-way join of the plan's binary tree")
        gate = self.gates.get(hj)
        if gate is None:
            gate = self.gates[hj] = _Gate(self.allocation.allowances[hj], self.cycle)
        return gate

    def report(self, duration: float) -> BudgetReport:
        """The report after a run spanning ``duration`` seconds of event time."""
        hjs = [h.render() for h in self.model.halfway_joins()]
        offered = {h: self.gates[h].offered if h in self.gates else 0 for h in hjs}
        admitted = {h: self.gates[h].admitted if h in self.gates else 0 for h in hjs}
        # a susceptible state's refresh rate: its tuples produced per second, i.e. the probes its
        # tuples offered to the half-way join they climb by (staleness() reads them there)
        refresh = {h: n / duration if duration > 0 else math.inf for h, n in offered.items()}
        return BudgetReport(self.allocation, self.cycle, duration, offered, admitted, self.predicates,
                            staleness(self.model, refresh))


def _subtrees(tree: Tree) -> list[Tree]:
    return [tree] if isinstance(tree, str) else _subtrees(tree[0]) + _subtrees(tree[1]) + [tree]


def deficit(results: Mapping[str, int], unbounded: Mapping[str, int]) -> dict[str, float]:
    """Per query, the share of the unbounded run's results a budgeted run did not produce.

    >>> deficit({"q": 30}, {"q": 120})
    {'q': 0.75}
    """
    return {q: (1 - results.get(q, 0) / n) if n else 0.0 for q, n in unbounded.items()}
