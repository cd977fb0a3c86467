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
