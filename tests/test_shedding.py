"""A CPU budget in the reference executor: probes shed by an allocation
policy, never tuples — results a subset of the oracle's, all of them with no limit, and
JAQPOT ahead of the paper's ρ_h baselines on its synthetic linear plan."""

from __future__ import annotations

import json
import math

import pytest

from _cli import run_cli
from mqjoin.datasets.jaqpot_paper import table3_linear
from mqjoin.model.errors import JaqpotError
from mqjoin.planners.jaqpot import BASELINES
from mqjoin.runtime.oracle import oracle_results
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.reference import run_reference
from mqjoin.model.workload import load_workload
from mqjoin.runtime.shedding import ALLOCATIONS, ProbeBudget, binary_model, deficit


@pytest.fixture(scope="module")
def small():
    return table3_linear(rate=40, size=40, selectivity=0.1, duration=3, seed=1)


@pytest.fixture(scope="module")
def paper():
    """Table 3's low corner over 10 s of arrivals, and the unbounded run's result count."""
    s = table3_linear(duration=10, seed=0)
    return s, run_reference(s.plan, s.tables, collect=False).counts


def test_unlimited_budget_equals_the_oracle(small):
    want = oracle_results(small.workload, small.tables)
    assert sum(map(len, want.values())) > 100
    for policy in ALLOCATIONS:
        run = run_reference(small.plan, small.tables, cpu_budget=math.inf, allocation=policy)
        assert run.result_sets() == want, policy
        assert run.budget.shed == 0 and run.budget.probes == run.total_probe_messages


@pytest.mark.parametrize("policy", ALLOCATIONS)
def test_budgeted_results_are_a_subset_and_probes_stay_within_the_budget(small, policy):
    want = oracle_results(small.workload, small.tables)["q"]
    sat = binary_model(small.plan).saturation()[0]
    for share in (0.05, 0.3):
        mu = share * sat
        run = run_reference(small.plan, small.tables, cpu_budget=mu, allocation=policy, cycle=0.5)
        got = run.result_sets()["q"]
        assert got <= want and len(got) < len(want)
        b = run.budget
        assert b.shed > 0
        # per cycle at most ⌈allowance · cycle⌉ probes per half-way join: over the run, μ per second
        cycles = math.floor(run.duration / 0.5) + 1
        assert b.probes <= mu * 0.5 * cycles + len(b.admitted) * cycles
        for h, a in b.allocation.allowances.items():
            assert b.admitted[h] <= math.floor(a * 0.5 * cycles) + 1
        assert b.probes == run.total_probe_messages  # every admitted probe sent its message (p = 1)


def test_no_budget_sheds_nothing_and_a_zero_budget_joins_nothing(small):
    assert run_reference(small.plan, small.tables).budget is None
    zero = run_reference(small.plan, small.tables, cpu_budget=0)
    assert zero.counts == {"q": 0} and zero.budget.probes == 0 and zero.budget.shed > 0
    # tuples are not shed: every arrival is still stored
    rows = {sid.split(":")[-1].split("[")[0]: n for sid, n in zero.store_rows.items()}
    assert all(rows[r] > 0 for r in "ABCD") and rows["AB"] == rows["ABC"] == 0


def test_jaqpot_beats_the_paper_baselines_on_the_linear_plan(paper):
    """The paper's Figure 7.a ordering at 10 % and 60 % of the saturation resources: JAQPOT
    above every ρ_h-based policy; GrePP without the freshness cover starves S_AB and S_ABC."""
    s, full = paper
    sat = binary_model(s.plan).saturation()[0]
    for share in (0.1, 0.6):
        got = {p: run_reference(s.plan, s.tables, collect=False, cpu_budget=share * sat, allocation=p)
               for p in ALLOCATIONS}
        share_of = {p: 1 - deficit(r.counts, full)["q"] for p, r in got.items()}
        assert all(share_of["JAQPOT"] > share_of[b] for b in BASELINES), (share, share_of)
        assert share_of["GrePP"] < share_of["JAQPOT"]
        assert 0 < share_of["JAQPOT"] < 1
        assert got["GrePP"].budget.stale  # throughput alone leaves states stale (Section 5.3)


