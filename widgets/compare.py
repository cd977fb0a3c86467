"""Comparisons: ``mqo`` vs ``individual`` vs ``shared``, ``single`` vs ``replicas``.

All six plans of the model's workload side by side — probe cost and memory (DESIGN A5's
trade-off: under ``single`` sharing saves memory but may cost more probe load; under
``replicas`` it pays off) — and a plan diff between any two of them: which probe orders
changed and which stores appeared or disappeared.

Six optimisations take a while on large workloads, so the view computes on demand (the
*Compare* button, or when the Explorer opens its tab) and only says it is out of date after
an edit, unless *auto* is ticked.

>>> from mqjoin.widgets.model import as_workload
>>> results = compare_plans(as_workload("paper_fig3.yaml"))
>>> [(k, r.probe_cost, r.memory) for k, r in results.items() if k[0] == "mqo"]
[(('mqo', 'single'), 900.0, 500.0), (('mqo', 'replicas'), 600.0, 600.0)]
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W

from mqjoin.errors import MqjoinError
from mqjoin.ilp import POLICIES
from mqjoin.optimizer import MODES, OptimizeResult, optimize
from mqjoin.workload import Workload

from ._html import error_box, esc, table
from mqjoin.diff import plan_diff
from mqjoin.units import memory_basis

from .figures import fmt, new_figure_widget, sync_figure
from .frontier_view import FrontierView
from .model import ExplorerModel

Config = tuple[str, str]  # (mode, partitioning)
POLICY_COLORS = {"single": "#636EFA", "replicas": "#00CC96"}


def compare_plans(workload: Workload, mirs: bool = True, solver: str = "highs", time_limit: float | None = None,
                  modes: tuple[str, ...] = MODES, policies: tuple[str, ...] = POLICIES,
                  progress: Callable[[int, int, Config], None] | None = None) -> dict[Config, OptimizeResult]:
    """Optimise the workload in every (mode, partitioning) combination, policies outermost."""
    out: dict[Config, OptimizeResult] = {}
    configs = [(m, p) for p in policies for m in modes]
    for k, (m, p) in enumerate(configs):
        if progress is not None:
            progress(k, len(configs), (m, p))
        out[(m, p)] = optimize(workload, mode=m, partitioning=p, mirs=mirs, solver=solver, time_limit=time_limit)
    if progress is not None:
        progress(len(configs), len(configs), configs[-1])
    return out


def comparison_traces(results: dict[Config, OptimizeResult], current: Config | None = None) -> tuple[list[dict], dict]:
    """Grouped bars: probe cost (left) and memory (right) per mode, one colour per policy."""
    traces = []
    policies = list(dict.fromkeys(p for _, p in results))
    modes = list(dict.fromkeys(m for m, _ in results))
    for p in policies:
        ms = [m for m in modes if (m, p) in results]
        for axis, what in (("", "probe_cost"), ("2", "memory")):
            vals = [getattr(results[(m, p)], what) for m in ms]
            traces.append({"type": "bar", "name": f"{p} {what.replace('_', ' ')}", "x": ms, "y": vals,
                           "xaxis": "x" + axis, "yaxis": "y" + axis, "legendgroup": p,
                           "showlegend": False, "marker": {"color": POLICY_COLORS.get(p, "#888"),
                           "line": {"width": [3 if (m, p) == current else 0 for m in ms], "color": "#222"}},
                           # vertical labels: neighbouring bars' values never run into each other
                           "text": [fmt(v) for v in vals], "textposition": "outside", "textangle": -90,
                           "cliponaxis": False,
                           "hovertemplate": f"%{{x}}/{p} {what.replace('_', ' ')}: %{{y:,.0f}}<extra></extra>"})
        # the legend names the policy (the colour), not one of the two charts' metrics
        traces.append({"type": "bar", "name": p, "x": [None], "y": [None], "legendgroup": p, "showlegend": True,
                       "marker": {"color": POLICY_COLORS.get(p, "#888")}, "hoverinfo": "skip"})
    layout = {"barmode": "group", "height": 380, "margin": {"l": 60, "r": 10, "t": 60, "b": 60},
              "xaxis": {"domain": [0, 0.46]}, "xaxis2": {"domain": [0.54, 1], "anchor": "y2"},
              "yaxis": {"title": {"text": "probe cost (tuples / s)"}},
              "yaxis2": {"title": {"text": "memory (tuples)"}, "anchor": "x2"},
              # title at the left, legend under the charts: the toolbar (top right) covers neither
              "title": {"text": "probe cost and memory per mode and partitioning policy", "x": 0.01, "xanchor": "left"},
              "legend": {"orientation": "h", "y": -0.14, "x": 0.5, "xanchor": "center",
                         "title": {"text": "partitioning"}}}
    return traces, layout


def _label(c: Config) -> str:
    return f"{c[0]}/{c[1]}"


class ComparisonView(W.VBox):
    """Side-by-side plans of every mode and policy with a plan diff between two of them."""

    def __init__(self, model, auto: bool = False, **model_kw):
        self.model = model if isinstance(model, ExplorerModel) else ExplorerModel(model, **model_kw)
        self.results: dict[Config, OptimizeResult] = {}
        self.stale = True
        configs = [(m, p) for p in POLICIES for m in MODES]
        opts = [(_label(c), c) for c in configs]
        self.compare_button = W.Button(description="Compare", icon="balance-scale", button_style="primary")
        self.auto = W.Checkbox(value=auto, description="auto-update on every edit", indent=False)
        self.progress = W.IntProgress(value=0, min=0, max=len(configs), layout=W.Layout(width="160px"))
        self.status = W.HTML("")
        self.error = W.HTML("")
        self.table = W.HTML("")
        self.figure = new_figure_widget([], {"height": 340})
        self.a = W.Dropdown(options=opts, value=("individual", "single"), description="plan A")
        self.b = W.Dropdown(options=opts, value=(self.model.mode, self.model.partitioning), description="plan B")
        self.diff = W.HTML("")
        self.compare_button.on_click(lambda _: self.compute())
        self.a.observe(lambda _: self.show_diff(), "value")
        self.b.observe(lambda _: self.show_diff(), "value")
        self.model.observe(self._on_change, ["result", "options"])
        self.frontier = FrontierView(self.model)  # computed on its own button: one solve per point
        super().__init__([W.HBox([self.compare_button, self.auto, self.progress, self.status]), self.error,
                          self.figure, self.table, W.HTML("<b>plan diff</b> (A → B)"), W.HBox([self.a, self.b]),
                          self.diff, W.HTML("<b>probe cost / memory frontier</b>"), self.frontier])
        self.status.value = "<i>press Compare to optimise the workload in all six settings</i>"

    def _on_change(self, change) -> None:
        self.stale = True
        if self.auto.value:
            self.compute()
        elif self.results:
            self.status.value = "<i>the workload or options changed — press Compare to update</i>"

    def ensure_fresh(self) -> None:
        """Compute the comparison if it is out of date (the Explorer calls this when its tab opens)."""
        if self.stale:
            self.compute()

    def compute(self) -> dict[Config, OptimizeResult]:
        """Optimise the model's workload in every mode and policy and redraw."""
        m = self.model

        def progress(k: int, n: int, c: Config) -> None:
            self.progress.max = n
            self.progress.value = k
            self.status.value = f"<i>optimising {esc(_label(c))} ({k + 1}/{n}) …</i>" if k < n else ""

        try:
            self.results = compare_plans(m.workload, mirs=m.mirs, solver=m.solver, time_limit=m.time_limit,
                                         progress=progress)
        except MqjoinError as e:
            self.error.value = error_box(str(e))
            return self.results
        self.error.value = ""
        self.stale = False
        current = (m.mode, m.partitioning)
        sync_figure(self.figure, *comparison_traces(self.results, current))
        base = self.results.get(("individual", "single"))
        rows, marks = [], []
        for c, r in self.results.items():
            rel = "" if base is None or base.probe_cost == 0 else f"{r.probe_cost / base.probe_cost - 1:+.1%}"
            rows.append([c[0], c[1], fmt(r.probe_cost), rel, fmt(r.memory), len(r.plan.stores), len(r.plan.nodes),
                         f"{r.ilp.solve_seconds:.3f}", r.ilp.status])
            marks.append(c == current)
        self.table.value = table(["mode", "partitioning", "probe cost", "vs individual/single", "memory", "stores",
                                  "steps", "solve s", "status"], rows, marked=marks)
        self.status.value = (f'<span style="font-size:12px">{len(self.results)} plans, MIRs '
                             f"{'on' if m.mirs else 'off'}; shaded: the explorer's current setting. probe cost: "
                             f"tuples the probes ship per second; {esc(memory_basis(m.workload))}</span>")
        self.show_diff()
        return self.results

    def show_diff(self) -> None:
        """Show the plan diff between the configurations chosen as A and B."""
        a, b = self.results.get(self.a.value), self.results.get(self.b.value)
        if a is None or b is None:
            self.diff.value = ""
            return
        d = plan_diff(a.plan, b.plan)
        parts = [f'<pre style="font-size:12px;margin:2px 0">{esc(d.summary(max_lines=0).splitlines()[0])}</pre>']
        if d.changed_orders or d.added_orders or d.removed_orders:
            rows = [[q, s, x, y] for q, s, x, y in d.changed_orders]
            rows += [[q, s, "—", o] for q, s, o in d.added_orders]
            rows += [[q, s, o, "—"] for q, s, o in d.removed_orders]
            parts.append(table(["query", "start", f"probe order in {_label(self.a.value)}",
                                f"probe order in {_label(self.b.value)}"], rows))
        else:
            parts.append("<i>same probe orders</i>")
        parts.append(table(["stores appeared", "stores disappeared"],
                           [[", ".join(d.added_stores) or "—", ", ".join(d.removed_stores) or "—"]]))
        self.diff.value = "".join(parts)
