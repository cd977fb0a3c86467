"""The explorer's widgets without a browser.

As in ipywidgets' own tests, the comm is swapped: every widget gets a recording comm, so the
tests can (a) play the frontend — send the kernel the ``update`` / ``custom`` messages a
browser sends when a slider moves or a button is clicked — and (b) assert on the state
messages the kernel sends back (HTML values, plotly trace updates).
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import uuid

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

import comm
from _subshells import kernel, request_from  # noqa: F401 — kernel is a fixture
from mqjoin.widgets import (
    ComparisonView,
    Explorer,
    ExplorerModel,
    IlpView,
    PlanDiagramView,
    ProbeTreeView,
    QueryGraphView,
    SweepParam,
    as_workload,
    cost_by_query,
    cost_by_step,
    log_grid,
    plan_diagram,
    plan_diff,
    probe_tree_figure,
    query_graph_figure,
    selectivity_groups,
    with_class_selectivity,
)
from mqjoin.widgets.figures import fmt, trace_by_name
from mqjoin.widgets.tree_figures import nodes_for_query

from mqjoin.planning.comparison import Setting
from mqjoin.model.errors import MqjoinError
from mqjoin.planning.optimizer import optimize
from mqjoin.model.workload import parse_workload

# --------------------------------------------------------------------------------------------
# the swapped comm and a fake frontend
# --------------------------------------------------------------------------------------------


class RecordingComm:
    """Stands in for a kernel comm: records what the kernel sends to the frontend."""

    kernel = "Truthy"  # ipywidgets only sends state when the comm has a kernel

    def __init__(self, **kwargs):
        self.comm_id = uuid.uuid4().hex
        self.target_name = kwargs.get("target_name")
        self.open_data = kwargs.get("data")
        self.messages: list[dict] = []
        self.buffers: list[list] = []  # each message's binary buffers, in the same order
        self.closed = False

    def open(self, *args, **kwargs):
        pass

    def on_msg(self, callback):
        self.callback = callback

    def send(self, data=None, metadata=None, buffers=None):
        json.dumps(data, default=str)  # what a kernel would do: the message must serialise
        self.messages.append(data)
        self.buffers.append(list(buffers or ()))

    def close(self, *args, **kwargs):
        self.closed = True


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch):
    created: list[RecordingComm] = []

    def create_comm(**kwargs):
        c = RecordingComm(**kwargs)
        created.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return created


def frontend_sets(widget, **state):
    """The browser changed a widget's value (e.g. a slider was released)."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}},
                        "buffers": []})


def frontend_picks(dropdown, option) -> None:
    """The browser picked an option of a dropdown (it sends the option's index)."""
    frontend_sets(dropdown, index=list(dropdown.options).index(option))


def frontend_enters(box):
    """Enter pressed in a text box (the page has sent the value typed before)."""
    box._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "submit"}}}, "buffers": []})


def frontend_clicks(button):
    button._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []})


def sent(widget) -> list[dict]:
    """State updates the kernel sent to the frontend for this widget."""
    return [m["state"] for m in widget.comm.messages if m.get("method") == "update" and "state" in m]


def sent_values(widget, key: str = "value") -> list:
    return [s[key] for s in sent(widget) if key in s]


def figure_messages(fig) -> str:
    """Everything a figure widget sent (its whole figure on every update) as one JSON string."""
    return json.dumps(sent(fig), default=str, ensure_ascii=False)


def tpch():
    return as_workload("tpch_fig7a.yaml")


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------


def test_model_recomputes_and_notifies():
    m = ExplorerModel("paper_v2.yaml", debounce=0)
    events = []
    m.observe(lambda ch: events.append((ch["name"], ch["new"].probe_cost)), "result")
    assert m.result.probe_cost == 700.0 and m.diff is None
    assert m.set_selectivity("S.b = T.b", 0.5)
    assert events == [("result", 800.0)]
    assert m.previous.probe_cost == 700.0 and m.diff.plan_changed
    assert m.set_options(mode="individual")
    assert m.result.mode == "individual" and events[-1] == ("result", 800.0)
    assert not m.set_options(mode="bogus") and "unknown mode" in m.error and m.mode == "individual"


def test_model_replans_an_edit_from_its_last_result():
    """Removing a query re-plans from the last result: the ILP's parts the edit leaves alone are
    not solved again, and the plan is the one a solve from scratch gives."""
    from mqjoin.datasets.random_workloads import random_workload

    w = random_workload(6, 30, 3, seed=4)
    m = ExplorerModel(w, debounce=0)
    assert m.result.reused_parts == 0
    assert m.remove_query(w.queries[-1].name)
    assert m.result.reused_parts >= 1
    assert m.result.plan == optimize(m.workload).plan


