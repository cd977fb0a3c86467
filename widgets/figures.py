"""Plotly figures of mqjoin values, as pure functions (no widgets, no state): the query graph,
and the plumbing every figure of the explorer shares.

* :func:`query_graph_figure` — relations as nodes, classes as edges (hyperedges through a
  hub for classes of three or more relations), one colour per query;
* the query colours (:func:`query_colors`), the number format (:func:`fmt`), and the one way
  views draw figures: :func:`new_figure_widget` and :func:`sync_figure` (a whole figure per
  update, :mod:`mqjoin.widgets.plotly_view`);
* the trees of a plan — probe trees and operator trees — are :mod:`mqjoin.widgets.tree_figures`'.

Each figure has a fixed, named trace structure (``GRAPH_TRACES``; the trees' ``TREE_TRACES``,
``OPERATOR_TRACES``), so tests can read trace contents by name.
Layouts are deterministic (networkx spring layout with a fixed seed; trees laid out by leaf
order): the same workload gives the same figure.

>>> from mqjoin.widgets.model import as_workload
>>> w = as_workload("paper_v2.yaml")
>>> fig = query_graph_figure(w)
>>> [t.name for t in fig.data]
['q1', 'q2', 'hyperedge hubs', 'classes', 'relation (size: its rate, log scale)', 'relations']
>>> list(fig.data[-1].text)
['R', 'S', 'T', 'U']
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping

from mqjoin.support.units import number
from mqjoin.widgets.plotly_view import TEMPLATE, PlotlyView
from mqjoin.model.workload import Workload

#: colours of queries, by their position in the workload
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880",
           "#FF97FF", "#FECB52", "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B")
#: shared steps: a neutral dark colour outside the query palette, thick lines, diamond markers
#: (shape and width carry "shared"; colour carries the query)
SHARED_COLOR = "#37474F"
BROADCAST_COLOR = "#6A1B9A"
MIR_COLOR = "#7F7F7F"

GRAPH_TRACES = ("<one per query>", "hyperedge hubs", "classes", "relations")


def query_colors(workload: Workload) -> dict[str, str]:
    """Colour of every query (by position; the palette repeats after 16 queries).

    >>> from mqjoin.widgets.model import as_workload
    >>> query_colors(as_workload("paper_v2.yaml"))
    {'q1': '#636EFA', 'q2': '#EF553B'}
    """
    return {q: PALETTE[i % len(PALETTE)] for i, q in enumerate(workload.query_names)}


def fmt(x: float) -> str:
    """A number for labels: the one format of :func:`mqjoin.support.units.number`.

    >>> fmt(26326.90579), fmt(0.00066667), fmt(800.0)
    ('26,327', '0.0006667', '800')
    """
    return number(x)


# --------------------------------------------------------------------------------------------
# plumbing
# --------------------------------------------------------------------------------------------


def to_figure(traces: list[dict], layout: dict):
    """A ``plotly.graph_objects.Figure`` from trace dicts and a layout dict."""
    import plotly.graph_objects as go

    return go.Figure(data=traces, layout={"template": TEMPLATE, **layout})


def sync_figure(widget, traces: list[dict], layout: dict) -> None:
    """Make a figure widget of :func:`new_figure_widget` show ``traces`` and ``layout``: the
    whole figure replaces the one shown, in one message, from any thread (nothing is sent when
    it is the figure shown); see :mod:`mqjoin.widgets.plotly_view` for why whole figures."""
    widget.update(traces, layout)


def new_figure_widget(traces: list[dict], layout: dict):
    """The widget every view draws a figure with: a
    :class:`~mqjoin.widgets.plotly_view.PlotlyView` showing ``traces`` and ``layout`` (plotly's
    ``plotly_white`` template), updated with :func:`sync_figure`."""
    return PlotlyView(traces, layout)


def trace_by_name(figure, name: str):
    """The trace called ``name`` of a figure or figure widget (``KeyError`` when absent)."""
    for t in figure.data:
        if t.name == name:
            return t
    raise KeyError(f"no trace {name!r} (traces: {', '.join(str(t.name) for t in figure.data)})")


# --------------------------------------------------------------------------------------------
# query graph
# --------------------------------------------------------------------------------------------


def query_graph_layout(workload: Workload) -> dict[str, tuple[float, float]]:
    """Positions of all declared relations in [0, 1]² (spring layout, fixed seed).

    Relations are joined when some query equates their attributes; the positions depend
    only on the relations and which pairs join, not on statistics, so edits of rates or
    selectivities never move a node.  Relations no query uses sit in a row along the bottom
    (laid out with the others, one far away would squeeze the joined ones into a line).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, X: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> pos = query_graph_layout(w)
    >>> pos["X"], min(pos["R"][1], pos["S"][1]) > 0.2
    ((0.5, 0.05), True)
    """
    pairs = set()
    for q in workload.queries:
        for c in q.classes:
            rels = sorted(c.relations)
            for i in range(len(rels)):
                for j in range(i + 1, len(rels)):
                    pairs.add((rels[i], rels[j]))
    used = {r for q in workload.queries for r in q.relations}
    joined = tuple(r.name for r in workload.relations if r.name in used)
    idle = [r.name for r in workload.relations if r.name not in used]
    pos = _spring(joined, tuple(sorted(pairs))) if joined else {}
    if idle:  # the joined relations above, the idle ones in a row below
        pos = {n: (x, round(0.25 + 0.7 * (y - 0.05) / 0.9, 6)) for n, (x, y) in pos.items()}
        pos.update({n: (round((k + 1) / (len(idle) + 1), 6), 0.05) for k, n in enumerate(idle)})
    return pos


@lru_cache(maxsize=64)
def _spring(names: tuple[str, ...], pairs: tuple[tuple[str, str], ...]) -> dict[str, tuple[float, float]]:
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(names)
    g.add_edges_from(pairs)
    if len(names) == 1:
        return {names[0]: (0.5, 0.5)}
    pos = nx.spring_layout(g, seed=7, k=1.6 / math.sqrt(len(names)), iterations=200)
    pos = {n: (float(p[0]), float(p[1])) for n, p in pos.items()}  # plain floats, not numpy's
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx, sy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    return _spread({n: (0.05 + 0.9 * (pos[n][0] - x0) / sx, 0.05 + 0.9 * (pos[n][1] - y0) / sy) for n in names})


#: the least distance between two relations of the query graph (in its unit square): a
#: spring layout packs the relations of a hyperedge (TPC-H's part–partsupp–lineitem) into a
#: knot that their hubs and class labels then cover
GAP = 0.25


def _spread(pos: Mapping[str, tuple[float, float]], gap: float = GAP) -> dict[str, tuple[float, float]]:
    """``pos`` with relations pushed apart until none is closer than ``gap`` to another (or
    200 rounds), kept in [0.05, 0.95]².

    >>> _spread({"a": (0.5, 0.5), "b": (0.52, 0.5), "c": (0.05, 0.05)})
    {'a': (0.385, 0.5), 'b': (0.635, 0.5), 'c': (0.05, 0.05)}
    """
    names = list(pos)
    p = {n: list(pos[n]) for n in names}
    for _ in range(200):
        moved = False
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                dx, dy = p[b][0] - p[a][0], p[b][1] - p[a][1]
                d = math.hypot(dx, dy)
                if d < gap - 1e-9:
                    if d < 1e-9:
                        dx, dy, d = 1.0, 0.0, 1.0
                    push = (gap - math.hypot(p[b][0] - p[a][0], p[b][1] - p[a][1])) / 2
                    for n, sign in ((a, -1), (b, 1)):
                        p[n][0] = min(max(p[n][0] + sign * dx / d * push, 0.05), 0.95)
                        p[n][1] = min(max(p[n][1] + sign * dy / d * push, 0.05), 0.95)
                    moved = True
        if not moved:
            break
    return {n: (round(p[n][0], 6), round(p[n][1], 6)) for n in names}


def node_traces(workload: Workload, pos: Mapping[str, tuple[float, float]], pad: float = 0.045) -> list[dict]:
    """The processing nodes of a workload whose relations are placed (PMJoin,
    ``relations: {S1: {node: n1}}``): a dashed box around each node's relations, labelled with
    its name; no traces when no relation names a node.

    >>> from mqjoin.planners.pmjoin import EXAMPLE_2
    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_2)
    >>> boxes, labels = node_traces(w, query_graph_layout(w))
    >>> boxes["name"], labels["text"]
    ('processing nodes', ['n0', 'n1', 'n2'])
    """
    nodes: dict[str, list[str]] = {}
    for r in workload.relations:
        if r.node is not None:
            nodes.setdefault(r.node, []).append(r.name)
    if not nodes:
        return []
    xs: list[float | None] = []
    ys: list[float | None] = []
    lx, ly, lt = [], [], []
    for n in sorted(nodes):
        x0 = round(min(pos[r][0] for r in nodes[n]) - pad, 6)
        x1 = round(max(pos[r][0] for r in nodes[n]) + pad, 6)
        y0 = round(min(pos[r][1] for r in nodes[n]) - pad, 6)
        y1 = round(max(pos[r][1] for r in nodes[n]) + pad, 6)
        xs += [x0, x1, x1, x0, x0, None]
        ys += [y0, y0, y1, y1, y0, None]
        lx.append(x0)
        ly.append(y1)
        lt.append(n)
    return [{"type": "scatter", "name": "processing nodes", "x": xs, "y": ys, "mode": "lines",
             "line": {"color": "#8C6D1F", "width": 1, "dash": "dash"}, "fill": "none", "hoverinfo": "skip",
             "showlegend": True},
            {"type": "scatter", "name": "node labels", "x": lx, "y": ly, "mode": "text", "text": lt,
             "textposition": "top right", "textfont": {"size": 11, "color": "#8C6D1F"},
             "hovertext": [f"node {n}: {', '.join(nodes[n])}" for n in lt], "hoverinfo": "text",
             "showlegend": False}]


def query_graph_traces(workload: Workload, highlight: str | None = None) -> tuple[list[dict], dict]:
    """Trace dicts and layout of :func:`query_graph_figure`: the relations' nodes, a line per
    query and class (:func:`_query_edge_traces`), the class labels, the filters, the relations
    and the legend's marks, in drawing order."""
    pos = query_graph_layout(workload)
    colors = query_colors(workload)
    used = set(workload.used_relations)
    traces: list[dict] = node_traces(workload, pos)
    edges, hubs = _query_edge_traces(workload, pos, colors, highlight)
    traces += edges
    traces.append(_class_label_trace(workload, pos))
    traces += _filter_traces(workload, pos, colors)
    traces.append(_relation_trace(workload, pos, used))
    unused = [r.name for r in workload.relations if r.name not in used]
    more = f" (+ {', '.join(unused)}: declared, read by no query, drawn pale)" if unused else ""
    # the legend explains the marks: node size, pale nodes, hubs (legend-only entries)
    for name, marker in (("relation (size: its rate, log scale)", {"size": 14, "color": "#2A3F5F"}),
                         ("relation no query reads", {"size": 14, "color": "#C8D4E3"}),
                         ("hub of a class of 3+ relations", {"symbol": "diamond", "size": 11, "color": "#888",
                                                            "line": {"width": 1, "color": "#333"}})):
        if name.startswith("relation no") and not unused or name.startswith("hub") and not hubs:
            continue
        traces.append({"type": "scatter", "name": name, "x": [None], "y": [None], "mode": "markers",
                       "marker": marker, "showlegend": True, "hoverinfo": "skip", "legendgroup": "marks"})
    traces.append(traces.pop(-1 - sum(1 for t in traces if t.get("legendgroup") == "marks")))  # relations last
    layout = {"title": {"text": f"query graph — {len(workload.queries)} queries over "
                                f"{len(workload.used_relations)} relations{more}", "font": {"size": 16}},
              "xaxis": {"visible": False, "range": [-0.05, 1.05]},
              "yaxis": {"visible": False, "range": [-0.12, 1.1]},
              # the graph's share of a 1920-px projector beside the editors, text of at least 14 px;
              # the legend below the graph leaves the graph the width.  (A fixed width: a figure
              # widget drawn before its tab shows does not autosize.)
              "height": 640, "width": 1120, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
              "font": {"size": 16}, "hoverlabel": {"font": {"size": 16}},
              "legend": {"title": {"text": "queries and marks"}, "orientation": "h", "y": -0.02, "yanchor": "top",
                         "font": {"size": 15}}, "hovermode": "closest"}
    return traces, layout


