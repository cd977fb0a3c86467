"""Incremental re-planning (mqjoin.planning.optimizer.replan, ``optimize --changes``): the
parts of the ILP a change leaves as they were keep their answers, and the plan is the one a
solve from scratch gives — on random workloads, queries added and removed."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from _cli import run_cli
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


def _same(a, b) -> None:
    """Two results of the same workload: the same plan, the same optimum, both canonical (a
    kept part's objective is its values' cost, which the continuous columns of a tie-break
    solve may lift by the solver's tolerance: OBJECTIVE_TOLERANCE)."""
    assert a.ilp.status == b.ilp.status == "optimal" and a.ilp.canonical and b.ilp.canonical
    assert math.isclose(a.ilp.objective, b.ilp.objective, rel_tol=OBJECTIVE_TOLERANCE)
    assert a.plan == b.plan
    assert a.plan.to_json() == b.plan.to_json()


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
        _same(res, optimize(step, partitioning=policy, mirs=mirs))
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
        _same(res, scratch)
        assert res.reused_parts < res.ilp.components  # the coupled part changed: solved again
        assert again < len(searched), (again, len(searched))  # ... from the prices kept


# --------------------------------------------------------------------------------------------
# the enumeration from the candidates before a change (enumerate_candidates(previous=...))
# --------------------------------------------------------------------------------------------


def _some_relation(w):
    """A relation the first query joins."""
    return w.queries[0].relations[0]


def _some_equality(w):
    """An equality of the first query, as ``with_selectivity`` takes it."""
    a, b = w.queries[0].classes[0].members[:2]
    return f"{a} = {b}"


def _sharing(w):
    """Two queries that join a common relation, and that relation."""
    for i, q in enumerate(w.queries):
        for p in w.queries[i + 1:]:
            common = sorted(q.relation_set & p.relation_set)
            if common:
                return q, p, common[0]
    raise AssertionError("no two queries share a relation")


def _filtered(w, q, relation, where, fraction):
    return w.with_query(q.name, {"join": q.text, "where": f"{relation}.{where}"}, {relation: fraction})


def _grouped_pair(w):
    """Two queries sharing a relation, each with its own filter on it, in one group."""
    q, p, r = _sharing(w)
    return _filtered(_filtered(w, q, r, "a < 5", 0.5), p, r, "a > 7", 0.2).with_groups([[q.name, p.name]])


def _redeclared(w):
    """One relation declared with other attributes (those no query reads renamed): the
    queries are as they were, but the stores holding it render their partitions otherwise
    (an attribute name several of a store's relations declare is written with its relation)."""
    used = w.input_attributes()
    r = next(r for q in w.queries for r in q.relations if set(w.relation(r).attributes) - used[r])
    return w.with_relation(r, attributes=[a if a in used[r] else a + "x" for a in w.relation(r).attributes])


def _measured(w):
    from mqjoin.model.sizes import MeasuredSize

    a, b = w.queries[0].classes[0].members[:2]
    return w.with_sizes([MeasuredSize(None, (a.relation, b.relation), 3.0)])


def _names(w):
    return [q.name for q in w.queries]


#: each kind of change: a workload → (the workload before, the workload after)
CHANGES = {
    "query added": lambda w: (w.restricted_to(_names(w)[:-1]), w),
    "query removed": lambda w: (w, w.restricted_to(_names(w)[:2] + _names(w)[3:])),
    "rate": lambda w: (w, w.with_relation(_some_relation(w), rate=300.0)),
    "window": lambda w: (w, w.with_relation(_some_relation(w), window=0.5)),
    "parallelism": lambda w: (w, w.with_relation(_some_relation(w), parallelism=2)),
    "attributes": lambda w: (w, _redeclared(w)),
    "selectivity": lambda w: (w, w.with_selectivity(_some_equality(w), 0.02)),
    "horizon": lambda w: (w, w.with_defaults(horizon=10.0)),
    "measured size": lambda w: (w, _measured(w)),
    "filter added": lambda w: (w, _filtered(w, *_sharing(w)[::2], "a < 5", 0.5)),
    "filter fraction": lambda w: (_filtered(w, *_sharing(w)[::2], "a < 5", 0.5),
                                  _filtered(w, *_sharing(w)[::2], "a < 5", 0.1)),
    "group formed": lambda w: (_grouped_pair(w).with_groups(()), _grouped_pair(w)),
    "group member's filter": lambda w: (_grouped_pair(w),
                                        _grouped_pair(w).with_filter_fraction(_sharing(w)[0].name,
                                                                              _sharing(w)[2], 0.9)),
}


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
    old = enumerate_candidates(w.restricted_to(_names(w)[:-1]))
    new = enumerate_candidates(w, previous=old)
    assert new.orders["q1"] is old.orders["q1"] and "q7" not in old.orders
    redeclared = enumerate_candidates(_redeclared(w), previous=new)
    assert redeclared.orders["q1"] is not new.orders["q1"]


def test_a_model_keeps_the_names_of_its_own_variables_and_rows():
    """A model built with the names of the model before keeps the parts of its own names
    only (they do not pile up from one re-plan to the next), and reads the others': the tie
    hashes it reads are those before (a different hash before shows in the weight)."""
    w = random_workload(7, 12, 4, seed=1)
    old = build_model(enumerate_candidates(w))
    fewer = build_model(enumerate_candidates(w.restricted_to(_names(w)[:3])), names=old.name_parts)
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
    _same(again, optimize(after, partitioning="single"))
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
        return _largest(build_model(enumerate_candidates(workload), "single"))

    one = part_of(w.restricted_to(_names(w)[:-1]))
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
    changed = w.with_relation(_some_relation(w), rate=300.0)
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
        _same(res, optimize(step, partitioning="single", mirs=mirs))


@pytest.mark.parametrize("seed", range(3))
def test_prices_read_from_the_solve_before_are_those_of_a_solve_from_scratch(seed):
    """The blocks' prices a re-plan reads (:func:`load_prices`: the values as kept, not copied)
    are those its part prices from scratch: the same optimum, and values that cost it."""
    from mqjoin.planning.ilp.blocks import BlockCosts
    from mqjoin.planning.ilp.prices import block_keys, kept_prices, load_prices

    w = random_workload(12, 20, 4, seed=seed)

    def part_of(workload):
        return _largest(build_model(enumerate_candidates(workload), "single"))

    one = part_of(w.restricted_to(_names(w)[:-1]))
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

    part = _largest(build_model(enumerate_candidates(random_workload(12, 20, 4, seed=seed)), "single"))
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


def _largest(mdl):
    """The largest part of a model, split into blocks."""
    from mqjoin.planning.ilp.blocks import coupled_part

    return coupled_part(mdl, *max(components(mdl), key=lambda p: len(p[0])))


def _model_by_name(mdl):
    """A model as its names say: every column (name, cost, tie-break weight, bound, integrality),
    every row (name, its columns by name with coefficients, bounds), every part (its columns by
    name) and every partition choice (its store and index), each sorted: what two models must
    share to be the same model, wherever their columns and rows stand."""
    names = mdl.names
    cols = sorted((names[c], mdl.cost[c], mdl.tie[c], mdl.upper[c], mdl.integer[c]) for c in range(len(names)))
    rows = sorted((n, tuple(sorted((names[i], a) for i, a in zip(idx, coef))), lo, hi)
                  for n, idx, coef, lo, hi in mdl.rows)
    parts = sorted(sorted(names[c] for c in cols) for cols, _ in components(mdl))
    choices = sorted((names[c], st.label, j) for c, (st, j) in mdl.z_index().items())
    return cols, rows, parts, choices


#: (queries, relations, query size, seed, policy, MIRs): workloads whose last two queries, added
#: one at a time, take no name made already (their models compare by name exactly; names that took a
#: suffix: below)
GROWN = [(8, 40, 3, 2, "single", True), (10, 40, 4, 0, "single", True), (10, 40, 4, 2, "single", False),
         (8, 40, 3, 4, "replicas", True), (12, 30, 4, 2, "single", True), (8, 30, 5, 6, "single", True)]


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_a_model_grown_by_a_query_is_the_model_built_anew(n, rels, k, seed, policy, mirs, monkeypatch):
    """The model of a re-plan after a query was added, grown from the model before
    (:func:`extend_model`), is the model built from scratch: the same columns, rows, parts and
    partition choices by name; the columns before keep their places and names, and the links
    without ``z`` it extends are those computed anew.  (Models this small get the group
    broadcast rows, which a grown model does not: they are left out here.)"""
    from mqjoin.planning.ilp import extend_model, model as ilp_model
    from mqjoin.planning.ilp.model import plain_links

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(n, rels, k, seed=seed)
    before, after = CHANGES["query added"](w)
    old = build_model(enumerate_candidates(before, mirs=mirs), policy)
    plain_links(old)  # (the links a solve computed, which the grown model extends)
    grown = extend_model(old, enumerate_candidates(after, mirs=mirs, previous=old.candidates), policy)
    assert grown is not None
    whole = build_model(enumerate_candidates(after, mirs=mirs), policy)
    assert _model_by_name(grown) == _model_by_name(whole)
    assert grown.names[:len(old.names)] == old.names and grown.num_variables > old.num_variables
    root, with_z = plain_links(grown)
    grown._keys.clear()
    again, with_z_again = plain_links(grown)
    assert with_z == with_z_again
    assert {tuple(c for c in range(len(root)) if root[c] == r) for r in set(root)} == \
        {tuple(c for c in range(len(again)) if again[c] == r) for r in set(again)}


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs",
                         [g for g in GROWN if g[4] == "single"] + [(10, 16, 4, 0, "single", True)])
