"""The adaptive reference executor: plans that change by epoch, stores with one container per
epoch, queries that arrive and leave (paper Section VI; the controller is
:mod:`mqjoin.adaptive.controller`).

This is the in-process :class:`~mqjoin.runtime.executor.Executor` driven by the adaptive
controller (the static reference executor is the same engine with one plan).  Tuples arrive
one at a time in docs/model.md §6 order.  A tuple of epoch ``j`` follows the plan of epoch ``j``: it is
stored into that plan's stores and probes along that plan's probe orders.  What changes is
what a store *is*:

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

What a query added or removed at run time answers is defined in :mod:`mqjoin.adaptive.controller`.

**Latency.**  The executor runs in one process, so latency is measured by replaying the
input at its event-time rate × ``speedup`` against the *measured* processing time of each
tuple: tuple ``i`` arrives at ``a_i = (ts_i − ts_0) / speedup``, starts at
``max(a_i, f_{i−1})`` and finishes ``f_i`` after its service time — the CPU time the
executing thread spent on it (so other processes on the machine do not distort it); its latency
``f_i − a_i`` is the time until all its results are computed (the paper's definition), and the
backlog is the number of arrived tuples not yet finished.  A plan that cannot keep up shows
as latency and backlog growing without bound.  (Optimisation runs beside the stream — its
result is needed only one epoch later — and is not charged to tuples.)

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> from mqjoin.adaptive.policy import AdaptivePolicy
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

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mqjoin.adaptive.controller import AdaptiveController, Decision, Optimizer
from mqjoin.adaptive.policy import AdaptivePolicy, Lifetime, QueryChange, lifetimes
from mqjoin.adaptive.sampling import sampled
from mqjoin.model.errors import DataError, ResourceLimitError
from mqjoin.planning.measured import RunCounts
from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload
from mqjoin.runtime.executor import EpochCounters, Executor
from mqjoin.runtime.rules import arrival_order, base_tuples

log = logging.getLogger(__name__)


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
    #: per plan (index into ``plans``): probe messages per edge label, while it ran
    messages: tuple[Mapping[str, int], ...] = ()
    #: event time of the first tuple and the time units the input spans
    first_ts: float = 0.0
    span: float = 0.0

    def counts(self, label: str = "") -> RunCounts | None:
        """The counts of the plan the run ended with, over the epochs it ran (from its first
        epoch on, :func:`~mqjoin.planning.measured.check_run`'s ``since``): messages per edge,
        the most rows a store held at an epoch's end; ``None`` before the first epoch."""
        if not self.epochs or len(self.messages) <= self.epochs[-1].plan:
            return None
        idx = self.epochs[-1].plan
        ran = [e for e in self.epochs if e.plan == idx]
        rows: dict[str, int] = {}
        for e in ran:
            for store, n in e.stores.items():
                rows[store] = max(rows.get(store, 0), n)
        since = min(max(0.0, ran[0].start - self.first_ts), self.span)
        return RunCounts(label, self.plans[idx], dict(self.messages[idx]), rows, self.span, since=since)

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


def epoch_record(ex: Executor, ep: EpochCounters, plan: Plan, latencies: Iterable[float] | None = None,
                 busy: float | None = None) -> EpochRecord:
    """The record of the epoch ``ep`` that ``ex`` is closing under ``plan``: its counts, the
    state held now and the latencies (default: the simulated ones of a timed executor)."""
    stores = ex.store_rows(plan)
    lat = sorted(ep.latencies if latencies is None else latencies)
    return EpochRecord(
        epoch=ep.epoch, start=ep.start, plan=ep.plan, queries=ep.queries, input_tuples=ep.tuples,
        results={q: ex.counts.get(q, 0) - ep.results_at_open.get(q, 0) for q in ep.queries},
        probe_messages=ex.probe_messages() - ep.messages_at_open,
        history_messages=ex.history[0] - ep.history_at_open,
        state_rows=sum(stores.values()), containers=len(ex.containers), stores=stores,
        busy_seconds=ep.busy if busy is None else busy,
        latency_mean=sum(lat) / len(lat) if lat else 0.0,
        latency_p95=lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)] if lat else 0.0,
        latency_max=lat[-1] if lat else 0.0, backlog_max=ep.backlog)


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def run_adaptive(workload: Workload, tables: Mapping[str, Table], policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), *, speedup: float = 1.0, optimizer: Optimizer | None = None,
                 collect: bool = True, on_epoch: Callable[[EpochRecord], None] | None = None,
                 budget: int | None = None) -> AdaptiveRun:
    """Run ``workload``'s queries over ``tables`` with the plan re-optimised every epoch
    (see :mod:`mqjoin.adaptive.controller` for the policy and the query changelog).  ``speedup`` scales
    the replay of the simulated latency; ``optimizer`` replaces :func:`mqjoin.planning.optimizer.optimize`
    (e.g. to force plan switches in tests); ``on_epoch`` sees every finished epoch; ``budget``:
    the most tuples (stored entries and collected results) the run may hold — past it the run
    stops with a :class:`~mqjoin.model.errors.ResourceLimitError`."""
    return _AdaptiveRunner(workload, tables, policy or AdaptivePolicy(), list(changes), speedup, optimizer, collect,
                           on_epoch, budget).run()


