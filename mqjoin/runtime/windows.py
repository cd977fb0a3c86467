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
  windows are constants;
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


within = compile_function(f"def within(T, ts, w):\n    return {within_source('T', 'ts', 'w')}\n", "within", {})
within.__doc__ = """``T − ts ≤ w`` for a finite window ``w``: floats, numpy arrays or Spark columns."""


def in_window(T: float, ts: float, w: float | None) -> bool:
    """Whether a component stamped ``ts`` is within its window ``w`` (None: unbounded) at ``T``."""
    return w is None or bool(within(T, ts, w))


def window_mask(T: Any, stamped: Iterable[tuple[Any, float]], n: int) -> Any:
    """The entries (``n`` of them) whose every component is within its window at ``T`` (a
    scalar or one time per entry): ``stamped`` pairs each component's timestamp array with
    its finite window."""
    import numpy as np

    ok = np.ones(n, dtype=bool)
    for ts, w in stamped:
        ok &= within(T, ts, w)
    return ok


def expiry(T: float, w: float | None) -> float:
    """The oldest timestamp the window ``w`` reaches at ``T`` (``-inf`` when unbounded)."""
    return -math.inf if w is None else T - w
