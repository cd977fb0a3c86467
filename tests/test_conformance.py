"""One probe semantics: every engine runs the same edge rules (:func:`mqjoin.runtime.rules.plan_rules`:
inserts, probes with their keys, routes and windows, filters, emits), so on the same random
workloads and data they all give the oracle's result sets and the same probe messages.

The engines: the per-tuple reference executor, the vectorised executor (the whole input at
once, and a few arrivals at a time), the adaptive executor held on the static plan; and on
Spark (marked ``slow``: one local[2] session, 2–3 micro-batches) the driver mode, the
distributed mode and the adaptive deployment.  Probe messages are compared per store (what
every engine reports); the adaptive runs report them per epoch, so their total is compared.
"""

from __future__ import annotations

import pytest

from _cases import cases, filtered_cases

from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.epochs import run_adaptive
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.runtime.vector import run_vector

CONFIGS = [("mqo", "single", True), ("mqo", "replicas", True), ("individual", "single", False)]
CASES = [(seed, w, t, c) for c in CONFIGS for seed, w, t in cases(4, start=7100, max_rows=15)
         + filtered_cases(2, start=7200, max_rows=15)]


def _id(v) -> str:
    if isinstance(v, int):
        return f"seed{v}"
    if isinstance(v, tuple):
        return "-".join(map(str, v))
    return ""


def _plan(w, config):
    mode, pol, mirs = config
    return optimize(w, mode=mode, partitioning=pol, mirs=mirs).plan


def _fixed(plan):
    """An optimiser for the adaptive executor that always answers ``plan``."""
    return lambda workload, policy: plan


def test_the_cases_are_worth_running():
    """Not vacuous: results, MIR stores, broadcast probes, filters and windows of every kind."""
    results = mirs = broadcasts = filtered = 0
    windows = set()
    for _, w, t, config in CASES:
        plan = _plan(w, config)
        results += sum(map(len, oracle_results(w, t).values()))
        mirs += sum(not s.mir.is_base for s in plan.stores)
        broadcasts += sum(e.kind == "probe" and e.route is None for e in plan.edges)
        filtered += any(q.filters for q in w.queries)
        windows |= {r.window for r in w.relations if r.name in w.used_relations}
    assert results >= 150 and mirs >= 3 and broadcasts >= 1 and filtered >= 2
    assert None in windows and len(windows - {None}) >= 2


@pytest.mark.parametrize("seed,w,tables,config", CASES, ids=_id)
def test_in_process_engines_agree(seed, w, tables, config):
    plan = _plan(w, config)
    want = oracle_results(w, tables)
    ref = run_reference(plan, tables)
    assert ref.result_sets() == want
    for batch in (None, 3):
        vec = run_vector(plan, tables, batch=batch)
        assert vec.result_sets() == want, f"vectorised, batch {batch}"
        assert vec.probe_messages == ref.probe_messages, f"vectorised, batch {batch}"
    ad = run_adaptive(w, tables, AdaptivePolicy(adapt=False, epoch=1e9), optimizer=_fixed(plan))
    assert ad.result_sets() == want
    assert sum(e.probe_messages for e in ad.epochs) == ref.total_probe_messages


SPARK_CASES = [CASES[0], CASES[len(CASES) // 3 + 1], CASES[-1]]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["driver", "distributed", "adaptive"])
@pytest.mark.parametrize("seed,w,tables,config", SPARK_CASES, ids=_id)
def test_spark_engines_agree(seed, w, tables, config, engine, spark, tmp_path):
    pytest.importorskip("pyspark")
    from _spark import TIMEOUT

    from mqjoin.runtime.spark.launch import run_spark

    plan = _plan(w, config)
    ref = run_reference(plan, tables)
    total = sum(len(t) for t in tables.values())
    kw = dict(spark=spark, max_rows_per_batch=-(-total // 3), timeout=TIMEOUT)
    if engine == "adaptive":
        d = run_spark(w, tables, tmp_path, adaptive=AdaptivePolicy(adapt=False, epoch=1e9),
                      optimizer=_fixed(plan), **kw)
        assert d.results() == oracle_results(w, tables)
        assert sum(e.probe_messages for e in d.snapshot().epochs) == ref.total_probe_messages
        return
    d = run_spark(plan, tables, tmp_path, mode=engine, **kw)
    assert d.results() == oracle_results(w, tables)
    per_store = d.stores.groupby("store")["messages"].sum().to_dict()
    assert {s: int(m) for s, m in per_store.items() if m} == {s: m for s, m in ref.store_messages.items() if m}