def adaptive_engine(policy: AdaptivePolicy | None = None, changes: Iterable[QueryChange] = (), **options: Any
                    ) -> Callable[[Plan, Mapping[str, Table]], AdaptiveRun]:
    """:func:`run_adaptive` as an :class:`~mqjoin.runtime.contracts.Engine`: ``engine(plan,
    tables)`` runs the plan's workload adaptively — the controller chooses the plan of every
    epoch under ``policy``, with the query ``changes`` (``options``: :func:`run_adaptive`'s
    keywords).  The adaptive engine plans for itself, so of the plan only its workload counts.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.model.tables import Table
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5, window: 1}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
    ...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 1]})}
    >>> adaptive_engine(speedup=1e9)(optimize(w).plan, tables).result_sets()
    {'q': {(0, 0)}}
    """
    changed = list(changes)

    def engine(plan: Plan, tables: Mapping[str, Table], /) -> AdaptiveRun:
        return run_adaptive(plan.workload, tables, policy, changed, **options)

    return engine


def _check_speedup(speedup: float) -> None:
    if not (isinstance(speedup, (int, float)) and speedup > 0 and math.isfinite(speedup)):
        raise DataError(f"speedup must be a positive number, got {speedup!r}")


class _AdaptiveRunner:
    """The executor under an :class:`AdaptiveController`, over a set of input tables, with the
    epoch timeline it reports."""

    def __init__(self, workload, tables, policy, changes, speedup, optimizer, collect, on_epoch, budget=None):
        _check_speedup(speedup)
        self.ctl = AdaptiveController(workload, policy, changes, optimizer)
        self.policy = policy
        self.tables = tables
        full = self.ctl.full
        # every declared relation with data: queries added later may join relations no query uses yet;
        # a relation some query joins must have an input
        rels = sorted({r for q in full.queries for r in q.relations}
                      | {r.name for r in full.relations if r.name in tables}, key=lambda r: full.relation_rank[r])
        self.base = base_tuples(full, tables, rels)
        ts = [tp[1] for rows in self.base.values() for tp in rows]
        self.first_ts, self.span = (min(ts), max(ts) - min(ts)) if ts else (0.0, 0.0)
        self.speedup = float(speedup)
        self.on_epoch = on_epoch
        self.records: list[EpochRecord] = []
        self.ex = Executor(self.ctl, collect=collect, timed=True, speedup=self.speedup, sample=policy.sample,
                           sampled=sampled, on_epoch=self._record, budget=budget)
        self.lock = self.ex.lock

    @property
    def event_time(self) -> float | None:
        return self.ex.event_time

    def run(self, pace: Callable[[float], bool] | None = None) -> AdaptiveRun:
        """Process every tuple; ``pace(arrival)`` is called before each (its scheduled arrival in
        seconds since the first) and stops the run by returning False (a live replay)."""
        order = arrival_order(self.base, self.ctl.full.relation_rank)
        t0 = time.perf_counter()
        self.ex.feed(((r, self.base[r][row]) for r, row in order), pace=pace)
        self.ex.close()
        return self.snapshot(len(order), time.perf_counter() - t0)

    def _record(self, ep: EpochCounters) -> None:
        rec = epoch_record(self.ex, ep, self.ctl.plans[ep.plan])
        self.records.append(rec)
        if self.on_epoch is not None:
            self.on_epoch(rec)

    def snapshot(self, n: int | None = None, seconds: float = 0.0) -> AdaptiveRun:
        """The run as it stands (results so far, finished epochs)."""
        with self.lock:
            full = self.ctl.full
            got = self.ex.results()
            results = {q.name: list(got.get(q.name, ())) for q in full.queries}
            return AdaptiveRun(full, self.policy, results, tuple(self.records), tuple(self.ctl.decisions),
                               tuple(self.ctl.plans), self.ctl.lives,
                               sum(r.input_tuples for r in self.records) if n is None else n, seconds, self.speedup,
                               tuple(self.ex.messages_by_edge(i) for i in range(len(self.ctl.plans))),
                               self.first_ts, self.span)


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

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.model.tables import Table
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
                 changes: Iterable[QueryChange] = (), *, speedup: float = 1.0, optimizer: Optimizer | None = None,
                 budget: int | None = None):
        self.policy = policy or AdaptivePolicy()
        self._ex = _AdaptiveRunner(workload, tables, self.policy, list(changes), speedup, optimizer, True, self._epoch,
                                   budget)
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
        except ResourceLimitError as e:  # the run stopped itself at its budget: what it produced stays
            self._ex.ex.close()
            self.run = self._ex.snapshot()
            self.error = str(e)
            self.status = "stopped"
        except Exception as e:  # a live run reports its error instead of dying silently
            log.exception("the adaptive replay failed")
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
            except Exception:  # a failing view must not stop the run, but it is not silent either
                log.exception("a subscriber of the adaptive replay failed on a %s event", event.get("kind"))

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
