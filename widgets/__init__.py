"""Jupyter views of mqjoin values (ipywidgets + plotly), installed as ``mqjoin.widgets``.

Nothing in :mod:`mqjoin` imports this package (docs/architecture.md §1): the views observe engine values
and call the same functions as the CLI.  Architecture: one observable
:class:`ExplorerModel` (workload + options → :class:`~mqjoin.planning.optimizer.OptimizeResult`)
and views that watch it —

* :class:`QueryGraphView` — query graph and workload editor (:mod:`.graph`);
* :class:`ProbeTreeView` — the plan's probe-tree forest, paper Figure 4, and the operator
  trees of the mjoin/tree/ajoin/pmjoin planners as trees of stores (:mod:`.trees`);
* :class:`IlpView` — ILP size/status, chosen orders, objective by query and step, LP text
  (:mod:`.ilp_view`);
* :class:`ComparisonView` — every planner, mode and policy side by side with a plan diff
  (:mod:`.compare`);
* :class:`PlanDiagramView` — Picasso-style plan diagrams over two statistics
  (:mod:`.diagram`);
* :class:`EpochTimeline` — adaptive runs over their epochs: the plan active per epoch,
  latency, throughput, state, switches with their reasons and plan diffs;
  :class:`QueryChangesPanel` — queries added and removed while a run is live;
  :class:`AdaptivityPanel` — both, for runs of the model's workload (:mod:`.timeline`,
  :mod:`.query_changes`, :mod:`.adaptivity`; live sources and throttled redraws: :mod:`.live`);
* :class:`JaqpotView` — a query's binary plan under a CPU limit μ: half-way joins, path
  productivities, the allocations of GrePP, the discrete DP and the JAQPOT policy
  (:mod:`.jaqpot_view`);
* :class:`PMJoinView` — PMJoin's communication cost per scheme and per-group plans
  (:mod:`.pmjoin_view`);
* :class:`Explorer` — all of them in tabs, with a slot for a Deploy panel
  (:mod:`.explorer`; the panel itself is :mod:`.deploy_panel`).

Figures are pure functions of values (:mod:`.figures`, :mod:`.tree_figures`), as are plan diffs
(:mod:`mqjoin.planning.diff`, in the engine: the adaptive controller uses them too).

>>> from mqjoin.widgets import Explorer
>>> ex = Explorer("paper_v2.yaml", debounce=0)
>>> ex.model.set_selectivity("S.b = T.b", 0.5)
True
>>> ex.model.result.probe_cost
800.0
>>> ex.model.diff.changed_orders[0]
('q1', 'R', 'R » ST[a]', 'R » S[a] » T[b]')
>>> ex.tabs.get_title(6), type(ex.adaptivity).__name__
('Adaptivity', 'AdaptivityPanel')
"""

from mqjoin.widgets.compare import ComparisonView, compare_plans
from mqjoin.planning.diagram import PlanDiagram, SweepParam, log_grid, plan_diagram
from mqjoin.widgets.diagram import PlanDiagramView, plan_diagram_figure
from mqjoin.planning.diff import PlanDiff, plan_diff, plan_signature
from mqjoin.widgets.explorer import Explorer
from mqjoin.widgets.figures import query_graph_figure
from mqjoin.widgets.tree_figures import probe_tree_figure
from mqjoin.widgets.graph import QueryGraphView
from mqjoin.widgets.pmjoin_view import PMJoinView
from mqjoin.planning.attribution import cost_by_query, cost_by_step, order_costs
from mqjoin.widgets.ilp_view import IlpView, lp_model_text
from mqjoin.model.statistics import SelectivityGroup, selectivity_groups, with_class_selectivity
from mqjoin.widgets.model import ExplorerModel, as_workload
from mqjoin.widgets.adaptivity import AdaptivityPanel, paper_scenarios
from mqjoin.widgets.query_changes import QueryChangesPanel
from mqjoin.widgets.timeline import EpochTimeline, EpochView, epoch_view
from mqjoin.datasets.synthetic_paper import figure_8b_budget, sampled_workload
from mqjoin.widgets.jaqpot_view import JaqpotView
from mqjoin.widgets.trees import ProbeTreeView

__all__ = [
    "AdaptivityPanel",
    "ComparisonView",
    "EpochTimeline",
    "EpochView",
    "Explorer",
    "ExplorerModel",
    "IlpView",
    "JaqpotView",
    "PlanDiagram",
    "PlanDiagramView",
    "PMJoinView",
    "PlanDiff",
    "ProbeTreeView",
    "QueryChangesPanel",
    "QueryGraphView",
    "SelectivityGroup",
    "SweepParam",
    "as_workload",
    "compare_plans",
    "cost_by_query",
    "cost_by_step",
    "epoch_view",
    "figure_8b_budget",
    "log_grid",
    "lp_model_text",
    "order_costs",
    "paper_scenarios",
    "plan_diagram",
    "plan_diagram_figure",
    "plan_diff",
    "plan_signature",
    "probe_tree_figure",
    "query_graph_figure",
    "sampled_workload",
    "selectivity_groups",
    "with_class_selectivity",
]
