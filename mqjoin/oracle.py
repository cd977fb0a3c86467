"""The result oracle: DESIGN A6 evaluated by brute force, independent of any plan.

A query's result is the set of tuples ``(r1, …, rm)``, one per relation (row indices, in the
query's relation order), such that every class's members are equal and, with
``T = max ts``, ``T − ts(rj) ≤ window(Rj)`` for every ``j``.  Nulls equal nothing.

This is a plain hash join in a fixed relation order with window pruning (a partial
combination that already violates a window can only get worse as ``T`` grows).  It is meant
for tests and checks on small inputs.

>>> from mqjoin.workload import parse_workload
>>> from mqjoin.tables import Table
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

from typing import Mapping

from .tables import Table
from .workload import Query, Workload


def query_results(workload: Workload, query: Query, tables: Mapping[str, Table]) -> set[tuple[int, ...]]:
    # join order: the query's relations as written, each next one connected to the joined ones
    order = [query.relations[0]]
    while len(order) < len(query.relations):
        for r in query.relations:
            if r not in order and any(r in c.relations and c.relations & set(order) for c in query.classes):
                order.append(r)
                break
    windows = {r: workload.window(r) for r in order}
    partial: list[dict[str, int]] = [{order[0]: i} for i in range(len(tables[order[0]]))]
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
        for i in range(len(t)):
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


def _windows_ok(p: Mapping[str, int], tables: Mapping[str, Table], windows: Mapping[str, float | None]) -> bool:
    T = max(tables[r].ts[i] for r, i in p.items())
    return all(windows[r] is None or T - tables[r].ts[i] <= windows[r] for r, i in p.items())


def oracle_results(workload: Workload, tables: Mapping[str, Table]) -> dict[str, set[tuple[int, ...]]]:
    """Every query's result set (DESIGN A6) by brute force."""
    return {q.name: query_results(workload, q, tables) for q in workload.queries}


def adaptive_oracle_results(workload: Workload, tables: Mapping[str, Table], lifetimes, policy,
                            ) -> dict[str, set[tuple[int, ...]]]:
    """What every query answers in an adaptive run (:mod:`mqjoin.adaptive`), by brute force:
    the A6 results whose latest tuple arrives in an epoch of the query's lifetime, among those
    whose tuples from before its activation were retained (:func:`~mqjoin.adaptive.available_since`).
    ``workload`` holds every query that is ever active (:func:`~mqjoin.adaptive.lifetimes`).

    >>> from mqjoin.workload import parse_workload
    >>> from mqjoin.adaptive import AdaptivePolicy, QueryChange, lifetimes
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 10}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a)"}
    ... ''')
    >>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
    ...           "S": Table.from_columns("S", {"ts": [1, 6], "a": [1, 1]}),
    ...           "T": Table.from_columns("T", {"ts": [2, 7], "a": [1, 1]})}
    >>> policy = AdaptivePolicy(epoch=1)
    >>> full, lives = lifetimes(w, [QueryChange(at=2.5, add={"q2": "S(a), T(a)"})], policy)
    >>> got = adaptive_oracle_results(full, tables, lives, policy)
    >>> sorted(got["q1"]), sorted(got["q2"])    # q2 from epoch 4: T's tuple 0 was never retained
    ([(0, 0), (0, 1), (1, 0), (1, 1)], [(0, 1), (1, 1)])
    """
    from .adaptive import available_since

    out = {}
    for lf in lifetimes:
        q = workload.query(lf.query)
        since = {} if lf.added is None else {r: available_since(workload, lifetimes, r, lf.added) for r in q.relations}
        keep = set()
        for res in query_results(workload, q, tables):
            ts = [tables[r].ts[i] for r, i in zip(q.relations, res)]
            if not lf.active(policy.epoch_of(max(ts))):
                continue
            if lf.added is not None and any(
                    policy.epoch_of(t) < lf.added and since[r] is not None and policy.epoch_of(t) < since[r]
                    for r, t in zip(q.relations, ts)):
                continue
            keep.add(res)
        out[lf.query] = keep
    return out
