"""The Deploy panel without Spark: a fake deployment feeds events, the charts must follow."""

import html
import re
import time

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from mqjoin.model.errors import EngineError
from mqjoin.planning.optimizer import optimize
from mqjoin.model.tables import Table
from mqjoin.widgets.deploy_panel import DeployPanel
from mqjoin.model.workload import parse_workload
from _subshells import kernel, request_from  # noqa: F401 — kernel is a fixture

W = parse_workload("""
defaults: {selectivity: 0.5}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
TABLES = {"R": Table.from_columns("R", {"ts": [0.0], "a": [1]}), "S": Table.from_columns("S", {"ts": [0.5], "a": [1]})}


class FakeDeployment:
    """The Deploy panel's interface and nothing else (mqjoin.runtime.contracts.Deployment,
    checked in test_contracts.py), with the events a test feeds it."""

    def __init__(self, plan, engine):
        self.plan, self.engine_name, self.total, self.done = plan, engine, 2, False
        self.ui_url = "http://172.17.0.5:4040"  # where the driver binds in a container
        self.rows, self.qrows, self.subs, self.stopped = [], [], [], False

    @property
    def batches(self):
        return pd.DataFrame(self.rows)

    @property
    def queries(self):
        return pd.DataFrame(self.qrows)

    @property
    def progress(self):
        return pd.DataFrame()

    def subscribe(self, callback):
        self.subs.append(callback)

    def stop(self):
        self.stopped = True

    def emit(self, ev):
        for f in list(self.subs):
            f(ev)

    def finish(self):
        self.done = True
        self.emit({"kind": "status", "status": "finished", "error": None})

    def batch(self, k, rows, state):
        self.rows.append({"batch": k, "input_rows": rows, "started": 100.0 + k, "seconds": 0.5, "state_rows": state})
        self.qrows.append({"batch": k, "query": "q", "results": 1, "started": 100.0 + k, "seconds": 0.5,
                           "latency_mean": 0.7, "latency_p95": 0.9, "latency_max": 1.0})
        for f in self.subs:
            f({"kind": "batch", "batch": k, "input_rows": rows})


def make_panel(calls, workload=W, data=TABLES):
    def fake_deploy(plan, data, out, engine, rate, **kw):
        calls.append((plan, data, engine, rate))
        return FakeDeployment(plan, engine)

    return DeployPanel(lambda: optimize(workload).plan, deploy_fn=fake_deploy, data=data, refresh_seconds=0)


def click_deploy(panel):
    """A click on Deploy, and the wait for the start it runs off the caller's thread."""
    panel.deploy_button.click()
    assert panel.wait_started(10)


def trace(panel, name):
    assert panel.wait_idle()  # the redraws run off the deployment's thread
    return next(t for t in panel.figure.data if t.name == name)


def test_a_run_that_ends_right_after_its_start_is_seen_to_end():
    """The start leaves the panel's starts when its deployment exists, a moment before it
    subscribes to its events; waiting for the start waits for that too, so an end sent at once
    is heard (the window is widened here by a slow step between the two)."""
    import time

    calls = []
    panel = make_panel(calls)
    show_mode = panel._show_mode

    def slow_show_mode(label, d):
        time.sleep(0.5)
        show_mode(label, d)

    panel._show_mode = slow_show_mode
    panel.deploy_button.click()
    time.sleep(0.2)  # the start has its deployment and is now between the two steps
    assert panel.wait_started(10)
    panel.deployments[0][1].finish()
    assert panel.wait_idle()
    assert not panel._busy() and not panel.deploy_button.disabled


def test_deploy_click_runs_current_plan_and_charts_grow():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    assert len(calls) == 1 and calls[0][2] == "mqjoin" and calls[0][1] is TABLES
    d = panel.deployments[0][1]
    assert "running" in panel.status.value and "4040" in panel.ui_link.value
    assert panel.stop_button.disabled is False
    d.batch(0, 1000, 50)
    thr = trace(panel, "mqo #1")  # the run's legend entry is its throughput line
    assert list(thr.y) == [2000.0]
    d.batch(1, 500, 80)
    assert list(trace(panel, "mqo #1").y) == [2000.0, 1000.0]
    assert list(trace(panel, "mqo #1 state").y) == [50.0, 80.0]
    assert list(trace(panel, "mqo #1 latency").y) == [0.7, 0.7]


