"""Value partitioning for PMJoin: per-value rates from data and the ``D`` groups of join
values each of which gets its own placement (hash, range or the paper's rate-based grouping
by rank vectors, a k-means).

>>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1_VALUE_RATES
>>> g = partition_values(EXAMPLE_1_VALUE_RATES, 3, "rate")
>>> sorted(len(x) for x in g.groups)
[1, 1, 1]
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from mqjoin.model.errors import PlannerError
from mqjoin.model.tables import Table, bounds
from mqjoin.model.workload import Attr, Workload
from mqjoin.planners.pmjoin.streams import ValueRates, value_sort_key

METHODS = ("hash", "range", "rate")

# --------------------------------------------------------------------------------------------
# value partitioning
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueGroups:
    """``D`` groups of the values of one class (PMJoin's substream groups).  ``groups`` holds
    the values seen in the per-value rates; :meth:`group_of` also places unseen values (hash:
    their hash; range: the group of the largest seen value below them; rate: the first group).

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1_VALUE_RATES
    >>> g = partition_values(EXAMPLE_1_VALUE_RATES, 2, "range")
    >>> g.groups, g.group_of("b"), g.group_of("zz")
    ((('a', 'b'), ('c',)), 0, 1)
    """

    method: str
    count: int
    groups: tuple[tuple[Any, ...], ...]

    def group_of(self, value: Any) -> int:
        for i, g in enumerate(self.groups):
            if value in g:
                return i
        if self.method == "hash":
            return _hash(value, self.count)
        if self.method == "range":
            numeric = all(_is_number(v) for v in (value, *(g[0] for g in self.groups)))
            key = (lambda v: v) if numeric else value_sort_key
            return max([i for i, g in enumerate(self.groups) if key(g[0]) <= key(value)], default=0)
        return 0


def plain_value(v: Any) -> Any:
    """A join value as JSON can hold it (numbers, strings and booleans as they are, others as text).

    >>> import datetime
    >>> plain_value(3), plain_value("a"), plain_value(datetime.date(2026, 1, 2))
    (3, 'a', '2026-01-02')
    """
    return v if isinstance(v, (int, float, str, bool)) else str(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _hash(value: Any, count: int) -> int:
    """A stable hash bucket (Python's ``hash`` of strings changes between runs)."""
    return zlib.crc32(repr(value).encode()) % count


def rank_vector(rates: ValueRates, attrs: Iterable[Attr], value: Any) -> tuple[int, ...]:
    """The paper's ``V_k`` of one value: the position (1-based) of each stream's FStream in the
    FStreams sorted by increasing rate (ties: the order of ``attrs``).

    Sorted list ``⟨FS_3, FS_1, FS_2⟩`` gives ``V = ⟨2, 3, 1⟩``:

    >>> a = [Attr("S1", "x"), Attr("S2", "x"), Attr("S3", "x")]
    >>> rank_vector({a[0]: {7: 2.0}, a[1]: {7: 3.0}, a[2]: {7: 1.0}}, a, 7)
    (2, 3, 1)
    """
    attrs = list(attrs)
    by_rate = sorted(range(len(attrs)), key=lambda i: (rates[attrs[i]].get(value, 0.0), i))
    pos = {i: p + 1 for p, i in enumerate(by_rate)}
    return tuple(pos[i] for i in range(len(attrs)))


def _kmeans(points: Mapping[Any, tuple[int, ...]], weight: Mapping[Any, float], k: int) -> list[list[Any]]:
    """Lloyd's k-means over the values' rank vectors, deterministic: the first centre is the
    vector carrying the most tuples, each next one the distinct vector farthest from the
    centres so far (ties: more tuples, then value order)."""
    vectors: dict[tuple[int, ...], float] = {}
    for v, p in points.items():
        vectors[p] = vectors.get(p, 0.0) + weight[v]
    distinct = sorted(vectors, key=lambda p: (-vectors[p], p))
    centres = [tuple(float(x) for x in distinct[0])]

    def dist(p: tuple[float, ...], c: tuple[float, ...]) -> float:
        return math.dist(p, c)

    while len(centres) < min(k, len(distinct)):
        far = max(distinct, key=lambda p: (min(dist(p, c) for c in centres), vectors[p], tuple(-x for x in p)))
        centres.append(tuple(float(x) for x in far))
    values = sorted(points, key=value_sort_key)
    assign: dict[Any, int] = {}
    for _ in range(100):
        new = {v: min(range(len(centres)), key=lambda i: (dist(points[v], centres[i]), i)) for v in values}
        if new == assign:
            break
        assign = new
        for i in range(len(centres)):
            members = [points[v] for v in values if assign[v] == i]
            if members:
                centres[i] = tuple(sum(x) / len(members) for x in zip(*members))
    clusters = [[v for v in values if assign[v] == i] for i in range(len(centres))]
    return [c for c in clusters if c]


def check_partitioning(count: int, method: str) -> None:
    if method not in METHODS:
        raise PlannerError(f"unknown value partitioning {method!r} (choose one of {', '.join(METHODS)})")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PlannerError(f"the number of value groups must be a positive integer, got {count!r}")


def partition_values(rates: ValueRates, count: int, method: str = "rate",
                     attrs: Iterable[Attr] | None = None) -> ValueGroups:
    """Cluster the values of a class (its FStreams) into at most ``count`` groups:

    * ``hash`` — a stable hash of the value, modulo ``count`` (random partitioning);
    * ``range`` — ``count`` equal sub-ranges of the numeric value range (values that are not
      all numbers: equal runs of the sorted values);
    * ``rate`` — k-means over the values' rank vectors (:func:`rank_vector`): values whose
      streams rank alike are expected to have alike optimal plans.  Fewer distinct vectors
      than ``count`` give fewer groups (the paper's zero distances).

    Empty groups are dropped; groups are listed in order of their first value.

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1_VALUE_RATES
    >>> partition_values(EXAMPLE_1_VALUE_RATES, 2, "rate").groups
    (('a',), ('b', 'c'))
    >>> partition_values(EXAMPLE_1_VALUE_RATES, 3, "hash").groups
    (('a',), ('b', 'c'))
    """
    check_partitioning(count, method)
    attrs = tuple(attrs) if attrs is not None else tuple(sorted(rates))
    values = sorted({v for a in attrs for v in rates[a]}, key=value_sort_key)
    if not values:
        raise PlannerError(f"no values of {', '.join(map(str, attrs))} to partition: the per-value rates are empty")
    if method == "hash":
        buckets = [[v for v in values if _hash(v, count) == i] for i in range(count)]
    elif method == "range":
        if all(_is_number(v) for v in values):
            lo, hi = values[0], values[-1]
            width = (hi - lo) / count or 1.0
            buckets = [[v for v in values if min(int((v - lo) / width), count - 1) == i] for i in range(count)]
        else:
            buckets = [[v for j, v in enumerate(values) if j * count // len(values) == i] for i in range(count)]
    else:
        weight = {v: sum(rates[a].get(v, 0.0) for a in attrs) for v in values}
        buckets = _kmeans({v: rank_vector(rates, attrs, v) for v in values}, weight, count)
    groups = sorted((tuple(b) for b in buckets if b), key=lambda g: value_sort_key(g[0]))
    return ValueGroups(method, count, tuple(groups))


def value_rates(workload: Workload, tables: Mapping[str, Table],
                attrs: Iterable[Attr] | None = None) -> dict[Attr, dict[Any, float]]:
    """Per-value rates from data: ``λ_i^v = λ_i · n_v / n`` with ``λ_i`` estimated as
    ``mqjoin stats`` does (``(n − 1) / span``; the declared rate when the tuples span no time).
    ``attrs``: default every attribute of a join class; nulls join nothing and are left out.

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1
    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload(EXAMPLE_1)
    >>> t = Table.from_columns("S1", {"ts": [0, 1, 2, 3, 4], "dest": ["a", "c", "c", "c", None]})
    >>> value_rates(w, {"S1": t}, [Attr("S1", "dest")])
    {S1.dest: {'a': 0.2, 'c': 0.6}}
    """
    from mqjoin.model.statistics import RateEstimate

    if attrs is None:
        attrs = sorted({a for q in workload.queries for c in q.classes for a in c.members})
    out: dict[Attr, dict[Any, float]] = {}
    for a in attrs:
        t = tables[a.relation]
        est = RateEstimate(a.relation, len(t), *bounds(t.ts)).rate
        rate = workload.rate(a.relation) if est is None else est
        counts: dict[Any, int] = {}
        for v in t.columns[a.name]:
            if v is not None:
                counts[v] = counts.get(v, 0) + 1
        out[a] = {v: rate * n / len(t) for v, n in sorted(counts.items(), key=lambda kv: value_sort_key(kv[0]))}
    return out


def render_value_rates(rates: ValueRates, top: int = 5) -> str:
    """Per-value rates as text: per attribute, its number of values and the fastest ``top``.

    >>> from mqjoin.planners.pmjoin.streams import EXAMPLE_1_VALUE_RATES
    >>> print(render_value_rates(EXAMPLE_1_VALUE_RATES, top=2))
    rates per value (tuples/s):
      S1.dest: 3 values, total 100.2; c 100, a 0.1, …
      S2.dest: 3 values, total 50.07; b 50, c 0.04, …
      S3.dest: 3 values, total 50.03; a 50, c 0.02, …
    """
    lines = ["rates per value (tuples/s):"]
    for a in sorted(rates):
        per = rates[a]
        fastest = sorted(per.items(), key=lambda kv: (-kv[1], value_sort_key(kv[0])))[:top]
        shown = ", ".join(f"{v} {r:.6g}" for v, r in fastest) + (", …" if len(per) > top else "")
        lines.append(f"  {a}: {len(per)} values, total {sum(per.values()):.6g}; {shown}")
    return "\n".join(lines)


