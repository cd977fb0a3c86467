"""The Explorer composed of its views, without a browser (the comm swapped as in
tests/test_widgets.py)."""

from __future__ import annotations

import html
import json

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from test_widgets import figure_messages, frontend_enters, frontend_sets, recording_comm, tpch  # noqa: F401  (the fixture)

from mqjoin.model.errors import MqjoinError
from mqjoin.planning.optimizer import optimize
from mqjoin.widgets import Explorer, ExplorerModel, ProbeTreeView, QueryGraphView, as_workload
from mqjoin.widgets.figures import trace_by_name

# --------------------------------------------------------------------------------------------
# Explorer
# --------------------------------------------------------------------------------------------


def test_explorer_composes_views_on_one_model():
    ex = Explorer("paper_v2.yaml", debounce=0)
    assert all(v.model is ex.model for v in (ex.graph, ex.trees, ex.ilp, ex.compare, ex.diagram))
    frontend_sets(ex.options.partitioning, index=1)
    assert ex.model.partitioning == "replicas" and ex.model.result.partitioning == "replicas"
    assert "replicas" in ex.trees.figure.layout.title.text
    frontend_sets(ex.options.mirs, value=False)
    assert ex.model.result.mirs is False
    assert ex.model.result.probe_cost == optimize(ex.model.workload, partitioning="replicas", mirs=False).probe_cost
    ex.model.set_options(mode="shared")
    assert ex.options.mode.value == "shared"


def test_explorer_deploy_slot_placeholder_and_hook():
    from mqjoin.widgets.deploy_panel import DeployPanel

    assert isinstance(Explorer("paper_v2.yaml", debounce=0).deploy_panel, DeployPanel)  # the default
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    assert ex.tabs.get_title(5) == "Deploy" and "No Deploy panel" in ex.deploy_slot.children[0].value
    seen = []

    def factory(plan_provider):
        import ipywidgets as W

        seen.append(plan_provider)
        return W.HTML("deploy here")

    panel = ex.attach_deploy(factory)
    assert ex.deploy_slot.children == (panel,) and ex.deploy_panel is panel
    ex.model.set_selectivity("S.b = T.b", 0.5)
    assert seen[0]().probe_cost == 800.0  # the provider always returns the current plan


def test_explorer_accepts_an_existing_model_and_paths(tmp_path):
    p = tmp_path / "w.yaml"
    p.write_text(as_workload("paper_v2.yaml").to_yaml())
    ex = Explorer(str(p), debounce=0)
    assert ex.model.result.probe_cost == 700.0
    m = ExplorerModel(p, debounce=0)
    assert Explorer(m).model is m
    with pytest.raises(MqjoinError):
        Explorer(str(tmp_path / "missing.yaml"))



def test_explorer_with_a_data_folder_plans_on_the_statistics_of_that_data(tmp_path):
    """Opened on a folder of CSV files whose joins the workload misdescribes, the explorer plans
    as ``mqjoin run`` does on that data — horizon its span, statistics measured again — and
    says so; on data the workload describes it keeps the workload's statistics and says that."""
    from mqjoin.datasets.fitting import fit_to_data
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.model.errors import DataError
    from mqjoin.model.tables import read_inputs, time_range, write_inputs

    w = as_workload("paper_v2.yaml")
    other = w.with_selectivity("S.b = T.b", 0.3).with_selectivity("R.a = S.a", 0.05)
    folder = tmp_path / "clicks"
    write_inputs(uniform_streams(other, duration=3.0, seed=1), folder, "csv")
    ex = Explorer(w, data=str(folder), debounce=0)
    tables = read_inputs(w, folder)
    want = fit_to_data(w, tables).workload
    assert ex.model.workload.defaults.horizon == pytest.approx(time_range(tables)[1])
    assert ex.model.workload.query("q1").classes != w.query("q1").classes  # the data's selectivities
    assert ex.model.result.plan.probe_orders() == optimize(want).plan.probe_orders() != optimize(w).plan.probe_orders()
    line = html.unescape(ex.statistics_line.value)
    assert ex.statistics_line.layout.display is None and "measured again" in line and str(folder) in line
    assert "S.b = T.b: 0.015 vs" in line and "span of" in line
    assert ex.deploy_panel.input.value == "given" and ex.deploy_panel.data is ex.model.data  # Deploy replays it

    agreeing = {r: t for r, t in uniform_streams(w, duration=3.0, seed=1).items()}
    m = ExplorerModel(w, data=agreeing, debounce=0)
    assert m.workload.query("q1").classes == w.query("q1").classes
    assert m.workload.defaults.horizon == pytest.approx(time_range(agreeing)[1])
    assert "workload's statistics, which a sampled check of the data given agrees with" in m.statistics
    assert Explorer("paper_v2.yaml", debounce=0, deploy=None).statistics_line.layout.display == "none"
    with pytest.raises(DataError, match="does not exist"):
        ExplorerModel(w, data=str(tmp_path / "missing"))

