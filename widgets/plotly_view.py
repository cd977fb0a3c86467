"""A plotly figure as a widget whose state is the whole figure: views that survive the browser.

plotly's own ``FigureWidget`` keeps the figure in the kernel and sends the browser *edits*
(add these traces, restyle trace 3, delete trace 5), while its synced state keeps the figure
as it was first displayed.  A view that opens later — a page reload, a second view of the
notebook, a view whose front-end code loaded after some edits went by — draws that stale
state, and the edits that follow name traces it does not have (plotly.js fails on them, and
the kernel's reply handler raises ``ValueError: '<uid>' is not in list``).  Edits sent from a
live run's thread while the kernel thread handles the browser's replies race on the trace
list (``IndexError``).  Every ``FigureWidget`` also carries plotly's 5 MB front-end bundle in
its own state.

:class:`PlotlyView` keeps one synced value, ``figure`` — ``{"data": [...], "layout": {...}}``,
plain JSON — and replaces it whole on every update (one message; a value equal to the one
shown sends nothing).  Every view draws the current value with ``Plotly.react``, which
redraws only what changed, so a view opened at any time draws what the kernel holds, and no
update depends on what a view drew before.  The browser sends back only clicks.  plotly.js
is the copy the Python package ships (:func:`plotly.offline.get_plotlyjs`, offline: no CDN),
loaded once per page from the kernel's shared :class:`PlotlyLibrary` model — not in its
state (a reloaded page asks the kernel for the state of every widget and gives up after a
few seconds; 5 MB in that reply would miss the window on a loaded machine) but in the answer
to a message the page sends when its first figure is about to draw.

For the kernel side, ``view.data`` and ``view.layout`` are plotly objects of the figure shown
(built when read, not validated), so code and tests read traces by name as from a plotly
figure, and ``trace.on_click(callback)`` receives the browser's clicks on a trace (callbacks
stay with a trace of the same name and position across updates).

>>> v = PlotlyView([{"type": "scatter", "name": "a", "x": [1, 2], "y": [3.0, float("nan")]}], {"height": 200})
>>> v.figure["data"][0]["y"], v.figure["layout"]["template"]
([3.0, None], 'plotly_white')
>>> [t.name for t in v.data], v.layout.height
(['a'], 200)
>>> v.update([{"type": "bar", "name": "b", "x": ["p"], "y": [1]}], {"height": 200})
True
>>> [t.type for t in v.data], v.revision
(['bar'], 2)
>>> v.update([{"type": "bar", "name": "b", "x": ["p"], "y": [1]}], {"height": 200})  # nothing new to send
False
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import pathlib
import threading
from typing import Any

import anywidget
import ipywidgets as W
import traitlets as T

from mqjoin.widgets._kernel import unbound

#: plotly's template of every figure of the explorer
TEMPLATE = "plotly_white"


def plain(x: Any) -> Any:
    """``x`` as plain JSON values: numpy arrays and scalars as lists and numbers, NaN and
    infinities as None (a kernel refuses NaN on the wire), plotly objects as their JSON.

    >>> import numpy as np
    >>> plain({"x": np.arange(3), "y": (1.5, float("inf")), "n": np.int64(4)})
    {'x': [0, 1, 2], 'y': [1.5, None], 'n': 4}
    """
    if x is None or isinstance(x, (str, bool, int)):
        return x
    if isinstance(x, float):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "to_plotly_json"):
        return plain(x.to_plotly_json())
    if hasattr(x, "tolist"):  # numpy arrays and scalars, pandas series
        return plain(x.tolist())
    if isinstance(x, (_dt.datetime, _dt.date)):
        return x.isoformat()
    return str(x)


class PlotlyLibrary(W.Widget):
    """plotly.js and the figure templates, one model per kernel that every view's front end
    loads once per page (see the module doc).  Use :func:`library`.

    Its synced state is empty; the page asks with the message ``{"event": "plotly.js"}`` and
    the kernel answers ``{"event": "plotly.js", "templates": {...}}`` with plotly.js as the
    message's one binary buffer.  The answer names no request (:func:`.unbound`), as does
    the model's opening: the kernel then handles every page's message to the model on that
    page's own subshell, so a page reloaded or opened later still gets its answer.

    >>> lib = PlotlyLibrary()
    >>> sent = []
    >>> lib.send = lambda content, buffers=None: sent.append((content, buffers))
    >>> lib._on_request(lib, {"event": "plotly.js"}, [])
    >>> (content, (source,)), = sent
    >>> content["event"], list(content["templates"]), source[:40] == plotly_js()[:40]
    ('plotly.js', ['plotly_white'], True)
    """

    def __init__(self) -> None:
        super().__init__()
        self.on_msg(self._on_request)

    def _on_request(self, _widget, content: Any, _buffers) -> None:
        if not isinstance(content, dict) or content.get("event") != "plotly.js":
            return
        import plotly.io as pio

        with unbound():
            self.send({"event": "plotly.js", "templates": {TEMPLATE: plain(pio.templates[TEMPLATE].to_plotly_json())}},
                      buffers=[plotly_js()])


@functools.cache
def plotly_js() -> bytes:
    """plotly.js as the Python package ships it (UTF-8), read once."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode()


