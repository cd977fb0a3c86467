"""Plotly figures of a plan's trees, as pure functions (no widgets, no state).

* :func:`probe_tree_figure` — the plan's probe-tree forest (paper Figure 4): stores with
  partition attribute and parallelism, edge labels, shared prefixes highlighted, per-step
  cost and broadcast factor on hover, optionally only one query's part; given a run's
  :class:`~mqjoin.planning.measured.RunCheck`, coloured by measured / predicted instead (a
  diverging scale centred on 1, log ratio, with its colour bar) and both numbers on hover.
* :func:`operator_tree_figure` — the operator trees of the ``mjoin``, ``tree``, ``ajoin`` and
  ``pmjoin`` planners drawn as trees of the plan's stores (MIR stores inside, base stores at
  the leaves, an MJoin as one n-ary node).

Their trace structures are fixed and named (``TREE_TRACES``, ``OPERATOR_TRACES``), as the
query graph's (:mod:`mqjoin.widgets.figures`), whose colours and plumbing they use.

>>> from mqjoin.widgets.model import as_workload
>>> from mqjoin.planning.optimizer import optimize
>>> tree = probe_tree_figure(optimize(as_workload("paper_v2.yaml"), mirs=False).plan)
>>> [t.name for t in tree.data]  # doctest: +NORMALIZE_WHITESPACE
['edges', 'shared prefixes', 'edge labels', 'start relations', 'stores', 'outputs', 'broadcast probes', 'insertions',
'measured / predicted']
>>> list(tree.data[3].text)
['R', 'S', 'T', 'U']
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from mqjoin.planning.measured import Count, RunCheck
from mqjoin.planning.optimizer import OptimizeResult
from mqjoin.planning.plan import Node, Plan, ProbeRule
from mqjoin.planners.trees import JoinTree
from mqjoin.widgets.figures import BROADCAST_COLOR, MIR_COLOR, SHARED_COLOR, fmt, query_colors, to_figure

TEXT_PX = 14  # every label's size: readable on a projector at 1920×1080
CHAR_PX = 8.4  # approximate width of a character of a TEXT_PX label
ROW_PX = 54  # a row of the probe forest: a store label above its line, an edge label below it
LEVEL_MIN_PX = 100
BEND_PX = 24

TREE_TRACES = ("edges", "shared prefixes", "edge labels", "start relations", "stores", "outputs",
               "broadcast probes", "insertions", "measured / predicted")

#: measured / predicted: a diverging scale centred on 1 (log ratio), blue below, red above
RATIO_SCALE = [[0.0, "#053061"], [0.25, "#4393C3"], [0.5, "#DDDDDD"], [0.75, "#D6604D"], [1.0, "#67001F"]]
#: the same for text on white (a store's label): dark grey at 1
RATIO_TEXT_SCALE = [[0.0, "#053061"], [0.5, "#333333"], [1.0, "#B2182B"]]
#: ratios beyond ×/÷ this get the scale's end colours
RATIO_LIMIT = 20.0
RATIO_TICKS = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20)
UNMEASURED_COLOR = "#BBBBBB"
OPERATOR_TRACES = ("operator edges", "joins", "base stores")


# --------------------------------------------------------------------------------------------
# probe trees
# --------------------------------------------------------------------------------------------


def _namespace(root: str) -> str:
    return root.rpartition(":")[0]


def nodes_for_query(plan: Plan, query: str | None) -> list[Node]:
    """The plan's nodes that serve ``query``: its own steps and the steps that maintain the
    MIR stores it probes (transitively).  ``None``: every node.

    >>> from mqjoin.widgets.model import as_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> plan = optimize(as_workload("paper_v2.yaml")).plan
    >>> len(plan.nodes), len(nodes_for_query(plan, "q1")), len(nodes_for_query(plan, "q2"))
    (8, 5, 5)
    """
    if query is None:
        return list(plan.nodes)
    wanted = {(ns, query) for ns in {_namespace(n.root) for n in plan.nodes}}
    keep: set[str] = set()
    while True:
        before = len(wanted)
        for n in plan.nodes:
            ns = _namespace(n.root)
            if any((ns, o) in wanted for o in n.owners):
                keep.add(n.edge)
                mir = plan.store[n.store].mir
                if not mir.is_base:
                    wanted.add((ns, mir.label))
        if len(wanted) == before:
            break
    return [n for n in plan.nodes if n.edge in keep]


def _chi(plan: Plan, n: Node) -> int:
    return plan.store[n.store].parallelism if n.broadcast else 1


@dataclass(frozen=True)
class _Forest:
    """Where a probe forest's parts sit: ``pos`` (edge → (level, row)) of the probe edges,
    ``root_pos`` of the start relations, ``sink_rows`` (edge label, parent edge, text, level,
    row) of the outputs and insertions into MIR stores; ``starts``: the x pixel of every
    level, ``right`` the forest's right edge; ``label_of``: the store label of each edge;
    ``insertion``: each start relation's insertion into its own store."""

    nodes: list[Node]
    roots: list[str]
    pos: dict[str, tuple[float, float]]
    root_pos: dict[str, tuple[float, float]]
    sink_rows: list[tuple[str, str, str, float, float]]
    rows: float
    starts: list[float]
    right: float
    label_of: dict[str, str]
    insertion: dict[str, str]

    def X(self, d: float) -> float:
        return round(self.starts[int(d)], 1)


