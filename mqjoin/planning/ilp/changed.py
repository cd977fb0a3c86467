"""The model after a change of the workload, made from the model before instead of built.

A re-plan (:func:`mqjoin.planning.optimizer.replan`) has the model of the solve before.  Where
the change only added queries, :func:`extend_model` grows it: its columns and rows stay where
they were and the new ones come after them.  Where it only removed queries,
:func:`shrink_model` takes from it what went.  Either way the model is the one
:func:`~mqjoin.planning.ilp.model.build_model` gives (the same columns and rows by name, so the
same canonical plan), sooner; either gives None where it cannot be (other changes, policy
``budget``, budgets, small models with group broadcast rows, or a choice that the build would
name otherwise), and the caller builds.  What the model before knew of its links and of its
blocks' keys goes over to the new one where it still holds.
"""

from __future__ import annotations

import re
import time

from mqjoin.planning.candidates import MIR, Candidates, Step
from mqjoin.planning.ilp.model import (Model, Names, Row, broadcast_rows, hashed_weight, order_rows, plain_roots,
                                       same_lists, strengthened)
from mqjoin.planning.options import BUDGET


def extend_model(before: Model, cands: Candidates, policy: str = "single", mir_budget: float | None = None,
                 replica_budget: float | None = None) -> Model | None:
    """The model of ``cands`` made from ``before`` (a re-plan after queries were added), or
    None where ``cands`` do more than add to ``before.candidates``: then :func:`build_model`.

    Every owner before must be there with the same probe orders and steps (the same objects,
    as :func:`~mqjoin.planning.candidates.enumerate_candidates` keeps them from ``previous``),
    every step at the same cost, every store at the same parallelism with at least its
    partition candidates.  The model then holds ``before``'s columns and rows where they were;
    the new owners', steps' and MIRs' columns and rows come after them, and the stores that
    gained a partition candidate have their choice and their steps' broadcast rows written
    anew.  It is the model :func:`build_model` gives, in another order: the same columns and
    rows by name, so the same canonical plan.  (Names are made unique in the order they are
    made, so the owners before must keep their order.  A new name that was taken gets a suffix
    after the names before, where the build numbers such names by where they stand: a
    choice's name makes its tie-break weight, so where a choice would be named otherwise than
    by the build this gives None (:func:`_named_as_built`); a step's column or a row may be
    numbered otherwise, a model alike but for those suffixes.)  Its links without ``z``
    (:func:`plain_links`) are ``before``'s extended.  Policy ``budget``, a MIR budget and the
    group broadcast rows (small models) build anew.

    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from mqjoin.planning.ilp.model import build_model
    >>> w = random_workload(6, 12, 3, seed=2)
    >>> one = enumerate_candidates(w.restricted_to([q.name for q in w.queries[:5]]))
    >>> two = enumerate_candidates(w, previous=one)
    >>> grown, whole = extend_model(build_model(one, "replicas"), two, "replicas"), build_model(two, "replicas")
    >>> grown.names[:len(build_model(one, "replicas").names)] == build_model(one, "replicas").names
    True
    >>> named = lambda m: sorted((m.names[c], m.cost[c], m.tie[c]) for c in range(m.num_variables))
    >>> rows = lambda m: sorted((n, sorted((m.names[i], a) for i, a in zip(idx, coef)), lo, hi)
    ...                         for n, idx, coef, lo, hi in m.rows)
    >>> named(grown) == named(whole), rows(grown) == rows(whole)
    (True, True)
    >>> extend_model(build_model(two, "replicas"), one, "replicas") is None  # a query removed
    True
    """
    old = before.candidates
    if not _kept_alike(before, cands, policy, mir_budget, replica_budget):
        return None
    for owner, by_start in old.orders.items():
        if cands.orders.get(owner) is not by_start or cands.steps.get(owner) is not old.steps[owner]:
            return None
    if any(cands.step_cost.get(s) != c for s, c in old.step_cost.items()):
        return None
    if [owner for owner in cands.orders if owner in old.orders] != list(old.orders):  # (names made unique in turn)
        return None
    added = [owner for owner in cands.orders if owner not in old.orders]
    grown = _stores_within(old, cands)  # stores with more partition candidates than before
    if grown is None:
        return None
    t0 = time.perf_counter()
    own = before.name_parts
    mdl = Model(cands, policy, names=list(before.names), cost=list(before.cost), integer=list(before.integer),
                upper=list(before.upper), tie=list(before.tie), rows=list(before.rows), x=dict(before.x),
                y=dict(before.y), m=dict(before.m), z=dict(before.z), b=dict(before.b),
                order_steps=dict(before.order_steps), order_mirs=dict(before.order_mirs),
                part_row=dict(before.part_row), bcast_row=dict(before.bcast_row),
                name_parts=Names(dict(own.clean), dict(own.steps), dict(own.hashes)), _used=set(before._used))
    for owner in cands.owners:
        if isinstance(owner, MIR) and owner not in mdl.m:
            mdl.m[owner] = mdl.var(f"m_{owner.label}")
    new_steps = sorted((s for s in cands.step_cost if s not in mdl.y), key=Step.sort_key)
    for s in new_steps:
        mdl.y[s] = mdl.var("y", cost=cands.step_cost[s], step=s)
    replaced: list[int] = []  # rows written anew where they were
    if policy == "single":
        stores = grown + [st for st in cands.partition_candidates if st not in old.partition_candidates]
        for store in stores:
            replaced += _store_choice(mdl, store)
        again = set(stores)
        into = [(s, yi) for s, yi in before.y.items() if s.target in again] if again else []
        replaced += [mdl.bcast_row[s] for s, _ in into if s in mdl.bcast_row]
        broadcast_rows(mdl, into + [(s, mdl.y[s]) for s in new_steps])
    order_rows(mdl, added)
    if not _named_as_built(before, mdl):
        return None
    _extend_links(before, mdl, replaced)
    _carry_blocks(before, mdl)
    mdl.build_seconds = time.perf_counter() - t0
    return mdl


