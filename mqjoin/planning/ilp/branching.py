"""An LP-based branch and bound over one part of the model, branching on MIR materialisation
first.

On a five-way query the LP relaxation is 4–7 % below the optimum, and the whole gap is the
choice of which MIRs to materialise: with the indicators ``m`` fixed, the LP is integral.
HiGHS's MIP closes such a gap with cuts and heuristics at the root, which takes seconds; a
tree that branches on ``m`` first closes it in a few dozen LPs of milliseconds.  So
:func:`branch_and_bound` solves the HiGHS LP at every node (dual simplex, warm from the
previous node's basis on the same instance), goes depth first towards the rounded LP value,
branches on the fractional variable nearest ½ of the first tier that has one — the ``m``,
then the partition choices ``z``, then the other binaries (probe orders) — and prunes a node
whose LP bound cannot beat the incumbent.  Once there is an incumbent, a node's reduced costs
fix, for its whole subtree, every binary whose flip alone would lift the LP bound to where
nothing beats the incumbent (:func:`_fixings`).  It is exact: every binary is branched on until the
LP optimum is integral.

:func:`mqjoin.planning.ilp.solving.solve` gives it the parts that hold one query's orders and an
MIR of :data:`BRANCH_MIN_MIR` relations or more; :mod:`mqjoin.planning.ilp.coupled` gives it
one block (one query) of a coupled part under fixed shared partition choices.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model, components
>>> mdl = build_model(enumerate_candidates(random_workload(1, 10, 5, seed=4)), "replicas")
>>> (cols, rows), = components(mdl)
>>> large_mirs(mdl, cols)
True
>>> st, obj, bound, _ = branch_and_bound(mdl, cols, rows, None)
>>> st, round(obj), bound == obj
('optimal', 8000, True)
"""

from __future__ import annotations

import math
import time
from typing import Any

from mqjoin.model.errors import InfeasibleError, NoSolutionError
from mqjoin.planning.ilp.backends import INTEGRALITY_TOLERANCE, PartResult, highs_lp, silent_highs
from mqjoin.planning.ilp.model import Model
from mqjoin.planning.ilp.monitor import Watch

#: solve a part by :func:`branch_and_bound` (HiGHS only) when it holds an MIR of at least this
#: many relations and the probe orders of at most one query (four-way MIRs: five-way queries)
BRANCH_MIN_MIR = 4


def _fixings(reduced: Any, vals: Any, bound: float, lo: Any, up: Any, is_binary: Any,
             threshold: float) -> tuple[tuple[int, float], ...]:
    """The binaries a node's LP fixes for its whole subtree (reduced-cost fixing): a free binary
    at 0 in the LP whose reduced cost ``d`` lifts the LP bound of any solution with it at 1 to
    ``bound + d`` or more, at or above ``threshold`` (the bound at which nothing improves the
    incumbent), stays 0; one at 1 with ``bound − d`` there stays 1.  Pairs (column, value).

    >>> import numpy as np
    >>> _fixings(np.array([5.0, 1.0, 0.0, -4.0]), np.array([0.0, 0.0, 0.5, 1.0]), 10.0,
    ...          np.zeros(4), np.ones(4), np.ones(4, dtype=bool), threshold=13.0)
    ((0, 0.0), (3, 1.0))
    """
    import numpy as np

    free = is_binary & (lo < up)
    at0 = free & (vals <= INTEGRALITY_TOLERANCE) & (bound + reduced >= threshold)
    at1 = free & (vals >= 1 - INTEGRALITY_TOLERANCE) & (bound - reduced >= threshold)
    return tuple((int(j), 0.0) for j in np.flatnonzero(at0)) + tuple((int(j), 1.0) for j in np.flatnonzero(at1))


def large_mirs(mdl: Model, cols: list[int]) -> bool:
    """Whether a part holds an MIR of at least :data:`BRANCH_MIN_MIR` relations."""
    inside = set(cols)
    return any(len(m.relations) >= BRANCH_MIN_MIR and i in inside for m, i in mdl.m.items())


