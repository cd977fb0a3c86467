"""Workloads: relations, queries, equivalence classes and statistics (docs/model.md §1).

A workload is an immutable value.  Build one from YAML (:func:`load_workload`,
:func:`parse_workload`) or from Python values (:meth:`Workload.build`); every edit
(:meth:`Workload.with_relation`, :meth:`Workload.with_selectivity`, …) returns a new,
re-validated workload.

Join sizes come from rates and one selectivity per class, as if the classes were independent
(:func:`independent_size`), unless the workload gives a **measured size** of the set under
``sizes`` (:class:`MeasuredSize`, :meth:`Workload.measured_size`): keys are relation sets
``"lineitem ⋈ partsupp"`` (the unfiltered join, for every query that joins the set through
the same classes) or, under a query's name, sets joined with that query's own filters.
Edits keep each size's ratio to the estimate, so a selectivity or rate slider moves it.

>>> w = parse_workload('''
... relations:
...   R: {attributes: [a], rate: 100}
...   S: {attributes: [a, b], rate: 100}
...   T: {attributes: [b], rate: 100}
... queries:
...   q1: R(a), S(a,b), T(b)
...   q2: R.a = S.a AND S.b = T.b
... selectivities:
...   R.a = S.a: 0.01
...   S.b = T.b: 0.015
... ''')
>>> w.query("q1")
Query(q1: R(a), S(a,b), T(b))
>>> [str(c) for c in w.query("q2").classes]
['{R.a=S.a}', '{S.b=T.b}']
>>> w.query("q1").classes == w.query("q2").classes
True
>>> w.with_selectivity("S.b = T.b", 0.5).query("q1").classes[1].selectivity
0.5
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from mqjoin.model.errors import (
    DisconnectedQueryError,
    FilterError,
    SelectivityError,
    SelfJoinError,
    SizeError,
    UnknownAttributeError,
    UnknownRelationError,
    ValueRangeError,
    WorkloadError,
    WorkloadSyntaxError,
)

from mqjoin.model.filters import Filter, Selection, parse_where
from mqjoin.model.schema import Attr, JoinClass, components, is_connected, iter_pairs, restrict_classes

__all__ = ["Attr", "JoinClass", "Defaults", "MeasuredSize", "Query", "Relation", "Workload", "components",
           "independent_size", "is_connected", "iter_pairs", "load_workload", "parse_workload", "restrict_classes"]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENT_RE = re.compile(rf"^{_IDENT}$")


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


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


_DEFAULT_KEYS = ("rate", "window", "parallelism", "selectivity", "horizon")
_RELATION_KEYS = ("attributes", "rate", "window", "parallelism", "node")
_TOP_KEYS = ("defaults", "relations", "queries", "selectivities", "filters", "groups", "sizes")
#: the join sign between the relations of a ``sizes`` key (``,`` is read too)
JOIN_SIGN = "⋈"
_QUERY_KEYS = ("join", "where")


@dataclass(frozen=True)
class MeasuredSize:
    """A measured join size (docs/model.md §2): ``|⋈P|`` of the relation set ``relations`` in
    tuples per time unit, the unit of :func:`independent_size`.  ``query`` is ``None`` for a
    size of the unfiltered join, which every query joining ``P`` through the same classes
    uses, or the query whose own filters the size includes."""

    query: str | None
    relations: tuple[str, ...]  # in declaration order
    value: float

    @property
    def key(self) -> str:
        """The set as the YAML writes it: ``"lineitem ⋈ partsupp"``."""
        return f" {JOIN_SIGN} ".join(self.relations)

    def __str__(self) -> str:
        return f"{self.query + ': ' if self.query else ''}{self.key} = {self.value:g}"


@dataclass(frozen=True)
class Workload:
    """A validated workload.  Build it with :meth:`build`, :func:`parse_workload` or
    :func:`load_workload`; the constructor itself does not validate."""

    relations: tuple[Relation, ...]
    queries: tuple[Query, ...]
    selectivities: tuple[tuple[tuple[Attr, Attr], float], ...] = ()
    defaults: Defaults = field(default_factory=Defaults)
    #: query groups (AJoin, docs/model.md §7): queries of a group share stores over the union of their
    #: filters; a query in no group is alone.  Set by a planner (:meth:`with_groups`).
    groups: tuple[tuple[str, ...], ...] = ()
    #: measured join sizes (docs/model.md §2); each replaces the independence estimate of its set
    sizes: tuple[MeasuredSize, ...] = ()

    # -- look-ups -----------------------------------------------------------------------------

    @cached_property
    def _relations_by_name(self) -> dict[str, Relation]:
        return {r.name: r for r in self.relations}

    @cached_property
    def _queries_by_name(self) -> dict[str, Query]:
        return {q.name: q for q in self.queries}

    @cached_property
    def relation_rank(self) -> dict[str, int]:
        """Declaration order of relations (used to break ties between equal timestamps)."""
        return {r.name: i for i, r in enumerate(self.relations)}

    def relation(self, name: str) -> Relation:
        try:
            return self._relations_by_name[name]
        except KeyError:
            raise UnknownRelationError(
                f"relation {name!r} is not declared (declared: {', '.join(self._relations_by_name)})"
            ) from None

    def query(self, name: str) -> Query:
        try:
            return self._queries_by_name[name]
        except KeyError:
            raise WorkloadError(
                f"query {name!r} does not exist (queries: {', '.join(self._queries_by_name) or 'none'})"
            ) from None

    def rate(self, relation: str) -> float:
        return self.relation(relation).rate

    def window(self, relation: str) -> float | None:
        return self.relation(relation).window

    def parallelism(self, relation: str) -> int:
        return self.relation(relation).parallelism

    @property
    def query_names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queries)

    @cached_property
    def used_relations(self) -> tuple[str, ...]:
        """Relations that some query reads, in declaration order."""
        used = set().union(*(q.relation_set for q in self.queries)) if self.queries else set()
        return tuple(r.name for r in self.relations if r.name in used)

    # -- construction -------------------------------------------------------------------------

    @staticmethod
    def build(
        relations: Mapping[str, Mapping[str, Any]],
        queries: Mapping[str, str],
        selectivities: Mapping[str, float] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> "Workload":
        """Validate and build a workload from plain Python values (the YAML's structure).

        >>> w = Workload.build({"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}},
        ...                    {"q": "R(a), S(a)"}, defaults={"selectivity": 0.1})
        >>> w.query("q").classes[0].selectivity
        0.1
        """
        return _build({"relations": relations, "queries": queries,
                       "selectivities": selectivities or {}, "defaults": defaults or {}})

    @staticmethod
    def from_spec(spec: Mapping[str, Any]) -> "Workload":
        """Validate and build a workload from the plain structure of the YAML format (a mapping
        with ``relations``, ``queries`` and optionally ``defaults``, ``selectivities``) — the
        inverse of :meth:`to_spec`.

        >>> w = Workload.from_spec({"relations": {"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}},
        ...                         "queries": {"q": "R(a), S(a)"}, "selectivities": {"R.a = S.a": 0.5}})
        >>> Workload.from_spec(w.to_spec()) == w
        True
        """
        return _build(spec)

    def to_spec(self) -> dict[str, Any]:
        """The workload as the plain structure of the YAML format (round-trips through :meth:`from_spec`)."""
        d = self.defaults
        spec: dict[str, Any] = {
            "defaults": {k: getattr(d, k) for k in _DEFAULT_KEYS},
            "relations": {
                r.name: {"attributes": list(r.attributes), "rate": r.rate, "window": r.window,
                         "parallelism": r.parallelism, **({"node": r.node} if r.node is not None else {})}
                for r in self.relations
            },
            "queries": {q.name: {"join": q.text, "where": q.where} if q.filters else q.text for q in self.queries},
            "selectivities": {f"{a} = {b}": v for (a, b), v in self.selectivities},
        }
        fractions = {f"{q.name}.{f.relation}": f.fraction for q in self.queries for f in q.filters
                     if f.fraction is not None}
        if fractions:
            spec["filters"] = fractions
        if self.groups:
            spec["groups"] = [list(g) for g in self.groups]
        if self.sizes:
            sizes: dict[str, Any] = {}
            for m in self.sizes:
                if m.query is None:
                    sizes[m.key] = m.value
                else:
                    sizes.setdefault(m.query, {})[m.key] = m.value
            spec["sizes"] = sizes
        return spec

    def to_yaml(self) -> str:
        """The workload as YAML text in the format of docs/model.md §1."""
        import yaml

        return yaml.safe_dump(self.to_spec(), sort_keys=False, default_flow_style=None, allow_unicode=True)

    # -- edits (each returns a new validated workload) ----------------------------------------

    def respecified(self, spec: dict[str, Any]) -> "Workload":
        """The workload of ``spec`` — this workload's :meth:`to_spec`, edited — with this
        workload's measured sizes carried over: each keeps its ratio to the independence
        estimate (so an edit of a rate, selectivity or pass fraction, or statistics sampled
        anew, move it as they move the estimate), and one whose set the edited queries no
        longer join as before is dropped.  Every ``with_…`` edit goes through here."""
        spec = dict(spec)
        spec.pop("sizes", None)
        new = _build(spec)
        if not self.sizes:
            return new
        moved = []
        for m in self.sizes:
            m = _rehome(m, self._queries_by_name, new._queries_by_name)
            if m is None:
                continue
            old_key, old_classes, old_sel = _size_targets(m, self._queries_by_name)[0]
            new_key, new_classes, new_sel = _size_targets(m, new._queries_by_name)[0]
            if old_key != new_key:
                continue
            ratio = (independent_size(new, m.relations, new_classes, new_sel)
                     / independent_size(self, m.relations, old_classes, old_sel))
            moved.append(replace(m, value=m.value * ratio))
        return replace(new, sizes=_resolve_sizes(moved, new.queries, strict=False)[0])

    def with_relation(self, name: str, **changes: Any) -> "Workload":
        """Change ``rate``, ``window``, ``parallelism``, ``attributes`` or ``node`` of one relation.

        >>> w = Workload.build({"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}},
        ...                    {"q": "R(a), S(a)"}, defaults={"selectivity": 0.1})
        >>> w.with_relation("R", rate=5).rate("R")
        5.0
        """
        self.relation(name)
        spec = self.to_spec()
        for k in changes:
            if k not in _RELATION_KEYS:
                raise WorkloadSyntaxError(f"relation {name}: unknown key {k!r} (allowed: {', '.join(_RELATION_KEYS)})")
        spec["relations"][name].update(changes)
        return self.respecified(spec)

    def with_selectivity(self, equality: str, value: float) -> "Workload":
        """Set the selectivity of an equality such as ``"R.a = S.a"``.

        Measured sizes (docs/model.md §2) of sets joined through the edited class move with
        their estimate: a size keeps its ratio to the independence estimate, so halving
        ``s`` halves the size of a two-relation set, and the correlation the measurement found
        stays.  The same holds for :meth:`with_relation` (rates) and
        :meth:`with_filter_fraction`.

        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a], rate: 10}, S: {attributes: [a], rate: 10}}
        ... queries: {q: "R(a), S(a)"}
        ... selectivities: {R.a = S.a: 0.1}
        ... sizes: {R ⋈ S: 40}''')
        >>> w.with_selectivity("R.a = S.a", 0.05).sizes[0].value
        20.0
        """
        spec = self.to_spec()
        new_pairs = set(_parse_selectivity_key(equality, self._relations_by_name))
        spec["selectivities"] = {
            k: v for k, v in spec["selectivities"].items()
            if not set(_parse_selectivity_key(k, self._relations_by_name)) & new_pairs
        }
        spec["selectivities"][equality] = value
        return self.respecified(spec)

    def with_query(self, name: str, text: str | Mapping[str, str], fractions: Mapping[str, float] | None = None) -> "Workload":
        """Add (or replace) a query written in paper notation or as equalities, or as
        ``{join: …, where: …}`` with the pass ``fractions`` of its filters (relation → f).

        >>> w = Workload.build({"R": {"attributes": ["a", "x"]}, "S": {"attributes": ["a"]}},
        ...                    {"q": "R(a), S(a)"}, defaults={"selectivity": 0.1})
        >>> w.with_query("p", {"join": "R(a), S(a)", "where": "R.x = 1"}, {"R": 0.5}).query("p")
        Query(p: R(a), S(a) WHERE R.x = 1)
        """
        spec = self.to_spec()
        spec["queries"][name] = text
        spec.setdefault("filters", {}).update({f"{name}.{r}": v for r, v in (fractions or {}).items()})
        return self.respecified(spec)

    def with_filter_fraction(self, query: str, relation: str, fraction: float) -> "Workload":
        """Set the pass fraction of ``query``'s filter on ``relation`` (docs/model.md §7)."""
        spec = self.to_spec()
        spec.setdefault("filters", {})[f"{query}.{relation}"] = fraction
        return replace(self.respecified(spec), groups=self.groups)

    def with_sizes(self, sizes: Iterable[MeasuredSize], strict: bool = True) -> "Workload":
        """The workload with these measured sizes (docs/model.md §2) added; one of the same set
        and query replaces the given one.  ``strict``: a size that does not apply is a typed
        error, otherwise it is left out (e.g. sizes a run measured for a changed workload).

        >>> w = Workload.build({"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}},
        ...                    {"q": "R(a), S(a)"}, defaults={"selectivity": 0.1})
        >>> [str(m) for m in w.with_sizes([MeasuredSize(None, ("S", "R"), 0.5)]).sizes]
        ['R ⋈ S = 0.5']
        """
        order = list(self._relations_by_name)
        merged = {(m.query, frozenset(m.relations)): m for m in self.sizes}
        for m in sizes:
            for r in m.relations:
                self.relation(r)
            v = _number(m.value, f"sizes: {m.key!r}: the size")
            if not (v > 0) or math.isinf(v):
                raise ValueRangeError(f"sizes: {m.key!r}: the size must be a positive finite number of tuples "
                                      f"per time unit, got {m.value!r}")
            merged[m.query, frozenset(m.relations)] = MeasuredSize(
                m.query, tuple(sorted(set(m.relations), key=order.index)), v)
        return replace(self, sizes=_resolve_sizes(merged.values(), self.queries, strict)[0])

    def with_groups(self, groups: Iterable[Iterable[str]]) -> "Workload":
        """The workload with query groups (AJoin): each group's queries share stores over the
        union of their filters.  Queries in no group stay alone.

        >>> w = parse_workload('''
        ... defaults: {selectivity: 0.1}
        ... relations: {R: {attributes: [a, x]}, S: {attributes: [a]}}
        ... queries: {q1: {join: "R(a), S(a)", where: "R.x < 5"}, q2: {join: "R(a), S(a)", where: "R.x > 7"}}
        ... filters: {q1.R: 0.5, q2.R: 0.2}''')
        >>> w.selection("q1", "R"), w.selection("q1", "S")
        (R.x < 5, None)
        >>> g = w.with_groups([["q1", "q2"]])
        >>> s = g.selection("q1", "R")
        >>> s, s.fraction, s == g.selection("q2", "R")
        (R.x < 5 OR R.x > 7, 0.6, True)
        """
        out, seen = [], set()
        for g in groups:
            g = tuple(sorted(g))
            for n in g:
                self.query(n)
                if n in seen:
                    raise WorkloadError(f"query {n} is in two groups; a query belongs to one group")
                seen.add(n)
            if len(g) > 1:
                out.append(g)
        return replace(self, groups=tuple(sorted(out)))

    def group_of(self, query: str) -> tuple[str, ...]:
        """The query group of ``query`` (itself alone when in no group)."""
        for g in self.groups:
            if query in g:
                return g
        return (query,)

    @cached_property
    def _selections(self) -> dict[tuple[str, str], "Selection | None"]:
        out: dict[tuple[str, str], Selection | None] = {}
        for q in self.queries:
            for f in q.filters:
                if f.fraction is None:
                    raise FilterError(
                        f"query {q.name}: no pass fraction for the filter on {f.relation}; add 'filters: "
                        f"{{{q.name}.{f.relation}: <value in (0,1]>}}' or estimate it from data with 'mqjoin stats'")
            members = [self.query(n) for n in self.group_of(q.name)]
            for r in q.relations:
                filters = [m.filter_of(r) for m in members if r in m.relation_set]
                out[q.name, r] = None if any(f is None for f in filters) else Selection.union(filters)
        return out

    def selection(self, query: str, relation: str) -> "Selection | None":
        """What the stores of ``query`` keep of ``relation``: its filter, the union of its
        group's filters, or ``None`` (everything)."""
        return self._selections[query, relation]

    def selections(self, query: str) -> tuple["Selection", ...]:
        """The selections of ``query``'s stores (:meth:`selection`), sorted by relation."""
        q = self.query(query)
        return tuple(s for r in sorted(q.relations) if (s := self._selections[query, r]) is not None)

    def without_query(self, name: str) -> "Workload":
        """The workload without query ``name`` (and its pass fractions; it leaves its group)."""
        self.query(name)
        spec = self.to_spec()
        del spec["queries"][name]
        spec["filters"] = {k: v for k, v in spec.get("filters", {}).items() if k.split(".")[0] != name}
        spec["groups"] = [[n for n in g if n != name] for g in spec.get("groups", ())]
        spec["groups"] = [g for g in spec["groups"] if len(g) > 1]
        return self.respecified(spec)

    def with_defaults(self, **changes: Any) -> "Workload":
        spec = self.to_spec()
        for k in changes:
            if k not in _DEFAULT_KEYS:
                raise WorkloadSyntaxError(f"defaults: unknown key {k!r} (allowed: {', '.join(_DEFAULT_KEYS)})")
        spec["defaults"].update(changes)
        return self.respecified(spec)

    def restricted_to(self, query_names: Iterable[str]) -> "Workload":
        """The workload with only the named queries (relations and statistics unchanged;
        groups restricted to them)."""
        names = list(query_names)
        for n in names:
            self.query(n)
        keep = set(names)
        queries = tuple(q for q in self.queries if q.name in keep)
        return replace(self, queries=queries,
                       groups=tuple(g for g in (tuple(n for n in g if n in keep) for g in self.groups) if len(g) > 1),
                       sizes=_resolve_sizes([r for m in self.sizes if (r := _rehome(m, self._queries_by_name, {
                           q.name: q for q in queries})) is not None], queries, strict=False)[0] if self.sizes else ())

    def input_attributes(self) -> dict[str, set[str]]:
        """Relation → the attributes its queries join on or filter (the columns its input needs).

        >>> w = Workload.from_spec({"relations": {"R": {"attributes": ["a", "x"]}, "S": {"attributes": ["a"]}},
        ...     "queries": {"q": {"join": "R(a), S(a)", "where": "R.x = 1"}}, "filters": {"q.R": 0.5},
        ...     "defaults": {"selectivity": 0.1}})
        >>> sorted(w.input_attributes()["R"])
        ['a', 'x']
        """
        used: dict[str, set[str]] = {r.name: set() for r in self.relations}
        for q in self.queries:
            for c in q.classes:
                for a in c.members:
                    used[a.relation].add(a.name)
            for f in q.filters:
                used[f.relation].update(c.attr.name for c in f.comparisons)
        return used

    @cached_property
    def _size_lookup(self) -> dict[tuple, float]:
        return _resolve_sizes(self.sizes, self.queries, strict=False)[1]

    def measured_size(self, relations: Iterable[str], classes: Iterable[JoinClass],
                      selection: Iterable["Selection"] = ()) -> float | None:
        """The measured size of ``⋈relations`` joined through ``classes`` under ``selection``
        (docs/model.md §2), ``None`` when none is given.  A size measured with exactly these
        filters is taken as it is; else a size of the unfiltered join is scaled by the pass
        fractions of the filtered relations (independence between filter and join, as for a
        rate: ``f · λ``).

        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a, x], rate: 10}, S: {attributes: [a], rate: 10}}
        ... queries: {q: {join: "R(a), S(a)", where: "R.x < 3"}, p: "R(a), S(a)"}
        ... filters: {q.R: 0.5}
        ... selectivities: {R.a = S.a: 0.1}
        ... sizes: {R ⋈ S: 40}''')
        >>> cs = w.query("q").classes
        >>> w.measured_size({"R", "S"}, cs), w.measured_size({"R", "S"}, cs, w.selections("q"))
        (40.0, 20.0)
        """
        if not self.sizes:
            return None
        rels = frozenset(relations)
        selection = tuple(selection)
        lookup = self._size_lookup
        key = _size_key(rels, classes, selection)
        if key in lookup:
            return lookup[key]
        if key[2]:
            plain = lookup.get(key[:2] + ((),))
            if plain is not None:
                for sel in selection:
                    if sel.relation in rels:
                        plain *= sel.fraction
                return plain
        return None

    def selectivity_of(self, a: Attr, b: Attr) -> float | None:
        """The explicit selectivity given for ``a = b`` (``None`` when not given)."""
        key = (a, b) if a <= b else (b, a)
        for pair, v in self.selectivities:
            if pair == key:
                return v
        return None

    def __repr__(self) -> str:
        return (f"Workload({len(self.relations)} relations, {len(self.queries)} queries: "
                f"{', '.join(self.query_names)})")

    def _repr_html_(self) -> str:
        """Notebook display: relations with statistics, then the queries."""
        import html

        rows = "".join(
            f"<tr><td>{r.name}</td><td>{', '.join(r.attributes)}</td><td>{r.rate:g}</td>"
            f"<td>{'unbounded' if r.window is None else f'{r.window:g}'}</td><td>{r.parallelism}</td></tr>"
            for r in self.relations)
        qs = "".join(f"<li><code>{q.name}: {html.escape(q.text)}</code></li>" for q in self.queries)
        return (f"<b>{html.escape(repr(self))}</b><table><tr><th>relation</th><th>attributes</th><th>rate</th>"
                f"<th>window</th><th>parallelism</th></tr>{rows}</table><ul>{qs}</ul>")


# --------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------


def parse_workload(text: str) -> Workload:
    """Parse a workload from YAML text (docs/model.md §1)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise WorkloadSyntaxError(f"workload is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise WorkloadSyntaxError("workload must be a YAML mapping with keys relations, queries "
                                  "(and optionally defaults, selectivities)")
    return _build(data)