def test_model_bad_edit_keeps_workload_and_plan():
    m = ExplorerModel("paper_v2.yaml", debounce=0)
    w, res = m.workload, m.result
    assert not m.set_rate("R", -5)
    assert "rate must be a positive" in m.error
    assert m.workload is w and m.result is res
    assert not m.set_selectivity("R.a = S.a", 2.0) and "(0, 1]" in m.error
    assert not m.add_query("q3", "R(a), S(b)")  # 'a' listed only for R
    assert m.workload is w
    assert not m.remove_query("nope") and "does not exist" in m.error
    assert m.set_rate("R", 50) and m.error == ""


def test_model_cannot_remove_last_query():
    m = ExplorerModel(parse_workload("""
defaults: {selectivity: 0.5}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
"""), debounce=0)
    assert not m.remove_query("q") and "only query" in m.error
    assert m.workload.query_names == ("q",)


def test_model_optimiser_failure_is_an_error_not_an_exception():
    def failing(workload, options):
        raise MqjoinError("the solver reached its time limit before it found any plan")

    m = ExplorerModel("paper_v2.yaml", debounce=0)
    res = m.result
    m.optimize_fn = failing
    assert m.set_rate("R", 10)
    assert "time limit" in m.error and m.result is res


class FakeTimers:
    """Stands in for ``threading.Timer``: timers are recorded, never run by a clock; a test
    fires them (``fire``) — debounce and throttling checked without sleeping or timing."""

    def __init__(self):
        self.made: list = []
        timers = self

        class Timer:
            def __init__(self, interval, function, args=(), kwargs=None):
                self.interval, self.function, self.args = interval, function, tuple(args)
                self.kwargs = kwargs or {}
                self.daemon, self.started, self.cancelled = False, False, False
                timers.made.append(self)

            def start(self):
                self.started = True

            def cancel(self):
                self.cancelled = True

        self.Timer = Timer

    @property
    def live(self) -> list:
        return [t for t in self.made if t.started and not t.cancelled]

    def fire(self, timer) -> None:
        assert timer.started and not timer.cancelled
        timer.function(*timer.args, **timer.kwargs)


@pytest.fixture
def fake_timers(monkeypatch):
    import threading

    timers = FakeTimers()
    monkeypatch.setattr(threading, "Timer", timers.Timer)
    return timers


def test_debounce_coalesces_edits_into_one_recomputation(fake_timers):
    """Each edit restarts the debounce timer; only the last one's expiry recomputes, once."""
    calls = []

    def counting(workload, options):
        calls.append(workload)
        return optimize(workload, options)

    m = ExplorerModel("paper_v2.yaml", debounce=0.15, optimize_fn=counting)
    assert len(calls) == 1 and fake_timers.made == []
    for rate in (10, 20, 30, 40):
        assert m.set_rate("R", rate)
    assert [t.interval for t in fake_timers.made] == [0.15] * 4
    (last,) = fake_timers.live  # every earlier timer was cancelled by the next edit
    assert last is fake_timers.made[-1]
    assert m.pending and len(calls) == 1 and m.result.workload.rate("R") == 100
    fake_timers.fire(last)
    assert not m.pending and len(calls) == 2 and m.result.workload.rate("R") == 40
    assert m.wait(timeout=0)


def test_debounce_in_a_running_event_loop_runs_on_the_loop():
    """In a Jupyter kernel widget callbacks run inside an asyncio loop: the recomputation is
    scheduled on that loop (same thread as every widget callback)."""
    import threading

    threads = []

    def recording(workload, options):
        threads.append(threading.current_thread())
        return optimize(workload, options)

    async def scenario():
        m = ExplorerModel("paper_v2.yaml", debounce=0.05, optimize_fn=recording)
        m.set_rate("S", 10)
        m.set_rate("S", 20)
        assert m.pending and len(threads) == 1  # nothing runs before the loop gets control
        for _ in range(3000):  # until the debounced callback ran (however slow the machine)
            if not m.pending:
                break
            await asyncio.sleep(0.01)
        return m

    m = asyncio.run(scenario())
    assert not m.pending and len(threads) == 2 and threads[1] is threading.main_thread()
    assert m.result.workload.rate("S") == 20


def test_current_plan_flushes_a_pending_edit():
    m = ExplorerModel("paper_v2.yaml", debounce=60)
    m.set_selectivity("S.b = T.b", 0.5)
    assert m.pending
    assert m.current_plan().probe_cost == 800.0 and not m.pending


