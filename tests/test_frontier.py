"""The probe-cost / memory frontier and policy ``budget``, checked against
the exhaustive reference optimiser (``_ref_optimizer.Reference(..., replica_budget)``)."""

from __future__ import annotations

import json
import math

import pytest

import _ref_optimizer as ref
from _cli import run_cli
from mqjoin.model.errors import OptionError
from mqjoin.planning.frontier import frontier, replica_memory
from mqjoin.planning.optimizer import optimize
from mqjoin.model.workload import load_workload
from test_canonical import BUNDLED

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)


def small():
    return ([("paper_fig3", load_workload(BUNDLED / "paper_fig3.yaml"))]
            + [(f"seed{s}", ref.random_workload(s)) for s in (1, 2, 3, 4, 7, 8, 12, 15)])


@pytest.mark.parametrize("mirs", [True, False])
@pytest.mark.parametrize("name, w", small())
def test_frontier_points_are_brute_force_optima_between_replicas_and_single(name, w, mirs):
    f = frontier(w, mirs=mirs)
    assert f.complete and f.points
    pts = f.points
    # Pareto: memory up, probe cost strictly down
    assert all(a.memory < b.memory and a.probe_cost > b.probe_cost for a, b in zip(pts, pts[1:]))
    # end points: the single and replicas optima (exhaustive), and the marks say the same
    assert close(pts[0].probe_cost, ref.Reference(w, mirs).optimum("single"))
    assert close(pts[-1].probe_cost, ref.Reference(w, mirs).optimum("replicas"))
    assert close(pts[0].probe_cost, f.marks["single"].probe_cost)
    assert close(pts[-1].probe_cost, f.marks["replicas"].probe_cost)
    assert pts[0].replica_memory == 0
    for p in pts:
        # the plan is valid and costs what it says; it is the exhaustive optimum at its budget
        assert close(ref.check_plan(p.result.plan, w, mirs, "replicas", "mqo"), p.probe_cost)
        assert p.budget is None or p.replica_memory <= p.budget * (1 + 1e-9) + 1e-9
        assert close(p.probe_cost, ref.Reference(w, mirs, p.budget).optimum("budget"))
    # copies of stores are worth it: the replicas end never costs more than individual plans
    assert pts[-1].probe_cost <= f.marks["individual"].probe_cost * (1 + 1e-9)


def test_fig3_frontier_buys_a_second_replica_of_st():
    w = load_workload(BUNDLED / "paper_fig3.yaml")
    f = frontier(w)
    assert [(p.memory, p.probe_cost) for p in f.points] == [(500.0, 900.0), (600.0, 600.0)]
    assert [s.id for s in f.points[-1].result.plan.stores if s.mir.label == "ST"] == ["ST[b]", "ST[d]"]
    assert replica_memory(f.points[-1].result.plan) == 100.0


@pytest.mark.parametrize("name, w", small()[:4])
@pytest.mark.parametrize("budget", [0, 30.0, 500.0])
def test_budget_policy_is_the_brute_force_optimum(name, w, budget):
    res = optimize(w, partitioning="budget", replica_budget=budget)
    assert close(res.probe_cost, ref.Reference(w, True, budget).optimum("budget"))
    assert replica_memory(res.plan) <= budget * (1 + 1e-9) + 1e-9
    if budget == 0:
        assert close(res.probe_cost, optimize(w).probe_cost)


@pytest.mark.parametrize("bad", [-1, float("inf"), "10", True])
def test_bad_replica_budget_is_a_typed_error(bad):
    w = load_workload(BUNDLED / "paper_fig3.yaml")
    with pytest.raises(OptionError, match="replica memory budget"):
        optimize(w, partitioning="budget", replica_budget=bad)


def test_frontier_cli_json_text_and_errors(capsys, tmp_path):
    code, out, err = run_cli(capsys, "frontier", BUNDLED / "paper_fig3.yaml", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert [(p["memory"], p["probe_cost"]) for p in d["points"]] == [(500.0, 900.0), (600.0, 600.0)]
    assert set(d["marks"]) == {"single", "replicas", "individual", "shared"}
    assert d["points"][0]["probe_orders"]["q1"]["R"] == "R » ST[b]"
    code, out, _ = run_cli(capsys, "frontier", BUNDLED / "paper_fig3.yaml")
    assert code == 0 and "single" in out and "replicas" in out and "600" in out
    code, _, err = run_cli(capsys, "frontier", tmp_path / "missing.yaml")
    assert code == 2
    assert err.count("\n") == 1 and "missing.yaml" in err
