"""The ``pmjoin`` planner: the three schemes of every query, the PMJoins Algorithm 2 and the
heuristic choose with their value groups, and the ordinary plans made of them.

:func:`pmjoin_report` plans every query (:class:`QueryPMJoin`: centralized, distributed and
partition-based cost); :func:`pmjoin_plan` is the unpartitioned placement as a
:class:`~mqjoin.planning.plan.Plan`, :func:`group_plan` the plan of one value group and
:func:`group_results` the union of the groups' results.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1, EXAMPLE_1_VALUE_RATES
>>> w = parse_workload(EXAMPLE_1)
>>> qp = pmjoin_report(w, groups=3, method="range", rates=EXAMPLE_1_VALUE_RATES).queries[0]
>>> [str(pm.cls) for pm in qp.pmjoins], round(qp.partitioned, 4)
(['{S1.dest=S2.dest=S3.dest}'], 0.0696)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mqjoin.model.errors import PlannerError
from mqjoin.planning.plan import Plan
from mqjoin.planners.contract import Built
from mqjoin.planners.trees import plan_trees
from mqjoin.planning.options import OptimizeOptions
from mqjoin.model.tables import Table
from mqjoin.model.workload import JoinClass, Query, Workload
from mqjoin.planners.pmjoin.streams import (
    Operator, StreamModel, ValueRates, centralized_cost, check_sizes, communication_cost, node_of, stream_join_opt)
from mqjoin.planners.pmjoin.values import ValueGroups, check_partitioning, partition_values, plain_value

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

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_2
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
        check_partitioning(self.groups, self.method)
        check_sizes(self.sizes)


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

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_2
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

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1, EXAMPLE_1_VALUE_RATES
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

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_2
    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_2)
    >>> pmjoin_plan(w, pmjoin_report(w, sizes="unit")).probe_orders()["q"]["S1"]
    'S1 » (S0⋈S2⋈S3)[a] » S4[d]'
    """
    return plan_trees(workload, {qp.query: qp.tree.join_tree() for qp in report.queries}, mode, partitioning)


def pmjoin_built(workload: Workload, options: OptimizeOptions) -> Built:
    """The ``pmjoin`` planner's :class:`~mqjoin.planners.contract.BuildRule`: the report of
    every query's placement (``options.pmjoin``, default :class:`PMJoinOptions`) and its deployed
    plan (:func:`pmjoin_plan`); the trees rendered with their placement."""
    report = pmjoin_report(workload, options.pmjoin or PMJoinOptions())
    return Built(workload, pmjoin_plan(workload, report, options.mode, options.partitioning),
                 {qp.query: qp.tree.join_tree() for qp in report.queries},
                 {qp.query: str(qp.tree) for qp in report.queries}, report)


def group_plan(workload: Workload, qp: QueryPMJoin, pm: PMJoin, group: int) -> Plan:
    """The ordinary plan of one value group of a PMJoin: the query alone, with the group's tree."""
    return plan_trees(workload.restricted_to([qp.query]), {qp.query: group_tree(qp, pm, group).join_tree()})


def group_results(workload: Workload, qp: QueryPMJoin, pm: PMJoin, tables: Mapping[str, Table]) -> set[tuple[int, ...]]:
    """Run every value group's plan (:func:`group_plan`) on the reference engine over its
    substreams — the rows of the PMJoin's relations whose value of its class lies in the group
    — and unite the results (row indices of the full inputs).

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1
    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.runtime.oracle import oracle_results
    >>> from mqjoin.planners.pmjoin.values import value_rates
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
