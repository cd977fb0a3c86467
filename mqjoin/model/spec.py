"""The workload format (docs/model.md §1): YAML read, every key and value checked.

:func:`validate_spec` turns the YAML's plain structure into the parts of a
:class:`~mqjoin.model.workload.Workload` — relations, queries, explicit selectivities,
defaults, measured sizes, groups — or raises a typed error (:mod:`mqjoin.model.errors`) that
names the key or value at fault; :func:`read_yaml` reads the text.  The workload value builds
itself from these parts (:meth:`~mqjoin.model.workload.Workload.from_spec`).

>>> parts = validate_spec(read_yaml('''
... relations: {R: {attributes: [a], rate: 5}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.1}'''))
>>> [(r.name, r.rate) for r in parts.relations], parts.queries[0].classes[0].selectivity
([('R', 5.0), ('S', 1.0)], 0.1)
>>> validate_spec({"relations": {"R": {"attributes": ["a"], "size": 3}}})  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
mqjoin.model.errors.WorkloadSyntaxError: relation R: unknown key 'size' (allowed: attributes, rate, window, parallelism,
node)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from mqjoin.model.errors import FilterError, SelectivityError, ValueRangeError, WorkloadSyntaxError
from mqjoin.model.queries import (IDENT, IDENT_RE, Defaults, Query, Relation, as_number, check_filter_consistency,
                                   check_pair_consistency, parse_selectivity_key, resolve_query)
from mqjoin.model.schema import Attr
from mqjoin.model.sizes import MeasuredSize, resolve_sizes, size_entries


@dataclass(frozen=True)
class WorkloadParts:
    """A checked workload, before it is a value: the fields of a ``Workload`` and its groups."""

    relations: tuple[Relation, ...]
    queries: tuple[Query, ...]
    selectivities: tuple[tuple[tuple[Attr, Attr], float], ...]
    defaults: Defaults
    sizes: tuple[MeasuredSize, ...]
    groups: tuple[tuple[Any, ...], ...]


def read_yaml(text: str) -> dict[str, Any]:
    """The plain structure of YAML ``text``, a mapping; a :class:`WorkloadSyntaxError` says
    where the text is not YAML or that it is not a mapping."""
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
    return data


DEFAULT_KEYS = ("rate", "window", "parallelism", "selectivity", "horizon")


RELATION_KEYS = ("attributes", "rate", "window", "parallelism", "node")


_TOP_KEYS = ("defaults", "relations", "queries", "selectivities", "filters", "groups", "sizes")


_QUERY_KEYS = ("join", "where")


def _positive_rate(value: Any, what: str) -> float:
    v = as_number(value, what)
    if not (v > 0) or math.isinf(v):
        raise ValueRangeError(f"{what} must be a positive finite number, got {value!r}")
    return v


def _window(value: Any, what: str) -> float | None:
    if value is None:
        return None
    v = as_number(value, what)
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
    if not isinstance(value, str) or not IDENT_RE.match(value):
        raise WorkloadSyntaxError(f"{what} must be a name such as n1 (letters, digits, _), got {value!r}")
    return value


def _selectivity(value: Any, what: str) -> float:
    v = as_number(value, what)
    if not (0 < v <= 1):
        raise SelectivityError(f"{what} must lie in (0, 1], got {value!r}")
    return v


def check_keys(d: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Raise :class:`WorkloadSyntaxError` naming the first key of ``d`` not in ``allowed``."""
    for k in d:
        if k not in allowed:
            raise WorkloadSyntaxError(f"{where}: unknown key {k!r} (allowed: {', '.join(allowed)})")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WorkloadSyntaxError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def validate_spec(data: Mapping[str, Any]) -> WorkloadParts:
    """The parts of the workload ``data`` describes (the YAML's structure), every key and
    value checked: a typed error names the culprit and the fix."""
    check_keys(data, _TOP_KEYS, "workload")
    dspec = _mapping(data.get("defaults"), "defaults")
    check_keys(dspec, DEFAULT_KEYS, "defaults")
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
        if not IDENT_RE.match(name):
            raise WorkloadSyntaxError(f"relation name {name!r} is not an identifier (letters, digits, _)")
        r = _mapping(r, f"relation {name}")
        check_keys(r, RELATION_KEYS, f"relation {name}")
        attrs = r.get("attributes")
        if not isinstance(attrs, (list, tuple)) or not attrs:
            raise WorkloadSyntaxError(f"relation {name}: 'attributes' must be a non-empty list of names")
        attrs = tuple(str(a) for a in attrs)
        for a in attrs:
            if not IDENT_RE.match(a) or a == "ts":
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
        for pair in parse_selectivity_key(key, by_name):
            if pair in explicit and explicit[pair][0] != v:
                raise SelectivityError(
                    f"selectivities {explicit[pair][1]!r} ({explicit[pair][0]}) and {key!r} ({v}) "
                    f"give different values for {pair[0]} = {pair[1]}; keep one")
            explicit[pair] = (v, key)

    qspec = _mapping(data.get("queries"), "queries")
    texts: dict[str, tuple[str, str | None]] = {}
    for qname, text in qspec.items():
        qname = str(qname)
        if not IDENT_RE.match(qname):
            hint = (" — in a {...} flow mapping, quote a query that contains commas: q1: \"R(a), S(a)\""
                    if text is None else "")
            raise WorkloadSyntaxError(f"query name {qname!r} is not an identifier (letters, digits, _){hint}")
        texts[qname] = _query_texts(qname, text)
    fractions = _filter_fractions(_mapping(data.get("filters"), "filters"), texts)
    queries = [resolve_query(n, j, by_name, explicit, defaults, w, fractions) for n, (j, w) in texts.items()]

    check_pair_consistency(queries)
    check_filter_consistency(queries)
    sel = tuple(sorted(((pair, v) for pair, (v, _) in explicit.items()), key=lambda t: t[0]))
    groups = data.get("groups") or ()
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise WorkloadSyntaxError(f"groups must be a list of lists of query names, got {groups!r}")
    entries = size_entries(_mapping(data.get("sizes"), "sizes"), by_name)
    sizes = resolve_sizes(entries, queries, strict=True)[0]
    return WorkloadParts(tuple(relations), tuple(queries), sel, defaults, sizes, tuple(tuple(g) for g in groups))


