"""A coupled part split into blocks, and each block's optimum under choices of the shared stores.

Under policy ``single`` the queries of a part are often coupled only through the partition
choice ``z`` of the stores they share: fix the attribute of every shared store and the part
falls apart into independent blocks, one query each (with its MIRs).  :func:`split_blocks`
finds them; :class:`Part` is what the coupled search (:mod:`mqjoin.planning.ilp.coupled`)
knows of them, fixed once built; :class:`BlockCosts` computes and caches what it asks.

A block's cost under a choice depends only on which of its broadcast steps the choice
serves, so choices that serve the same steps of a block are one (:meth:`Part.key_of`): the
search, the master ILP and the caches see *classes* of attributes per (block, store), and a
*combination* is one class per store the block touches.  Under a combination a block costs

* with few enough assignments (three-way queries), its exact optimum and lexicographic optimum
  under every combination at once, by enumeration (:mod:`mqjoin.planning.ilp.enumeration`,
  :meth:`BlockCosts.enumerate_blocks`): no LP at all;
* else by its search without LPs (:mod:`mqjoin.planning.ilp.paths`, :meth:`BlockCosts.search`):
  a branch and bound over its MIRs and partition attributes solved per start relation, exact,
  unless it visits more than :data:`~mqjoin.planning.ilp.paths.NODE_LIMIT` nodes or does more
  than :data:`~mqjoin.planning.ilp.paths.WORK_LIMIT` work; it looks only for a plan cheaper than
  the block's last plan recosted under the combination (which it keeps otherwise);
* else, for a block of several queries, by its seam (:mod:`mqjoin.planning.ilp.seams`): one
  search per query under every assignment of what the queries share (where that gives up too,
  the block keeps to the LPs below for every combination); under a choice that leaves shared
  stores undecided, each query may choose them for itself, a bound like the block's own;
* else its LP optimum when the LP comes out integral (with MIRs of at most three relations it
  did on every workload measured; one small LP on a HiGHS instance kept per block and
  stage, warm from the previous combination: combinations are listed in reflected Gray order,
  each one store away from the last, :func:`_reflected`);
* else the best plan the block found under other choices, recosted (every plan is feasible
  under every choice; only which steps broadcast changes), when that meets the best bound
  known — the LP bound or the optimum under a less decided choice;
* else — its LP fractional, or no plan recosted meets the bound — for a block of one query with
  large MIRs, its search again with :data:`FURTHER` times the limits, which then costs the
  block's later combinations too, without LPs; where that gives up as well, or for small MIRs,
  the branch and bound of :mod:`mqjoin.planning.ilp.branching`, started from that plan.

The canonical tie-break works per block too: once the shared choices are fixed, cost and
tie-break weight add up over the blocks, so each block's lexicographic optimum (least weight
at a cost within :data:`~mqjoin.planning.ilp.model.TIE_SLACK` of its optimum) is the
enumeration's or the search's (started from the block's last lexicographic optimum, recosted,
when that is lighter than its plan and still optimal: :meth:`BlockCosts._lighter`), or is
found on a second instance with the cost capped by a row (:meth:`BlockCosts.weight`).  The
shared stores' own ``z`` weigh once, in the search, not in every block (``Part.tie``).

Blocks are costed on :data:`BLOCK_THREADS` threads (:func:`per_block`): HiGHS releases the GIL
while it solves and every block has instances and cache entries of its own; each block's
combinations go in their order on one thread, so the plans do not depend on the threads.  The
searches hold the GIL, so :meth:`BlockCosts.spread` gives about half the blocks with a search
to a forked child process (:mod:`mqjoin.planning.ilp.forked`) and merges its cache entries
back; there too a block is done whole, in order, on one side.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model, components
>>> mdl = build_model(enumerate_candidates(random_workload(8, 12, 3, seed=1)), "single")
>>> (cols, rows), = components(mdl)
>>> part = coupled_part(mdl, cols, rows)
>>> len(part.blocks), len(part.stores), part.quick
(8, 7, True)
>>> costs = BlockCosts(part, deadline=None)
>>> whole = costs.cost(0, {})  # block 0 choosing its shared stores' attributes itself
>>> whole <= costs.cost(0, part.chosen_by(0, part.combinations[0][1]))
True
"""

from __future__ import annotations

import collections
import math
import os
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar, cast

from mqjoin.planning.candidates import MIR
from mqjoin.planning.ilp import forked
from mqjoin.planning.ilp import paths as block_paths
from mqjoin.planning.ilp.backends import INTEGRALITY_TOLERANCE, highs_lp, silent_highs
from mqjoin.planning.ilp.branching import branch_and_bound, large_mirs
from mqjoin.planning.ilp.enumeration import BlockTable, block_tables
from mqjoin.planning.ilp.model import TIE_SLACK, Model, plain_links
from mqjoin.planning.ilp.monitor import Watch
from mqjoin.planning.ilp.paths import WORK_LIMIT, BlockPaths, TooLarge, applies
from mqjoin.planning.ilp.seams import SeamSearch, find_seam

#: threads that cost the blocks' combinations (HiGHS releases the GIL while it solves, and
#: every block has HiGHS instances of its own)
BLOCK_THREADS = min(4, os.cpu_count() or 1)


#: the work (:data:`~mqjoin.planning.ilp.paths.WORK_LIMIT`) past which the search of a block of
#: several queries gives way to its seam (:mod:`mqjoin.planning.ilp.seams`), which is cheaper
#: where the search struggles; the searches of such blocks that ended on the random workloads
#: measured stayed well below it
WORK_LIMIT_SEVERAL = 100_000


