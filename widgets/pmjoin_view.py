"""The PMJoin view: communication cost per scheme, the per-group plans of every PMJoin, and a
picture of one query's placement.

PMJoin (:mod:`mqjoin.planners.pmjoin`) places each query's MJoins at the nodes of its streams and
splits the streams of a PMJoin into ``D`` groups of join values, each with its own
placement.  The view shows, for the model's workload, a table of the communication cost of
the centralized, distributed and partition-based schemes per query, per PMJoin its value
groups with their trees (``(S2 ⋈ S1)@n1``: ``S2`` is shipped to ``n1``) and costs, and
(:func:`placement_figure`) the chosen query's placement: the processing nodes as columns,
its streams at their nodes, the MJoin operators above them (a dashed edge ships a stream to
another node), the PMJoin's operators marked, and a row of its value groups, each at the
node where its own tree produces its results.

The number of groups, the partitioning method and the tuple sizes are controls.  Groups of
join values need per-value rates: given as ``rates=`` (e.g.
:func:`mqjoin.planners.pmjoin.value_rates` of the run's tables), else, for ``D > 1``,
measured from streams the view generates from the workload itself
(:func:`mqjoin.datasets.uniform.uniform_streams`, :data:`GENERATED_TUPLES` tuples at the
workload's rates, attribute values uniform over ``1/selectivity`` values: what the
explorer's Adaptivity tab runs).  With ``D = 1`` the model uses the class selectivities.

>>> from mqjoin.planners.pmjoin import EXAMPLE_1, EXAMPLE_1_VALUE_RATES
>>> from mqjoin.model.workload import parse_workload
>>> view = PMJoinView(parse_workload(EXAMPLE_1), rates=EXAMPLE_1_VALUE_RATES, debounce=0)
>>> view.groups.value = 3
>>> round(view.report.queries[0].partitioned, 4), "0.036" in view.plans.value
(0.0696, True)
>>> [t.name for t in view.figure.data]
['shipped', 'local', 'group of', 'streams', 'operators', 'PMJoin operators', 'value groups']
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planners.pmjoin import (METHODS, SIZES, GroupPlan, Operator, PMJoinOptions, PMJoinReport, QueryPMJoin,
                                    ValueRates, pmjoin_report, value_rates)

from mqjoin.widgets._controls import checked_box
from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.charts import projector
from mqjoin.widgets.figures import PALETTE, fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView

#: tuples of the streams generated to measure per-value rates (all relations together)
GENERATED_TUPLES = 50_000
#: the most value groups D the view offers
MAX_GROUPS = 1024
#: the traces of :func:`placement_figure`, in order
PLACEMENT_TRACES = ("shipped", "local", "group of", "streams", "operators", "PMJoin operators", "value groups")


def generated_rates(workload) -> tuple[ValueRates, str]:
    """Per-value rates measured from uniform streams of ``workload``
    (:data:`GENERATED_TUPLES` tuples at its rates), and a sentence saying so.

    >>> from mqjoin.planners.pmjoin import EXAMPLE_2
    >>> from mqjoin.model.workload import parse_workload
    >>> rates, note = generated_rates(parse_workload(EXAMPLE_2))
    >>> sorted(str(a) for a in rates)[:2], note.split(":")[0]
    (['S0.a', 'S0.b'], 'per-value rates measured from 434.8 s of uniform streams of the workload')
    """
    from mqjoin.datasets.uniform import uniform_streams

    total = sum(workload.rate(r) for r in workload.used_relations) or 1.0
    seconds = GENERATED_TUPLES / total
    tables = uniform_streams(workload, duration=seconds, seed=0)
    return value_rates(workload, tables), (
        f"per-value rates measured from {fmt(seconds)} s of uniform streams of the workload: "
        f"{sum(len(t) for t in tables.values()):,} tuples at its rates, values uniform over 1/selectivity "
        f"values (mqjoin.datasets.uniform)")


def _values(values: tuple) -> tuple[str, str]:
    """A group's values for the table: (a few of them, how many); no values: the group of all."""
    if not values:
        return "all values", "all"
    return ", ".join(map(str, values[:8])) + (" …" if len(values) > 8 else ""), f"{len(values):,}"


