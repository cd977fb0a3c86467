"""A coupled part's blocks costed by enumeration (``mqjoin.planning.ilp.enumeration``) against
the blocks' LPs and branch and bounds, and the plans against the exhaustive reference.

Per block and per combination of its shared stores' attributes, the enumeration's optimum and
lexicographic optimum (least tie-break weight within ``TIE_SLACK`` of the optimum) must be
those of the block's own model solved as before: its LP (integral on three-way queries) or its
branch and bound, and its tie-break LP or branch and bound with the cost capped.
"""

from __future__ import annotations

import math

import pytest

import _ref_optimizer as ref
import mqjoin.planning.ilp.enumeration as enumeration
import mqjoin.planning.ilp.paths as paths
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, components, solve
from mqjoin.planning.ilp.blocks import BlockCosts, coupled_part
from mqjoin.planning.optimizer import optimize

# (queries, relations, relations per query, parallelism, seeds): three-way queries over few
# relations share many stores (blocks with several shared stores and classes)
SPECS = [(8, 12, 3, 4, range(12)), (30, 20, 3, 4, range(4)), (12, 10, 3, 3, range(6)), (6, 8, 3, 2, range(6))]


def parts(queries: int, relations: int, size: int, parallelism: int, seed: int):
    w = random_workload(queries, relations, size, seed=seed, parallelism=parallelism)
    mdl = build_model(enumerate_candidates(w), "single")
    for cols, rows in components(mdl):
        part = coupled_part(mdl, cols, rows)
        if part is not None:
            yield mdl, part


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s[0]}x{s[2]}_{s[1]}rel_p{s[3]}")
def test_every_combination_as_its_lp(spec, monkeypatch):
    monkeypatch.setattr(paths, "NODE_LIMIT", 0)  # BlockCosts without its search: the LPs
    q, r, k, par, seeds = spec
    compared = enumerated = 0
    for seed in seeds:
        for mdl, part in parts(q, r, k, par, seed):
            tables = enumeration.block_tables(part)
            lps = BlockCosts(part, deadline=None)  # cost() and weight() solve the block's LPs
            for b, table in enumerate(tables):
                if table is None:  # blocks of several queries (sharing steps): too many assignments
                    continue
                enumerated += 1
                combos = [t for kk, t in part.combinations if kk == b]
                integer = [p for p, c in enumerate(part.blocks[b].cols) if mdl.integer[c]]
                for t, (cost, weight, a) in zip(combos, table.optima(combos)):
                    choice = part.chosen_by(b, t)
                    lp_cost, lp_weight = lps.cost(b, choice), lps.weight(b, choice)
                    assert math.isclose(cost, lp_cost, rel_tol=1e-9, abs_tol=1e-9), (seed, b, t)
                    assert weight == lp_weight, (seed, b, t)
                    values = table.values(a, choice)
                    lp_values = lps.ties[part.key_of(b, choice)][1]
                    assert [values[p] for p in integer] == [round(lp_values[p]) for p in integer], (seed, b, t)
                    assert math.fsum(mdl.cost[c] * v for c, v in zip(part.blocks[b].cols, values)) == cost
                    compared += 1
    assert enumerated > 10 and compared > 50


def test_large_blocks_left_to_their_lps():
    found = list(parts(20, 100, 4, 4, 0))
    assert found
    for _, part in found:  # four-way queries: more than ENUMERATE_MAX assignments
        assert all(t is None for t in enumeration.block_tables(part))


@pytest.mark.parametrize("queries,relations,size,seed", [(30, 20, 3, s) for s in range(6)]
                         + [(4, 20, 5, s) for s in range(3)])
def test_plans_as_without_enumeration(queries, relations, size, seed, monkeypatch):
    """The plan (every chosen probe order and partition attribute) is the one the blocks' LPs
    give: without the enumeration of three-way blocks and the search of larger ones
    (``mqjoin.planning.ilp.paths``; five-way workloads: single-query and coupled parts)."""
    mdl = build_model(enumerate_candidates(random_workload(queries, relations, size, seed=seed)), "single")
    fast = solve(mdl)
    monkeypatch.setattr(enumeration, "ENUMERATE_MAX", 0)
    monkeypatch.setattr(paths, "NODE_LIMIT", 0)
    slow = solve(mdl)
    assert fast.canonical and slow.canonical
    assert math.isclose(fast.objective, slow.objective, rel_tol=1e-9)  # (the LPs' values carry noise)
    chosen = [i for i in range(mdl.num_variables) if mdl.integer[i]]
    assert [round(fast.values[i]) for i in chosen] == [round(slow.values[i]) for i in chosen]


@pytest.mark.parametrize("size,seed", [(3, s) for s in range(40)] + [(4, s) for s in range(12)])
def test_optimum_as_the_exhaustive_reference(size, seed):
    """Small random workloads under ``single``: whatever the path, the exhaustive optimum
    (four-way queries: blocks searched without LPs)."""
    w = ref.random_workload(seed, n_q=(2, 4) if size == 3 else (1, 3), q_size=(size, size),
                            n_rel=(3, 5) if size == 3 else (4, 6))
    res = optimize(w, partitioning="single")
    assert res.ilp.status == "optimal" and res.ilp.canonical
    assert math.isclose(res.plan.probe_cost, ref.optimum(w, "single"), rel_tol=1e-6, abs_tol=1e-7)


@pytest.mark.parametrize("queries,relations,seed", [(3, 12, 2), (4, 15, 1), (3, 12, 3)])
def test_master_and_depth_first_give_the_same_canonical_plan(queries, relations, seed, monkeypatch):
    """Five-way coupled parts (large MIRs, blocks not enumerated): the master's tie-break and the
    depth-first search's second pass both prove the plan canonical, and it is the same plan."""
    import mqjoin.planning.ilp.coupled as coupled

    mdl = build_model(enumerate_candidates(random_workload(queries, relations, 5, seed=seed)), "single")
    assert any(coupled_part(mdl, c, r) is not None for c, r in components(mdl))
    plans = []
    for stores in (0, 100):  # every coupled part by the master, or none
        monkeypatch.setattr(coupled, "MASTER_MIN_STORES", stores)
        sol = solve(mdl)
        assert sol.optimal and sol.canonical
        plans.append([round(sol.values[i]) for i in range(mdl.num_variables) if mdl.integer[i]])
    assert plans[0] == plans[1]
