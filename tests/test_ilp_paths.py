"""Blocks of four- and five-way queries solved without LPs (``mqjoin.planning.ilp.paths``)
against their LPs and branch and bounds (whole plans: ``tests/test_ilp_enumeration.py``).

Per block and per combination of its shared stores' attributes (and with every shared store
left to the block, as the coupled search's root asks), the search's optimum and lexicographic
optimum (least tie-break weight within ``TIE_SLACK`` of the optimum) must be those of the
block's own model: its LP or branch and bound, and its tie-break LP or branch and bound with
the cost capped (``BlockCosts`` with the search switched off, ``NODE_LIMIT = 0``).
"""

from __future__ import annotations

import itertools
import math

import pytest

import mqjoin.planning.ilp.blocks as blocks
import mqjoin.planning.ilp.paths as paths
import mqjoin.planning.ilp.seams as seams
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, components
from mqjoin.planning.ilp.blocks import BlockCosts, coupled_part
from mqjoin.planning.ilp.branching import branch_and_bound
from mqjoin.planning.ilp.solving import _tie_break
from test_ilp_enumeration import parts

# (queries, relations, relations per query, seeds): few relations, so that queries share stores
SPECS = [(4, 12, 4, range(3)), (3, 12, 5, range(2)), (6, 20, 4, range(2))]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s[0]}x{s[2]}_{s[1]}rel")
def test_every_combination_as_its_lps(spec, monkeypatch):
    q, r, k, seeds = spec
    compared = 0
    for seed in seeds:
        for mdl, part in parts(q, r, k, 4, seed):
            monkeypatch.setattr(paths, "NODE_LIMIT", 0)
            lps = BlockCosts(part, deadline=None)
            lps.enumerate_blocks()  # (three-way blocks: enumerated, not searched nor LP-costed)
            for b, block in enumerate(part.blocks):
                if not block.stores or part.keys[[kk for kk, _ in part.combinations].index(b)] in lps.costs:
                    continue
                search = paths.BlockPaths(mdl, block.cols, part.tie, limit=math.inf)
                integer = [p for p, c in enumerate(block.cols) if mdl.integer[c]]
                assert lps.cost(b, {}) == pytest.approx(search.optimum({})[0], rel=1e-9)  # shared stores free
                for kk, t in part.combinations:
                    if kk != b:
                        continue
                    choice = part.chosen_by(b, t)
                    cost, values = search.optimum(choice)
                    assert math.isclose(cost, lps.cost(b, choice), rel_tol=1e-9), (seed, b, t)
                    assert math.fsum(mdl.cost[c] * v for c, v in zip(block.cols, values)) == cost
                    weight, canonical = search.lexicographic(choice, cost, values)
                    assert weight == lps.weight(b, choice), (seed, b, t)
                    lp_values = lps.ties[part.key_of(b, choice)][1]
                    assert [canonical[p] for p in integer] == [round(lp_values[p]) for p in integer], (seed, b, t)
                    assert math.fsum(mdl.cost[c] * v for c, v in zip(block.cols, canonical)) <= cost * (1 + 1e-7) + 1e-7
                    compared += 1
    assert compared > 10


@pytest.mark.parametrize("seed", range(6))
def test_one_query_as_its_branch_and_bound(seed):
    """One five-way query under ``single`` and ``replicas``: the optimum and the canonical plan
    of the LP branch and bound and its capped tie-break."""
    for policy in ("single", "replicas"):
        mdl = build_model(enumerate_candidates(random_workload(1, 10, 5, seed=seed)), policy)
        (cols, rows), = components(mdl)
        search = paths.BlockPaths(mdl, cols, mdl.tie, limit=math.inf)
        cost, values = search.optimum({})
        st, obj, _, vals = branch_and_bound(mdl, cols, rows, None)
        assert st == "optimal" and math.isclose(cost, obj, rel_tol=1e-9)
        done, lp_canonical = _tie_break(mdl, cols, rows, obj, vals, "highs", None, None, branching=True)
        _, canonical = search.lexicographic({}, cost, values)
        integer = [p for p, c in enumerate(cols) if mdl.integer[c]]
        assert done and [canonical[p] for p in integer] == [round(lp_canonical[p]) for p in integer], policy


