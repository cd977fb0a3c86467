"""Ties on sampled sizes: among plans whose probe costs differ by less than the error of the
sizes they are costed on, the one holding the least memory (docs/model.md §5).

Sizes that ``mqjoin stats --sizes F`` measured on a sample of the join values carry a relative
standard error (``error:`` beside ``size:``, docs/model.md §2), and so does every probe cost
computed from them.  Two plans whose predicted costs differ by less than that error cannot be
told apart on the sample: which one ships fewer messages on the data is a coin toss, while the
memory they hold can differ by half.  Such plans are ties, and ties go to the plan with the
least memory (then the ILP's canonical tie-break, as for equal costs).

**The tolerance.**  A step's cost is its prefix's size times a factor (docs/model.md §4), so
its relative error is that of the size (:func:`mqjoin.planning.cost.step_error`; 0 for a
prefix of one relation and for a size counted exactly or estimated).  The plan's cost is the
sum over its steps; their sizes are measured on one sample of join values (the same values in
every relation), so their errors go the same way rather than cancelling.  The standard error of
the sum is therefore taken as the sum of the steps' standard errors — exact when the errors are
fully correlated and an upper bound for any correlation — and two of them make the tolerance:

    ε = 2 · Σ_steps cost_s · e_s / Σ_steps cost_s          (of the optimum plan)

a weighted mean of the sizes' errors, deterministic, and 0 when no size the optimum uses was
sampled: then nothing is re-solved and the plan is the optimum, as it always was.  The errors
of the order-of-arrival shares are left out: ``stats`` writes a share only where it departs
from ``1/|P|`` by three of its standard errors.

**The pass.**  From the optimum (cost ``C0``), one solve of the same model with another
objective finds the least MIR memory (one replica each, what ``--mir-budget`` bounds,
docs/model.md §5) of any plan costing at most ``C0 · (1 + ε)`` (:func:`memory_model`); a second
solve, the usual one under an MIR budget of that memory, returns the cheapest plan holding it,
with the canonical tie-break.  Under ``single`` the base stores are the same in every plan
(one per relation), so that plan holds the least memory of all tied plans; under ``replicas``
it replaces the optimum only when it holds less memory in all.

On a chain whose two sizes were measured on a sample of few join values (30 % error), the
plan that materialises ``R ⋈ S`` costs 400 and holds 400 tuples; the one without it costs
450, within the tolerance of 15 %, and holds 300:

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {rate: 100, parallelism: 1}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.01}
... sizes: {R ⋈ S: {size: 100, error: 0.3}, S ⋈ T: {size: 100, error: 0.3}}
... ''')
>>> r = optimize(w)
>>> r.probe_cost, r.memory, r.tie_break.tolerance, r.plan.materializations()
(450.0, 300.0, 0.15, {})
>>> print(r.tie_break.changes(r.probe_cost, r.memory))
ties within 15.00% of the optimum's probe cost (sampled sizes): least memory chosen, probe cost +12.50%, memory -25.0%
>>> o = optimize(w, memory_ties=False)
>>> o.probe_cost, o.memory, o.tie_break, list(o.plan.materializations())
(400.0, 400.0, None, ['RS'])
"""

from __future__ import annotations

import math
from dataclasses import replace

from mqjoin.planning.cost import step_error
from mqjoin.planning.ilp import Model
from mqjoin.planning.plan import Plan

#: standard errors of the optimum's probe cost within which plans tie
TIE_Z = 2.0


def cost_error(plan: Plan) -> float:
    """The relative standard error of ``plan``'s probe cost: its steps' errors weighted by their
    costs (summed: see the module docstring); 0 when no step's size was sampled."""
    total = plan.probe_cost
    if total <= 0:
        return 0.0
    return sum(n.cost * step_error(plan.workload, n.step) for n in plan.nodes) / total


def tolerance(plan: Plan) -> float:
    """``ε``: plans whose probe cost is at most ``plan.probe_cost · (1 + ε)`` tie with ``plan``."""
    return TIE_Z * cost_error(plan)


def memory_model(mdl: Model, limit: float) -> Model:
    """``mdl`` (the optimiser's ILP) minimising the memory of the materialised MIRs instead of
    the probe cost, whose probe cost is bounded by ``limit``: its optimum is the least MIR
    memory of the plans that tie (solve it with ``branching=False, relax_orders=False``: the
    search and relaxation of :func:`mqjoin.planning.ilp.solve` are built for the probe cost)."""
    memory = [0.0] * mdl.num_variables
    for m, i in mdl.m.items():
        memory[i] = mdl.candidates.memory(m)
    costed = [c for c, v in enumerate(mdl.cost) if v]
    row = ("tied_probe_cost", costed, [mdl.cost[c] for c in costed], -math.inf, limit)
    return replace(mdl, cost=memory, tie=[0.0] * mdl.num_variables, rows=mdl.rows + [row])