#: the least distance from a hyperedge's hub to a relation or another hub
HUB_GAP = 0.09


def _hub_centres(workload: Workload, pos: Mapping[str, tuple[float, float]]) -> dict[tuple[str, ...],
                                                                                     tuple[float, float]]:
    """Where the hub of each hyperedge (a class of three or more relations, by its relations)
    sits: its members' centroid, pushed away from relations and other hubs nearer than
    :data:`HUB_GAP` (two classes over one triangle, TPC-H's partkey and suppkey, would share
    one centroid)."""
    sets = sorted({tuple(sorted(c.relations)) for q in workload.queries for c in q.classes if len(c.relations) > 2})
    hub = {k: [sum(pos[r][0] for r in k) / len(k), sum(pos[r][1] for r in k) / len(k)] for k in sets}
    for _ in range(100):
        moved = False
        for k in sets:
            others = [pos[r] for r in pos] + [tuple(hub[o]) for o in sets if o != k]
            for ox, oy in others:
                dx, dy = hub[k][0] - ox, hub[k][1] - oy
                d = math.hypot(dx, dy)
                if d < HUB_GAP - 1e-9:
                    if d < 1e-9:
                        dx, dy, d = 0.0, 1.0, 1.0
                    hub[k][0] += dx / d * (HUB_GAP - d) / 2
                    hub[k][1] += dy / d * (HUB_GAP - d) / 2
                    moved = True
        if not moved:
            break
    return {k: (hub[k][0], hub[k][1]) for k in sets}


