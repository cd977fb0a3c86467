"""docs/model.md §7 — selections (query filters): syntax and typed errors, pass fractions, sizes,
step identity and query groups, and results equal to the brute-force oracle on every plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.cost import join_size
from mqjoin.model.errors import FilterError, UnknownAttributeError, UnknownRelationError, WorkloadSyntaxError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.planning.plan import Plan
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload, parse_workload

from _cases import cases, filtered_cases
from _cli import run_cli

BASE = '''
defaults: {selectivity: 0.1, rate: 10, parallelism: 2}
relations:
  V: {attributes: [a, x]}
  W: {attributes: [a, b, y]}
  C: {attributes: [b, k]}
'''


def wl(queries: str, filters: str = "") -> Workload:
    return parse_workload(BASE + "queries:\n" + queries + ("\nfilters: " + filters if filters else ""))


def test_paper_syntax_plain_string_stays_valid_and_filters_round_trip():
    w = wl('  q3: V(a), W(a,b), C(b)\n  q4: {join: "V(a), W(a,b), C(b)", where: "V.x < 10 AND W.y IN (1, 2)"}',
           "{q4.V: 0.2, q4.W: 0.5}")
    assert w.query("q3").filters == ()
    q4 = w.query("q4")
    assert [str(f) for f in q4.filters] == ["V.x < 10", "W.y IN (1, 2)"]
    assert [f.fraction for f in q4.filters] == [0.2, 0.5]
    assert repr(q4) == "Query(q4: V(a), W(a,b), C(b) WHERE V.x < 10 AND W.y IN (1, 2))"
    assert type(w).from_spec(w.to_spec()) == w
    assert parse_workload(w.to_yaml()) == w


@pytest.mark.parametrize("where,values,expected", [
    ("C.k = 'x'", ["x", "y", None], [True, False, False]),
    ("C.k != 3", [3, 4, None], [False, True, False]),
    ("C.k <= 3", [3, 4, "s"], [True, False, False]),
    ("C.k > 3", [3, 4.5], [False, True]),
    ("C.k >= 3", [3, 2], [True, False]),
    ("C.k IN (1, 'z')", [1, "z", 2], [True, True, False]),
    ("C.k BETWEEN 2 AND 4", [2, 4, 5, 1.9], [True, True, False, False]),
    ("C.k between -1 and 0.5 AND C.k <> 0", [0, -1, 0.5], [False, True, True]),
])
def test_every_comparison_operator(where, values, expected):
    w = wl(f'  q: {{join: "W(b), C(b)", where: "{where}"}}', "{q.C: 0.5}")
    f = w.query("q").filter_of("C")
    assert [f.passes({"k": v}) for v in values] == expected


@pytest.mark.parametrize("queries,filters,exc,culprits", [
    ('  q: {join: "V(a), W(a)", where: "V.z < 1"}', "{q.V: 0.5}", UnknownAttributeError, ["V.z", "q"]),
    ('  q: {join: "V(a), W(a)", where: "Z.x < 1"}', "{q.V: 0.5}", UnknownRelationError, ["'Z'", "q"]),
    ('  q: {join: "V(a), W(a)", where: "C.k < 1"}', "{q.C: 0.5}", FilterError, ["C", "does not join"]),
    ('  q: {join: "V(a), W(a)", where: "V.x < 1"}', "{q.V: 1.5}", FilterError, ["q.V", "(0, 1]"]),
    ('  q: {join: "V(a), W(a)", where: "V.x < 1"}', "{q.W: 0.5}", FilterError, ["q.W", "does not filter"]),
    ('  q: V(a), W(a)', "{q.V: 0.5}", FilterError, ["q.V", "no filter"]),
    ('  q: {join: "V(a), W(a)", where: "V.x < 1"}', "{p.V: 0.5}", FilterError, ["'p'", "does not exist"]),
    ('  q: {join: "V(a), W(a)", where: "V.x < 1 OR V.x > 3"}', "{q.V: 0.5}", FilterError, ["OR V.x > 3", "AND"]),
    ('  q: {join: "V(a), W(a)", where: "V.x LIKE 1"}', "{q.V: 0.5}", FilterError, ["LIKE", "q"]),
    ('  q: {join: "V(a), W(a)", where: "V.x IN ()"}', "{q.V: 0.5}", FilterError, ["IN ()"]),
    ('  q: {join: "V(a), W(a)", where: ""}', "", FilterError, ["empty"]),
    ('  q: {join: "V(a), W(a)", whence: "V.x < 1"}', "", WorkloadSyntaxError, ["whence", "q"]),
    ('  q: {where: "V.x < 1"}', "", WorkloadSyntaxError, ["'join'", "q"]),
    ('  q: {join: "V(a), W(a)", where: "V.x < 1"}\n  p: {join: "V(a), W(a)", where: "V.x < 1"}',
     "{q.V: 0.5, p.V: 0.4}", FilterError, ["q and p", "V.x < 1", "0.5 vs 0.4"]),
])
def test_bad_filters_get_typed_errors_naming_the_culprit(queries, filters, exc, culprits):
    with pytest.raises(exc) as info:
        wl(queries, filters)
    for c in culprits:
        assert c in str(info.value)


def test_a_missing_pass_fraction_is_asked_for_when_a_cost_needs_it():
    w = wl('  q: {join: "V(a), W(a)", where: "V.x < 1"}')  # valid: mqjoin stats can estimate it
    assert w.query("q").filter_of("V").fraction is None
    with pytest.raises(FilterError, match=r"no pass fraction for the filter on V; add .filters: {q.V: .*mqjoin stats"):
        optimize(w)


def test_sizes_scale_each_filtered_relation_by_its_pass_fraction():
    w = wl('  q: {join: "V(a), W(a,b), C(b)", where: "V.x < 1 AND C.k = 2"}', "{q.V: 0.2, q.C: 0.5}")
    q = w.query("q")
    sel = w.selections("q")
    # A2 with f·λ: 0.2·10 · 10 · 0.5·10 · 0.1²
    assert join_size(w, {"V", "W", "C"}, q.classes, sel) == pytest.approx(2 * 10 * 5 * 0.01)
    assert join_size(w, {"W"}, q.classes, sel) == 10
    assert join_size(w, {"V", "W"}, q.classes, sel) == pytest.approx(2 * 10 * 0.1)


def _steps(w):
    c = enumerate_candidates(w, mirs=False)
    return {q: {s for seqs in c.steps[q].values() for seq in seqs for s in seq} for q in w.query_names}


def test_steps_are_shared_only_between_equal_filters():
    w = wl('  q1: {join: "V(a), W(a)", where: "V.x < 1"}\n  q2: {join: "V(a), W(a)", where: "V.x < 1"}\n'
           '  q3: {join: "V(a), W(a)", where: "V.x < 2"}\n  q4: V(a), W(a)',
           "{q1.V: 0.5, q2.V: 0.5, q3.V: 0.6}")
    steps = _steps(w)
    assert steps["q1"] == steps["q2"]
    assert not steps["q1"] & steps["q3"] and not steps["q1"] & steps["q4"] and not steps["q3"] & steps["q4"]
    # every query pays its own steps: V's probes at f·λ_V = f·10, W's probes into V at λ_W = 10
    assert optimize(w.restricted_to(["q4"])).probe_cost == 20
    assert optimize(w).probe_cost == pytest.approx((5 + 10) + (6 + 10) + 20)


def test_a_query_group_shares_its_steps_at_the_union_fraction():
    w = wl('  q1: {join: "V(a), W(a)", where: "V.x < 1"}\n  q3: {join: "V(a), W(a)", where: "V.x > 4"}',
           "{q1.V: 0.5, q3.V: 0.6}")
    g = w.with_groups([["q1", "q3"]])
    steps = _steps(g)
    assert steps["q1"] == steps["q3"]
    assert g.selection("q1", "V").fraction == pytest.approx(1 - 0.5 * 0.4)
    one = optimize(w.restricted_to(["q1"]).with_filter_fraction("q1", "V", 0.8)).probe_cost
    assert optimize(g).probe_cost == pytest.approx(one) == pytest.approx(0.8 * 10 + 10)  # paid once at f_G
    assert optimize(w).probe_cost == pytest.approx((0.5 * 10 + 10) + (0.6 * 10 + 10))


def test_plans_with_filters_and_groups_round_trip_through_json():
    w = wl('  q1: {join: "V(a), W(a,b), C(b)", where: "V.x < 1 AND W.y IN (1, 2)"}\n  q2: W(b), C(b)\n'
           '  q3: {join: "V(a), W(a)", where: "V.x > 4"}', "{q1.V: 0.5, q1.W: 0.2, q3.V: 0.6}")
    for v in (w, w.with_groups([["q1", "q3"]])):
        plan = optimize(v).plan
        assert Plan.from_json(plan.to_json()) == plan


def test_the_oracle_keeps_exactly_the_results_whose_tuples_pass():
    w = wl('  q: W(a), V(a)\n  p: {join: "W(a), V(a)", where: "V.x >= 1 AND W.y = 7"}', "{p.V: 0.5, p.W: 0.5}")
    tables = {"V": Table.from_columns("V", {"ts": [0, 0, 0], "a": [1, 1, 2], "x": [0, 1, 2]}),
              "W": Table.from_columns("W", {"ts": [0, 0], "a": [1, 2], "y": [7, 8], "b": [0, 0]})}
    got = oracle_results(w, tables)
    assert got["q"] == {(0, 0), (0, 1), (1, 2)}
    assert got["p"] == {(0, 1)}


MODES = [("mqo", "single"), ("mqo", "replicas"), ("individual", "single"), ("shared", "single")]


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("seed,workload,tables", filtered_cases(15), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_filtered_results_equal_the_oracle_for_every_plan(seed, workload, tables, grouped):
    if grouped:
        workload = workload.with_groups([workload.query_names])
    want = oracle_results(workload, tables)
    for mode, pol in MODES:
        for mirs in (True, False):
            run = run_reference(optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan, tables)
            assert run.result_sets() == want, f"seed {seed}: {mode}/{pol}/mirs={mirs}/grouped={grouped}"


@pytest.mark.parametrize("seed,workload,tables", cases(5), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_unfiltered_workloads_keep_their_plans(seed, workload, tables):
    assert all(s.mir.selection == () for s in optimize(workload).plan.stores)


PLANNERS = [dict(planner="mjoin"), dict(planner="mjoin", decompose=True), dict(planner="tree"),
            dict(planner="ajoin")]


@pytest.mark.parametrize("seed,workload,tables", filtered_cases(5, start=500), ids=lambda v: str(v)
                         if isinstance(v, int) else "")
def test_filtered_results_equal_the_oracle_under_every_planner(seed, workload, tables):
    want = oracle_results(workload, tables)
    for grouped in (False, True):
        w = workload.with_groups([workload.query_names]) if grouped else workload
        for kw in PLANNERS:
            for mode in ("individual", "shared", "mqo"):
                plan = optimize(w, mode=mode, **kw).plan
                assert run_reference(plan, tables).result_sets() == want, f"seed {seed} {kw} {mode} grouped={grouped}"


SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "samples" / "tpch_tiny"


def test_tpch_filtered_workload_runs_end_to_end_and_stats_estimate_its_pass_fractions(capsys, tmp_path):
    from mqjoin.model.tables import read_inputs
    from mqjoin.model.workload import load_workload

    code, out, _ = run_cli(capsys, "run", "tpch_fig7a_filtered.yaml", "--data", SAMPLE, "--out", tmp_path / "out",
                           "--check")
    assert code == 0
    assert "equal to the oracle" in out and "q4:" in out
    code, out, _ = run_cli(capsys, "stats", "tpch_fig7a_filtered.yaml", "--data", SAMPLE, "--write",
                           tmp_path / "w.yaml")
    assert code == 0
    assert "pass fractions" in out
    w = load_workload(tmp_path / "w.yaml")
    tables = read_inputs(w, SAMPLE)
    for q in w.queries:  # exact: the share of the sample's rows that pass
        for f in q.filters:
            t = tables[f.relation]
            names = [c.attr.name for c in f.comparisons]
            passing = sum(f.passes({a: t.columns[a][i] for a in names}) for i in range(len(t)))
            assert f.fraction == pytest.approx(max(passing, 1) / len(t), rel=1e-5), (q.name, f)
    code, _, _ = run_cli(capsys, "run", tmp_path / "w.yaml", "--data", SAMPLE, "--out", tmp_path / "o2",
                         "--planner", "ajoin", "--check")
    assert code == 0
