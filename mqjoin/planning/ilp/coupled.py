"""The coupled search: a part whose queries share only the partition choice of stores
(policy ``single``), solved exactly by a search over the shared stores' attributes.

HiGHS's MIP closes the root gap of such parts — which is all in the partition choices ``z`` —
with cuts, in seconds; here every complete choice of the shared stores leaves independent
blocks, one query each (:mod:`mqjoin.planning.ilp.blocks`), and a partial choice is bounded
by the blocks' optima with the undecided stores chosen by each block for itself (a
relaxation: blocks may choose differently).  Three ways through, by the part's shape:

* **small MIRs** (three- and four-way queries; ``Part.quick``): every combination a block
  tells apart is priced up front — by enumeration where the block is small enough (three-way
  queries: the lexicographic optima come with it), else by the block's search, else by one LP
  (its optimum when integral, as a rule; else a bound) — so the master ILP
  (:mod:`mqjoin.planning.ilp.master`) is exact at once or nearly: a combination priced by a
  bound gets its branch and bound only once the master picks it.  The canonical tie-break is a
  second master over the blocks' lexicographic optima.  More than
  :data:`QUICK_MAX_COMBINATIONS` combinations: the part goes to HiGHS's MIP;
* **large MIRs, few shared stores** (below :data:`MASTER_MIN_STORES`): depth first over the
  stores, most shared first, each node's children visited cheapest first and pruned by the
  incumbent; with ``canonical`` a second pass revisits every choice whose bound is within
  :data:`~mqjoin.planning.ilp.model.TIE_SLACK` of the optimum and keeps the least tie-break
  weight at the optimal cost;
* **large MIRs, many shared stores**: a first plan at once (each store partitioned as most
  blocks chose alone, :func:`_first_plan`), every combination priced (up to
  :data:`LP_PRICED_MAX_COMBINATIONS`) by the block's search, else its LP, then the
  master ILP repriced until its choice is costed exactly; with ``canonical`` the master's
  tie-break, repriced and reweighed in the same way until its choice is exact.

Both tie-breaks run to the end (no time budget of their own): the plan is canonical whenever
it is optimal, unless the solve's time limit strikes first.

A time limit anywhere raises :class:`~mqjoin.planning.ilp.blocks.Stopped`; the search then
returns its incumbent with a valid bound (the master's last optimum, or the least bound of the
nodes not visited), or raises :class:`~mqjoin.model.errors.NoSolutionError` when it has none.

>>> from mqjoin.datasets.random_workloads import random_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model, components
>>> mdl = build_model(enumerate_candidates(random_workload(8, 12, 3, seed=1)), "single")
>>> (cols, rows), = components(mdl)
>>> status, objective, bound, values, canonical = solve_coupled(mdl, cols, rows, None, True)
>>> status, objective, bound, canonical
('optimal', 53000.0, 53000.0, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from mqjoin.model.errors import NoSolutionError
from mqjoin.planning.ilp.blocks import BlockCosts, Choice, Incumbent, Part, Stopped, coupled_part
from mqjoin.planning.ilp.master import Master
from mqjoin.planning.ilp.model import TIE_SLACK, Model
from mqjoin.planning.ilp.monitor import Watch
from mqjoin.planning.ilp.prices import BlockKey, PricedBlock, block_keys, kept_prices, load_prices

#: the master ILP from this many shared stores on (fewer: the depth-first search over their
#: choices), for parts with large MIRs
MASTER_MIN_STORES = 12

#: at most this many combinations of the choices blocks tell apart are costed up front on
#: parts with small MIRs (more: the part goes to HiGHS's MIP).  Three-way blocks are priced by
#: enumeration, a few milliseconds per block: 1,000 three-way queries (about 11,000
#: combinations) take seconds here, where HiGHS's MIP on the whole part takes minutes
#: (benchmarks/RESULTS.md, section ILP)
QUICK_MAX_COMBINATIONS = 50_000

#: parts with large MIRs under the master are priced up front (each combination by its
#: block's search, else its LP) up to this many combinations; past it the master prices
#: lazily, the combinations it picks only, whose bounds stay the blocks' optima alone until
#: nearly every combination is priced (benchmarks/RESULTS.md, section ILP)
LP_PRICED_MAX_COMBINATIONS = 50_000

#: (status, objective, bound, values of the part's columns, canonical proven)
CoupledResult = tuple[str, float, float, list[float], bool]


def solve_coupled(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                  canonical: bool, watch: Watch = Watch(), known: Mapping[BlockKey, PricedBlock] | None = None,
                  keep: dict[BlockKey, PricedBlock] | None = None) -> CoupledResult | None:
    """Solve a coupled part (see the module docstring).  Returns (status, objective, bound,
    values, canonical proven), or None when the part does not split into blocks or has too
    many combinations for its small MIRs.  ``watch`` is told every new incumbent with the bound
    of the moment, and its stop ends the search as the time limit does.  ``known``: blocks
    priced by an earlier solve (:mod:`mqjoin.planning.ilp.prices`), not priced again; ``keep``:
    where the blocks' prices go, for a later solve."""
    part = coupled_part(mdl, cols, rows)
    if part is None:
        return None
    if part.quick and len(part.combinations) > QUICK_MAX_COMBINATIONS:
        return None
    t0 = time.perf_counter()
    costs = BlockCosts(part, None if time_limit is None else t0 + time_limit, watch=watch)
    keys = None if not known and keep is None else block_keys(part)
    if known and keys is not None:
        load_prices(part, costs, known, keys)
    by_master = part.quick or len(part.stores) >= MASTER_MIN_STORES
    # large MIRs under the master: every combination priced by its LP (integral: costed) before
    # the first master, so the master's bound starts near the optimum and few combinations
    # need a branch and bound
    costs.lp_priced = by_master and not part.quick and len(part.combinations) <= LP_PRICED_MAX_COMBINATIONS
    best, tree = Incumbent(), _Tree()
    status, root, optimum = "optimal", 0.0, math.inf
    done: dict[int, float] = {}  # block → its optimum alone, as the root bound is computed
    try:
        if part.quick:  # every combination priced up front (exact as a rule): the master's first choice is, nearly
            lp = set(costs.enumerate_blocks())
            costs.spread(lambda k, t: costs.lp_cost(k, part.chosen_by(k, t)),
                         [p for p, key in zip(part.combinations, part.keys) if p[0] in lp and key not in costs.costs])
        else:  # each block alone: the root bound (reported as it grows: blocks not done count 0)
            def alone(k: int, _: tuple[int, ...]) -> float:
                done[k] = costs.cost(k, {})
                watch.report(math.inf, math.fsum(list(done.values())))
                return done[k]

            tree.root = dict(enumerate(costs.spread(alone, part.alone)))
            root = math.fsum(tree.root.values())
            if by_master:  # a plan at once (the LPs take seconds on 30 five-way queries)
                _first_plan(part, costs, best)
                watch.report(best.cost, root)
            if costs.lp_priced:
                costs.spread(lambda k, t: costs.lp_cost(k, part.chosen_by(k, t)), part.combinations)
        master = Master(part, costs) if by_master else None
        if master is not None:
            master.optimise(best)
        else:
            _depth_first(part, costs, best, tree, 0, tree.root, False)
        optimum = best.cost
        watch.report(optimum, optimum)
        if canonical and master is not None:  # (by the master)
            master.tie_break(best)
        elif canonical:  # the second pass: every choice whose bound is within the slack of the optimum
            _depth_first(part, costs, best, tree, 0, tree.root, True)
    except Stopped:
        status = "time_limit"
        root = max(root, math.fsum(list(done.values())))  # stopped within the root: the blocks done
        # not visited: the pending siblings and the subtree of the node being visited (whose
        # bound is at least its parent's); before the first pass ends, nothing else is proven
        if math.isfinite(optimum):  # stopped in the canonical pass: optimal, not proven canonical
            status = "canonical_time_limit"
        elif by_master:
            root = max([root] + best.current)  # the master's last optimum
        elif tree.pending:
            root = min([best.cost, *(b for level in tree.pending for b in level)] + best.current)
    if keep is not None and keys is not None:  # (every price is exact, a time limit or not: stopped
        keep.update(kept_prices(part, costs, keys, known))  # before a plan too, a later solve takes them up)
    if best.choice is None:
        raise NoSolutionError("the solver reached its time limit before it found any plan; "
                              "raise the time limit (--time-limit) or disable MIRs (--no-mirs)")
    return _result(part, costs, best, status, optimum, root, canonical)


