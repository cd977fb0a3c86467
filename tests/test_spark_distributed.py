"""The distributed Spark mode (:class:`~mqjoin.runtime.spark.distributed.ShardedEngine`): a
micro-batch is one Spark job whose stages follow the waves of the plan, the driver receives
no store row, and shards whose segment files are gone are rebuilt and the batch run again.

Stages are counted from Spark's status tracker (the engine's ``jobs``/``stages`` per batch)
and checked against the jobs the Spark UI's REST API lists for the batch's job group.  What
reaches the driver is what the engine's RDDs ``collect``: every collected value must be a
shard's report — counts and a bounded sample of arrival times — or a shard's state that
names its stores' segment files and holds no entry, whatever the stores hold.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from _cases import random_case
from _spark import TIMEOUT

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results

pytestmark = pytest.mark.slow

# (seed of tests/_cases.random_case, mode, partitioning, MIRs, micro-batches): plans of two and
# more waves (MIR stores fed by 2-hop probes, probes feeding probes)
CASES = [
    (6041, "mqo", "single", True, 3),
    (6004, "mqo", "replicas", True, 2),
]


def _jobs(spark) -> list[dict]:
    """Spark's jobs of the application, from the UI's REST API."""
    import json
    import urllib.request

    sc = spark.sparkContext
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/jobs", timeout=60) as r:
        return json.load(r)


def _cost_per_batch(jobs: list[dict], after: int) -> dict[int, tuple[int, int]]:
    """batch → (jobs, stages) of the distributed engine's job groups, for jobs after ``after``."""
    import re

    groups: dict[int, tuple[set, set]] = {}
    for j in jobs:
        m = re.fullmatch(r"mqjoin-ShardedEngine-[0-9a-f]+-(\d+)", j.get("jobGroup") or "")
        if m and j["jobId"] > after:
            ids, stages = groups.setdefault(int(m.group(1)), (set(), set()))
            ids.add(j["jobId"])
            stages.update(j["stageIds"])
    return {b: (len(ids), len(stages)) for b, (ids, stages) in groups.items()}


def _key_id(k) -> str:
    seed, mode, pol, mirs, nb = k
    return f"seed{seed}-{mode}-{pol}{'' if mirs else '-nomirs'}-{nb}b"


