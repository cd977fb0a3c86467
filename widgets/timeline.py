"""Adaptive runs in the explorer: the epoch timeline, query changes while a run is live, and
the Adaptivity tab (paper Section VI).

* :class:`EpochTimeline` — one or more adaptive runs over their epochs: a band with the
  plan active in every epoch (``P0``, ``P1`` …), latency, throughput (tuples per second of
  processing time, the input rate dashed), state and probe messages, with every switch marked
  and annotated with its cause — its full reason on hover — (:func:`mqjoin.widgets.charts.epoch_figure`), and an epoch
  selector that shows, for the selected epoch, the active plan's probe orders and stores,
  the decision that installed it (with its reason) and the plan diff against the plan
  before it (:func:`mqjoin.planning.diff.plan_diff`).
* :class:`QueryChangesPanel` — add a query (name, text in paper notation or equalities,
  optional selectivities) or remove one while a run is live; shows the current event time
  and epoch and every change with its activation epoch (pending or active).
* :class:`AdaptivityPanel` — the Explorer's Adaptivity tab: policy controls, a data choice,
  Run/Stop/Clear, the timeline and the query changes of the runs it started.

**Sources.**  A *static* source is a finished :class:`~mqjoin.runtime.epochs.AdaptiveRun`.
A *live* source is anything with the interface of
:class:`~mqjoin.runtime.epochs.AdaptiveReplay` — ``subscribe(callback)`` (events
``{"kind": "epoch" | "switch" | "change" | "status", …}``), ``snapshot()`` (the run so far,
an ``AdaptiveRun``), ``submit(add=…, remove=…, selectivities=…)`` (returns the activation
epoch), ``status`` / ``error`` / ``event_time`` / ``stop()`` — so a Spark adaptive deployment
with the same interface plugs in unchanged.  Nothing here looks inside a source.

**Live redraws.**  Events arrive on the source's thread.  A view never draws inside the
event callback: it schedules a redraw, at most one per ``min_interval`` seconds (default
0.5: ≤ 2 redraws/s, plus one right away when the run ends).  In a Jupyter kernel the redraw
runs as a callback of the kernel's event loop (the thread of every widget callback); without
a running loop (scripts, tests) on a timer thread.  Redraws of one view are serialised.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange
>>> from mqjoin.runtime.epochs import run_adaptive
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
... queries: {q1: "R(a), S(a)"}
... ''')
>>> t = {r: Table.from_columns(r, {"ts": [k / 2 for k in range(12)], "a": [1] * 12}) for r in "RST"}
>>> run = run_adaptive(w, t, AdaptivePolicy(epoch=1.0), [QueryChange(at=1.5, add={"q2": "S(a), T(a)"})])
>>> tl = EpochTimeline(run)
>>> [(s.label, s.first, s.last) for s in tl.segments()]
[('P0', 0, 2), ('P1', 3, 5)]
>>> tl.select(3)
>>> "query change: +q2" in tl.details.value and "S » T[a]" in tl.details.value.replace("&gt;", ">")
True
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as W

from mqjoin.adaptive.controller import Decision
from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.widgets.charts import PLAN_COLOURS, PlanSegment, epoch_figure, plan_segments
from mqjoin.datasets.synthetic_paper import figure_8b_budget, sampled_workload
from mqjoin.planning.diff import PlanDiff, plan_diff
from mqjoin.model.errors import AdaptiveError, MqjoinError
from mqjoin.planning.plan import Plan

from mqjoin.widgets._html import error_box, esc, info_box, state_html, table
from mqjoin.widgets.figures import fmt, sync_figure
from mqjoin.widgets._controls import typeable
from mqjoin.widgets.guarded import GuardedPanel, RunGuard, tables_duration

_log = logging.getLogger(__name__)

#: the rows of the timeline's figure (keys of :data:`mqjoin.widgets.charts.EPOCH_PANELS`)
TIMELINE_PANELS = ("plans", "latency", "throughput", "state", "messages")
#: states of a live source after which nothing changes any more
ENDED = ("finished", "stopped", "failed")
SELECTED_SHAPE = "selected epoch"


# --------------------------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------------------------


def is_live(source: Any) -> bool:
    """Whether ``source`` is a live run (has ``subscribe`` and ``snapshot``), not a finished
    :class:`~mqjoin.runtime.epochs.AdaptiveRun`."""
    return callable(getattr(source, "subscribe", None)) and callable(getattr(source, "snapshot", None))


def snapshot(source: Any):
    """The run as it stands: ``source.snapshot()`` for a live source, else the run itself."""
    return source.snapshot() if is_live(source) else source


def status_of(source: Any) -> str:
    """``running``, ``finished`` … of a live source; a static run is ``finished``."""
    return str(getattr(source, "status", "finished")) if is_live(source) else "finished"


def default_label(run) -> str:
    """``adaptive`` or ``static``: what a run's policy does."""
    return "adaptive" if run.policy.adapt else "static"


