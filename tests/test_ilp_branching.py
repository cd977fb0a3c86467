"""The branch and bound over MIR materialisation: ``mqjoin.planning.ilp.solve`` solves
one query's parts with an MIR of four or more relations by ``branching.branch_and_bound`` (LP at every
node, branching on ``m`` first) instead of HiGHS's MIP.  It must return the optimum — that of
the brute-force reference optimiser and of the exact ILP — and the same canonical plan, under
every policy, and a real bound when a time limit stops it."""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
import mqjoin.planning.ilp as ilp
import mqjoin.planning.ilp.backends as ilp_backends
import mqjoin.planning.ilp.blocks as ilp_blocks
import mqjoin.planning.ilp.branching as ilp_branching
import mqjoin.planning.ilp.coupled as ilp_coupled
import mqjoin.planning.ilp.master as ilp_master
import mqjoin.planning.ilp.paths as ilp_paths
import mqjoin.planning.ilp.solving as ilp_solving
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.model.errors import NoSolutionError
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.ilp import build_model, components, solve

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SMALL = [(f"seed{s}", ref.random_workload(s)) for s in (1, 2, 3, 4, 5, 9, 17)]
MEDIUM = [(f"{n}x{k}/{r}s{s}", random_workload(n, r, k, seed=s)) for n, r, k, s in
          ((1, 10, 5, 4), (3, 12, 4, 1), (4, 8, 4, 5), (2, 10, 5, 7))]
# (2 × 5-way over 20 relations, seed 3, passed too — its exact ILP takes 35-65 s per policy: left out
# to keep the suite within its time)


def choices(mdl, sol):
    return ({k for k, i in mdl.x.items() if sol.value(i) > 0.5}, {k for k, i in mdl.z.items() if sol.value(i) > 0.5})


@pytest.fixture
def everywhere(monkeypatch):
    """Every part of every model through the branch and bound (coupled parts, partition
    choices, budgets and three-way queries included), not only those it is chosen for."""
    monkeypatch.setattr(ilp_solving, "_branches", lambda mdl, cols: True)


@pytest.mark.parametrize("name,w", SMALL, ids=[n for n, _ in SMALL])
@pytest.mark.parametrize("policy", ["single", "replicas"])
def test_the_brute_force_optimum(everywhere, name, w, policy):
    sol = solve(build_model(enumerate_candidates(w), policy))
    assert sol.optimal
    assert math.isclose(sol.objective, ref.optimum(w, policy, True), rel_tol=1e-7, abs_tol=1e-7)


@pytest.mark.parametrize("name,w", [pytest.param(*c, id=c[0]) for c in SMALL]
                         + [pytest.param(*c, id=c[0], marks=[pytest.mark.slow] if c[0].startswith("2x5") else [])
                            for c in MEDIUM])
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
        st, obj, bound, vals = ilp_branching.branch_and_bound(mdl, cols, rows, None)
        assert st == "optimal" and bound == obj
        assert math.isclose(obj, ilp_backends.solve_highs(mdl, cols, rows, None, None)[1], rel_tol=1e-7)
        assert math.isclose(obj, math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), rel_tol=1e-12)
        assert all(v in (0.0, 1.0) for c, v in zip(cols, vals) if mdl.integer[c])


def test_five_way_queries_alone_are_branched_by_default(monkeypatch):
    calls = []
    bb = ilp_branching.branch_and_bound
    monkeypatch.setattr(ilp_solving, "branch_and_bound", lambda m, cols, *a, **k: calls.append(len(cols))
                        or bb(m, cols, *a, **k))
    w = random_workload(3, 100, 5, seed=0)  # three five-way queries sharing no store: three parts
    mdl = build_model(enumerate_candidates(w), "replicas")
    assert solve(mdl).optimal and not calls  # solved without LPs (mqjoin.planning.ilp.paths)
    monkeypatch.setattr(ilp_paths, "NODE_LIMIT", 0)  # the search gives up at once: the branch and bound
    assert solve(mdl).optimal and len(calls) == 2 * 3  # the solve and the tie-break of each part
    calls.clear()
    assert solve(build_model(enumerate_candidates(random_workload(3, 100, 3, seed=0)), "replicas")).optimal
    assert not calls  # three-way queries: HiGHS
    assert solve(mdl, branching=False).optimal and not calls
    one = build_model(enumerate_candidates(random_workload(1, 100, 5, seed=0)), "replicas")
    assert solve(one, solver="cbc", canonical=False).optimal and not calls  # CBC: its own branch and bound