def test_a_run_that_consumed_its_input_stops_its_streaming_query_and_stays_finished():
    """A Spark query whose input is all consumed goes on polling its source; the panel stops
    it (off the kernel's thread) and the run reads finished, not stopped."""
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.batch(0, 1, 1)
    assert not d.stopped
    d.done = True  # a real deployment reports no status until it is stopped: it is done after a batch
    d.batch(1, 1, 2)
    assert panel.wait_idle()
    assert d.stopped and "finished" in run_rows(panel)[0] and "finished" in panel.status.value
    assert panel.stop_button.disabled and not panel.deploy_button.disabled


def legend(panel):
    assert panel.wait_idle()
    return [t.name for t in panel.figure.data if t.showlegend is not False]


def run_rows(panel):
    """The run table's rows as text: one per run."""
    assert panel.wait_idle()
    rows = re.findall(r"<tr>(.*?)</tr>", panel.runs_table.value)[1:]
    return [re.sub(r"<[^>]+>", " ", r) for r in rows]


def test_one_run_at_a_time_then_overlays_one_colour_and_one_legend_entry_per_run():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    first = panel.deployments[0][1]
    assert panel.deploy_button.disabled and not panel.stop_button.disabled
    panel.engine.value = "native"
    assert panel.deploy() is None and len(calls) == 1  # a second run while one is live: refused
    assert "mqo #1 is still running" in html.unescape(panel.status.value)
    first.batch(0, 10, 1)
    first.finish()
    assert not panel.deploy_button.disabled and panel.stop_button.disabled
    click_deploy(panel)
    assert [c[2] for c in calls] == ["mqjoin", "native"]
    second = panel.deployments[1][1]
    second.batch(0, 20, 2)
    second.batch(1, 20, 3)
    # the legend: the input rate target and one entry per run, not one per line
    assert legend(panel) == ["input rate target (2,000 tuples/s)", "mqo #1", "native #2"]
    colours = {}
    assert panel.wait_idle()
    for t in panel.figure.data[1:]:
        colours.setdefault(t.legendgroup, set()).add(t.line.color)
    assert all(len(c) == 1 for c in colours.values()) and colours["mqo #1"] != colours["native #2"]
    rows = run_rows(panel)
    assert len(rows) == 2 and "mqo #1" in rows[0] and "finished" in rows[0]
    assert "native #2" in rows[1] and "running" in rows[1]
    panel.stop_button.click()
    assert panel.wait_idle()  # the stop runs off the kernel's thread
    assert second.stopped and not first.stopped  # only the live one
    assert "stopped" in panel.status.value and panel.stop_button.disabled and not panel.deploy_button.disabled
    assert "stopped" in run_rows(panel)[1] and "finished" in run_rows(panel)[0]


def test_per_query_latency_lines_are_behind_a_toggle_with_a_dash_each():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.batch(0, 10, 1)
    assert panel.wait_idle()
    assert [t.name for t in panel.figure.data if "latency" in t.name] == ["mqo #1 latency"]
    panel.per_query.value = True
    assert panel.wait_idle()
    lat = [t for t in panel.figure.data if "latency" in t.name]
    assert [t.name for t in lat] == ["mqo #1 q latency"] and lat[0].line.dash == "solid"


def test_transient_spark_warning_is_not_an_error_and_the_run_goes_on():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.emit({"kind": "status", "status": "failed", "error": "the native deployment failed: SocketTimeoutException: "
            "Timed out while waiting for the Python worker to connect back"})
    assert "error" not in panel.status.value
    d.batch(0, 10, 1)
    (row,) = run_rows(panel)
    assert "running" in row and "Spark warned (the run goes on)" in html.unescape(row)
    assert panel.deploy_button.disabled  # still live


TIMED_OUT = ("the mqjoin deployment failed: SocketTimeoutException: Timed out while waiting for the Python worker "
             "to connect back")


def test_a_failure_that_ended_the_run_is_an_error_whatever_its_words():
    """A transient-sounding failure the run did not survive (its query ended with it, before
    its first batch): the status line says the error and the run can be deployed again — not a
    clock that stops at "waiting for the first micro-batch … 10 s" for ever."""
    panel = make_panel([])
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.emit({"kind": "status", "status": "failed", "error": TIMED_OUT, "ended": True})
    assert panel.wait_idle()
    status = html.unescape(panel.status.value)
    assert "error" in status and "connect back" in status and "press Deploy to try again" in status
    (row,) = run_rows(panel)
    assert "failed" in row and panel.runs.clock() is None and not panel.deploy_button.disabled


def test_a_warning_the_run_did_not_survive_after_all_becomes_an_error():
    """The same words first while the query ran (a warning), then again as the query ends."""
    panel = make_panel([])
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.emit({"kind": "status", "status": "failed", "error": TIMED_OUT, "ended": False})
    assert "error" not in panel.status.value and panel.deploy_button.disabled
    d.emit({"kind": "status", "status": "failed", "error": TIMED_OUT, "ended": True})
    assert panel.wait_idle()
    assert "error" in panel.status.value and "failed" in run_rows(panel)[0]
    assert not panel.deploy_button.disabled


