"""Measured join sizes (docs/model.md §2): a given size replaces the independence estimate of
its set in every cost, memory figure and plan; filters and edits combine with it by the rules
of :meth:`mqjoin.model.workload.Workload.measured_size` and ``Workload.respecified``."""

from __future__ import annotations

import math

import pytest

from _cli import run_cli
from mqjoin.model.sizes import independent_size
from mqjoin.model.workload import parse_workload
from mqjoin.planning.cost import join_size, memory_tuples
from mqjoin.planning.optimizer import optimize

BASE = """
relations: {R: {attributes: [a, x], rate: 10}, S: {attributes: [a, b], rate: 10}, T: {attributes: [b], rate: 10}}
queries: {q1: "R(a), S(a,b), T(b)", q2: {join: "R(a), S(a)", where: "R.x < 3"}}
filters: {q2.R: 0.5}
selectivities: {R.a = S.a: 0.1, S.b = T.b: 0.1}
"""


def test_size_replaces_the_estimate_for_its_set_only():
    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40}')
    cs = w.query("q1").classes
    assert join_size(w, {"R", "S"}, cs) == 40.0
    assert join_size(w, {"S", "T"}, cs) == independent_size(w, {"S", "T"}, cs) == 10.0
    assert join_size(w, {"R", "S", "T"}, cs) == 10.0  # not given: estimated
    assert memory_tuples(w, ["R", "S"], cs) == 40.0
    # an MIR's classes (restricted to the set) find the same size
    assert join_size(w, ("S", "R"), [c.restrict({"R", "S"}) for c in cs if c.restrict({"R", "S"})]) == 40.0


def test_filters_scale_an_unfiltered_size_or_take_their_own():
    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40}')
    sel = w.selections("q2")
    assert join_size(w, {"R", "S"}, w.query("q2").classes, sel) == 20.0  # 40 · f_R
    w2 = parse_workload(BASE + 'sizes: {"R ⋈ S": 40, q2: {"R ⋈ S": 7}}')
    assert join_size(w2, {"R", "S"}, w2.query("q2").classes, sel) == 7.0
    assert join_size(w2, {"R", "S"}, w2.query("q1").classes) == 40.0
    # a group keeps the union of its filters: the size measured with q2's own filter is not its size
    g = parse_workload(BASE.replace('q2: {join: "R(a), S(a)", where: "R.x < 3"}',
                                    'q2: {join: "R(a), S(a)", where: "R.x < 3"}, q4: {join: "R(a), S(a)", where: "R.x '
                                    '> 7"}')
                       .replace("{q2.R: 0.5}", "{q2.R: 0.5, q4.R: 0.2}") + 'sizes: {"R ⋈ S": 40, q2: {"R ⋈ S": 7}}')
    g = g.with_groups([["q2", "q4"]])
    gsel = g.selections("q2")
    assert math.isclose(join_size(g, {"R", "S"}, g.query("q2").classes, gsel), 40 * 0.6)


def mirs(res) -> set[tuple[str, ...]]:
    return {s.mir.relations for s in res.plan.stores if len(s.mir.relations) > 1}


def test_the_plan_follows_the_measured_sizes():
    plain = optimize(parse_workload(BASE))
    assert mirs(plain) == {("R", "S")} and plain.probe_cost == 55 and plain.memory == 45
    # S ⋈ T measured far smaller than estimated: its MIR is now the one worth keeping
    small = optimize(parse_workload(BASE + 'sizes: {"S ⋈ T": 3}'))
    assert mirs(small) == {("S", "T")} and small.probe_cost == 48 and small.memory == 38


@pytest.mark.parametrize("edit, factor", [
    (lambda w: w.with_relation("R", rate=20), 2.0),
    (lambda w: w.with_selectivity("R.a = S.a", 0.05), 0.5),
    (lambda w: w.with_selectivity("S.b = T.b", 0.05), 1.0),  # another class: untouched
    (lambda w: w.with_defaults(parallelism=3), 1.0),
])
def test_edits_keep_a_sizes_ratio_to_the_estimate(edit, factor):
    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40}')
    e = edit(w)
    assert [(m.relations, m.value) for m in e.sizes] == [(("R", "S"), 40.0 * factor)]
    # the slider moves the size as it moves the estimate
    cs = e.query("q1").classes
    assert join_size(e, {"R", "S"}, cs) / independent_size(e, {"R", "S"}, cs) == pytest.approx(4.0)


