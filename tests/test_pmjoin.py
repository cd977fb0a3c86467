"""PMJoin: the paper's goldens, the planner's plans against the oracle, the
value-partitioned groups' plans against the oracle, PMJoin's two constraints, typed errors."""

from __future__ import annotations

import json
import random

import pytest

from mqjoin.model.errors import PlannerError, WorkloadSyntaxError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.planners.pmjoin import (EXAMPLE_1, EXAMPLE_1_VALUE_RATES, EXAMPLE_2, Operator, PMJoinOptions, StreamModel,
                           communication_cost, find_pmjoins, group_results, node_of, partition_values, plan_query,
                           pmjoin_report, rank_vector, stream_join_opt, value_rates)
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import write_inputs
from mqjoin.model.workload import Attr, Workload, parse_workload

from _cases import cases
from _cli import run_cli


def with_nodes(w: Workload, seed: int, nodes: int = 2) -> Workload:
    """``w`` with its relations placed at random among ``nodes`` nodes (seeded)."""
    rng = random.Random(seed)
    for r in w.relations:
        w = w.with_relation(r.name, node=f"n{rng.randrange(nodes)}")
    return w


# -- goldens ----------------------------------------------------------------------------------


def test_example_1_table_1_join_rates_from_the_per_value_rates():
    w = parse_workload(EXAMPLE_1)
    m = StreamModel(w, "q", EXAMPLE_1_VALUE_RATES, w.query("q").classes[0])
    assert [round(m.rate(p), 6) for p in ({"S1", "S2"}, {"S1", "S3"}, {"S2", "S3"})] == [9.003, 7.001, 2.0008]
    assert [m.rate({r}) for r in ("S1", "S2", "S3")] == [100.2, 50.07, 50.03]


def test_example_1_communication_cost_of_the_three_schemes():
    w = parse_workload(EXAMPLE_1)
    qp = plan_query(w, "q", PMJoinOptions(EXAMPLE_1_VALUE_RATES, groups=3, method="range"))
    assert qp.centralized == pytest.approx(100.1) and qp.centralized_node == "n1"  # S2 and S3 sent to n1
    assert qp.distributed == pytest.approx(54.03, abs=0.005)  # λ3 + 2·λ23: S3 to n2, S_{2,3} to n1
    assert str(qp.tree) == "((S3 ⋈ S2)@n2 ⋈ S1)@n1"
    assert qp.partitioned == pytest.approx(0.07, abs=0.005)
    (pm,) = qp.pmjoins
    by_value = {g.values: g for g in pm.groups}
    assert by_value[("a",)].cost == pytest.approx(0.036)  # S2 to n1, S_{1,2} on to n3
    assert str(by_value[("a",)].tree) == "((S2 ⋈ S1)@n1 ⋈ S3)@n3"
    assert str(by_value[("b",)].tree) == "((S3 ⋈ S1)@n1 ⋈ S2)@n2"  # S3 to n1, then to n2
    assert qp.partitioned == pytest.approx(sum(g.cost for g in pm.groups))


def test_example_1_unit_tuple_sizes_change_the_distributed_cost():
    qp = plan_query(parse_workload(EXAMPLE_1), "q", PMJoinOptions(EXAMPLE_1_VALUE_RATES, sizes="unit"))
    assert qp.distributed == pytest.approx(50.03 + 2.0008)


def test_example_2_local_joins_table_2_and_figure_3():
    w = parse_workload(EXAMPLE_2)
    m = StreamModel(w, "q", sizes="unit")
    assert m.rate({"S0", "S1"}) == pytest.approx(70) and m.rate({"S2", "S3"}) == pytest.approx(15)
    assert m.window({"S2", "S3"}) == pytest.approx(75)
    assert m.rate({"S0", "S2", "S3"}) == pytest.approx(9) and m.window({"S0", "S2", "S3"}) == pytest.approx(30)
    tree = stream_join_opt(m)
    # Figure 3: S2 ⋈ S3 local at n1 (70 > 10 keeps S0 ⋈ S1 from being local), S0 shipped to n1,
    # S_{0,2,3} and S4 pending, then both go to S1's node n0
    assert str(tree) == "((S0 ⋈ (S2 ⋈ S3)@n1)@n1 ⋈ S4 ⋈ S1)@n0"
    assert communication_cost(m, tree) == pytest.approx(10 + 9 + 15)
    right = tree.children[-1]
    assert right.is_source and right.node == tree.node  # the right stream is at the operator's node


