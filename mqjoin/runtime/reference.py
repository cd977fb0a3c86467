"""The reference executor: runs a :class:`~mqjoin.plan.Plan` in-process over input tables.

Input tuples arrive one at a time in ``(ts, relation declaration order, row index)`` order —
the deterministic tie-break of DESIGN A6.  Each arriving tuple enters at its relation's
source and travels the plan's edges exactly as a distributed deployment would route it:

* every store is split into ``parallelism`` partitions by its partition attribute; each
  partition keeps local hash indexes, one per distinct access pattern of the probe rules;
* a probe whose edge has a route goes to one partition (one probe message); an unrouted
  probe is broadcast to every partition (one message per partition);
* a probe joins with stored entries whose every component still satisfies
  ``T − ts ≤ window`` (``T`` = the arriving tuple's ``ts``); expired entries are purged
  periodically so stores stay bounded.

A tuple never probes a store holding its own relation (probe orders target stores disjoint
from their prefix), so storing and probing need no ordering within one arrival, and each
result is produced exactly once — by its latest tuple.

>>> from mqjoin.workload import parse_workload
>>> from mqjoin.optimizer import optimize
>>> from mqjoin.tables import Table
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 1]})}
>>> run = run_reference(optimize(w).plan, tables)
>>> run.results["q"], run.total_probe_messages
([(0, 0)], 4)
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import DataError, PlanError
from ..plan import Plan, ProbeRule, Store
from ..tables import Table
from ..workload import Attr


def partition_of(value: Any, parallelism: int) -> int:
    """Deterministic partition of a value (strings hash by CRC32, not by Python's salted hash)."""
    if parallelism == 1 or value is None:
        return 0
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8")) % parallelism
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 and 1 join, so they must land in the same partition
    return hash(value) % parallelism


@dataclass(frozen=True)
class RunResult:
    """What a run produced and what it cost."""

    results: Mapping[str, list[tuple[int, ...]]]
    probe_messages: Mapping[str, int]  # probe edge label → messages sent
    store_messages: Mapping[str, int]  # store id → probe messages received
    store_rows: Mapping[str, int]  # store id → most entries held at once
    input_tuples: int
    seconds: float
    duration: float  # event-time span of the input (max ts − min ts)
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_probe_messages(self) -> int:
        return sum(self.probe_messages.values())

    @property
    def throughput(self) -> float:
        return self.input_tuples / self.seconds if self.seconds > 0 else math.inf

    def result_sets(self) -> dict[str, set[tuple[int, ...]]]:
        return {q: set(r) for q, r in self.results.items()}

    def summary(self) -> dict[str, Any]:
        return {
            "queries": {q: {"results": n} for q, n in self.counts.items()},
            "probe_messages": self.total_probe_messages,
            "probe_messages_by_store": dict(self.store_messages),
            "store_rows": dict(self.store_rows),
            "input_tuples": self.input_tuples,
            "seconds": self.seconds,
            "throughput": self.throughput,
        }


class _StoreState:
    __slots__ = ("store", "p", "layout", "part_pos", "indexes", "index_specs", "entries", "wchecks",
                 "interval", "next_purge", "max_rows")

    def __init__(self, store: Store, layout: tuple[str, ...], specs: list[tuple[tuple[int, int], ...]],
                 pos: Callable[[tuple[str, ...], Attr], tuple[int, int]], windows: Mapping[str, float | None]):
        self.store = store
        self.p = store.parallelism
        self.layout = layout
        self.part_pos = pos(layout, store.partition)
        self.index_specs = specs
        self.indexes: list[list[dict]] = [[{} for _ in specs] for _ in range(self.p)]
        self.entries: list[list[tuple]] = [[] for _ in range(self.p)]
        self.wchecks = tuple((i, windows[r]) for i, r in enumerate(layout) if windows[r] is not None)
        finite = [w for _, w in self.wchecks]
        self.interval = (min(finite) / 2 if min(finite) > 0 else 0.0) if finite else math.inf
        self.next_purge = -math.inf if finite else math.inf
        self.max_rows = 0

    def rows(self) -> int:
        return sum(len(e) for e in self.entries)

    def alive(self, e: tuple, T: float) -> bool:
        for i, w in self.wchecks:
            if T - e[i][1] > w:
                return False
        return True

    def purge(self, T: float) -> None:
        self.max_rows = max(self.max_rows, self.rows())
        for part in range(self.p):
            live = [e for e in self.entries[part] if self.alive(e, T)]
            self.entries[part] = live
            idxs = [{} for _ in self.index_specs]
            for e in live:
                self._index(idxs, e)
            self.indexes[part] = idxs
        self.next_purge = T + self.interval if self.interval > 0 else math.nextafter(T, math.inf)

    def _index(self, idxs: list[dict], e: tuple) -> None:
        for idx, spec in zip(idxs, self.index_specs):
            if len(spec) == 1:
                (c, f), = spec
                k = e[c][f]
            else:
                k = tuple(e[c][f] for c, f in spec)
                if None in k:
                    continue
            if k is None:
                continue
            lst = idx.get(k)
            if lst is None:
                idx[k] = [e]
            else:
                lst.append(e)

    def insert(self, e: tuple) -> None:
        c, f = self.part_pos
        part = partition_of(e[c][f], self.p)
        self.entries[part].append(e)
        self._index(self.indexes[part], e)


def run_reference(plan: Plan, tables: Mapping[str, Table], collect: bool = True) -> RunResult:
    """Run ``plan`` over ``tables`` (relation → :class:`~mqjoin.tables.Table`)."""
    w = plan.workload
    for r in plan.sources:
        if r not in tables:
            raise DataError(f"no input table for relation {r}, which the plan reads")
    attr_index = {r.name: {a: 2 + i for i, a in enumerate(r.attributes)} for r in w.relations}
    windows = {r.name: r.window for r in w.relations}

    def pos(layout: tuple[str, ...], a: Attr) -> tuple[int, int]:
        try:
            return layout.index(a.relation), attr_index[a.relation][a.name]
        except (ValueError, KeyError):
            raise PlanError(f"plan refers to {a}, which is not in the tuple layout {layout}") from None

    # stores with one index per distinct access pattern of their probe rules
    states: dict[str, _StoreState] = {}
    rule_index: dict[str, int] = {}
    for s in plan.stores:
        layout = s.mir.relations
        specs: list[tuple[tuple[int, int], ...]] = []
        for lab, rule in plan.rules.get(s.id, {}).items():
            if isinstance(rule, ProbeRule):
                spec = tuple(pos(layout, b) for _, b in rule.predicate)
                if spec not in specs:
                    specs.append(spec)
                rule_index[lab] = specs.index(spec)
        states[s.id] = _StoreState(s, layout, specs, pos, windows)

    clock = [0.0]
    msgs: dict[str, list[int]] = {}
    results: dict[str, list[tuple[int, ...]]] = {q.name: [] for q in w.queries}
    counts: dict[str, list[int]] = {q.name: [0] for q in w.queries}
    compiled: dict[str, Callable[[tuple], None]] = {}

    def compile_edge(label: str) -> Callable[[tuple], None]:
        if label in compiled:
            return compiled[label]
        e = plan.edge[label]
        if e.kind == "output":
            q = w.query(e.target.split(":", 1)[1])
            perm = tuple(e.layout.index(r) for r in q.relations)
            out_list, cnt = results[q.name], counts[q.name]

            if collect:
                def fn(t: tuple, perm=perm, out=out_list, cnt=cnt) -> None:
                    out.append(tuple(t[i][0] for i in perm))
                    cnt[0] += 1
            else:
                def fn(t: tuple, cnt=cnt) -> None:
                    cnt[0] += 1
        elif e.kind in ("ingest", "insert"):
            st = states[e.target]
            perm = tuple(e.layout.index(r) for r in st.layout)
            insert = st.insert
            if perm == tuple(range(len(perm))):
                fn = insert
            else:
                def fn(t: tuple, perm=perm, insert=insert) -> None:
                    insert(tuple(t[i] for i in perm))
        elif e.kind == "probe":
            fn = compile_probe(label)
        else:
            raise PlanError(f"edge {label} has unknown kind {e.kind!r}")
        compiled[label] = fn
        return fn

    def compile_probe(label: str) -> Callable[[tuple], None]:
        e = plan.edge[label]
        st = states[e.target]
        rule = plan.rules[e.target][label]
        if not isinstance(rule, ProbeRule):
            raise PlanError(f"edge {label} probes {e.target} but the store's rule for it is not a probe rule")
        outs = tuple(compile_edge(o) for o in rule.out)
        key_pos = tuple(pos(e.layout, a) for a, _ in rule.predicate)
        ix = rule_index[label]
        indexes = st.indexes
        p = st.p
        counter = msgs.setdefault(label, [0])
        route = pos(e.layout, e.route) if e.route is not None else None
        wchecks = st.wchecks
        all_parts = tuple(range(p))
        single_key = len(key_pos) == 1
        (kc, kf) = key_pos[0] if single_key else (0, 0)

        def probe(t: tuple) -> None:
            if route is not None:
                counter[0] += 1
                parts = (partition_of(t[route[0]][route[1]], p),)
            else:
                counter[0] += p
                parts = all_parts
            if single_key:
                k = t[kc][kf]
                if k is None:
                    return
            else:
                k = tuple(t[c][f] for c, f in key_pos)
                if None in k:
                    return
            T = clock[0]
            for part in parts:
                matches = indexes[part][ix].get(k)
                if not matches:
                    continue
                for m in matches:
                    ok = True
                    for ci, win in wchecks:
                        if T - m[ci][1] > win:
                            ok = False
                            break
                    if ok:
                        r = t + m
                        for f in outs:
                            f(r)

        return probe  # purges replace elements of st.indexes in place, so this sees live indexes

    sources = {r: tuple(compile_edge(lab) for lab in labs) for r, labs in plan.sources.items()}

    # base tuples and the arrival order
    base: dict[str, list[tuple]] = {}
    for r in plan.sources:
        t = tables[r]
        rel = w.relation(r)
        cols = [t.columns.get(a, (None,) * len(t)) for a in rel.attributes]
        base[r] = list(zip(range(len(t)), t.ts, *cols))
    order = _arrival_order(base, w.relation_rank)

    purgeable = [s for s in states.values() if s.interval < math.inf]
    t0 = time.perf_counter()
    next_purge = -math.inf if purgeable else math.inf
    last_T = None
    for r, row in order:
        tup = base[r][row]
        T = tup[1]
        if T != last_T:
            clock[0] = last_T = T
            if T >= next_purge:
                for s in purgeable:
                    if T >= s.next_purge:
                        s.purge(T)
                next_purge = min(s.next_purge for s in purgeable)
        t = (tup,)
        for f in sources[r]:
            f(t)
    seconds = time.perf_counter() - t0

    store_msgs: dict[str, int] = {s.id: 0 for s in plan.stores}
    for lab, c in msgs.items():
        store_msgs[plan.edge[lab].target] += c[0]
    all_ts = [tp[1] for rows in base.values() for tp in rows]
    return RunResult(
        results=results,
        probe_messages={lab: c[0] for lab, c in msgs.items()},
        store_messages=store_msgs,
        store_rows={sid: max(s.max_rows, s.rows()) for sid, s in states.items()},
        input_tuples=len(order),
        seconds=seconds,
        duration=(max(all_ts) - min(all_ts)) if all_ts else 0.0,
        counts={q: c[0] for q, c in counts.items()},
    )


def _arrival_order(base: Mapping[str, list[tuple]], rank: Mapping[str, int]) -> list[tuple[str, int]]:
    import numpy as np

    rels = [r for r in base if base[r]]
    if not rels:
        return []
    ts = np.concatenate([np.fromiter((t[1] for t in base[r]), float, len(base[r])) for r in rels])
    rk = np.concatenate([np.full(len(base[r]), rank[r]) for r in rels])
    rows = np.concatenate([np.arange(len(base[r])) for r in rels])
    idx = np.lexsort((rows, rk, ts))
    names = {rank[r]: r for r in rels}
    return [(names[k], int(i)) for k, i in zip(rk[idx].tolist(), rows[idx].tolist())]