def _stores_within(fewer: Candidates, more: Candidates) -> list[MIR] | None:
    """The stores of ``fewer`` whose partition candidates ``more`` has more of, when ``more``
    has every store of ``fewer`` at the same parallelism with at least its candidates; else
    None."""
    out = []
    for st, attrs in fewer.partition_candidates.items():
        other = more.partition_candidates.get(st)
        if other is None or more.parallelism(st) != fewer.parallelism(st):
            return None
        if other is not attrs and other != attrs:
            if not set(attrs) <= set(other):
                return None
            out.append(st)
    return out


def _kept_alike(before: Model, cands: Candidates, policy: str, mir_budget: float | None,
                replica_budget: float | None) -> bool:
    """Whether a model of ``cands`` may be made from ``before`` (:func:`extend_model`,
    :func:`shrink_model`) as far as the model's kind goes: the same policy and MIRs, not policy
    ``budget``, no budget, and no group broadcast rows (small models, policy ``single``)."""
    return not (policy != before.policy or policy == BUDGET or mir_budget is not None or replica_budget is not None
                or before.candidates.use_mirs != cands.use_mirs
                or bool(before.rows and before.rows[0][0] == "mir_memory_budget")
                or (policy == "single" and (strengthened(before.candidates) or strengthened(cands))))