def test_rank_vector_of_the_paper():
    a = [Attr(f"S{i}", "x") for i in (1, 2, 3)]
    rates = {a[0]: {"v": 5.0}, a[1]: {"v": 9.0}, a[2]: {"v": 1.0}}  # sorted ⟨FS3, FS1, FS2⟩
    assert rank_vector(rates, a, "v") == (2, 3, 1)


# -- value partitioning -----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["hash", "range", "rate"])
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_value_groups_split_the_values(method, count):
    rng = random.Random(count)
    attrs = [Attr(f"S{i}", "v") for i in range(3)]
    rates = {a: {v: rng.choice([0.1, 1.0, 50.0]) for v in range(20)} for a in attrs}
    g = partition_values(rates, count, method, attrs)
    flat = [v for grp in g.groups for v in grp]
    assert sorted(flat) == list(range(20)) and len(g.groups) <= count
    assert all(g.group_of(v) == i for i, grp in enumerate(g.groups) for v in grp)
    if method == "range" and count > 1:  # contiguous sub-ranges
        assert all(max(a) < min(b) for a, b in zip(g.groups, g.groups[1:]))
    if method == "rate":  # values with equal rank vectors share a group
        vec = {v: rank_vector(rates, attrs, v) for v in range(20)}
        assert all(g.group_of(x) == g.group_of(y) for x in vec for y in vec if vec[x] == vec[y])


def test_rate_partitioning_groups_values_with_alike_plans():
    g = partition_values(EXAMPLE_1_VALUE_RATES, 2, "rate")
    assert g.groups == (("a",), ("b", "c"))  # b and c: S3 slowest; a: S3 fastest


# -- PMJoin choice: Algorithm 2 and the two constraints -----------------------------------------


def test_pmjoins_respect_the_two_constraints_on_random_workloads():
    seen = 0
    for seed, w, _ in cases(40):
        w = with_nodes(w, seed, 3)
        for q in w.queries:
            m = StreamModel(w, q.name)
            tree = stream_join_opt(m)
            pms = find_pmjoins(m, tree)
            tops = {pm.top.relations for pm in pms}
            for op in tree.operators():
                for i, k in enumerate(op.children):
                    if k.relations in tops:
                        assert i != len(op.children) - 1, f"seed {seed}: PMJoin {k} is a right child"
                        assert op.relations not in tops, f"seed {seed}: PMJoin {k} is the child of a PMJoin"
            for pm in pms:
                assert pm.cls in q.classes
                assert sorted(r for x in pm.inputs for r in x.relations) == sorted(pm.top.relations)
                seen += 1
    assert seen > 10


def test_partitionable_child_is_merged_into_its_pmjoin():
    w = parse_workload("""
defaults: {window: 1, selectivity: 0.001}
relations:
  A: {attributes: [k], rate: 1000, node: n1}
  B: {attributes: [k], rate: 1000, node: n1}
  C: {attributes: [k], rate: 10, node: n2}
queries: {q: "A(k), B(k), C(k)"}
""")
    m = StreamModel(w, "q")
    tree = stream_join_opt(m)
    assert str(tree) == "((C ⋈ A)@n1 ⋈ B)@n1"  # A ⋈ B (rate 2000) is not local: it grows
    (pm,) = find_pmjoins(m, tree)
    assert [str(x) for x in pm.inputs] == ["C", "A", "B"]  # the child on k is merged: one PMJoin over all three


# -- plans are ordinary plans: equal to the oracle --------------------------------------------


