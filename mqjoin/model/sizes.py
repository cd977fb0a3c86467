"""Measured join sizes (the ``sizes`` key of a workload): values, parsing and how a measured
size is matched to the relation sets, classes and filters the cost model asks about.

A measured size names a connected set of relations (``"lineitem ⋈ partsupp"``), optionally
under a query whose classes or filters it was measured with; it stands for that set's join
size in place of the independence estimate (docs/model.md §2).  A size is keyed by what it
measures — relations, the classes that join them, the selections applied — so the cost model
finds it whichever query asks, and an edit that changes how the queries join a set drops it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Protocol

from mqjoin.model.errors import (DisconnectedQueryError, SizeError, UnknownRelationError, ValueRangeError,
                                 WorkloadError, WorkloadSyntaxError)
from mqjoin.model.filters import Selection
from mqjoin.model.queries import IDENT_RE, Query, Relation, as_number
from mqjoin.model.schema import JoinClass, components, is_connected, restrict_classes


JOIN_SIGN = "⋈"


@dataclass(frozen=True)
class MeasuredSize:
    """A measured join size (docs/model.md §2): ``|⋈P|`` of the relation set ``relations`` in
    tuples per time unit, the unit of :func:`independent_size`.  ``query`` is ``None`` for a
    size of the unfiltered join, which every query joining ``P`` through the same classes
    uses, or the query whose own filters the size includes."""

    query: str | None
    relations: tuple[str, ...]  # in declaration order
    value: float
    #: the order of arrival: ``(relation, share)`` for every relation of the set, the share of
    #: the join's results whose last tuple to arrive is that relation's (summing to 1); empty
    #: when not measured — every relation equally likely, ``1/|P|`` (docs/model.md §2, §4)
    last: tuple[tuple[str, float], ...] = ()
    #: the relative standard error of ``value`` when it was measured on a sample of the data
    #: (``stats --sizes F``); 0 for an exact count.  Probe costs that differ by less than the
    #: error they carry are ties, broken towards less memory (docs/model.md §5)
    error: float = 0.0

    @property
    def key(self) -> str:
        """The set as the YAML writes it: ``"lineitem ⋈ partsupp"``."""
        return f" {JOIN_SIGN} ".join(self.relations)

    def share(self, relation: str) -> float:
        """The share of the results that ``relation``'s tuple completes (arrives last in).

        >>> m = MeasuredSize(None, ("R", "S"), 40.0, (("R", 0.9), ("S", 0.1)))
        >>> m.share("S"), MeasuredSize(None, ("R", "S", "T"), 40.0).share("S")
        (0.1, 0.3333333333333333)
        """
        return dict(self.last)[relation] if self.last else 1.0 / len(self.relations)

    @property
    def spec(self) -> float | dict[str, Any]:
        """The value as the YAML writes it: the size, or ``{size: …, error: …, last: {R: share, …}}``
        with the parts that are measured.

        >>> MeasuredSize(None, ("R", "S"), 40.0).spec, MeasuredSize(None, ("R", "S"), 40.0, error=0.02).spec
        (40.0, {'size': 40.0, 'error': 0.02})
        """
        if not (self.last or self.error):
            return self.value
        return {"size": self.value, **({"error": self.error} if self.error else {}),
                **({"last": dict(self.last)} if self.last else {})}

    def __str__(self) -> str:
        error = f" ± {self.error:.2%}" if self.error else ""
        last = f" (last: {', '.join(f'{r} {v:.3g}' for r, v in self.last)})" if self.last else ""
        return f"{self.query + ': ' if self.query else ''}{self.key} = {self.value:g}{error}{last}"


#: shares of an arrival split may miss summing to 1 by this much (rounding); they are rescaled
SHARE_TOLERANCE = 1e-3


def arrival_split(where: str, last: Any, relations: Iterable[str],
                  declared: Iterable[str]) -> tuple[tuple[str, float], ...]:
    """The ``last`` of a measured size of ``relations`` checked (docs/model.md §2): a mapping
    of every relation of the set to its share in ``[0, 1]``, the shares summing to 1 (rescaled
    to 1 when they miss it by more than float rounding); ordered as ``relations``.

    >>> arrival_split("sizes: 'R ⋈ S'", {"S": 0.25, "R": 0.75}, ("R", "S"), ("R", "S"))
    (('R', 0.75), ('S', 0.25))
    >>> arrival_split("sizes: 'R ⋈ S'", {"R": 0.5}, ("R", "S"), ("R", "S"))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.SizeError: sizes: 'R ⋈ S': last: no share for S; give every relation of the set the share of the
    results its tuple arrives last in (they sum to 1)
    """
    relations, declared = tuple(relations), tuple(declared)
    if not isinstance(last, Mapping):
        raise WorkloadSyntaxError(f"{where}: last must map each relation of the set to the share of the results "
                                  f"whose last tuple is that relation's, e.g. {{{relations[0]}: 0.5, …}}")
    shares = {}
    for r, v in last.items():
        r = str(r).strip()
        if r not in declared:
            raise UnknownRelationError(f"{where}: last: relation {r!r} is not declared (declared: "
                                       f"{', '.join(declared)})")
        if r not in relations:
            raise SizeError(f"{where}: last: {r} is not a relation of the set ({', '.join(relations)})")
        x = as_number(v, f"{where}: last: the share of {r}")
        if not 0 <= x <= 1:
            raise ValueRangeError(f"{where}: last: the share of {r} must be a fraction in [0, 1], got {v!r}")
        shares[r] = x
    missing = [r for r in relations if r not in shares]
    if missing:
        raise SizeError(f"{where}: last: no share for {', '.join(missing)}; give every relation of the set the share "
                        f"of the results its tuple arrives last in (they sum to 1)")
    total = sum(shares.values())
    if abs(total - 1) > SHARE_TOLERANCE:
        raise ValueRangeError(f"{where}: last: the shares sum to {total:g}; they are the shares of one join's results "
                              f"and must sum to 1")
    scale = total if abs(total - 1) > 1e-9 else 1.0  # written shares that sum to 1 stay as written
    return tuple((r, shares[r] / scale) for r in relations)


def size_key(relations: frozenset[str], classes: Iterable[JoinClass], selection: Iterable["Selection"]) -> tuple[Any,
                                                                                                                 ...]:
    """What a measured size is the size of: the relation set, the members of its classes
    inside the set (selectivities left out: an edit moves sizes, :meth:`Workload.respecified`)
    and the selections of its relations (without fractions)."""
    members = frozenset(kept for c in classes
                        if len(kept := tuple(a for a in c.members if a.relation in relations)) >= 2)
    return (relations, members, tuple(sorted(s.key for s in selection if s.relation in relations)))


def size_targets(m: MeasuredSize, queries: Mapping[str, Query]) -> list[tuple[tuple[Any, ...], tuple[JoinClass, ...],
                                                                              tuple["Selection", ...]]]:
    """The (look-up key, classes, selection) of every use of the measured size ``m``: the
    unfiltered join of its set in every query that joins the set connected (all alike), or the
    join under its query's own filters; a typed error when there is none or they differ."""
    rels = frozenset(m.relations)
    where = f"sizes: {m.query + ': ' if m.query else ''}{m.key!r}"
    if m.query is not None:
        if m.query not in queries:
            raise SizeError(f"{where} names query {m.query!r}, which does not exist "
                            f"(queries: {', '.join(queries) or 'none'})")
        pool = [queries[m.query]]
        lacking = sorted(rels - pool[0].relation_set)
        if lacking:
            raise SizeError(f"{where}: query {m.query} does not join {', '.join(lacking)} "
                            f"(it joins {', '.join(pool[0].relations)})")
    else:
        pool = [q for q in queries.values() if rels <= q.relation_set]
        if not pool:
            raise SizeError(f"{where}: no query joins all of {', '.join(m.relations)}; give sizes of "
                            f"sets that some query joins")
    out = []
    for q in pool:
        classes = restrict_classes(q.classes, rels)
        if not is_connected(rels, classes):
            continue
        selection = () if m.query is None else tuple(
            Selection.union([f]) for r in sorted(rels) if (f := q.filter_of(r)) is not None)
        out.append((size_key(rels, classes, selection), classes, selection))
    if not out:
        comps = components(rels, restrict_classes(pool[0].classes, rels))
        raise DisconnectedQueryError(
            f"{where}: the set is not connected in {'query ' + m.query if m.query else 'any query that joins it'} "
            f"({' and '.join('{' + ', '.join(c) + '}' for c in comps)} share no join attribute); a size is "
            f"given for a connected set (an MIR or a probe-order prefix)")
    if len({k for k, _, _ in out}) > 1:
        names = [q.name for q in pool if is_connected(rels, restrict_classes(q.classes, rels))]
        raise SizeError(f"{where}: queries {', '.join(names)} join these relations through different "
                        f"classes, so the set has no one size; give it per query "
                        f"(sizes: {{{names[0]}: {{{m.key}: …}}}})")
    return out