@pytest.mark.parametrize("key", CASES, ids=_key_id)
def test_a_batch_is_one_job_of_waves_and_no_store_row_reaches_the_driver(key, spark, monkeypatch, tmp_path):
    import numpy as np
    from pyspark.rdd import RDD

    from mqjoin.runtime.spark.launch import run_spark
    import pickle

    from mqjoin.runtime.spark.sharded import REPORT, SAMPLE, STATE, Shard, ShardProgram, ShardReport

    seed, mode, pol, mirs, nb = key
    w, tables = random_case(seed, 20)
    plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
    waves = ShardProgram(plan, 2).last
    assert waves >= 2  # not vacuous: frames cross shards between waves
    collected = []
    collect = RDD.collect

    def watched(self):
        got = collect(self)
        collected.append(got)
        return got

    monkeypatch.setattr(RDD, "collect", watched)
    total = sum(len(t) for t in tables.values())
    ui = bool(spark.sparkContext.uiWebUrl)
    before = max((j["jobId"] for j in _jobs(spark)), default=-1) if ui else None
    d = run_spark(plan, tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // nb), timeout=TIMEOUT,
                  mode="distributed")
    assert d.results() == oracle_results(w, tables)
    b = d.batches
    assert len(b) == nb and int(b["state_rows"].max()) > 0
    # one job per batch; its stages: the input's and one per wave
    assert (b["jobs"] == 1).all(), b[["batch", "jobs", "stages"]]
    assert (b["stages"] == waves + 1).all(), b[["batch", "jobs", "stages"]]
    # the driver collected the shards' reports and states and nothing else: counts, arrival
    # samples bounded per query and shard, and segment files' names — no frame, no entry
    assert len(collected) == nb
    queries = len(w.queries)
    named = 0
    for everything in collected:
        assert {kind for _, (kind, _) in everything} == {REPORT, STATE}
        for _, (kind, payload) in everything:
            if kind == STATE:
                shard = pickle.loads(payload)
                assert isinstance(shard, Shard) and not (shard.pending or shard.inputs or shard.results)
                assert not (shard.state["delta"] or shard.state["sealed"])
                assert all(isinstance(n, str) for names in shard.files.values() for n in names)
                named += sum(map(len, shard.files.values()))
        got = [payload for _, (kind, payload) in everything if kind == REPORT]
        assert got and all(isinstance(r, ShardReport) for r in got)
        for r in got:
            assert all(isinstance(v, int) for v in [*r.messages.values(), *r.store_rows.values(), *r.results.values()])
            for _, _, _, sample, _weights in r.arrivals.values():
                assert isinstance(sample, np.ndarray) and sample.dtype.kind == "f" and len(sample) <= SAMPLE
        assert sum(len(a[3]) for r in got for a in r.arrivals.values()) <= SAMPLE * queries * len(got)
    # per shard (``mqjoin run --json``): every store's rows after the last batch, and the probe
    # tuples its shards ran
    shards = d.summary()["shards"]
    st = d.stores[d.stores["batch"] == d.stores["batch"].max()]
    assert {sid: sum(v["rows"]) for sid, v in shards.items()} == {s: int(n) for s, n in zip(st["store"], st["rows"])}
    assert named > 0  # not vacuous: the stores held segments
    assert all(len(v["rows"]) == len(v["received"]) == len(collected[0]) // 2 for v in shards.values())
    assert sum(sum(v["received"]) for v in shards.values()) > 0
    # the cost of every batch is what Spark's REST API lists for the batch's job group
    if ui:
        import time

        reported = {int(r.batch): (int(r.jobs), int(r.stages)) for r in b.itertuples()}
        deadline = time.time() + 30  # the UI learns about jobs asynchronously
        while (listed := _cost_per_batch(_jobs(spark), before)) != reported and time.time() < deadline:
            time.sleep(0.5)
        assert listed == reported


@pytest.mark.parametrize("lost_at", [1, 2])
def test_shards_whose_segments_are_gone_are_rebuilt_and_the_run_continues(lost_at, spark, monkeypatch, tmp_path):
    """A shard's stores are segment files in a shared directory; should they be gone (the
    directory lost), the next batch's tasks fail to map them (``MQJOIN_SEGMENT_LOST``).
    Simulated here by deleting the engine's state directory before micro-batch ``lost_at``
    and moving it, so the Python workers' cached segments are not found either: the engine
    rebuilds its shards from the replay log, runs the batch again and the run ends with the
    oracle's results, each committed once (tests/test_spark_cluster.py kills a real worker)."""
    import shutil

    import pyarrow.dataset as ds

    from mqjoin.runtime.spark import distributed as engine
    from mqjoin.runtime.spark.launch import run_spark

    seed, mode, pol, mirs, nb = CASES[0]
    w, tables = random_case(seed, 20)
    plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
    process, lost, failed = engine.ShardedEngine.process, [], []
    run = engine.ShardedEngine._run

    def losing(self, batch, batch_id):
        if batch_id == lost_at and not lost:
            lost.append(sorted(p.name for p in (tmp_path / "out" / "_state").rglob("*.seg")))
            shutil.rmtree(tmp_path / "out" / "_state")
            self.state_dir = str(tmp_path / "out" / "_state_moved")
        return process(self, batch, batch_id)

    def watched(self, df, batch_id, write):
        try:
            return run(self, df, batch_id, write)
        except Exception as exc:
            failed.append((batch_id, engine.lost_state(exc)))
            raise

    monkeypatch.setattr(engine.ShardedEngine, "process", losing)
    monkeypatch.setattr(engine.ShardedEngine, "_run", watched)
    total = sum(len(t) for t in tables.values())
    d = run_spark(plan, tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // nb), timeout=TIMEOUT,
                  mode="distributed")
    want = oracle_results(w, tables)
    assert d.results() == want and sum(map(len, want.values())) > 0
    # not vacuous: the state held segments, the batch failed for lost ones and ran again, rebuilt
    assert lost and lost[0] and failed == [(lost_at, True)]
    assert list(d.batches["rebuilt"]) == [b == lost_at for b in range(nb)]
    rows = ds.dataset(str(tmp_path / "out" / "_batches"), format="parquet").count_rows()
    assert rows == sum(map(len, want.values())), "a result was committed twice"


def test_a_batch_that_does_not_start_where_the_shards_end_rebuilds_them_first(spark, tmp_path):
    """A fresh engine not told where the stream resumes (``start_seq`` 0) handed a later batch:
    it finds the batch's first arrival in the shards' reports, rebuilds the shards from the
    replay log for it and runs the batch again — the same results and messages as an engine
    that ran every batch."""
    from pyspark.sql import functions as F

    from mqjoin.runtime.spark.distributed import ShardedEngine
    from mqjoin.runtime.spark.frames import committed_parts, read_parts
    from mqjoin.runtime.spark.source import build_replay_log, write_replay_log

    w, tables = random_case(CASES[0][0], 20)
    plan = optimize(w).plan
    path = write_replay_log(build_replay_log(w, tables), tmp_path / "replay.parquet")
    log = spark.read.parquet(str(path)).withColumn("_arrival", F.col("_seq") * 0.5)
    n = log.count()
    cut = n // 2

    def run(out, batches, start_seq=0):
        reports = []
        engine = ShardedEngine(spark, plan, str(path), str(out), on_batch=reports.append, start_seq=start_seq)
        try:
            for b, (lo, hi) in batches:
                engine.process(log.filter((F.col("_seq") >= lo) & (F.col("_seq") < hi)), b)
        finally:
            engine.close()
        return reports

    def rows(out, b):
        parts = committed_parts(out / "_batches" / f"batch={b}")
        return sorted((q, tuple(r)) for q, rs in read_parts(parts) for r in rs.tolist())

    both = run(tmp_path / "a", [(0, (0, cut)), (1, (cut, n))])
    late = run(tmp_path / "b", [(1, (cut, n))])
    assert rows(tmp_path / "b", 1) == rows(tmp_path / "a", 1) and rows(tmp_path / "a", 1)  # not vacuous
    assert late[0].rebuilt and not both[1].rebuilt
    assert late[0].probe_messages == both[1].probe_messages and late[0].store_rows == both[1].store_rows
    assert (late[0].first_seq, late[0].input_rows) == (cut, n - cut)