@pytest.mark.parametrize("seed,workload,tables", cases(25), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_pmjoin_plans_and_group_plans_equal_the_oracle(seed, workload, tables):
    w = with_nodes(workload, seed)
    want = oracle_results(w, tables)
    for mode in ("individual", "shared"):
        for pol in ("single", "replicas"):
            run = run_reference(optimize(w, mode=mode, partitioning=pol, planner="pmjoin").plan, tables)
            assert run.result_sets() == want, f"seed {seed}: pmjoin {mode}/{pol} differs from the oracle"
    rates = value_rates(w, tables)
    for method in ("hash", "range", "rate"):
        report = pmjoin_report(w, PMJoinOptions(rates, groups=2, method=method))
        for qp in report.queries:
            for pm in qp.pmjoins:
                got = group_results(w, qp, pm, tables)
                assert got == want[qp.query], f"seed {seed}: {method} groups of {pm} differ from the oracle"


def test_a_stream_at_the_operators_node_ships_nothing():
    w = parse_workload(EXAMPLE_2)
    moved = w.with_relation("S4", node="n0")  # S4 beside S1: S0 ⋈ S4 (rate 30 > 10) still not local
    assert node_of(moved, "S4") == "n0" and node_of(w.with_relation("S4", node=None), "S4") == "S4"
    m = StreamModel(moved, "q", sizes="unit")
    tree = stream_join_opt(m)
    assert str(tree) == "((S0 ⋈ (S2 ⋈ S3)@n1)@n1 ⋈ S4 ⋈ S1)@n0"
    assert communication_cost(m, tree) == pytest.approx(10 + 9)


# -- workload declaration ---------------------------------------------------------------------


def test_node_round_trips_and_plain_workloads_are_unaffected():
    w = parse_workload(EXAMPLE_2)
    assert [r.node for r in w.relations] == ["n0", "n0", "n1", "n1", "n2"]
    assert Workload.from_spec(w.to_spec()) == w and parse_workload(w.to_yaml()) == w
    plain = parse_workload("relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nqueries: {q: 'R(a), S(a)'}\n"
                           "defaults: {selectivity: 0.1}")
    assert all(r.node is None for r in plain.relations)
    assert all("node" not in spec for spec in plain.to_spec()["relations"].values())


@pytest.mark.parametrize("node", [3, "", "n 1", ["n1"], True])
def test_bad_node_is_a_typed_error(node):
    with pytest.raises(WorkloadSyntaxError, match="relation R: node must be a name"):
        Workload.build({"R": {"attributes": ["a"], "node": node}, "S": {"attributes": ["a"]}}, {"q": "R(a), S(a)"},
                       defaults={"selectivity": 0.1})


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kw,culprit", [
    ({"groups": 0}, "positive integer"),
    ({"groups": 2.5}, "positive integer"),
    ({"method": "zigzag"}, "unknown value partitioning"),
    ({"sizes": "big"}, "unknown tuple sizes"),
])
def test_bad_pmjoin_options_are_typed_errors(kw, culprit):
    with pytest.raises(PlannerError, match=culprit):
        PMJoinOptions(EXAMPLE_1_VALUE_RATES, **kw)


def test_groups_without_per_value_rates_say_what_is_missing():
    with pytest.raises(PlannerError, match=r"partitioning \{S1.dest=S2.dest=S3.dest\} into 2 value groups needs "
                                           "the rates per value"):
        pmjoin_report(parse_workload(EXAMPLE_1), PMJoinOptions(groups=2))
    partial = {a: r for a, r in EXAMPLE_1_VALUE_RATES.items() if a.relation != "S3"}
    with pytest.raises(PlannerError, match="needs the rates per value"):
        pmjoin_report(parse_workload(EXAMPLE_1), PMJoinOptions(partial, groups=2))
    w = parse_workload(EXAMPLE_1)
    with pytest.raises(PlannerError, match="no per-value rates of S3.dest"):
        StreamModel(w, "q", partial, w.query("q").classes[0])


def test_pmjoin_options_with_another_planner_are_refused():
    with pytest.raises(PlannerError, match="pmjoin planner only"):
        optimize(parse_workload(EXAMPLE_1), planner="mjoin", pmjoin=PMJoinOptions())


