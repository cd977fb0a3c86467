"""The adaptive reference executor: plans that change by epoch, stores with one container per
epoch, queries that arrive and leave (paper Section VI; the controller is
:mod:`mqjoin.adaptive`).

Tuples arrive one at a time in DESIGN A6 order, as in :mod:`mqjoin.runtime.reference`.  A tuple
of epoch ``j`` follows the plan of epoch ``j``: it is stored into that plan's stores and
probes along that plan's probe orders.  What changes is what a store *is*:

* **Containers.**  A store keeps one container per epoch (paper Algorithm 4).  A base store's
  container of epoch ``ℓ`` holds the relation's tuples that arrived in ``ℓ``; an MIR store's
  container holds the MIR tuples whose latest component arrived in ``ℓ`` (they are inserted by
  the materialisation orders of epoch ``ℓ``'s plan, when that component arrives).  Each
  container is partitioned as the plan of its epoch said (partition attribute, parallelism).
* **Probing across epochs.**  A probe for the MIR ``M`` reaches every epoch its window can
  reach.  Where epoch ``ℓ`` has a container of ``M``, the probe follows that container's rules:
  routed to one partition when the travelling tuple knows its partition attribute, else
  broadcast to all.  Containers of several epochs laid out alike are reached with one message.
  Where epoch ``ℓ`` has no container of ``M`` (the MIR was not materialised then, or was
  dropped), the older partners are **probed iteratively** (paper Section VII-B): through the
  base containers of ``M``'s relations, one relation at a time, keeping the combinations
  whose latest component arrived in such an epoch.  Every combination has exactly one latest
  epoch, found exactly one way — so switching plans loses no result and duplicates none.
* **Reference counting.**  When an epoch starts, containers of MIRs its plan does not use
  and of relations no active query uses are dropped; containers whose every tuple is outside
  every window are dropped too.  A relation is *retained* while some active query uses it
  (its base store always exists then, even in the rare plan without one).

What a query added or removed at run time answers is defined in :mod:`mqjoin.adaptive`.

**Latency.**  The executor runs in one process, so latency is measured by replaying the
input at its event-time rate × ``speedup`` against the *measured* processing time of each
tuple: tuple ``i`` arrives at ``a_i = (ts_i − ts_0) / speedup``, starts at
``max(a_i, f_{i−1})`` and finishes ``f_i`` after its service time — the CPU time the
executing thread spent on it (so other processes on the machine do not distort it); its latency
``f_i − a_i`` is the time until all its results are computed (the paper's definition), and the
backlog is the number of arrived tuples not yet finished.  A plan that cannot keep up shows
as latency and backlog growing without bound.  (Optimisation runs beside the stream — its
result is needed only one epoch later — and is not charged to tuples.)

>>> from mqjoin.workload import parse_workload
>>> from mqjoin.tables import Table
>>> from mqjoin.adaptive import AdaptivePolicy
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 2, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 1.5, 3.2], "a": [1, 1, 2]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 2.5, 3.3], "a": [1, 1, 2]})}
>>> run = run_adaptive(w, tables, AdaptivePolicy(epoch=1.0))
>>> sorted(run.results["q"]), [e.epoch for e in run.epochs]
([(0, 0), (1, 0), (1, 1), (2, 2)], [0, 1, 2, 3])
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..adaptive import (
    AdaptiveController,
    AdaptivePolicy,
    Decision,
    EpochSample,
    Lifetime,
    Optimizer,
    QueryChange,
    agreeing_pairs,
    lifetimes,
    sampled,
)
from ..candidates import MIR
from ..errors import DataError, PlanError
from ..plan import Plan, ProbeRule, Store, _route
from ..tables import Table
from ..workload import Attr, JoinClass, Workload, is_connected
from .reference import _arrival_order, partition_of

MirKey = tuple  # (relations, class member tuples): an MIR's identity whatever its statistics
Layout = tuple  # (namespace, MirKey, partition attribute): how a store is laid out


def mir_key(m: MIR) -> MirKey:
    """An MIR's identity for containers: relations and classes, without selectivities (plans
    optimised on other statistics carry other selectivities in their classes)."""
    return (m.relations, tuple(c.members for c in m.classes))


def layout_of(s: Store) -> Layout:
    return (s.namespace, mir_key(s.mir), s.partition)


class ContainerIndex:
    """Which containers (layout, epoch) exist, and the reference counting that creates and
    drops them (paper Section VI): the one bookkeeping of both engines — the reference
    executor keeps each container's rows in a :class:`_Container`, the Spark engine in a
    store per layout with an ``_ep`` column.  Subclasses extend :meth:`establish` (True when
    the container is new) and :meth:`drop` (the containers dropped)."""

    def __init__(self, policy: AdaptivePolicy, windows: Mapping[str, float | None]):
        self.policy = policy
        self.win = dict(windows)
        self.by_mir: dict[MirKey, dict[int, list[Layout]]] = {}  # established containers per epoch
        self.mirs: dict[MirKey, MIR] = {}
        self.p: dict[Layout, int] = {}  # parallelism per layout, as last established
        self.data_epochs: list[int] = []  # epochs with tuples, ascending
        self._missing: dict[tuple[MirKey, int], list[int]] = {}  # emptied whenever the above change

    def maxwin(self, mk: MirKey) -> float | None:
        ws = [self.win[r] for r in mk[0]]
        return None if any(x is None for x in ws) else max(ws)

    def reach(self, mk: MirKey, T: float) -> float:
        """The oldest epoch whose container of ``mk`` may hold a tuple within a window of ``T``
        (one epoch of margin: epoch boundaries are computed in floating point)."""
        mw = self.maxwin(mk)
        return -math.inf if mw is None else self.policy.epoch_of(T - mw) - 1

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        mk = layout[1]
        self.mirs[mk] = mir
        self.p[layout] = p
        by = self.by_mir.setdefault(mk, {})
        if layout in by.get(epoch, ()):
            return False
        by.setdefault(epoch, []).append(layout)
        self._missing = {}
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        by = self.by_mir.get(mk, {})
        gone = [(layout, ep) for ep in list(by if epochs is None else epochs) for layout in by.pop(ep, ())]
        if not by:
            self.by_mir.pop(mk, None)
        if gone:
            self._missing = {}
        return gone

    def open_epoch(self, epoch: int, plan: Plan, retained: frozenset[str], T: float, w: Workload) -> None:
        """Enter ``epoch`` under ``plan``: drop the MIRs the plan does not use and the relations
        no active query uses (``retained``), expire what no window reaches, establish the
        plan's containers and a base container for every retained relation."""
        used = {mir_key(s.mir) for s in plan.stores}
        for mk in list(self.by_mir):
            rels = mk[0]
            if (len(rels) == 1 and rels[0] not in retained) or (len(rels) > 1 and mk not in used):
                self.drop(mk)
        self.expire(T)
        for s in plan.stores:
            self.establish(layout_of(s), s.mir, epoch, s.parallelism)
        base = {s.mir.relations[0] for s in plan.stores if s.mir.is_base}
        for r in sorted(retained - base):  # a retained relation whose plan keeps no base store
            m = MIR.of(w, [r], ())
            self.establish(("", mir_key(m), w.relation(r).attr(w.relation(r).attributes[0])), m, epoch,
                           w.parallelism(r))
        self.data_epochs.append(epoch)
        self._missing = {}

    def expire(self, T: float) -> None:
        for mk, by in list(self.by_mir.items()):
            lo = self.reach(mk, T)
            old = [ep for ep in by if ep < lo]
            if old:
                self.drop(mk, old)

    def missing(self, mk: MirKey, epoch: int) -> list[int]:
        """Epochs with data (up to ``epoch``) that have no container of the MIR ``mk``."""
        got = self._missing.get((mk, epoch))
        if got is None:
            est = self.by_mir.get(mk, {})
            got = self._missing[(mk, epoch)] = [e for e in self.data_epochs if e <= epoch and e not in est]
        return got

    def epochs(self, layout: Layout) -> list[int]:
        return sorted(e for e, ls in self.by_mir.get(layout[1], {}).items() if layout in ls)

    def count(self) -> int:
        return sum(len(ls) for by in self.by_mir.values() for ls in by.values())


