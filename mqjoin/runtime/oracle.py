"""The result oracle: docs/model.md §6 evaluated by brute force, independent of any plan.

A query's result is the set of tuples ``(r1, …, rm)``, one per relation (row indices, in the
query's relation order), such that every class's members are equal and, with
``T = max ts``, ``T − ts(rj) ≤ window(Rj)`` for every ``j``.  Nulls equal nothing.

This is a plain hash join in a fixed relation order with window pruning (a partial
combination that already violates a window can only get worse as ``T`` grows).  It is meant
for tests and checks on small inputs.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 1]})}
>>> sorted(oracle_results(w, tables)["q"])
[(0, 0)]
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from mqjoin.model.errors import AdaptiveError
from mqjoin.model.tables import Table
from mqjoin.model.workload import Query, Workload
from mqjoin.runtime.windows import in_window


def query_results(workload: Workload, query: Query, tables: Mapping[str, Table]) -> set[tuple[int, ...]]:
    # join order: the query's relations as written, each next one connected to the joined ones
    order = [query.relations[0]]
    while len(order) < len(query.relations):
        for r in query.relations:
            if r not in order and any(r in c.relations and c.relations & set(order) for c in query.classes):
                order.append(r)
                break
    windows = {r: workload.window(r) for r in order}
    passing = {r: _passing(query, r, tables[r]) for r in order}  # docs/model.md §7: the query's filter
    partial: list[dict[str, int]] = [{order[0]: i} for i in passing[order[0]]]
    for k, r in enumerate(order[1:], start=1):
        t = tables[r]
        joined = order[:k]
        # conditions: for each class with members in r and in the joined relations
        conds = []
        for c in query.classes:
            mine = c.member_of(r)
            if mine is None:
                continue
            others = [a for a in c.members if a.relation in joined]
            if others:
                conds.append((others[0], mine.name))
        index: dict[tuple, list[int]] = {}
        for i in passing[r]:
            key = tuple(t.columns[name][i] for _, name in conds)
            if None not in key:
                index.setdefault(key, []).append(i)
        nxt = []
        for p in partial:
            key = tuple(tables[a.relation].columns[a.name][p[a.relation]] for a, _ in conds)
            if None in key:
                continue
            for i in index.get(key, ()):
                cand = dict(p)
                cand[r] = i
                if _windows_ok(cand, tables, windows):
                    nxt.append(cand)
        partial = nxt
    # all class members equal: classes with 3+ members are checked pairwise through the
    # first joined member, which is transitive; verify explicitly anyway
    out = set()
    for p in partial:
        if all(len({tables[a.relation].columns[a.name][p[a.relation]] for a in c.members}) == 1
               for c in query.classes):
            out.add(tuple(p[r] for r in query.relations))
    return out


def _passing(query: Query, relation: str, table: Table) -> range | list[int]:
    """The rows of ``relation`` that pass ``query``'s filter on it (all rows when unfiltered)."""
    f = query.filter_of(relation)
    if f is None:
        return range(len(table))
    cols = {c.attr.name: table.columns[c.attr.name] for c in f.comparisons}
    return [i for i in range(len(table)) if f.passes({a: col[i] for a, col in cols.items()})]


def _windows_ok(p: Mapping[str, int], tables: Mapping[str, Table], windows: Mapping[str, float | None]) -> bool:
    T = max(tables[r].ts[i] for r, i in p.items())
    return all(in_window(T, tables[r].ts[i], windows[r]) for r, i in p.items())


def oracle_results(workload: Workload, tables: Mapping[str, Table]) -> dict[str, set[tuple[int, ...]]]:
    """Every query's result set (docs/model.md §6) by brute force."""
    return {q.name: query_results(workload, q, tables) for q in workload.queries}


def adaptive_oracle_results(workload: Workload, tables: Mapping[str, Table], changes: Iterable[Any],
                            policy: Any) -> dict[str, set[tuple[int, ...]]]:
    """What every query answers in an adaptive run that starts with ``workload`` and applies
    the query ``changes`` (:class:`mqjoin.adaptive.policy.QueryChange`), by brute force.

    Everything is derived here from the definition (README "Adaptivity", the module docstring
    of :mod:`mqjoin.adaptive.controller`), not from the engine's functions, using only the policy's
    ``epoch`` and ``origin``:

    * event time ``t`` lies in epoch ``⌊(t − origin) / epoch⌋``;
    * a change at time ``at`` is active from epoch ``⌊(at − origin) / epoch⌋ + 2``;
    * a query is active in epochs ``[a, r)``: ``a`` the activation of the change that adds it
      (−∞ for the workload's own queries), ``r`` that of the change that removes it (∞ if none);
    * relation ``X`` is retained in epoch ``e`` iff a query active in ``e`` uses it;
    * a tuple of ``X`` from epoch ``e_t`` is available to a query added at ``a`` iff
      ``e_t ≥ a`` or ``X`` was retained in every epoch ``e_t … a − 1`` (checked epoch by epoch);
    * a query answers the docs/model.md §6 results whose latest tuple's epoch lies in ``[a, r)`` and whose
      tuples are all available.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 10}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a)"}
    ... ''')
    >>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
    ...           "S": Table.from_columns("S", {"ts": [1, 6], "a": [1, 1]}),
    ...           "T": Table.from_columns("T", {"ts": [2, 7], "a": [1, 1]})}
    >>> got = adaptive_oracle_results(w, tables, [QueryChange(at=2.5, add={"q2": "S(a), T(a)"})],
    ...                               AdaptivePolicy(epoch=1))
    >>> sorted(got["q1"]), sorted(got["q2"])    # q2 from epoch 4: T's tuple 0 was never retained
    ([(0, 0), (0, 1), (1, 0), (1, 1)], [(0, 1), (1, 1)])
    """
    epoch, origin = policy.epoch, policy.origin

    def epoch_of(t: float) -> int:
        return math.floor((t - origin) / epoch)

    full = workload
    span: dict[str, list[float]] = {q.name: [-math.inf, math.inf] for q in workload.queries}
    for ch in sorted(changes, key=lambda c: c.at):
        active_from = epoch_of(ch.at) + 2
        for name in ch.remove:
            if name not in span:
                raise AdaptiveError(f"the change at {ch.at:g} s removes {name}, which is not a query of the run")
            span[name][1] = active_from
        for name, text in ch.add.items():
            full = full.with_query(name, text, ch.fractions_of(name))
            for equality, value in ch.selectivities.items():
                full = full.with_selectivity(equality, value)
            span[name] = [active_from, math.inf]

    def retained(relation: str, e: int) -> bool:
        return any(a <= e < r and relation in full.query(q).relations for q, (a, r) in span.items())

    out = {}
    for name, (added, removed) in span.items():
        q = full.query(name)
        available: dict[tuple[str, int], bool] = {}  # (relation, epoch of the tuple) → available

        def is_available(relation: str, e: int, added: float = added,
                         available: dict[tuple[str, int], bool] = available) -> bool:
            if e >= added:
                return True
            if (relation, e) not in available:
                available[relation, e] = all(retained(relation, k) for k in range(e, int(added)))
            return available[relation, e]

        keep = set()
        for res in query_results(full, q, tables):
            ts = [tables[r].ts[i] for r, i in zip(q.relations, res)]
            if added <= epoch_of(max(ts)) < removed and all(is_available(r, epoch_of(t))
                                                             for r, t in zip(q.relations, ts)):
                keep.add(res)
        out[name] = keep
    return out