def _brute_least(search, ri, on, allowed, z):
    """Every choice of one order per owner that must choose at start ``ri``, each owner's orders
    ranked by their steps' charges (then weight), the union priced in the owners' order, each
    order's new steps summed from its last one back (the search's floating-point sums): the
    least cost, then the least ranks."""
    charge = search._charges(z)
    sr = search.starts[ri]

    def added(o, used):
        return sum(reversed([charge[s] for s in o.steps if s not in used]))

    ranked = []
    for n, numbers in sr.owners:
        if n >= 0 and not (on >> n) & 1:
            continue
        orders = sorted((sr.orders[i] for i in numbers), key=lambda o: (added(o, ()), o.weight))
        ranked.append([o for o in orders if not o.mirs & ~allowed])
    best = (math.inf, None)
    for combo in itertools.product(*ranked):
        used, spent = set(), 0.0
        for o in combo:
            spent += added(o, used)
            used.update(o.steps)
        if spent < best[0]:
            best = (spent, combo)
    return best


@pytest.mark.parametrize("seed", range(3))
def test_least_at_as_every_combination(seed):
    """The search per start (:meth:`BlockPaths._least_at`) against all choices, for every
    materialisation of the MIRs, every MIR ruled out and every store's attribute in turn."""
    mdl = build_model(enumerate_candidates(random_workload(2, 8, 4, seed=seed)), "single")
    compared = 0
    for cols, rows in components(mdl):
        if not paths.applies(mdl, rows):
            continue
        search = paths.BlockPaths(mdl, cols, mdl.tie, limit=math.inf)
        mirs = range(len(search.mirs))
        zs = [(-1,) * len(search.stores)] + [tuple(j if u == t else -1 for u in range(len(search.stores)))
                                              for t in range(len(search.stores)) for j in range(len(search.stores[t]))]
        for ri in range(len(search.starts)):
            for on, off in [(0, 0), (search.can, 0)] + [(search.can, 1 << n) for n in mirs] + [(1 << n, 0)
                                                                                               for n in mirs]:
                for z in zs:
                    allowed = search.can & ~off
                    assert search._least_at(ri, on, allowed, z) == _brute_least(search, ri, on, allowed, z), (ri, on,
                                                                                                              off, z)
                    compared += 1
    assert compared > 100


def test_a_search_gives_up_where_queries_share_their_mirs(monkeypatch):
    """The block of 10 x 5 seed 1 whose two queries share 28 MIRs: its search gives up at its
    limits (NODE_LIMIT nodes or WORK_LIMIT work); without limits it ends past them, at the
    optimum of the LP branch and bound; and the blocks of single queries there end within them."""
    mdl = build_model(enumerate_candidates(random_workload(10, 100, 5, seed=1)), "single")
    part = next(p for p in (coupled_part(mdl, *c) for c in components(mdl)) if p is not None)
    visited, hard = [], None
    for k, b in enumerate(part.blocks):
        search = paths.BlockPaths(mdl, b.cols, part.tie)
        visited.clear()
        visit = search._visit
        monkeypatch.setattr(search, "_visit", lambda n, visit=visit: visited.append(n) or visit(n))
        try:
            search.optimum({})
            assert search.work <= paths.WORK_LIMIT and len(visited) <= paths.NODE_LIMIT
            continue
        except paths.TooLarge:
            pass
        assert search.work > paths.WORK_LIMIT or max(visited) == paths.NODE_LIMIT
        unlimited = paths.BlockPaths(mdl, b.cols, part.tie, limit=math.inf)
        visited.clear()
        visit = unlimited._visit
        monkeypatch.setattr(unlimited, "_visit", lambda n, visit=visit: visited.append(n) or visit(n))
        cost, _ = unlimited.optimum({})
        assert unlimited.work > paths.WORK_LIMIT or len(visited) > paths.NODE_LIMIT
        st, obj, _, _ = branch_and_bound(part.restricted(k, {}), b.cols, b.rows, None)
        assert st == "optimal" and math.isclose(cost, obj, rel_tol=1e-9)
        hard = k
    assert len(part.blocks) == 4 and hard == 1


