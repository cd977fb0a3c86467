"""The Spark engines against the reference executor and the A6 oracle (slow: a local Spark).

Every deployment here runs in one shared local[2] session with a few micro-batches; the
restart test kills a real driver process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from _cases import cases  # noqa: E402

from mqjoin.errors import DataError, EngineError  # noqa: E402
from mqjoin.optimizer import optimize  # noqa: E402
from mqjoin.oracle import oracle_results  # noqa: E402
from mqjoin.runtime.reference import run_reference  # noqa: E402
from mqjoin.tables import Table, read_results, write_inputs  # noqa: E402
from mqjoin.workload import parse_workload  # noqa: E402

pytestmark = pytest.mark.slow

W3 = """
defaults: {selectivity: 0.5, parallelism: 2}
relations:
  R: {attributes: [a], window: 1}
  S: {attributes: [a, b], window: 2}
  T: {attributes: [b]}
queries: {q: "R(a), S(a,b), T(b)"}
"""


@pytest.fixture(scope="module")
def spark():
    from mqjoin.runtime.spark.session import spark_session

    return spark_session("local[2]")


def run(plan, tables, out, spark, engine="mqjoin", **kw):
    from mqjoin.runtime.spark.deploy import run_spark

    total = sum(len(t) for t in tables.values())
    kw.setdefault("max_rows_per_batch", max(1, -(-total // 3)))  # three micro-batches
    return run_spark(plan, tables, out, spark=spark, engine=engine, timeout=300, **kw)


CONFIGS = [("mqo", "single", True), ("individual", "replicas", True), ("shared", "single", True),
           ("mqo", "replicas", False), ("mqo", "replicas", True), ("shared", "replicas", True)]
RANDOM = cases(len(CONFIGS), start=3000)


@pytest.mark.parametrize("case,config", list(zip(RANDOM, CONFIGS)), ids=[f"seed{c[0]}-{'/'.join(map(str, k))}"
                                                                         for c, k in zip(RANDOM, CONFIGS)])
def test_plan_on_spark_equals_reference_and_oracle(case, config, spark, tmp_path):
    seed, w, tables = case
    mode, pol, mirs = config
    plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
    ref = run_reference(plan, tables)
    d = run(plan, tables, tmp_path, spark)
    assert d.results() == ref.result_sets() == oracle_results(w, tables)
    b, st = d.batches, d.stores
    assert b["input_rows"].sum() == sum(len(t) for t in tables.values())
    # probe messages shipped in Spark = the reference's count (routed 1, broadcast p per tuple)
    assert int(b["probe_messages"].sum()) == ref.total_probe_messages
    by_store = st.groupby("store")["messages"].sum().to_dict() if len(st) else {}
    assert {s: m for s, m in by_store.items() if m} == {s: m for s, m in ref.store_messages.items() if m}
    # the written output is the CLI's format
    assert read_results(w, tmp_path) == ref.result_sets()


def test_hand_case_windows_and_ties_both_engines(spark, tmp_path):
    w = parse_workload(W3)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 3.0, 5.0], "a": [1, 1, 1]}),
        "S": Table.from_columns("S", {"ts": [1.0, 3.0], "a": [1, 1], "b": [7, 7]}),
        "T": Table.from_columns("T", {"ts": [3.0, 100.0], "b": [7, 7]}),
    }
    want = {(1, 0, 0), (1, 1, 0), (2, 1, 0)}
    plan = optimize(w).plan
    assert run(plan, tables, tmp_path / "plan", spark, max_rows_per_batch=2).results()["q"] == want
    assert run(plan, tables, tmp_path / "native", spark, engine="native", max_rows_per_batch=2).results()["q"] == want


@pytest.mark.parametrize("case", cases(3, start=3100), ids=lambda c: f"seed{c[0]}")
def test_native_baseline_equals_oracle(case, spark, tmp_path):
    seed, w, tables = case
    d = run(optimize(w).plan, tables, tmp_path, spark, engine="native")
    assert d.results() == oracle_results(w, tables)
    assert len(d.progress) > 0  # Spark's progress reports reached the listener
    assert (d.queries.dropna(subset=["latency_mean"])["latency_mean"] >= 0).all()


def _demo():
    from mqjoin.cli import _workload
    from mqjoin.synthetic import uniform_streams

    w = _workload("demo.yaml")
    return w, uniform_streams(w, duration=0.5, seed=1)


def test_routed_probes_ship_only_travelling_tuples_and_broadcasts_broadcast(spark, tmp_path):
    from mqjoin.runtime.spark.engine import DeltaJoinEngine, _BatchState, column_types
    from mqjoin.runtime.spark.source import build_replay_log, spark_schema, write_replay_log
    from pyspark.sql import functions as F

    w, tables = _demo()
    plan = optimize(w).plan
    log = build_replay_log(w, tables)
    path = str(write_replay_log(log, tmp_path / "replay.parquet"))
    eng = DeltaJoinEngine(spark, plan, path, str(tmp_path / "out"), column_types(spark_schema(log.schema)))
    batch = spark.read.parquet(path).withColumn("_arrival", F.lit(0.0))
    eng.process(batch.filter(F.col("_seq") < len(log) // 2), 0)  # stores now hold checkpointed rows
    batch.filter(F.col("_seq") >= len(log) // 2).createOrReplaceTempView(eng._view("batch", 0))
    routed = [e for e in plan.edges if e.kind == "probe" and e.route is not None and plan.nodes]
    broadcast = [e for e in plan.edges if e.kind == "probe" and e.route is None]
    assert routed and broadcast
    for e in routed + broadcast:
        bs = _BatchState(stores=dict(eng.stores))
        src = eng._probe_result(e.label, bs)
        text = eng.ss.sql(f"SELECT * FROM {src} x")._jdf.queryExecution().executedPlan().toString()
        parts = text.split("InMemoryRelation")  # this probe's join; cached parents lie below it
        top = parts[1] if text.startswith("InMemoryTableScan") else parts[0]
        assert ("ShuffledHashJoin" if e.route is not None else "BroadcastHashJoin") in top, text
        assert ("BroadcastExchange" in top) == (e.route is None), text
        # the store is scanned where it lies: no Exchange between a store scan and its join
        for parent in _store_scan_parents(text):
            assert "Join" in parent, text
    eng.close()


def _store_scan_parents(plan_text: str) -> list[str]:
    """For every scan of a checkpointed store, the nearest operator above it that is not a
    Filter/Project (the join that reads it, or an Exchange if Spark reshuffled the store)."""
    lines = plan_text.splitlines()

    def depth(line: str) -> int:  # the column of the node's "+- " / ":- " marker
        marks = [m.start() for m in re.finditer(r"[+:]- ", line)]
        return marks[-1] if marks else -1

    out = []
    for i, line in enumerate(lines):
        if "Scan ExistingRDD" not in line:
            continue
        d = depth(line)
        for up in reversed(lines[:i]):
            if depth(up) < d:
                d = depth(up)
                if not any(k in up for k in ("Filter", "Project", "ColumnarToRow")):
                    out.append(up.strip())
                    break
    assert out, plan_text
    return out


def test_stop_and_restart_from_checkpoint_loses_and_duplicates_nothing(spark, tmp_path):
    import pyarrow.dataset as ds

    from mqjoin.runtime.spark.deploy import deploy

    w, tables = _demo()
    plan = optimize(w).plan
    ref = run_reference(plan, tables).result_sets()
    total = sum(len(t) for t in tables.values())
    ck, out = tmp_path / "ck", tmp_path / "out"
    first = deploy(plan, tables, out, spark=spark, checkpoint=ck, max_rows_per_batch=total // 4)
    seen = []
    first.subscribe(lambda ev: seen.append(ev) if ev["kind"] == "batch" else None)
    deadline = time.time() + 120
    while not seen and time.time() < deadline:
        time.sleep(0.1)
    first.stop()
    assert seen and not first.done, "the first run should stop mid-stream"
    partial = first.results()
    assert 0 < sum(map(len, partial.values())) < sum(map(len, ref.values()))
    second = deploy(plan, tables, out, spark=spark, checkpoint=ck, max_rows_per_batch=total // 4)
    assert second.wait(300)
    second.stop()
    assert second.results() == ref
    assert second.batches["rebuilt"].iloc[0]  # stores were rebuilt from the replay log
    assert second.batches["input_rows"].sum() + first.batches["input_rows"].sum() >= total
    rows = ds.dataset(str(out / "_batches"), format="parquet").count_rows()
    assert rows == sum(map(len, ref.values()))  # no result written twice


def test_killed_driver_resumes_from_checkpoint(tmp_path):
    w, tables = _demo()
    data, out, ck = tmp_path / "data", tmp_path / "out", tmp_path / "ck"
    write_inputs(tables, data)
    ref = run_reference(optimize(w).plan, tables).result_sets()
    total = sum(len(t) for t in tables.values())
    cmd = [sys.executable, "-m", "mqjoin.cli", "run", "demo.yaml", "--data", str(data), "--out", str(out),
           "--engine", "spark", "--master", "local[2]", "--checkpoint", str(ck),
           "--max-rows-per-batch", str(total // 5), "--timeout", "300"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 180
    while time.time() < deadline and not list((out / "_batches").glob("batch=*/_SUCCESS")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-stream
    proc.wait()
    assert list((out / "_batches").glob("batch=*/_SUCCESS")), "no batch committed before the kill"
    assert not (out / "q1.parquet").exists()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    assert read_results(w, out) == ref


def test_failing_batch_surfaces_one_line_error_and_keeps_committed_results(spark, tmp_path, monkeypatch):
    from mqjoin.runtime.spark import engine as E
    from mqjoin.runtime.spark.deploy import deploy

    w, tables = _demo()
    plan = optimize(w).plan
    original = E.DeltaJoinEngine._run

    def failing(self, batch, batch_id, *a, **kw):
        if batch_id == 1:
            raise DataError("value 'x' of column a is not a number (injected)")
        return original(self, batch, batch_id, *a, **kw)

    monkeypatch.setattr(E.DeltaJoinEngine, "_run", failing)
    total = sum(len(t) for t in tables.values())
    d = deploy(plan, tables, tmp_path, spark=spark, max_rows_per_batch=total // 3)
    with pytest.raises(EngineError) as err:
        d.wait(120)
    d.stop()
    msg = str(err.value)
    assert "injected" in msg and "\n" not in msg and "at org.apache" not in msg
    assert d.status == "failed"
    assert sum(map(len, d.results().values())) > 0  # batch 0 was committed and is kept


def test_metrics_and_live_events(spark, tmp_path):
    from mqjoin.runtime.spark.deploy import deploy

    w, tables = _demo()
    d = deploy(optimize(w).plan, tables, tmp_path, spark=spark,
               max_rows_per_batch=-(-sum(len(t) for t in tables.values()) // 3))
    events = []
    d.subscribe(events.append)
    assert d.wait(300)
    d.stop()
    b, q, st = d.batches, d.queries, d.stores
    assert len(b) == 3 and [e["batch"] for e in events if e["kind"] == "batch"] == list(b["batch"])
    assert (b["seconds"] > 0).all() and (b["state_bytes"] > 0).all()
    assert (q.dropna(subset=["latency_mean"])["latency_mean"] >= 0).all()
    assert (q["results"] > 0).any()
    # windows of 1 s over 0.5 s of data: nothing is evicted, a base store holds all its tuples
    last = st[st["batch"] == b["batch"].max()].set_index("store")["rows"]
    for s in plan_base_stores(d.plan):
        assert last[s.id] == len(tables[s.mir.relations[0]])
    s = d.summary()
    assert s["throughput"] > 0 and s["state_rows_max"] > 0 and s["results"] == d.result_counts()
    assert d.ui_url and d.ui_url.startswith("http")
    assert any(e["kind"] == "progress" for e in events)  # the StreamingQueryListener feeds it too


def plan_base_stores(plan):
    return [s for s in plan.stores if s.mir.is_base]


def test_bad_input_is_a_one_line_cli_error(tmp_path):
    bad = [
        (["run", "demo.yaml", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--engine", "spark"],
         "does not exist"),
        (["run", "demo.yaml", "--data", str(tmp_path), "--out", str(tmp_path / "o"), "--engine", "native",
          "--rate", "-5"], ""),
    ]
    (tmp_path / "R.csv").write_text("ts,a\n0,1\n")
    for args, needle in bad:
        r = subprocess.run([sys.executable, "-m", "mqjoin.cli", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mqjoin: error:"), r.stderr
        assert needle in lines[0]


def test_pacing_is_validated_before_spark_starts(tmp_path):
    from mqjoin.runtime.spark.deploy import Deployment, Pacing

    w, tables = _demo()
    with pytest.raises(DataError, match="rate must be positive"):
        Deployment(optimize(w).plan, tables, Path(tmp_path), pacing=Pacing(rate=0.0 - 1))
