"""A plan's stores per logical partition: how probe messages and rows spread over the
partitions of every store, counted on data and projected by the cost model for other
partition counts — the skew a user sees before renting a cluster.

**Logical partitions.**  A store of parallelism ``p`` is ``p`` partitions (docs/model.md
§3–4): an entry lives in the partition of its partition attribute's value
(:func:`~mqjoin.runtime.rules.partition_of`, the function every engine uses), a routed probe
goes to the partition of its route value, a broadcast probe to all of them.  These are the
plan's partitions, not Spark's tasks: the distributed mode's shards hold entries of many
partitions, and its reports are summed per partition here.  :func:`~.vector.partition_keys`
gives every value a key whose remainder modulo ``P`` is its partition among ``P``, so one
pass counts several partition counts at once (``np.bincount`` of ``key % P``; no Python per
row).

**Counted while a plan runs.**  A :class:`PartitionTally` set on a
:class:`~mqjoin.runtime.vector.BatchExecutor` (its ``tally``) counts every probe's travelling
tuples per partition of its target store: a routed probe in its route value's partition, a
broadcast probe once in each.  :func:`partition_rows` counts a store's live entries (those a
later tuple can still join) per partition.  The Spark deployments report both per store
(``mqjoin run --json``: ``partitions``).

**Projected** (:func:`project`, ``mqjoin partitions``).  For each partition count ``P`` and
store, the cost model's messages and rows over the input's span (the predictions of
:func:`mqjoin.planning.measured.check_run`) per partition: a store partitioned on an attribute
with ``d`` distinct values (counted in the data) fills at most ``min(P, d)`` partitions, the
fullest holding the most of the ``d`` values the partition function puts into one partition
(at least ``⌈d/P⌉``; a hash also puts several values together by chance) — that share of the
routed messages and rows, every value counted as equally frequent (``total / P`` without
data) — and every partition receives every broadcast message.
Beside it, the data's own counts — one run of the vectorised executor — as max, mean and
max/mean per partition.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: null, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 1, 2, 3], "a": [1, 1, 1, 2]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 3]})}
>>> rows = project(optimize(w).plan, tables, (2, 4))
>>> [(r.store, r.partitions, r.distinct, r.rows_max, r.rows_mean) for r in rows]
[('R[a]', 2, 2, 3, 2.0), ('R[a]', 4, 2, 3, 1.0), ('S[a]', 2, 2, 1, 1.0), ('S[a]', 4, 2, 1, 0.5)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mqjoin.model.errors import DataError, OptionError
from mqjoin.model.tables import Table, time_range
from mqjoin.planning.plan import Plan
from mqjoin.runtime.rules import Layout, Probe, field_positions, layout_of, position
from mqjoin.runtime.vector import Arrivals, BatchExecutor, Frame, partition_keys
from mqjoin.runtime.windows import window_mask
from mqjoin.support.units import number


class PartitionTally:
    """Probe messages per partition of every store of an executor's plan, at each partition
    count of ``counts`` (default: every store's own parallelism); see the module doc."""

    def __init__(self, ex: BatchExecutor, counts: Sequence[int] | None = None):
        self.counts = {layout: tuple(counts) if counts else (p,) for layout, p in ex.p.items()}
        self.held: dict = {}  # partition_rows' cache (never pickled: it refers to the store's segments)
        self.reset()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "held": {}}

    def reset(self) -> None:
        """Start counting again (a micro-batch's counts)."""
        self.routed = {layout: {P: np.zeros(P, dtype=np.int64) for P in ps} for layout, ps in self.counts.items()}
        self.broadcast = {layout: 0 for layout in self.counts}

    def probe(self, rule: Probe, f: Frame, broadcasts: bool = True) -> None:
        """Count the travelling tuples ``f`` of a probe (``broadcasts`` False: its broadcast
        copies are counted elsewhere, as the executor's messages are)."""
        if rule.route is None:
            if broadcasts:
                self.broadcast[rule.layout] += len(f)
            return
        col = f.cols[rule.route[0]].get(rule.route[1])
        if col is None:
            raise DataError(f"probe {rule.label} travels without its route value (field {rule.route}): the plan's "
                            "field needs are inconsistent — please report this")
        keys = partition_keys(col)
        for P, acc in self.routed[rule.layout].items():
            acc += np.bincount(keys % P, minlength=P)

    def messages(self, layout: Layout, P: int) -> np.ndarray:
        """Messages received by each of ``P`` partitions of the store."""
        return self.routed[layout][P] + self.broadcast[layout]


