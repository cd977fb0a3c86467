"""Canonical plans: among equal-cost optima the ILP returns the one of least
tie-break weight (``mqjoin.planning.ilp.tie_weight``), so the plan — probe orders, partition attributes,
store labels, rendering — does not depend on the solver or its version.

The golden file ``golden/canonical_plans.txt`` holds the plans of the paper's workloads and of
small random ones under both policies, with and without MIRs; HiGHS and CBC must both
reproduce it byte for byte (and so must any newer HiGHS: run this file with it installed).
Regenerate with ``MQJOIN_UPDATE_GOLDEN=1`` and review the diff by eye.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import _ref_optimizer as ref
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, solve, tie_weight
from mqjoin.planning.optimizer import optimize
from mqjoin.model.workload import load_workload

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # PuLP's PULP_CBC_CMD notice
              pytest.mark.usefixtures("tie_breaks_to_the_end")]  # a plan out of time is not canonical

GOLDEN = Path(__file__).parent / "golden" / "canonical_plans.txt"
BUNDLED = Path(__file__).resolve().parent.parent / "mqjoin" / "workloads"


def workloads():
    out = [(p.stem, load_workload(p)) for p in sorted(BUNDLED.glob("*.yaml"))]
    return out + [(f"random{s}", ref.random_workload(s)) for s in (1, 4, 9, 17)]


CASES = [(name, policy, mirs) for name, _ in workloads() for policy in ("single", "replicas")
         for mirs in (True, False)]
WORKLOADS = dict(workloads())


def plan_text(name: str, policy: str, mirs: bool, solver: str) -> str:
    res = optimize(WORKLOADS[name], partitioning=policy, mirs=mirs, solver=solver)
    assert res.ilp.status == "optimal" and res.ilp.canonical, f"{name}: the tie-break did not end ({res.ilp.status})"
    plan = res.plan
    lines = [f"## {name} {policy} mirs={'on' if mirs else 'off'}: probe cost {plan.probe_cost:.6g}"]
    for q, by in plan.probe_orders().items():
        lines += [f"  {q} {start}: {o}" for start, o in by.items()]
    for m, by in plan.materializations().items():
        lines += [f"  MIR {m} {start}: {o}" for start, o in by.items()]
    lines += [f"  store {s.id}: {s.partition}" for s in plan.stores]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    if os.environ.get("MQJOIN_UPDATE_GOLDEN"):
        GOLDEN.write_text("\n".join(plan_text(*c, "highs") for c in CASES) + "\n", encoding="utf-8")
    blocks = GOLDEN.read_text(encoding="utf-8").split("## ")[1:]
    return {tuple(b.split(":")[0].split()): "## " + b.rstrip("\n") for b in blocks}


@pytest.mark.parametrize("solver", ["highs", "cbc"])
@pytest.mark.parametrize("name, policy, mirs", CASES)
def test_plans_are_the_golden_canonical_plans_whatever_the_solver(golden, name, policy, mirs, solver):
    key = (name, policy, f"mirs={'on' if mirs else 'off'}")
    assert plan_text(name, policy, mirs, solver) == golden[key]


@pytest.mark.parametrize("name", ["paper_fig3", "random4"])
def test_canonical_solve_keeps_the_optimal_cost_and_says_so(name):
    mdl = build_model(enumerate_candidates(WORKLOADS[name]), "single")
    first = solve(mdl, canonical=False)
    canon = solve(mdl)
    assert canon.canonical and not first.canonical
    assert canon.status == first.status == "optimal"
    assert math.isclose(canon.objective, first.objective, rel_tol=1e-7)
    # the canonical optimum has the least tie-break weight of the two
    weight = [sum(mdl.tie[i] * round(s.value(i)) for i in range(mdl.num_variables)) for s in (first, canon)]
    assert weight[1] <= weight[0]


def test_canonical_optimum_does_not_depend_on_the_optimum_the_solver_found_first():
    """Start from each equal-cost optimum of Figure 3 (ST[b] or ST[d] — the two that HiGHS
    1.15 and 1.16 return): the same canonical plan comes out."""
    mdl = build_model(enumerate_candidates(WORKLOADS["paper_fig3"]), "single")
    binaries = [i for i in range(mdl.num_variables) if mdl.integer[i]]
    found, canonical = set(), set()
    for attr in ("S.b", "T.d"):
        # an optimum with this partition of ST: the other partition choices forbidden
        others = [i for (store, a), i in mdl.z.items() if store.label == "ST" and str(a) != attr]
        for i in others:
            mdl.upper[i] = 0.0
        try:
            alt = solve(mdl, canonical=False)
        finally:
            for i in others:
                mdl.upper[i] = 1.0
        assert math.isclose(alt.objective, 900.0, rel_tol=1e-9)  # both are optima
        found.add(tuple(round(alt.value(i)) for i in binaries))
        again = solve(mdl, start=list(alt.values))
        assert again.canonical
        canonical.add(tuple(round(again.value(i)) for i in binaries))
    assert len(found) == 2 and len(canonical) == 1


def test_tie_weights_prefer_the_canonical_order_then_differ():
    ranks = [tie_weight(r, f"x_q_{r}") for r in range(5)]
    assert ranks == sorted(ranks) and len(set(ranks)) == 5
    assert all(w == int(w) and w > 0 for w in ranks)