def test_widget_state_messages_serialise():
    """Every message the explorer sends must be JSON (what a kernel puts on the wire)."""
    ex = Explorer("paper_v2.yaml", debounce=0)
    ex.model.set_selectivity("S.b = T.b", 0.5)
    ex.show("Compare")
    # RecordingComm.send json-dumps every message, so reaching here is the first assertion;
    # the figure widgets sent their traces: first the MIR plan, then the new one
    opened = json.dumps(ex.trees.figure.comm.open_data, default=str, ensure_ascii=False)
    msgs = figure_messages(ex.trees.figure)
    assert "ST[a] ×1" in opened and '"figure"' in msgs and "RS[b] ×1" in msgs
    assert "single probe cost" in figure_messages(ex.compare.figure)


def test_rich_reprs():
    w = as_workload("paper_v2.yaml")
    res = optimize(w)
    assert "<table>" in w._repr_html_() and "q1: R(a), S(a,b), T(b)" in w._repr_html_()
    assert "R » ST[a]" in res._repr_html_().replace("&gt;", ">")
    assert "─e2→ ST[a]" in res.plan._repr_html_()


def test_a_failing_view_does_not_stop_the_others(caplog):
    m = ExplorerModel("paper_v2.yaml", debounce=0)
    trees = ProbeTreeView(m)

    def broken(change):
        raise RuntimeError("boom")

    m.observe(broken, "result")
    m.observe(lambda ch: None, "result")
    m.unobserve(trees._on_result)
    m.observe(trees._on_result, "result")  # after the broken one
    m.set_selectivity("S.b = T.b", 0.5)
    assert "RS[b] ×1" in trace_by_name(trees.figure, "stores").text
    assert "a view failed to update (RuntimeError: boom)" in m.error
    assert "boom" in caplog.text


def test_explorer_freezes_the_long_lived_heap_only_when_asked():
    """``gc.freeze()`` changes the user's whole process: only ``gc_freeze=True`` does it
    (once per process; widgets/explorer.py explains the pauses it avoids)."""
    import gc

    import mqjoin.widgets.explorer as explorer_module

    if not explorer_module._FROZEN:
        before = gc.get_freeze_count()
        Explorer("paper_v2.yaml", debounce=0, deploy=None)
        assert not explorer_module._FROZEN and gc.get_freeze_count() == before
    Explorer("paper_v2.yaml", debounce=0, deploy=None, gc_freeze=True)
    assert explorer_module._FROZEN and gc.get_freeze_count() > 0
    frozen = gc.get_freeze_count()
    Explorer("paper_v2.yaml", debounce=0, deploy=None, gc_freeze=True)
    assert gc.get_freeze_count() <= frozen  # once per process (frozen objects may die meanwhile)


