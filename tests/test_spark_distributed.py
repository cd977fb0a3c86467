"""The distributed Spark mode (stores as DataFrames, :class:`~mqjoin.runtime.spark.distributed.DeltaJoinEngine`):
a shared step is computed once per micro-batch.

The engine persists the results of a step that feeds several consumers (further probes and
the count of their messages, several outputs) and its consumers read them through a temp
view.  Replacing a temp view drops, with Spark 4's cascade, every cached plan that refers to
it — so a persisted step can silently be recomputed by each consumer, with identical results.
Plan strings cannot tell a recomputation from a cache read (the cached plan is printed under
every ``InMemoryRelation``, and the store deltas run inside lazily checkpointed RDDs that no
SQL plan shows).  This test counts instead what Spark really computed: every shared step's
results pass a non-deterministic Python filter (after the step's own SQL, before it is
persisted) that adds each row's hash to an accumulator.  A step computed once per batch
counts each of its rows once; a step recomputed by its ``k`` consumers counts each ``k`` times
(measured, seed 6041 mqo: 113 step rows; with the persist dropped, or a store's view re-created
after its steps were persisted, every row counted 3 times).
"""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from _cases import random_case  # noqa: E402
from _spark import TIMEOUT  # noqa: E402

from mqjoin.planning.optimizer import optimize  # noqa: E402
from mqjoin.runtime.oracle import oracle_results  # noqa: E402
from mqjoin.planning.plan import ProbeRule  # noqa: E402

pytestmark = pytest.mark.slow

# (seed of tests/_cases.random_case, mode, partitioning, MIRs, micro-batches): plans whose shared
# steps have results in every batch (MIR stores fed by 2-hop probes, probes feeding probes)
CASES = [
    (6041, "mqo", "single", True, 3),
    (6004, "mqo", "replicas", True, 2),
]


def _counting_steps(monkeypatch, spark):
    """Wrap the engine's shared steps in a counting filter; returns the accumulator of
    ``{(probe edge label, row hash): times computed}``."""
    from pyspark.accumulators import AccumulatorParam
    from pyspark.sql import functions as F

    from mqjoin.runtime.spark import distributed as engine

    class CounterParam(AccumulatorParam):
        def zero(self, value):
            return Counter()

        def addInPlace(self, a, b):
            a.update(b)
            return a

    acc = spark.sparkContext.accumulator(Counter(), CounterParam())
    step_frame = engine.DeltaJoinEngine._step_frame

    def counted(self, label, sql):
        df = step_frame(self, label, sql)

        def tick(h, _label=label):
            acc.add(Counter({(_label, h): 1}))
            return True

        seen = F.udf(tick, "boolean").asNondeterministic()  # never pushed down, never merged
        return df.filter(seen(F.hash(*[F.col(c) for c in df.columns])))

    monkeypatch.setattr(engine.DeltaJoinEngine, "_step_frame", counted)
    return acc


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
        m = re.fullmatch(r"mqjoin-DeltaJoinEngine-[0-9a-f]+-(\d+)", j.get("jobGroup") or "")
        if m and j["jobId"] > after:
            ids, stages = groups.setdefault(int(m.group(1)), (set(), set()))
            ids.add(j["jobId"])
            stages.update(j["stageIds"])
    return {b: (len(ids), len(stages)) for b, (ids, stages) in groups.items()}


def _key_id(k) -> str:
    seed, mode, pol, mirs, nb = k
    return f"seed{seed}-{mode}-{pol}{'' if mirs else '-nomirs'}-{nb}b"


