"""The ILP layer: exports, reported sizes, solver statuses under time limits, argument
checking, plan JSON round trips and determinism (docs/model.md §5, docs/architecture.md §3, §4)."""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.model.errors import NoSolutionError, OptimizerError, OptionError, PlanError
from mqjoin.planning.ilp import build_model, export, lp_text, solve
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.plan import Plan
from mqjoin.model.workload import parse_workload

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # PuLP's PULP_CBC_CMD notice

FIG3 = parse_workload("""
defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
relations: {R: {attributes: [b]}, S: {attributes: [b, c]}, T: {attributes: [c, d]}, U: {attributes: [d]}}
queries: {q1: "R(b), S(b,c), T(c)", q2: "S(c), T(c,d), U(d)"}
""")

V2 = parse_workload("""
defaults: {rate: 100, parallelism: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015, T.c = U.c: 0.01}
""")


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)


def small_workloads():
    return [("fig3", FIG3), ("v2", V2)] + [(f"seed{s}", ref.random_workload(s)) for s in (1, 4, 9)]


def big_workload():
    """8 relations, 10 queries of 4 relations, parallelism 4: the single-policy ILP takes HiGHS
    seconds to prove optimal (measured 13 s), so a 0.05 s limit cannot prove it."""
    return ref.random_workload(2, n_rel=(8, 8), n_attr=(2, 3), n_q=(10, 10), q_size=(4, 4), par=(4, 4),
                               dpar=(4, 4), extra_eq=0, selectivity=0.01)


def medium_workload():
    """8 relations, 12 queries of 3–4 relations: solved to optimality in well under a second."""
    return ref.random_workload(1, n_rel=(8, 8), n_attr=(2, 3), n_q=(12, 12), q_size=(3, 4), par=(4, 4),
                               dpar=(4, 4), extra_eq=0, selectivity=0.01)


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["single", "replicas"])
@pytest.mark.parametrize("name, w", [("fig3", FIG3), ("seed4", ref.random_workload(4))])
def test_mps_export_reads_back_in_pulp_with_the_same_optimum(tmp_path, name, w, policy):
    import pulp

    mdl = build_model(enumerate_candidates(w), policy)
    ours = solve(mdl)
    assert ours.status == "optimal"
    path = export(mdl, str(tmp_path / "model.mps"))
    variables, prob = pulp.LpProblem.fromMPS(path)
    assert len(variables) == mdl.num_variables
    assert len(prob.constraints) == mdl.num_constraints
    assert sum(1 for v in variables.values() if v.cat == pulp.LpInteger) == mdl.num_binaries
    prob.solve(pulp.PULP_CBC_CMD(msg=False))
    assert pulp.LpStatus[prob.status] == "Optimal"
    assert close(pulp.value(prob.objective), ours.objective)
    assert close(ours.objective, optimize(w, partitioning=policy).probe_cost)


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
def test_exports_read_back_in_highs_with_the_same_optimum(tmp_path, suffix):
    import highspy

    mdl = build_model(enumerate_candidates(FIG3), "single")
    path = export(mdl, str(tmp_path / f"model{suffix}"))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(path) == highspy.HighsStatus.kOk
    assert h.getNumCol() == mdl.num_variables
    assert h.getNumRow() == mdl.num_constraints
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert close(h.getInfo().objective_function_value, 900.0)  # Figure 3, parallelism 4, single


def test_lp_text_is_the_lp_export(tmp_path):
    mdl = build_model(enumerate_candidates(V2, mirs=False), "single")
    path = export(mdl, str(tmp_path / "m.lp"))
    text = lp_text(mdl)
    assert text == open(path, encoding="utf-8").read()
    assert "Minimize" in text or "MINIMIZE" in text
    assert all(n in text for n in mdl.names)


def test_export_rejects_unknown_extension(tmp_path):
    mdl = build_model(enumerate_candidates(V2, mirs=False), "single")
    with pytest.raises(OptimizerError, match="model.txt"):
        export(mdl, str(tmp_path / "model.txt"))


