"""The query graph view and workload editor.

Relations are nodes, classes are edges (hyperedges through a hub), one colour per query.
Beside the graph: a relation editor (rate, window, parallelism, the processing node its stream
arrives at — drawn as a dashed box around its relations, PMJoin; plus the parallelism of MIR
stores), a selectivity editor (one slider per class — every class that shares a pair of
attributes with it follows, docs/model.md §1) and the query list (add or replace a query in paper
notation or as equalities — also as the list shows it, ``q6: R(a), S(a)`` — remove one).
Every edit goes through the
:class:`~mqjoin.widgets.model.ExplorerModel`: the graph redraws at once, the plan is
re-optimised after the model's debounce, and the *what changed* line shows the plan diff.
An edit the engine rejects changes nothing: its message shows right under the editor whose
control made it (the relation, selectivity or query editor), and *what changed* says that
nothing did.  Errors no control of the view made (a re-optimisation that failed) show in the
view's error area at the bottom (``errors=False``: not at all, for a container that shows the
model's errors itself, as the Explorer's status line does).

A query is added on **Add / replace** or Enter in one of its boxes, not when a box loses focus
(its ``where`` may not be typed yet).

Click a relation in the graph to edit it; click a class label to edit its selectivity.

>>> view = QueryGraphView("paper_v2.yaml", debounce=0)
>>> view.class_.value
'R.a = S.a'
>>> view.selectivity.value = 0.5
>>> view.model.workload.query("q1").classes[0].selectivity
0.5
>>> view.query_name.value, view.query_text.value = "q3", "R(a), Nope(a)"
>>> view.add_button.click()
>>> "Nope" in view.query_error.value, view.error.value, view.model.workload.query_names
(True, '', ('q1', 'q2'))
>>> "nothing changed" in view.changes.value
True
>>> view.query_name.value, view.query_text.value = "", "q4: R(a), S(a)"  # the list's notation
>>> view.model.workload.query_names                 # typed, not yet added
('q1', 'q2')
>>> view.submit()                                   # Enter in the query box
>>> view.model.workload.query("q4"), view.query_name.value, view.query_error.value
(Query(q4: R(a), S(a)), 'q4', '')

A query with a filter (docs/model.md §7): its where clause and pass fractions beside the query.

>>> view.query_name.value = "q3"
>>> view.query_text.value, view.query_where.value, view.query_fractions.value = "R(a), S(a)", "R.a < 5", "R: 0.3"
>>> view.add_button.click()
>>> view.model.workload.query("q3")
Query(q3: R(a), S(a) WHERE R.a < 5)
>>> [t["hovertext"] for t in view.figure.data if t.name == "filters"]
[('q3: R.a < 5 (pass fraction f = 0.3)',)]
"""

from __future__ import annotations

from contextlib import contextmanager

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.model.queries import split_query_name

from mqjoin.widgets._controls import set_slider, typeable
from mqjoin.widgets._html import error_box, info_box
from mqjoin.widgets.figures import fmt, new_figure_widget, query_graph_traces, sync_figure
from mqjoin.model.statistics import selectivity_groups
from mqjoin.widgets.model import ModelView, render_fractions


def fresh_name(workload) -> str:
    """The first ``q1``, ``q2``, … that names no query of ``workload``.

    >>> from mqjoin.widgets.model import as_workload
    >>> fresh_name(as_workload("paper_v2.yaml"))
    'q3'
    """
    taken = set(workload.query_names)
    return next(f"q{k}" for k in range(1, len(taken) + 2) if f"q{k}" not in taken)