# -- command line -----------------------------------------------------------------------------


def test_cli_optimize_run_compare_with_pmjoin(capsys, tmp_path):
    (tmp_path / "ex.yaml").write_text(EXAMPLE_2)
    code, out, err = run_cli(capsys, "optimize", str(tmp_path / "ex.yaml"), "--planner", "pmjoin", "--json",
                             "--tuple-sizes", "unit")
    assert code == 0, err
    d = json.loads(out)
    assert d["planner"] == "pmjoin" and d["trees"]["q"] == "((S0 ⋈ (S2 ⋈ S3)@n1)@n1 ⋈ S4 ⋈ S1)@n0"
    assert d["pmjoin"]["queries"][0]["distributed"] == pytest.approx(34)

    seed, w, tables = cases(1, start=3)[0]
    w = with_nodes(w, seed)
    (tmp_path / "w.yaml").write_text(w.to_yaml())
    write_inputs(tables, tmp_path / "in", "csv")
    code, out, err = run_cli(capsys, "run", str(tmp_path / "w.yaml"), "--data", str(tmp_path / "in"), "--out",
                             str(tmp_path / "out"), "--planner", "pmjoin", "--groups", "2", "--partition-by", "hash",
                             "--check", "--json")
    assert code == 0, err
    assert json.loads(out)["check"] == "equal to the oracle"
    code, out, err = run_cli(capsys, "optimize", str(tmp_path / "w.yaml"), "--planner", "pmjoin", "--groups", "2",
                             "--value-rates", str(tmp_path / "in"))
    assert code == 0 and "partition-based" in out, err
    code, out, err = run_cli(capsys, "compare", str(tmp_path / "ex.yaml"), "--planner", "pmjoin")
    assert code == 0 and "pmjoin" in out and "clash" not in out, err


@pytest.mark.parametrize("args,culprit", [
    (["--groups", "2"], "work with --planner pmjoin only"),
    (["--planner", "pmjoin", "--groups", "2"], "needs the rates per value"),
    (["--planner", "pmjoin", "--no-mirs"], "PMJoin materialises"),
])
def test_cli_bad_pmjoin_options_one_line_exit_2(capsys, tmp_path, args, culprit):
    (tmp_path / "ex.yaml").write_text(EXAMPLE_2)
    code, out, err = run_cli(capsys, "optimize", str(tmp_path / "ex.yaml"), *args)
    assert code == 2 and culprit in err and err.count("\n") == 1, err


def test_cli_stats_reports_rates_per_value(capsys, tmp_path):
    from mqjoin.model.tables import Table

    (tmp_path / "ex.yaml").write_text(EXAMPLE_1)
    dests = {"S1": "aaccccc", "S2": "abbbbbc", "S3": "aaaaabc"}
    write_inputs({r: Table.from_columns(r, {"ts": [i * 0.5 for i in range(7)], "dest": list(d)})
                  for r, d in dests.items()}, tmp_path / "in", "csv")
    code, out, err = run_cli(capsys, "stats", str(tmp_path / "ex.yaml"), "--data", str(tmp_path / "in"),
                             "--per-value", "S1.dest", "S3.dest", "--json")
    assert code == 0, err
    got = json.loads(out)["value_rates"]
    assert got == {"S1.dest": [["a", 4 / 7], ["c", 10 / 7]], "S3.dest": [["a", 10 / 7], ["b", 2 / 7], ["c", 2 / 7]]}
    code, out, err = run_cli(capsys, "stats", str(tmp_path / "ex.yaml"), "--data", str(tmp_path / "in"), "--per-value")
    assert code == 0 and "S2.dest: 3 values, total 2" in out, err
    code, out, err = run_cli(capsys, "stats", str(tmp_path / "ex.yaml"), "--data", str(tmp_path / "in"),
                             "--per-value", "S1.nope")
    assert code == 2 and "has no attribute 'nope'" in err and err.count("\n") == 1


