"""Workloads: relations, queries, equivalence classes and statistics (docs/model.md §1).

A workload is an immutable value.  Build one from YAML (:func:`load_workload`,
:func:`parse_workload`) or from Python values (:meth:`Workload.build`); every edit
(:meth:`Workload.with_relation`, :meth:`Workload.with_selectivity`, …) returns a new,
re-validated workload.

Join sizes come from rates and one selectivity per class, as if the classes were independent
(:func:`~mqjoin.model.sizes.independent_size`), unless the workload gives a **measured size** of the set under
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
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from mqjoin.model.errors import (
    MissingFractionError,
    UnknownRelationError,
    ValueRangeError,
    WorkloadError,
)

from mqjoin.model.filters import Selection
from mqjoin.model.queries import (Defaults, Query, Relation, as_number, parse_attr_ref, parse_selectivity_key)
from mqjoin.model.sizes import (MeasuredSize, independent_size, arrival_split, rehome, resolve_sizes, size_error,
                                size_key, size_targets)
from mqjoin.model.schema import Attr, JoinClass, components, is_connected, iter_pairs, restrict_classes
from mqjoin.model.spec import DEFAULT_KEYS, RELATION_KEYS, check_keys, read_yaml, validate_spec

__all__ = ["Attr", "JoinClass", "Defaults", "MeasuredSize", "Query", "Relation", "Workload", "components",
           "is_connected", "iter_pairs", "load_workload", "parse_attr_ref", "parse_workload", "restrict_classes"]



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
            "defaults": {k: getattr(d, k) for k in DEFAULT_KEYS},
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
                    sizes[m.key] = m.spec
                else:
                    sizes.setdefault(m.query, {})[m.key] = m.spec
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
        for old in self.sizes:
            m = rehome(old, self._queries_by_name, new._queries_by_name)
            if m is None:
                continue
            old_key, old_classes, old_sel = size_targets(m, self._queries_by_name)[0]
            new_key, new_classes, new_sel = size_targets(m, new._queries_by_name)[0]
            if old_key != new_key:
                continue
            ratio = (independent_size(new, m.relations, new_classes, new_sel)
                     / independent_size(self, m.relations, old_classes, old_sel))
            moved.append(replace(m, value=m.value * ratio))
        return replace(new, sizes=resolve_sizes(moved, new.queries, strict=False)[0])

    def with_relation(self, name: str, **changes: Any) -> "Workload":
        """Change ``rate``, ``window``, ``parallelism``, ``attributes`` or ``node`` of one relation.

        >>> w = Workload.build({"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}},
        ...                    {"q": "R(a), S(a)"}, defaults={"selectivity": 0.1})
        >>> w.with_relation("R", rate=5).rate("R")
        5.0
        """
        self.relation(name)
        spec = self.to_spec()
        check_keys(changes, RELATION_KEYS, f"relation {name}")
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
        new_pairs = set(parse_selectivity_key(equality, self._relations_by_name))
        spec["selectivities"] = {
            k: v for k, v in spec["selectivities"].items()
            if not set(parse_selectivity_key(k, self._relations_by_name)) & new_pairs
        }
        spec["selectivities"][equality] = value
        return self.respecified(spec)

    def with_query(self, name: str, text: str | Mapping[str, str], fractions: Mapping[str, float]
                   | None = None) -> "Workload":
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
        and query replaces the given one (keeping its order of arrival when the new one has
        none: a run measures sizes, not which relation arrives last; the error is the new one's,
        0 for a run's exact count).  ``strict``: a size that
        does not apply is a typed error, otherwise it is left out (e.g. sizes a run measured
        for a changed workload).

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
            v = as_number(m.value, f"sizes: {m.key!r}: the size")
            if not (v > 0) or math.isinf(v):
                raise ValueRangeError(f"sizes: {m.key!r}: the size must be a positive finite number of tuples "
                                      f"per time unit, got {m.value!r}")
            rels = tuple(sorted(set(m.relations), key=order.index))
            where = f"sizes: {m.query + ': ' if m.query else ''}{m.key!r}"
            last = arrival_split(where, dict(m.last), rels, order) if m.last else \
                getattr(merged.get((m.query, frozenset(rels))), "last", ())
            error = size_error(where, m.error) if m.error else 0.0
            merged[m.query, frozenset(rels)] = MeasuredSize(m.query, rels, v, last, error)
        return replace(self, sizes=resolve_sizes(merged.values(), self.queries, strict)[0])

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
                    raise MissingFractionError(
                        f"query {q.name}: no pass fraction for the filter on {f.relation}; add 'filters: "
                        f"{{{q.name}.{f.relation}: <value in (0,1]>}}' or estimate it from data with 'mqjoin stats'",
                        q.name, f.relation)
            members = [self.query(n) for n in self.group_of(q.name)]
            for r in q.relations:
                filters = [m.filter_of(r) for m in members if r in m.relation_set]
                kept = [f for f in filters if f is not None]
                out[q.name, r] = None if len(kept) < len(filters) else Selection.union(kept)
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
        """The workload with the defaults in ``changes`` (keys of ``defaults:`` in YAML).

        A workload value keeps each relation's resolved rate and window, not whether they came
        from the defaults, so a new ``rate`` or ``window`` applies to every relation.  A new
        ``parallelism`` is that of the MIR stores (each relation keeps its own: use
        :meth:`with_relation`), a new ``selectivity`` that of the classes the workload gives
        none, and ``horizon`` the workload's.

        >>> w = Workload.from_spec({"relations": {"R": {"attributes": ["a"], "rate": 5, "parallelism": 2},
        ...     "S": {"attributes": ["a"]}}, "queries": {"q": "R(a), S(a)"},
        ...     "defaults": {"selectivity": 0.1}})
        >>> v = w.with_defaults(rate=40, window=0.3, parallelism=8)
        >>> [(r.name, r.rate, r.window, r.parallelism) for r in v.relations], v.defaults.parallelism
        ([('R', 40.0, 0.3, 2), ('S', 40.0, 0.3, 1)], 8)
        """
        spec = self.to_spec()
        check_keys(changes, DEFAULT_KEYS, "defaults")
        spec["defaults"].update(changes)
        for relation in spec["relations"].values():
            for key in ("rate", "window"):
                if key in changes:
                    relation.pop(key, None)
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
                       sizes=resolve_sizes([r for m in self.sizes if (r := rehome(m, self._queries_by_name, {
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
    def _size_lookup(self) -> dict[tuple[Any, ...], MeasuredSize]:
        return resolve_sizes(self.sizes, self.queries, strict=False)[1]

    def _measured(self, relations: frozenset[str], classes: Iterable[JoinClass],
                  selection: tuple["Selection", ...]) -> tuple[MeasuredSize | None, bool]:
        """The measured size of the join (``None``: none) and whether it was measured with
        exactly ``selection`` (else it is the unfiltered join's)."""
        if not self.sizes:
            return None, True
        lookup = self._size_lookup
        key = size_key(relations, classes, selection)
        if key in lookup:
            return lookup[key], True
        return (lookup.get(key[:2] + ((),)), False) if key[2] else (None, True)

    def same_sizes(self, other: "Workload") -> bool:
        """Whether every measured size (docs/model.md §2) reads the same in ``other``: the same
        sizes, matched to the same joins (an unfiltered size applies to every query that joins
        its set, so the queries decide which joins it is found under).

        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
        ... queries: {q: "R(a), S(a)"}
        ... selectivities: {R.a = S.a: 0.1}
        ... sizes: {R ⋈ S: 40}''')
        >>> w.same_sizes(w.with_relation("R", rate=2)), w.same_sizes(w.with_sizes([], strict=False))
        (False, True)
        """
        return self.sizes == other.sizes and (not self.sizes or self._size_lookup == other._size_lookup)

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
        rels = frozenset(relations)
        selection = tuple(selection)
        m, exact = self._measured(rels, classes, selection)
        if m is None:
            return None
        value = m.value
        if not exact:
            for sel in selection:
                if sel.relation in rels:
                    value *= sel.fraction
        return value

    def size_error(self, relations: Iterable[str], classes: Iterable[JoinClass],
                   selection: Iterable["Selection"] = ()) -> float:
        """The relative standard error of the measured size of the join (docs/model.md §2; a
        size scaled by pass fractions keeps it), 0 when the size was counted exactly or none is
        given (the independence estimate has no sampling error).

        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
        ... queries: {q: "R(a), S(a), T(a)"}
        ... selectivities: {R.a = S.a: 0.1}
        ... sizes: {R ⋈ S: {size: 40, error: 0.03}, S ⋈ T: 12}''')
        >>> c = w.query("q").classes
        >>> w.size_error({"R", "S"}, c), w.size_error({"S", "T"}, c), w.size_error({"R", "T"}, c)
        (0.03, 0.0, 0.0)
        """
        m, _ = self._measured(frozenset(relations), classes, tuple(selection))
        return 0.0 if m is None else m.error

    def arrival_share(self, relations: Iterable[str], classes: Iterable[JoinClass],
                      selection: Iterable["Selection"], start: str) -> float | None:
        """The measured share of ``⋈relations``' results whose last tuple is ``start``'s
        (the ``last`` of its measured size, docs/model.md §2; a filter keeps the unfiltered
        join's split), ``None`` when none is given.

        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
        ... queries: {q: "R(a), S(a)"}
        ... selectivities: {R.a = S.a: 0.1}
        ... sizes: {R ⋈ S: {size: 40, last: {R: 0.2, S: 0.8}}}''')
        >>> w.arrival_share({"R", "S"}, w.query("q").classes, (), "S")
        0.8
        """
        m, _ = self._measured(frozenset(relations), classes, tuple(selection))
        return m.share(start) if m is not None and m.last else None

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



def parse_workload(text: str) -> Workload:
    """Parse a workload from YAML text (docs/model.md §1)."""
    return _build(read_yaml(text))


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


def _build(data: Mapping[str, Any]) -> Workload:
    """The workload ``data`` describes, checked (:func:`~mqjoin.model.spec.validate_spec`)."""
    p = validate_spec(data)
    return Workload(p.relations, p.queries, p.selectivities, p.defaults, sizes=p.sizes).with_groups(p.groups)
