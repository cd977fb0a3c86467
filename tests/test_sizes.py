"""Measured join sizes (docs/model.md §2): a given size replaces the independence estimate of
its set in every cost, memory figure and plan; filters and edits combine with it by the rules
of :meth:`mqjoin.model.workload.Workload.measured_size` and ``Workload.respecified``."""

from __future__ import annotations

import math

import pytest

from mqjoin.model.workload import independent_size, parse_workload
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
                                    'q2: {join: "R(a), S(a)", where: "R.x < 3"}, q4: {join: "R(a), S(a)", where: "R.x > 7"}')
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


def test_statistics_sampled_anew_move_sizes_like_an_edit():
    """The adaptive controller's epochs re-estimate rates and selectivities
    (mqjoin.datasets.stats.with_pair_values): a measured size keeps its ratio to the estimate."""
    from mqjoin.datasets.stats import with_pair_values
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
                for s in c.step_cost if "".join(sorted(s.prefix_relations)) == "RS" and s.classes == w.query("q1").classes}

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
