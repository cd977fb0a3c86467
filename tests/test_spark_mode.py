"""``--spark-mode auto``: the mode chosen for the user and its reason, without Spark."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")  # the Spark package's modules; no session starts here

from mqjoin.model.errors import EngineError
from mqjoin.model.tables import Table
from mqjoin.model.workload import parse_workload
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.spark import mode
from mqjoin.runtime.spark.mode import (STATE_BYTES_PER_ROW, ModeChoice, choose_mode, estimated_state_rows,
                                       mode_choice)

W = parse_workload('''
defaults: {selectivity: 0.1, window: null, parallelism: 2, horizon: 1}
relations: {R: {attributes: [a], rate: 1000}, S: {attributes: [a], rate: 1000}}
queries: {q: "R(a), S(a)"}
''')


def _tables(seconds: float) -> dict[str, Table]:
    return {r: Table.from_columns(r, {"ts": [0.0, seconds], "a": [1, 2]}) for r in ("R", "S")}


@pytest.mark.parametrize("master", ["spark://h:7077", "yarn", "k8s://https://h:443", "mesos://h:5050"])
def test_a_cluster_master_gets_the_distributed_mode_whatever_the_state(master):
    got = choose_mode("auto", master, state_rows=1, memory=1e12)
    assert got.mode == "distributed" and master in got.reason


def test_a_local_master_keeps_the_stores_in_the_driver_up_to_the_share_of_its_memory():
    memory = 2e9
    fits = 0.5 * memory / STATE_BYTES_PER_ROW
    assert choose_mode("auto", "local[2]", fits, memory).mode == "driver"
    over = choose_mode("auto", "local[2]", fits * 1.01, memory)
    assert over == ModeChoice("distributed", over.reason)
    assert "> 50 % of available memory 2.0 GB" in over.reason and "10 million rows" in over.reason
    assert choose_mode("auto", "local[2]", fits * 1.01, memory, share=0.9).mode == "driver"


def test_a_mode_asked_for_is_kept_and_a_bad_one_is_an_engine_error():
    assert choose_mode("driver", "spark://h:7077").mode == "driver"
    assert choose_mode("distributed", "local[1]", 1, 1e12).mode == "distributed"
    with pytest.raises(EngineError, match="unknown Spark mode 'cluster'"):
        choose_mode("cluster", "local[1]")


def test_the_estimate_covers_the_input_span_and_the_choice_follows_the_available_memory(monkeypatch):
    plan = optimize(W).plan
    # full history: the base stores hold rate × span rows each (plus what the plan materialises)
    short, long = estimated_state_rows(plan, _tables(1.0)), estimated_state_rows(plan, _tables(100.0))
    assert short >= 2000 and long >= 200_000 and long > 50 * short
    assert estimated_state_rows(plan) == plan.memory  # no data: docs/model.md §5's memory
    monkeypatch.setattr(mode, "available_memory", lambda: 2 ** 30)
    small = mode_choice(plan, _tables(100.0), master="local[2]")
    assert small.mode == "driver" and "of available memory 1.1 GB" in small.reason
    monkeypatch.setattr(mode, "available_memory", lambda: 2 ** 20)
    tiny = mode_choice(plan, _tables(100.0), master="local[2]")
    assert tiny.mode == "distributed" and tiny.reason.startswith("estimated state ")
    assert mode_choice(None, None).mode == "driver"  # adaptive: no plan, the driver's executor
