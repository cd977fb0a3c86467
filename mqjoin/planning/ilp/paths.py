"""A block's exact optimum and lexicographic optimum without LPs: a branch and bound over which
MIRs are materialised and how stores are partitioned, each node solved per start relation.

A step's identity is its ordered prefix (which begins with the start relation), its target and
its owner's classes, so the steps of different start relations are never shared: per start
relation ``r`` the candidate probe orders of the query and of every MIR that contains ``r``
are root paths of one *prefix tree* of steps rooted at ``r``, and a step costs once however
many chosen orders run through it.  The starts of a block are coupled only by

* the materialisation ``m`` of its MIRs: an order that probes the store of ``M`` needs
  ``m_M = 1``, and then every start of ``M`` must choose an order of ``M`` (whose steps lie
  in the prefix trees of ``M``'s starts, and may be shared with the query's orders there);
* the partition attributes ``z`` of its stores: a step's broadcast surcharge ``c·(p − 1)`` is
  paid unless the chosen attribute of its target is known to its prefix.

With ``m`` and ``z`` fixed the block's cost is therefore a sum over start relations of
independent, small problems: pick one root path per owner of that start (the queries and the
materialised MIRs that contain it) and pay for the union of their steps.  :class:`BlockPaths`
solves such a problem by a depth-first search over the owners' orders, cheapest first, pruned
by the best union found.

:meth:`BlockPaths.optimum` searches over ``m`` and ``z`` with a *relaxation* as bound: an MIR
not decided yet may be probed by any order but need not be maintained, and a store whose
attribute is not decided serves every step that knows one of its candidate attributes.  Every
plan of a node costs at least the relaxation (dropping maintenance and broadcasts only lowers a
cost, allowing more orders only lowers a minimum), so a node whose relaxation is no better than
the incumbent is pruned.  When the relaxation's choice probes only MIRs decided to be
materialised and every store it relies on has one attribute that serves all its used steps,
that choice is a plan of the node at the relaxation's cost: the node is solved.  Else the
search branches on an MIR the choice probes (materialised or not) or on a store's attribute.
The search is exact: it ends only when every node is solved or pruned.

The canonical tie-break (:meth:`BlockPaths.lexicographic`) is the same search with another
objective: the least tie-break weight among the plans that cost at most ``cap`` (the optimum
within :data:`~mqjoin.planning.ilp.model.TIE_SLACK`, the rule of the LP path).  Per start the
relaxation keeps the Pareto front of (cost, weight) of its choices within the cap, the fronts
are combined over the starts, and a node's bound is the least weight of a combination within
the cap (an MIR not maintained and a store's undecided attribute at its least weight only
lower it).  Weights are integral, so a node whose bound is not below the incumbent's by one is
pruned; so is, while the fronts are combined, a partial combination whose weight with the
least weights of the fronts still to come is not.

A block holds the columns of a part: probe orders ``x``, steps ``y``, materialisations ``m``,
partition choices ``z`` and broadcasts ``b`` only (:func:`applies`); the shared stores of a
coupled part are fixed by the choice or, undecided, searched like the block's own.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning import candidates, ilp
>>> mdl = ilp.build_model(candidates.enumerate_candidates(random_workload(1, 10, 5, seed=4)), "single")
>>> (cols, rows), = ilp.components(mdl)
>>> applies(mdl, rows)
True
>>> paths = BlockPaths(mdl, cols, mdl.tie)
>>> cost, vals = paths.optimum({})
>>> from mqjoin.planning.ilp.branching import branch_and_bound
>>> round(cost, 6) == round(branch_and_bound(mdl, cols, rows, None)[1], 6)
True
>>> weight, canonical = paths.lexicographic({}, cost)
>>> weight == math.fsum(mdl.tie[c] * v for c, v in zip(cols, canonical))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar, cast

from mqjoin.planning.candidates import MIR
from mqjoin.planning.ilp.model import TIE_SLACK, Model

#: the kinds of rows a block may hold for :class:`BlockPaths` (by the prefix of their names,
#: :func:`~mqjoin.planning.ilp.model.build_model`): probe orders, steps, MIR use and
#: materialisation, partition choices and broadcasts
ROW_KINDS = ("one_", "mat_", "use_", "link_", "bcast_", "gbcast_", "part_")


def applies(mdl: Model, rows: list[int]) -> bool:
    """Whether every row of a part is of the kinds :class:`BlockPaths` models (no memory
    budget, no replica rows)."""
    return mdl.policy in ("single", "replicas") and all(mdl.rows[r][0].startswith(ROW_KINDS) for r in rows)


@dataclass(frozen=True)
class _Order:
    col: int  # its x column
    steps: tuple[int, ...]  # its steps (numbers in the block)
    mirs: int  # bit mask of the MIRs it probes
    weight: float  # its tie-break weight


@dataclass(frozen=True)
class _Start:
    orders: tuple[_Order, ...]  # its orders (numbered here by their position)
    owners: tuple[tuple[int, tuple[int, ...]], ...]  # (MIR number, or < 0 for a query; the numbers of its orders)
    relevant: int  # mask of the MIRs probed here or owning orders here
    owning: int  # mask of the MIRs owning orders here
    stores: tuple[int, ...]  # the stores targeted by some step here
    shared: tuple[tuple[int, ...], ...]  # per two orders: how many leading steps they share
    probing: tuple[tuple[int, int], ...]  # (mask of MIRs, mask of the numbers of the orders that probe just those)


#: per start: the chosen order of each owner there
Picks = Sequence[tuple[_Order, ...]]

#: an owner's order at a start, priced (:meth:`BlockPaths._ranking`): the order, its number there,
#: the charge of its steps, the charge of its steps from each step on, the steps it shares with
#: every order there
_Entry = tuple[_Order, int, float, tuple[float, ...], tuple[int, ...]]

#: a choice's problem at a start (:meth:`BlockPaths._problem`)
_Problem = tuple[int, int, int, int]

#: what a Pareto front holds beside the cost and the weight (:func:`_pareto`)
_P = TypeVar("_P")


#: nodes one search visits at most before it gives up (:class:`TooLarge`): past that the
#: block's LPs are cheaper (its nodes cost about as much as an LP each)
NODE_LIMIT = 1500


#: the work of one search (the partial choices its per-start searches extend, :func:`_least`,
#: counted whether their results are cached or not) past which it gives up as past
#: :data:`NODE_LIMIT` nodes: where queries share their MIRs, a start holds many owners and a
#: node costs several times as much (on the random workloads measured, every search that ends
#: does so within two thirds of this)
WORK_LIMIT = 400_000


class TooLarge(Exception):
    """A search visited :data:`NODE_LIMIT` nodes, or did :data:`WORK_LIMIT` work, without
    ending: the caller uses the LPs."""


class BlockPaths:
    """One block's prefix trees and its search (see the module docstring).  ``cols``: the
    block's columns; ``tie``: the tie-break weight of every model column; ``check``: called at
    every node of the search (it raises to stop it); ``limit``: the nodes of one search at most
    (:class:`TooLarge` past them; None: :data:`NODE_LIMIT`, and :data:`WORK_LIMIT` work;
    ``math.inf``: no limit).  Columns whose upper bound is 0 are ruled out (an order with such
    a step, MIR or bound of its own is not a choice); ``given``: the ``m`` columns of MIRs
    maintained outside the block (:mod:`mqjoin.planning.ilp.seams`), materialised from the
    root on and probed without an order of their own here."""

    def __init__(self, mdl: Model, cols: list[int], tie: list[float], check: Callable[[], object] = lambda: None,
                 limit: float | None = None, given: frozenset[int] = frozenset()):
        self.mdl, self.cols, self.tie, self.check = mdl, cols, tie, check
        self.pos = {c: i for i, c in enumerate(cols)}  # column → its position among the block's
        self.limit = NODE_LIMIT if limit is None else limit
        self.work_limit = WORK_LIMIT if limit is None else math.inf
        inside = set(cols)
        self.mirs = [c for c in mdl.m.values() if c in inside]  # per MIR number: its m column
        mir_no = {c: n for n, c in enumerate(self.mirs)}
        self.size = [len(m.relations) for m, c in mdl.m.items() if c in inside]  # per MIR: its relations
        self.stores: list[list[int]] = []  # per store number: its z columns (candidate order)
        self.store_of: dict[MIR, int] = {}  # store → its number
        store_of = self.store_of
        attr_of = {}
        for (st, a), c in mdl.z.items():
            if c in inside:
                if st not in store_of:
                    store_of[st] = len(self.stores)
                    self.stores.append([])
                self.stores[store_of[st]].append(c)
                attr_of[c] = a
        self.cost: list[float] = []  # per step (numbered in the block)
        self.bcost: list[float] = []  # its broadcast's cost (0: it never broadcasts)
        self.ycol: list[int] = []
        self.bcol: list[int] = []  # (−1: none)
        self.target: list[int] = []  # its target's store number (−1: no z, broadcast whenever bcost)
        self.known: list[int] = []  # mask of its target's z that it knows
        step_no: dict[int, int] = {}
        y_step, x_key = mdl.keys_of("y"), mdl.keys_of("x")
        groups: dict[str, dict[int, list[_Order]]] = {}  # start → owner number → its orders there
        query_no: dict[str, int] = {}  # (queries: −1, −2, …)
        present, kept = set(), set()  # the (query, start) with orders here; those with orders not ruled out
        for xc in sorted(c for c in inside if c in x_key):  # (in the model's order)
            owner, start, _ = x_key[xc]
            if isinstance(owner, str):
                present.add((owner, start))
            if not mdl.upper[xc] or not all(mdl.upper[c] for c in mdl.order_steps[xc]) \
                    or not all(mdl.upper[c] for c in mdl.order_mirs[xc]):
                continue  # (ruled out by a bound at 0)
            if isinstance(owner, str):
                kept.add((owner, start))
            ids = []
            for yc in mdl.order_steps[xc]:
                if yc not in step_no:
                    step_no[yc] = len(self.ycol)
                    s = y_step[yc]
                    bc = mdl.b.get(s, -1)
                    bc = bc if bc in inside else -1
                    t = store_of.get(s.target, -1)
                    self.ycol.append(yc)
                    self.cost.append(mdl.cost[yc])
                    self.bcol.append(bc)
                    self.bcost.append(mdl.cost[bc] if bc >= 0 else 0.0)
                    self.target.append(t)
                    self.known.append(0 if t < 0 else sum(1 << j for j, zc in enumerate(self.stores[t])
                                                          if attr_of[zc] in s.known))
                ids.append(step_no[yc])
            mask = sum(1 << mir_no[mc] for mc in mdl.order_mirs[xc])
            n = -query_no.setdefault(owner, len(query_no) + 1) if isinstance(owner, str) else mir_no[mdl.m[owner]]
            groups.setdefault(start, {}).setdefault(n, []).append(_Order(xc, tuple(ids), mask, tie[xc]))
        self.queries = len(query_no)  # the block's queries
        # a query left without an order at one of its starts here (bounds at 0 ruled them out): no plan
        self.stranded = present != kept
        self.can = 0  # the MIRs that may be materialised: every start of theirs has orders in the block
        self.given = 0  # the MIRs maintained outside the block (``given``): probed at no charge here
        for m, c in mdl.m.items():
            if c in mir_no and mdl.upper[c]:
                starts = mdl.candidates.orders.get(m, {})
                if c in given:
                    self.given |= 1 << mir_no[c]
                    self.can |= 1 << mir_no[c]
                elif starts and all(groups.get(s, {}).get(mir_no[c]) for s in starts):
                    self.can |= 1 << mir_no[c]
        self.starts: list[_Start] = []
        for start in sorted(groups):
            # the owners with the fewest orders first: the search of a choice there (:func:`_least`)
            # branches least near its root
            owners = sorted(groups[start].items(), key=lambda t: (len(t[1]), t[0] < 0, t[0]))
            orders = tuple(o for _, os in owners for o in os)
            stores: set[int]
            relevant, stores = 0, set()
            for n, os in owners:
                relevant |= (1 << n) if n >= 0 else 0
                for o in os:
                    relevant |= o.mirs
                    stores.update(self.target[s] for s in o.steps if self.target[s] >= 0)
            owning = sum(1 << n for n, _ in owners if n >= 0)
            numbers, first = [], 0
            for n, os in owners:
                numbers.append((n, tuple(range(first, first + len(os)))))
                first += len(os)
            probing: dict[int, int] = {}
            for i, o in enumerate(orders):
                probing[o.mirs] = probing.get(o.mirs, 0) | 1 << i
            self.starts.append(_Start(orders, tuple(numbers), relevant, owning, tuple(sorted(stores)),
                                      _shared_rows([o.steps for o in orders]), tuple(probing.items())))
        self.zmin = [min(range(len(zc)), key=lambda j: (tie[zc[j]], j)) for zc in self.stores]
        # per start: each MIR owner's position among its owners, and the queries' positions
        self._slots = [({n: i for i, (n, _) in enumerate(sr.owners) if n >= 0},
                        tuple(i for i, (n, _) in enumerate(sr.owners) if n < 0)) for sr in self.starts]
        # per start and owner there: the mask of the numbers of its orders
        self._masks = [[sum(1 << i for i in numbers) for _, numbers in sr.owners] for sr in self.starts]
        self._least: dict[_Problem, tuple[float, tuple[_Order, ...] | None, int]] = {}
        self.work = 0  # the work of the search under way (:data:`WORK_LIMIT`)
        self._fronts: dict[_Problem, tuple[float, list[tuple[float, float, tuple[_Order, ...]]]]] = {}
        self._charge: dict[tuple[int, ...], list[float]] = {}
        self._spared: dict[tuple[int, int],
                           int] = {}  # (store number, attribute) → the mask of the steps it spares a broadcast
        self._priced: dict[tuple[int, tuple[int, ...]],
                           int] = {}  # (start, the stores' attributes) → the number of its prices
        self._prices: dict[tuple[int, tuple[tuple[float, ...], ...]],
                           int] = {}  # (start, its orders' step charges) → the number of those prices
        self._allowed: dict[tuple[int, int],
                            int] = {}  # (start, allowed MIRs) → mask of the numbers of its orders that probe only those
        # (start, that mask, prices) → per owner its allowed entries, cheapest first (None: not asked for yet)
        self._options_of: dict[tuple[int, int, int], list[list[_Entry] | None]] = {}
        self._rankings: list[list[list[_Entry]]] = []  # per number of prices (:meth:`_ranking`)

    # ---- one start -------------------------------------------------------------------------

    def _charges(self, z: tuple[int, ...]) -> list[float]:
        """Every step's cost under the stores' attributes ``z`` (−1: undecided, serving every
        step that knows one of its candidates)."""
        hit = self._charge.get(z)
        if hit is not None:
            return hit
        out = list(self.cost)
        for s, bc in enumerate(self.bcost):
            if bc:
                t = self.target[s]
                j = -2 if t < 0 else z[t]
                if j == -2 or not (self.known[s] if j < 0 else (self.known[s] >> j) & 1):
                    out[s] += bc
        self._charge[z] = out
        return out

    def _ranking(self, ri: int, z: tuple[int, ...]) -> int:
        """The number of start ``ri``'s prices under ``z`` (the same for every ``z`` that charges
        its steps alike); ``self._rankings[number]``: per owner there its orders' entries
        (order, its number, the charge of its steps, the charge of its steps from each step on,
        the steps it shares with every order there), cheapest first."""
        number = self._priced.get((ri, z))
        if number is None:
            sr = self.starts[ri]
            charge = self._charges(z)
            prices = tuple(tuple(charge[s] for s in o.steps) for o in sr.orders)
            number = self._prices.get((ri, prices))
            if number is None:
                number = self._prices[(ri, prices)] = len(self._rankings)
                entries = [(o, i, t[0], t, sr.shared[i])
                           for i, (o, t) in enumerate(zip(sr.orders, map(_tails, prices)))]
                self._rankings.append([sorted((entries[i] for i in numbers), key=lambda e: (e[2], e[0].weight))
                                       for _, numbers in sr.owners])
            self._priced[(ri, z)] = number
        return number

    def _problem(self, ri: int, on: int, allowed: int, z: tuple[int, ...]) -> _Problem:
        """What the choice at start ``ri`` depends on: the start, the owners there that must
        choose (mask of MIRs), the orders allowed there (mask of their numbers) and its prices."""
        sr = self.starts[ri]
        number = self._ranking(ri, z)
        akey = (ri, allowed)
        ok = self._allowed.get(akey)
        if ok is None:
            ok = self._allowed[akey] = sum(bits for mirs, bits in sr.probing if not mirs & ~allowed)
        return ri, on & sr.owning, ok, number

    def _options(self, problem: _Problem) -> list[list[_Entry]]:
        """The owners that must choose an order in a problem (:meth:`_problem`), each with the
        entries of the orders it may choose, cheapest first."""
        ri, on, ok, number = problem
        okey = (ri, ok, number)
        allowed = self._options_of.get(okey)
        if allowed is None:  # (each owner's list filtered when first asked for)
            allowed = self._options_of[okey] = [None] * len(self.starts[ri].owners)
        slots, queries = self._slots[ri]
        at: Sequence[int] = queries
        if on:
            choosing = list(queries)
            while on:  # (the MIRs that must choose here: few of the owners, as a rule)
                low = on & -on
                choosing.append(slots[low.bit_length() - 1])
                on ^= low
            choosing.sort()
            at = choosing
        out = []
        for i in at:
            es = allowed[i]
            if es is None:
                es = self._rankings[number][i]
                if ok & self._masks[ri][i] != self._masks[ri][i]:  # (else all allowed: the ranking itself)
                    es = [e for e in es if ok >> e[1] & 1]
                allowed[i] = es
            out.append(es)
        return out

    def _least_at(self, ri: int, on: int, allowed: int, z: tuple[int, ...]) -> tuple[float, tuple[_Order, ...] | None]:
        """The cheapest choice of one order per owner at start ``ri`` (the union of their steps
        priced), by a depth-first search, cheapest orders first (:func:`_least`)."""
        problem = self._problem(ri, on, allowed, z)
        hit = self._least.get(problem)
        if hit is None:
            options = self._options(problem)
            hit = self._least[problem] = _least(options) if all(options) else (math.inf, None, 0)
        self.work += hit[2]  # (cached or not: what a search may do does not depend on the caches)
        return hit[0], hit[1]

    def _front_at(self, ri: int, on: int, allowed: int, z: tuple[int, ...],
                  limit: float) -> list[tuple[float, float, tuple[_Order, ...]]]:
        """The Pareto front of (cost, weight) of the choices at start ``ri`` that cost at most
        ``limit``, cheapest first (:func:`_front`)."""
        problem = self._problem(ri, on, allowed, z)
        hit = self._fronts.get(problem)
        if hit is not None and hit[0] >= limit:  # a front up to a higher limit holds this one
            return [e for e in hit[1] if e[0] <= limit]
        options = self._options(problem)
        out = _front(options, limit) if all(options) else []
        self._fronts[problem] = (limit, out)
        return out

    # ---- the search --------------------------------------------------------------------------

    def _fixed(self, choice: dict[MIR, int]) -> tuple[int, ...]:
        """The stores' attributes as given (store → index of its z), the others undecided."""
        z = [-1] * len(self.stores)
        for st, j in choice.items():
            if j is not None and st in self.store_of:
                z[self.store_of[st]] = j
        return tuple(z)

    def served(self, choice: dict[MIR, int]) -> tuple[int, ...]:
        """What a search of this block depends on of a choice of its stores: per store, −1
        when undecided, else the mask of the steps (numbered in the block) whose broadcast its
        attribute spares.  Choices alike here have the same optimum and the same plan but for
        those stores' ``z`` (:meth:`chosen`).  Memoised per (store, attribute).

        >>> from mqjoin.datasets.random_workloads import random_workload
        >>> from mqjoin.planning import candidates, ilp
        >>> mdl = ilp.build_model(candidates.enumerate_candidates(random_workload(1, 10, 5, seed=4)), "single")
        >>> (cols, rows), = ilp.components(mdl)
        >>> paths = BlockPaths(mdl, cols, mdl.tie)
        >>> store = next(iter(paths.store_of))  # (the relation R7: attribute 0 or 1)
        >>> spare = [paths.served({store: j}) for j in (0, 1)]
        >>> [s.count(-1) for s in spare], spare[0] == spare[1]  # the 8 other stores undecided
        ([8, 8], False)
        >>> cost, vals = paths.optimum({store: 0})
        >>> zs = [cols.index(c) for c in paths.stores[paths.store_of[store]]]
        >>> [vals[i] for i in zs], [paths.chosen(vals, {store: 1})[i] for i in zs]
        ([1.0, 0.0], [0.0, 1.0])
        """
        out = []
        for t, j in enumerate(self._fixed(choice)):
            if j >= 0:
                mask = self._spared.get((t, j))
                if mask is None:
                    mask = self._spared[(t, j)] = sum(1 << s for s, bc in enumerate(self.bcost)
                                                      if bc and self.target[s] == t and (self.known[s] >> j) & 1)
                j = mask
            out.append(j)
        return tuple(out)

    def chosen(self, vals: list[float], choice: dict[MIR, int]) -> list[float]:
        """A plan's values (:meth:`values`) with the stores decided by the choice partitioned
        as it says."""
        pos = self.pos
        vals = list(vals)
        for t, j in enumerate(self._fixed(choice)):
            if j >= 0:
                for jj, c in enumerate(self.stores[t]):
                    vals[pos[c]] = 1.0 if jj == j else 0.0
        return vals

    def _branch(self, picks: Picks, on: int, z: tuple[int, ...], lexicographic: bool) -> tuple[str, int]:
        """What a node's relaxed choice leaves open: ("mir", n) an MIR it probes that is not
        decided yet, ("store", n) an undecided store none of whose attributes serves every
        used step that relies on it, or ("", 0): the choice is a plan of the node."""
        used = 0
        for at in picks:
            for o in at:
                used |= o.mirs
        if used & ~on:  # the smallest (fewest relations), the first of those
            open_, pick = used & ~on, -1
            while open_:  # (its bits, lowest first)
                low = open_ & -open_
                n = low.bit_length() - 1
                if pick < 0 or self.size[n] < self.size[pick]:
                    pick = n
                open_ ^= low
            return "mir", pick
        need = self._needs(picks, z)
        for t in sorted(need):
            if not (need[t] >> self.zmin[t] & 1 if lexicographic else need[t]):
                return "store", t
        return "", 0

    def _needs(self, picks: Picks, z: tuple[int, ...]) -> dict[int, int]:
        """Per undecided store that a used step relies on (it knows one of its attributes and
        would broadcast otherwise): the mask of the attributes that serve every such step."""
        need: dict[int, int] = {}
        for at in picks:
            for o in at:
                for s in o.steps:
                    t = self.target[s]
                    if self.bcost[s] and t >= 0 and z[t] < 0 and self.known[s]:
                        need[t] = need.get(t, -1) & self.known[s]
        return need

    def _settle(self, picks: Picks, z: tuple[int, ...], lexicographic: bool) -> tuple[int, ...]:
        """The undecided stores' attributes of a solved node: the least weight (lexicographic),
        else the first that serves every used step relying on the store."""
        need = self._needs(picks, z)
        out = list(z)
        for t, j in enumerate(z):
            if j < 0:
                out[t] = self.zmin[t] if lexicographic or t not in need else (need[t] & -need[t]).bit_length() - 1
        return tuple(out)

    def _children(self, how: str, n: int, on: int, off: int,
                  z: tuple[int, ...]) -> list[tuple[int, int, tuple[Any, ...]]]:
        if how == "mir":
            return [(on, off | (1 << n), z), (on | (1 << n), off, z)]
        return [(on, off, z[:n] + (j,) + z[n + 1:]) for j in range(len(self.stores[n]))]

    def _relaxed(self, on: int, off: int, z: tuple[int, ...], parent: tuple[Any, ...] | None = None
                 ) -> tuple[float, list[float], list[tuple[_Order, ...]]]:
        """A node's relaxation: its bound and per start the least cost and the choice there.
        ``parent``: the parent's (on, off, z, costs, choices); a start whose problem the branch
        did not change — no new owner there, its choice probes no MIR newly ruled out, and
        costs the same under a store's attribute newly decided (which only raises costs; the
        same, when no step there targets that store) — keeps its choice (it stays the least)."""
        allowed = self.can & ~off
        costs, picks = [], []
        if parent is not None:
            p_on, p_off, p_z, p_costs, p_picks = parent
            owners, ruled = on ^ p_on, off & ~p_off
            decided = () if z == p_z else {t for t, (j, p_j) in enumerate(zip(z, p_z)) if j != p_j}
        for ri, sr in enumerate(self.starts):
            if parent is not None and not owners & sr.owning:
                mine = p_picks[ri]
                keep = True
                if ruled:
                    for o in mine:
                        if o.mirs & ruled:
                            keep = False
                            break
                if keep and decided and not decided.isdisjoint(sr.stores):
                    keep = _union_cost(mine, self._charges(z)) == p_costs[ri]
                if keep:
                    costs.append(p_costs[ri])
                    picks.append(mine)
                    continue
            c, p = self._least_at(ri, on, allowed, z)
            if p is None:
                return math.inf, [], []
            costs.append(c)
            picks.append(p)
        return math.fsum(costs), costs, picks

    def optimum(self, choice: dict[MIR, int], below: float = math.inf) -> tuple[float, list[float]]:
        """The block's optimum with the stores of ``choice`` partitioned as given (store →
        index among its candidates) and the others searched: its cost and the values of the
        block's columns (``math.inf`` and no values when bounds at 0 leave it no plan, or when
        it has none cheaper than ``below``, the cost of a plan the caller holds)."""
        root = (self.given, 0, self._fixed(choice))
        best, best_at = below, None
        stack = [] if self.stranded else [(root, self._relaxed(*root))]
        nodes = self.work = 0
        while stack:
            (on, off, z), (bound, costs, picks) = stack.pop()
            if bound == math.inf or bound >= best - 1e-9 * max(1.0, abs(best)):
                continue
            nodes = self._visit(nodes)
            how, n = self._branch(picks, on, z, False)
            if not how:
                best, best_at = bound, (on, picks, self._settle(picks, z, False))
                continue
            kids = [(self._relaxed(*kid, (on, off, z, costs, picks)), i, kid)
                    for i, kid in enumerate(self._children(how, n, on, off, z))]
            for relaxed, _, kid in sorted(kids, key=lambda t: (-t[0][0], -t[1])):
                if relaxed[0] < best:
                    stack.append((kid, relaxed))
        if best_at is None:  # (no plan: ``math.inf`` and no values)
            return math.inf, []
        vals = self.values(*best_at)
        return math.fsum(self.mdl.cost[c] * v for c, v in zip(self.cols, vals)), vals

    def lexicographic(self, choice: dict[MIR, int], optimum: float,
                      start: list[float] | None = None) -> tuple[float, list[float]]:
        """The least tie-break weight among the block's plans that cost at most the optimum
        (within :data:`~mqjoin.planning.ilp.model.TIE_SLACK`) under the choice, and that plan's
        values.  ``start``: a plan within that cost (its weight is the first incumbent)."""
        cap = optimum * (1 + TIE_SLACK) + TIE_SLACK
        best, best_at = math.inf, None
        if start is not None:
            best = math.fsum(self.tie[c] * v for c, v in zip(self.cols, start))
        root = (self.given, 0, self._fixed(choice))
        stack = [] if self.stranded else [(root, self._lightest(*root, cap, best - 0.5))]
        nodes = self.work = 0
        while stack:
            (on, off, z), (bound, picks, zs) = stack.pop()
            if bound == math.inf or bound > best - 0.5:
                continue
            nodes = self._visit(nodes)
            how, n = self._branch(picks, on, z, True)
            if not how:
                best, best_at = bound, (on, picks, zs)
                continue
            kids = [(self._lightest(*kid, cap, best - 0.5), i, kid)
                    for i, kid in enumerate(self._children(how, n, on, off, z))]
            for light, _, kid in sorted(kids, key=lambda t: (t[0][0], t[1]), reverse=True):
                if light[0] <= best - 0.5:
                    stack.append((kid, light))
        if best_at is None:  # (the start is a plan within the cap)
            return best, list(cast(list[float], start))
        vals = self.values(*best_at)
        return math.fsum(self.tie[c] * v for c, v in zip(self.cols, vals)), vals

    def _visit(self, nodes: int) -> int:
        self.check()
        if nodes >= self.limit or self.work > self.work_limit:
            raise TooLarge
        return nodes + 1

    def _lightest(self, on: int, off: int, z: tuple[int, ...], cap: float,
                  limit: float = math.inf) -> tuple[float, Picks, tuple[Any, ...]]:
        """A node's relaxed least weight within the cap: the starts' Pareto fronts combined, plus
        the stores' weights (undecided ones at their least); inf when nothing fits or when that
        weight would pass ``limit`` (a partial combination is dropped once its weight with the
        least weights of the fronts still to come passes it)."""
        allowed = self.can & ~off
        least = []
        for ri in range(len(self.starts)):
            c, p = self._least_at(ri, on, allowed, z)
            if p is None:
                return math.inf, (), z
            least.append(c)
        if math.fsum(least) > cap:
            return math.inf, (), z
        spare = cap - math.fsum(least)
        zs = self._settle((), z, True)
        own = math.fsum(self.tie[self.stores[t][j]] for t, j in enumerate(zs))
        fronts = [self._front_at(ri, on, allowed, z, least[ri] + spare) for ri in range(len(self.starts))]
        if not all(fronts):
            return math.inf, (), z
        after = [0.0] * len(fronts)  # per start: the least weights of the later fronts, and the stores'
        lightest = own
        for ri in range(len(fronts) - 1, -1, -1):
            after[ri] = lightest
            lightest += fronts[ri][-1][1]  # (a front's weights fall as its costs rise)
        combined: list[tuple[float, float, tuple[Any, ...]]] = [(0.0, 0.0, ())]
        for ri, front in enumerate(fronts):
            rest, heaviest = math.fsum(least[ri + 1:]), limit - after[ri]
            pairs = []  # (cost, weight, the positions of the two): the picks built for the front only
            for a, (c1, w1, _) in enumerate(combined):
                for b, (c2, w2, _) in enumerate(front):
                    if c1 + c2 + rest > cap:  # (a front comes cheapest first)
                        break
                    if w1 + w2 <= heaviest:
                        pairs.append((c1 + c2, w1 + w2, (a, b)))
            combined = [(c, w, combined[a][2] + (front[b][2],)) for c, w, (a, b) in _pareto(pairs)]
            if not combined:
                return math.inf, (), z
        _, w, picks = combined[-1]
        return w + own, picks, zs

    def values(self, on: int, picks: Picks, z: tuple[int, ...]) -> list[float]:
        """The block's columns under a plan: the chosen orders, the materialised MIRs, the
        stores' attributes, the used steps and their broadcasts."""
        pos = self.pos
        vals = [0.0] * len(self.cols)
        charge = self._charges(z)
        for n, mc in enumerate(self.mirs):
            if (on >> n) & 1:
                vals[pos[mc]] = 1.0
        for t, j in enumerate(z):
            vals[pos[self.stores[t][j]]] = 1.0
        for at in picks:
            for o in at:
                vals[pos[o.col]] = 1.0
                for s in o.steps:
                    vals[pos[self.ycol[s]]] = 1.0
                    if self.bcol[s] >= 0 and charge[s] > self.cost[s]:
                        vals[pos[self.bcol[s]]] = 1.0
        return vals


