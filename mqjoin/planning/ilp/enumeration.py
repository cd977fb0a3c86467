"""A block's exact optimum and lexicographic optimum under every combination, by enumeration.

Once the shared stores' partition attributes are fixed, a block of a coupled part
(:mod:`mqjoin.planning.ilp.blocks`) is a small covering problem: every (query, start) picks one
probe order, every MIR is materialised or not (and then every one of its starts picks one
order), every store of the block alone picks one partition attribute, and a step costs once
however many chosen orders use it, plus its broadcast when no chosen attribute of its store
is known to its prefix.  On three-way queries that is at most a few thousand *assignments*
per block, so :func:`block_table` lists them all at once with numpy — which steps each uses,
which broadcasts it leaves open, its tie-break weight — and :meth:`BlockTable.optima` prices
them under all the block's combinations in one matrix product.  Per combination the least cost
is the block's optimum, and among the assignments within
:data:`~mqjoin.planning.ilp.model.TIE_SLACK` of it the least tie-break weight is its
lexicographic optimum: the rule of the canonical tie-break, with no second solve.

Every 0-1 point of the block's rows is one assignment (``y`` and ``b`` at their least values;
the group broadcast rows are valid inequalities and cut none), so the result is the block's
integer optimum under the combination, the same as its LPs and branch and bounds give.  A
block with more than :data:`ENUMERATE_MAX` assignments (four- and five-way queries: from 10^5
to 10^16) returns None and is costed by its LPs: the product grows by the product of every
group's orders, and past that size one matrix product over every assignment costs more than
the block's LPs.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.blocks import coupled_part
>>> from mqjoin.planning.ilp.model import build_model, components
>>> mdl = build_model(enumerate_candidates(random_workload(8, 12, 3, seed=1)), "single")
>>> (cols, rows), = components(mdl)
>>> part = coupled_part(mdl, cols, rows)
>>> table = block_tables(part)[0]
>>> len(table.weight) <= ENUMERATE_MAX
True
>>> k, t = part.combinations[0]
>>> (cost, weight, a), = table.optima([t])
>>> values = table.values(a, part.chosen_by(k, t))
>>> cost == math.fsum(mdl.cost[c] * v for c, v in zip(part.blocks[0].cols, values))
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mqjoin.planning.candidates import MIR, Candidates
from mqjoin.planning.ilp.model import TIE_SLACK

#: a factor's option: (positions set to 1, steps used, MIRs needed, MIRs materialised, weight)
_Option = tuple[list[int], list[int], list[int], list[int], float]

#: enumerate a block when it has at most this many assignments (three-way queries: up to ~7,000;
#: four-way ones from ~10^5 up): beyond it, the block's LPs are cheaper
ENUMERATE_MAX = 1 << 15


@dataclass(frozen=True)
class BlockTable:
    """Every assignment of one block (rows), as numpy arrays (see the module docstring)."""

    part: Any  # the Part (a blocks.Part: blocks imports this module)
    k: int  # the block
    choice: Any  # P × factors: the option each assignment takes of each factor
    ones: list[Any]  # per factor, per option: the positions (in the block) it sets to 1
    used: Any  # P × steps: the steps the assignment uses (0/1)
    open: Any  # P × broadcasts: used and not served by an attribute of the block's own stores (0/1)
    base: Any  # P: the cost of the used steps, broadcasts not counted
    weight: Any  # P: the tie-break weight of the chosen orders and own attributes
    steps: Any  # the positions (in the block) of its y columns, in the order of ``used``
    step_cost: Any  # their costs
    bcast: tuple[Any, ...]  # per broadcast: (position of b, the shared z positions known to its step)
    bcast_cost: Any  # per broadcast: the cost of its b
    serves: list[Any]  # per shared store of the block: classes × broadcasts, whether the class serves it

    def optima(self, combinations: list[tuple[int, ...]]) -> list[tuple[float, float, int]]:
        """Per combination of the block (a class of attributes per shared store it touches, see
        ``blocks.Part.classes``): the block's optimum, the least tie-break weight at that cost and
        the assignment of that lexicographic optimum."""
        import numpy as np

        combos = np.array(combinations, dtype=np.int64).reshape(len(combinations), len(self.serves))
        served = np.zeros((len(combinations), len(self.bcast)), dtype=bool)
        for si, serves in enumerate(self.serves):
            served |= serves[combos[:, si]]
        charge = np.where(served, 0.0, self.bcast_cost[None, :])  # each broadcast's cost under each combination
        total = self.base[:, None] + self.open @ charge.T  # P × combinations
        low = total.min(axis=0)
        within = total <= (low * (1 + TIE_SLACK) + TIE_SLACK)[None, :]
        best = np.where(within, self.weight[:, None], np.inf).argmin(axis=0).tolist()
        return [(math.fsum(self.step_cost[self.used[a] > 0].tolist() + charge[t][self.open[a] > 0].tolist()),
                 float(self.weight[a]), a) for t, a in enumerate(best)]

    def values(self, a: int, choice: dict[Any, Any]) -> list[float]:
        """The values of the block's columns of assignment ``a`` under a choice of its shared
        stores: ``y`` and ``b`` at their least."""
        import numpy as np

        part, b = self.part, self.part.blocks[self.k]
        pos = part.pos[self.k]
        vals = np.zeros(len(b.cols))
        for f, o in enumerate(self.choice[a].tolist()):
            vals[self.ones[f][o]] = 1.0
        for st in b.stores:
            vals[pos[part.shared[st][choice[st]]]] = 1.0
        vals[self.steps] = self.used[a]
        for n, (bp, zs) in enumerate(self.bcast):
            vals[bp] = 1.0 if self.open[a, n] and not any(vals[z] for z in zs) else 0.0
        out: list[float] = vals.tolist()
        return out


def block_tables(part: Any, blocks: Iterable[int] | None = None) -> list[BlockTable | None]:
    """:func:`block_table` of every block of a coupled part (a ``blocks.Part``), or of ``blocks``."""
    mdl = part.mdl
    x_at = mdl.keys_of("x")
    own: dict[int, MIR] = {}  # z column → its store
    for (store, _), c in mdl.z.items():
        own[c] = store
    return [block_table(part, k, x_at, own) for k in (range(len(part.blocks)) if blocks is None else blocks)]


def block_table(part: Any, k: int, x_at: dict[int, tuple[Any, ...]], z_at: dict[int, MIR]) -> BlockTable | None:
    """The assignments of block ``k`` of a coupled part (a ``blocks.Part``), or None when it
    has more than :data:`ENUMERATE_MAX` of them.  ``x_at``: x column → (owner, start, order
    number); ``z_at``: z column → its store."""
    import numpy as np

    mdl, b = part.mdl, part.blocks[k]
    pos = part.pos[k]
    cands = mdl.candidates
    shared = set(b.stores)
    groups: dict[object, dict[str, list[int]]] = {}  # owner → start → its x columns
    own: dict[MIR, list[int]] = {}  # store of the block alone → its z columns
    for c in b.cols:
        if c in x_at:
            owner, start, _ = x_at[c]
            groups.setdefault(owner, {}).setdefault(start, []).append(c)
        elif c in z_at:
            if z_at[c] not in shared:
                own.setdefault(z_at[c], []).append(c)
    if _assignments(groups, own, cands) > ENUMERATE_MAX:  # (before any option is built)
        return None
    steps = sorted({y for c in b.cols if c in x_at for y in mdl.order_steps[c]})
    step_at = {y: n for n, y in enumerate(steps)}
    mirs = sorted({mi for c in b.cols if c in x_at for mi in mdl.order_mirs[c]}
                  | {mdl.m[o] for o in groups if isinstance(o, MIR)})
    mir_at = {mi: n for n, mi in enumerate(mirs)}

    # factors: per query start one order; per MIR none or one order per start; per own store an attribute
    # options: (positions set to 1, steps used, MIRs needed, MIRs materialised, weight)
    factors: list[list[_Option]] = []
    for owner, by_start in groups.items():
        per_start: list[list[_Option]] = [[([pos[c]], [step_at[y] for y in mdl.order_steps[c]],
                                            [mir_at[m] for m in mdl.order_mirs[c]],
                       [], part.tie[c]) for c in xs] for xs in by_start.values()]
        if not isinstance(owner, MIR):
            factors.extend(per_start)
            continue
        options: list[_Option] = [([], [], [], [], 0.0)]
        if len(by_start) == len(cands.orders[owner]):  # else a start without orders: never materialised
            mi = mdl.m[owner]
            for combo in _product(per_start):
                options.append(([pos[mi]] + [p for o in combo for p in o[0]], [s for o in combo for s in o[1]],
                                [m for o in combo for m in o[2]], [mir_at[mi]], math.fsum(o[4] for o in combo)))
        factors.append(options)
    own_z: dict[int, tuple[int, int]] = {}  # position of an own store's z → (its factor, its option)
    for zc in own.values():
        own_z.update({pos[c]: (len(factors), r) for r, c in enumerate(zc)})
        factors.append([([pos[c]], [], [], [], part.tie[c]) for c in zc])
    sizes = [len(f) for f in factors]

    choice = np.indices(sizes).reshape(len(sizes), -1)  # factors × P (the first factor slowest)
    used = np.zeros((choice.shape[1], len(steps)), dtype=bool)
    needs = np.zeros((choice.shape[1], len(mirs)), dtype=bool)
    has = np.zeros_like(needs)
    weight = np.zeros(choice.shape[1])
    for f, options in enumerate(factors):
        ou = np.zeros((len(options), len(steps)), dtype=bool)
        on = np.zeros((len(options), len(mirs)), dtype=bool)
        oh = np.zeros_like(on)
        for r, (_, uses, nd, hm, _) in enumerate(options):
            ou[r, uses] = True
            on[r, nd] = True
            oh[r, hm] = True
        at = choice[f]
        used |= ou[at]
        needs |= on[at]
        has |= oh[at]
        weight += np.array([o[4] for o in options])[at]
    ok = ~np.any(needs & ~has, axis=1)
    choice, used, weight = choice[:, ok], used[ok], weight[ok]
    # broadcasts: open where the step is used and no chosen attribute of the block's own stores serves it
    open_ = np.zeros((len(weight), len(part.bcast_in[k])), dtype=bool)
    for n, (_, yp, zs) in enumerate(part.bcast_in[k]):
        col = used[:, step_at[b.cols[yp]]].copy()
        for zp in zs:
            if zp in own_z:
                f, r = own_z[zp]
                col &= choice[f] != r
        open_[:, n] = col
    step_cost = np.array([mdl.cost[c] for c in steps])
    shared_z = {i for st in b.stores for i in part.shared[st]}
    bcast = tuple((bp, [zp for zp in zs if b.cols[zp] in shared_z]) for bp, _, zs in part.bcast_in[k])
    serves = []
    for st in b.stores:
        classes = part.classes[(k, st)]
        sv = np.zeros((len(classes), len(bcast)), dtype=bool)
        for c, attrs in enumerate(classes):
            zp = pos[part.shared[st][attrs[0]]]
            for n, (_, zs) in enumerate(bcast):
                sv[c, n] = zp in zs
        serves.append(sv)
    used = used.astype(float)
    return BlockTable(part=part, k=k, choice=choice.T.copy(), ones=[[o[0] for o in options] for options in factors],
                      used=used, open=open_.astype(float), base=used @ step_cost, weight=weight,
                      steps=np.array([pos[c] for c in steps], dtype=np.int64), step_cost=step_cost, bcast=bcast,
                      bcast_cost=np.array([mdl.cost[b.cols[bp]] for bp, _, _ in part.bcast_in[k]]), serves=serves)


def _assignments(groups: dict[object, dict[str, list[int]]], own: dict[MIR, list[int]], cands: Candidates) -> int:
    """How many assignments a block has at most: the product of its factors' options."""
    total = math.prod(len(zc) for zc in own.values())
    for owner, by_start in groups.items():
        orders = math.prod(len(xs) for xs in by_start.values())
        if isinstance(owner, MIR):
            orders = 1 + (orders if len(by_start) == len(cands.orders[owner]) else 0)
        total *= orders
    return total


def _product(lists: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Every combination of one element per list, the first list slowest."""
    out: list[tuple[Any, ...]] = [()]
    for options in lists:
        out = [p + (o,) for p in out for o in options]
    return out