def partition_rows(ex: BatchExecutor, layout: Layout, counts: Iterable[int],
                   cache: dict | None = None) -> dict[int, np.ndarray] | None:
    """The store's live entries (those a later tuple can still join, at the executor's ``T``)
    per partition, for each partition count; ``None`` when its entries do not carry the
    partition attribute (restored from a journal written before they did).  ``cache`` (kept
    by the caller between calls) holds the counts of the segments of a store without
    windows, whose entries all stay live: a batch then counts only its new segments."""
    at = position(field_positions(ex.w), layout.mir.relations, layout.partition)
    counts = tuple(counts)
    out = {P: np.zeros(P, dtype=np.int64) for P in counts}
    wins = ex.windows[layout]
    for seg in ex.stores[layout]:
        if not len(seg):
            continue
        hit = None if cache is None or wins else cache.get(id(seg))
        if hit is not None and hit[0] is seg.frame:  # the same entries as when counted
            for P in counts:
                out[P] += hit[1][P]
            continue
        col = seg.frame.cols[at[0]].get(at[1])
        if col is None:
            return None
        if wins:
            col = col[window_mask(ex.T, ((seg.frame.cols[c][1], win) for c, win in wins), len(seg))]
        keys = partition_keys(col)
        got = {P: np.bincount(keys % P, minlength=P) for P in counts}
        for P in counts:
            out[P] += got[P]
        if cache is not None and not wins:
            cache[id(seg)] = (seg.frame, got)
    return out


def skew(values: Sequence[float]) -> float | None:
    """max / mean over partitions (1: even; ``P``: all in one); None when all are 0.

    >>> skew([3, 1, 0, 0]), skew([2, 2]), skew([0, 0])
    (3.0, 1.0, None)
    """
    total = float(sum(values))
    return None if total <= 0 else max(values) * len(values) / total


def store_partitions(ex: BatchExecutor, tally: PartitionTally) -> dict[str, dict[str, Any]]:
    """Per store id: its ``partitions`` (parallelism), ``messages`` per partition counted by
    ``tally`` and live ``rows`` per partition (``None`` when they cannot be counted)."""
    out = {}
    live = {id(seg) for segs in ex.stores.values() for seg in segs}
    for k in [k for k in tally.held if k not in live]:  # segments merged or expired since
        del tally.held[k]
    for layout, sid in ex.names.items():
        P = ex.p[layout]
        rows = partition_rows(ex, layout, (P,), tally.held)
        out[sid] = {"partitions": P, "messages": tally.messages(layout, P).tolist(),
                    "rows": None if rows is None else rows[P].tolist()}
    return out


def add_partitions(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The counts of two shards (or batches) summed per store and partition."""
    out = {sid: dict(d) for sid, d in a.items()}
    for sid, d in b.items():
        if sid not in out:
            out[sid] = dict(d)
            continue
        for k in ("messages", "rows"):
            x, y = out[sid].get(k), d.get(k)
            out[sid][k] = None if x is None or y is None else [i + j for i, j in zip(x, y)]
    return out


def partitions_summary(per_batch: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """A run's per-partition figures from its micro-batches' counts (oldest first): messages
    summed over the batches, rows after the last one, each with its max/mean skew."""
    out: dict[str, dict[str, Any]] = {}
    for batch in per_batch:
        for sid, d in batch.items():
            cur = out.setdefault(sid, {"partitions": d["partitions"], "messages": [0] * d["partitions"], "rows": None})
            cur["messages"] = [i + j for i, j in zip(cur["messages"], d["messages"])]
            cur["rows"] = d.get("rows")
    for d in out.values():
        d["messages_skew"] = skew(d["messages"])
        d["rows_skew"] = None if d["rows"] is None else skew(d["rows"])
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class Projection:
    """One store at ``partitions`` partitions: the model's messages and rows in the fullest
    partition, and the data's max and mean per partition (None without data)."""

    store: str
    partition: str  # the partition attribute
    partitions: int
    distinct: int | None  # distinct values of the partition attribute in the data
    model_messages: float
    model_rows: float
    messages_max: int | None = None
    messages_mean: float | None = None
    rows_max: int | None = None
    rows_mean: float | None = None

    @property
    def messages_skew(self) -> float | None:
        return self.messages_max / self.messages_mean if self.messages_mean else None

    @property
    def rows_skew(self) -> float | None:
        return self.rows_max / self.rows_mean if self.rows_mean else None

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "messages_skew": self.messages_skew, "rows_skew": self.rows_skew}


def check_counts(counts: Iterable[Any]) -> tuple[int, ...]:
    """Partition counts given by a user: whole numbers ≥ 1.

    >>> check_counts(["8", 32])
    (8, 32)
    """
    out = []
    for c in counts:
        try:
            n = int(str(c).strip())
        except ValueError:
            n = 0
        if n < 1 or str(n) != str(c).strip():
            raise OptionError(f"partition count {c!r} is not a whole number ≥ 1 (e.g. --partitions 8,32,128)")
        out.append(n)
    if not out:
        raise OptionError("give at least one partition count (e.g. --partitions 8,32,128)")
    return tuple(out)


