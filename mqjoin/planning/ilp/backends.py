"""The two MIP solvers behind one part of the model: HiGHS through highspy, CBC through PuLP.

Each backend solves the columns and rows of one part and answers in the same shape,
``(status, objective, bound, values)``: ``"optimal"``, ``"time_limit"`` (a plan, not proven
optimal; the bound is the solver's best) or ``"solution_limit"`` (HiGHS stopped at its n-th
improving plan).  The objective is always recomputed from the values returned, never taken
from the solver's report, and a status without a plan is a typed error
(:class:`~mqjoin.model.errors.NoSolutionError`, :class:`~mqjoin.model.errors.InfeasibleError`).

HiGHS is driven through its low-level ``HighsLp`` (a row-wise sparse matrix built once per
part, :func:`highs_lp`): the same structure serves the MIP here and the many LPs of the branch
and bound and the coupled search, which reuse one instance and change only bounds and costs.
Instances are silent (:func:`silent_highs`), so ``--json`` on stdout stays clean.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model
>>> mdl = build_model(enumerate_candidates(random_workload(3, 8, 3, seed=1)), "replicas")
>>> cols, rows = list(range(mdl.num_variables)), list(range(mdl.num_constraints))
>>> solve_highs(mdl, cols, rows, None, None)[:3], solve_cbc(mdl, cols, rows, None)[:3]
(('optimal', 12000.0, 12000.0), ('optimal', 12000.0, 12000.0))
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from mqjoin.model.errors import InfeasibleError, NoSolutionError, OptimizerError, SolverUnavailableError
from mqjoin.planning.ilp.formats import to_pulp
from mqjoin.planning.ilp.model import Model
from mqjoin.planning.ilp.monitor import Watch

#: a relaxed binary within this of 0 or 1 counts as integral (the solvers' own integrality
#: tolerance)
INTEGRALITY_TOLERANCE = 1e-6

#: a part's answer: (status, objective, bound, values of its columns)
PartResult = tuple[str, float, float, list[float]]


def silent_highs(highspy: ModuleType) -> Any:
    """A HiGHS instance that prints nothing.  highspy ≥ 1.16's ``Highs()`` writes its banner to
    the process's stdout in its constructor, before an option can be set (breaking ``--json``
    on stdout); the core class beneath it does not, and has every method used here."""
    core = getattr(getattr(highspy, "_core", None), "_Highs", None)
    h = core() if core is not None else highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def highs_lp(mdl: Model, cols: list[int], rows: list[int], highspy: ModuleType, np: ModuleType) -> Any:
    """One part of the model as a ``highspy.HighsLp`` (continuous; integrality is set apart)."""
    local = {c: i for i, c in enumerate(cols)}
    lp = highspy.HighsLp()
    lp.num_col_ = len(cols)
    lp.num_row_ = len(rows)
    lp.col_cost_ = np.array([mdl.cost[c] for c in cols], dtype=float)
    lp.col_lower_ = np.zeros(len(cols))
    lp.col_upper_ = np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in cols])
    index: list[int]
    value: list[float]
    lo: list[float]
    hi: list[float]
    starts, index, value, lo, hi = [0], [], [], [], []
    for r in rows:
        _, idx, coef, lower, upper = mdl.rows[r]
        index.extend(local[i] for i in idx)
        value.extend(coef)
        starts.append(len(index))
        lo.append(-highspy.kHighsInf if lower == -math.inf else lower)
        hi.append(highspy.kHighsInf if upper == math.inf else upper)
    lp.row_lower_ = np.array(lo, dtype=float)
    lp.row_upper_ = np.array(hi, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=float)
    lp.a_matrix_.num_col_ = len(cols)
    lp.a_matrix_.num_row_ = len(rows)
    return lp


def solve_highs(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                threads: int | None, start: list[float] | None = None, integral_objective: bool = False,
                solution_limit: int | None = None, relax: bool = False, watch: Watch = Watch()) -> PartResult:
    """One part by HiGHS's MIP (its LP with ``relax``), from ``start`` when given.
    ``integral_objective``: the costs are integers, so a gap below 1 proves optimality.
    ``watch``: told every improving solution (HiGHS's callback), and its stop interrupts the
    MIP (its incumbent is then returned as at a time limit)."""
    try:
        import highspy
        import numpy as np
    except ImportError:  # pragma: no cover - depends on the installation
        raise SolverUnavailableError("solver 'highs' needs the highspy package: pip install highspy "
                                     "(or choose --solver cbc)") from None
    h = silent_highs(highspy)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if solution_limit is not None:
        h.setOptionValue("mip_max_improving_sols", int(solution_limit))
    if threads is not None:
        h.setOptionValue("threads", int(threads))
    if integral_objective:  # integer costs: a gap below 1 proves optimality, exactly
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.99)
    else:
        h.setOptionValue("mip_rel_gap", 1e-9)
    lp = highs_lp(mdl, cols, rows, highspy, np)
    if not relax and any(mdl.integer[c] for c in cols):
        lp.integrality_ = [highspy.HighsVarType.kInteger if mdl.integer[c] else highspy.HighsVarType.kContinuous
                           for c in cols]
    h.passModel(lp)
    if watch.monitor is not None:
        h.setCallback(watch.monitor.highs_callback(watch.part, highspy), None)
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        if watch.part is not None:
            h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipImprovingSolution)
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = [float(start[c]) for c in cols]
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    ms = h.getModelStatus()
    if ms in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        # every model of a valid workload is feasible, but HiGHS's presolve can declare the
        # policy budget's memory row infeasible at a right-hand side a hair below a sum of its
        # coefficients (Figure 3 at 99.999899 with a continuous u_M, highspy 1.15; u_M is
        # binary for this reason): solve once more without presolve
        h.setOptionValue("presolve", "off")
        h.run()
        ms = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if ms == highspy.HighsModelStatus.kOptimal:
        st = "optimal"
    elif ms in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    elif ms == highspy.HighsModelStatus.kTimeLimit or ms == highspy.HighsModelStatus.kInterrupt:
        if not has_solution:
            raise NoSolutionError("the solver reached its time limit before it found any plan; "
                                  "raise the time limit (--time-limit) or disable MIRs (--no-mirs)")
        st = "time_limit"
    elif ms == highspy.HighsModelStatus.kSolutionLimit and solution_limit is not None:
        if not has_solution:
            raise NoSolutionError(f"the solver stopped at its solution limit ({solution_limit}) without a plan")
        st = "solution_limit"
    else:
        raise OptimizerError(f"HiGHS stopped with status {h.modelStatusToString(ms)!r}")
    vals = list(h.getSolution().col_value)
    # the objective of the values returned, not HiGHS's report: highspy 1.16 stopped by a time
    # limit reported an objective below the optimum for an incumbent that cost more
    obj = math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals))
    if not relax and any(mdl.integer[c] for c in cols) and st != "optimal":
        bound = max(0.0, float(info.mip_dual_bound))  # costs are ≥ 0, so 0 is always a bound
    else:
        bound = obj
    return st, obj, bound, vals


def solve_cbc(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
              integral_objective: bool = False) -> PartResult:
    """One part by CBC through PuLP (whole seconds of time limit; no start, no solution limit)."""
    import pulp

    prob, var = to_pulp(mdl, cols, rows)
    kw: dict[str, Any] = {"msg": False}
    if integral_objective:  # integer costs: a gap below 1 proves optimality, exactly
        kw.update(gapRel=0.0, gapAbs=0.99)
    if time_limit is not None:
        kw["timeLimit"] = max(1, int(math.ceil(time_limit)))
    cbc = pulp.PULP_CBC_CMD(**kw)
    if not cbc.available():  # pragma: no cover
        raise SolverUnavailableError("CBC is not available in this PuLP installation; use --solver highs")
    prob.solve(cbc)
    # LpStatus says "Optimal" for an incumbent at a time-out too: sol_status tells them apart.
    if prob.sol_status == pulp.LpSolutionOptimal:
        st = "optimal"
    elif prob.sol_status == pulp.LpSolutionIntegerFeasible:
        st = "time_limit"
    elif prob.sol_status in (pulp.LpSolutionInfeasible, pulp.LpSolutionUnbounded):
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    else:
        raise NoSolutionError("CBC stopped before it found any plan; raise the time limit or use --solver highs")
    vals = [float(var[c].value() or 0.0) for c in cols]
    obj = sum(mdl.cost[c] * v for c, v in zip(cols, vals))
    bound = obj
    if st != "optimal":  # CBC's bound is not exposed by PuLP: the LP relaxation is a valid one
        bound = cbc_relaxation(mdl, cols, rows)
    return st, obj, bound, vals


def cbc_relaxation(mdl: Model, cols: list[int], rows: list[int]) -> float:
    """The optimum of the LP relaxation of one part, by CBC."""
    import pulp

    relax, _ = to_pulp(mdl, cols, rows, relax=True)
    relax.solve(pulp.PULP_CBC_CMD(msg=False))
    return float(pulp.value(relax.objective) or 0.0)