class QueryGraphView(ModelView, W.VBox):
    """Query graph + editor over an :class:`ExplorerModel` (or a workload: then it makes
    its own model with the keyword arguments, e.g. ``debounce=0``)."""

    def __init__(self, model, errors: bool = True, **model_kw):
        self.own_model(model, **model_kw)
        w = self.model.workload
        self.show_errors = errors
        self._syncing = False
        self._highlight: str | None = None
        self.figure = new_figure_widget(*query_graph_traces(w))

        # relation editor
        self.relation = W.Dropdown(options=[r.name for r in w.relations], description="relation")
        self.rate = W.FloatLogSlider(value=1.0, base=10, min=-3, max=7, step=0.02, description="rate /s",
                                     readout_format=".4g", continuous_update=False)
        self.window = W.BoundedFloatText(value=1.0, min=0.0, max=1e12, description="window s",
                                         continuous_update=False, layout=W.Layout(width="230px"))
        self.unbounded = W.Checkbox(value=True, description="unbounded window", indent=False)
        self.parallelism = W.BoundedIntText(value=1, min=1, max=4096, description="parallelism",
                                            continuous_update=False)
        self.node = W.Text(description="node", placeholder="its own", continuous_update=False,
                           layout=W.Layout(width="230px"), tooltip="the processing node of the stream (PMJoin)")
        self.mir_parallelism = W.BoundedIntText(value=1, min=1, max=4096, description="MIR stores",
                                                continuous_update=False,
                                                tooltip="parallelism of every MIR store (defaults.parallelism)")
        # selectivity editor
        self.class_ = W.Dropdown(description="class", layout=W.Layout(width="auto"))
        self.selectivity = W.FloatLogSlider(value=0.01, base=10, min=-9, max=0, step=0.02,
                                            description="selectivity", readout_format=".3g",
                                            continuous_update=False)
        # queries
        self.queries = W.Select(description="queries", rows=5, layout=W.Layout(width="auto"))
        self.remove_button = W.Button(description="Remove query", icon="trash", button_style="warning")
        self.query_name = W.Text(description="name", placeholder=fresh_name(self.model.workload),
                                 layout=W.Layout(width="160px"), tooltip="empty: the fresh name shown")
        # the boxes send as typed: a query is added on Add / replace or Enter (see submit), and
        # Enter must find the value typed already in the kernel
        self.query_text = W.Text(description="query", placeholder="R(a), S(a,b), T(b)   or   R.a = S.a AND S.b = T.b",
                                 layout=W.Layout(width="auto", flex="1"))
        self.query_where = W.Text(description="where", placeholder="optional filter: R.x < 10 AND S.y IN (1, 2)",
                                  layout=W.Layout(width="auto", flex="1"))
        self.query_fractions = W.Text(description="pass f", placeholder="R: 0.2, S: 0.5",
                                      layout=W.Layout(width="220px"),
                                      tooltip="pass fraction of the filter on each relation (docs/model.md §7)")
        self.add_button = W.Button(description="Add / replace", icon="plus", button_style="primary")
        #: the errors of each editor's controls, shown under it
        self.relation_error, self.selectivity_error, self.query_error = W.HTML(""), W.HTML(""), W.HTML("")
        self._error_at: W.HTML | None = None  # the area of the editor whose edit is under way
        self.error = W.HTML("")
        self.changes = W.HTML("")
        self.status = W.HTML("")

        self.relation.observe(lambda _: self._sync_relation(), "value")
        self.rate.observe(self._on_rate, "value")
        self.window.observe(self._on_window, "value")
        self.unbounded.observe(self._on_window, "value")
        self.parallelism.observe(self._on_parallelism, "value")
        self.node.observe(self._on_node, "value")
        self.mir_parallelism.observe(self._on_mir_parallelism, "value")
        self.class_.observe(lambda _: self._sync_class(), "value")
        self.selectivity.observe(self._on_selectivity, "value")
        self.queries.observe(self._on_query_selected, "value")
        self.remove_button.on_click(lambda _: self.remove_selected())
        self.add_button.on_click(lambda _: self.add_from_inputs())
        for box in (self.query_name, self.query_text, self.query_where, self.query_fractions):
            box.on_msg(self._on_box_message)  # Enter in a query box adds the query

        self.model.observe(self._on_workload, "workload")
        self.model.observe(self._on_result, "result")
        self.model.observe(self._on_error, "error")
        self.model.observe(self._on_busy, "busy")

        self.rate.layout.width = self.selectivity.layout.width = "310px"
        relation_box = W.VBox([W.HTML("<b>relation</b>"), self.relation, typeable(self.rate, decades=2),
                               W.HBox([self.window, self.unbounded], layout=W.Layout(overflow="visible")),
                               self.parallelism, self.node, self.mir_parallelism, self.relation_error])
        class_box = W.VBox([W.HTML("<b>selectivity</b>"), self.class_, typeable(self.selectivity, decades=2),
                            self.selectivity_error])
        query_box = W.VBox([W.HTML("<b>queries</b>"), self.queries, self.remove_button,
                            W.HBox([self.query_name, self.query_text, self.add_button]),
                            W.HBox([self.query_where, self.query_fractions]), self.query_error])
        editors = W.VBox([relation_box, class_box], layout=W.Layout(width="460px", overflow="visible"))
        graph_box = W.Box([self.figure], layout=W.Layout(flex="1 1 0%", min_width="420px"))
        super().__init__([W.HBox([graph_box, editors]), query_box, self.error, self.status, self.changes])
        self._sync_controls()
        self._wire_clicks()
        self._on_result({"new": self.model.result, "old": None})

    # -- model → view ---------------------------------------------------------------------------

    def _on_workload(self, change) -> None:
        self.redraw()
        self._sync_controls()

    def redraw(self) -> None:
        """Redraw the graph from the model's workload."""
        sync_figure(self.figure, *query_graph_traces(self.model.workload, self._highlight))
        self._wire_clicks()

    def _on_result(self, change) -> None:
        res = change["new"]
        if res is None:
            return
        d = self.model.diff
        if d is None:
            text = f"plan: probe cost {fmt(res.probe_cost)}, memory {fmt(res.memory)} ({res.mode}/{res.partitioning})"
        else:
            text = "what changed — " + d.summary()
        self.changes.value = info_box(text)
        self.status.value = ""

    def _on_error(self, change) -> None:
        message = change["new"]
        if self._error_at is not None:  # an edit of this view's: said under its editor
            self._show_error(self._error_at, message)
        elif not message:
            self._show_error(None, "")
        if self.show_errors and (self._error_at is None or not message):
            self.error.value = error_box("" if self._error_at is not None else message)

    @property
    def editing(self) -> bool:
        """Whether an edit made by one of this view's controls is under way (its error, if any,
        is shown beside the control)."""
        return self._error_at is not None

    @contextmanager
    def _edit_at(self, area: W.HTML):
        """Within the block, the model's errors are the edit's: shown in ``area``."""
        outer, self._error_at = self._error_at, area
        try:
            yield
        finally:
            self._error_at = outer

    def _show_error(self, area: W.HTML | None, message: str) -> None:
        """``message`` under the editor of ``area`` (the others' cleared); an error also says
        that the plan did not change."""
        for a in (self.relation_error, self.selectivity_error, self.query_error):
            a.value = error_box(message) if a is area else ""
        if message:
            self.changes.value = info_box("what changed — nothing changed: the edit was not applied")

    def _on_busy(self, change) -> None:
        self.status.value = "<i>optimizing …</i>" if change["new"] else ""

    def _sync_controls(self) -> None:
        w = self.model.workload
        self._syncing = True
        try:
            names = [r.name for r in w.relations]
            if list(self.relation.options) != names:
                keep = self.relation.value if self.relation.value in names else names[0]
                self.relation.options = names
                self.relation.value = keep
            self.mir_parallelism.value = w.defaults.parallelism
            groups = [g.label for g in selectivity_groups(w)]
            if list(self.class_.options) != groups:
                keep = self.class_.value if self.class_.value in groups else (groups[0] if groups else None)
                self.class_.options = groups
                self.class_.value = keep
            opts = [(f"{q.name}: {q.text}" + (f" WHERE {q.where}" if q.filters else ""), q.name) for q in w.queries]
            if list(self.queries.options) != opts:
                keep = self.queries.value if self.queries.value in w.query_names else None
                self.queries.options = opts
                self.queries.value = keep
            self.remove_button.disabled = self.queries.value is None
            self.query_name.placeholder = fresh_name(w)
        finally:
            self._syncing = False
        self._sync_relation()
        self._sync_class()

    def _sync_relation(self) -> None:
        r = self.model.workload.relation(self.relation.value)
        self._syncing = True
        try:
            set_slider(self.rate, r.rate)
            self.unbounded.value = r.window is None
            self.window.disabled = r.window is None
            if r.window is not None:
                self.window.value = r.window
            self.parallelism.value = r.parallelism
            self.node.value = r.node or ""
        finally:
            self._syncing = False

    def _sync_class(self) -> None:
        g = next((g for g in selectivity_groups(self.model.workload) if g.label == self.class_.value), None)
        if g is None:
            return
        self._syncing = True
        try:
            set_slider(self.selectivity, g.selectivity)
            self.selectivity.tooltip = f"queries: {', '.join(g.queries)}"
        finally:
            self._syncing = False

    # -- view → model ---------------------------------------------------------------------------

    def _after(self, area: W.HTML, edit, *args) -> None:
        """Make the model edit ``edit(*args)``, its error shown in ``area``."""
        with self._edit_at(area):
            ok = edit(*args)
        if not ok:  # the model kept its workload: show its values again
            self._sync_relation()
            self._sync_class()

    def _on_rate(self, change) -> None:
        if not self._syncing:
            self._after(self.relation_error, self.model.set_rate, self.relation.value, float(change["new"]))

    def _on_window(self, change) -> None:
        if self._syncing:
            return
        self.window.disabled = self.unbounded.value
        value = None if self.unbounded.value else float(self.window.value)
        self._after(self.relation_error, self.model.set_window, self.relation.value, value)

    def _on_parallelism(self, change) -> None:
        if not self._syncing:
            self._after(self.relation_error, self.model.set_parallelism, self.relation.value, int(change["new"]))

    def _on_node(self, change) -> None:
        if not self._syncing:
            self._after(self.relation_error, self.model.set_node, self.relation.value, change["new"].strip())

    def _on_mir_parallelism(self, change) -> None:
        if not self._syncing:
            self._after(self.relation_error, self.model.set_mir_parallelism, int(change["new"]))

    def _on_selectivity(self, change) -> None:
        if not self._syncing and self.class_.value:
            self._after(self.selectivity_error, self.model.set_selectivity, self.class_.value, float(change["new"]))

    def _on_query_selected(self, change) -> None:
        if self._syncing:
            return
        name = change["new"]
        self.remove_button.disabled = name is None
        self._highlight = name
        if name is not None:
            q = self.model.workload.query(name)
            self._syncing = True
            try:
                self.query_name.value = q.name
                self.query_text.value = q.text
                self.query_where.value = q.where
                self.query_fractions.value = render_fractions(q)
            finally:
                self._syncing = False
        self.redraw()

    def _on_box_message(self, box, content, buffers) -> None:
        if content.get("event") == "submit":  # Enter (the page sends the value typed before)
            self.submit()

    def submit(self) -> None:
        """What Enter in a query box does: add the query typed, if any."""
        if self.query_text.value.strip():
            self.add_from_inputs()

    def add_from_inputs(self) -> bool:
        """Add (or replace) the query typed into the name and query boxes (an empty name: the
        fresh name shown as the placeholder); an error shows under the query boxes."""
        if self._syncing:
            return False
        try:
            name, text = split_query_name(self.query_text.value, self.query_name.value.strip() or None)
        except MqjoinError as e:
            self._show_error(self.query_error, str(e))
            return False
        name = name or self.query_name.placeholder
        with self._edit_at(self.query_error):
            ok = self.model.add_query(name, text, self.query_where.value, self.query_fractions.value)
        if ok:
            self._syncing = True
            try:
                self.query_name.value = name
                self.queries.value = name
                self._highlight = self.queries.value
            finally:
                self._syncing = False
            self.remove_button.disabled = False
            self.redraw()
        return ok

    def remove_selected(self) -> bool:
        """Remove the query selected in the list."""
        name = self.queries.value
        if name is None:
            self._show_error(self.query_error, "select a query to remove")
            return False
        with self._edit_at(self.query_error):
            ok = self.model.remove_query(name)
        if ok:
            self._highlight = None
            self.redraw()
        return ok

    # -- clicks on the figure -------------------------------------------------------------------

    def _wire_clicks(self) -> None:
        # on_click replaces a trace's handler (append=False): safe to repeat after every redraw
        for t in self.figure.data:
            if t.name == "relations":
                t.on_click(self._clicked_relation, append=False)
            elif t.name == "classes":
                t.on_click(self._clicked_class, append=False)

    def _clicked_relation(self, trace, points, state) -> None:
        for i in points.point_inds:
            self.relation.value = trace.customdata[i]

    def _clicked_class(self, trace, points, state) -> None:
        for i in points.point_inds:
            if trace.customdata[i] in self.class_.options:
                self.class_.value = trace.customdata[i]