def test_the_run_table_says_when_the_engine_falls_behind_its_input():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.total = 100_000
    d.batch(0, 100, 1)
    d.batch(1, 100, 1)  # 200 tuples in 1.5 s at a target of 2,000 tuples/s
    assert "falling behind its input: 200 of the 3,000 tuples" in html.unescape(run_rows(panel)[0])
    fig = panel.figure
    assert fig.data[0].name.startswith("input rate target") and list(fig.data[0].y) == [2000.0, 2000.0]
    d.emit({"kind": "status", "status": "stopped", "error": None})  # it ended: the note stays
    assert panel.wait_idle() and "falling behind its input" in html.unescape(run_rows(panel)[0])


def test_a_deploy_the_model_says_is_too_large_is_refused_with_what_to_change():
    from mqjoin.widgets.model import as_workload

    w = as_workload("tpch_fig7a.yaml").with_selectivity("lineitem.orderkey = orders.orderkey", 0.79)
    calls = []
    panel = make_panel(calls, workload=w, data=None)
    panel.duration.value = 10.0
    click_deploy(panel)
    got = html.unescape(panel.status.value)
    assert calls == [] and panel.deployments == [] and "error" in got
    assert "not deployed — this run would produce about" in got and "orders.orderkey 0.79" in got
    assert panel.anyway_button.layout.display is None and not panel.deploy_button.disabled


def test_a_live_deploy_past_its_budget_is_stopped_and_keeps_its_curves():
    from mqjoin.planning.guard import RunLimits

    calls = []
    panel = make_panel(calls)
    panel.guard.limits = RunLimits(max_results=5, max_bytes=1e12)
    click_deploy(panel)
    d = panel.deployments[0][1]
    for k in range(3):
        d.emit({"kind": "batch", "batch": k, "input_rows": 10, "results": 3, "state_rows": 1})
    deadline = time.monotonic() + 10  # the stop runs off the deployment's thread
    while not d.stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    while "over its budget" not in run_rows(panel)[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert d.stopped and "over its budget: 6 results" in run_rows(panel)[0]
    assert "stopped" in run_rows(panel)[0] and not panel.deploy_button.disabled


def test_spark_ui_link_opens_from_the_users_browser():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    assert 'href="http://127.0.0.1:4040"' in panel.ui_link.value


def test_deploy_error_is_shown_not_raised():
    def failing(plan, data, out, **kw):
        raise EngineError("could not start Spark (spark://nowhere:7077): connection refused")

    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=failing, data=TABLES)
    assert panel.deploy() == "mqo #1" and panel.wait_started(10)  # the start fails off the kernel's thread
    assert "error" in panel.status.value and "connection refused" in panel.status.value
    assert panel.deployments == [] and panel.run_state["mqo #1"]["state"] == "failed"
    assert not panel.deploy_button.disabled and panel.stop_button.disabled


def test_failure_event_reaches_status_line():
    calls = []
    panel = make_panel(calls)
    click_deploy(panel)
    d = panel.deployments[0][1]
    for f in d.subs:
        f({"kind": "status", "status": "failed", "error": "the mqjoin deployment failed: boom"})
    assert "boom" in panel.status.value and "error" in panel.status.value


def test_a_data_directory_is_estimated_over_the_chosen_seconds(tmp_path):
    calls = []
    panel = make_panel(calls, data=tmp_path)  # the tour deploys a directory of Parquet files
    click_deploy(panel)
    assert len(calls) == 1 and calls[0][1] == tmp_path and "error" not in panel.status.value
    assert panel.guard.estimate.duration == panel.duration.value


def test_closing_the_panel_waits_for_the_budget_stop_and_leaves_no_thread(monkeypatch):
    import threading

    from mqjoin.planning.guard import RunLimits

    stopping = threading.Event()

    def slow_stop(self):  # Spark takes a moment to stop its queries
        stopping.set()
        time.sleep(0.3)
        self.stopped = True

    monkeypatch.setattr(FakeDeployment, "stop", slow_stop)
    calls = []
    panel = make_panel(calls)
    panel.guard.limits = RunLimits(max_results=5, max_bytes=1e12)
    click_deploy(panel)
    d = panel.deployments[0][1]
    d.emit({"kind": "batch", "batch": 0, "input_rows": 10, "results": 6, "state_rows": 1})
    assert stopping.wait(10) and not d.stopped
    panel.close()
    assert d.stopped
    assert [t for t in threading.enumerate() if t.name == "mqjoin-budget-stop" and t.is_alive()] == []