def probe_pairs(classes: tuple[JoinClass, ...], r: str, layout_rels: list[str]) -> list[tuple[Attr, Attr]]:
    """The equalities of one hop of iterative probing into relation ``r``: per class with a
    member of ``r``, the first member among ``layout_rels`` (the partial rows) and ``r``'s."""
    pred = []
    for c in classes:
        mine = c.member_of(r)
        if mine is None:
            continue
        left = [a for a in c.members if a.relation in layout_rels]
        if left:
            pred.append((left[0], mine))
    return pred


@dataclass(frozen=True)
class EpochRecord:
    """What one epoch did.  ``state_rows``: entries held in all containers at its end;
    ``stores``: per store (``S[b]``, ``ST[a]`` …) across its epoch containers;
    ``history_messages``: probe messages of iterative probing of older partners (part of
    ``probe_messages``); latencies in seconds of the simulated replay (see the module doc)."""

    epoch: int
    start: float
    plan: int
    queries: tuple[str, ...]
    input_tuples: int
    results: Mapping[str, int]
    probe_messages: int
    history_messages: int
    state_rows: int
    containers: int
    stores: Mapping[str, int]
    busy_seconds: float
    latency_mean: float
    latency_p95: float
    latency_max: float
    backlog_max: int

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class AdaptiveRun:
    """Results and the epoch timeline of an adaptive run."""

    workload: Workload  # every query that was ever active
    policy: AdaptivePolicy
    results: Mapping[str, list[tuple[int, ...]]]
    epochs: tuple[EpochRecord, ...]
    decisions: tuple[Decision, ...]
    plans: tuple[Plan, ...]
    lifetimes: tuple[Lifetime, ...]
    input_tuples: int
    seconds: float
    speedup: float

    def result_sets(self) -> dict[str, set[tuple[int, ...]]]:
        return {q: set(r) for q, r in self.results.items()}

    @property
    def throughput(self) -> float:
        return self.input_tuples / self.seconds if self.seconds > 0 else math.inf

    @property
    def switches(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.switched)

    def timeline(self):
        """One row per epoch (pandas): plan, tuples, results, messages, state, latency."""
        import pandas as pd

        rows = []
        for e in self.epochs:
            d = e.to_dict()
            d.pop("stores")
            d["results"] = sum(e.results.values())
            d["queries"] = ", ".join(e.queries)
            rows.append(d)
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        """Plain values for ``--json``."""
        return {
            "queries": {q: {"results": len(r)} for q, r in self.results.items()},
            "input_tuples": self.input_tuples, "seconds": self.seconds, "throughput": self.throughput,
            "policy": self.policy.to_dict(), "speedup": self.speedup,
            "lifetimes": {lf.query: {"added": lf.added, "removed": lf.removed} for lf in self.lifetimes},
            "plans": [{"probe_cost": p.probe_cost, "probe_orders": p.probe_orders(),
                       "stores": [s.id for s in p.stores]} for p in self.plans],
            "decisions": [d.to_dict() for d in self.decisions],
            "epochs": [e.to_dict() for e in self.epochs],
        }