def test_a_grown_models_blocks_take_their_keys_where_they_stand(n, rels, k, seed, policy, mirs, monkeypatch):
    """The blocks of a grown model's coupled part that stand where blocks of the model before
    stood take those blocks' keys without reading their names again — the same objects —, and
    every key is the one read from the names (:func:`part_key`), those taken included.  (In the
    last case a block stands where it stood, but one of its stores is shared now: another key.)
    A model made from the grown one by ``replace`` shares its cache but not its keys."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model, orders_relaxed

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    old, grown, keys, again = _keys_before_and_after("query added", extend_model, n, rels, k, seed, policy, mirs)
    taken = [k for k in again if any(k is o for o in keys)]
    assert 0 < len(taken) == sum(k in set(keys) for k in again) < len(again)
    _checked_keys(orders_relaxed(grown))  # (the same cache, other integrality: no key taken where it stands)
    _checked_keys(orders_relaxed(old))  # (the cache of the model before now holds another's keys)
    _checked_keys(extend_model(old, enumerate_candidates(grown.candidates.workload, mirs=mirs,
                                                         previous=old.candidates), policy))


def _checked_keys(mdl):
    """The keys of the blocks of a model's largest part (:func:`block_keys`), each checked to be
    the one read from the names (:func:`part_key`)."""
    from mqjoin.planning.ilp.model import part_key
    from mqjoin.planning.ilp.prices import block_keys

    part = _largest(mdl)
    keys = block_keys(part)
    assert keys == [part_key(mdl, b.cols, b.rows, part.tie) for b in part.blocks]
    return keys


def _keys_before_and_after(change, made_from, n, rels, k, seed, policy, mirs):
    """A model built before a change, the model after it made from that one (``made_from``:
    grown or shrunk), and the keys of their largest parts' blocks (:func:`_checked_keys`)."""
    before, after = CHANGES[change](random_workload(n, rels, k, seed=seed))
    old = build_model(enumerate_candidates(before, mirs=mirs), policy)
    keys = _checked_keys(old)
    made = made_from(old, enumerate_candidates(after, mirs=mirs, previous=old.candidates), policy)
    return old, made, keys, _checked_keys(made)


