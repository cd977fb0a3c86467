"""The native baseline (each query a chain of Spark stream-stream joins) against the reference
executor and the oracle, on a local Spark, over several micro-batches.

All queries of a workload run as ONE streaming query (the union of their join chains over one
source per relation, memory sink), as ``mqjoin run --engine native`` runs them; the tests also
check that Spark dropped no tuple as late, that each result carries the arrival number of its
latest tuple, that one source serves every relation and query and that the joins' state partitions
are the session's cores.  One test runs the baseline through a ``Deployment``."""

from __future__ import annotations

import itertools
import json
import time

import pytest

pytest.importorskip("pyspark")

from _cases import cases

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import Table, read_results
from mqjoin.model.workload import parse_workload

# -- no Spark needed -------------------------------------------------------------------------


def test_join_order_starts_at_the_smallest_finite_window_and_stays_connected():
    from mqjoin.runtime.spark.native import join_order

    w = parse_workload("""
defaults: {selectivity: 0.5}
relations:
  R: {attributes: [a]}
  S: {attributes: [a, b], window: 2}
  T: {attributes: [b, c], window: 1}
  U: {attributes: [c]}
queries: {q: "R(a), S(a,b), T(b,c), U(c)", p: "R(a), S(a)"}
""")
    assert join_order(w, w.query("q")) == ["T", "S", "R", "U"]  # R joins S before U joins T
    assert join_order(w, w.query("p")) == ["S", "R"]
    w2 = w.with_relation("S", window=None).with_relation("T", window=None)
    assert join_order(w2, w2.query("p")) == ["R", "S"]  # all unbounded: the query's order


def test_native_state_metrics_from_a_progress_dict_or_json():
    from mqjoin.runtime.spark.native import native_state_metrics

    op = {"operatorName": "symmetricHashJoin"}
    p = {"batchId": 3, "stateOperators": [
        {**op, "numRowsTotal": 5, "memoryUsedBytes": 100, "numRowsDroppedByWatermark": 0},
        {**op, "numRowsTotal": 7, "memoryUsedBytes": 50, "numRowsDroppedByWatermark": 2}]}
    want = {"state_rows": 12, "state_bytes": 150, "state_operators": 2, "late_rows": 2}
    assert native_state_metrics(p) == want
    assert native_state_metrics(json.dumps(p)) == want
    assert native_state_metrics({"batchId": 0, "stateOperators": []})["state_rows"] == 0


# -- on Spark ----------------------------------------------------------------------------------




_names = itertools.count()