def test_a_slow_start_leaves_the_kernel_free_and_stop_cancels_it_at_once():
    import threading

    release = threading.Event()
    started: list[FakeDeployment] = []

    def slow_deploy(plan, data, out, engine, rate, **kw):  # a cold Spark session: the JVM takes its time
        release.wait(60)
        d = FakeDeployment(plan, engine)
        started.append(d)
        return d

    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=slow_deploy, data=TABLES, refresh_seconds=0)
    t0 = time.monotonic()
    assert panel.deploy() == "mqo #1"
    assert time.monotonic() - t0 < 5.0  # the click returned while the start goes on (it waits up to 60 s)
    assert "starting" in panel.status.value and not panel.stop_button.disabled and panel.deploy_button.disabled
    deadline = time.monotonic() + 10  # the status line counts the seconds waited (its clock ticks each second)
    while not re.search(r"… [1-9]\d* s", html.unescape(panel.status.value)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(r"… [1-9]\d* s", html.unescape(panel.status.value)), panel.status.value
    t0 = time.monotonic()
    panel.stop_button.click()
    assert time.monotonic() - t0 < 5.0 and "cancelled" in panel.status.value
    assert not panel.deploy_button.disabled and panel.stop_button.disabled
    release.set()
    assert panel.wait_started(10) and panel.wait_idle()
    assert started and started[0].stopped  # the run the start produced after all was stopped
    assert "stopped" in run_rows(panel)[0]


def test_a_native_run_leaves_waiting_with_its_first_report():
    calls = []
    panel = make_panel(calls)
    panel.engine.value = "native"
    click_deploy(panel)
    assert "waiting for the first micro-batch" in panel.status.value
    d = panel.deployments[0][1]
    d.emit({"kind": "query", "batch": 0, "query": "q", "results": 1})  # the native sink reports queries, no batches
    assert "waiting" not in panel.status.value and "native #1 running" in panel.status.value


def test_opening_the_deploy_tab_starts_the_spark_session_ahead_of_the_click(monkeypatch):
    import mqjoin.widgets.deploy_run as dp
    from mqjoin.widgets import Explorer

    started = []
    monkeypatch.setattr(dp, "prepare_session", lambda: started.append(1))
    monkeypatch.setattr(dp, "session_running", lambda: False)
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=lambda plan_provider: DeployPanel(plan_provider))
    assert started == []  # building the explorer starts nothing
    ex.show("Deploy")
    assert ex.deploy_panel.wait_idle() and started == [1]
    # a panel told where to deploy (a master, a session) leaves the session to its deploy
    told = DeployPanel(lambda: optimize(W).plan, master="spark://elsewhere:7077")
    assert told.prepare() is False and started == [1]
    assert make_panel([]).prepare() is False  # another deploy function: nothing to start


def test_an_explorer_told_to_start_spark_ahead_at_once_and_says_so(monkeypatch):
    """``spark_ahead=True``: the explorer starts the Spark session and its workers at once, off
    the kernel's thread, and the status line says that Spark is warming up; with the session
    running, opening the Deploy tab starts the workers again."""
    import threading

    import mqjoin.widgets.deploy_run as dp
    from mqjoin.widgets import Explorer

    release, started, running = threading.Event(), [], [False]

    def start():
        started.append(threading.current_thread().name)
        assert release.wait(10)
        running[0] = True

    monkeypatch.setattr(dp, "prepare_session", start)
    monkeypatch.setattr(dp, "session_running", lambda: running[0])

    ex = Explorer("paper_v2.yaml", debounce=0, deploy=lambda plan_provider: DeployPanel(plan_provider),
                  spark_ahead=True)
    panel = ex.deploy_panel
    for _ in range(500):
        if started:
            break
        threading.Event().wait(0.01)
    assert started == ["mqjoin-spark-prepare"] and "warming up" in panel.status.value
    assert panel.prepare() is False  # one start at a time
    release.set()
    assert panel.wait_idle() and "Spark is ready" in panel.status.value
    ex.show("Deploy")
    assert panel.wait_idle() and len(started) == 2  # the workers again, no "warming up" now
    assert "Spark is ready" in panel.status.value
    ex.close()


