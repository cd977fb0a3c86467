"""The Deploy panel: one click runs the current plan on Spark, with live charts and a Stop button.

The panel never touches Spark itself: it calls a ``deploy`` function (by default
:func:`mqjoin.runtime.spark.launch.deploy`, imported only when the button is clicked) and
watches the returned deployment through its public interface only — ``subscribe`` (events
``batch``, ``query``, ``progress``, ``status``), the metrics frames ``batches`` / ``queries``
/ ``progress``, ``status``, ``total``, ``ui_url`` and ``stop()`` — so it is tested with a
fake deployment and no Spark.

* **One run at a time.**  Deploy is disabled while a run is live; finished runs stay and the
  next one overlays them.  Every run has its own row in the run table: its state, what
  happened (warnings and errors in words), tuples, tuples/s, result latency p50/p95, state
  rows, and whether it keeps up with its input.
* **One colour per run** in the three panels (throughput, latency, state) and one legend
  entry per run; latency is one line per run over all queries, or one dashed line per query
  behind the **per-query latency** toggle.  The input rate target is a grey dashed line; a
  point is drawn per micro-batch; the axes are there before the first run.
* **Guarded.**  Before a deploy the model estimates results and memory
  (:mod:`mqjoin.planning.guard`); past the limits the deploy is refused with what to change (and a
  **Deploy anyway** button), and a live run is stopped once past its budget.
* **Transient Spark warnings are not errors.**  A failure report that Spark recovers from
  (a Python worker slow to connect back, a socket time-out) while the run goes on is shown as
  a warning of that run; a real failure says what to do.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> panel = DeployPanel(lambda: optimize(w).plan, deploy_fn=None)
>>> panel.status.value
'<b>idle</b> — press Deploy to run the current plan on Spark'
>>> [t.name for t in panel.figure.data]
['input rate target']
"""

from __future__ import annotations

import html
import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import ipywidgets as W
import plotly.graph_objects as go

from mqjoin.widgets.charts import CHART_ROWS, RUN_COLOURS, run_series, run_summary
from mqjoin.model.errors import MqjoinError
from mqjoin.support.units import count

from mqjoin.widgets._controls import typeable
from mqjoin.widgets._html import error_box, esc, state_html, table
from mqjoin.widgets.guarded import GuardedPanel, RunGuard, tables_duration

#: Spark reports that are not failures of the run when the run goes on (substrings)
TRANSIENT = ("SocketTimeoutException", "connect back", "Accept timed out", "Connection reset",
             "BlockManager", "heartbeat")
ADVICE = ("press Deploy to try again; if it fails the same way, restart the kernel (a fresh Spark session) "
          "or lower the rate")


def _default_deploy(plan, data, out, **kw):
    from mqjoin.runtime.spark.launch import deploy

    return deploy(plan, data, out, **kw)


def _starting_message(engine: str, on_spark: bool) -> str:
    """What a click on Deploy waits for: a cold start names the JVM and its Python workers.

    >>> _starting_message("mqjoin", False)
    'starting mqjoin …'
    """
    if not on_spark:
        return f"starting {engine} …"
    from mqjoin.runtime.spark.session import session_running

    if session_running():
        return f"starting {engine} on the running Spark session — the first micro-batch follows in a second or two …"
    return (f"starting a Spark session for {engine} (the JVM and its Python workers: ~10–20 s the first time; "
            "later deploys reuse it) …")


def _synthetic_data(plan, duration: float):
    from mqjoin.datasets.uniform import uniform_streams

    return uniform_streams(plan.workload, duration=duration, seed=0)


def is_transient(message: str) -> bool:
    """Whether a Spark report is one of the transient kinds (:data:`TRANSIENT`).

    >>> is_transient("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back")
    True
    >>> is_transient("the mqjoin deployment failed: AnalysisException: column x not found")
    False
    """
    return any(t.lower() in (message or "").lower() for t in TRANSIENT)


def local_ui_url(url: str | None, host: str | None = None) -> str | None:
    """The Spark UI address as the user's browser reaches it: the driver binds to the
    container's address, the browser sees the notebook's host — ``host`` (default: the
    environment's ``MQJOIN_UI_HOST``, else ``127.0.0.1`` for a local session).

    >>> local_ui_url("http://172.17.0.5:4040")
    'http://127.0.0.1:4040'
    >>> local_ui_url("http://172.17.0.5:4041", host="lab.example.org"), local_ui_url(None)
    ('http://lab.example.org:4041', None)
    """
    if not url:
        return None
    parts = urlsplit(url)
    host = host or os.environ.get("MQJOIN_UI_HOST") or "127.0.0.1"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _seconds(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g} s"


