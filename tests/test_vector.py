"""The vectorised executor (mqjoin.runtime.vector) against the brute-force oracle (docs/model.md §6)
and the per-tuple reference executor: the same result sets and probe messages for every
plan, every batch size (one arrival, a few, the whole input), filters and query groups,
every planner; key semantics (nulls, 1 = 1.0, strings, multi-attribute keys, hash
collisions); store rows as the per-tuple executor reports them."""

from __future__ import annotations

import numpy as np
import pytest

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime import vector
from mqjoin.runtime.executor import Executor, StaticSchedule
from mqjoin.runtime.reference import run_reference
from mqjoin.runtime.rules import arrival_order, base_tuples
from mqjoin.runtime.vector import BatchExecutor, edge_order, key_codes, run_vector
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload

from _cases import cases, filtered_cases, random_case

CONFIGS = [("mqo", "single", True), ("mqo", "replicas", True), ("mqo", "single", False),
           ("individual", "single", True), ("shared", "single", True)]
BATCHES = (None, 1, 4)


def _check(plan, tables, want, what: str) -> None:
    ref = run_reference(plan, tables)
    for b in BATCHES:
        run = run_vector(plan, tables, batch=b)
        for q, rows in run.results.items():
            assert len(rows) == len(set(rows)), f"{what} batch={b}: duplicate results in {q}"
        assert run.result_sets() == want, f"{what} batch={b}: differs from the oracle"
        assert run.probe_messages == ref.probe_messages, f"{what} batch={b}: probe messages differ"
        assert run.counts == ref.counts, f"{what} batch={b}"


