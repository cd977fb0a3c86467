"""Sliders a person can also type into.

:func:`typeable` puts a number box beside a slider, both showing one value; typing a value
moves the slider.  The box is the one readout: the slider's own (d3's ``.4g`` printing
``2.000e+4`` beside a box reading ``20000``) is hidden, and the box shows a value as the
explorer's labels do (:func:`shown`: four significant digits, whole numbers from 1,000 on),
not ``4.684723722719``.  When
code moves a slider's bounds (a view re-ranging it for a new workload), the box's bounds
follow.  A log slider over many decades (a selectivity spans 10⁻⁹…1) is hard to
hit on ~120 px, so with ``decades`` its track spans only that many decades either side of the
current value, re-centred after every change, within its original bounds.

>>> import ipywidgets as W
>>> s = W.FloatLogSlider(value=0.001, base=10, min=-9, max=0, description="selectivity")
>>> row = typeable(s, decades=2)
>>> box = row.children[1]
>>> (s.min, s.max), box.value
((-5.0, -1.0), 0.001)
>>> box.value = 0.5          # typed: the slider follows and its track re-centres
>>> s.value, (s.min, s.max)
(0.5, (-3.0, 0.0))
>>> set_slider(s, 2e-9)      # set by the model (beyond the track): the box follows
>>> box.value, (s.min, s.max)
(2e-09, (-9.0, -6.0))
>>> box.value = 7.0          # beyond the slider's bounds: kept at the bound, and said
>>> s.value, box.value, row.children[2].value
(1.0, 1.0, '<span ...>7 is out of range (1e-09 … 1): kept at 1</span>')
>>> s.readout
False
>>> mu = W.FloatSlider(value=0.0, min=0.0, max=1.0)
>>> mu_box = typeable(mu).children[1]
>>> mu.max = 5000.0          # re-ranged by code: the box accepts the new range
>>> mu_box.value = 1200.0
>>> mu.value, mu_box.tooltip
(1200.0, 'type a value (0 … 5,000)')

:func:`checked_box` is a number box alone that does the same: a value outside its range is
kept at the nearest bound, and the note beside it says so.
"""

from __future__ import annotations

import math

import ipywidgets as W

from mqjoin.support.units import number
from mqjoin.widgets._html import esc

#: the style of the note beside a box that kept a typed value in range
NOTE_STYLE = "font-size:13px;color:#8a4b00;margin-left:6px"


def out_of_range(value: float, lo: float, hi: float) -> str:
    """What a box says of a typed ``value`` outside ``[lo, hi]`` ('' inside it).

    >>> out_of_range(0, 0.977, 3818.2), out_of_range(12, 1, 1024)
    ('0 is out of range (0.977 … 3,818): kept at 0.977', '')
    """
    if lo <= value <= hi:
        return ""
    return f"{number(value)} is out of range ({number(lo)} … {number(hi)}): kept at {number(lo if value < lo else hi)}"


def note_html(text: str) -> str:
    """The note's content (empty for no note)."""
    return f'<span style="{NOTE_STYLE}">{esc(text)}</span>' if text else ""


def checked_box(box: W.Widget, lo: float, hi: float) -> W.HBox:
    """``HBox([box, note])``: a number box whose typed values outside ``[lo, hi]`` are kept
    at the nearest bound, with a note saying so (a bounded box of ipywidgets would change them
    without a word).

    >>> d = W.IntText(value=4, description="groups D")
    >>> row = checked_box(d, 1, 1024)
    >>> d.value = 5000
    >>> d.value, row.children[1].value
    (1024, '<span ...>5,000 is out of range (1 … 1,024): kept at 1,024</span>')
    >>> d.value = 8
    >>> row.children[1].value
    ''
    """
    note = W.HTML("")
    busy = [False]

    def check(change) -> None:
        if busy[0]:
            return
        v = change["new"]
        note.value = note_html(out_of_range(v, lo, hi))
        if not lo <= v <= hi:
            busy[0] = True
            try:
                box.value = type(v)(min(max(v, lo), hi))
            finally:
                busy[0] = False

    box.observe(check, "value")
    return W.HBox([box, note], layout=W.Layout(align_items="center"))


