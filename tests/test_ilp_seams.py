"""Blocks of several queries solved by their seam (``mqjoin.planning.ilp.seams``) against the
block's own LP branch and bound and its capped tie-break (``BlockCosts`` with the searches
off), and the bounds and given MIRs of ``BlockPaths`` that the families rely on.
"""

from __future__ import annotations

import math


import mqjoin.planning.ilp.paths as paths
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, components
from mqjoin.planning.ilp.blocks import BlockCosts, coupled_part
from mqjoin.planning.ilp.branching import branch_and_bound
from mqjoin.planning.ilp.seams import SeamSearch, find_seam


def _seamed(q: int, k: int, seed: int):
    """The model, its coupled part and the blocks of several queries (with their seams)."""
    mdl = build_model(enumerate_candidates(random_workload(q, 100, k, seed=seed)), "single")
    part = next(p for p in (coupled_part(mdl, *c) for c in components(mdl)) if p is not None)
    return mdl, part, [(b, s) for b, s in ((b, find_seam(mdl, blk.cols, blk.rows, frozenset(part.shared)))
                                           for b, blk in enumerate(part.blocks)) if s is not None]


def _feasible(mdl, cols, rows, values) -> bool:
    at = dict(zip(cols, values))
    return all(lo - 1e-6 <= math.fsum(a * at[i] for i, a in zip(idx, coef)) <= hi + 1e-6
               for _, idx, coef, lo, hi in (mdl.rows[r] for r in rows))


def test_a_seamed_block_as_its_branch_and_bound():
    """10 x 5 seed 1: two queries that share the MIR of their common pair of relations.  Under
    the block's first combinations the seam's optimum is the branch and bound's, its plan
    satisfies every row and costs that, and its lexicographic optimum weighs what the capped
    tie-break finds (and keeps the cost); with the shared stores left to it, a bound."""
    mdl, part, seamed = _seamed(10, 5, 1)
    (k, seam), = seamed
    assert len(seam.families) == 2
    assert [mdl.names[c] for c in seam.cols if mdl.names[c].startswith("m_")] == ["m_R64R97"]
    block = part.blocks[k]
    search = SeamSearch(mdl, block.cols, seam, part.tie)
    lps = BlockCosts(part, deadline=None)
    lps.searches[k] = None  # the LPs only
    combos = [t for kk, t in part.combinations if kk == k][:4]
    for choice in [{}] + [part.chosen_by(k, t) for t in combos]:
        cost, values = search.optimum(choice)
        if not choice:  # shared stores undecided: each family may choose its own (a bound)
            assert cost <= lps.cost(k, choice) * (1 + 1e-9)
            continue
        assert math.isclose(cost, lps.cost(k, choice), rel_tol=1e-9), choice
        assert _feasible(mdl, block.cols, block.rows, values)
        assert math.fsum(mdl.cost[c] * v for c, v in zip(block.cols, values)) == cost
        weight, canonical = search.lexicographic(choice, cost, values)
        assert weight == lps.weight(k, choice), choice
        assert _feasible(mdl, block.cols, block.rows, canonical)
        assert math.fsum(mdl.cost[c] * v for c, v in zip(block.cols, canonical)) <= cost * (1 + 1e-7) + 1e-7


def test_one_query_has_no_seam():
    """A block of one query (with its MIRs) does not split."""
    mdl = build_model(enumerate_candidates(random_workload(1, 10, 5, seed=4)), "single")
    (cols, rows), = components(mdl)
    assert find_seam(mdl, cols, rows) is None


