"""The explorer's Adaptivity tab (paper Section VI): run the model's workload adaptively, live.

:class:`AdaptivityPanel` holds the policy controls, a data choice (the paper's Section VII-B
data sets where the workload is one of them, :func:`paper_scenarios`, or synthetic data),
Run/Stop/Clear, the epoch timeline (:mod:`mqjoin.widgets.timeline`) and the query changes
(:mod:`mqjoin.widgets.query_changes`) of the runs it started.

By default it runs the workload on screen: its own paper data set where it is one, else
uniform streams of it.  The default speed-up makes a run last about
:data:`TARGET_SECONDS` (:func:`default_speedup`): long enough to add or remove a query
while it is live; the speed-up follows the data chosen until a person moves it.

>>> PAPER_FIGURES["skewed-rates"], sorted(PAPER_DATA)
('Figure 8(b)', ['selectivity-change', 'skewed-rates'])
>>> default_speedup(30.0), default_speedup(10.0)
(1.0, 0.333)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as W

from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.datasets.synthetic_paper import figure_8b_budget, sampled_workload
from mqjoin.model.errors import MqjoinError

from mqjoin.widgets._html import error_box, esc, state_html
from mqjoin.widgets._controls import typeable
from mqjoin.widgets.guarded import GuardedPanel, RunGuard, tables_duration
from mqjoin.widgets.live import ENDED, Redraw, snapshot, status_of
from mqjoin.widgets.query_changes import QueryChangesPanel
from mqjoin.widgets.timeline import EpochTimeline

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# the Adaptivity tab
# --------------------------------------------------------------------------------------------

#: the paper's Section VII-B data sets at small rates (mqjoin.datasets.synthetic_paper)
PAPER_DATA = {
    "selectivity-change": {"scale": 1000, "partners": 20},  # 100 tuples/s per relation
    "skewed-rates": {"high_rate": 500, "low_rate": 10, "fanout": 5},  # R at 500, S, T, U at 10 tuples/s
}
PAPER_FIGURES = {"selectivity-change": "Figure 8(a)", "skewed-rates": "Figure 8(b)"}
#: seconds of event time of the paper's data sets
PAPER_SECONDS = 30.0
#: about how long (wall seconds) a run at the default speed-up lasts: time to act while it is live
TARGET_SECONDS = 30.0


def default_speedup(event_seconds: float) -> float:
    """The speed-up that replays ``event_seconds`` of data in about :data:`TARGET_SECONDS`
    (three significant digits, within the slider's 0.1× … 1000×)."""
    return float(f"{min(1000.0, max(0.1, event_seconds / TARGET_SECONDS)):.3g}")
MIR_BUDGET_SHORT = "MIR budget: the most tuples the plan's MIR stores (stored sub-joins) may hold"
MIR_BUDGET_HELP = ("MIR budget: the most tuples the MIR stores of a plan (materialised sub-joins such as ST) may "
                   "hold, by the memory estimate of docs/model.md §5. A plan whose MIR stores need more is not chosen; "
                   "when the data change so that the running plan's MIR stores outgrow the budget, the run "
                   "switches to a plan that fits (paper Figure 8(b)). Base relation stores do not count.")


def paper_scenarios(workload) -> tuple[str, ...]:
    """The Section VII-B data sets whose query ``workload`` has (same relations, attributes and
    join classes as ``R(a), S(a,b), T(b,c), U(c)``), the likelier first (skewed rates when R
    is faster than S).

    >>> from mqjoin.widgets.model import as_workload
    >>> paper_scenarios(as_workload("paper_skewed_rates.yaml")), paper_scenarios(as_workload("paper_v2.yaml"))
    (('skewed-rates', 'selectivity-change'), ())
    """
    from mqjoin.datasets.synthetic_paper import ATTRIBUTES, QUERY
    from mqjoin.model.workload import Workload

    ref = Workload.build({r: {"attributes": a} for r, a in ATTRIBUTES.items()}, {"q": QUERY},
                         defaults={"selectivity": 1.0}).query("q")
    want = (ref.relation_set, frozenset(frozenset(c.members) for c in ref.classes))
    names = {r.name for r in workload.relations}
    if not set(ATTRIBUTES) <= names or any(
            not set(a) <= set(workload.relation(r).attributes) for r, a in ATTRIBUTES.items()):
        return ()
    if not any((q.relation_set, frozenset(frozenset(c.members) for c in q.classes)) == want
               for q in workload.queries):
        return ()
    skewed = workload.rate("R") > workload.rate("S")
    return ("skewed-rates", "selectivity-change") if skewed else ("selectivity-change", "skewed-rates")


@dataclass(frozen=True)
class RunData:
    """The input of a run started from the Adaptivity tab: the workload it runs (the model's,
    or a paper data set's own), its tables, a description, event times to mark in the
    timeline, and the paper data set (``None`` for uniform streams)."""

    workload: Any
    tables: Mapping[str, Any]
    what: str
    marks: Mapping[str, float]
    data: Any = None


def _start_replay(workload, tables, policy, speedup, budget=None):
    """A live run; ``budget``: the most tuples (stored entries and results) it may hold — the
    executor stops itself there, mid-epoch, keeping what it produced."""
    from mqjoin.runtime.epochs import AdaptiveReplay

    return AdaptiveReplay(workload, tables, policy, speedup=speedup, budget=budget).start()


class AdaptivityPanel(GuardedPanel, W.VBox):
    """The Explorer's Adaptivity tab: run the model's workload adaptively (or statically) on
    the reference executor, live, with the timeline and query controls.  Runs started one
    after the other overlay in one timeline; query changes go to the latest run.

    ``start(workload, tables, policy, speedup)`` starts a live source (default: an
    :class:`~mqjoin.runtime.epochs.AdaptiveReplay`); nothing runs until Run is clicked.

    >>> from mqjoin.widgets.model import ExplorerModel
    >>> panel = AdaptivityPanel(ExplorerModel("paper_selectivity_change.yaml", debounce=0))
    >>> [label for label, _ in panel.data.options][:2]
    ['paper: selectivity-change (Figure 8(a))', 'paper: skewed-rates (Figure 8(b))']
    """

    def __init__(self, model, start: Callable[..., Any] | None = None):
        self.model = model
        # the executor's own budget stops a run inside an epoch; the guard's watch of the epoch
        # events (below) says why in the panel
        self.start_fn = start or (lambda *args: _start_replay(*args, budget=int(self.guard.limits.max_results)))
        self.sources: list[tuple[str, Any]] = []
        self._measured: set[str] = set()  # runs whose counts went to the model (Probe trees tab)
        self._tables: dict[tuple, RunData] = {}
        self._status = Redraw(self._show_run_status, 0.0)
        self.epoch = W.BoundedFloatText(value=1.0, min=0.01, max=3600.0, step=0.5, description="epoch (s)",
                                        layout=W.Layout(width="180px"))
        self.threshold = W.BoundedFloatText(value=0.1, min=0.0, max=100.0, step=0.05, description="threshold",
                                            layout=W.Layout(width="180px"))
        self.adapt = W.ToggleButtons(options=[("adaptive", True), ("static", False)], value=True,
                                     style={"button_width": "96px"},
                                     tooltips=["re-optimise on the statistics of each epoch",
                                               "keep the first plan (query changes still re-plan)"])
        self.limit_mirs = W.Checkbox(value=False, description="MIR budget", indent=False,
                                     layout=W.Layout(width="110px"), tooltip=MIR_BUDGET_HELP)
        self.mir_budget = W.BoundedFloatText(value=100.0, min=0.0, max=1e15, description="tuples", disabled=True,
                                             layout=W.Layout(width="180px"), tooltip=MIR_BUDGET_HELP)
        self.speedup = W.FloatLogSlider(value=1.0, base=10, min=-1, max=3, step=0.05, description="speedup",
                                        continuous_update=False)
        self._auto_speedup = True  # the speed-up follows the data until a person moves it
        self._setting_speedup = False
        self.speedup.observe(lambda ch: self._speedup_moved(), "value")
        self.budget_help = W.HTML(f'<span style="font-size:14px;color:#555" title="{esc(MIR_BUDGET_HELP)}">'
                                  f"{esc(MIR_BUDGET_SHORT)}</span>")
        self.data = W.Dropdown(description="data", layout=W.Layout(width="420px"))
        self.duration = W.FloatSlider(value=10.0, min=2.0, max=60.0, step=1.0, description="event s",
                                      continuous_update=False)
        self.data_note = W.HTML("")
        self.run_button = W.Button(description="Run", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.clear_button = W.Button(description="Clear", icon="trash")
        #: refuses runs the model says are too large, stops live ones at the budget (guard.limits)
        self.guard = RunGuard()
        self.anyway_button = W.Button(description="Run anyway (stops at the budget)", button_style="warning",
                                      icon="exclamation-triangle", layout=W.Layout(width="auto", display="none"))
        self.status = W.HTML("<b>idle</b> — press Run to replay the data at the chosen speed-up")
        self.error = W.HTML("")
        self.timeline: EpochTimeline | None = None
        self.changes: QueryChangesPanel | None = None
        self.slot = W.VBox([])
        self.limit_mirs.observe(lambda ch: self._on_limit(ch["new"]), "value")
        self.data.observe(lambda ch: self._describe_data(), "value")
        self.duration.observe(lambda ch: self._describe_data(), "value")
        self.run_button.on_click(lambda _: self.run())
        self.anyway_button.on_click(lambda _: self.run(force=True))
        self.stop_button.on_click(lambda _: self.stop())
        self.clear_button.on_click(lambda _: self.clear())
        model.observe(lambda ch: self._data_options(), "workload")
        self._data_options()
        super().__init__([
            W.HBox([self.adapt, self.epoch, self.threshold, self.limit_mirs, self.mir_budget, self.budget_help],
                   layout=W.Layout(flex_flow="row wrap", align_items="center")),
            W.HBox([self.data, typeable(self.duration), typeable(self.speedup)], layout=W.Layout(flex_flow="row wrap")),
            self.data_note,
            W.HBox([self.run_button, self.stop_button, self.clear_button, self.anyway_button]),
            self.status, self.error, self.slot,
        ])

    # -- data -------------------------------------------------------------------------------

    def _data_options(self) -> None:
        own = paper_scenarios(self.model.workload)
        opts = [(f"paper: {n} ({PAPER_FIGURES[n]})", n) for n in own]
        opts.append(("uniform streams of the workload (mqjoin.datasets.uniform)", "uniform"))
        # the paper's data sets run their own query: offered for every workload, so the tab
        # shows a plan adapting by default (Figure 8(a))
        opts += [(f"paper: {n} ({PAPER_FIGURES[n]}, its own query)", n) for n in PAPER_DATA if n not in own]
        keep = self.data.value
        self.data.options = opts
        values = [v for _, v in opts]
        self.data.value = keep if keep in values else (own[0] if own else "uniform")
        self._describe_data()

    def _speedup_moved(self) -> None:
        if not self._setting_speedup:
            self._auto_speedup = False

    def _describe_data(self) -> None:
        choice = self.data.value
        self.duration.layout.display = None if choice == "uniform" else "none"
        if self._auto_speedup:
            self._setting_speedup = True
            try:
                self.speedup.value = default_speedup(self.duration.value if choice == "uniform" else PAPER_SECONDS)
            finally:
                self._setting_speedup = False
        if choice == "uniform":
            w = self.model.workload
            n = sum(round(w.rate(r) * self.duration.value) for r in w.used_relations)
            text = (f"about {n:,} tuples over {self.duration.value:g} s of event time at the workload's rates, "
                    f"attribute values uniform over 1/selectivity values: the statistics stay as declared, so "
                    f"plans change with query changes only. Relations no query reads get no stream, so queries "
                    f"added while the run is live can join only relations the workload's queries read")
        else:
            p = ", ".join(f"{k}={v:g}" for k, v in PAPER_DATA[choice].items())
            same = ("the same query" if choice in paper_scenarios(self.model.workload)
                    else "the paper's query R(a), S(a,b), T(b,c), U(c), not this workload's")
            text = (f"the paper's {choice} data set ({PAPER_FIGURES[choice]}; synthetic_paper."
                    f"{choice.replace('-', '_')}({p})): {PAPER_SECONDS:g} s of event time, the data change at 15 s. "
                    f"The run uses "
                    f"the data set's own workload ({same}) with the explorer's optimiser options; the "
                    f"optimiser's initial view is ")
            if choice == "skewed-rates":
                text += ("the statistics of the first second (what a running system knows). Figure 8(b) needs an "
                         "MIR memory budget between the MIR stores' memory before and after the change: ticking "
                         "MIR budget fills one in (figure_8b_budget).")
            else:
                text += "the statistics of the data before the change, with S.b = T.b raised by 10 % (the paper's)."
        self.data_note.value = f'<span style="font-size:14px;color:#555">{esc(text)}</span>'

    def _on_limit(self, on: bool) -> None:
        self.mir_budget.disabled = not on
        if on and self.data.value == "skewed-rates":
            try:
                self.mir_budget.value = figure_8b_budget(self._load().data, self._policy(adapt=True)).budget
            except MqjoinError as e:
                self.error.value = error_box(str(e))

    def _load(self) -> "RunData":
        """The chosen data, cached: runs overlaid for comparison see the same input."""
        choice = self.data.value
        w = self.model.workload
        key = (choice, self.duration.value, w) if choice == "uniform" else (choice,)
        got = self._tables.get(key)
        if got is None:
            if choice == "uniform":
                from mqjoin.datasets.uniform import uniform_streams

                got = RunData(w, uniform_streams(w, duration=self.duration.value, seed=0),
                              f"uniform streams, {self.duration.value:g} s", {})
            else:
                from mqjoin.datasets.synthetic_paper import paper_data

                d = paper_data(choice, **PAPER_DATA[choice])
                # as benchmarks/adaptive_paper.py: (a) starts from the data set's declared view (the
                # paper's biased S.b = T.b), (b) from the statistics of the first second
                w0 = d.workload if choice == "selectivity-change" else sampled_workload(d, 1)
                got = RunData(w0, d.tables(), f"paper {choice}", {"data change": d.change_at}, d)
            self._tables[key] = got
        return got

    def _policy(self, adapt: bool | None = None) -> AdaptivePolicy:
        m = self.model
        return AdaptivePolicy(epoch=self.epoch.value, threshold=self.threshold.value,
                              adapt=self.adapt.value if adapt is None else adapt, mode=m.mode,
                              partitioning=m.partitioning, mirs=m.mirs, solver=m.solver, time_limit=m.time_limit,
                              mir_budget=self.mir_budget.value if self.limit_mirs.value else None)

    # -- actions ----------------------------------------------------------------------------

    def run(self, force: bool = False) -> Any:
        """Start a live run of the chosen data with the chosen policy; errors shown inline.

        A run the model estimates past :attr:`guard`'s limits is refused with the estimate
        and what to change (``force``, the **Run anyway** button: run it all the same);
        every run is stopped once its results and state pass the budget."""
        self.error.value = ""
        self.anyway_button.layout.display = "none"
        try:
            policy = self._policy()
            data = self._load()
            m = self.model
            plan = m.result.plan if data.workload is m.workload and m.result is not None else None
            refusal = self.guard.check(data.workload, tables_duration(data.tables), plan)
            if refusal is not None and not force:
                self.error.value = error_box(f"not started — {refusal}")
                self.anyway_button.layout.display = None
                return None
            source = self.start_fn(data.workload, data.tables, policy, self.speedup.value)
        except MqjoinError as e:
            self.error.value = error_box(str(e))
            return None
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("starting the adaptive run failed")
            self.error.value = error_box(f"{type(e).__name__}: {e}")
            return None
        base = "adaptive" if policy.adapt else "static"
        marks = dict(data.marks)
        if self.timeline is None:
            self.timeline = EpochTimeline(marks=marks)
            self.changes = QueryChangesPanel()
            self.slot.children = [self.timeline, W.HTML("<b>queries while the run is live</b> (latest run)"),
                                  self.changes]
        else:
            self.timeline.marks.update(marks)
        label = self.timeline.add(source, base)
        self.sources.append((label, source))
        self.changes.attach(source)
        self.stop_button.disabled = False
        self.status.value = (f"{state_html('running')} — {esc(label)}: {esc(data.what)}, epochs of "
                             f"{policy.epoch:g} s, threshold {policy.threshold:g}, speed-up {self.speedup.value:g}×"
                             + (f", MIR budget {policy.mir_budget:g}" if policy.mir_budget is not None else "")
                             + f" · {esc(self.guard.estimate.summary())}")
        budget = self.guard.watch(label, source.stop, lambda _msg: self._status.request(force=True))
        produced = [0]

        def on_event(ev, source=source):
            if ev.get("kind") == "epoch":  # the budget: results so far, rows held now
                produced[0] += sum(ev.get("results", {}).values())
                budget(produced[0], ev.get("state_rows", 0))
            self._on_event(source, ev)

        source.subscribe(on_event)
        if status_of(source) in ENDED:  # it ended before we subscribed
            self._status.request(force=True)
        return source

    def _on_event(self, source: Any, ev: Mapping[str, Any]) -> None:
        if ev.get("kind") == "status" and any(s is source for _, s in self.sources):
            self._status.request(force=True)

    def _show_run_status(self) -> None:
        """The status line once a run ended: every run's state (and error)."""
        if not self.sources:
            return
        parts = []
        for label, s in self.sources:
            st, err = status_of(s), getattr(s, "error", None)
            why = err or self.guard.stopped.get(label)
            parts.append(f"{esc(label)} {state_html(st)}" + (f": {esc(why)}" if why else ""))
        self.status.value = " · ".join(parts)
        self.stop_button.disabled = not any(status_of(s) == "running" for _, s in self.sources)
        for label, s in self.sources:  # a run that ended: its counts go beside the model's predictions
            if status_of(s) in ENDED and label not in self._measured:
                self._measured.add(label)
                of = getattr(snapshot(s), "counts", None)  # a run that keeps no counts has none
                counts = of(label) if callable(of) else None
                if counts is not None:
                    self.model.set_measured(counts)

    def wait_drawn(self, timeout: float | None = None) -> bool:
        """Wait until the status line, the timeline and the query changes are redrawn (scripts, tests)."""
        views = [self._status] + [v._redraw for v in (self.timeline, self.changes) if v is not None]
        return all(r.wait_idle(timeout) for r in views)

    def stop(self) -> None:
        """Stop every running run (their epochs and results so far stay)."""
        for _, s in self.sources:
            if status_of(s) == "running":
                try:
                    s.stop()
                except MqjoinError as e:
                    self.error.value = error_box(str(e))
        self.stop_button.disabled = True
        self._status.now()
        if self.timeline is not None:
            self.timeline.refresh()
        if self.changes is not None:
            self.changes.refresh()

    def clear(self) -> None:
        """Stop every run and forget them (start afresh)."""
        self.stop()
        self.sources = []
        self.guard.stopped.clear()
        self.timeline = self.changes = None
        self.slot.children = []
        self.status.value = "<b>idle</b> — press Run to replay the data at the chosen speed-up"