def _Y(y: float) -> float:
    return -round(y, 4)


def _forest_rows(plan: Plan, query: str | None, nodes: list[Node]):
    """The tidy layout of the probe forest: every leaf (a node without kept children, or a
    sink) takes one row.  Returns the roots, ``pos``, ``root_pos``, ``sink_rows`` and the rows
    used (see :class:`_Forest`)."""
    mir_labels = {plan.store[n.store].mir.label for n in nodes}
    children: dict[str, list[Node]] = {}
    for n in nodes:
        children.setdefault(n.parent or "root:" + n.root, []).append(n)
    roots = list(dict.fromkeys(n.root for n in nodes))
    by_edge = {n.edge: n for n in nodes}

    def sinks_of(n: Node) -> list[tuple[str, str]]:
        rule = plan.rules[n.store][n.edge]
        out = []
        for lab in rule.out if isinstance(rule, ProbeRule) else ():
            e = plan.edge[lab]
            if e.kind == "output":
                q = e.target.split(":", 1)[1]
                if query is None or q == query:
                    out.append((lab, q))
            elif e.kind == "insert":
                sm = plan.store[e.target].mir
                if query is None or sm.label in mir_labels:
                    out.append((lab, f"store {e.target}"))
        return out

    pos: dict[str, tuple[float, float]] = {}
    sink_rows: list[tuple[str, str, str, float, float]] = []  # (edge label, parent edge, text, x, y)
    row = [0]

    def place(key: str, depth: int) -> float:
        kids = children.get(key, [])
        ys = []
        for n in kids:
            y = place(n.edge, depth + 1)
            pos[n.edge] = (depth + 1, y)
            ys.append(y)
        if key.startswith("root:"):
            if not ys:
                ys.append(row[0])
                row[0] += 1
            return (ys[0] + ys[-1]) / 2
        for lab, text in sinks_of(by_edge[key]):
            sink_rows.append((lab, key, text, depth + 1, row[0]))
            ys.append(row[0])
            row[0] += 1
        if not ys:
            ys.append(row[0])
            row[0] += 1
        return (ys[0] + ys[-1]) / 2

    root_pos: dict[str, tuple[float, float]] = {}
    for r in roots:
        y = place("root:" + r, 0)
        root_pos[r] = (0, y)
        row[0] += 0.6  # gap between trees
    return roots, pos, root_pos, sink_rows, row[0]


