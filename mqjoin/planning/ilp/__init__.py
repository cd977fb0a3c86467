"""The integer linear program that picks probe orders and partitionings (docs/model.md §5,
docs/architecture.md §3), built and solved.

One module per job, each depending only on those above it::

    model      the formulation: x per probe order, y per step, m per MIR, z per (store,
               partition attribute), the broadcast indicators; tie-break weights; components;
               a model grown from the one before when queries are added
    forked     half of a pure-Python computation in a forked child (the blocks' searches on two cores)
    monitor    a running solve's incumbent and bound as they improve, and its stop
    fairshare  a bound on every part at once, each step's cost shared among its possible users
    formats    the model as a PuLP problem, LP and MPS files
    backends   HiGHS and CBC on one part: statuses, bounds, gaps
    branching  the LP branch and bound that branches on MIR materialisation first
    enumeration  a small block's optimum and lexicographic optimum under every combination at once
    paths      a larger block's (or one query's) optimum and lexicographic optimum without LPs:
               a branch and bound over MIRs and partitions, each node solved per start relation
    blocks     a coupled part split at its shared stores; each block's optimum under choices
    master     the master ILP over the shared stores' choices, and its canonical tie-break
    coupled    the coupled search: the master or depth first, by the part's shape
    solving    solve(): each part by the method that suits it, then the canonical tie-break

This package is the only one that imports PuLP or highspy; :func:`solve` picks HiGHS or CBC
by name, so either may be missing as long as it is not asked for.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... ''')
>>> sol = solve(build_model(enumerate_candidates(w, mirs=False)))
>>> sol.status, sol.objective
('optimal', 450.0)
"""

from mqjoin.planning.ilp.backends import INTEGRALITY_TOLERANCE
from mqjoin.planning.ilp.blocks import BLOCK_THREADS
from mqjoin.planning.ilp.branching import BRANCH_MIN_MIR
from mqjoin.planning.ilp.coupled import MASTER_MIN_STORES, QUICK_MAX_COMBINATIONS
from mqjoin.planning.ilp.enumeration import ENUMERATE_MAX
from mqjoin.planning.ilp.formats import export, lp_text, to_pulp
from mqjoin.planning.ilp.changed import extend_model, shrink_model
from mqjoin.planning.ilp.model import (STRENGTHEN_MAX_ORDERS, TIE_BITS, TIE_MIN_SECONDS, TIE_SHARE, TIE_SLACK, Model,
                                       build_model, components, tie_weight)
from mqjoin.planning.ilp.paths import NODE_LIMIT
from mqjoin.planning.ilp.solving import (RELAX_MIN_MIR, Solution, lp_bound, orders_relaxed, searched, solve,
                                        unsearched_binaries)
from mqjoin.planning.options import (ALL_POLICIES, BUDGET, POLICIES, SOLVERS, check_budget, check_policy,
                                     check_solution_limit, check_solver, check_time_limit)

__all__ = [
    "ALL_POLICIES", "BLOCK_THREADS", "BRANCH_MIN_MIR", "BUDGET", "ENUMERATE_MAX", "INTEGRALITY_TOLERANCE",
    "MASTER_MIN_STORES",
    "Model", "NODE_LIMIT", "POLICIES", "QUICK_MAX_COMBINATIONS", "RELAX_MIN_MIR", "SOLVERS", "STRENGTHEN_MAX_ORDERS",
    "Solution", "TIE_BITS", "TIE_MIN_SECONDS", "TIE_SHARE", "TIE_SLACK", "build_model", "check_budget", "check_policy",
    "check_solution_limit", "check_solver", "check_time_limit", "components", "export", "extend_model", "lp_bound",
    "lp_text", "orders_relaxed", "searched", "shrink_model", "solve", "tie_weight", "to_pulp", "unsearched_binaries",
]