def _query_edge_traces(workload: Workload, pos: Mapping[str, tuple[float, float]], colors: Mapping[str, str],
                       highlight: str | None) -> tuple[list[dict], bool]:
    """A line trace per query (its classes: an edge between two relations, offset when several
    queries share it; a hub with spokes for a class of three or more) and the hubs' markers;
    whether there are hubs."""
    # how many queries draw a line between two relations (for parallel offsets)
    users: dict[tuple[str, ...], list[str]] = {}
    for q in workload.queries:
        for c in q.classes:
            users.setdefault(tuple(sorted(c.relations)), []).append(q.name)

    def offset(a: tuple[float, float], b: tuple[float, float], k: int, m: int) -> tuple[float, float]:
        if m <= 1:
            return 0.0, 0.0
        dx, dy = b[0] - a[0], b[1] - a[1]
        n = math.hypot(dx, dy) or 1.0
        d = (k - (m - 1) / 2) * 0.018
        return -dy / n * d, dx / n * d

    traces: list[dict] = []
    centres = _hub_centres(workload, pos)
    hubs_x, hubs_y, hubs_c, hubs_h = [], [], [], []
    for q in workload.queries:
        xs: list[float | None] = []
        ys: list[float | None] = []
        for c in q.classes:
            rels = tuple(sorted(c.relations))
            who = users[rels]
            k = who.index(q.name)
            if len(rels) == 2:
                a, b = pos[rels[0]], pos[rels[1]]
                ox, oy = offset(a, b, k, len(who))
                xs += [a[0] + ox, b[0] + ox, None]
                ys += [a[1] + oy, b[1] + oy, None]
            else:  # hyperedge: a hub at the members' centroid, one spoke per member
                cx = centres[rels][0] + (k - (len(who) - 1) / 2) * 0.02
                cy = centres[rels][1]
                for r in rels:
                    xs += [cx, pos[r][0], None]
                    ys += [cy, pos[r][1], None]
                hubs_x.append(cx)
                hubs_y.append(cy)
                hubs_c.append(colors[q.name])
                hubs_h.append(f"{q.name}: class {c} (s = {fmt(c.selectivity)})")
        width = 4 if highlight == q.name else 2
        traces.append({"type": "scatter", "name": q.name, "x": xs, "y": ys, "mode": "lines",
                       "line": {"color": colors[q.name], "width": width}, "hoverinfo": "skip",
                       "legendgroup": q.name, "showlegend": True,
                       "opacity": 0.35 if highlight and highlight != q.name else 1.0})
    traces.append({"type": "scatter", "name": "hyperedge hubs", "x": hubs_x, "y": hubs_y, "mode": "markers",
                   "marker": {"symbol": "diamond", "size": 11, "color": hubs_c, "line": {"width": 1, "color": "#333"}},
                   "hovertext": hubs_h, "hoverinfo": "text", "showlegend": False})
    return traces, bool(hubs_x)