def test_unseen_values_get_a_group():
    attrs = [Attr("S1", "v"), Attr("S2", "v")]
    rates = {attrs[0]: {0: 1.0, 10: 1.0, 20: 1.0}, attrs[1]: {0: 2.0, 10: 1.0, 20: 5.0}}
    g = partition_values(rates, 3, "range", attrs)
    assert g.groups == ((0,), (10,), (20,))
    assert [g.group_of(v) for v in (-5, 5, 12.5, 99)] == [0, 0, 1, 2]
    h = partition_values(rates, 3, "hash", attrs)
    assert h.group_of("new") == h.group_of("new") in range(3)


@pytest.mark.parametrize("rates,kept", [({"A": 1000, "B": 10, "C": 10}, "a"),  # root's inputs 1020 > 20
                                        ({"A": 1, "B": 100, "C": 100}, "b")])  # child's inputs 200 > 21
def test_the_pmjoin_with_the_larger_input_rate_is_kept_and_its_parent_or_child_restored(rates, kept):
    w = parse_workload(f"""
defaults: {{window: 1}}
relations:
  A: {{attributes: [a], rate: {rates['A']}, node: n1}}
  B: {{attributes: [a, b], rate: {rates['B']}, node: n2}}
  C: {{attributes: [b], rate: {rates['C']}, node: n3}}
queries: {{q: "A(a), B(a,b), C(b)"}}
selectivities: {{A.a = B.a: 0.001, B.b = C.b: {0.1 if kept == 'a' else 0.001}}}
""")
    m = StreamModel(w, "q")
    src = {r: Operator.source(r, node_of(w, r)) for r in "ABC"}
    # both operators are partitionable: the root on a (inputs B⋈C and A), its left child on b
    tree = Operator.mjoin([Operator.mjoin([src["B"], src["C"]], "n3"), src["A"]], "n1")
    (pm,) = find_pmjoins(m, tree)
    assert pm.cls.members[0].name == kept


def test_one_group_costs_what_its_tree_ships_in_the_whole_plan():
    """Without per-value rates (D = 1) the partition-based cost is the communication cost of
    the query's tree with every PMJoin replaced by its group's tree: nothing counted twice."""
    from dataclasses import replace

    from mqjoin.planners.pmjoin import group_tree

    seen = 0
    for seed, w, _ in cases(40):
        w = with_nodes(w, seed, 3)
        for q in w.queries:
            qp = plan_query(w, q.name)
            for pm in sorted(qp.pmjoins, key=lambda p: -len(p.top.relations)):  # outer regions first
                qp = replace(qp, tree=group_tree(qp, pm, 0))
                seen += 1
            assert qp.partitioned == pytest.approx(communication_cost(StreamModel(w, q.name), qp.tree)), \
                f"seed {seed}"
    assert seen > 10


def _all_plans(model, atoms, nodes):
    """Every binary plan over ``atoms`` with every placement (brute force, for small queries)."""
    if len(atoms) == 1:
        yield atoms[0]
        return
    import itertools

    first, rest = atoms[0], atoms[1:]
    for k in range(len(rest)):
        for more in itertools.combinations(rest, k):
            a = [first, *more]
            b = [x for x in rest if x not in more]
            rel_a = {r for x in a for r in x.relations}
            rel_b = {r for x in b for r in x.relations}
            if not model.joinable(rel_a, rel_b):
                continue
            for ta in _all_plans(model, a, nodes):
                for tb in _all_plans(model, b, nodes):
                    for n in nodes:
                        yield Operator.mjoin([ta, tb], n)


def test_optimal_plan_is_the_brute_force_optimum_and_bounds_the_heuristic():
    from mqjoin.planners.pmjoin import optimal_plan

    gaps = []
    for seed, w, _ in cases(30):
        w = with_nodes(w, seed, 3)
        for q in w.queries:
            m = StreamModel(w, q.name)
            atoms = [Operator.source(r, node_of(w, r)) for r in q.relations]
            nodes = sorted({a.node for a in atoms})
            brute = min(communication_cost(m, t) for t in _all_plans(m, atoms, nodes)
                        if {r for r in t.relations} == set(q.relations))
            best = communication_cost(m, optimal_plan(m))
            assert best == pytest.approx(brute), f"seed {seed} {q.name}"
            heuristic = communication_cost(m, stream_join_opt(m))
            assert heuristic >= best - 1e-9 * max(1.0, best)
            gaps.append(heuristic - best)
    assert len(gaps) > 20


