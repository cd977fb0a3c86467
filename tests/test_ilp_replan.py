"""Incremental re-planning (mqjoin.planning.optimizer.replan, ``optimize --changes``): the
parts of the ILP a change leaves as they were keep their answers, and the plan is the one a
solve from scratch gives — on random workloads, queries added and removed."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from _cli import run_cli
from _replan import CHANGES, largest, query_names, redeclared_relation, same, some_relation
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.model.errors import NoSolutionError
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.clash import OBJECTIVE_TOLERANCE
from mqjoin.planning.ilp import build_model, components, solve
from mqjoin.planning.ilp.solving import part_key
from mqjoin.planning.optimizer import optimize, replan

# (queries, relations, query size, seed, policy, MIRs): several independent parts each
CASES = [(8, 40, 3, s, "single", True) for s in range(6)] + [
    (6, 30, 4, 1, "single", True), (6, 30, 4, 2, "single", True), (8, 40, 3, 7, "replicas", True),
    (8, 40, 3, 8, "single", False), (10, 20, 3, 9, "single", True)]


pytestmark = pytest.mark.usefixtures("tie_breaks_to_the_end")  # two optima compared: both canonical

@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", CASES)
def test_a_replan_equals_a_solve_from_scratch(n, rels, k, seed, policy, mirs):
    """A query added, then removed again, then another removed: each re-plan from the plan
    before it is the plan optimised from scratch, and keeps the parts the change did not touch."""
    w = random_workload(n, rels, k, seed=seed)
    names = [q.name for q in w.queries]
    steps = [w.restricted_to(names[:-1]), w, w.restricted_to(names[:-1]), w.restricted_to(names[1:-1])]
    res = optimize(steps[0], partitioning=policy, mirs=mirs)
    assert res.reused_parts == 0 and len(res.parts) == res.ilp.components
    for n, step in enumerate(steps[1:]):
        res = replan(res, step)
        assert (res.partitioning, res.mirs) == (policy, mirs)
        same(res, optimize(step, partitioning=policy, mirs=mirs))
        assert len(res.parts) == res.ilp.components and res.reused_parts <= res.ilp.components
        if n == 0:  # a query added: its part is new (a query removed may leave only known parts)
            assert res.reused_parts < res.ilp.components


def test_every_case_reuses_parts():
    """The cases exercise the reuse: most re-plans keep parts (else the property says little)."""
    w = random_workload(8, 40, 3, seed=0)
    res = replan(optimize(w.restricted_to([q.name for q in w.queries[:-1]])), w)
    assert res.reused_parts >= 2


def test_parts_are_keyed_by_what_they_are_not_where():
    """A part's key names its columns and rows: the same part in two models (columns at other
    indices) has one key; a change of a cost inside it changes the key."""
    w = random_workload(8, 40, 3, seed=3)
    one = build_model(enumerate_candidates(w))
    two = build_model(enumerate_candidates(w.restricted_to([q.name for q in w.queries[1:]])))
    k1 = {part_key(one, c, r) for c, r in components(one)}
    k2 = {part_key(two, c, r) for c, r in components(two)}
    assert k1 & k2 and k1 != k2
    cols, rows = components(one)[0]
    before = part_key(one, cols, rows)
    one.cost[next(c for c in cols if one.cost[c])] *= 2
    assert part_key(one, cols, rows) != before


def test_a_part_stopped_by_a_time_limit_is_not_kept():
    """Only parts proven optimal are kept for a re-plan: a stopped solve keeps none, and the
    next solve solves every part."""
    w = random_workload(8, 40, 3, seed=1)
    mdl = build_model(enumerate_candidates(w))
    full = solve(mdl, reuse={})
    assert full.optimal and len(full.parts) == full.components
    again = solve(mdl, reuse=full.parts)
    assert again.reused == again.components and again.values == full.values
    assert math.isclose(again.objective, full.objective, rel_tol=1e-12)
    from mqjoin.planning.ilp.monitor import Monitor

    stopped = Monitor()
    stopped.stop()
    start = [0.0] * mdl.num_variables
    with pytest.raises(NoSolutionError):  # stopped before any plan and without a start: no plan
        solve(mdl, reuse={}, monitor=stopped)
    cut = solve(mdl, reuse=full.parts, monitor=stopped, fallback=start)
    assert cut.reused == cut.components  # every part known: nothing to stop
    assert cut.parts == full.parts


def test_a_solve_stopped_after_some_parts_keeps_those_it_proved(monkeypatch):
    """Parts are independent: those a stopped solve proved optimal before the stop are kept
    (each with its own canonical flag), the others are not, and the next solve solves only
    those and ends on the plan of a solve from scratch."""
    from mqjoin.planning.ilp import monitor as ilp_monitor
    from mqjoin.planning.ilp.monitor import Monitor

    w = random_workload(8, 40, 3, seed=1)
    mdl = build_model(enumerate_candidates(w))
    full = solve(mdl, reuse={})
    assert full.components > 2
    stopped, report, first = Monitor(), ilp_monitor.Watch.report, []

    def stopping(self, incumbent, bound):  # the first report of the second part stops the solve
        report(self, incumbent, bound)
        first.append(first[0] if first else self.part)
        if self.part != first[0]:
            stopped.stop()

    monkeypatch.setattr(ilp_monitor.Watch, "report", stopping)
    cut = solve(mdl, reuse={}, monitor=stopped, fallback=[0.0] * mdl.num_variables)
    monkeypatch.undo()
    canonical = [p for p in cut.parts.values() if p.canonical]  # (the second part's tie-break was cut short)
    assert cut.status == "interrupted" and canonical and len(cut.parts) < cut.components
    again = solve(mdl, reuse=cut.parts)
    assert again.reused == len(canonical) and again.values == full.values


def test_optimize_changes_cli(tmp_path, capsys):
    """``optimize --changes``: one line per plan (workload, then each change), the last plan;
    in --json a ``changes`` list; a change that names an unknown query is one line, exit 2,
    before any solve."""
    import yaml

    w = random_workload(8, 40, 3, seed=2)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(w.to_spec(), sort_keys=False))
    extra = random_workload(9, 40, 3, seed=2).queries[-1]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump([{"at": 1, "add": {"q99": extra.text}},
                                                     {"at": 2, "remove": [w.queries[0].name]}]))
    code, out, _ = run_cli(capsys, "optimize", tmp_path / "w.yaml", "--changes", tmp_path / "c.yaml", "--json")
    assert code == 0
    d = json.loads(out)
    assert [s["label"] for s in d["changes"]] == ["(workload)", "+q99", f"−{w.queries[0].name}"]
    assert [s["queries"] for s in d["changes"]] == [8, 9, 8]
    assert all(s["status"] == "optimal" and s["canonical"] for s in d["changes"])
    assert d["changes"][0]["parts_reused"] == 0 and d["changes"][1]["parts_reused"] > 0
    last = w.restricted_to([q.name for q in w.queries[1:]]).with_query("q99", extra.text)
    assert d["probe_cost"] == optimize(last).probe_cost == d["changes"][-1]["probe_cost"]
    code, out, _ = run_cli(capsys, "optimize", tmp_path / "w.yaml", "--changes", tmp_path / "c.yaml")
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["change", "queries"] and "+q99" in out
    (tmp_path / "bad.yaml").write_text("- {at: 1, remove: [nope]}\n")
    code, out, err = run_cli(capsys, "optimize", tmp_path / "w.yaml", "--changes", tmp_path / "bad.yaml")
    assert code == 2
    assert out == "" and err.count("\n") == 1 and "removes nope, which the workload does not have" in err


# (queries, relations, query size, seed): one coupled part of several blocks under ``single``
# (four-way queries: their blocks are priced by searches, whose prices are kept; three-way
# blocks are enumerated, cheaply, in every solve)
COUPLED = [(10, 20, 4, s) for s in range(4)] + [(9, 16, 4, 5), (12, 30, 4, 6)]


def _coupled_part_blocks(res) -> int:
    """How many blocks the largest coupled part of a result kept prices of."""
    return max((len(p.blocks) for p in res.parts.values()), default=0)


@pytest.mark.parametrize("n,rels,k,seed", COUPLED)
def test_a_coupled_part_changed_by_one_query_reprices_only_its_new_blocks(n, rels, k, seed, monkeypatch):
    """One query added to a coupled part, then another removed: the part changes, so it is
    solved again, but by its blocks' prices kept from the solve before — the blocks the change
    leaves as they were are not priced again — and the plan is the one a solve from scratch
    gives (the same optimum, the same canonical plan)."""
    from mqjoin.planning.ilp import blocks

    searched = []
    real = blocks.BlockCosts.searched

    def counting(self, k, choice):
        searched.append(k)
        return real(self, k, choice)

    monkeypatch.setattr(blocks.BlockCosts, "searched", counting)
    monkeypatch.setenv("MQJOIN_FORK", "0")  # (every search in this process, where it is counted)
    w = random_workload(n, rels, k, seed=seed)
    names = [q.name for q in w.queries]
    res = optimize(w.restricted_to(names[:-1]), partitioning="single")
    assert res.ilp.components >= 1 and _coupled_part_blocks(res) > 2
    for step in (w, w.restricted_to(names[1:])):
        searched.clear()
        res = replan(res, step)
        again = len(searched)
        searched.clear()
        scratch = optimize(step, partitioning="single")
        same(res, scratch)
        assert res.reused_parts < res.ilp.components  # the coupled part changed: solved again
        assert again < len(searched), (again, len(searched))  # ... from the prices kept


# --------------------------------------------------------------------------------------------
def _same_candidates(a, b) -> None:
    """Equal candidates, in the same order (owners, starts, steps, stores), rendered alike."""
    assert a == b
    assert list(a.orders) == list(b.orders)
    assert all(list(a.orders[o]) == list(b.orders[o]) for o in a.orders)
    assert list(a.step_cost) == list(b.step_cost)
    assert list(a.partition_candidates) == list(b.partition_candidates)
    assert ([m.render_partition(x) for m, xs in a.partition_candidates.items() for x in xs]
            == [m.render_partition(x) for m, xs in b.partition_candidates.items() for x in xs])


def _same_model(a, b) -> None:
    """Two models with the same variables (names, costs, tie-break weights, bounds) and rows."""
    for what in ("names", "cost", "tie", "integer", "upper", "rows", "x", "y", "m", "z", "b", "order_steps",
                 "order_mirs"):
        assert getattr(a, what) == getattr(b, what), what


@pytest.mark.parametrize("mirs", [True, False])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("change", list(CHANGES))
def test_candidates_from_those_before_a_change_equal_those_from_scratch(change, seed, mirs):
    """Each kind of change: the candidates enumerated from those before it equal those
    enumerated from scratch, and the model built from them with the names of the model before
    equals the model built from scratch."""
    before, after = CHANGES[change](random_workload(7, 12, 4, seed=seed))
    assert before != after
    old = enumerate_candidates(before, mirs)
    new = enumerate_candidates(after, mirs, previous=old)
    scratch = enumerate_candidates(after, mirs)
    _same_candidates(new, scratch)
    for policy in ("single", "replicas", "budget"):
        _same_model(build_model(new, policy, names=build_model(old, policy).name_parts),
                    build_model(scratch, policy))


def test_the_enumeration_takes_what_the_change_left():
    """The candidates a change leaves as they were are taken, not enumerated again: the same
    probe orders of a query the change does not touch (the very tuple), new ones of the query
    it adds."""
    w = random_workload(7, 12, 4, seed=0)
    old = enumerate_candidates(w.restricted_to(query_names(w)[:-1]))
    new = enumerate_candidates(w, previous=old)
    assert new.orders["q1"] is old.orders["q1"] and "q7" not in old.orders
    redeclared = enumerate_candidates(redeclared_relation(w), previous=new)
    assert redeclared.orders["q1"] is not new.orders["q1"]


def test_a_model_keeps_the_names_of_its_own_variables_and_rows():
    """A model built with the names of the model before keeps the parts of its own names
    only (they do not pile up from one re-plan to the next), and reads the others': the tie
    hashes it reads are those before (a different hash before shows in the weight)."""
    w = random_workload(7, 12, 4, seed=1)
    old = build_model(enumerate_candidates(w))
    fewer = build_model(enumerate_candidates(w.restricted_to(query_names(w)[:3])), names=old.name_parts)
    assert set(fewer.name_parts.hashes) < set(old.name_parts.hashes)
    assert set(fewer.name_parts.hashes) == {n for n, t in zip(fewer.names, fewer.tie) if t}
    x = next(i for i, t in enumerate(old.tie) if t)
    forged = replace(old.name_parts, hashes={**old.name_parts.hashes, old.names[x]: 0})
    again = build_model(enumerate_candidates(w), names=forged)
    assert again.tie[x] != old.tie[x] and again.tie[:x] == old.tie[:x]


@pytest.mark.parametrize("change", ["rate", "selectivity", "window", "group member's filter"])
def test_a_replan_after_a_change_of_statistics_equals_a_solve_from_scratch(change):
    """A re-plan enumerates from the candidates of the result before (its model's): after a
    change of statistics it takes the probe orders the change left, and its plan is the one a
    solve from scratch gives."""
    before, after = CHANGES[change](random_workload(10, 20, 4, seed=0))
    first = optimize(before, partitioning="single")
    again = replan(first, after)
    same(again, optimize(after, partitioning="single"))
    kept = [o for o in again.model.candidates.orders
            if again.model.candidates.orders[o] is first.model.candidates.orders.get(o)]
    assert 0 < len(kept) < len(again.model.candidates.orders)


# --------------------------------------------------------------------------------------------
# what one solve computes once and its parts read (the links of the model's rows, the parts' keys)
# --------------------------------------------------------------------------------------------


def _reference_components(mdl):
    """The model's parts by :class:`UnionFind` over every row, as built before the links were shared."""
    from mqjoin.support.unionfind import UnionFind

    uf = UnionFind(range(mdl.num_variables))
    for _, idx, _, _, _ in mdl.rows:
        uf.link(idx)
    groups = {}
    for v in range(mdl.num_variables):
        groups.setdefault(uf.find(v), ([], []))[0].append(v)
    for ri, (_, idx, _, _, _) in enumerate(mdl.rows):
        groups[uf.find(idx[0])][1].append(ri)
    return sorted(groups.values(), key=lambda g: g[0][0])


@pytest.mark.parametrize("policy", ["single", "replicas", "budget"])
@pytest.mark.parametrize("n,rels,k,seed", [(8, 12, 3, 0), (10, 20, 4, 1), (12, 30, 4, 2), (20, 40, 3, 3)])
def test_the_links_without_z_are_those_of_each_part(n, rels, k, seed, policy):
    """The parts (:func:`components`) and each part's links without ``z`` (the blocks'
    roots, :func:`split_blocks`) read one linking of the model's rows: the parts are those of a
    union-find over every row, and each part's roots those of a union-find over its own rows."""
    from mqjoin.planning.ilp.model import linked, plain_links

    mdl = build_model(enumerate_candidates(random_workload(n, rels, k, seed=seed)), policy)
    comps = components(mdl)
    assert comps == _reference_components(mdl)
    zs = set(mdl.z.values())
    root = plain_links(mdl)[0]
    for cols, rows in comps:
        alone = linked(cols, ([i for i in mdl.rows[r][1] if i not in zs] for r in rows))
        assert {c: root[c] for c in cols} == alone


@pytest.mark.parametrize("seed", range(3))
def test_parts_keys_are_computed_when_a_part_of_their_size_is_asked_for(seed):
    """A solution's parts (``Solution.parts``) compute their keys when a later solve asks for a
    part of the same size: the keys are then those of :func:`part_key` from scratch, a part of
    another size costs no key, and the same model solved again reuses every part."""
    from mqjoin.planning.ilp.solving import Parts

    w = random_workload(8, 40, 3, seed=seed)  # (several parts: the one query removed changes one)
    mdl = build_model(enumerate_candidates(w), "single")
    full = solve(mdl, reuse={})
    assert isinstance(full.parts, Parts) and len(full.parts._known) == 0
    assert len(full.parts) == full.components
    fewer = build_model(enumerate_candidates(w.restricted_to([q.name for q in w.queries[:-1]])), "single")
    again = solve(fewer, reuse=full.parts)
    scratch = solve(fewer)
    assert again.optimal and 0 < again.reused < full.components
    assert math.isclose(again.objective, scratch.objective, rel_tol=OBJECTIVE_TOLERANCE)
    assert [round(v) for v, i in zip(again.values, fewer.integer) if i] == [
        round(v) for v, i in zip(scratch.values, fewer.integer) if i]
    sizes = {len(c) + len(r) for c, r in components(fewer)}
    assert full.parts._pending and all(len(key) in sizes for key in full.parts._known)  # only those asked for
    assert set(full.parts) == {part_key(mdl, c, r) for c, r in components(mdl)}  # (now every key)
    same = solve(mdl, reuse=full.parts)
    assert same.reused == same.components and same.values == full.values


def _by_name(priced):
    """A block's prices as values by column name (the order of a block's columns is the model's)."""
    def named(table):
        return {choice: (v, dict(zip(priced.names, vals))) for choice, (v, vals) in table.items()}

    return named(priced.costs), named(priced.ties)


@pytest.mark.parametrize("n,rels,k,seed", COUPLED[:4])
def test_kept_prices_of_blocks_priced_no_further_are_those_read(n, rels, k, seed):
    """The prices a solve keeps (:func:`kept_prices`) with the prices it read (``known``) are
    those it keeps without them: a block that priced nothing beyond what it read keeps the
    very prices read, a block that priced more keeps them all."""
    from mqjoin.planning.ilp.blocks import BlockCosts
    from mqjoin.planning.ilp.prices import block_keys, kept_prices, load_prices

    w = random_workload(n, rels, k, seed=seed)

    def part_of(workload):
        return largest(build_model(enumerate_candidates(workload), "single"))

    one = part_of(w.restricted_to(query_names(w)[:-1]))
    costs = BlockCosts(one, deadline=None)
    for k_, t in one.combinations[::2]:  # (half the combinations: the re-plan prices the others)
        costs.cost(k_, one.chosen_by(k_, t))
    known = kept_prices(one, costs, block_keys(one))
    two = part_of(w)
    again = BlockCosts(two, deadline=None)
    keys = block_keys(two)
    assert load_prices(two, again, known, keys) > 1
    assert keys == block_keys(two)  # (those found: the equal keys of known, the very objects)
    read = [k_ for k_ in range(len(two.blocks)) if keys[k_] in known]
    assert all(any(keys[k_] is key for key in known) for k_ in read)
    for k_, t in two.combinations:  # every combination of one block read and of the blocks not read
        if k_ == read[0] or k_ not in read:
            again.cost(k_, two.chosen_by(k_, t))
    kept, fresh = kept_prices(two, again, keys, known), kept_prices(two, again, keys)
    assert kept.keys() == fresh.keys()
    assert all(_by_name(kept[key]) == _by_name(fresh[key]) for key in kept)
    assert all(kept[keys[k_]] is known[keys[k_]] for k_ in read[1:])  # priced no further: as read
    assert kept[keys[read[0]]] is not known[keys[read[0]]]


@pytest.mark.parametrize("seed", range(3))
def test_a_plan_from_the_candidates_steps_is_the_plan_derived_anew(seed):
    """``build_plan``'s ``candidates`` (their steps and step costs, read for the orders chosen)
    give the plan that deriving and costing every step gives, after a re-plan too (its
    candidates partly from the plan before)."""
    from mqjoin.planning.probe_trees import build_plan

    w = random_workload(12, 20, 4, seed=seed)
    changed = w.with_relation(some_relation(w), rate=300.0)
    res = replan(optimize(w, partitioning="single"), changed)
    plan = res.plan
    assert build_plan(changed, plan.choices, plan.mode, plan.partitioning) == plan
    assert any(n.cost for n in plan.nodes)


# --------------------------------------------------------------------------------------------
# one coupled part changed: what the re-plan reads from the solve before, and the master's dual
# --------------------------------------------------------------------------------------------


#: (queries, relations, query size): a small and a medium workload whose queries make one coupled part
SIZES = [(12, 20, 4), (60, 60, 4)]


@pytest.mark.parametrize("mirs", [True, False])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n,rels,k", SIZES)
def test_replans_of_a_coupled_workload_equal_solves_from_scratch(n, rels, k, seed, mirs):
    """A query added, one removed, a rate and a selectivity changed, each re-planned from the
    result before: each plan is the one a solve from scratch gives (plan, optimum, status, canonical)."""
    w = random_workload(n, rels, k, seed=seed)
    added = CHANGES["query added"](w)
    removed = CHANGES["query removed"](w)[1]
    rate = CHANGES["rate"](removed)[1]
    selectivity = CHANGES["selectivity"](rate)[1]
    res = optimize(added[0], partitioning="single", mirs=mirs)
    for step in (w, removed, rate, selectivity):
        res = replan(res, step)
        same(res, optimize(step, partitioning="single", mirs=mirs))


@pytest.mark.parametrize("seed", range(3))
def test_prices_read_from_the_solve_before_are_those_of_a_solve_from_scratch(seed):
    """The blocks' prices a re-plan reads (:func:`load_prices`: the values as kept, not copied)
    are those its part prices from scratch: the same optimum, and values that cost it."""
    from mqjoin.planning.ilp.blocks import BlockCosts
    from mqjoin.planning.ilp.prices import block_keys, kept_prices, load_prices

    w = random_workload(12, 20, 4, seed=seed)

    def part_of(workload):
        return largest(build_model(enumerate_candidates(workload), "single"))

    one = part_of(w.restricted_to(query_names(w)[:-1]))
    costs = BlockCosts(one, deadline=None)
    for k_, t in one.combinations:
        costs.lp_cost(k_, one.chosen_by(k_, t))
    known = kept_prices(one, costs, block_keys(one))
    two = part_of(w)
    again, fresh = BlockCosts(two, deadline=None), BlockCosts(two, deadline=None)
    assert load_prices(two, again, known, block_keys(two)) > 1
    read = [(k_, t) for (k_, t), key in zip(two.combinations, two.keys) if key in again.costs]
    assert read
    for k_, t in read:
        key = two.key_of(k_, two.chosen_by(k_, t))
        obj, vals = again.costs[key]
        assert obj == fresh.lp_cost(k_, two.chosen_by(k_, t))
        assert math.isclose(math.fsum(two.mdl.cost[c] * v for c, v in zip(two.blocks[k_].cols, vals)), obj,
                            rel_tol=1e-9, abs_tol=1e-9)


def _quick_master(seed):
    """The master of the coupled part of a small workload, every combination costed."""
    from mqjoin.planning.ilp.blocks import BlockCosts
    from mqjoin.planning.ilp.master import Master

    part = largest(build_model(enumerate_candidates(random_workload(12, 20, 4, seed=seed)), "single"))
    assert part.quick
    costs = BlockCosts(part, deadline=None)
    for k_, t in part.combinations:
        costs.cost(k_, part.chosen_by(k_, t))
    return Master(part, costs)


@pytest.mark.parametrize("seed", range(3))
def test_the_master_solves_its_lp_once_and_the_tie_break_reads_that_dual(seed, monkeypatch):
    """Every combination costed: one interior-point solve of the master's LP, before the first
    master (:meth:`Master._prune`), whose dual the tie-break reads (the prices have not
    changed); the columns it fixes are those a dual computed at the tie-break fixes, and the
    choice is the one without any column fixed."""
    import numpy as np

    from mqjoin.planning.ilp import master as ilp_master
    from mqjoin.planning.ilp.blocks import Incumbent

    calls = []
    floors, ruled_out = ilp_master._floors, ilp_master._ruled_out
    monkeypatch.setattr(ilp_master, "_floors", lambda lp, cost: calls.append(cost) or floors(lp, cost))
    master, best = _quick_master(seed), Incumbent()
    master.optimise(best)
    master.tie_break(best)
    assert len(calls) == 1
    cap = best.cost * (1 + ilp_master.TIE_SLACK) + ilp_master.TIE_SLACK
    assert ruled_out(master.floors[1], cap).any()
    assert np.array_equal(ruled_out(master.floors[1], cap), ruled_out(floors(master.lp, calls[0]), cap))
    monkeypatch.setattr(ilp_master, "_ruled_out", lambda floors, cap: ruled_out(floors, cap) & False)
    unpruned, plain = _quick_master(seed), Incumbent()
    unpruned.optimise(plain)
    unpruned.tie_break(plain)
    assert (plain.cost, plain.choice) == (best.cost, best.choice) and abs(plain.weight - best.weight) < 1


@pytest.mark.parametrize("seed", range(3))
def test_the_masters_dual_is_read_again_only_at_the_same_prices(seed):
    """:meth:`Master._floors_at` computes the dual anew when the prices change."""
    import numpy as np

    from mqjoin.planning.ilp.master import _floors

    master = _quick_master(seed)
    prices = np.array(master.prices(), dtype=float)
    first = master._floors_at(prices)
    assert master._floors_at(prices.copy()) is first
    higher = prices * 1.5 + 1.0
    again = master._floors_at(higher)
    fresh = _floors(master.lp, np.concatenate([np.zeros(master.names), higher]))
    assert again is not first and np.allclose(again.least, fresh.least)