# --------------------------------------------------------------------------------------------
# containers
# --------------------------------------------------------------------------------------------


class _Container:
    """One store's entries of one epoch: ``p`` partitions with hash indexes built on demand
    (one per access pattern: a tuple of (component, field) positions)."""

    __slots__ = ("layout", "epoch", "p", "part_pos", "parts", "indexes")

    def __init__(self, layout: Layout, epoch: int, p: int, part_pos: tuple[int, int]):
        self.layout = layout
        self.epoch = epoch
        self.p = p
        self.part_pos = part_pos
        self.parts: list[list[tuple]] = [[] for _ in range(p)]
        self.indexes: dict[tuple, list[dict]] = {}

    def rows(self) -> int:
        return sum(len(x) for x in self.parts)

    def partition(self, value: Any) -> int:
        return 0 if self.p == 1 else partition_of(value, self.p)

    def insert(self, e: tuple) -> None:
        c, f = self.part_pos
        part = self.partition(e[c][f])
        self.parts[part].append(e)
        for pat, dicts in self.indexes.items():
            k = tuple(e[c][f] for c, f in pat)
            if None not in k:
                dicts[part].setdefault(k, []).append(e)

    def index(self, pat: tuple) -> list[dict]:
        dicts = self.indexes.get(pat)
        if dicts is None:
            dicts = self.indexes[pat] = [{} for _ in range(self.p)]
            for part, entries in enumerate(self.parts):
                d = dicts[part]
                for e in entries:
                    k = tuple(e[c][f] for c, f in pat)
                    if None not in k:
                        d.setdefault(k, []).append(e)
        return dicts

    def purge(self, T: float, wchecks: tuple[tuple[int, float], ...]) -> None:
        if not wchecks:
            return
        changed = False
        for part, entries in enumerate(self.parts):
            live = [e for e in entries if all(T - e[c][1] <= w for c, w in wchecks)]
            if len(live) != len(entries):
                self.parts[part] = live
                changed = True
        if changed:
            pats = list(self.indexes)
            self.indexes = {}
            for pat in pats:
                self.index(pat)


@dataclass
class _ProbeInfo:
    """A plan's probe edge, prepared: target MIR and layout, pattern and key positions."""

    label: str
    layout: Layout
    mkey: MirKey
    mir: MIR
    classes: tuple[JoinClass, ...]
    travelling: tuple[str, ...]
    pattern: tuple[tuple[int, int], ...]  # positions in the stored entry
    key_pos: tuple[tuple[int, int], ...]  # positions in the travelling tuple
    outs: tuple[str, ...]
    routes: dict = field(default_factory=dict)  # layout → travelling position of the route, or None


class _Epoch:
    """Counters of the epoch being processed."""

    def __init__(self, epoch: int, start: float, plan: int, queries: tuple[str, ...]):
        self.epoch, self.start, self.plan, self.queries = epoch, start, plan, queries
        self.tuples = 0
        self.results: Counter = Counter()
        self.messages = 0
        self.history = 0
        self.busy = 0.0
        self.latencies: list[float] = []
        self.backlog = 0
        self.n: Counter = Counter()
        self.counts: dict[Attr, Counter] = {}


# --------------------------------------------------------------------------------------------
# the executor
# --------------------------------------------------------------------------------------------