@pytest.mark.parametrize("kwargs,culprit", [
    ({"cpu_budget": -5}, "non-negative"),
    ({"cpu_budget": "lots"}, "must be a number"),
    ({"cpu_budget": float("nan")}, "must be a number"),
    ({"cpu_budget": True}, "must be a number"),
    ({"cpu_budget": 10, "allocation": "BestGuess"}, "unknown allocation policy 'BestGuess'"),
    ({"cpu_budget": 10, "cycle": 0}, "cycle must be a positive"),
    ({"cpu_budget": 10, "freshness": 1.0}, "above 1"),
])
def test_bad_budgets_are_typed_errors(small, kwargs, culprit):
    with pytest.raises(JaqpotError, match=culprit):
        run_reference(small.plan, small.tables, **kwargs)


def test_a_budget_needs_one_binary_tree(small):
    mjoin = optimize(small.workload, planner="mjoin").plan
    with pytest.raises(JaqpotError, match="planner 'tree'"):
        ProbeBudget(mjoin, 10)
    clash = optimize(small.workload, planner="tree").plan  # the tree planner's own best tree also works
    assert ProbeBudget(clash, 10).allocation.mu == 10


def test_cli_run_with_a_cpu_budget(tmp_path, capsys, small):
    from mqjoin.model.tables import read_results, write_inputs

    wl = tmp_path / "w.yaml"
    wl.write_text('defaults: {rate: 40, window: 1, selectivity: 0.1}\n'
                  'relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, '
                  'D: {attributes: [c]}}\nqueries: {q: "A(a), B(a,b), C(b,c), D(c)"}\n')
    write_inputs(small.tables, tmp_path / "data")
    args = [wl, "--data", tmp_path / "data", "--out", tmp_path / "out", "--planner", "tree", "--tree-shape", "deep",
            "--check"]
    code, out, _ = run_cli(capsys, "run", *args, "--cpu-budget", "150", "--allocation", "globalhjpr", "--json")
    assert code == 0
    d = json.loads(out)
    b = d["budget"]
    assert (d["executor"], d["executor_reason"]) == ("per-tuple", "--cpu-budget sheds probes tuple by tuple")
    assert b["allocation"] == "GlobalHJPR" and b["cpu_budget"] == 150 and b["shed"] > 0
    got = read_results(load_workload(wl), tmp_path / "out")["q"]
    full = b["unbounded_results"]["q"]
    assert len(got) < full and b["deficit"]["q"] == pytest.approx(1 - len(got) / full)
    for bad, msg in ((["--cpu-budget", "-3"], "non-negative"), (["--cycle", "2"], "give --cpu-budget"),
                     (["--cpu-budget", "5", "--engine", "spark"], "reference engine")):
        code, _, err = run_cli(capsys, "run", *args, *bad)
        assert code == 2
        assert msg in err and err.count("\n") == 1


def test_a_class_at_selectivity_one_gives_states_of_selectivity_one_not_a_rounding_error():
    """The explorer's selectivity slider at its maximum (1), class by class on TPC-H: a state's
    selectivity is a ratio of products of the same statistics, 1 up to rounding — a state of
    1.0000000000000002 (float rounding) or 1.000001 (statistics written with six significant
    digits) was refused as 'above 1'."""
    from mqjoin.datasets.commands import load_named_workload
    from mqjoin.model.statistics import selectivity_groups, with_class_selectivity
    from mqjoin.planners.trees import binary_tree
    from mqjoin.runtime.shedding import tree_model

    w = load_named_workload("tpch_fig7a.yaml")
    for g in selectivity_groups(w):
        one = with_class_selectivity(w, g, 1.0)
        for q in one.query_names:
            for shape in ("deep", "bushy"):
                m = tree_model(one, q, binary_tree(one, q, shape))
                assert all(0 < v <= 1 for v in m.selectivities.values()), (g.label, q, shape, m.selectivities)