def _forest(plan: Plan, query: str | None) -> _Forest:
    """The probe forest of ``query`` (all queries: None) laid out (:func:`_forest_rows`), with
    its x scale in pixels.  A store's label sits above the line that comes into it and ends
    at its marker, so the lines that leave the store — which bend up and down to its
    children's rows right after it — never cross a label; every level is as far from the one
    before as its longest label plus the bend, so labels never overlap either, and a wide
    forest gets a wide figure (the view scrolls) instead of a cramped one."""
    nodes = nodes_for_query(plan, query)
    roots, pos, root_pos, sink_rows, rows = _forest_rows(plan, query, nodes)
    label_of = {n.edge: f"{n.store} ×{plan.store[n.store].parallelism}" for n in nodes}
    chars: dict[int, int] = {}
    for e, (d, _) in pos.items():
        chars[d] = max(chars.get(d, 0), len(label_of[e]))
    depth = max([p[0] for p in pos.values()] + [s[3] for s in sink_rows] + [1])
    insertion = {}
    for r in roots:
        ns, _, rel = r.rpartition(":")
        insertion[r] = ", ".join(f"{lab} ⇓ {plan.edge[lab].target}" for lab in plan.sources.get(rel, ())
                                 if plan.edge[lab].kind == "ingest"
                                 and plan.store[plan.edge[lab].target].namespace == ns)
    left = CHAR_PX * max([len(r) for r in roots] + [0.85 * len(t) for t in insertion.values()] + [4]) + 30
    starts = [float(left)]
    for d in range(1, depth + 1):
        starts.append(starts[-1] + max(LEVEL_MIN_PX, CHAR_PX * chars.get(d, 0) + BEND_PX + 24))

    def X(d: float) -> float:
        return round(starts[int(d)], 1)

    right = max([X(x) + CHAR_PX * (len(text) + 2) + 20 for _, _, text, x, _ in sink_rows] + [X(depth) + 40])
    return _Forest(nodes, roots, pos, root_pos, sink_rows, rows, starts, right, label_of, insertion)


def _probe_edge_traces(plan: Plan, f: _Forest) -> tuple[dict, dict, dict, dict]:
    """The forest's lines — plain edges, shared prefixes, broadcast probes — and the edge labels."""
    X, pos = f.X, f.pos
    ex, ey, sx, sy, bx, by = [], [], [], [], [], []
    lx, ly, lt, lh = [], [], [], []
    for n in f.nodes:
        x1, y1 = pos[n.edge]
        x0, y0 = pos[n.parent] if n.parent else f.root_pos[n.root]
        shared = len(n.owners) > 1
        xs_, ys_ = (sx, sy) if shared else (bx, by) if n.broadcast else (ex, ey)
        xs_.extend([X(x0), X(x0) + BEND_PX, X(x1), None])
        ys_.extend([_Y(y0), _Y(y1), _Y(y1), None])
        lx.append(round((X(x0) + BEND_PX + X(x1)) / 2, 1))
        ly.append(_Y(y1))
        chi = _chi(plan, n)
        lt.append(f"{n.edge} χ={chi}" if n.broadcast else n.edge)
        lh.append(f"edge {n.edge}: probe {n.store}" + (f" — broadcast to all {chi} partitions (χ = {chi})"
                                                        if n.broadcast else ""))
    for lab, parent, text, x, y in f.sink_rows:
        x0, y0 = pos[parent]
        ex.extend([X(x0), X(x0) + BEND_PX, X(x), None])
        ey.extend([_Y(y0), _Y(y), _Y(y), None])
        lx.append(round((X(x0) + BEND_PX + X(x)) / 2, 1))
        ly.append(_Y(y))
        lt.append(lab)
        lh.append(f"edge {lab}: " + (f"result → {text}" if not text.startswith("store") else f"insert → {text[6:]}"))
    return (
        {"type": "scatter", "name": "edges", "x": ex, "y": ey, "mode": "lines",
         "line": {"color": "#A0A8B8", "width": 1.5}, "hoverinfo": "skip", "showlegend": False},
        {"type": "scatter", "name": "shared prefixes", "x": sx, "y": sy, "mode": "lines",
         "line": {"color": SHARED_COLOR, "width": 4}, "hoverinfo": "skip", "showlegend": True,
         "legendrank": 1},
        {"type": "scatter", "name": "broadcast probes", "x": bx, "y": by, "mode": "lines",
         "line": {"color": BROADCAST_COLOR, "width": 2, "dash": "dot"}, "hoverinfo": "skip", "showlegend": True,
         "legendrank": 2},
        {"type": "scatter", "name": "edge labels", "x": lx, "y": ly, "mode": "text", "text": lt,
         "textposition": "bottom center", "textfont": {"size": TEXT_PX, "color": "#777"}, "hovertext": lh,
         "hoverinfo": "text", "showlegend": False},
    )