def test_seam_assignments_satisfy_the_seam_rows():
    """Under a choice of the shared stores, every assignment listed satisfies the rows that
    hold only seam columns, costs what its columns cost, agrees with the choice, and the MIR
    of the seam is on in some and off in others."""
    mdl, part, seamed = _seamed(10, 5, 1)
    (k, seam), = seamed
    search = SeamSearch(mdl, part.blocks[k].cols, seam, part.tie)
    choice = part.chosen_by(k, next(t for kk, t in part.combinations if kk == k))
    fitting = search._fitting(choice)
    assert fitting and seam.rows
    m = next(c for c in seam.cols if mdl.names[c].startswith("m_"))
    for cost, _, values in fitting:
        at = dict(zip(seam.cols, values))
        assert _feasible(mdl, seam.cols, seam.rows, values)
        assert cost == math.fsum(mdl.cost[c] * v for c, v in at.items())
        for st, zs in seam.shared.items():
            assert [at[c] for c in zs] == [float(j == choice[st]) for j in range(len(zs))]
    assert {dict(zip(seam.cols, v))[m] for _, _, v in fitting} == {0.0, 1.0}


def test_bounds_at_zero_and_given_mirs_in_the_search():
    """``BlockPaths`` drops the orders that a bound at 0 rules out (as the branch and bound does
    with the same bounds), and probes a ``given`` MIR without maintaining it."""
    mdl = build_model(enumerate_candidates(random_workload(1, 10, 5, seed=4)), "single")
    (cols, rows), = components(mdl)
    upper = list(mdl.upper)
    for c in mdl.m.values():
        upper[c] = 0.0
    no_mirs = mdl.__class__(**{**mdl.__dict__, "upper": upper})
    cost, values = paths.BlockPaths(no_mirs, cols, mdl.tie, limit=math.inf).optimum({})
    st, obj, _, _ = branch_and_bound(no_mirs, cols, rows, None)
    assert st == "optimal" and math.isclose(cost, obj, rel_tol=1e-9)
    assert all(values[cols.index(c)] == 0.0 for c in mdl.m.values())
    full = paths.BlockPaths(mdl, cols, mdl.tie, limit=math.inf).optimum({})[0]
    assert full < cost  # (MIRs pay on this query)
    # every MIR given (maintained outside: its orders are not among the columns): probed for free
    owners = {c: key[0] for key, c in mdl.x.items()}
    probing = [c for c in cols if isinstance(owners.get(c, ""), str)]
    given = frozenset(mdl.m.values())
    free_cost, free_values = paths.BlockPaths(mdl, probing, mdl.tie, limit=math.inf, given=given).optimum({})
    assert free_cost < full
    assert any(free_values[probing.index(c)] for c in mdl.m.values())


def test_block_costs_turn_to_the_seam_where_the_search_struggles():
    """In the coupled search, a block of several queries searches with the smaller work limit,
    turns to its seam once that search gives up, and costs what its LPs cost; blocks of one
    query keep the full limit."""
    from mqjoin.planning.ilp.blocks import WORK_LIMIT_SEVERAL

    mdl, part, seamed = _seamed(10, 5, 1)
    (k, _), = seamed
    costs = BlockCosts(part, deadline=None)
    assert costs.search(k).work_limit == WORK_LIMIT_SEVERAL
    assert all(costs.search(j).work_limit == paths.WORK_LIMIT for j in range(len(part.blocks))
               if j != k and costs.search(j) is not None)
    choice = part.chosen_by(k, next(t for kk, t in part.combinations if kk == k))
    lps = BlockCosts(part, deadline=None)
    lps.searches[k] = None
    assert math.isclose(costs.cost(k, choice), lps.cost(k, choice), rel_tol=1e-9)
    assert isinstance(costs.searches[k], SeamSearch)
    assert costs.weight(k, choice) == lps.weight(k, choice)


def test_a_query_left_without_orders_has_no_plan():
    """Bounds at 0 that rule out every order of the query at one of its starts leave the block
    no plan: the search says so (``math.inf``), as the branch and bound finds the LP
    infeasible, instead of pricing the block without that start."""
    from mqjoin.model.errors import InfeasibleError

    mdl = build_model(enumerate_candidates(random_workload(1, 10, 5, seed=4)), "single")
    (cols, rows), = components(mdl)
    start = next(key[1] for key in mdl.x if isinstance(key[0], str))
    upper = list(mdl.upper)
    for key, c in mdl.x.items():
        if isinstance(key[0], str) and key[1] == start:
            upper[mdl.order_steps[c][0]] = 0.0  # every first step from that start
    cut = mdl.__class__(**{**mdl.__dict__, "upper": upper})
    search = paths.BlockPaths(cut, cols, mdl.tie, limit=math.inf)
    assert search.optimum({}) == (math.inf, [])
    try:
        branch_and_bound(cut, cols, rows, None)
    except InfeasibleError:
        pass
    else:
        raise AssertionError("the branch and bound found a plan")


