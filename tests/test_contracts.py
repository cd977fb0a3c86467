"""The runtime's named contracts (mqjoin.runtime.contracts) and the planner contract
(mqjoin.planners.contract): every engine, deployment and live source — the real ones and the
tests' fakes — checked member by member (names and parameter names, not a runtime-checkable
isinstance, which sees names only), the in-process engines run, and a planner added by one
registry entry that works through optimize and compare."""

from __future__ import annotations

import pytest

from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.model.errors import PlannerError
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload
from mqjoin.planning.comparison import compare, settings
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.options import OptimizeOptions
from mqjoin.planners import registry
from mqjoin.planners.contract import ByRule, Planner
from mqjoin.planners.trees import JoinTree
from mqjoin.runtime.contracts import (AdaptiveSource, BatchEngine, Deployment, Engine, mismatches)
from mqjoin.runtime.epochs import AdaptiveReplay, adaptive_engine
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.runtime.vector import run_vector

W = parse_workload("""
defaults: {selectivity: 0.5, window: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "R(a), S(a)"}
""")
TABLES = {
    "R": Table.from_columns("R", {"ts": [0.0, 1.0, 2.5, 4.0], "a": [1, 2, 1, 2]}),
    "S": Table.from_columns("S", {"ts": [0.5, 1.5, 3.0, 4.5], "a": [1, 2, 1, 1], "b": [7, 7, 8, 7]}),
    "T": Table.from_columns("T", {"ts": [0.7, 2.0, 3.5, 5.0], "b": [7, 8, 8, 7]}),
}


# --------------------------------------------------------------------------------------------
# engines
# --------------------------------------------------------------------------------------------


IN_PROCESS: dict[str, Engine] = {
    "reference": run_reference,
    "vector": run_vector,
    "adaptive": adaptive_engine(AdaptivePolicy(epoch=1.0), speedup=1e9),
}


@pytest.mark.parametrize("name", IN_PROCESS)
def test_every_in_process_engine_is_an_engine_and_gives_the_oracles_results(name):
    engine = IN_PROCESS[name]
    assert mismatches(Engine, engine) == []
    run = engine(optimize(W).plan, TABLES)
    want = oracle_results(W, TABLES)
    assert any(want.values()) and run.result_sets() == want
    assert isinstance(run.summary(), dict) and run.summary()


def test_an_engine_that_needs_more_than_a_plan_and_tables_is_refused():
    def run_with_out(plan, tables, out):
        return None

    def run_by_names(workload, data):
        return None

    assert mismatches(Engine, run_with_out) == [
        "__call__: parameters (plan, tables, out) where the contract has (plan, tables)"]
    assert mismatches(Engine, run_by_names) == []  # positional-only in the contract: names are the engine's


def test_the_spark_engines_conform():
    pytest.importorskip("pyspark")
    from mqjoin.runtime.spark.distributed import ShardedEngine
    from mqjoin.runtime.spark.driver import DriverEngine, VectorDriverEngine
    from mqjoin.runtime.spark.epochs import AdaptiveDriverEngine
    from mqjoin.runtime.spark.launch import spark_engine

    assert mismatches(Engine, spark_engine("out")) == []
    for cls in (DriverEngine, VectorDriverEngine, ShardedEngine, AdaptiveDriverEngine):
        assert mismatches(BatchEngine, cls) == [], cls.__name__


# --------------------------------------------------------------------------------------------
# deployments and live sources
# --------------------------------------------------------------------------------------------


def test_the_deploy_panels_fake_and_every_real_deployment_conform():
    pytest.importorskip("ipywidgets")
    pytest.importorskip("plotly")
    from test_deploy_panel import FakeDeployment

    assert mismatches(Deployment, FakeDeployment(optimize(W).plan, "mqjoin")) == []
    pytest.importorskip("pyspark")
    from mqjoin.runtime.spark.deployment import Deployment as SparkDeployment
    from mqjoin.runtime.spark.epochs import AdaptiveDeployment

    for cls in (SparkDeployment, AdaptiveDeployment):
        assert mismatches(Deployment, cls) == [], cls.__name__