@pytest.mark.parametrize("limit", [0.0, 0.02])  # branch_and_bound itself takes 0
def test_a_time_limited_branch_and_bound_reports_a_real_bound(limit):
    mdl = build_model(enumerate_candidates(random_workload(2, 100, 5, seed=1)), "single")
    (cols, rows), *_ = components(mdl)
    optimum = ilp_branching.branch_and_bound(mdl, cols, rows, None)[1]
    try:
        st, obj, bound, _ = ilp_branching.branch_and_bound(mdl, cols, rows, limit)
    except NoSolutionError:
        return
    assert bound <= optimum * (1 + 1e-9) and obj >= optimum * (1 - 1e-9)
    # a start is the first incumbent: kept when the limit strikes at once
    st, obj, bound, _ = ilp_branching.branch_and_bound(mdl, cols, rows, 0.0, start=solve(mdl, branching=False).values)
    assert st == "time_limit" and math.isclose(obj, optimum, rel_tol=1e-7) and bound <= optimum


# --- parts coupled by shared stores (single): a search over their partition choices -------------

COUPLED = [(f"{n}x{k}/{r}s{s}", random_workload(n, r, k, seed=s)) for n, r, k, s in
           ((3, 12, 4, 2), (4, 10, 4, 3), (3, 8, 5, 6))]
# (3 × 5-way over 9 relations, seed 1, passed too — its exact ILP takes ~110 s: left out)
#: the exact ILP takes 35-150 s on the five-way ones
SLOW = [pytest.param(*c, marks=pytest.mark.slow, id=c[0]) if "x5" in c[0] else pytest.param(*c, id=c[0])
        for c in COUPLED]


@pytest.fixture
def coupled(monkeypatch):
    """Every part with several queries through the search over shared partition choices."""
    calls = []
    solve_coupled = ilp_solving.solve_coupled
    monkeypatch.setattr(ilp_solving, "_branches", lambda mdl, cols: False)
    monkeypatch.setattr(ilp_solving, "_couples", lambda mdl, cols: mdl.policy == "single")
    monkeypatch.setattr(ilp_solving, "solve_coupled", lambda *a: calls.append(a[0]) or solve_coupled(*a))
    return calls


@pytest.mark.parametrize("name,w", SMALL, ids=[n for n, _ in SMALL])
def test_coupled_parts_reach_the_brute_force_optimum(coupled, name, w):
    sol = solve(build_model(enumerate_candidates(w), "single"))
    assert sol.optimal
    assert math.isclose(sol.objective, ref.optimum(w, "single", True), rel_tol=1e-7, abs_tol=1e-7)


@pytest.mark.parametrize("name,w", [pytest.param(*c, id=c[0]) for c in SMALL] + SLOW)
def test_coupled_parts_give_the_exact_optimum_and_canonical_plan(coupled, name, w):
    mdl = build_model(enumerate_candidates(w), "single")
    exact = solve(mdl, branching=False, relax_orders=False)
    searched = solve(mdl)
    assert exact.optimal and searched.optimal
    assert math.isclose(searched.objective, exact.objective, rel_tol=1e-7, abs_tol=1e-7)
    if exact.canonical and searched.canonical:
        assert choices(mdl, searched) == choices(mdl, exact)


def test_the_coupled_workloads_do_split_at_shared_stores():
    """The workloads above exercise the search: several blocks and shared stores."""
    split = 0
    for _, w in COUPLED:
        mdl = build_model(enumerate_candidates(w), "single")
        for cols, rows in components(mdl):
            got = ilp_blocks.split_blocks(mdl, cols, rows)
            if got is not None and got[1]:
                blocks, shared = got
                split += 1
                assert len(blocks) > 1
                assert all(set(b.cols) >= {i for st in b.stores for i in shared[st]} for b in blocks)
    assert split >= 3


def test_five_way_queries_sharing_stores_are_searched_by_default():
    w = COUPLED[2][1]
    mdl = build_model(enumerate_candidates(w), "single")
    assert any(ilp_solving._couples(mdl, cols) for cols, _ in components(mdl))
    assert not any(ilp_solving._couples(build_model(enumerate_candidates(w), p), cols)
                   for p in ("replicas", "budget") for cols, _ in components(mdl))