def test_edits_that_change_the_join_drop_the_size():
    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40, q2: {"R ⋈ S": 7}}')
    assert [str(m) for m in w.with_filter_fraction("q2", "R", 0.25).sizes] == ["R ⋈ S = 40", "q2: R ⋈ S = 3.5"]
    assert [str(m) for m in w.without_query("q2").sizes] == ["R ⋈ S = 40"]
    assert [str(m) for m in w.restricted_to(["q1"]).sizes] == ["R ⋈ S = 40"]
    # q2 now joins R and S on another attribute pair: its size of R ⋈ S no longer applies, and
    # the unfiltered R ⋈ S is no longer one join (q1 and q2 join the pair differently)
    changed = w.with_defaults(selectivity=0.1).with_query("q2", {"join": "R.x = S.b", "where": "R.x < 3"}, {"R": 0.5})
    assert changed.sizes == ()
    kept = w.with_query("q3", "S(b), T(b)")
    assert [str(m) for m in kept.sizes] == ["R ⋈ S = 40", "q2: R ⋈ S = 7"]
    assert parse_workload(changed.to_yaml()) == changed


def test_no_sizes_no_change():
    w = parse_workload(BASE)
    cs = w.query("q1").classes
    for rels in ({"R", "S"}, {"S", "T"}, {"R", "S", "T"}):
        assert join_size(w, rels, cs) == independent_size(w, rels, cs)
    assert w.measured_size({"R", "S"}, cs) is None and w.sizes == ()


def test_written_workloads_keep_their_sizes():
    from mqjoin.datasets.stats import workload_yaml

    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40, q2: {"R ⋈ S": 7}}')
    text = workload_yaml(w)
    assert "  R ⋈ S: 40.0\n" in text and "  q2:\n    R ⋈ S: 7.0\n" in text
    assert parse_workload(text) == w
    # a sampled size's error and an order of arrival are written too, each size on one line
    w = parse_workload(BASE + 'sizes: {"R ⋈ S": {size: 40, error: 0.05, last: {R: 0.25, S: 0.75}}, q2: {"R ⋈ S": 7}}')
    text = workload_yaml(w)
    assert "  R ⋈ S: {size: 40.0, error: 0.05, last: {R: 0.25, S: 0.75}}\n" in text
    assert parse_workload(text) == w


def test_statistics_sampled_anew_move_sizes_like_an_edit():
    """The adaptive controller's epochs re-estimate rates and selectivities
    (mqjoin.model.statistics.with_pair_values): a measured size keeps its ratio to the estimate."""
    from mqjoin.model.statistics import with_pair_values
    from mqjoin.model.workload import Attr

    w = parse_workload(BASE + 'sizes: {"R ⋈ S": 40}')
    e = with_pair_values(w, {(Attr("R", "a"), Attr("S", "a")): 0.2}, rates={"R": 5.0})
    assert [(m.relations, m.value) for m in e.sizes] == [(("R", "S"), 40.0)]  # × 2 (s) × 0.5 (rate)
    e = with_pair_values(w, {(Attr("R", "a"), Attr("S", "a")): 0.2})
    assert [(m.relations, m.value) for m in e.sizes] == [(("R", "S"), 80.0)]


def test_a_size_given_under_one_query_serves_every_query_that_joins_it_alike():
    """``stats --sizes`` writes a size once, under the first query that joins the set a given
    way; restricting the workload to another such query (``individual`` mode) keeps it."""
    w = parse_workload(BASE.replace("q2: {join", 'q3: "R(a), S(a)", q2: {join') + 'sizes: {q3: {"R ⋈ S": 40}}')
    assert [str(m) for m in w.restricted_to(["q1"]).sizes] == ["q1: R ⋈ S = 40"]
    assert [str(m) for m in w.without_query("q3").sizes] == ["q1: R ⋈ S = 40"]
    cs = w.query("q1").classes
    assert join_size(w.restricted_to(["q1"]), {"R", "S"}, cs) == join_size(w, {"R", "S"}, cs) == 40.0
    # the filtered q2 joins R and S under its filter: not the same join
    assert w.restricted_to(["q2"]).sizes == ()
    for mode in ("individual", "shared"):
        res = optimize(w, mode=mode)
        assert res.probe_cost > 0


# -- the order of arrival (``last``, docs/model.md §2 and §4) ------------------------------------