def test_a_start_that_ends_after_the_panel_closed_is_stopped():
    import threading

    release = threading.Event()
    started: list[FakeDeployment] = []

    def slow_deploy(plan, data, out, engine, rate, **kw):
        release.wait(10)
        started.append(FakeDeployment(plan, engine))
        return started[-1]

    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=slow_deploy, data=TABLES, refresh_seconds=0)
    assert panel.deploy() == "mqo #1"
    panel.close()  # the notebook cell was re-run while Spark started
    release.set()
    assert panel.wait_started(10) and panel.wait_idle()
    assert started[0].stopped and panel.run_state["mqo #1"]["state"] == "stopped"


def test_the_spark_mode_is_shown_before_and_after_deploy(monkeypatch):
    pytest.importorskip("pyspark")
    from mqjoin.runtime.spark.mode import ModeChoice

    calls = []
    panel = make_panel(calls)
    before = panel.refresh_mode()
    # auto on the default local master: the tiny input's state fits the driver
    assert "Spark mode on Deploy: <b>driver</b> — estimated state" in before and "of available memory" in before
    assert panel.mode_line.value == before
    big = DeployPanel(lambda: optimize(W).plan, deploy_fn=None, data=TABLES, master="spark://h:7077")
    assert "<b>distributed</b> — cluster master spark://h:7077" in big.refresh_mode()
    panel.engine.value = "native"  # the line follows the settings, off the kernel's thread
    assert panel.wait_idle() and "native" in panel.mode_line.value
    panel.engine.value = "mqjoin"
    assert panel.wait_idle() and panel.mode_line.value == before
    original = FakeDeployment.__init__

    def with_choice(self, plan, engine):
        original(self, plan, engine)
        self.mode_choice = ModeChoice("distributed", "asked for (--spark-mode distributed)")

    monkeypatch.setattr(FakeDeployment, "__init__", with_choice)
    click_deploy(panel)
    mode_line = panel.mode_line.value
    assert mode_line.startswith("Spark mode of mqo #1: <b>distributed</b> — asked for"), mode_line
    panel.close()


def test_the_partitions_view_projects_the_plan_over_the_panel_input():
    calls = []
    panel = make_panel(calls)
    view = panel.partitions
    view.counts = (1, 4)
    view.project().join(30)
    assert view.status.value.startswith("done"), view.status.value
    names = {t.name for t in view.figure.data}
    assert {"R[a] measured", "R[a] model", "S[a] measured", "S[a] model"} <= names
    measured = next(t for t in view.figure.data if t.name == "R[a] measured")
    assert list(measured.x) == [1, 4] and list(measured.y) == [1, 1]  # one row of R: in one partition
    assert not view.button.disabled and not calls  # projecting deploys nothing
    panel.close()


def test_an_empty_first_batch_draws_no_throughput_point():
    """Spark runs a deployment's first micro-batch before any input arrived; its progress
    report (0 rows) is no point of the chart — the first point is the first batch with input."""
    from mqjoin.widgets.charts import chart_series

    empty = pd.DataFrame([{"batch": 0, "input_rows": 0, "duration_ms": 300, "state_rows": 0}])
    assert chart_series("mqo #1", pd.DataFrame(), None, empty)["input tuples/s"] == []
    both = pd.concat([empty, pd.DataFrame([{"batch": 1, "input_rows": 500, "duration_ms": 250, "state_rows": 9}])])
    (name, x, y), = chart_series("native #1", pd.DataFrame(), None, both)["input tuples/s"]
    assert (x, y) == ([0.25], [2000.0])


def test_a_deploy_clicked_while_spark_warms_up_waits_for_it_and_stop_cancels_it(monkeypatch):
    """A start ahead under way (DeployPanel.prepare) is waited for: a deploy beside it would
    start the same Python processes and compile the same classes again on the same cores."""
    pytest.importorskip("pyspark")
    import mqjoin.runtime.spark.launch as launch
    import mqjoin.widgets.deploy_run as dp

    calls = []
    monkeypatch.setattr(launch, "deploy", lambda plan, data, out, **kw: calls.append(1)
                        or FakeDeployment(plan, "mqjoin"))
    monkeypatch.setattr(dp, "session_running", lambda: True)
    for stop in (False, True):
        panel = DeployPanel(lambda: optimize(W).plan, data=TABLES, refresh_seconds=0)
        assert dp.PREPARING.acquire(timeout=10)  # a start ahead under way
        try:
            panel.deploy_button.click()
            time.sleep(0.5)
            assert len(calls) == int(stop) and "starting" in panel.status.value
            if stop:
                panel.stop()
                assert panel.wait_started(5)  # cancelled while it waited, Spark untouched
        finally:
            dp.PREPARING.release()
        assert panel.wait_started(10) and len(calls) == 1
        assert len(panel.deployments) == int(not stop)
        assert [st["state"] for st in panel.run_state.values()] == ["stopped" if stop else "running"]
        panel.close()