def shrink_model(before: Model, cands: Candidates, policy: str = "single", mir_budget: float | None = None,
                 replica_budget: float | None = None) -> Model | None:
    """The model of ``cands`` made from ``before`` (a re-plan after queries were removed), or
    None where ``cands`` do more than take from ``before.candidates``: then :func:`build_model`.

    Every owner left must have been there with the same probe orders and steps (the same
    objects, as :func:`~mqjoin.planning.candidates.enumerate_candidates` keeps them from
    ``previous``; an MIR first reached through a query removed may now come later), every step
    at the same cost, every store at the same parallelism with at most its partition
    candidates.  The model then holds ``before``'s
    columns and rows in their order but for those of the owners, steps, MIRs and partition
    candidates removed; a store that lost a partition candidate has its choice row and its
    choices' tie-break ranks written anew, and a step into it that now knows every candidate
    left loses its broadcast.  It is the model :func:`build_model` gives, in another order
    where ``before`` was grown (:func:`extend_model`): the same columns and rows by name, so
    the same canonical plan.  (A name the build would number otherwise — one that took a
    suffix after a removed one's — gives None when it is a choice's, whose name makes its
    tie-break weight; a step's column or a row may keep its number.)  Policy ``budget``, a MIR
    budget and the group broadcast rows (small models) build anew, as in :func:`extend_model`.

    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from mqjoin.planning.ilp.model import build_model
    >>> w = random_workload(6, 12, 3, seed=2)
    >>> all_six = enumerate_candidates(w)
    >>> five = enumerate_candidates(w.restricted_to([q.name for q in w.queries[:5]]), previous=all_six)
    >>> old = build_model(all_six, "replicas")
    >>> shrunk, whole = shrink_model(old, five, "replicas"), build_model(five, "replicas")
    >>> left = set(shrunk.names)
    >>> shrunk.names == [name for name in old.names if name in left]  # (those left, in their order)
    True
    >>> sorted(zip(shrunk.names, shrunk.cost, shrunk.tie)) == sorted(zip(whole.names, whole.cost, whole.tie))
    True
    >>> sorted(row[0] for row in shrunk.rows) == sorted(row[0] for row in whole.rows)
    True
    >>> shrink_model(build_model(five, "replicas"), all_six, "replicas") is None  # a query added
    True
    """
    old = before.candidates
    if not _kept_alike(before, cands, policy, mir_budget, replica_budget) or len(cands.orders) >= len(old.orders):
        return None
    for owner, by_start in cands.orders.items():
        if old.orders.get(owner) is not by_start or old.steps.get(owner) is not cands.steps[owner]:
            return None
    # (the owners left may come in another order: an MIR reached first through a query removed)
    reordered = [owner for owner in old.orders if owner in cands.orders] != list(cands.orders)
    if any(old.step_cost.get(s) != c for s, c in cands.step_cost.items()):
        return None
    shrunk = _stores_within(cands, old)  # stores with fewer partition candidates than before
    if shrunk is None:
        return None
    t0 = time.perf_counter()
    gone: set[int] = {c for (owner, _, _), c in before.x.items() if owner not in cands.orders}
    gone.update(c for owner, c in before.m.items() if owner not in cands.orders)
    gone.update(c for s, c in before.y.items() if s not in cands.step_cost)
    gone.update(c for s, c in before.b.items() if s not in cands.step_cost)
    for (st, a), c in before.z.items():
        left = cands.partition_candidates.get(st)
        if left is None or a not in left or len(left) == 1:
            gone.add(c)
    again: dict[int, tuple[list[int], list[float], float, float]] = {}  # choice rows written anew → idx, coef, bounds
    for st in shrunk:  # (one candidate left: no choice, its row goes with its z)
        if st in before.part_row and len(cands.partition_candidates[st]) > 1:
            zs = [before.z[(st, a)] for a in cands.partition_candidates[st]]
            again[before.part_row[st]] = (zs, [1.0] * len(zs), 1.0, 1.0)
    if shrunk:  # (a step that knows every candidate left broadcasts no more)
        every = {st: frozenset(cands.partition_candidates[st]) for st in shrunk}
        gone.update(bi for s, bi in before.b.items()
                    if s.target in every and s in cands.step_cost and s.known >= every[s.target])
    names = before.names
    gone_names = [names[c] for c in gone]
    rows: list[Row] = []
    row_at: dict[int, int] = {}  # a row kept → where it stands now
    at = [-1] * len(names)  # a column kept → where it stands now
    kept = [c for c in range(len(names)) if c not in gone]
    for n, c in enumerate(kept):
        at[c] = n
    for r, (name, idx, coef, lo, hi) in enumerate(before.rows):
        if r in again:
            idx, coef, lo, hi = again[r]
        elif not gone.isdisjoint(idx):  # (a row of something removed)
            gone_names.append(name)
            continue
        row_at[r] = len(rows)
        rows.append((name, list(map(at.__getitem__, idx)), coef, lo, hi))
    used = before._used - set(gone_names)
    if not _numbered_as_built(before._used, used, gone_names, [names[c] for c in before.x.values() if c not in gone]
                              if reordered else []):
        return None
    mdl = Model(cands, policy, names=[names[c] for c in kept], cost=[before.cost[c] for c in kept],
                integer=[before.integer[c] for c in kept], upper=[before.upper[c] for c in kept],
                tie=[before.tie[c] for c in kept], rows=rows,
                x={k: at[c] for k, c in before.x.items() if c not in gone},
                y={k: at[c] for k, c in before.y.items() if c not in gone},
                m={k: at[c] for k, c in before.m.items() if c not in gone},
                z={k: at[c] for k, c in before.z.items() if c not in gone},
                b={k: at[c] for k, c in before.b.items() if c not in gone},
                order_steps={at[c]: list(map(at.__getitem__, ys))
                             for c, ys in before.order_steps.items() if c not in gone},
                order_mirs={at[c]: list(map(at.__getitem__, ms))
                            for c, ms in before.order_mirs.items() if c not in gone},
                name_parts=before.name_parts, _used=used)
    mdl.part_row = {st: row_at[r] for st, r in before.part_row.items() if r in row_at}
    mdl.bcast_row = {s: row_at[r] for s, r in before.bcast_row.items() if r in row_at}
    if len(mdl.bcast_row) != len(mdl.b):  # (a step that broadcasts still knew a candidate removed: not met,
        return None  # as the class of a query left that makes the step know it keeps it a candidate)
    hashes = before.name_parts.hashes
    for st in shrunk:  # (the choices' ranks in the candidates left)
        for rank, a in enumerate(cands.partition_candidates[st]):
            zc = mdl.z.get((st, a))
            if zc is not None:
                mdl.tie[zc] = hashed_weight(rank, hashes[mdl.names[zc]])
    _carry_blocks(before, mdl, (gone, at, row_at))
    mdl.build_seconds = time.perf_counter() - t0
    return mdl


