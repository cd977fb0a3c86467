"""Planners mjoin and tree: their plans produce the results of docs/model.md §6 on the reference
engine, the `best` tree is the cheapest of all binary trees (an exhaustive search written
independently here), the MJoin paper's Section 3.3 setting gives the probing sequences and
costs one can check by hand, and bad combinations are typed errors (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqjoin.planning.candidates import MIR, ProbeOrder
from mqjoin.model.errors import PlannerError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.planning.plan import Choice
from mqjoin.planning.probe_trees import build_plan
from mqjoin.planners.mjoin import decomposition_costs, mjoin_tree
from mqjoin.planners.registry import operator_trees
from mqjoin.planners.trees import binary_tree, tree_cost
from mqjoin.runtime.reference import run_reference
from mqjoin.model.workload import is_connected, parse_workload, restrict_classes

from _cases import cases
from _cli import run_cli

WORKLOADS = Path(__file__).resolve().parents[1] / "mqjoin" / "workloads"

PLANNER_CONFIGS = [("mjoin", {}), ("mjoin", {"decompose": True}), ("tree", {"tree_shape": "deep"}),
                   ("tree", {"tree_shape": "bushy"}), ("tree", {"tree_shape": "best"})]


@pytest.mark.parametrize("seed,workload,tables", cases(40), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_planner_results_equal_oracle(seed, workload, tables):
    want = oracle_results(workload, tables)
    for planner, kw in PLANNER_CONFIGS:
        for mode in ("individual", "shared", "mqo"):
            for pol in ("single", "replicas"):
                res = optimize(workload, mode=mode, partitioning=pol, planner=planner, **kw)
                run = run_reference(res.plan, tables)
                for q, rows in run.results.items():
                    assert len(rows) == len(set(rows)), f"{planner} {kw} {mode}/{pol}: duplicates in {q}"
                assert run.result_sets() == want, f"seed {seed}: {planner} {kw} {mode}/{pol} differs from the oracle"


def test_planner_plans_have_their_shape():
    for seed, w, _ in cases(20):
        for planner, kw in PLANNER_CONFIGS:
            plan = optimize(w, mode="individual", planner=planner, **kw).plan
            mirs = [s for s in plan.stores if not s.mir.is_base]
            if planner == "mjoin" and not kw:
                assert not mirs and not plan.materializations(), seed  # base stores only
            if planner == "tree":
                # one MIR store per inner non-root node: |q| − 2 per query
                assert len({(s.namespace, s.mir) for s in mirs}) == sum(len(q.relations) - 2 for q in w.queries)


# --------------------------------------------------------------------------------------------
# the best tree against every binary tree (exhaustive, independent of mqjoin.planners.trees)
# --------------------------------------------------------------------------------------------


def _linked(q, a, b):
    return any(c.relations & set(a) and c.relations & set(b) for c in q.classes)


def _conn(q, rels):
    return len(rels) == 1 or is_connected(rels, restrict_classes(q.classes, rels))


def all_trees(q, rels):
    """Every binary tree over ``rels`` without cross products: (left, right) nests, leaves are names."""
    rels = tuple(sorted(rels))
    if len(rels) == 1:
        yield rels[0]
        return
    first, rest = rels[0], rels[1:]
    for mask in range(0, 2 ** len(rest)):
        a = (first,) + tuple(r for i, r in enumerate(rest) if mask >> i & 1)
        b = tuple(r for r in rels if r not in a)
        if b and _conn(q, a) and _conn(q, b) and _linked(q, a, b):
            for ta in all_trees(q, a):
                for tb in all_trees(q, b):
                    yield (ta, tb)


def _rels(t):
    return (t,) if isinstance(t, str) else _rels(t[0]) + _rels(t[1])


def _is_linear(t):
    return isinstance(t, str) or ((isinstance(t[0], str) or isinstance(t[1], str))
                                  and _is_linear(t[0]) and _is_linear(t[1]))


def _is_balanced(q, t):
    """Every inner node splits its relations as evenly as any split without cross products could."""
    if isinstance(t, str):
        return True
    rels = _rels(t)
    best = min(abs(len(a) - len(b)) for a, b in all_trees_splits(q, rels))
    return abs(len(_rels(t[0])) - len(_rels(t[1]))) == best and _is_balanced(q, t[0]) and _is_balanced(q, t[1])


def all_trees_splits(q, rels):
    """The (left, right) relation sets of every top-level split of ``rels``."""
    return {(tuple(sorted(_rels(a))), tuple(sorted(_rels(b)))) for a, b in all_trees(q, rels)}


def tree_plan_cost(w, qname, t):
    """Probe cost of one query's tree as a plan built here: each relation climbs the tree,
    probing its sibling at every level; each inner non-root node is a materialised MIR; each
    probed store is partitioned on a class it shares with its prober."""
    q = w.query(qname)

    def mir(rels):
        return MIR.of(w, rels, restrict_classes(q.classes, rels))

    def part(store, prefix):
        for c in q.classes:
            inside = [a for a in c.members if a.relation in store.relation_set]
            if inside and c.relations & set(prefix):
                return store.canonical(inside[0])
        raise AssertionError("no shared class")

    choices = []

    def climb(node, owner):
        """Orders of every relation of ``node`` up to ``node`` (owner: the query or node's MIR)."""
        paths = {}

        def rec(sub, above):  # above: siblings from bottom to node
            if isinstance(sub, str):
                paths[sub] = above
            else:
                rec(sub[0], (sub[1],) + above)
                rec(sub[1], (sub[0],) + above)
        rec(node, ())
        for x, sibs in paths.items():
            elems, parts, prefix = [], [], [x]
            for s in sibs:
                m = mir(_rels(s))
                elems.append(m)
                parts.append(part(m, prefix))
                prefix += list(_rels(s))
            choices.append(Choice(owner, ProbeOrder(x, tuple(elems), tuple(parts)), qname))

    def inner(node, root):
        if isinstance(node, str):
            return
        if not root:
            climb(node, mir(_rels(node)))
        inner(node[0], False)
        inner(node[1], False)

    climb(t, qname)
    inner(t, True)
    return build_plan(w, choices, "individual", "single").probe_cost


@pytest.mark.parametrize("seed,workload,tables", cases(25, start=500), ids=lambda v: str(v) if isinstance(v, int)
                         else "")
def test_best_tree_is_the_cheapest_of_all_binary_trees(seed, workload, tables):
    for q in workload.queries:
        w = workload.restricted_to([q.name])
        trees = list(all_trees(q, q.relations))
        costs = [tree_plan_cost(w, q.name, t) for t in trees]
        linear = [c for t, c in zip(trees, costs) if _is_linear(t)]
        for shape, want in (("best", min(costs)), ("deep", min(linear))):
            got = optimize(w, mode="individual", planner="tree", tree_shape=shape).probe_cost
            assert got == pytest.approx(want, rel=1e-9), (seed, q.name, shape)
            assert tree_cost(w, q.name, binary_tree(w, q.name, shape)) == pytest.approx(want, rel=1e-9)
        balanced = [c for t, c in zip(trees, costs) if _is_balanced(q, t)]
        bushy = optimize(w, mode="individual", planner="tree", tree_shape="bushy").probe_cost
        assert bushy == pytest.approx(min(balanced), rel=1e-9), (seed, q.name, "bushy")


def test_exhaustive_search_sees_bushy_trees_the_deep_search_does_not():
    # a chain A–B–C–D whose middle join explodes: the bushy (AB)(CD) beats every linear tree
    w = parse_workload("""
defaults: {rate: 100}
relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
selectivities: {A.a = B.a: 0.001, B.b = C.b: 0.5, C.c = D.c: 0.001}
""")
    trees = list(all_trees(w.query("q"), ("A", "B", "C", "D")))
    assert len(trees) == 5  # a chain of 4: AB·CD, and 4 linear trees
    best = optimize(w, planner="tree", tree_shape="best")
    deep = optimize(w, planner="tree", tree_shape="deep")
    assert best.plan.probe_cost == pytest.approx(min(tree_plan_cost(w, "q", t) for t in trees))
    assert best.trees["q"] == "((A ⋈ B) ⋈ (C ⋈ D))"
    # |A|+|B|+|C|+|D| + |AB| + |CD| = 400 + 10 + 10
    assert best.probe_cost == pytest.approx(420.0)
    assert deep.probe_cost > best.probe_cost


# --------------------------------------------------------------------------------------------
# golden: the MJoin paper's Section 3.3 setting, by hand
# --------------------------------------------------------------------------------------------

SEC33 = """
defaults: {selectivity: 0.001}
relations: {S1: {attributes: [k], rate: 10000}, S2: {attributes: [k], rate: 15000},
            S3: {attributes: [k], rate: 10000}}
queries: {q: "S1(k), S2(k), S3(k)"}
"""


def test_golden_mjoin_probing_sequence_section_3_3():
    """S1 and S3 deliver 10,000 tuples, S2 15,000; one join attribute of 1,000 values
    (selectivity 1/1000): a tuple meets 10 S1 or S3 partners but 15 S2 partners, so the rule
    probes the 10,000-tuple input first.  Costs (docs/model.md §4, per time unit):
    S1 » S3 » S2: 10,000 + |S1⋈S3| / 2 = 10,000 + 100,000 / 2 = 60,000; S3 the same;
    S2 » S1 » S3: 15,000 + |S1⋈S2| / 2 = 15,000 + 150,000 / 2 = 90,000 — 210,000 in all.
    The paper's "wrong" sequence (least selective first) sends S1 and S3 into S2 first:
    2 × (10,000 + 75,000) + 90,000 = 260,000, 24 % more (the paper measured 21 % more
    comparisons: 2,004,639 vs 1,656,727)."""
    w = parse_workload(SEC33)
    res = optimize(w, planner="mjoin")
    assert {s: o.replace("[k]", "") for s, o in res.probe_orders()["q"].items()} == \
        {"S1": "S1 » S3 » S2", "S2": "S2 » S1 » S3", "S3": "S3 » S1 » S2"}
    assert res.probe_cost == pytest.approx(210_000.0)
    assert not [s for s in res.plan.stores if not s.mir.is_base]

    def order(start, *rest):
        return ProbeOrder(start, tuple(MIR.of(w, [r], ()) for r in rest), tuple(w.relation(r).attr("k") for r in rest))
    wrong = build_plan(w, [Choice("q", order("S1", "S2", "S3")), Choice("q", order("S2", "S1", "S3")),
                           Choice("q", order("S3", "S2", "S1"))], "individual", "single")
    assert wrong.probe_cost == pytest.approx(260_000.0)
    assert wrong.probe_cost / res.probe_cost == pytest.approx(1.238, abs=1e-3)
    # the deep tree evaluating the most selective predicate first: ((S1 ⋈ S3) ⋈ S2) — fewer probes
    # (10,000 + 10,000 + 100,000 + 15,000), but it stores S1 ⋈ S3 (Table 1: more hashes and moves)
    tree = optimize(w, planner="tree", tree_shape="deep")
    assert tree.trees["q"] == "((S1 ⋈ S3) ⋈ S2)" and tree.probe_cost == pytest.approx(135_000.0)
    assert tree.memory == pytest.approx(res.memory + 100_000.0)


def test_decomposition_rule_by_hand():
    w = parse_workload("""
defaults: {rate: 100, selectivity: 0.01}
relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b]}}
queries: {q: "A(a), B(a,b), C(b)"}
""")
    # split A | BC: S = (|A| + |B⋈C|) · 3 = (100 + 100) · 3; D = (1 − 0.01) · 100 · 100 (BC's Π n) + 0
    d, s = decomposition_costs(w, "q", ["A"], ["B", "C"])
    assert (d, s) == (pytest.approx(9_900.0), pytest.approx(600.0))
    # A | BC and AB | C gain the same; ties go to the first split (the one holding only A)
    assert str(mjoin_tree(w, "q", decompose=True)) == "((B ⋈ C) ⋈ A)"
    # no predicate ever fails (selectivity 1): nothing is recomputed needlessly, D = 0 → no split
    w1 = w.with_defaults(selectivity=1.0)
    assert decomposition_costs(w1, "q", ["A"], ["B", "C"])[0] == 0.0
    assert str(mjoin_tree(w1, "q", decompose=True)) == "(A ⋈ B ⋈ C)"
    plan = optimize(w, planner="mjoin", decompose=True).plan
    assert plan.materializations()  # the part of two relations is an MIR store


# --------------------------------------------------------------------------------------------
# errors and the CLI
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw,culprit", [
    ({"planner": "volcano"}, "volcano"),
    ({"planner": "tree", "tree_shape": "zigzag"}, "zigzag"),
    ({"planner": "clash", "tree_shape": "deep"}, "deep"),
    ({"planner": "mjoin", "tree_shape": "deep"}, "tree and jaqpot planners only"),
    ({"planner": "tree", "decompose": True}, "mjoin planner only"),
    ({"planner": "tree", "mirs": False}, "MIR"),
    ({"planner": "mjoin", "mirs": False, "decompose": True}, "MIR"),
    ({"planner": "mjoin", "mir_budget": 10.0}, "budget"),
])
def test_bad_planner_options_are_typed_errors(kw, culprit):
    w = parse_workload((WORKLOADS / "paper_v2.yaml").read_text())
    with pytest.raises(PlannerError, match=culprit):
        optimize(w, **kw)


