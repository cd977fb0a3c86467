"""AJoin's optimiser (Karimov, Rabl, Markl: *AJoin: Ad-hoc Stream Joins at Scale*, PVLDB 13(4),
Section 4) as planner ``ajoin``: its plans are ordinary plans (binary join trees, every inner
node an MIR store, deployed in one namespace), so they run on every engine and are costed by
docs/model.md §4 like any plan.

**Query grouping.**  Queries whose filters (docs/model.md §7) would make them share little are kept
apart: for queries with a common join ``P`` (the relations all of them read, joined alike,
connected), the *shared* cost is the cardinality of ``P`` over the union of their inputs and
the *separate* cost the sum of each query's own cardinality of ``P`` (the paper's Figure 6:
``COST = Crd(S1) · Crd(S2)``, with our selectivities for the join condition; a count over
the horizon, as in the reordering below).  Grouping is
greedy, as in the paper's Figure 7(a): the pair with the least shared cost among the pairs
that gain becomes a group, which is then **eagerly extended** by every other ungrouped query
for which executing it with the group costs less than running the group and the query apart;
repeat.  (The paper's Figure 7(a) writes the extension test against every member run apart;
that sum contains the group's own saving, so it admits queries that make the group dearer —
we compare with the group as it runs.)  ``Crd`` of a union
comes from data (:func:`union_from_data`) or, from pass fractions alone, under independence
(``f_G = 1 − Π(1 − f_q)``, :func:`union_independent`).  A group then shares its stores over
the union of its members' filters (:meth:`mqjoin.model.workload.Workload.with_groups`).

**Join reordering** (Figure 7(b)): iterative dynamic programming with block size two.  Every
query starts from its relations; each iteration considers, per unfinished query, every join
of two of its current sub-plans (linked by a class), with the *shared cost* — the
cardinality of ``P``, the results a run over the horizon produces
(:func:`~mqjoin.planning.cost.join_results`, ``|⋈P| · H^|P|`` under full history, docs/model.md §2
and §4 with pass fractions), divided by the number of query plans that have
the same sub-plan available (same tree over the same MIR: same relations, classes and
selections; a query group makes its members' MIRs equal).  The cheapest is chosen for every
query that shares it, then the next cheapest among the queries not served yet, until every
unfinished query advanced once; the chosen sub-plans replace their parts (the paper's
``T1``, ``T2``) and the next iteration starts.

**Ad-hoc batches** (:func:`replan`): a batch of created and deleted queries is planned
incrementally — groups are kept (deleted members leave), each created query joins the
existing group where that gains most or stays alone (the paper's Q7), and only the created
queries and the members of groups that changed are reordered, against the fixed trees of the
others — unless the batch changes more than half of the running queries (the paper's 50 %
threshold): then everything is re-optimised.

>>> from mqjoin.model.workload import parse_workload
>>> w = figure6_workload()
>>> step = sharing_costs(w, ["q4", "q5"], union_from_data(figure6_tables()))
>>> step
q4+q5: shared 36 vs separate 18 → separate
>>> query_groups(w, union_from_data(figure6_tables()))[0]
()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from mqjoin.planning.candidates import MIR
from mqjoin.planning.cost import is_close, join_results, least
from mqjoin.model.errors import PlannerError
from mqjoin.model.filters import Filter
from mqjoin.planners.contract import Built
from mqjoin.planners.trees import JoinTree, plan_joint_trees
from mqjoin.model.tables import Table
from mqjoin.model.workload import JoinClass, Workload, is_connected, parse_workload, restrict_classes
from mqjoin.planning.options import OptimizeOptions

if TYPE_CHECKING:
    from mqjoin.planning.plan import Plan

#: ``Crd`` of the paper: the pass fraction of the union of some queries' filters on one
#: relation (``None``: a query that does not filter it, so everything passes)
UnionFraction = Callable[[str, Sequence["Filter | None"]], float]

#: the paper's full re-optimisation threshold: created + deleted queries over running ones
FULL_REOPTIMISATION = 0.5

#: Figure 6 of the paper as a workload: Q4 and Q5 join V and W, each keeps three tuples of
#: each stream, and no tuple passes both (query-sets 10 and 01)
FIGURE6 = """
defaults: {selectivity: 1, rate: 6}
relations: {V: {attributes: [k, q]}, W: {attributes: [k, q]}}
queries:
  q4: {join: "V(k), W(k)", where: "V.q = 4 AND W.q = 4"}
  q5: {join: "V(k), W(k)", where: "V.q = 5 AND W.q = 5"}