def test_the_order_of_arrival_sets_the_share_of_a_steps_prefix():
    from mqjoin.planning.candidates import enumerate_candidates

    plain = parse_workload(BASE + 'sizes: {"R ⋈ S": 40}')
    split = parse_workload(BASE + 'sizes: {"R ⋈ S": {size: 40, last: {R: 0.1, S: 0.9}}}')
    assert [str(m) for m in split.sizes] == ["R ⋈ S = 40 (last: R 0.1, S 0.9)"]

    def costs(w):  # (start, prefix) → unit cost of the steps of q1
        c = enumerate_candidates(w)
        return {(s.prefix[0].relations[0], "".join(sorted(s.prefix_relations))): c.step_cost[s]
                for s in c.step_cost if "".join(sorted(s.prefix_relations)) == "RS"
                and s.classes == w.query("q1").classes}

    assert costs(plain) == {("R", "RS"): 20.0, ("S", "RS"): 20.0}  # |⋈P| / |P|
    assert costs(split) == {("R", "RS"): 4.0, ("S", "RS"): 36.0}  # |⋈P| · o
    # the size itself and every other set are as before; filters keep the unfiltered split
    cs = split.query("q1").classes
    assert join_size(split, {"R", "S"}, cs) == 40.0
    assert split.arrival_share({"R", "S"}, split.query("q2").classes, split.selections("q2"), "S") == 0.9
    assert split.arrival_share({"S", "T"}, cs, (), "S") is None and plain.arrival_share({"R", "S"}, cs, (), "S") is None
    # R » S » T's step from R ⋈ S ships a tenth of the join (4, not 20): 16 less per second
    assert optimize(plain, mirs=False).probe_cost - optimize(split, mirs=False).probe_cost == 16.0


def test_the_order_of_arrival_survives_edits_round_trips_and_a_runs_sizes():
    from mqjoin.model.sizes import MeasuredSize

    w = parse_workload(BASE + 'sizes: {"R ⋈ S": {size: 40, last: {R: 0.25, S: 0.75}}}')
    for e in (w.with_selectivity("R.a = S.a", 0.05), w.with_relation("R", rate=20), parse_workload(w.to_yaml())):
        assert [m.last for m in e.sizes] == [(("R", 0.25), ("S", 0.75))]
    assert w.to_spec()["sizes"] == {"R ⋈ S": {"size": 40.0, "last": {"R": 0.25, "S": 0.75}}}
    # a run measures a size, not who arrives last: the split stays; a new split replaces it
    run = w.with_sizes([MeasuredSize(None, ("R", "S"), 30.0)])
    assert [(m.value, m.last) for m in run.sizes] == [(30.0, (("R", 0.25), ("S", 0.75)))]
    new = w.with_sizes([MeasuredSize(None, ("S", "R"), 30.0, (("S", 0.5), ("R", 0.5)))])
    assert [m.last for m in new.sizes] == [(("R", 0.5), ("S", 0.5))]


CHAIN = """
defaults: {rate: 100, parallelism: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q: "R(a), S(a,b), T(b)"}
selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.01}
"""


def chain(error=None):
    """R ⋈ S materialised costs 400 and holds 400 tuples; without it 450 and 300.  The two
    plans' costs differ by 12.5 %; the tolerance is 2 · (50 + 50) · error / 400 = error / 2."""
    size = "100" if error is None else f"{{size: 100, error: {error}}}"
    return parse_workload(CHAIN + f'sizes: {{"R ⋈ S": {size}, "S ⋈ T": {size}}}')


def test_costs_within_the_sampled_sizes_error_tie_and_the_lighter_plan_is_chosen():
    from mqjoin.planning.ties import tolerance

    exact = optimize(chain())
    assert (exact.probe_cost, exact.memory, mirs(exact), exact.tie_break) == (400, 400, {("R", "S")}, None)
    assert "tie_break" not in exact.to_dict() and "ties within" not in exact.summary()
    for mode in ("mqo", "individual", "shared"):
        r = optimize(chain(0.3), mode=mode)
        assert (r.probe_cost, r.memory, mirs(r)) == (450, 300, set()), mode
        t = r.tie_break
        assert t.tolerance == pytest.approx(0.15) and (t.optimum_cost, t.optimum_memory) == (400, 400)
        assert t.changed(r.memory) and t.solves >= 1 and t.complete
    r = optimize(chain(0.3))
    assert tolerance(optimize(chain(0.3), memory_ties=False).plan) == pytest.approx(0.15)
    d = r.to_dict()["tie_break"]
    assert d["changed"] and d["probe_cost_change"] == pytest.approx(0.125)
    assert d["memory_change"] == pytest.approx(-0.25)
    assert "least memory chosen, probe cost +12.50%, memory -25.0%" in r.summary()
    # the optimum without the pass, and an error too small to reach the other plan: the optimum
    assert optimize(chain(0.3), memory_ties=False).probe_cost == 400
    small = optimize(chain(0.2))
    assert (small.probe_cost, small.memory) == (400, 400) and not small.tie_break.changed(small.memory)
    assert small.probe_orders() == exact.probe_orders()


def test_ties_only_lower_memory_and_never_leave_the_tolerance():
    """Under replicas the plan without the MIR keeps S twice (by a and by b): no less memory,
    so the optimum stays; a plan without MIRs has no MIR memory to give up: nothing re-solved."""
    r = optimize(chain(0.3), partitioning="replicas")
    assert (r.probe_cost, r.memory) == (400, 400) and not r.tie_break.changed(r.memory)
    b = optimize(chain(0.3), mir_budget=0)
    assert (b.probe_cost, b.memory, b.tie_break.solves, b.tie_break.changed(b.memory)) == (450, 300, 0, False)


