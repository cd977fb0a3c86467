"""Selections (query filters, docs/model.md §7): comparisons of one relation's attribute with constants.

A query's ``where`` text is a conjunction of comparisons (``=``, ``!=``, ``<``, ``<=``, ``>``,
``>=``, ``IN (...)``, ``BETWEEN … AND …``).  :func:`parse_where` splits it into one
:class:`Filter` per relation; a filter holds the pass fraction ``f`` of docs/model.md §7.

A store keeps, of each relation, the tuples of a :class:`Selection`: the filter of the query
that owns it, or — for a query group (AJoin) — the union of its members' filters, paid at
``f_G = 1 − Π(1 − f_q)`` (independence).

>>> from mqjoin.model.workload import Relation
>>> rels = {"V": Relation("V", ("a", "x"), 1.0, None, 1), "W": Relation("W", ("a", "b", "y"), 1.0, None, 1)}
>>> fs = parse_where("V.x < 10 AND W.y IN (1, 2) AND V.x BETWEEN 0 AND 5", rels, "query q4")
>>> [str(f) for f in fs]
['V.x < 10 AND V.x BETWEEN 0 AND 5', 'W.y IN (1, 2)']
>>> fs[0].passes({"x": 3}), fs[0].passes({"x": 7}), fs[0].passes({"x": None})
(True, False, False)
>>> s = Selection.union([fs[1].with_fraction(0.2), Filter("W", (Comparison(Attr("W", "y"), "=", (7,)),), 0.5)])
>>> str(s), round(s.fraction, 2)
('W.y = 7 OR W.y IN (1, 2)', 0.6)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping

from mqjoin.model.errors import FilterError, UnknownAttributeError, UnknownRelationError
from mqjoin.model.schema import Attr

#: comparison operators and the predicate each stands for (``v`` read value, ``c`` constants)
_OPS: dict[str, Callable[[Any, tuple[Any, ...]], Any]] = {
    "=": lambda v, c: v == c[0],
    "!=": lambda v, c: v != c[0],
    "<": lambda v, c: v < c[0],
    "<=": lambda v, c: v <= c[0],
    ">": lambda v, c: v > c[0],
    ">=": lambda v, c: v >= c[0],
    "IN": lambda v, c: v in c,
    "BETWEEN": lambda v, c: c[0] <= v <= c[1],
}

_CONST = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|'[^']*'|\"[^\"]*\""
_ATTR = r"([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)"
_COMPARISON = re.compile(
    rf"\s*{_ATTR}\s*(?:"
    rf"(?P<op><=|>=|!=|<>|=|<|>)\s*(?P<c>{_CONST})"
    rf"|(?i:IN)\s*\((?P<list>\s*(?:{_CONST})(?:\s*,\s*(?:{_CONST}))*)\s*\)"
    rf"|(?i:BETWEEN)\s+(?P<lo>{_CONST})\s+(?i:AND)\s+(?P<hi>{_CONST})"
    rf")\s*")
_AND = re.compile(r"(?i:AND)\b")


def _constant(text: str) -> Any:
    if text[0] in "'\"":
        return text[1:-1]
    number = float(text)
    return int(number) if re.fullmatch(r"-?\d+", text) else number


def _render_constant(c: Any) -> str:
    return f"'{c}'" if isinstance(c, str) else repr(c)


@dataclass(frozen=True)
class Comparison:
    """One comparison ``attr op constants`` (one constant, two for ``BETWEEN``, a list for ``IN``).

    >>> c = Comparison(Attr("V", "x"), "<", (10,))
    >>> c, c.holds(3), c.holds("a"), c.holds(None)
    (V.x < 10, True, False, False)
    """

    attr: Attr
    op: str
    constants: tuple[Any, ...]

    def holds(self, value: Any) -> bool:
        """Whether a read value passes (SQL semantics: nulls and incomparable types do not)."""
        if value is None:
            return False
        try:
            return bool(_OPS[self.op](value, self.constants))
        except TypeError:
            return False

    def __str__(self) -> str:
        cs = [_render_constant(c) for c in self.constants]
        if self.op == "IN":
            return f"{self.attr} IN ({', '.join(cs)})"
        if self.op == "BETWEEN":
            return f"{self.attr} BETWEEN {cs[0]} AND {cs[1]}"
        return f"{self.attr} {self.op} {cs[0]}"

    __repr__ = __str__


@dataclass(frozen=True)
class Filter:
    """A query's filter on one relation: a conjunction of comparisons and its pass fraction
    ``f`` (``None`` until given or estimated)."""

    relation: str
    comparisons: tuple[Comparison, ...]
    fraction: float | None = None

    def passes(self, values: Mapping[str, Any]) -> bool:
        """Whether a tuple (attribute name → value) passes every comparison."""
        return all(c.holds(values.get(c.attr.name)) for c in self.comparisons)

    def with_fraction(self, fraction: float) -> "Filter":
        return replace(self, fraction=float(fraction))

    def __str__(self) -> str:
        return " AND ".join(map(str, self.comparisons))

    __repr__ = __str__


@dataclass(frozen=True)
class Selection:
    """The tuples of ``relation`` a store keeps: those passing any of ``filters`` (one filter,
    or a query group's union), with the pass fraction ``f`` the cost model uses."""

    relation: str
    filters: tuple[tuple[Comparison, ...], ...]
    fraction: float

    @staticmethod
    def union(filters: Iterable[Filter]) -> "Selection":
        """The union of filters on one relation, ``f_G = 1 − Π(1 − f_q)`` over distinct filters."""
        filters = list(filters)
        distinct: dict[tuple[Comparison, ...], float] = {}
        for f in filters:
            distinct.setdefault(f.comparisons, f.fraction if f.fraction is not None else 1.0)
        miss = 1.0
        for frac in distinct.values():
            miss *= 1.0 - frac
        return Selection(filters[0].relation, tuple(sorted(distinct, key=lambda cs: [str(c) for c in cs])), 1.0 - miss)

    def passes(self, values: Mapping[str, Any]) -> bool:
        return any(all(c.holds(values.get(c.attr.name)) for c in cs) for cs in self.filters)

    @property
    def key(self) -> tuple[Any, ...]:
        """Identity without the fraction (containers of plans optimised on other statistics)."""
        return (self.relation, self.filters)

    def __str__(self) -> str:
        return " OR ".join(" AND ".join(map(str, cs)) for cs in self.filters)

    __repr__ = __str__


def sql_literal(text: str) -> str:
    """A SQL string literal.

    >>> print(sql_literal("it's"))
    'it\\'s'
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_condition(conjunctions: Iterable[tuple[Comparison, ...]], column: Callable[[Attr], str],
                  is_string: Callable[[Attr], bool]) -> str:
    """Spark SQL for a disjunction of conjunctions, with the semantics of
    :meth:`Comparison.holds`: a constant of the other kind (a string against a number column
    or the reverse) never equals or orders with a value — only ``!=`` holds, for non-null values.

    >>> c = (Comparison(Attr("W", "y"), "IN", (1, "z")), Comparison(Attr("W", "k"), "!=", ("a",)))
    >>> sql_condition([c], lambda a: f"t.{a.name}", lambda a: False)
    '(((t.y IN (1)) AND (t.k IS NOT NULL)))'
    """
    def literal(v: Any) -> str:
        return sql_literal(v) if isinstance(v, str) else repr(v)

    def one(c: Comparison) -> str:
        col, string = column(c.attr), is_string(c.attr)
        kept = [v for v in c.constants if isinstance(v, str) == string]
        if c.op == "!=":
            return f"{col} != {literal(c.constants[0])}" if kept else f"{col} IS NOT NULL"
        if c.op == "IN":
            return f"{col} IN ({', '.join(map(literal, kept))})" if kept else "false"
        if len(kept) < len(c.constants):
            return "false"
        if c.op == "BETWEEN":
            return f"{col} BETWEEN {literal(kept[0])} AND {literal(kept[1])}"
        return f"{col} {c.op} {literal(kept[0])}"

    return "(" + " OR ".join("(" + " AND ".join(f"({one(c)})" for c in conj) + ")" for conj in conjunctions) + ")"


def parse_where(text: str, relations: Mapping[str, Any], where: str) -> tuple[Filter, ...]:
    """The filters of a ``where`` text, one per relation (sorted by relation), comparisons in
    the order written.  ``relations``: name → declared relation (with ``attributes``)."""
    pos, found = 0, []
    text = text.strip()
    if not text:
        raise FilterError(f"{where}: the filter is empty; write e.g. 'V.x < 10 AND W.y IN (1, 2)'")
    while True:
        m = _COMPARISON.match(text, pos)
        if not m:
            raise FilterError(
                f"{where}: cannot read the filter at {text[pos:].strip()!r}; write comparisons of an "
                f"attribute with constants joined by AND (=, !=, <, <=, >, >=, IN (...), BETWEEN … AND …)")
        rel, att = m.group(1), m.group(2)
        if rel not in relations:
            raise UnknownRelationError(f"{where}: the filter names relation {rel!r}, which is not declared "
                                       f"(declared: {', '.join(relations)})")
        if att not in relations[rel].attributes:
            raise UnknownAttributeError(f"{where}: the filter names {rel}.{att}, but relation {rel} has no "
                                        f"attribute {att!r} (its attributes: {', '.join(relations[rel].attributes)})")
        if m.group("op"):
            op = "!=" if m.group("op") == "<>" else m.group("op")
            consts: tuple[Any, ...] = (_constant(m.group("c")),)
        elif m.group("list"):
            op, consts = "IN", tuple(_constant(c) for c in re.findall(_CONST, m.group("list")))
        else:
            op, consts = "BETWEEN", (_constant(m.group("lo")), _constant(m.group("hi")))
        found.append(Comparison(Attr(rel, att), op, consts))
        pos = m.end()
        if pos == len(text):
            break
        a = _AND.match(text, pos)
        if not a:
            raise FilterError(f"{where}: expected AND before {text[pos:].strip()!r} (a filter is a conjunction)")
        pos = a.end()
    by_rel: dict[str, list[Comparison]] = {}
    for c in found:
        by_rel.setdefault(c.attr.relation, []).append(c)
    return tuple(Filter(r, tuple(cs)) for r, cs in sorted(by_rel.items()))