def test_editor_enter_adds_the_query_under_a_fresh_name_and_sliders_take_typed_values():
    view = QueryGraphView("paper_v2.yaml", debounce=0)
    assert view.query_name.placeholder == "q3" and view.query_name.value == ""
    frontend_sets(view.query_text, value="R(a), S(a)")  # typed; the box lost focus: nothing added yet
    assert view.model.workload.query_names == ("q1", "q2")
    frontend_enters(view.query_text)
    assert view.model.workload.query_names == ("q1", "q2", "q3") and view.query_error.value == ""
    assert view.queries.value == "q3" and view.query_name.placeholder == "q4"
    # the selectivity slider has a number box beside it; its track spans ±2 decades around the value
    row = next(c for c in view.children[0].children[1].children[1].children
               if view.selectivity in getattr(c, "children", ()))
    box = row.children[1]
    frontend_sets(box, value=0.79)
    assert view.selectivity.value == 0.79 and view.selectivity.max == 0.0 and view.selectivity.min >= -3
    assert any(c.selectivity == 0.79 for q in view.model.workload.queries for c in q.classes)


def test_probe_trees_show_broadcasts_insertions_and_a_shared_channel_and_the_text_follows_the_filter():
    from mqjoin.widgets.figures import BROADCAST_COLOR, PALETTE, SHARED_COLOR

    view = ProbeTreeView(tpch(), debounce=0)
    plan = view.model.result.plan
    fig = view.figure
    broadcast = [n for n in plan.nodes if n.broadcast and len(n.owners) == 1]
    assert broadcast, "the TPC-H plan has broadcast probes"
    bc = trace_by_name(fig, "broadcast probes")
    assert bc.line.dash == "dot" and bc.line.color == BROADCAST_COLOR and len(bc.x) == 4 * len(broadcast)
    labels = list(trace_by_name(fig, "edge labels").text)
    for n in broadcast:
        assert f"{n.edge} χ={plan.store[n.store].parallelism}" in labels
    # every ingest edge label (e1, e2, …) is drawn under its start relation
    ingest = [lab for lab, e in plan.edge.items() if e.kind == "ingest"]
    drawn = " ".join(trace_by_name(fig, "insertions").text)
    assert all(f"{lab} ⇓ " in drawn for lab in ingest)
    # "shared" is not a query colour: another colour outside the palette, and another shape
    assert SHARED_COLOR not in PALETTE and BROADCAST_COLOR not in PALETTE
    stores = trace_by_name(fig, "stores")
    for n, colour, symbol in zip(plan.nodes, stores.marker.color, stores.marker.symbol):
        assert (colour == SHARED_COLOR) == (symbol == "diamond") == (len(n.owners) > 1)
    # the plan as text follows the per-query filter
    full = html.unescape(view.text.value)
    view.query.value = "q4"
    only = html.unescape(view.text.value)
    assert "q4 (its steps" in only and len(only) < len(full)
    assert "─" in only and all(q not in only for q in ("⇒ q1 ", "⇒ q2 "))


def test_closing_the_explorer_closes_its_own_model_and_leaves_no_thread():
    import threading

    before = set(threading.enumerate())
    ex = Explorer("paper_fig3.yaml", debounce=30, deploy=None)
    ex.model.set_rate("U", 200.0)  # a debounced recomputation waits on a timer thread
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()]
    ex.close()
    assert ex.model.closed and not ex.model.pending
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
    shared = ExplorerModel("paper_fig3.yaml", debounce=0)
    Explorer(shared, deploy=None).close()
    assert not shared.closed  # a model the explorer was given is the caller's


def _htmls(widget, needle: str) -> list:
    """The HTML widgets under ``widget`` whose text contains ``needle``."""
    import ipywidgets as W

    out = [widget] if isinstance(widget, W.HTML) and needle in widget.value else []
    for child in getattr(widget, "children", ()):
        out += _htmls(child, needle)
    return out