_library: PlotlyLibrary | None = None
_library_lock = threading.Lock()


def library() -> PlotlyLibrary:
    """The kernel's :class:`PlotlyLibrary` (made on first use; again if it was closed)."""
    global _library
    with _library_lock:
        if _library is None or _library.comm is None:
            with unbound():  # opened under no request: see the class doc
                _library = PlotlyLibrary()
        return _library


class _PlotlyAccess:
    """``data`` and ``layout`` of the figure shown, as plotly objects (before the widget base
    in the class's bases: ``layout`` here is plotly's, as in plotly's ``FigureWidget``)."""

    @property
    def data(self):
        return self._plotly().data

    @property
    def layout(self):
        return self._plotly().layout

    def to_dict(self) -> dict:
        return self._plotly().to_dict()


class PlotlyView(_PlotlyAccess, anywidget.AnyWidget):
    """A plotly figure drawn in every view from the whole figure (see the module doc)."""

    _esm = pathlib.Path(__file__).with_name("plotly_view.js")
    figure = T.Dict().tag(sync=True)
    #: bumped on every update; the browser's clicks say which revision they clicked on
    revision = T.Int(0).tag(sync=True)
    _library = T.Instance(PlotlyLibrary).tag(sync=True, **W.widget_serialization)

    def __init__(self, traces: list[dict] | tuple = (), layout: dict | None = None):
        self._lock = threading.RLock()
        self._shown: tuple[int, Any] | None = None  # (revision, its plotly figure), built when read
        self._names: tuple = ()
        self._structure_revision = 1
        super().__init__(figure=self._value(traces, layout or {}), revision=1, _library=library())
        self._names = self._names_of(self.figure)
        self.on_msg(self._on_frontend_msg)

    @staticmethod
    def _value(traces, layout) -> dict:
        return {"data": plain(list(traces)), "layout": plain({"template": TEMPLATE, **layout})}

    @staticmethod
    def _names_of(figure: dict) -> tuple:
        return tuple((t.get("type", "scatter"), t.get("name")) for t in figure["data"])

    def update(self, traces: list[dict], layout: dict) -> bool:
        """Show ``traces`` and ``layout`` (from any thread); whether anything was sent."""
        new = self._value(traces, layout)
        with self._lock:
            if new == self.figure:
                return False
            names = self._names_of(new)
            with self.hold_sync():  # one message: the figure and its revision
                self.revision += 1
                self.figure = new
            if names != self._names:
                self._names, self._structure_revision = names, self.revision
        return True

    # -- the kernel's reading of the figure ------------------------------------------------------

    def _plotly(self):
        """The plotly figure of ``figure``; click callbacks stay with the traces of the same
        position, type and name as in the figure read before."""
        with self._lock:
            old = self._shown
            if old is None or old[0] != self.revision:
                import plotly.graph_objects as go

                fig = go.Figure(data=self.figure["data"], layout=self.figure["layout"], _validate=False)
                if old is not None:
                    for t, o in zip(fig.data, old[1].data):
                        if (t.type, t.name) == (o.type, o.name):
                            t._click_callbacks[:] = o._click_callbacks
                self._shown = (self.revision, fig)
            return self._shown[1]

    # -- the browser's clicks -------------------------------------------------------------------

    def _on_frontend_msg(self, _widget, content: dict, _buffers) -> None:
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        if int(content.get("revision") or 0) < self._structure_revision:
            return  # clicked on traces that have been replaced since
        from plotly.callbacks import Points

        data = self.data
        by_trace: dict[int, list[int]] = {}
        for p in content.get("points") or ():
            ti, pi = p.get("trace"), p.get("point")
            if isinstance(ti, int) and 0 <= ti < len(data) and isinstance(pi, int):
                by_trace.setdefault(ti, []).append(pi)
        for ti, inds in by_trace.items():
            t = data[ti]
            xs = [t.x[i] if t.x is not None and i < len(t.x) else None for i in inds]
            ys = [t.y[i] if t.y is not None and i < len(t.y) else None for i in inds]
            t._dispatch_on_click(Points(point_inds=inds, xs=xs, ys=ys, trace_name=t.name, trace_index=ti), None)


__all__ = ["PlotlyLibrary", "PlotlyView", "TEMPLATE", "library", "plain", "plotly_js"]
