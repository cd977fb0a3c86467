"""Comparisons: ``mqo`` vs ``individual`` vs ``shared``, ``single`` vs ``replicas``, CLASH vs
the plan families it is compared with.

CLASH's six plans of the model's workload side by side — probe cost and memory (docs/model.md §5's
trade-off: under ``single`` sharing saves memory but may cost more probe load; under
``replicas`` it pays off).  The table lists, beside CLASH's rows, the plans of every other
planner (MJoin, the best binary trees, AJoin, PMJoin) with a planner column: the rows of
``mqjoin compare`` (:mod:`mqjoin.planning.comparison`), plus PMJoin's and JAQPOT's.  A row whose plan
an earlier row already has says so (*same plan as …*); JAQPOT builds the binary trees of
``tree`` by the same rule — it differs in how they run, under a CPU budget (its own tab) —
and the note under the table says why its rows repeat ``tree``'s.  A plan diff between any two
of them (of one planner or two): which probe orders changed and which stores appeared or
disappeared.  Once a run ended (the model's ``measured``), the table gains what was measured:
every plan's probe cost on the join sizes the run measured
(:func:`~mqjoin.planning.measured.measured_workload`) and, for the plan that ran, the probe
messages it counted beside the model's prediction.

The optimisations take a while on large workloads, so the view computes on demand (the
*Compare* button, or when the Explorer opens its tab) and only says it is out of date after
an edit, unless *auto* is ticked.

>>> from mqjoin.widgets.model import as_workload
>>> results = compare_plans(as_workload("paper_fig3.yaml"))
>>> [(k, r.probe_cost, r.memory) for k, r in results.items() if k[0] == "mqo"]
[(('mqo', 'single'), 900.0, 500.0), (('mqo', 'replicas'), 600.0, 600.0)]
>>> view = ComparisonView("paper_fig3.yaml", debounce=0)
>>> plans = view.compute()
>>> sorted({s.label for s in view.plans}), len(view.results)
(['ajoin', 'clash', 'jaqpot (best)', 'mjoin', 'pmjoin', 'tree (best)'], 6)
>>> jaqpot, tree = (view.plans[Setting(p, "shared", "single", "best")] for p in ("jaqpot", "tree"))
>>> jaqpot.plan == tree.plan, "built, no ILP; same plan as tree (best) shared/single" in view.table.value
(True, True)
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from mqjoin.planners import registry as planners
from mqjoin.planning.comparison import Setting, compare, settings
from mqjoin.model.errors import MqjoinError
from mqjoin.planning.ilp import POLICIES
from mqjoin.planning.optimizer import MODES, OptimizeResult
from mqjoin.planning.options import OptimizeOptions
from mqjoin.model.workload import Workload

from mqjoin.widgets._html import error_box, esc, table
from mqjoin.planning.diff import plan_diff
from mqjoin.planning.measured import measured_workload
from mqjoin.planning.recost import recost
from mqjoin.support.units import memory_basis, percent_change

from mqjoin.widgets.charts import PROJECTOR_FONT, projector
from mqjoin.widgets.figures import fmt, new_figure_widget, sync_figure
from mqjoin.widgets.frontier_view import FrontierView
from mqjoin.widgets.model import ExplorerModel, ModelView

Config = tuple[str, str]  # (mode, partitioning)
POLICY_COLORS = {"single": "#636EFA", "replicas": "#00CC96"}


def compare_plans(workload: Workload, mirs: bool = True, solver: str = "highs", time_limit: float | None = None,
                  modes: tuple[str, ...] = MODES, policies: tuple[str, ...] = POLICIES) -> dict[Config, OptimizeResult]:
    """Optimise the workload with CLASH in every (mode, partitioning) combination, policies outermost."""
    plans = compare(workload, settings(("clash",), policies=policies, modes=modes),
                    OptimizeOptions(mirs=mirs, solver=solver, time_limit=time_limit))
    return {(s.mode, s.partitioning): r for s, r in plans.items()}


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
                           "textfont": {"size": PROJECTOR_FONT}, "cliponaxis": False,
                           "hovertemplate": f"%{{x}}/{p} {what.replace('_', ' ')}: %{{y:,.0f}}<extra></extra>"})
        # the legend names the policy (the colour), not one of the two charts' metrics
        traces.append({"type": "bar", "name": p, "x": [None], "y": [None], "legendgroup": p, "showlegend": True,
                       "marker": {"color": POLICY_COLORS.get(p, "#888")}, "hoverinfo": "skip"})
    # uniformtext: plotly shrinks a bar's label to the bar (5 px on a narrow chart); never below 14 px
    layout = projector({"barmode": "group", "height": 460, "margin": {"l": 90, "r": 20, "t": 90, "b": 70},
              "uniformtext": {"minsize": PROJECTOR_FONT, "mode": "show"},
              "xaxis": {"domain": [0, 0.46]}, "xaxis2": {"domain": [0.54, 1], "anchor": "y2"},
              "yaxis": {"title": {"text": "probe cost (tuples / s)"}},
              "yaxis2": {"title": {"text": "memory (tuples)"}, "anchor": "x2"},
              # title at the left, legend under the charts: the toolbar (top right) covers neither
              "title": {"text": "probe cost and memory per mode and partitioning policy", "x": 0.01, "xanchor": "left"},
              "legend": {"orientation": "h", "y": -0.14, "x": 0.5, "xanchor": "center",
                         "title": {"text": "partitioning"}}})
    return traces, layout


def _label(s: Setting) -> str:
    return f"{s.label} {s.mode}/{s.partitioning}"


def _is_current(s: Setting, model: ExplorerModel) -> bool:
    """Whether ``s`` is the explorer's current setting (the ``mqo`` plan of a planner that
    plans each query alone is its ``shared`` row)."""
    mode = model.mode if model.mode != "mqo" or planners.planner_of(s.planner).joint else "shared"
    return (s.planner, s.mode, s.partitioning, s.tree_shape) == (
        model.planner, mode, model.partitioning, planners.planner_of(model.planner).shape(model.tree_shape))


def _same_plan(s: Setting, r: OptimizeResult, earlier: list[tuple[Setting, OptimizeResult]]) -> str:
    """``"; same plan as <row>"`` when an earlier row of the table has ``r``'s very plan (a
    planner planning by the same rule first, then the nearest row), else ''."""
    rule = planners.planner_of(s.planner).plan
    twins = sorted((t for t, e in reversed(earlier) if e.plan == r.plan),
                   key=lambda t: planners.planner_of(t.planner).plan != rule)
    return f"; same plan as {_label(twins[0])}" if twins else ""


def _rule_twins(plans: dict[Setting, OptimizeResult]) -> str:
    """Why a planner's rows repeat another planner's: it plans with the same rule and differs
    when its plans run (JAQPOT builds the binary trees of ``tree`` and divides a CPU budget
    among their half-way joins at run time).  '' when no listed planner does.

    >>> _rule_twins({Setting("jaqpot", "shared", "single", "best"): None})  # doctest: +NORMALIZE_WHITESPACE
    ' jaqpot (best) builds the same plans as tree (best), so its rows repeat them; what differs is how they
    run — JAQPOT: ...'
    """
    listed = list(dict.fromkeys(s.planner for s in plans))
    labels = {s.planner: s.label for s in plans}
    notes = []
    for p in listed:
        twin = next((q for q in planners.PLANNERS[:planners.PLANNERS.index(p)]
                     if planners.planner_of(q).plan == planners.planner_of(p).plan), None)
        if twin is not None:
            shape = planners.planner_of(twin).shape(next(s.tree_shape for s in plans if s.planner == p))
            other = twin if shape is None else f"{twin} ({shape})"
            notes.append(f" {labels[p]} builds the same plans as {other}, so its rows repeat them; what differs is "
                         f"how they run — {planners.planner_of(p).label}.")
    return "".join(notes)


class ComparisonView(ModelView, W.VBox):
    """Side-by-side plans of every mode and policy with a plan diff between two of them."""

    def __init__(self, model, auto: bool = False, **model_kw):
        self.own_model(model, **model_kw)
        #: CLASH's plans by (mode, partitioning): the charts and the plan diff
        self.results: dict[Config, OptimizeResult] = {}
        #: every planner's plans (CLASH's included): the table
        self.plans: dict[Setting, OptimizeResult] = {}
        self.stale = True
        #: every planner's settings, in the table's order (those of a planner added later too)
        self.settings = settings(planners.PLANNERS, modes=MODES)
        opts = [(_label(s), s) for s in self.settings]
        self.compare_button = W.Button(description="Compare", icon="balance-scale", button_style="primary",
                                       layout=W.Layout(width="auto", min_width="140px", flex="0 0 auto"))
        self.auto = W.Checkbox(value=auto, description="auto-update on every edit", indent=False)
        self.progress = W.IntProgress(value=0, min=0, max=len(self.settings), layout=W.Layout(width="160px"))
        self.status = W.HTML("")
        self.error = W.HTML("")
        self.table = W.HTML("")
        self.figure = new_figure_widget([], {"height": 340})
        self.a = W.Dropdown(options=opts, value=Setting("clash", "individual", "single"), description="plan A")
        self.b = W.Dropdown(options=opts, description="plan B",
                            value=next((s for s in self.settings if _is_current(s, self.model)), self.settings[0]))
        self.diff = W.HTML("")
        self.compare_button.on_click(lambda _: self.compute())
        self.a.observe(lambda _: self.show_diff(), "value")
        self.b.observe(lambda _: self.show_diff(), "value")
        self.model.observe(self._on_change, ["result", "options"])
        self.model.observe(lambda _: self._fill_table() if self.plans and not self.stale else None, "measured")
        self.frontier = FrontierView(self.model)  # computed on its own button: one solve per point
        super().__init__([W.HBox([self.compare_button, self.auto, self.progress, self.status]), self.error,
                          self.figure, self.table, W.HTML("<b>plan diff</b> (A → B)"), W.HBox([self.a, self.b]),
                          self.diff, W.HTML("<b>probe cost / memory frontier</b>"), self.frontier])
        self.status.value = "<i>press Compare to optimise the workload with every planner, mode and policy</i>"

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
        """Optimise the model's workload with every planner in every mode and policy and
        redraw; returns CLASH's plans (all of them are in :attr:`plans`)."""
        m = self.model

        def progress(k: int, n: int, s: Setting) -> None:
            self.progress.max = n
            self.progress.value = k
            self.status.value = f"<i>optimising {esc(_label(s))} ({k + 1}/{n}) …</i>" if k < n else ""

        try:
            self.plans = compare(m.workload, self.settings, m.options, progress=progress)
        except MqjoinError as e:
            self.error.value = error_box(str(e))
            return self.results
        self.results = {(s.mode, s.partitioning): r for s, r in self.plans.items()
                        if planners.planner_of(s.planner).ilp}
        self.error.value = ""
        self.stale = False
        current = (m.mode, m.partitioning) if planners.planner_of(m.planner).ilp else None  # the bars are CLASH's
        sync_figure(self.figure, *comparison_traces(self.results, current))
        self._fill_table()
        self.show_diff()
        return self.results

    def _measured(self) -> tuple[Any, Workload | None]:
        """The model's last run (or None) and the workload with the sizes it measured."""
        counts = self.model.measured
        if counts is None:
            return None, None
        try:
            return counts, measured_workload(self.model.workload, counts.check().to_dict())
        except MqjoinError:
            return counts, None

    def _fill_table(self) -> None:
        m = self.model
        counts, sized = self._measured()
        base = self.results.get(("individual", "single"))
        rows, marks = [], []
        seen: list[tuple[Setting, OptimizeResult]] = []
        for s, r in self.plans.items():
            rel = "" if base is None or base.probe_cost == 0 else percent_change(r.probe_cost / base.probe_cost - 1)
            extra = []
            if counts is not None:
                ran = counts.check(r.plan)
                pred, got = ran.total("messages") if ran is not None else (None, None)
                extra = [fmt(recost(r.plan, sized)) if sized is not None else "—",
                         f"{fmt(got)} ({fmt(pred)} predicted)" if ran is not None else "—"]
            rows.append([s.label, s.mode, s.partitioning, fmt(r.probe_cost), rel, fmt(r.memory), len(r.plan.stores),
                         len(r.plan.nodes), *extra,
                         # a plan family is built, not solved: no ILP status or solve time to show
                         *((f"{r.ilp.solve_seconds:.3f}", r.ilp.status) if planners.planner_of(s.planner).ilp
                           else ("—", "built, no ILP" + _same_plan(s, r, seen)))])
            marks.append(_is_current(s, m))
            seen.append((s, r))
        measured = [] if counts is None else ["probe cost on measured sizes",
                                              f"probe messages measured in {counts.label}"]
        self.table.value = table(["planner", "mode", "partitioning", "probe cost", "vs CLASH individual/single",
                                  "memory", "stores", "steps", *measured, "solve s", "status"], rows, marked=marks)
        alone = ", ".join(p for p in planners.PLANNERS if not planners.planner_of(p).joint)
        self.status.value = (f'<span style="font-size:14px">{len(self.plans)} plans, MIRs '
                             f"{'on' if m.mirs else 'off'} (always on for the planners made of MIR stores); shaded: "
                             f"the explorer's current setting; {alone} plan each query alone (their mqo is their "
                             f"shared).{esc(_rule_twins(self.plans))} probe cost: "
                             f"tuples the probes ship per second; {esc(memory_basis(m.workload))}</span>")

    def show_diff(self) -> None:
        """Show the plan diff between the plans chosen as A and B (of any planners)."""
        a, b = self.plans.get(self.a.value), self.plans.get(self.b.value)
        if a is None or b is None:
            self.diff.value = ""
            return
        d = plan_diff(a.plan, b.plan)
        parts = [f'<pre style="font-size:14px;margin:2px 0">{esc(d.summary(max_lines=0).splitlines()[0])}</pre>']
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
