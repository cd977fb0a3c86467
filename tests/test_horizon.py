"""The model over the horizon (docs/model.md §4–§5): a plan is a property of the streams, not of
the unit time is written in.  Every rate times ``c``, every window and the horizon divided by
``c`` (and every measured size, a count per time unit to the power of its relations, times
``c^k``) must give the same plan, the same labels and the same totals — on random workloads
(with windows, uneven rates and measured sizes) and on every bundled workload.  Against the
old per-time-unit objective this fails: a step of ``k`` relations costs ``rate^k`` per time
unit, so the weights of 1-, 2- and 3-way steps move against each other with the unit.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqjoin
from mqjoin import datasets
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.model.workload import Workload, load_workload
from mqjoin.planners.registry import PLANNERS, planner_of
from mqjoin.planning.optimizer import optimize

UNITS = (0.001, 10.0, 1000.0)
BUNDLED = sorted([*(Path(mqjoin.__file__).parent / "workloads").glob("*.yaml"),
                  *(Path(datasets.__file__).parent / "workloads").glob("*.yaml")])


def in_time_unit(w: Workload, c: float) -> Workload:
    """``w`` written in a time unit ``1/c`` of its own: rates × c, windows and horizon ÷ c,
    measured sizes (per time unit of each relation) × c^k."""
    spec = w.to_spec()
    spec["defaults"]["rate"] *= c
    spec["defaults"]["horizon"] /= c
    if spec["defaults"]["window"] is not None:
        spec["defaults"]["window"] /= c
    for r in spec["relations"].values():
        r["rate"] *= c
        if r["window"] is not None:
            r["window"] /= c

    def scaled(key: str, value):
        k = len(key.split("⋈"))
        if isinstance(value, dict):
            return {**value, "size": value["size"] * c ** k}
        return value * c ** k

    for key, value in list(spec.get("sizes", {}).items()):
        if "⋈" in key:
            spec["sizes"][key] = scaled(key, value)
        else:  # per query
            spec["sizes"][key] = {k2: scaled(k2, v2) for k2, v2 in value.items()}
    return Workload.from_spec(spec)


def fingerprint(w: Workload, **kw):
    res = optimize(w, **kw)
    plan = res.plan
    return (plan.probe_orders(), tuple(sorted((s.id, s.parallelism) for s in plan.stores)), plan.edges,
            res.probe_cost, res.memory, res.ilp.canonical)


def assert_same(a, b):
    """The same plan and totals; where the solver's canonical tie-break ran out of its time on
    a loaded machine (``canonical`` False), equally cheap plans may differ: then the totals."""
    if a[5] and b[5]:
        assert a[:3] == b[:3]
    assert math.isclose(a[3], b[3], rel_tol=1e-6) and math.isclose(a[4], b[4], rel_tol=1e-6), (a[3:], b[3:])


@st.composite
def workloads(draw):
    """Random workloads of 2–4 queries with uneven rates, some windows, a horizon and a few
    measured sizes (the sizes of random 2-relation MIRs, as a multiple of their estimate)."""
    n_rel = draw(st.integers(4, 6))
    w = random_workload(draw(st.integers(2, 4)), n_relations=n_rel, query_size=draw(st.integers(2, 3)),
                        attributes=2, rate=100.0, parallelism=draw(st.sampled_from([1, 3])),
                        seed=draw(st.integers(0, 10_000)))
    spec = w.to_spec()
    spec["defaults"]["horizon"] = draw(st.sampled_from([1.0, 0.5, 7.0]))
    for r in spec["relations"].values():
        r["rate"] = draw(st.sampled_from([1.0, 30.0, 100.0, 2000.0]))
        r["window"] = draw(st.sampled_from([None, None, 0.2, 3.0]))
    return Workload.from_spec(spec)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), c=st.sampled_from(UNITS), policy=st.sampled_from(["single", "replicas"]))
def test_random_workloads_plan_the_same_in_any_time_unit(w, c, policy):
    assert_same(fingerprint(w, partitioning=policy), fingerprint(in_time_unit(w, c), partitioning=policy))


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_bundled_workloads_plan_the_same_in_any_time_unit(path):
    w = load_workload(path)
    base = fingerprint(w, time_limit=60)
    for c in UNITS:
        assert_same(base, fingerprint(in_time_unit(w, c), time_limit=60))


#: every rule-based planner (one without the ILP), with the options that change how it plans
RULE_PLANNERS = [(p, kw) for p in PLANNERS if not planner_of(p).ilp
                 for kw in ([{}, {"decompose": True}] if planner_of(p).decompose else
                            [{}, {"tree_shape": "deep"}] if planner_of(p).tree_shapes else [{}])]
RULE_IDS = [p + "".join(f"-{v}" for v in kw.values()) for p, kw in RULE_PLANNERS]


def rule_fingerprint(w: Workload, planner: str, **kw):
    """A rule-based planner's plan (its trees included) and its probe cost and memory."""
    res = optimize(w, planner=planner, **kw)
    plan = res.plan
    return ((plan.probe_orders(), tuple(sorted((s.id, s.parallelism) for s in plan.stores)), plan.edges, res.trees),
            (res.probe_cost, res.memory))


