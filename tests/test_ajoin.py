"""AJoin's optimiser (planner ``ajoin``): the paper's Figure 6 golden, grouping and eager
extension, iterative join reordering with shared costs, ad-hoc batches (Section 4's Q7 and the
50 % threshold), and plans that equal the oracle on every engine mode."""

from __future__ import annotations

import json

import pytest

from mqjoin.planners.ajoin import (
    ajoin, ajoin_optimizer, figure6_tables, figure6_workload, join_trees, query_groups, replan, sharing_costs,
    union_from_data,
)
from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange, parse_changes
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.epochs import run_adaptive
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload

from _cases import cases, filtered_cases
from _cli import run_cli
from test_adaptive import always_switch, check as check_adaptive  # noqa: F401  (a fixture and the oracle check)


def test_figure6_shared_36_vs_separate_18_keeps_q4_and_q5_apart():
    w, data = figure6_workload(), union_from_data(figure6_tables())
    step = sharing_costs(w, ["q4", "q5"], data)
    assert (step.shared, step.separate, step.gains) == (36.0, 18.0, False)
    assert repr(step) == "q4+q5: shared 36 vs separate 18 → separate"
    assert query_groups(w, data)[0] == ()
    # from pass fractions alone (independence) the union keeps 75 % of each stream: 4.5 · 4.5 > 18
    assert sharing_costs(w, ["q4", "q5"]).shared == pytest.approx(20.25)
    plan = ajoin(w, data).plan()
    assert all(s.mir.selection for s in plan.stores)  # every store is one query's own


W7 = '''
defaults: {selectivity: 0.1, rate: 10, parallelism: 2, window: 3}
relations:
  V: {attributes: [vid, lang]}
  W: {attributes: [vid, usr, geo]}
  C: {attributes: [usr, x]}
  R: {attributes: [usr]}
queries:
  q2: {join: "V(vid), W(vid, usr), C(usr)", where: "W.geo = 'CAN'"}
  q3: {join: "W(usr), C(usr), R(usr)", where: "W.geo = 'CAN'"}
  q4: {join: "W(usr), C(usr)", where: "W.geo = 'GER' AND C.x < 5"}
  q6: {join: "V(vid), W(vid, usr), C(usr)", where: "W.geo = 'GER'"}
filters: {q2.W: 0.3, q3.W: 0.3, q4.W: 0.3, q4.C: 0.5, q6.W: 0.3}
'''


def w7_tables():
    import random

    rng = random.Random(3)
    n = 30

    def col(values):
        return [rng.choice(values) for _ in range(n)]

    def ts():
        return sorted(float(rng.randint(0, 9)) for _ in range(n))

    return {"V": Table.from_columns("V", {"ts": ts(), "vid": col([0, 1, 2]), "lang": col(["ENG", "GER"])}),
            "W": Table.from_columns("W", {"ts": ts(), "vid": col([0, 1, 2]), "usr": col([0, 1, 2]),
                                          "geo": col(["CAN", "GER", "FRA"])}),
            "C": Table.from_columns("C", {"ts": ts(), "usr": col([0, 1, 2]), "x": col(list(range(10)))}),
            "R": Table.from_columns("R", {"ts": ts(), "usr": col([0, 1, 2])})}


def test_groups_by_filters_with_eager_extension():
    w, data = parse_workload(W7), union_from_data(w7_tables())
    groups, log = query_groups(w, data)
    # CAN and GER tuples are disjoint: only queries with the same W filter gain (the pair with the least
    # shared cost first, q4+q6 (C filtered), then q2+q3)
    assert groups == (("q2", "q3"), ("q4", "q6"))
    assert any(repr(s).startswith("q2+q4: ") and not s.gains for s in log)


def test_eager_extension_adds_a_third_query_that_gains():
    w = parse_workload(W7).with_query("q8", {"join": "W(usr), C(usr)", "where": "W.geo = 'CAN'"}, {"W": 0.3})
    groups, log = query_groups(w, union_from_data(w7_tables()))
    assert groups == (("q2", "q3", "q8"), ("q4", "q6"))
    assert any(repr(s).startswith("q2+q3+q8: ") and s.gains for s in log)  # q8 joined after the pair