def test_example_2_heuristic_and_optimum():
    from mqjoin.planners.pmjoin import optimal_plan

    m = StreamModel(parse_workload(EXAMPLE_2), "q", sizes="unit")
    best = optimal_plan(m)
    assert communication_cost(m, best) == pytest.approx(30)  # S4 and S_{2,3} to n0: 15 + 15
    assert communication_cost(m, stream_join_opt(m)) == pytest.approx(34)  # the paper's plan (Figure 3)


def test_measured_sizes_set_the_stream_rates():
    """A measured size of a set replaces ``F(P)``: its stream's rate and window scale by the
    measured / estimated ratio, sets without one keep the estimate, and the placement follows."""
    from mqjoin.model.sizes import MeasuredSize

    w = parse_workload(EXAMPLE_2)
    sized = w.with_sizes([MeasuredSize(None, ("S2", "S3"), 4 * 25 * 30 * 0.001)])  # 4× the estimate
    m, ms = StreamModel(w, "q", sizes="unit"), StreamModel(sized, "q", sizes="unit")
    assert ms.rate({"S2", "S3"}) == pytest.approx(4 * m.rate({"S2", "S3"})) == pytest.approx(60)
    assert ms.window({"S2", "S3"}) == pytest.approx(4 * m.window({"S2", "S3"}))
    assert ms.rate({"S0", "S1"}) == m.rate({"S0", "S1"}) == 70.0
    assert ms.rate({"S0"}) == m.rate({"S0"}) == 10.0
    before, after = pmjoin_report(w).queries[0], pmjoin_report(sized).queries[0]
    assert after.distributed > before.distributed
    assert str(before.tree) == "(S0 ⋈ S4 ⋈ (S2 ⋈ S3)@n1 ⋈ S1)@n0"  # S2 ⋈ S3 joined where they arrive
    assert "(S2 ⋈ S3)@n1" not in str(after.tree)  # its stream now outweighs S2's and S3's: shipped raw


def test_unbounded_streams_ship_the_results_a_run_over_the_horizon_produces():
    """Without windows a stream's window is its history so far: the join's rate grows over the
    run, and the model's rate is its mean over the horizon, so rate × horizon is the number of
    results (docs/model.md §4's count, brute-forced here from arrivals at constant rates) — not
    ``|P|`` times it, as Equation 2 with every window full for the whole run would say."""
    from mqjoin.planning.cost import join_results

    w = parse_workload("""
defaults: {horizon: 4}
relations: {R: {attributes: [a], rate: 3}, S: {attributes: [a, b], rate: 2}, T: {attributes: [b], rate: 5}}
queries: {q: "R(a), S(a,b), T(b)"}
selectivities: {R.a = S.a: 1, S.b = T.b: 1}
""")
    m, c = StreamModel(w, "q", sizes="unit"), w.query("q").classes
    # every combination of tuples at constant arrivals k / rate, k = 1 … rate · H, joins (selectivity 1):
    # the combinations over the horizon are the product of the counts, whichever arrives last
    assert m.rate({"R", "S"}) * 4 == pytest.approx(12 * 8) == pytest.approx(join_results(w, ["R", "S"], c))
    assert (m.rate({"R", "S", "T"}) * 4 == pytest.approx(12 * 8 * 20)
            == pytest.approx(join_results(w, ["R", "S", "T"], c)))
    assert m.rate({"R"}) == 3.0
    windowed = StreamModel(w.with_relation("R", window=0.5).with_relation("S", window=0.5), "q", sizes="unit")
    # sliding windows: Equation 2 as it is
    assert windowed.rate({"R", "S"}) == pytest.approx(3 * 2 * 0.5 + 2 * 3 * 0.5)
