"""Relations and queries: the value types a workload is made of, and how a query's text — paper
notation ``R(a), S(a,b), T(b)`` or equalities ``R.a = S.a AND S.b = T.b`` — resolves into
equivalence classes with their selectivities and filters.

Resolution merges the equalities with a union–find: attributes of one class are equal, a class
holds at most one attribute per relation, and a query must be connected.  A class's selectivity
comes from the workload's ``selectivities`` (one value per class; linked pairs of one class must
agree) or from ``defaults.selectivity``.  Every error names the query and the attribute at fault.

>>> rels = {n: Relation(n, attrs, 100.0, None, 1) for n, attrs in (("R", ("a",)), ("S", ("a", "b")), ("T", ("b",)))}
>>> q = resolve_query("q", "R(a), S(a,b), T(b)", rels, {}, Defaults(selectivity=0.01))
>>> q, q.classes
(Query(q: R(a), S(a,b), T(b)), ({R.a=S.a}, {S.b=T.b}))
>>> resolve_query("q", "R(a), T(b)", rels, {}, Defaults(selectivity=0.01))  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
mqjoin.model.errors.WorkloadSyntaxError: query q: attribute 'a' is listed only for R, so it joins with nothing; remove
it or list it for another relation too
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from mqjoin.model.errors import (
    DisconnectedQueryError,
    FilterError,
    MissingSelectivityError,
    SelectivityError,
    SelfJoinError,
    UnknownAttributeError,
    UnknownRelationError,
    ValueRangeError,
    WorkloadSyntaxError,
)
from mqjoin.model.filters import Filter, parse_where
from mqjoin.model.schema import Attr, JoinClass, components, is_connected, iter_pairs
from mqjoin.support.unionfind import UnionFind

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
IDENT_RE = re.compile(rf"^{IDENT}$")


@dataclass(frozen=True)
class Relation:
    """A streamed input relation with its statistics."""

    name: str
    attributes: tuple[str, ...]
    rate: float
    window: float | None
    parallelism: int
    node: str | None = None  # the processing node the stream arrives at (PMJoin, mqjoin.planners.pmjoin)

    def attr(self, name: str) -> Attr:
        return Attr(self.name, name)


@dataclass(frozen=True)
class Query:
    """A continuous equi-join query: its relations (as written), its equivalence classes and
    its filters (docs/model.md §7: one conjunction per filtered relation, sorted by relation)."""

    name: str
    text: str
    relations: tuple[str, ...]
    classes: tuple[JoinClass, ...]
    filters: tuple["Filter", ...] = ()

    @cached_property
    def relation_set(self) -> frozenset[str]:
        return frozenset(self.relations)

    @property
    def where(self) -> str:
        """The filters as a ``where`` text ('' when unfiltered)."""
        return " AND ".join(str(f) for f in self.filters)

    def filter_of(self, relation: str) -> "Filter | None":
        for f in self.filters:
            if f.relation == relation:
                return f
        return None

    def passes(self, relation: str, values: Mapping[str, Any]) -> bool:
        """Whether a tuple of ``relation`` (attribute → value) passes this query's filter."""
        f = self.filter_of(relation)
        return f is None or f.passes(values)

    def class_of(self, attr: Attr) -> JoinClass | None:
        for c in self.classes:
            if attr in c.members:
                return c
        return None

    def __repr__(self) -> str:
        return f"Query({self.name}: {self.text}{' WHERE ' + self.where if self.filters else ''})"


@dataclass(frozen=True)
class Defaults:
    """Defaults of docs/model.md §1 (every key optional in the YAML)."""

    rate: float = 1.0
    window: float | None = None
    parallelism: int = 1
    selectivity: float | None = None
    horizon: float = 1.0


def parse_attr_ref(ref: str, relations: Mapping[str, Relation], where: str) -> Attr:
    """The attribute ``ref`` (``'R.a'``) of one of ``relations``; a typed error naming
    ``where`` when it is malformed or unknown.

    >>> parse_attr_ref(" R . a ", {"R": Relation("R", ("a",), 1.0, None, 1)}, "--per-value")
    R.a
    """
    m = re.fullmatch(rf"\s*({IDENT})\s*\.\s*({IDENT})\s*", ref)
    if not m:
        raise WorkloadSyntaxError(f"{where}: {ref.strip()!r} is not an attribute reference like 'R.a'")
    rel, att = m.group(1), m.group(2)
    if rel not in relations:
        raise UnknownRelationError(
            f"{where}: relation {rel!r} is not declared (declared: {', '.join(relations)})")
    if att not in relations[rel].attributes:
        raise UnknownAttributeError(
            f"{where}: relation {rel} has no attribute {att!r} (its attributes: "
            f"{', '.join(relations[rel].attributes)})")
    return Attr(rel, att)


