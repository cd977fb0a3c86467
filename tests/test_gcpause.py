"""paused_gc: no automatic collection while any pause is open, in any thread; the collector
as it was once the last pause ends — and never turned back on when the user turned it off."""

from __future__ import annotations

import gc
import threading

import pytest

from mqjoin.support.gcpause import paused_gc


@pytest.fixture(autouse=True)
def collector_as_it_was():
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def automatic_collections(during) -> int:
    """Collections the interpreter starts by itself while ``during()`` allocates cycles."""
    seen = []

    def count(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        during()
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def make_cycles(n: int = 20_000) -> None:
    for _ in range(n):
        a = []
        a.append(a)


def test_no_automatic_collection_inside_and_as_before_after():
    assert gc.isenabled()
    assert automatic_collections(make_cycles) > 0  # the check can see a collection
    with paused_gc():
        assert automatic_collections(make_cycles) == 0
    assert gc.isenabled() and automatic_collections(make_cycles) > 0


def test_pauses_across_threads_end_with_the_last_one():
    before = gc.get_threshold()
    entered, leave_a, left_a = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with paused_gc():
            entered.set()
            leave_a.wait(10)
        left_a.set()

    t = threading.Thread(target=a)
    t.start()
    assert entered.wait(10)
    with paused_gc():
        leave_a.set()
        assert left_a.wait(10)
        # thread a's pause ended, this one is still open
        assert automatic_collections(make_cycles) == 0
    t.join(10)
    assert gc.get_threshold() == before and automatic_collections(make_cycles) > 0


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()
    gc.enable()
    with paused_gc():
        gc.disable()  # the user's choice, made while a pause is open
    assert not gc.isenabled()


def test_the_user_turning_the_collector_on_does_not_end_a_pause():
    with paused_gc():
        gc.enable()
        assert automatic_collections(make_cycles) == 0


def test_thresholds_the_user_sets_during_a_pause_are_kept():
    with paused_gc():
        gc.set_threshold(1234, 11, 12)
    assert gc.get_threshold() == (1234, 11, 12)


def test_an_error_inside_ends_the_pause():
    before = gc.get_threshold()
    with pytest.raises(KeyError):
        with paused_gc():
            raise KeyError("x")
    assert gc.get_threshold() == before and automatic_collections(make_cycles) > 0


def test_as_a_decorator_each_call_pauses():
    @paused_gc()
    def work():
        return automatic_collections(make_cycles)

    assert work() == 0 and work() == 0
    assert automatic_collections(make_cycles) > 0


def test_clash_plans_with_the_collector_paused_plan_building_included(monkeypatch):
    """CLASH's planner pauses the collector through the whole call: plan building too, which
    would otherwise pay for the full collections that the solve's live objects set off."""
    from mqjoin.datasets.random_workloads import random_workload
    from mqjoin.planning import clash
    from mqjoin.planning.optimizer import optimize

    seen = []
    real = clash.build_plan

    def recording(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(clash, "build_plan", recording)
    before = gc.get_threshold()
    for mode in ("mqo", "individual"):
        optimize(random_workload(6, 30, 3, seed=4), mode=mode)
    assert len(seen) >= 2 and set(seen) == {0}
    assert gc.get_threshold() == before
