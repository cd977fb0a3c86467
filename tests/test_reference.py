"""docs/model.md §6 — the central correctness property: the reference executor's results equal a
brute-force oracle and do not depend on the plan (every mode, policy, with/without MIRs)."""

from __future__ import annotations

import random

import pytest

from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import partition_of, run_reference
from mqjoin.runtime.vector import run_vector
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload

from _cases import cases

CONFIGS = [(m, p, mirs) for m in ("mqo", "individual", "shared") for p in ("single", "replicas")
           for mirs in (True, False)]


@pytest.mark.parametrize("seed,workload,tables", cases(40), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_results_equal_oracle_for_every_plan(seed, workload, tables):
    want = oracle_results(workload, tables)
    for mode, pol, mirs in CONFIGS:
        run = run_reference(optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan, tables)
        for q, rows in run.results.items():
            assert len(rows) == len(set(rows)), f"{mode}/{pol}/mirs={mirs}: duplicate results in {q}"
        assert run.result_sets() == want, f"seed {seed}: {mode}/{pol}/mirs={mirs} differs from the oracle"


@pytest.mark.slow
@pytest.mark.parametrize("seed,workload,tables", cases(60, start=1000, max_rows=40),
                         ids=lambda v: str(v) if isinstance(v, int) else "")
def test_results_equal_oracle_larger(seed, workload, tables):
    want = oracle_results(workload, tables)
    for mode, pol, mirs in CONFIGS:
        run = run_reference(optimize(workload, mode=mode, partitioning=pol, mirs=mirs).plan, tables)
        assert run.result_sets() == want, f"seed {seed}: {mode}/{pol}/mirs={mirs}"


@pytest.mark.parametrize("seed,workload,tables", cases(8, start=500), ids=lambda v: str(v) if isinstance(v, int)
                         else "")
def test_output_files_hold_the_oracle_sets_written_in_parts_and_counted_from_metadata(seed, workload, tables, tmp_path,
                                                                                     monkeypatch):
    """``OUT/<query>.parquet`` from the reference run (tuples converted in bulk) and from the
    same results handed over in parts as arrays (:class:`ResultWriter`, as a streaming engine
    does) read back as the oracle's sets; counts are the files' metadata."""
    import numpy as np

    from mqjoin.model.tables import ResultWriter, read_results, result_counts, write_results

    want = oracle_results(workload, tables)
    run = run_reference(optimize(workload).plan, tables)
    write_results(workload, run.results, tmp_path / "whole")
    assert read_results(workload, tmp_path / "whole") == want
    assert result_counts(workload, tmp_path / "whole") == {q: len(s) for q, s in want.items()} == dict(run.counts)
    rng = np.random.default_rng(seed)
    with ResultWriter(workload, tmp_path / "parts") as put:
        for q in workload.queries:
            rows = np.array(sorted(want[q.name]), dtype=np.int64).reshape(-1, len(q.relations))
            for part in np.array_split(rows, sorted(rng.integers(0, len(rows) + 1, size=3))):
                put.add(q.name, part)
    assert read_results(workload, tmp_path / "parts") == want
    assert result_counts(workload, tmp_path / "parts") == result_counts(workload, tmp_path / "whole")
    import mqjoin.runtime.reference as reference

    monkeypatch.setattr(reference, "SINK_EVERY", 3)  # many hand-overs on a small input
    with ResultWriter(workload, tmp_path / "sunk") as put:
        sunk = run_reference(optimize(workload).plan, tables, sink=put.add)
    assert read_results(workload, tmp_path / "sunk") == want and dict(sunk.counts) == dict(run.counts)
    assert not any(sunk.results.values())  # handed over, not kept


W3 = """
defaults: {selectivity: 0.5, parallelism: 2}
relations:
  R: {attributes: [a], window: 1}
  S: {attributes: [a, b], window: 2}
  T: {attributes: [b], window: null}
queries:
  q: R(a), S(a,b), T(b)
"""


def test_window_boundaries_and_ties_by_hand():
    w = parse_workload(W3)
    tables = {
        "R": Table.from_columns("R", {"ts": [0.0, 3.0, 5.0], "a": [1, 1, 1]}),
        "S": Table.from_columns("S", {"ts": [1.0, 3.0], "a": [1, 1], "b": [7, 7]}),
        "T": Table.from_columns("T", {"ts": [3.0, 100.0], "b": [7, 7]}),
    }
    # (R0,S0,T0): T=3, R0 is 3 old > window 1 → no.  (R1,S0,T0): T=3, S0 2 old ≤ 2 → yes.
    # (R1,S1,T0): all at 3 (a tie: the latest in tie order produces it) → yes.
    # (R2,S1,T0): T=5, S1 2 old ≤ 2, T unbounded → yes.  (R2,S0,*): S0 4 old → no.
    # T1 at 100: R windows exclude everything.
    want = {(1, 0, 0), (1, 1, 0), (2, 1, 0)}
    assert oracle_results(w, tables)["q"] == want
    for mode, pol, mirs in CONFIGS:
        plan = optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan
        assert run_reference(plan, tables).result_sets()["q"] == want, (mode, pol, mirs)
        for batch in (None, 1, 2):  # the vectorised executor, a batch of arrivals at a time
            assert run_vector(plan, tables, batch=batch).result_sets()["q"] == want, (mode, pol, mirs, batch)


def test_nulls_never_join_and_mixed_int_float_values_do():
    w = parse_workload("""
defaults: {selectivity: 0.5, parallelism: 3}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    tables = {"R": Table.from_columns("R", {"ts": [0, 1, 2], "a": [None, 1, 2.0]}),
              "S": Table.from_columns("S", {"ts": [0, 1, 2], "a": [None, 1.0, 2]})}
    got = run_reference(optimize(w).plan, tables).result_sets()["q"]
    assert got == {(1, 1), (2, 2)} == oracle_results(w, tables)["q"]


def test_partition_of_is_deterministic_and_consistent_for_equal_values():
    assert partition_of("abc", 7) == partition_of("abc", 7)
    assert partition_of(5, 4) == partition_of(5.0, 4) == 3
    assert all(0 <= partition_of(v, 3) < 3 for v in (-5, 2**70, "x", 1.5, None))


def test_keys_with_a_stride_fill_every_partition():
    """TPC-H's order keys use 8 of every 32 numbers: ``key % 32`` would leave 24 of 32
    partitions empty; the partition function spreads them within a few per cent of even."""
    keys = [k for k in range(1, 32 * 1000) if k % 32 < 8]
    for p in (8, 32, 128):
        counts = [0] * p
        for k in keys:
            counts[partition_of(k, p)] += 1
        assert max(counts) / (len(keys) / p) < 1.25, (p, max(counts))


def test_broadcast_counts_once_per_partition_and_routed_once():
    w = parse_workload("""
defaults: {rate: 10, selectivity: 0.1}
relations:
  R: {attributes: [a]}
  S: {attributes: [a, b], parallelism: 5}
  T: {attributes: [b]}
queries: {q: "R(a), S(a,b), T(b)"}
""")
    res = optimize(w, mirs=False)
    tables = uniform_streams(w, seed=3)
    run = run_reference(res.plan, tables)
    # every node's messages = partial results reaching it × (1 if routed else parallelism)
    for node in res.plan.nodes:
        edge = res.plan.edge[node.edge]
        p = res.plan.store[node.store].parallelism
        sent = run.probe_messages[node.edge]
        if edge.route is None and p > 1:
            assert sent % p == 0 and node.broadcast
        if node.parent is None:  # first hop: one partial result per input tuple
            assert sent == len(tables[node.root]) * (1 if edge.route is not None else p)


def test_measured_probe_messages_match_the_model_when_its_assumptions_hold():
    w = parse_workload("""
defaults: {rate: 1500, window: null, horizon: 1, parallelism: 3}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
queries:
  q1: R(a), S(a,b), T(b)
  q2: S(b), T(b,c), U(c)
selectivities: {R.a = S.a: 0.002, S.b = T.b: 0.002, T.c = U.c: 0.002}
""")
    for pol in ("single", "replicas"):
        plan = optimize(w, partitioning=pol).plan
        measured = sum(run_reference(plan, uniform_streams(w, seed=s), collect=False).total_probe_messages
                       for s in range(3)) / 3
        assert measured / plan.probe_cost == pytest.approx(1.0, abs=0.05), pol


def test_window_eviction_bounds_store_size():
    w = parse_workload("""
defaults: {rate: 2000, window: 0.1, selectivity: 0.001, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q: "R(a), S(a,b), T(b)"}
""")
    tables = uniform_streams(w, duration=5.0, seed=1)
    for mirs in (True, False):
        run = run_reference(optimize(w, mirs=mirs, partitioning="replicas").plan, tables, collect=False)
        for sid, rows in run.store_rows.items():
            if len(sid.split("[")[0]) == 1:  # base stores hold ~ rate × window (+ purge slack)
                assert rows < 2000 * 0.1 * 1.5 + 50, (sid, rows)


def test_operation_counts_by_hand():
    """MJoin's instrumentation (hashes, moves, comparisons, intermediate tuples) on three
    arrivals of a two-way join: every arrival is hashed and moved into its store once and hashes
    its key once to probe the other store; S0 and R1 each compare with one stored entry."""
    w = parse_workload("""
defaults: {selectivity: 0.5, parallelism: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    tables = {"R": Table.from_columns("R", {"ts": [0.0, 2.0], "a": [1, 1]}),
              "S": Table.from_columns("S", {"ts": [1.0], "a": [1]})}
    run = run_reference(optimize(w).plan, tables, instrument=True)
    assert run.operations == {"hashes": 6, "moves": 3, "comparisons": 2, "intermediate": 0}
    assert sorted(run.results["q"]) == [(0, 0), (1, 0)]
    assert run_reference(optimize(w).plan, tables).operations == {}


def test_intermediate_tuples_are_the_probes_they_send_on():
    """On one partition every intermediate tuple of a probe order without MIRs is one probe
    message to the next store: messages = input-tuple probes + intermediate tuples."""
    w = parse_workload("""
defaults: {selectivity: 0.2, parallelism: 1, window: 3}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q: "R(a), S(a,b), T(b)"}
""")
    rng = random.Random(3)
    tables = {r.name: Table.from_columns(r.name, {"ts": sorted(rng.uniform(0, 10) for _ in range(60)),
                                                  **{a: [rng.randint(0, 4) for _ in range(60)] for a in r.attributes}})
              for r in w.relations}
    plan = optimize(w, mirs=False).plan
    run = run_reference(plan, tables, instrument=True)
    first_hops = sum(len(tables[r]) for r, labs in plan.sources.items() for lab in labs
                     if plan.edge[lab].kind == "probe")
    assert run.operations["intermediate"] > 0
    assert run.total_probe_messages == first_hops + run.operations["intermediate"]
    assert run.operations["moves"] == sum(len(t) for t in tables.values())  # base stores only
    assert run.result_sets() == oracle_results(w, tables)
