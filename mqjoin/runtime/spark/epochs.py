"""Adaptivity on Spark (paper Section VI): the plan of every epoch, stores with one container
per epoch, queries added and removed while the deployment runs.

The engine is the in-process executor under the adaptive controller — the adaptive reference
executor itself (:mod:`mqjoin.runtime.epochs`), not a second implementation — behind
``foreachBatch`` in the driver (:mod:`.driver`): a micro-batch runs no Spark job whatever the
number of epochs it spans, and the results, plans, decisions, sampled statistics and probe
messages equal the reference's epoch by epoch (the tests compare them).  A snapshot carries
each plan's probe messages per edge, so the explorer sets a Spark run's counts beside the
model (its Probe trees tab) as it does a reference run's.

Usage (a running Spark job, so not a doctest; tests/test_spark_adaptive.py runs it)::

    d = deploy(workload, "data/", "out/", adaptive=AdaptivePolicy(epoch=1.0),
               changes=[QueryChange(at=3.5, add={"q2": "S(b), T(b)"})], speedup=10)
    d.submit(add={"q3": "R(a), T(a)"})         # live: at the current event time
    d.wait(); d.snapshot().timeline()          # the AdaptiveRun interface of the reference

* **Query changes** submitted live (:meth:`AdaptiveDeployment.submit`, at the current event
  time) go to the controller at once, under the lock the batches take, and are appended to
  ``CHECKPOINT/adaptive/changes.jsonl`` with the epoch the executor was in.
* **Exactly once across restarts.**  Results are written per batch to ``OUT/_batches/batch=b``
  (overwrite).  The state journal of :mod:`.driver` keeps, per committed batch, the entries
  it stored, the epochs it entered with the samples that decided them, the epoch records it
  closed and the counters of the epoch still open; a restart replays the journal through a
  fresh controller — re-submitting each logged change right after re-entering the epoch it was
  submitted in — so it makes the same decisions (given a deterministic optimiser) without
  reading the input again.
* **Latency** of an epoch: per result, the commit time of its batch's output minus the
  arrival (``_arrival``, from the paced replay) of the tuple that triggered it, over the
  results of the epoch (mean, 95th percentile, maximum).  ``backlog_max`` is not measured (0).

Why the executor and not DataFrames per epoch: cutting every micro-batch into epoch slices,
each with Spark jobs of its own over stores kept as DataFrames, costs seconds per epoch
(``benchmarks/RESULTS.md``), so epochs of a second could not run in real time; here a batch
runs in the driver however many epochs it spans.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from mqjoin.adaptive.controller import AdaptiveController, Optimizer
from mqjoin.adaptive.sampling import sampled
from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange, lifetimes
from mqjoin.model.errors import AdaptiveError, DataError
from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Table, read_inputs, time_range
from mqjoin.model.workload import Workload
from mqjoin.runtime.epochs import AdaptiveRun, EpochRecord, epoch_record
from mqjoin.runtime.executor import EpochCounters, Executor
from mqjoin.runtime.spark.deployment import Deployment, Pacing
from mqjoin.runtime.spark.driver import DriverEngine
from mqjoin.runtime.spark.source import LogFeed


class AdaptiveDriverEngine(DriverEngine):
    """The driver engine under an :class:`~mqjoin.adaptive.controller.AdaptiveController` (see the module
    doc); ``on_event`` receives ``epoch`` and ``switch`` events."""

    def __init__(self, base: Workload, policy: AdaptivePolicy, changes: list[QueryChange], optimizer: Optimizer | None,
                 full: Workload, out_dir: str, state_dir: Path, total: int,
                 on_batch: Callable | None = None, on_event: Callable[[dict], None] | None = None,
                 columns: Mapping[str, str] | None = None, feed: LogFeed | None = None):
        self.base, self.policy, self.changes, self.optimizer = base, policy, list(changes), optimizer
        self.total = total
        self.on_event = on_event
        self.adaptive_dir = state_dir
        self.records: list[EpochRecord] = []
        self.pending: list[EpochRecord] = []  # closed epochs whose latencies are not complete yet
        self.latencies: dict[int, list[float]] = {}
        self.finished = False
        self.switches_seen = 0
        self._messages: tuple[dict[str, int], ...] = ()  # per plan, kept when the executor is closed
        self.submitted: list[tuple[QueryChange, int | None]] = self._logged_changes()
        placeholder = AdaptiveController(base, policy, self.changes + [c for c, e in self.submitted if e is None],
                                         optimizer)
        super().__init__(_NoPlan(full), out_dir, state_dir / "state", on_batch, columns, feed)
        self.w = full
        self.ex = None
        self.ctl = placeholder

    # -- the controller ---------------------------------------------------------------------

    def _logged_changes(self) -> list[tuple[QueryChange, int | None]]:
        p = self.adaptive_dir / "changes.jsonl"
        out = []
        if p.exists():
            for line in p.read_text().splitlines():
                x = json.loads(line)
                c = x["change"]
                out.append((QueryChange(at=c["at"], add=dict(c.get("add") or {}), remove=tuple(c.get("remove") or ()),
                                        selectivities=dict(c.get("selectivities") or {})), x.get("epoch")))
        return out

    def new_executor(self) -> Executor:
        early = [c for c, e in self.submitted if e is None]
        self.ctl = AdaptiveController(self.base, self.policy, self.changes + early, self.optimizer)
        return Executor(self.ctl, triggers=True, sample=self.policy.sample, sampled=sampled, on_epoch=self._closed)

    def replayed_enter(self, ex: Executor, epoch: int) -> None:
        for c, e in self.submitted:
            if e == epoch:
                self.ctl.submit(c)

    def restored(self, records: list[dict]) -> None:
        self.records = [r for rec in records for r in rec.get("records", ())]
        self.latencies = dict(records[-1].get("latencies", {})) if records else {}
        self.switches_seen = sum(1 for d in self.ctl.decisions if d.switched)
        self.finished = False

    def journal_extra(self) -> dict[str, Any]:
        return {"records": self._done_now, "latencies": self.latencies}

    def current_plan(self) -> Plan:
        ex = self.ex
        e = ex.ep.epoch if ex is not None and ex.ep is not None else self.ctl.epoch
        return self.ctl.plans[self.ctl.plan_of[e]] if e is not None and e in self.ctl.plan_of else self.plan

    @property
    def event_time(self) -> float | None:
        return None if self.ex is None else self.ex.event_time

    def plan_messages(self) -> tuple[dict[str, int], ...]:
        """Per plan (index into the controller's plans): probe messages per edge label while it
        ran — what the Probe trees tab colours by (:meth:`~mqjoin.runtime.epochs.AdaptiveRun.counts`)."""
        ex = self.ex
        if ex is None:
            return self._messages
        return tuple(ex.messages_by_edge(i) for i in range(len(self.ctl.plans)))

    def close(self) -> None:
        self._messages = self.plan_messages()
        super().close()

    def submit(self, change: QueryChange) -> int:
        """Hand a query change to the controller now and log it (see the module doc)."""
        with self.lock:
            ex = self.ex
            epoch = ex.ep.epoch if ex is not None and ex.ep is not None else None
            got = self.ctl.submit(change)
            self.submitted.append((change, epoch))
            self.adaptive_dir.mkdir(parents=True, exist_ok=True)
            with (self.adaptive_dir / "changes.jsonl").open("a") as f:
                f.write(json.dumps({"change": change.to_dict(), "epoch": epoch}, default=str) + "\n")
            return got

    # -- epochs ------------------------------------------------------------------------------

    def _closed(self, ep: EpochCounters) -> None:
        self.pending.append(epoch_record(self.ex, ep, self.ctl.plans[ep.plan], latencies=()))

    def batch_done(self, batch_id: int, triggers: Mapping[str, np.ndarray], committed: float, seq: np.ndarray,
                   arrival: np.ndarray, ts: np.ndarray) -> None:
        epoch_of = self.policy.epoch_of
        for idx in triggers.values():
            if len(idx):
                for e, lat in zip((epoch_of(t) for t in ts[idx].tolist()), (committed - arrival[idx]).tolist()):
                    self.latencies.setdefault(e, []).append(lat)
        if self.next_seq >= self.total and self.ex.ep is not None:  # the input is consumed: the last epoch ends
            self.ex.close()
            self.finished = True
        self._done_now = []
        busy = committed - self.batch_started
        for rec in self.pending:
            lat = sorted(self.latencies.pop(rec.epoch, []))
            rec = replace(rec, busy_seconds=busy, latency_mean=sum(lat) / len(lat) if lat else 0.0,
                          latency_p95=lat[min(len(lat) - 1, int(np.ceil(0.95 * len(lat))) - 1)] if lat else 0.0,
                          latency_max=lat[-1] if lat else 0.0)
            self._done_now.append(rec)
        self.pending = []
        self.records.extend(self._done_now)
        if self.on_event is not None:
            switches = [d for d in self.ctl.decisions if d.switched]
            for d in switches[self.switches_seen:]:
                self.on_event({"kind": "switch", **d.to_dict()})
            self.switches_seen = len(switches)
            for rec in self._done_now:
                self.on_event({"kind": "epoch", **rec.to_dict()})

    def partial_record(self) -> EpochRecord | None:
        """The record of the epoch in progress (a stopped deployment's last epoch)."""
        ex = self.ex
        if ex is None or ex.ep is None:
            return None
        lat = self.latencies.get(ex.ep.epoch, [])
        rec = epoch_record(ex, ex.ep, self.ctl.plans[ex.ep.plan], latencies=lat)
        return rec


class _NoPlan:
    """Stands for the plan of a static engine: an adaptive deployment has one per epoch."""

    def __init__(self, workload: Workload):
        self.workload = workload
        self.stores = ()


class AdaptiveDeployment(Deployment):
    """An adaptive deployment: the :class:`Deployment` of a workload whose plan the controller
    chooses every epoch, with the live interface of
    :class:`mqjoin.runtime.epochs.AdaptiveReplay` — :meth:`submit`, :meth:`subscribe` (events
    ``epoch``, ``switch``, ``change``, ``status``, plus ``batch`` and ``progress``),
    :meth:`snapshot` (an :class:`~mqjoin.runtime.epochs.AdaptiveRun`), :meth:`timeline`,
    :meth:`wait_for_epoch`, :attr:`controller`, :attr:`event_time` — so the explorer's
    views work with either.  Create with :func:`mqjoin.runtime.spark.launch.deploy`
    (``adaptive=…``, ``changes=…``).

    ``optimizer`` must be deterministic in its sequence of calls: a restart re-derives every
    decision by calling a fresh run's optimiser in the same order (pass a new instance of a
    stateful one)."""

    def __init__(self, workload: Workload | Plan, data, out, *, policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), optimizer: Optimizer | None = None, spark=None,
                 master: str | None = None, checkpoint=None, pacing: Pacing = Pacing(), conf=None):
        #: guards the changelog before the start (the changes, the controller, config.json) and
        #: the creation of the engine, whose own lock guards them once it runs (:meth:`_locked_engine`)
        self._changes_lock = threading.RLock()
        if isinstance(workload, Plan):
            workload = workload.workload
        if not isinstance(workload, Workload):
            raise AdaptiveError(f"an adaptive deployment needs a workload or a plan, got {type(workload).__name__}")
        self.policy = policy or AdaptivePolicy()
        if not isinstance(self.policy, AdaptivePolicy):
            raise AdaptiveError(f"adaptive= takes an AdaptivePolicy, got {type(self.policy).__name__}")
        self.base = workload
        self.changes = list(changes)
        for c in self.changes:
            if not isinstance(c, QueryChange):
                raise AdaptiveError(f"changes must be QueryChange values (or a changelog file read with "
                                    f"mqjoin.adaptive.policy.load_changes), got {type(c).__name__}")
        full, _ = lifetimes(workload, self.changes, self.policy)  # a bad changelog fails before Spark starts
        self.optimizer = optimizer
        self._ctl0: AdaptiveController | None = None
        super().__init__(None, data, out, engine="mqjoin", spark=spark, master=master, checkpoint=checkpoint,
                         pacing=pacing, conf=conf, workload=full)
        for q in full.queries:
            for r in q.relations:
                if r not in self.tables:
                    raise DataError(f"no input table for relation {r}, which query {q.name} joins")
        self.state_dir = self.checkpoint / "adaptive"
        self._check_config()
        self._slice_rows: list[dict] = []
        self.engine: AdaptiveDriverEngine | None = None

    def _read_inputs(self, data) -> dict[str, Table]:
        """The relations the queries use, and every other declared relation with an input file
        (queries submitted later may join them)."""
        d = Path(data)
        needed = list(self.workload.used_relations)
        extra = [r.name for r in self.workload.relations if r.name not in needed and
                 ((d / f"{r.name}.parquet").exists() or (d / f"{r.name}.csv").exists())]
        return read_inputs(self.workload, d, needed + extra, every_attribute=True)

    def _check_config(self) -> None:
        """A checkpoint resumes only the deployment that wrote it (same policy and changelog);
        a policy field added since it was written counts as its default."""
        p = self.state_dir / "config.json"
        cfg = {"policy": self.policy.to_dict(), "changes": [c.to_dict() for c in self.changes],
               "queries": {q.name: q.text for q in self.base.queries}}
        cfg = json.loads(json.dumps(cfg, default=str))
        if p.exists():
            old = json.loads(p.read_text())
            if isinstance(old.get("policy"), dict):  # fields added since the checkpoint was written take their defaults
                try:
                    old["policy"] = json.loads(json.dumps(AdaptivePolicy.from_dict(old["policy"]).to_dict(),
                                                          default=str))
                except AdaptiveError as e:
                    raise AdaptiveError(f"the checkpoint {self.checkpoint} cannot be resumed: {e}") from None
            for key, what in (("policy", "adaptive policy"), ("changes", "changelog"), ("queries", "queries")):
                if old.get(key) != cfg[key]:
                    raise AdaptiveError(f"the checkpoint {self.checkpoint} was written by a deployment with another "
                                        f"{what}; resume it with the same settings or use a new checkpoint directory")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(cfg, indent=1))

    def _start_mqjoin(self, opts, listener) -> None:
        with self._changes_lock:  # a change submitted meanwhile is in self.changes, or waits for the engine
            self.engine = AdaptiveDriverEngine(self.base, self.policy, self.changes, self.optimizer, self.workload,
                                               str(self.out), self.state_dir, self.total, on_batch=self._on_report,
                                               on_event=self._emit, columns=self.columns, feed=self._feed(opts))
        q = self._writer(self._batch_ids(), "plan", self._guard(self.engine.process)).start()
        self._queries["plan"] = q
        listener.routes[str(q.id)] = lambda kind, d: self._on_listener("plan", kind, d)

    # -- the live interface ---------------------------------------------------------------------

    @property
    def controller(self) -> AdaptiveController:
        if self.engine is not None:
            return self.engine.ctl
        with self._changes_lock:
            if self._ctl0 is None:
                self._ctl0 = AdaptiveController(self.base, self.policy, self.changes, self.optimizer)
            return self._ctl0

    @contextlib.contextmanager
    def _locked_engine(self) -> Iterator[AdaptiveDriverEngine | None]:
        """The engine (None before the start) with the lock that guards the changes and epochs
        held: the engine's own (its batches take it) once it runs, the deployment's before —
        which the start also holds while it creates the engine from the changelog, so a change
        submitted during the start is neither lost nor applied twice."""
        with self._changes_lock:
            eng = self.engine
            if eng is None:
                yield None
                return
        with eng.lock:
            yield eng

    @property
    def event_time(self) -> float | None:
        return None if self.engine is None else self.engine.event_time

    def _first_ts(self) -> float:
        return time_range(self.tables)[0]

    def submit(self, change: QueryChange | None = None, *, add: Mapping[str, str] | None = None,
               remove: Iterable[str] = (), selectivities: Mapping[str, float] | None = None) -> int:
        """Add/remove queries now (at the current event time; before the start: at the first
        tuple's time); returns the activation epoch.  Errors (unknown names, invalid queries,
        relations without input) are raised here and change nothing."""
        with self._locked_engine() as eng:
            if change is None:
                at = eng.event_time if eng is not None and eng.event_time is not None else self._first_ts()
                change = QueryChange(at=at, add=dict(add or {}), remove=tuple(remove),
                                     selectivities=dict(selectivities or {}))
            ctl = self.controller
            full, _ = lifetimes(ctl.base, [*ctl.changes, change], self.policy)  # validates
            for name in change.add:
                for r in full.query(name).relations:
                    if r not in self.tables:
                        raise DataError(f"query {name} joins {r}, which has no input in this run")
            if eng is not None:
                epoch = eng.submit(change)
            else:  # not started: part of the deployment's changelog
                epoch = ctl.submit(change)
                self.changes.append(change)
                self._rewrite_config()
        self._emit({"kind": "change", "change": change.to_dict(), "activation_epoch": epoch})
        return epoch

    def _rewrite_config(self) -> None:
        p = self.state_dir / "config.json"
        p.unlink(missing_ok=True)
        self._check_config()

    def wait_for_epoch(self, epoch: int, timeout: float | None = None) -> bool:
        """Wait until ``epoch`` has finished (False on timeout or if the run ended before)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.engine is not None and any(r.epoch >= epoch for r in list(self.engine.records)):
                return True
            if self.status in ("finished", "stopped", "failed") or self.error is not None or \
                    (self.engine is not None and self.engine.finished):
                return False
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def snapshot(self) -> AdaptiveRun:
        """The run so far: committed results, finished epochs (and, once stopped or failed, the
        epoch in progress), decisions and plans."""
        results = {q: sorted(r) for q, r in self.results().items()}
        with self._locked_engine() as eng:
            ctl = self.controller
            epochs = list(eng.records) if eng is not None else []
            if eng is not None and self.status in ("stopped",
                                                   "failed") and eng.ex is not None and eng.ex.ep is not None:
                part = eng.partial_record()
                if part is not None and all(r.epoch != part.epoch for r in epochs):
                    epochs.append(part)
            n = eng.next_seq if eng is not None else 0
            seconds = 0.0 if self.started_at is None else time.time() - self.started_at
            messages = eng.plan_messages() if eng is not None else ()
            first, span = time_range(self.tables)
            return AdaptiveRun(ctl.full, self.policy, results, tuple(epochs), tuple(ctl.decisions),
                               tuple(ctl.plans), ctl.lives, n, seconds, float(self.pacing.speedup or 1.0),
                               messages, first, span)

    def timeline(self):
        return self.snapshot().timeline()

    def _result_queries(self) -> list[str]:
        return list(self.controller.full.query_names)

    def _output_workload(self) -> Workload:
        return self.controller.full

    # -- metrics ------------------------------------------------------------------------------

    @property
    def epochs(self):
        """One row per finished epoch (pandas): the timeline."""
        return self.timeline()

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["history_messages"] = sum(r.history_messages for r in self.snapshot().epochs)
        out["engine"] = "mqjoin-adaptive"
        out["backlog_measured"] = bool(self.pacing.rate or self.pacing.speedup)
        return out