def shown(value):
    """A slider's value as its box shows it: the precision of the explorer's number format
    (:func:`mqjoin.support.units.number`), so the box and the labels read alike.

    >>> shown(4.684723722719), shown(0.00066667), shown(20000.4), shown(3)
    (4.685, 0.0006667, 20000.0, 3)
    """
    if isinstance(value, int) or not math.isfinite(value):
        return value
    return float(round(value)) if abs(value) >= 1000 else float(f"{value:.4g}")


def _recentre(slider: W.FloatLogSlider, lo: float, hi: float, decades: float) -> None:
    if slider.value <= 0:
        return
    at = round(math.log(slider.value, slider.base), 9)
    new_min, new_max = max(lo, math.floor(at - decades)), min(hi, math.ceil(at + decades))
    if (slider.min, slider.max) != (new_min, new_max):
        slider.min, slider.max = float(new_min), float(new_max)  # both contain the value: no clamping


def set_slider(slider: W.Widget, value: float) -> None:
    """Set a slider's value from code, widening a log slider's track first when the value
    lies beyond it (a narrowed track would clamp it); :func:`typeable` then re-centres."""
    if isinstance(slider, W.FloatLogSlider) and value > 0:
        at = math.log(value, slider.base)
        if at < slider.min:
            slider.min = float(math.floor(at))
        if at > slider.max:
            slider.max = float(math.ceil(at))
    slider.value = value


def typeable(slider: W.Widget, *, decades: float | None = None, width: str = "96px") -> W.HBox:
    """``HBox([slider, number box])`` kept in step (see the module doc); ``decades`` (log
    sliders only): the track's span either side of the current value."""
    log = isinstance(slider, W.FloatLogSlider)
    if log:
        lo, hi = slider.min, slider.max
        bounds = (slider.base ** lo, slider.base ** hi)
    else:
        bounds = (slider.min, slider.max)
    # an unbounded box: a value typed outside the range reaches the kernel, which keeps it at the
    # bound and says so in the note (a bounded box would change it in the page without a word)
    box_cls = W.IntText if isinstance(slider, W.IntSlider) else W.FloatText
    box = box_cls(value=shown(slider.value), layout=W.Layout(width=width), continuous_update=False,
                  tooltip=f"type a value ({number(bounds[0])} … {number(bounds[1])})")
    note = W.HTML("")
    syncing = [False]

    def from_slider(change) -> None:
        if log and decades:
            _recentre(slider, lo, hi, decades)
        if not syncing[0]:
            syncing[0] = True
            try:
                box.value = shown(change["new"])
            finally:
                syncing[0] = False

    def from_box(change) -> None:
        if syncing[0]:
            return
        syncing[0] = True
        try:
            v = change["new"]
            note.value = note_html(out_of_range(v, *bounds))
            set_slider(slider, min(max(v, bounds[0]), bounds[1]))
            if log and decades:
                _recentre(slider, lo, hi, decades)
            box.value = shown(slider.value)
        finally:
            syncing[0] = False

    def from_bounds(change) -> None:
        if log and decades:
            return  # the track is a window re-centred within the original bounds
        nonlocal bounds
        lo_, hi_ = (slider.base ** slider.min, slider.base ** slider.max) if log else (slider.min, slider.max)
        bounds = (lo_, hi_)
        syncing[0] = True
        try:
            box.value = shown(slider.value)
        finally:
            syncing[0] = False
        box.tooltip = f"type a value ({number(lo_)} … {number(hi_)})"

    slider.readout = False
    slider.observe(from_slider, "value")
    box.observe(from_box, "value")
    slider.observe(from_bounds, ["min", "max"])
    if log and decades:
        _recentre(slider, lo, hi, decades)
    slider.layout.width = slider.layout.width or "330px"
    return W.HBox([slider, box, note], layout=W.Layout(align_items="center", overflow="visible"))