def run_native(spark, w, tables, tmp_path, batches: int = 3, timeout: float = 240, partitions: int = 1):
    """Run every query of ``w`` natively — all of them in ONE streaming query (the union of
    their join chains, one source per relation), as the deployment runs them — until all
    input is consumed; returns ``({query: [(rows, _seq, _arrival)]}, {query: [progress]},
    replay log)`` (every query sees the one streaming query's progress)."""
    from mqjoin.runtime.spark.native import native_settings, native_union
    from mqjoin.runtime.spark.session import query_conf
    from mqjoin.runtime.spark.source import build_replay_log, write_replay_log

    log = build_replay_log(w, tables)
    path = write_replay_log(log, tmp_path / "replay.parquet")
    total = len(log)
    df = native_union(spark, w, str(path), max_rows_per_batch=max(1, -(-total // batches)))
    name = f"native_test_{next(_names)}"
    with query_conf(spark, native_settings(spark, partitions)):
        sq = (df.writeStream.format("memory").queryName(name).outputMode("append")
              .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        deadline = time.time() + timeout
        while True:
            exc = sq.exception()
            assert exc is None, str(exc)
            p = sq.lastProgress
            if p and all(s.get("endOffset") and json.loads(s["endOffset"])["seq"] >= total for s in p["sources"]):
                break
            assert time.time() < deadline, f"the native query did not consume the input in {timeout} s"
            time.sleep(0.1)
        out = {q: [] for q in w.query_names}
        for r in spark.table(name).collect():
            out[r["query"]].append((tuple(r["rows"]), r["_seq"], r["_arrival"]))
        progress = list(sq.recentProgress)
    finally:
        sq.stop()
    return out, {q: progress for q in out}, log


def check_against_reference_and_oracle(w, tables, out, progress, log):
    from mqjoin.runtime.spark.native import native_state_metrics

    want = oracle_results(w, tables)
    assert run_reference(optimize(w).plan, tables).result_sets() == want
    got = {q: {rows for rows, _, _ in res} for q, res in out.items()}
    assert got == want
    seq = {(k, r): s for k, r, s in zip(log["_rel"].to_pylist(), log["_row"].to_pylist(), log["_seq"].to_pylist())}
    for q, res in out.items():
        assert len(res) == len(got[q]), f"{q}: a result was produced twice"
        ranks = [w.relation_rank[r] for r in w.query(q).relations]
        for rows, s, arrival in res:  # the result carries its latest tuple's arrival number
            assert s == max(seq[(k, i)] for k, i in zip(ranks, rows))
            assert arrival is not None and arrival > 0
        assert len(progress[q]) >= 3, f"{q}: expected several micro-batches"
        assert all(native_state_metrics(p)["late_rows"] == 0 for p in progress[q]), f"{q}: Spark dropped late rows"


# seeds chosen for coverage at a small cost (7 queries, ~10 s each): a first relation (in query
# order) with an unbounded window (5015, 5032, 5043), only unbounded windows (5032), window 0
# with many ts ties (5004), only finite windows (5041, 5043), 4-way joins (5004, 5043),
# 3-member classes (5004, 5015, 5043), nulls in every case
SEEDS = (5004, 5015, 5032, 5041, 5043)
RANDOM = [c for c in cases(44, start=5000) if c[0] in SEEDS]


@pytest.mark.slow
@pytest.mark.parametrize("case", RANDOM, ids=lambda c: f"seed{c[0]}")
def test_native_equals_reference_and_oracle(case, spark, tmp_path):
    _, w, tables = case
    out, progress, log = run_native(spark, w, tables, tmp_path)
    check_against_reference_and_oracle(w, tables, out, progress, log)


HAND = """
defaults: {selectivity: 0.5}
relations:
  R: {attributes: [a]}
  S: {attributes: [a, b], window: 1}
  T: {attributes: [b], window: 2.5}
queries: {q: "R(a), S(a,b), T(b)"}
"""


@pytest.mark.slow
def test_hand_case_unbounded_first_relation_boundaries_ties_nulls(spark, tmp_path):
    w = parse_workload(HAND)
    tables = {  # R4, S3 and T5 carry nulls
        "R": Table.from_columns("R", {"ts": [0.0, 4.0, 5.0, 9.0, 9.5], "a": [1, 3, 2, 2, None]}),
        "S": Table.from_columns("S", {"ts": [4.5, 5.0, 6.5, 6.5], "a": [1, 3, 1, None], "b": [7, 8, 7, 7]}),
        "T": Table.from_columns("T", {"ts": [4.0, 5.0, 5.5, 6.5, 7.0, 8.5], "b": [7, 8, 7, 7, 7, None]}),
    }
    # R is unbounded: R0 (ts 0) joins S2 (ts 6.5) in the third micro-batch, when the watermark
    # is already past 4 — a chain keeping R's event time would drop that joined row as late
    # (measured with such a chain: the (0,2,*) results were lost).
    # (0,0,2): T=5.5, S0 exactly 1 old.  (0,2,0): T=6.5, T0 exactly 2.5 old.  (0,2,3): a tie.
    # (0,0,3): S0 2 old > 1, no.
    want = {(0, 0, 0), (0, 0, 2), (0, 2, 0), (0, 2, 2), (0, 2, 3), (0, 2, 4), (1, 1, 1)}
    assert oracle_results(w, tables)["q"] == want
    out, progress, log = run_native(spark, w, tables, tmp_path, batches=4)  # 4 tuples a batch
    check_against_reference_and_oracle(w, tables, out, progress, log)


@pytest.mark.slow
def test_state_metrics_of_a_windowed_join_are_positive_and_bounded(spark, tmp_path):
    from mqjoin.runtime.spark.native import native_state_metrics

    w = parse_workload("""
defaults: {selectivity: 0.5, window: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    n = 60
    tables = {r: Table.from_columns(r, {"ts": [i / 2 for i in range(n)], "a": [i % 3 for i in range(n)]})
              for r in ("R", "S")}
    out, progress, log = run_native(spark, w, tables, tmp_path, batches=4)
    check_against_reference_and_oracle(w, tables, out, progress, log)
    m = [native_state_metrics(p) for p in progress["q"]]
    assert max(x["state_rows"] for x in m) > 0 and max(x["state_bytes"] for x in m) > 0
    assert all(x["state_operators"] == 1 for x in m)
    # the window lets Spark evict: the last batch holds far fewer rows than were inserted
    assert 0 < m[-1]["state_rows"] < 2 * n // 2


@pytest.mark.slow
def test_native_deployment_results_latency_and_progress(spark, tmp_path):
    """What ``mqjoin run --engine native`` runs: a Deployment of one streaming query writing
    every query's results per micro-batch (the W3 hand case: windows 1, 2 and null; arrivals
    R0 S0 R1 S1 | T0 R2 T1, so the three tuples at ts 3 are split across the two batches)."""
    from test_reference import W3

    from mqjoin.runtime.spark.launch import run_spark

    w = parse_workload(W3)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 3.0, 5.0], "a": [1, 1, 1]}),
        "S": Table.from_columns("S", {"ts": [1.0, 3.0], "a": [1, 1], "b": [7, 7]}),
        "T": Table.from_columns("T", {"ts": [3.0, 100.0], "b": [7, 7]}),
    }
    d = run_spark(optimize(w).plan, tables, tmp_path, spark=spark, engine="native", max_rows_per_batch=4,
                  timeout=240)
    want = {(1, 0, 0), (1, 1, 0), (2, 1, 0)}
    assert d.results()["q"] == want == oracle_results(w, tables)["q"]
    assert read_results(w, tmp_path) == d.results()  # OUT/<query>.parquet, the CLI's format
    q = d.queries
    assert int(q["results"].sum()) == 3  # each result written once
    lat = q[q["results"] > 0]
    assert len(lat) and (lat["latency_mean"] >= 0).all()
    # unpaced, the tuples of a micro-batch arrive together: one latency per batch, exactly
    assert (lat["latency_mean"] == lat["latency_max"]).all() and (lat["latency_p95"] == lat["latency_max"]).all()
    p = d.progress  # Spark's progress reports, through the StreamingQueryListener
    assert len(p) > 0 and set(p["query"]) == {"native"}  # one streaming query
    s = d.summary()
    assert s["engine"] == "native" and s["results"] == {"q": 3} and s["input_tuples"] == 7
    assert s["throughput"] > 0 and s["state_rows_max"] >= 0



@pytest.mark.slow
@pytest.mark.parametrize("engine", ["native", "mqjoin"])
def test_summary_of_a_run_without_results(engine, spark, tmp_path):
    """No tuple joins: the summary says so (no latency) instead of failing on absent columns."""
    from test_reference import W3

    from mqjoin.runtime.spark.launch import run_spark

    w = parse_workload(W3)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 1.0], "a": [1, 2]}),
        "S": Table.from_columns("S", {"ts": [0.5], "a": [3], "b": [7]}),
        "T": Table.from_columns("T", {"ts": [2.0], "b": [8]}),
    }
    d = run_spark(optimize(w).plan, tables, tmp_path, spark=spark, engine=engine, timeout=240)
    s = d.summary()
    assert s["results"] == {"q": 0} == {q: len(r) for q, r in oracle_results(w, tables).items()}
    assert s["latency_mean"] is None and s["latency_p95_max"] is None and s["input_tuples"] == 4

SHARED = """
defaults: {selectivity: 0.5}
relations:
  R: {attributes: [a]}
  S: {attributes: [a, b], window: 1}
  T: {attributes: [b], window: 2.5}
  U: {attributes: [a]}
queries: {q: "R(a), S(a,b), T(b)", p: "S(a), R(a)", u: "R(a), U(a)"}
"""


@pytest.mark.slow
def test_native_deployment_is_one_query_one_source_per_relation_cores_partitions(spark, tmp_path):
    """Three queries sharing relations, windowed (q, p) and unbounded (u, whose joins keep no
    event-time column although R's stream has one for q and p), as one streaming query:
    exactly the oracle's results, each once; one source for all relations and queries (not
    one per relation and query: 7); every join's state in as many partitions as the session has cores
    (local[2]: 2), or ``partitions``."""
    from mqjoin.runtime.spark.launch import deploy
    from mqjoin.runtime.spark.native import native_state_metrics

    w = parse_workload(SHARED)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 4.0, 5.0, 9.0, 9.5], "a": [1, 3, 2, 2, None]}),
        "S": Table.from_columns("S", {"ts": [4.5, 5.0, 6.5, 6.5], "a": [1, 3, 1, None], "b": [7, 8, 7, 7]}),
        "T": Table.from_columns("T", {"ts": [4.0, 5.0, 5.5, 6.5, 7.0, 8.5], "b": [7, 8, 7, 7, 7, None]}),
        "U": Table.from_columns("U", {"ts": [1.0, 6.0, 9.5], "a": [2, 1, 2]}),
    }
    want = oracle_results(w, tables)
    assert all(want.values())
    for partitions, expect in ((None, 2), (1, 1)):
        out = tmp_path / f"out{partitions}"
        d = deploy(optimize(w).plan, tables, out, spark=spark, engine="native", max_rows_per_batch=5,
                   partitions=partitions)
        try:
            assert d.wait(240)
            progress = [p for p in d._queries["native"].recentProgress if p.numInputRows]
        finally:
            d.stop()
            d.cleanup()
        assert d.results() == want
        q = d.queries
        assert set(q["query"]) == set(w.query_names)
        assert q.groupby("query")["results"].sum().to_dict() == {k: len(v) for k, v in want.items()}
        assert len(progress) >= 3
        for p in progress:
            assert len(p.sources) == 1  # one replay source, shared by every relation and query
            ops = json.loads(p.json)["stateOperators"]
            assert len(ops) == 4  # q: 2 joins, p: 1, u: 1
            assert {o["numShufflePartitions"] for o in ops} == {expect}
            assert native_state_metrics(p)["late_rows"] == 0
