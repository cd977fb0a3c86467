"""Optimisation modes (docs/model.md §5): ``mqo``, ``individual`` and ``shared``, under the
``single`` or ``replicas`` partitioning policy, with or without MIRs.

The paper's Section V-2 example (parallelism 1):

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 100}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
... queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015, T.c = U.c: 0.01}
... ''')
>>> [optimize(w, mode=m, mirs=False).probe_cost for m in ("individual", "mqo")]
[950.0, 800.0]
>>> [optimize(w, mode=m).probe_cost for m in ("individual", "mqo")]
[800.0, 700.0]
>>> optimize(w, mirs=False).probe_orders()["q1"]["S"]
'S » T[b] » R[a]'
"""

from __future__ import annotations

from typing import Any

from mqjoin.model.workload import Workload
from mqjoin.planning.options import MODES, OptimizeOptions  # noqa: F401  (re-exported)
from mqjoin.planning.result import OptimizeResult
from mqjoin.planners.registry import check_fit, planner_of


def optimize(workload: Workload, options: OptimizeOptions | None = None, /, **keywords: Any) -> OptimizeResult:
    """Optimise a workload and return its plan (see the module docstring for modes): the plan
    function of the planner named (:mod:`mqjoin.planners.registry`) under ``options`` (an
    :class:`~mqjoin.planning.options.OptimizeOptions`) with the ``keywords`` given — the
    options' fields — changed; the options are checked against the planner first.
    ``mir_budget``: at most this many tuples of MIR stores (docs/model.md §5 memory; per query in
    ``individual`` and ``shared`` mode, which optimise each query alone).
    ``planner``: ``clash`` (the ILP, :mod:`mqjoin.planning.clash`), or one that plans by a rule
    (:mod:`mqjoin.planners.trees`: MJoin operators with ``decompose``, binary join trees of
    ``tree_shape``, AJoin, PMJoin's placement with ``pmjoin``, a
    :class:`~mqjoin.planners.pmjoin.PMJoinOptions`; no solver involved).
    ``monitor`` (:class:`mqjoin.planning.ilp.monitor.Monitor`): told the ILP's incumbent and
    bound as they improve (mode ``mqo``), and stopped, ends the solve with its best plan so far.
    ``memory_ties``: when sizes measured on a sample (with an ``error``) cost the plan, plans
    within that error of the optimum's probe cost tie and the one with the least memory is
    returned (:mod:`mqjoin.planning.ties`; policies ``single`` and ``replicas`` with MIRs;
    ``result.tie_break`` says what it changed); False returns the optimum of the probe cost.

    >>> from mqjoin.datasets.synthetic_paper import skewed_rates
    >>> w = skewed_rates(high_rate=100, low_rate=10).workload
    >>> optimize(w).probe_orders()["q"]["R"], optimize(w, mir_budget=0).probe_orders()["q"]["R"]
    ('R » STU[a]', 'R » S[a] » T[c] » U[c]')

    ``partitioning="budget"``: a store may be kept once per partition attribute, with at most
    ``replica_budget`` tuples in the replicas beyond the first of every store (0: ``single``;
    None: unbounded, the cost of ``replicas``).  :func:`mqjoin.planning.frontier.frontier` walks it.

    >>> [optimize(w, partitioning="budget", replica_budget=b).probe_cost for b in (0, None)] == [
    ...     optimize(w).probe_cost, optimize(w, partitioning="replicas").probe_cost]
    True
    >>> optimize(w, OptimizeOptions(mode="individual"), mirs=False).mode
    'individual'
    """
    return plan_with(workload, OptimizeOptions.of(options, **keywords))


def plan_with(workload: Workload, options: OptimizeOptions) -> OptimizeResult:
    """:func:`optimize` for an options value: the interface of every layer that passes one on.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> plan_with(w, OptimizeOptions(planner="mjoin")).trees
    {'q': '(R ⋈ S)'}
    """
    options = check_fit(options)
    return planner_of(options.planner).plan(workload, options)


def replan(previous: OptimizeResult, workload: Workload, options: OptimizeOptions | None = None, /,
           **keywords: Any) -> OptimizeResult:
    """Re-plan after a change of the workload (queries added or removed, statistics changed),
    from ``previous``: :func:`optimize` with ``previous`` as the options' ``previous``, and by
    default ``previous``'s mode, partitioning, MIRs and budgets.  Mode ``mqo`` of the ``clash``
    planner solves only the independent parts of the ILP (queries that share no store) that
    the change touches; the others keep their answers, so the plan is the one a solve from
    scratch gives (both are canonical), only sooner.  ``result.reused_parts`` counts the parts
    kept.

    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> w = random_workload(6, 30, 3, seed=4)
    >>> first = optimize(w.restricted_to([q.name for q in w.queries[:5]]))
    >>> again = replan(first, w)  # one query added
    >>> again.reused_parts, again.ilp.components, again.plan == optimize(w).plan
    (2, 3, True)
    """
    if options is None:
        options = OptimizeOptions(mode=previous.mode, partitioning=previous.partitioning, mirs=previous.mirs,
                                  mir_budget=previous.mir_budget, replica_budget=previous.replica_budget)
    return plan_with(workload, OptimizeOptions.of(options, **keywords, previous=previous))
