"""The PMJoin view: communication cost per scheme and the per-group plans of every PMJoin.

PMJoin (:mod:`mqjoin.planners.pmjoin`) places each query's MJoins at the nodes of its streams and
splits the streams of a PMJoin into ``D`` groups of join values, each with its own
placement.  The view shows, for the model's workload, a table of the communication cost of
the centralized, distributed and partition-based schemes per query, and per PMJoin its value
groups with their trees (``(S2 ⋈ S1)@n1``: ``S2`` is shipped to ``n1``) and costs.  The
number of groups, the partitioning method and the tuple sizes are controls; per-value rates
come from data (``rates=``, e.g. :func:`mqjoin.planners.pmjoin.value_rates` of the run's tables) —
without them only ``D = 1`` is possible, and a larger ``D`` shows the planner's message.

>>> from mqjoin.planners.pmjoin import EXAMPLE_1, EXAMPLE_1_VALUE_RATES
>>> from mqjoin.model.workload import parse_workload
>>> view = PMJoinView(parse_workload(EXAMPLE_1), rates=EXAMPLE_1_VALUE_RATES, debounce=0)
>>> view.groups.value = 3
>>> round(view.report.queries[0].partitioned, 4), "0.036" in view.plans.value
(0.0696, True)
"""

from __future__ import annotations

import ipywidgets as W

from mqjoin.model.errors import MqjoinError
from mqjoin.planners.pmjoin import METHODS, SIZES, PMJoinOptions, PMJoinReport, ValueRates, pmjoin_report

from mqjoin.widgets._html import error_box, esc, table
from mqjoin.widgets.figures import fmt
from mqjoin.widgets.model import ModelView


class PMJoinView(ModelView, W.VBox):
    """Communication cost per scheme and per-group plans of PMJoin over an
    :class:`ExplorerModel` (or a workload: then it makes its own model with ``model_kw``)."""

    def __init__(self, model, rates: ValueRates | None = None, **model_kw):
        self.own_model(model, **model_kw)
        self.rates = rates
        self.groups = W.BoundedIntText(value=1, min=1, max=1024, description="groups D", continuous_update=False,
                                       layout=W.Layout(width="170px"))
        self.method = W.Dropdown(options=METHODS, value="rate", description="partition",
                                 layout=W.Layout(width="200px"))
        self.sizes = W.Dropdown(options=SIZES, value="sum", description="tuple sizes", layout=W.Layout(width="200px"))
        self.error = W.HTML()
        self.costs = W.HTML()
        self.plans = W.HTML()
        #: the report shown (``None`` while the options give an error)
        self.report: PMJoinReport | None = None
        for c in (self.groups, self.method, self.sizes):
            c.observe(lambda _: self.refresh(), "value")
        self.model.observe(lambda _: self.refresh(), "workload")
        super().__init__([W.HBox([self.groups, self.method, self.sizes]), self.error, self.costs, self.plans])
        self.refresh()

    def refresh(self) -> None:
        options = PMJoinOptions(self.rates, self.groups.value, self.method.value, self.sizes.value)
        try:
            self.report = pmjoin_report(self.model.workload, options)
        except MqjoinError as e:
            self.report = None
            self.error.value, self.costs.value, self.plans.value = error_box(str(e)), "", ""
            return
        self.error.value = ""
        qs = self.report.queries
        self.costs.value = "<b>communication cost (bytes/s)</b>" + table(
            ["query", "centralized", "at", "distributed", "partition-based", "plan without partitioning"],
            [[qp.query, fmt(qp.centralized), qp.centralized_node, fmt(qp.distributed), fmt(qp.partitioned),
              str(qp.tree)] for qp in qs])
        blocks = []
        for qp in qs:
            for pm in qp.pmjoins:
                rows = [[", ".join(map(str, g.values[:8])) + (" …" if len(g.values) > 8 else "") or "all values",
                         len(g.values), str(g.tree), fmt(g.cost)] for g in pm.groups]
                blocks.append(f"<b>{esc(qp.query)}: {esc(pm)}</b>"
                              + table(["values", "#", "plan of the group", "cost"], rows))
        self.plans.value = "".join(blocks) or "<i>no PMJoin: no operator joins on one attribute only</i>"
