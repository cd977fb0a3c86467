"""The Spark engine's process-wide state, without a JVM: the StreamingQueryListener registry
(one listener per live session, never handed to another session), the replay-log cache
(never serving a log rewritten at the same path), the lock that orders query changes with
the start of an adaptive deployment, and stop() reporting a query that would not stop."""

from __future__ import annotations

import gc
import logging
import threading
import types

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa

from mqjoin.runtime.spark import deployment, metrics, source


class FakeStreams:
    def __init__(self) -> None:
        self.listeners: list = []

    def addListener(self, listener) -> None:  # pyspark's name
        self.listeners.append(listener)


class FakeSession:
    """What the listener registry touches of a SparkSession: its streams and whether its
    context is stopped (pyspark's own test: the context's gateway handle is gone)."""

    def __init__(self) -> None:
        self.streams = FakeStreams()
        self.sparkContext = types.SimpleNamespace(_jsc=object(), master="local[2]")

    def stop(self) -> None:
        self.sparkContext._jsc = None


def test_a_new_session_at_a_reused_address_gets_its_own_listener(monkeypatch):
    """CPython may place a new object at the address (the ``id``) of a collected one; here
    every session gets the same id, so the reuse happens on every run."""
    monkeypatch.setattr(deployment, "id", lambda obj: 4242, raising=False)
    first = FakeSession()
    old = metrics.Listener.of(first)
    assert len(first.streams.listeners) == 1
    del first
    gc.collect()
    s = FakeSession()
    got = metrics.Listener.of(s)
    assert got is not old
    assert len(s.streams.listeners) == 1, "the new session's queries would report to nobody"


def test_a_stopped_session_leaves_the_registry_and_a_live_one_keeps_its_listener():
    s = FakeSession()
    me = metrics.Listener.of(s)
    assert metrics.Listener.of(s) is me and len(s.streams.listeners) == 1
    s.stop()
    other = FakeSession()
    metrics.Listener.of(other)
    assert s not in metrics.Listener._installed
    assert other in metrics.Listener._installed


W = """
defaults: {selectivity: 0.5}
relations:
  R: {attributes: [a]}
  S: {attributes: [a]}
queries:
  q: R(a), S(a)
"""


def _tables():
    from mqjoin.model.tables import Table

    return {r: Table.from_columns(r, {"ts": [0.0, 1.0], "a": [1, 2]}) for r in ("R", "S")}


class StuckQuery:
    def stop(self) -> None:
        raise RuntimeError("py4j: the gateway is gone")


def test_stop_names_a_query_that_would_not_stop_and_stops_the_others(tmp_path, caplog):
    from mqjoin.model.workload import parse_workload
    from mqjoin.planning.optimizer import optimize

    d = deployment.Deployment(optimize(parse_workload(W)).plan, _tables(), tmp_path / "out", spark=FakeSession(),
                              checkpoint=tmp_path / "ck")
    stopped = []
    d._queries = {"plan": StuckQuery(), "other": types.SimpleNamespace(stop=lambda: stopped.append(True))}
    with caplog.at_level(logging.WARNING, logger=deployment.__name__):
        d.stop()
    assert stopped == [True]
    records = [r for r in caplog.records if r.name == deployment.__name__]
    assert len(records) == 1
    assert "plan" in records[0].getMessage() and "the gateway is gone" in records[0].getMessage()


def test_a_replay_log_rewritten_at_the_same_path_is_read_anew(tmp_path):
    path = tmp_path / "replay.parquet"
    source.write_replay_log(pa.table({"_seq": [0, 1, 2], "x": [10, 11, 12]}), path)
    assert source._rows(str(path), 0, 3)["x"].to_pylist() == [10, 11, 12]
    source.write_replay_log(pa.table({"_seq": [0, 1, 2, 3], "x": [20, 21, 22, 23]}), path)
    assert source._rows(str(path), 0, 4)["x"].to_pylist() == [20, 21, 22, 23]
    assert source._rows(str(path), 1, 3)["x"].to_pylist() == [21, 22]


def test_changes_submitted_before_the_start_take_one_lock(tmp_path):
    """Two threads submitting before the start: the second waits for the first to finish
    recording its change (a fresh lock per call let both edit the changelog at once)."""
    from mqjoin.model.workload import parse_workload
    from mqjoin.runtime.spark.epochs import AdaptiveDeployment

    d = AdaptiveDeployment(parse_workload(W), _tables(), tmp_path / "out", spark=FakeSession(),
                           checkpoint=tmp_path / "ck")
    inside, release = threading.Event(), threading.Event()
    rewrite = d._rewrite_config

    def slow_rewrite() -> None:
        inside.set()
        assert release.wait(10)
        rewrite()

    d._rewrite_config = slow_rewrite
    first = threading.Thread(target=d.submit, kwargs={"add": {"q2": "R(a), S(a)"}})
    first.start()
    assert inside.wait(10)
    d._rewrite_config = rewrite
    second = threading.Thread(target=d.submit, kwargs={"add": {"q3": "S(a), R(a)"}})
    second.start()
    second.join(0.5)
    try:
        assert second.is_alive(), "the second change was recorded while the first was half-way"
    finally:
        release.set()
        first.join(10)
        second.join(10)
    assert [sorted(c.add) for c in d.changes] == [["q2"], ["q3"]]
    assert [sorted(c.add) for c in d.controller.changes] == [["q2"], ["q3"]]


def test_a_terminated_query_leaves_its_listener():
    s = FakeSession()
    me = metrics.Listener.of(s)
    seen = []
    me.routes["q1"] = lambda kind, d: seen.append(kind)
    me.routes["q2"] = lambda kind, d: seen.append(kind)
    s.streams.listeners[0].onQueryTerminated(types.SimpleNamespace(id="q1", exception=None))
    assert seen == ["terminated"] and list(me.routes) == ["q2"]
