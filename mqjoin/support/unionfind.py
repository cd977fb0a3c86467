"""Disjoint sets (union-find): which items end up linked when pairs of them are.

One rule for every grouping of the package — attributes into equivalence classes, relations
into connected components, classes into selectivity groups, ILP columns into independent
blocks.  The groups (each sorted, ordered by their smallest item) depend on the links only;
a set's root is the root of the first argument's set when two are linked, so the roots too
are the same for the same links in the same order.

>>> uf = UnionFind("abcde")
>>> uf.union("d", "b"), uf.union("e", "d")
('d', 'e')
>>> uf.find("b"), uf.groups()
('e', [['a'], ['b', 'd', 'e'], ['c']])
"""

from __future__ import annotations

from typing import Any, Generic, Iterable, Protocol, TypeVar


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


T = TypeVar("T", bound=_Ordered)


class UnionFind(Generic[T]):
    """Disjoint sets of ordered, hashable items; :meth:`find` adds an item it has not seen."""

    __slots__ = ("_parent",)

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._parent: dict[T, T] = {x: x for x in items}

    def add(self, x: T) -> None:
        self._parent.setdefault(x, x)

    def find(self, x: T) -> T:
        """The root of ``x``'s set."""
        parent = self._parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    def union(self, a: T, b: T) -> T:
        """Link the sets of ``a`` and ``b``; their root, ``a``'s."""
        ra, rb = self.find(a), self.find(b)
        if rb != ra:
            self._parent[rb] = ra
        return ra

    def link(self, items: Iterable[T]) -> None:
        """Link every item of ``items`` into the set of the first (and add them)."""
        it = iter(items)
        for first in it:
            root, parent = self.find(first), self._parent
            for x in it:
                rx = self.find(x)
                if rx != root:
                    parent[rx] = root

    def roots(self) -> dict[T, T]:
        """Every item → its root, in the order the items were added."""
        return {x: self.find(x) for x in list(self._parent)}

    def groups(self) -> list[list[T]]:
        """The sets, each sorted, ordered by their smallest item."""
        out: dict[T, list[T]] = {}
        for x, r in self.roots().items():
            out.setdefault(r, []).append(x)
        return sorted((sorted(v) for v in out.values()), key=lambda v: v[0])