@dataclass
class _Tree:
    """Where the depth-first search stands."""

    root: dict[int, float] = field(default_factory=dict)  # block → its optimum alone
    choice: Choice = field(default_factory=dict)  # the stores decided on the way down
    pending: list[list[float]] = field(default_factory=list)  # per depth: the bounds of the siblings not visited


def _depth_first(part: Part, costs: BlockCosts, best: Incumbent, tree: _Tree, depth: int,
                 parts: dict[int, float], second: bool) -> None:
    """Visit a node: ``parts`` are the blocks' optima under the stores decided (``tree.choice``)
    with the others chosen by each block for itself.  First pass: prune at the incumbent's
    cost; second (``second``): prune above the optimum and keep the least weight."""
    total = math.fsum(parts.values())
    best.current = [total]
    costs.left()  # the time limit
    if second:
        if total > best.cost * (1 + TIE_SLACK) + TIE_SLACK:
            return
    elif total >= best.cost - 1e-9 * max(1.0, abs(best.cost)):
        return
    choice = tree.choice
    if depth == len(part.stores):
        if not second:
            best.cost, best.choice = total, dict(choice)
            costs.watch.report(total, math.fsum(tree.root.values()))
            return
        w = (math.fsum(costs.weight(k, choice) for k in range(len(part.blocks)))
             + math.fsum(part.tie_of[st][choice[st]] for st in part.stores))
        if w < best.weight:
            best.weight, best.choice = w, dict(choice)
        return
    st = part.stores[depth]
    children = []
    for a in range(len(part.shared[st])):
        choice[st] = a
        child = dict(parts)
        for k, b in enumerate(part.blocks):
            if st in b.stores:
                child[k] = costs.cost(k, choice)
        children.append((math.fsum(child.values()), part.tie_of[st][a], a, child))
    children.sort(key=lambda t: t[:3])
    tree.pending.append([t[0] for t in children])
    for _, _, a, child in children:
        tree.pending[-1].pop(0)
        choice[st] = a
        _depth_first(part, costs, best, tree, depth + 1, child, second)
    tree.pending.pop()
    del choice[st]


