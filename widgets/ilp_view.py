"""The ILP view: size, solve time and status of the model, the chosen probe order per
(query, start relation), the objective broken down by query and by step (shared steps
marked), and the model itself in LP format on demand.

The breakdown is :mod:`mqjoin.planning.attribution`'s (it sums to the plan's probe cost).
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.planning.attribution import cost_by_query, cost_by_step, order_costs
from mqjoin.planning.optimizer import OptimizeResult

from mqjoin.widgets._html import esc, table
from mqjoin.widgets.charts import projector
from mqjoin.widgets.figures import fmt, new_figure_widget, query_colors, sync_figure
from mqjoin.widgets.model import ModelView


def lp_model_text(result: OptimizeResult, limit: int = 400_000) -> str:
    """The ILP behind a result in LP format (one model per query in ``individual`` and
    ``shared`` mode, as the optimiser solves them), cut after ``limit`` characters."""
    from mqjoin.planning.candidates import enumerate_candidates
    from mqjoin.planning.ilp import build_model, lp_text

    w = result.workload
    parts = []
    if result.mode == "mqo":
        parts.append(lp_text(build_model(enumerate_candidates(w, mirs=result.mirs), result.partitioning,
                                         result.mir_budget)))
    else:
        for q in w.query_names:
            mdl = build_model(enumerate_candidates(w.restricted_to([q]), mirs=result.mirs), result.partitioning,
                              result.mir_budget)
            parts.append(f"\\ ---- model of query {q} alone ({result.mode} mode) ----\n" + lp_text(mdl))
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit] + f"\n\\ … cut after {limit:,} of {len(text):,} characters (export it with " \
                              "`mqjoin optimize --export model.lp`)"
    return text


# --------------------------------------------------------------------------------------------
# the view
# --------------------------------------------------------------------------------------------


def progress_traces(progress) -> tuple[list[dict], dict]:
    """Incumbent and bound over time of an anytime solve (``ExplorerModel.progress``).

    >>> from mqjoin.widgets.model import as_workload
    >>> from mqjoin.planning.anytime import progress_of
    >>> from mqjoin.planning.optimizer import optimize
    >>> traces, _ = progress_traces([progress_of(optimize(as_workload("paper_v2.yaml")), 0.2)])
    >>> [(t["name"], t["x"], t["y"]) for t in traces]
    [('incumbent', [0.2], [700.0]), ('bound', [0.2], [700.0])]

    The finer reports from inside a solve (``anytime.improve(on_report=…)``, a
    :class:`~mqjoin.planning.ilp.monitor.Report` each) draw the same way:

    >>> from mqjoin.planning.ilp.monitor import Report
    >>> [t["y"] for t in progress_traces([Report(0.1, 900.0, 0.0), Report(0.4, 700.0, 650.0)])[0]]
    [[900.0, 700.0], [0.0, 650.0]]
    """
    traces = [{"type": "scatter", "mode": "lines+markers", "name": name, "line": {"shape": "hv", "dash": dash},
               "x": [p.seconds for p in progress], "y": [getattr(p, name) for p in progress],
               "marker": {"color": color},
               "hovertemplate": f"{name} %{{y:.4g}} after %{{x:.2f}} s<extra></extra>"}
              for name, color, dash in (("incumbent", "#1565C0", "solid"), ("bound", "#E65100", "dot"))]
    layout = projector({"height": 280, "margin": {"l": 80, "r": 20, "t": 40, "b": 50},
                        "title": {"text": "anytime solve: best plan (incumbent) and proven bound"},
                        "xaxis": {"title": {"text": "seconds"}}, "yaxis": {"title": {"text": "probe cost"}},
                        "legend": {"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"}})
    return traces, layout


class IlpView(ModelView, W.VBox):
    """ILP statistics, chosen probe orders, objective breakdown and LP text of a model."""

    def __init__(self, model, **model_kw):
        self.own_model(model, **model_kw)
        self.stats = W.HTML("")
        self.orders = W.HTML("")
        self.steps = W.HTML("")
        self.total = W.HTML("")
        self.by_query = new_figure_widget(*self._by_query_traces())
        self.lp_button = W.Button(description="Show LP model", icon="file-text")
        self.lp_text = W.Textarea(value="", placeholder="press the button to generate the model text",
                                  layout=W.Layout(width="100%", height="360px"))
        self.lp_status = W.HTML("")
        self.lp = W.Accordion(children=[W.VBox([W.HBox([self.lp_button, self.lp_status]), self.lp_text])],
                              selected_index=None)
        self.lp.set_title(0, "model (LP format)")
        self.lp_button.on_click(lambda _: self.show_lp())
        self.model.observe(lambda _: self.redraw(), "result")
        self.anytime_status = W.HTML("")
        self.anytime = new_figure_widget([], {"height": 40})
        #: the anytime chart's box: hidden unless a solve was cut short (an empty figure draws bare axes)
        self.anytime_box = W.Box([self.anytime], layout=W.Layout(display="none"))
        self.model.observe(lambda _: self.redraw_progress(), ["progress", "improving"])
        super().__init__([self.stats, self.anytime_status, self.anytime_box, W.HTML("<b>objective by query</b>"),
                          self.total, self.by_query, W.HTML("<b>chosen probe orders</b>"), self.orders,
                          W.HTML("<b>objective by step</b> (★ shared: paid once for every probe order that uses it)"),
                          self.steps, self.lp])
        self.redraw()
        self.redraw_progress()

    def _by_query_traces(self):
        res = self.model.result
        if res is None:
            return [], {}
        by = cost_by_query(res.plan)
        qs = list(by)
        colors = query_colors(res.workload)
        # colour = the query (as everywhere); "shared" = a hatched pattern, not another colour;
        # the legend shows neutral swatches of the two channels (a bar's swatch is its first colour)
        qc = [colors.get(q, "#888") for q in qs]
        traces = [
            {"type": "bar", "name": "own steps", "orientation": "h", "y": qs, "x": [by[q]["own"] for q in qs],
             "marker": {"color": qc}, "showlegend": False,
             "hovertemplate": "%{y}: own steps %{x:,.4g}<extra></extra>"},
            {"type": "bar", "name": "share of shared steps", "orientation": "h", "y": qs,
             "x": [by[q]["shared"] for q in qs], "showlegend": False,
             "marker": {"color": qc, "opacity": 0.6, "pattern": {"shape": "/", "fgcolor": "#222", "solidity": 0.3}},
             "hovertemplate": "%{y}: share of shared steps %{x:,.4g}<extra></extra>"},
            {"type": "bar", "name": "own steps (solid, the query's colour)", "orientation": "h", "y": [None],
             "x": [None], "marker": {"color": "#9E9E9E"}, "hoverinfo": "skip"},
            {"type": "bar", "name": "share of shared steps (hatched)", "orientation": "h", "y": [None], "x": [None],
             "marker": {"color": "#9E9E9E", "opacity": 0.6,
                        "pattern": {"shape": "/", "fgcolor": "#222", "solidity": 0.3}},
             "hoverinfo": "skip"},
        ]
        layout = projector({"barmode": "stack", "height": 140 + 34 * len(qs),
                            "margin": {"l": 80, "r": 20, "t": 10, "b": 40}, "yaxis": {"autorange": "reversed"},
                            "xaxis": {"title": {"text": "probe cost (tuples / s)"}},
                            "legend": {"orientation": "h", "y": -0.3}})
        return traces, layout

    def redraw(self) -> None:
        """Refill every table and the chart from the model's current result."""
        res = self.model.result
        if res is None:
            return
        i = res.ilp
        gap = "" if i.status == "optimal" else f" (gap {i.gap:.2%})"
        self.stats.value = table(
            ["solver", "status", "variables", "binaries", "constraints", "components", "build s", "solve s",
             "objective", "probe cost", "memory"],
            [[i.solver, i.status + gap, i.variables, i.binaries, i.constraints, i.components,
              f"{i.build_seconds:.3f}", f"{i.solve_seconds:.3f}", fmt(i.objective), fmt(res.probe_cost),
              fmt(res.memory)]])
        by = cost_by_query(res.plan)
        total = sum(v["total"] for v in by.values())
        self.total.value = (f'<span style="font-size:14px">{res.mode}/{res.partitioning}: '
                            f"Σ by query = {fmt(total)} = probe cost {fmt(res.probe_cost)}"
                            f"{'' if res.mode != 'mqo' else f' = ILP objective {fmt(i.objective)}'}</span>")
        sync_figure(self.by_query, *self._by_query_traces())
        ocs = order_costs(res.plan)
        self.orders.value = table(
            ["query", "start", "probe order", "steps", "cost if alone", "shared steps"],
            [[o.query, o.start, o.order, " ".join(o.steps), fmt(o.cost), " ".join(o.shared_steps) or "—"]
             for o in ocs], marked=[bool(o.shared_steps) for o in ocs])
        steps = sorted(cost_by_step(res.plan), key=lambda s: -s.cost)
        self.steps.value = table(
            ["", "edge", "tree", "step", "store", "χ", "cost", "used by"],
            [["★" if s.shared else "", s.edge, s.root, s.step, s.store, s.chi, fmt(s.cost), ", ".join(s.owners)]
             for s in steps], marked=[s.shared for s in steps])
        self.lp_text.value = ""
        self.lp_status.value = ""

    def redraw_progress(self) -> None:
        """The anytime line and chart: shown once a solve was not proven optimal in the
        interactive budget, updated after every background round."""
        progress = getattr(self.model, "progress", ())
        if not progress or (len(progress) == 1 and progress[0].status == "optimal"):
            self.anytime_status.value = ""
            self.anytime_box.layout.display = "none"  # an empty figure would draw bare axes (−1 … 6)
            sync_figure(self.anytime, [], {"height": 40})
            return
        self.anytime_box.layout.display = None
        last = progress[-1]
        state = "improving in the background …" if self.model.improving else "done"
        self.anytime_status.value = (f'<span style="font-size:14px">best plan so far: {esc(last.describe())}'
                                     f" — {state}</span>")
        sync_figure(self.anytime, *progress_traces(progress))

    def show_lp(self) -> str:
        """Generate the LP text of the current model into the text area (and return it)."""
        res = self.model.result
        if res is None:
            return ""
        self.lp_status.value = "<i>building …</i>"
        text = lp_model_text(res)
        self.lp_text.value = text
        self.lp_status.value = f'<span style="font-size:14px">{len(text.splitlines()):,} lines — ' \
                               f"{esc(res.mode)}/{esc(res.partitioning)}</span>"
        self.lp.selected_index = 0
        return text