#: a block of large MIRs whose search gave up searches on with this many times the node and
#: work limits (:data:`~mqjoin.planning.ilp.paths.NODE_LIMIT`,
#: :data:`~mqjoin.planning.ilp.paths.WORK_LIMIT`) before a branch and bound
#: (:meth:`BlockCosts._further`); the six-way blocks measured whose LPs came out fractional
#: ended their searches within them, far sooner than by LPs (benchmarks/RESULTS.md, section ILP)
FURTHER = 20


#: at least this many pairs of blocks with a search before :meth:`BlockCosts.spread` forks a
#: child for half of them (fewer: the fork costs more than it saves)
SPREAD_MIN = 4

#: on a part with small MIRs (``Part.quick``: a pair costs about half a millisecond) at least
#: this many pairs with a search per MB of the process's resident memory: a fork costs the
#: parent about 0.35 ms per MB (the page tables copied, then a fault for every page it writes
#: while and after the child lives), which the child's half must win back — a re-plan prices
#: a few new blocks, a hundred pairs or so, in a process of hundreds of MB (benchmarks/RESULTS.md)
SPREAD_QUICK_PAIRS_PER_MB = 1.2

#: once the deadline has passed, :meth:`BlockCosts.spread` waits at most this many seconds for
#: the forked child's prices (the child stops at the same deadline, at its search's next node)
STOPPED_WAIT = 2.0


class Stopped(Exception):
    """The coupled search's time limit struck (raised by :meth:`BlockCosts.left` and the master)."""


class _ParentOnly(Exception):
    """A block needs HiGHS in a forked child (:meth:`BlockCosts.spread`): its solver threads
    live in the parent only, so the parent does that block's pairs from there on."""


@dataclass(frozen=True)
class Block:
    """One block of a coupled part: its columns and rows (the shared stores' ``z`` and
    ``Σ_A z_{S,A} = 1`` rows included) and the shared stores it touches."""

    cols: list[int]
    rows: list[int]
    stores: tuple[MIR, ...]


def split_blocks(mdl: Model, cols: list[int], rows: list[int]) -> tuple[list[Block], dict[MIR, list[int]]] | None:
    """Split a part at the partition choices ``z``: blocks of the columns linked through rows
    without counting ``z`` (here: one query each, with its MIRs), and the stores whose ``z``
    lie in the rows of several blocks (shared stores: store → its ``z`` columns in candidate
    order).  None when that leaves one block.  ``cols`` and ``rows``: a part of
    :func:`~mqjoin.planning.ilp.model.components` (the links without ``z`` are the model's,
    :func:`~mqjoin.planning.ilp.model.plain_links`: within a part, the same roots)."""
    zs = {i: store for (store, _), i in mdl.z.items()}
    root, rows_with_z = plain_links(mdl)
    roots = sorted({root[c] for c in cols if c not in zs})
    if len(roots) < 2:
        return None
    number = {r: k for k, r in enumerate(roots)}
    with_z = set(rows_with_z)
    plain = {r: [i for i in mdl.rows[r][1] if i not in zs] for r in rows if r in with_z}  # (rows of a z: few)
    touch: dict[MIR, set[int]] = {}
    for r, idx in plain.items():
        if idx:
            for i in mdl.rows[r][1]:
                if i in zs:
                    touch.setdefault(zs[i], set()).add(number[root[idx[0]]])
    zcols: dict[MIR, list[int]] = {}
    in_part = set(cols)
    for (store, _), i in mdl.z.items():
        if i in in_part:
            zcols.setdefault(store, []).append(i)
    shared = {st: zc for st, zc in zcols.items() if len(touch.get(st, ())) > 1}
    b_cols: list[list[int]] = [[] for _ in roots]
    b_rows: list[list[int]] = [[] for _ in roots]
    for c in cols:
        if c not in zs:
            b_cols[number[root[c]]].append(c)
        elif zs[c] in shared:
            for k in touch[zs[c]]:
                b_cols[k].append(c)
        else:
            b_cols[min(touch.get(zs[c], {0}))].append(c)
    for r in rows:
        idx = mdl.rows[r][1]
        first = plain[r][:1] if r in plain else idx[:1]
        if first:
            b_rows[number[root[first[0]]]].append(r)
        elif zs[idx[0]] in shared:  # Σ_A z = 1 of a shared store: in every block it touches
            for k in touch[zs[idx[0]]]:
                b_rows[k].append(r)
        else:
            b_rows[min(touch.get(zs[idx[0]], {0}))].append(r)
    of_block: list[list[MIR]] = [[] for _ in roots]
    for st in shared:
        for k in touch[st]:
            of_block[k].append(st)
    stores = [tuple(sorted(sts, key=MIR.sort_key)) for sts in of_block]
    return [Block(sorted(c), r, st) for c, r, st in zip(b_cols, b_rows, stores)], shared


#: a choice of shared stores' attributes: store → index into its ``z`` columns (undecided: absent)
Choice = dict[MIR, int]

#: what :func:`per_block` passes a function beside a block (a combination, or an index)
_Of = TypeVar("_Of")