filters: {q4.V: 0.5, q4.W: 0.5, q5.V: 0.5, q5.W: 0.5}
"""


def figure6_workload() -> Workload:
    """:data:`FIGURE6` as a workload."""
    return parse_workload(FIGURE6)


def figure6_tables() -> dict[str, Table]:
    """The tuples of Figure 6: ``t1…t3`` (V) and ``t4…t6`` (W) pass Q4's filter only,
    ``t7…t9`` (V) and ``t10…t12`` (W) Q5's only; every tuple has the same key."""
    return {r: Table.from_columns(r, {"ts": [0.0] * 6, "k": [1] * 6, "q": [4, 4, 4, 5, 5, 5]}) for r in "VW"}


def union_independent(workload: Workload) -> UnionFraction:
    """``Crd`` from pass fractions alone: ``1 − Π(1 − f)`` over the distinct filters.

    >>> w = figure6_workload()
    >>> union_independent(w)("V", [w.query("q4").filter_of("V"), w.query("q5").filter_of("V")])
    0.75
    """
    def crd(relation: str, filters: Sequence[Filter | None]) -> float:
        if any(f is None for f in filters):
            return 1.0
        miss = 1.0
        for f in {f.comparisons: f for f in filters}.values():
            miss *= 1.0 - (f.fraction if f.fraction is not None else 1.0)
        return 1.0 - miss

    return crd


def union_from_data(tables: Mapping[str, Table]) -> UnionFraction:
    """``Crd`` from data: the share of the relation's rows that pass at least one filter.

    >>> w = figure6_workload()
    >>> union_from_data(figure6_tables())("V", [w.query("q4").filter_of("V"), w.query("q5").filter_of("V")])
    1.0
    """
    def crd(relation: str, filters: Sequence[Filter | None]) -> float:
        if any(f is None for f in filters):
            return 1.0
        t = tables[relation]
        names = sorted({c.attr.name for f in filters for c in f.comparisons})
        if not len(t):
            return 1.0
        passing = sum(any(f.passes({a: t.columns[a][i] for a in names}) for f in filters) for i in range(len(t)))
        return passing / len(t)

    return crd


# --------------------------------------------------------------------------------------------
# query grouping
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupingStep:
    """One comparison of the grouping: shared vs separate cost of ``queries``."""

    queries: tuple[str, ...]
    shared: float
    separate: float

    @property
    def gains(self) -> bool:
        return self.shared < self.separate and not is_close(self.shared, self.separate)

    def __repr__(self) -> str:
        return (f"{'+'.join(self.queries)}: shared {self.shared:.6g} vs separate {self.separate:.6g} → "
                f"{'group' if self.gains else 'separate'}")


def common_join(workload: Workload, queries: Iterable[str]) -> tuple[frozenset[str], tuple[JoinClass, ...]] | None:
    """The join ``queries`` have in common: the relations all of them read, if every query
    joins them alike (same restricted classes) and they are connected; else ``None``.

    >>> w = figure6_workload()
    >>> sorted(common_join(w, ["q4", "q5"])[0])
    ['V', 'W']
    """
    qs = [workload.query(n) for n in queries]
    rels = frozenset.intersection(*(q.relation_set for q in qs))
    if len(rels) < 2:
        return None
    classes = {restrict_classes(q.classes, rels) for q in qs}
    if len(classes) != 1:
        return None
    (cs,) = classes
    return (rels, cs) if is_connected(rels, cs) else None


def _cardinality(workload: Workload, rels: frozenset[str], classes: tuple[JoinClass, ...],
                 fraction: Callable[[str], float]) -> float:
    size = join_results(workload, rels, classes)
    for r in rels:
        size *= fraction(r)
    return size


def sharing_costs(workload: Workload, queries: Sequence[str], crd: UnionFraction | None = None,
                  group: Sequence[str] = ()) -> GroupingStep | None:
    """Shared vs separate cost of ``group`` + ``queries`` over their common join (``None``
    when they have none): the cardinality over the union of all their inputs vs the sum of
    each query's own — the group, when given, counted once as shared (a query joining an
    existing group must gain against the group as it runs, not against its members run apart).

    >>> w = figure6_workload()
    >>> sharing_costs(w, ["q5"], union_from_data(figure6_tables()), group=["q4"])
    q4+q5: shared 36 vs separate 18 → separate
    """
    crd = crd or union_independent(workload)
    everyone = list(group) + list(queries)
    common = common_join(workload, everyone)
    if common is None:
        return None
    rels, classes = common

    def card(names: Sequence[str]) -> float:
        qs = [workload.query(n) for n in names]
        return _cardinality(workload, rels, classes, lambda r: crd(r, [q.filter_of(r) for q in qs]))

    separate = sum(card([n]) for n in queries) + (card(group) if group else 0.0)
    return GroupingStep(tuple(everyone), card(everyone), separate)