# --------------------------------------------------------------------------------------------
# reported size
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["single", "replicas"])
@pytest.mark.parametrize("mirs", [False, True])
@pytest.mark.parametrize("name, w", small_workloads())
def test_reported_ilp_size_matches_the_model(name, w, policy, mirs):
    res = optimize(w, partitioning=policy, mirs=mirs)
    mdl = build_model(enumerate_candidates(w, mirs=mirs), policy)
    assert res.ilp.variables == mdl.num_variables > 0
    assert res.ilp.constraints == mdl.num_constraints > 0
    assert res.ilp.binaries == mdl.num_binaries > 0
    assert res.ilp.status == "optimal" and res.ilp.gap == 0
    assert close(res.ilp.objective, res.probe_cost)
    # individual mode reports the sum over the per-query models
    ind = optimize(w, mode="individual", partitioning=policy, mirs=mirs)
    per_q = [build_model(enumerate_candidates(w.restricted_to([q]), mirs=mirs), policy) for q in w.query_names]
    assert ind.ilp.variables == sum(m.num_variables for m in per_q)
    assert ind.ilp.constraints == sum(m.num_constraints for m in per_q)


def test_mirs_enlarge_the_model():
    small = build_model(enumerate_candidates(FIG3, mirs=False), "single")
    large = build_model(enumerate_candidates(FIG3, mirs=True), "single")
    assert large.num_variables > small.num_variables
    assert large.num_constraints > small.num_constraints


# --------------------------------------------------------------------------------------------
# statuses and time limits
# --------------------------------------------------------------------------------------------


def assert_honest(res, w, policy, optimum=None):
    """A time-limited result: a valid plan whose status and gap do not overclaim."""
    assert res.ilp.status in ("optimal", "time_limit", "solution_limit")
    assert 0.0 <= res.ilp.gap <= 1.0
    # the plan is a feasible solution, costed as A5 says
    assert close(ref.check_plan(res.plan, w, True, policy, "mqo"), res.probe_cost)
    assert res.probe_cost <= res.ilp.objective * (1 + 1e-9) + 1e-9
    bound = res.ilp.objective * (1 - res.ilp.gap)
    if res.ilp.status == "optimal":
        assert res.ilp.gap == pytest.approx(0, abs=1e-6)
    if optimum is not None:
        assert bound <= optimum * (1 + 1e-6) + 1e-6  # the bound is a lower bound of the optimum
        assert res.probe_cost >= optimum * (1 - 1e-6)
        if res.ilp.status == "optimal":
            assert close(res.probe_cost, optimum), "claims optimal but is not"


@pytest.mark.parametrize("policy", ["single", "replicas"])
@pytest.mark.parametrize("limit", [0.01, 0.05])
def test_tiny_time_limit_never_overclaims(policy, limit):
    w = medium_workload()
    optimum = optimize(w, partitioning=policy).probe_cost
    try:
        res = optimize(w, partitioning=policy, time_limit=limit)
    except NoSolutionError as e:  # a typed refusal is honest too
        assert "time limit" in str(e)
        return
    assert_honest(res, w, policy, optimum)


def test_a_stopped_solver_reports_its_status_and_an_honest_gap(monkeypatch):
    """HiGHS stopped before it proves optimality — deterministically, at its first improving
    solution (a wall-clock limit would depend on the machine: a fast one proves the optimum in
    time, a loaded one finds no plan): the status, the gap and the summary say so, and the plan
    is still a valid one whose cost the bound does not exceed."""
    import mqjoin.planning.clash as optimizer

    solve_ = optimizer.solve
    monkeypatch.setattr(optimizer, "solve", lambda mdl, **kw: solve_(mdl, **{**kw, "solution_limit": 1}))
    w = big_workload()
    res = optimize(w, partitioning="single")
    assert res.ilp.status == "solution_limit"
    assert_honest(res, w, "single")
    assert 0 < res.ilp.gap <= 1
    assert "gap" in res.summary()


def test_solution_limit_is_checked():
    mdl = build_model(enumerate_candidates(FIG3), "single")
    with pytest.raises(OptionError, match="positive integer"):
        solve(mdl, solution_limit=0)
    with pytest.raises(OptionError, match="needs solver 'highs'"):
        solve(mdl, solver="cbc", solution_limit=5)
    assert solve(mdl, solution_limit=1000).status == "optimal"  # a limit not reached changes nothing


