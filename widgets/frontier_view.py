"""The probe-cost / memory frontier in the Compare tab: the Pareto curve of policy
``budget`` from ``single`` (no extra replicas) to ``replicas``, with ``individual`` and ``shared``
marked; clicking a point of the curve (or a mark) shows that plan.

The axes are zoomed to the curve (:func:`zoom`): on TPC-H its eight plans differ by 10 % in
memory and 0.3 % in probe cost, while ``individual`` costs 60 % more of both, and an axis
stretched to it would put the eight points on two pixels.  A mark that would leave the curve
less than a third of an axis is an arrow at the edge, pointing its way, labelled with its
numbers (:data:`FAR_MARKS`).

>>> from mqjoin.widgets.model import as_workload
>>> from mqjoin.planning.frontier import frontier
>>> traces, layout = frontier_traces(frontier(as_workload("paper_fig3.yaml")))
>>> [t["name"] for t in traces]
['frontier', 'single', 'replicas', 'individual', 'shared']
>>> traces[0]["x"], traces[0]["y"]
([500.0, 600.0], [900.0, 600.0])
>>> layout["xaxis"]["range"], layout["annotations"]  # individual and shared keep the curve readable
([470.0, 830.0], [])
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planning.frontier import Frontier, frontier

from mqjoin.widgets._html import error_box, esc
from mqjoin.widgets.charts import PROJECTOR_FONT, projector
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure

MARK_STYLE = {"single": ("#636EFA", "circle-open"), "replicas": ("#00CC96", "circle-open"),
              "individual": ("#EF553B", "x"), "shared": ("#AB63FA", "diamond")}
#: where a mark's label stands: the curve's two ends on opposite sides, so they never overlap
MARK_TEXT = {"single": "top right", "replicas": "bottom left", "individual": "top center", "shared": "top center"}
#: the name of the annotations that stand for marks beyond the zoomed axes
FAR_MARKS = "far mark"
#: the least share of each axis the curve keeps: a mark that would squeeze it more is far
KEEP = 1 / 3


def _span(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.02 or 1.0
    return lo - pad, hi + pad


def zoom(xs: list[float], ys: list[float], marks: dict[str, tuple[float, float]]
         ) -> tuple[tuple[float, float], tuple[float, float], list[str]]:
    """Axis ranges around the curve's points and the marks near them, and the names of the
    marks beyond: marks join, nearest first, while the curve keeps at least :data:`KEEP` of
    each axis.

    >>> zoom([10, 20], [5, 4], {"a": (25, 4.5), "far": (60, 9)})
    ((8.5, 26.5), (3.9, 5.1), ['far'])
    """
    (x0, x1), (y0, y1) = (min(xs), max(xs)), (min(ys), max(ys))
    wx, wy = (x1 - x0) or abs(x1) * 0.05 or 1.0, (y1 - y0) or abs(y1) * 0.05 or 1.0

    def beyond(p: tuple[float, float]) -> float:  # how far outside the curve's box, in its widths
        return max(0.0, x0 - p[0], p[0] - x1) / wx + max(0.0, y0 - p[1], p[1] - y1) / wy

    near: list[tuple[float, float]] = []
    far = []
    for n in sorted(marks, key=lambda n: beyond(marks[n])):
        box = near + [marks[n]]
        sx = max([x1] + [p[0] for p in box]) - min([x0] + [p[0] for p in box])
        sy = max([y1] + [p[1] for p in box]) - min([y0] + [p[1] for p in box])
        if wx >= KEEP * sx * (1 - 1e-9) and wy >= KEEP * sy * (1 - 1e-9):
            near.append(marks[n])
        else:
            far.append(n)
    far.sort(key=list(marks).index)
    return (_span(xs + [p[0] for p in near]), _span(ys + [p[1] for p in near]), far)


def frontier_traces(f: Frontier) -> tuple[list[dict], dict]:
    """The curve (a step line through the Pareto plans) and one marker trace per marked plan."""
    pts = f.points
    traces = [{"type": "scatter", "mode": "lines+markers", "name": "frontier", "line": {"shape": "hv"},
               "x": [p.memory for p in pts], "y": [p.probe_cost for p in pts],
               "customdata": list(range(len(pts))), "marker": {"size": 9, "color": "#444"},
               "text": [f"extra replicas {fmt(p.replica_memory)}" for p in pts],
               "hovertemplate": "memory %{x:.4g}, probe cost %{y:.4g}<br>%{text}<extra></extra>"}]
    marks = {name: (r.memory, r.probe_cost) for name, r in f.marks.items()}
    xr, yr, far = zoom([p.memory for p in pts] or [m[0] for m in marks.values()],
                       [p.probe_cost for p in pts] or [m[1] for m in marks.values()], marks)
    arrows = []
    for name, (x, y) in marks.items():
        color, symbol = MARK_STYLE.get(name, ("#888", "circle"))
        traces.append({"type": "scatter", "mode": "markers+text", "name": name, "x": [x],
                       "y": [y], "text": [name], "textposition": MARK_TEXT.get(name, "top center"),
                       "marker": {"size": 16, "color": color, "symbol": symbol, "line": {"width": 2}},
                       "hovertemplate": f"{name}: memory %{{x:.4g}}, probe cost %{{y:.4g}}<extra></extra>"})
        if name in far:  # an arrow at the edge, pointing the mark's way
            cx, cy = min(max(x, xr[0]), xr[1]), min(max(y, yr[0]), yr[1])
            dx = 0 if cx == x else (1 if x > cx else -1)
            dy = 0 if cy == y else (1 if y > cy else -1)
            k = len(arrows)  # far marks at one edge: each label a row further in
            arrows.append({"x": cx, "y": cy, "ax": -70 * dx - (0 if dx else 40),
                           "ay": (50 + 34 * k) * (dy or 1),
                           "showarrow": True, "arrowhead": 2, "arrowsize": 1.5, "arrowwidth": 2, "arrowcolor": color,
                           "text": f"{name}: memory {fmt(x)}, probe cost {fmt(y)}",
                           "font": {"size": PROJECTOR_FONT, "color": color}, "name": FAR_MARKS,
                           "bgcolor": "rgba(255, 255, 255, 0.85)",
                           "xanchor": "right" if dx > 0 else "left" if dx < 0 else "center"})
    layout = projector({"height": 440, "margin": {"l": 90, "r": 30, "t": 60, "b": 60},
                        "title": {"text": "probe cost against memory: what each extra replica buys"},
                        "xaxis": {"title": {"text": "memory of all stores (tuples)"}, "range": list(xr)},
                        "yaxis": {"title": {"text": "probe cost (tuples / s)"}, "range": list(yr)},
                        "showlegend": False, "annotations": arrows})
    return traces, layout


class FrontierView(W.VBox):
    """A *Frontier* button, the curve, and the plan of the clicked point."""

    def __init__(self, model):
        self.model = model
        self.result: Frontier | None = None
        self.button = W.Button(description="Frontier", icon="line-chart",
                               tooltip="probe cost against memory, single → replicas (one solve per point)",
                               layout=W.Layout(width="auto", min_width="140px", flex="0 0 auto"))
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
        self.status.value = (f'<span style="font-size:14px">{len(f.points)} Pareto-optimal plans'
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
                           f'<pre style="font-size:14px">{esc(res.summary())}</pre>')