def assert_same_rule_plan(a, b):
    assert a[0] == b[0]
    assert all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(a[1], b[1])), (a[1], b[1])


@pytest.mark.parametrize("planner, kw", RULE_PLANNERS, ids=RULE_IDS)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), c=st.sampled_from(UNITS))
def test_random_workloads_plan_the_same_in_any_time_unit_with_every_planner(planner, kw, w, c):
    """The rule-based planners rank intermediate results and probing sequences of different
    sizes; counted per time unit they move against each other with the unit (AJoin's shared
    costs did, MJoin's decomposition and probing sequences could), counted over the horizon
    they do not."""
    assert_same_rule_plan(rule_fingerprint(w, planner, **kw), rule_fingerprint(in_time_unit(w, c), planner, **kw))


@pytest.mark.parametrize("planner, kw", RULE_PLANNERS, ids=RULE_IDS)
def test_bundled_workloads_plan_the_same_in_any_time_unit_with_every_planner(planner, kw):
    for path in BUNDLED:
        w = load_workload(path)
        base = rule_fingerprint(w, planner, **kw)
        for c in UNITS:
            assert_same_rule_plan(base, rule_fingerprint(in_time_unit(w, c), planner, **kw))


@pytest.mark.parametrize("name, method",
                         [("tpch_fig7a.yaml", "rate"), ("tpch_10q.yaml", "hash"), ("demo.yaml", "rate")])
def test_pmjoin_value_groups_are_the_same_in_any_time_unit(name, method):
    """PMJoin's value groups and placements, with per-value rates measured from streams of the
    workload (rates per value × c in the other unit): the same groups and trees, every
    communication cost (bytes per time unit) × c."""
    from mqjoin.datasets.commands import load_named_workload
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.planners.pmjoin import PMJoinOptions, pmjoin_report, value_rates

    w = load_named_workload(name)
    seconds = 20_000 / sum(w.rate(r) for r in w.used_relations)
    rates = value_rates(w, uniform_streams(w, duration=seconds, seed=0))
    for sizes in ("sum", "unit"):
        base = pmjoin_report(w, PMJoinOptions(rates, 4, method, sizes))
        for c in UNITS:
            scaled = {a: {v: r * c for v, r in per.items()} for a, per in rates.items()}
            other = pmjoin_report(in_time_unit(w, c), PMJoinOptions(scaled, 4, method, sizes))
            for qa, qb in zip(base.queries, other.queries):
                assert str(qa.tree) == str(qb.tree)
                assert [[(g.values, str(g.tree)) for g in pm.groups] for pm in qa.pmjoins] == \
                    [[(g.values, str(g.tree)) for g in pm.groups] for pm in qb.pmjoins]
                for x, y in ((qa.centralized, qb.centralized), (qa.distributed, qb.distributed),
                             (qa.partitioned, qb.partitioned)):
                    assert math.isclose(x * c, y, rel_tol=1e-6)


def test_the_old_objective_depended_on_the_unit():
    """The objective counts totals over the horizon: a step of k relations weighs H^k, so a
    longer horizon (the same streams observed longer) moves weight to the long prefixes."""
    w = load_workload(Path(mqjoin.__file__).parent / "workloads" / "paper_v2.yaml")
    assert optimize(w).probe_cost == 700.0
    longer = optimize(w.with_defaults(horizon=10.0))
    # every 1-relation step ×10, every 2-relation step ×100: the totals of a 10-unit run
    assert longer.probe_cost > 700.0 * 10
