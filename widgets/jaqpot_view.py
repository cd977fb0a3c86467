"""The JAQPOT panel: a binary plan's half-way joins and paths under a CPU limit μ.

For one query of the model's workload, joined by the binary tree the ``tree`` planner picks
(the model's tree shape, else ``best``; :func:`mqjoin.runtime.shedding.tree_model` reads the JAQPOT
model off it), or for a :class:`~mqjoin.planners.jaqpot.BinaryPlan` given directly (the paper's
running example): the half-way joins with their productivity ``ρ_h``, the
path-productivity table (Table 2), and under the μ slider the allocation per half-way join
of GrePP (continuous knapsack), the discrete DP knapsack and the JAQPOT policy (whole
bundles, greedy), each with its predicted throughput and staleness (Lemma 1, seconds per
stream; ``∞``: a state that never refreshes).

The numbers come from the plan, not from constants.  Whole bundles are counted over the
period :func:`~mqjoin.planners.jaqpot.bundle_period` (the shortest in which every stream
supplies one bundle: a stream of 0.8 tuples/s supplies no whole bundle in a second).  The
μ range (:func:`mu_range`) runs from half the smallest bundle (below it no discrete policy
has output) to the saturation resources, on a log scale: on real statistics a few cheap,
productive paths (a dimension table's) saturate at a few tuples/s while a fact table's path
needs thousands, and a linear axis hides the first.  The chart draws all three policies'
throughput over that range (the discrete DP's from one knapsack table, for every μ at
once), and the slider starts where the policies lie furthest apart (:func:`apart`) — for each
query chosen, and the note beside the μ box says that μ moved and why.  An edit of the
workload keeps μ while it lies in the new range (else it moves, and says so); a typed μ outside
the range is kept at its end, and the note says that too.

>>> from mqjoin.planners.jaqpot import running_example
>>> view = JaqpotView(running_example(), mu=20)
>>> view.mu.value = 30
>>> {p: a.throughput for p, a in view.allocations.items()}
{'GrePP': 9.375, 'discrete DP knapsack': 8.0, 'JAQPOT policy': 6.0}
>>> round(view.allocations["GrePP"].allowances["b ⋉ S_A"], 2)
20.62
"""

from __future__ import annotations

import math

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planners.jaqpot import (Allocation, BinaryPlan, bundle_period, discrete_knapsack, grepp, jaqpot_policy,
                                    knapsack_table, productivity_table, staleness)
from mqjoin.planners.trees import binary_tree
from mqjoin.runtime.shedding import tree_model

from mqjoin.widgets._controls import note_html, typeable
from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.charts import projector
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure
from mqjoin.widgets.model import ModelView

#: the policies the panel compares, by their allocation function (``fn(plan, mu, period)``)
POLICIES = {"GrePP": lambda plan, mu, period: grepp(plan, mu), "discrete DP knapsack": discrete_knapsack,
            "JAQPOT policy": jaqpot_policy}
#: points of the throughput-over-μ curves
CURVE_POINTS = 61
#: line styles of the policies' curves
STYLES = {"GrePP": {"color": "#1f77b4"}, "discrete DP knapsack": {"color": "#2ca02c", "dash": "dash"},
          "JAQPOT policy": {"color": "#d62728", "dash": "dot"}}


def allocations(plan: BinaryPlan, mu: float, period: float = 1.0) -> dict[str, Allocation]:
    """Each policy of :data:`POLICIES` at ``mu`` (whole bundles over ``period`` seconds)."""
    return {name: fn(plan, mu, period) for name, fn in POLICIES.items()}


def mu_range(plan: BinaryPlan, period: float = 1.0) -> tuple[float, float]:
    """``(low, high)`` of μ worth showing: half the smallest bundle's resources per second
    (below it the discrete policies give nothing) to the saturation resources.

    >>> from mqjoin.planners.jaqpot import running_example
    >>> mu_range(running_example())  # Path^C's bundle: 10 tuples; saturation 1,000 · (1.36 + 1.45 + 1)
    (5.0, 3818.181818181818)
    """
    high = plan.saturation()[0]
    low = min(r.resources for r in productivity_table(plan)) / period / 2
    return (low if low < high else high / 100), high


