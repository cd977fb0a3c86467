"""Join sizes measured from data (mqjoin.datasets.sizes): exact counts equal brute force,
correlated samples are unbiased with honest intervals, independent data agrees with the
independence estimate, and ``mqjoin stats --sizes`` writes sizes the optimiser uses."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest

from _cli import run_cli
from mqjoin.datasets import tpch
from mqjoin.datasets.sizes import measure_sizes, size_sets
from mqjoin.model.tables import Table
from mqjoin.model.sizes import independent_size
from mqjoin.model.workload import load_workload, parse_workload
from mqjoin.planning.cost import join_size
from mqjoin.planning.optimizer import optimize

# a class of three members (a), a second class (b) linking S and T again, and a filter
W = parse_workload("""
relations: {R: {attributes: [a, x]}, S: {attributes: [a, b]}, T: {attributes: [a, b]}, U: {attributes: [b]}}
queries:
  q1: "R(a), S(a, b), T(a, b)"
  q2: {join: "R(a), S(a)", where: "R.x < 2"}
  q3: "S(b), U(b)"
defaults: {selectivity: 0.2}
filters: {q2.R: 0.5}
""")


def brute(tables, query, rels, filtered):
    q = W.query(query)
    rows = {r: [i for i in range(len(tables[r])) if not filtered
                or q.passes(r, {k: v[i] for k, v in tables[r].columns.items()})]
            for r in rels}
    n = 0
    for combo in itertools.product(*(rows[r] for r in rels)):
        at = dict(zip(rels, combo))
        ok = True
        for c in q.classes:
            vals = [tables[a.relation].columns[a.name][at[a.relation]] for a in c.members if a.relation in at]
            if len(vals) > 1 and (any(v is None for v in vals) or len(set(vals)) > 1):
                ok = False
        n += ok
    return n


def random_tables(seed, n=12, domain=(None, 1, 2, 3)):
    rng = random.Random(seed)
    cols = {"R": ("a", "x"), "S": ("a", "b"), "T": ("a", "b"), "U": ("b",)}
    return {r: Table.from_columns(r, {"ts": list(range(n)), **{c: [rng.choice(domain) for _ in range(n)] for c in cs}})
            for r, cs in cols.items()}


@pytest.mark.parametrize("seed", range(6))
def test_exact_counts_equal_brute_force(seed):
    tables = random_tables(seed)
    got = measure_sizes(W, tables)
    assert {(m.query, m.relations) for m in got} >= {(None, ("R", "S")), ("q2", ("R", "S")), (None, ("S", "T")),
                                                       (None, ("R", "S", "T")), (None, ("S", "U"))}
    for m in got:
        q = m.query or next(q.name for q in W.queries if set(m.relations) <= q.relation_set)
        assert m.exact and m.count == brute(tables, q, m.relations, m.query is not None), m
        # tuples per time unit: count · Π λ/n (rates 1, 12 rows each), at least one result
        assert m.value == pytest.approx(max(m.count, 1) / 12 ** len(m.relations))


def brute_last(tables, query, rels, filtered):
    """Per relation of ``rels``: the results whose last tuple to arrive (by ts, then the
    relation's declaration rank, then row index) is that relation's."""
    q = W.query(query)
    rank = W.relation_rank
    rows = {r: [i for i in range(len(tables[r])) if not filtered
                or q.passes(r, {k: v[i] for k, v in tables[r].columns.items()})]
            for r in rels}
    last = dict.fromkeys(rels, 0)
    for combo in itertools.product(*(rows[r] for r in rels)):
        at = dict(zip(rels, combo))
        vals = [[tables[a.relation].columns[a.name][at[a.relation]] for a in c.members if a.relation in at]
                for c in q.classes]
        if all(len(v) < 2 or (None not in v and len(set(v)) == 1) for v in vals):
            last[max(rels, key=lambda r: (tables[r].ts[at[r]], rank[r], at[r]))] += 1
    return last


@pytest.mark.parametrize("seed", range(4))
def test_the_order_of_arrival_equals_brute_force(seed):
    rng = random.Random(seed)
    tables = random_tables(seed)
    tables = {r: Table.from_columns(r, {**t.columns, "ts": [rng.randint(0, 5) for _ in t.ts]})
              for r, t in tables.items()}
    for m in measure_sizes(W, tables):
        q = m.query or next(q.name for q in W.queries if set(m.relations) <= q.relation_set)
        want = brute_last(tables, q, m.relations, m.query is not None)
        if m.count:
            assert {r: o * m.count for r, o, _ in m.arrival} == pytest.approx(want), m
            assert sum(o for _, o, _ in m.arrival) == pytest.approx(1)
        else:
            assert m.arrival == () and m.arrival_values == 0


def test_sets_are_the_candidates_sets():
    assert [sorted(s) for s in size_sets(W)] == [["R", "S"], ["R", "T"], ["S", "T"], ["S", "U"], ["R", "S", "T"]]


def uniform(seed, rows=3000, domain=1500):
    rng = np.random.default_rng(seed)
    return {r: Table.from_columns(r, {"ts": np.arange(rows).tolist(),
                                      **{c: rng.integers(0, domain, rows).tolist() for c in cs}})
            for r, cs in {"R": ("a", "x"), "S": ("a", "b"), "T": ("a", "b"), "U": ("b",)}.items()}


def test_samples_are_unbiased_and_their_intervals_honest():
    hits = total = 0
    est = truths = 0.0
    for seed in range(12):
        tables = uniform(seed)
        exact = {(m.query, m.relations): m for m in measure_sizes(W, tables)}
        for m in measure_sizes(W, tables, 0.2):
            truth = exact[m.query, m.relations]
            if m.sampled_on:
                total += 1
                hits += m.low <= truth.value <= m.high
                est, truths = est + m.count, truths + truth.count
    assert total > 40 and hits / total >= 0.85
    assert est / truths == pytest.approx(1, abs=0.03)


def test_independent_data_agrees_with_the_estimate():
    """On uniform independent values the measured sizes are the estimate within their error."""
    from mqjoin.datasets.stats import estimate_statistics

    st = estimate_statistics(W.with_defaults(selectivity=0.5), uniform(0), sample=None, sizes=0.5)
    assert st.sizes
    for m in st.sizes:
        assert abs(m.value - m.estimate) <= 4 * max(m.stderr, 0.02 * m.estimate), m.describe()
        # arrivals independent of the values: every relation completes 1/|P| of the results,
        # within the error, so no order of arrival is written and costs are the model's
        assert m.arrival and not m.last, m.describe()
    assert "last" not in st.apply(W).to_yaml()


def test_sampled_sizes_are_written_with_their_relative_error_and_exact_ones_without():
    from mqjoin.datasets.stats import estimate_statistics

    st = estimate_statistics(W.with_defaults(selectivity=0.5), uniform(0), sample=None, sizes=0.5)
    sampled = [m for m in st.sizes if not m.exact]
    assert sampled and all(m.error > 0 for m in sampled)
    # the standard error relative to the size; a sample without a result: that of its rule-of-three bound
    assert all(m.error == pytest.approx(m.stderr / m.value if m.count else m.high / 1.96 / m.value, rel=1e-3)
               for m in sampled)
    w = st.apply(W)
    written = {(m.query, m.relations): m.error for m in w.sizes}
    for m in st.sizes:
        assert written[m.query, m.relations] == pytest.approx(m.error, rel=0.01, abs=0), m.describe()
    assert "error:" in w.to_yaml() and parse_workload(w.to_yaml()) == w
    exact = estimate_statistics(W.with_defaults(selectivity=0.5), uniform(0), sample=None, sizes=1.0).apply(W)
    assert exact.sizes and all(m.error == 0 for m in exact.sizes) and "error" not in exact.to_yaml()


def test_key_ordered_arrivals_are_measured_and_written():
    """Rows of S arrive right after the R row with their key: S completes every result."""
    from mqjoin.datasets.stats import estimate_statistics

    keys = list(range(300))
    tables = {"R": Table.from_columns("R", {"ts": [2 * k for k in keys], "a": keys, "x": keys}),
              "S": Table.from_columns("S", {"ts": [2 * k + 1 for k in keys], "a": keys, "b": keys}),
              "T": Table.from_columns("T", {"ts": keys, "a": keys[::-1], "b": keys[::-1]}),
              "U": Table.from_columns("U", {"ts": keys, "b": keys[::-1]})}
    st = estimate_statistics(W.with_defaults(selectivity=0.5), tables, sample=None, sizes=1.0)
    rs = next(m for m in st.sizes if m.relations == ("R", "S") and m.query is None)
    assert rs.last == (("R", 0.0), ("S", 1.0))
    w = st.apply(W)
    assert w.arrival_share({"R", "S"}, w.query("q1").classes, (), "S") == 1.0
    assert parse_workload(w.to_yaml()) == w


def test_stats_cli_writes_sizes_the_optimiser_uses(tmp_path, capsys):
    out = tmp_path / "w.yaml"
    code, text, _ = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--sizes", "--write", out)
    assert code == 0 and "join sizes" in text and "q4: partsupp ⋈ lineitem" in text
    w = load_workload(out)
    assert w.sizes and w == load_workload(out)
    q4 = w.query("q4")
    rels = {"partsupp", "lineitem"}
    # lineitem joins partsupp by its (partkey, suppkey) foreign key: far above independence
    assert join_size(w, rels, q4.classes) > 5 * independent_size(w, rels, q4.classes)
    assert optimize(w).probe_cost > 0
    code, text, _ = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--sizes", "0.5", "--json")
    d = json.loads(text)
    assert code == 0 and d["sizes"] and all(s["ci95"][0] <= s["value"] <= s["ci95"][1] for s in d["sizes"])


@pytest.mark.parametrize("bad", ["0", "1.5", "-1"])
def test_stats_cli_refuses_a_bad_fraction(capsys, bad):
    code, _, err = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, f"--sizes={bad}")
    assert code == 2 and err.count("\n") == 1 and "--sizes" in err


@pytest.mark.parametrize("seed", range(3))
def test_held_out_synthetic_workloads_keep_the_models_costs(seed):
    """Random workloads over independent uniform streams: the measured order of arrival is
    1/|P| within its error everywhere, so nothing is written and every step costs what it
    costs with the sizes alone (the plan and its cost unchanged)."""
    from dataclasses import replace

    from mqjoin.datasets.random_workloads import random_workload
    from mqjoin.datasets.uniform import uniform_streams

    w = random_workload(3, 6, 3, rate=300, seed=seed)
    sizes = measure_sizes(w, uniform_streams(w, duration=1.0, seed=seed), 0.5)
    assert sizes and all(m.arrival for m in sizes if m.count)
    assert not [m.describe() for m in sizes if m.last]
    with_order, without = optimize(w.with_sizes(sizes)), optimize(w.with_sizes([replace(m, arrival=()) for m in sizes]))
    assert with_order.probe_cost == without.probe_cost and with_order.plan.probe_orders() == without.plan.probe_orders()
