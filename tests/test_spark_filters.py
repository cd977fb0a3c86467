"""docs/model.md §7 on Spark: filtered workloads (alone and in query groups) give the oracle's results
in both Spark modes (the driver's executor and the DataFrame stores) and natively."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from _cases import filtered_cases
from _spark import TIMEOUT
from test_spark_native import run_native

from mqjoin.planning.optimizer import optimize
from mqjoin.planners.registry import PLANNERS
from mqjoin.runtime.oracle import oracle_results
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload

pytestmark = pytest.mark.slow

# seeds with results in most queries: 3 queries with 5 filters (301), 2 queries (314)
CASES = [c for c in filtered_cases(12, start=300) if c[0] in (301, 314)]

STRINGS = parse_workload('''
defaults: {selectivity: 0.3, window: 4, parallelism: 2}
relations:
  L: {attributes: [o, flag]}
  O: {attributes: [o, c, status]}
  C: {attributes: [c]}
queries:
  q1: {join: "L(o), O(o,c), C(c)", where: "L.flag IN ('R', 'A') AND O.status != 'F'"}
  q2: {join: "L(o), O(o)", where: "L.flag = 'N' AND O.status BETWEEN 'A' AND 'O'"}
  q3: L(o), O(o,c), C(c)
filters: {q1.L: 0.5, q1.O: 0.6, q2.L: 0.3, q2.O: 0.4}
''')


def string_tables():
    import random

    rng = random.Random(7)
    n = 24
    return {
        "L": Table.from_columns("L", {"ts": [float(rng.randint(0, 8)) for _ in range(n)],
                                      "o": [rng.randint(0, 3) for _ in range(n)],
                                      "flag": [rng.choice(["R", "A", "N", None]) for _ in range(n)]}),
        "O": Table.from_columns("O", {"ts": [float(rng.randint(0, 8)) for _ in range(n)],
                                      "o": [rng.randint(0, 3) for _ in range(n)],
                                      "c": [rng.randint(0, 2) for _ in range(n)],
                                      "status": [rng.choice(["F", "O", "P"]) for _ in range(n)]}),
        "C": Table.from_columns("C", {"ts": [float(rng.randint(0, 8)) for _ in range(n)],
                                      "c": [rng.randint(0, 2) for _ in range(n)]}),
    }


def all_cases():
    out = [(f"seed{s}", w, t) for s, w, t in CASES]
    out.append((f"seed{CASES[0][0]}-grouped", CASES[0][1].with_groups([CASES[0][1].query_names]), CASES[0][2]))
    out.append(("strings", STRINGS, string_tables()))
    out.append(("strings-grouped", STRINGS.with_groups([["q1", "q2", "q3"]]), string_tables()))
    return out


@pytest.mark.parametrize("spark_mode", ("driver", "distributed"))
@pytest.mark.parametrize("name,w,tables", all_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_filtered_workloads_on_spark_equal_the_oracle(name, w, tables, spark_mode, spark, tmp_path):
    from mqjoin.runtime.spark.launch import run_spark

    want = oracle_results(w, tables)
    total = sum(len(t) for t in tables.values())
    d = run_spark(optimize(w).plan, tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // 3),
                  timeout=TIMEOUT, mode=spark_mode)
    assert d.results() == want


@pytest.mark.parametrize("name,w,tables", all_cases()[-2:-1], ids=lambda v: v if isinstance(v, str) else "")
def test_filtered_workload_natively_equals_the_oracle(name, w, tables, spark, tmp_path):
    out, _, _ = run_native(spark, w, tables, tmp_path)
    assert {q: {rows for rows, _, _ in res} for q, res in out.items()} == oracle_results(w, tables)


@pytest.mark.parametrize("spark_mode", ("driver", "distributed"))
def test_ajoin_plan_with_groups_on_spark_equals_the_oracle(spark_mode, spark, tmp_path):
    from mqjoin.planners.ajoin import ajoin, union_from_data
    from mqjoin.runtime.spark.launch import run_spark

    tables = string_tables()
    planned = ajoin(STRINGS, union_from_data(tables))
    assert planned.workload.groups == (("q1", "q2", "q3"),)  # one group: stores keep the union of filters
    total = sum(len(t) for t in tables.values())
    d = run_spark(planned.plan(), tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // 3),
                  timeout=TIMEOUT, mode=spark_mode)
    assert d.results() == oracle_results(STRINGS, tables)


@pytest.mark.parametrize("planner", ("clash", "ajoin"))
def test_filtered_query_batch_on_adaptive_spark_equals_the_oracle(planner, spark, tmp_path):
    from test_ajoin import W7, w7_tables

    from mqjoin.adaptive.policy import AdaptivePolicy, parse_changes
    from mqjoin.planners.ajoin import ajoin_optimizer
    from mqjoin.runtime.oracle import adaptive_oracle_results
    from mqjoin.runtime.spark.launch import run_spark

    w, tables = parse_workload(W7), w7_tables()
    changes = parse_changes('''
- {at: 3.5, remove: [q4], add: {q7: {join: "W(usr), C(usr)", where: "W.geo = 'GER' AND C.x > 5"}},
   filters: {q7.W: 0.3, q7.C: 0.4}}
''')
    policy = AdaptivePolicy(epoch=1.0)
    total = sum(len(t) for t in tables.values())
    d = run_spark(w, tables, tmp_path / "out", spark=spark, adaptive=policy, changes=changes,
                  optimizer=ajoin_optimizer() if planner == "ajoin" else None,
                  max_rows_per_batch=-(-total // 3), timeout=TIMEOUT)
    assert d.results() == adaptive_oracle_results(w, tables, changes, policy)


@pytest.mark.parametrize("planner", [p for p in PLANNERS if p != "clash"])
def test_filtered_workloads_on_spark_equal_the_oracle_under_every_planner(planner, spark, tmp_path):
    """Every plan family's plan of a filtered workload (ungrouped and, for ajoin, with the
    groups it chooses) runs on Spark's driver mode with the oracle's results."""
    from mqjoin.runtime.spark.launch import run_spark

    for name, w, tables in (all_cases()[0], all_cases()[-2]):
        plan = optimize(w, planner=planner).plan
        total = sum(len(t) for t in tables.values())
        d = run_spark(plan, tables, tmp_path / f"out-{name}", spark=spark, max_rows_per_batch=-(-total // 3),
                      timeout=TIMEOUT)
        assert d.results() == oracle_results(w, tables), name