def curves(plan: BinaryPlan, period: float = 1.0, points: int = CURVE_POINTS) -> tuple[list[float],
                                                                                       dict[str, list[float]]]:
    """μ at ``points`` log-spaced values over :func:`mu_range` and each policy's throughput
    there (the discrete DP's read off one :func:`~mqjoin.planners.jaqpot.knapsack_table`).

    >>> from mqjoin.planners.jaqpot import running_example
    >>> xs, ys = curves(running_example(), points=5)
    >>> [round(x) for x in xs], ys["JAQPOT policy"][:3], ys["discrete DP knapsack"][:3]
    ([5, 26, 138, 726, 3818], [0.0, 6.0, 41.0], [0.0, 6.0, 41.0])
    """
    low, high = mu_range(plan, period)
    xs = [low * (high / low) ** (k / (points - 1)) for k in range(points)]
    best, _ = knapsack_table(plan, high * period, period)
    return xs, {"GrePP": [grepp(plan, x).throughput for x in xs],
                "discrete DP knapsack": [int(best[int(x * period + 1e-9)]) / period for x in xs],
                "JAQPOT policy": [jaqpot_policy(plan, x, period).throughput for x in xs]}


def apart(xs: list[float], ys: dict[str, list[float]]) -> float:
    """The μ of ``xs`` where the policies lie furthest apart: the largest relative gap
    between the discrete DP and the JAQPOT policy, else between GrePP and the JAQPOT policy,
    where the JAQPOT policy has output (the middle of the range when none has).

    >>> apart([1, 2, 3], {"GrePP": [1, 4, 6], "discrete DP knapsack": [0, 3, 5], "JAQPOT policy": [0, 2, 5]})
    2
    """
    def gap(k: int, hi: str) -> float:
        top = ys[hi][k]
        return (top - ys["JAQPOT policy"][k]) / top if top > 0 else 0.0

    live = [k for k in range(len(xs)) if ys["JAQPOT policy"][k] > 0]
    for hi in ("discrete DP knapsack", "GrePP"):
        k = max(live, key=lambda k: (gap(k, hi), -k), default=None)
        if k is not None and gap(k, hi) > 1e-9:
            return xs[k]
    return xs[len(xs) // 2]


def throughput_traces(plan: BinaryPlan, mu: float, current: dict[str, Allocation], period: float = 1.0,
                      curve: tuple[list[float], dict[str, list[float]]] | None = None) -> tuple[list[dict], dict]:
    """Throughput over μ (:func:`curves`, log axis) of every policy, and each policy's point
    at ``mu``.

    >>> from mqjoin.planners.jaqpot import running_example
    >>> traces, layout = throughput_traces(running_example(), 30, allocations(running_example(), 30))
    >>> [(t["name"], t["y"][-1] if t["mode"] == "markers" else len(t["x"])) for t in traces]
    [('GrePP', 61), ('discrete DP knapsack', 61), ('JAQPOT policy', 61), ('at μ', 6.0)]
    >>> layout["xaxis"]["type"], layout["font"]["size"] >= 14
    ('log', True)
    """
    xs, ys = curve or curves(plan, period)
    # the DP under the JAQPOT policy, wider: where they agree both stay visible
    traces = [{"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys[name], "line": {**STYLES[name],
              "width": 6 if name == "discrete DP knapsack" else 3, "shape": "hv" if name != "GrePP" else "linear"}}
              for name in POLICIES]
    traces.append({"type": "scatter", "mode": "markers", "name": "at μ", "x": [mu] * len(current),
                   "y": [a.throughput for a in current.values()], "text": list(current),
                   "hovertemplate": "%{text}: %{y}<extra></extra>",
                   "marker": {"size": 14, "color": [STYLES[n]["color"] for n in current], "line": {"color": "#222",
                                                                                                  "width": 2}}})
    per = "" if period == 1 else f"; whole bundles per {fmt(period)} s"
    layout = projector({"height": 420, "margin": {"l": 80, "r": 20, "t": 20, "b": 70},
                        "xaxis": {"title": {"text": f"μ (tuples processed per second{per})"}, "type": "log"},
                        "yaxis": {"title": {"text": "throughput (results per second)"}, "rangemode": "tozero"},
                        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom"}})
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
        #: seconds over which the discrete policies count whole bundles
        self.period = 1.0
        self.curve: tuple[list[float], dict[str, list[float]]] | None = None
        self.allocations: dict[str, Allocation] = {}
        self.mu = W.FloatLogSlider(value=1.0, base=10, min=0.0, max=1.0, step=0.01, description="μ",
                                   continuous_update=False, layout=W.Layout(width="480px"))
        self.error = W.HTML("")
        self.tree = W.HTML("")
        self.halfway = W.HTML("")
        self.paths = W.HTML("")
        self.allocation = W.HTML("")
        self.figure = new_figure_widget([], {})
        self.query.observe(lambda _: self.rebuild(moved="another query"), "value")
        self._quiet = False  # rebuild() sets the slider and redraws once itself
        self.mu.observe(lambda _: self._quiet or self.redraw(), "value")
        if self.model is not None:
            self.model.observe(lambda _: self._on_workload(), "workload")
            self.model.observe(lambda _: self.rebuild(), "options")
        mu_row = typeable(self.mu, width="120px")
        #: beside the μ box: why μ is not the value typed or the one before
        self.mu_note = mu_row.children[2]
        super().__init__([W.HBox([self.query, mu_row]), self.error, self.tree, self.figure,
                          self.allocation, W.HBox([self.halfway, self.paths], layout=W.Layout(flex_flow="row wrap"))])
        self._shown_mu: float | None = None  # the μ shown before a rebuild (None: none yet)
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

    def rebuild(self, mu: float | None = None, moved: str = "") -> None:
        """Recompute the binary plan (query, workload or tree shape changed), its bundle
        period, μ range and curves, and redraw.  μ is ``mu`` if given, else the μ shown before;
        outside the new range, at the first build, or for ``moved`` (why it moves: another
        query) it is where the policies lie furthest apart (:func:`apart`) — said in the note
        beside the box unless it is the first build."""
        try:
            self.plan = self._binary_plan()
        except MqjoinError as e:
            self.plan = None
            self.error.value = error_box(str(e))
            return
        self.error.value = ""
        if self.plan is None:
            return
        self.period = bundle_period(self.plan)
        low, high = mu_range(self.plan, self.period)
        self.curve = curves(self.plan, self.period)
        wanted = self._shown_mu if mu is None else mu
        note = ""
        if wanted is not None and low <= wanted <= high and not moved:
            start = wanted
        else:
            start = apart(*self.curve)
            why = moved or f"out of this plan's range ({fmt(low)} … {fmt(high)})"
            if wanted is not None and fmt(wanted) != fmt(start):
                note = f"μ moved from {fmt(wanted)} to {fmt(start)} ({why}), where the policies differ most"
        self._quiet = True
        try:
            lo, hi = math.log10(low), math.log10(high)
            self.mu.min, self.mu.max = min(lo, self.mu.max), max(hi, self.mu.min)
            self.mu.min, self.mu.max = lo, hi
            self.mu.step = (hi - lo) / 200
            self.mu.value = start
        finally:
            self._quiet = False
        self.mu_note.value = note_html(note)
        sat_mu, sat_out = self.plan.saturation()
        self.tree.value = (f"<b>binary plan</b> {esc(_render(self.plan.tree))} · saturation: "
                           f"{fmt(sat_mu)} tuples/s of probing → {fmt(sat_out)} results/s")
        self.halfway.value = "<b>half-way joins</b>" + table(
            ["half-way join", "ρ_h = σ · |S|"], [[h.render(), fmt(h.productivity)] for h in self.plan.halfway_joins()])
        paths = self.plan.paths()
        period = "" if self.period == 1 else f"; the stream supplies bundles per {fmt(self.period)} s"
        self.paths.value = f"<b>path productivity (Table 2)</b> <i>whole bundles{esc(period)}</i>" + table(
            ["path", "hops", "leaf tuples X₁", "resources X", "output r", "ρ_p", "bundles"],
            [[f"Path^{r.stream}", str(paths[r.stream]), fmt(r.leaf), fmt(r.resources), fmt(r.output),
              f"{r.productivity:.3f}", fmt(int(self.plan.rates[r.stream] * self.period // r.leaf))]
             for r in productivity_table(self.plan)])
        self.redraw()

    def redraw(self) -> None:
        """The allocations at the slider's μ: the table and the chart's markers."""
        if self.plan is None:
            return
        mu = self._shown_mu = self.mu.value
        self.allocations = allocations(self.plan, mu, self.period)
        names = list(self.allocations)
        rows = [[h.render()] + [fmt(self.allocations[n].allowances[h.render()]) for n in names]
                for h in self.plan.halfway_joins()]
        rows.append(["<b>throughput</b>"] + [f"<b>{fmt(self.allocations[n].throughput)}</b>" for n in names])
        stale = {n: staleness(self.plan, a.allowances) for n, a in self.allocations.items()}
        rows += [[f"staleness of {s} (s)"] + [_seconds(stale[n][s]) for n in names] for s in self.plan.streams]
        self.allocation.value = f"<b>allocation at μ = {fmt(mu)}</b>" + table(
            ["probe allowance λ'"] + [esc(n) for n in names], rows, raw=True)
        sync_figure(self.figure, *throughput_traces(self.plan, mu, self.allocations, self.period, self.curve))


def _render(tree) -> str:
    return tree if isinstance(tree, str) else f"({_render(tree[0])} ⋈ {_render(tree[1])})"


def _seconds(t: float) -> str:
    return "∞" if math.isinf(t) else fmt(t)