@pytest.mark.parametrize("limit", [0.001, 0.05, 0.3])
def test_a_time_limited_search_reports_a_real_bound(coupled, limit):
    mdl = build_model(enumerate_candidates(COUPLED[1][1]), "single")
    optimum = solve(mdl, branching=False, relax_orders=False).objective
    try:
        sol = solve(mdl, time_limit=limit)
    except NoSolutionError:
        return
    assert sol.bound <= optimum * (1 + 1e-7) + 1e-7
    assert sol.objective >= optimum * (1 - 1e-7)
    assert sol.optimal or not sol.canonical


@pytest.mark.parametrize("name,w", [pytest.param(*c, id=c[0]) for c in SMALL] + SLOW)
def test_the_master_ilp_of_the_coupled_search_gives_the_exact_optimum(coupled, monkeypatch, name, w):
    """Phase one by the master ILP over the blocks' choices (used from MASTER_MIN_STORES shared
    stores on) instead of the depth-first search: the same optimum."""
    monkeypatch.setattr(ilp_coupled, "MASTER_MIN_STORES", 1)
    mdl = build_model(enumerate_candidates(w), "single")
    sol = solve(mdl)
    assert sol.optimal
    assert math.isclose(sol.objective, ref.optimum(w, "single", True) if name.startswith("seed")
                        else solve(mdl, branching=False, relax_orders=False).objective, rel_tol=1e-7, abs_tol=1e-7)


def test_a_search_stopped_before_any_plan_returns_the_start(coupled, monkeypatch):
    """As for HiGHS-solved parts: a time limit that strikes before the search has a plan gives
    the start (the MIR-free plan optimize() passes) with bound 0, not an error."""
    mdl = build_model(enumerate_candidates(COUPLED[1][1]), "single")
    start = list(solve(mdl, branching=False, relax_orders=False).values)

    def stopped(*a):
        raise NoSolutionError("stopped")

    monkeypatch.setattr(ilp_solving, "solve_coupled", stopped)
    sol = solve(mdl, time_limit=1.0, start=start)
    assert sol.status == "time_limit" and sol.bound <= sol.objective
    with pytest.raises(NoSolutionError):
        solve(mdl, time_limit=1.0)


# --- coupled parts of three-way queries: every combination costed, a master ILP, its tie-break ------

QUICK = [(f"{n}x3/{r}s{s}", random_workload(n, r, 3, seed=s)) for n, r, s in
         ((8, 12, 1), (12, 20, 2), (20, 30, 3), (15, 25, 4), (10, 15, 5))]


def quick_calls(monkeypatch) -> list:
    """The coupled parts solved with small MIRs (every combination costed up front)."""
    calls = []
    solve_coupled = ilp_solving.solve_coupled

    def spy(mdl, cols, *a):
        got = solve_coupled(mdl, cols, *a)
        if got is not None and not ilp_branching.large_mirs(mdl, cols):
            calls.append(got)
        return got

    monkeypatch.setattr(ilp_solving, "solve_coupled", spy)
    return calls


@pytest.mark.parametrize("name,w", QUICK, ids=[n for n, _ in QUICK])
def test_three_way_coupled_parts_give_the_two_stage_optimum_and_canonical_plan(monkeypatch, name, w):
    """By default (no forcing) the coupled parts of three-way queries are costed combination by
    combination: the optimum and the canonical plan of the two-stage HiGHS solve, proven."""
    calls = quick_calls(monkeypatch)
    mdl = build_model(enumerate_candidates(w), "single")
    searched = solve(mdl)
    assert calls and all(c[4] for c in calls)  # the path was taken and proved the tie broken
    monkeypatch.setattr(ilp_solving, "TIE_MIN_SECONDS", 60.0)  # (its tie-break takes 0.5-1.6 s)
    exact = solve(mdl, branching=False)
    assert exact.optimal and searched.optimal and searched.canonical
    assert math.isclose(searched.objective, exact.objective, rel_tol=1e-7, abs_tol=1e-7)
    assert exact.canonical
    assert choices(mdl, searched) == choices(mdl, exact)


@pytest.mark.parametrize("name,w", SMALL, ids=[n for n, _ in SMALL])
def test_three_way_coupled_parts_reach_the_brute_force_optimum(name, w):
    sol = solve(build_model(enumerate_candidates(w), "single"))
    assert sol.optimal
    assert math.isclose(sol.objective, ref.optimum(w, "single", True), rel_tol=1e-7, abs_tol=1e-7)


