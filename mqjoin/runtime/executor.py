"""The in-process executor: the one engine that runs plans, static or adaptive (docs/architecture.md §5).

Input tuples arrive one at a time in ``(ts, relation declaration rank, row)`` order — the
tie-break of docs/model.md §6 — and travel the edges of the plan of their epoch as
:mod:`mqjoin.runtime.rules` says.  A *schedule* gives the plan of every epoch: a static plan
is the schedule with one plan and one epoch (:class:`StaticSchedule`), the adaptive
controller (:class:`mqjoin.adaptive.controller.AdaptiveController`) the one that re-optimises.

* **Containers.**  A store keeps one container per epoch (paper Algorithm 4): a base store's
  container of epoch ``ℓ`` holds the relation's tuples that arrived in ``ℓ``, an MIR store's
  the MIR tuples whose latest component arrived in ``ℓ``.  A container is split into the
  store's ``parallelism`` partitions by its partition attribute; each partition keeps a hash
  index per access pattern (built when a probe first needs it).  Entries outside every window
  are purged periodically (base containers from the front — they fill in ``ts`` order — MIR
  containers by a scan), so memory stays bounded; probes check windows themselves.
* **Probes.**  A probe of the MIR ``M`` reaches the containers of ``M`` of every epoch its
  windows reach, one layout per epoch (:func:`~mqjoin.runtime.rules.choose_layout`): routed to
  one partition when the travelling tuple knows the container's partition attribute (one probe
  message), else broadcast to all (one message per partition); containers of several epochs
  laid out alike are reached with one message.  Epochs that have no container of ``M`` (the MIR
  was not materialised then) are **probed iteratively** (paper Section VII-B): through the
  base containers of ``M``'s relations one at a time, or a smaller MIR that has containers,
  keeping the combinations whose latest component arrived in such an epoch — so switching
  plans loses no result and duplicates none.
* **Reference counting.**  When an epoch starts, containers of MIRs its plan does not use and
  of relations no active query uses are dropped, and so are containers no window reaches.
* **Speed.**  Every edge of the current plan is compiled into a specialised Python function
  (index positions, windows and routes become constants, as ``collections.namedtuple`` builds
  its classes); for a static plan the probe functions are bound to their single container.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> from mqjoin.model.tables import Table
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> ex = Executor(StaticSchedule(optimize(w).plan))
>>> ex.feed([("R", (0, 0.0, 1)), ("S", (0, 0.5, 1)), ("R", (1, 5.0, 1)), ("S", (1, 5.5, 1))])
True
>>> ex.results()["q"], ex.probe_messages()
([(0, 0), (1, 1)], 4)
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mqjoin.planning.candidates import MIR
from mqjoin.model.errors import PlanError, ResourceLimitError
from mqjoin.planning.plan import Plan
from mqjoin.model.workload import Attr, JoinClass, Workload, is_connected
from mqjoin.runtime.rules import (
    Emit,
    Insert,
    Layout,
    MirKey,
    Probe,
    choose_layout,
    field_positions,
    layout_of,
    mir_key,
    partition_of,
    plan_rules,
    probe_pairs,
    windows_of,
)


# --------------------------------------------------------------------------------------------
# schedules: the plan of every epoch
# --------------------------------------------------------------------------------------------


class StaticSchedule:
    """One plan for the whole run: one epoch (0), no switch, no sampling — the adaptive
    executor with nothing to adapt.  Has the interface of
    :class:`~mqjoin.adaptive.controller.AdaptiveController` that the executor uses."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.full = plan.workload
        self.plans = [plan]
        self.plan_of: Mapping[int, int] = _Always(0)
        self.decisions: list = []
        self.lives: tuple = ()

    @staticmethod
    def epoch_of(ts: float) -> int:
        return 0

    @staticmethod
    def start(epoch: int) -> float:
        return -math.inf

    def enter(self, epoch: int, samples: Mapping | None = None) -> Plan:
        return self.plan

    def retained(self, epoch: int) -> frozenset[str]:
        return frozenset(s.mir.relations[0] for s in self.plan.stores if s.mir.is_base)

    def tracked(self, epoch: int) -> tuple:
        return ()

    def queries(self, epoch: int) -> tuple[str, ...]:
        return self.plan.workload.query_names


class _Always(dict):
    def __init__(self, value: int):
        super().__init__()
        self.value = value

    def __missing__(self, key: Any) -> int:
        return self.value


# --------------------------------------------------------------------------------------------
# containers
# --------------------------------------------------------------------------------------------