def test_join_reordering_shares_the_cheapest_subplan_between_queries():
    w = parse_workload('''
defaults: {rate: 100, selectivity: 0.01}
relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
queries: {q1: "A(a), B(a,b), C(b)", q2: "B(b), C(b,c), D(c)", q3: "A(a), B(a)"}
selectivities: {B.b = C.b: 0.02}
''')
    # A ⋈ B: 100 shared by q1 and q3 → 50 each, the least: q1 and q3 take it; then q2 alone: B ⋈ C
    # (200, no longer shared with q1) loses to C ⋈ D (100)
    assert {q: str(t) for q, t in join_trees(w).items()} == {
        "q1": "((A ⋈ B) ⋈ C)", "q2": "((C ⋈ D) ⋈ B)", "q3": "(A ⋈ B)"}
    # without q3 and with a dearer A ⋈ B (500), B ⋈ C shared by q1 and q2 (200 / 2) ties C ⋈ D (100)
    # and wins by rank: both queries reuse it
    w2 = w.without_query("q3").with_selectivity("A.a = B.a", 0.05)
    assert {q: str(t) for q, t in join_trees(w2).items()} == {"q1": "((B ⋈ C) ⋈ A)", "q2": "((B ⋈ C) ⋈ D)"}
    plan = ajoin(w2).plan()
    assert sum(1 for s in plan.stores if s.mir.relations == ("B", "C")) == 1  # one BC store for both


def _q7_batch(w):
    return w.without_query("q4").with_query(
        "q7", {"join": "W(usr), C(usr)", "where": "W.geo = 'GER' AND C.x > 5"}, {"W": 0.3, "C": 0.4})


def test_section4_q7_joins_the_group_of_q6_and_only_that_group_is_replanned():
    w, tables = parse_workload(W7), w7_tables()

    def data(wl):
        return union_from_data(tables)

    first = ajoin(w, data(w))
    assert first.workload.groups == (("q2", "q3"), ("q4", "q6"))
    w2 = _q7_batch(w)  # Q4 deleted, Q7 = σ(W) ⋈ σ(C) created: 2 changes of 4 queries, not more than 50 %
    second = replan(first, w2, data(w2))
    assert not second.full
    assert second.workload.groups == (("q2", "q3"), ("q6", "q7"))  # Q7 attaches to W ⋈ C's GER group
    assert set(second.reordered) == {"q6", "q7"}  # only the changed group; q2 and q3 keep their trees
    assert {q: second.trees[q] for q in ("q2", "q3")} == {q: first.trees[q] for q in ("q2", "q3")}
    # a batch that changes more than half of the running queries (3 of 4) re-plans everything; half does not
    assert not replan(second, w2.without_query("q2").without_query("q3"), data(w2)).full
    w3 = w2.without_query("q2").without_query("q3").without_query("q6")
    assert replan(second, w3, data(w3)).full
    # every plan answers what the oracle answers
    for a, wl in ((first, w), (second, w2)):
        assert run_reference(a.plan(), tables).result_sets() == oracle_results(wl, tables)


def test_a_query_that_gains_with_no_group_stays_alone():
    w, tables = parse_workload(W7), w7_tables()
    first = ajoin(w, union_from_data(tables))
    w2 = w.with_query("q9", {"join": "W(usr), C(usr)", "where": "W.geo = 'FRA'"}, {"W": 0.3})
    second = replan(first, w2, union_from_data(tables))
    assert not second.full and all("q9" not in g for g in second.workload.groups)
    assert second.reordered == ("q9",)


@pytest.mark.parametrize("seed,workload,tables", filtered_cases(8, start=40) + cases(4, start=40),
                         ids=lambda v: str(v) if isinstance(v, int) else "")
def test_ajoin_plans_equal_the_oracle_in_every_mode(seed, workload, tables):
    want = oracle_results(workload, tables)
    for mode in ("mqo", "individual", "shared"):
        for pol in ("single", "replicas"):
            r = optimize(workload, planner="ajoin", mode=mode, partitioning=pol)
            assert r.planner == "ajoin" and r.ilp.solver == "ajoin-idp"
            assert run_reference(r.plan, tables).result_sets() == want, f"seed {seed} {mode}/{pol}"