def test_some_grown_models_repartition_a_store():
    """The cases above include stores that the added query gives a new partition candidate:
    their choice and broadcast rows are written anew, not only added to."""
    grew = 0
    for n, rels, k, seed, _, mirs in GROWN:
        w = random_workload(n, rels, k, seed=seed)
        before, after = CHANGES["query added"](w)
        old, new = enumerate_candidates(before, mirs=mirs), enumerate_candidates(after, mirs=mirs)
        grew += sum(attrs != new.partition_candidates[st] for st, attrs in old.partition_candidates.items())
    assert grew >= 3


@pytest.mark.parametrize("change", ["query removed", "rate", "parallelism", "attributes"])
def test_a_model_is_built_anew_unless_queries_were_only_added(change, monkeypatch):
    """Any change but queries added (a query removed, statistics, parallelism, relations
    declared otherwise) gives no grown model: the re-plan builds it anew."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    before, after = CHANGES[change](random_workload(10, 40, 4, seed=0))
    old = build_model(enumerate_candidates(before))
    assert extend_model(old, enumerate_candidates(after, previous=old.candidates)) is None


def test_a_model_is_built_anew_for_budgets_and_group_rows(monkeypatch):
    """Nor is a model grown under policy ``budget``, with a MIR budget, or where it has the group
    broadcast rows (small models)."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    before, after = CHANGES["query added"](random_workload(10, 40, 4, seed=0))
    old = enumerate_candidates(before)
    new = enumerate_candidates(after, previous=old)
    assert extend_model(build_model(old), new) is None  # the group broadcast rows
    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    assert extend_model(build_model(old), new) is not None
    assert extend_model(build_model(old, "budget"), new, "budget") is None
    assert extend_model(build_model(old, mir_budget=1e9), new, mir_budget=1e9) is None