def test_combinations_ruled_out_by_reduced_costs_do_not_change_the_plan(monkeypatch):
    """The first master and the tie-break skip combinations that a dual solution of the master's
    LP rules out; with none ruled out the plan is the same."""
    mdl = build_model(enumerate_candidates(QUICK[2][1]), "single")
    ruled: list = []
    ruled_out = ilp_master._ruled_out
    monkeypatch.setattr(ilp_master, "_ruled_out", lambda *a: ruled.append(ruled_out(*a)) or ruled[-1])
    pruned = solve(mdl)
    assert ruled and ruled[0].any()
    monkeypatch.setattr(ilp_master, "_ruled_out", lambda floors, cap: ruled_out(floors, cap) & False)
    assert choices(mdl, solve(mdl)) == choices(mdl, pruned)


@pytest.mark.parametrize("limit", [0.0005, 0.005, 0.05])
def test_a_time_limited_three_way_search_reports_a_real_bound(limit):
    mdl = build_model(enumerate_candidates(QUICK[2][1]), "single")
    optimum = solve(mdl, branching=False).objective
    start = list(solve(mdl, branching=False, canonical=False).values)
    sol = solve(mdl, time_limit=limit, start=start)
    assert sol.bound <= optimum * (1 + 1e-7) + 1e-7
    assert sol.objective >= optimum * (1 - 1e-7)
    assert sol.optimal or not sol.canonical



def test_no_mir_free_warm_start_when_every_part_is_searched(monkeypatch):
    """optimize() gives a searched model the first MIR-free orders as its start (the plan kept
    should a time limit strike first) instead of solving the model without MIRs: same plan."""
    import mqjoin.planning.clash as opt
    from mqjoin.planning.options import OptimizeOptions

    w = QUICK[2][1]
    cands = enumerate_candidates(w)
    mdl = build_model(cands, "single")
    assert ilp.searched(mdl) and mdl.num_binaries > opt.WARM_START_LIMITED
    first_orders, solve_workload = opt.first_orders, opt._solve_workload
    calls: list = []
    monkeypatch.setattr(opt, "first_orders", lambda *a: calls.append("first") or first_orders(*a))
    monkeypatch.setattr(opt, "_solve_workload", lambda *a, **k: calls.append("solve") or solve_workload(*a, **k))
    res = opt.plan_clash(w, OptimizeOptions(mode="mqo", partitioning="single", time_limit=30))
    assert calls == ["solve", "first"]  # no second (MIR-free) solve
    assert res.ilp.status == "optimal" and res.ilp.canonical
    assert math.isclose(res.ilp.objective, solve(mdl).objective, rel_tol=1e-9)
    start = opt.warm_start(cands, mdl, first_orders(cands))
    assert solve(mdl, time_limit=1e-4, start=start).objective >= res.ilp.objective  # a feasible plan


def test_a_searched_model_without_a_time_limit_computes_no_start(monkeypatch):
    """Without a time limit or a monitor nothing stops the search of a searched model, so the
    start (the plan kept should one stop it) is not computed; with a time limit it is, before
    the solve.  The same plan either way."""
    import mqjoin.planning.clash as opt
    from mqjoin.planning.options import OptimizeOptions

    w = QUICK[2][1]
    mdl = build_model(enumerate_candidates(w), "single")
    assert ilp.searched(mdl) and mdl.num_binaries > opt.WARM_START_LIMITED
    starts: list = []
    warm_start = opt.warm_start
    monkeypatch.setattr(opt, "warm_start", lambda *a: starts.append(1) or warm_start(*a))
    monkeypatch.setattr(opt, "WARM_START_BINARIES", opt.WARM_START_LIMITED)  # (a start without a time limit)
    free = opt.plan_clash(w, OptimizeOptions(mode="mqo", partitioning="single"))
    assert starts == []
    limited = opt.plan_clash(w, OptimizeOptions(mode="mqo", partitioning="single", time_limit=30))
    assert starts == [1]
    assert free.plan == limited.plan and free.ilp.canonical and limited.ilp.canonical


