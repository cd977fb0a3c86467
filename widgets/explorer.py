"""The Explorer: every view of a workload in one widget.

``Explorer(workload)`` makes one :class:`~mqjoin.widgets.model.ExplorerModel` and lays out
the views that observe it: an options bar (mode, partitioning policy, MIRs, solver), a
status line (probe cost, memory, stores, ILP status; errors inline), and tabs — query
graph and editor, probe trees, ILP, comparisons, plan diagram, a **Deploy** slot and
**Adaptivity** (:class:`~mqjoin.widgets.adaptivity.AdaptivityPanel`: the current workload run
live in epochs on the reference executor, adaptive or static, with the epoch timeline and
queries added or removed while it runs), and **JAQPOT**
(:class:`~mqjoin.widgets.jaqpot_view.JaqpotView`: a query's binary plan under a CPU limit μ —
half-way joins, path productivities, the allocations of GrePP, the discrete DP and the JAQPOT
policy).  The Adaptivity and JAQPOT tabs are built when first opened (or
:attr:`Explorer.adaptivity` / :attr:`Explorer.jaqpot` first read), and nothing runs before
Run is clicked.  The options bar's *planner* menu lists every plan family of
:data:`mqjoin.planners.registry.PLANNERS` (CLASH's ILP, MJoin, binary trees of a chosen shape), so the
views show one workload's plans family by family.
The **PMJoin** tab (:class:`~mqjoin.widgets.pmjoin_view.PMJoinView`) shows the communication
cost per scheme and the per-group plans of PMJoin over the relations' nodes; give it per-value
rates with ``explorer.pmjoin.rates = value_rates(workload, tables)`` and ``refresh()``.

``Explorer(workload, data=folder)`` (or tables) plans on that data as ``mqjoin run`` does: the
horizon its span and the statistics measured again where a sampled check of the data
contradicts the workload's (:func:`mqjoin.datasets.fitting.fit_inputs`); a line under the
status says which statistics the plan is chosen on and what they were taken on, and a Deploy
replays that data.  A Deploy on other data (TPC-H at a scale factor, a folder chosen in the
Deploy tab) plans every tab on that data the same way before it deploys
(:meth:`~mqjoin.widgets.model.ExplorerModel.plan_on`), and choosing synthetic streams there goes
back to the workload's own statistics.

The Deploy slot is a placeholder until a panel is attached with
:meth:`Explorer.attach_deploy` (or the ``deploy=`` argument): a widget, or a factory called
with ``plan_provider`` — a function returning the current plan, e.g.
``Explorer(w, deploy=lambda plan_provider: DeployPanel(plan_provider))``.  Opening the
Deploy tab starts the panel's Spark session and Python workers in the background
(:meth:`~mqjoin.widgets.deploy_panel.DeployPanel.prepare`), so that a Deploy clicked a little
later finds them running; ``Explorer(..., spark_ahead=True)`` starts them as soon as the
explorer is built.  That is not the default: a JVM starting beside the kernel takes the
CPU from it for tens of seconds on a small machine, and a page reloaded meanwhile may not get
the widgets' state from the kernel within the browser's wait (4 s in ipywidgets 8).

Each view is also usable alone (``QueryGraphView(w)``, ``ProbeTreeView(w)``, …) or on a
shared model (``ProbeTreeView(explorer.model)``).

Responsiveness: a notebook kernel with plotly imported holds a great many long-lived objects
(plotly imports nbformat and jsonschema, whose URI grammar alone is a large parser), and a
full garbage collection rescans them all, which takes longer than the rest of a slider's
round trip.  The model pauses the collector for the round trip only
(:func:`~mqjoin.support.gcpause.paused_gc`), so the short-lived objects of an optimisation and a
redraw die by reference counting instead of being promoted to the oldest generation, and full
collections become rare (``benchmarks/explorer_latency.py`` measures the round trip; the
figures are in ``benchmarks/RESULTS.md``, "Explorer: a slider's round trip and the garbage
collector").  The kernel's collector is left as it was.  ``Explorer(..., gc_freeze=True)`` additionally moves the
objects that exist then to Python's permanent generation once per process (``gc.freeze()``:
then no round trip ever rescans them); it is off by default because it changes the whole
kernel — objects frozen that later become garbage are not reclaimed until ``gc.unfreeze()``.

>>> ex = Explorer("paper_v2.yaml", debounce=0)
>>> [ex.tabs.get_title(i) for i in range(len(ex.tabs.children))]
['Query graph', 'Probe trees', 'ILP', 'Compare', 'Plan diagram', 'Deploy', 'Adaptivity', 'JAQPOT', 'PMJoin']
>>> ex.show("Adaptivity")
>>> ex.adaptivity.run_button.description, ex.adaptivity.sources
('Run', [])
>>> ex.model.result.probe_cost
700.0
>>> ex.options.mode.value = "individual"
>>> ex.model.result.probe_cost
800.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from mqjoin.planning.ilp import POLICIES, SOLVERS
from mqjoin.planning.optimizer import MODES
from mqjoin.planners import registry as planners
from mqjoin.planning.result import family
from mqjoin.support.units import memory_basis

from mqjoin.widgets._html import error_box, esc
from mqjoin.widgets.compare import ComparisonView
from mqjoin.widgets.diagram import PlanDiagramView
from mqjoin.widgets.figures import fmt
from mqjoin.widgets.graph import QueryGraphView
from mqjoin.widgets.ilp_view import IlpView
from mqjoin.widgets.model import ExplorerModel, ModelView
from mqjoin.widgets.pmjoin_view import PMJoinView
from mqjoin.widgets.trees import ProbeTreeView

TAB_TITLES = ("Query graph", "Probe trees", "ILP", "Compare", "Plan diagram", "Deploy", "Adaptivity", "JAQPOT",
              "PMJoin")
DEPLOY_PLACEHOLDER = ("<i>No Deploy panel attached. Attach one with "
                      "<code>explorer.attach_deploy(lambda plan_provider: DeployPanel(plan_provider))</code>.</i>")


_FROZEN = False


def _freeze_once() -> None:
    """``gc.freeze()`` once per process (see the module doc)."""
    global _FROZEN
    if not _FROZEN:
        import gc

        gc.collect()
        gc.freeze()
        _FROZEN = True


class OptionsBar(W.HBox):
    """Optimiser options of a model: plan family (every planner of
    :data:`mqjoin.planners.registry.PLANNERS` as registered when the bar is made, a binary tree's shape),
    mode, partitioning policy, MIRs, solver."""

    def __init__(self, model: ExplorerModel):
        self.model = model
        self._syncing = False
        self.planner = W.Dropdown(options=list(planners.PLANNERS), value=model.planner, description="planner",
                                  layout=W.Layout(width="170px"))
        self.tree_shape = W.Dropdown(options=list(planners.TREE_SHAPES), value=model.tree_shape or "best",
                                     description="tree", disabled=not planners.planner_of(model.planner).tree_shapes,
                                     layout=W.Layout(width="150px"))
        self.planner.observe(lambda ch: self._planner(ch["new"], self.tree_shape.value), "value")
        self.tree_shape.observe(lambda ch: self._planner(self.planner.value, ch["new"]), "value")
        self.mode = W.ToggleButtons(options=list(MODES), value=model.mode, description="mode",
                                    style={"button_width": "86px"})
        self.partitioning = W.ToggleButtons(options=list(POLICIES), value=model.partitioning,
                                            description="partitioning", style={"button_width": "76px"})
        self.mirs = W.Checkbox(value=model.mirs, description="MIRs", indent=False, layout=W.Layout(width="70px"))
        self.solver = W.Dropdown(options=list(SOLVERS), value=model.solver, description="solver",
                                 layout=W.Layout(width="160px"))
        for name in ("mode", "partitioning", "mirs", "solver"):
            getattr(self, name).observe(lambda ch, name=name: self._changed(name, ch["new"]), "value")
        model.observe(self._sync, "options")
        super().__init__([self.planner, self.tree_shape, self.mode, self.partitioning, self.mirs, self.solver],
                         layout=W.Layout(flex_flow="row wrap"))

    def _changed(self, name: str, value: Any) -> None:
        if not self._syncing:
            self.model.set_options(**{name: value})

    def _planner(self, planner: str, shape: str) -> None:
        shapes = planners.planner_of(planner).tree_shapes
        self.tree_shape.disabled = not shapes
        if not self._syncing:
            self.model.set_options(planner=planner, tree_shape=shape if shapes else None)

    def _sync(self, change=None) -> None:
        self._syncing = True
        try:
            for name in ("mode", "partitioning", "mirs", "solver", "planner"):
                getattr(self, name).value = getattr(self.model, name)
            self.tree_shape.value = self.model.tree_shape or "best"
            self.tree_shape.disabled = not planners.planner_of(self.model.planner).tree_shapes
        finally:
            self._syncing = False


class StatusLine(W.VBox):
    """The model's current plan in one line, plus its error (if any) — unless ``shown_beside()``
    says a control's edit made it and its view shows it beside that control."""

    def __init__(self, model: ExplorerModel, shown_beside: Callable[[], bool] = lambda: False):
        self.model = model
        self.shown_beside = shown_beside
        self.summary = W.HTML("")
        self.error = W.HTML("")
        model.observe(self._on_error, "error")
        model.observe(lambda _: self.refresh(), ["result", "busy"])
        super().__init__([self.summary, self.error])
        self.refresh()

    def _on_error(self, change) -> None:
        self.error.value = "" if self.shown_beside() else error_box(change["new"])

    def refresh(self) -> None:
        m = self.model
        if m.busy:
            self.summary.value = "<i>optimizing …</i>"
            return
        r = m.result
        if r is None:
            self.summary.value = "<i>no plan</i>"
            return
        i = r.ilp
        ilp = planners.planner_of(r.planner).ilp
        named = "" if ilp else f"{family(r.planner, r.tree_shape)} "
        # the planner that ran: CLASH's ILP with its solve, else the plan family (no ILP was solved)
        ran = (f"ILP {esc(i.status)} ({i.variables} variables, solved in {i.solve_seconds:.3f} s)" if ilp
               else f"planned by {esc(family(r.planner, r.tree_shape))}, no ILP")
        t = r.tie_break
        # plans within the sampled sizes' error tie: say when the least-memory one replaced the optimum
        tie = ("" if t is None or not t.changed(r.memory) else
               f" · <span title=\"{esc(t.changes(r.probe_cost, r.memory))}\" style=\"border-bottom:1px dotted #888\">"
               f"tie on sampled sizes: cost {r.probe_cost / t.optimum_cost - 1:+.1%}, "
               f"memory {r.memory / t.optimum_memory - 1:+.1%}</span>")
        self.summary.value = (
            f'<span style="font-size:15px"><b>{esc(named)}{esc(r.mode)}/{esc(r.partitioning)}</b> · probe cost '
            f"<b>{fmt(r.probe_cost)}</b> tuples/s · <span title=\"{esc(memory_basis(r.plan.workload))}\" "
            f"style=\"border-bottom:1px dotted #888\">memory</span> <b>{fmt(r.memory)}</b> tuples · "
            f"{len(r.plan.stores)} stores · {len(r.plan.nodes)} steps · {ran}{tie}</span>")


class Explorer(ModelView, W.VBox):
    """One widget with every view of a workload (see the module doc)."""

    def __init__(self, workload, *, mode: str = "mqo", partitioning: str = "single", mirs: bool = True,
                 solver: str = "highs", time_limit: float | None = None, debounce: float = 0.03, grid: int = 8,
                 deploy: W.Widget | Callable[[Callable[[], Any]], W.Widget] | str | None = "spark",
                 gc_freeze: bool = False, spark_ahead: bool = False, data: Any = None):
        # the explorer's controls send on release or Enter, not while dragging or typing: a short
        # debounce (30 ms: the messages of a burst already on the wire) merges a burst of edits
        # and adds little to an edit's round trip
        self.own_model(workload, mode=mode, partitioning=partitioning, mirs=mirs, solver=solver,
                       time_limit=time_limit, debounce=debounce, data=data)
        #: which statistics the plan is chosen on, and what data they were taken on (with ``data=``)
        self.statistics_line = W.HTML("")
        self._show_statistics()
        self.model.observe(lambda _: self._show_statistics(), "data")
        self.options = OptionsBar(self.model)
        # an edit's error shows beside its control; the status line shows the others (a failed solve)
        self.status = StatusLine(self.model, shown_beside=lambda: self.graph.editing)
        self.graph = QueryGraphView(self.model, errors=False)
        self.trees = ProbeTreeView(self.model)
        self.ilp = IlpView(self.model)
        self.compare = ComparisonView(self.model)
        self.diagram = PlanDiagramView(self.model, grid=grid)
        #: the Deploy tab's content: a placeholder until :meth:`attach_deploy`
        self.deploy_slot = W.VBox([W.HTML(DEPLOY_PLACEHOLDER)])
        self.deploy_panel: W.Widget | None = None
        #: the Adaptivity tab's content: the panel is built on first use (see :attr:`adaptivity`)
        self.adaptivity_slot = W.VBox([W.HTML("<i>opening …</i>")])
        self._adaptivity: Any = None
        #: the JAQPOT tab's content: the panel is built on first use (see :attr:`jaqpot`)
        self.jaqpot_slot = W.VBox([W.HTML("<i>opening …</i>")])
        self._jaqpot: Any = None
        self.pmjoin = PMJoinView(self.model, shown=lambda: self._showing("PMJoin"))
        self.tabs = W.Tab(children=[self.graph, self.trees, self.ilp, self.compare, self.diagram, self.deploy_slot,
                                    self.adaptivity_slot, self.jaqpot_slot, self.pmjoin])
        for k, t in enumerate(TAB_TITLES):
            self.tabs.set_title(k, t)
        self.tabs.observe(self._on_tab, "selected_index")
        #: one click writes the handout (:mod:`~mqjoin.widgets.report`) of what the explorer shows
        self.handout_button = W.Button(description="Handout", icon="download",
                                       tooltip="write one HTML file of the workload, plan, Compare, frontier and runs "
                                               "(opens offline; ExplorerModel.from_report reopens it)")
        self.handout_line = W.HTML("")
        self.handout_button.on_click(lambda _: self.handout())
        super().__init__([self.options, self.status, self.statistics_line,
                          W.HBox([self.handout_button, self.handout_line]), self.tabs])
        if deploy == "spark":  # the default: deploy the current plan on a local Spark session
            from mqjoin.widgets.deploy_panel import DeployPanel

            deploy = functools.partial(DeployPanel, data=self.model.data)  # a Deploy replays the data given
        if deploy is not None:
            self.attach_deploy(deploy)
        prepare = getattr(self.deploy_panel, "prepare", None)
        if spark_ahead and prepare is not None:
            prepare()  # the Spark session and its workers start while the user looks at the plan
        if gc_freeze:
            _freeze_once()

    def _show_statistics(self) -> None:
        """The line saying which data the plan is chosen for (hidden without data)."""
        line = self.model.statistics
        self.statistics_line.value = f'<span style="font-size:14px;color:#555">{esc(line)}</span>' if line else ""
        self.statistics_line.layout.display = None if line else "none"

    def _on_tab(self, change) -> None:
        if change["new"] == TAB_TITLES.index("Deploy"):
            prepare = getattr(self.deploy_panel, "prepare", None)
            if prepare is not None:
                prepare()  # the Spark session starts while the user looks at the panel
        elif change["new"] == TAB_TITLES.index("Compare"):
            self.compare.ensure_fresh()
        elif change["new"] == TAB_TITLES.index("Adaptivity"):
            self.adaptivity  # noqa: B018 — builds the panel
        elif change["new"] == TAB_TITLES.index("JAQPOT"):
            self.jaqpot  # noqa: B018 — builds the panel
        elif change["new"] == TAB_TITLES.index("PMJoin"):
            self.pmjoin.ensure_fresh()

    def _showing(self, tab: str) -> bool:
        tabs = getattr(self, "tabs", None)  # None while the explorer is being built
        return tabs is not None and tabs.selected_index == TAB_TITLES.index(tab)

    @property
    def adaptivity(self):
        """The Adaptivity tab's :class:`~mqjoin.widgets.adaptivity.AdaptivityPanel` (built on
        first use)."""
        if self._adaptivity is None:
            from mqjoin.widgets.adaptivity import AdaptivityPanel

            self._adaptivity = AdaptivityPanel(self.model)
            self.adaptivity_slot.children = [self._adaptivity]
        return self._adaptivity

    @property
    def jaqpot(self):
        """The JAQPOT tab's :class:`~mqjoin.widgets.jaqpot_view.JaqpotView` (built on first
        use)."""
        if self._jaqpot is None:
            from mqjoin.widgets.jaqpot_view import JaqpotView

            self._jaqpot = JaqpotView(self.model)
            self.jaqpot_slot.children = [self._jaqpot]
        return self._jaqpot

    def handout(self, path: str = "handout.html") -> str | None:
        """Write the handout (:func:`~mqjoin.widgets.report.write_report`) of the workload, its
        plan and the Deploy panel's runs to ``path``; the line beside the button links it, or
        says why not.  Returns the path written (None on an error)."""
        from mqjoin.model.errors import MqjoinError
        from mqjoin.widgets.report import write_report

        self.handout_line.value = "<i>writing the handout (Compare and the frontier are solved) …</i>"
        try:
            p = write_report(self.model, path, runs=list(getattr(self.deploy_panel, "deployments", ()) or ()))
        except MqjoinError as e:
            self.handout_line.value = error_box(str(e))
            return None
        self.handout_line.value = (f'handout written: <a href="{esc(p.name)}" target="_blank">{esc(str(p))}</a> — '
                                   f"opens offline; <code>ExplorerModel.from_report({esc(repr(str(p)))})</code> "
                                   "reopens it here")
        return str(p)

    def attach_deploy(self, panel: W.Widget | Callable[[Callable[[], Any]], W.Widget]) -> W.Widget:
        """Put a Deploy panel into the Deploy tab: a widget, or a factory called with a
        function that returns the current plan (:meth:`ExplorerModel.current_plan`)."""
        widget = panel if isinstance(panel, W.Widget) else panel(self.model.current_plan)
        if isinstance(getattr(widget, "on_measured", None), list):  # its runs' counts colour the probe trees
            widget.on_measured.append(self.model.set_measured)
        # a Deploy on data re-plans every tab on it, when the panel deploys the model's plans
        if getattr(widget, "plan_provider", None) == self.model.current_plan and widget.plan_on is None:
            widget.plan_on = self.model.plan_on
        self.deploy_panel = widget
        self.deploy_slot.children = [widget]
        return widget

    def close(self) -> None:
        """Close the widget with its panels, and the model when the explorer made it
        (:class:`~mqjoin.widgets.model.ModelView`)."""
        # getattr: ipywidgets also closes a half-built explorer when it is collected
        for panel in (getattr(self, name, None) for name in ("deploy_panel", "_adaptivity", "_jaqpot")):
            if panel is not None:
                panel.close()
        super().close()

    def show(self, tab: str) -> None:
        """Select a tab by title (e.g. ``"Probe trees"``)."""
        self.tabs.selected_index = TAB_TITLES.index(tab)
