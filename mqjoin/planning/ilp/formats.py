"""The model as a PuLP problem, and as an LP or MPS file.

PuLP is the bridge to CBC (:func:`mqjoin.planning.ilp.backends.solve_cbc`) and the writer of the
two file formats other solvers read, so a model can be inspected or solved elsewhere
(``mqjoin optimize --export model.lp``).  Variables and rows keep the model's names, which
:class:`~mqjoin.planning.ilp.model.Model` made acceptable to both formats.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... ''')
>>> text = lp_text(build_model(enumerate_candidates(w, mirs=False)))
>>> [line for line in text.splitlines() if line.startswith(("part_", "bcast_"))]  # doctest: +NORMALIZE_WHITESPACE
['bcast_R_to_S: b_R_to_S - y_R_to_S + z_S_a >= 0', 'bcast_T_to_S: b_T_to_S - y_T_to_S + z_S_b >= 0',
 'part_S: z_S_a + z_S_b = 1']
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Iterable

from mqjoin.model.errors import OptimizerError, SolverUnavailableError
from mqjoin.planning.ilp.model import Model


def to_pulp(mdl: Model, cols: Iterable[int] | None = None, rows: Iterable[int] | None = None,
            relax: bool = False) -> tuple[Any, dict[int, Any]]:
    """The model (or one component of it) as a ``pulp.LpProblem`` (for CBC and exports)."""
    try:
        import pulp
    except ImportError:  # pragma: no cover
        raise SolverUnavailableError("PuLP is needed for CBC and for LP/MPS export: pip install pulp") from None
    cols = list(range(mdl.num_variables)) if cols is None else list(cols)
    rows = list(range(mdl.num_constraints)) if rows is None else list(rows)
    prob = pulp.LpProblem("mqjoin_probe_orders", pulp.LpMinimize)
    var: dict[int, Any] = {}
    for c in cols:
        cat = pulp.LpBinary if (mdl.integer[c] and not relax) else pulp.LpContinuous
        up = None if mdl.upper[c] == math.inf else mdl.upper[c]
        if hasattr(prob, "add_variable"):  # PuLP ≥ 3.3: variables are created through the problem
            var[c] = prob.add_variable(mdl.names[c], lowBound=0, upBound=up, cat=cat)
        else:  # pragma: no cover - older PuLP
            var[c] = pulp.LpVariable(mdl.names[c], lowBound=0, upBound=up, cat=cat)
    prob += pulp.lpSum(mdl.cost[c] * var[c] for c in cols if mdl.cost[c])
    for r in rows:
        name, idx, coef, lo, hi = mdl.rows[r]
        expr = pulp.LpAffineExpression([(var[i], a) for i, a in zip(idx, coef)])
        if lo == hi:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, name, lo)
        elif hi == math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, name, lo)
        elif lo == -math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, name, hi)
        else:  # pragma: no cover - the model has no ranged rows
            raise OptimizerError(f"ranged row {name} cannot be exported")
    return prob, var


def export(mdl: Model, path: str) -> str:
    """Write the model as ``.lp`` or ``.mps`` (by the file's extension); returns the path."""
    prob, _ = to_pulp(mdl)
    if path.endswith(".mps"):
        prob.writeMPS(path)
    elif path.endswith(".lp"):
        prob.writeLP(path)
    else:
        raise OptimizerError(f"cannot export to {path!r}: use a file name ending in .lp or .mps")
    return path


def lp_text(mdl: Model) -> str:
    """The model in LP format, as text (for widgets and notebooks)."""
    fd, tmp = tempfile.mkstemp(suffix=".lp")
    os.close(fd)
    try:
        export(mdl, tmp)
        with open(tmp, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(tmp)