def rehome(m: MeasuredSize, old: Mapping[str, Query], new: Mapping[str, Query]) -> MeasuredSize | None:
    """``m`` for the queries ``new`` (an edit's): as it is when it still applies to them; a
    per-query size whose query is gone moves to a remaining query that joins its set the same
    way (same classes and filters), as the look-up would have found it there; ``None`` when
    no query of ``new`` joins the set as the old ones did."""
    try:
        key = size_targets(m, old)[0][0]
    except WorkloadError:
        return None
    candidates = [m] if m.query is None or m.query in new else [replace(m, query=q) for q in new]
    for c in candidates:
        try:
            if any(k == key for k, _, _ in size_targets(c, new)):
                return c
        except WorkloadError:
            continue
    return None


def resolve_sizes(entries: Iterable[MeasuredSize], queries: Iterable[Query],
                   strict: bool) -> tuple[tuple[MeasuredSize, ...], dict[tuple[Any, ...], MeasuredSize]]:
    """The measured sizes that apply to ``queries`` (sorted) and their look-up table (key →
    measured size).  ``strict``: a size that does not apply, or contradicts another, is a typed error;
    otherwise it is left out (an edit removed or changed the queries that joined its set)."""
    by_name = {q.name: q for q in queries}
    kept: list[MeasuredSize] = []
    lookup: dict[tuple[Any, ...], MeasuredSize] = {}
    for m in entries:
        try:
            keys = [k for k, _, _ in size_targets(m, by_name)]
            for k in keys:
                if k in lookup and not math.isclose(lookup[k].value, m.value, rel_tol=1e-9):
                    raise SizeError(f"sizes: {lookup[k]} and {m} give one join different sizes; keep one")
        except WorkloadError:
            if strict:
                raise
            continue
        kept.append(m)
        for k in keys:
            lookup.setdefault(k, m)
    kept.sort(key=lambda m: (m.query or "", len(m.relations), m.relations))
    return tuple(kept), lookup