@dataclass(frozen=True)
class Part:
    """A coupled part as the search sees it (built by :func:`coupled_part`)."""

    mdl: Model
    cols: list[int]
    blocks: list[Block]
    shared: dict[MIR, list[int]]  # shared store → its z columns in candidate order
    stores: list[MIR]  # the shared stores, those touched by most blocks first
    tie: list[float]  # the model's tie-break weights with the shared z at 0 (they weigh once, in the search)
    tie_of: dict[MIR, list[float]]  # shared store → the weights of its z
    served: dict[tuple[int, MIR, int], int]  # (block, store, attribute) → the number of the steps it serves
    pos: list[dict[int, int]]  # per block: column → position among the block's columns
    bcast_in: list[list[tuple[int, int, list[int]]]]  # per block: (b, y, known z) positions of its broadcasts
    classes: dict[tuple[int, MIR], list[list[int]]]  # (block, store) → the classes of attributes it tells apart
    combinations: list[tuple[int, tuple[int, ...]]]  # (block, a class per store of the block), Gray order per block
    keys: list[tuple[Any, ...]]  # the cache key (key_of) of each combination
    quick: bool  # small MIRs: a block's LP under a combination is integral as a rule

    @property
    def alone(self) -> list[tuple[int, tuple[Any, ...]]]:
        """Every block once, without a combination (for :func:`per_block`)."""
        return [(k, ()) for k in range(len(self.blocks))]

    def key_of(self, k: int, choice: Choice) -> tuple[Any, ...]:
        """The cache key of block ``k`` under a choice: the steps each of its stores' choices
        serves (None for undecided stores)."""
        return (k, tuple(None if choice.get(st) is None else self.served[(k, st, choice[st])]
                         for st in self.blocks[k].stores))

    def chosen_by(self, k: int, t: tuple[int, ...]) -> Choice:
        """A choice of the block's stores (the first attribute of each class) of a combination."""
        return {st: self.classes[(k, st)][c][0] for st, c in zip(self.blocks[k].stores, t)}

    def patched(self, k: int, vals: Sequence[float], choice: Choice) -> list[float]:
        """A block's values with the shared z as chosen (assigned stores), a new list."""
        vals = list(vals)
        for st in self.blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(self.shared[st]):
                    vals[self.pos[k][i]] = 1.0 if j == choice[st] else 0.0
        return vals

    def restricted(self, k: int, choice: Choice) -> Model:
        """The model with the shared z not chosen fixed at 0 (the row Σ z = 1 makes the chosen
        one 1) and the shared z's tie-break weights at 0."""
        upper = list(self.mdl.upper)
        for st in self.blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(self.shared[st]):
                    if j != choice[st]:
                        upper[i] = 0.0
        return replace(self.mdl, upper=upper, tie=self.tie)


@dataclass
class Incumbent:
    """The coupled search's best choice so far, and the lower bound of where it stands."""

    cost: float = math.inf
    weight: float = math.inf  # its tie-break weight (second pass)
    choice: Choice | None = None
    recosted: list[list[float]] | None = None  # per block: the first plan's values (before any master)
    current: list[float] = field(default_factory=list)  # the bound of the node visited (master: its last optimum)


def coupled_part(mdl: Model, cols: list[int], rows: list[int]) -> Part | None:
    """The part split at its shared stores (None when it does not split into blocks)."""
    split = split_blocks(mdl, cols, rows)
    if split is None:
        return None
    blocks, shared = split
    shared_z = {i for zc in shared.values() for i in zc}
    block_of = {c: k for k, b in enumerate(blocks) for c in b.cols if c not in shared_z}
    # (each from its row b − y + Σ_known z ≥ 0, which lists the b, the y and the z known to the step)
    bcast = [(block_of[idx[0]], idx[0], idx[1], idx[2:]) for idx in (mdl.rows[r][1] for r in mdl.bcast_row.values())
             if idx[0] in block_of]
    # choices that serve the same broadcast steps of a block are one (numbered: keys hash fast)
    serving: dict[tuple[int, int], list[int]] = {}  # (block, z) → the broadcast indicators of the steps it serves
    for k, bi, _, zs in bcast:
        for i in zs:
            serving.setdefault((k, i), []).append(bi)
    number: dict[frozenset[int], int] = {}
    served: dict[tuple[int, MIR, int], int] = {}
    classes = {}
    for k, b in enumerate(blocks):
        for st in b.stores:
            by: dict[int, list[int]] = {}
            for j, i in enumerate(shared[st]):
                n = served[(k, st, j)] = number.setdefault(frozenset(serving.get((k, i), ())), len(number))
                by.setdefault(n, []).append(j)
            classes[(k, st)] = list(by.values())
    pos = [{c: n for n, c in enumerate(b.cols)} for b in blocks]
    bcast_in: list[list[tuple[int, int, list[int]]]] = [[] for _ in blocks]
    for k, bi, yi, zs in bcast:
        bcast_in[k].append((pos[k][bi], pos[k][yi], [pos[k][z] for z in zs]))
    touching = collections.Counter(st for b in blocks for st in b.stores)
    combinations, keys = [], []
    for k, b in enumerate(blocks):
        by_class = [[served[(k, st, attrs[0])] for attrs in classes[(k, st)]] for st in b.stores]
        for t in _reflected([len(c) for c in by_class]):
            combinations.append((k, t))
            keys.append((k, tuple([c[i] for c, i in zip(by_class, t)])))
    return Part(
        mdl=mdl, cols=cols, blocks=blocks, shared=shared,
        stores=sorted(shared, key=lambda st: (-touching[st], st.sort_key())),
        tie=[0.0 if i in shared_z else w for i, w in enumerate(mdl.tie)],
        tie_of={st: [mdl.tie[i] for i in zc] for st, zc in shared.items()},
        served=served, pos=pos, bcast_in=bcast_in, classes=classes, combinations=combinations, keys=keys,
        quick=not large_mirs(mdl, cols))


