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


def find_root(parent: Any, x: Any) -> Any:
    """The root of ``x`` in ``parent`` (a dict, or a list for the items 0 … n − 1: item → its
    parent, a root its own), halving the path on the way."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]  # path halving
        x = parent[x]
    return x


def link_rows(parent: Any, rows: Iterable[Iterable[Any]]) -> None:
    """Link the items of each row into the set of the row's first, in ``parent`` (as
    :func:`find_root`; every item already in it).  The loops are written out: an ILP model's
    rows are many.

    >>> parent = list(range(4))
    >>> link_rows(parent, [[0, 2], [3, 2]]); [find_root(parent, x) for x in range(4)]
    [3, 1, 3, 3]
    """
    for idx in rows:
        it = iter(idx)
        for first in it:
            root = first
            while parent[root] != root:
                parent[root] = parent[parent[root]]
                root = parent[root]
            for x in it:
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                if x != root:
                    parent[x] = root


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
        self._parent.setdefault(x, x)
        root: T = find_root(self._parent, x)
        return root

    def union(self, a: T, b: T) -> T:
        """Link the sets of ``a`` and ``b``; their root, ``a``'s."""
        ra, rb = self.find(a), self.find(b)
        if rb != ra:
            self._parent[rb] = ra
        return ra

    def link(self, items: Iterable[T]) -> None:
        """Link every item of ``items`` into the set of the first (and add them)."""
        row = list(items)
        for x in row:
            self._parent.setdefault(x, x)
        link_rows(self._parent, (row,))

    def roots(self) -> dict[T, T]:
        """Every item → its root, in the order the items were added."""
        return {x: self.find(x) for x in list(self._parent)}

    def groups(self) -> list[list[T]]:
        """The sets, each sorted, ordered by their smallest item."""
        out: dict[T, list[T]] = {}
        for x, r in self.roots().items():
            out.setdefault(r, []).append(x)
        return sorted((sorted(v) for v in out.values()), key=lambda v: v[0])
