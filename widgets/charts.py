"""Plotly charts of deployment metrics: throughput, result latency and state size over time.

Plotly is only imported when a chart is drawn (``pip install 'mqjoin[notebook]'``).  Inputs
are the pandas frames of a :class:`~mqjoin.runtime.spark.launch.Deployment` (or anything with
the same columns), so a finished run's saved metrics chart the same way as a live one.

>>> import pandas as pd
>>> q = pd.DataFrame({"engine": ["mqjoin"] * 2, "batch": [0, 1], "query": ["q1"] * 2,
...                   "results": [3, 5], "started": [100.0, 101.5], "seconds": [1.0, 0.5],
...                   "latency_mean": [0.8, 0.4], "latency_p95": [1.0, 0.5], "latency_max": [1.0, 0.5]})
>>> b = pd.DataFrame({"engine": ["mqjoin"] * 2, "batch": [0, 1], "input_rows": [1000, 500],
...                   "started": [100.0, 101.5], "seconds": [1.0, 0.5], "state_rows": [900, 1200]})
>>> fig = metrics_figure([("mqo", b, q, None)])
>>> [t.name for t in fig.data]
['mqo throughput', 'mqo q1 latency', 'mqo state']
>>> list(fig.data[0].y)
[1000.0, 1000.0]
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from mqjoin.support.units import percent_change

CHART_ROWS = ("input tuples/s", "result latency (s)", "state (rows)")

#: the smallest text (px) of a chart: readable from the back of a room at 1920×1080
PROJECTOR_FONT = 14


def projector(layout: dict, size: int = PROJECTOR_FONT + 2) -> dict:
    """``layout`` made readable on a projector: every text at least :data:`PROJECTOR_FONT`
    px (base font ``size``; titles, ticks, legend and hover labels inherit or are set),
    and the width left to the page (autosize) unless ``layout`` fixes one (a figure drawn in a
    hidden tab is re-measured when its tab shows: :mod:`mqjoin.widgets.plotly_view`).

    >>> lay = projector({"height": 300, "legend": {"orientation": "h"}})
    >>> lay["font"]["size"], lay["legend"], lay["hoverlabel"]["font"]["size"], lay["autosize"]
    (16, {'orientation': 'h', 'font': {'size': 16}}, 16, True)
    """
    size = max(size, PROJECTOR_FONT)
    out = {**layout, "autosize": "width" not in layout, "font": {**layout.get("font", {}), "size": size},
           "hoverlabel": {**layout.get("hoverlabel", {}), "font": {"size": size}}}
    if "legend" in layout or "showlegend" not in layout:
        out["legend"] = {**layout.get("legend", {}), "font": {"size": size}}
    return out



def chart_series(label: str, batches, queries, progress) -> dict[str, list[tuple[str, list, list]]]:
    """The three panels' traces for one deployment: (name, x = seconds since start, y)."""
    out: dict[str, list[tuple[str, list, list]]] = {k: [] for k in CHART_ROWS}
    t0 = None
    for f in (batches, queries, progress):
        if f is not None and len(f) and "started" in f:
            t0 = f["started"].min() if t0 is None else min(t0, f["started"].min())
    if batches is not None and len(batches):
        b = batches.sort_values("batch")
        x = (b["started"] + b["seconds"] - t0).tolist()
        rate = (b["input_rows"] / b["seconds"].where(b["seconds"] > 0)).astype(float).tolist()
        out["input tuples/s"].append((f"{label} throughput", x, rate))
        if "state_rows" in b:
            out["state (rows)"].append((f"{label} state", x, b["state_rows"].astype(float).tolist()))
    if queries is not None and len(queries) and "latency_mean" in queries:
        for qname, g in queries.dropna(subset=["latency_mean"]).groupby("query", sort=True):
            g = g.sort_values("batch")
            x = (g["started"] + g["seconds"] - t0).tolist()
            out["result latency (s)"].append((f"{label} {qname} latency", x, g["latency_mean"].astype(float).tolist()))
    if (batches is None or not len(batches)) and progress is not None and len(progress):
        # the native baseline: Spark's progress reports per query (summed over queries per batch)
        p = progress.sort_values("batch")
        if "input_rows" in p:  # a batch that read nothing (a run's first) is no point of throughput
            p = p[p["input_rows"].fillna(0) > 0]
        agg = p.groupby("batch", sort=True).agg(rows=("input_rows", "sum"), ms=("duration_ms", "max"),
                                                state=("state_rows", "sum"))
        x = (agg["ms"].cumsum() / 1000.0).tolist()
        if not len(agg):
            return out
        out["input tuples/s"].append((f"{label} throughput", x,
                                      (agg["rows"] / (agg["ms"].where(agg["ms"] > 0) / 1000.0)).astype(float).tolist()))
        out["state (rows)"].append((f"{label} state", x, agg["state"].astype(float).tolist()))
    return out