def project(plan: Plan, tables: Mapping[str, Table] | None, counts: Iterable[int],
            batch: int | None = 100_000) -> list[Projection]:
    """Every store of ``plan`` at each partition count of ``counts``: the model's figures over
    ``tables``' span (per time unit without ``tables``), and with ``tables`` the data's counts
    from one run of the vectorised executor, ``batch`` arrivals at a time (module doc)."""
    from mqjoin.planning.measured import check_run

    counts = check_counts(counts)
    span = time_range(tables)[1] if tables else None
    # the model: routed messages and rows spread over the used partitions, broadcasts reach all
    routed = {s.id: 0.0 for s in plan.stores}
    bcast = {s.id: 0.0 for s in plan.stores}
    rows = {s.id: float(s.memory) for s in plan.stores}
    if span is None:
        for n in plan.nodes:
            if n.broadcast:
                bcast[n.store] += n.cost / plan.store[n.store].parallelism
            else:
                routed[n.store] += n.cost
    else:
        check = check_run(plan, {}, {}, span)
        for n, c in zip(plan.nodes, check.steps):
            if n.broadcast:
                bcast[n.store] += c.predicted / plan.store[n.store].parallelism
            else:
                routed[n.store] += c.predicted
        rows = {c.store: c.predicted for c in check.stores if c.kind == "rows"}
    distinct: dict[str, int | None] = {s.id: None for s in plan.stores}
    keys: dict[str, np.ndarray] = {}  # the partition keys of a store's distinct values
    measured = {}
    if tables:
        for s in plan.stores:
            t = tables.get(s.partition.relation)
            if t is not None:
                values = pd.Series(t.columns[s.partition.name]).dropna().unique()
                distinct[s.id] = len(values)
                keys[s.id] = partition_keys(np.asarray(values))
        measured = _measure(plan, tables, counts, batch)
    out = []
    for s in sorted(plan.stores, key=lambda s: s.id):
        d = distinct[s.id]
        for P in counts:
            # the share of the values in the fullest partition: all values equally frequent
            share = 1 / P if not d else int(np.bincount(keys[s.id] % P, minlength=P).max()) / d
            m = measured.get((s.id, P))
            out.append(Projection(s.id, str(s.partition), P, d, routed[s.id] * share + bcast[s.id], rows[s.id] * share,
                                  *(() if m is None else m)))
    return out


def _measure(plan: Plan, tables: Mapping[str, Table], counts: tuple[int, ...], batch: int | None
             ) -> dict[tuple[str, int], tuple[int, float, int | None, float | None]]:
    ex = BatchExecutor(plan)
    ex.tally = tally = PartitionTally(ex, counts)
    for frames in Arrivals(plan.workload, tables, ex.source_need).batches(batch):
        ex.feed(frames)
    out = {}
    for s in plan.stores:
        layout = layout_of(s)
        held = partition_rows(ex, layout, counts)
        for P in counts:
            msgs = tally.messages(layout, P)
            r = None if held is None else held[P]
            out[(s.id, P)] = (int(msgs.max()), float(msgs.mean()), None if r is None else int(r.max()),
                              None if r is None else float(r.mean()))
    return out


def render(rows: Sequence[Projection]) -> str:
    """The projection as a text table (one line per store and partition count; ``—``: not
    measured)."""
    sw = max([len("store")] + [len(r.store) for r in rows])
    aw = max([len("partition")] + [len(r.partition) for r in rows])

    def f(x, fmt: str, width: int = 10) -> str:
        return f"{'—' if x is None else format(x, fmt):>{width}}"

    lines = [f"{'store':<{sw}} {'partition':<{aw}} {'P':>5} {'used':>5}  {'model msgs':>10} {'model rows':>10}  "
             f"{'msgs max':>10} {'mean':>10} {'max/mean':>8}  {'rows max':>10} {'mean':>10} {'max/mean':>8}"]
    for r in rows:
        used = r.partitions if r.distinct is None else min(r.partitions, r.distinct)
        lines.append(f"{r.store:<{sw}} {r.partition:<{aw}} {r.partitions:>5} {used:>5}  {number(r.model_messages):>10} "
                     f"{number(r.model_rows):>10}  {f(r.messages_max, ',')} {f(r.messages_mean, ',.0f')} "
                     f"{f(r.messages_skew, '.2f', 8)}  {f(r.rows_max, ',')} {f(r.rows_mean, ',.0f')} "
                     f"{f(r.rows_skew, '.2f', 8)}")
    return "\n".join(lines)