def _start_traces(plan: Plan, f: _Forest) -> tuple[dict, dict]:
    """The start relations (a new tuple of each) and their insertions into their own stores."""
    rx, ry, rt, rh = [], [], [], []
    ix, iy, it = [], [], []
    for r in f.roots:
        ns, _, rel = r.rpartition(":")
        ingest = [plan.edge[lab].target for lab in plan.sources.get(rel, ())
                  if plan.edge[lab].kind == "ingest" and plan.store[plan.edge[lab].target].namespace == ns]
        x, y = f.root_pos[r]
        rx.append(f.X(x))
        ry.append(_Y(y))
        rt.append(r)
        rh.append(f"<b>{r}</b>: a new {rel} tuple<br>stored in {', '.join(ingest) or '—'}<br>"
                  f"rate {fmt(plan.workload.rate(rel))} tuples/s")
        if f.insertion[r]:  # the tuple's insertion into its own store (Figure 4's e1, e2, …), under its name
            ix.append(f.X(x) - 8)
            iy.append(round(_Y(y) - 0.38, 4))
            it.append(f.insertion[r])
    return (
        {"type": "scatter", "name": "start relations", "x": rx, "y": ry, "mode": "markers+text", "text": rt,
         "textposition": "middle left", "marker": {"symbol": "circle", "size": 14, "color": "#2A3F5F"},
         "hovertext": rh, "hoverinfo": "text", "showlegend": False},
        {"type": "scatter", "name": "insertions", "x": ix, "y": iy, "mode": "text", "text": it,
         "textposition": "middle left", "textfont": {"size": TEXT_PX, "color": "#777"}, "hoverinfo": "skip",
         "showlegend": False},
    )


def _ratio_position(ratio: float) -> float:
    """Where ``ratio`` sits on the ratio scales: 0.5 at 1, ends at ÷/× :data:`RATIO_LIMIT`."""
    if ratio <= 0:
        return 0.0
    if math.isinf(ratio):
        return 1.0
    return 0.5 + max(-0.5, min(0.5, math.log10(ratio) / (2 * math.log10(RATIO_LIMIT))))


def ratio_color(ratio: float, scale=RATIO_SCALE) -> str:
    """The colour of measured / predicted ``ratio``: grey at 1, blue where the run counted less
    than the model predicted, red where it counted more; :data:`UNMEASURED_COLOR` for ``nan``.

    >>> ratio_color(1.0), ratio_color(0.05), ratio_color(20.0), ratio_color(float("nan"))
    ('rgb(221, 221, 221)', 'rgb(5, 48, 97)', 'rgb(103, 0, 31)', '#BBBBBB')
    """
    from plotly.colors import sample_colorscale

    if math.isnan(ratio):
        return UNMEASURED_COLOR
    return sample_colorscale(scale, [_ratio_position(ratio)])[0]


def _ratio_text(c: Count) -> str:
    if math.isnan(c.measured):
        return f"predicted {fmt(c.predicted)}, not measured per step"
    r = c.ratio
    return (f"predicted {fmt(c.predicted)}, measured {fmt(c.measured)} "
            f"({'—' if math.isnan(r) else '∞' if math.isinf(r) else f'{r:.3g}'}× the prediction)")


def _step_ratio(step: Count, store: Count) -> float:
    """A step's ratio, or its store's messages ratio when the run counted per store only."""
    return store.ratio if math.isnan(step.measured) else step.ratio


def _measured_hover(n: Node, step: Count, stores: Mapping[tuple[str, str], Count]) -> str:
    msgs, rows = stores["messages", n.store], stores["rows", n.store]
    return (f"<br><b>the run</b>: probe messages of this step {_ratio_text(step)}<br>"
            f"store {n.store}: probe messages {_ratio_text(msgs)}; rows (most at once) {_ratio_text(rows)}")