def run_adaptive(workload: Workload, tables: Mapping[str, Table], policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), *, speedup: float = 1.0, optimizer: Optimizer | None = None,
                 collect: bool = True, on_epoch: Callable[[EpochRecord], None] | None = None) -> AdaptiveRun:
    """Run ``workload``'s queries over ``tables`` with the plan re-optimised every epoch
    (see :mod:`mqjoin.adaptive` for the policy and the query changelog).  ``speedup`` scales
    the replay of the simulated latency; ``optimizer`` replaces :func:`mqjoin.optimizer.optimize`
    (e.g. to force plan switches in tests); ``on_epoch`` sees every finished epoch."""
    if not (isinstance(speedup, (int, float)) and speedup > 0 and math.isfinite(speedup)):
        raise DataError(f"speedup must be a positive number, got {speedup!r}")
    ex = _Executor(workload, tables, policy or AdaptivePolicy(), list(changes), speedup, optimizer, collect, on_epoch)
    return ex.run()


class _Executor(ContainerIndex):
    def __init__(self, workload, tables, policy, changes, speedup, optimizer, collect, on_epoch):
        self.ctl = AdaptiveController(workload, policy, changes, optimizer)
        self.policy = policy
        self.w = self.ctl.full
        for r in sorted({r for q in self.w.queries for r in q.relations}):
            if r not in tables:
                raise DataError(f"no input table for relation {r}, which query "
                                f"{next(q.name for q in self.w.queries if r in q.relations)} joins")
        self.tables = tables
        self.speedup = float(speedup)
        self.collect = collect
        self.on_epoch = on_epoch
        super().__init__(policy, {r.name: r.window for r in self.w.relations})
        self.attr_pos = {r.name: {a: 2 + i for i, a in enumerate(r.attributes)} for r in self.w.relations}
        self.containers: dict[tuple[Layout, int], _Container] = {}
        self.infos: dict[int, dict[str, Any]] = {}  # plan index → prepared edges
        self.results: dict[str, list[tuple[int, ...]]] = {q.name: [] for q in self.w.queries}
        self.records: list[EpochRecord] = []
        self.lock = threading.RLock()
        self.event_time: float | None = None

    # -- containers ---------------------------------------------------------------------------

    def wchecks(self, relations: tuple[str, ...]) -> tuple[tuple[int, float], ...]:
        return tuple((i, self.win[r]) for i, r in enumerate(relations) if self.win[r] is not None)

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        if not super().establish(layout, mir, epoch, p):
            return False
        part = layout[2]
        pos = (mir.relations.index(part.relation), self.attr_pos[part.relation][part.name])
        self.containers[(layout, epoch)] = _Container(layout, epoch, p, pos)
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        gone = super().drop(mk, epochs)
        for key in gone:
            del self.containers[key]
        return gone

    def expire(self, T: float) -> None:
        super().expire(T)
        checks: dict[MirKey, tuple] = {}
        for (layout, ep), c in self.containers.items():
            mk = layout[1]
            if mk not in checks:
                checks[mk] = self.wchecks(mk[0])
            c.purge(T, checks[mk])

    # -- plans --------------------------------------------------------------------------------

    def prepare(self, plan_index: int) -> dict[str, Any]:
        got = self.infos.get(plan_index)
        if got is not None:
            return got
        plan = self.ctl.plans[plan_index]
        nodes = {n.edge: n for n in plan.nodes}
        info: dict[str, Any] = {}
        for e in plan.edges:
            if e.kind == "probe":
                st = plan.store[e.target]
                rule = plan.rules[e.target][e.label]
                if not isinstance(rule, ProbeRule):
                    raise PlanError(f"edge {e.label} probes {e.target} but its rule is not a probe rule")
                mir = st.mir
                pattern = tuple((mir.relations.index(b.relation), self.attr_pos[b.relation][b.name])
                                for _, b in rule.predicate)
                key_pos = tuple((e.layout.index(a.relation), self.attr_pos[a.relation][a.name])
                                for a, _ in rule.predicate)
                layout = (st.namespace, mir_key(mir), st.partition)
                pi = _ProbeInfo(e.label, layout, mir_key(mir), mir, nodes[e.label].step.classes, e.layout,
                                pattern, key_pos, rule.out)
                pi.routes[layout] = None if e.route is None else (e.layout.index(e.route.relation),
                                                                  self.attr_pos[e.route.relation][e.route.name])
                info[e.label] = ("probe", pi)
            elif e.kind in ("ingest", "insert"):
                st = plan.store[e.target]
                layout = (st.namespace, mir_key(st.mir), st.partition)
                perm = tuple(e.layout.index(r) for r in st.mir.relations)
                info[e.label] = ("store", layout, None if perm == tuple(range(len(perm))) else perm)
            elif e.kind == "output":
                q = self.w.query(e.target.split(":", 1)[1])
                info[e.label] = ("output", q.name, tuple(e.layout.index(r) for r in q.relations))
            else:
                raise PlanError(f"edge {e.label} has unknown kind {e.kind!r}")
        info["_sources"] = {r: tuple(labs) for r, labs in plan.sources.items()}
        self.infos[plan_index] = info
        return info

    def route(self, pi: _ProbeInfo, layout: Layout) -> tuple[int, int] | None:
        if layout not in pi.routes:
            a = _route(pi.classes, pi.travelling, pi.mir, layout[2])
            pi.routes[layout] = None if a is None else (pi.travelling.index(a.relation),
                                                        self.attr_pos[a.relation][a.name])
        return pi.routes[layout]

    # -- tuples -------------------------------------------------------------------------------

    def send(self, info: dict, label: str, t: tuple, T: float, epoch: int, ep: _Epoch) -> None:
        kind = info[label]
        if kind[0] == "probe":
            pi: _ProbeInfo = kind[1]
            for r in self.probe(pi, t, T, epoch, ep):
                for out in pi.outs:
                    self.send(info, out, r, T, epoch, ep)
        elif kind[0] == "store":
            _, layout, perm = kind
            self.containers[(layout, epoch)].insert(t if perm is None else tuple(t[i] for i in perm))
        else:
            _, q, perm = kind
            ep.results[q] += 1
            if self.collect:
                self.results.setdefault(q, []).append(tuple(t[i][0] for i in perm))

    def probe(self, pi: _ProbeInfo, t: tuple, T: float, epoch: int, ep: _Epoch) -> list[tuple]:
        lo = self.reach(pi.mkey, T)
        groups: dict[Layout, list[_Container]] = {}
        for e2, layouts in self.by_mir.get(pi.mkey, {}).items():
            if lo <= e2 <= epoch:
                layout = self.choose(pi, layouts)
                groups.setdefault(layout, []).append(self.containers[(layout, e2)])
        routes = {layout: self.route(pi, layout) for layout in groups}
        for layout, conts in groups.items():  # one message per partition reached, per layout
            ep.messages += 1 if routes[layout] is not None else conts[0].p
        key = tuple(t[c][f] for c, f in pi.key_pos)
        if None in key:  # nulls join nothing (also not through older partners)
            return []
        out: list[tuple] = []
        checks = self.wchecks(pi.mir.relations)
        for layout, conts in groups.items():
            rp = routes[layout]
            for c in conts:
                dicts = c.index(pi.pattern)
                parts = [dicts[c.partition(t[rp[0]][rp[1]])]] if rp is not None else dicts
                for d in parts:
                    for m in d.get(key, ()):
                        if all(T - m[i][1] <= w for i, w in checks):
                            out.append(t + m)
        if len(pi.mir.relations) > 1:
            gaps = [e2 for e2 in self.missing(pi.mkey, epoch) if e2 >= lo]
            if gaps:
                out.extend(self.expand(pi, t, T, set(gaps), ep))
        return out

    def choose(self, pi: _ProbeInfo, layouts: list[Layout]) -> Layout:
        """The container of an epoch to probe: the plan's own layout, else one the travelling
        tuple can route to, else the first (deterministic: layouts in establishment order)."""
        if pi.layout in layouts:
            return pi.layout
        for layout in layouts:
            if self.route(pi, layout) is not None:
                return layout
        return layouts[0]

    def expand(self, pi: _ProbeInfo, t: tuple, T: float, gaps: set[int], ep: _Epoch) -> list[tuple]:
        """Iterative probing of older partners: the MIR's combinations whose latest component
        arrived in an epoch of ``gaps`` (no container of the MIR there).  The MIR's relations
        are joined one at a time from their base containers — each probed under the rules of its
        epoch — until the relations left form an MIR that has containers itself (e.g. the older
        plan's ``TU`` when ``STU`` is new): that one is probed as a whole (recursively the same
        way), as the older plan did.  Combinations whose latest component is not in a gap are
        found directly in the MIR's own containers, so they are dropped here."""
        rels = list(pi.mir.relations)
        joined = list(pi.travelling)
        order: list[str] = []
        classes = pi.classes
        rank = self.w.relation_rank
        while len(order) < len(rels):
            nxt = [r for r in rels if r not in order and any(c.member_of(r) and c.relations & set(joined) for c in classes)]
            if not nxt:
                raise PlanError(f"cannot probe {pi.mir.label} from {', '.join(joined)}: not connected")
            r = min(nxt, key=lambda x: rank[x])
            order.append(r)
            joined.append(r)
        top = max(gaps)
        epoch_of = self.policy.epoch_of
        partials: list[tuple] = [t]
        layout_rels = list(pi.travelling)
        for k, r in enumerate(order):
            rest = order[k:]
            if k > 0 and len(rest) > 1:
                sub = MIR.of(self.w, rest, pi.mir.classes)
                if mir_key(sub) in self.by_mir and is_connected(sub.relations, sub.classes):
                    partials = self._probe_sub(pi, sub, layout_rels, partials, T, top, ep)
                    layout_rels.extend(sub.relations)
                    break
            partials = self._probe_base(classes, r, layout_rels, partials, T, top, ep)
            layout_rels.append(r)
            if not partials:
                return []
        # keep the combinations whose latest component is in a gap; reorder to the MIR's layout
        n0 = len(pi.travelling)
        perm = [layout_rels.index(r) for r in rels]
        out = []
        for x in partials:
            latest = max(x[n0:], key=lambda b: b[1])
            if epoch_of(latest[1]) in gaps:
                out.append(t + tuple(x[i] for i in perm))
        return out

    def _probe_base(self, classes: tuple[JoinClass, ...], r: str, layout_rels: list[str], partials: list[tuple],
                    T: float, top: int, ep: _Epoch) -> list[tuple]:
        """One hop of iterative probing: the partials probe relation ``r``'s base containers of
        every epoch up to ``top`` (routed where the container's partitioning allows)."""
        pred = probe_pairs(classes, r, layout_rels)
        key_pos = tuple((layout_rels.index(a.relation), self.attr_pos[a.relation][a.name]) for a, _ in pred)
        pattern = tuple((0, self.attr_pos[r][b.name]) for _, b in pred)
        w = self.win[r]
        mk = mir_key(MIR.of(self.w, [r], ()))
        lo = self.reach(mk, T)
        groups: dict[Layout, list[_Container]] = {}
        for e2, layouts in self.by_mir.get(mk, {}).items():
            if lo <= e2 <= top:
                layout = layouts[0]
                for cand in layouts:
                    if _route(classes, layout_rels, self.mirs[mk], cand[2]) is not None:
                        layout = cand
                        break
                groups.setdefault(layout, []).append(self.containers[(layout, e2)])
        out = []
        for layout, conts in groups.items():
            ra = _route(classes, layout_rels, self.mirs[mk], layout[2])
            rp = None if ra is None else (layout_rels.index(ra.relation), self.attr_pos[ra.relation][ra.name])
            msgs = len(partials) * (1 if rp is not None else conts[0].p)
            ep.messages += msgs
            ep.history += msgs
            for c in conts:
                dicts = c.index(pattern)
                for x in partials:
                    k = tuple(x[a][f] for a, f in key_pos)
                    if None in k:
                        continue
                    parts = [dicts[c.partition(x[rp[0]][rp[1]])]] if rp is not None else dicts
                    for d in parts:
                        for m in d.get(k, ()):
                            if w is None or T - m[0][1] <= w:
                                out.append(x + m)
        return out

    def _probe_sub(self, pi: _ProbeInfo, sub: MIR, layout_rels: list[str], partials: list[tuple], T: float,
                   top: int, ep: _Epoch) -> list[tuple]:
        """The partials probe the MIR ``sub`` as a whole (its containers up to epoch ``top``,
        older partners of its own gaps iteratively)."""
        travelling = tuple(layout_rels)
        pred = []
        for c in pi.classes:
            left = [a for a in c.members if a.relation in travelling]
            right = [a for a in c.members if a.relation in sub.relation_set]
            if left and right:
                pred.append((left[0], right[0]))
        info = _ProbeInfo("", None, mir_key(sub), sub, pi.classes, travelling,
                          tuple((sub.relations.index(b.relation), self.attr_pos[b.relation][b.name]) for _, b in pred),
                          tuple((travelling.index(a.relation), self.attr_pos[a.relation][a.name]) for a, _ in pred), ())
        messages, history = ep.messages, ep.history
        out = []
        for x in partials:
            out.extend(self.probe(info, x, T, top, ep))
        ep.history = history + (ep.messages - messages)  # every message of this probe (nested ones once)
        return out

    # -- the run ------------------------------------------------------------------------------

    def run(self, pace: Callable[[float], bool] | None = None) -> AdaptiveRun:
        """Process every tuple; ``pace(arrival)`` is called before each (its scheduled arrival in
        seconds since the first) and stops the run by returning False (a live replay)."""
        w = self.w
        # every declared relation with data: queries added later may join relations no query uses yet
        rels = [r.name for r in w.relations if r.name in self.tables]
        base: dict[str, list[tuple]] = {}
        for r in rels:
            t = self.tables[r]
            rel = w.relation(r)
            cols = [t.columns.get(a, (None,) * len(t)) for a in rel.attributes]
            base[r] = list(zip(range(len(t)), t.ts, *cols))
        arrivals = _arrival_order(base, w.relation_rank)
        n_total = len(arrivals)
        epoch_of = self.policy.epoch_of
        speedup = self.speedup
        ts0 = base[arrivals[0][0]][arrivals[0][1]][1] if arrivals else 0.0
        finish = 0.0
        pending: deque[float] = deque()  # finish times of tuples still in the system
        ep: _Epoch | None = None
        info: dict[str, Any] = {}
        samples: dict[int, EpochSample] = {}
        track: dict[str, list[tuple[int, Attr]]] = {}
        next_purge = math.inf
        purge_every = self._purge_interval()
        t_start = time.perf_counter()
        for r, row in arrivals:
            tup = base[r][row]
            T = tup[1]
            arrival = (T - ts0) / speedup
            if pace is not None and not pace(arrival):
                break
            self.event_time = T
            e = epoch_of(T)
            if ep is None or e != ep.epoch:
                if ep is not None:
                    samples[ep.epoch] = self._sample(ep)
                    self._close(ep)
                with self.lock:  # query changes may be submitted from another thread
                    plan = self.ctl.enter(e, samples)
                    pidx = self.ctl.plan_of[e]
                    self.w = self.ctl.full
                    self.open_epoch(e, self.ctl.plans[pidx], self.ctl.retained(e), T, self.w)
                    info = self.prepare(pidx)
                    track = self._tracking(e)
                ep = _Epoch(e, self.policy.start(e), pidx, tuple(plan.workload.query_names))
                ep.counts = {a: Counter() for lst in track.values() for _, a in lst}
                next_purge = T + purge_every
            elif T >= next_purge:
                self.expire(T)
                next_purge = T + purge_every
            c0 = time.thread_time()
            ep.tuples += 1
            ep.n[r] += 1
            for pos, a in track.get(r, ()):
                v = tup[pos]
                if v is not None and sampled(v, self.policy.sample):
                    ep.counts[a][v] += 1
            for lab in info["_sources"].get(r, ()):
                self.send(info, lab, (tup,), T, e, ep)
            service = time.thread_time() - c0
            ep.busy += service
            while pending and pending[0] <= arrival:
                pending.popleft()
            finish = max(finish, arrival) + service
            pending.append(finish)
            ep.backlog = max(ep.backlog, len(pending))
            ep.latencies.append(finish - arrival)
        if ep is not None:
            self._close(ep)
        seconds = time.perf_counter() - t_start
        return self.snapshot(n_total, seconds)

    def snapshot(self, n: int | None = None, seconds: float = 0.0) -> AdaptiveRun:
        """The run as it stands (results so far, finished epochs)."""
        with self.lock:
            full = self.ctl.full
            results = {q.name: list(self.results.get(q.name, ())) for q in full.queries}
            return AdaptiveRun(full, self.policy, results, tuple(self.records), tuple(self.ctl.decisions),
                               tuple(self.ctl.plans), self.ctl.lives,
                               sum(r.input_tuples for r in self.records) if n is None else n, seconds, self.speedup)

    def _purge_interval(self) -> float:
        finite = [x for x in self.win.values() if x is not None]
        return max(min(finite, default=math.inf), self.policy.epoch / 4)

    def _tracking(self, epoch: int) -> dict[str, list[tuple[int, Attr]]]:
        out: dict[str, list[tuple[int, Attr]]] = {}
        for pair in self.ctl.tracked(epoch):
            for a in pair:
                lst = out.setdefault(a.relation, [])
                if all(b != a for _, b in lst):
                    lst.append((self.attr_pos[a.relation][a.name], a))
        return out

    def _sample(self, ep: _Epoch) -> EpochSample:
        matches = {}
        for a, b in self.ctl.tracked(ep.epoch):
            ca, cb = ep.counts.get(a), ep.counts.get(b)
            if ca is not None and cb is not None:
                matches[(a, b)] = agreeing_pairs(ca, cb, self.policy.sample)
        return EpochSample(ep.epoch, dict(ep.n), matches)

    def _close(self, ep: _Epoch) -> None:
        stores: Counter = Counter()
        plan = self.ctl.plans[ep.plan]
        names = {(s.namespace, mir_key(s.mir), s.partition): s.id for s in plan.stores}
        for (layout, _), c in self.containers.items():
            label = names.get(layout) or (f"{layout[0]}:" if layout[0] else "") + \
                self.mirs[layout[1]].render_partition(layout[2])
            stores[label] += c.rows()
        lat = sorted(ep.latencies)
        rec = EpochRecord(
            epoch=ep.epoch, start=ep.start, plan=ep.plan, queries=ep.queries, input_tuples=ep.tuples,
            results={q: ep.results.get(q, 0) for q in ep.queries}, probe_messages=ep.messages,
            history_messages=ep.history, state_rows=sum(stores.values()), containers=len(self.containers),
            stores=dict(stores), busy_seconds=ep.busy,
            latency_mean=sum(lat) / len(lat) if lat else 0.0,
            latency_p95=lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)] if lat else 0.0,
            latency_max=lat[-1] if lat else 0.0, backlog_max=ep.backlog)
        self.records.append(rec)
        if self.on_epoch is not None:
            self.on_epoch(rec)