def branch_and_bound(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                     start: list[float] | None = None, integral_objective: bool = False,
                     highs: Any = None, watch: Watch = Watch()) -> PartResult:
    """The branch and bound of the module docstring over one part.  A node is pruned when its
    LP bound cannot beat the incumbent by more than HiGHS's own gap settings: 1e-9 relative, or
    0.99 for integral objectives.  Under a time limit it returns the incumbent with the least
    bound of the open nodes (a start, when given, is the first incumbent).  ``highs``: a HiGHS
    instance that holds this part's LP already (its column bounds are set at every node, so
    only the rows and costs must match): the coupled search keeps one per block.  New instances
    keep HiGHS's default options: presolve off and the dual or primal simplex strategies
    measured no faster, the interior point 6× slower.  ``watch``: told each new incumbent with
    the least bound of the open nodes; its stop ends the search as the time limit does."""
    import highspy
    import numpy as np

    t0 = time.perf_counter()
    n = len(cols)
    local = {c: i for i, c in enumerate(cols)}
    h = highs
    if h is None:
        h = silent_highs(highspy)
        h.passModel(highs_lp(mdl, cols, rows, highspy, np))
    lower = np.zeros(n)
    upper = np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in cols])
    every = np.arange(n, dtype=np.int32)
    # branching order: materialisation first, then the binaries of the model
    ms = [local[i] for i in mdl.m.values() if i in local]
    binaries = [j for j, c in enumerate(cols) if mdl.integer[c]]
    zs = set(local[i] for i in mdl.z.values() if i in local)
    tiers = [ms, [j for j in binaries if j in zs], [j for j in binaries if j not in zs]]
    is_binary = np.zeros(n, dtype=bool)
    is_binary[binaries] = True
    tol = INTEGRALITY_TOLERANCE

    best, best_vals = math.inf, None
    if start is not None:
        best_vals = [float(start[c]) for c in cols]
        best = math.fsum(mdl.cost[c] * v for c, v in zip(cols, best_vals))

    def beaten(bound: float) -> bool:  # no node below this bound can improve the incumbent
        if integral_objective:
            return bound > best - 0.99
        return bound >= best - 1e-9 * max(1.0, abs(best))

    # a node: (fixings as (column, value) pairs, the parent's LP bound)
    stack: list[tuple[tuple[tuple[int, float], ...], float]] = [((), -math.inf)]
    stopped = False
    while stack:
        if (time_limit is not None and time.perf_counter() - t0 > time_limit) or watch.stopped:
            stopped = True
            break
        fixed, parent = stack.pop()
        if beaten(parent):
            continue
        lo, up = lower.copy(), upper.copy()
        for j, v in fixed:
            lo[j] = up[j] = v
        h.changeColsBounds(n, every, lo, up)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            continue  # infeasible fixings
        vals = np.asarray(h.getSolution().col_value)
        bound = float(h.getInfo().objective_function_value)
        if beaten(bound):
            continue
        pick = None
        for tier in tiers:
            frac = [(abs(vals[j] - 0.5), j) for j in tier if tol < vals[j] - math.floor(vals[j]) < 1 - tol]
            if frac:
                pick = min(frac)[1]
                break
        if pick is None:  # integral: the new incumbent
            best_vals = [float(round(v)) if binary else float(v) for binary, v in zip(is_binary, vals)]
            best = math.fsum(mdl.cost[c] * v for c, v in zip(cols, best_vals))
            watch.report(best, max(0.0, min([best, bound] + [b for _, b in stack])))
            continue
        if math.isfinite(best):
            fixed = fixed + _fixings(np.asarray(h.getSolution().col_dual), vals, bound, lo, up, is_binary,
                                     best - (0.99 if integral_objective else 1e-9 * max(1.0, abs(best))))
        near = 1.0 if vals[pick] >= 0.5 else 0.0
        stack.append((fixed + ((pick, 1.0 - near),), bound))
        stack.append((fixed + ((pick, near),), bound))
    if best_vals is None:
        if stopped:
            raise NoSolutionError("the solver reached its time limit before it found any plan; "
                                  "raise the time limit (--time-limit) or disable MIRs (--no-mirs)")
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    if not stopped:
        return "optimal", best, best, best_vals
    bound = min([best] + [b for _, b in stack])
    return "time_limit", best, max(0.0, bound), best_vals