def placement_figure(qp: QueryPMJoin) -> tuple[list[dict], dict]:
    """Traces (:data:`PLACEMENT_TRACES`) and layout of one query's PMJoin placement: nodes
    as columns, streams at the bottom, operators above them by height, the PMJoins' value
    groups on top (each at the node of its group's root).

    >>> from mqjoin.planners.pmjoin import EXAMPLE_2, plan_query, PMJoinOptions
    >>> from mqjoin.model.workload import parse_workload
    >>> traces, layout = placement_figure(plan_query(parse_workload(EXAMPLE_2), "q", PMJoinOptions(sizes="unit")))
    >>> layout["xaxis"]["ticktext"], traces[3]["text"]
    (['n0', 'n1', 'n2'], ['S0', 'S1', 'S2', 'S3', 'S4'])
    >>> traces[4]["text"], traces[5]["text"], layout["font"]["size"] >= 14
    (['@n1', '@n0'], ['PMJoin @n1'], True)
    """
    ops: list[tuple[Operator, int]] = []

    def walk(op: Operator) -> int:
        h = 0 if op.is_source else 1 + max(walk(k) for k in op.children)
        ops.append((op, h))
        return h

    top = walk(qp.tree)
    nodes = sorted({op.node for op, _ in ops} | {g.tree.node for pm in qp.pmjoins for g in pm.groups})
    col = {n: i for i, n in enumerate(nodes)}
    slots: dict[tuple[str, float], list[Any]] = {}
    for op, h in ops:
        slots.setdefault((op.node, h), []).append(op)
    groups = [(k, pm, g) for k, pm in enumerate(qp.pmjoins) for g in pm.groups]
    band = top + 1.2  # the value groups' row, clear of the top operator's label
    for k, _pm, g in groups:
        slots.setdefault((g.tree.node, band + k * 0.8), []).append(g)
    pos: dict[int, tuple[float, float]] = {}
    for (node, y), items in slots.items():
        for i, item in enumerate(items):
            # groups side by side at one node stand at two heights in turn: their labels never meet
            lift = 0.4 * (i % 2) if isinstance(item, GroupPlan) else 0.0
            pos[id(item)] = (col[node] + (i - (len(items) - 1) / 2) * min(0.25, 0.7 / len(items)), y + lift)
    in_pm = {id(o) for pm in qp.pmjoins for o in pm.top.operators() if o.relations not in
             {x.relations for x in pm.inputs}}
    edges: dict[bool, tuple[list, list]] = {True: ([], []), False: ([], [])}
    for op, _ in ops:
        for k in op.children:
            xs, ys = edges[k.node != op.node]
            (x0, y0), (x1, y1) = pos[id(k)], pos[id(op)]
            xs += [x0, x1, None]
            ys += [y0, y1, None]

    links: tuple[list, list] = ([], [])  # each value group to the top of its PMJoin
    for _, pm, g in groups:
        top_op = next((o for o, _ in ops if o.relations == pm.top.relations), None)
        if top_op is not None:
            (x0, y0), (x1, y1) = pos[id(g)], pos[id(top_op)]
            links[0].extend([x0, x1, None])
            links[1].extend([y0, y1, None])

    def points(name: str, items: list, text, hover, marker: dict, where: str | list = "top center") -> dict:
        return {"type": "scatter", "mode": "markers+text", "name": name, "x": [pos[id(o)][0] for o in items],
                "y": [pos[id(o)][1] for o in items], "text": text, "hovertext": hover, "hoverinfo": "text",
                "textposition": where, "marker": marker, "cliponaxis": False}

    sources = [op for op, h in ops if op.is_source]
    sources.sort(key=lambda o: o.relations)
    plain = [op for op, h in ops if not op.is_source and id(op) not in in_pm]
    marked = [op for op, h in ops if not op.is_source and id(op) in in_pm]
    op_hover = [f"{o} at {o.node}" for o in plain]
    traces = [
        {"type": "scatter", "mode": "lines", "name": "shipped", "x": edges[True][0], "y": edges[True][1],
         "line": {"color": "#d62728", "dash": "dash", "width": 2}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "name": "local", "x": edges[False][0], "y": edges[False][1],
         "line": {"color": "#555", "width": 2}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "name": "group of", "x": links[0], "y": links[1],
         "line": {"color": "#6a51a3", "dash": "dot", "width": 1.5}, "hoverinfo": "skip", "showlegend": False},
        points("streams", sources, [o.relations[0] for o in sources], [f"stream {o.relations[0]} at {o.node}"
                                                                        for o in sources],
               {"size": 18, "symbol": "square", "color": "#9ecae1", "line": {"color": "#333", "width": 1}},
               "middle right"),
        points("operators", plain, [f"@{o.node}" for o in plain], op_hover,
               {"size": 20, "symbol": "circle", "color": "#fdae6b", "line": {"color": "#333", "width": 1}}),
        points("PMJoin operators", marked, [f"PMJoin @{o.node}" for o in marked], [f"{o} at {o.node} (PMJoin)"
                                                                                  for o in marked],
               {"size": 24, "symbol": "diamond", "color": "#6a51a3", "line": {"color": "#333", "width": 1}}),
        points("value groups", [g for _, _, g in groups],
               # numbered within their PMJoin, as the table under each PMJoin numbers them
               [f"G{pm.groups.index(g) + 1}: {_values(g.values)[1]} value{'' if len(g.values) == 1 else 's'}"
                for _, pm, g in groups],
               [f"{pm.cls}: G{pm.groups.index(g) + 1}, values {esc(_values(g.values)[0])}<br>{g.tree}<br>"
                f"cost {fmt(g.cost)} bytes/s" for _, pm, g in groups],
               {"size": 18, "symbol": "hexagon", "color": [PALETTE[i % len(PALETTE)] for i in range(len(groups))],
                "line": {"color": "#333", "width": 1}},
               ),
    ]
    ticks = [0, *range(1, top + 1)] + ([band] if groups else [])
    layout = projector({
        "height": 460 + 50 * max(0, len(qp.pmjoins) - 1), "margin": {"l": 130, "r": 20, "t": 80, "b": 50},
        "xaxis": {"tickmode": "array", "tickvals": list(range(len(nodes))), "ticktext": nodes, "title": "node",
                  "range": [-0.6, len(nodes) - 0.4], "showgrid": True, "zeroline": False},
        "yaxis": {"tickmode": "array", "tickvals": ticks,
                  "ticktext": ["streams"] + [f"level {h}" for h in range(1, top + 1)] + (["value groups"] if groups
                                                                                       else []),
                  "range": [-0.5, (band + 0.8 * len(qp.pmjoins) + 0.1) if groups else top + 0.9], "zeroline": False},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        "showlegend": True,
        "title": {"text": f"{qp.query}: placement (communication {fmt(qp.partitioned)} bytes/s)", "x": 0.01}})
    return traces, layout


