"""The reference executor: runs a :class:`~mqjoin.planning.plan.Plan` in-process over input tables.

It is the in-process :class:`~mqjoin.runtime.executor.Executor` with a static schedule (one
plan, one epoch): input tuples arrive one at a time in ``(ts, relation declaration order, row
index)`` order — the deterministic tie-break of docs/model.md §6 — and travel the plan's edges as
:mod:`mqjoin.runtime.rules` says, exactly as a distributed deployment would route them:

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

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> from mqjoin.model.tables import Table
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
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Table
from mqjoin.runtime.executor import Executor
from mqjoin.runtime.schedule import StaticSchedule
from mqjoin.runtime.rules import arrival_order, base_tuples, partition_of

__all__ = ["RunResult", "run_reference", "partition_of"]


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
    operations: Mapping[str, int] = field(default_factory=dict)  # instrumented runs: hashes, moves, …
    budget: Any = None  # budgeted runs: the mqjoin.runtime.shedding.BudgetReport

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
            **({"budget": self.budget.summary()} if self.budget is not None else {}),
        }


def store_messages(plan: Plan, messages: Mapping[str, int]) -> dict[str, int]:
    """Probe messages per store of ``plan`` from the messages per probe edge."""
    out = {s.id: 0 for s in plan.stores}
    for lab, n in messages.items():
        out[plan.edge[lab].target] += n
    return out


#: arrivals fed between two hand-overs of the results to a ``sink`` (:func:`run_reference`)
SINK_EVERY = 1 << 16


def run_reference(plan: Plan, tables: Mapping[str, Table], collect: bool = True,
                  instrument: bool = False, cpu_budget: float | None = None, allocation: str = "JAQPOT",
                  cycle: float = 1.0, freshness: float = 1.5,
                  sink: Callable[[str, list[tuple[int, ...]]], None] | None = None) -> RunResult:
    """Run ``plan`` over ``tables`` (relation → :class:`~mqjoin.model.tables.Table`).  With
    ``collect=False`` results are only counted (for throughput measurements); with
    ``instrument=True`` the run counts its operations as the MJoin paper does
    (:meth:`~mqjoin.runtime.executor.Executor.operations`).  ``cpu_budget``: at most this
    many probes per second of event time, divided over the half-way joins of a binary tree
    plan by the ``allocation`` policy, per ``cycle`` seconds, with freshness predicates of
    ``freshness`` × the windows (:mod:`mqjoin.runtime.shedding`); the run's ``budget`` reports it.
    ``sink(query, results)``: the results are handed over every :data:`SINK_EVERY` arrivals
    (e.g. to :class:`~mqjoin.model.tables.ResultWriter`) and not kept, so a run holds its stores
    and one stretch of results, whatever their number (``results`` is then empty)."""
    from mqjoin.runtime.shedding import ProbeBudget

    w = plan.workload
    gate = None if cpu_budget is None else ProbeBudget(plan, cpu_budget, allocation, cycle, freshness)
    base = base_tuples(w, tables, plan.sources)
    order = arrival_order(base, w.relation_rank)
    ex = Executor(StaticSchedule(plan), collect=collect, instrument=instrument, admission=gate)
    t0 = time.perf_counter()
    if sink is None:
        ex.feed([(r, base[r][row]) for r, row in order])
    else:
        for i in range(0, len(order), SINK_EVERY):
            ex.feed([(r, base[r][row]) for r, row in order[i:i + SINK_EVERY]])
            for q, entries in ex.take_results():
                sink(q, entries)
    seconds = time.perf_counter() - t0
    messages = ex.messages_by_edge(0)
    all_ts = [tp[1] for rows in base.values() for tp in rows]
    duration = (max(all_ts) - min(all_ts)) if all_ts else 0.0
    rows = ex.max_store_rows(plan)
    return RunResult(
        results=ex.results() if sink is None else {q.name: [] for q in w.queries},
        probe_messages=messages,
        store_messages=store_messages(plan, messages),
        store_rows={s.id: rows.get(s.id, 0) for s in plan.stores},
        input_tuples=len(order),
        seconds=seconds,
        duration=duration,
        counts={q.name: ex.counts.get(q.name, 0) for q in w.queries},
        operations=ex.operations() if instrument else {},
        budget=None if gate is None else gate.report(duration),
    )
