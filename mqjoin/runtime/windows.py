"""The window rule (docs/model.md §6), written once for every engine.

A tuple stamped ``ts`` of a relation with window ``w`` still joins at time ``T`` (the largest
timestamp of the combination) iff ``T − ts ≤ w``; a null window has no bound.  The rule is the
source template :data:`WITHIN`; every form below is derived from it, so the engines agree to
the last bit at window boundaries and timestamp ties (the difference is taken first, in
doubles, then compared — ``ts ≥ T − w`` would round differently):

* :func:`within` — the rule compiled from the template.  Its operators are the only thing it
  uses, so the one function serves floats, numpy arrays (elementwise) and Spark columns (a join
  condition);
* :func:`in_window` — the scalar form with the null window;
* :func:`window_mask` — the numpy form over several components of a stored entry;
* :func:`outside_source` — the source text of the negated rule, for generated probes whose
  windows are constants, and :func:`compile_expired`, a stored entry's test built from it;
* :func:`expiry` — the oldest timestamp a window reaches, ``T − w``, a bound for pruning whole
  epochs (callers keep a margin: it rounds unlike the rule).

>>> within(3.0, 1.0, 2.0), within(3.0, 0.5, 2.0)
(True, False)
>>> in_window(3.0, 0.5, None)  # a null window has no bound
True
>>> import numpy as np
>>> ts = np.array([0.5, 1.0, 2.5])
>>> within(3.0, ts, 2.0)
array([False,  True,  True])
>>> window_mask(np.array([3.0, 3.0, 3.0]), ((ts, 2.0), (ts, 1.0)), 3)
array([False, False,  True])
>>> outside_source("T", "m[1][1]", "w0")
'not (T - m[1][1] <= w0)'
>>> expired = compile_expired(((0, 2.0), (1, 1.0)))  # (component, window) of a stored entry
>>> expired(((7, 1.5), (8, 2.5)), 3.0), expired(((7, 1.5), (8, 1.5)), 3.0)
(False, True)
>>> expiry(3.0, 2.0), expiry(3.0, None)
(1.0, -inf)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mqjoin.runtime.codegen import compile_function

WITHIN = "{T} - {ts} <= {w}"
"""The rule, as source: ``T`` the combination's time, ``ts`` a component's timestamp, ``w`` its window."""


def within_source(T: str, ts: str, w: str) -> str:
    """Source of the rule over the expressions ``T``, ``ts`` and ``w``."""
    return WITHIN.format(T=T, ts=ts, w=w)


def outside_source(T: str, ts: str, w: str) -> str:
    """Source of the negated rule (a component the window excludes), for generated code."""
    return f"not ({within_source(T, ts, w)})"


def compile_expired(windows: tuple[tuple[int, float], ...]) -> Any:
    """A function ``(entry, T) → bool``: whether some component ``c`` of a stored entry (its
    timestamp at ``entry[c][1]``) is outside its window at ``T``; the windows are constants
    of its source, so a purge pays one call per entry."""
    tests = " or ".join(outside_source("T", f"e[{c}][1]", repr(float(w))) for c, w in windows) or "False"
    return compile_function(f"def expired(e, T):\n    return {tests}\n", "expired", {})


within = compile_function(f"def within(T, ts, w):\n    return {within_source('T', 'ts', 'w')}\n", "within", {})
within.__doc__ = """``T − ts ≤ w`` for a finite window ``w``: floats, numpy arrays or Spark columns."""


def in_window(T: float, ts: float, w: float | None) -> bool:
    """Whether a component stamped ``ts`` is within its window ``w`` (None: unbounded) at ``T``."""
    return w is None or bool(within(T, ts, w))


def window_mask(T: Any, stamped: Iterable[tuple[Any, float]], n: int) -> Any:
    """The entries (``n`` of them) whose every component is within its window at ``T`` (a
    scalar or one time per entry): ``stamped`` pairs each component's timestamp array with
    its finite window."""
    ok = None
    for ts, w in stamped:
        if ok is None:
            ok = within(T, ts, w)  # a new array: the next windows narrow it in place
        else:
            ok &= within(T, ts, w)
    if ok is None:
        import numpy as np

        return np.ones(n, dtype=bool)
    return ok


def expiry(T: float, w: float | None) -> float:
    """The oldest timestamp the window ``w`` reaches at ``T`` (``-inf`` when unbounded)."""
    return -math.inf if w is None else T - w
