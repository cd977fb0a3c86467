"""A per-process cache with a stated bound: the least recently used entry leaves first.

Caches that live as long as a process (a Spark executor's Python worker serves task after
task, deployment after deployment) must not grow with every plan or file they ever saw, and an
entry that holds a resource (an open file) must release it when it leaves.  :class:`LRU` keeps
at most ``bound`` entries; ``evicted`` is called with the value of each entry that leaves,
whether pushed out by a newer one, replaced or dropped.  Not thread-safe: a caller that shares
one between threads holds its own lock around it.

>>> gone = []
>>> c = LRU(2, evicted=gone.append)
>>> c["a"] = 1; c["b"] = 2
>>> c.get("a")           # a is now the most recently used
1
>>> c["c"] = 3           # b leaves
>>> sorted(c), gone
(['a', 'c'], [2])
>>> c["a"] = 10          # a replaced: its old value leaves
>>> c.pop("c"), gone
(3, [2, 1, 3])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``bound`` entries, the least recently used (read or written) leaving first."""

    def __init__(self, bound: int, evicted: Callable[[V], object] | None = None) -> None:
        if bound < 1:
            raise ValueError(f"an LRU cache holds at least one entry, not {bound}")
        self.bound = bound
        self._evicted = evicted
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        if key not in self._items:
            return default
        self._items.move_to_end(key)
        return self._items[key]

    def __setitem__(self, key: K, value: V) -> None:
        if key in self._items:
            self._leave(self._items.pop(key))
        self._items[key] = value
        while len(self._items) > self.bound:
            self._leave(self._items.popitem(last=False)[1])

    def pop(self, key: K) -> V:
        """Drop ``key`` (it must be there); its value is evicted and returned."""
        value = self._items.pop(key)
        self._leave(value)
        return value

    def clear(self) -> None:
        while self._items:
            self._leave(self._items.popitem(last=False)[1])

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def _leave(self, value: V) -> None:
        if self._evicted is not None:
            self._evicted(value)
