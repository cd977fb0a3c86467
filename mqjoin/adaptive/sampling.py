"""What an engine measures in an epoch: tuples per relation and agreeing pairs per equality,
optionally on a consistent sample of join values, and the statistics the optimiser gets from them.

**Statistics of an epoch.**  ``rate(R) = n_R / epoch`` (an epoch without a tuple of ``R``
gives half a tuple per epoch: the model needs positive rates); the selectivity of a pair
``X.a = Y.b`` is ``agreeing pairs / (n_X · n_Y)`` over the epoch's tuples (one agreeing pair
when none agree, as :mod:`mqjoin.model.statistics` writes it), and linked pairs of one class get
their geometric mean (the same grouping as ``mqjoin stats``).  A class whose relations had no
tuple in the epoch keeps its previous value.  With ``policy.sample < 1`` only join values whose
hash falls below the fraction are counted (the same values in every relation, so agreeing
pairs are sampled consistently) and the count is scaled up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.model.sizes import MeasuredSize
from mqjoin.model.workload import Attr, Workload, iter_pairs
from mqjoin.support.valuesample import sampled
from mqjoin.support.units import number


EMPTY_EPOCH_TUPLES = 0.5


def agreeing_pairs(ca: Mapping[Any, int], cb: Mapping[Any, int], fraction: float = 1.0) -> float:
    """``Σ_v cnt_a(v) · cnt_b(v) / fraction``: agreeing pairs from two value counts (of a hash
    sample of ``fraction`` of the values).

    >>> agreeing_pairs({1: 2, 2: 1}, {1: 3, 5: 1})
    6.0
    """
    small, big = (ca, cb) if len(ca) <= len(cb) else (cb, ca)
    return sum(n * big[v] for v, n in small.items() if v in big) / fraction


def epoch_sample(workload: Workload, tables: Mapping[str, Any], policy: AdaptivePolicy, epoch: int) -> EpochSample:
    """What an engine samples in ``epoch`` of ``tables`` (tuples with ``ts`` in the epoch):
    e.g. to start a run from the statistics a running system would already have.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.model.tables import Table
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> t = {"R": Table.from_columns("R", {"ts": [0.1, 0.2, 1.5], "a": [1, 2, 1]}),
    ...      "S": Table.from_columns("S", {"ts": [0.5, 0.7], "a": [1, 1]})}
    >>> s = epoch_sample(w, t, AdaptivePolicy(epoch=1.0), 0)
    >>> s.tuples, list(s.matches.values())
    ({'R': 2, 'S': 2}, [2.0])
    """
    from collections import Counter

    pairs = tracked_pairs(workload)
    counts: dict[Attr, Counter] = {}
    n: dict[str, int] = {}
    for a in sorted({a for p in pairs for a in p}):
        t = tables[a.relation]
        rows = [i for i, ts in enumerate(t.ts) if policy.epoch_of(ts) == epoch]
        n[a.relation] = len(rows)
        col = t.columns.get(a.name, ())
        counts[a] = Counter(v for v in (col[i] for i in rows) if v is not None and sampled(v, policy.sample))
    return EpochSample(epoch, n, {(a, b): agreeing_pairs(counts[a], counts[b], policy.sample) for a, b in pairs})


@dataclass(frozen=True)
class EpochSample:
    """What an engine counted in one epoch: tuples per relation and agreeing pairs per
    equality (already scaled by ``1 / sample``); and what the epoch's plan counted — probe
    messages per edge in the epoch, rows per store at its end — over ``[start, end]`` (time
    units since the input's first tuple), from which the controller measures the join sizes
    of the plan's prefixes and MIRs (:func:`~mqjoin.planning.measured.running_sizes`)."""

    epoch: int
    tuples: Mapping[str, int]
    matches: Mapping[tuple[Attr, Attr], float]
    messages: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        """Unpickled from a state journal: fields a journal of an older version lacks (what the
        plan counted) are empty, so its replayed epochs measure no join sizes, as when written."""
        for f in fields(self):
            if f.name not in state:
                object.__setattr__(self, f.name, f.default_factory() if f.default_factory is not MISSING else f.default)
        for k, v in state.items():
            object.__setattr__(self, k, v)


@dataclass(frozen=True)
class EpochStats:
    """Statistics derived from one :class:`EpochSample`: rates and pair selectivities."""

    epoch: int
    tuples: Mapping[str, int]
    rates: Mapping[str, float]
    pairs: Mapping[tuple[Attr, Attr], float]
    #: join sizes of the running plan's prefixes and MIRs measured in the epoch
    sizes: tuple[MeasuredSize, ...] = ()

    def apply(self, workload: Workload) -> Workload:
        """``workload`` with these rates and selectivities (classes without a sampled pair keep
        their values) and join sizes (those of sets it joins as the plan that measured them)."""
        from mqjoin.model.statistics import with_pair_values

        w = with_pair_values(workload, self.pairs, rates={r: v for r, v in self.rates.items()
                                                           if r in workload.relation_rank})
        return w.with_sizes(self.sizes, strict=False) if self.sizes else w

    def describe(self, before: Workload | None = None, limit: int = 6) -> str:
        """The values, and how they moved relative to ``before``'s selectivities."""
        parts = []
        for (a, b), v in sorted(self.pairs.items()):
            old = None if before is None else before.selectivity_of(a, b)
            if old is None:
                parts.append(f"{a} = {b} {number(v)}")
            elif not math.isclose(old, v, rel_tol=0.05):
                parts.append(f"{a} = {b} {number(old)} → {number(v)}")
        if before is not None:
            for r, v in sorted(self.rates.items()):
                old = before.rate(r)
                if not math.isclose(old, v, rel_tol=0.05):
                    parts.append(f"rate {r} {number(old)} → {number(v)}")
        for m in self.sizes:
            est = None if before is None else estimated_size(before, m)
            if est is None:
                parts.append(f"|{m.key}| {number(m.value)}")
            elif not math.isclose(est, m.value, rel_tol=0.05):
                parts.append(f"|{m.key}| {number(est)} → {number(m.value)}")
        if len(parts) > limit:
            parts = parts[:limit] + [f"… {len(parts) - limit} more"]
        return "; ".join(parts) if parts else "no change beyond 5 %"


def estimated_size(workload: Workload, m: MeasuredSize) -> float | None:
    """The size ``workload`` gives the set of ``m`` (its own measured size, else the
    independence estimate); ``None`` where no query of it joins the set as ``m`` says."""
    from mqjoin.model.errors import WorkloadError
    from mqjoin.model.sizes import size_targets
    from mqjoin.planning.cost import join_size

    try:
        _, classes, selection = size_targets(m, {q.name: q for q in workload.queries})[0]
    except WorkloadError:
        return None
    return join_size(workload, m.relations, classes, selection)


def epoch_stats(sample: EpochSample, policy: AdaptivePolicy, relations: Iterable[str]) -> EpochStats:
    """Rates of ``relations`` and selectivities of the sampled pairs whose relations both had
    tuples (see the module doc)."""
    from mqjoin.model.statistics import PairEstimate

    n = dict(sample.tuples)
    rates = {r: max(n.get(r, 0), EMPTY_EPOCH_TUPLES) / policy.epoch for r in relations}
    pairs = {}
    for (a, b), m in sample.matches.items():
        nx, ny = n.get(a.relation, 0), n.get(b.relation, 0)
        if nx and ny:
            est = PairEstimate(a, b, min(1.0, m / (nx * ny)), 0.0, 0.0, 0.0, (nx, ny), (nx, ny), round(m))
            pairs[(a, b)] = min(1.0, est.written)
    return EpochStats(sample.epoch, n, rates, pairs)


def tracked_pairs(workload: Workload) -> tuple[tuple[Attr, Attr], ...]:
    """The equalities whose selectivities are sampled: every pair of members of every class."""
    out: dict[tuple[Attr, Attr], None] = {}
    for q in workload.queries:
        for c in q.classes:
            for p in iter_pairs(c.members):
                out[p] = None
    return tuple(out)