@pytest.mark.parametrize("key", CASES, ids=_key_id)
def test_shared_steps_are_computed_once_per_batch(key, spark, monkeypatch, tmp_path):
    from mqjoin.runtime.spark.launch import run_spark

    seed, mode, pol, mirs, nb = key
    w, tables = random_case(seed, 20)
    plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
    acc = _counting_steps(monkeypatch, spark)
    total = sum(len(t) for t in tables.values())
    ui = bool(spark.sparkContext.uiWebUrl)
    before = max((j["jobId"] for j in _jobs(spark)), default=-1) if ui else None
    d = run_spark(plan, tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // nb), timeout=TIMEOUT,
                  mode="distributed")
    assert d.results() == oracle_results(w, tables)
    assert len(d.batches) == nb
    ticks = acc.value
    # not vacuous: shared steps ran and produced rows, and some have several consumers (a
    # step feeding a probe is read by that probe and by the count of its messages)
    labels = {lab for lab, _ in ticks}
    rules = {lab: rule for r in plan.rules.values() for lab, rule in r.items() if isinstance(rule, ProbeRule)}
    assert labels and any(len(rules[lab].out) > 1 or any(plan.edge[o].kind == "probe" for o in rules[lab].out)
                          for lab in labels), labels
    # a row's hash holds its _seq (the trigger's arrival): the same row in two batches cannot be
    twice = {k: n for k, n in ticks.items() if n != 1}
    per_step = Counter(lab for lab, _ in twice)
    assert not twice, (f"shared steps recomputed within a batch: {dict(per_step)} rows computed more than once "
                       f"(of {dict(Counter(lab for lab, _ in ticks))})")
    # the cost of every batch is in the metrics, and it is what Spark's REST API lists for the batch
    assert (d.batches["jobs"] >= 1).all() and (d.batches["stages"] >= d.batches["jobs"]).all()
    if ui:
        reported = {int(r.batch): (int(r.jobs), int(r.stages)) for r in d.batches.itertuples()}
        import time

        deadline = time.time() + 30  # the UI learns about jobs asynchronously
        while (listed := _cost_per_batch(_jobs(spark), before)) != reported and time.time() < deadline:
            time.sleep(0.5)
        assert listed == reported


@pytest.mark.parametrize("lost_at", [1, 2])
def test_stores_lost_with_an_executor_are_rebuilt_and_the_run_continues(lost_at, spark, monkeypatch, tmp_path):
    """An executor that dies takes its blocks of the locally checkpointed stores with it: Spark
    fails the next job that reads them (``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``).  Simulated here
    by freeing every store's blocks before micro-batch ``lost_at``: the engine rebuilds its
    stores from the replay log, runs the batch again and the run ends with the oracle's results,
    each committed once (tests/test_spark_cluster.py kills a real worker)."""
    import pyarrow.dataset as ds

    from mqjoin.runtime.spark import distributed as engine
    from mqjoin.runtime.spark.launch import run_spark

    seed, mode, pol, mirs, nb = CASES[0]
    w, tables = random_case(seed, 20)
    plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
    process, lost, failed = engine.DeltaJoinEngine.process, [], []
    run_batch = engine.DeltaJoinEngine._run_batch

    def losing(self, batch, batch_id):
        if batch_id == lost_at and not lost:
            lost.extend(self.stores)
            for df in self.stores.values():
                engine.release_store(df)
        return process(self, batch, batch_id)

    def watched(self, bs, batch, batch_id, *args):
        try:
            return run_batch(self, bs, batch, batch_id, *args)
        except Exception as exc:
            failed.append((batch_id, engine.lost_state(exc)))
            raise

    monkeypatch.setattr(engine.DeltaJoinEngine, "process", losing)
    monkeypatch.setattr(engine.DeltaJoinEngine, "_run_batch", watched)
    total = sum(len(t) for t in tables.values())
    d = run_spark(plan, tables, tmp_path / "out", spark=spark, max_rows_per_batch=-(-total // nb), timeout=TIMEOUT,
                  mode="distributed")
    want = oracle_results(w, tables)
    assert d.results() == want and sum(map(len, want.values())) > 0
    # not vacuous: the stores held rows, the batch failed for lost blocks and ran again, rebuilt
    assert lost and failed == [(lost_at, True)]
    assert list(d.batches["rebuilt"]) == [b == lost_at for b in range(nb)]
    rows = ds.dataset(str(tmp_path / "out" / "_batches"), format="parquet").count_rows()
    assert rows == sum(map(len, want.values())), "a result was committed twice"