# --------------------------------------------------------------------------------------------
# a live run: the same executor in a thread, paced, with query changes submitted while it runs
# --------------------------------------------------------------------------------------------


class AdaptiveReplay:
    """A live adaptive run on the reference executor: a background thread replays the input at
    ``speedup`` × event time; :meth:`submit` adds or removes queries while it runs (at the
    current event time, so active two epochs later); :meth:`subscribe` receives an event per
    finished epoch (``{"kind": "epoch", **EpochRecord}``), per decision that switched plans
    (``{"kind": "switch", …}``) and at the end (``{"kind": "status", "status": "finished" |
    "stopped" | "failed", "error": …}``).  The same interface as a Spark deployment's, so the
    explorer's timeline and query controls work with either.

    >>> from mqjoin.workload import parse_workload
    >>> from mqjoin.tables import Table
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 3}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a)"}
    ... ''')
    >>> t = {r: Table.from_columns(r, {"ts": [k / 10 for k in range(60)], "a": [1] * 60}) for r in "RST"}
    >>> live = AdaptiveReplay(w, t, AdaptivePolicy(epoch=1.0), speedup=20).start()
    >>> live.wait_for_epoch(1, timeout=30)
    True
    >>> activation = live.submit(add={"q2": "S(a), T(a)"})
    >>> live.wait(timeout=30), live.error
    (True, None)
    >>> activation >= 3 and len(live.results()["q2"]) > 0
    True
    """

    def __init__(self, workload: Workload, tables: Mapping[str, Table], policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), *, speedup: float = 1.0, optimizer: Optimizer | None = None):
        if not (isinstance(speedup, (int, float)) and speedup > 0 and math.isfinite(speedup)):
            raise DataError(f"speedup must be a positive number, got {speedup!r}")
        self.policy = policy or AdaptivePolicy()
        self._ex = _Executor(workload, tables, self.policy, list(changes), speedup, optimizer, True, self._epoch)
        self._subscribers: list[Callable[[dict], None]] = []
        self._stop = threading.Event()
        self._epoch_done = threading.Condition()
        self._thread: threading.Thread | None = None
        self._switches_seen = 0
        self.status = "created"
        self.error: str | None = None
        self.run: AdaptiveRun | None = None
        self.started: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "AdaptiveReplay":
        if self._thread is not None:
            raise DataError("this replay was started already; make a new one to run again")
        self.started = time.time()
        self.status = "running"
        self._thread = threading.Thread(target=self._main, name="mqjoin-adaptive-replay", daemon=True)
        self._thread.start()
        return self

    def _main(self) -> None:
        t0 = time.monotonic()

        def pace(arrival: float) -> bool:
            while not self._stop.is_set():
                ahead = t0 + arrival - time.monotonic()
                if ahead <= 0:
                    return True
                self._stop.wait(min(ahead, 0.2))
            return False

        try:
            self.run = self._ex.run(pace)
            self.status = "stopped" if self._stop.is_set() else "finished"
        except Exception as e:  # noqa: BLE001 - a live run reports its error instead of dying silently
            self.error = f"{type(e).__name__}: {e}"
            self.status = "failed"
        with self._epoch_done:
            self._epoch_done.notify_all()
        self._emit({"kind": "status", "status": self.status, "error": self.error})

    def stop(self) -> None:
        """Stop after the current tuple; results and epochs so far are kept."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the input is consumed (or the run stopped or failed); False on timeout."""
        if self._thread is None:
            raise DataError("the replay has not been started: call start()")
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_for_epoch(self, epoch: int, timeout: float | None = None) -> bool:
        """Wait until ``epoch`` has finished (False on timeout or if the run ended before)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._epoch_done:
            while not any(r.epoch >= epoch for r in self._ex.records):
                if self.status in ("finished", "stopped", "failed"):
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._epoch_done.wait(left)
        return True

    @property
    def done(self) -> bool:
        return self.status in ("finished", "stopped", "failed")

    # -- query changes ------------------------------------------------------------------------

    def submit(self, change: QueryChange | None = None, *, add: Mapping[str, str] | None = None,
               remove: Iterable[str] = (), selectivities: Mapping[str, float] | None = None) -> int:
        """Add/remove queries now (at the current event time); returns the activation epoch.
        Errors (unknown names, invalid queries) are raised here and change nothing."""
        with self._ex.lock:
            if change is None:
                at = self._ex.event_time
                if at is None:
                    at = min((min(t.ts) for t in self._ex.tables.values() if len(t)), default=0.0)
                change = QueryChange(at=at, add=dict(add or {}), remove=tuple(remove),
                                     selectivities=dict(selectivities or {}))
            full, _ = lifetimes(self._ex.ctl.base, [*self._ex.ctl.changes, change], self.policy)  # validates
            for name in change.add:
                for r in full.query(name).relations:
                    if r not in self._ex.tables:
                        raise DataError(f"query {name} joins {r}, which has no input in this run")
            epoch = self._ex.ctl.submit(change)
            self._emit({"kind": "change", "change": change.to_dict(), "activation_epoch": epoch})
            return epoch

    # -- metrics ------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[dict], None]) -> None:
        self._subscribers.append(callback)

    def _emit(self, event: dict) -> None:
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - a failing view must not stop the run
                pass

    def _epoch(self, rec: EpochRecord) -> None:
        switches = [d for d in self._ex.ctl.decisions if d.switched]
        for d in switches[self._switches_seen:]:
            self._emit({"kind": "switch", **d.to_dict()})
        self._switches_seen = len(switches)
        self._emit({"kind": "epoch", **rec.to_dict()})
        with self._epoch_done:
            self._epoch_done.notify_all()

    @property
    def event_time(self) -> float | None:
        return self._ex.event_time

    @property
    def controller(self) -> AdaptiveController:
        return self._ex.ctl

    def snapshot(self) -> AdaptiveRun:
        """The run so far (or the finished run)."""
        return self.run if self.run is not None else self._ex.snapshot()

    def timeline(self):
        return self.snapshot().timeline()

    def results(self) -> dict[str, set[tuple[int, ...]]]:
        return self.snapshot().result_sets()