# --------------------------------------------------------------------------------------------
# one epoch, as plain values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochView:
    """What the timeline shows for one epoch of a run: its record (``None`` when no tuple
    arrived in it), the active plan and its stretch of epochs, the decision that installed
    the plan (``installed_by``), the plan active before that stretch (``previous``) and the
    diff to it, and the decisions made at the start of this epoch (for the next one)."""

    epoch: int
    start: float
    end: float
    record: Any
    segment: PlanSegment
    plan: Plan
    installed_by: Decision | None
    previous: int | None
    diff: PlanDiff | None
    decisions: tuple[Decision, ...]


def epoch_view(run, epoch: int) -> EpochView:
    """The :class:`EpochView` of ``epoch`` in ``run`` (an ``AdaptiveRun``).

    >>> from mqjoin.datasets.synthetic_paper import selectivity_change
    >>> from mqjoin.runtime.epochs import run_adaptive
    >>> d = selectivity_change(scale=5000, partners=4)
    >>> v = epoch_view(run_adaptive(d.workload, d.tables(), AdaptivePolicy(epoch=1.0), collect=False), 17)
    >>> v.segment.label, v.installed_by.active_from, v.previous, v.plan.probe_orders()["q"]["S"]
    ('P1', 17, 0, 'S » T[b] » R[a] » U[c]')
    """
    segs = plan_segments(run)
    k = next((i for i, s in enumerate(segs) if s.first <= epoch <= s.last), None)
    if k is None:
        span = f"epochs {segs[0].first}–{segs[-1].last}" if segs else "no epoch finished yet"
        raise AdaptiveError(f"epoch {epoch} is not part of this run ({span})")
    seg = segs[k]
    record = next((r for r in run.epochs if r.epoch == epoch), None)
    installed = next((d for d in run.switches if d.plan == seg.plan), None)
    previous = segs[k - 1].plan if k > 0 else None
    plan = run.plans[seg.plan]
    diff = None if previous is None else plan_diff(run.plans[previous], plan)
    made = tuple(d for d in run.decisions if d.epoch == epoch)
    return EpochView(epoch, run.policy.start(epoch), run.policy.start(epoch + 1), record, seg, plan, installed,
                     previous, diff, made)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def epoch_details_html(view: EpochView, label: str = "") -> str:
    """The epoch panel's HTML: figures of the epoch, the active plan's probe orders and
    stores, the decision that installed it and the plan diff."""
    v, seg = view, view.segment
    who = f"{esc(label)} · " if label else ""
    colour = PLAN_COLOURS[seg.plan % len(PLAN_COLOURS)]
    queries = ", ".join(v.plan.workload.query_names) or "none"
    parts = [f'<div style="font-size:13px">{who}<b>epoch {v.epoch}</b> (event time [{v.start:g}, {v.end:g}) s) · '
             f'<b style="background:{colour};padding:0 4px">{seg.label}</b> active in epochs {seg.first}–{seg.last}'
             f" · queries {esc(queries)}</div>"]
    r = v.record
    if r is None:
        parts.append(info_box(f"no tuple arrived in epoch {v.epoch}: nothing was processed", pre=False))
    else:
        parts.append(table(
            ["input tuples", "results", "probe messages", "of which older partners", "state rows", "latency mean",
             "latency p95", "backlog max"],
            [[f"{r.input_tuples:,}", ", ".join(f"{q} {n:,}" for q, n in r.results.items()) or "—",
              f"{r.probe_messages:,}", f"{r.history_messages:,}", f"{r.state_rows:,}", _ms(r.latency_mean),
              _ms(r.latency_p95), f"{r.backlog_max:,}"]]))
    orders = [[q, s, o] for q, by in v.plan.probe_orders().items() for s, o in by.items()]
    orders += [[f"store {m}", s, o] for m, by in v.plan.materializations().items() for s, o in by.items()]
    parts.append(f"<b>probe orders of {seg.label}</b> (probe cost {fmt(v.plan.probe_cost)} tuples/s under the "
                 f"statistics it was optimised on)")
    parts.append(table(["query", "start", "probe order"], orders))
    rows = dict(r.stores) if r is not None else {}
    stores = [[s.id, s.parallelism, str(s.partition), f"{rows.pop(s.id, 0):,}" if r is not None else "—"]
              for s in v.plan.stores]
    stores += [[f"{k} (container of an earlier plan)", "", "", f"{n:,}"] for k, n in sorted(rows.items())]
    parts.append(f"<b>stores of {seg.label}</b> (rows held at the end of the epoch, over all epoch containers)")
    parts.append(table(["store", "partitions", "partitioned by", "rows"], stores))
    d = v.installed_by
    if d is not None:
        when = "before the first epoch (the initial plan)" if seg.plan == 0 else f"at the start of epoch {d.epoch}"
        on = "" if d.stats_epoch is None else f" on the statistics of epoch {d.stats_epoch}"
        parts.append(f"<b>decision that installed {seg.label}</b>: made {when}{on}, active from epoch "
                     f"{d.active_from}")
        parts.append(info_box(d.reason))
    if v.diff is not None:
        parts.append(f"<b>plan diff P{v.previous} → {seg.label}</b>")
        parts.append(info_box(v.diff.summary()))
    for d in v.decisions:
        verb = f"switch to P{d.plan}" if d.switched else f"keep P{d.plan}"
        parts.append(f"<b>decision at the start of epoch {d.epoch}</b> (for epoch {d.active_from}): {verb}")
        parts.append(info_box(d.reason))
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# throttled redraws from any thread
# --------------------------------------------------------------------------------------------


