"""The branch and bound over MIR materialisation (issue 14, speed): ``mqjoin.ilp.solve`` solves
one query's parts with an MIR of four or more relations by ``_branch_and_bound`` (LP at every
node, branching on ``m`` first) instead of HiGHS's MIP.  It must return the optimum — that of
the brute-force reference optimiser and of the exact ILP — and the same canonical plan, under
every policy, and a real bound when a time limit stops it."""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
import mqjoin.ilp as ilp
from mqjoin.candidates import enumerate_candidates
from mqjoin.errors import NoSolutionError
from mqjoin.generate import random_workload
from mqjoin.ilp import build_model, components, solve

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SMALL = [(f"seed{s}", ref.random_workload(s)) for s in (1, 2, 3, 4, 5, 9, 17)]
MEDIUM = [(f"{n}x{k}/{r}s{s}", random_workload(n, r, k, seed=s)) for n, r, k, s in
          ((2, 20, 5, 3), (1, 10, 5, 4), (3, 12, 4, 1), (4, 8, 4, 5), (2, 10, 5, 7))]


def choices(mdl, sol):
    return ({k for k, i in mdl.x.items() if sol.value(i) > 0.5}, {k for k, i in mdl.z.items() if sol.value(i) > 0.5})


@pytest.fixture
def everywhere(monkeypatch):
    """Every part of every model through the branch and bound (coupled parts, partition
    choices, budgets and three-way queries included), not only those it is chosen for."""
    monkeypatch.setattr(ilp, "_branches", lambda mdl, cols: True)


@pytest.mark.parametrize("name,w", SMALL, ids=[n for n, _ in SMALL])
@pytest.mark.parametrize("policy", ["single", "replicas"])
def test_the_brute_force_optimum(everywhere, name, w, policy):
    sol = solve(build_model(enumerate_candidates(w), policy))
    assert sol.optimal
    assert math.isclose(sol.objective, ref.optimum(w, policy, True), rel_tol=1e-7, abs_tol=1e-7)


@pytest.mark.parametrize("name,w", SMALL + MEDIUM, ids=[n for n, _ in SMALL + MEDIUM])
@pytest.mark.parametrize("policy,budgets", [("single", {}), ("replicas", {}), ("budget", {"replica_budget": 1500.0}),
                                            ("single", {"mir_budget": 1000.0})], ids=["single", "replicas", "budget",
                                                                                      "mir-budget"])
def test_the_exact_optimum_and_canonical_plan(everywhere, name, w, policy, budgets):
    mdl = build_model(enumerate_candidates(w), policy, **budgets)
    exact = solve(mdl, branching=False, relax_orders=False)
    branched = solve(mdl, branching=True)
    assert exact.optimal and branched.optimal
    assert math.isclose(branched.objective, exact.objective, rel_tol=1e-7, abs_tol=1e-7)
    if exact.canonical and branched.canonical:
        assert choices(mdl, branched) == choices(mdl, exact)


def test_each_part_alone_against_highs():
    """The branch and bound on one part equals HiGHS's MIP on it, part by part."""
    mdl = build_model(enumerate_candidates(random_workload(3, 30, 5, seed=2)), "single")
    for cols, rows in components(mdl):
        st, obj, bound, vals = ilp._branch_and_bound(mdl, cols, rows, None)
        assert st == "optimal" and bound == obj
        assert math.isclose(obj, ilp._solve_highs(mdl, cols, rows, None, None)[1], rel_tol=1e-7)
        assert math.isclose(obj, math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), rel_tol=1e-12)
        assert all(v in (0.0, 1.0) for c, v in zip(cols, vals) if mdl.integer[c])


def test_five_way_queries_alone_are_branched_by_default(monkeypatch):
    calls = []
    bb = ilp._branch_and_bound
    monkeypatch.setattr(ilp, "_branch_and_bound", lambda m, cols, *a, **k: calls.append(len(cols)) or bb(m, cols, *a, **k))
    w = random_workload(3, 100, 5, seed=0)  # three five-way queries sharing no store: three parts
    mdl = build_model(enumerate_candidates(w), "replicas")
    assert solve(mdl).optimal and len(calls) == 2 * 3  # the solve and the tie-break of each part
    calls.clear()
    assert solve(build_model(enumerate_candidates(random_workload(3, 100, 3, seed=0)), "replicas")).optimal
    assert not calls  # three-way queries: HiGHS
    assert solve(mdl, solver="cbc").optimal and not calls
    assert solve(mdl, branching=False).optimal and not calls


@pytest.mark.parametrize("limit", [0.0, 0.02])
def test_a_time_limited_branch_and_bound_reports_a_real_bound(limit):
    mdl = build_model(enumerate_candidates(random_workload(2, 100, 5, seed=1)), "single")
    (cols, rows), *_ = components(mdl)
    optimum = ilp._branch_and_bound(mdl, cols, rows, None)[1]
    try:
        st, obj, bound, _ = ilp._branch_and_bound(mdl, cols, rows, limit)
    except NoSolutionError:
        return
    assert bound <= optimum * (1 + 1e-9) and obj >= optimum * (1 - 1e-9)
    # a start is the first incumbent: kept when the limit strikes at once
    st, obj, bound, _ = ilp._branch_and_bound(mdl, cols, rows, 0.0, start=solve(mdl, branching=False).values)
    assert st == "time_limit" and math.isclose(obj, optimum, rel_tol=1e-7) and bound <= optimum
