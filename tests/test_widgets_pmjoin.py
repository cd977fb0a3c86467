"""PMJoin in the explorer: nodes on the query graph, the communication cost
per scheme and the per-group plans, driven as a browser would (the swapped comm of
tests/test_widgets.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from test_widgets import frontend_sets, recording_comm, sent_values  # noqa: F401  (the fixture)

from mqjoin.planners.pmjoin import EXAMPLE_1, EXAMPLE_1_VALUE_RATES, EXAMPLE_2
from mqjoin.widgets import Explorer, PMJoinView, QueryGraphView, query_graph_figure
from mqjoin.widgets.figures import trace_by_name
from mqjoin.model.workload import parse_workload


def test_query_graph_draws_the_nodes_around_their_relations():
    w = parse_workload(EXAMPLE_2)
    fig = query_graph_figure(w)
    labels = trace_by_name(fig, "node labels")
    assert list(labels.text) == ["n0", "n1", "n2"]
    assert list(labels.hovertext) == ["node n0: S0, S1", "node n1: S2, S3", "node n2: S4"]
    boxes = trace_by_name(fig, "processing nodes")
    rel = trace_by_name(fig, "relations")
    pos = dict(zip(rel.text, zip(rel.x, rel.y)))
    x0, x1, y0, y1 = boxes.x[0], boxes.x[1], boxes.y[0], boxes.y[2]  # n0's box
    assert all(x0 < pos[r][0] < x1 and y0 < pos[r][1] < y1 for r in ("S0", "S1"))
    assert "node n1" in rel.hovertext[2]


def test_plain_workloads_draw_no_nodes_and_placing_one_adds_them():
    view = QueryGraphView("paper_v2.yaml", debounce=0)
    assert not {"processing nodes", "node labels"} & {t.name for t in view.figure.data}
    assert view.model.edit(lambda w: w.with_relation("R", node="n1"))
    assert list(trace_by_name(view.figure, "node labels").text) == ["n1"]


def test_pmjoin_view_shows_example_1_costs_and_groups_from_the_frontend():
    view = PMJoinView(parse_workload(EXAMPLE_1), rates=EXAMPLE_1_VALUE_RATES, debounce=0)
    assert "100.1" in view.costs.value and "54.03" in view.costs.value
    assert "all values" not in view.plans.value  # per-value rates given: one group of all three values
    frontend_sets(view.groups, value=3)
    qp = view.report.queries[0]
    assert qp.partitioned == pytest.approx(0.0696, abs=1e-4)
    html = sent_values(view.plans)[-1]
    assert "((S2 ⋈ S1)@n1 ⋈ S3)@n3" in html and "0.036" in html  # dest = a: S2 to n1, then to n3
    frontend_sets(view.method, index=view.method.options.index("hash"))  # a dropdown sends its index
    assert [g.values for g in view.report.queries[0].pmjoins[0].groups] == [("a",), ("b", "c")]


def test_pmjoin_view_without_per_value_rates_measures_them_from_generated_streams():
    view = PMJoinView(parse_workload(EXAMPLE_2), debounce=0)
    assert "(S2 ⋈ S3)@n1" in view.costs.value and view.error.value == ""  # the local join at n1
    assert "all values" in view.plans.value and ">all<" in view.plans.value and ">0<" not in view.plans.value
    frontend_sets(view.groups, value=2)
    assert view.error.value == "" and "uniform streams of the workload" in view.note.value
    groups = view.report.queries[0].pmjoins[0].groups
    assert len(groups) == 2 and all(g.values for g in groups)  # two groups of measured values
    assert "all values" not in view.plans.value
    frontend_sets(view.groups, value=1)
    assert view.report is not None and "selectivities" in view.note.value


def test_pmjoin_tab_on_tpch_partitions_generated_streams_and_draws_the_placement():
    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    view = ex.pmjoin
    frontend_sets(view.groups, value=4)
    # tuples as large as their inputs together: a foreign-key join (as many results as its larger
    # input, each twice as large) never ships less than its inputs, so every query is one MJoin at
    # one node, partitionable on no single class
    assert view.error.value == "" and all(not qp.pmjoins for qp in view.report.queries), view.report.summary()
    frontend_sets(view.sizes, index=list(view.sizes.options).index("unit"))  # every tuple of one size
    assert view.error.value == "" and view.report is not None
    with_groups = [qp for qp in view.report.queries if any(len(pm.groups) > 1 for pm in qp.pmjoins)]
    assert with_groups, view.report.summary()
    assert any(qp.partitioned < qp.distributed for qp in view.report.queries)  # partitioning pays somewhere
    frontend_sets(view.query, index=list(view.query.options).index(with_groups[0].query))
    groups = trace_by_name(view.figure, "value groups")
    assert len(groups.x) == sum(len(pm.groups) for pm in with_groups[0].pmjoins) > 1
    assert all(t.startswith("G") for t in groups.text)
    # the picture numbers each PMJoin's groups as the table under that PMJoin does
    qp = with_groups[0]
    want = [f"G{i + 1}" for pm in qp.pmjoins for i in range(len(pm.groups))]
    assert [t.split(":")[0] for t in groups.text] == want
    for pm in qp.pmjoins:
        assert all(f"<td>G{i + 1}</td>" in view.plans.value for i in range(len(pm.groups)))
    streams = trace_by_name(view.figure, "streams")
    assert sorted(streams.text) == sorted(ex.model.workload.query(with_groups[0].query).relations)
    assert view.figure.layout.font.size >= 14


def test_pmjoin_view_follows_workload_edits():
    view = PMJoinView(parse_workload(EXAMPLE_2), debounce=0)
    frontend_sets(view.sizes, index=view.sizes.options.index("unit"))
    assert view.report.queries[0].distributed == pytest.approx(34)
    assert view.model.set_rate("S4", 1000)
    assert view.report.queries[0].distributed != pytest.approx(34)


def test_explorer_has_a_pmjoin_tab_on_its_model():
    ex = Explorer(parse_workload(EXAMPLE_2), debounce=0, deploy=None)
    assert ex.tabs.get_title(len(ex.tabs.children) - 1) == "PMJoin"
    assert ex.pmjoin.model is ex.model
    ex.show("PMJoin")
    assert "communication cost" in ex.pmjoin.costs.value


def test_a_hidden_pmjoin_tab_recomputes_only_when_it_shows():
    ex = Explorer(parse_workload(EXAMPLE_2), debounce=0, deploy=None)
    assert ex.pmjoin.report is None and ex.pmjoin.stale  # built hidden: nothing computed yet
    ex.show("PMJoin")
    assert not ex.pmjoin.stale and "communication cost" in ex.pmjoin.costs.value
    shown = ex.pmjoin.report
    assert ex.model.set_rate("S4", 1000)  # edited on screen: recomputed at once
    assert ex.pmjoin.report is not shown and not ex.pmjoin.stale
    on_screen = ex.pmjoin.report
    ex.show("Query graph")
    assert ex.model.set_rate("S4", 10)  # edited while hidden: only marked
    assert ex.pmjoin.report is on_screen and ex.pmjoin.stale
    ex.show("PMJoin")
    assert not ex.pmjoin.stale
    assert ex.pmjoin.report.queries[0].distributed != pytest.approx(on_screen.queries[0].distributed)


def test_the_relation_editor_places_a_stream_at_a_node():
    view = QueryGraphView(parse_workload(EXAMPLE_2), debounce=0)
    frontend_sets(view.relation, index=view.relation.options.index("S4"))
    assert view.node.value == "n2"
    frontend_sets(view.node, value="n0")
    assert view.model.workload.relation("S4").node == "n0"
    assert list(trace_by_name(view.figure, "node labels").hovertext)[0] == "node n0: S0, S1, S4"
    frontend_sets(view.node, value="not a name")
    assert "must be a name" in view.relation_error.value and view.node.value == "n0"  # refused, shown again
    frontend_sets(view.node, value="")
    assert view.model.workload.relation("S4").node is None


def test_groups_outside_1_to_1024_are_kept_in_range_and_said():
    view = PMJoinView("tpch_fig7a.yaml", debounce=0)
    note = view.children[0].children[0].children[1]
    for typed, kept in ((0, 1), (5000, 1024)):
        frontend_sets(view.groups, value=typed)
        assert view.groups.value == kept and f"kept at {kept:,}" in note.value and "out of range" in note.value
    frontend_sets(view.groups, value=4)
    assert view.groups.value == 4 and note.value == ""
