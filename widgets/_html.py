"""Tiny HTML helpers shared by the views (escaped text, tables, message boxes)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

ERROR_STYLE = "color:#b00020;background:#fdecea;border-left:3px solid #b00020;padding:4px 8px;margin:4px 0"
INFO_STYLE = "color:#1b3a57;background:#eef4fb;border-left:3px solid #1565c0;padding:4px 8px;margin:4px 0"


def esc(x: object) -> str:
    return html.escape(str(x))


STATE_COLOURS = {"error": "#b00020", "failed": "#b00020", "running": "#1565c0", "finished": "#2e7d32"}


def state_html(state: str) -> str:
    """A run's or deployment's state in bold, coloured (running blue, finished green, failed
    or error red).

    >>> state_html("failed")
    '<b style="color:#b00020">failed</b>'
    """
    return f'<b style="color:{STATE_COLOURS.get(state, "#333")}">{esc(state)}</b>'


def error_box(message: str) -> str:
    """The inline error area's content (empty when there is no error).

    >>> error_box("")
    ''
    >>> error_box("query q3: relation 'X' is not declared")
    '<div class="mqjoin-error" style="...">⚠ query q3: relation &#x27;X&#x27; is not declared</div>'
    """
    if not message:
        return ""
    return f'<div class="mqjoin-error" style="{ERROR_STYLE}">⚠ {esc(message)}</div>'


def info_box(text: str, pre: bool = True) -> str:
    body = f'<pre style="margin:0;white-space:pre-wrap">{esc(text)}</pre>' if pre else esc(text)
    return f'<div class="mqjoin-info" style="{INFO_STYLE}">{body}</div>'


TABLE_CSS = ("<style>.mqjoin-table{border-collapse:collapse;font-size:14px}"
             ".mqjoin-table th{text-align:left;padding:2px 8px;border-bottom:1px solid #ccc}"
             ".mqjoin-table td{padding:2px 8px;font-family:monospace}"
             ".mqjoin-table tr.mark{background:#fff3e0}</style>")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], marked: Iterable[bool] | None = None,
          raw: bool = False) -> str:
    """An HTML table (styled by one ``<style>`` block, not per cell: tables are resent on
    every plan change); ``marked`` rows are shaded (e.g. shared steps, the current plan).

    >>> table(["a", "b"], [[1, "x<y"]], marked=[True])  # doctest: +NORMALIZE_WHITESPACE
    '<style>...</style><table class="mqjoin-table"><tr><th>a</th><th>b</th></tr><tr
    class="mark"><td>1</td><td>x&lt;y</td></tr></table>'
    """
    th = "".join(f"<th>{esc(h)}</th>" for h in headers)
    marks = list(marked) if marked is not None else None
    body = []
    for i, r in enumerate(rows):
        cls = ' class="mark"' if marks is not None and i < len(marks) and marks[i] else ""
        cells = "".join(f"<td>{c if raw else esc(c)}</td>" for c in r)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'{TABLE_CSS}<table class="mqjoin-table"><tr>{th}</tr>{"".join(body)}</table>'


#: the ``<script>`` type of data a page carries for a program, not for the browser to run
DATA_TYPE = "application/x-mqjoin"


def embedded_script(element: str, text: str) -> str:
    """``text`` carried in a page as a ``<script>`` the browser does not run (the handout's
    workload and options); :func:`handout_contents` reads it back.

    >>> embedded_script("mqjoin-state", '{"a": "<b>"}')
    '<script type="application/x-mqjoin" id="mqjoin-state">{"a": "&lt;b&gt;"}</script>'
    """
    return f'<script type="{DATA_TYPE}" id="{element}">{html.escape(text, quote=False)}</script>'


def handout_contents(source) -> tuple[str, dict]:
    """The workload YAML and the state (``{"options": …}``) a handout carries (its path, or
    the page's text); a typed error for a page or path that is not one."""
    import json
    import re
    from pathlib import Path

    from mqjoin.model.errors import DataError

    text = str(source)
    if "<html" not in text[:200]:
        p = Path(text).expanduser()
        if not p.is_file():
            raise DataError(f"no handout {str(p)!r}: give the path of an HTML file written by 'mqjoin report'")
        text = p.read_text(encoding="utf-8")

    def read(element: str) -> str:
        m = re.search(rf'<script type="{DATA_TYPE}" id="{element}">(.*?)</script>', text, re.S)
        if m is None:
            raise DataError(f"this page is not an mqjoin handout (no {element} in it): write one with "
                            "'mqjoin report W.yaml --out report.html' or the explorer's Handout button")
        return html.unescape(m.group(1))

    return read("mqjoin-workload"), json.loads(read("mqjoin-state"))