#: dashes of per-query lines (by the query's position among the run's queries)
QUERY_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _weighted_latency(queries):
    """Per batch: the latency of all results (each query's mean weighted by its results)."""
    q = queries.dropna(subset=["latency_mean"])
    if not len(q):
        return None
    w = q["results"].clip(lower=1) if "results" in q else 1
    g = q.assign(_w=w, _wl=q["latency_mean"] * w).groupby("batch", sort=True)
    agg = g.agg(started=("started", "first"), seconds=("seconds", "first"), wl=("_wl", "sum"), w=("_w", "sum"))
    return agg


def run_series(label: str, batches, queries, progress, *, per_query: bool = False
               ) -> dict[str, list[tuple[str, list, list, str]]]:
    """One run's lines for the three panels as ``(name, x, y, dash)``: throughput and state
    (solid), latency as one line over all queries (results-weighted) or, with ``per_query``,
    one line per query with its own dash (:data:`QUERY_DASHES`).  x: seconds since the run
    started; a point per micro-batch (the native baseline: per Spark progress event).

    >>> import pandas as pd
    >>> q = pd.DataFrame({"batch": [0, 0, 1], "query": ["q1", "q2", "q1"], "results": [3, 1, 5],
    ...                   "started": [100.0, 100.0, 101.5], "seconds": [1.0, 1.0, 0.5],
    ...                   "latency_mean": [0.8, 0.4, 0.4], "latency_p95": [1.0, 0.5, 0.5], "latency_max": [1, 1, 1]})
    >>> b = pd.DataFrame({"batch": [0, 1], "input_rows": [1000, 500], "started": [100.0, 101.5],
    ...                   "seconds": [1.0, 0.5], "state_rows": [900, 1200]})
    >>> s = run_series("mqo #1", b, q, None)
    >>> [(n, y, d) for n, _, y, d in s["result latency (s)"]]
    [('mqo #1 latency', [0.7, 0.4], 'solid')]
    >>> [(n, d) for n, _, _, d in run_series("mqo #1", b, q, None, per_query=True)["result latency (s)"]]
    [('mqo #1 q1 latency', 'solid'), ('mqo #1 q2 latency', 'dash')]
    """
    out = {k: [(n, x, y, "solid") for n, x, y in v] for k, v in chart_series(label, batches, queries, progress).items()}
    lat = out["result latency (s)"]
    if per_query:
        out["result latency (s)"] = [(n, x, y, QUERY_DASHES[k % len(QUERY_DASHES)])
                                     for k, (n, x, y, _) in enumerate(lat)]
    elif lat:
        agg = _weighted_latency(queries)
        t0 = min(f["started"].min() for f in (batches, queries) if f is not None and len(f) and "started" in f)
        out["result latency (s)"] = [(f"{label} latency", (agg["started"] + agg["seconds"] - t0).tolist(),
                                      [round(v, 9) for v in (agg["wl"] / agg["w"]).tolist()], "solid")]
    return out