def seen_hubs(seen: Mapping[tuple, list[str]], rels: tuple[str, ...]) -> list[str]:
    """The queries whose hubs of the class over ``rels`` stand side by side (their labels clear them)."""
    return sorted({q for members, qs in seen.items() if tuple(sorted({a.relation for a in members})) == rels
                   for q in qs})


def _class_label_trace(workload: Workload, pos: Mapping[str, tuple[float, float]]) -> dict:
    """One label per distinct class: at the middle of its edge, or right of the hub of a
    hyperedge."""
    from mqjoin.model.statistics import selectivity_groups

    group_of = {}
    for g in selectivity_groups(workload):
        for a in g.members:
            group_of[a] = g.label
    seen: dict[tuple, list[str]] = {}
    cls_of: dict[tuple, Any] = {}
    for q in workload.queries:
        for c in q.classes:
            seen.setdefault(c.members, []).append(q.name)
            cls_of[c.members] = c
    centres = _hub_centres(workload, pos)
    # a pair's label never covers a relation, its name (above it) or a hub
    marks = list(pos.values()) + [(x, y + 0.05) for x, y in pos.values()] + list(centres.values())
    lx, ly, lt, lh, lc, where = [], [], [], [], [], []
    for members, qs in seen.items():
        c = cls_of[members]
        rels = tuple(sorted(c.relations))
        if rels in centres:  # a hyperedge's label stands right of its hub(s)
            (x, y), side = (centres[rels][0] + 0.012 * len(seen_hubs(seen, rels)), centres[rels][1]), "middle right"
        else:  # a pair's at the middle of its edge, moved to the nearest free place when taken (two
            # classes over one pair, a hub beside the edge): below, above, beside, two rows off
            x, y = sum(pos[r][0] for r in rels) / 2, sum(pos[r][1] for r in rels) / 2
            spots = [(x + dx, y + dy) for dx, dy in ((0, 0), (0, -0.045), (0, 0.045), (0.1, 0), (-0.1, 0),
                                                      (0, -0.09), (0, 0.09))]
            (x, y) = min(spots, key=lambda p: (
                10 * sum(abs(p[0] - a) < 0.07 and abs(p[1] - b) < 0.035 for a, b in zip(lx, ly))
                + sum(abs(p[0] - a) < 0.06 and abs(p[1] - b) < 0.04 for a, b in marks)))
            side = "middle center"
        lx.append(round(x, 6))
        ly.append(round(y, 6))
        where.append(side)
        names = sorted({a.name for a in members})
        lt.append("=".join(names))
        lh.append(f"class {c}<br>selectivity s = {fmt(c.selectivity)}<br>queries: {', '.join(qs)}")
        lc.append(group_of.get(members[0], ""))
    return {"type": "scatter", "name": "classes", "x": lx, "y": ly, "mode": "text", "text": lt, "textposition": where,
            "textfont": {"size": 14, "color": "#444"}, "hovertext": lh, "hoverinfo": "text",
            "customdata": lc, "showlegend": False}


