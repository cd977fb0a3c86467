"""Join sizes measured from data: the ``sizes`` of a workload (docs/model.md §2).

The cost model's independence estimate ``Π λ · Π s`` is exact for uniform, independent join
values and far off for foreign keys: on TPC-H, lineitem ⋈ partsupp holds one row per lineitem
where the estimate says 0.7 % of that.  :func:`measure_sizes` counts ``|⋈P|`` on the data
for every connected set ``P`` the optimiser asks about — every MIR and probe-order prefix of
:func:`mqjoin.planning.candidates.enumerate_candidates`, and every query's whole join — and
:func:`mqjoin.datasets.stats.Statistics.apply` writes them under ``sizes``.

**Counting without materialising.**  A join's size needs only counts per join value: each
relation is reduced to its grouped counts over its join columns (after its filter), then the
relations are joined one at a time on the classes they share, in the order whose estimated
frames are smallest; after each join the frame is summed over every class no relation still to come needs.
The frames hold distinct combinations of open join values with a count, never join results.

**Correlated sampling** (``fraction < 1``).  One class of ``P`` is sampled: the class with
the most distinct values in its largest relation, at ``fraction`` or at the share that keeps
:data:`MIN_SAMPLED_VALUES` of its values when that is more (few values sample coarsely; a class of
fewer values is counted exactly).  A join value is kept when its hash
falls below that share (:mod:`mqjoin.support.valuesample`, the same values in every relation), so a join result
survives with probability ``fraction`` exactly and ``count / fraction`` is unbiased. With ``w_v`` the join results of
value ``v``, ``Var = (1 − F)/F · Σ_v w_v²``, estimated from the sampled values as ``(1 − F)/F² · Σ_sampled w_v²``; the
95 % interval is ``± 1.96 · SE`` (cut at 0), and a set with fewer than 10 sampled values of the class is flagged (the
normal interval is then unreliable).  A sample with no result gives ``0`` with the interval ``[0, 3/F]`` results (rule
of three on values).

**Order of arrival.**  A probe order from ``X`` ships out of a prefix ``P`` the results of
``⋈P`` whose last tuple to arrive is ``X``'s (docs/model.md §2, §4); the model takes each
relation as equally likely, ``1/|P|``, which streams arriving in key order break (TPC-H's
partsupp rows right after their part: partsupp completes every part ⋈ partsupp result).  The
join results themselves are needed here, not counts: the relations' rows are joined on the
same sample of join values, each with its place in the order of arrival (docs/model.md §6),
keeping per partial result the latest place and whose it is; beyond
:data:`ORDER_RESULTS` results a uniform sample of them (rows of the largest relation, each in
one result, and partial results thinned alike).  The standard error of a share treats the
values of the sampled class as clusters (results of one value arrive together).  A set's
shares are written (``last``) only where one departs from ``1/|P|`` by more than
:data:`ORDER_DEPARTURE` of it and :data:`ORDER_Z` standard errors, on the results of at least
:data:`FEW_VALUES` values: independent data keeps the model's ``1/|P|``.

**Units.**  A count over the data becomes a size in the workload's unit (tuples per time
unit, the unit of ``Π λ · Π s``) as ``count · Π_R λ_R / n_R`` (``n_R`` the rows of ``R``,
``λ_R`` its rate): over independent data it agrees with the estimate, and a plan's
predicted messages over a span ``S`` (``cost · S^k``) become the data's counts.  A set
without a result is written as one result (a size must be positive).

>>> from mqjoin.model.tables import Table
>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 4}, S: {attributes: [a], rate: 2}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.25}''')
>>> t = {"R": Table.from_columns("R", {"ts": [0, 1, 2, 3], "a": [1, 1, 2, 3]}),
...      "S": Table.from_columns("S", {"ts": [0, 1], "a": [1, 1]})}
>>> [m.describe() for m in measure_sizes(w, t)]  # doctest: +NORMALIZE_WHITESPACE
['R ⋈ S: 4 results → 4 per time unit (exact; 2× the independence estimate 2); arriving last: R 0.250 ± 0.000, S 0.750 ±
0.000 (results of 1 join value: too few to tell, not written)']
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mqjoin.model.errors import DataError
from mqjoin.model.filters import Filter, Selection
from mqjoin.model.tables import Table
from mqjoin.model.sizes import independent_size
from mqjoin.model.workload import Attr, JoinClass, Query, Workload, is_connected, restrict_classes
from mqjoin.model.sizes import JOIN_SIGN
from mqjoin.support.valuesample import sampled_mask

#: z-value of the two-sided 95 % normal interval
Z95 = 1.959963984540054
#: fewer sampled join values than this make the normal interval unreliable
FEW_VALUES = 10
#: a sampled class keeps at least this many of its values: its share is raised to keep them,
#: and a class of fewer values is counted exactly (a class of few values — TPC-H's 10,000
#: suppliers at SF 1 — samples too coarsely, and its counts are cheap)
MIN_SAMPLED_VALUES = 1000
#: join results materialised to measure a set's order of arrival; beyond, a uniform sample
ORDER_RESULTS = 100_000
#: an order of arrival is written when a relation's share departs from ``1/|P|`` by more than
#: this fraction of it and by more than :data:`ORDER_Z` standard errors (else ``1/|P|`` stands)
ORDER_DEPARTURE = 0.1
ORDER_Z = 3.0


@dataclass(frozen=True)
class SizeEstimate:
    """The measured size of one relation set (of one query's filtered join when ``query``
    is set), in results over the data (``count``) and per time unit (``value``)."""

    query: str | None
    relations: tuple[str, ...]
    count: float  # results over the data (scaled up from the sample)
    value: float  # tuples per time unit, what is written
    stderr: float  # of value
    low: float
    high: float
    fraction: float  # share of join values sampled (1: exact)
    sampled_on: str  # the sampled class, '' when exact
    values: int  # sampled values of that class with a result
    estimate: float  # the independence estimate of the same join
    #: the order of arrival as measured: (relation, share of the results it completes, standard error)
    arrival: tuple[tuple[str, float, float], ...] = ()
    #: values (of the sampled class, else the one with most values) among the results it was measured on
    arrival_values: int = 0

    @property
    def last(self) -> tuple[tuple[str, float], ...]:
        """The order of arrival to write (docs/model.md §2): the measured shares when one departs
        from ``1/|P|`` beyond :data:`ORDER_DEPARTURE` and :data:`ORDER_Z` standard errors, on
        results of at least :data:`FEW_VALUES` join values, else empty (each relation equally
        likely to arrive last, as the model assumes without one)."""
        k = len(self.relations)
        if self.arrival_values >= FEW_VALUES and any(abs(o * k - 1) > ORDER_DEPARTURE and abs(o - 1 / k) > ORDER_Z * se
                                                     for _, o, se in self.arrival):
            return tuple((r, o) for r, o, _ in self.arrival)
        return ()

    @property
    def error(self) -> float:
        """The relative standard error written beside the size (``error:``, docs/model.md §2):
        0 when counted exactly; a sample without a result, written as one result, takes the
        standard error of its rule-of-three bound (``high / 1.96``).

        >>> SizeEstimate(None, ("R", "S"), 200, 20.0, 1.0, 18.0, 22.0, 0.1, "R.a=S.a", 50, 5.0).error
        0.05
        """
        if self.exact:
            return 0.0
        return (self.stderr if self.count > 0 else self.high / Z95) / self.value

    @property
    def exact(self) -> bool:
        """Counted on all the data (no sample asked, or a class too small to sample)."""
        return self.fraction >= 1 or not self.sampled_on

    @property
    def key(self) -> str:
        return f" {JOIN_SIGN} ".join(self.relations)

    @property
    def few_values(self) -> bool:
        return not self.exact and self.values < FEW_VALUES

    @property
    def ratio(self) -> float:
        """Measured / independence estimate."""
        return self.value / self.estimate if self.estimate > 0 else math.inf

    def describe(self) -> str:
        how = "exact" if self.exact else (
            f"± {self.stderr:.3g} (95 % [{self.low:.4g}, {self.high:.4g}]), {self.fraction:.0%} of the values of "
            f"{self.sampled_on}"
            + (f"; only {self.values} sampled values: interval unreliable" if self.few_values else ""))
        order = ""
        if self.arrival:
            shares = ", ".join(f"{r} {o:.3f} ± {se:.3f}" for r, o, se in self.arrival)
            order = f"; arriving last: {shares}" + ("" if self.last else (
                f" (results of {self.arrival_values} join value{'s' if self.arrival_values != 1 else ''}: too few "
                f"to tell, not written)"
                if self.arrival_values < FEW_VALUES else f" (within error of 1/{len(self.relations)}: not written)"))
        return (f"{self.query + ': ' if self.query else ''}{self.key}: {self.count:,.0f} results → {self.value:.6g} "
                f"per time unit ({how}; {self.ratio:.3g}× the independence estimate {self.estimate:.6g}){order}")


def _check_fraction(fraction: float) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (0 < fraction <= 1):
        raise DataError(f"the sample of join values must be a fraction in (0, 1] (1: exact counts), got {fraction!r}")
    return float(fraction)


def _column(table: Table, name: str) -> np.ndarray:
    """A column as numpy (numbers as numbers, anything else as objects; nulls as NaN / None)."""
    col = table.columns[name]
    try:
        a = np.asarray(col)
    except (TypeError, ValueError):  # pragma: no cover  (ragged values)
        a = np.asarray(col, dtype=object)
    if a.dtype.kind not in "iufb":
        a = np.asarray(col, dtype=object)
        nums = [v for v in col if v is not None]
        if nums and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums):
            a = np.array([np.nan if v is None else v for v in col], dtype=float)
    return a


def _filter_mask(f: Filter | None, table: Table) -> np.ndarray:
    """Which rows of ``table`` pass ``f`` (all when ``None``)."""
    if f is None:
        return np.ones(len(table), dtype=bool)
    names = sorted({c.attr.name for c in f.comparisons})
    table.require(names)
    cols = [table.columns[a] for a in names]
    return np.fromiter((f.passes(dict(zip(names, row))) for row in zip(*cols)), dtype=bool, count=len(table))


class _Counter:
    """Grouped counts of the relations (cached per relation, columns, filter and sample) and
    the variable-elimination join of :func:`measure_sizes`."""

    def __init__(self, tables: Mapping[str, Table], fraction: float, rank: Mapping[str, int] | None = None):
        self.tables, self.fraction = tables, fraction
        self.rank = dict(rank or {r: i for i, r in enumerate(tables)})
        self.columns: dict[tuple[str, str], np.ndarray] = {}
        self.frames: dict[tuple, Any] = {}
        self.distincts: dict[Any, int] = {}
        self._positions: dict[str, np.ndarray] | None = None

    def positions(self, relation: str) -> np.ndarray:
        """Every row's place in the order of arrival of all the inputs (docs/model.md §6: by
        ``ts``, then the relation's declaration rank, then the row index)."""
        if self._positions is None:
            names = sorted((r for r in self.tables if r in self.rank), key=self.rank.__getitem__)
            ts = np.concatenate([np.asarray(self.tables[r].ts, dtype=float) for r in names] or [np.zeros(0)])
            rank = np.concatenate([np.full(len(self.tables[r]), self.rank[r]) for r in names] or [np.zeros(0)])
            row = np.concatenate([np.arange(len(self.tables[r])) for r in names] or [np.zeros(0)])
            pos = np.empty(len(ts), dtype=np.int64)
            pos[np.lexsort((row, rank, ts))] = np.arange(len(ts))
            bounds = np.cumsum([0] + [len(self.tables[r]) for r in names])
            self._positions = {r: pos[bounds[i]:bounds[i + 1]] for i, r in enumerate(names)}
        return self._positions[relation]

    def column(self, relation: str, name: str) -> np.ndarray:
        if (relation, name) not in self.columns:
            if relation not in self.tables:
                raise DataError(f"no input for relation {relation}, whose join sizes are measured")
            self.tables[relation].require([name])
            self.columns[relation, name] = _column(self.tables[relation], name)
        return self.columns[relation, name]

    def distinct(self, attr: Attr) -> int:
        """Distinct non-null values of a column."""
        import pandas as pd

        if attr not in self.distincts:
            self.distincts[attr] = int(pd.Series(self.column(attr.relation, attr.name)).nunique())
        return self.distincts[attr]

    def sample_class(self, classes: Sequence[JoinClass]) -> tuple[int, float] | None:
        """The class to sample (its index) and the share of its values to keep: the class with
        the most distinct values in the relation that has most rows among its members, at
        ``fraction`` or at the share that keeps :data:`MIN_SAMPLED_VALUES` values when that is
        more; ``None`` (count exactly) when that share would be all of them."""
        best = self.best_class(classes)
        big = max(classes[best].members, key=lambda a: (len(self.tables[a.relation]), a))
        share = max(self.fraction, MIN_SAMPLED_VALUES / max(self.distinct(big), 1))
        return (best, share) if share < 1 else None

    def grouped(self, relation: str, attrs: Sequence[tuple[str, str]], f: Filter | None, sample: str | None,
                share: float = 1.0):
        """``relation``'s counts per combination of join values: ``attrs`` = (frame column,
        attribute) pairs; rows failing ``f``, with a null join value or (``sample``: the
        frame column sampled, ``share`` of its values kept) a value outside the sample are left out."""
        import pandas as pd

        key = (relation, tuple(attrs), None if f is None else f.comparisons, sample, share if sample else None)
        if key not in self.frames:
            mask = _filter_mask(f, self.tables[relation])
            data = {}
            for col, att in attrs:
                a = self.column(relation, att)
                mask &= ~pd.isna(a)
                if col == sample:
                    mask &= sampled_mask(a, share)
                data[col] = a
            frame = pd.DataFrame({c: a[mask] for c, a in data.items()})
            self.frames[key] = frame.groupby(list(frame.columns), sort=False).size().rename("n").reset_index()
        return self.frames[key]

    def count(self, rels: Sequence[str], classes: Sequence[JoinClass], filters: Mapping[str, Filter],
              sample: tuple[int, float] | None) -> tuple[float, float, int]:
        """(results, Σ_v w_v² over the sampled class's values, values with a result) of the join;
        ``sample``: the class sampled and the share of its values kept (:meth:`sample_class`)."""
        import pandas as pd

        cols = {c: f"c{i}" for i, c in enumerate(classes)}
        attrs = {r: [(cols[c], a.name) for c in classes for a in c.members if a.relation == r] for r in rels}
        scol = None if sample is None else cols[classes[sample[0]]]
        share = 1.0 if sample is None else sample[1]
        frames = {r: self.grouped(r, attrs[r], filters.get(r), scol if any(c == scol for c, _ in attrs[r]) else None,
                                  share)
                  for r in rels}
        order = _join_order(rels, {r: {c for c, _ in attrs[r]} for r in rels}, frames, scol)
        todo = set(order[1:])
        frame = frames[order[0]]
        for nxt in order[1:]:
            have = set(frame.columns) - {"n"}
            todo.discard(nxt)
            on = sorted(have & {c for c, _ in attrs[nxt]})
            frame = frame.merge(frames[nxt], on=on, suffixes=("", "_r"))
            frame["n"] = frame["n"] * frame["n_r"]
            need = {c for r in todo for c, _ in attrs[r]} | ({scol} if scol else set())
            keep = [c for c in frame.columns if c in need]
            frame = (frame.groupby(keep, sort=False)["n"].sum().reset_index() if keep
                     else pd.DataFrame({"n": [frame["n"].sum()]}))
        total = float(frame["n"].sum())
        if scol is None:
            return total, 0.0, 0
        w = frame.groupby(scol, sort=False)["n"].sum().to_numpy(dtype=float) if len(frame) else np.zeros(0)
        return total, float((w * w).sum()), int((w > 0).sum())


    def arrival(self, rels: Sequence[str], classes: Sequence[JoinClass], filters: Mapping[str, Filter],
                sample: tuple[int, float] | None, total: float) -> tuple[tuple[tuple[str, float, float], ...], int]:
        """Which relation's tuple arrives last in the join's ``total`` results (as :meth:`count`
        counted them): per relation its share and standard error, on the results themselves
        (the sample's, when ``sample`` is set; at
        most about :data:`ORDER_RESULTS` of them, a uniform sample beyond).  The standard error
        treats the values of one class (the sampled one, else the one with most values) as
        clusters: results of one value arrive together; it returns the number of values too."""
        import pandas as pd

        if total <= 0:
            return (), 0
        cols = {c: f"c{i}" for i, c in enumerate(classes)}
        attrs = {r: [(cols[c], a.name) for c in classes for a in c.members if a.relation == r] for r in rels}
        scol = None if sample is None else cols[classes[sample[0]]]
        cluster = scol or cols[classes[self.best_class(classes)]]
        rng = np.random.default_rng(0)
        thin = min(1.0, ORDER_RESULTS / total)
        big = max(rels, key=lambda r: (len(self.tables[r]), r))  # every result holds one of its rows
        frames = {}
        for r in rels:
            mask = _filter_mask(filters.get(r), self.tables[r])
            data = {}
            for col, att in attrs[r]:
                a = self.column(r, att)
                mask &= ~pd.isna(a)
                if col == scol:
                    mask &= sampled_mask(a, sample[1])
                data[col] = a
            if r == big and thin < 1:
                mask &= rng.random(len(mask)) < thin
            frames[r] = pd.DataFrame({**{c: a[mask] for c, a in data.items()}, "t": self.positions(r)[mask]})
        order = _join_order(rels, {r: {c for c, _ in attrs[r]} for r in rels}, frames, cluster)
        index = {r: i for i, r in enumerate(rels)}
        frame = frames[order[0]].rename(columns={"t": "last_t"})
        frame["who"] = index[order[0]]
        todo = set(order[1:])
        for nxt in order[1:]:
            todo.discard(nxt)
            on = sorted((set(frame.columns) - {"last_t", "who"}) & {c for c, _ in attrs[nxt]})
            frame = frame.merge(frames[nxt], on=on)
            t, last = frame["t"].to_numpy(), frame["last_t"].to_numpy()
            frame["who"] = np.where(t > last, index[nxt], frame["who"].to_numpy())
            frame["last_t"] = np.maximum(t, last)
            need = {c for r in todo for c, _ in attrs[r]} | {cluster}
            frame = frame[[c for c in frame.columns if c in need] + ["last_t", "who"]]
            if len(frame) > 4 * ORDER_RESULTS:  # partial results thinned alike: the results stay a uniform sample
                frame = frame[rng.random(len(frame)) < 4 * ORDER_RESULTS / len(frame)]
        n = len(frame)
        if n == 0:
            return (), 0
        per = frame.groupby([cluster, "who"], sort=False).size().unstack(fill_value=0)
        sizes = per.sum(axis=1).to_numpy(dtype=float)
        out = []
        for r in rels:
            a = per[index[r]].to_numpy(dtype=float) if index[r] in per.columns else np.zeros(len(per))
            share = a.sum() / n
            out.append((r, float(share), float(math.sqrt(((a - share * sizes) ** 2).sum()) / n)))
        return tuple(out), len(per)

    def best_class(self, classes: Sequence[JoinClass]) -> int:
        """The class with the most distinct values in its largest relation (the one to sample)."""
        def values(c: JoinClass) -> int:
            big = max(c.members, key=lambda a: (len(self.tables[a.relation]), a))
            return self.distinct(big)

        return max(range(len(classes)), key=lambda i: (values(classes[i]), -i))