class _Scheduled:
    """A draw scheduled by :class:`Redraw`: its timer handle, and whether it was accounted for."""

    __slots__ = ("handle", "retired")

    def __init__(self) -> None:
        self.handle: Any = None
        self.retired = False


class Redraw:
    """Calls ``draw()`` at most once per ``min_interval`` seconds when :meth:`request`\\ ed
    from any thread, never inside the caller (see the module doc); :meth:`now` draws at once
    on the calling thread.  ``count`` draws so far.

    >>> seen = []
    >>> r = Redraw(lambda: seen.append(1), min_interval=0.05)
    >>> for _ in range(20):
    ...     r.request()
    >>> r.wait_idle(5), 1 <= len(seen) <= 2
    (True, True)
    """

    def __init__(self, draw: Callable[[], None], min_interval: float = 0.5):
        self.draw = draw
        self.min_interval = float(min_interval)
        self.count = 0
        self._lock = threading.Lock()  # bookkeeping only: never held while drawing
        self.lock = threading.RLock()  # one draw at a time (views take it to change what a draw shows)
        self._last = -math.inf
        self._pending: Any = None
        self._busy = 0
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._loop_thread = threading.current_thread()

    def _on_loop(self) -> bool:
        loop = self._loop
        return loop is not None and loop.is_running() and not loop.is_closed()

    def request(self, force: bool = False) -> None:
        """Schedule a draw (``force``: without waiting for the interval)."""
        if self._on_loop():
            try:
                self._loop.call_soon_threadsafe(self._schedule, force)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._schedule(force)

    def _schedule(self, force: bool) -> None:
        with self._lock:
            wait = 0.0 if force else max(0.0, self._last + self.min_interval - time.monotonic())
            old = self._pending
            if old is not None:
                if not force:
                    return  # a draw is already scheduled: it will show this too
                old.handle.cancel()
                self._retire(old)
            token = _Scheduled()
            self._pending = token
            self._busy += 1
            if self._on_loop() and threading.current_thread() is self._loop_thread:
                token.handle = self._loop.call_later(wait, self._fire, token)
            else:
                token.handle = threading.Timer(wait, self._fire, (token,))
                token.handle.daemon = True
                token.handle.start()

    def _retire(self, token: "_Scheduled") -> None:
        """Account for a scheduled draw exactly once (drawn or cancelled); under ``_lock``."""
        if not token.retired:
            token.retired = True
            self._busy -= 1

    def _fire(self, token: "_Scheduled") -> None:
        with self._lock:
            if token.retired:  # cancelled by a forced draw while it was about to start
                return
            if self._pending is token:
                self._pending = None
        try:
            self.now()
        finally:
            with self._lock:
                self._retire(token)

    def now(self) -> None:
        """Draw now, on this thread."""
        with self.lock:
            self._last = time.monotonic()
            self.count += 1
            try:
                self.draw()
            except Exception:  # noqa: BLE001 - a failing redraw must not kill the source's thread
                _log.exception("a redraw failed")

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no draw is scheduled or running (scripts, tests); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                busy = self._busy
            if not busy:
                with self.lock:  # a draw in progress
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)