@dataclass
class BlockCosts:
    """The blocks' optima, LP bounds and lexicographic optima under choices, computed on demand
    and cached by :meth:`Part.key_of` (one instance per coupled solve; see the module docstring).

    ``lp_priced``: price every combination by its LP before a branch and bound (the master of
    parts with large MIRs).  ``deadline``: the time (``time.perf_counter()``) past which
    :meth:`left` raises :class:`Stopped`, as it does once ``watch`` is stopped (the part's
    incumbent and bound go to ``watch`` too, from the search)."""

    part: Part
    deadline: float | None
    watch: Watch = field(default_factory=Watch)
    lp_priced: bool = False
    # key → optimum, values (None: an enumerated block's, computed on demand by :meth:`plan`; read
    # only: those loaded from an earlier solve are shared with it, :func:`~mqjoin.planning.ilp.prices.load_prices`)
    costs: dict[tuple[Any, ...], tuple[float, Sequence[float] | None]] = field(default_factory=dict)
    ties: dict[tuple[Any, ...],
               tuple[float, Sequence[float] | None, bool]] = field(default_factory=dict)  # → weight, values, proven
    lp_bounds: dict[tuple[Any, ...], float] = field(default_factory=dict)  # key → its LP optimum, when fractional
    # per block: (choices it saw, (optimum, values))
    known: dict[int, list[tuple[tuple[int | None, ...], tuple[float, Sequence[float] | None]]]] = field(
        default_factory=dict)
    pool: dict[int, list[list[float]]] = field(default_factory=dict)  # plans found per block (first stage)
    lightest: dict[int, list[float]] = field(default_factory=dict)  # per block: its last search's lexicographic optimum
    lps: dict[tuple[int, int], Any] = field(default_factory=dict)  # one HiGHS instance per block and stage
    assigned: dict[tuple[Any, ...], tuple[BlockTable, int]] = field(default_factory=dict)  # key → its table, assignment
    searches: dict[int, BlockPaths | SeamSearch
                   | None] = field(default_factory=dict)  # per block: its search (None: LPs)
    # per block whose search gave up: its search further on, once a branch and bound would
    # follow (:meth:`_further`; None: that gave up too)
    further: dict[int, BlockPaths | None] = field(default_factory=dict)
    # per block, once it is costed by LPs or recosted (:meth:`_lists`): the positions of its
    # binaries and its columns' upper bounds (numpy), and (position, cost) of its columns that cost
    _of_block: dict[int, tuple[Any, Any, list[tuple[int, float]]]] = field(default_factory=dict, repr=False)

    def _lists(self, k: int) -> tuple[Any, Any, list[tuple[int, float]]]:
        """Block ``k``'s binaries, upper bounds and costs as :meth:`block_lp` and :meth:`recost`
        read them (made for the blocks that are costed here, not for every block of the part:
        a re-plan costs a few)."""
        lists = self._of_block.get(k)
        if lists is None:
            import highspy
            import numpy as np

            mdl, cols = self.part.mdl, self.part.blocks[k].cols
            lists = self._of_block[k] = (
                np.array([n for n, c in enumerate(cols) if mdl.integer[c]], dtype=np.int64),
                np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in cols]),
                [(i, mdl.cost[c]) for i, c in enumerate(cols) if mdl.cost[c]])
        return lists

    def enumerate_blocks(self) -> list[int]:
        """Cost every combination of every block that :func:`~mqjoin.planning.ilp.enumeration.block_tables`
        enumerates, its optimum and its lexicographic optimum at once (``costs``, ``ties``; the
        values on demand, :meth:`plan`).  Returns the blocks left to their LPs.  Blocks whose
        every combination is costed already (prices read from a solve before) are neither."""
        part = self.part
        by_block: dict[int, list[tuple[tuple[Any, ...], tuple[int, ...]]]] = {}  # block → (key, combination)
        for (k, t), key in zip(part.combinations, part.keys):
            by_block.setdefault(k, []).append((key, t))
        todo = [k for k in range(len(part.blocks)) if any(key not in self.costs for key, _ in by_block.get(k, ()))]
        left = []
        for k, table in zip(todo, block_tables(part, todo)):
            if table is None:
                left.append(k)
                continue
            combos = by_block.get(k, [])
            for (key, _), (cost, weight, a) in zip(combos, table.optima([t for _, t in combos])):
                self.costs[key] = (cost, None)
                self.ties[key] = (weight, None, True)
                self.assigned[key] = (table, a)
        return left

    def plan(self, key: tuple[Any, ...], choice: Choice, lexicographic: bool) -> Sequence[float]:
        """The values of a costed block's columns under a choice (the key's): its lexicographic
        optimum or the optimum found first."""
        if key in self.assigned:
            table, a = self.assigned[key]
            return table.values(a, choice)
        # (kept with the key: only an enumerated block's are computed, above)
        return cast(Sequence[float], self.ties[key][1] if lexicographic else self.costs[key][1])

    def left(self) -> float | None:
        """Seconds left before the deadline (at least 0.01); :class:`Stopped` past it."""
        if self.watch.stopped:
            raise Stopped
        if self.deadline is None:
            return None
        if time.perf_counter() > self.deadline:
            raise Stopped
        return max(0.01, self.deadline - time.perf_counter())

    def instance(self, k: int, stage: int, sub: Callable[[], Model], brows: list[int]) -> Any:
        """The block's HiGHS instance of a stage (0: cost, 1: tie-break), built from ``sub()``
        (a model) the first time."""
        if forked.in_child():
            raise _ParentOnly
        if (k, stage) not in self.lps:
            import highspy
            import numpy as np

            h = self.lps[(k, stage)] = silent_highs(highspy)
            if self.part.quick:  # tiny LPs, one per combination: presolve off is faster
                h.setOptionValue("presolve", "off")
            h.passModel(highs_lp(sub(), self.part.blocks[k].cols, brows, highspy, np))
        return self.lps[(k, stage)]

    def recost(self, k: int, vals: Sequence[float], choice: Choice) -> tuple[float, list[float]]:
        """A plan of the block under these choices: shared z as chosen, broadcasts anew (every
        plan is feasible under every choice; only which of its steps broadcast changes)."""
        part = self.part
        vals = part.patched(k, vals, choice)
        for b, y, zs in part.bcast_in[k]:
            vals[b] = max(0.0, vals[y] - sum(vals[z] for z in zs)) if vals[y] else 0.0  # (a step not used: none)
        return math.fsum(c * vals[i] for i, c in self._lists(k)[2]), vals

    def block_lp(self, k: int, h: Any, choice: Choice) -> tuple[float, list[float] | None] | None:
        """The block's LP under the choices on its HiGHS instance ``h`` (either stage): its
        optimum (a lower bound of the block's optimum there) and its values when the binaries
        come out integral (then they are the block's optimum under the choices), else None."""
        import highspy
        import numpy as np

        self.left()
        part = self.part
        n = len(part.blocks[k].cols)
        integer, upper, _ = self._lists(k)
        up = upper.copy()
        for st in part.blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(part.shared[st]):
                    if j != choice[st]:
                        up[part.pos[k][i]] = 0.0
        h.changeColsBounds(n, np.arange(n, dtype=np.int32), np.zeros(n), up)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        vals = np.asarray(h.getSolution().col_value)
        obj = float(h.getInfo().objective_function_value)
        ints = vals[integer]
        if np.any(np.abs(ints - np.round(ints)) > INTEGRALITY_TOLERANCE):
            return obj, None
        vals[integer] = np.round(ints)
        return obj, [float(v) for v in vals]

    def lower(self, k: int, key: tuple[Any, ...]) -> float:
        """The best bound known of a block's optimum under a choice (``key``) not costed yet:
        its LP optimum, or the optimum of a cached, less decided choice."""
        return max([v[0] for kk, v in self.known.get(k, ()) if all(x is None or x == y for x, y in zip(kk, key[1]))]
                   + [self.lp_bounds.get(key, -math.inf)])

    def lp_cost(self, k: int, choice: Choice) -> float:
        """The block's LP under the choices: its optimum when integral (costed then), else a
        bound (``lp_bounds``) — or, where the block may search further (:meth:`_further`), its
        optimum by that search, which then costs the block's other choices without LPs; either
        way the best bound known (:meth:`lower`)."""
        key = self.part.key_of(k, choice)
        if key not in self.costs and key not in self.lp_bounds and not self.searched(k, choice):
            b = self.part.blocks[k]
            res = self.block_lp(k, self.instance(k, 0, lambda: self.part.restricted(k, choice), b.rows), choice)
            if res is not None and res[1] is not None:
                self.costs[key] = (math.fsum(self.part.mdl.cost[c] * v for c, v in zip(b.cols, res[1])), res[1])
            elif res is not None and not (self._further(k) and self.searched(k, choice)):
                self.lp_bounds[key] = res[0]
        return self.costs[key][0] if key in self.costs else self.lower(k, key)

    def search(self, k: int) -> BlockPaths | SeamSearch | None:
        """The block's search without LPs (:mod:`mqjoin.planning.ilp.paths`), or once that
        gave up on the block (too many nodes), its search by its seam
        (:mod:`mqjoin.planning.ilp.seams`: several queries), or once that gave up too its
        search further on where :meth:`_further` made one, else None (the block has none, or
        has rows the search does not model, or every search of it gave up)."""
        if k not in self.searches:
            b = self.part.blocks[k]
            paths = self.searches[k] = (BlockPaths(self.part.mdl, b.cols, self.part.tie, self._check())
                                        if applies(self.part.mdl, b.rows) else None)
            if paths is not None and paths.queries > 1:  # (the seam's way is cheaper where this one struggles)
                paths.work_limit = min(paths.work_limit, WORK_LIMIT_SEVERAL)
        found = self.searches[k]
        return found if found is not None else self.further.get(k)

    def _further(self, k: int) -> bool:
        """Whether the block now has a search further on (:meth:`search`): made, in place of
        the branch and bound of :mod:`mqjoin.planning.ilp.branching`, for a block of one query
        with large MIRs whose search gave up, with :data:`FURTHER` times its node and work
        limits.  The block's LPs are fractional as a rule there, and the branch and bound solves
        one per node, where a node of the search costs far less.  Small MIRs keep the branch and
        bound (their LPs are integral as a rule), and so does a node limit of 0 (the searches
        switched off); a block whose search further on gives up too goes back to it."""
        if k in self.further:
            return self.further[k] is not None
        b = self.part.blocks[k]
        gave_up = k in self.searches and self.searches[k] is None
        if not gave_up or self.part.quick or block_paths.NODE_LIMIT <= 0 or not applies(self.part.mdl, b.rows):
            return False
        paths = BlockPaths(self.part.mdl, b.cols, self.part.tie, self._check(),
                           limit=FURTHER * block_paths.NODE_LIMIT)
        paths.work_limit = FURTHER * block_paths.WORK_LIMIT
        self.further[k] = paths if paths.queries == 1 else None
        return self.further[k] is not None

    def _check(self) -> Callable[[], None]:
        """A check for the searches: raises :class:`Stopped` as :meth:`left` does (without a
        reference back to these costs)."""
        deadline, watch = self.deadline, self.watch

        def check() -> None:
            if watch.stopped or (deadline is not None and time.perf_counter() > deadline):
                raise Stopped

        return check

    def _gave_up(self, k: int) -> None:
        """The block's search gave up: its seam's next, if it has one and has not given up;
        without one, a search of several queries tries again up to the full
        :data:`~mqjoin.planning.ilp.paths.WORK_LIMIT`; a search further on (:meth:`_further`)
        gives up for good."""
        paths = self.searches[k]
        if paths is None:  # (its search further on gave up)
            self.further[k] = None
            return
        if isinstance(paths, BlockPaths):
            b = self.part.blocks[k]
            seam = find_seam(self.part.mdl, b.cols, b.rows, frozenset(self.part.shared))
            if seam is not None:
                self.searches[k] = SeamSearch(self.part.mdl, b.cols, seam, self.part.tie, self._check())
                return
            if paths.work_limit < WORK_LIMIT:
                paths.work_limit = WORK_LIMIT
                return
        self.searches[k] = None

    def searched(self, k: int, choice: Choice) -> bool:
        """Cost the block under the choices by its search (:meth:`search`), which need only beat
        the block's last plan recosted there; False when it has none or the search gives up
        (then no other combination of the block tries it, unless it searches further on)."""
        paths = self.search(k)
        if paths is None:
            return False
        # the plan of the block's last combination, recosted here: the search need only beat it
        # (combinations come one store apart, so it is near the optimum as a rule)
        last = next((vals for _, (_, vals) in reversed(self.known.get(k, [])) if vals), None)
        held = (math.inf, []) if last is None else self.recost(k, last, choice)
        try:
            obj, vals = paths.optimum(choice, held[0])
        except TooLarge:
            self._gave_up(k)
            return self.searched(k, choice)
        if obj == math.inf and held[1]:
            obj, vals = held
        key = self.part.key_of(k, choice)
        self.costs[key] = (obj, vals)
        self.known.setdefault(k, []).append((key[1], self.costs[key]))
        return True

    def cost(self, k: int, choice: Choice) -> float:
        """The block's optimum under the choices: by its search without LPs where it ends
        within its nodes, else its LP when integral (small MIRs, ``quick``, or ``lp_priced``),
        else the best recosted known plan when it meets the best bound known (exact then), else
        its search further on (large MIRs, :meth:`_further`) or a branch and bound
        from that plan."""
        part, b = self.part, self.part.blocks[k]
        key = part.key_of(k, choice)
        if key not in self.costs and self.searched(k, choice):
            return self.costs[key][0]
        if part.quick or self.lp_priced:  # one LP (integral as a rule with small MIRs) is cheaper than recosting
            self.lp_cost(k, choice)
        if key not in self.costs:
            bound = self.lower(k, key)
            plan = min((self.recost(k, vals, choice) for vals in self.pool.get(k, [])), key=lambda t: t[0],
                       default=None)
            if plan is not None and plan[0] <= bound + 1e-9 * max(1.0, abs(bound)):
                self.costs[key] = plan
                self.known.setdefault(k, []).append((key[1], plan))
                return plan[0]
            if self._further(k) and self.searched(k, choice):
                return self.costs[key][0]
            start = None
            if plan is not None:
                start = [0.0] * part.mdl.num_variables
                for c, v in zip(b.cols, plan[1]):
                    start[c] = v
            sub = part.restricted(k, choice)
            st, obj, _, vals = branch_and_bound(sub, b.cols, b.rows, self.left(), start=start,
                                                highs=self.instance(k, 0, lambda: sub, b.rows),
                                                watch=self.watch.quiet())
            if st != "optimal":
                raise Stopped
            self.costs[key] = (obj, vals)
            self.known.setdefault(k, []).append((key[1], self.costs[key]))
            self.pool.setdefault(k, []).append(vals)
        return self.costs[key][0]

    def weight(self, k: int, choice: Choice) -> float:
        """The block's least tie-break weight at its optimal cost under the choices (costed
        already): its tie-break LP when integral (``quick``), else a branch and bound on it."""
        import highspy

        part, b = self.part, self.part.blocks[k]
        key = part.key_of(k, choice)
        if key not in self.ties:
            obj, kept = self.costs[key]
            vals = part.patched(k, cast(list[float], kept), choice)  # (an enumerated block's are weighed)
            if not any(part.tie[c] for c in b.cols):
                self.ties[key] = (0.0, vals, True)
                return 0.0
            cap = obj * (1 + TIE_SLACK) + TIE_SLACK
            paths = self.search(k)
            if paths is not None:
                try:
                    w, vals2 = paths.lexicographic(choice, obj, self._lighter(k, vals, choice, cap))
                    self.ties[key] = (w, vals2, True)
                    self.lightest[k] = vals2
                    return w
                except TooLarge:
                    self._gave_up(k)
                    return self.weight(k, choice)
            brows = b.rows + [len(part.mdl.rows)]
            h = self.instance(k, 1, lambda: self._capped(k, choice, cap), brows)
            h.changeRowBounds(len(b.rows), -highspy.kHighsInf, cap)
            res = self.block_lp(k, h, choice) if part.quick else None
            lp_vals = None if res is None else res[1]
            if lp_vals is not None:
                self.ties[key] = (self._weigh(k, lp_vals), lp_vals, True)
                return self.ties[key][0]
            start = [0.0] * part.mdl.num_variables
            for c, v in zip(b.cols, vals):
                start[c] = v
            st, w, _, vals2 = branch_and_bound(self._capped(k, choice, cap), b.cols, brows, self.left(), start=start,
                                               integral_objective=True, highs=h, watch=self.watch.quiet())
            self.ties[key] = (w, vals2, st == "optimal")
        return self.ties[key][0]

    def _weigh(self, k: int, vals: list[float]) -> float:
        """The tie-break weight of a plan of the block (its columns' values)."""
        return math.fsum(self.part.tie[c] * v for c, v in zip(self.part.blocks[k].cols, vals))

    def _lighter(self, k: int, vals: list[float], choice: Choice, cap: float) -> list[float]:
        """The first incumbent of a block's lexicographic search under the choices: its plan
        ``vals`` or, when lighter and within the cap there (still optimal), its last
        lexicographic optimum recosted (combinations come one store apart, and a store's
        attribute often leaves the lightest plan as it was)."""
        last = self.lightest.get(k)
        if last is None:
            return vals
        cost, again = self.recost(k, last, choice)
        if cost > cap:
            return vals
        return again if self._weigh(k, again) < self._weigh(k, vals) else vals

    def _capped(self, k: int, choice: Choice, cap: float) -> Model:
        """The block's tie-break model under the choices: the tie-break weights as costs and
        the cost capped at ``cap`` by a last row."""
        costed = [c for c in self.part.blocks[k].cols if self.part.mdl.cost[c]]
        return replace(self.part.restricted(k, choice), cost=self.part.tie, rows=self.part.mdl.rows + [
            ("canonical_cost", costed, [self.part.mdl.cost[c] for c in costed], -math.inf, cap)])

    def spread(self, fn: Callable[[int, _Of], float], pairs: list[tuple[int, _Of]],
               skip: AbstractSet[int] = frozenset()) -> list[float]:
        """:func:`per_block` on two cores: the blocks that have a search are shared out between
        this process and a forked child (:func:`~mqjoin.planning.ilp.forked.split`), each side
        taking the next block from one list (:class:`~mqjoin.planning.ilp.forked.Shares`, those
        with the most pairs times columns first, a rough measure of their work) once it is done
        with the last, so neither side idles while
        the other still has a long list; the blocks without one stay here, on the threads.  The
        searches are pure Python, which threads cannot run side by side.

        A block is done whole on one side, its pairs in their order, and the child's cache
        entries for its blocks are merged here afterwards, so the results and every later
        answer are those of :func:`per_block`.  HiGHS runs in the parent only: a block that
        needs an LP in the child (its search gave up, or it has none) is left there from that
        pair on and finished here, in order; so is every block the parent did not take should
        the child die.  When the deadline strikes, both sides stop at their next check and the
        child's entries are still merged (waiting for them at most :data:`STOPPED_WAIT`
        seconds) before :class:`Stopped` goes on: every price either side found is exact, and a
        later solve takes them up (:mod:`mqjoin.planning.ilp.prices`)."""
        if not forked.available():
            return per_block(fn, pairs, skip)
        groups: dict[int, list[int]] = {}
        for i, (k, _) in enumerate(pairs):
            if i not in skip:
                groups.setdefault(k, []).append(i)
        searchable = sorted((k for k in groups if self.search(k) is not None),  # (built here: the child inherits them)
                            key=lambda k: (-len(groups[k]) * len(self.part.blocks[k].cols), k))
        with_search = sum(len(groups[k]) for k in searchable)
        if (with_search < SPREAD_MIN or len(searchable) > forked.MAX_SHARES
                or (self.part.quick and with_search < SPREAD_QUICK_PAIRS_PER_MB * forked.resident_mb())):
            return per_block(fn, pairs, skip)
        shares = forked.Shares(list(range(len(searchable))))
        given = {i for k in searchable for i in groups[k]}

        def taking(taken: set[int]) -> tuple[dict[int, float], list[int], set[int]]:
            """Blocks taken from the shares until none is left: the results, the pairs left to
            the parent (:class:`_ParentOnly`, in the child only) and the blocks taken (also
            added to ``taken`` as they are, for a side that stops on the way)."""
            out: dict[int, float] = {}
            left: list[int] = []
            while (n := shares.take()) is not None:
                k = searchable[n]
                taken.add(k)
                for m, i in enumerate(groups[k]):
                    try:
                        out[i] = fn(*pairs[i])
                    except _ParentOnly:
                        left.extend(groups[k][m:])
                        break
            return out, left, taken

        here: list[tuple[Any, ...]] = []  # this side's taking(), run beside the threads' blocks
        stopped: list[float] = []  # when this side or the wait for the child passed the deadline

        def there() -> tuple[dict[int, float], list[int], tuple[Any, ...], bool]:
            before = self._mark()
            taken: set[int] = set()
            try:
                out, left, _ = taking(taken)
            except Stopped:  # (the deadline: what this side priced goes back all the same)
                return {}, [], self._entries(taken, before), True
            return out, left, self._entries(taken, before), False

        def mine() -> list[float] | None:
            try:
                return per_block(fn, pairs, set(skip) | given, lambda: here.append(taking(set())))
            except Stopped:
                stopped.append(time.perf_counter())
                return None

        def poll() -> None:  # past the deadline, the child (stopping too) is awaited a little while
            if not self.watch.stopped and self.deadline is not None and time.perf_counter() > self.deadline:
                if not stopped:
                    stopped.append(time.perf_counter())
                if time.perf_counter() <= stopped[0] + STOPPED_WAIT:
                    return
            self.left()

        try:
            ran, (done, left, entries, child_stopped) = forked.split(mine, there, poll)
        except forked.ChildFailed as e:
            ran, done, left, entries, child_stopped = cast("list[float] | None", e.here), {}, None, None, False
        finally:
            shares.close()
        if ran is None or child_stopped:  # (a side stopped: its prices and the other's kept, then the stop)
            if entries is not None:
                self._merge(entries)
            raise Stopped
        out = ran
        ours, _, taken_here = here[0]
        if left is None:  # the child died: every block this side did not take, here too
            left = sorted(i for k in searchable if k not in taken_here for i in groups[k])
        if entries is not None:
            self._merge(entries)
        for i, v in (*ours.items(), *done.items()):
            out[i] = v
        if left:
            rest = per_block(fn, pairs, set(range(len(pairs))) - set(left))
            for i in left:
                out[i] = rest[i]
        return out

    def _mark(self) -> tuple[Any, ...]:
        """Where the caches stand (for :meth:`_entries`): the keys costed, weighed and bounded,
        and per block its known plans, its pool and its last lexicographic optimum."""
        return (set(self.costs), set(self.ties), set(self.lp_bounds), {k: len(v) for k, v in self.known.items()},
                {k: len(v) for k, v in self.pool.items()}, dict(self.lightest))

    def _entries(self, blocks: set[int], before: tuple[Any, ...]) -> tuple[Any, ...]:
        """What these blocks' pairs added to the caches since :meth:`_mark` gave ``before`` (for
        :meth:`_merge` in the parent, which holds the rest already)."""
        costs, ties, lp_bounds, known, pool, lightest = before
        return ({key: v for key, v in self.costs.items() if key[0] in blocks and key not in costs},
                {key: v for key, v in self.ties.items() if key[0] in blocks and key not in ties},
                {key: v for key, v in self.lp_bounds.items() if key[0] in blocks and key not in lp_bounds},
                {k: v for k, v in self.known.items() if k in blocks and len(v) != known.get(k)},
                {k: v for k, v in self.pool.items() if k in blocks and len(v) != pool.get(k)},
                {k: v for k, v in self.lightest.items() if k in blocks and v is not lightest.get(k)},
                {k: type(self.searches[k]) for k in blocks if k in self.searches},
                {k for k in blocks if k in self.further and self.further[k] is None})

    def _merge(self, entries: tuple[Any, ...]) -> None:
        costs, ties, lp_bounds, known, pool, lightest, gave_up, further_gave_up = entries
        self.costs.update(costs)
        self.ties.update(ties)
        self.lp_bounds.update(lp_bounds)
        self.known.update(known)
        self.pool.update(pool)
        self.lightest.update(lightest)
        for k, kind in gave_up.items():  # (the child's search of the block gave up: so does this side's)
            while k in self.searches and self.searches[k] is not None and not isinstance(self.searches[k], kind):
                self._gave_up(k)
        for k in further_gave_up:  # (so did its search further on)
            self.further[k] = None