def _join_order(rels: Sequence[str], cols: Mapping[str, set[str]], frames: Mapping[str, Any],
                scol: str | None) -> list[str]:
    """The order to join ``rels``' grouped counts in: from every start, greedily the connected
    relation whose join with the frame is estimated smallest (sizes over distinct values of
    the shared columns, the frame summed down to the columns still needed); the order whose
    estimated frames add up smallest.  Cyclic joins (customers and suppliers of one nation)
    otherwise blow up an early frame."""
    distinct: dict[str, int] = {}
    for r in rels:
        for c in cols[r]:
            distinct[c] = max(distinct.get(c, 1), int(frames[r][c].nunique()) if len(frames[r]) else 1)
    best: tuple[float, list[str]] | None = None
    for start in sorted(rels):
        size, have, order, work = float(len(frames[start])), set(cols[start]), [start], float(len(frames[start]))
        while len(order) < len(rels):
            options = []
            for r in sorted(set(rels) - set(order)):
                shared = have & cols[r]
                if shared:
                    est = size * len(frames[r]) / math.prod(distinct[c] for c in shared)
                    options.append((est, r))
            est, r = min(options)
            order.append(r)
            have |= cols[r]
            need = {c for x in rels if x not in order for c in cols[x]} | ({scol} if scol else set())
            have = {c for c in have if c in need}
            size = min(est, math.prod(distinct[c] for c in have)) if have else 1.0
            work += est
        if best is None or work < best[0]:
            best = (work, order)
    return best[1]


