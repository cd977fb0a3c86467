"""The Deploy panel: one click runs the current plan on Spark, with live charts and a Stop button.

The panel never touches Spark itself: it calls a ``deploy`` function (by default
:func:`mqjoin.runtime.spark.launch.deploy`, imported only when the button is clicked) and
watches the returned deployment through its public interface only — ``subscribe`` (events
``batch``, ``query``, ``progress``, ``status``), the metrics frames ``batches`` / ``queries``
/ ``progress``, ``status``, ``total``, ``ui_url`` and ``stop()`` — so it is tested with a
fake deployment and no Spark.

* **Never blocks the kernel.**  A click returns at once: the run starts (its input, the
  Spark session, the JVM) on a thread of its own while the status line counts the seconds and
  says what it waits for; **Stop** cancels a start at once (the deployment it yields is stopped
  as soon as it exists) and stops a running deployment off the kernel's thread.  Charts are
  redrawn at most once per ``refresh_seconds`` off the deployment's thread
  (:class:`~mqjoin.widgets.live.Redraw`), each redraw one whole-figure message
  (:func:`~mqjoin.widgets.figures.sync_figure`).
* **Starts ahead.**  :meth:`DeployPanel.prepare` (the explorer calls it when the Deploy tab
  opens) starts the Spark session and runs a tiny deployment's path once
  (:func:`~mqjoin.runtime.spark.session.warm_up`: the classes a fresh JVM compiles on a first
  batch, the Python workers), so a Deploy clicked a little later starts warm; a Deploy
  clicked meanwhile waits for it rather than doing the same work beside it.  A run that
  consumed its input is stopped (its query would poll the source for ever), and a run's
  first batch with input is drawn at once.
* **Keeps up by default.**  A micro-batch takes whatever input has arrived, up to
  :data:`BATCH_SECONDS` of it, so a run that fell behind catches up in bigger batches (a cap
  of half a second of input kept a run that fell behind from ever catching up:
  ``benchmarks/RESULTS.md``, "Deploy → first point, and whether the default run keeps up").
* **One run at a time.**  Deploy is disabled while a run is live; finished runs stay and the
  next one overlays them.  Every run has its own row in the run table: its state, what
  happened (warnings and errors in words), tuples, tuples/s, result latency p50/p95, state
  rows, and whether it keeps up with its input.
* **One colour per run** in the three panels (throughput, latency, state) and one legend
  entry per run; latency is one line per run over all queries, or one dashed line per query
  behind the **per-query latency** toggle.  The input rate target is a grey dashed line; a
  point is drawn per micro-batch; the axes are there before the first run.
* **Where the stores live, and the skew.**  A line under the status says which Spark mode a
  Deploy would run (``--spark-mode auto``'s choice for the plan over the input, and why), then
  the mode the run has; *Partitions* projects every store's rows per partition at 8, 32 and
  128 partitions (:mod:`~mqjoin.widgets.partitions_view`).
* **Guarded.**  Before a deploy the model estimates results and memory
  (:mod:`mqjoin.planning.guard`); past the limits the deploy is refused with what to change (and a
  **Deploy anyway** button), and a live run is stopped once past its budget.
* **Replays the data the workload describes.**  The *input* menu chooses what a Deploy replays:
  synthetic uniform streams at the workload's rates (the event seconds chosen), the bundled
  TPC-H data at a chosen scale factor (generated once with ``tpchgen-cli`` and cached, as
  ``mqjoin data tpch`` does, the progress on the input line), a folder of the user's own files
  (``R.csv`` or ``R.parquet`` per relation, with a ``ts`` column), or the data given to the
  panel; the line under the menu says which one the runs replay.  Given ``plan_on`` (the
  explorer's model's :meth:`~mqjoin.widgets.model.ExplorerModel.plan_on`), a Deploy on data
  first plans on that data — its statistics checked and measured again where they disagree, the
  stages on the input line, every tab re-planned — and deploys that plan; choosing synthetic
  streams goes back to the workload's own statistics.  An input that cannot be read is said on
  the input line, under the control that chose it, and nothing typed is cleared.
* **Transient Spark warnings are not errors.**  A failure report that Spark recovers from
  (a Python worker slow to connect back, a socket time-out) while the run goes on is shown as
  a warning of that run; a real failure says what to do — as does the same report when the run
  ended with it (the deployment says so, at once or when its query ends).

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
>>> [(t.name, t.yaxis) for t in panel.figure.data]  # no run yet: an empty trace per panel draws its axes
[('input rate target (2,000 tuples/s)', 'y'), (None, 'y'), (None, 'y2'), (None, 'y3')]
>>> panel.input.value, panel.input_line.value
('synthetic', 'replays synthetic uniform streams at the workload’s rates (the event seconds chosen)')
>>> panel.input.value = "tpch"; panel.input_line.value
'replays the bundled TPC-H data at scale factor 0.01 (generated on the first Deploy, then cached)'
"""

