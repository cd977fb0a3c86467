"""The distributed mode's shards without Spark (:mod:`mqjoin.runtime.spark.sharded`).

:func:`run_sharded` does in-process what :mod:`mqjoin.runtime.spark.distributed` asks Spark
to do: the input rows of every micro-batch routed by :func:`route_input`, then per wave every
shard's state and the frames sent to it handed to :func:`run_wave`, its outputs regrouped by
the shard they are keyed by (the exchange), and every shard's state after a batch handed to
the next batch's spec (the driver's part).  On random workloads (windows, nulls, ties, MIRs,
broadcast probes, filters) and for 1–3 shards it must give the oracle's results, the
vectorised executor's probe messages and store rows, and keep on every shard only entries
whose partition attribute hashes to it; a routed probe's frame reaches one shard, a
broadcast one every shard.
"""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")  # the module lives with the Spark engine (its tasks run it)

from _cases import cases, filtered_cases

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.partitions import PartitionTally, add_partitions, partitions_summary, store_partitions
from mqjoin.runtime.rules import Probe, layout_of
from mqjoin.runtime.spark.sharded import (REPORT, SENT, STATE, Batch, Shard, ShardProgram,
                                          load_segment, route_input, run_wave, shard_of)
from mqjoin.runtime.spark.frames import read_parts
from mqjoin.runtime.spark.source import build_replay_log
from mqjoin.runtime.vector import Arrivals, BatchExecutor, run_vector

CASES = [(seed, w, t, mode) for mode in ("mqo", "individual") for seed, w, t in cases(3, start=7300, max_rows=15)
         + filtered_cases(2, start=7400, max_rows=15)]


def _labels(payload: bytes) -> list[str]:
    """The edges whose frames an exchanged element carries (in the exchange file it names)."""
    with open(pickle.loads(payload), "rb") as fh:
        return [lab for got in pickle.load(fh) if isinstance(got, dict) for lab in got]


def run_sharded(plan, tables, batch: int, shards: int, out, per_partition: list | None = None, again: bool = False):
    """(results, probe messages per edge, store rows after the last batch, (shard states, their
    stores), the shards every edge's frames were sent to) of ``plan`` over ``tables`` in
    batches of ``batch`` arrivals on ``shards`` shards, the exchanges done in-process;
    ``per_partition`` receives every batch's counts per logical partition, summed over the
    shards (``again``: every task runs twice, as Spark runs a failed one again; the first
    run's output is dropped)."""
    log = build_replay_log(plan.workload, tables)
    log = log.append_column("_arrival", pa.array(log["_seq"].to_numpy() * 0.5))
    states: tuple = ()
    messages: Counter = Counter()
    rows: dict[str, int] = {}
    sent_to: dict[str, set] = {}
    last = ShardProgram(plan, shards).last
    for b, lo in enumerate(range(0, len(log), batch)):
        spec = Batch(plan, f"test-{id(plan)}-{shards}", shards, b, str(out), str(out / "_state"), b, states)
        spec.part_dir.mkdir(parents=True, exist_ok=True)
        inbox: dict[int, list] = {p: [] for p in range(shards)}
        for rb in route_input(spec, log.slice(lo, batch).to_batches()):
            for p, payload in zip(rb["shard"].to_pylist(), rb["payload"].to_pylist()):
                inbox[p].append((p, (SENT, payload)))
                for lab in _labels(payload):
                    sent_to.setdefault(lab, set()).add(p)
        for w in range(1, last + 1):
            outbox: dict[int, list] = {p: [] for p in range(shards)}
            for p in range(shards):
                if again:
                    list(run_wave(spec, w, p, inbox[p]))
                for key, (kind, payload) in run_wave(spec, w, p, inbox[p]):
                    outbox[key].append((key, (kind, payload)))
                    if kind == SENT:
                        for lab in _labels(payload):
                            sent_to.setdefault(lab, set()).add(key)
            inbox = outbox
        states = tuple(next(v for _, (k, v) in inbox[p] if k == STATE) for p in range(shards))
        rows, summed = {}, {}
        for p in range(shards):
            for _, (kind, payload) in inbox[p]:
                if kind == REPORT:
                    summed = add_partitions(summed, payload.partitions)
                    messages.update(payload.messages)
                    for sid, n in payload.store_rows.items():
                        rows[sid] = rows.get(sid, 0) + n
        if per_partition is not None:
            per_partition.append(summed)
    results = {q.name: set() for q in plan.workload.queries}
    for q, r in read_parts(sorted(out.rglob("*.parquet"))):
        results[q].update(map(tuple, r.tolist()))
    where = spec.state_dir if states else None
    shard_states = {p: pickle.loads(s) for p, s in enumerate(states)}
    stores = {p: {layout: [load_segment(where / n) for n in names] for layout, names in s.files.items()}
              for p, s in shard_states.items()}
    return results, {k: v for k, v in messages.items() if v}, rows, (shard_states, stores), sent_to