def load_workload(path: str | Path) -> Workload:
    """Load a workload from a YAML file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"workload file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError(f"cannot read workload file {str(p)!r}: {e}") from None
    try:
        return parse_workload(text)
    except WorkloadError as e:
        raise type(e)(f"{p.name}: {e}") from None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueRangeError(f"{what} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueRangeError(f"{what} must be a number, got NaN")
    return float(value)


def _positive_rate(value: Any, what: str) -> float:
    v = _number(value, what)
    if not (v > 0) or math.isinf(v):
        raise ValueRangeError(f"{what} must be a positive finite number, got {value!r}")
    return v


def _window(value: Any, what: str) -> float | None:
    if value is None:
        return None
    v = _number(value, what)
    if v < 0:
        raise ValueRangeError(f"{what} must be >= 0 or null (unbounded), got {value!r}")
    return None if math.isinf(v) else v


def _parallelism(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueRangeError(f"{what} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueRangeError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _node(value: Any, what: str) -> str | None:
    """A processing node's name (PMJoin's placement of a stream), or ``None`` when not placed.

    >>> _node("n1", "relation S: node"), _node(None, "relation S: node")
    ('n1', None)
    >>> _node(3, "relation S: node")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.WorkloadSyntaxError: relation S: node must be a name such as n1 (letters, digits, _), got 3
    """
    if value is None:
        return None
    if not isinstance(value, str) or not _IDENT_RE.match(value):
        raise WorkloadSyntaxError(f"{what} must be a name such as n1 (letters, digits, _), got {value!r}")
    return value


def _selectivity(value: Any, what: str) -> float:
    v = _number(value, what)
    if not (0 < v <= 1):
        raise SelectivityError(f"{what} must lie in (0, 1], got {value!r}")
    return v


def _check_keys(d: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise WorkloadSyntaxError(f"{where}: unknown key {k!r} (allowed: {', '.join(allowed)})")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WorkloadSyntaxError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _build(data: Mapping[str, Any]) -> Workload:
    _check_keys(data, _TOP_KEYS, "workload")
    dspec = _mapping(data.get("defaults"), "defaults")
    _check_keys(dspec, _DEFAULT_KEYS, "defaults")
    defaults = Defaults(
        rate=_positive_rate(dspec.get("rate", 1.0), "defaults.rate"),
        window=_window(dspec.get("window"), "defaults.window"),
        parallelism=_parallelism(dspec.get("parallelism", 1), "defaults.parallelism"),
        selectivity=None if dspec.get("selectivity") is None
        else _selectivity(dspec["selectivity"], "defaults.selectivity"),
        horizon=_positive_rate(dspec.get("horizon", 1.0), "defaults.horizon"),
    )

    rspec = _mapping(data.get("relations"), "relations")
    if not rspec:
        raise WorkloadSyntaxError("workload declares no relations: add a 'relations' mapping "
                                  "such as 'R: {attributes: [a]}'")
    relations: list[Relation] = []
    for name, r in rspec.items():
        name = str(name)
        if not _IDENT_RE.match(name):
            raise WorkloadSyntaxError(f"relation name {name!r} is not an identifier (letters, digits, _)")
        r = _mapping(r, f"relation {name}")
        _check_keys(r, _RELATION_KEYS, f"relation {name}")
        attrs = r.get("attributes")
        if not isinstance(attrs, (list, tuple)) or not attrs:
            raise WorkloadSyntaxError(f"relation {name}: 'attributes' must be a non-empty list of names")
        attrs = tuple(str(a) for a in attrs)
        for a in attrs:
            if not _IDENT_RE.match(a) or a == "ts":
                raise WorkloadSyntaxError(
                    f"relation {name}: attribute {a!r} is not a valid name"
                    + (" ('ts' is reserved for the event time)" if a == "ts" else " (letters, digits, _)"))
        if len(set(attrs)) != len(attrs):
            raise WorkloadSyntaxError(f"relation {name}: attributes {list(attrs)} contain a duplicate")
        relations.append(Relation(
            name=name,
            attributes=attrs,
            rate=_positive_rate(r.get("rate", defaults.rate), f"relation {name}: rate"),
            window=_window(r.get("window", defaults.window), f"relation {name}: window"),
            parallelism=_parallelism(r.get("parallelism", defaults.parallelism), f"relation {name}: parallelism"),
            node=_node(r.get("node"), f"relation {name}: node"),
        ))
    by_name = {r.name: r for r in relations}

    sspec = _mapping(data.get("selectivities"), "selectivities")
    explicit: dict[tuple[Attr, Attr], tuple[float, str]] = {}
    for key, value in sspec.items():
        key = str(key)
        v = _selectivity(value, f"selectivity of {key!r}")
        for pair in _parse_selectivity_key(key, by_name):
            if pair in explicit and explicit[pair][0] != v:
                raise SelectivityError(
                    f"selectivities {explicit[pair][1]!r} ({explicit[pair][0]}) and {key!r} ({v}) "
                    f"give different values for {pair[0]} = {pair[1]}; keep one")
            explicit[pair] = (v, key)

    qspec = _mapping(data.get("queries"), "queries")
    texts: dict[str, tuple[str, str | None]] = {}
    for qname, text in qspec.items():
        qname = str(qname)
        if not _IDENT_RE.match(qname):
            hint = (" — in a {...} flow mapping, quote a query that contains commas: q1: \"R(a), S(a)\""
                    if text is None else "")
            raise WorkloadSyntaxError(f"query name {qname!r} is not an identifier (letters, digits, _){hint}")
        texts[qname] = _query_texts(qname, text)
    fractions = _filter_fractions(_mapping(data.get("filters"), "filters"), texts)
    queries = [_resolve_query(n, j, by_name, explicit, defaults, w, fractions) for n, (j, w) in texts.items()]

    _check_pair_consistency(queries)
    _check_filter_consistency(queries)
    sel = tuple(sorted(((pair, v) for pair, (v, _) in explicit.items()), key=lambda t: t[0]))
    groups = data.get("groups") or ()
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise WorkloadSyntaxError(f"groups must be a list of lists of query names, got {groups!r}")
    entries = _size_entries(_mapping(data.get("sizes"), "sizes"), by_name)
    sizes = _resolve_sizes(entries, queries, strict=True)[0]
    return Workload(tuple(relations), tuple(queries), sel, defaults, sizes=sizes).with_groups(groups)


def independent_size(workload: Workload, relations: Iterable[str], classes: Iterable[JoinClass],
                     selection: Iterable["Selection"] = ()) -> float:
    """The independence estimate ``|⋈P| = Π f_R · λ_R · Π s_c^(k_c(P) − 1)`` over the classes
    with ``k_c(P) ≥ 2`` (docs/model.md §2, §7): ``f_R`` the pass fraction of ``R``'s selection,
    1 for an unfiltered relation.  :func:`mqjoin.planning.cost.join_size` uses it where no
    size is measured.

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


