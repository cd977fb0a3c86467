"""The Deploy panel: one click runs the current plan on Spark, with live charts and a Stop button.

The panel never touches Spark itself: it calls a ``deploy`` function (by default
:func:`mqjoin.runtime.spark.deploy.deploy`, imported only when the button is clicked) and
watches the returned deployment through ``subscribe`` — so it is tested with a fake
deployment and no Spark.  Each deployment (the current plan, ``native``, an ``individual``
plan …) adds its own curves to the same three panels (throughput, latency, state).

>>> from mqjoin.workload import parse_workload
>>> from mqjoin.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> panel = DeployPanel(lambda: optimize(w).plan, deploy_fn=None)
>>> panel.status.value
'<b>idle</b> — press Deploy to run the current plan on Spark'
"""

from __future__ import annotations

import html
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as W
import plotly.graph_objects as go

from mqjoin.charts import CHART_ROWS, chart_series
from mqjoin.errors import MqjoinError

from ._html import state_html


def _default_deploy(plan, data, out, **kw):
    from mqjoin.runtime.spark.deploy import deploy

    return deploy(plan, data, out, **kw)


def _synthetic_data(plan, duration: float):
    from mqjoin.synthetic import uniform_streams

    return uniform_streams(plan.workload, duration=duration, seed=0)


class DeployPanel(W.VBox):
    """Deploy the plan returned by ``plan_provider()``; see the module doc."""

    def __init__(self, plan_provider: Callable[[], Any], deploy_fn: Callable | None = _default_deploy,
                 data: Any = None, refresh_seconds: float = 1.0, **deploy_kwargs):
        self.plan_provider = plan_provider
        self.deploy_fn = deploy_fn
        self.data = data
        self.refresh_seconds = refresh_seconds
        self.deploy_kwargs = deploy_kwargs
        self.deployments: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self.engine = W.ToggleButtons(options=[("plan", "mqjoin"), ("native", "native")], value="mqjoin",
                                      description="engine")
        self.rate = W.FloatLogSlider(value=2000, base=10, min=1, max=6, step=0.1, description="tuples/s",
                                     continuous_update=False)
        self.duration = W.FloatSlider(value=5.0, min=1.0, max=60.0, step=1.0, description="event s",
                                      continuous_update=False)
        self.deploy_button = W.Button(description="Deploy", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.status = W.HTML("<b>idle</b> — press Deploy to run the current plan on Spark")
        self.ui_link = W.HTML("")
        self.figure = go.FigureWidget(self._empty_figure())
        self.deploy_button.on_click(lambda _: self.deploy())
        self.stop_button.on_click(lambda _: self.stop())
        controls = W.HBox([self.engine, self.deploy_button, self.stop_button])
        super().__init__([controls, W.HBox([self.rate, self.duration]), self.status, self.ui_link, self.figure])

    @staticmethod
    def _empty_figure() -> go.Figure:
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=CHART_ROWS, vertical_spacing=0.08)
        fig.update_layout(height=560, margin={"t": 40, "b": 30}, legend={"orientation": "h"})
        fig.update_xaxes(title_text="seconds since deployment", row=3, col=1)
        return fig

    # -- actions --------------------------------------------------------------------------------

    def deploy(self) -> Any:
        """Deploy the current plan with the chosen engine; errors go to the status line."""
        if self.deploy_fn is None:
            self._set_status("error", "no deploy function configured")
            return None
        try:
            plan = self.plan_provider()
            data = self.data if self.data is not None else _synthetic_data(plan, self.duration.value)
            out = tempfile.mkdtemp(prefix="mqjoin-deploy-")
            self._set_status("starting", f"starting {self.engine.value} on Spark …")
            d = self.deploy_fn(plan, data, out, engine=self.engine.value, rate=self.rate.value,
                               **self.deploy_kwargs)
        except MqjoinError as e:
            self._set_status("error", str(e))
            return None
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            self._set_status("error", f"{type(e).__name__}: {e}")
            return None
        label = f"{self.engine.value if self.engine.value == 'native' else plan.mode} #{len(self.deployments) + 1}"
        with self._lock:
            self.deployments.append((label, d))
        d.subscribe(lambda ev, d=d, label=label: self._on_event(label, d, ev))
        url = getattr(d, "ui_url", None)
        self.ui_link.value = f'Spark UI: <a href="{html.escape(url)}" target="_blank">{html.escape(url)}</a>' if url else ""
        self.stop_button.disabled = False
        self._set_status("running", f"{label} running — {d.total:,} input tuples" if getattr(d, "total", None)
                         else f"{label} running")
        return d

    def stop(self) -> None:
        """Stop every running deployment (their results and curves stay)."""
        for _, d in self.deployments:
            try:
                d.stop()
            except MqjoinError as e:
                self._set_status("error", str(e))
        self.stop_button.disabled = True
        self._redraw(force=True)
        self._set_status("stopped", "stopped; deploy again to overlay another run")

    # -- live updates ---------------------------------------------------------------------------

    def _on_event(self, label: str, d: Any, ev: dict) -> None:
        kind = ev.get("kind")
        if kind == "status" and ev.get("status") == "failed":
            self._set_status("error", f"{label}: {ev.get('error')}")
        elif kind in ("batch", "query", "progress"):
            done = getattr(d, "done", False)
            seen = f", {ev['input_rows']:,} tuples in batch {ev['batch']}" if kind == "batch" else ""
            self._set_status("finished" if done else "running", f"{label}{seen}" + (" — all input consumed" if done else ""))
        self._redraw(force=kind == "status")

    def _redraw(self, force: bool = False) -> None:
        now = time.time()
        if not force and now - self._last_draw < self.refresh_seconds:
            return
        self._last_draw = now
        traces = []
        with self._lock:
            runs = list(self.deployments)
        for label, d in runs:
            series = chart_series(label, d.batches, d.queries, d.progress)
            for row, panel in enumerate(CHART_ROWS, start=1):
                for name, x, y in series[panel]:
                    traces.append((row, name, x, y))
        with self.figure.batch_update():
            existing = {t.name: t for t in self.figure.data}
            for row, name, x, y in traces:
                if name in existing:
                    existing[name].x, existing[name].y = x, y
                else:
                    self.figure.add_scatter(x=x, y=y, name=name, mode="lines+markers", row=row, col=1)

    def _set_status(self, state: str, text: str) -> None:
        self.status.value = f"{state_html(state)} — {html.escape(text)}"
