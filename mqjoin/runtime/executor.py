"""The in-process executor: the one engine that runs plans, static or adaptive (docs/architecture.md §5).

Input tuples arrive one at a time in ``(ts, relation declaration rank, row)`` order — the
tie-break of docs/model.md §6 — and travel the edges of the plan of their epoch as
:mod:`mqjoin.runtime.rules` says.  A *schedule* gives the plan of every epoch: a static plan
is the schedule with one plan and one epoch (:class:`~mqjoin.runtime.schedule.StaticSchedule`),
the adaptive controller (:class:`mqjoin.adaptive.controller.AdaptiveController`) the one that
re-optimises.

The work is layered by job, one module each:

* :mod:`mqjoin.runtime.containers` — the store containers of every epoch, their partitions,
  indexes and purging, and the reference counting that creates and drops them;
* :mod:`mqjoin.runtime.probes` — the plan's edges compiled into Python functions
  (:mod:`mqjoin.runtime.codegen`), and iterative probing of epochs without a container;
* this module — the feed loop over arrivals: entering and closing epochs (the sample an
  adaptive schedule decides from), the budget of held tuples, the simulated replay latency of
  timed runs, and what the run produced (results, probe messages, operations).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mqjoin.model.errors import PlanError, ResourceLimitError
from mqjoin.model.workload import Attr
from mqjoin.runtime.probes import ProbeCompiler
from mqjoin.runtime.rules import Probe
from mqjoin.runtime.schedule import StaticSchedule

__all__ = ["EpochCounters", "Executor", "StaticSchedule"]


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


class Executor(ProbeCompiler):
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
        super().__init__(schedule, collect=collect, triggers=triggers, instrument=instrument, admission=admission)
        self.epoch_start = (schedule if self.static else schedule.policy).start
        self.timed = timed
        self.speedup = speedup
        self.sample, self.sampled = sample, sampled
        self.on_epoch = on_epoch
        self.on_enter: Callable[[int, float], None] | None = None  # a backend journaling its state
        self.budget = budget  # most tuples (stored entries + collected results) the run may hold
        self.fed = 0
        self.ep: EpochCounters | None = None
        self.samples: dict[int, Any] = {}
        self.track: dict[str, list[tuple[int, Attr]]] = {}
        self.next_expire = math.inf
        self.lock = threading.RLock()
        self.event_time: float | None = None
        # the simulated replay (timed runs)
        self.ts0: float | None = None
        self.first_time: float | None = None  # event time of the first tuple (sizes measured per epoch)
        self.finish = 0.0
        self.pending: deque[float] = deque()

    # -- containers ---------------------------------------------------------------------------

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
        if self.first_time is None:
            self.first_time = T
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
        self.ep.edges_at_open = self.messages_by_edge(pidx)
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
            # the running plan's steps and stores measure join sizes too (controller: running_sizes)
            at_open = getattr(ep, "edges_at_open", {})
            messages = {lab: n - at_open.get(lab, 0) for lab, n in self.messages_by_edge(ep.plan).items()}
            t0 = self.first_time if self.first_time is not None else ep.start
            end = min(self.epoch_start(ep.epoch + 1), self.event_time if self.event_time is not None else ep.start)
            sample = EpochSample(ep.epoch, dict(ep.n), matches, messages, self.store_rows(self.schedule.plans[ep.plan]),
                                 max(0.0, ep.start - t0), max(0.0, end - t0))
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
