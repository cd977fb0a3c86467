"""Plotly charts of deployment metrics: throughput, result latency and state size over time.

Plotly is only imported when a chart is drawn (``pip install 'mqjoin[notebook]'``).  Inputs
are the pandas frames of a :class:`~mqjoin.runtime.spark.deploy.Deployment` (or anything with
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

from typing import Any, Iterable

CHART_ROWS = ("input tuples/s", "result latency (s)", "state (rows)")


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
        agg = p.groupby("batch", sort=True).agg(rows=("input_rows", "sum"), ms=("duration_ms", "max"),
                                                state=("state_rows", "sum"))
        x = (agg["ms"].cumsum() / 1000.0).tolist()
        out["input tuples/s"].append((f"{label} throughput", x,
                                      (agg["rows"] / (agg["ms"].where(agg["ms"] > 0) / 1000.0)).astype(float).tolist()))
        out["state (rows)"].append((f"{label} state", x, agg["state"].astype(float).tolist()))
    return out


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


EPOCH_ROWS = ("tuple latency (s)", "state and backlog (rows)", "probe messages per epoch")


def epoch_figure(runs: Iterable[tuple[str, Any]], marks: dict[str, float] | None = None, title: str | None = None):
    """Adaptive runs over their epochs: latency (mean, p95 dotted), state rows (backlog
    dashed), probe messages per epoch, with a vertical line where each run switched plans
    and at the event times in ``marks`` (e.g. ``{"data change": 15.0}``).

    ``runs``: ``(label, run)`` with ``run`` an :class:`~mqjoin.runtime.adaptive.AdaptiveRun`
    (anything with ``timeline()`` and ``switches``).

    >>> from mqjoin.workload import parse_workload
    >>> from mqjoin.tables import Table
    >>> from mqjoin.adaptive import AdaptivePolicy
    >>> from mqjoin.runtime.adaptive import run_adaptive
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 2}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> t = {r: Table.from_columns(r, {"ts": [0.5, 1.5, 2.5], "a": [1, 1, 1]}) for r in "RS"}
    >>> fig = epoch_figure([("adaptive", run_adaptive(w, t, AdaptivePolicy(epoch=1.0)))], marks={"change": 1.0})
    >>> [tr.name for tr in fig.data][:3]
    ['adaptive latency', 'adaptive p95', 'adaptive state']
    """
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=EPOCH_ROWS, vertical_spacing=0.08)
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
    for k, (label, run) in enumerate(runs):
        colour = palette[k % len(palette)]
        tl = run.timeline()
        if not len(tl):
            continue
        x = (tl["start"] + run.policy.epoch).tolist()  # an epoch's figures are known at its end
        line = {"color": colour}
        fig.add_scatter(x=x, y=tl["latency_mean"].tolist(), name=f"{label} latency", line=line,
                        legendgroup=label, row=1, col=1)
        fig.add_scatter(x=x, y=tl["latency_p95"].tolist(), name=f"{label} p95", line={**line, "dash": "dot"},
                        legendgroup=label, row=1, col=1)
        fig.add_scatter(x=x, y=tl["state_rows"].tolist(), name=f"{label} state", line=line,
                        legendgroup=label, row=2, col=1)
        fig.add_scatter(x=x, y=tl["backlog_max"].tolist(), name=f"{label} backlog", line={**line, "dash": "dash"},
                        legendgroup=label, row=2, col=1)
        fig.add_scatter(x=x, y=tl["probe_messages"].tolist(), name=f"{label} messages", line=line,
                        legendgroup=label, row=3, col=1)
        for d in run.switches[1:]:
            at = run.policy.start(d.active_from)
            fig.add_vline(x=at, line={"color": colour, "dash": "dot", "width": 1})
            fig.add_annotation(x=at, y=1.0, yref="paper", text=f"{label}: plan {d.plan}", showarrow=False,
                               textangle=-90, xanchor="right", yanchor="top", font={"size": 10, "color": colour})
    for text, at in (marks or {}).items():
        fig.add_vline(x=at, line={"color": "#555", "width": 1})
        fig.add_annotation(x=at, y=1.04, yref="paper", text=text, showarrow=False, font={"size": 11})
    fig.update_xaxes(title_text="event time (s)", row=3, col=1)
    fig.update_layout(height=720, title=title or "adaptive execution by epoch", legend={"orientation": "h"})
    return fig