def test_a_search_of_several_queries_gives_up_by_its_work():
    """The block of 60 x 5 seed 12 whose three queries share two MIRs: every start holds many
    owners, so a node costs several times as much, and its search (as the coupled search makes
    it, with WORK_LIMIT_SEVERAL) gives up on its work after a few hundred nodes, far from
    NODE_LIMIT; the block then turns to its seam."""
    mdl = build_model(enumerate_candidates(random_workload(60, 100, 5, seed=12)), "single")
    part = next(p for p in (coupled_part(mdl, *c) for c in components(mdl)) if p is not None)
    costs = BlockCosts(part, deadline=None)
    k = max(range(len(part.blocks)), key=lambda k: len(part.blocks[k].cols))
    search = costs.search(k)
    assert isinstance(search, paths.BlockPaths) and search.queries == 3
    nodes = []
    visit = search._visit
    search._visit = lambda n: nodes.append(n) or visit(n)
    with pytest.raises(paths.TooLarge):
        search.optimum({})
    assert search.work > blocks.WORK_LIMIT_SEVERAL and len(nodes) < paths.NODE_LIMIT / 3
    costs.searched(k, {})
    assert isinstance(costs.searches[k], seams.SeamSearch)


def test_shared_rows_as_every_pair():
    """The leading steps every two root paths share, by their prefixes, as ``_shared`` gives them
    pair by pair: random paths over few steps (many shared prefixes, repeated paths, empty ones)
    and the orders of every start of a 10 x 5 block."""
    import random

    rng = random.Random(1)
    for _ in range(300):
        ps = [tuple(rng.choice((1, 2, 3)) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 12))]
        assert paths._shared_rows(ps) == tuple(tuple(paths._shared(a, b) for b in ps) for a in ps), ps
    mdl = build_model(enumerate_candidates(random_workload(10, 100, 5, seed=0)), "single")
    part = next(p for p in (coupled_part(mdl, *c) for c in components(mdl)) if p is not None)
    search = paths.BlockPaths(mdl, part.blocks[0].cols, part.tie)
    for sr in search.starts:
        assert sr.shared == tuple(tuple(paths._shared(a.steps, b.steps) for b in sr.orders) for a in sr.orders)
        assert any(0 < d < len(o.steps) for o, row in zip(sr.orders, sr.shared) for d in row)


@pytest.mark.parametrize("spec", [(10, 100, 5, 0), (6, 20, 4, 0)], ids=lambda s: f"{s[0]}x{s[2]}_{s[1]}rel_s{s[3]}")
def test_weights_started_from_the_last_lexicographic_optimum(spec):
    """``BlockCosts.weight`` starts a block's lexicographic search from its last lexicographic
    optimum recosted, when that is lighter than the block's own plan and within the cap: under
    every combination the weight is that of a search started from the block's own plan, on a
    search of its own (no caches shared), and the start taken is a plan within the cap."""
    q, r, k, seed = spec
    taken = compared = 0
    for mdl, part in parts(q, r, k, 4, seed):
        costs = BlockCosts(part, deadline=None)
        costs.enumerate_blocks()
        for b, block in enumerate(part.blocks):
            if not isinstance(costs.search(b), paths.BlockPaths) or not block.stores:
                continue
            alone = paths.BlockPaths(mdl, block.cols, part.tie, limit=math.inf)
            for (kk, t), key in zip(part.combinations, part.keys):
                if kk != b or key in costs.ties:
                    continue
                choice = part.chosen_by(b, t)
                cost = costs.cost(b, choice)
                own = part.patched(b, costs.costs[key][1], choice)
                start = costs._lighter(b, own, choice, cost * (1 + 1e-7) + 1e-7)
                if start is not own:
                    taken += 1
                    assert costs.recost(b, start, choice)[0] <= cost * (1 + 1e-7) + 1e-7
                assert costs.weight(b, choice) == alone.lexicographic(choice, cost, own)[0], (seed, b, t)
                compared += 1
    assert compared > 30 and taken > 10, (compared, taken)
