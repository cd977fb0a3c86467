"""The atoms of a workload: attributes and equivalence classes (the classes a query's
equalities form), with the graph helpers every stage uses on them (restriction to a set of
relations, connected components).

A class holds every attribute its query equates, so ``R.a = S.a AND S.a = T.a`` is one class
of three members; a set of relations is *connected* when the classes link all of them.

>>> c = JoinClass.of([Attr("S", "b"), Attr("R", "b"), Attr("T", "b")], 0.1)
>>> c, c.count_in({"R", "T"})
({R.b=S.b=T.b}, 2)
>>> is_connected({"R", "U"}, [c])
False
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Iterator

from mqjoin.support.unionfind import UnionFind


@dataclass(frozen=True, order=True)
class Attr:
    """An attribute ``relation.name``.

    >>> Attr("R", "a")
    R.a
    """

    relation: str
    name: str

    def __str__(self) -> str:
        return f"{self.relation}.{self.name}"

    __repr__ = __str__


@dataclass(frozen=True)
class JoinClass:
    """An equivalence class of attributes that a query equates, with its selectivity ``s_c``.

    Members are sorted, so equal classes compare equal.

    >>> c = JoinClass.of([Attr("S", "a"), Attr("R", "a")], 0.01)
    >>> c
    {R.a=S.a}
    >>> sorted(c.relations)
    ['R', 'S']
    >>> c.restrict({"R", "T"}) is None
    True
    """

    members: tuple[Attr, ...]
    selectivity: float

    @staticmethod
    def of(members: Iterable[Attr], selectivity: float) -> "JoinClass":
        return JoinClass(tuple(sorted(set(members))), float(selectivity))

    @cached_property
    def relations(self) -> frozenset[str]:
        return frozenset(a.relation for a in self.members)

    def member_of(self, relation: str) -> Attr | None:
        """The member of ``relation`` (a class has at most one per relation)."""
        for a in self.members:
            if a.relation == relation:
                return a
        return None

    def count_in(self, relations: Iterable[str]) -> int:
        """``k_c(P)``: how many relations of ``relations`` have a member in this class."""
        rels = relations if isinstance(relations, (set, frozenset)) else set(relations)
        return sum(1 for a in self.members if a.relation in rels)

    def restrict(self, relations: Iterable[str]) -> "JoinClass | None":
        """The class restricted to ``relations``; ``None`` when fewer than two members remain."""
        rels = relations if isinstance(relations, (set, frozenset)) else set(relations)
        kept = tuple(a for a in self.members if a.relation in rels)
        if len(kept) < 2:
            return None
        return JoinClass(kept, self.selectivity)

    def __str__(self) -> str:
        return "{" + "=".join(str(a) for a in self.members) + "}"

    __repr__ = __str__


def restrict_classes(classes: Iterable[JoinClass], relations: Iterable[str]) -> tuple[JoinClass, ...]:
    """Restrict every class to ``relations``, dropping classes left with fewer than two members.

    >>> cs = (JoinClass.of([Attr("R", "b"), Attr("S", "b")], .1), JoinClass.of([Attr("S", "c"), Attr("T", "c")], .1))
    >>> restrict_classes(cs, {"S", "T"})
    ({S.c=T.c},)
    """
    rels = frozenset(relations)
    out = []
    for c in classes:
        r = c.restrict(rels)
        if r is not None:
            out.append(r)
    return tuple(sorted(out, key=lambda c: c.members))


def components(relations: Iterable[str], classes: Iterable[JoinClass]) -> list[list[str]]:
    """The connected components of ``relations`` joined through ``classes`` (sorted).

    >>> cs = (JoinClass.of([Attr("R", "b"), Attr("S", "b")], .1),)
    >>> components(["T", "S", "R"], cs)
    [['R', 'S'], ['T']]
    """
    rels = set(relations)
    uf = UnionFind(rels)
    for c in classes:
        uf.link(r for r in c.relations if r in rels)
    return uf.groups()


def is_connected(relations: Iterable[str], classes: Iterable[JoinClass]) -> bool:
    """Whether ``relations`` form one component when joined through ``classes``.

    >>> cs = (JoinClass.of([Attr("R", "b"), Attr("S", "b")], .1), JoinClass.of([Attr("S", "c"), Attr("T", "c")], .1))
    >>> is_connected({"R", "T"}, cs), is_connected({"R", "S", "T"}, cs)
    (False, True)
    """
    return len(components(relations, classes)) == 1


def iter_pairs(members: tuple[Attr, ...]) -> Iterator[tuple[Attr, Attr]]:
    """All pairs ``(members[i], members[j])`` with ``i < j``."""
    for i in range(len(members)):
        for j in range(i + 1, len(members)):
            yield members[i], members[j]