def _size_key(relations: frozenset[str], classes: Iterable[JoinClass], selection: Iterable["Selection"]) -> tuple:
    """What a measured size is the size of: the relation set, the members of its classes
    inside the set (selectivities left out: an edit moves sizes, :meth:`Workload.respecified`)
    and the selections of its relations (without fractions)."""
    members = frozenset(kept for c in classes
                        if len(kept := tuple(a for a in c.members if a.relation in relations)) >= 2)
    return (relations, members, tuple(sorted(s.key for s in selection if s.relation in relations)))


def _size_targets(m: MeasuredSize, queries: Mapping[str, Query]) -> list[tuple[tuple, tuple[JoinClass, ...], tuple["Selection", ...]]]:
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
        out.append((_size_key(rels, classes, selection), classes, selection))
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


def _rehome(m: MeasuredSize, old: Mapping[str, Query], new: Mapping[str, Query]) -> MeasuredSize | None:
    """``m`` for the queries ``new`` (an edit's): as it is when it still applies to them; a
    per-query size whose query is gone moves to a remaining query that joins its set the same
    way (same classes and filters), as the look-up would have found it there; ``None`` when
    no query of ``new`` joins the set as the old ones did."""
    try:
        key = _size_targets(m, old)[0][0]
    except WorkloadError:
        return None
    candidates = [m] if m.query is None or m.query in new else [replace(m, query=q) for q in new]
    for c in candidates:
        try:
            if any(k == key for k, _, _ in _size_targets(c, new)):
                return c
        except WorkloadError:
            continue
    return None


