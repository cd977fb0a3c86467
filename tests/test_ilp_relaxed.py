"""The order relaxation of the ILP: ``mqjoin.planning.ilp.solve`` first solves the model
with continuous probe-order choices and binary materialisation indicators
(``mqjoin.planning.ilp.orders_relaxed``) and keeps that answer only when its orders are integral; else
it solves the model as built.  Either way the optimum, and the canonical plan among equal-cost
optima, must be those of the exact ILP."""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
import mqjoin.planning.ilp.solving as ilp_solving
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.model.errors import NoSolutionError
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.ilp import build_model, lp_bound, orders_relaxed, solve

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # PuLP's PULP_CBC_CMD notice

SMALL = [(f"seed{s}", ref.random_workload(s)) for s in (1, 2, 4, 9, 17)]
MEDIUM = [(f"{n}x{k}/{r}", random_workload(n, r, k, seed=s)) for n, r, k, s in
          ((4, 12, 4, 1), (6, 10, 3, 2), (2, 20, 5, 3))]


def choices(mdl, sol):
    """The chosen probe orders and partition attributes (what a plan is made of)."""
    return ({k for k, i in mdl.x.items() if sol.value(i) > 0.5}, {k for k, i in mdl.z.items() if sol.value(i) > 0.5})


@pytest.mark.parametrize("name,w", SMALL + MEDIUM, ids=[n for n, _ in SMALL + MEDIUM])
@pytest.mark.parametrize("policy", ["single", "replicas", "budget"])
def test_same_optimum_and_canonical_plan_as_the_exact_ilp(name, w, policy):
    mdl = build_model(enumerate_candidates(w), policy)
    exact = solve(mdl, relax_orders=False)
    relaxed = solve(mdl, relax_orders=True)
    assert exact.optimal and relaxed.optimal
    assert math.isclose(relaxed.objective, exact.objective, rel_tol=1e-7, abs_tol=1e-7)
    if exact.canonical and relaxed.canonical:
        assert choices(mdl, relaxed) == choices(mdl, exact)


@pytest.mark.parametrize("name,w", SMALL[:3], ids=[n for n, _ in SMALL[:3]])
def test_cbc_solves_the_relaxation_to_the_same_plan(name, w):
    mdl = build_model(enumerate_candidates(w), "single")
    highs, cbc = solve(mdl, relax_orders=True), solve(mdl, solver="cbc", relax_orders=True)
    assert math.isclose(cbc.objective, highs.objective, rel_tol=1e-7)
    if highs.canonical and cbc.canonical:
        assert choices(mdl, cbc) == choices(mdl, highs)


def test_fractional_orders_fall_back_to_the_exact_model(monkeypatch):
    """With every relaxed answer taken for fractional, the exact model decides: same plan."""
    w = MEDIUM[0][1]
    mdl = build_model(enumerate_candidates(w), "single")
    exact = solve(mdl, relax_orders=False)
    calls = []
    relax = ilp_solving.orders_relaxed
    monkeypatch.setattr(ilp_solving, "orders_relaxed", lambda m: calls.append(m) or relax(m))
    monkeypatch.setattr(ilp_solving, "INTEGRALITY_TOLERANCE", -1.0)
    fallback = solve(mdl, relax_orders=True, branching=False)  # (coupled parts: searched, not relaxed)
    assert calls and fallback.optimal
    assert math.isclose(fallback.objective, exact.objective, rel_tol=1e-7)
    if exact.canonical and fallback.canonical:  # the tie-break has a time budget: a loaded machine may miss it
        assert choices(mdl, fallback) == choices(mdl, exact)


def test_the_relaxation_is_a_relaxation():
    """Orders continuous, MIR indicators binary, partition choices still binary; its LP bound is
    the model's and its optimum no higher."""
    mdl = build_model(enumerate_candidates(MEDIUM[0][1]), "single")
    r = orders_relaxed(mdl)
    assert not any(r.integer[i] for i in mdl.x.values())
    assert all(r.integer[i] for i in [*mdl.m.values(), *mdl.z.values()])
    assert r.rows is mdl.rows and r.cost is mdl.cost  # same rows and costs, only integrality differs
    assert math.isclose(lp_bound(r), lp_bound(mdl))
    assert solve(r, relax_orders=False).objective <= solve(mdl, relax_orders=False).objective * (1 + 1e-9)


@pytest.mark.parametrize("w,mirs,relaxed", [(MEDIUM[2][1], True, True), (MEDIUM[2][1], False, False),
                                            (MEDIUM[0][1], True, False)], ids=["5-way", "no-mirs", "4-way"])
def test_by_default_models_with_large_mirs_are_relaxed(monkeypatch, w, mirs, relaxed):
    """Relaxed first by default where an MIR has RELAX_MIN_MIR (4) relations: five-way queries
    (in parts that the branch and bound does not take: see tests/test_ilp_branching.py)."""
    calls = []
    relax = ilp_solving.orders_relaxed
    monkeypatch.setattr(ilp_solving, "orders_relaxed", lambda m: calls.append(m) or relax(m))
    mdl = build_model(enumerate_candidates(w, mirs=mirs), "replicas")
    assert solve(mdl, branching=False).optimal
    assert bool(calls) == relaxed
    calls.clear()
    assert solve(mdl, solution_limit=1000).optimal and not calls  # a solution limit counts exact solves


@pytest.mark.parametrize("limit", [0.01, 0.1])
def test_a_time_limited_relaxed_solve_reports_a_real_bound(limit):
    mdl = build_model(enumerate_candidates(MEDIUM[2][1]), "single")
    optimum = solve(mdl, relax_orders=False).objective
    try:
        sol = solve(mdl, time_limit=limit, relax_orders=True)
    except NoSolutionError:  # a typed refusal is honest too
        return
    assert sol.bound <= optimum * (1 + 1e-7) + 1e-7
    assert sol.objective >= optimum * (1 - 1e-7)


def test_a_relaxed_plan_stands_when_the_exact_solve_finds_none(monkeypatch):
    """Stopped with an integral but unproven relaxed plan, and no time left for the exact
    model to take it up: that plan is returned with the relaxation's (valid) bound."""
    mdl = build_model(enumerate_candidates(MEDIUM[2][1]), "replicas")
    optimum = solve(mdl, relax_orders=False).objective
    part = ilp_solving._solve_part

    def stopped(m, cols, rows, *args, **kw):
        if kw.get("relax_orders"):
            return part(m, cols, rows, *args, **kw)
        if m.num_binaries < mdl.num_binaries:  # the relaxation: its optimum, reported as unproven
            st, obj, _, vals = part(m, cols, rows, *args, **kw)
            return "time_limit", obj, 0.5 * obj, vals
        raise NoSolutionError("stopped")

    monkeypatch.setattr(ilp_solving, "_solve_part", stopped)
    sol = solve(mdl, relax_orders=True, canonical=False, branching=False)
    assert sol.status == "time_limit"
    assert math.isclose(sol.objective, optimum, rel_tol=1e-7)
    assert sol.bound == pytest.approx(0.5 * optimum)
