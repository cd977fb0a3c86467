"""The dispatch of ``optimize(workload, planner=...)`` to the planner that builds the plan.

``clash`` is the ILP of :mod:`mqjoin.planning.optimizer`; every other planner builds its
plan from operator trees (``mjoin``, ``tree``), AJoin's grouping (``ajoin``) or PMJoin's
placement (``pmjoin``) and returns the same :class:`~mqjoin.planning.result.OptimizeResult`.
Which options fit which planner is :mod:`mqjoin.planners.registry`'s; this module imports the
planners themselves (and the result type), which the registry must not.
"""

from __future__ import annotations

import time

from mqjoin.model.errors import PlannerError
from mqjoin.model.workload import Workload
from mqjoin.planning.result import IlpStats, OptimizeResult
from mqjoin.planners.ajoin import ajoin, join_trees
from mqjoin.planners.mjoin import mjoin_tree
from mqjoin.planners.pmjoin import PMJoinOptions, pmjoin_plan, pmjoin_report
from mqjoin.planners.registry import check_planner, planner_of
from mqjoin.planners.trees import JoinTree, binary_tree, plan_trees


def operator_trees(workload: Workload, planner: str, tree_shape: str | None = None,
                   decompose: bool = False) -> dict[str, JoinTree]:
    """Query → its operator tree under ``planner`` (``mjoin`` or ``tree``).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> operator_trees(w, "tree", "deep"), operator_trees(w, "tree", "bushy")
    ({'q': (((C ⋈ D) ⋈ B) ⋈ A)}, {'q': ((A ⋈ B) ⋈ (C ⋈ D))})
    """
    check_planner(planner, tree_shape, decompose)
    if not planner_of(planner).operator_trees:
        raise PlannerError(f"the {planner} planner has no rule-made operator trees (clash: an ILP; pmjoin: "
                           "mqjoin.planners.pmjoin places them)")
    if planner == "mjoin":
        return {q.name: mjoin_tree(workload, q.name, decompose) for q in workload.queries}
    if planner == "tree":
        return {q.name: binary_tree(workload, q.name, tree_shape or "best") for q in workload.queries}
    # ajoin: each query alone (modes individual and shared; mqo groups and shares)
    return {q.name: join_trees(workload.restricted_to([q.name]))[q.name] for q in workload.queries}


def optimize_planner(workload: Workload, planner: str, mode: str = "mqo", partitioning: str = "single",
                     mirs: bool = True, mir_budget: float | None = None, tree_shape: str | None = None,
                     decompose: bool = False, pmjoin=None):
    """The ``mjoin``/``tree``/``pmjoin`` branch of :func:`mqjoin.planning.optimizer.optimize`: an
    ``OptimizeResult`` whose ILP statistics are empty (no ILP: the shape is a rule, an exact DP
    or PMJoin's heuristic; ``pmjoin``: its :class:`~mqjoin.planners.pmjoin.PMJoinOptions`).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
    ...             T: {attributes: [b], rate: 100}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
    ... ''')
    >>> r = optimize_planner(w, "tree")
    >>> r.probe_cost, r.probe_orders()["q"]
    (400.0, {'R': 'R » S[a] » T[b]', 'S': 'S » R[a] » T[b]', 'T': 'T » RS[b]'})
    >>> r.plan.materializations()
    {'RS': {'R': 'R » S[a]', 'S': 'S » R[a]'}}

    The operator trees themselves (``trees`` renders them; PMJoin's without its placement):

    >>> r.join_trees["q"], r.join_trees["q"].children
    (((R ⋈ S) ⋈ T), ((R ⋈ S), T))
    """
    check_planner(planner, tree_shape, decompose, mirs, mir_budget, mode)
    p = planner_of(planner)
    if p.ilp:
        raise PlannerError("the clash planner is the ILP of mqjoin.planning.optimizer.optimize")
    if not workload.queries:
        raise PlannerError("the workload has no queries to plan: add one under 'queries'")
    t0 = time.perf_counter()
    report = None
    if p.pmjoin_options:
        report = pmjoin_report(workload, pmjoin or PMJoinOptions())
        plan = pmjoin_plan(workload, report, mode, partitioning)
        rendered = {qp.query: str(qp.tree) for qp in report.queries}
        trees = {qp.query: qp.tree.join_tree() for qp in report.queries}
    elif p.joint and mode == "mqo":  # AJoin's groups and shared-cost reordering
        planned = ajoin(workload)
        workload, trees = planned.workload, dict(planned.trees)
        plan = planned.plan(partitioning)
        rendered = {q: str(t) for q, t in trees.items()}
    else:
        workload = workload.with_groups(())  # each query alone
        trees = operator_trees(workload, planner, tree_shape, decompose)
        plan = plan_trees(workload, trees, mode, partitioning)
        rendered = {q: str(t) for q, t in trees.items()}
    seconds = time.perf_counter() - t0
    stats = IlpStats(variables=0, constraints=0, binaries=0, components=len(workload.queries),
                     build_seconds=seconds, solve_seconds=0.0, status="optimal", gap=0.0,
                     objective=plan.probe_cost, solver=p.solver_label(tree_shape))
    return OptimizeResult(workload, mode, partitioning, mirs, plan, stats, None, planner=planner,
                          tree_shape=p.shape(tree_shape),
                          trees=rendered, pmjoin=report, join_trees=trees)