#: two queries over the same relations joined on other attributes: their MIRs have the same
#: labels, so their probe orders', steps' and rows' names the same stems
CLASHING = '''
defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
relations: {R: {attributes: [a, b]}, S: {attributes: [a, b]}, T: {attributes: [a, b]}}
queries: {%s}
'''


def _unsuffixed(mdl):
    """:func:`_model_by_name` with the suffix that makes a name unique taken off every name
    that weighs nothing in the tie-break (steps' columns, rows): those may be numbered in
    another order by a grown model than by the build."""
    import re

    ranked = {mdl.names[c] for c in range(mdl.num_variables) if mdl.tie[c]}
    bare = [n if n in ranked else re.sub(r"_[0-9]+$", "", n) for n in mdl.names]
    return _model_by_name(replace(mdl, names=bare, rows=[(re.sub(r"_[0-9]+$", "", n), *rest) for n, *rest in mdl.rows]))


@pytest.mark.parametrize("first", [True, False])
def test_a_model_grown_by_an_owner_whose_label_is_taken(first, monkeypatch):
    """A new owner whose label is an old one's (a MIR of the same relations joined otherwise)
    names its probe orders with the suffixes the build gives them when the candidates list it
    after the old one (the query before comes first in the workload): the model is grown,
    its choices named and weighed as the build's, only steps' columns and rows possibly
    numbered otherwise, and the re-plan is the solve from scratch.  Listed before the old
    one (the new query comes first), the build would number the new owner's orders first:
    the model is built anew."""
    from mqjoin.model.workload import parse_workload
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    q1, q2 = 'q1: "R(a), S(a), T(a)"', 'q2: "R(b), S(b), T(b)"'
    w = parse_workload(CLASHING % (f"{q1}, {q2}" if first else f"{q2}, {q1}"))
    one = enumerate_candidates(w.restricted_to(["q1"]))
    two = enumerate_candidates(w, previous=one)
    assert {m.label for m in one.orders if not isinstance(m, str)} & \
        {m.label for m in two.orders if not isinstance(m, str) and m not in one.orders}
    old = build_model(one)
    grown, whole = extend_model(old, two), build_model(two)
    if not first:
        assert grown is None
        return
    assert grown is not None and any(c is not None for _, c in grown._renamed)  # (a choice took a suffix)
    def ranked(m):
        return sorted((m.names[c], m.tie[c], m.cost[c]) for c in range(m.num_variables) if m.tie[c])

    assert ranked(grown) == ranked(whole)
    assert _unsuffixed(grown) == _unsuffixed(whole)
    grew = []
    real = clash.extend_model
    monkeypatch.setattr(clash, "extend_model", lambda *a, **k: grew.append(real(*a, **k)) or grew[-1])
    res = optimize(w.restricted_to(["q1"]), mode="mqo", partitioning="single")
    _same(replan(res, w), optimize(w, mode="mqo", partitioning="single"))
    assert grew and grew[0] is not None


def test_which_choices_that_took_a_suffix_are_named_as_built():
    """Which choices that took a suffix are named as the build names them: a probe order whose
    stem an order of an owner listed before it took, or that no order took before; not one
    whose stem an order of an owner listed after it took, nor a store's partition choice."""
    from mqjoin.planning.ilp.changed import _named_as_built

    mdl = build_model(enumerate_candidates(random_workload(6, 20, 3, seed=1)))
    c = next(iter(mdl.z.values()))
    assert _named_as_built(mdl, replace(mdl, _renamed=[]))
    assert not _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[c], c)]))
    first, last = next(iter(mdl.x.values())), list(mdl.x.values())[-1]  # (orders of the first and last owner)
    assert _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[first] + "_new", first)]))  # (no order took it)
    assert _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[first], last)]))  # (taken by an owner before)
    assert not _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[last], first)]))  # (taken by one after)


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_replans_from_grown_models_equal_solves_from_scratch(n, rels, k, seed, policy, mirs, monkeypatch):
    """Two queries added one at a time, each re-planned from the result before on a grown
    model (the first re-plan's model grown from the solve's, the second's from the first's):
    each plan is the one a solve from scratch gives; then the first query removed, on the model
    shrunk from the second's (:func:`shrink_model`) but where a name would be numbered otherwise
    (one case here: built anew)."""
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    grown, shrunk = [], []

    def spy(real, made):
        def call(*args, **kwargs):
            out = real(*args, **kwargs)
            made.append(out is not None)
            return out
        return call

    monkeypatch.setattr(clash, "extend_model", spy(clash.extend_model, grown))
    monkeypatch.setattr(clash, "shrink_model", spy(clash.shrink_model, shrunk))
    w = random_workload(n, rels, k, seed=seed)
    names = _names(w)
    res = optimize(w.restricted_to(names[:-2]), partitioning=policy, mirs=mirs)
    for step in (w.restricted_to(names[:-1]), w, w.restricted_to(names[1:])):
        res = replan(res, step)
        _same(res, optimize(step, partitioning=policy, mirs=mirs))
    assert grown == [True, True, False] and shrunk == [(n, seed) != (12, 2)]