# --------------------------------------------------------------------------------------------
# the epoch timeline
# --------------------------------------------------------------------------------------------


class EpochTimeline(W.VBox):
    """Adaptive runs over their epochs, with an epoch selector (see the module doc).

    ``source``: an ``AdaptiveRun`` or a live source; more runs are overlaid with :meth:`add`
    (e.g. the static baseline next to the adaptive run).  ``marks``: event times to mark
    (``{"data change": 15.0}``)."""

    def __init__(self, source: Any = None, label: str | None = None, *, marks: Mapping[str, float] | None = None,
                 title: str | None = None, min_interval: float = 0.5):
        import plotly.graph_objects as go

        self.marks = dict(marks or {})
        self.title = title
        self.runs: list[tuple[str, Any]] = []  # (label, source)
        self._snaps: dict[str, Any] = {}  # label → the run as last drawn
        self._errors: dict[str, str] = {}  # label → why its last snapshot failed
        self._redraw = Redraw(self._draw, min_interval)
        self._fig_layout: dict | None = None
        self._fig_traces: list[dict] = []
        self._updating = False
        self.figure = go.FigureWidget()
        self.figure.layout.height = 120
        self.status = W.HTML("<i>no run yet</i>")
        self.run_choice = W.Dropdown(options=[], description="run", layout=W.Layout(width="240px", display="none"))
        self.epoch = W.IntSlider(value=0, min=0, max=0, description="epoch", continuous_update=False, disabled=True,
                                 layout=W.Layout(width="520px"))
        self.details = W.HTML("")
        self.epoch.observe(lambda ch: self._show_details(), "value")
        self.run_choice.observe(lambda ch: self._on_run_choice(), "value")
        super().__init__([self.status, self.figure, W.HBox([self.epoch, self.run_choice]), self.details])
        if source is not None:
            self.add(source, label)

    # -- runs -------------------------------------------------------------------------------

    def add(self, source: Any, label: str | None = None) -> str:
        """Overlay another run (static or live); returns its label."""
        label = label or default_label(snapshot(source))
        taken = {lab for lab, _ in self.runs}
        base, k = label, 2
        while label in taken:
            label, k = f"{base} #{k}", k + 1
        with self._redraw.lock:
            self.runs.append((label, source))
            if is_live(source):  # before the first draw: an end in between is not missed
                source.subscribe(lambda ev, source=source: self._on_event(source, ev))
            self._updating = True
            try:
                self.run_choice.options = [lab for lab, _ in self.runs]
                self.run_choice.value = label
                self.run_choice.layout.display = None if len(self.runs) > 1 else "none"
            finally:
                self._updating = False
            self.refresh()
        return label

    def clear(self) -> None:
        """Forget every run (live ones keep running; their events are ignored)."""
        with self._redraw.lock:
            self.runs = []
            self._snaps = {}
            self._updating = True
            try:
                self.run_choice.options = []
                self.run_choice.layout.display = "none"
            finally:
                self._updating = False
            self.refresh()

    def _on_event(self, source: Any, ev: Mapping[str, Any]) -> None:
        if any(s is source for _, s in self.runs):
            self._redraw.request(force=ev.get("kind") == "status")

    def refresh(self) -> None:
        """Redraw now (on this thread)."""
        self._redraw.now()

    def wait_drawn(self, timeout: float | None = None) -> bool:
        """Wait until scheduled redraws are done (scripts and tests; a notebook never needs it)."""
        return self._redraw.wait_idle(timeout)

    # -- drawing ----------------------------------------------------------------------------

    def segments(self, label: str | None = None) -> tuple[PlanSegment, ...]:
        """The plan stretches of a run (the selected one by default), as drawn in the band."""
        run = self._run(label)
        return () if run is None else plan_segments(run)

    def _run(self, label: str | None = None):
        label = label or self.run_choice.value
        return self._snaps.get(label) if label is not None else None

    def _draw(self) -> None:
        snaps, self._errors = {}, {}
        for label, src in self.runs:
            try:
                snaps[label] = snapshot(src)
            except Exception as e:  # noqa: BLE001 — shown in the status line, never a traceback
                self._errors[label] = str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"
                if label in self._snaps:
                    snaps[label] = self._snaps[label]  # the last good snapshot
        self._snaps = snaps
        fig = epoch_figure(list(snaps.items()), marks=self.marks, title=self.title or "adaptive execution by epoch",
                           panels=TIMELINE_PANELS)
        d = fig.to_dict()
        self._fig_traces, self._fig_layout = d["data"], d["layout"]
        self._sync_epochs()
        self._sync_figure()
        self._show_status()
        self._show_details()

    def _sync_figure(self) -> None:
        layout = dict(self._fig_layout or {})
        run = self._run()
        v = self.epoch.value
        if run is not None and not self.epoch.disabled:
            shape = {"type": "rect", "xref": "x", "yref": "paper", "x0": run.policy.start(v),
                     "x1": run.policy.start(v + 1), "y0": 0, "y1": 1, "fillcolor": "rgba(255, 193, 7, 0.18)",
                     "line": {"width": 0}, "layer": "below", "name": SELECTED_SHAPE}
            layout["shapes"] = [*layout.get("shapes", ()), shape]
        sync_figure(self.figure, self._fig_traces, layout)

    def _sync_epochs(self) -> None:
        """The selector's range follows the selected run; at its end it follows new epochs."""
        segs = self.segments()
        self._updating = True
        try:
            if not segs:
                self.epoch.disabled = True
                return
            lo, hi = segs[0].first, segs[-1].last
            following = self.epoch.disabled or self.epoch.value >= self.epoch.max
            with self.epoch.hold_trait_notifications():
                if lo > self.epoch.max:
                    self.epoch.max = hi
                    self.epoch.min = lo
                else:
                    self.epoch.min = lo
                    self.epoch.max = hi
            self.epoch.value = hi if following else min(max(self.epoch.value, lo), hi)
            self.epoch.disabled = False
        finally:
            self._updating = False

    def _show_status(self) -> None:
        if not self.runs:
            self.status.value = "<i>no run yet</i>"
            return
        parts = []
        for label, src in self.runs:
            run = self._snaps.get(label)
            st = status_of(src)
            done = f"{len(run.epochs)} epochs" if run is not None else ""
            if run is not None and run.epochs:
                done += f" (last: {run.epochs[-1].epoch})"
            n = 0 if run is None else max(0, len(run.switches) - 1)
            switches = "" if run is None else f", {n} switch{'es' if n != 1 else ''}"
            err = self._errors.get(label) or (getattr(src, "error", None) if is_live(src) else None)
            parts.append(f"{esc(label)}: {state_html(st)} — {done}{switches}"
                         + (f" — {esc(err)}" if err else ""))
        self.status.value = '<span style="font-size:13px">' + " · ".join(parts) + "</span>"

    def select(self, epoch: int, label: str | None = None) -> None:
        """Show ``epoch`` of a run (the selected one by default)."""
        if label is not None:
            self.run_choice.value = label
        if epoch < self.epoch.min or epoch > self.epoch.max:
            raise AdaptiveError(f"epoch {epoch} is not part of the run ({self.epoch.min}–{self.epoch.max})")
        self.epoch.value = epoch  # (the slider's observer shows it)

    def view(self) -> EpochView | None:
        """The selected epoch as plain values (``None`` before the first epoch)."""
        run = self._run()
        if run is None or self.epoch.disabled:
            return None
        return epoch_view(run, self.epoch.value)

    def _on_run_choice(self) -> None:
        with self._redraw.lock:  # (a draw on another thread finishes first)
            if self._updating:
                return
            self._sync_epochs()
            self._show_details()

    def _show_details(self) -> None:
        with self._redraw.lock:
            if self._updating:  # the draw in progress on this thread shows the details at its end
                return
            try:
                v = self.view()
            except MqjoinError as e:
                self.details.value = error_box(str(e))
                return
            if v is None:
                self.details.value = "<i>no epoch finished yet</i>" if self.runs else ""
            else:
                self.details.value = epoch_details_html(v, self.run_choice.value if len(self.runs) > 1 else "")
            if self._fig_layout is not None:
                self._sync_figure()


