"""The planners by name: which exist, which options fit each, and the dispatch of
``optimize(workload, planner=...)`` to the planner that builds the plan.

``clash`` is the ILP of :mod:`mqjoin.planning.optimizer`; every other planner builds its
plan from operator trees (``mjoin``, ``tree``), AJoin's grouping (``ajoin``) or PMJoin's
placement (``pmjoin``) and returns the same :class:`~mqjoin.planning.result.OptimizeResult`.
"""

from __future__ import annotations

import time

from mqjoin.model.errors import PlannerError
from mqjoin.model.workload import Workload
from mqjoin.planning.result import IlpStats, OptimizeResult
from mqjoin.planners.ajoin import ajoin, join_trees
from mqjoin.planners.mjoin import mjoin_tree
from mqjoin.planners.pmjoin import PMJoinOptions, pmjoin_plan, pmjoin_report
from mqjoin.planners.trees import PLANNER_MODES, TREE_SHAPES, JoinTree, binary_tree, plan_trees


PLANNERS = ("clash", "mjoin", "tree", "ajoin", "pmjoin")


def check_planner(planner: str, tree_shape: str | None = None, decompose: bool = False, mirs: bool = True,
                  mir_budget: float | None = None, mode: str = "mqo") -> None:
    """Typed errors for options that do not fit the planner.

    >>> check_planner("tree", "zigzag")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.PlannerError: unknown tree shape 'zigzag' (choose one of deep, bushy, best)
    """
    if planner not in PLANNERS:
        raise PlannerError(f"unknown planner {planner!r} (choose one of {', '.join(PLANNERS)})")
    if tree_shape is not None and planner != "tree":
        raise PlannerError(f"tree shape {tree_shape!r} applies to the tree planner only, not to {planner}; "
                           "leave it out or use planner 'tree'")
    if tree_shape is not None and tree_shape not in TREE_SHAPES:
        raise PlannerError(f"unknown tree shape {tree_shape!r} (choose one of {', '.join(TREE_SHAPES)})")
    if decompose and planner != "mjoin":
        raise PlannerError(f"MJoin decomposition applies to the mjoin planner only, not to {planner}")
    if planner == "clash":
        return
    if mode not in PLANNER_MODES:
        raise PlannerError(f"unknown mode {mode!r} (choose one of {', '.join(PLANNER_MODES)})")
    if mir_budget is not None:
        raise PlannerError(f"an MIR budget limits the CLASH optimiser; the {planner} planner's shape fixes its MIRs "
                           "— leave the budget out")
    if not mirs and (planner in ("tree", "ajoin", "pmjoin") or decompose):
        what = {"tree": "a binary tree materialises every inner node",
                "ajoin": "an AJoin plan (binary trees) materialises every inner node",
                "pmjoin": "PMJoin materialises every MJoin operator's output that feeds another"}.get(
            planner, "a decomposed MJoin materialises its parts")
        raise PlannerError(f"{what} as an MIR store: allow MIRs (no --no-mirs) or use planner 'mjoin' without decomposition")


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
    if planner == "mjoin":
        return {q.name: mjoin_tree(workload, q.name, decompose) for q in workload.queries}
    if planner == "tree":
        return {q.name: binary_tree(workload, q.name, tree_shape or "best") for q in workload.queries}
    if planner == "ajoin":  # each query alone (modes individual and shared; mqo groups and shares)
        return {q.name: join_trees(workload.restricted_to([q.name]))[q.name] for q in workload.queries}
    raise PlannerError(f"the {planner} planner has no rule-made operator trees (clash: an ILP; pmjoin: "
                       "mqjoin.planners.pmjoin places them)")


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
    if planner == "clash":
        raise PlannerError("the clash planner is the ILP of mqjoin.planning.optimizer.optimize")
    if not workload.queries:
        raise PlannerError("the workload has no queries to plan: add one under 'queries'")
    t0 = time.perf_counter()
    report = None
    if planner == "pmjoin":
        report = pmjoin_report(workload, pmjoin or PMJoinOptions())
        plan = pmjoin_plan(workload, report, mode, partitioning)
        rendered = {qp.query: str(qp.tree) for qp in report.queries}
        trees = {qp.query: qp.tree.join_tree() for qp in report.queries}
    elif planner == "ajoin" and mode == "mqo":  # AJoin's groups and shared-cost reordering
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
    solver = {"mjoin": "mjoin", "ajoin": "ajoin-idp", "pmjoin": "streamjoinopt"}.get(planner, f"dp-{tree_shape or 'best'}")
    stats = IlpStats(variables=0, constraints=0, binaries=0, components=len(workload.queries),
                     build_seconds=seconds, solve_seconds=0.0, status="optimal", gap=0.0,
                     objective=plan.probe_cost, solver=solver)
    return OptimizeResult(workload, mode, partitioning, mirs, plan, stats, None, planner=planner,
                          tree_shape=(tree_shape or "best") if planner == "tree" else None,
                          trees=rendered, pmjoin=report, join_trees=trees)