def test_selectivity_groups_keep_three_way_classes_consistent():
    w = tpch()
    groups = {g.label: g for g in selectivity_groups(w)}
    g = groups["lineitem.partkey = part.partkey = partsupp.partkey"]
    assert set(g.queries) == {"q2", "q3", "q4", "q5"}
    w2 = with_class_selectivity(w, "part.partkey = partsupp.partkey", 0.002)  # a pair of the group
    for q in w2.queries:
        for c in q.classes:
            if {a.name for a in c.members} == {"partkey"}:
                assert c.selectivity == 0.002
    assert optimize(w2).probe_cost != optimize(w).probe_cost


# --------------------------------------------------------------------------------------------
# query graph editor
# --------------------------------------------------------------------------------------------


def test_selectivity_slider_updates_plan_and_figures():
    """A slider moved in the browser → model → new plan → redrawn trees, with messages."""
    ex = Explorer("paper_v2.yaml", debounce=0)
    g, trees = ex.graph, ex.trees
    assert trace_by_name(trees.figure, "stores").text[0] == "ST[a] ×1"
    g.class_.value = "S.b = T.b"
    assert g.selectivity.value == pytest.approx(0.015)
    before_tree = len(trees.figure.comm.messages)
    before_graph = len(g.figure.comm.messages)

    frontend_sets(g.selectivity, value=0.5)

    m = ex.model
    assert m.workload.query("q1").classes[1].selectivity == 0.5
    assert m.result.probe_cost == 800.0 and m.previous.probe_cost == 700.0
    assert ("q1", "T", "T » S[b] » R[a]", "T » RS[b]") in m.diff.changed_orders
    stores = list(trace_by_name(trees.figure, "stores").text)
    assert "ST[a] ×1" not in stores and {"RS[b] ×1", "TU[b] ×1"} <= set(stores)
    # the frontend was told: the tree figure sent the new store labels ...
    assert len(trees.figure.comm.messages) > before_tree
    tree_msgs = json.dumps([m for m in trees.figure.comm.messages[before_tree:]], default=str, ensure_ascii=False)
    assert "RS[b] ×1" in tree_msgs
    # ... the graph's class hover shows the new selectivity
    classes = trace_by_name(g.figure, "classes")
    assert any("s = 0.5" in h for h in classes.hovertext)
    graph_msgs = json.dumps(g.figure.comm.messages[before_graph:], default=str, ensure_ascii=False)
    assert "selectivity s = 0.5" in graph_msgs
    # ... and the "what changed" line and the status line were updated and sent
    assert "T » RS[b]" in g.changes.value and "stores appeared" in g.changes.value
    assert any("what changed" in v for v in sent_values(g.changes))
    assert any("800" in v for v in sent_values(ex.status.summary))


def test_slider_change_on_tpch_changes_broadcasts_and_costs():
    view = QueryGraphView(tpch(), debounce=0)
    trees = ProbeTreeView(view.model)
    cost0 = view.model.result.probe_cost
    view.relation.value = "lineitem"
    frontend_sets(view.rate, value=20000.0)
    assert view.model.workload.rate("lineitem") == 20000.0
    assert view.model.result.probe_cost > cost0
    hover = " ".join(trace_by_name(trees.figure, "stores").hovertext)
    assert "χ 4" in hover and "broadcast to every partition" in hover


def test_parallelism_and_window_inputs():
    view = QueryGraphView("paper_v2.yaml", debounce=0)
    m = view.model
    view.relation.value = "T"
    frontend_sets(view.parallelism, value=4)
    assert m.workload.parallelism("T") == 4 and m.result.plan.store["T[b]"].parallelism == 4
    mem = m.result.memory
    frontend_sets(view.unbounded, value=False)
    frontend_sets(view.window, value=0.25)
    assert m.workload.window("T") == 0.25 and m.result.memory < mem
    frontend_sets(view.unbounded, value=True)
    assert m.workload.window("T") is None and view.window.disabled
    frontend_sets(view.mir_parallelism, value=8)
    assert m.workload.defaults.parallelism == 8


def test_relation_dropdown_shows_the_relation_and_bounded_inputs_clip():
    view = QueryGraphView(tpch(), debounce=0)
    view.relation.value = "region"
    assert view.rate.value == pytest.approx(0.83091) and view.unbounded.value is True
    view.relation.value = "lineitem"
    assert view.rate.value == pytest.approx(10000.0)
    w = view.model.workload
    view.window.disabled = False
    view.unbounded.value = False
    view.window.value = -1.0  # clipped by the bounded input to 0: a valid window
    assert view.model.workload.window("lineitem") == 0.0
    view.model.edit(w)
    assert view.model.workload is w