def _filter_traces(workload: Workload, pos: Mapping[str, tuple[float, float]], colors: Mapping[str, str]) -> list[dict]:
    """Filters (docs/model.md §7): a σ beside the relation, one per filtering query, in its colour."""
    fx, fy, fc, fh = [], [], [], []
    for r in workload.relations:
        filtering = [(q, q.filter_of(r.name)) for q in workload.queries if q.filter_of(r.name) is not None]
        for k, (q, f) in enumerate(filtering):
            fx.append(round(pos[r.name][0] + 0.035 * (k + 1), 6))
            fy.append(round(pos[r.name][1] - 0.03, 6))
            fc.append(colors[q.name])
            frac = "" if f.fraction is None else f" (pass fraction f = {fmt(f.fraction)})"
            fh.append(f"{q.name}: {f}{frac}")
    if not fx:
        return []
    return [{"type": "scatter", "name": "filters", "x": fx, "y": fy, "mode": "text", "text": ["σ"] * len(fx),
             "textfont": {"size": 15, "color": fc}, "hovertext": fh, "hoverinfo": "text", "showlegend": False}]


def _relation_trace(workload: Workload, pos: Mapping[str, tuple[float, float]], used: set[str]) -> dict:
    """The relations' markers: size by rate (log scale), pale where no query reads them."""
    rx, ry, rt, rh, rs, rc = [], [], [], [], [], []
    for r in workload.relations:
        x, y = pos[r.name]
        rx.append(x)
        ry.append(y)
        rt.append(r.name)
        win = "unbounded" if r.window is None else f"{fmt(r.window)} s"
        qs = [q.name for q in workload.queries if r.name in q.relation_set]
        filters = "".join(f"<br>σ {q.name}: {q.filter_of(r.name)}" for q in workload.queries
                          if q.filter_of(r.name) is not None)
        rh.append(f"<b>{r.name}</b>({', '.join(r.attributes)})<br>rate {fmt(r.rate)} tuples/s<br>"
                  f"window {win}<br>parallelism {r.parallelism}<br>queries: {', '.join(qs) or 'none'}{filters}"
                  + (f"<br>node {r.node}" if r.node is not None else ""))
        rs.append(round(14 + 4 * math.log10(max(r.rate, 1e-3) + 1), 3))
        rc.append("#2A3F5F" if r.name in used else "#C8D4E3")
    return {"type": "scatter", "name": "relations", "x": rx, "y": ry, "mode": "markers+text", "text": rt,
            "textposition": "top center", "customdata": rt,
            "marker": {"size": rs, "color": rc, "line": {"width": 1, "color": "white"}},
            "hovertext": rh, "hoverinfo": "text", "showlegend": False}


def query_graph_figure(workload: Workload, highlight: str | None = None):
    """The query graph of a workload as a plotly figure (``highlight`` a query by name)."""
    return to_figure(*query_graph_traces(workload, highlight))


__all__ = ["fmt", "new_figure_widget", "query_colors", "query_graph_figure", "query_graph_layout",
           "query_graph_traces", "sync_figure", "to_figure", "trace_by_name"]
