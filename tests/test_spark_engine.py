"""The plan engine on Spark against the reference executor and the docs/model.md §6 oracle.

Every deployment runs in the run's one local[2] session (``spark`` in tests/conftest.py), with tens of tuples and 2–3
micro-batches (``max_rows_per_batch``).  What is checked, beyond equal result sets:

* each result is produced exactly once, in the micro-batch that holds its latest tuple
  (results per batch = reference results triggered by the arrivals of that batch);
* probe messages per batch and per store = the reference's count on the same prefix;
* (where the distributed mode's shards send frames and what they hold: tests/test_sharded.py;
  its Spark jobs and stages per batch: tests/test_spark_distributed.py)
* store sizes lie between what future arrivals need and what one window (+ one batch) holds;
* stop/restart and a killed driver (a real ``mqjoin run`` process, SIGKILL) lose and
  duplicate nothing; failures are one line, and what was committed before them is kept.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from _cases import random_case
from _children import tied
from _cli import cli_command, cli_process
from _spark import TIMEOUT
from test_reference import W3  # 3 relations, windows 1, 2 and null

from mqjoin.model.errors import EngineError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import Table, read_inputs, read_results, result_counts, write_inputs
from mqjoin.model.workload import load_workload, parse_workload

pytestmark = pytest.mark.slow



# --------------------------------------------------------------------------------------------
# independent model of arrivals (docs/model.md §6: order by ts, then relation rank, then row index)
# --------------------------------------------------------------------------------------------

def arrival_seq(w, tables) -> dict[tuple[str, int], int]:
    rank = w.relation_rank
    keys = sorted((t.ts[i], rank[r], i, r) for r, t in tables.items() for i in range(len(t)))
    return {(r, i): s for s, (_, _, i, r) in enumerate(keys)}


def trigger_seqs(w, tables, result_sets) -> dict[str, dict[tuple[int, ...], int]]:
    """Query → result → arrival number of its latest tuple (the one that must produce it)."""
    seq = arrival_seq(w, tables)
    return {q: {res: max(seq[(r, i)] for r, i in zip(w.query(q).relations, res)) for res in rows}
            for q, rows in result_sets.items()}


def triggered_before(w, tables, result_sets, n: int) -> dict[str, set]:
    """The results produced by the first ``n`` arrivals."""
    return {q: {res for res, s in by.items() if s < n}
            for q, by in trigger_seqs(w, tables, result_sets).items()}


def prefix_tables(w, tables, n: int) -> dict[str, Table]:
    """The first ``n`` arrivals as tables (rows re-indexed in order: counts are unchanged)."""
    seq = arrival_seq(w, tables)
    out = {}
    for r, t in tables.items():
        keep = [i for i in range(len(t)) if seq[(r, i)] < n]
        out[r] = Table.from_columns(r, {"ts": [t.ts[i] for i in keep],
                                        **{c: [v[i] for i in keep] for c, v in t.columns.items()}})
    return out


def expected_batches(total: int, nbatches: int) -> list[int]:
    """Input rows per micro-batch when ``max_rows_per_batch = ceil(total / nbatches)``."""
    m = -(-total // nbatches)
    return [min(m, total - s) for s in range(0, total, m)]


def batch_ranges(d) -> list[tuple[int, int]]:
    """[start, end) arrival numbers of every micro-batch of a deployment that never restarted."""
    ends = list(itertools.accumulate(int(x) for x in d.batches["input_rows"]))
    return list(zip([0] + ends[:-1], ends))


# --------------------------------------------------------------------------------------------
# deployments, run once per configuration and shared by the tests that inspect them
# --------------------------------------------------------------------------------------------

@dataclass
class Run:
    w: object
    tables: dict
    plan: object
    ref: object  # RunResult of the reference executor
    d: object  # the finished Deployment
    out: Path


_RUNS: dict = {}

# (seed of tests/_cases.random_case, mode, partitioning, MIRs, micro-batches)
# five deployments (~15 s each on a loaded 2-core machine) that together cover every mode and
# policy, MIRs on and off, windows 0 / finite / null, ties, nulls and broadcast probes (the
# first test below checks that they do)
RANDOM = [
    (6041, "mqo", "single", True, 3),  # 2 MIR stores, 2 broadcast probes
    (6033, "mqo", "single", False, 2),  # MIRs off, 2 broadcast probes
    (6041, "shared", "replicas", True, 2),
    (6029, "individual", "single", True, 3),  # window 0, three queries
    (6004, "mqo", "replicas", True, 2),  # window 0
]
MAX_ROWS = 20


def _key_id(k) -> str:
    seed, mode, pol, mirs, nb = k
    return f"seed{seed}-{mode}-{pol}{'' if mirs else '-nomirs'}-{nb}b"


# where the plan's stores live: the in-process executor behind foreachBatch, or DataFrames
SPARK_MODES = ("driver", "distributed")


def deployed(key, spark, tmp_path_factory, spark_mode: str) -> Run:
    """Run ``key`` on Spark once per mode (a failure is remembered and re-raised, not re-run)."""
    if (key, spark_mode) not in _RUNS:
        seed, mode, pol, mirs, nb = key
        try:
            w, tables = random_case(seed, MAX_ROWS)
            _RUNS[(key, spark_mode)] = _deploy_case(
                w, tables, optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan, nb, spark,
                tmp_path_factory.mktemp(f"{_key_id(key)}-{spark_mode}"), spark_mode)
        except BaseException as exc:  # noqa: BLE001  (kept and raised again by every test of this case)
            _RUNS[(key, spark_mode)] = exc
    r = _RUNS[(key, spark_mode)]
    if isinstance(r, BaseException):
        raise r
    return r


def _deploy_case(w, tables, plan, nbatches, spark, out, spark_mode: str) -> Run:
    from mqjoin.runtime.spark.launch import run_spark

    total = sum(len(t) for t in tables.values())
    d = run_spark(plan, tables, out, spark=spark, max_rows_per_batch=-(-total // nbatches), timeout=TIMEOUT,
                  mode=spark_mode)
    return Run(w, tables, plan, run_reference(plan, tables), d, out)


# --------------------------------------------------------------------------------------------
# 1. results: Spark == reference == oracle, each result once, in the right micro-batch
# --------------------------------------------------------------------------------------------

def test_chosen_cases_cover_windows_ties_nulls_mirs_and_broadcasts():
    """The random cases below are only worth running if they exercise what can go wrong."""
    windows, nulls, ties, mirs, broadcast, results = set(), 0, 0, 0, 0, 0
    one_partition, repartitioned = 0, 0
    for seed, mode, pol, m, nb in RANDOM:
        w, tables = random_case(seed, MAX_ROWS)
        plan = optimize(w, mode=mode, partitioning=pol, mirs=m).plan
        routed = [e for e in plan.edges if e.kind == "probe" and e.route is not None]
        # a routed probe into a one-partition store (Spark calls it SinglePartition) ...
        one_partition += sum(plan.store[e.target].parallelism == 1 for e in routed)
        # ... and one whose travelling tuples come out of a store with another partition count
        repartitioned += sum(e.source in plan.store
                             and plan.store[e.source].parallelism != plan.store[e.target].parallelism for e in routed)
        windows |= {r.window for r in w.relations if r.name in w.used_relations}
        nulls += sum(v is None for t in tables.values() for c in t.columns.values() for v in c)
        ts = [x for t in tables.values() for x in t.ts]
        ties += len(ts) - len(set(ts))
        mirs += sum(not s.mir.is_base for s in plan.stores)
        broadcast += sum(e.kind == "probe" and e.route is None for e in plan.edges)
        results += sum(map(len, oracle_results(w, tables).values()))
        assert sum(len(t) for t in tables.values()) >= 2 * nb, "fewer tuples than micro-batches"
    assert None in windows and 0.0 in windows and len(windows - {None, 0.0}) >= 2
    assert nulls >= 5 and ties >= 20 and mirs >= 5 and broadcast >= 2 and results >= 300
    assert one_partition >= 1 and repartitioned >= 1
    assert {k[1] for k in RANDOM} == {"mqo", "individual", "shared"}
    assert {k[2] for k in RANDOM} == {"single", "replicas"} and not all(k[3] for k in RANDOM)


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
@pytest.mark.parametrize("key", RANDOM, ids=_key_id)
def test_spark_results_equal_reference_and_oracle(key, spark_mode, spark, tmp_path_factory):
    r = deployed(key, spark, tmp_path_factory, spark_mode)
    got = r.d.results()
    assert got == r.ref.result_sets(), "Spark differs from the reference executor"
    assert got == oracle_results(r.w, r.tables), "Spark differs from the oracle"
    assert read_results(r.w, r.out) == got  # OUT/<query>.parquet, the CLI's format
    # exactly once: the committed output rows are the result set, nothing written twice
    import pyarrow.dataset as ds

    rows = ds.dataset(str(r.out / "_batches"), format="parquet").to_table(columns=["query"]).to_pylist()
    assert len(rows) == sum(map(len, got.values()))
    # OUT/<query>.parquet holds each result once, and the counts are its metadata
    assert r.d.result_counts() == {q: len(s) for q, s in got.items()} == result_counts(r.w, r.out)
    # every result in the batch of its latest tuple (docs/model.md §6: produced by that arrival)
    trig = trigger_seqs(r.w, r.tables, r.ref.result_sets())
    q = r.d.queries
    assert list(r.d.batches["input_rows"]) == expected_batches(sum(len(t) for t in r.tables.values()), key[4])
    for b, (s0, s1) in zip(r.d.batches["batch"], batch_ranges(r.d)):
        for qname, by in trig.items():
            want = sum(s0 <= s < s1 for s in by.values())
            row = q[(q["batch"] == b) & (q["query"] == qname)]
            assert int(row["results"].sum()) == want, f"batch {b}, {qname}"


@pytest.mark.parametrize("engine,spark_mode", [("mqjoin", "driver"), ("mqjoin", "distributed"), ("native", "auto")])
def test_output_files_are_the_oracle_sets_and_counts_come_from_their_metadata(engine, spark_mode, spark, tmp_path,
                                                                             monkeypatch):
    """Every engine writes ``OUT/<query>.parquet`` (streamed from the committed batches, never a
    set of tuples) holding exactly the oracle's results, each once; once written, the counts
    are the files' metadata (the committed batches are not read again)."""
    import pyarrow.parquet as pq

    import mqjoin.runtime.spark.frames as frames
    from mqjoin.runtime.spark.launch import run_spark

    w, tables = random_case(6041, MAX_ROWS)
    want = oracle_results(w, tables)
    total = sum(len(t) for t in tables.values())
    d = run_spark(optimize(w).plan, tables, tmp_path / "out", spark=spark, engine=engine, mode=spark_mode,
                  max_rows_per_batch=-(-total // 2), timeout=TIMEOUT)
    assert sum(map(len, want.values())) > 0
    assert read_results(w, tmp_path / "out") == want
    for q in w.queries:
        assert pq.ParquetFile(tmp_path / "out" / f"{q.name}.parquet").metadata.num_rows == len(want[q.name])

    def unread(*a, **k):
        raise AssertionError("counts read the committed batches again")

    monkeypatch.setattr(frames, "read_parts", unread)
    monkeypatch.setattr(frames, "count_parts", unread)
    assert d.result_counts() == {q: len(s) for q, s in want.items()} == d.summary()["results"]


def test_hand_case_window_boundaries_and_ties(spark, tmp_path):
    """docs/model.md §6 by hand (the reference's hand case): a tuple exactly one window old joins,
    ties at ts 3 split across two micro-batches; the results arrive in the right batches."""
    from mqjoin.runtime.spark.launch import run_spark

    w = parse_workload(W3)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 3.0, 5.0], "a": [1, 1, 1]}),
        "S": Table.from_columns("S", {"ts": [1.0, 3.0], "a": [1, 1], "b": [7, 7]}),
        "T": Table.from_columns("T", {"ts": [3.0, 100.0], "b": [7, 7]}),
    }
    # arrivals: R0@0 S0@1 | R1@3 S1@3 | T0@3 R2@5 | T1@100
    d = run_spark(optimize(w, partitioning="replicas").plan, tables, tmp_path, spark=spark,
                  max_rows_per_batch=2, timeout=TIMEOUT)
    assert d.results()["q"] == {(1, 0, 0), (1, 1, 0), (2, 1, 0)} == oracle_results(w, tables)["q"]
    assert list(d.batches["input_rows"]) == [2, 2, 2, 1]
    # (R1,S0,T0) and (R1,S1,T0) are produced by T0, (R2,S1,T0) by R2: all in batch 2
    assert list(d.queries.sort_values("batch")["results"]) == [0, 0, 3, 0]


