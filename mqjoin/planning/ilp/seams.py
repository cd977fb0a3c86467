"""A block of several queries, split where they meet: one search per query under every
assignment of what they share.

A block of a coupled part holds one query with its MIRs, or several queries that share an MIR
(two five-way queries over a common pair of relations share that pair's MIR).  Such a block
is hard for one search over all its MIRs: each query's MIRs leave a gap between the search's
bound and the optimum, and a search over both queries' MIRs at once visits about the product
of the nodes each query alone needs.  But the queries meet only at a few columns, the *seam*:
the MIRs that more than one query probes (their materialisation ``m``, their own probe orders
``x`` and partition choices ``z``), the steps that more than one query's orders share (their
``y`` and broadcasts ``b``), and the partition choices of stores that steps of more than one
query target.  Fix every binary of the seam and the rest of the block falls apart into
*families*, one per query with the MIRs only it probes, and each family is an ordinary block
for :class:`~mqjoin.planning.ilp.paths.BlockPaths`.

:func:`find_seam` finds the seam and lists its *assignments*: every 0-1 value of its binaries
(``m``, ``y``, ``x``, ``z``) that satisfies the rows that hold only seam columns, with each
broadcast at the least value its rows allow, and what the seam's own columns cost and weigh
under it.  The attributes of the coupled part's shared stores are not enumerated: the choice
the block is costed under sets them (:meth:`SeamSearch._fitting`); a shared store the choice
leaves undecided is chosen by each family for itself, which bounds the block's optimum (the
coupled search asks for such bounds only: at its root and on its way down).  Under an
assignment a family sees a seam column as

* ruled out where the assignment has it at 0 (an order through a step at 0 is not a choice, a
  store's attribute at 0 is not its attribute, an MIR at 0 may not be probed; a query left
  without an order at one of its starts leaves the family, and the assignment, no plan);
* paid for already where it is at 1: a step costs the family nothing, an MIR may be probed
  without the family maintaining it (``given``), a store has that attribute.

That is exact because every row that holds seam columns and family columns only gets looser as
a seam column grows (:func:`find_seam` checks it): the family's least cost under the
assignment plus the seam's own cost is the block's least cost under it, and the block's
optimum is the least of those sums over the assignments (:meth:`SeamSearch.optimum`).  The
lexicographic optimum is the least seam weight plus family weights over the assignments whose
sum is within :data:`~mqjoin.planning.ilp.model.TIE_SLACK` of the optimum, each family at its
own lexicographic optimum there.  A family's optimum depends on the choice only through the
broadcasts of its own steps that the choice spares, so choices alike to it share one search
(:meth:`~mqjoin.planning.ilp.paths.BlockPaths.served`).  The assignments are tried most
promising first: by the seam's cost plus the families' optima with only the seam's MIRs
decided (a bound, as every other seam column paid for), and none is solved whose bound cannot
beat the best sum found; within one, the families are solved in turn, the smallest (the
cheapest searches) first, each one's bound giving way to its optimum, and the rest is skipped
once what is known cannot beat it either.  A caller that holds a plan already passes its cost
(``below``): only a cheaper plan is looked for.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model, components
>>> from mqjoin.planning.ilp.blocks import coupled_part
>>> from mqjoin.planning.ilp.branching import branch_and_bound
>>> mdl = build_model(enumerate_candidates(random_workload(10, 100, 5, seed=1)), "single")
>>> part = next(p for p in (coupled_part(mdl, c, r) for c, r in components(mdl)) if p)
>>> k = next(k for k, b in enumerate(part.blocks) if find_seam(mdl, b.cols, b.rows, frozenset(part.shared)))
>>> seam = find_seam(mdl, part.blocks[k].cols, part.blocks[k].rows, frozenset(part.shared))
>>> len(seam.families), [mdl.names[c] for c in seam.cols if mdl.names[c].startswith("m_")]
(2, ['m_R64R97'])
>>> search = SeamSearch(mdl, part.blocks[k].cols, seam, part.tie)
>>> choice = part.chosen_by(k, part.combinations[[kk for kk, _ in part.combinations].index(k)][1])
>>> cost, values = search.optimum(choice)
>>> sub = part.restricted(k, choice)
>>> round(cost, 6) == round(branch_and_bound(sub, part.blocks[k].cols, part.blocks[k].rows, None)[1], 6)
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mqjoin.planning.candidates import MIR
from mqjoin.planning.ilp.model import TIE_SLACK, Model, Row, linked
from mqjoin.planning.ilp.paths import BlockPaths

#: a seam with more candidate assignments than this is not split (they are enumerated)
SEAM_MAX_CANDIDATES = 5000


@dataclass(frozen=True)
class Seam:
    """Where the queries of a block meet (see the module docstring)."""

    cols: tuple[int, ...]  # the seam's columns
    families: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]  # per family: its own columns, its rows
    rows: tuple[int, ...]  # the rows that hold seam columns only
    bases: tuple[tuple[float, ...], ...]  # the assignments but for the shared stores' z and the broadcasts (-1)
    broadcasts: tuple[int, ...]  # the seam's broadcast columns (set per choice to the least its rows allow)
    stores: dict[int, tuple[MIR, int]]  # seam z column → (its store, its index among the store's candidates)
    shared: dict[MIR, tuple[int, ...]]  # the coupled part's shared stores here → their z columns


def find_seam(mdl: Model, cols: list[int], rows: list[int], shared: frozenset[MIR] = frozenset()) -> Seam | None:
    """The seam of a block (``cols``, ``rows``) with the assignments of its binaries but the
    ``z`` of the stores in ``shared`` (the coupled part's, set by the choice each time), or
    None when the block does not split into families that way (one query, a row the split
    would change, or more than :data:`SEAM_MAX_CANDIDATES` assignments to enumerate)."""
    inside = set(cols)
    m_col = {m: c for m, c in mdl.m.items() if c in inside}
    x_key = mdl.keys_of("x")
    owner = {c: x_key[c][0] for c in sorted(inside) if c in x_key}
    # the queries that probe each MIR, directly or through MIRs that probe it
    probed_by: dict[int, set[str]] = {c: set() for c in m_col.values()}
    grew = True
    while grew:
        grew = False
        for xc, o in owner.items():
            by = {o} if isinstance(o, str) else probed_by[m_col[o]]
            for mc in mdl.order_mirs[xc]:
                if not by <= probed_by[mc]:
                    probed_by[mc] |= by
                    grew = True
    fam: dict[int, set[str]] = {c: set() for c in cols}
    for xc, o in owner.items():
        fam[xc] = {o} if isinstance(o, str) else set(probed_by[m_col[o]])
        for yc in mdl.order_steps[xc]:
            fam[yc] |= fam[xc]
    for mc in m_col.values():
        fam[mc] |= probed_by[mc]
    for s, bc in mdl.b.items():
        if bc in inside:
            fam[bc] |= fam[mdl.y[s]]
    z_cols = {c for c in mdl.z.values() if c in inside}
    for r in rows:
        idx = mdl.rows[r][1]
        near = set().union(*(fam[i] for i in idx if i not in z_cols))
        for i in idx:
            if i in z_cols:
                fam[i] |= near
    by_store: dict[MIR, set[str]] = {}  # a store's candidates go together (their row Σ z = 1)
    for (st, _), c in mdl.z.items():
        if c in inside:
            by_store.setdefault(st, set()).update(fam[c])
    for (st, _), c in mdl.z.items():
        if c in inside:
            fam[c] = by_store[st]
    seam = sorted(c for c in cols if len(fam[c]) > 1)
    if not seam or len({q for f in fam.values() for q in f}) < 2:
        return None
    in_seam = set(seam)
    seam_rows, fam_rows = [], []
    for r in rows:
        _, idx, coef, lo, hi = mdl.rows[r]
        if all(i in in_seam for i in idx):
            seam_rows.append(r)
            continue
        fam_rows.append(r)
        for i, a in zip(idx, coef):  # a seam column must only loosen the rows it shares with a family
            if i in in_seam and not ((hi == math.inf and a > 0) or (lo == -math.inf and a < 0)):
                return None
    # the families: the block's other columns linked through rows
    root = linked([c for c in cols if c not in in_seam],
                  ([i for i in mdl.rows[r][1] if i not in in_seam] for r in fam_rows))
    roots = sorted(set(root.values()))
    if len(roots) < 2:
        return None
    number = {r: n for n, r in enumerate(roots)}
    f_cols: list[list[int]] = [[] for _ in roots]
    f_rows: list[list[int]] = [[] for _ in roots]
    for c, r in root.items():
        f_cols[number[r]].append(c)
    for r in fam_rows:
        f_rows[number[root[next(i for i in mdl.rows[r][1] if i not in in_seam)]]].append(r)
    # the seam's binaries; its broadcasts follow them
    z_at = mdl.z_index()
    stores = {c: z_at[c] for c in seam if c in z_cols}
    by_choice = {c for c, (st, _) in stores.items() if st in shared}
    m_cols, y_cols = set(m_col.values()), set(mdl.y.values())
    binaries = [c for c in seam if (mdl.integer[c] or c in m_cols or c in y_cols) and c not in by_choice]
    b_cols = {c for c in seam if c not in set(binaries) and c not in by_choice}
    if any(not mdl.names[c].startswith("b_") for c in b_cols):
        return None
    factors = _factors(mdl, binaries, [mdl.rows[r] for r in seam_rows])
    if math.prod(len(f) for f in factors) > SEAM_MAX_CANDIDATES:
        return None
    plain = [mdl.rows[r] for r in seam_rows if not b_cols.intersection(mdl.rows[r][1])
             and not by_choice.intersection(mdl.rows[r][1])]  # (the others: per choice, SeamSearch)
    bases = []
    for parts in itertools.product(*factors):
        val = {c: v for part in parts for c, v in part}
        if all(_holds(row, val) for row in plain):
            bases.append(tuple(val.get(c, -1.0) for c in seam))
    chosen: dict[MIR, list[int]] = {}  # a store's candidates decided by the choice
    for c in sorted(by_choice, key=lambda c: stores[c][1]):
        chosen.setdefault(stores[c][0], []).append(c)
    return Seam(tuple(seam), tuple((tuple(sorted(c)), tuple(r)) for c, r in zip(f_cols, f_rows)), tuple(seam_rows),
                tuple(bases), tuple(sorted(b_cols)), stores,
                {st: tuple(cs) for st, cs in sorted(chosen.items(), key=lambda t: t[0].sort_key())})


def _factors(mdl: Model, binaries: list[int], rows: list[Row]) -> list[list[tuple[tuple[int, float], ...]]]:
    """The seam's binaries in independent factors, each the list of its partial assignments,
    so that their product holds every assignment the rows ``Σ x = 1`` (one attribute per store)
    and ``Σ x = m`` (one order per start of a materialised MIR) allow: a store's ``z`` one at 1;
    an MIR's ``m`` at 0 with its orders, or at 1 with one order per start; any other binary 0
    or 1.

    >>> from mqjoin.planning.ilp.model import Model
    >>> rows = [("part_S", [0, 1], [1.0, 1.0], 1.0, 1.0), ("mat_M_R", [2, 3, 4], [1.0, 1.0, -1.0], 0.0, 0.0)]
    >>> [len(f) for f in _factors(Model(None, "single"), [0, 1, 2, 3, 4, 5], rows)]
    [2, 3, 2]
    """
    left = set(binaries)
    factors = []
    for _, idx, coef, lo, hi in rows:  # one attribute per store
        if lo == hi == 1.0 and all(a == 1.0 for a in coef) and left.issuperset(idx):
            factors.append([tuple((i, float(i == j)) for i in idx) for j in idx])
            left -= set(idx)
    by_m: dict[int, list[list[int]]] = {}  # an MIR's m → its orders per start
    for _, idx, coef, lo, hi in rows:
        if lo == hi == 0.0 and sorted(coef)[0] == -1.0 and coef.count(-1.0) == 1 and all(a in (1.0, -1.0)
                                                                                         for a in coef):
            m = idx[coef.index(-1.0)]
            xs = [i for i, a in zip(idx, coef) if a == 1.0]
            if m in left and left.issuperset(xs):
                by_m.setdefault(m, []).append(xs)
    for m, starts in by_m.items():
        xs = [i for group in starts for i in group]
        if len(set(xs)) != len(xs):
            continue
        off = ((m, 0.0),) + tuple((i, 0.0) for i in xs)
        factors.append([off] + [((m, 1.0),) + tuple((i, float(i in pick)) for i in xs)
                                for pick in itertools.product(*starts)])
        left -= {m, *xs}
    factors.extend([((c, 0.0),), ((c, 1.0),)] for c in binaries if c in left)
    return factors


def _holds(row: Row, val: dict[int, float]) -> bool:
    _, idx, coef, lo, hi = row
    s = math.fsum(a * val[i] for i, a in zip(idx, coef))
    return lo - 1e-9 <= s <= hi + 1e-9


class SeamSearch:
    """A block's optimum and lexicographic optimum by its seam: one
    :class:`~mqjoin.planning.ilp.paths.BlockPaths` per family and assignment (the interface of
    ``BlockPaths``: :meth:`optimum`, :meth:`lexicographic`; :class:`~mqjoin.planning.ilp.paths.TooLarge`
    when a family's search gives up)."""

    def __init__(self, mdl: Model, cols: list[int], seam: Seam, tie: list[float],
                 check: Callable[[], object] = lambda: None):
        self.mdl, self.cols, self.seam, self.check, self.weights = mdl, cols, seam, check, tie
        in_seam = set(seam.cols)
        self.tie = [0.0 if i in in_seam else w for i, w in enumerate(tie)]  # the seam weighs once, here
        self.pos = {c: n for n, c in enumerate(cols)}
        # per family: the seam columns its rows hold (with every candidate of a seam store)
        self.touch = []
        for _own, rows in seam.families:
            near = {i for r in rows for i in mdl.rows[r][1] if i in in_seam}
            stores = {seam.stores[c][0] for c in near if c in seam.stores}
            near |= {c for c in seam.cols if c in seam.stores and seam.stores[c][0] in stores}
            self.touch.append(tuple(sorted(near)))
        # per family: the columns its searches hold, its own and the seam's it touches
        self.f_cols = [sorted(own + self.touch[f]) for f, (own, _) in enumerate(seam.families)]
        self.by_size = sorted(range(len(seam.families)), key=lambda f: (len(self.f_cols[f]), f))  # fewest columns first
        self.at = {c: n for n, c in enumerate(seam.cols)}
        self.m_cols = set(seam.cols).intersection(mdl.m.values())  # the seam's MIRs
        z_at = mdl.z_index()
        self.f_stores = [sorted({z_at[c][0] for c in self.f_cols[f] if c in z_at}, key=MIR.sort_key)
                         for f in range(len(seam.families))]  # per family: the stores it searches
        self._paths: dict[tuple[Any, ...], BlockPaths] = {}
        self._fixed: dict[tuple[Any, ...], dict[MIR, int]] = {}
        self._optima: dict[tuple[Any, ...], tuple[float, list[float]]] = {}  # (family, assignment, choice) → optimum
        self._alike: dict[tuple[Any, ...],
                          tuple[float, list[float]]] = {}  # (family's search, what it serves) → optimum
        self._fits: dict[tuple[Any, ...], list[tuple[float, float, tuple[float, ...]]]] = {}

    def _family(self, f: int, values: tuple[float, ...]) -> tuple[BlockPaths, dict[MIR, int]]:
        """Family ``f``'s search under an assignment's values, and the seam stores' attributes."""
        touch = (f, tuple(values[self.at[c]] for c in self.touch[f]))
        fixed = self._fixed.get(touch)
        if fixed is None:
            on = [self.seam.stores[c] for c in self.touch[f] if c in self.seam.stores and values[self.at[c]] > 0.5]
            count: dict[MIR, int] = {}
            for st, _ in on:
                count[st] = count.get(st, 0) + 1
            fixed = self._fixed[touch] = {st: j for st, j in on if count[st] == 1}  # (all on: undecided)
        key = (f, tuple(values[self.at[c]] for c in self.touch[f] if c not in self.seam.stores))
        if key not in self._paths:
            mdl = self.mdl
            cost, upper = list(mdl.cost), list(mdl.upper)
            for c in self.touch[f]:  # (a store's attributes are fixed by the choice the search is given)
                cost[c] = 0.0
                if values[self.at[c]] < 0.5 and c not in self.seam.stores:
                    upper[c] = 0.0
            given = frozenset(c for c in self.touch[f] if c in self.m_cols and values[self.at[c]] > 0.5)
            self._paths[key] = BlockPaths(replace(mdl, cost=cost, upper=upper), self.f_cols[f], self.tie, self.check,
                                          given=given)
        return self._paths[key], fixed

    def _fitting(self, choice: dict[MIR, int]) -> list[tuple[float, float, tuple[float, ...]]]:
        """The assignments under the choice, cheapest (then lightest) first, as (cost, weight,
        values): each base with the shared stores' ``z`` as chosen (an undecided store: every
        attribute on and its row ``Σ z = 1`` left out, so that each broadcast takes the
        attribute that serves it: a relaxation) and the least broadcasts the seam's rows allow;
        those that satisfy the rows."""
        key = tuple(choice.get(st) for st in self.seam.shared)
        out = self._fits.get(key)
        if out is None:
            seam, mdl = self.seam, self.mdl
            fill, left_out = {}, set()
            for st, zs in seam.shared.items():
                j = choice.get(st)
                for jj, c in enumerate(zs):
                    fill[c] = 1.0 if j is None or jj == j else 0.0
                if j is None:
                    left_out.add(frozenset(zs))
            rows = [mdl.rows[r] for r in seam.rows if frozenset(mdl.rows[r][1]) not in left_out]
            out = []
            for base in seam.bases:
                val = dict(zip(seam.cols, base))
                val.update(fill)
                for bc in seam.broadcasts:  # the least broadcast the seam's rows allow
                    need = 0.0
                    for _, idx, coef, lo, _ in rows:
                        if bc in idx and lo > -math.inf:
                            rest = math.fsum(v * val[i] for i, v in zip(idx, coef) if i != bc)
                            need = max(need, (lo - rest) / coef[idx.index(bc)])
                    val[bc] = need
                if all(_holds(row, val) for row in rows):
                    values = tuple(val[c] for c in seam.cols)
                    out.append((math.fsum(mdl.cost[c] * v for c, v in zip(seam.cols, values)),
                                math.fsum(self.weights[c] * v for c, v in zip(seam.cols, values)), values))
            out.sort(key=lambda a: a[:2])
            self._fits[key] = out
        return out

    def _solve(self, f: int, values: tuple[float, ...], choice: dict[MIR, int]) -> tuple[float, list[float]]:
        """Family ``f``'s optimum under an assignment and the choice, with its values.  A
        family's steps are a few of the block's, so choices that the block tells apart are
        often alike to a family (:meth:`~mqjoin.planning.ilp.paths.BlockPaths.served`): one
        search serves them all, its plan given each choice's attributes."""
        touched = tuple(values[self.at[c]] for c in self.touch[f])
        key = (f, touched, tuple(choice.get(st) for st in self.f_stores[f]))
        hit = self._optima.get(key)
        if hit is None:
            paths, fixed = self._family(f, values)
            here = {**choice, **fixed}
            alike = (paths, paths.served(here))
            hit = self._alike.get(alike)
            if hit is None:
                hit = self._alike[alike] = paths.optimum(here)
            elif hit[1]:
                hit = (hit[0], paths.chosen(hit[1], here))
            self._optima[key] = hit
        return hit

    def optimum(self, choice: dict[MIR, int], below: float = math.inf) -> tuple[float, list[float]]:
        """The block's optimum under the choice (store → index of its attribute): the least
        over the assignments of the seam's cost plus every family's optimum (``math.inf`` and
        no values when it has none cheaper than ``below``)."""
        best, best_at = below, None
        families = range(len(self.seam.families))
        loose = tuple(1.0 for _ in self.seam.cols)  # every seam column paid for: a bound per family
        bound = math.fsum(self._solve(f, loose, choice)[0] for f in families)
        bounds: dict[tuple[Any, ...],
                     list[float]] = {}  # the MIRs' values → the families' optima with only those decided
        ranked = []
        for n, (cost, _, values) in enumerate(self._fitting(choice)):
            if cost + bound >= best:
                break  # (the assignments come cheapest first)
            mirs = tuple(v if c in self.m_cols else 1.0 for c, v in zip(self.seam.cols, values))
            if mirs not in bounds:
                bounds[mirs] = [self._solve(f, mirs, choice)[0] for f in families]
            ranked.append((cost + math.fsum(bounds[mirs]), n, cost, values, bounds[mirs]))
        ranked.sort(key=lambda t: t[:2])  # the most promising first
        for low, _, cost, values, lows in ranked:
            if low == math.inf or low >= best - 1e-9 * max(1.0, abs(best)):
                break  # (inf: a family without a plan there)
            # each family's bound replaced by its optimum in turn, the smallest families (the
            # cheapest searches) first; the others' bounds prune
            parts: list[list[float]]
            total, low, objs, parts = cost, low - 1e-9 * max(1.0, abs(best)), [0.0] * len(lows), [[]] * len(lows)
            for f in self.by_size:
                objs[f], parts[f] = self._solve(f, values, choice)
                total += objs[f]
                low += objs[f] - lows[f]
                if total >= best or low >= best:
                    break
            else:
                total = cost + math.fsum(objs)  # (the same whatever the order the families came in)
                if total < best:
                    best, best_at = total, (values, parts)
        if best_at is None:
            return math.inf, []
        vals = self._values(*best_at)
        return math.fsum(self.mdl.cost[c] * v for c, v in zip(self.cols, vals)), vals

    def lexicographic(self, choice: dict[MIR, int], optimum: float,
                      start: list[float] | None = None) -> tuple[float, list[float]]:
        """The least tie-break weight among the block's plans within the optimum (and
        :data:`~mqjoin.planning.ilp.model.TIE_SLACK`) under the choice, and that plan's values."""
        cap = optimum * (1 + TIE_SLACK) + TIE_SLACK
        best, best_at = math.inf, None
        for cost, weight, values in self._fitting(choice):
            optima = [self._solve(f, values, choice) for f in range(len(self.seam.families))]
            if cost + math.fsum(o for o, _ in optima) > cap:
                continue
            total, parts = weight, []
            for f, (obj, vals) in enumerate(optima):
                paths, fixed = self._family(f, values)
                w, v = paths.lexicographic({**choice, **fixed}, obj, vals)
                total += w
                parts.append(v)
            if total < best:
                best, best_at = total, (values, parts)
        if best_at is None:
            return math.inf, list(start) if start is not None else []
        vals = self._values(*best_at)
        return math.fsum(self.weights[c] * v for c, v in zip(self.cols, vals)), vals

    def _values(self, values: tuple[float, ...], parts: list[list[float]]) -> list[float]:
        """The block's columns: the seam's as assigned, each family's own from its plan."""
        out = [0.0] * len(self.cols)
        for c, v in zip(self.seam.cols, values):
            out[self.pos[c]] = v
        for f, vals in enumerate(parts):
            own = set(self.seam.families[f][0])
            for c, v in zip(self.f_cols[f], vals):
                if c in own:
                    out[self.pos[c]] = v
        return out