def query_groups(workload: Workload, crd: UnionFraction | None = None,
                 groups: Iterable[Iterable[str]] = ()) -> tuple[tuple[tuple[str, ...], ...], tuple[GroupingStep, ...]]:
    """AJoin's query groups (see the module doc) and the comparisons that decided them.
    ``groups``: groups to keep (incremental re-planning); their queries are not regrouped,
    but each ungrouped query joins the kept group it gains most with, if any."""
    crd = crd or union_independent(workload)
    names = list(workload.query_names)
    found = [list(g) for g in groups]
    log: list[GroupingStep] = []

    def free() -> list[str]:
        taken = {n for g in found for n in g}
        return [n for n in names if n not in taken]

    def extend(group: list[str]) -> None:  # eager extension
        for n in free():
            step = sharing_costs(workload, [n], crd, group)
            if step is not None:
                log.append(step)
                if step.gains:
                    group.append(n)

    for n in free():  # kept groups first: a query joins the one it gains most with (the paper's Q7)
        steps = [(s, g) for g in found if (s := sharing_costs(workload, [n], crd, g)) is not None]
        log.extend(s for s, _ in steps)
        gaining = [(s, g) for s, g in steps if s.gains]
        if gaining:
            max(gaining, key=lambda sg: sg[0].separate - sg[0].shared)[1].append(n)
    while True:
        left = free()
        pairs = [s for i, a in enumerate(left) for b in left[i + 1:]
                 if (s := sharing_costs(workload, [a, b], crd)) is not None]
        log.extend(pairs)
        gaining = [s for s in pairs if s.gains]
        if not gaining:
            break
        best = min(gaining, key=lambda s: (s.shared, names.index(s.queries[0]), names.index(s.queries[1])))
        group = list(best.queries)
        found.append(group)
        extend(group)
    out = tuple(sorted(tuple(sorted(g, key=names.index)) for g in found if len(g) > 1))
    return out, tuple(log)


# --------------------------------------------------------------------------------------------
# join reordering: iterative dynamic programming with shared costs
# --------------------------------------------------------------------------------------------


def _key(workload: Workload, query: str, tree: JoinTree) -> tuple:
    """A sub-plan's identity: its tree over its MIR (relations, classes, selections)."""
    q = workload.query(query)
    return (tree.render(), MIR.of(workload, tree.relations, q.classes, workload.selections(query)))


def _subtrees(tree: JoinTree) -> Iterable[JoinTree]:
    return (n for n in tree.nodes() if not n.is_leaf)


def join_trees(workload: Workload, fixed: Mapping[str, JoinTree] | None = None) -> dict[str, JoinTree]:
    """Every query's binary join tree by AJoin's iterative DP with shared costs (module doc);
    ``fixed``: trees of queries that are not reordered (their sub-plans count as shared).

    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q1: "A(a), B(a,b), C(b)", q2: "B(b), C(b,c), D(c)"}
    ... selectivities: {B.b = C.b: 0.001}
    ... ''')
    >>> join_trees(w)     # B ⋈ C is the cheapest, and shared: cost 10 / 2
    {'q1': ((B ⋈ C) ⋈ A), 'q2': ((B ⋈ C) ⋈ D)}
    """
    fixed = dict(fixed or {})
    units: dict[str, list[JoinTree]] = {q.name: [JoinTree.leaf(r) for r in q.relations]
                                        for q in workload.queries if q.name not in fixed}
    if not units and not fixed:
        raise PlannerError("the workload has no queries to plan: add one under 'queries'")
    rank = workload.relation_rank
    existing: dict[tuple, set[str]] = {}
    for name, tree in fixed.items():
        for t in _subtrees(tree):
            existing.setdefault(_key(workload, name, t), set()).add(name)
    while any(len(u) > 1 for u in units.values()):
        open_ = [n for n, u in units.items() if len(u) > 1]
        cands: dict[str, list[tuple[tuple, JoinTree, JoinTree, JoinTree]]] = {}
        available: dict[tuple, set[str]] = {}
        for n in open_:
            q = workload.query(n)
            for i, a in enumerate(units[n]):
                for b in units[n][i + 1:]:
                    if not any(c.relations & set(a.relations) and c.relations & set(b.relations) for c in q.classes):
                        continue
                    t = JoinTree.join([a, b])
                    k = _key(workload, n, t)
                    cands.setdefault(n, []).append((k, a, b, t))
                    available.setdefault(k, set()).add(n)
        served: set[str] = set()
        while len(served) < len(open_):
            options = []
            for n in open_:
                if n in served:
                    continue
                q = workload.query(n)
                for k, _a, _b, t in cands[n]:
                    sharers = (available[k] - served) | existing.get(k, set())
                    scost = join_results(workload, t.relations, q.classes, workload.selections(n)) / len(sharers)
                    options.append((scost, (min(rank[r] for r in t.relations), k[0], n), k))
            _, _, k = least(options, lambda o: o[0], lambda o: o[1])
            for n in sorted(available[k] - served):
                for kk, a, b, t in cands[n]:
                    if kk == k:
                        units[n] = [u for u in units[n] if u is not a and u is not b] + [t]
                        break
                served.add(n)
    out = {**fixed, **{n: u[0] for n, u in units.items()}}
    return {q.name: out[q.name] for q in workload.queries}