@pytest.mark.parametrize("seed,workload,tables", cases(40), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_results_and_messages_equal_oracle_and_reference_for_every_plan_and_batch_size(seed, workload, tables):
    want = oracle_results(workload, tables)
    for mode, pol, mirs in CONFIGS:
        plan = optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan
        _check(plan, tables, want, f"seed {seed} {mode}/{pol}/mirs={mirs}")


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("seed,workload,tables", filtered_cases(12), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_filtered_and_grouped_workloads_equal_the_oracle(seed, workload, tables, grouped):
    if grouped:
        workload = workload.with_groups([workload.query_names])
    want = oracle_results(workload, tables)
    for mode, pol, mirs in CONFIGS[:2] + CONFIGS[3:]:
        _check(optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan, tables, want,
               f"seed {seed} {mode}/{pol} grouped={grouped}")


@pytest.mark.parametrize("seed,workload,tables", filtered_cases(4, start=500), ids=lambda v: str(v)
                         if isinstance(v, int) else "")
def test_every_planner_equals_the_oracle(seed, workload, tables):
    want = oracle_results(workload, tables)
    for kw in (dict(planner="mjoin"), dict(planner="tree"), dict(planner="ajoin"), dict(planner="pmjoin")):
        _check(optimize(workload, **kw).plan, tables, want, f"seed {seed} {kw}")


@pytest.mark.parametrize("seed,workload,tables", cases(30, start=1000, max_rows=60),
                         ids=lambda v: str(v) if isinstance(v, int) else "")
def test_larger_inputs_equal_the_oracle(seed, workload, tables):
    want = oracle_results(workload, tables)
    for mode, pol, mirs in CONFIGS[:2]:
        plan = optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan
        for b in (None, 7, 50):
            assert run_vector(plan, tables, batch=b).result_sets() == want, f"seed {seed} {mode}/{pol} batch={b}"


TWO = """
defaults: {selectivity: 0.5, parallelism: 3}
relations: {R: {attributes: [a, b]}, S: {attributes: [a, b]}}
queries: {q: "R.a = S.a, R.b = S.b"}
"""


@pytest.mark.parametrize("ra,sa,want", [
    ([None, 1, 2.0], [None, 1.0, 2], {(1, 1), (2, 2)}),  # nulls never join; 1 joins 1.0
    (["x", None, "y"], ["y", "x", None], {(0, 1), (2, 0)}),  # strings hash, nulls never join
    ([0.5, 1, 3], [0.5, 1.0, 3.5], {(0, 0), (1, 1)}),  # non-integral floats join on their value
    ([True, 1, 0], [1, True, False], {(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)}),  # True = 1 as in Python
])
def test_key_semantics_equal_the_oracle(ra, sa, want):
    w = parse_workload("""
defaults: {selectivity: 0.5, parallelism: 3}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    tables = {"R": Table.from_columns("R", {"ts": [0, 1, 2], "a": ra}),
              "S": Table.from_columns("S", {"ts": [0, 1, 2], "a": sa})}
    assert oracle_results(w, tables)["q"] == want
    for b in BATCHES:
        assert run_vector(optimize(w).plan, tables, batch=b).result_sets()["q"] == want, b


def test_multi_attribute_keys_confirm_a_hash_match_on_the_values(monkeypatch):
    """Two attributes per probe: the codes combine by hashing, so a match is confirmed on the
    values — forced here by a mixing constant of 0 (every pair of keys with equal ``b``
    collides)."""
    w = parse_workload(TWO)
    tables = {"R": Table.from_columns("R", {"ts": [0, 1, 2, 3], "a": [1, 2, 1, None], "b": [5, 5, 6, 5]}),
              "S": Table.from_columns("S", {"ts": [0, 1, 2, 3], "a": [2, 1, 1, 3], "b": [5, 5, 6, 5]})}
    want = oracle_results(w, tables)["q"]
    assert want == {(0, 1), (1, 0), (2, 2)}
    monkeypatch.setattr(vector, "_MIX", np.uint64(0))
    valid, codes, exact = key_codes([np.array([1, 2]), np.array([5, 5])])
    assert codes[0] == codes[1] and not exact  # the collision is real
    for b in BATCHES:
        assert run_vector(optimize(w).plan, tables, batch=b).result_sets()["q"] == want, b


@pytest.mark.parametrize("seed,workload,tables", cases(10, start=200), ids=lambda v: str(v) if isinstance(v, int)
                         else "")
def test_store_rows_after_a_batch_are_the_per_tuple_executors_after_its_purge(seed, workload, tables):
    plan = optimize(workload, partitioning="replicas").plan
    base = base_tuples(workload, tables, plan.sources)
    order = arrival_order(base, workload.relation_rank)
    arrivals = [(r, base[r][row]) for r, row in order]
    ex = Executor(StaticSchedule(plan))
    ex.feed(arrivals)
    vx = BatchExecutor(plan)
    arr = vector.Arrivals(workload, tables, vx.source_need)
    half = len(arr) // 2
    vx.feed(arr.frames(0, half))
    vx.feed(arr.frames(half, len(arr)))
    if not arrivals:
        return
    ex.purge_all(ex.clock[0])
    assert vx.store_rows() == {s: n for s, n in ex.store_rows(plan).items() if s in vx.store_rows()}
    assert vx.T == ex.clock[0]


def test_edges_run_after_what_feeds_them_and_probes_after_the_inserts_of_their_store():
    w = parse_workload("""
defaults: {selectivity: 0.1, rate: 100, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
""")
    plan = optimize(w).plan
    vx = BatchExecutor(plan)
    pos = {lab: i for i, lab in enumerate(edge_order(vx.rules))}
    assert sorted(pos) == sorted(vx.rules.edges)
    for lab, rule in vx.rules.edges.items():
        for o in getattr(rule, "outs", ()):
            assert pos[lab] < pos[o]
        if type(rule).__name__ == "Probe":
            for lab2, r2 in vx.rules.edges.items():
                if type(r2).__name__ == "Insert" and r2.layout == rule.layout:
                    assert pos[lab2] < pos[lab]


# --------------------------------------------------------------------------------------------
# the Spark driver mode's batches and state journal (no Spark session: the batch function alone)
# --------------------------------------------------------------------------------------------


def _driver_results(out) -> dict[str, set]:
    from mqjoin.runtime.spark.frames import committed_parts, read_parts

    got: dict[str, set] = {}
    for q, rows in read_parts(committed_parts(out / "_batches")):
        for r in map(tuple, rows.tolist()):
            assert r not in got.setdefault(q, set()), f"{q}: a result twice"
            got[q].add(r)
    return got


@pytest.mark.parametrize("snapshots", [False, True])
@pytest.mark.parametrize("seed,workload,tables", filtered_cases(4, start=300) + cases(4, start=300),
                         ids=lambda v: str(v) if isinstance(v, int) else "")
def test_driver_mode_restarts_from_its_journal_with_nothing_lost_or_duplicated(seed, workload, tables, snapshots,
                                                                               tmp_path):
    pytest.importorskip("pyspark")
    import pyarrow as pa

    from mqjoin.runtime.spark.driver import VectorDriverEngine
    from mqjoin.runtime.spark.source import build_replay_log, pack_replay_log

    plan = optimize(workload, partitioning="replicas").plan
    log = build_replay_log(workload, tables)
    log = log.append_column("_arrival", pa.array(np.zeros(len(log))))
    log, names = pack_replay_log(log)
    n = len(log)
    cuts = [0, n // 3, 2 * n // 3, n]
    batches = [log.slice(a, b - a) for a, b in zip(cuts, cuts[1:])]

    def engine():
        e = VectorDriverEngine(plan, str(tmp_path / "out"), tmp_path / "state", columns=names)
        if snapshots:  # a snapshot of every store at every batch
            e.snapshot_ratio, e.snapshot_floor = 0.0, 0
        return e

    first = engine()
    for b in (0, 1):
        first._process(batches[b], b, 0.0, 0.0, None, None)
    # the process dies after batch 1's journal, before Spark commits batch 1: a new engine
    # gets batch 1 again, restores the state of batch 0 from the journal, and goes on
    second = engine()
    for b in (1, 2):
        second._process(batches[b], b, 0.0, 0.0, None, None)
    want = oracle_results(workload, tables)
    got = _driver_results(tmp_path / "out")
    assert {q: got.get(q, set()) for q in want} == want
    ref = run_reference(plan, tables)
    assert dict(second.ex.messages) == ref.probe_messages
    assert dict(second.ex.counts) == ref.counts


@pytest.mark.parametrize("journal", [b"not a pickle", "missing class", "not a record"])
def test_a_journal_of_another_version_is_refused_with_the_fix(journal, tmp_path):
    """A checkpoint left by another mqjoin version (a pickled class it has since moved, or
    another record layout) or damaged is refused with a typed error that names the journal
    and says to delete the checkpoint, never an unpickling traceback."""
    pytest.importorskip("pyspark")
    import pickle

    from mqjoin.model.errors import EngineError
    from mqjoin.runtime.spark.driver import VectorDriverEngine

    _, w, _ = cases(1)[0]
    state = tmp_path / "state"
    state.mkdir()
    if journal == "missing class":
        data = b"cmqjoin.gone_since\nJournal\n."  # a pickle of a class in a module this version lacks
    elif journal == "not a record":
        data = pickle.dumps(["format", 1])
    else:
        data = journal
    (state / "0.pkl").write_bytes(data)
    e = VectorDriverEngine(optimize(w).plan, str(tmp_path / "out"), state)
    with pytest.raises(EngineError, match=r"state journal .*0\.pkl.*delete the checkpoint to start over"):
        e._restore(1)


def test_a_sink_gets_each_batch_s_results_as_arrays_and_the_run_keeps_none():
    """What `mqjoin run` relies on: with a sink, the results leave a batch as an ``n × k``
    array of row indices (never Python tuples) and the run holds none of them; the arrays
    together are the oracle's result sets, in arrival order of their triggers."""
    seed, w, tables = cases(3)[2]
    plan = optimize(w).plan
    want = oracle_results(w, tables)
    got: dict[str, list] = {q: [] for q in want}

    def sink(q, rows):
        assert isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.shape[1] == len(w.query(q).relations)
        got[q].append(rows)

    run = run_vector(plan, tables, batch=3, sink=sink)
    assert all(r == [] for r in run.results.values())
    sets = {q: {tuple(r) for a in parts for r in a.tolist()} for q, parts in got.items()}
    assert sets == want and run.counts == {q: len(v) for q, v in want.items()}


def test_arrivals_from_parquet_columns_are_the_reference_s_arrival_order(tmp_path):
    """The vectorised run reads a Parquet input's numpy columns as they are, in the arrival
    order every engine follows (ties of ``ts`` by declaration rank, then row)."""
    from mqjoin.model.tables import Column, read_inputs, write_inputs

    w = parse_workload("{defaults: {selectivity: 0.5, window: 2}, relations: {R: {attributes: [a]}, "
                       "S: {attributes: [a, b]}}, queries: {q: 'R(a), S(a)'}}")
    tables = {"R": Table.from_columns("R", {"ts": [1.0, 0.0, 1.0], "a": [1, 2, 2]}),
              "S": Table.from_columns("S", {"ts": [1.0, 0.5], "a": [2.0, 1.0], "b": ["x", None]})}
    write_inputs(tables, tmp_path)
    read = read_inputs(w, tmp_path)
    assert isinstance(read["R"].columns["a"], Column)
    arr = vector.Arrivals(w, read, {"R": {0, 1, 2}, "S": {0, 2}})
    base = base_tuples(w, tables, ["R", "S"])
    order = arrival_order(base, w.relation_rank)
    frames = arr.frames(0, len(arr))
    assert [(r, int(row)) for _, r, row in sorted((s, r, row) for r, f in frames.items()
                                                  for s, row in zip(f.seq.tolist(), f.cols[0][0].tolist()))] == order
    assert set(frames["S"].cols[0]) == {0, 2} and frames["S"].T.tolist() == [0.5, 1.0]
    plan = optimize(w).plan
    assert run_vector(plan, read, batch=2).result_sets() == oracle_results(w, tables)


@pytest.mark.parametrize("seed,workload,tables", cases(6, start=100), ids=lambda v: str(v) if isinstance(v, int)
                         else "")
def test_a_merged_segment_keeps_the_index_built_from_its_entries(seed, workload, tables):
    """Segments merged after every arrival carry their indexes merged, not sorted again: each
    equals the index built from the merged entries (codes, groups and row order)."""
    plan = optimize(workload).plan
    ex = BatchExecutor(plan)
    arr = vector.Arrivals(workload, tables, ex.source_need)
    merged = 0
    for lo in range(len(arr)):
        ex.feed(arr.frames(lo, lo + 1))
        for segs in ex.stores.values():
            for seg in segs:
                for pattern, index in seg.indexes.items():
                    fresh = vector.Segment(seg.frame).index(pattern)
                    assert index.codes.tolist() == fresh.codes.tolist(), seed
                    assert index.rows.tolist() == fresh.rows.tolist() and index.count.tolist() == fresh.count.tolist()
                    assert index.exact == fresh.exact
                    merged += len(seg) > 1
    assert merged or not len(arr)


def _batch_frame():
    """What ``foreachBatch`` hands the driver engine, for a test without Spark: the batch's
    session's context, whose job group and status tracker the engine asks (no job runs)."""
    from types import SimpleNamespace

    tracker = SimpleNamespace(getJobIdsForGroup=lambda group: [], getJobInfo=lambda job: None)
    sc = SimpleNamespace(getLocalProperty=lambda key: None, setJobGroup=lambda *a, **k: None,
                         statusTracker=lambda: tracker)
    return SimpleNamespace(sparkSession=SimpleNamespace(sparkContext=sc))


@pytest.mark.parametrize("pacing", [{"rate": 4000.0}, {"speedup": 400.0}, {}], ids=["rate", "speedup", "unpaced"])
@pytest.mark.parametrize("seed", [6041, 6030])  # cases with results (MIR stores in 6041's plan)
def test_driver_feed_restarted_mid_run_serves_each_arrival_once_paced_as_the_formula_says(seed, pacing, tmp_path):
    """The driver mode's own input (:class:`~mqjoin.runtime.spark.source.LogFeed`, no Spark
    source): a run that stops after batch 1's journal but before Spark committed batch 1 is
    restarted with a new feed, which serves batch 1 again from where batch 0 ended — every
    arrival processed once, the results the oracle's — and every result's ``_arrival``
    follows the pacing formula from the feed's first slice (``t0 + (seq − b) / rate``,
    ``t0 + (ts − ts[b]) / speedup``, or the time the batch took its slice)."""
    pytest.importorskip("pyspark")
    import pyarrow.dataset as ds

    from mqjoin.runtime.spark.driver import VectorDriverEngine
    from mqjoin.runtime.spark.source import LogFeed, packed_replay_log, write_replay_log

    workload, tables = random_case(seed, 20)
    plan = optimize(workload).plan
    log, names = packed_replay_log(workload, tables)
    total = len(log)
    ts = log["_ts"].to_numpy()
    path = str(write_replay_log(log, tmp_path / "replay.parquet"))
    out = tmp_path / "out"
    cap = -(-total // 4)
    runs = []

    def run(first_batch: int, batches: int | None):
        feed = LogFeed(path, total, max_rows=cap, **pacing)
        e = VectorDriverEngine(plan, str(out), tmp_path / "state", columns=names, feed=feed)
        b = first_batch
        while (batches is None and e.next_seq < total) or (batches is not None and b < first_batch + batches):
            e.process(_batch_frame(), b)
            runs.append((feed, b, e.next_seq))
            b += 1
        return e, feed

    first, _ = run(0, 2)  # batches 0 and 1 journaled; Spark committed batch 0 only
    assert 0 < first.next_seq < total
    ended0 = runs[0][2]
    second, feed = run(1, None)
    assert runs[2][1] == 1 and runs[2][2] > ended0  # batch 1 again, from where batch 0 ended
    assert second.next_seq == total
    feed.started(runs[-1][1] + 1, second.next_seq)  # Spark's next batch: the last one was committed
    assert feed.committed_seq == total
    want = oracle_results(workload, tables)
    got = _driver_results(out)
    assert {q: got.get(q, set()) for q in want} == want
    assert sum(map(len, want.values())) > 0
    # _arrival as the pacing formula says, from the first slice of the feed that served the batch
    batch_feed = {b: f for f, b, _ in runs}
    for b, f in batch_feed.items():
        path_b = out / "_batches" / f"batch={b}"
        if not any(path_b.glob("*.parquet")):
            continue
        t = ds.dataset(str(path_b), format="parquet").to_table(columns=["_seq", "_arrival"])
        seq, arrival = t["_seq"].to_numpy(), t["_arrival"].to_numpy()
        start, t0 = f.pacer.base
        if "rate" in pacing:
            np.testing.assert_allclose(arrival, t0 + (seq - start) / pacing["rate"], rtol=0, atol=1e-6)
        elif "speedup" in pacing:
            np.testing.assert_allclose(arrival, t0 + (ts[seq] - ts[start]) / pacing["speedup"], rtol=0, atol=1e-6)
        else:
            assert len(set(arrival.tolist())) == 1 and arrival[0] >= t0
    # a paced batch took only what had arrived when its slice was chosen
    if pacing:
        assert len(runs) > 4 or "speedup" in pacing


def test_driver_feed_waits_for_the_next_arrival_and_a_close_ends_the_wait(tmp_path):
    """A paced feed's micro-batch waits for the next tuple rather than run empty; after the
    last tuple it waits :attr:`~.LogFeed.IDLE` at most, and :meth:`~.LogFeed.close` ends a
    wait at once."""
    pytest.importorskip("pyspark")
    import threading
    import time

    import pyarrow as pa

    from mqjoin.runtime.spark.source import LogFeed, write_replay_log

    n = 3
    path = str(write_replay_log(pa.table({"_seq": np.arange(n), "_rel": np.zeros(n, dtype=np.int32),
                                          "_ts": np.arange(n, dtype=float)}), tmp_path / "l.parquet"))
    feed = LogFeed(path, n, rate=5.0)
    t = time.time()
    end, arrival = feed.slice(0, 0)  # the clock starts now: the first tuple is there after 1 / rate
    waited = time.time() - t
    assert end >= 1 and 0.15 <= waited < 1.0, waited
    assert arrival[0] == "rate" and feed.rows(0, end, arrival)["_seq"].to_pylist() == list(range(end))
    done = LogFeed(path, n)
    assert done.slice(0, 0)[0] == n
    threading.Timer(0.2, done.close).start()
    t = time.time()
    assert done.slice(1, n)[0] == n  # nothing more will come: the wait ends with the close
    assert time.time() - t < LogFeed.IDLE