def _store_trace(plan: Plan, f: _Forest, colors: Mapping[str, str], check: RunCheck | None = None) -> dict:
    """The stores the probes reach, coloured by the query that owns the step (shared steps:
    diamonds), with the step's cost in the hover; with ``check`` (a run of this plan), coloured
    by measured / predicted instead — the marker by the step's probe messages, the label by
    the store's rows — with both numbers in the hover."""
    queries = set(plan.workload.query_names)
    steps = dict(zip((n.edge for n in plan.nodes), check.steps)) if check is not None else {}
    stores = {(c.kind, c.store): c for c in check.stores} if check is not None else {}
    tc: list[str] = []
    nx_, ny, nt, nh, nc, nw, nd = [], [], [], [], [], [], []
    for n in f.nodes:
        x, y = f.pos[n.edge]
        st = plan.store[n.store]
        chi = _chi(plan, n)
        base = n.cost / chi
        rule = plan.rules[n.store][n.edge]
        pred = ", ".join(f"{a} = {b}" for a, b in rule.predicate) if isinstance(rule, ProbeRule) else ""
        shared = len(n.owners) > 1
        qowners = [o for o in n.owners if o in queries]
        if shared:
            color = SHARED_COLOR
        elif len(qowners) == 1:
            color = colors[qowners[0]]
        else:
            color = MIR_COLOR
        measured = ""
        if check is not None:
            step = steps[n.edge]
            color = ratio_color(_step_ratio(step, stores["messages", n.store]))
            tc.append(ratio_color(stores["rows", n.store].ratio, RATIO_TEXT_SCALE))
            measured = _measured_hover(n, step, stores)
        nx_.append(f.X(x))
        ny.append(_Y(y))
        nt.append(f.label_of[n.edge])
        nh.append(
            f"<b>{n.edge}</b> → {n.store} (partitioned by {st.partition}, parallelism {st.parallelism})<br>"
            f"step {n.step.render()}<br>"
            f"cost {fmt(n.cost)} = {fmt(base)} (|⋈P|/|P|) × χ {chi}"
            f"{' — broadcast to every partition' if n.broadcast else ''}<br>"
            f"probe {pred or '—'}<br>"
            f"used by {', '.join(n.owners)}{' (shared step)' if shared else ''}{measured}")
        nc.append(color)
        nw.append(3 if shared else 1)
        nd.append([n.edge, n.cost, chi, len(n.owners)])
    return {"type": "scatter", "name": "stores", "x": nx_, "y": ny, "mode": "markers+text", "text": nt,
            "textposition": "top left", "textfont": {"size": TEXT_PX, **({"color": tc} if tc else {})},
            "customdata": nd, "marker": {"symbol": ["diamond" if w > 1 else "square" for w in nw],
                       "size": [16 if w > 1 else 13 for w in nw], "color": nc, "line": {"width": nw, "color": "#222"}},
            "hovertext": nh, "hoverinfo": "text", "showlegend": False}


def _output_trace(f: _Forest, colors: Mapping[str, str]) -> dict:
    """The sinks: a query's results (in its colour) or an insertion into an MIR store."""
    ox, oy, ot, oc = [], [], [], []
    for _lab, _parent, text, x, y in f.sink_rows:
        ox.append(f.X(x))
        oy.append(_Y(y))
        if text.startswith("store"):
            ot.append("⇒ " + text[6:])
            oc.append(MIR_COLOR)
        else:
            ot.append("⇒ " + text)
            oc.append(colors.get(text, "#333"))
    return {"type": "scatter", "name": "outputs", "x": ox, "y": oy, "mode": "markers+text", "text": ot,
            "textposition": "middle right", "textfont": {"size": TEXT_PX},
            "marker": {"symbol": "triangle-right", "size": 10, "color": oc},
            "hoverinfo": "text", "hovertext": ot, "showlegend": False}


def _ratio_scale_trace(f: _Forest, check: RunCheck | None) -> dict:
    """The colour bar of measured / predicted (one invisible point carries it), empty and
    hidden without a run."""
    ticks = [math.log10(t) for t in RATIO_TICKS]
    lim = math.log10(RATIO_LIMIT)
    shown = check is not None
    return {"type": "scatter", "name": "measured / predicted", "x": [f.X(0)] if shown else [],
            "y": [0.0] if shown else [], "mode": "markers", "hoverinfo": "skip", "showlegend": False,
            "marker": {"color": [0.0] if shown else [], "colorscale": RATIO_SCALE, "cmin": -lim, "cmax": lim,
                       "opacity": 0, "showscale": shown,
                       "colorbar": {"title": {"text": "measured / predicted (log scale)", "side": "top"},
                                    "orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom",
                                    "ypad": 34, "len": 360, "lenmode": "pixels", "thickness": 10,
                                    "tickvals": ticks, "ticktext": [f"{t:g}×" for t in RATIO_TICKS]}}}