@pytest.mark.parametrize("name,w", [QUICK[2], (COUPLED[1][0], COUPLED[1][1])], ids=[QUICK[2][0], COUPLED[1][0]])
def test_the_plan_does_not_depend_on_the_block_threads(monkeypatch, name, w):
    """The coupled search costs its blocks on BLOCK_THREADS threads: one thread, the same plan."""
    mdl = build_model(enumerate_candidates(w), "single")
    threaded = solve(mdl)
    monkeypatch.setattr(ilp_blocks, "BLOCK_THREADS", 1)
    alone = solve(mdl)
    assert threaded.optimal and alone.optimal and threaded.canonical == alone.canonical
    assert choices(mdl, threaded) == choices(mdl, alone)


# --- five-way coupled parts under the master ILP: every combination priced by its LP -----------

FIVE = random_workload(5, 12, 5, seed=3)  # 5 five-way queries, one part of 8 shared stores


def feasible(mdl, values, tol=1e-6) -> bool:
    """Every row holds and every binary is 0 or 1."""
    for _, idx, coef, lo, hi in mdl.rows:
        v = math.fsum(c * values[i] for i, c in zip(idx, coef))
        if v < lo - tol or v > hi + tol:
            return False
    return all(abs(v - round(v)) <= tol for v, b in zip(values, mdl.integer) if b)


def test_the_lp_priced_master_gives_the_search_optimum_with_fewer_block_solves(monkeypatch):
    """From MASTER_MIN_STORES shared stores on, a part of five-way queries goes to the master
    ILP, whose columns are first priced by each combination's LP (unless there are more than
    LP_PRICED_MAX_COMBINATIONS): the optimum of the depth-first search (blocks searched without
    LPs) and of the unpriced master, with fewer branch and bounds than the unpriced master."""
    mdl = build_model(enumerate_candidates(FIVE), "single")
    assert any(ilp_branching.large_mirs(mdl, cols) and ilp_solving._couples(mdl, cols) for cols, _ in components(mdl))
    searched = solve(mdl)  # 8 shared stores: the depth-first search
    calls: list = []
    branch_and_bound = ilp_branching.branch_and_bound
    for module in (ilp_solving, ilp_blocks):  # one query's parts, and the coupled search's blocks
        monkeypatch.setattr(module, "branch_and_bound", lambda *a, **k: calls.append(1) or branch_and_bound(*a, **k))
    monkeypatch.setattr(ilp_coupled, "MASTER_MIN_STORES", 1)
    monkeypatch.setattr(ilp_paths, "NODE_LIMIT", 0)  # the blocks by their LPs, not searched without them
    priced = solve(mdl)
    priced_calls = len(calls)
    monkeypatch.setattr(ilp_coupled, "LP_PRICED_MAX_COMBINATIONS", 0)
    unpriced = solve(mdl)
    assert searched.optimal and priced.optimal and unpriced.optimal
    for sol in (priced, unpriced):
        assert math.isclose(sol.objective, searched.objective, rel_tol=1e-9)
        assert feasible(mdl, sol.values)
    assert 0 < priced_calls < len(calls) - priced_calls


