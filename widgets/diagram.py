"""The plan-diagram view: two statistics swept over a grid (:mod:`mqjoin.planning.diagram`),
cells coloured by the optimal plan, the cost surface beside it, and, optionally, the saving
against ``individual`` optimisation.  The default grid is 8 × 8; a progress bar follows long
sweeps; a click on a region shows its plan and the diff to its neighbour.
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planning.diagram import PlanDiagram, SweepParam, default_range, log_grid, plan_diagram, sweep_parameters

from mqjoin.widgets._controls import typeable
from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.figures import PALETTE, fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView

#: probe orders listed per plan in the legend table (the rest: click its region)
MAX_APART = 4


def region_detail(d: PlanDiagram, ix: int, iy: int) -> str:
    """What a click on cell ``(ix, iy)`` shows: its plan's probe orders and the diff to the
    nearest cell with another plan (the region's neighbour), as HTML.

    >>> from types import SimpleNamespace as N
    >>> d = PlanDiagram(N(values=(1, 2), label="x"), N(values=(1,), label="y"), "mqo", "single",
    ...                 ((("q", "R", "R » S[a]"),), (("q", "R", "R » S[b]"),)), ((0, 1),), ((1.0, 2.0),), ((1.0, 1.0),))
    >>> print(region_detail(d, 0, 0).replace("&gt;", ">"))  # doctest: +NORMALIZE_WHITESPACE
    <b>P1</b> at x = 1, y = 1: probe cost 1, memory 1<br>q from R: R » S[a]<br><b>its neighbour P2</b> (x = 2, y = 1): −
    q from R: R » S[a]<br>+ q from R: R » S[b]
    """
    k = d.plan_index[iy][ix]
    names = d.names()
    head = (f"<b>{names[k]}</b> at {esc(d.x.label)} = {d.x.values[ix]:g}, {esc(d.y.label)} = {d.y.values[iy]:g}: "
            f"probe cost {fmt(d.cost[iy][ix])}, memory {fmt(d.memory[iy][ix])}")
    orders = "<br>".join(esc(f"{q} from {s}: {o}") for q, s, o in d.plans[k])
    cells = [(abs(jx - ix) + abs(jy - iy), jy, jx) for jy, r in enumerate(d.plan_index) for jx, v in enumerate(r)
             if v != k]
    if not cells:
        return f"{head}<br>{orders}<br><i>the only plan of the diagram</i>"
    _, jy, jx = min(cells)
    other = d.plan_index[jy][jx]
    mine, theirs = set(d.plans[k]), set(d.plans[other])
    diff = [f"− {q} from {s}: {o}" for q, s, o in d.plans[k] if (q, s, o) not in theirs]
    diff += [f"+ {q} from {s}: {o}" for q, s, o in d.plans[other] if (q, s, o) not in mine]
    return (f"{head}<br>{orders}<br><b>its neighbour {names[other]}</b> ({esc(d.x.label)} = {d.x.values[jx]:g}, "
            f"{esc(d.y.label)} = {d.y.values[jy]:g}): " + "<br>".join(esc(x) for x in diff))


def _ticks(values: tuple[float, ...]) -> list[str]:
    for digits in (3, 4, 6, 10):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(v) for v in values]


def plan_color(k: int) -> str:
    return PALETTE[k % len(PALETTE)]


def plan_diagram_traces(d: PlanDiagram) -> tuple[list[dict], dict]:
    """Heatmaps: the optimal plan per cell, the cost surface and (with a baseline) the saving."""
    xs, ys = _ticks(d.x.values), _ticks(d.y.values)
    k = max(d.distinct, 1)
    scale = []
    for i in range(k):
        scale += [[i / k, plan_color(i)], [(i + 1) / k, plan_color(i)]]
    names = d.names()
    hover = [[f"<b>{names[d.plan_index[iy][ix]]}</b><br>{esc(d.x.label)} = {xs[ix]}<br>{esc(d.y.label)} = {ys[iy]}"
              f"<br>probe cost {fmt(d.cost[iy][ix])}<br>memory {fmt(d.memory[iy][ix])}"
              + (f"<br>individual {fmt(d.baseline_cost[iy][ix])}" if d.baseline_cost else "")
              for ix in range(len(xs))] for iy in range(len(ys))]
    panels = 3 if d.baseline_cost is not None else 2
    gap = 0.14  # room for each panel's colour bar before the next panel
    width = (1 - gap * (panels - 1)) / panels
    dom = [[round(i * (width + gap), 4), round(i * (width + gap) + width, 4)] for i in range(panels)]
    cbx = [dm[1] + 0.005 for dm in dom]
    traces = [
        {"type": "heatmap", "name": "optimal plan", "x": xs, "y": ys, "z": [list(r) for r in d.plan_index],
         "zmin": -0.5, "zmax": k - 0.5, "colorscale": scale, "text": hover, "hoverinfo": "text",
         "xgap": 1, "ygap": 1, "xaxis": "x", "yaxis": "y",
         "colorbar": {"tickvals": list(range(k)), "ticktext": names or ["—"], "x": cbx[0], "len": 0.9,
                      "thickness": 10, "title": {"text": "plan"}}},
        {"type": "heatmap", "name": "probe cost", "x": xs, "y": ys, "z": [list(r) for r in d.cost],
         "colorscale": "Viridis", "text": hover, "hoverinfo": "text", "xaxis": "x2", "yaxis": "y2",
         "colorbar": {"x": cbx[1], "len": 0.9, "thickness": 10, "title": {"text": "cost"}}},
    ]
    if d.baseline_cost is not None:
        sav = d.saving() or []
        traces.append({"type": "heatmap", "name": "saving vs individual", "x": xs, "y": ys,
                       "z": [[round(100 * v, 3) for v in r] for r in sav], "colorscale": "RdBu", "zmid": 0,
                       "text": hover, "hoverinfo": "text", "xaxis": "x3", "yaxis": "y3",
                       "colorbar": {"x": cbx[2], "len": 0.9, "thickness": 10, "title": {"text": "% saved"}}})
    titles = ["optimal plan", f"probe cost ({d.mode}/{d.partitioning})", "saving vs individual (%)"]
    # 14 px text (a projector at 1920×1080): tick labels, axis and panel titles, colour bars
    layout: dict = {"height": 500, "margin": {"l": 80, "r": 40, "t": 70, "b": 90}, "font": {"size": 14},
                    "title": {"text": f"plan diagram: {d.distinct} distinct optimal plan"
                                      f"{'s' if d.distinct != 1 else ''} on a {len(xs)}×{len(ys)} grid"},
                    "annotations": []}
    for i in range(panels):
        sfx = "" if i == 0 else str(i + 1)
        # every panel has the same axes: their titles and y ticks once, on the first panel
        layout["xaxis" + sfx] = {"domain": dom[i], "title": {"text": d.x.label if i == 0 else "same x"},
                                 "type": "category", "anchor": "y" + sfx}
        layout["yaxis" + sfx] = {"title": {"text": d.y.label if i == 0 else ""},
                                 "type": "category", "anchor": "x" + sfx, "showticklabels": i == 0}
        layout["annotations"].append({"text": titles[i], "x": (dom[i][0] + dom[i][1]) / 2, "y": 1.04,
                                      "xref": "paper", "yref": "paper", "showarrow": False,
                                      "xanchor": "center", "yanchor": "bottom"})
    return traces, layout


def plan_diagram_figure(d: PlanDiagram):
    """A plan diagram as a plotly figure."""
    from mqjoin.widgets.figures import to_figure

    return to_figure(*plan_diagram_traces(d))


# --------------------------------------------------------------------------------------------
# the view
# --------------------------------------------------------------------------------------------


class PlanDiagramView(ModelView, W.VBox):
    """Choose two statistics and their ranges, run the sweep, read the plan diagram."""

    def __init__(self, model, grid: int = 8, **model_kw):
        self.own_model(model, **model_kw)
        self.diagram: PlanDiagram | None = None
        wide = {"description_width": "30px"}
        self.x_param = W.Dropdown(description="x", layout=W.Layout(width="520px"), style=wide)
        self.y_param = W.Dropdown(description="y", layout=W.Layout(width="520px"), style=wide)
        bound = {"description_width": "44px"}  # "from" in full
        self.x_lo = W.FloatText(description="from", layout=W.Layout(width="220px"), style=bound)
        self.x_hi = W.FloatText(description="to", layout=W.Layout(width="220px"), style=bound)
        self.y_lo = W.FloatText(description="from", layout=W.Layout(width="220px"), style=bound)
        self.y_hi = W.FloatText(description="to", layout=W.Layout(width="220px"), style=bound)
        self.grid = W.IntSlider(value=grid, min=2, max=24, description="grid n×n")
        self.baseline = W.Checkbox(value=False, description="also optimise individual (saving map; 2× time)",
                                   indent=False, layout=W.Layout(width="auto"))
        self.detail = W.HTML("<i>run a sweep, then click a region to see its plan and what changes at its border</i>")
        self.run_button = W.Button(description="Run sweep", icon="th", button_style="primary")
        self.progress = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="200px"))
        self.status = W.HTML("")
        self.error = W.HTML("")
        self.figure = new_figure_widget([], {"height": 500})
        # a column: the figure takes the full width (a row would shrink it to plotly's default)
        self.figure_box = W.VBox([self.figure], layout=W.Layout(display="none"))  # no empty frame before a sweep
        self.legend = W.HTML("")
        self.x_param.observe(lambda _: self._set_range(self.x_param, self.x_lo, self.x_hi), "value")
        self.y_param.observe(lambda _: self._set_range(self.y_param, self.y_lo, self.y_hi), "value")
        self.run_button.on_click(lambda _: self.run())
        self.model.observe(self._on_workload, "workload")
        self._ranged = False
        self._fill_params()
        super().__init__([
            W.HBox([self.x_param, self.x_lo, self.x_hi]), W.HBox([self.y_param, self.y_lo, self.y_hi]),
            W.HBox([typeable(self.grid), self.baseline]), W.HBox([self.run_button, self.progress, self.status]),
            self.error, self.figure_box, W.HBox([self.legend, self.detail], layout=W.Layout(align_items="flex-start"))])

    def _fill_params(self) -> None:
        params = sweep_parameters(self.model.workload)
        opts = [(f"{k}: {t}", (k, t)) for k, t, _ in params]
        self._current = {(k, t): v for k, t, v in params}
        old_x, old_y = self.x_param.value, self.y_param.value
        if list(self.x_param.options) != opts:
            self.x_param.options = opts
            self.y_param.options = opts
        values = [o[1] for o in opts]
        self.x_param.value = old_x if old_x in values else (values[0] if values else None)
        default_y = values[1] if len(values) > 1 else (values[0] if values else None)
        self.y_param.value = old_y if old_y in values else default_y
        # ranges follow a newly chosen statistic; a range the user set for a kept one stays
        if self.x_param.value != old_x or not self._ranged:
            self._set_range(self.x_param, self.x_lo, self.x_hi)
        if self.y_param.value != old_y or not self._ranged:
            self._set_range(self.y_param, self.y_lo, self.y_hi)
        self._ranged = True

    def _on_workload(self, change) -> None:
        self._fill_params()
        if self.diagram is not None:
            self.status.value = "<i>the workload changed — run the sweep again to update</i>"

    def _set_range(self, param: W.Dropdown, lo: W.FloatText, hi: W.FloatText) -> None:
        if param.value is None:
            return
        kind, target = param.value
        lo.value, hi.value = default_range(kind, self._current[(kind, target)])

    def _clicked(self, trace, points, state) -> None:
        if self.diagram is None:
            return
        xs, ys = _ticks(self.diagram.x.values), _ticks(self.diagram.y.values)
        for x, y in zip(points.xs, points.ys):
            if x in xs and y in ys:
                self.show_region(xs.index(x), ys.index(y))

    def show_region(self, ix: int, iy: int) -> None:
        """Show the plan of cell ``(ix, iy)`` and its diff to the neighbouring region."""
        if self.diagram is not None:
            self.detail.value = ('<div style="font-size:14px;font-family:monospace">'
                                 f'{region_detail(self.diagram, ix, iy)}</div>')

    def axes(self) -> tuple[SweepParam, SweepParam]:
        """The two sweep axes as chosen in the controls."""
        n = int(self.grid.value)
        (kx, tx), (ky, ty) = self.x_param.value, self.y_param.value
        return (SweepParam(kx, tx, log_grid(self.x_lo.value, self.x_hi.value, n)),
                SweepParam(ky, ty, log_grid(self.y_lo.value, self.y_hi.value, n)))

    def run(self) -> PlanDiagram | None:
        """Run the sweep with the current controls and draw the diagram (errors shown inline)."""
        m = self.model
        try:
            if self.x_param.value is None or self.y_param.value is None:
                raise ValueError("the workload has no statistics to sweep")
            if self.x_param.value == self.y_param.value:
                raise ValueError("choose two different statistics for x and y")
            x, y = self.axes()
        except ValueError as e:
            self.error.value = error_box(str(e))
            return None

        def progress(k: int, n: int) -> None:
            self.progress.max = n
            self.progress.value = k
            self.status.value = f"<i>cell {min(k + 1, n)}/{n} …</i>" if k < n else ""

        self.run_button.disabled = True
        try:
            d = plan_diagram(m.workload, x, y, mode=m.mode, partitioning=m.partitioning, mirs=m.mirs,
                             solver=m.solver, time_limit=m.time_limit, baseline=self.baseline.value,
                             progress=progress)
        except MqjoinError as e:
            self.error.value = error_box(str(e))
            return None
        finally:
            self.run_button.disabled = False
        self.error.value = ""
        self.diagram = d
        sync_figure(self.figure, *plan_diagram_traces(d))
        self.figure_box.layout.display = None
        self.figure.data[0].on_click(self._clicked, append=False)
        rows = []
        total = sum(len(r) for r in d.plan_index)
        for i, name in enumerate(d.names()):
            costs = [d.cost[iy][ix] for iy, r in enumerate(d.plan_index) for ix, v in enumerate(r) if v == i]
            swatch = f'<span style="color:{plan_color(i)};font-size:16px">■</span> {name}'
            apart = d.distinguishing(i)
            shown = "<br>".join(esc(s) for s in apart[:MAX_APART]) or "—"
            if len(apart) > MAX_APART:
                shown += f"<br><i>… {len(apart) - MAX_APART} more: click its region</i>"
            rows.append([swatch, f"{100 * d.cells(i) / total:.0f} % ({d.cells(i)} cells)",
                         f"{fmt(min(costs))} – {fmt(max(costs))}", shown])
        self.legend.value = table(["plan", "area", "probe cost", "probe orders that set it apart"], rows, raw=True)
        self.detail.value = "<i>click a region to see its plan and what changes at its border</i>"
        self.status.value = (f'<span style="font-size:14px">{d.distinct} distinct plans, '
                             f"{len(x.values) * len(y.values)} optimisations "
                             f"({esc(m.mode)}/{esc(m.partitioning)})</span>")
        return d