class DeployPanel(GuardedPanel, W.VBox):
    """Deploy the plan returned by ``plan_provider()``; see the module doc."""

    def __init__(self, plan_provider: Callable[[], Any], deploy_fn: Callable | None = _default_deploy,
                 data: Any = None, refresh_seconds: float = 1.0, **deploy_kwargs):
        self.plan_provider = plan_provider
        self.deploy_fn = deploy_fn
        self.data = data
        self.refresh_seconds = refresh_seconds
        self.deploy_kwargs = deploy_kwargs
        self.deployments: list[tuple[str, Any]] = []
        #: per run label: its state and what happened to it (a warning or the error), in words
        self.run_state: dict[str, dict[str, str]] = {}
        self.guard = RunGuard()
        #: called with what a run counted (:class:`~mqjoin.planning.measured.RunCounts`) when it ends
        self.on_measured: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self._first_batch: dict[str, str] = {}  # run → its status line, until its first micro-batch
        self.engine = W.ToggleButtons(options=[("plan", "mqjoin"), ("native", "native")], value="mqjoin",
                                      description="engine", style={"button_width": "70px"})
        self.rate = W.FloatLogSlider(value=2000, base=10, min=1, max=6, step=0.1, description="input tuples/s",
                                     continuous_update=False, style={"description_width": "90px"})
        self.duration = W.FloatSlider(value=5.0, min=1.0, max=60.0, step=1.0, description="event s",
                                      continuous_update=False)
        self.per_query = W.Checkbox(value=False, description="per-query latency", indent=False,
                                    layout=W.Layout(width="150px"))
        self.deploy_button = W.Button(description="Deploy", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.anyway_button = W.Button(description="Deploy anyway (stops at the budget)", button_style="warning",
                                      layout=W.Layout(width="auto", display="none"))
        self.status = W.HTML("<b>idle</b> — press Deploy to run the current plan on Spark")
        self.runs_table = W.HTML("")
        self.ui_link = W.HTML("")
        self.figure = go.FigureWidget(self._empty_figure())
        self.deploy_button.on_click(lambda _: self.deploy())
        self.anyway_button.on_click(lambda _: self.deploy(force=True))
        self.stop_button.on_click(lambda _: self.stop())
        self.per_query.observe(lambda _: self._redraw(force=True), "value")
        self.rate.observe(lambda _: self._redraw(force=True), "value")
        controls = W.HBox([self.engine, self.deploy_button, self.stop_button, self.anyway_button],
                          layout=W.Layout(flex_flow="row wrap"))
        settings = W.HBox([typeable(self.rate), typeable(self.duration), self.per_query],
                          layout=W.Layout(flex_flow="row wrap"))
        super().__init__([controls, settings, self.status, self.runs_table, self.ui_link, self.figure])

    def _empty_figure(self) -> go.Figure:
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=CHART_ROWS, vertical_spacing=0.09)
        fig.update_layout(height=540, width=1150, margin={"t": 40, "b": 40, "l": 70, "r": 20}, legend={"orientation": "h",
                          "y": -0.12}, template="plotly_white")
        fig.update_xaxes(title_text="seconds since the run started", row=3, col=1)
        fig.update_xaxes(range=[0, max(5.0, self.duration.value + 5.0)])
        fig.update_yaxes(rangemode="tozero")
        fig.add_scatter(x=[0, 1e6], y=[self.rate.value] * 2, name="input rate target", mode="lines",
                        line={"color": "#888", "dash": "dash", "width": 1}, row=1, col=1, hoverinfo="name+y")
        return fig

    # -- actions --------------------------------------------------------------------------------

    def _live(self) -> list[tuple[str, Any]]:
        return [(label, d) for label, d in self.deployments if self.run_state[label]["state"] in ("starting", "running")]

    def deploy(self, force: bool = False) -> Any:
        """Deploy the current plan with the chosen engine; errors go to the status line.

        Refused while a run is live (Deploy is disabled then), and when the model estimates
        the run past :attr:`guard`'s limits unless ``force`` (the **Deploy anyway** button)."""
        self.anyway_button.layout.display = "none"
        if self.deploy_fn is None:
            self._set_status("error", "no deploy function configured")
            return None
        if self._live():
            self._set_status("running", f"{self._live()[0][0]} is still running: stop it or wait for it to finish")
            return None
        try:
            plan = self.plan_provider()
            # tables: their span; a data directory: the event seconds chosen (its statistics are the workload's)
            duration = tables_duration(self.data) if isinstance(self.data, Mapping) else self.duration.value
            refusal = self.guard.check(plan.workload, duration, plan)
            if refusal is not None and not force:
                self._set_status("error", f"not deployed — {refusal}")
                self.anyway_button.layout.display = None
                return None
            data = self.data if self.data is not None else _synthetic_data(plan, self.duration.value)
            out = tempfile.mkdtemp(prefix="mqjoin-deploy-")
            self._set_status("starting", _starting_message(self.engine.value, self.deploy_fn is _default_deploy))
            self.deploy_button.disabled = True  # a cold Spark session takes seconds: no second click meanwhile
            kw = dict(self.deploy_kwargs)
            kw.setdefault("max_rows_per_batch", max(1, math.ceil(self.rate.value / 2)))  # ~2 points a second
            d = self.deploy_fn(plan, data, out, engine=self.engine.value, rate=self.rate.value, **kw)
        except MqjoinError as e:
            self.deploy_button.disabled = False
            self._set_status("error", f"{e} — {ADVICE}")
            return None
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            self.deploy_button.disabled = False
            self._set_status("error", f"{type(e).__name__}: {e} — {ADVICE}")
            return None
        label = f"{self.engine.value if self.engine.value == 'native' else plan.mode} #{len(self.deployments) + 1}"
        with self._lock:
            self.deployments.append((label, d))
            self.run_state[label] = {"state": "running", "note": "", "rate": self.rate.value}
        budget = self.guard.watch(label, d.stop, lambda msg: self._on_budget(label, msg))
        produced = [0]

        def on_event(ev: dict) -> None:
            if ev.get("kind") == "batch":
                produced[0] += int(ev.get("results") or 0)
                budget(produced[0], float(ev.get("state_rows") or 0))
            self._on_event(label, d, ev)

        d.subscribe(on_event)
        url = local_ui_url(getattr(d, "ui_url", None))
        self.ui_link.value = (f'Spark UI of {esc(label)}: <a href="{html.escape(url)}" target="_blank">'
                              f"{html.escape(url)}</a>" if url else "")
        self.deploy_button.disabled = True
        self.stop_button.disabled = False
        total = getattr(d, "total", None)
        # the model's estimate describes the synthetic input (a given data set has its own size)
        expect = f" · {self.guard.estimate.summary()}" if self.data is None else ""
        running = (f"{label} running — {count(total)} input tuples at {count(self.rate.value)} tuples/s{expect}"
                   if total else f"{label} running")
        with self._lock:
            self._first_batch[label] = running
        self._set_status("running", f"{running} — waiting for the first micro-batch (its Python workers start "
                         "with it) …")
        self._redraw(force=True)
        return d

    def stop(self) -> None:
        """Stop the running deployment (its results and curves stay)."""
        for label, d in self._live():
            try:
                d.stop()
            except MqjoinError as e:
                self.run_state[label]["note"] = str(e)
            self.run_state[label]["state"] = "stopped"
        self._ended()
        self._set_status("stopped", "stopped; deploy again to overlay another run")

    def _ended(self) -> None:
        self.stop_button.disabled = not self._live()
        self.deploy_button.disabled = bool(self._live())
        self._redraw(force=True)
        self._measured()

    def _measured(self) -> None:
        """Hand what the runs that ended counted per store to :attr:`on_measured`."""
        from mqjoin.planning.measured import store_counts

        for label, d in self.deployments:
            st = self.run_state[label]
            if st["state"] in ("starting", "running") or st.get("measured") or getattr(d, "plan", None) is None:
                continue
            st["measured"] = "yes"
            counts = store_counts(label, d.plan, getattr(d, "stores", None), getattr(d, "tables", {}))
            for f in self.on_measured if counts is not None else ():
                f(counts)

    # -- live updates ---------------------------------------------------------------------------

    def _on_budget(self, label: str, msg: str) -> None:
        self.run_state[label].update(state="stopped", note=msg)
        self._ended()
        self._set_status("stopped", f"{label} {msg}")

    def _on_event(self, label: str, d: Any, ev: dict) -> None:
        kind = ev.get("kind")
        st = self.run_state[label]
        if kind == "status":
            new, err = ev.get("status"), ev.get("error") or ""
            if new == "failed":
                if is_transient(err):
                    st["note"] = f"Spark warned (the run goes on): {err}"
                else:
                    st.update(state="failed", note=f"{err} — {ADVICE}")
                    self._set_status("error", f"{label}: {err} — {ADVICE}")
            elif new in ("finished", "stopped"):
                st["state"] = new if st["state"] != "stopped" else "stopped"
                self._set_status(st["state"], f"{label} {st['state']}" +
                                 (" — all input consumed" if new == "finished" else ""))
            if new in ("finished", "stopped", "failed"):
                self._ended()
                return
        elif kind in ("batch", "query", "progress"):
            with self._lock:
                running = self._first_batch.pop(label, None) if kind == "batch" else None
            if running is not None and st["state"] == "running":
                self._set_status("running", running)
            if st["state"] == "failed":  # it failed, yet goes on: that report was a warning
                st.update(state="running", note=f"Spark warned (the run goes on): {st['note'].split(' — ')[0]}")
            if getattr(d, "done", False) and st["state"] == "running":
                st["state"] = "finished"
                self._ended()
                self._set_status("finished", f"{label} finished — all input consumed")
                return
        self._redraw(force=kind == "status")

    def _redraw(self, force: bool = False) -> None:
        now = time.time()
        if not force and now - self._last_draw < self.refresh_seconds:
            return
        self._last_draw = now
        with self._lock:
            runs = list(self.deployments)
        traces, rows = [], []
        x_max = self.duration.value + 5.0
        for k, (label, d) in enumerate(runs):
            colour = RUN_COLOURS[k % len(RUN_COLOURS)]
            st = self.run_state.get(label, {"state": "running", "note": "", "rate": None})
            batches, queries, progress = d.batches, d.queries, d.progress
            first = True
            for row, panel in enumerate(CHART_ROWS, start=1):
                for name, x, y, dash in run_series(label, batches, queries, progress, per_query=self.per_query.value)[panel]:
                    x_max = max([x_max, *x])
                    traces.append(dict(x=x, y=y, name=label if first else name, legendgroup=label, showlegend=first,
                                       meta=name,  # the line's full name (the legend shows the run's)
                                       mode="lines+markers", line={"color": colour, "dash": dash},
                                       marker={"color": colour, "size": 5}, hovertemplate=f"{esc(name)}: %{{y:.4g}}<extra></extra>",
                                       xaxis="x" if row == 1 else f"x{row}", yaxis="y" if row == 1 else f"y{row}"))
                    first = False
            s = run_summary(batches, queries, progress, rate=st.get("rate"), total=getattr(d, "total", None))
            swatch = f'<span style="color:{colour};font-size:16px">■</span> {esc(label)}'
            note = s.behind if s.behind and st["state"] == "running" else st["note"]
            rows.append([swatch, state_html(st["state"]), count(s.tuples),
                         "—" if s.tuples_per_s is None else count(s.tuples_per_s), _seconds(s.latency_p50),
                         _seconds(s.latency_p95), "—" if s.state_rows is None else count(s.state_rows), esc(note or "")])
        target = dict(x=[0, 1e6], y=[self.rate.value] * 2, name=f"input rate target ({count(self.rate.value)} tuples/s)",
                      mode="lines", line={"color": "#888", "dash": "dash", "width": 1}, xaxis="x", yaxis="y",
                      showlegend=True, hoverinfo="name")
        with self.figure.batch_update():
            self.figure.data = []
            self.figure.add_scatter(**target)
            for t in traces:
                self.figure.add_scatter(**t)
            self.figure.update_xaxes(range=[0, x_max])
        self.runs_table.value = table(["run", "state", "tuples", "tuples/s", "latency p50", "latency p95",
                                       "state rows", "notes"], rows, raw=True) if rows else ""

    def _set_status(self, state: str, text: str) -> None:
        self.status.value = f"{state_html(state)} — {html.escape(text)}"
