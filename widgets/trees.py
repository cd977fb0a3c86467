"""The probe tree view: the plan's forest (paper Figure 4).

One tree per start relation (per query in ``individual`` mode): a new tuple of the start
relation is stored in its base store(s) and probes stores along the tree's edges; every
node is one executed step, drawn as its store ``MIR[partition attribute] ×parallelism``;
edges carry the plan's edge labels; results leave to a query output ``⇒ q1`` or are
inserted into an MIR store; under each start relation, its insertion into its own store
(``e1 ⇓ R[b]``).  Colour is the query; steps used by several probe orders (shared prefixes)
are dark diamonds on thick edges; broadcast probes are dotted purple edges labelled with their
broadcast factor (``e7 χ=4``).  Hovering a store shows the step, its cost
``|⋈P|/|P| × χ`` and broadcast factor ``χ``, the probe predicate and who uses it.  The
*show* menu restricts the forest to one query (its steps and the steps that maintain the
MIR stores it probes).  Below the figure: the stores table and the plan as text.

When the plan comes from an operator-level planner (``mjoin``, ``tree``, ``ajoin``,
``pmjoin``), a second figure above the forest draws each query's *operator tree* as a tree of
the plan's stores: a binary join tree's inner nodes are its MIR stores over the base stores at
its leaves, an MJoin is one n-ary node over its inputs' stores; CLASH's plans have none.

>>> view = ProbeTreeView("paper_v2.yaml", debounce=0, planner="tree", tree_shape="deep", mode="individual")
>>> view.operators.layout.title.text.split(" — ")[0], list(view.operators.data[1].text)
('operator trees (tree deep)', ['q1:RS[b]', '⇒ q1', 'q2:TU[b]', '⇒ q2'])

>>> view = ProbeTreeView("paper_v2.yaml", debounce=0)
>>> stores = view.figure.data[4]
>>> list(stores.text)[:2]
['ST[a] ×1', 'T[b] ×1']
>>> view.query.value = "q2"
>>> len(view.figure.data[4].x)
5
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.widgets._html import esc, table
from mqjoin.widgets.figures import BROADCAST_COLOR, SHARED_COLOR, fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView
from mqjoin.widgets.tree_figures import nodes_for_query, operator_tree_traces, probe_tree_traces


#: the value of the filter's "all queries" option (query names are never empty)
ALL = ""


class ProbeTreeView(ModelView, W.VBox):
    """Probe-tree forest of the model's current plan, with a per-query filter."""

    def __init__(self, model, **model_kw):
        self.own_model(model, **model_kw)
        self.query = W.Dropdown(description="show", options=self._query_options())
        self.figure = new_figure_widget(*self._traces())
        #: the operator trees of an mjoin/tree/ajoin/pmjoin plan (hidden for CLASH's)
        self.operators = new_figure_widget(*self._operator_traces())
        self.operators_box = W.VBox([
            W.HTML('<span style="font-size:12px;color:#555">the operator tree of each query as a tree of the '
                   "plan's stores: ● base stores at the leaves, ■ MIR stores (a binary join's state) inside, "
                   "⬢ an MJoin over all its inputs, ⇒ q1 the query's output at the root; colour = the query</span>"),
            W.Box([self.operators], layout=W.Layout(overflow="auto hidden", width="100%"))])
        self.stores = W.HTML("")
        self.text = W.HTML("")
        self.details = W.Accordion(children=[W.VBox([self.stores]), W.VBox([self.text])])
        self.details.set_title(0, "stores")
        self.details.set_title(1, "plan as text (Figure 4)")
        self.query.observe(lambda _: self.redraw(), "value")
        self.model.observe(self._on_result, "result")
        self.model.observe(self._on_workload, "workload")
        legend = W.HTML(
            '<span style="font-size:12px;color:#555">■ store of a step, colour = its query (grey: maintains an MIR) · '
            f'<b style="color:{SHARED_COLOR}">◆ thick</b> = a step shared by several probe orders · '
            f'<span style="color:{BROADCAST_COLOR}">┈ e7 χ=4</span> = broadcast probe to all χ partitions · '
            'e1 ⇓ R[b] = a new tuple stored in its own store · ⇒ result to a query output or an MIR store · '
            'hover a store for its cost |⋈P|/|P| × χ</span>')
        # only a forest wider than the page scrolls, sideways: no nested vertical scroll area
        scroll = W.Box([self.figure], layout=W.Layout(overflow="auto hidden", width="100%"))  # x: auto, y: hidden
        super().__init__([self.query, self.operators_box, legend, scroll, self.details])
        self._show_operators()
        self._fill_tables()

    def _query_options(self) -> list[tuple[str, str]]:
        # "" rather than None for all queries: ipywidgets 8 takes a None value for "nothing
        # selected" and the browser shows an empty dropdown
        return [("all queries", ALL)] + [(q, q) for q in self.model.workload.query_names]

    def _shown_query(self) -> str | None:
        res = self.model.result
        return self.query.value if res is not None and self.query.value in res.plan.workload.query_names else None

    def _traces(self):
        res = self.model.result
        if res is None:
            return [], {"title": {"text": "no plan yet"}}
        return probe_tree_traces(res.plan, self._shown_query())

    def _operator_traces(self):
        res = self.model.result
        if res is None or res.join_trees is None:
            return [], {"title": {"text": "no operator trees (the CLASH planner's plans have none)"}}
        return operator_tree_traces(res, self._shown_query())

    def _on_workload(self, change) -> None:
        opts = self._query_options()
        if list(self.query.options) != opts:
            keep = self.query.value if self.query.value in self.model.workload.query_names else ALL
            self.query.options = opts
            self.query.value = keep

    def _on_result(self, change) -> None:
        self._on_workload(change)
        self.redraw()

    def redraw(self) -> None:
        """Redraw the forest (and the tables) from the model's current plan."""
        sync_figure(self.figure, *self._traces())
        sync_figure(self.operators, *self._operator_traces())
        self._show_operators()
        self._fill_tables()

    def _show_operators(self) -> None:
        res = self.model.result
        self.operators_box.layout.display = "none" if res is None or res.join_trees is None else "flex"

    def _fill_tables(self) -> None:
        res = self.model.result
        if res is None:
            return
        plan = res.plan
        rows = [(s.id, s.mir.label, str(s.partition), s.parallelism, fmt(s.memory), s.namespace or "—")
                for s in plan.stores]
        self.stores.value = table(["store", "MIR", "partition attribute", "parallelism", "memory (tuples)",
                                   "namespace"], rows)
        q = self._shown_query()
        edges = None if q is None else [n.edge for n in nodes_for_query(plan, q)]
        who = "all queries" if q is None else f"{q} (its steps and the MIR stores it probes)"
        self.text.value = f'<i>{esc(who)}</i><pre style="font-size:12px">{esc(plan.render(edges))}</pre>'