def test_a_start_ahead_leaves_the_warm_up_to_a_deploy_already_waiting(monkeypatch):
    """Clicked while the JVM starts, a deploy runs its own first batch: the start ahead does
    not run a warm-up query first (the deploy would wait for it)."""
    import math

    pytest.importorskip("pyspark")
    import mqjoin.runtime.spark.session as session
    import mqjoin.widgets.deploy_run as dp

    warmed = []
    monkeypatch.setattr(session, "spark_session", lambda: "the session")
    monkeypatch.setattr(session, "warm_up", warmed.append)
    monkeypatch.setattr(dp, "session_running", lambda: False)
    monkeypatch.setattr(dp, "warmed", [-math.inf])
    monkeypatch.setattr(dp, "deploys_waiting", [1])
    dp.prepare_session()
    assert warmed == []
    monkeypatch.setattr(dp, "deploys_waiting", [0])
    dp.prepare_session()
    assert warmed == ["the session"]


def test_a_run_that_ends_after_a_reload_leaves_deploy_routed_to_the_live_page(kernel):
    """Deploy clicked on a page (subshell "old"), the page reloaded (its widgets answer the new
    page, subshell "new"), a late message of the old page handled, then the run ends on the
    deployment's thread and re-enables Deploy: the button's messages must still go to the new
    page's subshell — routed to the old one (deleted with its page) every click would be dropped."""
    calls = []
    request_from(kernel, None)  # the cell that shows the panel
    panel = make_panel(calls)
    button = panel.deploy_button
    request_from(kernel, "old")
    click_deploy(panel)
    d = None
    for _ in range(100):
        if panel.deployments:
            d = panel.deployments[0][1]
            break
        time.sleep(0.05)
    assert d is not None
    import threading

    def answer():  # the reloaded page asks for the button's state: the kernel answers on its subshell
        kernel.set_parent(b"", {"header": {"msg_id": "m-new2", "subshell_id": "new", "msg_type": "comm_msg"}})
        button.comm.publish_msg("comm_msg", data={"method": "update", "state": {}})

    t = threading.Thread(target=answer)
    t.start()
    t.join()
    assert button.comm._reply_subshell_for({}, None) == "new"
    request_from(kernel, "old")  # a late message of the page being unloaded
    done = threading.Thread(target=d.finish)  # the run ends on the deployment's thread
    done.start()
    done.join()
    assert panel.wait_idle(10)
    assert not button.disabled
    assert button.comm._reply_subshell_for({}, None) == "new"
    panel.close()


def test_pyspark_that_fails_to_import_is_said_with_its_cause_not_as_missing(monkeypatch):
    pytest.importorskip("pyspark")
    import importlib.util

    import mqjoin.runtime.spark.session as session

    monkeypatch.setattr(session, "PYSPARK_MODULES", (*session.PYSPARK_MODULES, "pyspark.sql.half_initialised"))
    with pytest.raises(EngineError, match="installed but failed to import .*half_initialised") as e:
        session.import_pyspark()
    assert e.value.__cause__ is not None  # the real error, with its traceback
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EngineError, match="needs pyspark: pip install"):
        session.import_pyspark()


def test_a_start_ahead_that_failed_does_not_say_spark_is_ready_and_logs_why(monkeypatch, caplog):
    """The start ahead's error (here pyspark's half-initialised module) is logged as a warning
    with its traceback, and the status line says Spark did not start, not that it is ready."""
    import logging
    import math

    pytest.importorskip("pyspark")
    import mqjoin.runtime.spark.session as session
    import mqjoin.widgets.deploy_run as dp

    def broken():
        raise ImportError("cannot import name 'SparkSession' from partially initialized module 'pyspark.sql'")

    monkeypatch.setattr(session, "spark_session", broken)
    monkeypatch.setattr(dp, "session_running", lambda: False)
    monkeypatch.setattr(dp, "warmed", [-math.inf])
    panel = DeployPanel(lambda: optimize(W).plan, refresh_seconds=0)
    with caplog.at_level(logging.WARNING, logger=dp.__name__):
        assert panel.prepare() and panel.wait_idle()
    assert "Spark is ready" not in panel.status.value
    assert "did not start ahead" in panel.status.value and "partially initialized" in panel.status.value
    [rec] = [r for r in caplog.records if "ahead of a deploy" in r.getMessage()]
    assert rec.levelno == logging.WARNING and rec.exc_info is not None
    panel.close()


def _deploying(calls):
    def fake_deploy(plan, data, out, engine, rate, **kw):
        calls.append(data)
        return FakeDeployment(plan, engine)

    return fake_deploy