def test_searches_below_a_held_plan():
    """``below``: a search (a block's, or a seamed block's) returns only a plan cheaper than the
    one its caller holds — none at the optimum itself, the optimum just above it — and the
    block costs priced from the last plan recosted are those of searches from scratch."""
    mdl, part, seamed = _seamed(10, 5, 1)
    (k, seam), = seamed
    combos = [part.chosen_by(k, t) for kk, t in part.combinations if kk == k][:3]
    single = next(kk for kk in range(len(part.blocks)) if kk != k and part.blocks[kk].stores)
    single_combos = [part.chosen_by(single, t) for kk, t in part.combinations if kk == single][:3]
    held = BlockCosts(part, deadline=None)
    for kk, choices, fresh in [(k, combos, lambda: SeamSearch(mdl, part.blocks[k].cols, seam, part.tie)),
                               (single, single_combos,
                                lambda: paths.BlockPaths(mdl, part.blocks[single].cols, part.tie))]:
        search = fresh()
        for choice in choices:
            cost, _ = search.optimum(choice)
            assert search.optimum(choice, cost) == (math.inf, [])
            assert search.optimum(choice, cost + 1.0)[0] == cost
            assert held.cost(kk, choice) == fresh().optimum(choice)[0] == cost
        assert len(held.known[kk]) == len(choices)


def test_choices_alike_to_a_family_share_its_search():
    """A family sees few of the block's steps, so choices the block tells apart are often alike
    to it: one search of the family serves them all.  Over every combination of 10 x 5 seed
    1's seamed block, one seam search shared by all of them gives each combination the cost
    and the values (its shared stores as chosen) of a seam search of its own, with fewer
    family searches than (family, assignment, choice) asked."""
    mdl, part, seamed = _seamed(10, 5, 1)
    (k, seam), = seamed
    block = part.blocks[k]
    shared = SeamSearch(mdl, block.cols, seam, part.tie)
    for t in [t for kk, t in part.combinations if kk == k]:
        choice = part.chosen_by(k, t)
        cost, values = shared.optimum(choice)
        assert (cost, values) == SeamSearch(mdl, block.cols, seam, part.tie).optimum(choice), choice
        assert _feasible(mdl, block.cols, block.rows, values)
    assert len(shared._alike) < len(shared._optima)


def test_served_and_chosen():
    """``BlockPaths.served``: two attributes of a store that spare the same steps' broadcasts
    give one search — the same cost, and the same plan once ``chosen`` sets the store's
    ``z`` — and the block's classes of attributes are never coarser."""
    mdl, part, _ = _seamed(10, 5, 1)
    found = 0
    for k, b in enumerate(part.blocks):
        search = paths.BlockPaths(mdl, b.cols, part.tie)
        for st in b.stores:
            by: dict[tuple, list[int]] = {}
            for j in range(len(part.shared[st])):
                by.setdefault(search.served({st: j}), []).append(j)
            assert len(by) <= len(part.classes[(k, st)])  # (the block's classes count broadcasts at no cost too)
            for alike in (js for js in by.values() if len(js) > 1):
                first_cost, first_vals = paths.BlockPaths(mdl, b.cols, part.tie).optimum({st: alike[0]})
                for j in alike[1:]:
                    cost, vals = paths.BlockPaths(mdl, b.cols, part.tie).optimum({st: j})
                    assert cost == first_cost
                    assert search.chosen(first_vals, {st: j}) == vals
                    found += 1
    assert found