def test_bad_query_text_shows_error_inline_and_keeps_workload():
    view = QueryGraphView("paper_v2.yaml", debounce=0)
    w, res = view.model.workload, view.model.result
    frontend_sets(view.query_name, value="q3")
    frontend_sets(view.query_text, value="R(a), Nope(a)")
    frontend_clicks(view.add_button)
    # under the query boxes, not in the view's bottom error area; "what changed" says nothing did
    assert "query q3: relation 'Nope' is not declared (declared: R, S, T, U)" in html.unescape(view.query_error.value)
    assert "Traceback" not in view.query_error.value and "mqjoin-error" in view.query_error.value
    assert view.error.value == "" and view.relation_error.value == "" and view.selectivity_error.value == ""
    assert "nothing changed" in view.changes.value
    assert any("Nope" in v for v in sent_values(view.query_error))  # the frontend got the message
    assert view.model.workload is w and view.model.result is res
    # a disconnected query: the engine's message, verbatim
    frontend_sets(view.query_text, value="R.a = S.a, T.c = U.c")
    frontend_clicks(view.add_button)
    assert "not connected" in view.query_error.value and view.model.workload is w
    # a good one clears the error, adds the query, re-optimizes and redraws
    frontend_sets(view.query_text, value="R.a = S.a AND S.b = T.b AND T.c = U.c")
    frontend_clicks(view.add_button)
    assert view.query_error.value == ""
    assert view.model.workload.query_names == ("q1", "q2", "q3")
    assert set(view.model.result.probe_orders()) == {"q1", "q2", "q3"}
    assert [t.name for t in view.figure.data][:3] == ["q1", "q2", "q3"]
    assert "+ q3 from R" in view.changes.value


def test_remove_query_from_the_list():
    view = QueryGraphView("demo.yaml", debounce=0)
    view.queries.value = "q3"
    assert view.query_text.value == "R(a), S(a,b), T(b,c), U(c)"
    assert trace_by_name(view.figure, "q3").line.width == 4  # selected query highlighted
    frontend_clicks(view.remove_button)
    assert view.model.workload.query_names == ("q1", "q2")
    assert [t.name for t in view.figure.data][:2] == ["q1", "q2"] and "q3" not in [t.name for t in view.figure.data]
    assert set(view.model.result.probe_orders()) == {"q1", "q2"}


def frontend_clicks_point(fig, trace_name: str, point: int):
    """A click on a point of a figure widget, as the browser reports it (widgets/plotly_view.js)."""
    ti = [t.name for t in fig.data].index(trace_name)
    fig._handle_msg({"content": {"data": {"method": "custom", "content": {
        "event": "click", "revision": fig.revision, "points": [{"trace": ti, "point": point}]}}}, "buffers": []})


def test_clicking_the_graph_selects_what_to_edit():
    view = QueryGraphView("paper_v2.yaml", debounce=0)
    rel = trace_by_name(view.figure, "relations")
    frontend_clicks_point(view.figure, "relations", list(rel.customdata).index("U"))
    assert view.relation.value == "U"
    cls = trace_by_name(view.figure, "classes")
    frontend_clicks_point(view.figure, "classes", list(cls.customdata).index("T.c = U.c"))
    assert view.class_.value == "T.c = U.c" and view.selectivity.value == pytest.approx(0.01)
    # clicks still work after the traces were replaced (a query added)
    view.model.add_query("q3", "R(a), S(a)")
    assert [t.name for t in view.figure.data][:3] == ["q1", "q2", "q3"]
    frontend_clicks_point(view.figure, "relations", 0)
    assert view.relation.value == "R"


def test_query_graph_hyperedges_and_colours():
    fig = query_graph_figure(tpch())
    names = [t.name for t in fig.data]
    assert names == ["q1", "q2", "q3", "q4", "q5", "hyperedge hubs", "classes", "relation (size: its rate, log scale)",
                     "relation no query reads", "hub of a class of 3+ relations", "relations"]
    # the title counts what is drawn: 7 relations read by queries, and names the eighth
    assert "5 queries over 7 relations (+ customer: declared, read by no query, drawn pale)" in fig.layout.title.text
    hubs = trace_by_name(fig, "hyperedge hubs")
    three_way = [(q.name, c) for q in tpch().queries for c in q.classes if len(c.members) > 2]
    assert len(three_way) == 3 and len(hubs.x) == 3  # q3 and q5: partkey; q4: suppkey
    assert [h.split(":")[0] for h in hubs.hovertext] == [q for q, _ in three_way]
    assert len({t.line.color for t in fig.data[:5]}) == 5
    rel = trace_by_name(fig, "relations")
    assert list(rel.text) == ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
    assert rel.marker.color[3] != rel.marker.color[0]  # customer: declared, read by no query