def _first_plan(part: Part, costs: BlockCosts, best: Incumbent) -> None:
    """A plan before any combination is costed (kept should a time limit strike before the
    master's first plan): each shared store partitioned by the attribute most blocks chose
    alone (the first on a tie), each block's plan alone recosted there."""
    alone_plans = [cast(list[float], costs.costs[part.key_of(k, {})][1]) for k in range(len(part.blocks))]  # (searched)
    votes: dict[tuple[Any, ...], int] = {}
    for k, b in enumerate(part.blocks):
        for st in b.stores:
            for j, i in enumerate(part.shared[st]):
                if alone_plans[k][part.pos[k][i]] > 0.5:
                    votes[(st, j)] = votes.get((st, j), 0) + 1
    pick = {st: max(range(len(part.shared[st])), key=lambda j: (votes.get((st, j), 0), -j)) for st in part.stores}
    plans = [costs.recost(k, vals, pick) for k, vals in enumerate(alone_plans)]
    best.cost, best.choice, best.recosted = math.fsum(p[0] for p in plans), pick, [p[1] for p in plans]


def _result(part: Part, costs: BlockCosts, best: Incumbent, status: str, optimum: float, root: float,
            canonical: bool) -> CoupledResult:
    """The part's values under the incumbent's choice: each block's optimum there (its
    lexicographic one when broken), or the first plan's at a time limit before any master."""
    mdl, chosen = part.mdl, cast(Choice, best.choice)  # (every search that returns here has a choice)
    values = [0.0] * mdl.num_variables
    proven = canonical and status == "optimal"
    if status == "canonical_time_limit":  # optimal; the tie not (provably) broken
        status = "optimal"
    for k, b in enumerate(part.blocks):
        key = part.key_of(k, chosen)
        if canonical and key in costs.ties:
            vals = costs.plan(key, chosen, True)
            proven = proven and costs.ties[key][2]
        else:
            vals = costs.plan(key, chosen, False) if key in costs.costs else cast(list[list[float]], best.recosted)[k]
            proven = proven and not canonical
        for c, v in zip(b.cols, part.patched(k, vals, chosen)):
            values[c] = v
    out = [values[c] for c in part.cols]
    obj = math.fsum(mdl.cost[c] * v for c, v in zip(part.cols, out))
    if status == "optimal":  # the optimum, without the slack the tie-break lets continuous columns take
        return status, min(obj, optimum), min(obj, optimum), out, proven
    return status, obj, min(obj, root), out, False