def test_deploy_replays_a_folder_of_the_users_files_and_says_so(tmp_path):
    from mqjoin.model.tables import write_inputs

    write_inputs(TABLES, tmp_path, fmt="csv")
    calls = []
    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=_deploying(calls), refresh_seconds=0)
    assert panel.input.value == "synthetic" and panel.folder.layout.display == "none"
    panel.input.value = "folder"
    assert panel.folder.layout.display is None
    panel.deploy_button.click()  # no folder typed: said under the input, with where to type it
    assert "folder box" in html.unescape(panel.input_line.value) and calls == []
    assert "under the input menu" in panel.status.value
    panel.folder.value = str(tmp_path)
    assert str(tmp_path) in panel.input_line.value
    click_deploy(panel)
    assert calls == [str(tmp_path)]
    assert set(panel.partitions.data_provider()) == {"R", "S"}  # the Partitions view reads the same files
    panel.close()


def test_deploy_replays_tpch_at_the_chosen_scale_with_progress(monkeypatch, tmp_path):
    import mqjoin.datasets.tpch as tpch

    said = []

    class Streams:
        directory, rows = tmp_path, 86_000

    def fake_streams(sf, progress=None, **kw):
        said.append(sf)
        progress("generating the tables with tpchgen-cli …")
        return Streams()

    monkeypatch.setattr(tpch, "tpch_streams", fake_streams)
    calls = []
    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=_deploying(calls), refresh_seconds=0)
    panel.input.value = "tpch"
    panel.sf.value = 0.1
    assert "scale factor 0.1" in panel.input_line.value
    click_deploy(panel)
    assert said == [0.1] and calls == [str(tmp_path)]
    assert "86,000 tuples" in panel.input_line.value and str(tmp_path) in panel.input_line.value
    panel.deployments[0][1].finish()
    assert panel.wait_idle()
    panel.sf.value = 0
    panel.deploy_button.click()  # a scale factor of 0: the typed error under the input, no run
    assert "scale factor must be a positive number" in html.unescape(panel.input_line.value) and len(calls) == 1
    assert panel.sf.value == 0  # what was typed stays, to be corrected
    panel.close()


def test_a_panel_given_data_replays_it_and_says_so():
    calls = []
    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=_deploying(calls), data=TABLES, refresh_seconds=0)
    assert panel.input.value == "given" and "given to the panel" in panel.input_line.value
    click_deploy(panel)
    assert calls == [TABLES]
    panel.close()


def test_the_run_state_machine_without_widgets():
    """Runs: Stop during a start cancels it and the deployment it yields is stopped; a
    failure that is not transient fails the run and says what to do; the clock's line follows
    the run from its start to its first batch."""
    from mqjoin.widgets.deploy_run import ADVICE, Runs

    class D:
        done, plan = False, "a plan"

    runs = Runs()
    a = runs.begin("native", "mqo", 10.0, on_spark=False)
    assert a.label == "native #1" and runs.clock()[0] == "starting"
    starting, live = runs.cancel()
    assert starting == [a] and live == [] and runs.state[a.label]["state"] == "stopped"
    assert runs.started(a, D(), closed=False) is True  # cancelled meanwhile: the view stops it
    b = runs.begin("mqjoin", "mqo", 10.0, on_spark=False)
    d = D()
    assert runs.started(b, d, closed=False) is False and runs.busy() == ["mqo #2"]
    runs.wait_first(b.label, "mqo #2 running")
    assert runs.clock()[0] == "running" and "waiting for the first micro-batch" in runs.clock()[1]
    r = runs.event(b.label, d, {"kind": "batch", "results": 1})
    assert r.status == ("running", "mqo #2 running") and r.force and runs.clock() is None
    r = runs.event(b.label, d, {"kind": "status", "status": "failed", "error": "java.lang.OutOfMemoryError"})
    assert r.ended and r.status == ("error", f"mqo #2: java.lang.OutOfMemoryError — {ADVICE}")
    assert runs.state[b.label]["state"] == "failed" and runs.busy() == []
    assert [label for label, _ in runs.to_measure()] == ["native #1", "mqo #2"] and runs.to_measure() == []


def test_before_the_first_run_every_panel_draws_its_axes():
    """plotly draws a subplot's axes only when a trace lies on it: before a run the latency and
    state panels hold an empty trace each (the input panel has the rate target's line)."""
    panel = make_panel([])
    on = {(t.xaxis or "x", t.yaxis or "y") for t in panel.figure.data}
    assert on == {("x", "y"), ("x2", "y2"), ("x3", "y3")}
    assert panel.figure.layout.xaxis3.title.text == "seconds since the run started"