def _key_expr(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    """Source of the hash key read from ``var`` (a scalar for one attribute, else a tuple)."""
    if len(spec) == 1:
        (c, f), = spec
        return f"{var}[{c}][{f}]"
    return "(" + ", ".join(f"{var}[{c}][{f}]" for c, f in spec) + ",)"


def _null_test(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    return " or ".join(f"{var}[{c}][{f}] is None" for c, f in spec) or "False"


def _compile(src: str, name: str, env: dict[str, Any]) -> Callable:
    """Build a specialised function from generated source: index positions and windows become
    constants, so the per-tuple path has no branching on the plan."""
    ns = dict(env)
    exec(compile(src, f"<mqjoin.executor {name}>", "exec"), ns)
    return ns[name]


def _gated(probe: Callable, admit: Callable[[float], bool], clock: list[float]) -> Callable:
    """``probe`` behind a CPU budget: it runs only when ``admit(T)`` lets it."""

    def gated(t: tuple) -> None:
        if admit(clock[0]):
            probe(t)
    return gated


class Container:
    """One store's entries of one epoch: ``p`` partitions, each with a hash index per access
    pattern (a tuple of (component, field) positions of a stored entry)."""

    def __init__(self, layout: Layout, epoch: int, p: int, part_pos: tuple[int, int],
                 windows: tuple[tuple[int, float], ...], ops: list[int] | None = None):
        self.ops = ops  # operation counters (hashes, moves, …) of an instrumented executor
        self.layout = layout
        self.epoch = epoch
        self.p = p
        self.part_pos = part_pos
        self.windows = windows
        self.fifo = len(layout.mir.relations) == 1  # base entries expire in insertion order
        self.entries: list = [deque() if self.fifo else [] for _ in range(p)]
        self.indexes: dict[tuple, list[dict]] = {}
        self.max_rows = 0
        self.journal: list | None = None  # entries inserted since the journal was opened
        finite = [w for _, w in windows]
        w = min(finite) if finite else math.inf
        self.interval = math.inf if not finite else ((w / 4 if self.fifo else w) if w > 0 else 0.0)
        self.next_purge = -math.inf if finite else math.inf
        self.insert: Callable[[tuple], None] = self._compile_insert()

    def rows(self) -> int:
        return sum(len(e) for e in self.entries)

    def _compile_insert(self) -> Callable[[tuple], None]:
        pc, pf = self.part_pos
        lines = ["def insert(e):",
                 "    part = 0" if self.p == 1 else
                 f"    v = e[{pc}][{pf}]\n    part = v % {self.p} if v.__class__ is int else partition_of(v, {self.p})",
                 "    entries[part].append(e)"]
        if self.journal is not None:
            lines.append("    journal.append(e)")
        if self.ops is not None:  # a move into the store, a hash per index
            lines.append(f"    ops[1] += 1\n    ops[0] += {len(self.indexes)}")
        env: dict[str, Any] = {"entries": self.entries, "partition_of": partition_of, "journal": self.journal,
                               "new_list": deque if self.fifo else list, "ops": self.ops}
        for i, (pat, dicts) in enumerate(self.indexes.items()):
            env[f"idx{i}"] = dicts
            lines += [f"    if not ({_null_test('e', pat)}):",
                      f"        k = {_key_expr('e', pat)}",
                      f"        lst = idx{i}[part].get(k)",
                      "        if lst is None:",
                      f"            idx{i}[part][k] = new_list((e,))",
                      "        else:",
                      "            lst.append(e)"]
        return _compile("\n".join(lines) + "\n", "insert", env)

    def index(self, pat: tuple) -> list[dict]:
        """The per-partition hash index of access pattern ``pat`` (built on first use)."""
        dicts = self.indexes.get(pat)
        if dicts is None:
            dicts = self.indexes[pat] = [{} for _ in range(self.p)]
            new_list = deque if self.fifo else list
            for part, entries in enumerate(self.entries):
                d = dicts[part]
                for e in entries:
                    k = tuple(e[c][f] for c, f in pat)
                    if None not in k:
                        k = k[0] if len(k) == 1 else k
                        lst = d.get(k)
                        if lst is None:
                            d[k] = new_list((e,))
                        else:
                            lst.append(e)
            self.insert = self._compile_insert()
        return dicts

    def open_journal(self) -> list:
        """Record every entry inserted from now on (the Spark backend's state snapshots)."""
        self.journal = []
        self.insert = self._compile_insert()
        return self.journal

    def purge(self, T: float) -> None:
        """Drop the entries some window excludes at time ``T`` (probes at ``T`` or later cannot
        use them: event time only grows)."""
        self.max_rows = max(self.max_rows, self.rows())
        if not self.windows:
            self.next_purge = math.inf
            return
        keys = [(dicts, pat) for pat, dicts in self.indexes.items()]
        for part in range(self.p):
            q = self.entries[part]
            if self.fifo:
                (c, w), = self.windows
                expired = []
                while q and T - q[0][c][1] > w:
                    expired.append(q.popleft())
            else:
                live, expired = [], []
                for e in q:
                    (expired if any(T - e[c][1] > w for c, w in self.windows) else live).append(e)
                q[:] = live
            for e in expired:
                for dicts, pat in keys:
                    k = tuple(e[c][f] for c, f in pat)
                    if None in k:
                        continue
                    k = k[0] if len(k) == 1 else k
                    lst = dicts[part][k]
                    if self.fifo:
                        lst.popleft()
                    else:
                        lst.remove(e)
                    if not lst:
                        del dicts[part][k]
        self.next_purge = T + self.interval if self.interval > 0 else math.nextafter(T, math.inf)


class ContainerIndex:
    """Which containers (layout, epoch) exist, and the reference counting that creates and
    drops them (paper Section VI) — the bookkeeping of every backend: the in-process executor
    keeps each container's entries in a :class:`Container`, the distributed Spark backend in
    a store per layout with an ``_ep`` column.  Subclasses extend :meth:`establish` (True when
    the container is new) and :meth:`drop` (the containers dropped)."""

    def __init__(self, epoch_of: Callable[[float], int], windows: Mapping[str, float | None]):
        self.epoch_of = epoch_of
        self.win = dict(windows)
        self.by_mir: dict[MirKey, dict[int, list[Layout]]] = {}  # established containers per epoch
        self.mirs: dict[MirKey, MIR] = {}
        self.p: dict[Layout, int] = {}  # parallelism per layout, as last established
        self.data_epochs: list[int] = []  # epochs with tuples, ascending
        self.version = 0  # changes whenever a container is established or dropped
        self._missing: dict[tuple[MirKey, int], list[int]] = {}

    def maxwin(self, mk: MirKey) -> float | None:
        ws = [self.win[r] for r in mk.relations]
        return None if any(x is None for x in ws) else max(ws)

    def reach(self, mk: MirKey, T: float) -> float:
        """The oldest epoch whose container of ``mk`` may hold a tuple within a window of ``T``
        (one epoch of margin: epoch boundaries are computed in floating point)."""
        mw = self.maxwin(mk)
        return -math.inf if mw is None else self.epoch_of(T - mw) - 1

    def _changed(self) -> None:
        self._missing = {}
        self.version += 1

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        mk = layout.mir
        self.mirs[mk] = mir
        self.p[layout] = p
        by = self.by_mir.setdefault(mk, {})
        if layout in by.get(epoch, ()):
            return False
        by.setdefault(epoch, []).append(layout)
        self._changed()
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        by = self.by_mir.get(mk, {})
        gone = [(layout, ep) for ep in list(by if epochs is None else epochs) for layout in by.pop(ep, ())]
        if not by:
            self.by_mir.pop(mk, None)
        if gone:
            self._changed()
        return gone

    def open_epoch(self, epoch: int, plan: Plan, retained: frozenset[str], T: float, w: Workload) -> None:
        """Enter ``epoch`` under ``plan``: drop the MIRs the plan does not use and the relations
        no active query uses (``retained``), expire what no window reaches, establish the
        plan's containers and a base container for every retained relation."""
        used = {mir_key(s.mir) for s in plan.stores}
        for mk in list(self.by_mir):
            rels = mk.relations
            if (len(rels) == 1 and rels[0] not in retained) or (len(rels) > 1 and mk not in used):
                self.drop(mk)
        self.expire(T)
        for s in plan.stores:
            self.establish(layout_of(s), s.mir, epoch, s.parallelism)
        base = {s.mir.relations[0] for s in plan.stores if s.mir.is_base and not s.mir.selection}
        # a retained relation whose plan keeps no base store of all its tuples (filtered stores,
        # docs/model.md §7, keep only what passes; a query added later may need the rest: history)
        for r in sorted(retained - base):
            m = MIR.of(w, [r], ())
            self.establish(Layout("", mir_key(m), w.relation(r).attr(w.relation(r).attributes[0])), m, epoch,
                           w.parallelism(r))
        self.data_epochs.append(epoch)
        self._changed()

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
        return sorted(e for e, ls in self.by_mir.get(layout.mir, {}).items() if layout in ls)

    def count(self) -> int:
        return sum(len(ls) for by in self.by_mir.values() for ls in by.values())


# --------------------------------------------------------------------------------------------
# the executor
# --------------------------------------------------------------------------------------------


@dataclass
class EpochCounters:
    """What the epoch being processed has done so far."""

    epoch: int
    start: float
    plan: int
    queries: tuple[str, ...]
    tuples: int = 0
    messages_at_open: int = 0
    history_at_open: int = 0
    busy: float = 0.0
    backlog: int = 0

    def __post_init__(self) -> None:
        self.results_at_open: Counter = Counter()
        self.latencies: list[float] = []
        self.n: Counter = Counter()
        self.counts: dict[Attr, Counter] = {}


class Executor(ContainerIndex):
    """Runs the plans of a schedule over tuples fed in arrival order (see the module doc).

    ``collect``: keep result tuples (else only count them); ``triggers``: keep, per result,
    the arrival number of the tuple that produced it (see :meth:`feed`); ``timed``: measure
    each tuple's service time for the simulated replay latency of
    :mod:`mqjoin.runtime.epochs`; ``on_epoch(counters)`` sees every epoch when it closes;
    ``budget``: the most tuples the run may hold (:meth:`check_budget`); ``instrument``: count
    the operations (:meth:`operations`); ``admission(rule)``: a CPU budget — returns, per probe
    edge, the gate ``admit(T)`` consulted before each probe of the edge (False: the probe is
    shed; the tuple is still stored), see :mod:`mqjoin.runtime.shedding`."""

    def __init__(self, schedule, *, collect: bool = True, triggers: bool = False, timed: bool = False,
                 speedup: float = 1.0, sample: float = 1.0, sampled: Callable[[Any, float], bool] | None = None,
                 on_epoch: Callable[[EpochCounters], None] | None = None, budget: int | None = None,
                 instrument: bool = False, admission: Callable[[Probe], Callable[[float], bool]] | None = None):
        self.schedule = schedule
        self.w = schedule.full
        self.static = isinstance(schedule, StaticSchedule)
        timing = schedule if self.static else schedule.policy  # epoch_of, start
        self.epoch_start = timing.start
        super().__init__(timing.epoch_of, {r.name: r.window for r in self.w.relations})
        self.fields = field_positions(self.w)
        self.collect, self.triggers, self.timed = collect, triggers, timed
        self.speedup = speedup
        self.sample, self.sampled = sample, sampled
        self.on_epoch = on_epoch
        self.on_enter: Callable[[int, float], None] | None = None  # a backend journaling its state
        self.budget = budget  # most tuples (stored entries + collected results) the run may hold
        self.ops: list[int] | None = [0, 0, 0, 0] if instrument else None  # see operations()
        self.admission = admission
        self.fed = 0
        self.containers: dict[tuple[Layout, int], Container] = {}
        self.dropped_rows: dict[Layout, int] = {}  # most entries of containers dropped since
        self.raw: dict[str, list] = {}  # query → results: row indices in its relation order, after the trigger if kept
        self.counts: Counter = Counter()
        self.counters: dict[tuple[int, str], list[int]] = {}  # (plan index, probe edge) → messages
        self.history = [0]  # messages of iterative probing
        self.clock = [-math.inf]
        self.trigger = [0]
        self.ep: EpochCounters | None = None
        self.sources: dict[str, tuple[Callable, ...]] = {}
        self.groups: list[tuple[Probe, list, list]] = []  # the current plan's probes and their reach
        self.adhoc: dict[tuple, Callable] = {}
        self.sinks: list[list] = []
        self.samples: dict[int, Any] = {}
        self.track: dict[str, list[tuple[int, Attr]]] = {}
        self.next_purge = math.inf
        self.next_expire = math.inf
        self.lock = threading.RLock()
        self.event_time: float | None = None
        # the simulated replay (timed runs)
        self.ts0: float | None = None
        self.finish = 0.0
        self.pending: deque[float] = deque()

    # -- containers ---------------------------------------------------------------------------

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        if not super().establish(layout, mir, epoch, p):
            return False
        part = layout.partition
        pos = (mir.relations.index(part.relation), self.fields[part.relation][part.name])
        c = self.containers[(layout, epoch)] = Container(layout, epoch, p, pos, windows_of(self.w, mir.relations),
                                                         self.ops)
        self.next_purge = min(self.next_purge, c.next_purge)
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        gone = super().drop(mk, epochs)
        for key in gone:
            c = self.containers.pop(key)
            self.dropped_rows[c.layout] = max(self.dropped_rows.get(c.layout, 0), c.max_rows, c.rows())
        return gone

    def purge(self, T: float) -> None:
        """Purge the containers that are due, and (adaptive runs) drop those out of reach."""
        if T >= self.next_expire:
            self.expire(T)
            self.refresh()
            self.next_expire = T + self.expire_every
        nxt = math.inf
        for c in self.containers.values():
            if T >= c.next_purge:
                c.purge(T)
            nxt = min(nxt, c.next_purge)
        self.next_purge = nxt

    def purge_all(self, T: float) -> None:
        """Purge every container now (a backend reporting its state after a micro-batch)."""
        for c in self.containers.values():
            c.purge(T)
        self.next_purge = min([c.next_purge for c in self.containers.values()], default=math.inf)

    # -- compiling the plan of an epoch -------------------------------------------------------

    def compile_plan(self, pidx: int, epoch: int) -> None:
        """Compile the edges of plan ``pidx`` for tuples of ``epoch``."""
        rules = self.rules = plan_rules(self.schedule.plans[pidx], self.w)
        compiled: dict[str, Callable] = {}
        self.groups = []

        def fn(label: str) -> Callable:
            if label not in compiled:
                compiled[label] = self._compile_edge(rules.edges[label], pidx, epoch, fn)
            return compiled[label]

        self.sources = {r: tuple(fn(lab) for lab in labs) for r, labs in rules.sources.items()}
        if not self.static:  # feed the history containers of relations kept only filtered (open_epoch)
            plan = self.schedule.plans[pidx]
            for r in self.schedule.retained(epoch):
                if any(s.mir.relations == (r,) and s.mir.selection for s in plan.stores) and \
                        not any(s.mir.relations == (r,) and not s.mir.selection for s in plan.stores):
                    for layout in self.by_mir.get(mir_key(MIR.of(self.w, [r], ())), {}).get(epoch, ()):
                        put = _compile("def put(t):\n    c.insert(t)\n", "put", {"c": self.containers[(layout, epoch)]})
                        self.sources[r] = self.sources.get(r, ()) + (put,)
        self.refresh()

    def _compile_edge(self, rule, pidx: int, epoch: int, fn: Callable[[str], Callable]) -> Callable:
        f = self._compile_rule(rule, pidx, epoch, fn)
        if rule.admit is None:
            return f
        # filters (docs/model.md §7): the tuple goes on only when it passes
        return _compile("def admitted(t):\n    if admit(t):\n        f(t)\n", "admitted", {"admit": rule.admit, "f": f})

    def _compile_rule(self, rule, pidx: int, epoch: int, fn: Callable[[str], Callable]) -> Callable:
        if isinstance(rule, Emit):
            raw = self.raw.setdefault(rule.query, [])
            counts = self.counts
            q = rule.query
            if not self.collect:
                return _compile(f"def out(t):\n    counts[{q!r}] += 1\n", "out", {"counts": counts})
            # the result's row indices in the query's relation order, made at emission (the
            # travelling tuple can go at once)
            rows = "".join(f"t[{i}][0], " for i in rule.order)
            head = "trigger[0], " if self.triggers else ""
            return _compile(f"def out(t):\n    append(({head}{rows}))\n    counts[{q!r}] += 1\n", "out",
                            {"append": raw.append, "counts": counts, "trigger": self.trigger})
        if isinstance(rule, Insert):
            c = self.containers[(rule.layout, epoch)]
            # c.insert is looked up per call: it is recompiled when the container gains an index
            if rule.order is None:
                return _compile("def put(t):\n    c.insert(t)\n", "put", {"c": c})
            return _compile("def put(t):\n    c.insert((" + "".join(f"t[{i}], " for i in rule.order) + "))\n", "put",
                            {"c": c})
        outs = [fn(o) for o in rule.outs]
        counter = self.counters.setdefault((pidx, rule.label), [0])
        groups: list = self._reach_groups(rule, epoch)  # kept current by refresh()
        gaps: list = [None]
        self.groups.append((rule, groups, epoch, gaps))
        onward = any(not isinstance(self.rules.edges[o], Emit) for o in rule.outs)
        probe = self.compile_probe(rule, groups, counter, outs, gaps, onward)
        return probe if self.admission is None else _gated(probe, self.admission(rule), self.clock)

    def compile_probe(self, rule: Probe, groups: list, counter: list[int], outs: list[Callable],
                      gaps: list | None = None, onward: bool = False) -> Callable:
        """The function that probes the containers in ``groups`` (kept current by
        :meth:`refresh`: ``[(route, p, [index dicts of each container], [epochs])]``) and
        sends each result to ``outs``."""
        env: dict[str, Any] = {"groups": groups, "clock": self.clock, "counter": counter, "ops": self.ops,
                               "partition_of": partition_of, "reach": self.reach, "mk": rule.layout.mir,
                               "gaps": gaps if gaps is not None else [None], "expand": self.expand, "rule": rule}
        env.update({f"f{i}": f for i, f in enumerate(outs)})
        env.update({f"w{i}": win for i, (_, win) in enumerate(rule.windows)})
        key, null = _key_expr("t", rule.key), _null_test("t", rule.key)
        emit = []
        for i, (c, _) in enumerate(rule.windows):
            emit += [f"if T - m[{c}][1] > w{i}:", "    continue"]
        emit += ["r = t + m"] + [f"f{i}(r)" for i in range(len(outs))]
        if self.ops is not None and onward:
            emit.insert(len(emit) - len(outs), "ops[3] += 1")

        def block(ind: str, lines: list[str]) -> list[str]:
            return [ind + x for x in lines]

        if self.static and len(groups) == 1 and len(groups[0][2]) == 1:
            return self._compile_static_probe(rule, groups[0], env, key, null, emit, self.ops is not None)
        lines = ["def probe(t):", "    T = clock[0]"]
        dynamic = not self.static
        if dynamic:
            lines += ["    lo = reach(mk, T)"]
        lines += [f"    null = {null}", "    k = None if null else " + key,
                  "    for route, p, dictss, epochs in groups:"]
        if dynamic:
            lines += ["        live = [d for d, e in zip(dictss, epochs) if e >= lo]",
                      "        if not live:", "            continue"]
        else:
            lines += ["        live = dictss"]
        lines += ["        if route is None:",
                  "            counter[0] += p",
                  "            if null:", "                continue",
                  "            for dicts in live:",
                  "                for d in dicts:"]
        lines += ["                    ops[0] += 1"] if self.ops is not None else []
        lines += ["                    matches = d.get(k)",
                  "                    if not matches:", "                        continue"]
        lines += ["                    ops[2] += len(matches)"] if self.ops is not None else []
        lines += ["                    for m in matches:"]
        lines += block(" " * 24, emit)
        lines += ["        else:",
                  "            counter[0] += 1",
                  "            if null:", "                continue",
                  "            v = t[route[0]][route[1]]",
                  "            for dicts in live:",
                  "                n = len(dicts)",
                  "                part = 0 if n == 1 else (v % n if v.__class__ is int else partition_of(v, n))"]
        lines += ["                ops[0] += 1"] if self.ops is not None else []
        lines += ["                matches = dicts[part].get(k)",
                  "                if not matches:", "                    continue"]
        lines += ["                ops[2] += len(matches)"] if self.ops is not None else []
        lines += ["                for m in matches:"]
        lines += block(" " * 20, emit)
        if dynamic and (len(rule.mir.relations) > 1 or rule.mir.selection):
            lines += ["    missing = gaps[0]",
                      "    if missing and not null:",
                      "        g = [e for e in missing if e >= lo]",
                      "        if g:",
                      "            for r in expand(rule, t, T, set(g)):"]
            lines += [f"                f{i}(r)" for i in range(len(outs))]
        return _compile("\n".join(lines) + "\n", "probe", env)

    @staticmethod
    def _compile_static_probe(rule: Probe, group: tuple, env: dict[str, Any], key: str, null: str, emit: list[str],
                              count: bool) -> Callable:
        """The probe of a static plan: one container, its index and route bound as constants
        (``count``: also count the operations, see :meth:`Executor.operations`)."""
        route, p, (dicts,), _ = group
        env = {**env, "dicts": dicts}
        lines = ["def probe(t):"]
        if route is None:
            lines += [f"    counter[0] += {p}", f"    if {null}:", "        return", f"    k = {key}",
                      "    T = clock[0]", "    for d in dicts:"]
            lines += ["        ops[0] += 1"] if count else []
            lines += ["        matches = d.get(k)", "        if not matches:", "            continue"]
            lines += ["        ops[2] += len(matches)"] if count else []
            lines += ["        for m in matches:"]
            lines += ["            " + x for x in emit]
        else:
            rc, rf = route
            n = len(dicts)
            lines += ["    counter[0] += 1", f"    if {null}:", "        return"]
            lines += ["    d = dicts[0]"] if n == 1 else [
                f"    v = t[{rc}][{rf}]",
                f"    d = dicts[v % {n} if v.__class__ is int else partition_of(v, {n})]"]
            lines += ["    ops[0] += 1"] if count else []
            lines += [f"    matches = d.get({key})", "    if not matches:", "        return"]
            lines += ["    ops[2] += len(matches)"] if count else []
            lines += ["    T = clock[0]", "    for m in matches:"]
            lines += ["        " + x for x in emit]
        return _compile("\n".join(lines) + "\n", "probe", env)

    def refresh(self) -> None:
        """Recompute, for every probe of the current plan, the containers it reaches (after
        containers were established or dropped)."""
        for rule, groups, epoch, gaps in self.groups:
            groups[:] = self._reach_groups(rule, epoch)
            # an MIR, or a filtered base store (docs/model.md §7), may lack containers in older epochs
            gaps[0] = self.missing(rule.layout.mir, epoch) if len(rule.mir.relations) > 1 or rule.mir.selection \
                else None
        self.adhoc.clear()

    def _reach_groups(self, rule: Probe, top: int) -> list:
        by_layout: dict[Layout, list] = {}
        for e2, layouts in sorted(self.by_mir.get(rule.layout.mir, {}).items()):
            if e2 <= top:
                layout = choose_layout(rule, layouts, self.fields)
                by_layout.setdefault(layout, []).append((e2, self.containers[(layout, e2)]))
        out = []
        for layout, conts in by_layout.items():
            dictss = [c.index(rule.pattern) for _, c in conts]
            out.append((rule.route_into(layout, self.fields), conts[0][1].p, dictss, [e for e, _ in conts]))
        return out

    # -- iterative probing of older partners ----------------------------------------------------

    def _adhoc_probe(self, rule: Probe, top: int) -> Callable:
        """A compiled probe of ``rule`` over the containers up to epoch ``top`` whose results go
        to the innermost list of ``self.sinks`` (iterative probing; cached until containers
        change)."""
        key = (rule, top)
        fn = self.adhoc.get(key)
        if fn is None:
            sinks = self.sinks
            fn = self.adhoc[key] = self.compile_probe(rule, self._reach_groups(rule, top), self.history,
                                                      [lambda r: sinks[-1].append(r)],
                                                      [self.missing(rule.layout.mir, top)])
        return fn

    def expand(self, rule: Probe, t: tuple, T: float, gaps: set[int]) -> list[tuple]:
        """Iterative probing: the MIR's combinations whose latest component arrived in an epoch
        of ``gaps`` (no container of the MIR there).  The MIR's relations are joined one at a
        time from their base containers — each probed under the rules of its epoch — until the
        relations left form an MIR that has containers itself (e.g. the older plan's ``TU`` when
        ``STU`` is new): that one is probed as a whole (recursively the same way), as the older
        plan did.  Combinations whose latest component is not in a gap are found directly in
        the MIR's own containers, so they are dropped here."""
        mir = rule.mir
        rels = list(mir.relations)
        joined = list(rule.travelling)
        order: list[str] = []
        rank = self.w.relation_rank
        while len(order) < len(rels):
            nxt = [r for r in rels if r not in order and any(c.member_of(r) and c.relations & set(joined)
                                                           for c in rule.classes)]
            if not nxt:
                raise PlanError(f"cannot probe {mir.label} from {', '.join(joined)}: not connected")
            r = min(nxt, key=lambda x: rank[x])
            order.append(r)
            joined.append(r)
        top = max(gaps)
        partials: list[tuple] = [t]
        layout_rels = list(rule.travelling)
        for k, r in enumerate(order):
            rest = order[k:]
            if k > 0 and len(rest) > 1:
                sub = MIR.of(self.w, rest, mir.classes)
                if mir_key(sub) in self.by_mir and is_connected(sub.relations, sub.classes):
                    partials = self._probe_whole(rule.classes, sub, layout_rels, partials, top)
                    layout_rels.extend(sub.relations)
                    break
            partials = self._probe_relation(rule.classes, r, layout_rels, partials, top)
            layout_rels.append(r)
            if not partials:
                return []
        # keep the combinations whose latest component is in a gap; reorder to the MIR's layout
        n0 = len(rule.travelling)
        perm = [layout_rels.index(r) for r in rels]
        epoch_of = self.epoch_of
        out = []
        for x in partials:
            latest = max(x[n0:], key=lambda b: b[1])
            if epoch_of(latest[1]) in gaps:
                out.append(t + tuple(x[i] for i in perm))
        return out

    def _hop(self, classes: tuple[JoinClass, ...], target: MIR, joined: list[str]) -> Probe:
        """The probe of one hop of iterative probing: ``joined`` partial tuples into ``target``."""
        travelling = tuple(joined)
        if target.is_base:
            pred = probe_pairs(classes, target.relations[0], joined)
        else:
            pred = []
            for c in classes:
                left = [a for a in c.members if a.relation in travelling]
                right = [a for a in c.members if a.relation in target.relation_set]
                if left and right:
                    pred.append((left[0], right[0]))
        f = self.fields
        windows = windows_of(self.w, target.relations)
        return Probe("", Layout("", mir_key(target), None), target, tuple(classes), travelling,  # type: ignore[arg-type]
                     tuple((travelling.index(a.relation), f[a.relation][a.name]) for a, _ in pred),
                     tuple((target.relations.index(b.relation), f[b.relation][b.name]) for _, b in pred),
                     None, windows, ())

    def _probe_relation(self, classes, r: str, joined: list[str], partials: list[tuple], top: int) -> list[tuple]:
        """One hop of iterative probing: the partials probe relation ``r``'s base containers of
        every epoch up to ``top`` (routed where the container's partitioning allows)."""
        return self._probe_partials(self._hop(classes, MIR.of(self.w, [r], ()), joined), partials, top)

    def _probe_whole(self, classes, sub: MIR, joined: list[str], partials: list[tuple], top: int) -> list[tuple]:
        """The partials probe the MIR ``sub`` as a whole (its containers up to epoch ``top``,
        older partners of its own gaps iteratively)."""
        return self._probe_partials(self._hop(classes, sub, joined), partials, top)

    def _probe_partials(self, rule: Probe, partials: list[tuple], top: int) -> list[tuple]:
        fn = self._adhoc_probe(rule, top)
        self.sinks.append([])
        try:
            for x in partials:
                fn(x)
        finally:
            out = self.sinks.pop()
        return out

    # -- feeding tuples -----------------------------------------------------------------------

    @property
    def expire_every(self) -> float:
        if self.static:
            return math.inf
        finite = [x for x in self.win.values() if x is not None]
        return max(min(finite, default=math.inf), self.schedule.policy.epoch / 4)

    def feed(self, arrivals: Iterable[tuple[str, tuple]], triggers: Iterable[int] | None = None,
             pace: Callable[[float], bool] | None = None) -> bool:
        """Process ``(relation, base tuple)`` pairs in arrival order (base tuple: ``(row, ts,
        attribute values…)``); ``triggers``: the arrival number of each (kept with its results
        when the executor was made with ``triggers=True``).  ``pace(arrival)`` is called before
        each tuple with its scheduled arrival (seconds since the first, divided by the speed-up)
        and stops the feed by returning False.  Returns False when stopped."""
        epoch_of = self.epoch_of
        seqs = iter(triggers) if triggers is not None else None
        timed = self.timed
        thread_time = time.thread_time
        for r, tup in arrivals:
            T = tup[1]
            if seqs is not None:
                self.trigger[0] = next(seqs)
            if timed or pace is not None:
                if self.ts0 is None:
                    self.ts0 = T
                arrival = (T - self.ts0) / self.speedup
                if pace is not None and not pace(arrival):
                    return False
            if T != self.clock[0] or self.ep is None:
                self.event_time = self.clock[0] = T
                e = epoch_of(T)
                if self.ep is None or e != self.ep.epoch:
                    self._enter(e, T)
                elif T >= self.next_purge or T >= self.next_expire:
                    self.purge(T)
            ep = self.ep
            if timed:
                c0 = thread_time()
            ep.tuples += 1
            if self.track:
                self._count(r, tup, ep)
            for f in self.sources.get(r, ()):
                f((tup,))
            self.fed += 1
            if self.budget is not None and not self.fed & 1023:
                self.check_budget()
            if timed:
                service = thread_time() - c0
                ep.busy += service
                pending = self.pending
                while pending and pending[0] <= arrival:
                    pending.popleft()
                self.finish = max(self.finish, arrival) + service
                pending.append(self.finish)
                ep.backlog = max(ep.backlog, len(pending))
                ep.latencies.append(self.finish - arrival)
        return True

    def held(self) -> int:
        """Tuples the run holds: entries of every container and the results collected."""
        return sum(c.rows() for c in self.containers.values()) + sum(len(raw) for raw in self.raw.values())

    def check_budget(self) -> None:
        """Stop (a :class:`~mqjoin.model.errors.ResourceLimitError`) when the run holds more tuples
        than its budget; everything produced so far stays readable."""
        held = self.held()
        if held > self.budget:
            raise ResourceLimitError(
                f"the run stopped itself after {self.fed:,} input tuples: it held {held:,} tuples (stored entries "
                f"and results), over its budget of {self.budget:,}; its results so far are kept — lower the rates "
                "or selectivities, shorten the input, or raise the budget")

    def _count(self, r: str, tup: tuple, ep: EpochCounters) -> None:
        ep.n[r] += 1
        for pos, a in self.track.get(r, ()):
            v = tup[pos]
            if v is not None and self.sampled(v, self.sample):
                ep.counts[a][v] += 1

    def _enter(self, e: int, T: float, sample: Any = None) -> None:
        """Enter epoch ``e`` at time ``T``: close the current epoch (its sample decides later
        plans; a backend restoring its state passes the sample it recorded instead), let the
        schedule choose the plan, open the epoch's containers and compile the plan."""
        if self.ep is not None:
            closing = self.ep.epoch
            got = self.close()
            self.samples[closing] = got if sample is None else sample
        with self.lock:  # query changes may be submitted from another thread
            plan = self.schedule.enter(e, self.samples)
            pidx = self.schedule.plan_of[e]
            self.w = self.schedule.full
            self.open_epoch(e, self.schedule.plans[pidx], self.schedule.retained(e), T, self.w)
            self.compile_plan(pidx, e)
            self.track = self._tracking(e)
        self.ep = EpochCounters(e, self.epoch_start(e), pidx, tuple(plan.workload.query_names),
                                messages_at_open=self.probe_messages(), history_at_open=self.history[0])
        self.ep.results_at_open = Counter(self.counts)
        self.ep.counts = {a: Counter() for lst in self.track.values() for _, a in lst}
        self.next_expire = T + self.expire_every
        self.next_purge = min([c.next_purge for c in self.containers.values()], default=math.inf)
        if self.on_enter is not None:
            self.on_enter(e, T)

    def _tracking(self, epoch: int) -> dict[str, list[tuple[int, Attr]]]:
        out: dict[str, list[tuple[int, Attr]]] = {}
        for pair in self.schedule.tracked(epoch):
            for a in pair:
                lst = out.setdefault(a.relation, [])
                if all(b != a for _, b in lst):
                    lst.append((self.fields[a.relation][a.name], a))
        return out

    def close(self):
        """Close the current epoch: report it (``on_epoch``) and return its sample (adaptive
        schedules decide the plans of later epochs from it)."""
        ep = self.ep
        if ep is None:
            return None
        sample = None
        if not self.static:
            from mqjoin.adaptive.sampling import EpochSample, agreeing_pairs

            matches = {}
            for a, b in self.schedule.tracked(ep.epoch):
                ca, cb = ep.counts.get(a), ep.counts.get(b)
                if ca is not None and cb is not None:
                    matches[(a, b)] = agreeing_pairs(ca, cb, self.sample)
            sample = EpochSample(ep.epoch, dict(ep.n), matches)
        if self.on_epoch is not None:
            self.on_epoch(ep)
        self.ep = None
        return sample

    # -- what the run produced ----------------------------------------------------------------

    def operations(self) -> dict[str, int]:
        """The operations of an instrumented executor (``instrument=True``), counted as the
        MJoin paper counts them (Section 3): ``hashes`` (a key hashed to insert an entry into
        an index, or to look up a probe's key in a partition), ``moves`` (entries inserted into
        stores), ``comparisons`` (stored entries a probe compared with, in the index buckets it
        looked up) and ``intermediate`` (partial results that travel on to a further probe or
        into an MIR store)."""
        if self.ops is None:
            raise PlanError("operations are counted only by an executor made with instrument=True")
        return dict(zip(("hashes", "moves", "comparisons", "intermediate"), self.ops))

    def probe_messages(self) -> int:
        return sum(c[0] for c in self.counters.values()) + self.history[0]

    def messages_by_edge(self, pidx: int = 0) -> dict[str, int]:
        return {lab: c[0] for (p, lab), c in self.counters.items() if p == pidx}

    def results(self, clear: bool = False) -> dict[str, list[tuple[int, ...]]]:
        """Query → result tuples (row indices in the query's relation order); with
        ``triggers=True`` each is ``(trigger, rows)``.  ``clear`` empties the buffers."""
        out: dict[str, list] = {q.name: [] for q in self.w.queries}
        for q, raw in self.raw.items():
            out.setdefault(q, []).extend([(e[0], e[1:]) for e in raw] if self.triggers else raw)
            if clear:
                raw.clear()
        return out

    def take_results(self) -> list[tuple[str, list[tuple[int, ...]]]]:
        """The results collected since the last call, as collected, and empty the buffers:
        ``(query, entries)``, an entry the result's row indices in the query's relation order,
        preceded by its trigger with ``triggers=True`` — for a backend that converts them in
        bulk (e.g. ``numpy.fromiter``)."""
        out = []
        for q, raw in self.raw.items():
            if raw:
                out.append((q, raw[:]))
                raw.clear()  # the compiled emits append to this list
        return out

    def layout_name(self, layout: Layout, plan: Plan) -> str:
        for s in plan.stores:
            if layout_of(s) == layout:
                return s.id
        return (f"{layout.namespace}:" if layout.namespace else "") + self.mirs[layout.mir].render_partition(
            layout.partition)

    def store_rows(self, plan: Plan) -> dict[str, int]:
        """Entries held now, per store of ``plan``'s naming (all epochs' containers)."""
        rows: Counter = Counter()
        for (layout, _), c in self.containers.items():
            rows[self.layout_name(layout, plan)] += c.rows()
        return dict(rows)

    def max_store_rows(self, plan: Plan) -> dict[str, int]:
        """Most entries a store held at once (at purge times and now)."""
        best: dict[str, int] = {}
        for (layout, _), c in self.containers.items():
            n = self.layout_name(layout, plan)
            best[n] = max(best.get(n, 0), c.max_rows, c.rows())
        for layout, n_rows in self.dropped_rows.items():
            n = self.layout_name(layout, plan)
            best[n] = max(best.get(n, 0), n_rows)
        return best
