"""JAQPOT: the paper's goldens (Table 2, the running example at μ = 30,
Table 4's baselines) and properties of the solvers against brute force."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from mqjoin.model.errors import JaqpotError
from mqjoin.planners.jaqpot import (BASELINES, BinaryPlan, baseline, coverage, discrete_knapsack, evaluate, figure_2b,
                                    gh_wmscp,
                           grepp, jaqpot, jaqpot_policy, linear_plan, productivity_table, refresh_rates,
                           running_example, staleness, state_names)


def _trunc3(x: float) -> float:
    return math.floor(x * 1000) / 1000


def test_golden_table_2():
    rows = {r.stream: r for r in productivity_table(running_example())}
    assert [(rows[s].resources, rows[s].output) for s in "ABC"] == [(15, 4), (16, 5), (10, 1)]
    # the paper prints ρ_p truncated to three decimals: 4/15, 5/16, 1/10
    assert [_trunc3(rows[s].productivity) for s in "ABC"] == [0.266, 0.312, 0.1]
    for r in rows.values():  # Eq. 8 equals output per resource of the bundle
        assert r.productivity == pytest.approx(r.output / r.resources)


def test_golden_running_example_at_mu_30():
    plan = running_example()
    pol = jaqpot_policy(plan, 30)
    assert pol.throughput == 6 and pol.multiples == {"B": 1, "C": 1}  # B: 16, C: 10, 4 wasted
    dp = discrete_knapsack(plan, 30)
    assert dp.throughput == 8 and dp.multiples == {"A": 2}  # 30 = 15 × 2
    g = grepp(plan, 30)
    assert g.paths == {"B": 30}
    assert g.throughput == pytest.approx(9.375) and round(g.throughput, 2) == 9.38
    assert round(g.allowances["b ⋉ S_A"], 2) == 20.62 and round(g.allowances["ab ⋉ S_C"], 2) == 9.38
    # producer–consumer match: b's 20.625 probes produce exactly the 9.375 ab tuples that probe S_C
    assert evaluate(plan, g.allowances) == pytest.approx(g.throughput)


def test_golden_table_4_baselines():
    plan = figure_2b()
    eq = baseline(plan, 300, "EqualHJ")
    assert set(eq.allowances.values()) == {75.0} and eq.throughput == pytest.approx(450.0)
    # the paper rounds GlobalHJPR's allowances to 13/130/130/27: r⋈1 = 656.5, r_root = 677
    rounded = {"a ⋉ S_B": 13, "b ⋉ S_A": 130, "ab ⋉ S_C": 130, "c ⋉ S_AB": 27}
    assert evaluate(plan, rounded) == pytest.approx(677.0)
    ab_only = BinaryPlan.build(("A", "B"), plan.rates, {"A": plan.sizes["A"], "B": plan.sizes["B"]},
                               {"A": plan.selectivities["A"], "B": plan.selectivities["B"]})
    assert evaluate(ab_only, {"a ⋉ S_B": 13, "b ⋉ S_A": 130}) == pytest.approx(656.5)
    glob = baseline(plan, 300, "GlobalHJPR")
    assert [round(glob.allowances[k]) for k in rounded] == [13, 130, 130, 26]  # 300·ρ/11.5
    assert baseline(plan, 300, "EBestHJP").throughput == pytest.approx(750.0)
    # SBestHJP: Table 4's allowances λ'_b = 50, λ'_ab = 250; the paper's r⋈1 = 150 contradicts its own
    # ρ_h(b ⋉ S_A) = 5 (50 · 5 = 250, all consumed by λ'_ab): here it ties with GrePP's optimum
    sb = baseline(plan, 300, "SBestHJP")
    assert sb.allowances == {"a ⋉ S_B": 0.0, "b ⋉ S_A": 50.0, "ab ⋉ S_C": 250.0, "c ⋉ S_AB": 0.0}
    assert sb.throughput == pytest.approx(grepp(plan, 300).throughput) == pytest.approx(1250.0)
    assert grepp(plan, 300).throughput > max(baseline(plan, 300, p).throughput for p in BASELINES if p != "SBestHJP")


@pytest.mark.parametrize("streams", ["ABCD", "ABCDE"])
def test_lemma_2_k_minus_2_susceptible_states(streams):
    for tree in (linear_plan(streams), (("A", "B"), ("C", "D")) if len(streams) == 4
                 else ((("A", "B"), ("C", "D")), "E")):
        plan = BinaryPlan.build(tree, {s: 10 for s in streams}, dict.fromkeys(state_names(tree), 10), 0.1)
        assert len(plan.susceptible_states()) == len(streams) - 2, tree


def _random_plan(rng: random.Random, k: int, rational: bool = False) -> BinaryPlan:
    streams = "ABCDE"[:k]
    trees = [linear_plan(streams)]
    if k == 4:
        trees.append((("A", "B"), ("C", "D")))
    tree = rng.choice(trees)
    sizes = {s: rng.choice([2, 4, 5, 10]) if rational else rng.uniform(200, 5000) for s in state_names(tree)}
    sel = {s: rng.choice([0.1, 0.2, 0.5]) if rational else rng.uniform(0.01, 0.1) for s in sizes}
    rates = {s: rng.choice([20, 50]) if rational else rng.uniform(300, 1200) for s in streams}
    return BinaryPlan.build(tree, rates, sizes, sel)


def test_discrete_knapsack_is_optimal_and_the_greedy_policy_is_not_better():
    rng = random.Random(7)
    for _ in range(30):
        plan = _random_plan(rng, rng.choice([3, 4]), rational=True)
        rows = productivity_table(plan)
        mu = rng.randint(0, 60)
        best = 0
        ranges = [range(0, min(mu // r.resources, int(plan.rates[r.stream] // r.leaf)) + 1) for r in rows]
        for ms in itertools.product(*ranges):
            if sum(m * r.resources for m, r in zip(ms, rows)) <= mu:
                best = max(best, sum(m * r.output for m, r in zip(ms, rows)))
        dp = discrete_knapsack(plan, mu)
        assert dp.throughput == best and dp.used <= mu + 1e-9
        assert jaqpot_policy(plan, mu).throughput <= best
        assert grepp(plan, mu).throughput >= best - 1e-9  # the continuous relaxation bounds both


def test_grepp_is_optimal_among_path_allocations_and_beats_the_baselines():
    rng = random.Random(11)
    for _ in range(40):
        plan = _random_plan(rng, rng.choice([3, 4, 5]))
        sat_mu, sat_r = plan.saturation()
        mu = rng.uniform(0, 1.2) * sat_mu
        g = grepp(plan, mu)
        assert g.used == pytest.approx(min(mu, sat_mu))
        assert evaluate(plan, g.allowances) == pytest.approx(g.throughput, rel=1e-9)
        assert g.throughput <= sat_r * (1 + 1e-9)
        for _ in range(20):  # random feasible path allocations never do better
            w = [rng.random() for _ in plan.streams]
            per = {s: min(plan.capacity(s), mu * x / sum(w)) for s, x in zip(plan.streams, w)}
            assert sum(x * plan.paths()[s].productivity for s, x in per.items()) <= g.throughput * (1 + 1e-9)
        for p in BASELINES:
            b = baseline(plan, mu, p)
            assert b.used == pytest.approx(mu) and b.throughput <= g.throughput * (1 + 1e-9)


def test_jaqpot_fulfils_freshness_when_feasible():
    rng = random.Random(3)
    feasible = 0
    for _ in range(40):
        plan = _random_plan(rng, rng.choice([3, 4, 5]))
        fresh = {s: rng.choice([1.5, 3, 5]) * plan.sizes[s] / plan.rates[s] for s in plan.streams}
        refresh = refresh_rates(plan, fresh)
        mu = rng.uniform(0.05, 1.0) * plan.saturation()[0]
        a = jaqpot(plan, mu, refresh)
        assert a.used <= mu * (1 + 1e-9)
        if a.feasible:
            feasible += 1
            for st, r in refresh.items():  # every susceptible state refreshed fast enough …
                probing = sum(v for k, v in a.allowances.items() if k.startswith(st.lower() + " ⋉"))
                assert probing >= r * (1 - 1e-9)
            for s, t in staleness(plan, a.allowances).items():  # … so Lemma 1 holds for every stream
                assert t <= fresh[s] * (1 + 1e-9), s
            assert a.throughput <= grepp(plan, mu).throughput * (1 + 1e-9)  # freshness costs throughput
        else:
            assert a.freshness == pytest.approx(mu)
    assert feasible >= 10


def test_grepp_alone_can_leave_states_stale():
    # the most productive path is C's one hop: GrePP starves ⋈1, S_AB never refreshes
    plan = BinaryPlan.build((("A", "B"), "C"), {"A": 100, "B": 100, "C": 1000},
                            {"A": 10, "B": 10, "C": 10, "AB": 100}, {"A": 0.1, "B": 0.1, "C": 0.1, "AB": 0.5})
    g = grepp(plan, 500)
    assert g.paths == {"C": 500} and math.isinf(staleness(plan, g.allowances)["A"])
    a = jaqpot(plan, 500, refresh_rates(plan, 1.0))  # slack 0.9 s: S_AB needs 100 / 0.9 tuples/s
    assert a.feasible and a.freshness > 0 and math.isfinite(staleness(plan, a.allowances)["A"])


@pytest.mark.parametrize("call,culprit", [
    (lambda: BinaryPlan.build(("A", "A"), {"A": 1}, {"A": 1}, 0.1), "twice"),
    (lambda: BinaryPlan.build((("A", "B"), "C"), {"A": 1, "B": 1, "C": 1}, {"A": 1, "B": 1, "C": 1}, 0.1), "S_AB"),
    (lambda: BinaryPlan.build(("A", "B"), {"A": 1, "B": -2}, {"A": 1, "B": 1}, 0.1), "rate of stream B"),
    (lambda: BinaryPlan.build(("A", "B"), {"A": 1, "B": 1}, {"A": 1, "B": 1}, 1.5), "selectivity of state"),
    (lambda: BinaryPlan.build("A", {"A": 1}, {"A": 1}, 0.1), "pair of subtrees"),
    (lambda: grepp(running_example(), -1), "μ"),
    (lambda: baseline(running_example(), 10, "RoundRobin"), "RoundRobin"),
    (lambda: evaluate(running_example(), {"x ⋉ S_Y": 1}), "x ⋉ S_Y"),
    (lambda: gh_wmscp(running_example(), {"A": 1}), "not a staleness-susceptible"),
    (lambda: refresh_rates(running_example(), 0.001), "cannot be fulfilled"),
])
def test_bad_input_is_a_typed_error(call, culprit):
    with pytest.raises(JaqpotError, match=culprit):
        call()


def test_gh_wmscp_against_the_exact_cover():
    """The greedy cover is never cheaper than the exact (LP) minimum cover — it is a cover — and
    within the greedy bound H(m) of it; with one susceptible state it is exact."""
    pulp = pytest.importorskip("pulp")
    rng = random.Random(5)
    checked = 0
    for _ in range(40):
        plan = _random_plan(rng, rng.choice([3, 4, 5]))
        cover = coverage(plan)
        refresh = {st: rng.uniform(0.1, 2.0) * plan.sizes[st] / 10 for st in plan.susceptible_states()}
        given, ok = gh_wmscp(plan, refresh)
        lp = pulp.LpProblem("cover", pulp.LpMinimize)
        x = {s: pulp.LpVariable(f"x_{s}", 0, plan.capacity(s)) for s in plan.streams}
        lp += pulp.lpSum(x.values())
        for st, r in refresh.items():
            lp += pulp.lpSum(cover[s].get(st, 0.0) * x[s] for s in plan.streams) >= r, f"refresh_{st}"
        lp.solve(pulp.PULP_CBC_CMD(msg=False))
        feasible = pulp.LpStatus[lp.status] == "Optimal"
        assert ok == feasible
        if not ok:
            continue
        checked += 1
        for st, r in refresh.items():
            assert sum(cover[s].get(st, 0.0) * v for s, v in given.items()) >= r * (1 - 1e-9)
        opt, got = pulp.value(lp.objective), sum(given.values())
        m = len(refresh)
        assert opt * (1 - 1e-6) <= got <= opt * sum(1 / i for i in range(1, m + 1)) * (1 + 1e-6)
        if m == 1:
            assert got == pytest.approx(opt, rel=1e-6)
    assert checked >= 20


def test_bundles_of_measured_productivities_are_small_and_never_promise_more_than_the_path():
    from mqjoin.planners.jaqpot import BUNDLE_TOLERANCE, bundle_period

    rng = random.Random(5)
    for _ in range(30):
        plan = _random_plan(rng, rng.choice([3, 4, 5]))  # real-valued ρ_h, as statistics give them
        for r in productivity_table(plan):
            assert r.output >= 1 and r.leaf < 10**4, r
            assert r.output / r.resources <= r.productivity * (1 + 1e-9)  # GrePP bounds every discrete policy
            assert r.output / r.resources >= r.productivity * (1 - BUNDLE_TOLERANCE) ** 2
        period = bundle_period(plan)
        assert period >= 1 and all(r.leaf <= plan.rates[r.stream] * period for r in productivity_table(plan))


def test_a_longer_period_lets_a_slow_stream_supply_whole_bundles():
    plan = BinaryPlan.build((("A", "B"), "C"), rates={"A": 0.5, "B": 0.5, "C": 0.5},
                            sizes={"A": 50, "B": 40, "C": 100, "AB": 10},
                            selectivities={"A": 1 / 110, "B": 1 / 110, "C": 1 / 100, "AB": 1 / 100})
    from mqjoin.planners.jaqpot import bundle_period

    assert jaqpot_policy(plan, 30).throughput == discrete_knapsack(plan, 30).throughput == 0  # 11 leaf tuples > 0.5/s
    period = bundle_period(plan)
    assert period == 22  # the largest bundle, 11 leaf tuples, at 0.5 tuples/s
    pol, dp = jaqpot_policy(plan, 1, period), discrete_knapsack(plan, 1, period)
    assert 0 < pol.throughput <= dp.throughput <= grepp(plan, 1).throughput
    assert dp.used <= 1 + 1e-9 and dp.multiples


@pytest.mark.parametrize("period", [0, -1, "soon", float("inf")])
def test_a_bad_bundle_period_is_a_typed_error_naming_it(period):
    with pytest.raises(JaqpotError, match="period of whole bundles"):
        jaqpot_policy(running_example(), 30, period)
    with pytest.raises(JaqpotError, match="period of whole bundles"):
        discrete_knapsack(running_example(), 30, period)