def test_cbc_time_limit_status_and_gap():
    w = big_workload()
    res = optimize(w, partitioning="single", solver="cbc", time_limit=1)
    assert res.ilp.solver == "cbc"
    assert_honest(res, w, "single")
    if res.ilp.status == "time_limit":
        assert res.ilp.gap > 0


def test_solution_without_time_limit_is_optimal():
    mdl = build_model(enumerate_candidates(FIG3), "single")
    for solver in ("highs", "cbc"):
        sol = solve(mdl, solver=solver)
        assert sol.status == "optimal" and sol.optimal
        assert sol.gap == 0
        assert close(sol.objective, 900)
        assert len(sol.values) == mdl.num_variables
        # binaries come back integral
        assert all(min(abs(sol.value(i)), abs(1 - sol.value(i))) < 1e-6
                   for i in range(mdl.num_variables) if mdl.integer[i])


# --------------------------------------------------------------------------------------------
# argument checking
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, culprit", [
    ({"mode": "joint"}, "'joint'"),
    ({"mode": "MQO"}, "'MQO'"),
    ({"partitioning": "replica"}, "'replica'"),
    ({"partitioning": None}, "None"),
    ({"solver": "gurobi"}, "'gurobi'"),
])
def test_unknown_mode_policy_solver(kwargs, culprit):
    with pytest.raises(OptionError) as ei:
        optimize(V2, **kwargs)
    assert culprit in str(ei.value)


def test_unknown_policy_and_solver_at_the_ilp_level():
    cands = enumerate_candidates(V2)
    with pytest.raises(OptionError, match="'both'"):
        build_model(cands, "both")
    with pytest.raises(OptionError, match="'glpk'"):
        solve(build_model(cands, "single"), solver="glpk")


def test_workload_without_queries():
    with pytest.raises(OptimizerError, match="no queries"):
        optimize(V2.without_query("q1").without_query("q2"))


# --------------------------------------------------------------------------------------------
# plans: JSON round trip and determinism
# --------------------------------------------------------------------------------------------

ALL = [(m, p, mirs) for m in ("mqo", "individual", "shared") for p in ("single", "replicas") for mirs in (True, False)]


@pytest.mark.parametrize("name, w", small_workloads())
def test_plan_json_round_trip(name, w):
    for mode, policy, mirs in ALL:
        plan = optimize(w, mode=mode, partitioning=policy, mirs=mirs).plan
        text = plan.to_json()
        back = Plan.from_json(text)
        assert back == plan, (mode, policy, mirs)
        assert back.to_json() == text
        assert back.probe_cost == plan.probe_cost and back.memory == plan.memory
        assert back.probe_orders() == plan.probe_orders()


def test_plan_json_errors():
    plan = optimize(V2).plan
    with pytest.raises(PlanError, match="not valid JSON"):
        Plan.from_json(plan.to_json()[:-5])
    with pytest.raises(PlanError, match="format"):
        Plan.from_json(plan.to_json().replace("mqjoin-plan/1", "other/9"))
    import json

    d = json.loads(plan.to_json())
    del d["stores"]
    with pytest.raises(PlanError, match="stores"):
        Plan.from_dict(d)


@pytest.mark.parametrize("name, w", small_workloads())
def test_optimising_twice_gives_identical_plans(name, w):
    for mode, policy, mirs in ALL:
        a = optimize(w, mode=mode, partitioning=policy, mirs=mirs).plan.to_json()
        b = optimize(parse_workload(w.to_yaml()), mode=mode, partitioning=policy, mirs=mirs).plan.to_json()
        assert a == b, (mode, policy, mirs)


def test_modes_differ_where_they_should():
    """Sanity for the round-trip tests: plans of different modes are different values."""
    a = optimize(V2, mode="mqo").plan
    b = optimize(V2, mode="individual").plan
    assert a != b and a.to_json() != b.to_json()
    assert Plan.from_json(a.to_json()) != b
