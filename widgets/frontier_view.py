"""The probe-cost / memory frontier in the Compare tab: the Pareto curve of policy
``budget`` from ``single`` (no extra replicas) to ``replicas``, with ``individual`` and ``shared``
marked; clicking a point of the curve (or a mark) shows that plan.

>>> from mqjoin.widgets.model import as_workload
>>> from mqjoin.planning.frontier import frontier
>>> traces, layout = frontier_traces(frontier(as_workload("paper_fig3.yaml")))
>>> [t["name"] for t in traces]
['frontier', 'single', 'replicas', 'individual', 'shared']
>>> traces[0]["x"], traces[0]["y"]
([500.0, 600.0], [900.0, 600.0])
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planning.frontier import Frontier, frontier

from mqjoin.widgets._html import error_box, esc
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure

MARK_STYLE = {"single": ("#636EFA", "circle-open"), "replicas": ("#00CC96", "circle-open"),
              "individual": ("#EF553B", "x"), "shared": ("#AB63FA", "diamond")}


def frontier_traces(f: Frontier) -> tuple[list[dict], dict]:
    """The curve (a step line through the Pareto plans) and one marker trace per marked plan."""
    pts = f.points
    traces = [{"type": "scatter", "mode": "lines+markers", "name": "frontier", "line": {"shape": "hv"},
               "x": [p.memory for p in pts], "y": [p.probe_cost for p in pts],
               "customdata": list(range(len(pts))), "marker": {"size": 9, "color": "#444"},
               "text": [f"extra replicas {fmt(p.replica_memory)}" for p in pts],
               "hovertemplate": "memory %{x:.4g}, probe cost %{y:.4g}<br>%{text}<extra></extra>"}]
    for name, r in f.marks.items():
        color, symbol = MARK_STYLE.get(name, ("#888", "circle"))
        traces.append({"type": "scatter", "mode": "markers+text", "name": name, "x": [r.memory],
                       "y": [r.probe_cost], "text": [name], "textposition": "top center",
                       "marker": {"size": 14, "color": color, "symbol": symbol, "line": {"width": 2}},
                       "hovertemplate": f"{name}: memory %{{x:.4g}}, probe cost %{{y:.4g}}<extra></extra>"})
    layout = {"height": 360, "margin": {"l": 60, "r": 10, "t": 50, "b": 45},
              "title": {"text": "probe cost against memory: what each extra replica buys"},
              "xaxis": {"title": {"text": "memory of all stores (tuples)"}},
              "yaxis": {"title": {"text": "probe cost (tuples / s)"}}, "showlegend": False}
    return traces, layout


class FrontierView(W.VBox):
    """A *Frontier* button, the curve, and the plan of the clicked point."""

    def __init__(self, model):
        self.model = model
        self.result: Frontier | None = None
        self.button = W.Button(description="Frontier", icon="line-chart",
                               tooltip="probe cost against memory, single → replicas (one solve per point)")
        self.status = W.HTML("")
        self.error = W.HTML("")
        self.figure = new_figure_widget([], {"height": 360})
        self.plan = W.HTML("")
        self.selected: str | int | None = None
        self.button.on_click(lambda _: self.compute())
        model.observe(self._on_change, ["result", "options"])
        super().__init__([W.HBox([self.button, self.status]), self.error, self.figure, self.plan])

    def compute(self) -> Frontier | None:
        """Compute the frontier of the model's workload and draw it."""
        m = self.model
        self.status.value = "<i>computing the frontier …</i>"
        try:
            self.result = frontier(m.workload, mirs=m.mirs, solver=m.solver, time_limit=m.time_limit)
        except MqjoinError as e:
            self.error.value = error_box(str(e))
            self.status.value = ""
            return None
        self.error.value = ""
        sync_figure(self.figure, *frontier_traces(self.result))
        for t in self.figure.data:  # on_click replaces a handler (append=False): safe after redraws
            t.on_click(self._clicked, append=False)
        f = self.result
        self.status.value = (f'<span style="font-size:12px">{len(f.points)} Pareto-optimal plans'
                             f"{'' if f.complete else ' (walk cut short)'}; click a point to see its plan</span>")
        self.select(len(f.points) - 1)
        return f

    def _on_change(self, change) -> None:
        if self.result is not None:
            self.status.value = "<i>the workload or options changed — press Frontier to update</i>"

    def _clicked(self, trace, points, state) -> None:
        for i in points.point_inds:
            self.select(trace.customdata[i] if trace.name == "frontier" else trace.name)

    def select(self, which: str | int) -> None:
        """Show a plan: a frontier point by index, or a mark by name (``"individual"``, …)."""
        f = self.result
        if f is None:
            return
        if isinstance(which, str):
            res, head = f.marks[which], f"{which}"
        else:
            p = f.points[which]
            res = p.result
            budget = "unbounded" if p.budget is None else fmt(p.budget)
            head = f"frontier point {which + 1}/{len(f.points)} (replica budget {budget})"
        self.selected = which
        self.plan.value = (f"<b>{esc(head)}</b>: probe cost {fmt(res.probe_cost)}, memory {fmt(res.memory)}"
                           f'<pre style="font-size:12px">{esc(res.summary())}</pre>')