def _numbered_as_built(before: set[str], left: set[str], gone: list[str], reordered: list[str]) -> bool:
    """Whether the choices' names ``left`` of a model shrunk from one with the names ``before``
    (:func:`shrink_model`) are numbered as the build numbers them: a name taken already takes
    the suffix ``_2``, ``_3``, … in the order the names are made, so a choice (``x_``, ``z_``)
    named after a name of its stem that is ``gone`` would lose a number, and where the owners
    come in another order (``reordered``: the probe orders' names left, then) so would a
    probe order whose name another took.

    >>> _numbered_as_built({"x_a", "x_a_2", "y_b"}, {"x_a"}, ["x_a_2"], [])  # the later one removed
    True
    >>> _numbered_as_built({"x_a", "x_a_2", "y_b"}, {"x_a_2"}, ["x_a"], [])  # the first one removed
    False
    >>> _numbered_as_built({"y_b", "y_b_2", "x_a"}, {"y_b_2", "x_a"}, ["y_b"], [])  # (a step's: no weight)
    True
    >>> _numbered_as_built({"x_a", "x_a_2"}, {"x_a", "x_a_2"}, [], ["x_a", "x_a_2"])  # reordered
    False
    """
    gone_set = set(gone)
    for name in gone:
        for base in {name, re.sub(r"_[0-9]+$", "", name)}:
            makers, k = [], 1
            while (maker := base if k == 1 else f"{base}_{k}") in before:
                makers.append(maker)
                k += 1
            first = next((i for i, m in enumerate(makers) if m in gone_set), None)
            if first is not None and any(m in left and m.startswith(("x_", "z_")) for m in makers[first + 1:]):
                return False
    return not any(f"{name}_2" in left for name in reordered)


def _named_as_built(before: Model, mdl: Model) -> bool:
    """Whether every choice of ``mdl`` (grown from ``before`` by :func:`extend_model`) has the
    name :func:`build_model` gives it, so the same tie-break weight.  A name taken already gets
    a suffix by the order names are made in, and a grown model makes its new names after
    ``before``'s, where the build makes them in the candidates' order.  A choice's name that
    got a suffix here is the build's when it is a probe order of a new owner that the
    candidates list after every owner before whose orders took its stem (two MIRs of the same
    relations joined on other attributes have the same label); the names of steps' columns
    and of rows weigh nothing, and may take their suffixes in another order than the build's."""
    ranked = [(stem, c) for stem, c in mdl._renamed if c is not None]
    if not ranked:
        return True
    x_at, x_before = mdl.keys_of("x"), before.keys_of("x")
    at = {owner: i for i, owner in enumerate(mdl.candidates.orders)}
    named = {name: c for c, name in enumerate(before.names)}
    for stem, c in ranked:
        if c not in x_at:  # (a store's z)
            return False
        name, k = stem, 1
        while name in named:  # (the orders before that took the stem: "stem", "stem_2", …)
            c0 = named[name]
            if c0 not in x_before or at[x_before[c0][0]] > at[x_at[c][0]]:
                return False
            k += 1
            name = f"{stem}_{k}"
    return True