@dataclass(frozen=True)
class RunSummary:
    """One run in one row: input tuples consumed, tuples per second of wall time since it
    started, result latency p50/p95 over its micro-batches (seconds; ``None`` when the engine
    reports none), rows held by its state at the last report, and whether it keeps up with
    its input (``behind``: the words, else ``None``)."""

    tuples: int
    tuples_per_s: float | None
    latency_p50: float | None
    latency_p95: float | None
    state_rows: int | None
    behind: str | None


def run_summary(batches, queries, progress, *, rate: float | None = None, total: int | None = None) -> RunSummary:
    """The :class:`RunSummary` of a run from its metrics frames; ``rate`` (the input rate
    target, tuples/s) and ``total`` (its input tuples) say whether it falls behind: it does
    when it consumed less than 80 % of the tuples that had arrived by its last report.

    >>> import pandas as pd
    >>> b = pd.DataFrame({"batch": [0, 1], "input_rows": [1000, 500], "started": [100.0, 101.5],
    ...                   "seconds": [1.0, 0.5], "state_rows": [900, 1200]})
    >>> q = pd.DataFrame({"batch": [0, 1], "query": ["q1", "q1"], "results": [3, 5], "started": [100.0, 101.5],
    ...                   "seconds": [1.0, 0.5], "latency_mean": [0.8, 0.4], "latency_p95": [1.0, 0.5]})
    >>> run_summary(b, q, None, rate=900, total=5000)
    RunSummary(tuples=1500, tuples_per_s=750.0, latency_p50=0.6, latency_p95=0.975, state_rows=1200, behind=None)
    >>> run_summary(b, q, None, rate=2000, total=5000).behind
    'falling behind its input: 1,500 of the 4,000 tuples that arrived in 2 s (750 tuples/s against 2,000 tuples/s)'
    """
    import numpy as np

    tuples, elapsed, state = 0, None, None
    if batches is not None and len(batches):
        b = batches.sort_values("batch")
        tuples = int(b["input_rows"].sum())
        elapsed = float((b["started"] + b["seconds"]).max() - b["started"].min())
        state = int(b["state_rows"].iloc[-1]) if "state_rows" in b else None
    elif progress is not None and len(progress):
        p = progress.sort_values("batch")
        agg = p.groupby("batch", sort=True).agg(rows=("input_rows", "sum"), ms=("duration_ms", "max"),
                                                state=("state_rows", "sum"))
        tuples, elapsed, state = int(agg["rows"].sum()), float(agg["ms"].sum()) / 1000.0, int(agg["state"].iloc[-1])
    tps = tuples / elapsed if elapsed else None
    p50 = p95 = None
    if queries is not None and len(queries) and "latency_mean" in queries:
        q = queries.dropna(subset=["latency_mean"])
        if len(q):
            p50 = round(float(np.percentile(q["latency_mean"], 50)), 9)
            p95 = round(float(np.percentile(q["latency_p95"].fillna(q["latency_mean"]), 95)), 9)
    behind = None
    if rate and elapsed and tps is not None:
        arrived = rate * elapsed if total is None else min(total, rate * elapsed)
        if tuples < 0.8 * arrived:
            behind = (f"falling behind its input: {tuples:,} of the {round(arrived):,} tuples that arrived in "
                      f"{elapsed:.3g} s ({round(tps):,} tuples/s against {round(rate):,} tuples/s)")
    return RunSummary(tuples, tps, p50, p95, state, behind)