# --------------------------------------------------------------------------------------------
# probe trees
# --------------------------------------------------------------------------------------------


def test_probe_tree_forest_matches_plan():
    plan = optimize(as_workload("paper_v2.yaml")).plan
    fig = probe_tree_figure(plan)
    stores = trace_by_name(fig, "stores")
    assert len(stores.x) == len(plan.nodes)
    sinks = [lab for n in plan.nodes for lab in plan.rules[n.store][n.edge].out
             if plan.edge[lab].kind in ("output", "insert")]
    assert sorted(trace_by_name(fig, "edge labels").text) == sorted([n.edge for n in plan.nodes] + sinks)
    assert list(trace_by_name(fig, "start relations").text) == ["R", "S", "T", "U"]
    outputs = list(trace_by_name(fig, "outputs").text)
    assert outputs.count("⇒ q1") == 3 and outputs.count("⇒ q2") == 3 and "⇒ ST[a]" in outputs
    shared = [n for n in plan.nodes if len(n.owners) > 1]
    assert shared and len(trace_by_name(fig, "shared prefixes").x) == 4 * len(shared)
    for n, h, d in zip(plan.nodes, stores.hovertext, stores.customdata):
        assert f"cost {n.cost:.4g}" in h and d[0] == n.edge and d[1] == n.cost
        assert ("(shared step)" in h) == (len(n.owners) > 1)


def test_probe_tree_filter_per_query():
    view = ProbeTreeView(tpch(), debounce=0)
    plan = view.model.result.plan
    assert len(trace_by_name(view.figure, "stores").x) == len(plan.nodes)
    frontend_sets(view.query, index=list(view.query.options).index(("q1", "q1")))
    assert view.query.value == "q1"
    mine = nodes_for_query(plan, "q1")
    stores = trace_by_name(view.figure, "stores")
    assert len(stores.x) == len(mine) < len(plan.nodes)
    assert {o for o in trace_by_name(view.figure, "outputs").text if not o.startswith("⇒ (")} == {"⇒ q1"}
    assert "q1:" in view.figure.layout.title.text
    # every q1 order's steps are drawn
    for n in plan.nodes:
        if "q1" in n.owners:
            assert n.edge in [d[0] for d in stores.customdata]
    # back to all queries, chosen in the browser: the menu shows a selection (ipywidgets 8
    # sends index None for a None value, which the browser renders as an empty menu)
    frontend_sets(view.query, index=0)
    assert view.query.label == "all queries" and view.query.index == 0
    assert len(trace_by_name(view.figure, "stores").x) == len(plan.nodes)
    # a query removed (the menu's options change): still "all queries", still selected
    assert view.model.remove_query("q5")
    assert ("q5", "q5") not in view.query.options and view.query.index == 0


def test_probe_tree_individual_mode_has_namespaced_roots():
    m = ExplorerModel("paper_v2.yaml", debounce=0, mode="individual")
    view = ProbeTreeView(m)
    roots = list(trace_by_name(view.figure, "start relations").text)
    assert roots == ["q1:R", "q1:S", "q1:T", "q2:S", "q2:T", "q2:U"]
    view.query.value = "q2"
    assert list(trace_by_name(view.figure, "start relations").text) == ["q2:S", "q2:T", "q2:U"]


def test_figures_are_deterministic():
    w = tpch()
    assert query_graph_figure(w).to_json() == query_graph_figure(as_workload("tpch_fig7a.yaml")).to_json()
    p1, p2 = optimize(w).plan, optimize(as_workload("tpch_fig7a.yaml")).plan
    assert probe_tree_figure(p1).to_json() == probe_tree_figure(p2).to_json()
    a, b = Explorer(w, debounce=0), Explorer(w, debounce=0)

    def data(fig):  # (a uid, if a trace had one, is not part of what is drawn)
        return [{k: v for k, v in t.items() if k != "uid"} for t in fig.to_dict()["data"]]

    assert data(a.trees.figure) == data(b.trees.figure)
    assert data(a.graph.figure) == data(b.graph.figure)
    assert a.ilp.steps.value == b.ilp.steps.value


def test_graph_positions_do_not_move_on_statistics_edits():
    view = QueryGraphView(tpch(), debounce=0)
    rel = trace_by_name(view.figure, "relations")
    xy = (list(rel.x), list(rel.y))
    view.relation.value = "part"
    view.rate.value = 5.0
    assert (list(rel.x), list(rel.y)) == xy
    assert "rate 5 tuples/s" in trace_by_name(view.figure, "relations").hovertext[4]


