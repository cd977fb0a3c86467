"""Plan families in the explorer and the JAQPOT panel, without a browser (the comm swapped as
in tests/test_widgets.py)."""

from __future__ import annotations

import html

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from test_widgets import figure_messages, frontend_picks, frontend_sets, recording_comm  # noqa: F401  (the fixture)

from mqjoin.widgets import Explorer
from mqjoin.widgets.figures import fmt, trace_by_name

# --------------------------------------------------------------------------------------------
# plan families and the JAQPOT panel
# --------------------------------------------------------------------------------------------


def _store_labels(fig) -> list[str]:
    return sorted(t for d in fig.data if d.text is not None and d.mode and "text" in d.mode for t in d.text)


def test_planner_switch_changes_the_plan_every_view_shows():
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    assert list(ex.options.planner.options) == ["clash", "mjoin", "tree", "ajoin", "pmjoin", "jaqpot"]
    assert ex.options.tree_shape.disabled
    clash = ex.model.result
    trees_before = _store_labels(ex.trees.figure)
    frontend_picks(ex.options.planner, "mjoin")
    m = ex.model.result
    assert m.planner == "mjoin" and all(s.mir.is_base for s in m.plan.stores)
    assert any(not s.mir.is_base for s in clash.plan.stores)  # CLASH's plan materialises an MIR here
    assert _store_labels(ex.trees.figure) != trees_before
    assert "mjoin mqo/single" in ex.status.summary.value
    frontend_picks(ex.options.planner, "tree")
    assert not ex.options.tree_shape.disabled and ex.model.tree_shape == "best"
    frontend_picks(ex.options.tree_shape, "deep")
    t = ex.model.result
    assert (t.planner, t.tree_shape) == ("tree", "deep") and "tree (deep)" in ex.status.summary.value
    assert set(t.trees) == {"q1", "q2"} and t.plan.probe_orders() != m.plan.probe_orders()
    for family in ("ajoin", "pmjoin"):  # the neighbours' planners: ordinary plans in every view
        frontend_picks(ex.options.planner, family)
        assert ex.model.result.planner == family and ex.model.error == "" and f"{family} " in ex.status.summary.value
    frontend_picks(ex.options.planner, "clash")  # back: the shape no longer applies
    assert ex.model.tree_shape is None and ex.options.tree_shape.disabled and ex.model.error == ""
    assert ex.model.result.probe_cost == clash.probe_cost


def _operator_nodes(fig, trace: str) -> list[tuple[str, int, int]]:
    """(store label, depth, number of children) of the operator-tree figure's nodes."""
    t = trace_by_name(fig, trace)
    return [(text, d, k) for text, (_, d, k) in zip(t.text, t.customdata)]


def test_probe_trees_tab_draws_each_planners_operator_tree():
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    view = ex.trees
    assert view.operators_box.layout.display == "none" and len(view.operators.data) == 0  # CLASH: no operator tree
    frontend_picks(view.query, ("q1", "q1"))  # R(a), S(a,b), T(b)
    frontend_picks(ex.options.planner, "tree")
    frontend_picks(ex.options.tree_shape, "deep")
    assert ex.model.result.trees["q1"] == "((R ⋈ S) ⋈ T)"
    assert view.operators_box.layout.display == "flex"
    # a binary join tree as a tree of stores: the MIR store RS[b] over R's and S's stores, T's beside it
    assert _operator_nodes(view.operators, "joins") == [("RS[b]", 1, 2), ("⇒ q1", 0, 2)]
    assert _operator_nodes(view.operators, "base stores") == [("R[a]", 2, 0), ("S[a]", 2, 0), ("T[b]", 1, 0)]
    assert {s.id for s in ex.model.result.plan.stores} >= {"RS[b]", "R[a]", "S[a]", "T[b]"}  # the plan's own labels
    assert "RS[b]" in figure_messages(view.operators)  # the drawing reached the frontend
    # an MJoin: one n-ary node over its three inputs' stores, no MIR store
    frontend_picks(ex.options.planner, "mjoin")
    assert _operator_nodes(view.operators, "joins") == [("⇒ q1", 0, 3)]
    assert [d for _, d, _ in _operator_nodes(view.operators, "base stores")] == [1, 1, 1]
    assert list(trace_by_name(view.operators, "joins").marker.symbol) == ["hexagon"]
    frontend_picks(view.query, ("all queries", ""))  # one tree per query
    assert [lab for lab, _, _ in _operator_nodes(view.operators, "joins")] == ["⇒ q1", "⇒ q2"]
    frontend_picks(ex.options.planner, "clash")
    assert view.operators_box.layout.display == "none" and len(view.operators.data) == 0


def test_a_planner_registered_later_appears_in_the_menu(monkeypatch):
    import mqjoin.planners.registry

    monkeypatch.setattr(mqjoin.planners.registry, "PLANNERS", mqjoin.planners.registry.PLANNERS + ("later",))
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    assert "later" in ex.options.planner.options