def size_sets(workload: Workload) -> list[frozenset[str]]:
    """The relation sets whose sizes the optimiser uses: every MIR (store) and probe-order
    prefix of two or more relations of the candidates, and every query's relations."""
    from mqjoin.planning.candidates import enumerate_candidates

    cands = enumerate_candidates(workload)
    sets = {m.relation_set for m in cands.mirs if not m.is_base}
    sets |= {s.prefix_relations for s in cands.step_cost if len(s.prefix_relations) > 1}
    sets |= {q.relation_set for q in workload.queries}
    return sorted(sets, key=lambda s: (len(s), sorted(s)))


def _joins(workload: Workload, sets: Iterable[frozenset[str]]) -> list[tuple[str | None, Query, frozenset[str]]]:
    """Which joins to measure: ``(None, q, P)`` for the unfiltered join of ``P`` (one
    representative query ``q``) when every query that joins ``P`` connected does so through
    the same classes, else ``(q, q, P)`` per distinct way of joining it; and ``(q, q, P)``
    per distinct filtered join of ``P`` (with ``q``'s own filters)."""
    out: list[tuple[str | None, Query, frozenset[str]]] = []
    for rels in sets:
        shape = {q.name: tuple(c.members for c in restrict_classes(q.classes, rels)) for q in workload.queries
                 if rels <= q.relation_set and is_connected(rels, restrict_classes(q.classes, rels))}
        users = [q for q in workload.queries if q.name in shape]
        if not users:
            continue
        one = len(set(shape.values())) == 1
        if one:
            out.append((None, users[0], rels))
        seen = set()
        for q in users:
            filters = tuple((r, f.comparisons) for r in sorted(rels) if (f := q.filter_of(r)) is not None)
            if (one and not filters) or (filters, shape[q.name]) in seen:
                continue
            seen.add((filters, shape[q.name]))
            out.append((q.name, q, rels))
    return out