def parse_selectivity_key(key: str, relations: Mapping[str, Relation]) -> list[tuple[Attr, Attr]]:
    parts = key.split("=")
    where = f"selectivity {key!r}"
    if len(parts) < 2:
        raise WorkloadSyntaxError(f"{where}: expected an equality like 'R.a = S.a'")
    attrs = [parse_attr_ref(p, relations, where) for p in parts]
    pairs = []
    for i in range(len(attrs)):
        for j in range(i + 1, len(attrs)):
            a, b = sorted((attrs[i], attrs[j]))
            if a.relation == b.relation:
                raise SelfJoinError(f"{where}: {a} and {b} belong to the same relation")
            pairs.append((a, b))
    return pairs


_PAPER_ITEM = re.compile(rf"\s*({IDENT})\s*\(([^()]*)\)\s*")


def _split_top(text: str) -> list[str]:
    """Split at commas that are not inside parentheses."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def resolve_query(name: str, text: str, relations: Mapping[str, Relation],
                   explicit: Mapping[tuple[Attr, Attr], tuple[float, str]], defaults: Defaults,
                   where_text: str | None = None, fractions: Mapping[tuple[str, str], float] | None = None) -> Query:
    where = f"query {name}"
    stripped = text.strip()
    if not stripped:
        raise WorkloadSyntaxError(f"{where} is empty: write e.g. 'R(a), S(a,b)' or 'R.a = S.a'")
    uf: UnionFind[Attr] = UnionFind()
    order: list[str] = []

    if "(" in stripped:  # paper notation R(a), S(a,b), T(b)
        listed: dict[str, list[Attr]] = {}
        for item in _split_top(stripped):
            m = _PAPER_ITEM.fullmatch(item)
            if not m:
                raise WorkloadSyntaxError(
                    f"{where}: cannot read {item.strip()!r}; paper notation lists relations with "
                    f"their join attributes, e.g. 'R(a), S(a,b), T(b)'")
            rel = m.group(1)
            if rel not in relations:
                raise UnknownRelationError(
                    f"{where}: relation {rel!r} is not declared (declared: {', '.join(relations)})")
            if rel in order:
                raise SelfJoinError(
                    f"{where}: relation {rel} appears twice; self-joins are not supported "
                    f"(declare a second relation over the same data)")
            order.append(rel)
            names = [a.strip() for a in m.group(2).split(",") if a.strip()]
            if not names:
                raise WorkloadSyntaxError(f"{where}: relation {rel} lists no join attribute")
            for a in names:
                if not IDENT_RE.match(a):
                    raise WorkloadSyntaxError(f"{where}: {a!r} is not an attribute name")
                if a not in relations[rel].attributes:
                    raise UnknownAttributeError(
                        f"{where}: relation {rel} has no attribute {a!r} (its attributes: "
                        f"{', '.join(relations[rel].attributes)})")
                if len(set(names)) != len(names):
                    raise WorkloadSyntaxError(f"{where}: relation {rel} lists attribute {a!r} twice")
                listed.setdefault(a, []).append(Attr(rel, a))
        for a, members in listed.items():
            if len(members) < 2:
                raise WorkloadSyntaxError(
                    f"{where}: attribute {a!r} is listed only for {members[0].relation}, so it joins "
                    f"with nothing; remove it or list it for another relation too")
            for m_ in members:
                uf.add(m_)
            for m_ in members[1:]:
                uf.union(members[0], m_)
    else:  # explicit equalities, separated by ',' or AND
        conjuncts = [c for c in re.split(r",|\bAND\b|\band\b|&&", stripped)]
        for conj in conjuncts:
            if not conj.strip():
                raise WorkloadSyntaxError(f"{where}: empty condition in {text!r}")
            parts = conj.split("=")
            if len(parts) < 2 or any(not p.strip() for p in parts):
                raise WorkloadSyntaxError(
                    f"{where}: cannot read {conj.strip()!r}; write equalities like 'R.a = S.a' "
                    f"or paper notation like 'R(a), S(a)'")
            attrs = [parse_attr_ref(p, relations, where) for p in parts]
            for a in attrs:
                uf.add(a)
                if a.relation not in order:
                    order.append(a.relation)
            for a in attrs[1:]:
                uf.union(attrs[0], a)

    classes: list[JoinClass] = []
    for group in uf.groups():
        rels = [a.relation for a in group]
        if len(set(rels)) != len(rels):
            dup = sorted({r for r in rels if rels.count(r) > 1})[0]
            both = [str(a) for a in group if a.relation == dup]
            raise SelfJoinError(
                f"{where}: class {{{'='.join(str(a) for a in group)}}} contains two attributes of "
                f"{dup} ({', '.join(both)}); a relation may join a class with one attribute only")
        classes.append(JoinClass(tuple(group), _class_selectivity(where, group, explicit, defaults)))

    if len(order) < 2:
        raise WorkloadSyntaxError(f"{where} reads only {order[0] if order else 'nothing'}; "
                                  f"a join query needs at least two relations")
    classes.sort(key=lambda c: c.members)
    if not is_connected(order, classes):
        comps = components(order, classes)
        raise DisconnectedQueryError(
            f"{where} is not connected: {' and '.join('{' + ', '.join(c) + '}' for c in comps)} share no "
            f"join attribute (cross products are not supported); add an equality that links them")
    return Query(name=name, text=stripped, relations=tuple(order), classes=tuple(classes),
                 filters=_resolve_filters(where, where_text, order, relations, fractions or {}))


def _resolve_filters(where: str, text: str | None, order: list[str], relations: Mapping[str, Relation],
                     fractions: Mapping[tuple[str, str], float]) -> tuple["Filter", ...]:
    if text is None:
        return ()
    filters = parse_where(text, relations, where)
    name = where.split()[-1]
    for f in filters:
        if f.relation not in order:
            raise FilterError(f"{where}: the filter names {f.relation}, which the query does not join "
                              f"(it joins {', '.join(order)})")
    for (q, r) in fractions:
        if q == name and not any(f.relation == r for f in filters):
            raise FilterError(f"filters: '{q}.{r}' gives a pass fraction, but query {q} does not filter {r}")
    return tuple(f.with_fraction(fractions[name, f.relation]) if (name, f.relation) in fractions else f
                 for f in filters)


def _class_selectivity(where: str, group: list[Attr],
                       explicit: Mapping[tuple[Attr, Attr], tuple[float, str]], defaults: Defaults) -> float:
    found = [explicit[p] for p in iter_pairs(tuple(group)) if p in explicit]
    if found:
        values = {v for v, _ in found}
        if len(values) > 1:
            detail = ", ".join(f"{k!r}: {v}" for v, k in found)
            raise SelectivityError(
                f"{where}: the class {{{'='.join(str(a) for a in group)}}} is given different "
                f"selectivities ({detail}); one class has one selectivity, so make them agree")
        return found[0][0]
    if defaults.selectivity is not None:
        return defaults.selectivity
    pair = f"{group[0]} = {group[1]}"
    raise MissingSelectivityError(
        f"{where}: no selectivity for the class {{{'='.join(str(a) for a in group)}}}; add "
        f"'{pair}: <value in (0,1]>' under selectivities, or set defaults.selectivity")


def check_filter_consistency(queries: list[Query]) -> None:
    """Queries with the same filter on a relation must give it one pass fraction: their
    filtered stores are one store (docs/model.md §7), with one size."""
    seen: dict[tuple[Any, ...], tuple[float, str]] = {}
    for q in queries:
        for f in q.filters:
            key = (f.relation, f.comparisons)
            if f.fraction is None:
                continue
            if key in seen and seen[key][0] != f.fraction:
                raise FilterError(
                    f"queries {seen[key][1]} and {q.name} give the filter {f} different pass fractions "
                    f"({seen[key][0]} vs {f.fraction}); one filter has one pass fraction, so make them agree")
            seen[key] = (f.fraction, q.name)


def check_pair_consistency(queries: list[Query]) -> None:
    """Two classes (of different queries) that share a pair of attributes must agree on s_c,
    so that an MIR or step shared between queries has one size and one cost."""
    seen: dict[tuple[Attr, Attr], tuple[float, str]] = {}
    for q in queries:
        for c in q.classes:
            for pair in iter_pairs(c.members):
                if pair in seen and seen[pair][0] != c.selectivity:
                    raise SelectivityError(
                        f"queries {seen[pair][1]} and {q.name} imply different selectivities for "
                        f"{pair[0]} = {pair[1]} ({seen[pair][0]} vs {c.selectivity}); give it "
                        f"explicitly under selectivities")
                seen[pair] = (c.selectivity, q.name)


def as_number(value: Any, what: str) -> float:
    """``value`` as a float; a typed error naming ``what`` for a non-number, a bool or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueRangeError(f"{what} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueRangeError(f"{what} must be a number, got NaN")
    return float(value)


NAMED_QUERY_RE = re.compile(rf"^\s*({IDENT})\s*:\s*(.*)$", re.S)


def split_query_name(text: str, name: str | None = None) -> tuple[str | None, str]:
    """A query typed as a workload's query list shows it, ``q6: R(a), S(a)``: its name and
    its text (no prefix: ``(name, text)``).  Neither notation starts with ``name:`` (paper
    notation opens a relation's parenthesis, equalities a dot), so the prefix is unambiguous.
    ``name``: a name given separately; a prefix naming another query is an error that names
    both.

    >>> split_query_name("q6: orders(orderkey), lineitem(orderkey)")
    ('q6', 'orders(orderkey), lineitem(orderkey)')
    >>> split_query_name("R.a = S.a", "q2"), split_query_name("q2: R(a), S(a)", "q2")
    (('q2', 'R.a = S.a'), ('q2', 'R(a), S(a)'))
    >>> split_query_name("q6: R(a), S(a)", "q7")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.WorkloadSyntaxError: the query text is named q6 ('q6: …') but the name given is q7; keep one of
    the two names
    """
    m = NAMED_QUERY_RE.match(text)
    if m is None:
        return name, text.strip()
    prefix, rest = m.group(1), m.group(2).strip()
    if name and name != prefix:
        raise WorkloadSyntaxError(f"the query text is named {prefix} ('{prefix}: …') but the name given is {name}; "
                                  f"keep one of the two names")
    return prefix, rest
