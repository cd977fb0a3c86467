"""CLASH's planner: the ILP over all probe orders of a workload (docs/model.md §5), solved by
:mod:`mqjoin.planning.ilp` and read back into a :class:`~mqjoin.planning.plan.Plan`.

:func:`plan_clash` is the plan function of the ``clash`` entry of
:mod:`mqjoin.planners.registry`; users call :func:`mqjoin.planning.optimizer.optimize`, which
checks the options and hands them to the planner named.  Besides the optimum it breaks ties
within a sampled size's error by memory (:mod:`mqjoin.planning.ties`) and starts large models
warm from the plan without MIRs, so that a time limit still yields a plan.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 100}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
... ''')
>>> r = plan_clash(w, OptimizeOptions())
>>> r.probe_cost, r.ilp.status
(400.0, 'optimal')
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mqjoin.model.errors import InternalError, NoSolutionError, OptimizerError
from mqjoin.model.workload import Attr, Workload
from mqjoin.planning.candidates import MIR, Candidates, ProbeOrder, Step, enumerate_candidates
from mqjoin.planning.ilp import Model, Solution, build_model, extend_model, shrink_model, solve, unsearched_binaries
from mqjoin.planning.ilp.monitor import Monitor
from mqjoin.planning.ilp.solving import Start
from mqjoin.planning.options import BUDGET, OptimizeOptions
from mqjoin.planning.plan import Choice, Plan
from mqjoin.planning.probe_trees import build_plan
from mqjoin.planning.recost import mir_memory
from mqjoin.planning.result import IlpStats, OptimizeResult, TieBreak
from mqjoin.planning.ties import memory_model, tolerance
from mqjoin.support.gcpause import paused_gc


#: relative tolerance between a plan's cost and the ILP objective: solvers accept variables
#: within their MIP feasibility tolerance (1e-6 in HiGHS and CBC) of integral, so the reported
#: objective may differ from the exact cost of the extracted plan by that much
OBJECTIVE_TOLERANCE = 1e-6

#: models with more binaries than this get a warm start from the plan without MIRs
WARM_START_BINARIES = 2000
#: … and under a time limit, already models with more binaries than this
WARM_START_LIMITED = 200


@paused_gc()  # the candidates and the model (~100k objects) live on to the end: collections would only rescan them
def plan_clash(workload: Workload, options: OptimizeOptions) -> OptimizeResult:
    """CLASH's plan of ``workload`` under ``options``: the ILP over all probe orders (the
    :class:`~mqjoin.planners.registry.Planner` of ``clash``; see the module docstring).  Mode
    ``mqo`` solves the workload at once; ``individual`` and ``shared`` solve each query alone
    (a fair share of the time limit each) and deploy the orders apart or together.  No
    automatic garbage collection during the call (:func:`~mqjoin.support.gcpause.paused_gc`),
    plan building included: it would pay for the full collections that the solve's objects,
    which live on, set off."""
    mode, partitioning, mirs, solver = options.mode, options.partitioning, options.mirs, options.solver
    time_limit, mir_budget, replica_budget = options.time_limit, options.mir_budget, options.replica_budget
    monitor = options.monitor
    if not workload.queries:
        raise OptimizerError("the workload has no queries to optimise: add one under 'queries'")
    ties = options.memory_ties and mirs and partitioning != BUDGET

    if mode == "mqo":
        deadline = None if time_limit is None else time.perf_counter() + time_limit  # the tie-break's too
        previous = options.previous  # its parts proven optimal are not solved again (replan)
        reuse = {} if previous is None or previous.parts is None else previous.parts
        choices, stats, sol, mdl = _solve_workload(workload, partitioning, mirs, solver, time_limit, "",
                                                   mir_budget, replica_budget=replica_budget, monitor=monitor,
                                                   reuse=reuse, before=getattr(previous, "model", None))
        optimum = build_plan(workload, choices, mode, partitioning, mdl.candidates)
        tie = None
        if ties:
            choices, stats, tie = _least_memory(workload, mode, partitioning, solver, deadline, "",
                                                (choices, stats), optimum, mdl, mir_budget, replica_budget)
        plan = optimum if tie is None else build_plan(workload, choices, mode, partitioning)
        if plan.probe_cost > stats.objective * (1 + OBJECTIVE_TOLERANCE) + OBJECTIVE_TOLERANCE:
            raise InternalError(f"internal error: plan cost {plan.probe_cost} exceeds the ILP objective "
                                 f"{stats.objective}; please report this workload")
        return OptimizeResult(workload, mode, partitioning, mirs, plan, stats, mir_budget,
                              replica_budget=replica_budget, tie_break=tie, parts=sol.parts,
                              reused_parts=sol.reused, model=mdl)

    # each query alone, as if it were the only one: no query groups (docs/model.md §7)
    workload = workload.with_groups(())
    all_choices: list[Choice] = []
    optimum_choices: list[Choice] = []  # before the tie-break
    parts: list[IlpStats] = []
    query_ties: list[TieBreak] = []
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    for k, q in enumerate(workload.queries):
        # a fair share of the remaining budget for each query still to solve
        left = None if deadline is None else max(0.01, (deadline - time.perf_counter()) / (len(workload.queries) - k))
        own = None if left is None else time.perf_counter() + left  # this query's share, its tie-break's too
        ns = q.name if mode == "individual" else ""
        alone = workload.restricted_to([q.name])
        choices, stats, _, alone_model = _solve_workload(alone, partitioning, mirs, solver, left, ns,
                                               mir_budget, replica_budget=replica_budget,
                                               monitor=None if monitor is None else monitor.sharing_stop())
        optimum_choices.extend(choices)
        if ties:
            choices, stats, tie = _least_memory(alone, mode, partitioning, solver, own, ns, (choices, stats),
                                                build_plan(alone, choices, mode, partitioning), alone_model,
                                                mir_budget, replica_budget)
            query_ties += [tie] if tie is not None else []
        all_choices.extend(choices)
        parts.append(stats)
    plan = build_plan(workload, all_choices, mode, partitioning)
    tie = None
    if query_ties:  # each query's own tie-break; reported against the plan of the per-query optima
        optimum = build_plan(workload, optimum_choices, mode, partitioning)
        tie = TieBreak(max(t.tolerance for t in query_ties), optimum.probe_cost, optimum.memory,
                       sum(t.solves for t in query_ties), all(t.complete for t in query_ties))
    objective = sum(p.objective for p in parts)
    stats = IlpStats(
        variables=sum(p.variables for p in parts), constraints=sum(p.constraints for p in parts),
        binaries=sum(p.binaries for p in parts), components=sum(p.components for p in parts),
        build_seconds=sum(p.build_seconds for p in parts), solve_seconds=sum(p.solve_seconds for p in parts),
        status=next((p.status for p in parts if p.status != "optimal"), "optimal"),
        gap=max(p.gap for p in parts), objective=objective, solver=solver,
        canonical=all(p.canonical for p in parts))
    # a plan never costs more than the objective: equal at the optimum, possibly less for a
    # time-limited incumbent that pays for steps or MIRs the plan does not use
    close = math.isclose(plan.probe_cost, objective, rel_tol=OBJECTIVE_TOLERANCE, abs_tol=OBJECTIVE_TOLERANCE)
    if mode == "individual" and (plan.probe_cost > objective * (1 + OBJECTIVE_TOLERANCE) + OBJECTIVE_TOLERANCE
                                 or (stats.status == "optimal" and not close)):
        raise InternalError(f"internal error: individual plan cost {plan.probe_cost} does not match the "
                             f"per-query ILP objectives {objective}; please report this workload")
    return OptimizeResult(workload, mode, partitioning, mirs, plan, stats, mir_budget, replica_budget=replica_budget,
                          tie_break=tie)


def _least_memory(workload: Workload, mode: str, partitioning: str, solver: str, deadline: float | None,
                  namespace: str, optimum: tuple[list[Choice], IlpStats], plan: Plan, mdl: Model,
                  mir_budget: float | None, replica_budget: float | None
                  ) -> tuple[list[Choice], IlpStats, TieBreak | None]:
    """The tie-break of :mod:`mqjoin.planning.ties` after the optimum ``optimum`` (its ``plan``,
    ``mdl`` the model it solved, with MIRs):
    the choices and ILP statistics of the plan chosen (solve seconds summed over the solves)
    and what it did; the optimum as it is, and ``None``, when its cost carries no sampling error
    or it was not proven optimal.  ``deadline`` (``time.perf_counter()``): when the solve's time
    limit ends; a tie-break it cuts short keeps the optimum."""
    def left() -> float | None:
        return None if deadline is None else max(0.01, deadline - time.perf_counter())

    eps = tolerance(plan)
    if eps <= 0 or optimum[1].status != "optimal":
        return optimum[0], optimum[1], None
    held = mir_memory(plan)
    if held <= 0:  # no MIR memory to give up
        return optimum[0], optimum[1], TieBreak(eps, plan.probe_cost, plan.memory, 0)
    limit = plan.probe_cost * (1 + eps)
    least = solve(memory_model(mdl, limit), solver=solver, time_limit=left(), canonical=False, branching=False,
                  relax_orders=False)
    seconds = optimum[1].solve_seconds + least.solve_seconds
    if least.status != "optimal" or least.objective >= held * (1 - 1e-9):
        return optimum[0], replace(optimum[1], solve_seconds=seconds), TieBreak(
            eps, plan.probe_cost, plan.memory, 1, least.status == "optimal")
    # the cheapest plan holding that MIR memory (a hair above it: solvers accept rows violated by ~1e-7)
    choices, stats, _, _ = _solve_workload(workload, partitioning, True, solver, left(), namespace,
                                           least.objective * (1 + 1e-6) + 1e-6, replica_budget=replica_budget)
    stats = replace(stats, solve_seconds=seconds + stats.solve_seconds)
    tie = TieBreak(eps, plan.probe_cost, plan.memory, 2, stats.status == "optimal")
    chosen = build_plan(workload, choices, mode, partitioning)
    if (stats.status != "optimal" or chosen.probe_cost > limit * (1 + 1e-6)
            or not tie.changed(chosen.memory)):  # replicas: less MIR memory, not less in all
        return optimum[0], replace(optimum[1], solve_seconds=stats.solve_seconds), tie
    return choices, stats, tie


def _solve_workload(workload: Workload, partitioning: str, mirs: bool, solver: str, time_limit: float | None,
                    namespace: str, mir_budget: float | None = None,
                    canonical: bool = True, replica_budget: float | None = None,
                    monitor: Monitor | None = None, reuse: Mapping[Any, Any] | None = None,
                    before: Model | None = None) -> tuple[list[Choice], IlpStats, Solution, Model]:
    """The choices of one ILP solve of the workload, its statistics, the solution itself (its
    ``parts`` for a later ``reuse``, see :func:`mqjoin.planning.ilp.solve`) and the model solved.
    ``before``: the model of a solve before a change of the workload, whose candidates the
    enumeration takes where the change left them as they were, and whose names the build reads
    (a re-plan)."""
    t0 = time.perf_counter()
    cands = enumerate_candidates(workload, mirs=mirs, previous=None if before is None else before.candidates)
    mdl = None if before is None else (extend_model(before, cands, partitioning, mir_budget, replica_budget)
                                       or shrink_model(before, cands, partitioning, mir_budget, replica_budget))
    if mdl is None:
        mdl = build_model(cands, partitioning, mir_budget, replica_budget,
                          names=None if before is None else before.name_parts)
    build = time.perf_counter() - t0
    start: Start = None
    fallback = None
    if mirs and solver == "highs" and partitioning != BUDGET and _warm(mdl.num_binaries, time_limit):
        # the plan without MIRs is feasible here too: start from it, so that a time limit
        # still yields a plan (HiGHS alone may find none in large MIR models)
        t1 = time.perf_counter()
        base = None
        # (a search needs no good start: only a plan for a time limit; nor do small parts)
        if not reuse and _warm(unsearched_binaries(mdl), time_limit):  # (a re-plan keeps most parts)
            try:
                base, _, _, _ = _solve_workload(workload, partitioning, False, solver,
                                                None if time_limit is None else time_limit / 4, namespace,
                                                canonical=False,
                                                monitor=None if monitor is None else monitor.sharing_stop())
            except NoSolutionError:  # not even that in the time
                pass
        if base is None:  # the first MIR-free order of each
            def first_start() -> list[float]:
                return warm_start(cands, mdl, first_orders(cands, namespace))

            # (nothing stops a solve without a time limit or a monitor: a searched part never
            # needs the start then, and the solve computes it only for a part that does)
            start = first_start if time_limit is None and monitor is None else first_start()
        else:
            start = warm_start(cands, mdl, base)
        if time_limit is not None:
            time_limit = max(0.01, time_limit - (time.perf_counter() - t1))
    elif monitor is not None and partitioning != BUDGET:  # a plan to keep should the solve be stopped at once
        fallback = warm_start(cands, mdl, first_orders(cands, namespace))
    sol = solve(mdl, solver=solver, time_limit=time_limit, start=start, canonical=canonical, monitor=monitor,
                fallback=fallback, reuse=reuse)
    choices = extract_choices(cands, mdl, sol, namespace)
    stats = IlpStats(mdl.num_variables, mdl.num_constraints, mdl.num_binaries, sol.components, build,
                     sol.solve_seconds, sol.status, sol.gap, sol.objective, solver, sol.canonical)
    return choices, stats, sol, mdl


def _warm(binaries: int, time_limit: float | None) -> bool:
    """Whether a model (or the parts of it HiGHS's MIP solves) with this many binaries is
    large enough to start warm (:data:`WARM_START_BINARIES`, :data:`WARM_START_LIMITED`)."""
    return binaries > WARM_START_BINARIES or (time_limit is not None and binaries > WARM_START_LIMITED)


def first_orders(cands: Candidates, namespace: str = "") -> list[Choice]:
    """A plan found without solving: for every (query, start) the first candidate order over
    base relations, each element partitioned by its first candidate (feasible, not good).

    >>> from mqjoin.datasets.synthetic_paper import skewed_rates
    >>> [c.order.render() for c in first_orders(enumerate_candidates(skewed_rates().workload))][:2]
    ['R » S[a] » T[b] » U[c]', 'S » R[a] » T[b] » U[c]']
    """
    out = []
    for owner, by_start in cands.orders.items():
        if isinstance(owner, MIR):
            continue
        for orders in by_start.values():
            o = next(o for o in orders if all(m.is_base for m in o.elements))
            attrs = tuple(cands.partition_candidates[m][0] for m in o.elements)
            out.append(Choice(owner, ProbeOrder(o.start, o.elements, attrs), namespace))
    return out


def warm_start(cands: Candidates, mdl: Model, choices: list[Choice]) -> list[float]:
    """A feasible assignment of ``mdl`` that installs the given (MIR-free) probe orders."""
    vals = [0.0] * mdl.num_variables
    chosen_attr: dict[MIR, Attr] = {}
    for c in choices:
        i = cands.position(c.owner, c.order)
        if i is None:
            raise InternalError(f"internal error: the warm start's order {c.order.render()} is not a candidate; "
                                "please report this workload")
        vals[mdl.x[(c.owner, c.order.start, i)]] = 1.0
        for s in cands.steps[c.owner][c.order.start][i]:
            vals[mdl.y[s]] = 1.0
        for m, a in zip(c.order.elements, c.order.partitions or ()):
            chosen_attr.setdefault(m, a)
    for store, attrs in cands.partition_candidates.items():
        if (store, attrs[0]) in mdl.z:
            a = chosen_attr.get(store, attrs[0])
            vals[mdl.z[(store, a)]] = 1.0
    for s, bi in mdl.b.items():
        known = sum(vals[mdl.z[(s.target, a)]] for a in cands.partition_candidates[s.target]
                    if a in s.known and (s.target, a) in mdl.z)
        vals[bi] = max(0.0, vals[mdl.y[s]] - known)
    return vals


def extract_choices(cands: Candidates, mdl: Model, sol: Solution, namespace: str = "") -> list[Choice]:
    """Read the chosen probe orders and partition attributes out of a solution."""
    chosen: list[tuple[Any, str, int]] = []
    for (owner, start, i), xi in mdl.x.items():
        if sol.value(xi) > 0.5:
            chosen.append((owner, start, i))
    used_steps: dict[MIR, list[Step]] = {}
    for owner, start, i in chosen:
        for s in cands.steps[owner][start][i]:
            used_steps.setdefault(s.target, []).append(s)

    step_attr: dict[Step, Attr] = {}
    for store, steps in used_steps.items():
        attrs = cands.partition_candidates[store]
        kept = [a for a in attrs if (store, a) in mdl.z and sol.value(mdl.z[(store, a)]) > 0.5]
        if mdl.policy == BUDGET and kept:  # the replicas kept: a step targets one it knows, else the first
            for s in steps:
                step_attr[s] = next((a for a in kept if a in s.known), kept[0])
        elif mdl.policy in ("single", BUDGET):
            zs = kept
            if zs:
                a = zs[0]
            else:  # no broadcast cost at stake: take the attribute most steps know
                a = min(attrs, key=lambda x: (-sum(x in s.known for s in steps), x))
            for s in steps:
                step_attr[s] = a
        else:
            keep = _fewest_replicas(attrs, [s.known for s in steps])
            for s in steps:
                step_attr[s] = min(s.known & keep)

    owners_order = {o: k for k, o in enumerate(cands.owners)}
    out = []
    for owner, start, i in sorted(chosen, key=lambda t: (owners_order[t[0]], cands.workload.relation_rank[t[1]])):
        o = cands.orders[owner][start][i]
        attrs = tuple(step_attr[s] for s in cands.steps[owner][start][i])
        out.append(Choice(owner, ProbeOrder(o.start, o.elements, attrs), namespace))
    return out


def _fewest_replicas(attrs: tuple[Attr, ...], known_sets: list[frozenset[Attr]]) -> frozenset[Attr]:
    """Smallest set of partition attributes such that every step knows one (ties: smallest
    attributes first); exhaustive for the few candidates a store has, greedy beyond 12."""
    need = [k for k in set(known_sets)]
    if len(attrs) <= 12:
        for k in range(1, len(attrs) + 1):
            for combo in itertools.combinations(sorted(attrs), k):
                cs = set(combo)
                if all(cs & kn for kn in need):
                    return frozenset(cs)
    keep: set[Attr] = set()
    while any(not (keep & kn) for kn in need):
        best = max(sorted(attrs), key=lambda a: sum(1 for kn in need if a in kn and not keep & kn))
        keep.add(best)
    return frozenset(keep)
