"""Recosting: a plan's steps and MIR stores priced under other statistics.

A plan fixes its steps; the statistics (rates, selectivities) they were costed with may
change, e.g. when an epoch samples new ones.  :func:`recost` prices the same steps under a
workload with the same queries and other numbers (the adaptive controller compares it with a
re-optimised plan's cost), :func:`mir_memory` the MIR stores it materialises (what an MIR
budget limits).
"""

from __future__ import annotations

from typing import Any, Callable

from mqjoin.model.errors import PlanError
from mqjoin.model.workload import Attr, JoinClass, Workload
from mqjoin.planning.candidates import Step
from mqjoin.planning.cost import memory_tuples, step_cost
from mqjoin.planning.plan import Plan


def _selectivities(workload: Workload) -> Callable[[tuple[Attr, ...]], float]:
    """A function from class members to their selectivity in ``workload`` (a restricted class
    takes the value of any query class containing it: linked classes agree)."""
    values: dict[tuple[Attr, ...], float] = {}
    for q in workload.queries:
        for c in q.classes:
            values[c.members] = c.selectivity

    def selectivity(members: tuple[Attr, ...]) -> float:
        if members in values:
            return values[members]
        for full, v in values.items():
            if set(members) <= set(full):
                return v
        raise PlanError(f"no query of the workload has the class {{{'='.join(map(str, members))}}} that the "
                        "plan joins on; re-optimise instead of re-costing")

    return selectivity


def recost(plan: Plan, workload: Workload) -> float:
    """The probe cost of ``plan``'s steps under the statistics (rates, selectivities) of
    ``workload`` — the same queries with other numbers, e.g. statistics sampled in an epoch.
    The adaptive controller compares it with a re-optimised plan's cost.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = parse_workload('''
    ... defaults: {rate: 100}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.02}
    ... ''')
    >>> plan = optimize(w, mirs=False).plan
    >>> recost(plan, w) == plan.probe_cost
    True
    >>> recost(plan, w.with_relation("R", rate=200)) > plan.probe_cost
    True
    """
    selectivity = _selectivities(workload)
    total = 0.0
    for n in plan.nodes:
        st = plan.store[n.store]
        classes = tuple(JoinClass(c.members, selectivity(c.members)) for c in n.step.classes)
        total += step_cost(workload, Step(n.step.prefix, n.step.target, classes), st.partition, st.parallelism)
    return total


def mir_memory(plan: Plan, workload: Workload | None = None) -> float:
    """Memory (docs/model.md §5, tuples) of the MIRs ``plan`` materialises, one replica each — what
    an MIR budget limits — under ``workload``'s statistics (default: the plan's own).

    >>> from mqjoin.datasets.synthetic_paper import skewed_rates
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = skewed_rates(high_rate=100, low_rate=10).workload
    >>> plan = optimize(w).plan
    >>> round(mir_memory(plan), 3), round(mir_memory(plan, w.with_relation("S", rate=100)), 3)
    (0.889, 2.889)
    """
    w = workload or plan.workload
    selectivity = _selectivities(w)
    seen: dict[tuple[Any, ...], float] = {}
    for s in plan.stores:
        if s.mir.is_base:
            continue
        key = (s.namespace, s.mir.relations, tuple(c.members for c in s.mir.classes), s.mir.selection)
        if key not in seen:
            classes = tuple(JoinClass(c.members, selectivity(c.members)) for c in s.mir.classes)
            seen[key] = memory_tuples(w, s.mir.relations, classes, s.mir.selection)
    return sum(seen.values())