def test_the_query_box_takes_the_list_notation_and_shows_each_error_once():
    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    g = ex.graph
    listed = dict((v, label) for label, v in g.queries.options)["q3"]  # 'q3: supplier(suppkey), …'
    frontend_sets(g.query_name, value="")
    frontend_sets(g.query_text, value=listed.replace("q3:", "q6:", 1))
    frontend_enters(g.query_text)
    assert ex.model.error == "" and "q6" in ex.model.workload.query_names
    assert ex.model.workload.query("q6").classes == ex.model.workload.query("q3").classes
    assert g.query_name.value == "q6"
    # a prefix naming another query than the name box: a typed error naming both, shown once
    frontend_sets(g.query_name, value="q7")
    frontend_sets(g.query_text, value="q8: orders(orderkey), lineitem(orderkey)")
    frontend_enters(g.query_text)
    assert "named q8" in g.query_error.value and "q7" in g.query_error.value
    assert "q8" not in ex.model.workload.query_names
    assert len(_htmls(ex, "named q8")) == 1
    frontend_sets(g.query_name, value="q9")
    frontend_sets(g.query_text, value="orders(orderkey), Nope(orderkey)")
    frontend_enters(g.query_text)
    assert len(_htmls(ex, "Nope")) == 1 and "Nope" in g.query_error.value  # beside the box, not in the status line


def test_the_status_line_names_the_planner_that_ran():
    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    assert "ILP optimal" in ex.status.summary.value and "variables" in ex.status.summary.value
    for planner in ("mjoin", "tree", "ajoin", "pmjoin"):
        ex.model.set_options(planner=planner, tree_shape="best" if planner == "tree" else None)
        s = html.unescape(ex.status.summary.value)
        assert "ILP" not in s.replace("no ILP", "") and f"planned by {planner}" in s, s


def test_the_status_line_says_when_a_tie_on_sampled_sizes_changed_the_plan():
    from test_sizes import chain

    ex = Explorer(chain(0.3), debounce=0, deploy=None)
    s = html.unescape(ex.status.summary.value)
    assert "tie on sampled sizes: cost +12.5%, memory -25.0%" in s and "least memory chosen" in s, s
    assert "tie on" not in html.unescape(Explorer(chain(), debounce=0, deploy=None).status.summary.value)


def test_a_deploy_on_a_folder_replans_every_tab_on_it_and_synthetic_goes_back(tmp_path):
    """The Deploy tab's folder input hands the data to the model: every tab shows the plan chosen
    on the folder's statistics, one line says which data the plan is for, the deployed plan is
    that plan; choosing synthetic streams goes back to the workload's statistics."""
    from mqjoin.datasets.fitting import fit_inputs
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.model.tables import write_inputs
    from mqjoin.widgets.deploy_panel import DeployPanel
    from mqjoin.widgets.figures import fmt
    from test_deploy_panel import FakeDeployment

    w = as_workload("paper_v2.yaml")
    folder = write_inputs(uniform_streams(w.with_selectivity("S.b = T.b", 0.3).with_selectivity("R.a = S.a", 0.05),
                                          duration=3.0, seed=1), tmp_path / "clicks", "csv")
    deployed = []

    def deploy_fn(plan, data, out, engine, rate, **kw):
        deployed.append(plan)
        return FakeDeployment(plan, engine)

    ex = Explorer(w, debounce=0, deploy=lambda provider: DeployPanel(provider, deploy_fn=deploy_fn, refresh_seconds=0))
    before = ex.model.result.plan
    assert ex.statistics_line.layout.display == "none"
    panel = ex.deploy_panel
    panel.input.value = "folder"
    panel.folder.value = str(folder)
    panel.deploy()
    assert panel.wait_started(30)
    want = fit_inputs(w, folder)[1].workload
    got = ex.model.result.plan
    assert deployed == [got] and got.workload == want and got.probe_orders() == optimize(want).plan.probe_orders()
    assert got.probe_orders() != before.probe_orders()
    line = html.unescape(ex.statistics_line.value)
    assert ex.statistics_line.layout.display is None and str(folder) in line and "measured again" in line
    assert fmt(got.probe_cost) in html.unescape(ex.status.summary.value)  # the tabs show that plan
    panel.deployments[0][1].finish()
    assert panel.wait_idle()
    panel.input.value = "synthetic"
    assert ex.model.workload == w and ex.statistics_line.layout.display == "none"
    assert ex.model.result.plan.probe_orders() == before.probe_orders()
    ex.close()