def test_jaqpot_panel_allocates_the_running_example_at_mu_30():
    from mqjoin.planners.jaqpot import running_example
    from mqjoin.widgets.jaqpot_view import JaqpotView

    view = JaqpotView(running_example(), mu=10)
    assert "Path^A" in view.paths.value and "0.267" in view.paths.value and "0.312" in view.paths.value
    frontend_sets(view.mu, value=30.0)
    got = view.allocations
    assert got["JAQPOT policy"].throughput == 6 and got["discrete DP knapsack"].throughput == 8
    g = got["GrePP"]
    assert g.throughput == pytest.approx(9.375)
    assert round(g.allowances["b ⋉ S_A"], 2) == 20.62 and round(g.allowances["ab ⋉ S_C"], 2) == 9.38
    assert "allocation at μ = 30" in view.allocation.value and "20.62" in view.allocation.value
    marker = trace_by_name(view.figure, "at μ")
    assert list(marker.y) == [pytest.approx(9.375), 8, 6] and list(marker.x) == [30.0] * 3
    assert "9.375" in figure_messages(view.figure)  # the chart's update reached the frontend


def test_jaqpot_tab_follows_the_workload_and_the_tree_shape():
    ex = Explorer("paper_fig3.yaml", debounce=0, deploy=None)
    ex.show("JAQPOT")
    view = ex.jaqpot
    assert list(view.query.options) == ["q1", "q2"] and set(view.plan.streams) == {"R", "S", "T"}
    before = dict(view.allocations["GrePP"].allowances)
    frontend_sets(view.mu, value=view.mu.value / 2)
    assert view.allocations["GrePP"].allowances != before
    view.query.value = "q2"
    assert set(view.plan.streams) == {"S", "T", "U"}
    assert ex.model.set_rate("U", 5000)  # an edit: the model of the same query is rebuilt
    assert view.plan.rates["U"] == 5000
    from mqjoin.planners.trees import binary_tree
    from mqjoin.runtime.shedding import tree_model

    frontend_picks(ex.options.planner, "tree")
    frontend_picks(ex.options.tree_shape, "deep")
    w = ex.model.workload
    assert view.plan.tree == tree_model(w, "q2", binary_tree(w, "q2", "deep")).tree


def test_jaqpot_tab_on_tpch_shows_the_policies_apart():
    from mqjoin.planners.jaqpot import productivity_table

    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    view = ex.jaqpot
    for q in ex.model.workload.query_names:
        frontend_picks(view.query, q)
        sat = view.plan.saturation()[0]
        rows = productivity_table(view.plan)
        # Table 2 on measured statistics: bundles of a few hundred resources, not billions
        assert all(r.resources <= sat * view.period and r.output >= 1 for r in rows), (q, rows)
        xs, ys = view.curve
        assert xs[-1] == pytest.approx(sat) and xs[0] < sat / 50  # the range reaches where paths saturate
        for name in ("discrete DP knapsack", "JAQPOT policy"):
            assert max(ys[name]) > 0, (q, name)
        assert any(g > d * 1.01 for g, d in zip(ys["GrePP"], ys["discrete DP knapsack"])), q
        assert all(j <= d + 1e-9 <= g + 1e-9 for g, d, j in zip(ys["GrePP"], ys["discrete DP knapsack"],
                                                                   ys["JAQPOT policy"]))
        got = {n: a.throughput for n, a in view.allocations.items()}  # the slider starts where they differ
        assert got["JAQPOT policy"] > 0 and got["GrePP"] > got["JAQPOT policy"], (q, got)
    assert got["discrete DP knapsack"] > got["JAQPOT policy"]  # on q5 the greedy policy misses the optimum
    box = view.children[0].children[1].children[1]
    frontend_sets(box, value=500.0)  # the number box spans the slider's range, not 0 … 1
    assert view.mu.value == pytest.approx(500.0) and view.allocations["GrePP"].mu == pytest.approx(500.0)
    frontend_sets(view.mu, value=123.456789012)  # a drag: the box reads as the labels do, not 12 digits
    assert box.value == 123.5 and not view.mu.readout


def test_jaqpot_says_when_mu_moves_or_is_kept_in_range_and_titles_its_axes():
    """Another query moves μ and the note says from where to where; μ = 0 typed is kept at
    the range's start and said; the chart's axes have titles (plotly.js 3 reads only
    ``{"text": …}``); the μ box never shows 16 digits."""
    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    view = ex.jaqpot
    names = list(view.query.options)
    frontend_picks(view.query, names[1])
    before = view.mu.value
    frontend_picks(view.query, names[2])
    note = html.unescape(view.mu_note.value)
    assert "another query" in note and ("μ moved from " in note) == (fmt(before) != fmt(view.mu.value))
    layout = view.figure.layout
    assert layout.xaxis.title.text.startswith("μ (tuples processed per second")
    assert "throughput" in layout.yaxis.title.text
    box = view.children[0].children[1].children[1]
    frontend_sets(box, value=0.0)
    low = 10 ** view.mu.min
    assert view.mu.value == pytest.approx(low) and "0 is out of range" in html.unescape(view.mu_note.value)
    assert f"kept at {fmt(low)}" in html.unescape(view.mu_note.value)
    assert len(repr(box.value)) <= 8, box.value