# --------------------------------------------------------------------------------------------
# 2. probe messages: the reference's count, per batch and per store
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spark_mode", SPARK_MODES)
@pytest.mark.parametrize("key", RANDOM, ids=_key_id)
def test_probe_messages_equal_the_reference(key, spark_mode, spark, tmp_path_factory):
    r = deployed(key, spark, tmp_path_factory, spark_mode)
    b, st = r.d.batches, r.d.stores
    assert int(b["probe_messages"].sum()) == r.ref.total_probe_messages
    per_store = st.groupby("store")["messages"].sum().to_dict()
    assert set(per_store) == {s.id for s in r.plan.stores}
    assert {s: int(m) for s, m in per_store.items() if m} == {s: m for s, m in r.ref.store_messages.items() if m}
    # per micro-batch: what the reference sends for the same prefix of arrivals
    cumulative = list(itertools.accumulate(int(x) for x in b["probe_messages"]))
    for (_s0, s1), got in zip(batch_ranges(r.d), cumulative):
        want = run_reference(r.plan, prefix_tables(r.w, r.tables, s1), collect=False).total_probe_messages
        assert got == want, f"messages after {s1} arrivals"
    assert r.ref.total_probe_messages > 0


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
@pytest.mark.parametrize("key", RANDOM, ids=_key_id)
def test_messages_and_rows_per_partition_equal_the_vectorised_executor(key, spark_mode, spark, tmp_path_factory):
    """``mqjoin run --json``'s ``partitions``: per logical partition of every store, the probe
    messages of the run and the rows after its last batch — the vectorised executor's over
    the whole input (the distributed mode sums them over its shards)."""
    from mqjoin.runtime.partitions import PartitionTally, store_partitions
    from mqjoin.runtime.vector import Arrivals, BatchExecutor

    r = deployed(key, spark, tmp_path_factory, spark_mode)
    got = r.d.summary()["partitions"]
    ex = BatchExecutor(r.plan)
    ex.tally = PartitionTally(ex)
    for frames in Arrivals(r.w, r.tables, ex.source_need).batches():
        ex.feed(frames)
    want = store_partitions(ex, ex.tally)
    assert set(got) == set(want) == {s.id for s in r.plan.stores}
    for sid, d in want.items():
        assert got[sid]["partitions"] == d["partitions"] and got[sid]["messages"] == d["messages"], sid
        assert got[sid]["rows"] == d["rows"], sid
    assert sum(sum(d["messages"]) for d in got.values()) == r.ref.total_probe_messages > 0