# --------------------------------------------------------------------------------------------
# plans and ad-hoc batches
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AjoinPlan:
    """What AJoin decided for a workload: its groups (in ``workload.groups``), every query's
    join tree, the grouping comparisons, and whether the last batch was re-planned in full."""

    workload: Workload
    trees: Mapping[str, JoinTree]
    grouping: tuple[GroupingStep, ...] = ()
    full: bool = True
    reordered: tuple[str, ...] = field(default=())

    def plan(self, partitioning: str = "single") -> Plan:
        """The ordinary plan: the trees deployed together in one namespace (identical steps run
        once), each store partitioned for the steps of all queries."""
        return plan_joint_trees(self.workload, self.trees, partitioning)


def ajoin(workload: Workload, crd: UnionFraction | None = None) -> AjoinPlan:
    """Group, then reorder every query (a full optimisation).

    >>> w = figure6_workload()
    >>> a = ajoin(w, union_from_data(figure6_tables()))
    >>> a.workload.groups, a.trees
    ((), {'q4': (V ⋈ W), 'q5': (V ⋈ W)})
    """
    groups, log = query_groups(workload, crd)
    grouped = workload.with_groups(groups)
    trees = join_trees(grouped)
    return AjoinPlan(grouped, trees, log, True, tuple(trees))


def replan(previous: AjoinPlan, workload: Workload, crd: UnionFraction | None = None) -> AjoinPlan:
    """AJoin's plan of ``workload`` after a batch of created and deleted queries (relative to
    ``previous``): incremental (module doc), or a full :func:`ajoin` when the batch changes
    more than half of the running queries."""
    before = set(previous.workload.query_names)
    now = set(workload.query_names)
    created, deleted = now - before, before - now
    if len(created) + len(deleted) > FULL_REOPTIMISATION * len(before):
        return ajoin(workload, crd)
    kept_groups = [[n for n in g if n in now] for g in previous.workload.groups]
    groups, log = query_groups(workload, crd, [g for g in kept_groups if len(g) > 1])
    grouped = workload.with_groups(groups)
    changed = {n for g in set(groups) ^ set(previous.workload.groups) for n in g}
    affected = created | (changed & now)
    fixed = {n: t for n, t in previous.trees.items() if n in now and n not in affected}
    trees = join_trees(grouped, fixed)
    return AjoinPlan(grouped, trees, log, False, tuple(n for n in workload.query_names if n in affected))


def ajoin_tree(workload: Workload, query: str, options: OptimizeOptions) -> JoinTree:
    """The ``ajoin`` planner's :class:`~mqjoin.planners.contract.TreeRule`: AJoin's join order of
    the query alone (modes ``individual`` and ``shared``)."""
    return join_trees(workload.restricted_to([query]))[query]


def ajoin_groups(workload: Workload, options: OptimizeOptions) -> Built | None:
    """The ``ajoin`` planner's :class:`~mqjoin.planners.contract.BuildRule`: in mode ``mqo``,
    AJoin's query groups and reordering with shared costs (:func:`ajoin`); else ``None`` (each
    query alone, :func:`ajoin_tree`)."""
    if options.mode != "mqo":
        return None
    planned = ajoin(workload)
    return Built(planned.workload, planned.plan(options.partitioning), dict(planned.trees))


def ajoin_optimizer(crd: UnionFraction | None = None) -> Callable:
    """AJoin as the optimiser of an adaptive run (:class:`mqjoin.adaptive.controller.AdaptiveController`,
    ``mqjoin run --changes … --planner ajoin``): the first call plans in full, every later one
    re-plans the previous plan for the batch of created and deleted queries (:func:`replan`),
    so AJoin's grouping decides where a new query attaches.  ``history``: every
    :class:`AjoinPlan`, in call order.

    >>> from mqjoin.adaptive.policy import AdaptivePolicy
    >>> opt = ajoin_optimizer()
    >>> w = figure6_workload()
    >>> opt(w, AdaptivePolicy()).probe_cost, opt(w.without_query("q5"), AdaptivePolicy()).probe_cost
    (12.0, 6.0)
    >>> [(a.full, a.reordered) for a in opt.history]
    [(True, ('q4', 'q5')), (False, ())]
    """
    history: list[AjoinPlan] = []

    def optimise(workload: Workload, policy) -> Plan:
        history.append(ajoin(workload, crd) if not history else replan(history[-1], workload, crd))
        return history[-1].plan(policy.partitioning)

    optimise.history = history  # type: ignore[attr-defined]
    return optimise