def test_an_error_round_trips_moves_with_edits_and_a_run_measures_it_away():
    from mqjoin.model.sizes import MeasuredSize

    w = parse_workload(BASE + 'sizes: {"R ⋈ S": {size: 40, error: 0.05, last: {R: 0.25, S: 0.75}}, "S ⋈ T": 3}')
    assert w.to_spec()["sizes"] == {"R ⋈ S": {"size": 40.0, "error": 0.05, "last": {"R": 0.25, "S": 0.75}},
                                    "S ⋈ T": 3.0}
    for e in (w.with_selectivity("R.a = S.a", 0.05), w.with_relation("R", rate=20), parse_workload(w.to_yaml())):
        assert [m.error for m in e.sizes] == [0.05, 0.0]
    cs = w.query("q1").classes
    assert (w.size_error({"R", "S"}, cs), w.size_error({"S", "T"}, cs), w.size_error({"R", "S", "T"}, cs)) == (0.05, 0,
                                                                                                               0)
    assert w.size_error({"R", "S"}, w.query("q2").classes, w.selections("q2")) == 0.05  # f · size: the same error
    # a run counts the whole stream: its size replaces the sampled one, and its error
    run = w.with_sizes([MeasuredSize(None, ("R", "S"), 30.0)])
    assert [(m.value, m.error) for m in run.sizes][0] == (30.0, 0.0)


@pytest.mark.parametrize("bad", ["-0.1", "nan", ".inf", "x", "true", "[0.1]"])
def test_a_bad_error_is_a_typed_error_naming_the_size(bad):
    from mqjoin.model.errors import ValueRangeError, WorkloadError

    with pytest.raises(WorkloadError) as e:
        parse_workload(BASE + f'sizes: {{"R ⋈ S": {{size: 40, error: {bad}}}}}')
    assert "sizes: 'R ⋈ S': error" in str(e.value) and isinstance(e.value, ValueRangeError)
    with pytest.raises(WorkloadError, match="unknown key 'err'.*error: <relative standard error>"):
        parse_workload(BASE + 'sizes: {"R ⋈ S": {size: 40, err: 0.1}}')


@pytest.mark.parametrize("seed", range(4))
def test_without_sampled_sizes_nothing_is_re_solved(seed, monkeypatch):
    """Held-out random workloads, with no sizes or with exact ones: ε = 0, no tie-break, and
    the ILP solved once per mode (the plans the optimiser always returned)."""
    from mqjoin.datasets.random_workloads import random_workload
    from mqjoin.planning import clash as optimizer

    from mqjoin.datasets.sizes import measure_sizes
    from mqjoin.datasets.uniform import uniform_streams

    w = random_workload(3, 6, 3, rate=300, seed=seed)
    exact = w.with_sizes(measure_sizes(w, uniform_streams(w, duration=1.0, seed=seed)))
    assert exact.sizes and all(m.error == 0 for m in exact.sizes)
    calls = []
    solve = optimizer._solve_workload
    monkeypatch.setattr(optimizer, "_solve_workload", lambda *a, **k: calls.append(a) or solve(*a, **k))
    for ws in (w, exact):
        for mode in ("mqo", "shared"):
            for p in ("single", "replicas"):
                calls.clear()
                r = optimize(ws, mode=mode, partitioning=p)
                assert r.tie_break is None and len(calls) == (1 if mode == "mqo" else len(w.queries))
                assert r.plan == optimize(ws, mode=mode, partitioning=p, memory_ties=False).plan


def test_optimize_says_when_the_tie_break_changed_the_plan(tmp_path, capsys):
    import json

    path = tmp_path / "chain.yaml"
    path.write_text(chain(0.3).to_yaml(), encoding="utf-8")
    code, out, _ = run_cli(capsys, "optimize", path, "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["probe_cost"], d["memory"]) == (450, 300)
    assert d["tie_break"]["changed"] and d["tie_break"]["tolerance"] == pytest.approx(0.15)
    assert (d["tie_break"]["optimum_probe_cost"], d["tie_break"]["optimum_memory"]) == (400, 400)
    code, out, _ = run_cli(capsys, "optimize", path)
    assert code == 0
    assert "least memory chosen, probe cost +12.50%, memory -25.0%" in out
    path.write_text(chain().to_yaml(), encoding="utf-8")
    code, out, _ = run_cli(capsys, "optimize", path, "--json")
    assert code == 0
    assert "tie_break" not in json.loads(out)
