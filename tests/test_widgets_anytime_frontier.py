"""In the explorer: the frontier in the Compare tab (click a point → its plan) and
anytime solving (best plan so far with its gap, improved in the background, cancelled by an
edit), driven by a scripted solver and a manual background runner — no timing involved."""

from __future__ import annotations

import dataclasses
import threading

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from test_widgets import frontend_clicks, frontend_clicks_point, recording_comm  # noqa: F401 (fixture)

from mqjoin.planning.optimizer import optimize
from mqjoin.widgets import ComparisonView, IlpView, as_workload
from mqjoin.widgets.figures import trace_by_name
from mqjoin.widgets.model import ExplorerModel


def test_frontier_in_the_compare_tab_and_clicking_shows_the_plan():
    view = ComparisonView("paper_fig3.yaml", debounce=0)
    fv = view.frontier
    assert fv.result is None and len(fv.figure.data) == 0  # computed on demand only
    frontend_clicks(fv.button)
    curve = trace_by_name(fv.figure, "frontier")
    assert list(curve.x) == [500.0, 600.0] and list(curve.y) == [900.0, 600.0]
    for name, (x, y) in {"single": (500.0, 900.0), "replicas": (600.0, 600.0), "individual": (800.0, 800.0),
                         "shared": (700.0, 800.0)}.items():
        t = trace_by_name(fv.figure, name)
        assert (list(t.x), list(t.y)) == ([x], [y])
    assert fv.selected == 1 and "ST[d]" in fv.plan.value  # the replicas end shown first
    frontend_clicks_point(fv.figure, "frontier", 0)
    assert fv.selected == 0
    assert "probe cost 900" in fv.plan.value and "ST[d]" not in fv.plan.value
    frontend_clicks_point(fv.figure, "individual", 0)
    assert fv.selected == "individual" and "q1:" in fv.plan.value
    view.model.set_rate("U", 5.0)
    assert "press Frontier" in fv.status.value


class ScriptedSolver:
    """An ``optimize_fn`` that returns scripted results (time-limited ones with a gap) and
    records the time limits it was given; ``during`` runs inside a given call (an edit made
    while the solver works)."""

    def __init__(self, script, during=None):
        self.script = list(script)
        self.limits = []
        self.during = during or {}

    def __call__(self, workload, options):
        self.limits.append(options.time_limit)
        k = len(self.limits)
        if k in self.during:
            self.during[k]()
        return self.script.pop(0)


def limited(res, gap):
    return dataclasses.replace(res, ilp=dataclasses.replace(res.ilp, status="time_limit", gap=gap,
                                                          objective=res.probe_cost))


@pytest.fixture(scope="module")
def plans():
    w = as_workload("paper_fig3.yaml")
    return {"no_mirs": optimize(w, mirs=False), "optimum": optimize(w)}  # 1300 and 900


def test_anytime_shows_the_best_plan_so_far_and_improves_it_in_the_background(plans):
    slow = limited(plans["no_mirs"], 0.5)            # 1300, bound 650
    better = limited(plans["optimum"], 0.1)          # 900, bound 810
    solver = ScriptedSolver([slow, better, plans["optimum"]])
    jobs = []
    m = ExplorerModel("paper_fig3.yaml", debounce=0, optimize_fn=solver, interactive_budget=0.5,
                      background=jobs.append)
    view = IlpView(m)
    # the interactive solve: stopped at the budget, shown at once, with its gap
    assert solver.limits == [0.5]
    assert m.result is slow and m.improving and len(jobs) == 1
    assert [(p.incumbent, p.bound) for p in m.progress] == [(1300.0, 650.0)]
    assert "gap 50.00%" in view.anytime_status.value and "improving in the background" in view.anytime_status.value
    assert "time_limit (gap 50.00%)" in view.stats.value
    # the background job: rounds of growing time limits until proven optimal
    jobs.pop()()
    assert solver.limits == [0.5, 1.0, 2.0]
    assert m.result is plans["optimum"] and not m.improving
    assert [(p.incumbent, p.bound, p.status) for p in m.progress] == [
        (1300.0, 650.0, "time_limit"), (900.0, 810.0, "time_limit"), (900.0, 900.0, "optimal")]
    inc, bound = trace_by_name(view.anytime, "incumbent"), trace_by_name(view.anytime, "bound")
    assert list(inc.y) == [1300.0, 900.0, 900.0] and list(bound.y) == [650.0, 810.0, 900.0]
    assert "optimal 900" in view.anytime_status.value and "done" in view.anytime_status.value
    assert view.anytime_box.layout.display is None  # the chart is shown while it has a story
    assert "probe cost" in view.stats.value and "optimal" in view.stats.value


def test_improvements_inside_a_background_round_reach_the_chart(plans):
    """A round's solver reports its incumbent and bound as they improve (its ``monitor``);
    the explorer shows them before the round ends, between the rounds' own points."""
    slow = limited(plans["no_mirs"], 0.5)

    class Reporting(ScriptedSolver):
        def __call__(self, workload, options):
            monitor = options.monitor
            if monitor is not None:
                monitor.begin({"all": 1300.0})
                monitor.report("all", 1000.0, 700.0)
            return super().__call__(workload, options)

    jobs = []
    m = ExplorerModel("paper_fig3.yaml", debounce=0, optimize_fn=Reporting([slow, plans["optimum"]]),
                      interactive_budget=0.5, background=jobs.append)
    view = IlpView(m)
    jobs.pop()()
    assert [(p.incumbent, p.bound) for p in m.progress] == [(1300.0, 650.0), (1000.0, 700.0), (900.0, 900.0)]
    assert list(trace_by_name(view.anytime, "incumbent").y) == [1300.0, 1000.0, 900.0]