# --------------------------------------------------------------------------------------------
# 3. exactly once across a stop/restart and a killed driver
# --------------------------------------------------------------------------------------------

def _wait_for(cond, timeout: float, what: str, poll: float = 0.1):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
def test_stop_and_restart_from_checkpoint(spark_mode, spark, tmp_path):
    import pyarrow.dataset as ds

    from mqjoin.runtime.spark.launch import Deployment, Pacing

    w, tables = random_case(6041, MAX_ROWS)  # two MIR stores: restored by the restart's rebuild
    plan = optimize(w).plan
    assert any(not s.mir.is_base for s in plan.stores)
    ref = run_reference(plan, tables).result_sets()
    total = sum(len(t) for t in tables.values())
    ck, out = tmp_path / "ck", tmp_path / "out"
    pacing = Pacing(rate=total / 3, max_rows_per_batch=-(-total // 3), trigger_seconds=1.0)

    first = Deployment(plan, tables, out, spark=spark, checkpoint=ck, pacing=pacing, mode=spark_mode)
    seen = []
    first.subscribe(lambda ev: seen.append(ev) if ev["kind"] == "batch" else None)
    first.start()
    _wait_for(lambda: seen, TIMEOUT, "the first micro-batch")
    commits = ck / "spark" / "plan" / "commits"
    b0 = seen[0]["batch"]  # (an empty batch 0 has no report)
    _wait_for(lambda: (commits / str(b0)).exists(), 60, f"Spark's commit of batch {b0}")
    first.stop()
    assert first.status == "stopped" and not first.done
    n1 = int(first.batches["input_rows"].sum())
    assert 0 < n1 < total
    assert first.results() == triggered_before(w, tables, ref, n1), "a stopped run keeps exactly its batches"
    # the stop may land after a batch's output and report but before Spark's commit: Spark runs
    # that batch again after the restart (its output is overwritten, not added)
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    fb = first.batches
    n_committed = int(fb[fb["batch"] <= last]["input_rows"].sum())
    assert n_committed > 0

    second = Deployment(plan, tables, out, spark=spark, checkpoint=ck, pacing=pacing, mode=spark_mode)
    events = []

    def on_event(ev):
        if ev["kind"] == "batch":  # the batch's output is committed when its report arrives
            ev = {**ev, "committed": (out / "_batches" / f"batch={ev['batch']}" / "_SUCCESS").exists()}
        events.append(ev)

    second.subscribe(on_event)
    second.start()
    assert second.wait(TIMEOUT)
    second.stop()
    assert second.status == "finished"
    assert second.results() == ref
    lat = second.queries.dropna(subset=["latency_mean"])  # paced: arrivals differ within a batch
    assert len(lat) and (lat["latency_mean"] <= lat["latency_max"]).all()
    assert (lat["latency_p95"] <= lat["latency_max"]).all()
    b = second.batches
    cols = ["batch", "input_rows", "min_ts", "rebuilt"]
    why = f"first run:\n{first.batches[cols]}\nrestart:\n{b[cols]}"
    assert int(b["batch"].iloc[0]) == last + 1, why
    # the stores of the committed batches are rebuilt once (distributed: from the replay log;
    # driver: from the state journal)
    assert bool(b["rebuilt"].iloc[0]) and not b["rebuilt"].iloc[1:].any(), why
    assert n_committed + int(b["input_rows"].sum()) == total, why  # nothing read twice, nothing skipped
    rows = ds.dataset(str(out / "_batches"), format="parquet").count_rows()
    assert rows == sum(map(len, ref.values())), "a result was written twice"
    # the live feed: one "batch" event per micro-batch, after its output was committed
    batch_events = [e for e in events if e["kind"] == "batch"]
    assert [e["batch"] for e in batch_events] == list(b["batch"])
    assert all(e["committed"] for e in batch_events)
    assert all({"input_rows", "results", "probe_messages", "queries", "stores"} <= set(e) for e in batch_events)
    assert [e["status"] for e in events if e["kind"] == "status"][-1] == "finished"


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
def test_killed_driver_resumes_from_checkpoint(spark_mode, tmp_path):
    import pyarrow.dataset as ds

    w0, tables0 = random_case(6030, MAX_ROWS)
    wfile, data, out, ck = tmp_path / "w.yaml", tmp_path / "data", tmp_path / "out", tmp_path / "ck"
    wfile.write_text(w0.to_yaml())
    write_inputs(tables0, data)
    w = load_workload(wfile)
    tables = read_inputs(w, data)
    ref = run_reference(optimize(w).plan, tables).result_sets()
    assert sum(map(len, ref.values())) > 0
    total = sum(len(t) for t in tables.values())
    cmd = cli_command("run", wfile, "--data", data, "--out", out, "--engine", "spark", "--master", "local[2]",
                      "--checkpoint", ck, "--spark-mode", spark_mode, "--rate", total / 4,
                      "--max-rows-per-batch", -(-total // 3), "--timeout", TIMEOUT)
    proc = subprocess.Popen(tied(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: list(out.glob("_batches/batch=*/_SUCCESS")) or proc.poll() is not None, TIMEOUT,
                  "a committed micro-batch")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not any((out / f"{q.name}.parquet").exists() for q in w.queries)  # killed mid-stream

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 100)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_results(w, out) == ref == oracle_results(w, tables)
    rows = ds.dataset(str(out / "_batches"), format="parquet").count_rows()
    assert rows == sum(map(len, ref.values())), "a result was written twice"


# --------------------------------------------------------------------------------------------
# 4. errors: one line, exit code 2, committed results kept
# --------------------------------------------------------------------------------------------

def _one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqjoin: error:"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "\tat " not in r.stderr
    return lines[0]


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    wfile = tmp_path / "w.yaml"
    wfile.write_text("defaults: {selectivity: 0.5}\n"
                     "relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}\n"
                     "queries: {q: 'R(a), S(a, b), T(b)'}\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "R.csv").write_text("ts,a\n0,1\n1,2\n")
    (data / "S.csv").write_text("ts,a\n0,1\n")  # no column b
    (data / "T.csv").write_text("ts,b\n0,1\n")
    base = ["run", wfile, "--out", tmp_path / "out", "--engine", "spark", "--master", "local[2]"]
    line = _one_line_error(cli_process(*base, "--data", data))
    assert "'b'" in line and "S" in line
    line = _one_line_error(cli_process(*base, "--data", tmp_path / "missing"))
    assert "missing" in line and "does not exist" in line
    (data / "S.csv").write_text("ts,a,b\n0,1,1\n")  # good data, bad pacing (checked before Spark starts)
    for engine in ("spark", "native"):
        line = _one_line_error(cli_process("run", wfile, "--data", data, "--out", tmp_path / "out", "--engine", engine,
                                           "--rate", "-5"))
        assert "rate must be positive" in line
    assert not (tmp_path / "out").exists()


_BOGUS: dict = {}


def _bogus_master_run(tmp_path_factory):
    if "r" not in _BOGUS:
        d = tmp_path_factory.mktemp("bogus")
        (d / "w.yaml").write_text("defaults: {selectivity: 0.5}\nrelations: {R: {attributes: [a]}, "
                                  "S: {attributes: [a]}}\nqueries: {q: 'R(a), S(a)'}\n")
        (d / "data").mkdir()
        (d / "data" / "R.csv").write_text("ts,a\n0,1\n")
        (d / "data" / "S.csv").write_text("ts,a\n0,1\n")
        _BOGUS["r"] = cli_process("run", d / "w.yaml", "--data", d / "data", "--out", d / "out", "--engine", "spark",
                                  "--master", "bogus://nowhere", timeout=120)
    return _BOGUS["r"]


def test_cli_bad_master_is_one_line_and_exit_2(tmp_path_factory):
    line = _one_line_error(_bogus_master_run(tmp_path_factory))
    assert "could not start Spark (bogus://nowhere)" in line


def test_cli_bad_master_error_says_why(tmp_path_factory):
    line = _one_line_error(_bogus_master_run(tmp_path_factory))
    reason = line.split("could not start Spark (bogus://nowhere):", 1)[-1]
    assert "master" in reason.lower(), line


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
def test_failing_batch_is_one_clear_error_and_committed_results_stay(spark_mode, spark, tmp_path):
    """The write of micro-batch 1 fails inside Spark (a Java IOException: its output path is a
    dangling symlink); batch 0 was committed before."""
    from mqjoin.runtime.spark.launch import Deployment, Pacing

    w, tables = random_case(6030, MAX_ROWS)
    plan = optimize(w, partitioning="replicas").plan
    ref = run_reference(plan, tables).result_sets()
    out = tmp_path / "out"
    (out / "_batches").mkdir(parents=True)
    os.symlink(tmp_path / "nowhere" / "x", out / "_batches" / "batch=1")
    total = sum(len(t) for t in tables.values())
    d = Deployment(plan, tables, out, spark=spark, pacing=Pacing(max_rows_per_batch=-(-total // 3)), mode=spark_mode)
    events = []
    d.subscribe(events.append)
    d.start()
    with pytest.raises(EngineError) as err:
        d.wait(TIMEOUT)
    d.stop()
    d.cleanup()
    msg = str(err.value)
    assert "\n" not in msg and "\tat " not in msg and "Traceback" not in msg and len(msg) < 600, msg
    assert msg.startswith("the mqjoin deployment failed: ") and "batch=1" in msg, msg
    assert d.status == "failed" and d.error is err.value
    assert any(e["kind"] == "status" and e["status"] == "failed" and e["error"] == msg for e in events)
    assert list(d.batches["batch"]) == [0]
    n0 = int(d.batches["input_rows"].iloc[0])
    kept = d.results()
    assert kept == triggered_before(w, tables, ref, n0), "batch 0's results must stay readable"
    assert sum(map(len, kept.values())) > 0


def test_python_error_in_a_batch_is_recorded_with_its_own_message(spark, tmp_path):
    """A Python error raised inside the foreachBatch function (e.g. bad data found by the
    engine) is recorded as it is — not as the Py4J/Java wrapper Spark turns it into — and
    re-raised so that Spark stops the query."""
    from mqjoin.model.errors import DataError
    from mqjoin.runtime.spark.launch import Deployment

    w = parse_workload(W3)
    tables = {r.name: Table.from_columns(r.name, {"ts": [0.0], **{a: [1] for a in r.attributes}}) for r in w.relations}
    d = Deployment(optimize(w).plan, tables, tmp_path / "out", spark=spark, checkpoint=tmp_path / "ck")  # not started
    events = []
    d.subscribe(events.append)

    def bad_batch(df, batch_id):
        raise DataError("value 'x' of column a is not a number (injected)")

    with pytest.raises(DataError):
        d._guard(bad_batch)(None, 1)
    assert isinstance(d.error, EngineError)
    assert str(d.error) == "the mqjoin deployment failed: value 'x' of column a is not a number (injected)"
    # no query runs (it was never started): the failure ended the run
    assert d.status == "failed" and events[-1] == {"kind": "status", "status": "failed", "error": str(d.error),
                                                   "ended": True}


def test_pacing_is_validated_before_spark_starts(tmp_path):
    from mqjoin.model.errors import DataError
    from mqjoin.runtime.spark.launch import Deployment, Pacing

    w = parse_workload(W3)
    tables = {r.name: Table.from_columns(r.name, {"ts": [0.0], **{a: [1] for a in r.attributes}}) for r in w.relations}
    for pacing, msg in ((Pacing(rate=-5.0), "rate must be positive"), (Pacing(speedup=0.0), "speedup must be positive"),
                        (Pacing(max_rows_per_batch=0), "max rows per batch must be at least 1")):
        with pytest.raises(DataError, match=msg):
            Deployment(optimize(w).plan, tables, tmp_path / "out", spark=object(), checkpoint=tmp_path / "ck",
                       pacing=pacing)


# --------------------------------------------------------------------------------------------
# 5. metrics
# --------------------------------------------------------------------------------------------

def _live(t: Table, i: int, window, since: float) -> bool:
    return window is None or t.ts[i] >= since - window


def _store_rows_bounds(w, tables, store, arrived: int, seq, t_needed: float, t_kept: float | None) -> tuple[int, int]:
    """(needed, allowed) rows of ``store`` after the first ``arrived`` arrivals.

    needed: entries future arrivals (ts ≥ ``t_needed``) can still join; allowed: entries of
    arrived tuples whose every component is within its window of ``t_kept`` (the smallest ts
    of the last batch that brought tuples of the store's relations) — one window plus one
    batch.  An MIR entry is a combination of tuples agreeing on its classes."""
    rels = store.mir.relations
    win = {r: w.relation(r).window for r in rels}
    arrived_rows = {r: [i for i in range(len(tables[r])) if seq[(r, i)] < arrived] for r in rels}

    def count(since: float) -> int:
        cand = [[i for i in arrived_rows[r] if _live(tables[r], i, win[r], since)] for r in rels]
        n = 0
        for combo in itertools.product(*cand):
            pick = dict(zip(rels, combo))
            ok = True
            for c in store.mir.classes:
                vals = [tables[a.relation].value(a.name, pick[a.relation]) for a in c.members]
                if any(v is None for v in vals) or any(v != vals[0] for v in vals):
                    ok = False
                    break
            if ok:  # §6 within the entry: every component within its window of the latest
                top = max(tables[r].ts[pick[r]] for r in rels)
                ok = all(win[r] is None or top - tables[r].ts[pick[r]] <= win[r] for r in rels)
            n += ok
        return n

    return count(t_needed), (0 if t_kept is None else count(t_kept))


@pytest.mark.parametrize("spark_mode", SPARK_MODES)
@pytest.mark.parametrize("key", RANDOM, ids=_key_id)
def test_metrics_batches_queries_stores_summary(key, spark_mode, spark, tmp_path_factory):
    r = deployed(key, spark, tmp_path_factory, spark_mode)
    d, total = r.d, sum(len(t) for t in r.tables.values())
    b, q, st = d.batches, d.queries, d.stores
    # batches: one row per micro-batch, all input counted once
    sizes = expected_batches(total, key[4])
    assert list(b["batch"]) == list(range(len(sizes))) and list(b["input_rows"]) == sizes
    assert (b["seconds"] > 0).all() and (b["rows_per_s"] > 0).all() and not b["rebuilt"].any()
    seq = arrival_seq(r.w, r.tables)
    by_seq = sorted(seq, key=seq.get)
    for (s0, s1), (_, row) in zip(batch_ranges(d), b.iterrows()):
        ts = [r.tables[rel].ts[i] for rel, i in by_seq[s0:s1]]
        assert (row["min_ts"], row["max_ts"]) == (min(ts), max(ts))
    assert list(b["results"]) == list(q.groupby("batch")["results"].sum())
    # queries: one row per (batch, query); latency ≥ 0 where there are results, none otherwise
    assert len(q) == len(sizes) * len(r.w.queries)
    with_res = q[q["results"] > 0]
    assert len(with_res) > 0
    assert (with_res["latency_mean"] >= 0).all() and (with_res["latency_max"] >= with_res["latency_mean"]).all()
    assert (with_res["latency_max"] >= with_res["latency_p95"]).all()
    # unpaced, every tuple of a micro-batch has the same arrival time: one latency, exactly
    assert (with_res["latency_mean"] == with_res["latency_max"]).all(), with_res[["latency_mean", "latency_max"]]
    assert (with_res["latency_p95"] == with_res["latency_max"]).all()
    assert q[q["results"] == 0]["latency_mean"].isna().all()
    # stores: every store every batch, rows between what is needed and one window + a batch
    assert len(st) == len(sizes) * len(r.plan.stores)
    assert list(b["state_rows"]) == list(st.groupby("batch")["rows"].sum())
    windowed_nonempty = 0
    for (_s0, s1), (_, row) in zip(batch_ranges(d), b.iterrows()):
        for store in r.plan.stores:
            rows = int(st[(st["batch"] == row["batch"]) & (st["store"] == store.id)]["rows"].iloc[0])
            # t_kept: min ts of the last batch up to this one with tuples of the store's relations
            t_kept = None
            for (a0, a1), (_, brow) in zip(batch_ranges(d), b.iterrows()):
                if a1 <= s1 and any(rel in store.mir.relations for rel, _ in by_seq[a0:a1]):
                    t_kept = brow["min_ts"]
            need, allowed = _store_rows_bounds(r.w, r.tables, store, s1, seq, row["max_ts"], t_kept)
            assert need <= rows <= allowed, (store.id, int(row["batch"]), need, rows, allowed)
            if any(r.w.relation(x).window is not None for x in store.mir.relations) and need > 0:
                windowed_nonempty += 1
    assert windowed_nonempty > 0
    # summary: the figures of the run, consistent with the frames
    s = d.summary()
    assert {"engine", "input_tuples", "batches", "busy_seconds", "throughput", "latency_mean", "latency_p95_max",
            "results", "ui", "probe_messages", "state_rows_max", "state_bytes_max"} <= set(s)
    assert s["engine"] == "mqjoin" and s["input_tuples"] == total and s["batches"] == len(sizes)
    assert s["mode"] == spark_mode
    # the cost of a micro-batch in Spark jobs: none when the stores live in the driver's
    # executor, whatever the plan (the driver reads its slice of the replay log itself); the
    # distributed mode's shards take at least one per batch
    if spark_mode == "driver":
        assert set(b["jobs"]) == {0} and set(b["stages"]) == {0}, b[["jobs", "stages"]]
    else:
        assert (b["jobs"] >= 1).all() and (b["stages"] >= b["jobs"]).all()
    assert s["results"] == {k: len(v) for k, v in r.ref.result_sets().items()}
    assert s["probe_messages"] == r.ref.total_probe_messages
    assert s["state_rows_max"] == int(b["state_rows"].max()) and s["state_bytes_max"] > 0
    assert s["busy_seconds"] == pytest.approx(float(b["seconds"].sum())) and s["throughput"] > 0
    assert s["latency_mean"] >= 0 and s["latency_p95_max"] >= 0
    assert s["ui"] == d.ui_url and (s["ui"] is None or s["ui"].startswith("http"))
    assert json.dumps(s, default=str)  # --json prints it
    # Spark's own progress reports reach the deployment (StreamingQueryListener, asynchronous)
    _wait_for(lambda: len(d.progress) > 0, 30, "a progress report from the listener")
    p = d.progress
    assert set(p["query"]) == {"plan"} and set(p["batch"]) <= set(b["batch"]) and (p["input_rows"] >= 0).all()


def test_named_master_is_not_silently_ignored(spark):
    """One Spark context per process: a master other than the running one's is refused with
    the reason (Spark's getOrCreate would return the running session and ignore it)."""
    from mqjoin.runtime.spark.session import spark_session

    running = spark.sparkContext.master
    with pytest.raises(EngineError) as err:
        spark_session("bogus://nowhere")
    assert "bogus://nowhere" in str(err.value) and running in str(err.value) and "already running" in str(err.value)
    for same in (spark_session(), spark_session(running)):  # no master, or the running one: reused
        assert same.sparkContext.applicationId == spark.sparkContext.applicationId


def test_warm_up_runs_a_first_batch_and_leaves_no_query(spark):
    """The start ahead of a deploy (DeployPanel.prepare) runs a tiny deployment's path to its
    first batch and stops its streaming query."""
    from mqjoin.runtime.spark.session import warm_up

    before = {str(q.id) for q in spark.streams.active}
    assert warm_up(spark, timeout=TIMEOUT)
    assert {str(q.id) for q in spark.streams.active} == before