def _query_texts(name: str, value: Any) -> tuple[str, str | None]:
    """A query's ``join`` text and ``where`` text (``None``: no filter) from its YAML value."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, Mapping):
        check_keys(value, _QUERY_KEYS, f"query {name}")
        join, where = value.get("join"), value.get("where")
        if not isinstance(join, str):
            raise WorkloadSyntaxError(f"query {name}: 'join' must be a string such as 'R(a), S(a,b)', got {join!r}")
        if where is not None and not isinstance(where, str):
            raise FilterError(f"query {name}: 'where' must be a string such as 'R.x < 10', got {where!r}")
        return join, where
    raise WorkloadSyntaxError(
        f"query {name}: expected a string such as 'R(a), S(a,b)' or 'R.a = S.a', or a mapping "
        f"{{join: ..., where: ...}}, got {value!r}")


def _filter_fractions(spec: Mapping[str, Any], texts: Mapping[str, tuple[str, str | None]]) -> dict[tuple[str, str],
                                                                                                    float]:
    """``filters: {q4.V: 0.2}`` → {(query, relation): pass fraction}, checked."""
    out = {}
    for key, value in spec.items():
        m = re.fullmatch(rf"\s*({IDENT})\s*\.\s*({IDENT})\s*", str(key))
        if not m:
            raise FilterError(f"filters: {str(key)!r} is not a key like 'q4.V' (query.relation)")
        if m.group(1) not in texts:
            raise FilterError(f"filters: {key!r} names query {m.group(1)!r}, which does not exist")
        if texts[m.group(1)][1] is None:
            raise FilterError(f"filters: {key!r} gives a pass fraction, but query {m.group(1)} has no filter")
        v = as_number(value, f"pass fraction of {key!r}")
        if not (0 < v <= 1):
            raise FilterError(f"pass fraction of {key!r} must lie in (0, 1], got {value!r}")
        out[m.group(1), m.group(2)] = v
    return out