@pytest.mark.parametrize("grow", [False, True])
@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_a_model_shrunk_by_a_query_is_the_model_built_anew(n, rels, k, seed, policy, mirs, grow, monkeypatch):
    """The model of a re-plan after a query was removed, shrunk from the model before
    (:func:`shrink_model`: built, or grown by a query first), is the model built from scratch:
    the same columns, rows, parts and partition choices by name (the choices weighed alike:
    a store that lost a partition candidate ranks the ones left anew), only fewer columns and
    rows where they were."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(n, rels, k, seed=seed)
    before, after = CHANGES["query removed"](w)
    old = build_model(enumerate_candidates(before.restricted_to(_names(before)[:-1]) if grow else before, mirs=mirs),
                      policy)
    if grow:
        old = extend_model(old, enumerate_candidates(before, mirs=mirs, previous=old.candidates), policy)
    new = enumerate_candidates(after, mirs=mirs, previous=old.candidates)
    shrunk = shrink_model(old, new, policy)
    assert shrunk is not None and shrunk.num_variables < old.num_variables and len(shrunk.rows) < len(old.rows)
    assert _model_by_name(shrunk) == _model_by_name(build_model(enumerate_candidates(after, mirs=mirs), policy))
    kept = set(shrunk.names)
    assert [name for name in old.names if name in kept] == shrunk.names  # (in their order)


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", [g for g in GROWN if g[4] == "single"])
def test_a_shrunk_models_blocks_take_their_keys_where_they_stand_now(n, rels, k, seed, policy, mirs, monkeypatch):
    """The blocks of a shrunk model's coupled part that are as they were (none of their columns
    removed or weighed anew, none of their rows written anew) take the keys of the model before
    where their columns and rows stand now — the same objects —, and every key is the one read
    from the names (:func:`part_key`)."""
    from mqjoin.planning.ilp import model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    _, _, keys, again = _keys_before_and_after("query removed", shrink_model, n, rels, k, seed, policy, mirs)
    taken = [k for k in again if any(k is o for o in keys)]
    assert 0 < len(taken) == sum(k in set(keys) for k in again) <= len(again)


def test_some_shrunk_models_repartition_a_store():
    """The cases above remove partition candidates (a store's choices ranked anew) and
    broadcasts of steps that a store's candidates left all serve."""
    lost = 0
    for n, rels, k, seed, _, mirs in GROWN:
        before, after = CHANGES["query removed"](random_workload(n, rels, k, seed=seed))
        old, new = enumerate_candidates(before, mirs=mirs), enumerate_candidates(after, mirs=mirs)
        lost += sum(attrs != old.partition_candidates[st] for st, attrs in new.partition_candidates.items())
    assert lost >= 3


def test_a_model_is_built_anew_where_a_choice_would_be_numbered_otherwise(monkeypatch):
    """Where a probe order's name took a suffix after a name of the query removed (MIRs of the
    same relations joined otherwise), the build would number it otherwise, and so weigh it
    otherwise: no shrunk model, and the re-plan is the solve from scratch all the same."""
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(16, 12, 4, seed=1)  # (16 queries over 12 relations: labels taken often)
    fewer = w.restricted_to(_names(w)[1:])
    old = build_model(enumerate_candidates(w))
    assert shrink_model(old, enumerate_candidates(fewer, previous=old.candidates)) is None
    made = []
    real = clash.shrink_model
    monkeypatch.setattr(clash, "shrink_model", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    _same(replan(optimize(w, partitioning="single"), fewer), optimize(fewer, partitioning="single"))
    assert made == [None]


def test_a_large_replan_grows_the_model_and_equals_a_solve_from_scratch():
    """At the size where it pays (no group broadcast rows: more than
    ``STRENGTHEN_MAX_ORDERS`` probe orders), a query added re-plans on a grown model: its
    columns before keep their places, and the plan is the one a solve from scratch gives."""
    w = random_workload(101, 100, 4, seed=0)
    first = optimize(w.restricted_to(_names(w)[:-1]), partitioning="single")
    assert first.model.candidates.size["probe_orders"] > 5000
    again = replan(first, w)
    assert again.model.names[:first.model.num_variables] == first.model.names
    _same(again, optimize(w, partitioning="single"))
