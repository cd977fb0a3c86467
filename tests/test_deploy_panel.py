"""The Deploy panel without Spark: a fake deployment feeds events, the charts must follow."""

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from mqjoin.errors import EngineError  # noqa: E402
from mqjoin.optimizer import optimize  # noqa: E402
from mqjoin.tables import Table  # noqa: E402
from mqjoin.widgets.deploy_panel import DeployPanel  # noqa: E402
from mqjoin.workload import parse_workload  # noqa: E402

W = parse_workload("""
defaults: {selectivity: 0.5}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
TABLES = {"R": Table.from_columns("R", {"ts": [0.0], "a": [1]}), "S": Table.from_columns("S", {"ts": [0.5], "a": [1]})}


class FakeDeployment:
    def __init__(self, plan, engine):
        self.plan, self.engine_name, self.total, self.done = plan, engine, 2, False
        self.ui_url = "http://127.0.0.1:4040"
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

    def subscribe(self, f):
        self.subs.append(f)

    def stop(self):
        self.stopped = True

    def batch(self, k, rows, state):
        self.rows.append({"batch": k, "input_rows": rows, "started": 100.0 + k, "seconds": 0.5, "state_rows": state})
        self.qrows.append({"batch": k, "query": "q", "results": 1, "started": 100.0 + k, "seconds": 0.5,
                           "latency_mean": 0.7, "latency_p95": 0.9, "latency_max": 1.0})
        for f in self.subs:
            f({"kind": "batch", "batch": k, "input_rows": rows})


def make_panel(calls):
    def fake_deploy(plan, data, out, engine, rate, **kw):
        calls.append((plan, data, engine, rate))
        return FakeDeployment(plan, engine)

    return DeployPanel(lambda: optimize(W).plan, deploy_fn=fake_deploy, data=TABLES, refresh_seconds=0)


def trace(panel, name):
    return next(t for t in panel.figure.data if t.name == name)


def test_deploy_click_runs_current_plan_and_charts_grow():
    calls = []
    panel = make_panel(calls)
    panel.deploy_button.click()
    assert len(calls) == 1 and calls[0][2] == "mqjoin" and calls[0][1] is TABLES
    d = panel.deployments[0][1]
    assert "running" in panel.status.value and "4040" in panel.ui_link.value
    assert panel.stop_button.disabled is False
    d.batch(0, 1000, 50)
    thr = trace(panel, "mqo #1 throughput")
    assert list(thr.y) == [2000.0]
    d.batch(1, 500, 80)
    assert list(trace(panel, "mqo #1 throughput").y) == [2000.0, 1000.0]
    assert list(trace(panel, "mqo #1 state").y) == [50.0, 80.0]
    assert list(trace(panel, "mqo #1 q latency").y) == [0.7, 0.7]


def test_second_deployment_overlays_and_stop_stops_all():
    calls = []
    panel = make_panel(calls)
    panel.deploy_button.click()
    panel.engine.value = "native"
    panel.deploy_button.click()
    assert [c[2] for c in calls] == ["mqjoin", "native"]
    panel.deployments[0][1].batch(0, 10, 1)
    panel.deployments[1][1].batch(0, 20, 2)
    names = {t.name for t in panel.figure.data}
    assert {"mqo #1 throughput", "native #2 throughput"} <= names
    panel.stop_button.click()
    assert all(d.stopped for _, d in panel.deployments)
    assert "stopped" in panel.status.value and panel.stop_button.disabled


def test_deploy_error_is_shown_not_raised():
    def failing(plan, data, out, **kw):
        raise EngineError("could not start Spark (spark://nowhere:7077): connection refused")

    panel = DeployPanel(lambda: optimize(W).plan, deploy_fn=failing, data=TABLES)
    assert panel.deploy() is None
    assert "error" in panel.status.value and "connection refused" in panel.status.value
    assert panel.deployments == []


def test_failure_event_reaches_status_line():
    calls = []
    panel = make_panel(calls)
    panel.deploy_button.click()
    d = panel.deployments[0][1]
    for f in d.subs:
        f({"kind": "status", "status": "failed", "error": "the mqjoin deployment failed: boom"})
    assert "boom" in panel.status.value and "error" in panel.status.value
