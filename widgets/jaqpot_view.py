"""The JAQPOT panel: a binary plan's half-way joins and paths under a CPU limit μ.

For one query of the model's workload, joined by the binary tree the ``tree`` planner picks
(the model's tree shape, else ``best``; :func:`mqjoin.runtime.shedding.tree_model` reads the JAQPOT
model off it), or for a :class:`~mqjoin.planners.jaqpot.BinaryPlan` given directly (the paper's
running example): the half-way joins with their productivity ``ρ_h``, the
path-productivity table (Table 2), and under the μ slider the allocation per half-way join
of GrePP (continuous knapsack), the discrete DP knapsack and the JAQPOT policy (whole
bundles, greedy), each with its predicted throughput and staleness (Lemma 1, seconds per
stream; ``∞``: a state that never refreshes).  The chart draws GrePP's and the JAQPOT
policy's throughput over μ from 0 to the saturation resources, and the three policies'
points at the slider's μ.

>>> from mqjoin.planners.jaqpot import running_example
>>> view = JaqpotView(running_example(), mu=20)
>>> view.mu.value = 30
>>> {p: a.throughput for p, a in view.allocations.items()}
{'GrePP': 9.375, 'discrete DP knapsack': 8, 'JAQPOT policy': 6}
>>> round(view.allocations["GrePP"].allowances["b ⋉ S_A"], 2)
20.62
"""

from __future__ import annotations

import math

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planners.jaqpot import Allocation, BinaryPlan, discrete_knapsack, grepp, jaqpot_policy, productivity_table, staleness
from mqjoin.planners.trees import binary_tree
from mqjoin.runtime.shedding import tree_model

from mqjoin.widgets._controls import typeable
from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView

#: the policies the panel compares, by their allocation function
POLICIES = {"GrePP": grepp, "discrete DP knapsack": discrete_knapsack, "JAQPOT policy": jaqpot_policy}
#: points of the throughput-over-μ curves
CURVE_POINTS = 41


def allocations(plan: BinaryPlan, mu: float) -> dict[str, Allocation]:
    """Each policy of :data:`POLICIES` at ``mu``, keyed by its name."""
    return {name: fn(plan, mu) for name, fn in POLICIES.items()}


def throughput_traces(plan: BinaryPlan, mu: float, current: dict[str, Allocation]) -> tuple[list[dict], dict]:
    """Throughput over μ ∈ [0, saturation resources] of GrePP and the JAQPOT policy (the
    discrete DP, ``O(k · μ²/X)`` per point, only at ``mu``), and each policy's point at ``mu``.

    >>> from mqjoin.planners.jaqpot import running_example
    >>> traces, layout = throughput_traces(running_example(), 30, allocations(running_example(), 30))
    >>> [(t["name"], t["y"][-1] if t["mode"] == "markers" else len(t["x"])) for t in traces]
    [('GrePP', 41), ('JAQPOT policy', 41), ('at μ', 6)]
    """
    sat_mu = plan.saturation()[0]
    step = max(1, math.ceil(sat_mu / (CURVE_POINTS - 1)))  # whole μ: the JAQPOT policy takes whole bundles
    xs = list(range(0, step * CURVE_POINTS, step))
    traces = [{"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": [POLICIES[name](plan, x).throughput
                                                                               for x in xs]}
              for name in ("GrePP", "JAQPOT policy")]
    traces.append({"type": "scatter", "mode": "markers", "name": "at μ", "x": [mu] * len(current),
                   "y": [a.throughput for a in current.values()], "text": list(current),
                   "hovertemplate": "%{text}: %{y}<extra></extra>", "marker": {"size": 10, "color": "#222"}})
    layout = {"height": 300, "margin": {"l": 50, "r": 10, "t": 10, "b": 40},
              "xaxis": {"title": "μ (tuples processed per second)"},
              "yaxis": {"title": "throughput (results per second)"}}
    return traces, layout