def _tails(prices: tuple[float, ...]) -> tuple[float, ...]:
    """Per step of an order, the charge of its steps from that one on (and 0.0 past the last):
    what the order adds to a union that holds its first ``d`` steps is ``tails[d]``.

    >>> _tails((1.0, 2.0, 4.0))
    (7.0, 6.0, 4.0, 0.0)
    """
    out = [0.0]
    for c in reversed(prices):
        out.append(out[-1] + c)
    return tuple(reversed(out))


def _shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many leading steps two root paths share."""
    n = 0
    for s, t in zip(a, b):
        if s != t:
            break
        n += 1
    return n


def _shared_rows(paths: list[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """:func:`_shared` of every two root paths, by their prefixes: the paths that share their
    first ``d`` steps are those with the same prefix of length ``d``, so each group of those is
    visited once per depth (a path alone in its group shares no further step with another).

    >>> _shared_rows([(1, 2, 5), (1, 3), (4,), (1, 2)])
    ((3, 1, 0, 2), (1, 2, 0, 1), (0, 0, 1, 0), (2, 1, 0, 2))
    """
    rows = [[0] * len(paths) for _ in paths]
    groups: dict[tuple[int, ...], list[int]]
    depth, groups = 1, {}
    for i, p in enumerate(paths):
        if p:
            groups.setdefault(p[:1], []).append(i)
    while groups:
        deeper: dict[tuple[int, ...], list[int]] = {}
        for members in groups.values():
            if len(members) == 1:
                rows[members[0]][members[0]] = len(paths[members[0]])
                continue
            for a in members:
                row = rows[a]
                for b in members:
                    row[b] = depth
                if len(paths[a]) > depth:
                    deeper.setdefault(paths[a][:depth + 1], []).append(a)
        depth, groups = depth + 1, deeper
    return tuple(map(tuple, rows))


#: an order's charge (summed from its last step back) and a union's that holds it (summed order by
#: order) are sums of the same charges in different orders: the first may exceed the second by
#: a rounding error, far below this factor
_ROUNDING = 1 + 1e-12


def _least(options: list[list[_Entry]]) -> tuple[float, tuple[_Order, ...], int]:
    """The cheapest choice of one entry (:meth:`BlockPaths._ranking`) per owner, the union of
    their steps priced: a depth-first search over the owners' entries, cheapest first, that keeps
    a choice only when it is strictly cheaper than the best one before it, so that the least
    cost is found with the least ranks (in the owners' order).  The steps of a start form a
    tree whose root paths are its orders, so the steps that the orders chosen before share with
    an order are its first ones, as many as it shares with one of them at most, and it adds the
    charge of its other steps (:func:`_tails`).  Returns the cost, the choice and how many
    partial choices the search extended (its work)."""
    if len(options) == 1:  # the cheapest order alone
        return options[0][0][2], (options[0][0][0],), 0
    best: list[Any] = [math.inf, None, 0]
    picked: list[_Order] = []
    numbers: list[int] = []  # the chosen entries' numbers
    last = len(options) - 1

    def down(i: int, spent: float) -> None:
        for e in options[i]:
            if e[2] >= best[0] * _ROUNDING:  # (a union costs at least each of its orders: so do the later ones)
                break
            row = e[4]
            d = 0
            for n in numbers:
                if row[n] > d:
                    d = row[n]
            more = spent + e[3][d]
            if more >= best[0]:
                continue
            if i == last:
                best[0], best[1] = more, (*picked, e[0])
                continue
            picked.append(e[0])
            numbers.append(e[1])
            best[2] += 1
            down(i + 1, more)  # noqa: F821 — itself (its name is deleted once the search is over)
            picked.pop()
            numbers.pop()

    down(0, 0.0)
    del down  # (a recursive closure is a reference cycle: left to the collector otherwise)
    return best[0], best[1], best[2]


def _front(options: list[list[_Entry]], limit: float) -> list[tuple[float, float, tuple[_Order, ...]]]:
    """The Pareto front (:func:`_pareto`) of (cost, weight) of the choices of one entry per
    owner that cost at most ``limit``, found and priced as :func:`_least` does."""
    found: list[tuple[float, float, tuple[_Order, ...]]] = []
    chosen: list[_Entry] = []
    last = len(options) - 1

    def down(i: int, spent: float, weight: float) -> None:
        for e in options[i]:
            if e[2] > limit * _ROUNDING:  # (as in :func:`_least`: so do the later ones)
                break
            row = e[4]
            d = 0
            for c in chosen:
                if row[c[1]] > d:
                    d = row[c[1]]
            more = spent + e[3][d]
            if more > limit:
                continue
            if i == last:
                found.append((more, weight + e[0].weight, tuple(c[0] for c in chosen) + (e[0],)))
            else:
                chosen.append(e)
                down(i + 1, more, weight + e[0].weight)  # noqa: F821 — itself (deleted once over)
                chosen.pop()

    down(0, 0.0, 0.0)
    del down
    return _pareto(found)


def _union_cost(picks: tuple[_Order, ...], charge: list[float]) -> float:
    """The cost of the union of the orders' steps, summed as :func:`_least` sums it."""
    spent = 0.0
    for i, o in enumerate(picks):
        d = max((_shared(o.steps, p.steps) for p in picks[:i]), default=0)
        spent += _tails(tuple(charge[s] for s in o.steps))[d]
    return spent


def _pareto(entries: list[tuple[float, float, _P]]) -> list[tuple[float, float, _P]]:
    """The entries no other is cheaper and lighter than (both at most, one less), cheapest first.

    >>> _pareto([(2.0, 5.0, "a"), (1.0, 7.0, "b"), (2.0, 4.0, "c"), (3.0, 4.0, "d")])
    [(1.0, 7.0, 'b'), (2.0, 4.0, 'c')]
    """
    out: list[tuple[float, float, _P]] = []
    for e in sorted(entries, key=itemgetter(0, 1)):
        if not out or e[1] < out[-1][1]:
            out.append(e)
    return out