def test_mjoin_without_mirs_is_fine_and_operator_trees_need_a_planner_with_trees():
    w = parse_workload((WORKLOADS / "paper_v2.yaml").read_text())
    assert optimize(w, planner="mjoin", mirs=False).probe_cost == optimize(w, planner="mjoin").probe_cost
    with pytest.raises(PlannerError, match="clash"):
        operator_trees(w, "clash")


@pytest.mark.parametrize("planner,extra", [("mjoin", []), ("tree", ["--tree-shape", "deep"]), ("tree", [])])
def test_cli_optimize_json_keeps_its_contract(capsys, planner, extra):
    code, out, err = run_cli(capsys, "optimize", str(WORKLOADS / "paper_v2.yaml"), "--planner", planner, *extra,
                             "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["planner"] == planner and d["probe_cost"] > 0 and d["stores"]
    assert set(d["probe_orders"]) == {"q1", "q2"} and set(d["probe_orders"]["q1"]) == {"R", "S", "T"}
    assert set(d["trees"]) == {"q1", "q2"}


@pytest.mark.parametrize("args,culprit", [
    (["optimize", "--tree-shape", "deep"], "tree and jaqpot planners only"),
    (["optimize", "--planner", "tree", "--no-mirs"], "MIR"),
    (["optimize", "--planner", "mjoin", "--export", "x.lp"], "--export"),
    (["optimize", "--planner", "tree", "--decompose"], "mjoin planner only"),
    (["compare", "--planner", "clash", "--tree-shape", "deep"], "tree and jaqpot planners only"),
])
def test_cli_bad_combinations_one_line_exit_2(capsys, tmp_path, args, culprit):
    args = [a if a != "x.lp" else str(tmp_path / "x.lp") for a in args]
    code, out, err = run_cli(capsys, args[0], str(WORKLOADS / "paper_v2.yaml"), *args[1:])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("mqjoin: error:") and culprit in err


def test_cli_run_refuses_a_planner_with_adaptivity(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", str(WORKLOADS / "paper_v2.yaml"), "--data", str(tmp_path),
                           "--out", str(tmp_path / "out"), "--planner", "mjoin", "--adaptive")
    assert code == 2 and "--planner clash only" in err


def test_cli_compare_lists_mjoin_and_tree_beside_clash(capsys):
    code, out, err = run_cli(capsys, "compare", str(WORKLOADS / "paper_v2.yaml"), "--json")
    assert code == 0
    rows = json.loads(out)
    got = {(r["planner"], r["mode"], r["partitioning"]) for r in rows}
    for pol in ("single", "replicas"):
        assert {("clash", m, pol) for m in ("individual", "shared", "mqo")} <= got
        assert {(p, m, pol) for p in ("mjoin", "tree (best)") for m in ("individual", "shared")} <= got
    cost = {(r["planner"], r["mode"], r["partitioning"]): r["probe_cost"] for r in rows}
    # paper_v2: MJoin 950 (no sharing between its per-query operators), best trees 800 = CLASH individual
    assert cost[("mjoin", "shared", "single")] == 950.0
    assert cost[("tree (best)", "individual", "single")] == cost[("clash", "individual", "single")] == 800.0
    code, out, _ = run_cli(capsys, "compare", str(WORKLOADS / "paper_v2.yaml"), "--planner", "mjoin")
    assert code == 0 and "mjoin" in out and "clash" not in out


def test_cli_run_with_planner_checks_against_the_oracle(capsys, tmp_path):
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.model.tables import write_inputs
    from mqjoin.model.workload import load_workload

    w = load_workload(WORKLOADS / "paper_v2.yaml")
    write_inputs(uniform_streams(w, duration=0.5, scale=0.2, seed=1), tmp_path / "in", "parquet")
    for planner in ("mjoin", "tree"):
        code, out, err = run_cli(capsys, "run", str(WORKLOADS / "paper_v2.yaml"), "--data", str(tmp_path / "in"),
                                 "--out", str(tmp_path / planner), "--planner", planner, "--check", "--json")
        assert code == 0, err
        assert json.loads(out)["check"] == "equal to the oracle"
        assert (tmp_path / planner / "q1.parquet").exists()


@pytest.mark.parametrize("pol", ["single", "replicas"])
def test_clash_individual_is_never_worse_than_mjoin_or_trees(pol):
    """Every MJoin and tree plan is a feasible CLASH plan (its orders and MIRs are candidates),
    so each query's CLASH optimum costs at most as much — a check that both sides cost plans
    the same way (docs/model.md §4)."""
    for seed, w, _ in cases(15, start=200):
        clash = optimize(w, mode="individual", partitioning=pol).probe_cost
        for planner, kw in PLANNER_CONFIGS:
            other = optimize(w, mode="individual", partitioning=pol, planner=planner, **kw).probe_cost
            assert clash <= other * (1 + 1e-9) + 1e-9, (seed, planner, kw)


def test_mixed_operator_trees_are_plans_with_the_oracle_results():
    """A decomposed MJoin may keep a multi-way part: an MJoin node under a binary join.  Such
    trees (built by hand here) also give the results of docs/model.md §6 in every mode and policy."""
    from mqjoin.planners.trees import JoinTree, plan_trees
    from mqjoin.datasets.uniform import uniform_streams

    w = parse_workload("""
defaults: {rate: 30, selectivity: 0.1, parallelism: 2, window: 0.5}
relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c, d]},
            E: {attributes: [d]}}
queries: {q: "A(a), B(a,b), C(b,c), D(c,d), E(d)", p: "B(b), C(b,c), D(c)"}
""")
    leaf = JoinTree.leaf
    trees = {"q": JoinTree.join([JoinTree.join([leaf("A"), leaf("B"), leaf("C")]),
                                 JoinTree.join([leaf("D"), leaf("E")])]),
             "p": JoinTree.join([leaf("B"), leaf("C"), leaf("D")])}
    assert str(trees["q"]) == "((A ⋈ B ⋈ C) ⋈ (D ⋈ E))"
    tables = uniform_streams(w, duration=2.0, seed=4)
    want = oracle_results(w, tables)
    assert all(want.values())
    for mode in ("individual", "shared"):
        for pol in ("single", "replicas"):
            plan = plan_trees(w, trees, mode, pol)
            assert set(plan.materializations()) == ({"q:ABC", "q:DE"} if mode == "individual" else {"ABC", "DE"})
            assert run_reference(plan, tables).result_sets() == want, (mode, pol)
    with pytest.raises(PlannerError, match="does not cover"):
        plan_trees(w, {"q": trees["p"], "p": trees["p"]})