# --------------------------------------------------------------------------------------------
# query changes while a run is live
# --------------------------------------------------------------------------------------------


def parse_selectivities(text: str) -> dict[str, float]:
    """Selectivities typed into the panel: one ``equality: value`` per line (YAML), e.g.
    ``S.a = T.a: 0.01``.

    >>> parse_selectivities("S.a = T.a: 0.01\\nT.b = U.b: 0.5")
    {'S.a = T.a': 0.01, 'T.b = U.b': 0.5}
    >>> parse_selectivities("S.a = T.a")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: selectivities: write one 'equality: value' per line, e.g. 'S.a = T.a: 0.01'
    """
    import yaml

    if not text.strip():
        return {}
    hint = "selectivities: write one 'equality: value' per line, e.g. 'S.a = T.a: 0.01'"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise AdaptiveError(hint) from None
    if not isinstance(data, Mapping):
        raise AdaptiveError(hint)
    out = {}
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise AdaptiveError(f"selectivities: the value of {k!r} must be a number in (0, 1], got {v!r}")
        out[str(k)] = float(v)
    return out


def _current_epoch(run, event_time: float | None) -> int | None:
    if event_time is None:
        return run.epochs[-1].epoch if run.epochs else None
    return run.policy.epoch_of(event_time)


