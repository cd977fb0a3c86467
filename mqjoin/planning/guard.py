"""Guarded runs: how many results and how much memory a run will need, from the model alone.

Before a run executes the workload on data (the explorer's Adaptivity Run, a Deploy), the
model says roughly what it will produce.  For a query ``q`` whose relations arrive over
``D`` seconds of event time, each result is made by the arrival of its latest tuple
(docs/model.md §6); a tuple of ``R_i`` arriving at ``t`` meets the tuples of every other relation
``R_j`` of the last ``min(w_j, t)`` seconds (``w_j = ∞`` when the window is unbounded).
With the join size of docs/model.md §2 this gives

    results(q) ≈ |⋈q| · Σ_i ∫₀ᴰ Π_{j≠i} min(w_j, t) dt

which is the expectation for uniform streams (``mqjoin.datasets.uniform``); with unbounded windows
it is ``|⋈q| · Dᵏ``.  The rows a store holds at the end are ``|⋈M| · min(w_M, D)`` (docs/model.md
§5's memory, over the run's duration instead of the 1-s horizon).  Memory in bytes counts a
collected result at :data:`BYTES_PER_RESULT` and a held row at :data:`BYTES_PER_ROW`
(CPython, rounded up).  These are order-of-magnitude estimates: enough to refuse a run that
would take the kernel down, not a prediction to the byte.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a], rate: 100}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.01}
... ''')
>>> e = estimate_run(w, duration=10)
>>> e.input_tuples, e.results["q"], e.state_rows
(2000.0, 10000.0, 2000.0)
>>> check_run(e) is e
True
>>> check_run(estimate_run(w.with_selectivity("R.a = S.a", 0.9), duration=600))  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
mqjoin.planning.guard.RunTooLargeError: this run would produce about 3.2 billion results (q 3.2 billion) and need about
389 GB of memory (limits: 20 million results, 2.0 GB): shorten the run, lower the selectivities (the largest: R.a = S.a
0.9) or raise the limits
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mqjoin.planning.cost import join_size
from mqjoin.model.errors import MqjoinError
from mqjoin.support.units import count, size
from mqjoin.model.workload import Workload

#: bytes per collected result (a tuple of row indices in a set)
BYTES_PER_RESULT = 120
#: bytes per row held in a store or in the input (the tuple, its index entry, bookkeeping)
BYTES_PER_ROW = 200


class RunTooLargeError(MqjoinError):
    """A run whose estimated results or memory exceed the limits (see :func:`check_run`)."""


@dataclass(frozen=True)
class RunLimits:
    """What a guarded run may use: results collected and bytes of memory (defaults: 20
    million results, 2 GB)."""

    max_results: float = 2e7
    max_bytes: float = 2e9


@dataclass(frozen=True)
class RunEstimate:
    """The model's estimate of a run over ``duration`` seconds of event time: input tuples,
    results per query, rows held by the stores at the end, and the classes' selectivities
    (largest first, to say which one to lower)."""

    duration: float
    input_tuples: float
    results: Mapping[str, float]
    state_rows: float
    selectivities: tuple[tuple[str, float], ...] = ()

    @property
    def total_results(self) -> float:
        return float(sum(self.results.values()))

    @property
    def bytes(self) -> float:
        return self.total_results * BYTES_PER_RESULT + (self.state_rows + self.input_tuples) * BYTES_PER_ROW

    def summary(self) -> str:
        """One line for a status bar.

        >>> RunEstimate(10.0, 2000.0, {"q": 1e4}, 2000.0).summary()
        'expected: about 2,000 input tuples, 10,000 results, 2,000 rows in stores at the end, ~2.0 MB'
        """
        return (f"expected: about {count(self.input_tuples)} input tuples, {count(self.total_results)} results, "
                f"{count(self.state_rows)} rows in stores at the end, ~{size(self.bytes)}")


def _reach_integral(duration: float, caps: list[float]) -> float:
    """``∫₀ᴰ Π_j min(c_j, t) dt`` (``caps`` may hold ``inf``), exactly, piece by piece.

    >>> _reach_integral(10, [math.inf]), _reach_integral(10, [1.0]), _reach_integral(10, [])
    (50.0, 9.5, 10.0)
    """
    points = sorted({0.0, float(duration), *(c for c in caps if c < duration)})
    total = 0.0
    for a, b in zip(points, points[1:]):
        const = math.prod(c for c in caps if c <= a)  # windows already full: constant factors
        m = sum(1 for c in caps if c > a)  # the others still grow like t
        total += const * (b ** (m + 1) - a ** (m + 1)) / (m + 1)
    return total


def query_results(workload: Workload, query: str, duration: float) -> float:
    """Expected results of ``query`` over ``duration`` seconds of event time (module doc).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {window: 1}
    ... relations: {R: {attributes: [a], rate: 10}, S: {attributes: [a], rate: 10}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.5}
    ... ''')
    >>> query_results(w, "q", 100)  # 1000 R × the 10 S of the second either side × 0.5
    9950.0
    """
    q = workload.query(query)
    rels = sorted(q.relation_set)
    caps = {r: math.inf if w is None else float(w) for r in rels for w in [workload.window(r)]}
    spread = sum(_reach_integral(duration, [caps[j] for j in rels if j != i]) for i in rels)
    return join_size(workload, rels, q.classes) * spread


def estimate_run(workload: Workload, duration: float, plan: Any = None) -> RunEstimate:
    """The :class:`RunEstimate` of running ``workload`` on ``duration`` seconds of input at
    its rates, with ``plan``'s stores (else one store per relation a query reads).

    >>> from mqjoin.planning.optimizer import optimize
    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, window: 2}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.01}
    ... ''')
    >>> e = estimate_run(w, 10.0, optimize(w).plan)
    >>> count(e.input_tuples), count(e.results["q"]), count(e.state_rows)  # R, S, T and an MIR: 200 rows each
    ('3,000', '10,400', '800')
    """
    if isinstance(duration, bool) or not (isinstance(duration, (int, float)) and duration > 0
                                          and math.isfinite(duration)):
        raise RunTooLargeError(f"the run's duration must be a positive number of seconds, got {duration!r}")
    d = float(duration)

    def held(relations: Iterable[str]) -> float:
        ws = [w for r in relations for w in [workload.window(r)] if w is not None]
        return min([d, *ws])

    used = workload.used_relations
    inputs = sum(workload.rate(r) * d for r in used)
    results = {q.name: query_results(workload, q.name, d) for q in workload.queries}
    if plan is not None:
        rows = sum(join_size(workload, s.mir.relations, s.mir.classes) * held(s.mir.relations) for s in plan.stores)
    else:
        rows = sum(workload.rate(r) * held([r]) for r in used)
    sels = {(" = ".join(str(m) for m in c.members), c.selectivity) for q in workload.queries for c in q.classes}
    return RunEstimate(d, float(inputs), results, float(rows), tuple(sorted(sels, key=lambda p: (-p[1], p[0]))))


def check_run(estimate: RunEstimate, limits: RunLimits = RunLimits()) -> RunEstimate:
    """``estimate`` if it is within ``limits``, else :class:`RunTooLargeError` saying what
    the run would need and what to change (example in the module doc)."""
    if estimate.total_results <= limits.max_results and estimate.bytes <= limits.max_bytes:
        return estimate
    per = ", ".join(f"{q} {count(n)}" for q, n in sorted(estimate.results.items(), key=lambda p: -p[1])[:3])
    top = (f" (the largest: {estimate.selectivities[0][0]} {estimate.selectivities[0][1]:g})"
           if estimate.selectivities else "")
    raise RunTooLargeError(
        f"this run would produce about {count(estimate.total_results)} results ({per}) and need about "
        f"{size(estimate.bytes)} of memory (limits: {count(limits.max_results)} results, "
        f"{size(limits.max_bytes)}): shorten the run, lower the selectivities{top} or raise the limits")


def over_budget(results: float, state_rows: float, limits: RunLimits = RunLimits()) -> str | None:
    """While a run is live: ``None`` while its results so far and the rows its stores hold
    fit ``limits``, else the message to stop it with.

    >>> over_budget(1e6, 1e5) is None
    True
    >>> over_budget(3e7, 1e5)  # doctest: +NORMALIZE_WHITESPACE
    'over its budget: 30 million results and 100,000 rows in stores (~3.6 GB; limits: 20 million results, 2.0 GB); what
    it produced so far stays'
    """
    used = results * BYTES_PER_RESULT + state_rows * BYTES_PER_ROW
    if results <= limits.max_results and used <= limits.max_bytes:
        return None
    return (f"over its budget: {count(results)} results and {count(state_rows)} rows in stores "
            f"(~{size(used)}; limits: {count(limits.max_results)} results, {size(limits.max_bytes)}); "
            f"what it produced so far stays")
