"""The cost model: join sizes (DESIGN A2), step costs (A4) and store memory (A5).

>>> from mqjoin.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
...             T: {attributes: [b], rate: 100}}
... queries: {q1: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
... ''')
>>> q = w.query("q1")
>>> join_size(w, {"R", "S"}, q.classes), join_size(w, {"S", "T"}, q.classes)
(100.0, 150.0)
"""

from __future__ import annotations

import math
from typing import Iterable

from .workload import JoinClass, Workload


def join_size(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass]) -> float:
    """``|⋈P| = Π λ_R · Π s_c^(k_c(P) − 1)`` over the classes with ``k_c(P) ≥ 2`` (DESIGN A2)."""
    rels = frozenset(relations)
    size = 1.0
    for r in sorted(rels):
        size *= workload.rate(r)
    for c in classes:
        k = c.count_in(rels)
        if k >= 2:
            size *= c.selectivity ** (k - 1)
    return size


def window_of(workload: Workload, relations: Iterable[str]) -> float:
    """``w_M``: the smallest finite window among ``relations``, else ``defaults.horizon``."""
    finite = [w for w in (workload.window(r) for r in relations) if w is not None]
    return min(finite) if finite else workload.defaults.horizon


def memory_tuples(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass]) -> float:
    """Memory of one store replica in tuples: ``|⋈M| · w_M`` (DESIGN A5)."""
    rels = frozenset(relations)
    return join_size(workload, rels, classes) * window_of(workload, rels)


def broadcast_factor(known: bool, parallelism: int) -> int:
    """``χ``: 1 when the probe can compute the target partition, else the parallelism."""
    return 1 if known else parallelism


def is_close(a: float, b: float) -> bool:
    """Cost equality up to float rounding (costs are sums of products of statistics)."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