def metrics_figure(runs: Iterable[tuple[str, Any, Any, Any]], title: str | None = None):
    """A three-panel plotly figure (throughput, latency, state) overlaying several runs.

    ``runs``: ``(label, batches, queries, progress)`` frames per run (``None`` where a run has
    none, e.g. the native baseline has no ``batches``); see :func:`deployment_runs`."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=CHART_ROWS, vertical_spacing=0.08)
    for label, batches, queries, progress in runs:
        for row, panel in enumerate(CHART_ROWS, start=1):
            for name, x, y in chart_series(label, batches, queries, progress)[panel]:
                fig.add_scatter(x=x, y=y, name=name, mode="lines+markers", row=row, col=1)
    fig.update_xaxes(title_text="seconds since deployment", row=3, col=1)
    fig.update_layout(height=700, title=title or "deployment metrics", legend={"orientation": "h"})
    return fig


def deployment_runs(*deployments) -> list[tuple[str, Any, Any, Any]]:
    """``(label, batches, queries, progress)`` of running or finished deployments."""
    return [(f"{d.engine_name}" + (f" {d.plan.mode}" if d.engine_name == "mqjoin" else ""),
             d.batches, d.queries, d.progress) for d in deployments]


#: the height of a row of switch labels above :func:`epoch_figure`'s panels (px)
LABEL_ROW_PX = 22
#: the plot width :func:`label_rows` assumes (px; a full-width chart at 1920×1080)
PLOT_PX = 1500


def label_rows(labels: Sequence[tuple[float, str]], span: float, px: float = PLOT_PX,
               font: int = PROJECTOR_FONT) -> list[int]:
    """Rows for labels ``(x, text)`` written level to the right of ``x`` over an axis of
    ``span`` units drawn ``px`` wide: each the first row where it clears the labels already
    there (a character ~0.6 of the font size wide).

    >>> label_rows([(1.0, "adaptive: P1 (cost −83 %)"), (2.0, "static: P2 (+q6)"), (20.0, "data change")], 30)
    [0, 1, 0]
    """
    ends: list[float] = []
    out = []
    per_px = max(span, 1e-9) / px
    for x, text in labels:
        width = (0.6 * font * len(text) + 12) * per_px
        r = next((k for k, e in enumerate(ends) if e <= x), len(ends))
        if r == len(ends):
            ends.append(0.0)
        ends[r] = x + width
        out.append(r)
    return out


#: the panels :func:`epoch_figure` can draw, by key, with their titles
EPOCH_PANELS = {
    "plans": "active plan per epoch",
    "latency": "tuple latency (s)",
    "throughput": "throughput (tuples/s; input rate dashed)",
    "state": "state and backlog (rows)",
    "messages": "probe messages per epoch",
}
#: the default panels of :func:`epoch_figure`
DEFAULT_EPOCH_PANELS = ("latency", "state", "messages")
EPOCH_ROWS = tuple(EPOCH_PANELS[k] for k in DEFAULT_EPOCH_PANELS)
#: colours of runs in :func:`epoch_figure` (by position) and of plans in its band (by index)
RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
PLAN_COLOURS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#d9d9d9",
                "#bc80bd", "#ccebc5", "#ffed6f")


@dataclass(frozen=True)
class PlanSegment:
    """Epochs ``first … last`` of a run during which plan ``plan`` (its index in the run) was
    active; ``name``: the number it is shown by (:class:`PlanNames`; its index when ``None``)."""

    plan: int
    first: int
    last: int
    name: int | None = None

    @property
    def number(self) -> int:
        return self.plan if self.name is None else self.name

    @property
    def label(self) -> str:
        return f"P{self.number}"

    @property
    def colour(self) -> str:
        return PLAN_COLOURS[self.number % len(PLAN_COLOURS)]


class PlanNames:
    """Plan numbers that name a plan alike in every run drawn together: ``P<k>`` by the plan's
    fingerprint (:func:`mqjoin.planning.diff.plan_signature`: its probe orders and the orders
    maintaining its MIRs), numbered in the order first seen, so ``P1`` is one plan in one
    colour across an adaptive and a static run.  A run without plans keeps its indices.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> from types import SimpleNamespace as N
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q: "R(a), S(a), T(a)"}
    ... ''')
    >>> p, p2 = optimize(w).plan, optimize(w.with_relation("S", rate=10000)).plan
    >>> names = PlanNames()
    >>> names.number(N(plans=[p, p2]), 1), names.number(N(plans=[p2]), 0), names.number(N(plans=[p]), 0)
    (0, 0, 1)
    """

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}

    def number(self, run, index: int) -> int:
        plans = getattr(run, "plans", None)
        if not plans or not 0 <= index < len(plans):
            return index
        from mqjoin.planning.diff import plan_signature

        return self._ids.setdefault(plan_signature(plans[index]), len(self._ids))


def plan_segments(run, names: PlanNames | None = None) -> tuple[PlanSegment, ...]:
    """The run's epochs cut into maximal stretches of one active plan, in order: what the
    band of :func:`epoch_figure` draws.  A stretch starts where its plan became active (an
    epoch without tuples has no record, so the installing decision's ``active_from`` is
    used when it falls in such a gap) and lasts until the next one starts.

    ``run``: an :class:`~mqjoin.runtime.epochs.AdaptiveRun` (anything with ``epochs``,
    records with ``epoch`` and ``plan``, and ``switches``); ``names``: the numbers the
    segments are shown by (:class:`PlanNames`).

    >>> from types import SimpleNamespace as N
    >>> run = N(epochs=[N(epoch=e, plan=0 if e < 4 else 1) for e in (0, 1, 2, 5, 6)],
    ...         switches=[N(plan=0, active_from=0), N(plan=1, active_from=4)])
    >>> [(s.label, s.first, s.last) for s in plan_segments(run)]
    [('P0', 0, 3), ('P1', 4, 6)]
    """
    installed = {d.plan: d.active_from for d in run.switches}
    segs: list[list[int]] = []
    for r in run.epochs:
        if segs and segs[-1][0] == r.plan:
            segs[-1][2] = r.epoch
            continue
        first = r.epoch
        a = installed.get(r.plan)
        if a is not None and a < first and (not segs or a > segs[-1][2]):
            first = a
        segs.append([r.plan, first, r.epoch])
    return tuple(PlanSegment(p, a, segs[k + 1][1] - 1 if k + 1 < len(segs) else b,
                             None if names is None else names.number(run, p))
                 for k, (p, a, b) in enumerate(segs))


def _plan_hover(label: str, run, seg: PlanSegment, limit: int = 8) -> str:
    lines = [f"<b>{html.escape(label)}: {seg.label}</b>, epochs {seg.first}–{seg.last}"]
    plans = getattr(run, "plans", ())
    if 0 <= seg.plan < len(plans):
        orders = [f"{q} from {s}: {o}" for q, by in plans[seg.plan].probe_orders().items() for s, o in by.items()]
        lines += orders[:limit] + ([f"… {len(orders) - limit} more"] if len(orders) > limit else [])
    return "<br>".join(html.escape(x) if k else x for k, x in enumerate(lines))


def switch_cause(decision) -> str:
    """What made a plan switch, in a few words for the switch's annotation: the query delta
    (``+q2 −q1``), ``MIR budget``, or the predicted saving (``cost −83 %``).

    >>> from types import SimpleNamespace as N
    >>> switch_cause(N(reason="query change: +q2 −q1", saving=None))
    '+q2 −q1'
    >>> switch_cause(N(reason="predicted probe cost 2420 → 421 tuples/s (…); …", saving=0.826))
    'cost −83 %'
    """
    for prefix in ("query change: ", "query set at activation: "):
        if decision.reason.startswith(prefix):
            return decision.reason[len(prefix):].split(";")[0]
    if "over the budget" in decision.reason:
        return "MIR budget"
    saving = getattr(decision, "saving", None)
    return "" if saving is None else f"cost {percent_change(-saving, 0)}"


def _switch_hover(label: str, decision, number: int) -> str:
    """The switch annotation's hover text: when it was decided, on what, and its reason (one
    clause a line); ``number``: the plan's shown number (:class:`PlanNames`)."""
    on = "" if decision.stats_epoch is None else f" on the statistics of epoch {decision.stats_epoch}"
    head = (f"{label}: P{number} active from epoch {decision.active_from}, decided at the start of epoch "
            f"{decision.epoch}{on}")
    return "<br>".join(html.escape(x) for x in [head, *decision.reason.split("; ")])


def epoch_figure(runs: Iterable[tuple[str, Any]], marks: dict[str, float] | None = None, title: str | None = None,
                 *, panels: Sequence[str] = DEFAULT_EPOCH_PANELS, names: PlanNames | None = None):
    """Adaptive runs over their epochs: latency (mean, p95 dotted), state rows (backlog
    dashed), probe messages per epoch, with a vertical line where each run switched plans
    — annotated with the plan now active and its cause (``P1 (cost −83 %)``, ``P2 (+q2)``,
    :func:`switch_cause`), the decision's full reason as the annotation's hover text — and at
    the event times in ``marks`` (e.g. ``{"data change": 15.0}``).

    ``runs``: ``(label, run)`` with ``run`` an :class:`~mqjoin.runtime.epochs.AdaptiveRun`
    (anything with ``timeline()``, ``policy``, ``epochs`` and ``switches``).  ``panels``
    chooses the rows, top to bottom, among :data:`EPOCH_PANELS`: besides the default three,
    ``"plans"`` — a band with one lane per run of coloured segments ``P0``, ``P1`` … (the
    plan active in each epoch, :func:`plan_segments`; hover: its probe orders) — and
    ``"throughput"``: the epoch's input tuples per second of processing time (``busy_seconds``,
    the paper's throughput: the rate the plan could sustain; it falls when a plan gets
    expensive, while the input rate, dashed, stays what the data bring).  An epoch's figures
    are drawn at its end; a band segment and a switch line start where their epoch starts.
    Plans are named and coloured by ``names`` (:class:`PlanNames`; a fresh one by default), so
    one plan reads the same in every run.  The switch and mark labels stand level above the
    top panel's title, in as many rows as keep them from overlapping (:func:`label_rows`).

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.model.tables import Table
    >>> from mqjoin.adaptive.policy import AdaptivePolicy
    >>> from mqjoin.runtime.epochs import run_adaptive
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 2}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> t = {r: Table.from_columns(r, {"ts": [0.5, 1.5, 2.5], "a": [1, 1, 1]}) for r in "RS"}
    >>> run = run_adaptive(w, t, AdaptivePolicy(epoch=1.0))
    >>> fig = epoch_figure([("adaptive", run)], marks={"change": 1.0})
    >>> [tr.name for tr in fig.data][:3]
    ['adaptive latency', 'adaptive p95', 'adaptive state']
    >>> fig = epoch_figure([("adaptive", run)], panels=("plans", "latency", "throughput"))
    >>> [tr.name for tr in fig.data]
    ['adaptive plans', 'adaptive latency', 'adaptive p95', 'adaptive throughput', 'adaptive input rate']
    >>> list(fig.data[0].text), list(fig.data[0].base), list(fig.data[-1].y)
    (['P0'], [0.0], [2.0, 2.0, 2.0])
    """
    from plotly.subplots import make_subplots

    panels = tuple(panels)
    unknown = [p for p in panels if p not in EPOCH_PANELS]
    if unknown or not panels or len(set(panels)) != len(panels):
        raise ValueError(f"panels must be distinct keys of {', '.join(EPOCH_PANELS)}, got {panels!r}")
    row = {p: k for k, p in enumerate(panels, start=1)}
    heights = [0.45 if p == "plans" else 1.0 for p in panels]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.08 if len(panels) <= 3
                        else 0.05, subplot_titles=[EPOCH_PANELS[p] for p in panels],
                        row_heights=[h / sum(heights) for h in heights])
    names = names or PlanNames()
    labels: list[tuple[float, str, str, str | None]] = []  # (x, text, colour, hover)
    extent = [0.0]
    for k, (label, run) in enumerate(runs):
        colour = RUN_COLOURS[k % len(RUN_COLOURS)]
        tl = run.timeline()
        if not len(tl):
            continue
        x = (tl["start"] + run.policy.epoch).tolist()  # an epoch's figures are known at its end
        extent.append(max(x))
        line = {"color": colour}

        def scatter(panel: str, name: str, y, x=x, label=label, line=line, **style) -> None:
            if panel in row:
                fig.add_scatter(x=x, y=y, name=f"{label} {name}", line={**line, **style}, legendgroup=label,
                                row=row[panel], col=1)

        if "plans" in row:
            segs = plan_segments(run, names)
            starts = [run.policy.start(s.first) for s in segs]
            fig.add_bar(y=[label] * len(segs), base=starts,
                        x=[run.policy.start(s.last + 1) - a for s, a in zip(segs, starts)],
                        orientation="h", text=[s.label for s in segs], textposition="inside",
                        insidetextanchor="middle", name=f"{label} plans", legendgroup=label, showlegend=False,
                        marker={"color": [s.colour for s in segs], "line": {"color": colour, "width": 1}},
                        hovertext=[_plan_hover(label, run, s) for s in segs], hoverinfo="text",
                        customdata=[[s.plan, s.first, s.last] for s in segs], row=row["plans"], col=1)
        scatter("latency", "latency", tl["latency_mean"].tolist())
        scatter("latency", "p95", tl["latency_p95"].tolist(), dash="dot")
        scatter("throughput", "throughput", [n / b if b > 0 else None
                                             for n, b in zip(tl["input_tuples"], tl["busy_seconds"])])
        scatter("throughput", "input rate", (tl["input_tuples"] / run.policy.epoch).tolist(), dash="dash")
        scatter("state", "state", tl["state_rows"].tolist())
        scatter("state", "backlog", tl["backlog_max"].tolist(), dash="dash")
        scatter("messages", "messages", tl["probe_messages"].tolist())
        for d in run.switches[1:]:
            at = run.policy.start(d.active_from)
            fig.add_vline(x=at, line={"color": colour, "dash": "dot", "width": 1})
            cause = switch_cause(d)
            number = names.number(run, d.plan)
            labels.append((at, f"{label}: P{number}" + (f" ({cause})" if cause else ""), colour,
                           _switch_hover(label, d, number)))
    for text, at in (marks or {}).items():
        fig.add_vline(x=at, line={"color": "#555", "width": 1})
        labels.append((at, text, "#555", None))
    labels.sort(key=lambda x: x[0])
    rows = label_rows([(at, text) for at, text, _, _ in labels], max(extent))
    for (at, text, colour, hover), r in zip(labels, rows):
        fig.add_annotation(x=at, y=1.0, yref="paper", yanchor="bottom", xanchor="left", yshift=6 + LABEL_ROW_PX
                           * (r + 1),
                           text=text, hovertext=hover, showarrow=False, font={"size": PROJECTOR_FONT, "color": colour})
    if "plans" in row:
        fig.update_yaxes(autorange="reversed", row=row["plans"], col=1)
        fig.update_layout(barmode="overlay", uniformtext={"minsize": PROJECTOR_FONT, "mode": "hide"})
    fig.update_xaxes(title_text="event time (s)", row=len(panels), col=1)
    label_space = LABEL_ROW_PX * (max(rows) + 1) if rows else 0  # above the top panel's own title
    fig.update_layout(projector({"height": 150 + 190 * sum(p != "plans" for p in panels) + (70 if "plans" in row else 0)
                                 + label_space, "title": {"text": title or "adaptive execution by epoch", "y": 0.995,
                                                          "yanchor": "top"},
                                 "margin": {"t": 70 + label_space}, "legend": {"orientation": "h"}}))
    return fig