class PMJoinView(ModelView, W.VBox):
    """Communication cost per scheme, per-group plans and a query's placement under PMJoin over
    an :class:`ExplorerModel` (or a workload: then it makes its own model with ``model_kw``)."""

    def __init__(self, model, rates: ValueRates | None = None, shown: Callable[[], bool] | None = None,
                 **model_kw):
        self.own_model(model, **model_kw)
        #: whether the view is on screen (None: always): an edit of the workload while it is not
        #: only marks the report stale, and :meth:`ensure_fresh` recomputes it when it shows
        self.shown = shown
        self.stale = False
        #: per-value rates given by the caller (None: measured from generated streams when D > 1)
        self.rates = rates
        self._measured: tuple[Any, ValueRates, str] | None = None  # (workload, rates, note)
        self.groups = W.IntText(value=1, description="groups D", continuous_update=False,
                                layout=W.Layout(width="170px"))
        groups_row = checked_box(self.groups, 1, MAX_GROUPS)  # D = 0 or 5000 kept at 1 or 1,024, and said
        self.method = W.Dropdown(options=METHODS, value="rate", description="partition",
                                 layout=W.Layout(width="200px"))
        self.sizes = W.Dropdown(options=SIZES, value="sum", description="tuple sizes", layout=W.Layout(width="200px"))
        self.query = W.Dropdown(description="picture of", layout=W.Layout(width="200px"))
        self.error = W.HTML()
        self.note = W.HTML()
        self.costs = W.HTML()
        self.plans = W.HTML()
        self.figure = new_figure_widget([], {})
        #: the report shown (``None`` while the options give an error)
        self.report: PMJoinReport | None = None
        for c in (self.groups, self.method, self.sizes):
            c.observe(lambda _: self.refresh(), "value")
        self.query.observe(lambda _: self.draw(), "value")
        self.model.observe(lambda _: self._on_workload(), "workload")
        super().__init__([W.HBox([groups_row, self.method, self.sizes, self.query]), self.error, self.note,
                          self.costs, self.figure, self.plans])
        self._on_workload()

    def _on_workload(self) -> None:
        if self.shown is None or self.shown():
            self.refresh()
        else:
            self.stale = True

    def ensure_fresh(self) -> None:
        """Recompute the report if the workload changed while the view was hidden (the
        Explorer calls this when the PMJoin tab opens)."""
        if self.stale:
            self.refresh()

    def value_rates(self) -> tuple[ValueRates | None, str]:
        """The per-value rates the report uses, and where they come from."""
        if self.rates is not None:
            return self.rates, "per-value rates given to the view"
        if self.groups.value == 1:
            return None, "one group of all values: the class selectivities of the workload"
        w = self.model.workload
        if self._measured is None or self._measured[0] is not w:
            self._measured = (w, *generated_rates(w))
        return self._measured[1], self._measured[2]

    def refresh(self) -> None:
        self.stale = False
        try:
            rates, note = self.value_rates()
            options = PMJoinOptions(rates, self.groups.value, self.method.value, self.sizes.value)
            self.report = pmjoin_report(self.model.workload, options)
        except MqjoinError as e:
            self.report = None
            self.error.value, self.costs.value, self.plans.value, self.note.value = error_box(str(e)), "", "", ""
            sync_figure(self.figure, [], {})
            return
        self.error.value = ""
        self.note.value = f'<span style="font-size:14px;color:#555">{esc(note)}</span>'
        qs = self.report.queries
        self.costs.value = "<b>communication cost (bytes/s)</b>" + table(
            ["query", "centralized", "at", "distributed", "partition-based", "plan without partitioning"],
            [[qp.query, fmt(qp.centralized), qp.centralized_node, fmt(qp.distributed), fmt(qp.partitioned),
              str(qp.tree)] for qp in qs])
        blocks = []
        for qp in qs:
            for pm in qp.pmjoins:
                rows = [[f"G{i + 1}", *_values(g.values), str(g.tree), fmt(g.cost)] for i, g in enumerate(pm.groups)]
                blocks.append(f"<b>{esc(qp.query)}: {esc(pm)}</b>"
                              + table(["group", "values", "# values", "plan of the group", "cost"], rows))
        self.plans.value = "".join(blocks) or "<i>no PMJoin: no operator joins on one attribute only</i>"
        names = [qp.query for qp in qs]
        if list(self.query.options) != names:
            keep = self.query.value if self.query.value in names else next(
                (qp.query for qp in qs if qp.pmjoins), names[0] if names else None)
            self.query.options = names
            self.query.value = keep
        self.draw()

    def draw(self) -> None:
        """The placement picture of the chosen query."""
        if self.report is None or self.query.value is None:
            return
        sync_figure(self.figure, *placement_figure(self.report.query(self.query.value)))
