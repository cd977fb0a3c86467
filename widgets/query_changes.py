"""Query changes while an adaptive run is live.

:class:`QueryChangesPanel` adds a query (name, text in paper notation or equalities — or
both at once as a query list shows them, ``q9: R(a), S(a)`` — optional selectivities,
:func:`parse_selectivities`) or removes one while a run is live;
it shows the current event time and epoch and every change with its activation epoch
(pending or active).  The source and its redraws are :mod:`mqjoin.widgets.live`'s.

>>> panel = QueryChangesPanel()
>>> panel.clock.value, panel.add_button.disabled
('<i>no run: start one to add or remove queries while it runs</i>', True)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import ipywidgets as W

from mqjoin.model.errors import AdaptiveError, MqjoinError
from mqjoin.model.queries import split_query_name

from mqjoin.widgets._html import error_box, esc, info_box, table
from mqjoin.widgets.live import ENDED, Redraw, is_live, snapshot, status_of

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# query changes while a run is live
# --------------------------------------------------------------------------------------------


def parse_selectivities(text: str) -> dict[str, float]:
    """Selectivities typed into the panel: one ``equality: value`` per line (YAML), e.g.
    ``S.a = T.a: 0.01``.

    >>> parse_selectivities("S.a = T.a: 0.01\\nT.b = U.b: 0.5")
    {'S.a = T.a': 0.01, 'T.b = U.b': 0.5}
    >>> parse_selectivities("S.a = T.a")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: selectivities: write one 'equality: value' per line, e.g. 'S.a = T.a: 0.01'
    """
    import yaml

    if not text.strip():
        return {}
    hint = "selectivities: write one 'equality: value' per line, e.g. 'S.a = T.a: 0.01'"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise AdaptiveError(hint) from None
    if not isinstance(data, Mapping):
        raise AdaptiveError(hint)
    out = {}
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise AdaptiveError(f"selectivities: the value of {k!r} must be a number in (0, 1], got {v!r}")
        out[str(k)] = float(v)
    return out


def _current_epoch(run, event_time: float | None) -> int | None:
    if event_time is None:
        return run.epochs[-1].epoch if run.epochs else None
    return run.policy.epoch_of(event_time)


class QueryChangesPanel(W.VBox):
    """Add and remove queries while a run is live (see the module doc).  The text typed is
    kept when a change is refused; the error is shown in the panel."""

    def __init__(self, source: Any = None, *, min_interval: float = 0.5):
        self.source: Any = None
        self.changes: list[dict] = []  # change events seen (submitted here or elsewhere)
        self._redraw = Redraw(self._draw, min_interval)
        self.clock = W.HTML("<i>no run</i>")
        self.name = W.Text(description="name", placeholder="q9", layout=W.Layout(width="180px"))
        self.text = W.Text(description="query", placeholder="R(a), S(a,b), T(b)  or  R.a = S.a AND S.b = T.b",
                           layout=W.Layout(width="440px"))
        self.selectivities = W.Textarea(description="selectivities",
                                        placeholder="S.b = T.b: 0.01   (optional, one per line)",
                                        layout=W.Layout(width="440px", height="52px"))
        self.add_button = W.Button(description="Add query", button_style="primary", icon="plus")
        self.remove_choice = W.Dropdown(options=[], description="query", layout=W.Layout(width="200px"))
        self.remove_button = W.Button(description="Remove", button_style="warning", icon="minus")
        self.message = W.HTML("")
        self.table = W.HTML("")
        self.add_button.on_click(lambda _: self.add())
        self.remove_button.on_click(lambda _: self.remove())
        super().__init__([
            self.clock,
            W.HBox([self.name, self.text, self.add_button]),
            self.selectivities,
            W.HBox([self.remove_choice, self.remove_button]),
            self.message,
            self.table,
        ])
        if source is not None:
            self.attach(source)
        else:
            self.refresh()

    def attach(self, source: Any) -> None:
        """Direct the panel at another run (e.g. the latest one started)."""
        self.source = source
        self.changes = []
        if is_live(source):
            source.subscribe(lambda ev, source=source: self._on_event(source, ev))
        self.message.value = ""
        self.refresh()

    def _on_event(self, source: Any, ev: Mapping[str, Any]) -> None:
        if source is not self.source:
            return
        if ev.get("kind") == "change":
            self.changes.append(dict(ev))
        if ev.get("kind") in ("epoch", "change", "status"):
            self._redraw.request(force=ev.get("kind") != "epoch")

    # -- actions ----------------------------------------------------------------------------

    def _check_live(self) -> None:
        if self.source is None:
            raise AdaptiveError("no run: start one first (Run in the Adaptivity tab, or QueryChangesPanel(replay))")
        if not is_live(self.source):
            raise AdaptiveError("this run is finished: queries can only be added to or removed from a live run")
        st = status_of(self.source)
        if st != "running":
            raise AdaptiveError(f"the run is {st}: queries can only be added to or removed from a running run")

    def _submit(self, **change: Any) -> int | None:
        try:
            self._check_live()
            return int(self.source.submit(**change))
        except MqjoinError as e:
            self.message.value = error_box(str(e))
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("submitting a query change failed")
            self.message.value = error_box(f"{type(e).__name__}: {e}")
        return None

    def add(self) -> int | None:
        """Submit the typed query now; returns its activation epoch (``None``: refused, the
        reason is shown and the fields keep what was typed)."""
        try:
            name, text = split_query_name(self.text.value, self.name.value.strip() or None)
        except MqjoinError as e:
            self.message.value = error_box(str(e))
            return None
        name = name or ""
        if not name:
            self.message.value = error_box("give the query a name (letters, digits, _), e.g. q9")
            return None
        if not text:
            self.message.value = error_box(f"write the query {name} in paper notation (R(a), S(a,b)) or as "
                                           "equalities (R.a = S.a AND S.b = T.b)")
            return None
        try:
            sel = parse_selectivities(self.selectivities.value)
        except MqjoinError as e:
            self.message.value = error_box(str(e))
            return None
        epoch = self._submit(add={name: text}, **({"selectivities": sel} if sel else {}))
        if epoch is not None:
            self.message.value = info_box(f"{name} submitted in epoch {epoch - 2}: part of the re-optimisation at the "
                                          f"start of epoch {epoch - 1}, active from epoch {epoch}", pre=False)
            self.name.value, self.text.value, self.selectivities.value = "", "", ""
            self.refresh()
        return epoch

    def remove(self) -> int | None:
        """Remove the chosen query now; returns the epoch from which it no longer runs."""
        name = self.remove_choice.value
        if not name:
            self.message.value = error_box("choose a query to remove")
            return None
        epoch = self._submit(remove=[name])
        if epoch is not None:
            self.message.value = info_box(f"{name} removed: it answers until the end of epoch {epoch - 1} and no "
                                          f"longer from epoch {epoch}", pre=False)
            self.refresh()
        return epoch

    # -- drawing ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw now (on this thread)."""
        self._redraw.now()

    def wait_drawn(self, timeout: float | None = None) -> bool:
        return self._redraw.wait_idle(timeout)

    def _draw(self) -> None:
        src = self.source
        if src is None:
            self.clock.value = "<i>no run: start one to add or remove queries while it runs</i>"
            self.table.value = ""
            self.remove_choice.options = []
            self._enable(False)
            return
        st = status_of(src)
        try:
            run = snapshot(src)
        except Exception as e:  # noqa: BLE001 — shown inline, never a traceback
            if not isinstance(e, MqjoinError):
                _log.exception("reading the run failed")
            self.clock.value = error_box(f"the run cannot be read ({st}): "
                                         + (str(e) if isinstance(e, MqjoinError) else f"{type(e).__name__}: {e}"))
            self._enable(False)
            return
        t = getattr(src, "event_time", None) if is_live(src) else None
        epoch = _current_epoch(run, t)
        where = "not started" if epoch is None else (f"event time <b>{t:.2f} s</b>, epoch <b>{epoch}</b>"
                                                     if t is not None else f"last epoch <b>{epoch}</b>")
        self.clock.value = (f'<span style="font-size:14px">{esc(st)} · {where} · epochs of '
                            f"{run.policy.epoch:g} s: a change submitted in epoch i is decided at the start of "
                            f"i + 1 and active from i + 2</span>")
        self._enable(st == "running")
        active = [lf.query for lf in run.lifetimes if lf.removed is None]
        keep = self.remove_choice.value
        self.remove_choice.options = active
        if keep in active:
            self.remove_choice.value = keep
        at = {}
        for ev in self.changes:
            ch = ev.get("change", {})
            for q in ch.get("add", {}):
                at[("+", q)] = ch.get("at")
            for q in ch.get("remove", ()):
                at[("−", q)] = ch.get("at")
        rows = []
        for lf in run.lifetimes:
            text = run.workload.query(lf.query).text
            for sign, a in (("+", lf.added), ("−", lf.removed)):
                if a is None:
                    continue
                if (epoch is None or epoch < a) and st in ENDED:
                    state = f"not reached (the run {st})"
                elif epoch is None or epoch < a:
                    state = "pending"
                else:
                    state = "active" if sign == "+" else "removed"
                sub = at.get((sign, lf.query))
                rows.append((a, f"{sign}{lf.query}", text, "" if sub is None else f"{sub:.2f} s", state))
        rows.sort(key=lambda r: (r[0], r[1]))
        if rows:
            self.table.value = ("<b>query changes</b>" + table(
                ["activation epoch", "change", "query", "submitted at", "state"], [list(r) for r in rows],
                marked=[r[4] == "pending" for r in rows]))
        else:
            self.table.value = "<i>no query changes yet</i>"

    def _enable(self, on: bool) -> None:
        for w in (self.add_button, self.remove_button):
            w.disabled = not on