from __future__ import annotations

import html
import logging
import math
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as W
# imported here, on the kernel's thread: first imported on a start thread, a half-initialised
# pandas would be visible to plotly's checks on the kernel's thread meanwhile (AttributeError)
import pandas  # noqa: F401  (imported for that effect alone)

from mqjoin.widgets import deploy_run as run
from mqjoin.widgets.charts import CHART_ROWS, RUN_COLOURS, empty_panels, run_series, run_summary
from mqjoin.model.errors import MqjoinError
from mqjoin.support.threads import join_threads
from mqjoin.support.units import count

from mqjoin.widgets._controls import typeable
from mqjoin.widgets._kernel import spawn, unbound
from mqjoin.widgets._html import error_box, esc, state_html, table
from mqjoin.widgets.figures import new_figure_widget, sync_figure
from mqjoin.widgets.guarded import CLOSE_WAIT, GuardedPanel, RunGuard, tables_duration
from mqjoin.widgets.live import Redraw
from mqjoin.widgets.partitions_view import PartitionsView

_log = logging.getLogger(__name__)
#: the name of the thread that starts a run (its input, then the deploy function)
START_THREAD = "mqjoin-deploy-start"


def _seconds(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g} s"


class DeployPanel(GuardedPanel, W.VBox):
    """Deploy the plan returned by ``plan_provider()``; see the module doc."""

    def __init__(self, plan_provider: Callable[[], Any], deploy_fn: Callable | None = run.default_deploy,
                 data: Any = None, refresh_seconds: float = 1.0,
                 plan_on: Callable[[Any, Callable[[str], None]], Any] | None = None, **deploy_kwargs):
        self.plan_provider = plan_provider
        #: ``plan_on(data, progress)``: the plan for a run over the data a Deploy replays (None:
        #: synthetic streams), from any thread; None: the current plan whatever the input
        self.plan_on = plan_on
        self.deploy_fn = deploy_fn
        self.data = data
        self.refresh_seconds = refresh_seconds
        self.deploy_kwargs = deploy_kwargs
        #: the runs and their states (the state machine: :class:`~mqjoin.widgets.deploy_run.Runs`)
        self.runs = run.Runs()
        self.deployments = self.runs.deployments
        #: per run label: its state and what happened to it (a warning or the error), in words
        self.run_state = self.runs.state
        self.guard = RunGuard()
        #: called with what a run counted (:class:`~mqjoin.planning.measured.RunCounts`) when it ends
        self.on_measured: list[Callable[[Any], None]] = []
        self._lock = self.runs.lock
        self._threads: list[threading.Thread] = []  # starts, stops and the status clock (joined by close())
        self._clock: threading.Thread | None = None
        self._closed = threading.Event()
        self.engine = W.ToggleButtons(options=[("plan", "mqjoin"), ("native", "native")], value="mqjoin",
                                      description="engine", style={"button_width": "70px"})
        self.rate = W.FloatLogSlider(value=run.DEFAULT_RATE, base=10, min=1, max=6, step=0.1,
                                     description="input tuples/s", continuous_update=False,
                                     style={"description_width": "90px"})
        self.duration = W.FloatSlider(value=run.DEFAULT_SECONDS, min=1.0, max=60.0, step=1.0, description="event s",
                                      continuous_update=False)
        self.per_query = W.Checkbox(value=False, description="per-query latency", indent=False,
                                    layout=W.Layout(width="150px"))
        #: what a Deploy replays (see the module doc), its scale factor or folder, and the line saying it
        given = [("the data given to the panel", "given")] if data is not None else []
        self.input = W.Dropdown(options=[*given, *run.INPUTS], value="given" if given else "synthetic",
                                description="input", layout=W.Layout(width="360px"))
        self.sf = W.FloatText(value=0.01, description="SF", layout=W.Layout(width="150px", display="none"),
                              tooltip="TPC-H scale factor (0.01: about 86,000 tuples)")
        self.folder = W.Text(description="folder", placeholder="a folder with R.csv or R.parquet per relation",
                             layout=W.Layout(width="420px", display="none"))
        self.input_line = W.HTML("")
        for c in (self.input, self.sf, self.folder):
            c.observe(self._on_input, "value")
        self.deploy_button = W.Button(description="Deploy", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.anyway_button = W.Button(description="Deploy anyway (stops at the budget)", button_style="warning",
                                      layout=W.Layout(width="auto", display="none"))
        self.status = W.HTML("<b>idle</b> — press Deploy to run the current plan on Spark")
        #: where the plan's stores will live (before a deploy) or live (after it), and why
        self.mode_line = W.HTML("")
        self.runs_table = W.HTML("")
        self.ui_link = W.HTML("")
        self._base_layout = self._chart_layout()
        self.figure = new_figure_widget([self._target_trace(), *empty_panels(self._base_layout)],
                                        self._layout(self.duration.value + 5.0))
        self._draws = Redraw(self._draw, min_interval=refresh_seconds)
        self.deploy_button.on_click(lambda _: self.deploy())
        self.anyway_button.on_click(lambda _: self.deploy(force=True))
        self.stop_button.on_click(lambda _: self.stop())
        self.per_query.observe(lambda _: self._redraw(force=True), "value")
        self.rate.observe(lambda _: self._redraw(force=True), "value")
        self.engine.observe(lambda _: self._refresh_mode_later(), "value")
        self.duration.observe(lambda _: self._refresh_mode_later(), "value")
        controls = W.HBox([self.engine, self.deploy_button, self.stop_button, self.anyway_button],
                          layout=W.Layout(flex_flow="row wrap"))
        settings = W.HBox([typeable(self.rate), typeable(self.duration), self.per_query],
                          layout=W.Layout(flex_flow="row wrap"))
        inputs = W.VBox([W.HBox([self.input, self.sf, self.folder], layout=W.Layout(flex_flow="row wrap")),
                         self.input_line])
        #: every store's rows per partition at 8, 32 and 128 partitions, on the panel's input
        self.partitions = PartitionsView(plan_provider, self._input_tables)
        more = W.Accordion([self.partitions], selected_index=None)
        more.set_title(0, "Partitions: the skew a cluster would see")
        super().__init__([controls, inputs, settings, self.status, self.mode_line, self.runs_table, self.ui_link,
                          self.figure, more])
        self._show_input()

    # -- the chart --------------------------------------------------------------------------------

    @staticmethod
    def _chart_layout() -> dict:
        """The three stacked panels (throughput, latency, state) sharing the time axis."""
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=CHART_ROWS, vertical_spacing=0.09)
        # the tab's full width, 14 px text (a projector at 1920×1080)
        fig.update_layout(height=600, margin={"t": 40, "b": 40, "l": 80, "r": 20}, font={"size": 14},
                          legend={"orientation": "h", "y": -0.12})
        fig.update_xaxes(title_text="seconds since the run started", row=3, col=1)
        fig.update_yaxes(rangemode="tozero")
        layout = fig.to_plotly_json()["layout"]
        layout.pop("template", None)
        return layout

    def _layout(self, x_max: float) -> dict:
        layout = dict(self._base_layout)
        for axis in ("xaxis", "xaxis2", "xaxis3"):  # the shared time axis, to the last point
            layout[axis] = {**layout[axis], "range": [0, x_max]}
        return layout

    def _target_trace(self) -> dict:
        return dict(type="scatter", x=[0, 1e6], y=[self.rate.value] * 2,
                    name=f"input rate target ({count(self.rate.value)} tuples/s)", mode="lines",
                    line={"color": "#888", "dash": "dash", "width": 1}, xaxis="x", yaxis="y",
                    showlegend=True, hoverinfo="name")

    # -- actions --------------------------------------------------------------------------------

    def _busy(self) -> list[str]:
        """Runs starting or running."""
        return self.runs.busy()

    def deploy(self, force: bool = False) -> str | None:
        """Start the current plan with the chosen engine, off the kernel's thread; returns the
        run's label (None when refused).  Errors go to the status line, the input's under the input menu.

        Refused while a run is live (Deploy is disabled then), and when the model estimates
        the run past :attr:`guard`'s limits unless ``force`` (the **Deploy anyway** button).
        The start (a Spark session, the JVM: seconds) runs on a thread of its own, the status
        line counts the seconds, and **Stop** cancels it; :meth:`wait_started` waits for it."""
        self.anyway_button.layout.display = "none"
        if self.deploy_fn is None:
            self._set_status("error", "no deploy function configured")
            return None
        busy = self._busy()
        if busy:
            self._set_status("running", f"{busy[0]} is still running: stop it or wait for it to finish")
            return None
        try:
            source = self._chosen_input()
        except MqjoinError as e:
            self._input_error(str(e))
            return None
        # on data with plan_on, the plan is chosen on the data by the start (and checked there)
        fitted = self.plan_on is not None and source is not None
        try:
            plan = self.plan_provider()
            refusal = None if fitted else self._refusal(source, plan)
        except MqjoinError as e:
            self._set_status("error", f"{e} — {run.ADVICE}")
            return None
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("checking the deploy against the guard failed")
            self._set_status("error", f"{type(e).__name__}: {e} — {run.ADVICE}")
            return None
        if refusal is not None and not force:
            self._set_status("error", f"not deployed — {refusal}")
            self.anyway_button.layout.display = None
            return None
        engine, rate, seconds = self.engine.value, self.rate.value, self.duration.value
        start = self.runs.begin(engine, plan.mode, rate, on_spark=self.deploy_fn is run.default_deploy)
        self._set_status("starting", run.starting_message(engine, start.on_spark, cold=start.cold))
        self.deploy_button.disabled = True  # a cold Spark session takes seconds: no second click meanwhile
        self.stop_button.disabled = False
        start.thread = self._spawn(self._start, START_THREAD, start, None if fitted else plan, engine, rate, seconds,
                                   source, force)
        self._tick()
        return start.label

    def _refusal(self, source: Any, plan: Any) -> str | None:
        """The guard's refusal of a run of ``plan`` over ``source`` (None: it fits).  The run's
        span: the tables', a plan chosen on the data's (its horizon), else the event seconds chosen."""
        if isinstance(source, Mapping):
            duration = tables_duration(source)
        elif source is not None and self.plan_on is not None:
            duration = plan.workload.defaults.horizon
        else:
            duration = self.duration.value
        return self.guard.check(plan.workload, duration, plan)

    def _input_error(self, message: str) -> None:
        """An input that cannot be replayed: said under the input's control, the status pointing there."""
        self.input_line.value = error_box(message)
        self._set_status("error", "not deployed: the input cannot be replayed (said under the input menu)")

    def _spawn(self, target, name: str, *args) -> threading.Thread:
        with self._lock:  # started under the lock: close() joins it
            t = spawn(target, name, *args)
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        return t

    def _start(self, start: run.Start, plan, engine: str, rate: float, seconds: float, source: Any = None,
               force: bool = False) -> None:
        """The start of a run (on its own thread): its input (``source``, see :meth:`_chosen_input`),
        the plan chosen on it when ``plan`` is None (:attr:`plan_on`), then the deploy function."""
        label = start.label
        fitted = plan is None  # chosen on the data here, so checked against the guard here
        try:
            try:
                data = self._input_data(source, plan, seconds)
                if fitted:
                    replays = self.input_line.value
                    plan = self.plan_on(data, self._say_input)
                    self.input_line.value = replays
            except Exception as e:  # noqa: BLE001 — the data cannot be read: said where it was chosen
                if not isinstance(e, MqjoinError):
                    _log.exception("reading the input of %s failed", label)
                if self.runs.start_failed(start, str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"):
                    self._input_error(self.runs.state[label]["note"])
                    self._ended()
                return
            refusal = self._refusal(source, plan) if fitted and not force else None
            if refusal is not None:
                if self.runs.start_failed(start, refusal):
                    self._set_status("error", f"not deployed — {refusal}")
                    self.anyway_button.layout.display = None
                    self._ended()
                return
            if start.on_spark and not run.after_prepare(start.cancelled):
                self.runs.dropped(start)  # Stop cancelled it while Spark warmed up: nothing was started
                return
            out = tempfile.mkdtemp(prefix="mqjoin-deploy-")
            kw = dict(self.deploy_kwargs)
            # a micro-batch takes what has arrived, up to a few seconds' worth: a run that fell
            # behind catches up in bigger batches instead of staying behind
            kw.setdefault("max_rows_per_batch", max(1, math.ceil(rate * run.BATCH_SECONDS)))
            d = self.deploy_fn(plan, data, out, engine=engine, rate=rate, **kw)
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("the deploy of %s failed", label)
            if self.runs.start_failed(start, str(e)):
                msg = str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"
                self._set_status("error", f"{msg} — {run.ADVICE}")
                self._ended()
            return
        cancelled = self.runs.started(start, d, closed=self._closed.is_set())  # Stop pressed, or the panel closed
        if cancelled:  # Stop was pressed while it started: it stops now, its (empty) row stays
            self._stop_deployment(label, d)
            self._redraw(force=True)
            return
        budget = self.guard.watch(label, d.stop, lambda msg: self._on_budget(label, msg))
        produced = [0]

        def on_event(ev: dict) -> None:
            if ev.get("kind") == "batch":
                produced[0] += int(ev.get("results") or 0)
                budget(produced[0], float(ev.get("state_rows") or 0))
            with unbound():  # on the deployment's threads, which no request of the page started
                self._on_event(label, d, ev)

        total = getattr(d, "total", None)
        # the model's estimate describes the synthetic input (a given data set has its own size)
        # one estimate on the screen: the mode line's, when the deployment says where its stores live
        expect = (f" · {self.guard.estimate.summary()}" if source is None and getattr(d, "mode_choice", None) is None
                  else "")
        running = (f"{label} running — {count(total)} input tuples at {count(rate)} tuples/s{expect}"
                   if total else f"{label} running")
        with self._lock:  # the clock's line (under the same lock) cannot overwrite this one with an older one
            self.runs.wait_first(label, running)
            self._set_status("running", run.waiting_message(running))
        self._show_mode(label, d)
        d.subscribe(on_event)
        url = run.local_ui_url(getattr(d, "ui_url", None))
        self.ui_link.value = (f'Spark UI of {esc(label)}: <a href="{html.escape(url)}" target="_blank">'
                              f"{html.escape(url)}</a>" if url else "")
        self._tick()
        self._redraw(force=True)

    def refresh_mode(self, plan: Any = None) -> str:
        """Say where the plan's stores will live on Deploy — ``--spark-mode auto``'s choice for
        the current plan over the panel's input (its data, else the chosen event seconds) and
        the deploy's master and the machine's available memory — and why (:func:`~mqjoin.runtime.spark.mode
        .mode_choice`); returns the line's text ('' when it cannot tell: no plan, no pyspark).
        While a run starts or runs, its own mode stays on the line."""
        if self.engine.value == "native":
            text = "Spark mode: native — Spark's own stream-stream joins, no stores of the plan"
        else:
            try:
                from mqjoin.runtime.spark.session import import_pyspark

                import_pyspark()  # before the module that imports it (the start ahead may be importing it)
                from mqjoin.runtime.spark.mode import mode_choice

                plan = plan if plan is not None else self.plan_provider()
                tables = self.data if self.input.value == "given" and isinstance(self.data, Mapping) else None
                kw = self.deploy_kwargs
                choice = mode_choice(plan, tables, kw.get("mode", "auto"), master=kw.get("master"),
                                     span=None if tables else self.duration.value)
                text = f"Spark mode on Deploy: <b>{esc(choice.mode)}</b> — {esc(choice.reason)}"
            except Exception as e:  # noqa: BLE001 — a hint only: Deploy says what is wrong
                _log.debug("no Spark mode to show before the deploy: %s", e, exc_info=True)
                text = ""
        if not self._busy():
            self.mode_line.value = text
        return text

    def _refresh_mode_later(self) -> None:
        """:meth:`refresh_mode` off the kernel's thread (its first call imports pyspark)."""
        if not self._closed.is_set():
            self._spawn(self.refresh_mode, "mqjoin-spark-mode")

    def _show_input(self) -> None:
        choice = self.input.value
        self.sf.layout.display = None if choice == "tpch" else "none"
        self.folder.layout.display = None if choice == "folder" else "none"
        self.input_line.value = esc(run.input_words(choice, self.sf.value, self.folder.value.strip()))

    def _on_input(self, change: dict) -> None:
        """The input menu, SF or folder changed: the input line says it; synthetic streams are
        planned on the workload's own statistics again at once (nothing to measure)."""
        self._show_input()
        if change["owner"] is self.input and change["new"] == "synthetic" and self.plan_on is not None:
            try:
                self.plan_on(None, self._say_input)
            except MqjoinError as e:  # the model shows its own error: the plan stays as it was
                _log.debug("no plan on the workload's statistics: %s", e)

    def _say_input(self, message: str) -> None:
        self.input_line.value = esc(message)

    def _chosen_input(self) -> Any:
        """What the input menu chose, checked (on the kernel's thread, at the click): None for
        synthetic streams, the panel's data, ``("tpch", SF)``, or a folder's path."""
        choice = self.input.value
        if choice == "given":
            return self.data
        if choice == "tpch":
            from mqjoin.datasets.tpch import check_sf

            return ("tpch", check_sf(self.sf.value))
        if choice == "folder":
            from mqjoin.model.errors import DataError

            folder = os.path.expanduser(self.folder.value.strip())
            if not folder or not os.path.isdir(folder):
                raise DataError(f"no folder {folder!r}: type the path of a folder with R.csv or R.parquet per "
                                "relation in the folder box")
            return folder
        return None

    def _input_data(self, source: Any, plan, seconds: float) -> Any:
        """The data a run replays (off the kernel's thread: TPC-H is generated the first time,
        its progress on the input line)."""
        if source is None:
            return run.synthetic_data(plan, seconds)
        if isinstance(source, tuple):
            from mqjoin.datasets.tpch import sf_label, tpch_streams

            def progress(message: str) -> None:
                self.input_line.value = esc(f"TPC-H SF {sf_label(source[1])}: {message.strip()}")

            streams = tpch_streams(source[1], progress=progress)
            self.input_line.value = esc(f"replays the bundled TPC-H data at scale factor {sf_label(source[1])}: "
                                        f"{count(streams.rows)} tuples in {streams.directory}")
            return str(streams.directory)
        return source

    def _input_tables(self) -> Mapping[str, Any]:
        """The input a Deploy would run, as tables: the panel's tables, a data directory read,
        or the synthetic streams of the chosen event seconds."""
        plan = self.plan_provider()
        data = self._input_data(self._chosen_input(), plan, self.duration.value)
        if isinstance(data, Mapping):
            return data
        from mqjoin.model.tables import read_inputs

        return read_inputs(plan.workload, data)

    def _show_mode(self, label: str, d: Any) -> None:
        """The mode a started deployment runs in, and why (its ``mode_choice``)."""
        choice = getattr(d, "mode_choice", None)
        if choice is not None:
            self.mode_line.value = f"Spark mode of {esc(label)}: <b>{esc(choice.mode)}</b> — {esc(choice.reason)}"

    def prepare(self) -> bool:
        """Start the Spark session and its Python workers in the background, before Deploy is
        clicked (the explorer calls this when its Deploy tab is opened, and when it is built
        with ``spark_ahead=True``): the JVM's and the workers' seconds pass while the user
        looks at the plan, and the status line says that Spark is warming up.  With the session
        running it runs the warm-up again (idle Python workers end after about a minute).
        Only for the default deploy function on the default local session (a ``master``,
        ``conf`` or ``spark`` given to the panel is the deploy's to use), and not while a run
        is live (its workers run); returns whether a start was begun.  The line under the status
        says where the plan's stores will live (:meth:`refresh_mode`)."""
        self._refresh_mode_later()
        if (self.deploy_fn is not run.default_deploy or self._closed.is_set()
                or {"master", "conf", "spark"} & set(self.deploy_kwargs)):
            return False
        with self._lock:
            if self._busy() or any(t.name == "mqjoin-spark-prepare" and t.is_alive() for t in self._threads):
                return False
        self._spawn(self._prepare, "mqjoin-spark-prepare", not run.session_running())
        return True

    def _prepare(self, cold: bool) -> None:
        said = None
        if cold and not self.deployments:
            said = (f"{state_html('idle')} — press Deploy to run the current plan on Spark · Spark is warming up in "
                    f"the background (the JVM and its Python workers, ~{run.WARMING_S} s on a busy 2-core machine; a "
                    "Deploy meanwhile waits for it)")
            self.status.value = said
        why = run.prepare_session()
        if said is not None and self.status.value == said:  # no run started meanwhile
            self._set_status("idle", "press Deploy to run the current plan on Spark · " + (
                "Spark is ready" if why is None else f"Spark did not start ahead: {why} — Deploy tries again"))

    def wait_started(self, timeout: float | None = None) -> bool:
        """Wait until no run is starting (scripts, tests); False on timeout.  A start leaves
        :attr:`runs`' starts once its deployment exists, before it subscribes to the
        deployment's events: its thread is waited for too, so an event sent after this returns
        reaches the panel."""
        with self._lock:
            threads = [s.thread for s in self.runs.starts.values() if s.thread is not None]
            threads += [t for t in self._threads if t.name == START_THREAD and t not in threads]
        return join_threads(threads, timeout)

    def wait_idle(self, timeout: float | None = 10) -> bool:
        """Wait for the starts and stops under way and the scheduled redraws."""
        with self._lock:
            threads = [t for t in self._threads if t is not self._clock]
        return join_threads(threads, timeout) and self._draws.wait_idle(timeout)

    def stop(self) -> None:
        """Stop the live run at once (its results and curves stay): a run still starting is
        cancelled, a running one stops off the kernel's thread."""
        starting, live = self.runs.cancel()
        if not starting and not live:
            return  # nothing to stop (a run that ended keeps its status line)
        for label, d in live:
            self._spawn(self._stop_deployment, "mqjoin-deploy-stop", label, d)
        self._ended()
        if starting and not live:
            self._set_status("stopped", f"{starting[0].label} cancelled before its first micro-batch; deploy "
                             "again to start another run")
        else:
            self._set_status("stopped", "stopped; deploy again to overlay another run")

    def _stop_deployment(self, label: str, d: Any, state: str = "stopped") -> None:
        """Stop a run's deployment (off the kernel's thread); the run's state becomes ``state``
        (``finished`` for a run that consumed all its input)."""
        note = None
        try:
            d.stop()
        except MqjoinError as e:
            note = str(e)
        self.runs.stopped(label, state, note)
        self._measured()
        self._redraw(force=True)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            threads = list(self._threads)
        join_threads(threads, CLOSE_WAIT)
        super().close()

    def _ended(self) -> None:
        busy = bool(self._busy())
        self.stop_button.disabled = not busy
        self.deploy_button.disabled = busy
        self._redraw(force=True)
        self._measured()

    def _measured(self) -> None:
        """Hand what the runs that ended counted per store to :attr:`on_measured`."""
        from dataclasses import replace

        from mqjoin.datasets.fitting import fit_reached
        from mqjoin.planning.measured import store_counts

        ended = self.runs.to_measure()
        for label, d in ended:
            tables = getattr(d, "tables", {})
            counts = store_counts(label, d.plan, getattr(d, "stores", None), tables, getattr(d, "batches", None))
            if counts is not None and tables:  # a run stopped early: predicted on the part of the input it reached
                counts = replace(counts, workload=fit_reached(d.plan.workload, tables, counts.span))
            for f in self.on_measured if counts is not None else ():
                f(counts)

    # -- the status clock -------------------------------------------------------------------------

    def _tick(self) -> None:
        """Count the seconds in the status line while a run starts or waits for its first batch
        (one clock thread, ending when nothing waits)."""
        with self._lock:
            if self._clock is not None and self._clock.is_alive():
                return
            self._clock = spawn(self._run_clock, "mqjoin-deploy-clock")
            self._threads = [x for x in self._threads if x.is_alive()] + [self._clock]

    def _run_clock(self) -> None:
        while not self._closed.wait(1.0):
            with self._lock:  # read and shown at once: a start that moved on meanwhile shows its own line
                line = self.runs.clock()
                if line is None:
                    return
                self._set_status(*line)

    # -- live updates ---------------------------------------------------------------------------

    def _on_budget(self, label: str, msg: str) -> None:
        self.runs.stopping_as(label, "stopped", msg)
        self._ended()
        self._set_status("stopped", f"{label} {msg}")

    def _on_event(self, label: str, d: Any, ev: dict) -> None:
        """Show what an event of a run changed (:meth:`~mqjoin.widgets.deploy_run.Runs.event`)."""
        r = self.runs.event(label, d, ev)
        if r.stop_as is not None:
            self._spawn(self._stop_deployment, "mqjoin-deploy-stop", label, d, r.stop_as)
        if r.status is not None:
            self._set_status(*r.status)
        if r.ended:
            self._ended()
        else:
            self._redraw(force=r.force)

    def _redraw(self, force: bool = False) -> None:
        """Schedule a redraw (at most one per ``refresh_seconds``; never on the caller's thread,
        which may be a deployment's)."""
        self._draws.request(force)

    def _draw(self) -> None:
        with self._lock:
            runs = list(self.deployments)
            states = {label: dict(st) for label, st in self.run_state.items()}
        traces, rows = [], []
        x_max = self.duration.value + 5.0
        for k, (label, d) in enumerate(runs):
            colour = RUN_COLOURS[k % len(RUN_COLOURS)]
            st = states.get(label, {"state": "running", "note": "", "rate": None})
            batches, queries, progress = d.batches, d.queries, d.progress
            first = True
            for row, panel in enumerate(CHART_ROWS, start=1):
                for name, x, y, dash in run_series(label, batches, queries, progress,
                                                   per_query=self.per_query.value)[panel]:
                    x_max = max([x_max, *x])
                    traces.append(dict(type="scatter", x=x, y=y, name=label if first else name, legendgroup=label,
                                       showlegend=first, meta=name,  # the line's full name (the legend shows the run's)
                                       mode="lines+markers", line={"color": colour, "dash": dash},
                                       marker={"color": colour, "size": 5},
                                       hovertemplate=f"{esc(name)}: %{{y:.4g}}<extra></extra>",
                                       xaxis="x" if row == 1 else f"x{row}", yaxis="y" if row == 1 else f"y{row}"))
                    first = False
            s = run_summary(batches, queries, progress, rate=st.get("rate"), total=getattr(d, "total", None))
            swatch = f'<span style="color:{colour};font-size:16px">■</span> {esc(label)}'
            # a run that fell behind keeps saying so once it ended (beside what happened to it)
            note = "; ".join(n for n in (st["note"], s.behind) if n)
            rows.append([swatch, state_html(st["state"]), count(s.tuples),
                         "—" if s.tuples_per_s is None else count(s.tuples_per_s), _seconds(s.latency_p50),
                         _seconds(s.latency_p95), "—" if s.state_rows is None else count(s.state_rows),
                         esc(note or "")])
        # before the first run the latency and state panels hold no line: empty traces draw their axes
        sync_figure(self.figure, [self._target_trace(), *(traces or empty_panels(self._base_layout))],
                    self._layout(x_max))
        self.runs_table.value = table(["run", "state", "tuples", "tuples/s", "latency p50", "latency p95",
                                       "state rows", "notes"], rows, raw=True) if rows else ""

    def _set_status(self, state: str, text: str) -> None:
        self.status.value = f"{state_html(state)} — {html.escape(text)}"