def _id(v):
    return f"seed{v}" if isinstance(v, int) else (v if isinstance(v, str) else "")


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("seed,w,tables,mode", CASES, ids=_id)
def test_shards_equal_the_vectorised_executor(seed, w, tables, mode, shards, tmp_path):
    plan = optimize(w, mode=mode).plan
    total = sum(len(t) for t in tables.values())
    batches: list = []
    results, messages, rows, states, sent_to = run_sharded(plan, tables, -(-total // 3), shards, tmp_path, batches)
    assert results == oracle_results(w, tables)
    size = -(-total // 3)
    vec = run_vector(plan, tables, batch=size)
    assert messages == {k: v for k, v in vec.probe_messages.items() if v}
    # the store rows after the last batch: the vectorised executor's on the same batches
    vx = BatchExecutor(plan)
    vx.tally = PartitionTally(vx)
    for frames in Arrivals(w, tables, vx.source_need).batches(size):
        vx.feed(frames)
    assert rows == vx.store_rows()
    # per logical partition of every store: the shards' counts summed are the executor's
    whole = store_partitions(vx, vx.tally)
    got = partitions_summary(batches)
    for sid, d in whole.items():
        assert got[sid]["messages"] == d["messages"] and got[sid]["rows"] == d["rows"], sid
        assert len(d["rows"]) == d["partitions"] == plan.store[sid].parallelism
        assert sum(d["rows"]) == rows[sid]
    ex = ShardProgram(plan, shards)
    # every shard holds only the entries whose partition attribute hashes to it
    fields = {layout_of(s): (s.mir.relations.index(s.partition.relation),
                             2 + w.relation(s.partition.relation).attributes.index(s.partition.name))
              for s in plan.stores}
    held = 0
    shard_states, stores = states
    for p, shard in shard_states.items():
        assert isinstance(shard, Shard) and shard.index == p
        for layout, segs in stores[p].items():
            c, f = fields[layout]
            for seg in segs:
                col = seg.frame.cols[c].get(f)
                if col is not None and len(col):
                    held += len(col)
                    assert (shard_of(col, shards) == p).all(), (layout, p)
    # a routed probe's frames reach the shards of their routes, a broadcast every shard
    for lab, r in ex.ex.rules.edges.items():
        if isinstance(r, Probe) and r.route is None and lab in sent_to:
            assert sent_to[lab] == set(range(shards)), lab
    assert held or not any(len(t) for t in tables.values())


@pytest.mark.parametrize("seed,w,tables,mode", CASES[:4], ids=_id)
def test_a_task_run_again_changes_nothing(seed, w, tables, mode, tmp_path):
    """A wave's task run twice (Spark's retry) rewrites the same segment files and results,
    and the process's cached segments stay as their files hold them."""
    plan = optimize(w, mode=mode).plan
    total = sum(len(t) for t in tables.values())
    results, messages, rows, _, _ = run_sharded(plan, tables, -(-total // 4), 2, tmp_path, again=True)
    assert results == oracle_results(w, tables)
    assert messages == {k: v for k, v in run_vector(plan, tables, batch=-(-total // 4)).probe_messages.items() if v}


def _three_way(seed: int, n: int, keys: int):
    """A three-way join of R, S and T without windows: ``n`` tuples each, a random key of
    ``keys`` values."""
    from mqjoin.model.tables import Table
    from mqjoin.model.workload import parse_workload

    w = parse_workload('''
defaults: {selectivity: 0.5, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
queries: {q: "R(a), S(a), T(a)"}
''')
    rng = np.random.default_rng(seed)
    return w, {r: Table.from_columns(r, {"ts": [float(i) for i in range(n)],
                                         "a": [int(x) for x in rng.integers(0, keys, n)]}) for r in ("R", "S", "T")}


def test_a_batch_writes_only_the_segments_it_makes(tmp_path):
    """Without windows the stores only grow: after many batches a shard still names segments
    written by earlier batches (a batch does not rewrite the state it probes)."""
    w, tables = _three_way(5, 40, 6)
    plan = optimize(w).plan
    results, _, _, (states, stores), _ = run_sharded(plan, tables, 10, 2, tmp_path)
    assert results == oracle_results(w, tables)
    runs = {int(n.split("-")[0]) for s in states.values() for names in s.files.values() for n in names}
    assert len(runs) >= 2 and min(runs) < max(runs) - 2, runs
    assert sum(len(seg) for segs in stores.values() for ss in segs.values() for seg in ss) > 0


def test_a_segment_file_holds_its_entries(tmp_path):
    """Numbers, nulls, Python objects and no entries at all come back from a segment's file."""
    from mqjoin.runtime.spark.sharded import save_segment
    from mqjoin.runtime.vector import Frame, Segment

    cols = [{0: np.array([1, 2, 3]), 2: np.array(["x", None, "y"], dtype=object)},
            {0: np.array([5, 6, 7]), 1: np.array([0.5, np.nan, 2.0]), 3: np.array([True, False, True])}]
    for frame in (Frame(("R", "S"), cols, np.array([4, 8, 9])), Frame(("R",), [{0: np.array([], np.int64)}],
                                                                         np.array([], np.int64))):
        save_segment(tmp_path / "a.seg", Segment(frame))
        got = load_segment(tmp_path / "a.seg")
        assert got.frame.rels == frame.rels and got.max_seq == Segment(frame).max_seq
        assert got.frame.seq.tolist() == frame.seq.tolist()
        for c, d in zip(got.frame.cols, frame.cols):
            assert sorted(c) == sorted(d)
            for f in d:
                assert c[f].dtype == d[f].dtype and np.array_equal(c[f], d[f], equal_nan=d[f].dtype.kind == "f")
    with pytest.raises(Exception, match="MQJOIN_SEGMENT_LOST"):
        load_segment(tmp_path / "gone.seg")


def test_the_cases_are_worth_running():
    """Not vacuous: results, MIR stores, broadcast probes, several waves."""
    results = mirs = broadcasts = deep = 0
    for _, w, t, mode in CASES:
        plan = optimize(w, mode=mode).plan
        results += sum(map(len, oracle_results(w, t).values()))
        mirs += sum(not s.mir.is_base for s in plan.stores)
        broadcasts += sum(e.kind == "probe" and e.route is None for e in plan.edges)
        deep += ShardProgram(plan, 2).last >= 2
    assert results >= 80 and mirs >= 1 and broadcasts >= 1 and deep >= 3, (results, mirs, broadcasts, deep)


def test_a_probe_runs_after_every_insert_into_its_store_and_one_wave_after_its_producer():
    from mqjoin.runtime.rules import Emit, Insert

    for _, w, _, mode in CASES:
        prog = ShardProgram(optimize(w, mode=mode).plan, 2)
        rules = prog.ex.rules
        for lab, r in rules.edges.items():
            if isinstance(r, Probe):
                for i, x in rules.edges.items():
                    if isinstance(x, Insert) and x.layout == r.layout:
                        assert prog.wave[i] <= prog.wave[lab]
                for o in r.outs:
                    want = prog.wave[lab] if isinstance(rules.edges[o], Emit) else prog.wave[lab] + 1
                    assert prog.wave[o] >= want and (isinstance(rules.edges[o], Probe) or prog.wave[o] == want)


def test_shard_of_keeps_equal_keys_together_and_nulls_on_shard_0():
    v = np.array([3, 3.0, 7.5, np.nan, 10], dtype=object)
    got = shard_of(v, 4).tolist()
    assert got[0] == got[1] and got[3] == 0
    x = int(shard_of(np.array(["x"], dtype=object), 5)[0])
    assert shard_of(np.array(["x", "x", None], dtype=object), 5).tolist() == [x, x, 0]


def test_a_merge_never_makes_a_segment_above_the_cap(tmp_path, monkeypatch):
    """With the merge capped, no segment a merge made holds more entries than the cap (a
    batch's own segment may), and the results and store rows stay the vectorised executor's."""
    from mqjoin.runtime.spark import sharded

    w, tables = _three_way(11, 60, 8)
    plan = optimize(w).plan
    monkeypatch.setattr(sharded, "MERGE_CAP", 8)
    results, _, rows, (states, stores), _ = run_sharded(plan, tables, 6, 1, tmp_path)
    assert results == oracle_results(w, tables)
    assert rows == run_vector(plan, tables, batch=6).store_rows
    segs = [seg.frame for ss in stores.values() for s in ss.values() for seg in s]
    batches = [len(np.unique(f.seq // 6)) for f in segs]  # a merged segment holds entries of several batches
    assert all(n == 1 for f, n in zip(segs, batches) if len(f) > 8), [(len(f), n) for f, n in zip(segs, batches)]
    assert any(n > 1 for n in batches) and sum(map(len, segs)) > 3 * 8  # not vacuous: merges, entries above a cap


def test_a_wave_without_input_on_its_shard_still_hands_its_state_on(tmp_path):
    """A shard no input partition sent anything to (a paced batch of a few rows) runs its
    first wave all the same: its state goes to the next wave through an exchange file, though
    no input task made the state directory."""
    w, tables = _three_way(3, 10, 4)
    plan = optimize(w).plan
    assert ShardProgram(plan, 2).last >= 2  # not vacuous: the state goes on to a later wave
    spec = Batch(plan, f"test-{id(plan)}", 2, 0, str(tmp_path / "out"), str(tmp_path / "_state"), 1, ())
    got = list(run_wave(spec, 1, 1, []))
    assert [kind for _, (kind, _) in got if kind == STATE] == [STATE]
    assert spec.state_dir.is_dir()
