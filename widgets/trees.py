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

**Predicted beside measured.**  Once a run of the plan ended (a deployment of the Deploy
panel, a run of the Adaptivity tab: the model's ``measured``), the stores are coloured by
measured / predicted on a diverging scale centred on 1 (log ratio; blue: the run counted
less than the model predicted, red: more) — the marker by the step's probe messages (its
store's where the engine counts per store only), the label by the store's rows — and the
hover shows both numbers and the ratio, from the same comparison as ``mqjoin run --json``
(:class:`~mqjoin.planning.measured.RunCounts`).  An edit that keeps the plan's layout keeps
the colours, the predictions following the edit; another plan gets the usual colours until it
runs.  **Re-optimise on what was measured** re-plans the model's workload, edits and all, with
the join sizes the run measured (what ``mqjoin optimize --stats-from`` does) and shows what
changed: the plan diff, cost and memory before and after.

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
>>> view.replan_button.disabled, view.run_note.value
(True, '')
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planning.measured import RunCheck, measured_workload, replan_report
from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.figures import BROADCAST_COLOR, SHARED_COLOR, fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView
from mqjoin.widgets.tree_figures import nodes_for_query, operator_tree_traces, probe_tree_traces, ratio_color


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
            W.HTML('<span style="font-size:14px;color:#555">the operator tree of each query as a tree of the '
                   "plan's stores: ● base stores at the leaves, ■ MIR stores (a binary join's state) inside, "
                   "⬢ an MJoin over all its inputs, ⇒ q1 the query's output at the root; colour = the query</span>"),
            W.Box([self.operators], layout=W.Layout(overflow="auto hidden", width="100%"))])
        self.stores = W.HTML("")
        self.text = W.HTML("")
        self.details = W.Accordion(children=[W.VBox([self.stores]), W.VBox([self.text])])
        self.details.set_title(0, "stores")
        self.details.set_title(1, "plan as text (Figure 4)")
        #: which run the colours show (or why they are the usual ones)
        self.run_note = W.HTML("")
        self.replan_button = W.Button(description="Re-optimise on what was measured", icon="refresh", disabled=True,
                                      layout=W.Layout(width="auto"),
                                      tooltip="re-plan with the join sizes the last run measured "
                                              "(mqjoin optimize --stats-from); your edits stay")
        self.replan_out = W.HTML("")
        self.replan_button.on_click(lambda _: self.replan())
        self.query.observe(lambda _: self.redraw(), "value")
        self.model.observe(self._on_result, "result")
        self.model.observe(self._on_workload, "workload")
        self.model.observe(lambda _: self.redraw(), "measured")
        legend = W.HTML(
            '<span style="font-size:14px;color:#555">■ store of a step, colour = its query (grey: maintains an MIR) · '
            f'<b style="color:{SHARED_COLOR}">◆ thick</b> = a step shared by several probe orders · '
            f'<span style="color:{BROADCAST_COLOR}">┈ e7 χ=4</span> = broadcast probe to all χ partitions · '
            'e1 ⇓ R[b] = a new tuple stored in its own store · ⇒ result to a query output or an MIR store · '
            'hover a store for its cost |⋈P|/|P| × χ</span>')
        # only a forest wider than the page scrolls, sideways: no nested vertical scroll area
        scroll = W.Box([self.figure], layout=W.Layout(overflow="auto hidden", width="100%"))  # x: auto, y: hidden
        super().__init__([W.HBox([self.query, self.replan_button]), self.operators_box, legend, self.run_note,
                          scroll, self.replan_out, self.details])
        self._show_operators()
        self._fill_tables()
        self._show_run()

    def _query_options(self) -> list[tuple[str, str]]:
        # "" rather than None for all queries: ipywidgets 8 takes a None value for "nothing
        # selected" and the browser shows an empty dropdown
        return [("all queries", ALL)] + [(q, q) for q in self.model.workload.query_names]

    def _shown_query(self) -> str | None:
        res = self.model.result
        return self.query.value if res is not None and self.query.value in res.plan.workload.query_names else None

    def check(self) -> RunCheck | None:
        """Predicted (by the current plan) beside what the model's last run measured, when
        that run's plan is laid out as the current one; else ``None``."""
        res, counts = self.model.result, self.model.measured
        return None if res is None or counts is None else counts.check(res.plan)

    def _traces(self):
        res = self.model.result
        if res is None:
            return [], {"title": {"text": "no plan yet"}}
        return probe_tree_traces(res.plan, self._shown_query(), self.check())

    def _show_run(self) -> None:
        counts = self.model.measured
        self.replan_button.disabled = counts is None
        if counts is None:
            self.run_note.value = ""
            return
        check = self.check()
        if check is None:
            self.run_note.value = (f'<span style="font-size:14px;color:#555">the last run ({esc(counts.label)}) ran '
                                   "another plan than this one: the usual colours; run this plan to set its "
                                   "predictions beside measurements</span>")
            return
        less, more = ratio_color(0.2), ratio_color(5.0)
        pred, got = check.total("messages")
        self.run_note.value = (
            f'<span style="font-size:14px;color:#555">colour = measured / predicted in the run '
            f"<b>{esc(counts.label)}</b>: ■ fill = the step's probe messages"
            f"{' (its store’s: the engine counts per store)' if counts.per_store else ''}, label = the store's rows "
            f'(most at once); <b style="color:{less}">blue</b>: fewer than the model predicted, '
            f'<b style="color:{more}">red</b>: more, grey: as predicted · probe messages predicted {fmt(pred)}, '
            f"measured {fmt(got)} · hover a store for both numbers</span>")

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
        self._show_run()

    def replan(self):
        """Re-optimise the model's workload (with every edit made) on the join sizes the last run
        measured, as ``mqjoin optimize --stats-from`` does, and show the plan diff and cost and
        memory before and after; returns the :class:`~mqjoin.planning.measured.Replan`."""
        counts, before = self.model.measured, self.model.result
        if counts is None or before is None:
            return None
        try:
            sized = measured_workload(self.model.workload, counts.check().to_dict())
        except MqjoinError as e:
            self.replan_out.value = error_box(f"cannot re-plan on the run {counts.label}: {e}")
            return None
        if not self.model.edit(sized) or self.model.flush() is None:
            self.replan_out.value = error_box(self.model.error or "no plan")
            return None
        report = replan_report(before.plan, self.model.result.plan)
        self.replan_out.value = f'<pre style="font-size:14px">{esc(report.render())}</pre>'
        return report

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
        self.text.value = f'<i>{esc(who)}</i><pre style="font-size:14px">{esc(plan.render(edges))}</pre>'
