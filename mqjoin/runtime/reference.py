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
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import DataError, PlanError
from ..plan import Plan, ProbeRule, Store
from ..tables import Table
from ..workload import Attr


def partition_of(value: Any, parallelism: int) -> int:
    """Deterministic partition of a value (strings hash by CRC32, not by Python's salted hash)."""
    if value.__class__ is int:
        return value % parallelism
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


def _key_expr(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    """Source of the hash key read from ``var`` (a scalar for one attribute, else a tuple)."""
    if len(spec) == 1:
        (c, f), = spec
        return f"{var}[{c}][{f}]"
    return "(" + ", ".join(f"{var}[{c}][{f}]" for c, f in spec) + ",)"


def _null_test(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    return " or ".join(f"{var}[{c}][{f}] is None" for c, f in spec)


def _compile(src: str, name: str, env: dict[str, Any]) -> Callable:
    """Build a specialised function from generated source (as ``collections.namedtuple`` does):
    index positions and windows become constants, so the per-tuple path has no branching."""
    ns = dict(env)
    exec(compile(src, f"<mqjoin.reference {name}>", "exec"), ns)
    return ns[name]


class _StoreState:
    """One store: ``p`` partitions, each with hash indexes (one per access pattern).

    Entries of a base store expire in insertion order (arrivals are sorted by ``ts`` and one
    window applies), so they are evicted incrementally from the front (FIFO).  MIR entries
    expire by their oldest component, in no particular order: expired ones are found by a
    scan once per window and removed from their index lists.  Probes check windows
    themselves, so eviction only bounds memory."""

    def __init__(self, store: Store, layout: tuple[str, ...], specs: list[tuple[tuple[int, int], ...]],
                 pos: Callable[[tuple[str, ...], Attr], tuple[int, int]], windows: Mapping[str, float | None]):
        self.store = store
        self.p = store.parallelism
        self.layout = layout
        self.part_pos = pos(layout, store.partition)
        self.index_specs = specs
        self.wchecks = tuple((i, windows[r]) for i, r in enumerate(layout) if windows[r] is not None)
        self.fifo = len(layout) == 1
        self.indexes: list[list[dict]] = [[{} for _ in specs] for _ in range(self.p)]
        self.entries: list = [deque() if self.fifo else [] for _ in range(self.p)]
        finite = [w for _, w in self.wchecks]
        if not finite:
            self.interval = math.inf
        else:
            w = min(finite)
            self.interval = (w / 4 if self.fifo else w) if w > 0 else 0.0
        self.next_purge = -math.inf if finite else math.inf
        self.max_rows = 0
        self.insert = self._compile_insert()
        test = " or ".join(f"T - e[{c}][1] > {w!r}" for c, w in self.wchecks) or "False"
        self.expired = _compile(f"def expired(e, T):\n    return {test}\n", "expired", {})
        self.key = [_compile(f"def key(e):\n    return None if {_null_test('e', spec)} else {_key_expr('e', spec)}\n",
                             "key", {}) for spec in specs]

    def rows(self) -> int:
        return sum(len(e) for e in self.entries)

    def _compile_insert(self) -> Callable[[tuple], None]:
        pc, pf = self.part_pos
        lines = ["def insert(e):",
                 "    part = 0" if self.p == 1 else
                 f"    v = e[{pc}][{pf}]\n    part = v % {self.p} if v.__class__ is int else partition_of(v, {self.p})",
                 "    entries[part].append(e)",
                 "    idxs = indexes[part]"]
        for i, spec in enumerate(self.index_specs):
            lines += [f"    if not ({_null_test('e', spec)}):",
                      f"        k = {_key_expr('e', spec)}",
                      f"        lst = idxs[{i}].get(k)",
                      "        if lst is None:",
                      f"            idxs[{i}][k] = new_list((e,))",
                      "        else:",
                      "            lst.append(e)"]
        return _compile("\n".join(lines) + "\n", "insert", {
            "entries": self.entries, "indexes": self.indexes, "partition_of": partition_of,
            "new_list": deque if self.fifo else list})

    def purge(self, T: float) -> None:
        self.max_rows = max(self.max_rows, self.rows())
        for part in range(self.p):
            q, idxs = self.entries[part], self.indexes[part]
            if self.fifo:
                (c, w), = self.wchecks
                expired = []
                while q and T - q[0][c][1] > w:
                    expired.append(q.popleft())
            else:
                live, expired = [], []
                test = self.expired
                for e in q:
                    (expired if test(e, T) else live).append(e)
                q[:] = live
            for e in expired:
                for idx, key in zip(idxs, self.key):
                    k = key(e)
                    if k is not None:
                        lst = idx[k]
                        if self.fifo:
                            lst.popleft()
                        else:
                            lst.remove(e)
                        if not lst:
                            del idx[k]
        self.next_purge = T + self.interval if self.interval > 0 else math.nextafter(T, math.inf)


def run_reference(plan: Plan, tables: Mapping[str, Table], collect: bool = True) -> RunResult:
    """Run ``plan`` over ``tables`` (relation → :class:`~mqjoin.tables.Table`).  With
    ``collect=False`` results are only counted (for throughput measurements)."""
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
    outputs: list[tuple[str, tuple[int, ...], list[tuple]]] = []  # query, permutation, raw results
    counts: dict[str, list[int]] = {q.name: [0] for q in w.queries}
    compiled: dict[str, Callable[[tuple], None]] = {}

    def compile_edge(label: str) -> Callable[[tuple], None]:
        if label not in compiled:
            compiled[label] = _compile_edge(label)
        return compiled[label]

    def _compile_edge(label: str) -> Callable[[tuple], None]:
        e = plan.edge[label]
        if e.kind == "output":
            q = w.query(e.target.split(":", 1)[1])
            raw: list[tuple] = []
            outputs.append((q.name, tuple(e.layout.index(r) for r in q.relations), raw))
            body = "    append(t)\n" if collect else ""
            return _compile(f"def out(t):\n{body}    cnt[0] += 1\n", "out", {"append": raw.append,
                                                                            "cnt": counts[q.name]})
        if e.kind in ("ingest", "insert"):
            st = states[e.target]
            perm = tuple(e.layout.index(r) for r in st.layout)
            if perm == tuple(range(len(perm))):
                return st.insert
            return _compile("def put(t):\n    insert((" + "".join(f"t[{i}], " for i in perm) + "))\n", "put",
                            {"insert": st.insert})
        if e.kind != "probe":
            raise PlanError(f"edge {label} has unknown kind {e.kind!r}")
        st = states[e.target]
        rule = plan.rules[e.target][label]
        if not isinstance(rule, ProbeRule):
            raise PlanError(f"edge {label} probes {e.target} but the store's rule for it is not a probe rule")
        outs = [compile_edge(o) for o in rule.out]
        spec = tuple(pos(e.layout, a) for a, _ in rule.predicate)
        env: dict[str, Any] = {"indexes": st.indexes, "clock": clock, "counter": msgs.setdefault(label, [0]),
                               "partition_of": partition_of}
        env.update({f"f{i}": f for i, f in enumerate(outs)})
        env.update({f"w{i}": win for i, (_, win) in enumerate(st.wchecks)})
        lines = ["def probe(t):"]
        if e.route is not None:
            rc, rf = pos(e.layout, e.route)
            lines += ["    counter[0] += 1"]
            lines += ["    part = 0"] if st.p == 1 else [
                f"    v = t[{rc}][{rf}]",
                f"    part = v % {st.p} if v.__class__ is int else partition_of(v, {st.p})"]
            lines += [f"    if {_null_test('t', spec)}:", "        return",
                      f"    matches = indexes[part][{rule_index[label]}].get({_key_expr('t', spec)})",
                      "    if not matches:", "        return",
                      "    T = clock[0]", "    for m in matches:"]
            ind = "        "
        else:
            lines += [f"    counter[0] += {st.p}",
                      f"    if {_null_test('t', spec)}:", "        return",
                      f"    k = {_key_expr('t', spec)}", "    T = clock[0]",
                      "    for idxs in indexes:",
                      f"        matches = idxs[{rule_index[label]}].get(k)",
                      "        if not matches:", "            continue",
                      "        for m in matches:"]
            ind = "            "
        for i, (c, _) in enumerate(st.wchecks):
            lines += [f"{ind}if T - m[{c}][1] > w{i}:", f"{ind}    continue"]
        lines += [f"{ind}r = t + m"] + [f"{ind}f{i}(r)" for i in range(len(outs))]
        return _compile("\n".join(lines) + "\n", "probe", env)

    sources = {r: tuple(compile_edge(lab) for lab in labs) for r, labs in plan.sources.items()}

    # base tuples and the arrival order
    base: dict[str, list[tuple]] = {}
    for r in plan.sources:
        t = tables[r]
        rel = w.relation(r)
        cols = [t.columns.get(a, (None,) * len(t)) for a in rel.attributes]
        base[r] = list(zip(range(len(t)), t.ts, *cols))
    arrivals = [(base[r][row], sources[r]) for r, row in _arrival_order(base, w.relation_rank)]

    purgeable = [s for s in states.values() if s.interval < math.inf]
    t0 = time.perf_counter()
    next_purge = -math.inf if purgeable else math.inf
    last_T = None
    for tup, fs in arrivals:
        T = tup[1]
        if T != last_T:
            clock[0] = last_T = T
            if T >= next_purge:
                for s in purgeable:
                    if T >= s.next_purge:
                        s.purge(T)
                next_purge = min(s.next_purge for s in purgeable)
        t = (tup,)
        for f in fs:
            f(t)
    seconds = time.perf_counter() - t0

    store_msgs: dict[str, int] = {s.id: 0 for s in plan.stores}
    for lab, c in msgs.items():
        store_msgs[plan.edge[lab].target] += c[0]
    all_ts = [tp[1] for rows in base.values() for tp in rows]
    results: dict[str, list[tuple[int, ...]]] = {q.name: [] for q in w.queries}
    for qname, perm, raw in outputs:
        results[qname].extend([tuple([t[i][0] for i in perm]) for t in raw])
    return RunResult(
        results=results,
        probe_messages={lab: c[0] for lab, c in msgs.items()},
        store_messages=store_msgs,
        store_rows={sid: max(s.max_rows, s.rows()) for sid, s in states.items()},
        input_tuples=len(arrivals),
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
