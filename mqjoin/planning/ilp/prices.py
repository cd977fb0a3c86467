"""The blocks' prices kept from one solve of a coupled part to the next (incremental re-planning).

A coupled part (:mod:`mqjoin.planning.ilp.coupled`) costs most in pricing its blocks: each
block's optimum and lexicographic optimum under every combination of its shared stores'
classes.  A block's prices depend on the block alone — its columns and rows, with the shared
stores' own tie-break weights left out (:attr:`~mqjoin.planning.ilp.blocks.Part.tie`) — so a
block of the same :func:`block_keys` in a later model (one query added to or removed from the
part: every other block is as it was) has the same prices, and the same plans under them.
:func:`kept_prices` writes down what a solve priced, by name (where a column or a block stands in
the model changes between models; what it is does not), and :func:`load_prices` reads it into a
new solve's :class:`~mqjoin.planning.ilp.blocks.BlockCosts`, which then prices only the blocks it
did not find: the master over all blocks follows as in a solve from scratch, on the same prices,
so the plan is the same.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.blocks import BlockCosts, coupled_part
>>> from mqjoin.planning.ilp.model import build_model, components
>>> w = random_workload(9, 12, 4, seed=1)
>>> def part_of(workload):
...     mdl = build_model(enumerate_candidates(workload), "single")
...     return coupled_part(mdl, *max(components(mdl), key=lambda p: len(p[0])))
>>> one = part_of(w.restricted_to([q.name for q in w.queries[:8]]))
>>> costs = BlockCosts(one, deadline=None)
>>> priced = [costs.cost(k, one.chosen_by(k, t)) for k, t in one.combinations]
>>> kept = kept_prices(one, costs, block_keys(one))
>>> two = part_of(w)  # one query more
>>> again = BlockCosts(two, deadline=None)
>>> found = load_prices(two, again, kept, block_keys(two))
>>> len(two.blocks), found  # left to price: the new query's block, and those whose stores it shares
(8, 5)
>>> all(again.costs[key][0] == BlockCosts(two, deadline=None).cost(k, two.chosen_by(k, t))
...     for (k, t), key in zip(two.combinations, two.keys) if key in again.costs)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqjoin.planning.ilp.blocks import BlockCosts, Part
from mqjoin.planning.ilp.model import PartKey, part_key, same_lists

#: what a block is (:func:`block_keys`)
BlockKey = PartKey

#: a choice of a block's shared stores by content: per store of the block, the names of the
#: ``z`` columns of the class chosen (None: undecided)
Named = tuple[frozenset[str] | None, ...]


@dataclass(frozen=True)
class PricedBlock:
    """One block's prices: its columns by name (the order of the values), and per choice by
    content its optimum with its values, and its least tie-break weight at that optimum with
    the values (proven; absent where the solve did not weigh the choice)."""

    names: tuple[str, ...]
    costs: Mapping[Named, tuple[float, tuple[float, ...]]]
    ties: Mapping[Named, tuple[float, tuple[float, ...]]]


def block_keys(part: Part) -> list[BlockKey]:
    """What each block of a part is: :func:`~mqjoin.planning.ilp.model.part_key` of its
    columns and rows under the part's tie-break weights (a shared store's ``z`` weigh 0 in its
    blocks, so whether a store is shared is part of what the block is).

    The keys are kept with the model by where each block stands (its columns, rows and shared
    stores).  A model grown from this one (:func:`~mqjoin.planning.ilp.changed.extend_model`)
    keeps its columns and rows where they were and as they were (a block whose rows it wrote
    anew gained a column: :func:`~mqjoin.planning.ilp.changed.extend_model`), so a block of it
    that stands where a block stood here takes that key without reading its names again (a
    key is a set of a tuple per column and row).  So does a block of a model shrunk from this
    one (:func:`~mqjoin.planning.ilp.changed.shrink_model`) that lost no column, where its
    columns and rows stand now.

    >>> from unittest import mock
    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from mqjoin.planning.ilp import model
    >>> from mqjoin.planning.ilp.blocks import coupled_part
    >>> from mqjoin.planning.ilp.changed import extend_model
    >>> w = random_workload(9, 12, 4, seed=5)
    >>> before = enumerate_candidates(w.restricted_to([q.name for q in w.queries[:8]]))
    >>> largest = lambda mdl: coupled_part(mdl, *max(model.components(mdl), key=lambda p: len(p[0])))
    >>> with mock.patch.object(model, "STRENGTHEN_MAX_ORDERS", 0):  # (models this small are built anew)
    ...     one = model.build_model(before, "single")
    ...     keys = block_keys(largest(one))
    ...     two = extend_model(one, enumerate_candidates(w, previous=before), "single")
    >>> part = largest(two)
    >>> again = block_keys(part)
    >>> again == [model.part_key(two, b.cols, b.rows, part.tie) for b in part.blocks]
    True
    >>> sum(any(k is old for old in keys) for k in again), len(again)  # taken as they were, of all
    (6, 8)
    """
    mdl = part.mdl
    hit = mdl._keys.get("blocks before")  # (the keys of the model it was grown from, by where they stood)
    before = hit[1] if hit is not None and same_lists(hit[0], mdl.read_by_keys()) else {}
    out, where = [], {}
    for b in part.blocks:
        at = (tuple(b.cols), tuple(b.rows), b.stores)
        key = before.get(at)
        if key is None:
            key = part_key(mdl, b.cols, b.rows, part.tie)
        where[at] = key
        out.append(key)
    mdl._keys["blocks"] = (mdl.read_by_keys(), where)
    return out


def _named_classes(part: Part, k: int) -> list[dict[int, frozenset[str]]]:
    """Per store of block ``k``: the number of the steps a class serves (what
    :meth:`~mqjoin.planning.ilp.blocks.Part.key_of` writes) → the names of its ``z``."""
    names = part.mdl.names
    return [{part.served[(k, st, attrs[0])]: frozenset(names[part.shared[st][j]] for j in attrs)
             for attrs in part.classes[(k, st)]} for st in part.blocks[k].stores]


def kept_prices(part: Part, costs: BlockCosts, keys: list[BlockKey],
                known: Mapping[BlockKey, PricedBlock] | None = None) -> dict[BlockKey, PricedBlock]:
    """What ``costs`` priced of each block of the part, by its key (``keys``, :func:`block_keys`),
    with values (an enumerated block's are computed on demand and not kept: enumeration is
    cheap) and, for tie-break weights, proven.  ``known``: the prices :func:`load_prices` read
    into ``costs``; a block found there that priced nothing more keeps its prices as they were
    (the same object: every price read stays as read, and none was added)."""
    counted: dict[int, list[int]] = {}  # block → how many of its optima and its weights have values
    for key, (_, vals) in costs.costs.items():
        if vals is not None:
            counted.setdefault(key[0], [0, 0])[0] += 1
    for key, (_, vals, proven) in costs.ties.items():
        if vals is not None and proven and key[0] in counted:
            counted[key[0]][1] += 1
    out: dict[BlockKey, PricedBlock] = {}
    for k, (c, t) in counted.items():
        hit = None if not known else known.get(keys[k])
        if hit is not None and (len(hit.costs), len(hit.ties)) == (c, t):
            out[keys[k]] = hit
    by_block: dict[int, tuple[dict[Named, Any], dict[Named, Any]]] = {}
    named = [None if keys[k] in out else _named_classes(part, k) for k in range(len(part.blocks))]

    def by_name(key: tuple[Any, ...]) -> Named:
        return tuple(None if n is None else named[key[0]][p][n] for p, n in enumerate(key[1]))

    for key, (obj, vals) in costs.costs.items():
        if vals is not None and named[key[0]] is not None:
            by_block.setdefault(key[0], ({}, {}))[0][by_name(key)] = (obj, tuple(vals))
    for key, (w, vals, proven) in costs.ties.items():
        if vals is not None and proven and key[0] in by_block:
            by_block[key[0]][1][by_name(key)] = (w, tuple(vals))
    names = part.mdl.names
    out.update({keys[k]: PricedBlock(tuple(names[c] for c in part.blocks[k].cols), c, t)
                for k, (c, t) in by_block.items()})
    return out


def load_prices(part: Part, costs: BlockCosts, known: Mapping[BlockKey, PricedBlock], keys: list[BlockKey]) -> int:
    """Write into ``costs`` the prices of every block of the part found in ``known`` (by its
    key, ``keys``: :func:`block_keys`); returns how many blocks were found.  A block found has
    its key replaced in ``keys`` by the equal one of ``known``, which lives on already (the one
    computed here is dropped: a block's key holds a tuple per column and row)."""
    if not known:
        return 0
    found = 0
    names = part.mdl.names
    stored = {key: key for key in known}
    for k, b in enumerate(part.blocks):
        hit = known.get(keys[k])
        if hit is None:
            continue
        found += 1
        keys[k] = stored[keys[k]]
        moved: list[int] | None = None  # (None: the block's columns in the order they were)
        if tuple(names[c] for c in b.cols) != hit.names:
            at = {name: n for n, name in enumerate(hit.names)}
            moved = [at[names[c]] for c in b.cols]
        number = [{v: n for n, v in by.items()} for by in _named_classes(part, k)]

        def key_of(choice: Named, k: int = k, number: list[dict[frozenset[str], int]] = number) -> tuple[Any, ...]:
            return (k, tuple(None if c is None else number[p][c] for p, c in enumerate(choice)))

        # (the values as kept when the columns are in the order they were: every use copies them)
        for choice, (obj, vals) in hit.costs.items():
            costs.costs[key_of(choice)] = (obj, vals if moved is None else tuple([vals[i] for i in moved]))
        for choice, (w, vals) in hit.ties.items():
            costs.ties[key_of(choice)] = (w, vals if moved is None else tuple([vals[i] for i in moved]), True)
    return found