def _other_data(directory):
    """R and S over 10 s whose join selectivity (1/50) contradicts W's 0.5, as CSV files."""
    from mqjoin.model.tables import write_inputs

    cols = {"ts": [i / 10 for i in range(101)], "a": [i % 50 for i in range(101)]}
    return write_inputs({r: Table.from_columns(r, cols) for r in "RS"}, directory, fmt="csv")


def test_a_deploy_on_a_folder_plans_on_that_data_and_synthetic_goes_back(tmp_path):
    """With the explorer's model, a Deploy on a folder re-plans on the folder's statistics (said,
    with the stages on the input line while it measures) and deploys that plan; choosing synthetic
    streams goes back to the workload's own statistics."""
    from mqjoin.widgets.model import ExplorerModel

    model = ExplorerModel(W, debounce=0)
    calls, said = [], []
    panel = DeployPanel(model.current_plan, deploy_fn=_deploying(calls), refresh_seconds=0, plan_on=model.plan_on)
    panel.input_line.observe(lambda ch: said.append(ch["new"]), "value")
    panel.input.value = "folder"
    panel.folder.value = str(_other_data(tmp_path))
    click_deploy(panel)
    assert calls == [str(tmp_path)]
    assert model.result.plan.workload.defaults.horizon == 10.0  # planned over the folder's span
    assert model.workload.query("q").classes[0].selectivity == pytest.approx(0.02, rel=0.05)
    assert f"other data than {tmp_path}" in model.statistics and "measuring the statistics" in " ".join(said)
    assert str(tmp_path) in panel.input_line.value and "error" not in panel.status.value
    panel.deployments[0][1].finish()
    assert panel.wait_idle()
    panel.input.value = "synthetic"
    assert model.workload == W and model.statistics == ""
    panel.close()


def test_an_unreadable_folder_is_said_under_the_input_and_nothing_typed_is_lost(tmp_path):
    from mqjoin.widgets.model import ExplorerModel

    model = ExplorerModel(W, debounce=0)
    calls = []
    panel = DeployPanel(model.current_plan, deploy_fn=_deploying(calls), refresh_seconds=0, plan_on=model.plan_on)
    _other_data(tmp_path)
    (tmp_path / "S.csv").unlink()  # a relation's file missing
    panel.input.value = "folder"
    panel.folder.value = str(tmp_path)
    click_deploy(panel)
    assert calls == [] and "no input for relation S" in html.unescape(panel.input_line.value)
    assert "under the input menu" in panel.status.value and not panel.deploy_button.disabled
    assert panel.folder.value == str(tmp_path) and model.workload == W and model.statistics == ""
    (tmp_path / "R.csv").write_text("ts,a\n0.0,1\nnot a time,2\n")  # and a file that cannot be read
    (tmp_path / "S.csv").write_text("ts,a\n0.0,1\n")
    click_deploy(panel)
    assert calls == [] and "R.csv" in html.unescape(panel.input_line.value)
    panel.close()


def test_a_spark_deployment_reports_a_failure_again_when_its_query_ends():
    """Spark's side of the two tests above: a failure first recorded while the query ran (a
    batch's error, ``ended`` false) is reported again, ``ended`` true, when the query terminates
    with it; a failure at termination is reported once, ``ended`` true."""
    pytest.importorskip("pyspark")
    from mqjoin.runtime.spark.deployment import Deployment
    from mqjoin.runtime.spark.metrics import Metrics

    class Query:
        isActive = True

    def bare():
        d = object.__new__(Deployment)  # the reporting half only: no session, no input
        d.engine_name, d.error, d.status, d._stopping = "mqjoin", None, "running", False
        d._queries, d.metrics = {"plan": Query()}, Metrics("mqjoin", "driver", None)
        events = []
        d.subscribe(lambda ev: events.append(ev) if ev["kind"] == "status" else None)
        return d, events

    d, events = bare()
    d._fail(RuntimeError("SocketTimeoutException: Accept timed out"))  # a batch's error, the query still up
    Query.isActive = False
    d._on_listener("plan", "terminated", {"exception": "SocketTimeoutException: Accept timed out"})
    assert [(e["status"], e["ended"]) for e in events] == [("failed", False), ("failed", True)]
    assert events[0]["error"] == events[1]["error"] and d.status == "failed"

    d, events = bare()
    d._on_listener("plan", "terminated", {"exception": "java.net.SocketTimeoutException: connect back"})
    assert [(e["status"], e["ended"]) for e in events] == [("failed", True)]