# --------------------------------------------------------------------------------------------
# ILP view
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["mqo", "individual", "shared"])
@pytest.mark.parametrize("partitioning", ["single", "replicas"])
def test_breakdown_sums_to_probe_cost(mode, partitioning):
    res = optimize(tpch(), mode=mode, partitioning=partitioning)
    by_q = cost_by_query(res.plan)
    assert set(by_q) == set(res.workload.query_names)
    assert sum(v["total"] for v in by_q.values()) == pytest.approx(res.probe_cost, rel=1e-9)
    for v in by_q.values():
        assert v["own"] + v["shared"] == pytest.approx(v["total"])
    assert sum(s.cost for s in cost_by_step(res.plan)) == pytest.approx(res.probe_cost, rel=1e-12)
    if mode == "mqo":
        assert res.ilp.objective == pytest.approx(res.probe_cost, rel=1e-6)


def test_ilp_view_contents_and_lp_on_demand():
    m = ExplorerModel(tpch(), debounce=0)
    view = IlpView(m)
    res = m.result
    assert f">{res.ilp.variables}<" in view.stats.value and "optimal" in view.stats.value
    # by-query chart: stacked bars sum to the probe cost
    own, shared = trace_by_name(view.by_query, "own steps"), trace_by_name(view.by_query, "share of shared steps")
    assert list(own.y) == ["q1", "q2", "q3", "q4", "q5"]
    assert sum(own.x) + sum(shared.x) == pytest.approx(res.probe_cost)
    # every chosen probe order is listed, rendered as everywhere else
    for by_start in res.probe_orders().values():
        for o in by_start.values():
            assert o in html.unescape(view.orders.value)
    assert view.steps.value.count("★") == sum(1 for n in res.plan.nodes if len(n.owners) > 1)
    # the LP text is built only on click
    assert view.lp_text.value == ""
    frontend_clicks(view.lp_button)
    assert view.lp_text.value.startswith("\\* mqjoin_probe_orders *\\")
    assert "Minimize" in view.lp_text.value and "Subject To" in view.lp_text.value
    assert any("Minimize" in v for v in sent_values(view.lp_text))
    # a new plan clears the (now stale) text
    m.set_rate("orders", 100.0)
    assert view.lp_text.value == ""


def test_ilp_view_individual_mode_lp_has_one_model_per_query():
    view = IlpView("paper_v2.yaml", debounce=0, mode="individual")
    text = view.show_lp()
    assert text.count("model of query") == 2 and text.count("Minimize") == 2


# --------------------------------------------------------------------------------------------
# comparisons and plan diagrams
# --------------------------------------------------------------------------------------------


def test_comparison_view_matches_the_cli_table():
    view = ComparisonView("paper_fig3.yaml", debounce=0)
    assert view.results == {}
    frontend_clicks(view.compare_button)
    got = {k: (r.probe_cost, r.memory, len(r.plan.stores)) for k, r in view.results.items()}
    assert got == {("individual", "single"): (800.0, 800.0, 8), ("shared", "single"): (800.0, 700.0, 7),
                   ("mqo", "single"): (900.0, 500.0, 5), ("individual", "replicas"): (800.0, 800.0, 8),
                   ("shared", "replicas"): (800.0, 700.0, 7), ("mqo", "replicas"): (600.0, 600.0, 6)}
    assert view.progress.value == view.progress.max == len(view.plans)
    bars = trace_by_name(view.figure, "single probe cost")
    assert list(bars.x) == ["mqo", "individual", "shared"] and list(bars.y) == [900.0, 800.0, 800.0]
    assert list(trace_by_name(view.figure, "replicas memory").y) == [600.0, 800.0, 700.0]
    # the legend names the policies (not "probe cost" for the memory chart); labels stand upright
    assert [t.name for t in view.figure.data if t.showlegend] == ["single", "replicas"]
    assert all(t.textangle == -90 for t in view.figure.data if t.showlegend is False)
    assert view.figure.layout.title.x < 0.1 and view.figure.layout.legend.y < 0  # clear of the toolbar
    # plan diff individual/single → mqo/single
    assert "stores appeared" in view.diff.value and "R » ST[b]" in view.diff.value.replace("&gt;", ">")
    d = plan_diff(view.results[("individual", "single")].plan, view.results[("mqo", "single")].plan)
    for s in d.added_stores:
        assert s in view.diff.value
    view.b.value = Setting("clash", "mqo", "replicas")
    assert "600" in view.diff.value


