"""The partitions view: the skew a cluster would see, before renting one.

For the current plan and the panel's input, every store's rows in its fullest partition
against the partition count ``P`` (8, 32, 128 by default; log axes): the cost model's dashed,
the data's measured solid, one colour per store
(:func:`mqjoin.runtime.partitions.project`, what ``mqjoin partitions`` prints).  A store
partitioned on an attribute with few distinct values stops falling once ``P`` passes them —
``nationkey``'s 25 values cap its parallelism.  The projection runs the vectorised executor
over the input once, off the kernel's thread, when **Project** is clicked.

>>> from mqjoin.runtime.partitions import Projection
>>> rows = [Projection("R[a]", "R.a", P, 25, model_messages=10.0, model_rows=100 / min(P, 25), rows_max=n)
...         for P, n in ((8, 13), (32, 4), (128, 4))]
>>> traces, layout = partition_traces(rows)
>>> [(t["name"], t["line"]["dash"], t["y"]) for t in traces]
[('R[a] measured', 'solid', [13, 4, 4]), ('R[a] model', 'dash', [12.5, 4.0, 4.0])]
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as W

from mqjoin.widgets._html import esc
from mqjoin.widgets._kernel import spawn
from mqjoin.widgets.charts import PLAN_COLOURS
from mqjoin.widgets.figures import new_figure_widget, sync_figure

_log = logging.getLogger(__name__)

#: the partition counts projected by default
COUNTS = (8, 32, 128)


def partition_traces(rows: Sequence[Any]) -> tuple[list[dict], dict]:
    """Traces and layout of :class:`~mqjoin.runtime.partitions.Projection` rows: per store,
    the measured rows of its fullest partition (solid; when measured) and the model's (dashed)
    against the partition count."""
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(r.store, []).append(r)
    traces = []
    for i, (store, rs) in enumerate(sorted(by.items())):
        rs = sorted(rs, key=lambda r: r.partitions)
        colour = PLAN_COLOURS[i % len(PLAN_COLOURS)]
        xs = [r.partitions for r in rs]
        if all(r.rows_max is not None for r in rs):
            traces.append(dict(type="scatter", mode="lines+markers", name=f"{store} measured", x=xs,
                               y=[r.rows_max for r in rs], legendgroup=store, line={"color": colour, "dash": "solid"},
                               hovertemplate=f"{esc(store)}<br>P=%{{x}}: %{{y:,}} rows in the fullest partition"
                                             "<extra>measured</extra>"))
        traces.append(dict(type="scatter", mode="lines", name=f"{store} model", x=xs, y=[r.model_rows for r in rs],
                           legendgroup=store, line={"color": colour, "dash": "dash"},
                           hovertemplate=f"{esc(store)}<br>P=%{{x}}: %{{y:,.0f}} rows in the fullest partition"
                                         "<extra>model</extra>"))
    layout = {"height": 420, "margin": {"t": 40, "b": 50, "l": 70, "r": 20},
              "title": {"text": "rows in the fullest partition of every store (model dashed, measured solid)"},
              "xaxis": {"title": {"text": "partitions per store"}, "type": "log"},
              "yaxis": {"title": {"text": "rows"}, "type": "log"}, "legend": {"font": {"size": 10}}}
    return traces, layout


class PartitionsView(W.VBox):
    """A **Project** button, a status line and the figure of :func:`partition_traces` for the
    plan of ``plan_provider()`` over the input of ``data_provider()`` (tables)."""

    def __init__(self, plan_provider: Callable[[], Any], data_provider: Callable[[], Mapping[str, Any]],
                 counts: Sequence[int] = COUNTS):
        self.plan_provider, self.data_provider, self.counts = plan_provider, data_provider, tuple(counts)
        self.button = W.Button(description="Project", icon="th", tooltip="count every store's rows per partition "
                               f"at {', '.join(map(str, self.counts))} partitions on the input")
        self.status = W.HTML("the skew a cluster would see: press Project")
        traces, layout = partition_traces([])
        self.figure = new_figure_widget(traces, layout)
        self.rows: list = []
        self.thread: threading.Thread | None = None
        self.button.on_click(lambda _: self.project())
        super().__init__([W.HBox([self.button, self.status]), self.figure])

    def project(self) -> threading.Thread:
        """Run the projection on a thread of its own (the figure follows when it ends)."""
        self.button.disabled = True
        self.status.value = "counting rows per partition on the input …"
        self.thread = spawn(self._run, "mqjoin-partitions")
        return self.thread

    def _run(self) -> None:
        from mqjoin.runtime.partitions import project

        try:
            self.rows = project(self.plan_provider(), self.data_provider(), self.counts)
            traces, layout = partition_traces(self.rows)
            sync_figure(self.figure, traces, layout)
            capped = sorted({(r.store, r.distinct) for r in self.rows if r.distinct and r.distinct < max(self.counts)})
            self.status.value = ("done" + (": capped by few distinct values — " + ", ".join(
                f"{esc(s)} ({d})" for s, d in capped) if capped else ""))
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("projecting the partitions failed")
            self.status.value = f"<b>error</b> — {esc(str(e))}"
        finally:
            self.button.disabled = False
