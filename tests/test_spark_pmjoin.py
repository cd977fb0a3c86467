"""PMJoin's plans on Spark: the deployed plan of ``--planner pmjoin`` gives
the oracle's results (one small deployment: Spark tests are slow)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from _cases import cases
from _spark import TIMEOUT
from test_pmjoin import with_nodes

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.spark.launch import run_spark

pytestmark = pytest.mark.slow


def test_pmjoin_plan_on_spark_equals_the_oracle(spark, tmp_path):
    # a 4-way query with nested MJoins: its plan has MIR stores
    seed, w, tables = next((s, w, t) for s, w, t in cases(40)
                           if any(len(q.relations) >= 4 for q in w.queries) and any(len(t) for t in t.values()))
    w = with_nodes(w, seed)
    plan = optimize(w, planner="pmjoin", mode="shared").plan
    d = run_spark(plan, tables, tmp_path, spark=spark, max_rows_per_batch=20, timeout=TIMEOUT)
    assert d.results() == oracle_results(w, tables)