def test_a_master_stopped_before_its_first_plan_keeps_the_blocks_plans_recosted(monkeypatch):
    """A time limit that strikes after the blocks are costed alone, while the combinations' LPs
    are priced (before the master's first plan): the plan of the shared stores most blocks chose
    alone, each block's plan recosted there — feasible, never below the optimum, with the
    blocks' optima alone as its bound."""
    mdl = build_model(enumerate_candidates(FIVE), "single")
    optimum = solve(mdl).objective
    monkeypatch.setattr(ilp_coupled, "MASTER_MIN_STORES", 1)
    spread, calls = ilp_blocks.BlockCosts.spread, []

    def stop_after_the_first(self, *a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise ilp_blocks.Stopped
        return spread(self, *a, **k)

    monkeypatch.setattr(ilp_blocks.BlockCosts, "spread", stop_after_the_first)
    sol = solve(mdl, time_limit=600)
    assert sol.status == "time_limit" and not sol.canonical
    assert sol.bound <= optimum * (1 + 1e-9) <= sol.objective * (1 + 2e-9)
    assert feasible(mdl, sol.values)
    assert math.isclose(sol.objective, math.fsum(c * v for c, v in zip(mdl.cost, sol.values)), rel_tol=1e-9)


def test_reduced_cost_fixing_keeps_the_optimum_and_fixes_only_what_cannot_pay(monkeypatch):
    """The branch and bound with reduced-cost fixing and without it: the same optimum on every
    part of three five-way queries and on the largest block of a coupled part (two queries that
    share MIRs).  And every fixing is sound: the node's LP with the fixed binary flipped is
    infeasible or bounded at or above the threshold where nothing beats the incumbent."""
    import highspy
    import numpy as np

    problems = []
    mdl = build_model(enumerate_candidates(random_workload(3, 30, 5, seed=2)), "single")
    problems += [(mdl, cols, rows) for cols, rows in components(mdl)]
    mdl = build_model(enumerate_candidates(random_workload(10, 100, 5, seed=1)), "single")
    part = next(p for p in (ilp_blocks.coupled_part(mdl, *c) for c in components(mdl)) if p is not None)
    k = max(range(len(part.blocks)), key=lambda k: len(part.blocks[k].cols))
    problems.append((part.restricted(k, {}), part.blocks[k].cols, part.blocks[k].rows))
    fixings, checked = ilp_branching._fixings, []
    for sub, cols, rows in problems:
        nodes = []
        monkeypatch.setattr(ilp_branching, "_fixings",
                            lambda *a, nodes=nodes: nodes.append((a, fixings(*a))) or nodes[-1][1])
        with_fixing = ilp_branching.branch_and_bound(sub, cols, rows, None)
        monkeypatch.setattr(ilp_branching, "_fixings", lambda *a: ())
        without = ilp_branching.branch_and_bound(sub, cols, rows, None)
        assert with_fixing[0] == without[0] == "optimal"
        assert math.isclose(with_fixing[1], without[1], rel_tol=1e-9)
        h = ilp_backends.silent_highs(highspy)
        h.passModel(ilp_backends.highs_lp(sub, cols, rows, highspy, np))
        every = np.arange(len(cols), dtype=np.int32)
        for (_, _, _, lo, up, _, threshold), fixed in nodes[:5]:
            for j, v in fixed[:10]:
                flipped_lo, flipped_up = lo.copy(), up.copy()
                flipped_lo[j] = flipped_up[j] = 1.0 - v
                h.changeColsBounds(len(cols), every, flipped_lo, flipped_up)
                h.run()
                if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
                    assert h.getInfo().objective_function_value >= threshold - 1e-6 * max(1.0, abs(threshold))
                checked.append(j)
    assert len(checked) > 20


@pytest.mark.parametrize("master", [False, True], ids=["depth_first", "lp_priced_master"])
def test_blocks_whose_searches_give_up_search_further_instead_of_branching(monkeypatch, master):
    """Five-way blocks whose searches give up (a node limit of 3) are costed, where a branch and
    bound would follow (a fractional LP, or a choice the master picks), by the block's search
    with FURTHER times the limits: no branch and bound in the blocks where that search ends, a
    branch and bound where it gives up too, and either way the canonical plan of a solve whose
    searches never give up."""
    mdl = build_model(enumerate_candidates(FIVE), "single")
    if master:
        monkeypatch.setattr(ilp_coupled, "MASTER_MIN_STORES", 1)
    reference = solve(mdl)
    calls: list = []
    bb = ilp_branching.branch_and_bound
    monkeypatch.setattr(ilp_blocks, "branch_and_bound", lambda *a, **k: calls.append(1) or bb(*a, **k))
    made: list = []
    further = ilp_blocks.BlockCosts._further
    monkeypatch.setattr(ilp_blocks.BlockCosts, "_further", lambda self, k: made.append(k) or further(self, k))
    monkeypatch.setattr(ilp_paths, "NODE_LIMIT", 3)
    for times, branched in ((10_000, False), (1, True)):  # (1: the search further on gives up as well)
        monkeypatch.setattr(ilp_blocks, "FURTHER", times)
        made.clear()
        calls.clear()
        sol = solve(mdl)
        assert reference.optimal and sol.optimal and sol.canonical
        assert math.isclose(sol.objective, reference.objective, rel_tol=1e-9)
        assert [round(v) for v in sol.values] == [round(v) for v in reference.values]
        assert made and bool(calls) == branched
    monkeypatch.setattr(ilp_paths, "NODE_LIMIT", 0)  # the searches switched off: the branch and bound
    assert math.isclose(solve(mdl).objective, reference.objective, rel_tol=1e-9) and calls