def test_an_edit_cancels_a_stale_background_solve(plans):
    slow = limited(plans["no_mirs"], 0.5)
    jobs = []
    m = None

    def edit():  # the user moves a slider while round 1 of the background solve runs
        m.set_rate("U", 200.0)

    # call 1: interactive solve; call 2: background round 1, during which the edit arrives and
    # is solved at once (call 3, debounce 0: it takes the next scripted result — proven
    # optimal, so nothing more in the background); then round 1 returns its stale plan
    stale_round = limited(plans["optimum"], 0.05)
    solver = ScriptedSolver([slow, plans["optimum"], stale_round], during={2: edit})
    m = ExplorerModel("paper_fig3.yaml", debounce=0, optimize_fn=solver, interactive_budget=0.5,
                      background=jobs.append)
    stale_job = jobs.pop()
    stale_job()
    assert len(solver.limits) == 3 and solver.limits[2] == 0.5  # the edit's own interactive solve
    assert m.workload.rate("U") == 200.0
    # the stale round's plan (for the old workload) was not shown, nor was its progress
    assert m.result is plans["optimum"] and not m.improving and jobs == []
    assert [(p.incumbent, p.status) for p in m.progress] == [(900.0, "optimal")]


def test_without_a_budget_nothing_runs_in_the_background(plans):
    jobs = []
    solver = ScriptedSolver([plans["optimum"]])
    m = ExplorerModel("paper_fig3.yaml", debounce=0, optimize_fn=solver, background=jobs.append)
    assert solver.limits == [None] and jobs == [] and not m.improving
    ilp = IlpView(m)
    assert ilp.anytime_status.value == "" and ilp.anytime_box.layout.display == "none"  # no empty axes strip


def _threads_named(name):
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def test_close_cancels_the_background_solve_and_leaves_no_thread(plans):
    """A real background thread: close() cancels the improvement (its running round ends
    unreported, no further round starts) and returns once the thread is gone."""
    slow = limited(plans["no_mirs"], 0.5)
    in_round, finish_round = threading.Event(), threading.Event()

    def round_one():
        in_round.set()
        assert finish_round.wait(10)

    later = limited(plans["optimum"], 0.1)
    solver = ScriptedSolver([slow, limited(plans["optimum"], 0.1), later], during={2: round_one})
    m = ExplorerModel("paper_fig3.yaml", debounce=0, optimize_fn=solver, interactive_budget=0.5)
    assert in_round.wait(10) and m.improving and len(_threads_named("mqjoin-anytime")) == 1
    threading.Timer(0.2, finish_round.set).start()  # the round finishes while close() waits for it
    assert m.close(timeout=10)
    assert _threads_named("mqjoin-anytime") == [] and not m.improving
    assert len(solver.limits) == 2 and m.result is slow  # round 1 unreported, round 2 never started
    m.set_rate("U", 200.0)  # a closed model still answers edits, at once, and improves nothing behind
    assert _threads_named("mqjoin-anytime") == [] and m.result is later and not m.improving


def test_close_cancels_a_debounced_recomputation_and_joins_its_timer(plans):
    before = set(threading.enumerate())
    m = ExplorerModel("paper_fig3.yaml", debounce=30)
    m.set_rate("U", 200.0)
    timers = [t for t in threading.enumerate() if t not in before]
    assert len(timers) == 1 and m.pending
    assert m.close(timeout=10)
    assert not timers[0].is_alive() and not m.pending


def test_the_frontier_on_tpch_zooms_to_its_points_and_points_at_far_marks():
    from mqjoin.planning.frontier import frontier
    from mqjoin.widgets.frontier_view import FAR_MARKS, frontier_traces

    f = frontier(as_workload("tpch_fig7a.yaml"))
    traces, layout = frontier_traces(f)
    xs, ys = [p.memory for p in f.points], [p.probe_cost for p in f.points]
    (x0, x1), (y0, y1) = layout["xaxis"]["range"], layout["yaxis"]["range"]
    assert x0 < min(xs) and max(xs) < x1 and y0 < min(ys) and max(ys) < y1  # every point on the axes …
    assert (max(xs) - min(xs)) / (x1 - x0) > 0.5 and (max(ys) - min(ys)) / (y1 - y0) > 0.5  # … spread over them
    far = {a["text"].split(":")[0]: a for a in layout["annotations"] if a["name"] == FAR_MARKS}
    assert "individual" in far and f.marks["individual"].memory > x1  # the far mark: an arrow at the edge
    assert all(x0 <= a["x"] <= x1 and y0 <= a["y"] <= y1 and a["showarrow"] for a in far.values())
    pos = {t["name"]: t.get("textposition") for t in traces}
    assert pos["single"] != pos["replicas"]  # the curve's two ends labelled on opposite sides
    assert layout["font"]["size"] >= 14 and all(a["font"]["size"] >= 14 for a in far.values())