def _resolve_sizes(entries: Iterable[MeasuredSize], queries: Iterable[Query],
                   strict: bool) -> tuple[tuple[MeasuredSize, ...], dict[tuple, float]]:
    """The measured sizes that apply to ``queries`` (sorted) and their look-up table (key →
    size).  ``strict``: a size that does not apply, or contradicts another, is a typed error;
    otherwise it is left out (an edit removed or changed the queries that joined its set)."""
    by_name = {q.name: q for q in queries}
    kept: list[MeasuredSize] = []
    lookup: dict[tuple, tuple[float, MeasuredSize]] = {}
    for m in entries:
        try:
            keys = [k for k, _, _ in _size_targets(m, by_name)]
            for k in keys:
                if k in lookup and not math.isclose(lookup[k][0], m.value, rel_tol=1e-9):
                    raise SizeError(f"sizes: {lookup[k][1]} and {m} give one join different sizes; keep one")
        except WorkloadError:
            if strict:
                raise
            continue
        kept.append(m)
        for k in keys:
            lookup.setdefault(k, (m.value, m))
    kept.sort(key=lambda m: (m.query or "", len(m.relations), m.relations))
    return tuple(kept), {k: v for k, (v, _) in lookup.items()}


def _size_entries(spec: Mapping[str, Any], relations: Mapping[str, Relation]) -> list[MeasuredSize]:
    """``sizes: {"R ⋈ S": 40, q3: {"R ⋈ S": 12}}`` → measured sizes, each read strictly."""
    out = []
    for key, value in spec.items():
        key = str(key)
        if isinstance(value, Mapping):
            if not _IDENT_RE.match(key.strip()):
                raise WorkloadSyntaxError(f"sizes: {key!r} maps to sizes, so it must be a query name; write "
                                          f"sizes of relation sets as 'R {JOIN_SIGN} S: <tuples per time unit>'")
            out += [_size_entry(str(k), v, key.strip(), relations) for k, v in value.items()]
        else:
            out.append(_size_entry(key, value, None, relations))
    return out