def test_cli_optimize_run_and_compare_with_planner_ajoin(capsys, tmp_path):
    from mqjoin.model.tables import write_inputs

    w7 = tmp_path / "w7.yaml"
    w7.write_text(W7)
    code, out, _ = run_cli(capsys, "optimize", w7, "--planner", "ajoin", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["planner"] == "ajoin" and set(d["trees"]) == {"q2", "q3", "q4", "q6"}
    write_inputs(w7_tables(), tmp_path / "data", "csv")
    code, out, _ = run_cli(capsys, "run", w7, "--planner", "ajoin", "--data", tmp_path / "data",
                           "--out", tmp_path / "out", "--check")
    assert code == 0
    assert "equal to the oracle" in out
    code, out, _ = run_cli(capsys, "compare", w7, "--planner", "ajoin")
    assert code == 0
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert {(r[1], r[5]) for r in rows} == {(m, "ajoin") for m in ("individual", "shared", "mqo")}
    code, _, err = run_cli(capsys, "optimize", w7, "--planner", "ajoin", "--no-mirs")
    assert code == 2
    assert "materialises every inner node" in err


# --------------------------------------------------------------------------------------------
# ad-hoc batches at run time: changelogs with filtered queries (adaptive runs)
# --------------------------------------------------------------------------------------------


def filtered_changes(seed, w):
    """A random changelog over a filtered workload: a subset starts, copies of queries (with
    their filters and pass fractions) are added, some initial queries removed."""
    import random

    rng = random.Random(seed)
    names = list(w.query_names)
    init = [n for n in names if rng.random() < 0.6] or names[:1]
    changes = []
    for k, n in enumerate(names):
        if rng.random() < 0.8:
            q = w.query(n)
            text = {"join": q.text, "where": q.where} if q.filters else q.text
            changes.append(QueryChange(at=rng.uniform(-1, 8), add={f"x{k}": text},
                                       filters={f"x{k}.{f.relation}": f.fraction for f in q.filters}))
    changes += [QueryChange(at=rng.uniform(0, 8), remove=(n,)) for n in init if rng.random() < 0.4]
    return w.restricted_to(init), changes


@pytest.mark.parametrize("seed,w,tables", filtered_cases(10, start=8000), ids=lambda v: str(v) if isinstance(v, int)
                         else "")
def test_filtered_query_changes_equal_the_oracle_with_clash_and_ajoin(seed, w, tables, always_switch):
    w0, changes = filtered_changes(seed, w)
    for length, opt in ((1.0, None), (0.6, ajoin_optimizer())):
        policy = AdaptivePolicy(epoch=length, threshold=0.0)
        check_adaptive(run_adaptive(w0, tables, policy, changes, optimizer=opt), w0, tables, changes, policy)


def test_q7_at_run_time_attaches_to_q6s_group_and_answers_from_history(always_switch):
    w, tables = parse_workload(W7), w7_tables()
    changes = parse_changes('''
- {at: 3.5, remove: [q4], add: {q7: {join: "W(usr), C(usr)", where: "W.geo = 'GER' AND C.x > 5"}},
   filters: {q7.W: 0.3, q7.C: 0.4}}
''')
    policy = AdaptivePolicy(epoch=1.0)
    opt = ajoin_optimizer(union_from_data(tables))
    run = run_adaptive(w, tables, policy, changes, optimizer=opt)
    check_adaptive(run, w, tables, changes, policy)
    batch = next(a for a in opt.history if "q7" in a.workload.query_names)
    assert not batch.full and batch.workload.groups == (("q2", "q3"), ("q6", "q7"))
    assert set(batch.reordered) == {"q6", "q7"}
    # q7 answers results whose C partner arrived before its activation (epoch 5): history
    ts = {i: tables["C"].ts[i] for _, i in run.result_sets()["q7"]}
    assert run.result_sets()["q7"] and min(ts.values()) < 5


def _changes_run_args(tmp_path) -> list:
    """``mqjoin run`` of W7 with a changelog adding the filtered q7, planner ajoin, checked."""
    from mqjoin.model.tables import write_inputs

    (tmp_path / "w7.yaml").write_text(W7)
    (tmp_path / "changes.yaml").write_text(
        "- {at: 3.5, remove: [q4], add: {q7: {join: 'W(usr), C(usr)', where: \"W.geo = 'GER'\"}}, "
        "filters: {q7.W: 0.3}}\n")
    write_inputs(w7_tables(), tmp_path / "data", "csv")
    return ["run", tmp_path / "w7.yaml", "--data", tmp_path / "data", "--out", tmp_path / "out",
            "--changes", tmp_path / "changes.yaml", "--epoch", "1", "--planner", "ajoin", "--check"]


def test_cli_run_changes_with_planner_ajoin(tmp_path, capsys):
    code, out, _ = run_cli(capsys, *_changes_run_args(tmp_path))
    assert code == 0
    assert "equal to the oracle" in out


@pytest.mark.slow
def test_cli_run_changes_with_planner_ajoin_on_spark(spark, tmp_path, capsys):
    """The same changelog on adaptive Spark (the CLI reuses the test session): AJoin re-plans
    each batch there too."""
    code, out, _ = run_cli(capsys, *_changes_run_args(tmp_path), "--engine", "spark", "--checkpoint", tmp_path / "chk")
    assert code == 0
    assert "equal to the oracle" in out
