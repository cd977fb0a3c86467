"""The cost model: join sizes (docs/model.md §2), store parallelism and step costs (§4), store
memory (§5) — the only module that computes them (candidates, plans and the ILP call it).

**Totals over the horizon.**  Rates and join sizes are per time unit; what the optimiser adds
up are totals over the run's horizon ``H`` (``defaults.horizon``: the span of the data a
command is given, else the workload's own).  A step with prefix ``P`` and start ``X`` ships
the partial results of ``⋈P`` that ``X``'s tuples complete, each of its other tuples within
its window of that tuple, ``χ`` times each::

    messages = |⋈P| · o_P(X) · χ · |P| · ∫₀^H Π_{R ∈ P, R ≠ X} min(w_R, t) dt

— ``|⋈P| / |P| · χ · H^|P|`` under full history (``o = 1/|P|``): the paper's cost per time
unit times ``H^|P|``.  A store of ``M`` holds ``|⋈M| · Π_{R ∈ M} min(w_R, H)`` rows.  Both
are counts, so the plan does not depend on the unit time is written in: with every rate
times ``c`` and every window and the horizon divided by ``c``, every total stays as it was.
At ``H = 1`` without windows shorter than 1 (the paper's examples) the totals are the costs
per time unit.

>>> from mqjoin.model.workload import parse_workload
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

from typing import Any, Iterable, Protocol, Sequence

from mqjoin.model.filters import Selection
from mqjoin.model.sizes import independent_size
from mqjoin.model.workload import Attr, JoinClass, Workload


class StepShape(Protocol):
    """What the cost of a step depends on (a :class:`mqjoin.planning.candidates.Step` has it):
    the prefix (its first element the start relation) and its relations, the classes and
    selections they join under, and the attributes whose values a probing tuple knows."""

    @property
    def classes(self) -> tuple[JoinClass, ...]: ...

    @property
    def prefix(self) -> tuple[Any, ...]: ...

    @property
    def prefix_relations(self) -> frozenset[str]: ...

    @property
    def selection(self) -> tuple[Selection, ...]: ...

    @property
    def known(self) -> frozenset[Attr]: ...



def is_close(a: float, b: float) -> bool:
    """Cost equality up to float rounding (costs are sums of products of statistics); the
    planners compare candidate costs with it.

    >>> is_close(0.1 + 0.2, 0.3), is_close(1.0, 1.001)
    (True, False)
    """
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def join_size(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass],
              selection: Iterable["Selection"] = ()) -> float:
    """``|⋈P|`` in tuples per time unit (docs/model.md §2, §7): the workload's measured size of
    the set (:meth:`~mqjoin.model.workload.Workload.measured_size`) where one is given, else
    the independence estimate ``Π f_R · λ_R · Π s_c^(k_c(P) − 1)``
    (:func:`~mqjoin.model.sizes.independent_size`).  Every cost, memory figure and plan
    comes from here, so a measured size reaches all of them.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a], rate: 100}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.01}
    ... sizes: {R ⋈ S: 250}''')
    >>> join_size(w, {"R", "S"}, w.query("q").classes), join_size(w, {"R"}, w.query("q").classes)
    (250.0, 100.0)
    """
    rels = frozenset(relations)
    classes = tuple(classes)
    selection = tuple(selection)
    measured = workload.measured_size(rels, classes, selection) if len(rels) > 1 else None
    return independent_size(workload, rels, classes, selection) if measured is None else measured


def last_share(workload: Workload, relations: Iterable[str], start: str, classes: Iterable[JoinClass],
               selection: Iterable["Selection"] = ()) -> float:
    """The share of ``⋈P``'s results whose last tuple to arrive is ``start``'s: the workload's
    measured order of arrival of the set (:meth:`~mqjoin.model.workload.Workload.arrival_share`)
    where one is given, else ``1/|P|`` — every relation of the prefix equally likely to arrive
    last (docs/model.md §4).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q: "R(a), S(a), T(a)"}
    ... selectivities: {R.a = S.a: 0.1}
    ... sizes: {R ⋈ S: {size: 0.1, last: {R: 0.9, S: 0.1}}}''')
    >>> c = w.query("q").classes
    >>> last_share(w, {"R", "S"}, "S", c), last_share(w, {"R", "T"}, "T", c), last_share(w, {"R"}, "R", c)
    (0.1, 0.5, 1.0)
    """
    rels = frozenset(relations)
    share = workload.arrival_share(rels, classes, selection, start) if len(rels) > 1 else None
    return 1.0 / len(rels) if share is None else share


def window_of(workload: Workload, relations: Iterable[str]) -> float:
    """``w_M``: the smallest finite window among ``relations``, else ``defaults.horizon``."""
    finite = [w for w in (workload.window(r) for r in relations) if w is not None]
    return min(finite) if finite else workload.defaults.horizon


def exposure(workload: Workload, prefix: Iterable[str], start: str, span: float | None = None) -> float:
    """``∫₀^S Π_{R ∈ P, R ≠ X} min(w_R, t) dt`` over ``S = span`` (default the horizon): the time
    units × window volume over which a tuple of ``start`` finds partners of the rest of
    ``prefix`` (module docstring); ``S^k / k`` for ``k`` relations without windows.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], rate: 2}, S: {attributes: [a], rate: 2, window: 1}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.5}''')
    >>> exposure(w, ["R"], "R", 3.0), exposure(w, ["R", "S"], "R", 3.0), exposure(w, ["R", "S"], "S", 3.0)
    (3.0, 2.5, 4.5)
    """
    span = workload.defaults.horizon if span is None else span
    bounds = sorted(min(w, span) if (w := workload.window(r)) is not None else span
                    for r in prefix if r != start)
    total, a, fixed = 0.0, 0.0, 1.0
    for i, b in enumerate(bounds + [span]):
        m = len(bounds) - i  # relations whose window is still open on [a, b]: t^m
        if b > a:
            total += fixed * (b ** (m + 1) - a ** (m + 1)) / (m + 1)
        a = max(a, b)
        if i < len(bounds):
            fixed *= b
    return total


def held_volume(workload: Workload, relations: Iterable[str], span: float | None = None) -> float:
    """``Π_{R ∈ M} min(w_R, S)`` over ``S = span`` (default the horizon): the time volume whose
    results a store of ``relations`` holds at the end of a run of that span (module docstring)."""
    span = workload.defaults.horizon if span is None else span
    return math.prod(min(w, span) if (w := workload.window(r)) is not None else span for r in relations)


def memory_tuples(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass],
                  selection: Iterable["Selection"] = (), span: float | None = None) -> float:
    """Memory of one store replica in tuples (docs/model.md §5): the rows it holds at the end
    of a run over ``span`` (default the horizon), ``|⋈M| · Π_{R ∈ M} min(w_R, S)``.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {horizon: 10}
    ... relations: {R: {attributes: [a], rate: 100, window: 2}, S: {attributes: [a], rate: 100}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.01}''')
    >>> c = w.query("q").classes
    >>> memory_tuples(w, ["R"], c), memory_tuples(w, ["S"], c), memory_tuples(w, ["R", "S"], c)
    (200.0, 1000.0, 2000.0)
    """
    rels = frozenset(relations)
    return join_size(workload, rels, classes, selection) * held_volume(workload, rels, span)


def broadcast_factor(known: bool, parallelism: int) -> int:
    """``χ``: 1 when the probe can compute the target partition, else the parallelism."""
    return 1 if known else parallelism


def store_parallelism(workload: Workload, relations: Sequence[str]) -> int:
    """Partitions of the store of ``relations`` (docs/model.md §4): a base store takes its relation's
    parallelism, an MIR store ``defaults.parallelism``.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {parallelism: 2, selectivity: 0.1}
    ... relations: {R: {attributes: [a], parallelism: 8}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}''')
    >>> store_parallelism(w, ["R"]), store_parallelism(w, ["S"]), store_parallelism(w, ["R", "S"])
    (8, 2, 2)
    """
    return workload.parallelism(relations[0]) if len(relations) == 1 else workload.defaults.parallelism


def prefix_messages(workload: Workload, relations: Iterable[str], start: str, classes: Iterable[JoinClass],
                    selection: Iterable["Selection"] = (), span: float | None = None, since: float = 0.0) -> float:
    """The partial results of the prefix ``relations`` that ``start``'s tuples complete over
    ``[since, span]`` (default the whole horizon), each shipped once (``χ = 1``):
    ``|⋈P| · o · |P| · ∫ Π min(w_R, t) dt``, with ``o`` the share of ``⋈P`` that the start
    relation completes (:func:`last_share`: ``1/|P|`` unless measured) and the integral
    :func:`exposure` (module docstring).  Summed over every start of ``P``: ``|⋈P| · H^|P|``
    under full history."""
    rels = frozenset(relations)
    classes, selection = tuple(classes), tuple(selection)
    seen = exposure(workload, rels, start, span)
    if since > 0:
        seen -= exposure(workload, rels, start, min(since, workload.defaults.horizon if span is None else span))
    size = join_size(workload, rels, classes, selection)
    return size * last_share(workload, rels, start, classes, selection) * len(rels) * seen


def join_results(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass],
                 selection: Iterable["Selection"] = (), span: float | None = None) -> float:
    """The results of ``⋈P`` a run over ``span`` (default the horizon) produces, each counted
    once, when its last tuple arrives: :func:`prefix_messages` summed over every start of
    ``P`` — ``|⋈P| · H^|P|`` under full history, ``λ · H`` for one relation.  A count, so it
    compares sets of different sizes in any time unit (a size per time unit does not: it
    scales as ``rate^|P|``); the rule-based planners rank intermediate results by it.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {horizon: 10}
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a], rate: 100}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.01}''')
    >>> c = w.query("q").classes
    >>> join_results(w, ["R"], c), join_results(w, ["R", "S"], c)
    (1000.0, 10000.0)
    """
    rels, classes, selection = frozenset(relations), tuple(classes), tuple(selection)
    return sum(prefix_messages(workload, rels, x, classes, selection, span) for x in sorted(rels))


def least(items: Iterable[Any], cost: Any, tiebreak: Any) -> Any:
    """The item of least ``cost(item)``, costs equal up to float rounding (:func:`is_close`)
    broken by the least ``tiebreak(item)``: a choice that does not flip with the rounding of
    the same statistics written in another time unit.

    >>> least(["b", "a", "c"], {"a": 0.3, "b": 0.1 + 0.2, "c": 1.0}.get, str)
    'a'
    """
    scored = [(cost(i), i) for i in items]
    low = min(c for c, _ in scored)
    return min((i for c, i in scored if is_close(c, low)), key=tiebreak)


def step_messages(workload: Workload, step: StepShape, span: float | None = None, since: float = 0.0) -> float:
    """The partial results a step ships without broadcast (``χ = 1``) over ``[since, span]``
    (default the whole horizon): :func:`prefix_messages` of its prefix and start."""
    return prefix_messages(workload, step.prefix_relations, step.prefix[0].relations[0], step.classes,
                           step.selection, span, since)


def unit_step_cost(workload: Workload, step: StepShape) -> float:
    """A step's cost without broadcast (docs/model.md §4 with ``χ = 1``): the partial results it
    ships over the horizon (:func:`step_messages`), ``|⋈P| / |P| · H^|P|`` under full history
    (``|⋈P| · o · H^|P|`` with a measured share ``o`` of ``⋈P`` that the start completes).

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.candidates import MIR, Step
    >>> spec = '''
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a], rate: 50}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.1}'''
    >>> w, w10 = parse_workload(spec), parse_workload(spec + "\\ndefaults: {horizon: 10}")
    >>> R, S = MIR.of(w, ["R"], ()), MIR.of(w, ["S"], ())
    >>> unit_step_cost(w, Step((R,), S, w.query("q").classes)), unit_step_cost(w10, Step((R,), S, w.query("q").classes))
    (100.0, 1000.0)
    """
    return step_messages(workload, step)


def step_error(workload: Workload, step: StepShape) -> float:
    """The relative standard error of a step's cost: that of the measured size of its prefix
    (:meth:`~mqjoin.model.workload.Workload.size_error`), 0 for a prefix of one relation (its
    rate) or a size counted exactly or estimated (docs/model.md §5, ties).

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.candidates import MIR, Step
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q: "R(a), S(a), T(a)"}
    ... selectivities: {R.a = S.a: 0.1}
    ... sizes: {R ⋈ S: {size: 4, error: 0.05}}''')
    >>> R, S, T = (MIR.of(w, [r], ()) for r in "RST")
    >>> c = w.query("q").classes
    >>> step_error(w, Step((R, S), T, c)), step_error(w, Step((R,), S, c))
    (0.05, 0.0)
    """
    rels = step.prefix_relations
    return workload.size_error(rels, step.classes, step.selection) if len(rels) > 1 else 0.0


def step_cost(workload: Workload, step: StepShape, partition: Attr, parallelism: int) -> float:
    """Cost of one step whose target is partitioned by ``partition`` into ``parallelism``
    partitions (docs/model.md §4): ``|⋈P| / |P| · χ`` (``|⋈P| · o · χ`` with a measured order of arrival).

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.candidates import MIR, Step
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a, b], rate: 100}, S: {attributes: [a, b], rate: 50}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.1}''')
    >>> s = Step((MIR.of(w, ["R"], ()),), MIR.of(w, ["S"], ()), w.query("q").classes)
    >>> step_cost(w, s, Attr("S", "a"), 4), step_cost(w, s, Attr("S", "b"), 4)
    (100.0, 400.0)
    """
    return unit_step_cost(workload, step) * broadcast_factor(partition in step.known, parallelism)