def _size_entry(key: str, value: Any, query: str | None, relations: Mapping[str, Relation]) -> MeasuredSize:
    where = f"sizes: {query + ': ' if query else ''}{key!r}"
    names = [n.strip() for n in re.split(rf"{JOIN_SIGN}|,", key)]
    if any(not _IDENT_RE.match(n) for n in names):
        raise WorkloadSyntaxError(f"{where} is not a relation set like 'lineitem {JOIN_SIGN} partsupp' "
                                  f"(relation names joined by {JOIN_SIGN} or ',')")
    if len(names) < 2:
        raise WorkloadSyntaxError(
            f"{where} names one relation: a size is given for a join of two or more relations (one relation's "
            f"size is its rate)" if names[0] in relations else
            f"{where} is not a relation set like 'R {JOIN_SIGN} S'" + ("" if query else
                                                                       f"; per query, write '{names[0]}: {{R {JOIN_SIGN} S: …}}'"))
    for n in names:
        if n not in relations:
            raise UnknownRelationError(f"{where}: relation {n!r} is not declared (declared: {', '.join(relations)})")
    if len(set(names)) != len(names):
        raise WorkloadSyntaxError(f"{where} names a relation twice")
    v = _number(value, f"{where}: the size")
    if not (v > 0) or math.isinf(v):
        raise ValueRangeError(f"{where}: the size must be a positive finite number of tuples per time unit, "
                              f"got {value!r}")
    order = list(relations)
    return MeasuredSize(query, tuple(sorted(names, key=order.index)), v)