def test_a_fake_that_drifts_from_the_contract_is_caught():
    class Drifted:
        plan, total, done, ui_url, batches, queries, progress = None, 0, False, None, None, None, None

        def subscribe(self, f):  # the panel passes its callback by position, but the contract names it
            pass

    assert mismatches(Deployment, Drifted()) == [
        "stop: missing", "subscribe: parameters (f) where the contract has (callback)"]


def test_the_live_sources_fake_and_every_real_one_conform():
    pytest.importorskip("ipywidgets")
    from test_timeline import FakeLive

    assert mismatches(AdaptiveSource, FakeLive(None)) == []
    assert mismatches(AdaptiveSource, AdaptiveReplay) == []
    pytest.importorskip("pyspark")
    from mqjoin.runtime.spark.epochs import AdaptiveDeployment

    assert mismatches(AdaptiveSource, AdaptiveDeployment) == []


# --------------------------------------------------------------------------------------------
# planners
# --------------------------------------------------------------------------------------------


def _flat(workload, query, options):
    """One flat join of the query's relations in declaration order (an MJoin without its
    probing-sequence rule's name)."""
    return JoinTree.join(JoinTree.leaf(r) for r in workload.query(query).relations)


def test_every_registered_planner_is_a_planner():
    for name in registry.PLANNERS:
        assert mismatches(Planner, registry.planner_of(name).plan) == [], name


def test_a_planner_added_by_one_registry_entry_plans_and_compares(monkeypatch):
    entry = registry.PlannerEntry("flat", ByRule("flat", _flat), "one flat join per query", compared=True)
    monkeypatch.setitem(registry.REGISTRY, "flat", entry)
    monkeypatch.setattr(registry, "PLANNERS", registry.PLANNERS + ("flat",))
    r = optimize(W, planner="flat", mode="individual")
    assert r.planner == "flat" and r.ilp.solver == "flat" and r.trees == {"q1": "(R ⋈ S ⋈ T)", "q2": "(R ⋈ S)"}
    assert run_reference(r.plan, TABLES).result_sets() == oracle_results(W, TABLES)
    assert registry.operator_trees(W, "flat")["q1"] == _flat(W, "q1", None)
    plans = compare(W, settings(("clash", "flat"), policies=("single",)))
    assert {(s.planner, s.mode) for s in plans} == {("clash", "individual"), ("clash", "shared"), ("clash", "mqo"),
                                                     ("flat", "individual"), ("flat", "shared")}
    assert all(p.probe_cost >= plans[next(s for s in plans if s.planner == "clash" and s.mode == "mqo")].probe_cost
               for p in plans.values())
    with pytest.raises(PlannerError, match="MJoin decomposition applies to the mjoin planner only"):
        optimize(W, planner="flat", decompose=True)


def test_a_planner_known_by_name_only_is_a_typed_error(monkeypatch):
    monkeypatch.setattr(registry, "PLANNERS", registry.PLANNERS + ("later",))
    with pytest.raises(PlannerError, match="known by name only"):
        optimize(W, planner="later")


def test_keywords_and_an_options_value_give_the_same_plan():
    o = OptimizeOptions(mode="shared", partitioning="replicas", mirs=False)
    assert optimize(W, o).plan == optimize(W, mode="shared", partitioning="replicas", mirs=False).plan
    assert optimize(W, o, mode="individual").mode == "individual" and o.mode == "shared"


def test_deploy_options_are_one_checked_value_that_keywords_build():
    pytest.importorskip("pyspark")
    from mqjoin.model.errors import DataError, EngineError, OptionError
    from mqjoin.planning.options import with_keywords
    from mqjoin.runtime.spark.launch import DeployOptions

    o = with_keywords(DeployOptions, None, {"speedup": 10, "mode": "driver"})
    assert o == DeployOptions(speedup=10, mode="driver") and o.pacing.speedup == 10 and not o.is_adaptive
    assert with_keywords(DeployOptions, o, {"changes": [1]}).is_adaptive
    with pytest.raises(OptionError, match="unknown option 'sped_up'"):
        with_keywords(DeployOptions, None, {"sped_up": 10})
    with pytest.raises(DataError, match="speedup must be positive"):
        DeployOptions(speedup=0)
    with pytest.raises(EngineError, match="distributed mode runs static plans"):
        DeployOptions(adaptive=True, mode="distributed")
    with pytest.raises(EngineError, match="engine 'native' only"):
        DeployOptions(partitions=4)