def measure_sizes(workload: Workload, tables: Mapping[str, Table], fraction: float = 1.0,
                  sets: Iterable[frozenset[str]] | None = None) -> tuple[SizeEstimate, ...]:
    """The measured size of every join of :func:`size_sets` (or of ``sets``) over ``tables``,
    exactly or (``fraction < 1``) on a correlated sample of that share of join values, in the
    unit of ``workload``'s rates (give it the rates estimated from the same data)."""
    fraction = _check_fraction(fraction)
    counter = _Counter(tables, fraction, workload.relation_rank)
    out = []
    for scope, q, rels in _joins(workload, size_sets(workload) if sets is None else sets):
        order = [r.name for r in workload.relations if r.name in rels]
        classes = restrict_classes(q.classes, rels)
        filters = {} if scope is None else {r: f for r in order if (f := q.filter_of(r)) is not None}
        sample = counter.sample_class(classes) if fraction < 1 else None
        total, w2, values = counter.count(order, classes, filters, sample)
        arrival, clusters = counter.arrival(order, classes, filters, sample, total)
        unit = math.prod(workload.rate(r) / max(len(tables[r]), 1) for r in order)
        f = sample[1] if sample is not None else 1.0
        count = total / f
        se = math.sqrt((1 - f) / f ** 2 * w2)
        if f < 1 and total == 0:
            low, high = 0.0, 3.0 / f
        else:
            low, high = max(0.0, count - Z95 * se), count + Z95 * se
        estimate = independent_size(workload, rels, classes, tuple(Selection.union([f]) for f in filters.values()))
        sampled = "" if sample is None else "=".join(map(str, classes[sample[0]].members))
        out.append(SizeEstimate(scope, tuple(order), count, max(count, 1.0) * unit, se * unit, low * unit,
                                high * unit, f, sampled, values, estimate, arrival, clusters))
    return tuple(out)