def per_block(fn: Callable[[int, _Of], float], pairs: list[tuple[int, _Of]],
              skip: AbstractSet[int] = frozenset(), beside: Callable[[], None] | None = None) -> list[float]:
    """``fn(block, combination)`` for every pair (0.0 for the indices in ``skip``), the blocks
    spread over :data:`BLOCK_THREADS` threads, each block's pairs in their order (so the results
    do not depend on the threads); ``beside``, when given, runs as one more task among them.
    The first exception raised is raised here.

    >>> per_block(lambda k, t: 10 * k + t[0], [(0, (1,)), (1, (2,)), (0, (3,))], skip={1})
    [1, 0.0, 3]
    """
    out: list[float] = [0.0] * len(pairs)
    groups: dict[int, list[int]] = {}
    for i, (k, _) in enumerate(pairs):
        if i not in skip:
            groups.setdefault(k, []).append(i)

    def run(indices: list[int]) -> None:
        for i in indices:
            out[i] = fn(*pairs[i])

    tasks: list[Callable[[], None]] = [partial(run, indices)
                                       for indices in sorted(groups.values(), key=len, reverse=True)]
    if beside is not None:  # (first: it takes the searches, the others wait on HiGHS as a rule)
        tasks.insert(0, beside)
    if BLOCK_THREADS < 2 or len(tasks) < 2:
        for task in tasks:
            task()
    else:  # the longest first, so that no thread is left with one at the end
        with ThreadPoolExecutor(BLOCK_THREADS) as pool:
            list(pool.map(lambda task: task(), tasks))
    return out


def _reflected(radices: list[int]) -> list[tuple[int, ...]]:
    """Every combination of digits below the radices, consecutive ones differing in one digit
    (the reflected mixed-radix Gray order).

    >>> _reflected([2, 3])
    [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]
    """
    out: list[tuple[int, ...]] = [()]
    for r in radices:
        out = [p + (d,) for i, p in enumerate(out) for d in (range(r) if i % 2 == 0 else reversed(range(r)))]
    return out