def _query_texts(name: str, value: Any) -> tuple[str, str | None]:
    """A query's ``join`` text and ``where`` text (``None``: no filter) from its YAML value."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping):
        _check_keys(value, _QUERY_KEYS, f"query {name}")
        join, where = value.get("join"), value.get("where")
        if not isinstance(join, str):
            raise WorkloadSyntaxError(f"query {name}: 'join' must be a string such as 'R(a), S(a,b)', got {join!r}")
        if where is not None and not isinstance(where, str):
            raise FilterError(f"query {name}: 'where' must be a string such as 'R.x < 10', got {where!r}")
        return join, where
    raise WorkloadSyntaxError(
        f"query {name}: expected a string such as 'R(a), S(a,b)' or 'R.a = S.a', or a mapping "
        f"{{join: ..., where: ...}}, got {value!r}")


def _filter_fractions(spec: Mapping[str, Any], texts: Mapping[str, tuple[str, str | None]]) -> dict[tuple[str, str], float]:
    """``filters: {q4.V: 0.2}`` → {(query, relation): pass fraction}, checked."""
    out = {}
    for key, value in spec.items():
        m = re.fullmatch(rf"\s*({_IDENT})\s*\.\s*({_IDENT})\s*", str(key))
        if not m:
            raise FilterError(f"filters: {str(key)!r} is not a key like 'q4.V' (query.relation)")
        if m.group(1) not in texts:
            raise FilterError(f"filters: {key!r} names query {m.group(1)!r}, which does not exist")
        if texts[m.group(1)][1] is None:
            raise FilterError(f"filters: {key!r} gives a pass fraction, but query {m.group(1)} has no filter")
        v = _number(value, f"pass fraction of {key!r}")
        if not (0 < v <= 1):
            raise FilterError(f"pass fraction of {key!r} must lie in (0, 1], got {value!r}")
        out[m.group(1), m.group(2)] = v
    return out


def parse_attr_ref(ref: str, relations: Mapping[str, Relation], where: str) -> Attr:
    """The attribute ``ref`` (``'R.a'``) of one of ``relations``; a typed error naming
    ``where`` when it is malformed or unknown.

    >>> parse_attr_ref(" R . a ", {"R": Relation("R", ("a",), 1.0, None, 1)}, "--per-value")
    R.a
    """
    m = re.fullmatch(rf"\s*({_IDENT})\s*\.\s*({_IDENT})\s*", ref)
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


def _parse_selectivity_key(key: str, relations: Mapping[str, Relation]) -> list[tuple[Attr, Attr]]:
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


_PAPER_ITEM = re.compile(rf"\s*({_IDENT})\s*\(([^()]*)\)\s*")


def _split_top(text: str) -> list[str]:
    """Split at commas that are not inside parentheses."""
    out, depth, cur = [], 0, []
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


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Attr, Attr] = {}

    def add(self, x: Attr) -> None:
        self.parent.setdefault(x, x)

    def find(self, x: Attr) -> Attr:
        self.add(x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Attr, b: Attr) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[Attr]]:
        g: dict[Attr, list[Attr]] = {}
        for x in self.parent:
            g.setdefault(self.find(x), []).append(x)
        return sorted((sorted(v) for v in g.values()), key=lambda v: v[0])


def _resolve_query(name: str, text: str, relations: Mapping[str, Relation],
                   explicit: Mapping[tuple[Attr, Attr], tuple[float, str]], defaults: Defaults,
                   where_text: str | None = None, fractions: Mapping[tuple[str, str], float] | None = None) -> Query:
    where = f"query {name}"
    stripped = text.strip()
    if not stripped:
        raise WorkloadSyntaxError(f"{where} is empty: write e.g. 'R(a), S(a,b)' or 'R.a = S.a'")
    uf = _UnionFind()
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
                if not _IDENT_RE.match(a):
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
    raise SelectivityError(
        f"{where}: no selectivity for the class {{{'='.join(str(a) for a in group)}}}; add "
        f"'{pair}: <value in (0,1]>' under selectivities, or set defaults.selectivity")


def _check_filter_consistency(queries: list[Query]) -> None:
    """Queries with the same filter on a relation must give it one pass fraction: their
    filtered stores are one store (docs/model.md §7), with one size."""
    seen: dict[tuple, tuple[float, str]] = {}
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


def _check_pair_consistency(queries: list[Query]) -> None:
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