def size_entries(spec: Mapping[str, Any], relations: Mapping[str, Relation]) -> list[MeasuredSize]:
    """``sizes: {"R ⋈ S": 40, q3: {"R ⋈ S": 12}, "S ⋈ T": {size: 8, last: {S: 0.9, T: 0.1}}}``
    → measured sizes, each read strictly."""
    out = []
    for key, value in spec.items():
        key = str(key)
        if isinstance(value, Mapping) and not _is_set_key(key):
            if not IDENT_RE.match(key.strip()):
                raise WorkloadSyntaxError(f"sizes: {key!r} maps to sizes, so it must be a query name; write "
                                          f"sizes of relation sets as 'R {JOIN_SIGN} S: <tuples per time unit>'")
            out += [_size_entry(str(k), v, key.strip(), relations) for k, v in value.items()]
        else:
            out.append(_size_entry(key, value, None, relations))
    return out


def _is_set_key(key: str) -> bool:
    return JOIN_SIGN in key or "," in key


#: the keys of a size given with its error or order of arrival
_SIZE_KEYS = ("size", "error", "last")


def size_error(where: str, error: Any) -> float:
    """The ``error`` of a measured size checked (docs/model.md §2): its relative standard error,
    a finite number ≥ 0 (0: counted exactly).

    >>> size_error("sizes: 'R ⋈ S'", 0.015)
    0.015
    >>> size_error("sizes: 'R ⋈ S'", -0.1)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.ValueRangeError: sizes: 'R ⋈ S': error: the relative standard error of the size must be a finite
    number ≥ 0 (0.02 for 2 %; 0 when counted exactly), got -0.1
    """
    x = as_number(error, f"{where}: error")
    if not (x >= 0) or math.isinf(x):
        raise ValueRangeError(f"{where}: error: the relative standard error of the size must be a finite number "
                              f"≥ 0 (0.02 for 2 %; 0 when counted exactly), got {error!r}")
    return x