class QueryChangesPanel(W.VBox):
    """Add and remove queries while a run is live (see the module doc).  The text typed is
    kept when a change is refused; the error is shown in the panel."""

    def __init__(self, source: Any = None, *, min_interval: float = 0.5):
        self.source: Any = None
        self.changes: list[dict] = []  # change events seen (submitted here or elsewhere)
        self._redraw = Redraw(self._draw, min_interval)
        self.clock = W.HTML("<i>no run</i>")
        self.name = W.Text(description="name", placeholder="q9", layout=W.Layout(width="180px"))
        self.text = W.Text(description="query", placeholder="R(a), S(a,b), T(b)  or  R.a = S.a AND S.b = T.b",
                           layout=W.Layout(width="440px"))
        self.selectivities = W.Textarea(description="selectivities", placeholder="S.b = T.b: 0.01   (optional, one per line)",
                                        layout=W.Layout(width="440px", height="52px"))
        self.add_button = W.Button(description="Add query", button_style="primary", icon="plus")
        self.remove_choice = W.Dropdown(options=[], description="query", layout=W.Layout(width="200px"))
        self.remove_button = W.Button(description="Remove", button_style="warning", icon="minus")
        self.message = W.HTML("")
        self.table = W.HTML("")
        self.add_button.on_click(lambda _: self.add())
        self.remove_button.on_click(lambda _: self.remove())
        super().__init__([
            self.clock,
            W.HBox([self.name, self.text, self.add_button]),
            self.selectivities,
            W.HBox([self.remove_choice, self.remove_button]),
            self.message,
            self.table,
        ])
        if source is not None:
            self.attach(source)
        else:
            self.refresh()

    def attach(self, source: Any) -> None:
        """Direct the panel at another run (e.g. the latest one started)."""
        self.source = source
        self.changes = []
        if is_live(source):
            source.subscribe(lambda ev, source=source: self._on_event(source, ev))
        self.message.value = ""
        self.refresh()

    def _on_event(self, source: Any, ev: Mapping[str, Any]) -> None:
        if source is not self.source:
            return
        if ev.get("kind") == "change":
            self.changes.append(dict(ev))
        if ev.get("kind") in ("epoch", "change", "status"):
            self._redraw.request(force=ev.get("kind") != "epoch")

    # -- actions ----------------------------------------------------------------------------

    def _check_live(self) -> None:
        if self.source is None:
            raise AdaptiveError("no run: start one first (Run in the Adaptivity tab, or QueryChangesPanel(replay))")
        if not is_live(self.source):
            raise AdaptiveError("this run is finished: queries can only be added to or removed from a live run")
        st = status_of(self.source)
        if st != "running":
            raise AdaptiveError(f"the run is {st}: queries can only be added to or removed from a running run")

    def _submit(self, **change: Any) -> int | None:
        try:
            self._check_live()
            return int(self.source.submit(**change))
        except MqjoinError as e:
            self.message.value = error_box(str(e))
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            self.message.value = error_box(f"{type(e).__name__}: {e}")
        return None

    def add(self) -> int | None:
        """Submit the typed query now; returns its activation epoch (``None``: refused, the
        reason is shown and the fields keep what was typed)."""
        name, text = self.name.value.strip(), self.text.value.strip()
        if not name:
            self.message.value = error_box("give the query a name (letters, digits, _), e.g. q9")
            return None
        if not text:
            self.message.value = error_box(f"write the query {name} in paper notation (R(a), S(a,b)) or as "
                                           "equalities (R.a = S.a AND S.b = T.b)")
            return None
        try:
            sel = parse_selectivities(self.selectivities.value)
        except MqjoinError as e:
            self.message.value = error_box(str(e))
            return None
        epoch = self._submit(add={name: text}, **({"selectivities": sel} if sel else {}))
        if epoch is not None:
            self.message.value = info_box(f"{name} submitted in epoch {epoch - 2}: part of the re-optimisation at the "
                                          f"start of epoch {epoch - 1}, active from epoch {epoch}", pre=False)
            self.name.value, self.text.value, self.selectivities.value = "", "", ""
            self.refresh()
        return epoch

    def remove(self) -> int | None:
        """Remove the chosen query now; returns the epoch from which it no longer runs."""
        name = self.remove_choice.value
        if not name:
            self.message.value = error_box("choose a query to remove")
            return None
        epoch = self._submit(remove=[name])
        if epoch is not None:
            self.message.value = info_box(f"{name} removed: it answers until the end of epoch {epoch - 1} and no "
                                          f"longer from epoch {epoch}", pre=False)
            self.refresh()
        return epoch

    # -- drawing ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw now (on this thread)."""
        self._redraw.now()

    def wait_drawn(self, timeout: float | None = None) -> bool:
        return self._redraw.wait_idle(timeout)

    def _draw(self) -> None:
        src = self.source
        if src is None:
            self.clock.value = "<i>no run: start one to add or remove queries while it runs</i>"
            self.table.value = ""
            self.remove_choice.options = []
            self._enable(False)
            return
        st = status_of(src)
        try:
            run = snapshot(src)
        except Exception as e:  # noqa: BLE001 — shown inline, never a traceback
            self.clock.value = error_box(f"the run cannot be read ({st}): "
                                         + (str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"))
            self._enable(False)
            return
        t = getattr(src, "event_time", None) if is_live(src) else None
        epoch = _current_epoch(run, t)
        where = "not started" if epoch is None else (f"event time <b>{t:.2f} s</b>, epoch <b>{epoch}</b>"
                                                     if t is not None else f"last epoch <b>{epoch}</b>")
        self.clock.value = (f'<span style="font-size:13px">{esc(st)} · {where} · epochs of '
                            f"{run.policy.epoch:g} s: a change submitted in epoch i is decided at the start of "
                            f"i + 1 and active from i + 2</span>")
        self._enable(st == "running")
        active = [lf.query for lf in run.lifetimes if lf.removed is None]
        keep = self.remove_choice.value
        self.remove_choice.options = active
        if keep in active:
            self.remove_choice.value = keep
        at = {}
        for ev in self.changes:
            ch = ev.get("change", {})
            for q in ch.get("add", {}):
                at[("+", q)] = ch.get("at")
            for q in ch.get("remove", ()):
                at[("−", q)] = ch.get("at")
        rows = []
        for lf in run.lifetimes:
            text = run.workload.query(lf.query).text
            for sign, a in (("+", lf.added), ("−", lf.removed)):
                if a is None:
                    continue
                if (epoch is None or epoch < a) and st in ENDED:
                    state = f"not reached (the run {st})"
                elif epoch is None or epoch < a:
                    state = "pending"
                else:
                    state = "active" if sign == "+" else "removed"
                sub = at.get((sign, lf.query))
                rows.append((a, f"{sign}{lf.query}", text, "" if sub is None else f"{sub:.2f} s", state))
        rows.sort(key=lambda r: (r[0], r[1]))
        if rows:
            self.table.value = ("<b>query changes</b>" + table(
                ["activation epoch", "change", "query", "submitted at", "state"], [list(r) for r in rows],
                marked=[r[4] == "pending" for r in rows]))
        else:
            self.table.value = "<i>no query changes yet</i>"

    def _enable(self, on: bool) -> None:
        for w in (self.add_button, self.remove_button):
            w.disabled = not on


# --------------------------------------------------------------------------------------------
# the Adaptivity tab
# --------------------------------------------------------------------------------------------

#: the paper's Section VII-B data sets at small rates (mqjoin.datasets.synthetic_paper)
PAPER_DATA = {
    "selectivity-change": {"scale": 1000, "partners": 20},  # 100 tuples/s per relation
    "skewed-rates": {"high_rate": 500, "low_rate": 10, "fanout": 5},  # R at 500, S, T, U at 10 tuples/s
}
PAPER_FIGURES = {"selectivity-change": "Figure 8(a)", "skewed-rates": "Figure 8(b)"}
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
        self.limit_mirs = W.Checkbox(value=False, description="MIR budget", indent=False, layout=W.Layout(width="110px"),
                                     tooltip=MIR_BUDGET_HELP)
        self.mir_budget = W.BoundedFloatText(value=100.0, min=0.0, max=1e15, description="tuples", disabled=True,
                                             layout=W.Layout(width="180px"), tooltip=MIR_BUDGET_HELP)
        self.speedup = W.FloatLogSlider(value=10.0, base=10, min=0, max=3, step=0.1, description="speedup",
                                        continuous_update=False)
        self.budget_help = W.HTML(f'<span style="font-size:12px;color:#555" title="{esc(MIR_BUDGET_HELP)}">'
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
        self.data.value = keep if keep in values else (own[0] if own else "selectivity-change")
        self._describe_data()

    def _describe_data(self) -> None:
        choice = self.data.value
        self.duration.layout.display = None if choice == "uniform" else "none"
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
                    f"{choice.replace('-', '_')}({p})): 30 s of event time, the data change at 15 s. The run uses "
                    f"the data set's own workload ({same}) with the explorer's optimiser options; the "
                    f"optimiser's initial view is ")
            if choice == "skewed-rates":
                text += ("the statistics of the first second (what a running system knows). Figure 8(b) needs an "
                         "MIR memory budget between the MIR stores' memory before and after the change: ticking "
                         "MIR budget fills one in (figure_8b_budget).")
            else:
                text += "the statistics of the data before the change, with S.b = T.b raised by 10 % (the paper's)."
        self.data_note.value = f'<span style="font-size:12px;color:#555">{esc(text)}</span>'

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