def html_rows(html_table: str) -> list[tuple[list[str], bool]]:
    """The rows of an HTML table the widgets write: (cell texts, shaded)."""
    return [([html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", cells)], cls == ' class="mark"')
            for cls, cells in re.findall(r"<tr( class=\"mark\")?>(.*?)</tr>", html_table) if "<td>" in cells]


def test_compare_tab_lists_every_plan_family_with_the_optimisers_costs():
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    frontend_picks(ex.options.planner, "mjoin")  # the current setting: mjoin mqo = its shared plan
    ex.show("Compare")
    rows = html_rows(ex.compare.table.value)
    got = {(r[0], r[1], r[2]): (r[3], r[5]) for r, _ in rows}
    # only CLASH solves an ILP: the families' rows say they were built, with no solve time
    assert {r[-1].split(";")[0] for r, _ in rows if r[0] != "clash"} == {"built, no ILP"}
    # JAQPOT builds tree's binary trees by the same rule: each of its rows names its twin, the note says why
    twins = {(r[1], r[2]): r[-1] for r, _ in rows if r[0] == "jaqpot (best)"}
    assert twins and all(v == f"built, no ILP; same plan as tree (best) {k[0]}/{k[1]}" for k, v in twins.items()), twins
    assert "jaqpot (best) builds the same plans as tree (best)" in ex.compare.status.value
    assert {r[-1] for r, _ in rows if r[0] == "clash"} == {"optimal"}
    assert {label for label, _, _ in got} == {"clash", "mjoin", "tree (best)", "ajoin", "pmjoin", "jaqpot (best)"}
    w = ex.model.workload
    for planner, label in (("clash", "clash"), ("mjoin", "mjoin"), ("tree", "tree (best)"), ("ajoin", "ajoin"),
                           ("pmjoin", "pmjoin"), ("jaqpot", "jaqpot (best)")):
        for pol in ("single", "replicas"):
            modes = ("mqo", "individual", "shared") if planner in ("clash", "ajoin") else ("individual", "shared")
            for mode in modes:
                r = optimize(w, mode=mode, partitioning=pol, planner=planner)
                assert got.pop((label, mode, pol)) == (fmt(r.probe_cost), fmt(r.memory)), (planner, mode, pol)
    assert got == {}  # nothing else listed
    assert [r[:3] for r, shaded in rows if shaded] == [["mjoin", "shared", "single"]]
    assert len(ex.compare.results) == 6  # CLASH's plans: the bars
    # the plan diff between any two of them: CLASH's joint plan → the binary trees' MIR stores
    ex.compare.a.value = Setting("clash", "mqo", "single")
    frontend_picks(ex.compare.b, ("tree (best) shared/single", Setting("tree", "shared", "single", "best")))
    d = plan_diff(ex.compare.plans[ex.compare.a.value].plan, ex.compare.plans[ex.compare.b.value].plan)
    assert d.added_stores and all(st in ex.compare.diff.value for st in d.added_stores + d.removed_stores)
    assert "probe order in tree (best) shared/single" in ex.compare.diff.value


def test_comparison_is_lazy_then_marked_stale():
    ex = Explorer("paper_v2.yaml", debounce=0)
    assert ex.compare.results == {}
    ex.show("Compare")  # opening the tab computes it
    assert len(ex.compare.results) == 6 and not ex.compare.stale
    ex.model.set_rate("U", 5.0)
    assert ex.compare.stale and "press Compare" in ex.compare.status.value
    ex.compare.auto.value = True
    ex.model.set_rate("U", 6.0)
    assert not ex.compare.stale and ex.compare.results[("mqo", "single")].workload.rate("U") == 6.0


def test_plan_diagram_shows_where_sharing_flips():
    """paper V-2: sharing S⋈T pays while |S⋈T| is small; with a large S.b = T.b selectivity
    the optimum switches to plans over RS and TU — at least two distinct plans."""
    w = as_workload("paper_v2.yaml")
    x = SweepParam("selectivity", "S.b = T.b", log_grid(1e-4, 1.0, 4))
    y = SweepParam("selectivity", "R.a = S.a", log_grid(1e-4, 1.0, 4))
    d = plan_diagram(w, x, y, baseline=True)
    assert d.distinct >= 2
    flat = [i for row in d.plan_index for i in row]
    assert set(flat) == set(range(d.distinct)) and flat[0] == 0
    saving = d.saving()
    assert saving[0][0] > 0.2 and saving[0][-1] == pytest.approx(0.0)  # shares at low S⋈T, not at high
    # the same point optimised directly gives the same plan
    from mqjoin.planning.diff import plan_signature

    direct = optimize(y.apply(x.apply(w, x.values[-1]), y.values[0])).plan
    assert plan_signature(direct) == d.plans[d.plan_index[0][-1]]


def test_plan_diagram_view_runs_with_progress():
    view = PlanDiagramView("paper_v2.yaml", grid=4, debounce=0)
    assert view.figure_box.layout.display == "none"  # no empty frame before the first sweep
    assert view.grid.value == 4
    assert view.x_param.value == ("selectivity", "R.a = S.a") and view.y_param.value == ("selectivity", "S.b = T.b")
    view.x_param.value = ("selectivity", "S.b = T.b")
    view.y_param.value = ("selectivity", "R.a = S.a")
    view.x_lo.value, view.x_hi.value = 1e-4, 1.0
    view.y_lo.value, view.y_hi.value = 1e-4, 1.0
    frontend_clicks(view.run_button)
    d = view.diagram
    assert d is not None and d.distinct >= 2
    heat = trace_by_name(view.figure, "optimal plan")
    assert [list(r) for r in heat.z] == [list(r) for r in d.plan_index]
    assert list(heat.colorbar.ticktext) == d.names()
    cost = trace_by_name(view.figure, "probe cost")
    assert [list(r) for r in cost.z] == [list(r) for r in d.cost]
    assert view.progress.value == view.progress.max == 16
    progress_values = sent_values(view.progress)
    assert progress_values[-1] == 16 and len(progress_values) >= 16  # progress reached the browser
    assert view.figure_box.layout.display is None
    # the legend gives each plan's area share; a click on a region shows its plan and its border's diff
    legend = html.unescape(view.legend.value)
    shares = [int(m) for m in re.findall(r"(\d+) % \(\d+ cells\)", legend)]
    assert len(shares) == d.distinct and abs(sum(shares) - 100) <= d.distinct
    k = d.plan_index[0][0]
    view.show_region(0, 0)
    detail = html.unescape(view.detail.value)
    assert detail.count(f"<b>{d.names()[k]}</b>") == 1 and "its neighbour P" in detail
    assert "− " in detail or "+ " in detail
    assert "P1" in view.legend.value and "P2" in view.legend.value
    # an edit elsewhere keeps the chosen ranges and marks the diagram out of date
    view.model.set_rate("U", 50.0)
    assert (view.x_lo.value, view.x_hi.value) == (1e-4, 1.0) and "run the sweep again" in view.status.value
    # same statistic twice is refused inline
    view.y_param.value = view.x_param.value
    assert view.run() is None and "two different" in view.error.value


@pytest.mark.parametrize("view", [ComparisonView, IlpView, PlanDiagramView, ProbeTreeView, QueryGraphView])
def test_a_view_closes_the_model_it_made_and_leaves_no_thread(view):
    import threading

    before = set(threading.enumerate())
    v = view("paper_fig3.yaml", debounce=30)
    v.model.set_rate("U", 200.0)
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()]
    v.close()
    assert v.model.closed and [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_a_filter_without_its_pass_fraction_is_refused_at_add_naming_the_pass_f_box():
    view = QueryGraphView("tpch_fig7a.yaml", debounce=0)
    w = view.model.workload
    frontend_sets(view.query_name, value="q8")
    frontend_sets(view.query_text, value="orders(orderkey), lineitem(orderkey)")
    frontend_sets(view.query_where, value="orders.orderstatus = 1")
    frontend_clicks(view.add_button)
    said = html.unescape(view.query_error.value)
    assert "the filter on orders needs its pass fraction" in said and "'pass f' box" in said, said
    assert "filters: {" not in said and view.model.workload is w
    frontend_sets(view.query_fractions, value="orders: 0.2")
    frontend_enters(view.query_fractions)
    assert view.query_error.value == "" and "q8" in view.model.workload.query_names


def test_a_debounced_recomputation_leaves_the_widgets_routed_to_the_page_that_edited(kernel):
    """An edit typed on a page (subshell "new") is recomputed ``debounce`` seconds later on a
    timer; a late message of a page being unloaded (subshell "old") comes in meanwhile.  The
    redraw the recomputation causes must not route the widget's messages to the old page's
    subshell (gone with the page: every later click on the widget would be dropped)."""
    import ipywidgets


    m = ExplorerModel("paper_v2.yaml", debounce=0.2)
    label = ipywidgets.HTML()
    m.observe(lambda change: setattr(label, "value", f"probe cost {change['new'].probe_cost:g}"), "result")

    def edit():  # the page's edit: its widget updates answer this page
        label.value = "optimizing"
        m.set_rate("S", 10)

    request_from(kernel, "new", edit)
    request_from(kernel, "old")  # the unloading page's late message, before the timer fires
    assert m.wait(30)
    assert label.value == f"probe cost {m.result.probe_cost:g}"
    assert label.comm._reply_subshell_for({}, None) == "new"
    m.close()