def _size_entry(key: str, value: Any, query: str | None, relations: Mapping[str, Relation]) -> MeasuredSize:
    where = f"sizes: {query + ': ' if query else ''}{key!r}"
    last: Any = None
    error = 0.0
    if isinstance(value, Mapping):
        for k in value:
            if k not in _SIZE_KEYS:
                raise WorkloadSyntaxError(f"{where}: unknown key {k!r} (a size is a number, or {{size: <tuples per "
                                          "time unit>, error: <relative standard error>, last: {relation: share, "
                                          "…}})")
        if "size" not in value:
            raise WorkloadSyntaxError(f"{where}: no size; write {{size: <tuples per time unit>, error: …, last: …}}")
        if "error" in value:
            error = size_error(where, value["error"])
        value, last = value["size"], value.get("last")
    names = [n.strip() for n in re.split(rf"{JOIN_SIGN}|,", key)]
    if any(not IDENT_RE.match(n) for n in names):
        raise WorkloadSyntaxError(f"{where} is not a relation set like 'lineitem {JOIN_SIGN} partsupp' "
                                  f"(relation names joined by {JOIN_SIGN} or ',')")
    if len(names) < 2:
        raise WorkloadSyntaxError(
            f"{where} names one relation: a size is given for a join of two or more relations (one relation's "
            f"size is its rate)" if names[0] in relations else
            f"{where} is not a relation set like 'R {JOIN_SIGN} S'" + ("" if query else
                                                                       f"; per query, write '{names[0]}: {{R "
                                                                       f"{JOIN_SIGN} S: …}}'"))
    for n in names:
        if n not in relations:
            raise UnknownRelationError(f"{where}: relation {n!r} is not declared (declared: {', '.join(relations)})")
    if len(set(names)) != len(names):
        raise WorkloadSyntaxError(f"{where} names a relation twice")
    v = as_number(value, f"{where}: the size")
    if not (v > 0) or math.isinf(v):
        raise ValueRangeError(f"{where}: the size must be a positive finite number of tuples per time unit, "
                              f"got {value!r}")
    order = list(relations)
    names = sorted(names, key=order.index)
    split = () if last is None else arrival_split(where, last, names, order)
    return MeasuredSize(query, tuple(names), v, split, error)


class Rates(Protocol):
    """What the independence estimate reads of a workload: each relation's rate."""

    def rate(self, relation: str) -> float: ...


def independent_size(workload: Rates, relations: Iterable[str], classes: Iterable[JoinClass],
                     selection: Iterable["Selection"] = ()) -> float:
    """The independence estimate ``|⋈P| = Π f_R · λ_R · Π s_c^(k_c(P) − 1)`` over the classes
    with ``k_c(P) ≥ 2`` (docs/model.md §2, §7): ``f_R`` the pass fraction of ``R``'s selection,
    1 for an unfiltered relation.  :func:`mqjoin.planning.cost.join_size` uses it where no
    size is measured.

    >>> from mqjoin.model.workload import Workload
    >>> w = Workload.build({"R": {"attributes": ["a"], "rate": 10}, "S": {"attributes": ["a"], "rate": 20}},
    ...                    {"q": "R(a), S(a)"}, {"R.a = S.a": 0.1})
    >>> independent_size(w, {"R", "S"}, w.query("q").classes)
    20.0
    """
    rels = frozenset(relations)
    size = 1.0
    for r in sorted(rels):
        size *= workload.rate(r)
    for sel in selection:
        if sel.relation in rels:
            size *= sel.fraction
    for c in classes:
        k = c.count_in(rels)
        if k >= 2:
            size *= c.selectivity ** (k - 1)
    return size