def probe_tree_traces(plan: Plan, query: str | None = None,
                      check: RunCheck | None = None) -> tuple[list[dict], dict]:
    """Trace dicts and layout of :func:`probe_tree_figure`: the forest laid out
    (:func:`_forest`), then its lines, labels, start relations, stores and sinks; with
    ``check`` (predicted beside measured for a run of ``plan``) the stores are coloured by
    measured / predicted and a colour bar says so."""
    colors = query_colors(plan.workload)
    f = _forest(plan, query)
    nodes = f.nodes
    edges, shared, broadcast, labels = _probe_edge_traces(plan, f)
    starts, insertions = _start_traces(plan, f)
    traces = [edges, shared, labels, starts, _store_trace(plan, f, colors, check), _output_trace(f, colors), broadcast,
              insertions, _ratio_scale_trace(f, check)]
    # rows leave room for a store label above the line and an edge label below it
    rows = max(f.rows, 1)
    cost = sum(n.cost for n in nodes)
    who = "all queries" if query is None else query
    top = 84 if check is None else 144  # room for the colour bar above the legend
    layout = {"title": {"text": f"probe trees ({plan.mode}/{plan.partitioning}) — {who}: "
                                f"{len(nodes)} steps, probe cost {fmt(cost)}", "x": 0.01},
              "xaxis": {"visible": False, "range": [0, round(f.right, 1)], "fixedrange": False},
              "yaxis": {"visible": False, "range": [-rows + 0.2, 0.9]},
              "width": int(max(720, f.right + 20)), "autosize": False,
              "height": int(top + 30 + ROW_PX * rows), "margin": {"l": 10, "r": 10, "t": top, "b": 10},
              "hovermode": "closest", "showlegend": True, "font": {"size": TEXT_PX},
              # under the title, at the left: a wide forest scrolls, its right edge is off-screen
              "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "bottom"}}
    return traces, layout


def probe_tree_figure(plan: Plan, query: str | None = None, check: RunCheck | None = None):
    """The probe-tree forest of a plan (only ``query``'s part when given) as a plotly figure;
    ``check``: coloured by measured / predicted of a run of the plan (:func:`probe_tree_traces`)."""
    return to_figure(*probe_tree_traces(plan, query, check))


# --------------------------------------------------------------------------------------------
# operator trees (planners mjoin, tree, ajoin, pmjoin)
# --------------------------------------------------------------------------------------------


def tree_stores(plan: Plan, query: str, relations: Iterable[str]) -> list[str]:
    """The plan's stores that hold ``relations`` (a node of ``query``'s operator tree) for the
    query: the targets of its steps and of the steps maintaining the MIR stores it probes
    (several under ``replicas``).

    >>> from mqjoin.widgets.model import as_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> plan = optimize(as_workload("paper_v2.yaml"), planner="tree", mode="individual").plan
    >>> tree_stores(plan, "q1", ["R", "S"]), tree_stores(plan, "q1", ["T"])
    (['q1:RS[b]'], ['q1:T[b]'])
    """
    want = frozenset(relations)
    return list(dict.fromkeys(n.store for n in nodes_for_query(plan, query)
                              if frozenset(plan.store[n.store].mir.relations) == want))


def operator_tree_traces(result: OptimizeResult, query: str | None = None) -> tuple[list[dict], dict]:
    """Trace dicts and layout of :func:`operator_tree_figure`."""
    plan, trees = result.plan, result.join_trees or {}
    colors = query_colors(plan.workload)
    names = [q for q in plan.workload.query_names if q in trees and query in (None, q)]
    placed: list[tuple[str, JoinTree, int, float, str]] = []  # (query, node, depth, x, label)
    edges: list[tuple[int, float, float]] = []  # (parent depth, parent x, child x)
    slot = [0.0]

    def width(label: str) -> float:
        return max(LEVEL_MIN_PX, CHAR_PX * len(label) + 24)

    def place(q: str, node: JoinTree, depth: int) -> float:
        label = f"⇒ {q}" if depth == 0 else ", ".join(tree_stores(plan, q, node.relations))
        if node.is_leaf:
            x = slot[0] + width(label) / 2
            slot[0] += width(label)
        else:
            xs = [place(q, k, depth + 1) for k in node.children]
            x = (xs[0] + xs[-1]) / 2
            edges.extend((depth, x, kx) for kx in xs)
        placed.append((q, node, depth, x, label))
        return x

    for q in names:
        place(q, trees[q], 0)
        slot[0] += 30  # gap between queries' trees

    def node_trace(name: str, rows: list[tuple[str, JoinTree, int, float, str]], symbol: str | list[str],
                   position: str) -> dict:
        return {"type": "scatter", "name": name, "mode": "markers+text", "x": [round(x, 1) for *_, x, _ in rows],
                "y": [-float(d) for _, _, d, _, _ in rows], "text": [lab for *_, lab in rows], "textposition": position,
                "textfont": {"size": TEXT_PX}, "customdata": [[q, d, len(n.children)] for q, n, d, _, _ in rows],
                "marker": {"symbol": symbol, "size": 14, "color": [colors[q] for q, *_ in rows],
                           "line": {"width": 1, "color": "#222"}},
                "hovertext": [f"<b>{lab}</b> — {q}: {n}" + ("" if n.is_leaf else f" ({len(n.children)}-way join)")
                              for q, n, _, _, lab in rows],
                "hoverinfo": "text", "showlegend": False}

    ex, ey = [], []
    for d, x0, x1 in edges:
        ex.extend([round(x0, 1), round(x1, 1), None])
        ey.extend([-float(d), -float(d + 1), None])
    joins = [r for r in placed if not r[1].is_leaf]
    edge_name, join_name, leaf_name = OPERATOR_TRACES
    traces = [
        {"type": "scatter", "name": edge_name, "x": ex, "y": ey, "mode": "lines",
         "line": {"color": "#A0A8B8", "width": 1.5}, "hoverinfo": "skip", "showlegend": False},
        node_trace(join_name, joins, ["hexagon" if len(n.children) > 2 else "square" for _, n, *_ in joins],
                   "top center"),
        node_trace(leaf_name, [r for r in placed if r[1].is_leaf], "circle", "bottom center"),
    ]
    depth = max([d for _, _, d, _, _ in placed] + [1])
    shape = f" {result.tree_shape}" if result.tree_shape else ""
    who = "all queries" if query is None else query
    layout = {"title": {"text": f"operator trees ({result.planner}{shape}) — {who}", "x": 0.01},
              "xaxis": {"visible": False, "range": [0, round(slot[0], 1)]},
              "yaxis": {"visible": False, "range": [-depth - 0.6, 0.6]},
              "width": int(max(720, slot[0] + 20)), "autosize": False, "height": int(130 + 90 * depth),
              "margin": {"l": 10, "r": 10, "t": 60, "b": 10}, "hovermode": "closest", "showlegend": False,
              "font": {"size": TEXT_PX}}
    return traces, layout


def operator_tree_figure(result: OptimizeResult, query: str | None = None):
    """The operator trees of a ``mjoin``/``tree``/``ajoin``/``pmjoin`` result (only
    ``query``'s when given) as a plotly figure: each query's join tree drawn as a tree of the
    plan's stores — a binary tree's inner nodes are its MIR stores, an MJoin is one n-ary
    node (a hexagon) over its inputs' stores.

    >>> from mqjoin.widgets.model import as_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = as_workload("paper_v2.yaml")
    >>> fig = operator_tree_figure(optimize(w, planner="tree", tree_shape="deep", mode="individual"), "q1")
    >>> [t.name for t in fig.data], list(fig.data[1].text), list(fig.data[2].text)
    (['operator edges', 'joins', 'base stores'], ['q1:RS[b]', '⇒ q1'], ['q1:R[a]', 'q1:S[a]', 'q1:T[b]'])
    >>> fig = operator_tree_figure(optimize(w, planner="mjoin"))
    >>> list(fig.data[1].text), [c[2] for c in fig.data[1].customdata]
    (['⇒ q1', '⇒ q2'], [3, 3])
    """
    return to_figure(*operator_tree_traces(result, query))


__all__ = ["nodes_for_query", "operator_tree_figure", "operator_tree_traces", "probe_tree_figure",
           "probe_tree_traces", "ratio_color", "tree_stores"]