def _carry_blocks(before: Model, mdl: Model, moved: tuple[set[int], list[int], dict[int, int]] | None = None) -> None:
    """Keep with ``mdl`` the keys of ``before``'s blocks by where they stand
    (:func:`~mqjoin.planning.ilp.prices.block_keys`), when they were taken of ``before`` as it
    is.  A grown model (:func:`extend_model`): every column and row ``before`` had is where it
    was and as it was in ``mdl``, but for the rows written anew and the ``z`` weighed anew of a
    store that gained a partition candidate: those lie in the blocks that hold the store's
    ``z``, and the store's new ``z`` joins each of them, so none of those blocks stands where
    it stood.  A shrunk one (:func:`shrink_model`, ``moved``: the columns removed, and where each
    column and row kept stands now): a block none of whose columns was removed is as it was,
    where its columns and rows now stand.  (A store that lost a partition candidate, whose
    choices are ranked and whose row is written anew, lost that candidate's ``z``, which every
    block holding the store's ``z`` held.)"""
    hit = before._keys.get("blocks")
    if hit is None or not same_lists(hit[0], before.read_by_keys()):
        return
    where = hit[1]
    if moved is not None:
        gone, at, row_at = moved
        where = {(tuple([at[c] for c in cols]), tuple([row_at[r] for r in rows]), stores): key
                 for (cols, rows, stores), key in where.items() if gone.isdisjoint(cols)}
    mdl._keys["blocks before"] = (mdl.read_by_keys(), where)


def _store_choice(mdl: Model, store: MIR) -> list[int]:
    """The partition choice ``z`` of a store (policy ``single``) whose candidates are new or
    grew (:func:`extend_model`): its columns in candidate order (those there already kept, their
    tie-break rank updated) and its row; the row's index when it was written where it was."""
    cands = mdl.candidates
    attrs, p = cands.partition_candidates[store], cands.parallelism(store)
    if p == 1 or len(attrs) == 1:
        return []
    had = {a: mdl.z.pop((store, a)) for a in attrs if (store, a) in mdl.z}  # (re-inserted in candidate order)
    idx = []
    for r, a in enumerate(attrs):
        i = had.get(a)
        if i is None:
            i = mdl.var(f"z_{store.render_partition(a)}", integer=True, rank=r)
        else:
            mdl.tie[i] = hashed_weight(r, mdl.name_parts.hashes[mdl.names[i]])
        mdl.z[(store, a)] = i
        idx.append(i)
    row = (idx, [1.0] * len(idx), 1.0, 1.0)
    at = mdl.part_row.get(store)
    if at is None:
        mdl.part_row[store] = mdl.row(f"part_{store.label}", *row)
        return []
    mdl.rows[at] = (mdl.rows[at][0], *row)
    return [at]


def _extend_links(before: Model, mdl: Model, replaced: list[int]) -> None:
    """Keep with ``mdl`` its links without ``z`` (:func:`plain_links`) as ``before``'s (when
    known) extended by the rows written anew (``replaced``) and added: rows were only added
    or grew, so the links only join."""
    hit = before._keys.get("plain")
    if hit is None or hit[0] is not before.rows or hit[1] != (len(before.rows), before.num_variables):
        return
    root, with_z = hit[2]
    now_with_z = set(with_z)
    parent = list(root) + list(range(len(root), mdl.num_variables))
    roots = plain_roots(mdl, parent, [*replaced, *range(len(before.rows), len(mdl.rows))], now_with_z)
    mdl._keys["plain"] = (mdl.rows, (len(mdl.rows), mdl.num_variables), (roots, sorted(now_with_z)))
