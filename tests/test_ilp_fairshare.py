"""The fair-share bound (mqjoin/planning/ilp/fairshare.py): never above a part's optimum, on
random workloads of every policy; exact where nothing can be shared; and the first report of
a monitored solve carries it."""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, components, solve
from mqjoin.planning.ilp.fairshare import fair_shares
from mqjoin.planning.ilp.monitor import Monitor
from mqjoin.planning.clash import first_orders, warm_start

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _optima_by_part(mdl):
    """Each component's columns and its optimum (the optimal solution's cost there: the parts
    share no row, so the whole optimum is optimal on each)."""
    sol = solve(mdl)
    assert sol.status == "optimal"
    parts = [cols for cols, _ in components(mdl)]
    return parts, [math.fsum(mdl.cost[c] * sol.value(c) for c in cols) for cols in parts]


@pytest.mark.parametrize("policy", ["single", "replicas", "budget"])
@pytest.mark.parametrize("seed", range(6))
def test_the_bound_of_every_part_is_at_most_its_optimum(policy, seed):
    w = ref.random_workload(seed, n_rel=(5, 8), n_attr=(2, 3), n_q=(3, 6), q_size=(2, 4), par=(1, 4),
                            dpar=(2, 4), extra_eq=1, selectivity=0.01)
    mdl = build_model(enumerate_candidates(w), policy, replica_budget=0.0 if policy == "budget" else None)
    parts, optima = _optima_by_part(mdl)
    bounds = fair_shares(mdl, parts)
    assert all(b <= o * (1 + 1e-9) + 1e-9 for b, o in zip(bounds, optima)), (bounds, optima)
    assert sum(bounds) > 0


@pytest.mark.parametrize("seed", range(4))
def test_sharing_queries_with_mirs_and_broadcasts_stay_below_the_optimum(seed):
    """Many queries over few relations: steps and MIRs each with many possible users, stores
    partitioned four ways (the broadcast term at work)."""
    mdl = build_model(enumerate_candidates(random_workload(8, 6, 4, seed=seed)), "single")
    parts, optima = _optima_by_part(mdl)
    bounds = fair_shares(mdl, parts)
    assert all(b <= o * (1 + 1e-9) + 1e-9 for b, o in zip(bounds, optima)), (bounds, optima)


def test_an_mir_several_queries_probe_is_charged_its_upkeep_once():
    """Three queries probe the small MIR R⋈S, each worth it alone: its upkeep is shared among
    the groups that may probe it (charged whole to each, the bound would pass the optimum)."""
    from mqjoin.model.workload import parse_workload

    xs = ", ".join(f"X{i}: {{attributes: [b], rate: 1000}}" for i in range(3))
    qs = ", ".join(f'q{i}: "R(a), S(a,b), X{i}(b)"' for i in range(3))
    w = parse_workload(f"""
defaults: {{selectivity: 0.01, parallelism: 1}}
relations: {{R: {{attributes: [a], rate: 1000}}, S: {{attributes: [a, b], rate: 1000}}, {xs}}}
selectivities: {{R.a = S.a: 0.000001}}
queries: {{{qs}}}
""")
    mdl = build_model(enumerate_candidates(w), "replicas")
    parts, optima = _optima_by_part(mdl)
    assert 0 < sum(fair_shares(mdl, parts)) <= sum(optima) * (1 + 1e-9)


def test_without_anything_to_share_the_bound_is_the_optimum():
    """One query, no MIRs, no partitioning at stake: every step has one possible user (a step
    belongs to one start relation), so each start's cheapest order is the optimum."""
    w = random_workload(1, 10, 4, seed=3)
    mdl = build_model(enumerate_candidates(w, mirs=False), "replicas")
    parts, optima = _optima_by_part(mdl)
    assert fair_shares(mdl, parts) == pytest.approx(optima)


def test_the_broadcast_term_counts_a_surcharge_no_plan_avoids():
    """A chain R(a), S(a,b), T(b) on four instances: S keeps one attribute, so the step from R
    (knowing a) or the one from T (knowing b) is broadcast in every plan, and the bound holds
    the cheaper surcharge; without it (replicas) the bound is lower."""
    from mqjoin.model.workload import parse_workload

    w = parse_workload("""
defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q: "R(a), S(a,b), T(b)"}
""")
    single = build_model(enumerate_candidates(w, mirs=False), "single")
    parts, optima = _optima_by_part(single)
    with_broadcasts = sum(fair_shares(single, parts))
    replicas = build_model(enumerate_candidates(w, mirs=False), "replicas")
    without = sum(fair_shares(replicas, [cols for cols, _ in components(replicas)]))
    assert without < with_broadcasts <= sum(optima) + 1e-9


def test_parts_asked_for_alone_get_their_own_bounds():
    """The bound of each part does not depend on which other parts are asked for (a re-plan
    asks only for the parts it solves again)."""
    mdl = build_model(enumerate_candidates(random_workload(10, 30, 3, seed=4)), "single")
    parts = [cols for cols, _ in components(mdl)]
    assert len(parts) > 1
    every = fair_shares(mdl, parts)
    assert [fair_shares(mdl, [cols])[0] for cols in parts] == pytest.approx(every)


def test_the_first_report_of_a_monitored_solve_has_a_proven_gap():
    """Before any part is solved, the monitor holds the start's cost and the parts' fair
    shares: the first report's gap is below 100 %."""
    cands = enumerate_candidates(random_workload(12, 20, 4, seed=2))
    mdl = build_model(cands, "single")
    m = Monitor()
    sol = solve(mdl, monitor=m, start=warm_start(cands, mdl, first_orders(cands)))
    first = m.reports[0]
    parts = [cols for cols, _ in components(mdl)]
    assert first.bound == pytest.approx(sum(fair_shares(mdl, parts)))
    assert 0 < first.bound <= sol.objective and first.gap < 1
