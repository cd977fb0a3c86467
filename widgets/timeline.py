"""The epoch timeline of adaptive runs in the explorer (paper Section VI).

:class:`EpochTimeline` shows one or more adaptive runs over their epochs: a band with the plan active in every epoch
(``P0``, ``P1`` …), latency, throughput (tuples per second of processing time, the input rate dashed), state and probe
messages, with every switch marked and annotated with its cause — its full reason on hover —
(:func:`mqjoin.widgets.charts.epoch_figure`), and an epoch selector that shows, for the selected epoch, the active
plan's probe orders and stores, the decision that installed it (with its reason) and the plan diff against the plan
before it (:func:`mqjoin.planning.diff.plan_diff`).  The diff's probe costs are the decision's: both plans under the
statistics the switch was decided on, so the diff and the switch's label say the same saving (each plan's cost under the
statistics it was optimised on would compare two different data).  Plans are named by their fingerprint across the runs
of a timeline (:class:`~mqjoin.widgets.charts.PlanNames`): ``P1`` is one plan, in one colour, in every run.  Its
sources, finished or live, and its throttled redraws are :mod:`mqjoin.widgets.live`'s; the query changes of a live run
are :mod:`mqjoin.widgets.query_changes`', the Adaptivity tab :mod:`mqjoin.widgets.adaptivity`.

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

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import ipywidgets as W

from mqjoin.adaptive.controller import Decision
from mqjoin.widgets.charts import PlanNames, PlanSegment, epoch_figure, plan_segments
from mqjoin.planning.diff import PlanDiff, plan_diff
from mqjoin.model.errors import AdaptiveError, MqjoinError
from mqjoin.planning.plan import Plan

from mqjoin.widgets._html import error_box, esc, info_box, state_html, table
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure
from mqjoin.widgets.live import Redraw, default_label, is_live, snapshot, status_of

_log = logging.getLogger(__name__)

#: the rows of the timeline's figure (keys of :data:`mqjoin.widgets.charts.EPOCH_PANELS`)
TIMELINE_PANELS = ("plans", "latency", "throughput", "state", "messages")
SELECTED_SHAPE = "selected epoch"


# --------------------------------------------------------------------------------------------
# one epoch, as plain values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochView:
    """What the timeline shows for one epoch of a run: its record (``None`` when no tuple
    arrived in it), the active plan and its stretch of epochs, the decision that installed
    the plan (``installed_by``), the plan active before that stretch (``previous``, its
    index in the run; ``previous_label`` its name) and the diff to it (costs: the
    decision's, see the module doc), and the decisions made at the start of this epoch."""

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
    previous_label: str | None = None
    names: PlanNames | None = None
    run: Any = None

    def plan_label(self, index: int) -> str:
        """The shown name of the run's plan ``index``."""
        return f"P{index if self.names is None else self.names.number(self.run, index)}"


def epoch_view(run, epoch: int, names: PlanNames | None = None) -> EpochView:
    """The :class:`EpochView` of ``epoch`` in ``run`` (an ``AdaptiveRun``); ``names``: the
    plans' shown numbers (:class:`~mqjoin.widgets.charts.PlanNames`; else their indices).

    >>> from mqjoin.adaptive.policy import AdaptivePolicy
    >>> from mqjoin.datasets.synthetic_paper import selectivity_change
    >>> from mqjoin.runtime.epochs import run_adaptive
    >>> d = selectivity_change(scale=5000, partners=4)
    >>> v = epoch_view(run_adaptive(d.workload, d.tables(), AdaptivePolicy(epoch=1.0), collect=False), 17)
    >>> v.segment.label, v.installed_by.active_from, v.previous, v.plan.probe_orders()["q"]["S"]
    ('P1', 17, 0, 'S » T[b] » R[a] » U[c]')
    >>> d = v.installed_by  # the diff and the decision say the same saving
    >>> (v.diff.cost_before, v.diff.cost_after) == (d.running_cost, d.candidate_cost)
    True
    """
    segs = plan_segments(run, names)
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
    if diff is not None and installed is not None and installed.running_cost and installed.candidate_cost is not None:
        diff = replace(diff, cost_before=installed.running_cost, cost_after=installed.candidate_cost)
    made = tuple(d for d in run.decisions if d.epoch == epoch)
    return EpochView(epoch, run.policy.start(epoch), run.policy.start(epoch + 1), record, seg, plan, installed,
                     previous, diff, made, None if previous is None else segs[k - 1].label, names, run)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def epoch_details_html(view: EpochView, label: str = "") -> str:
    """The epoch panel's HTML: figures of the epoch, the active plan's probe orders and
    stores, the decision that installed it and the plan diff."""
    v, seg = view, view.segment
    who = f"{esc(label)} · " if label else ""
    colour = seg.colour
    queries = ", ".join(v.plan.workload.query_names) or "none"
    parts = [f'<div style="font-size:14px">{who}<b>epoch {v.epoch}</b> (event time [{v.start:g}, {v.end:g}) s) · '
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
        basis = ("both under the statistics the switch was decided on" if d is not None and d.running_cost
                 else "each under the statistics it was optimised on")
        parts.append(f"<b>plan diff {v.previous_label} → {seg.label}</b> (probe costs {basis})")
        parts.append(info_box(v.diff.summary()))
    for d in v.decisions:
        verb = f"switch to {v.plan_label(d.plan)}" if d.switched else f"keep {v.plan_label(d.plan)}"
        parts.append(f"<b>decision at the start of epoch {d.epoch}</b> (for epoch {d.active_from}): {verb}")
        parts.append(info_box(d.reason))
    return "".join(parts)


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
        self.marks = dict(marks or {})
        self.title = title
        self.runs: list[tuple[str, Any]] = []  # (label, source)
        #: the plans' names across every run drawn (kept while runs are added: names never move)
        self.names = PlanNames()
        self._snaps: dict[str, Any] = {}  # label → the run as last drawn
        self._errors: dict[str, str] = {}  # label → why its last snapshot failed
        self._redraw = Redraw(self._draw, min_interval)
        self._fig_layout: dict | None = None
        self._fig_traces: list[dict] = []
        self._updating = False
        self.figure = new_figure_widget([], {"height": 120})
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
            self.names = PlanNames()
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
        return () if run is None else plan_segments(run, self.names)

    def _run(self, label: str | None = None):
        label = label or self.run_choice.value
        return self._snaps.get(label) if label is not None else None

    def _draw(self) -> None:
        snaps, self._errors = {}, {}
        for label, src in self.runs:
            try:
                snaps[label] = snapshot(src)
            except Exception as e:  # noqa: BLE001 — shown in the status line, never a traceback
                if not isinstance(e, MqjoinError):
                    _log.exception("reading the run %r failed", label)
                self._errors[label] = str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"
                if label in self._snaps:
                    snaps[label] = self._snaps[label]  # the last good snapshot
        self._snaps = snaps
        fig = epoch_figure(list(snaps.items()), marks=self.marks, title=self.title or "adaptive execution by epoch",
                           panels=TIMELINE_PANELS, names=self.names)
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
        self.status.value = '<span style="font-size:14px">' + " · ".join(parts) + "</span>"

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
        return epoch_view(run, self.epoch.value, self.names)

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