class JaqpotView(ModelView, W.VBox):
    """The JAQPOT panel of a model (a query menu follows its workload) or of one
    :class:`~mqjoin.planners.jaqpot.BinaryPlan` (see the module doc)."""

    def __init__(self, source, mu: float | None = None, **model_kw):
        self.model = None
        self.fixed: BinaryPlan | None = None
        if isinstance(source, BinaryPlan):
            self.fixed = source
        else:
            self.own_model(source, **model_kw)
        self.query = W.Dropdown(description="query", options=self._queries(),
                                layout=W.Layout(display="none" if self.model is None else None))
        self.plan: BinaryPlan | None = None
        self.allocations: dict[str, Allocation] = {}
        self.mu = W.FloatSlider(value=0.0, min=0.0, max=1.0, step=1.0, description="μ", continuous_update=False)
        self.error = W.HTML("")
        self.tree = W.HTML("")
        self.halfway = W.HTML("")
        self.paths = W.HTML("")
        self.allocation = W.HTML("")
        self.figure = new_figure_widget([], {})
        self.query.observe(lambda _: self.rebuild(), "value")
        self._quiet = False  # rebuild() sets the slider and redraws once itself
        self.mu.observe(lambda _: self._quiet or self.redraw(), "value")
        if self.model is not None:
            self.model.observe(lambda _: self._on_workload(), "workload")
            self.model.observe(lambda _: self.rebuild(), "options")
        super().__init__([W.HBox([self.query, typeable(self.mu)]), self.error, self.tree,
                          W.HBox([self.halfway, self.paths], layout=W.Layout(flex_flow="row wrap")),
                          self.allocation, self.figure])
        self.rebuild(mu)

    def _queries(self) -> list[str]:
        return [] if self.model is None else list(self.model.workload.query_names)

    def _on_workload(self) -> None:
        names = self._queries()
        if list(self.query.options) != names:
            keep = self.query.value if self.query.value in names else (names[0] if names else None)
            self.query.options = names
            self.query.value = keep
        self.rebuild()

    def _binary_plan(self) -> BinaryPlan | None:
        if self.fixed is not None:
            return self.fixed
        q = self.query.value
        if q is None:
            return None
        w = self.model.workload
        return tree_model(w, q, binary_tree(w, q, self.model.tree_shape or "best"))

    def rebuild(self, mu: float | None = None) -> None:
        """Recompute the binary plan (query, workload or tree shape changed) and redraw; the
        slider spans 0 … the saturation resources and keeps μ's share of them."""
        share = None if self.plan is None or self.mu.max <= 0 else self.mu.value / self.mu.max
        try:
            self.plan = self._binary_plan()
        except MqjoinError as e:
            self.plan = None
            self.error.value = error_box(str(e))
            return
        self.error.value = ""
        if self.plan is None:
            return
        sat = math.ceil(self.plan.saturation()[0])
        self._quiet = True
        try:
            self.mu.max = max(sat, 1)
            self.mu.value = min(sat, mu if mu is not None else round(sat * (0.3 if share is None else share)))
        finally:
            self._quiet = False
        self.tree.value = (f"<b>binary plan</b> {esc(_render(self.plan.tree))} · saturation: "
                           f"{fmt(self.plan.saturation()[0])} tuples/s of probing → "
                           f"{fmt(self.plan.saturation()[1])} results/s")
        self.halfway.value = "<b>half-way joins</b>" + table(
            ["half-way join", "ρ_h = σ · |S|"], [[h.render(), fmt(h.productivity)] for h in self.plan.halfway_joins()])
        paths = self.plan.paths()
        self.paths.value = "<b>path productivity (Table 2)</b>" + table(
            ["path", "hops", "resources X", "output r", "ρ_p"],
            [[f"Path^{r.stream}", str(paths[r.stream]), r.resources, r.output, f"{r.productivity:.3f}"]
             for r in productivity_table(self.plan)])
        self.redraw()

    def redraw(self) -> None:
        """The allocations at the slider's μ: the table and the chart's marker."""
        if self.plan is None:
            return
        mu = self.mu.value
        self.allocations = allocations(self.plan, mu)
        names = list(self.allocations)
        rows = [[h.render()] + [fmt(self.allocations[n].allowances[h.render()]) for n in names]
                for h in self.plan.halfway_joins()]
        rows.append(["<b>throughput</b>"] + [f"<b>{fmt(self.allocations[n].throughput)}</b>" for n in names])
        stale = {n: staleness(self.plan, a.allowances) for n, a in self.allocations.items()}
        rows += [[f"staleness of {s} (s)"] + [_seconds(stale[n][s]) for n in names] for s in self.plan.streams]
        self.allocation.value = f"<b>allocation at μ = {fmt(mu)}</b>" + table(
            ["probe allowance λ'"] + [esc(n) for n in names], rows, raw=True)
        sync_figure(self.figure, *throughput_traces(self.plan, mu, self.allocations))


def _render(tree) -> str:
    return tree if isinstance(tree, str) else f"({_render(tree[0])} ⋈ {_render(tree[1])})"


def _seconds(t: float) -> str:
    return "∞" if math.isinf(t) else fmt(t)
