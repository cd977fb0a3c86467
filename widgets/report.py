"""The handout: one self-contained HTML file of what the explorer shows, to share a plan.

:func:`report_html` writes the workload (its YAML), the query graph, the probe trees, the
ILP's summary, *Compare* (every mode and partitioning policy) and the probe cost / memory
frontier, and the charts of the runs made (the Deploy panel's), as one HTML page: plotly's
JavaScript is inlined once, every chart is drawn by it when the page opens — no network, no
kernel — and stays interactive (hover, zoom, legend).  The page also carries the workload's
YAML and the optimiser options in two ``<script>`` elements that a browser does not run, so
:meth:`ExplorerModel.from_report(path) <mqjoin.widgets.model.ExplorerModel.from_report>`
(read by :func:`~mqjoin.widgets._html.handout_contents`) reopens the same workload,
plan and edits in the explorer.  ``mqjoin report W.yaml --out report.html`` writes it from the
command line, the explorer's **Handout** button from the page.

>>> from mqjoin.widgets.model import ExplorerModel
>>> m = ExplorerModel("paper_v2.yaml", debounce=0)
>>> m.set_selectivity("S.b = T.b", 0.5)
True
>>> page = report_html(m)
>>> page.count('class="mqjoin-chart"'), page.count('id="mqjoin-workload"')  # graph, trees, Compare, frontier
(4, 1)
>>> back = ExplorerModel.from_report(page)
>>> back.workload == m.workload, back.options == m.options, back.result.probe_cost
(True, True, 800.0)
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Iterable

from mqjoin.model.errors import DataError
from mqjoin.support.units import MEMORY_UNIT, PROBE_COST_UNIT, number
from mqjoin.widgets._html import embedded_script
from mqjoin.widgets.figures import to_figure
from mqjoin.widgets.model import OPTIONS



def _figure_block(k: int, title: str, figure) -> str:
    div = f"mqjoin-chart-{k}"
    spec = figure.to_plotly_json()
    data = json.dumps(spec["data"], default=_jsonable).replace("</", "<\\/")
    layout = json.dumps(spec["layout"], default=_jsonable).replace("</", "<\\/")
    return (f'<section><h2>{html.escape(title)}</h2><div id="{div}" class="mqjoin-chart"></div>'
            f'<script>Plotly.newPlot("{div}", {data}, {layout}, {{"responsive": true}});</script></section>')


def _jsonable(x: Any) -> Any:
    tolist = getattr(x, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


def _ilp_summary(result) -> str:
    i = result.ilp
    rows = [("planner", result.planner), ("mode / partitioning", f"{result.mode} / {result.partitioning}"),
            ("probe cost", f"{number(result.probe_cost)} {PROBE_COST_UNIT}"),
            ("memory", f"{number(result.memory)} {MEMORY_UNIT}"),
            ("stores / steps", f"{len(result.plan.stores)} / {len(result.plan.nodes)}")]
    if i is not None and getattr(i, "variables", 0):
        rows += [("ILP", f"{i.status} — {i.variables} variables, {i.binaries} binaries, {i.constraints} constraints, "
                  f"solved by {i.solver} in {i.solve_seconds:.3f} s")]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    orders = "".join(f"<li><b>{html.escape(q)}</b>: " + "; ".join(html.escape(str(o)) for o in by.values()) + "</li>"
                     for q, by in result.plan.probe_orders().items())
    return f"<section><h2>The plan</h2><table>{body}</table><h3>probe orders</h3><ul>{orders}</ul></section>"


def report_html(model, runs: Iterable[tuple[str, Any]] = (), title: str | None = None,
                compare: bool = True, frontier: bool = True) -> str:
    """The handout of an :class:`~mqjoin.widgets.model.ExplorerModel` (see the module doc);
    ``runs``: a Deploy panel's ``(label, deployment)`` pairs, whose charts are added."""
    from plotly.offline import get_plotlyjs

    from mqjoin.widgets.charts import metrics_figure
    from mqjoin.widgets.compare import compare_plans, comparison_traces
    from mqjoin.widgets.figures import query_graph_figure
    from mqjoin.widgets.frontier_view import frontier_traces
    from mqjoin.widgets.tree_figures import probe_tree_figure

    w, result = model.workload, model.flush()
    if result is None:
        raise DataError(f"no plan to write a handout of: {model.error or 'the workload has no plan'}")
    name = title or f"mqjoin — {len(w.queries)} queries over {len(w.relations)} relations"
    charts = [("query graph", query_graph_figure(w)), ("probe trees", probe_tree_figure(result.plan))]
    if compare:
        results = compare_plans(w, mirs=model.mirs, solver=model.solver, time_limit=model.time_limit)
        charts.append(("Compare: every mode and partitioning policy",
                       to_figure(*comparison_traces(results, (result.mode, result.partitioning)))))
    if frontier:
        from mqjoin.planning.frontier import frontier as pareto

        charts.append(("probe cost against memory (the frontier)",
                       to_figure(*frontier_traces(pareto(w, mirs=model.mirs, solver=model.solver)))))
    runs = list(runs)
    if runs:
        charts.append(("runs made", metrics_figure([(label, d.batches, d.queries, d.progress) for label, d in runs])))
    options = {k: getattr(model.options, k) for k in OPTIONS}  # the ones the explorer edits: plain values
    state = json.dumps({"options": options, "title": name}, sort_keys=True)
    blocks = "".join(_figure_block(k, t, f) for k, (t, f) in enumerate(charts))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(name)}</title>"
        "<style>body{font:15px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1500px;color:#222}"
        "h2{margin-top:32px}pre{background:#f6f6f6;padding:10px;overflow:auto}"
        "th{text-align:left;padding-right:16px}.mqjoin-chart{min-height:420px}</style>"
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(name)}</h1>"
        f'{embedded_script("mqjoin-workload", w.to_yaml())}{embedded_script("mqjoin-state", state)}'
        f"<section><h2>The workload</h2><pre>{html.escape(w.to_yaml())}</pre></section>"
        f"{_ilp_summary(result)}{blocks}</body></html>\n")


def write_report(model, path: str | Path, runs: Iterable[tuple[str, Any]] = (), **kw: Any) -> Path:
    """Write :func:`report_html` to ``path``; returns the path."""
    p = Path(path).expanduser()
    p.write_text(report_html(model, runs, **kw), encoding="utf-8")
    return p
