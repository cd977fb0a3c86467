"""Plan.from_dict validates: every malformed plan is a PlanError naming the culprit,
never a KeyError at load or at run time."""

from __future__ import annotations

import copy
import json

import pytest

from mqjoin.model.errors import PlanError
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.plan import Plan
from mqjoin.runtime.reference import run_reference
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.workload import parse_workload

FIG3 = parse_workload("""
defaults: {parallelism: 4}
relations: {R: {attributes: [b], rate: 100}, S: {attributes: [b, c], rate: 100},
            T: {attributes: [c, d], rate: 100}, U: {attributes: [d], rate: 100}}
queries: {q1: "R(b), S(b,c), T(c)", q2: "S(c), T(c,d), U(d)"}
selectivities: {R.b = S.b: 0.01, S.c = T.c: 0.01, T.d = U.d: 0.01}
""")


@pytest.fixture(scope="module", params=[("mqo", "single"), ("individual", "replicas")])
def plan_dict(request):
    mode, policy = request.param
    return json.loads(optimize(FIG3, mode=mode, partitioning=policy).plan.to_json())


def _load(d):
    return Plan.from_dict(json.loads(json.dumps(d)))


def test_the_unmodified_plan_loads_and_runs(plan_dict):
    plan = _load(plan_dict)
    run = run_reference(plan, uniform_streams(FIG3, duration=0.2, seed=1))
    assert set(run.counts) == {"q1", "q2"}


TOP_KEYS = ["workload", "mode", "partitioning", "choices", "stores", "edges", "nodes", "sources", "rules"]


@pytest.mark.parametrize("key", TOP_KEYS)
def test_a_missing_top_level_key_is_named(plan_dict, key):
    d = copy.deepcopy(plan_dict)
    del d[key]
    with pytest.raises(PlanError, match=f"the plan has no key '{key}'"):
        _load(d)


@pytest.mark.parametrize("section, key, what", [
    ("edges", "kind", "an edge"), ("edges", "route", "an edge"), ("stores", "partition", "a store"),
    ("nodes", "parent", "a node"), ("choices", "start", "a choice"),
])
def test_a_missing_nested_key_is_named(plan_dict, section, key, what):
    d = copy.deepcopy(plan_dict)
    del d[section][0][key]
    with pytest.raises(PlanError, match=f"{what} has no key '{key}'"):
        _load(d)


def test_every_edge_is_referenced_so_removing_any_is_caught(plan_dict):
    for i, e in enumerate(plan_dict["edges"]):
        d = copy.deepcopy(plan_dict)
        del d["edges"][i]
        with pytest.raises(PlanError, match=f"no edge {e['label']} in the plan"):
            _load(d)


def test_every_store_is_referenced_so_removing_any_is_caught(plan_dict):
    for i, s in enumerate(plan_dict["stores"]):
        d = copy.deepcopy(plan_dict)
        del d["stores"][i]
        with pytest.raises(PlanError, match=s["id"].replace("[", r"\[").replace("]", r"\]")):
            _load(d)


def _first(d, kind):
    return next(e for e in d["edges"] if e["kind"] == kind)


def _mutations():
    def dangling_source(d):
        rel = next(iter(d["sources"]))
        d["sources"][rel].append("e999")
        return "the sources of .*: no edge e999"

    def dangling_out(d):
        sid, rules = next((s, rs) for s, rs in d["rules"].items() if any(r["type"] == "probe" for r in rs.values()))
        next(r for r in rules.values() if r["type"] == "probe")["out"].append("e998")
        return "probe rule of edge .*: no edge e998"

    def dangling_parent(d):
        next(n for n in d["nodes"] if n["parent"] is not None)["parent"] = "e997"
        return "the parent of node .*: no edge e997"

    def unknown_target(d):
        _first(d, "probe")["target"] = "ZZ[z]"
        return r"has target 'ZZ\[z\]', which is no store"

    def unknown_source(d):
        _first(d, "ingest")["source"] = "input:X"
        return "has source 'input:X'"

    def unknown_output(d):
        _first(d, "output")["target"] = "output:q9"
        return "has target 'output:q9'"

    def rules_of_unknown_store(d):
        d["rules"]["ZZ[z]"] = {}
        return r"rules are given for store ZZ\[z\]"

    def node_of_unknown_store(d):
        d["nodes"][0]["store"] = "ZZ[z]"
        return r"probes store ZZ\[z\]"

    def bad_kind(d):
        d["edges"][0]["kind"] = "teleport"
        return "kind 'teleport'"

    def bad_rule_type(d):
        sid = next(iter(d["rules"]))
        next(iter(d["rules"][sid].values()))["type"] = "keep"
        return "type 'keep'"

    def bad_mode(d):
        d["mode"] = "best"
        return "unknown mode 'best'"

    def bad_policy(d):
        d["partitioning"] = "both"
        return "unknown partitioning policy 'both'"

    def bad_attribute(d):
        d["stores"][0]["partition"] = "Rb"
        return "malformed attribute 'Rb'"

    def unknown_relation_in_sources(d):
        d["sources"]["X"] = []
        return "sources name relation X"

    def rule_under_wrong_store(d):
        sids = list(d["rules"])
        lab, rule = next(iter(d["rules"][sids[0]].items()))
        del d["rules"][sids[0]][lab]
        d["rules"][sids[1]][lab] = rule
        return f"the rule of edge {lab} is filed under store"

    def workload_invalid(d):
        d["workload"]["queries"]["q1"] = "R(b), X(b)"
        return "its workload is invalid"

    def not_an_object(d):
        d["nodes"][0] = 7
        return "a node must be a JSON object"

    return [dangling_source, dangling_out, dangling_parent, unknown_target, unknown_source, unknown_output,
            rules_of_unknown_store, node_of_unknown_store, bad_kind, bad_rule_type, bad_mode, bad_policy,
            bad_attribute, unknown_relation_in_sources, rule_under_wrong_store, workload_invalid, not_an_object]


@pytest.mark.parametrize("mutate", _mutations(), ids=lambda f: f.__name__)
def test_malformed_plans_are_plan_errors_naming_the_culprit(plan_dict, mutate):
    d = copy.deepcopy(plan_dict)
    message = mutate(d)
    with pytest.raises(PlanError, match=message):
        _load(d)


@pytest.mark.parametrize("workload", [7, [], {"relations": 5}, {"relations": {"R": 3}, "queries": {}}])
def test_a_workload_of_the_wrong_shape_is_a_plan_error(plan_dict, workload):
    d = copy.deepcopy(plan_dict)
    d["workload"] = workload
    with pytest.raises(PlanError, match="its workload is invalid"):
        _load(d)


def test_from_json_of_a_non_object():
    with pytest.raises(PlanError, match="expected a JSON object, got list"):
        Plan.from_json("[1, 2]")
