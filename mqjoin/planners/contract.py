"""What a planner is to the rest of mqjoin: a function from a workload and its options to an
:class:`~mqjoin.planning.result.OptimizeResult` (:class:`Planner`).

Every entry of :mod:`mqjoin.planners.registry` holds one, so
:func:`mqjoin.planning.optimizer.optimize` runs any planner the same way and a new planner is
one module (its plan function) plus one registry entry.  CLASH's is the ILP
(:func:`mqjoin.planning.clash.plan_clash`); the planners it is compared with make their plans
by a rule, and :class:`ByRule` turns a rule into a :class:`Planner`: each query's operator tree
(:class:`TreeRule`, the query planned alone) or a plan of the whole workload (:class:`BuildRule`,
e.g. AJoin's groups or PMJoin's placement), timed and reported with empty ILP statistics.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planners.trees import JoinTree
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
...             T: {attributes: [b], rate: 100}}
... queries: {q: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
... ''')
>>> flat = ByRule("flat", tree=lambda workload, query, options: JoinTree.join(
...     JoinTree.leaf(r) for r in workload.query(query).relations))
>>> r = flat(w, OptimizeOptions(planner="flat"))
>>> r.trees, r.probe_cost, r.ilp.solver
({'q': '(R ⋈ S ⋈ T)'}, 475.0, 'flat')
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from mqjoin.model.errors import PlannerError
from mqjoin.model.workload import Workload
from mqjoin.planning.options import OptimizeOptions
from mqjoin.planning.plan import Plan
from mqjoin.planning.result import IlpStats, OptimizeResult
from mqjoin.planners.trees import JoinTree, plan_trees


class Planner(Protocol):
    """The contract of a planner: ``planner(workload, options)`` plans every query of
    ``workload`` under ``options`` (their fit to this planner already checked by
    :func:`mqjoin.planners.registry.check_fit`) and returns the plan with its costs and the
    statistics of the solve, ``options.planner`` as its ``planner``.  It raises only typed
    errors (:mod:`mqjoin.model.errors`), never changes ``workload`` (a value) and is
    deterministic: the same workload and options give the same plan."""

    def __call__(self, workload: Workload, options: OptimizeOptions, /) -> OptimizeResult: ...


class TreeRule(Protocol):
    """A rule that makes one query's operator tree, the query planned alone (MJoin's flat
    node, a binary tree of a shape, …)."""

    def __call__(self, workload: Workload, query: str, options: OptimizeOptions, /) -> JoinTree: ...


@dataclass(frozen=True)
class Built:
    """A plan a rule made of a whole workload: the workload it plans (e.g. with the query groups
    it formed), the plan, each query's operator tree, rendered (``trees``; PMJoin's with its
    placement) and as values (``join_trees``), and what the planner reports beside the plan."""

    workload: Workload
    plan: Plan
    join_trees: Mapping[str, JoinTree]
    trees: Mapping[str, str] = field(default_factory=dict)
    report: Any = None

    def __post_init__(self) -> None:
        if not self.trees:
            object.__setattr__(self, "trees", {q: str(t) for q, t in self.join_trees.items()})


class BuildRule(Protocol):
    """A rule that plans a whole workload at once; ``None`` when it does not apply to these
    options (then :class:`ByRule` plans each query alone by its :class:`TreeRule`)."""

    def __call__(self, workload: Workload, options: OptimizeOptions, /) -> Built | None: ...


@dataclass(frozen=True)
class ByRule:
    """A :class:`Planner` whose plan a rule makes, not a solver: ``build`` for the whole
    workload where it applies, else ``tree`` for every query alone (no query groups), deployed
    in the options' mode (``mqo`` means ``shared``: nothing is optimised jointly).  ``solver``:
    the label of its results (``{shape}``: the options' tree shape)."""

    solver: str
    tree: TreeRule | None = None
    build: BuildRule | None = None

    def operator_trees(self, workload: Workload, options: OptimizeOptions) -> dict[str, JoinTree]:
        """Query → its operator tree by :attr:`tree`, each query alone."""
        if self.tree is None:
            raise PlannerError(f"the {options.planner} planner has no rule-made operator tree per query")
        return {q.name: self.tree(workload, q.name, options) for q in workload.queries}

    def __call__(self, workload: Workload, options: OptimizeOptions) -> OptimizeResult:
        if not workload.queries:
            raise PlannerError("the workload has no queries to plan: add one under 'queries'")
        t0 = time.perf_counter()
        built = self.build(workload, options) if self.build is not None else None
        if built is None:
            alone = workload.with_groups(())  # each query alone
            trees = self.operator_trees(alone, options)
            built = Built(alone, plan_trees(alone, trees, options.mode, options.partitioning), trees)
        seconds = time.perf_counter() - t0
        plan = built.plan
        stats = IlpStats(variables=0, constraints=0, binaries=0, components=len(built.workload.queries),
                         build_seconds=seconds, solve_seconds=0.0, status="optimal", gap=0.0,
                         objective=plan.probe_cost, solver=self.solver.format(shape=options.tree_shape or "best"))
        return OptimizeResult(built.workload, options.mode, options.partitioning, options.mirs, plan, stats, None,
                              planner=options.planner, tree_shape=options.tree_shape, trees=dict(built.trees),
                              pmjoin=built.report, join_trees=dict(built.join_trees))
