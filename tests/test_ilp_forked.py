"""The blocks' searches on two cores (mqjoin.planning.ilp.forked, BlockCosts.spread): the
child's half comes back, errors and stops end the child, and the plans are those of one core."""

import os
import signal
import sys
import threading
import time
import types

import pytest

from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.ilp import blocks as ilp_blocks
from mqjoin.planning.ilp import forked
from mqjoin.planning.ilp import paths as ilp_paths
from mqjoin.planning.optimizer import optimize

needs_fork = pytest.mark.skipif(not forked.available(), reason="the searches fork on Linux with two cores only")


@pytest.fixture
def children(monkeypatch) -> list[int]:
    """The pids of the children forked during the test (other tests may leave processes of
    their own, such as a JVM, so only these are checked)."""
    pids, fork = [], os.fork

    def recording() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording)
    return pids


def _reaped(pids: list[int]) -> bool:
    """Whether every one of these children has ended and been waited for."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return bool(pids)


@needs_fork
def test_the_child_computes_its_half_in_another_process(children):
    here, there = forked.split(lambda: os.getpid(), lambda: (os.getpid(), forked.in_child()))
    assert here == os.getpid() and there[0] != os.getpid() and there[1] is True
    assert not forked.in_child() and _reaped(children)


#: the real check; the tests of the fork's mechanics below run without it, since the test
#: process may have threads of its own by then (the session's Spark, its py4j gateway)
FORK_HAZARD = forked.fork_hazard


@pytest.fixture(autouse=True)
def no_hazard(monkeypatch):
    monkeypatch.setattr(forked, "fork_hazard", lambda: None)


def _busy_thread():
    """A thread that runs until the returned function is called (which waits for its end)."""
    done = threading.Event()
    t = threading.Thread(target=done.wait, name="busy", daemon=True)
    t.start()

    def stop() -> None:
        done.set()
        t.join()

    return stop


def test_no_fork_while_another_thread_runs(monkeypatch, children):
    """A child would copy a lock another thread holds, and hang on it: both halves run here.
    The explorer optimises on a thread of its own, and a Jupyter kernel has threads of its own."""
    monkeypatch.setattr(forked, "fork_hazard", FORK_HAZARD)
    for name in ("pyspark", "ipykernel.kernelapp"):  # the suite's own Spark session would be named first
        monkeypatch.delitem(sys.modules, name, raising=False)
    stop = _busy_thread()
    try:
        assert not forked.available() and "busy" in forked.fork_hazard()
        here, there = forked.split(lambda: os.getpid(), lambda: (os.getpid(), forked.in_child()))
    finally:
        stop()
    assert here == os.getpid() and there == (os.getpid(), False) and not children
    out = []
    t = threading.Thread(target=lambda: out.append(forked.split(lambda: "here", lambda: forked.in_child())))
    t.start()
    t.join()
    assert out == [("here", False)] and not children  # the main thread waits: two threads


def test_no_fork_in_a_jupyter_kernel_or_a_spark_driver(monkeypatch, children):
    monkeypatch.setattr(forked, "fork_hazard", FORK_HAZARD)
    kernel = types.ModuleType("ipykernel.kernelapp")
    kernel.IPKernelApp = types.SimpleNamespace(initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "ipykernel.kernelapp", kernel)
    assert forked.fork_hazard() == "a Jupyter kernel" and not forked.available()
    monkeypatch.delitem(sys.modules, "ipykernel.kernelapp")
    spark = types.ModuleType("pyspark")
    spark.SparkContext = types.SimpleNamespace(_active_spark_context=object())
    monkeypatch.setitem(sys.modules, "pyspark", spark)
    assert forked.fork_hazard() == "a Spark driver" and not forked.available()
    assert forked.split(lambda: os.getpid(), lambda: os.getpid()) == (os.getpid(), os.getpid()) and not children


def test_without_fork_both_halves_run_here(monkeypatch):
    monkeypatch.setenv("MQJOIN_FORK", "0")
    assert not forked.available()
    assert forked.split(lambda: os.getpid(), lambda: os.getpid()) == (os.getpid(), os.getpid())


@needs_fork
def test_an_error_of_the_child_is_raised_in_the_parent(children):
    def there():
        raise ValueError("from the child")

    with pytest.raises(ValueError, match="from the child"):
        forked.split(lambda: 1, there)
    assert _reaped(children)


@needs_fork
def test_a_child_killed_without_an_answer_leaves_the_parents_half(children):
    def there():
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(forked.ChildFailed) as e:
        forked.split(lambda: "mine", there)
    assert e.value.here == "mine" and _reaped(children)


@needs_fork
def test_an_error_in_the_parent_kills_the_child(tmp_path, children):
    mark = tmp_path / "child-finished"

    def there():
        time.sleep(2)
        mark.write_text("still alive")

    def here():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        forked.split(here, there)
    assert _reaped(children)
    time.sleep(2.5)
    assert not mark.exists()


@needs_fork
def test_a_stop_while_waiting_for_the_child_ends_the_wait(children):
    calls = []

    def poll():
        calls.append(1)
        if len(calls) > 2:
            raise ilp_blocks.Stopped

    t0 = time.perf_counter()
    with pytest.raises(ilp_blocks.Stopped):
        forked.split(lambda: None, lambda: time.sleep(30), poll)
    assert time.perf_counter() - t0 < 10 and _reaped(children)


@needs_fork
def test_a_child_far_behind_is_killed_and_its_half_left_to_the_caller(monkeypatch, children):
    monkeypatch.setattr(forked, "PATIENCE_MIN", 0.5)
    t0 = time.perf_counter()
    with pytest.raises(forked.ChildFailed) as e:
        forked.split(lambda: "mine", lambda: time.sleep(30))
    assert e.value.here == "mine" and time.perf_counter() - t0 < 10 and _reaped(children)


def _plans(monkeypatch, fork: bool, specs) -> list[str]:
    monkeypatch.setenv("MQJOIN_FORK", "1" if fork else "0")
    out = []
    for q, k, seed in specs:
        res = optimize(random_workload(q, 100, k, seed=seed), mode="mqo", partitioning="single", mirs=True)
        assert res.ilp.status == "optimal" and res.ilp.canonical
        out.append(res.plan.to_json())
    return out


def _count_children(monkeypatch) -> list[int]:
    forks, split = [], forked.split

    def counting(*a, **k):
        forks.append(1)
        return split(*a, **k)

    monkeypatch.setattr(forked, "split", counting)
    return forks


@needs_fork
@pytest.mark.parametrize("specs", [[(10, 5, 0), (10, 5, 3)], [(40, 4, 1)]])
def test_two_cores_give_the_plans_of_one(monkeypatch, specs):
    monkeypatch.setattr(ilp_blocks, "SPREAD_QUICK_PAIRS_PER_MB", 0.0)  # (40 × 4: a fork whatever the memory)
    alone = _plans(monkeypatch, False, specs)
    forks = _count_children(monkeypatch)
    assert _plans(monkeypatch, True, specs) == alone
    assert forks


@needs_fork
@pytest.mark.parametrize("specs", [[(40, 4, 1)], [(10, 5, 0)]], ids=["four_way", "five_way"])
def test_blocks_whose_search_gives_up_in_the_child_are_finished_by_the_parent(monkeypatch, specs):
    """With a tiny node limit most searches give up.  Four-way blocks (small MIRs) then need
    HiGHS, which the child does not run: the parent takes them over where the child stopped.
    Five-way blocks search on with larger limits (``FURTHER``), on either side.  The same plan
    either way.  (The child is forked whatever the process's size: the fork rule for small MIRs
    weighs the pairs against the resident memory, which a test worker's size would decide.)"""
    monkeypatch.setattr(ilp_paths, "NODE_LIMIT", 3)
    monkeypatch.setattr(ilp_blocks, "SPREAD_QUICK_PAIRS_PER_MB", 0.0)
    alone = _plans(monkeypatch, False, specs)
    left, split = [], forked.split

    def watching(*a, **k):
        here, there = split(*a, **k)
        left.extend(there[1])  # the pairs the child left to the parent
        return here, there

    monkeypatch.setattr(forked, "split", watching)
    assert _plans(monkeypatch, True, specs) == alone
    assert left or specs[0][1] == 5


@needs_fork
def test_a_child_that_dies_has_its_half_done_by_the_parent(monkeypatch):
    specs = [(10, 5, 0)]
    alone = _plans(monkeypatch, False, specs)
    entries = ilp_blocks.BlockCosts._entries

    def dying(self, blocks, before):
        if forked.in_child():
            os.kill(os.getpid(), signal.SIGKILL)
        return entries(self, blocks, before)

    monkeypatch.setattr(ilp_blocks.BlockCosts, "_entries", dying)
    forks = _count_children(monkeypatch)
    assert _plans(monkeypatch, True, specs) == alone
    assert forks


def test_few_pairs_of_a_part_with_small_mirs_are_not_forked(monkeypatch):
    """On a part with small MIRs a child is forked only for at least ``SPREAD_QUICK_PAIRS_PER_MB``
    pairs with a search per MB of the process (a re-plan's new blocks in a large process are
    priced here); the answers are those of one core either way."""
    from mqjoin.planning.candidates import enumerate_candidates
    from mqjoin.planning.ilp.model import build_model, components

    mdl = build_model(enumerate_candidates(random_workload(12, 20, 4, seed=1)), "single")
    part = ilp_blocks.coupled_part(mdl, *max(components(mdl), key=lambda p: len(p[0])))
    assert part.quick
    splits: list = []
    monkeypatch.setattr(forked, "available", lambda: True)
    monkeypatch.setattr(forked, "split", lambda here, there, poll=None: splits.append(1) or (here(), there()))

    def priced(resident: float) -> list[float]:
        monkeypatch.setattr(forked, "resident_mb", lambda: resident)
        costs = ilp_blocks.BlockCosts(part, deadline=None)
        return costs.spread(lambda k, t: costs.lp_cost(k, part.chosen_by(k, t)), part.combinations)

    pairs = len(part.combinations)
    large = priced(pairs / ilp_blocks.SPREAD_QUICK_PAIRS_PER_MB + 1)
    assert splits == []
    assert priced(pairs / ilp_blocks.SPREAD_QUICK_PAIRS_PER_MB / 2) == large and splits == [1]
    costs = ilp_blocks.BlockCosts(part, deadline=None)
    assert large == ilp_blocks.per_block(lambda k, t: costs.lp_cost(k, part.chosen_by(k, t)), part.combinations)


@needs_fork
@pytest.mark.parametrize("side", ["child", "parent"])
def test_a_stop_on_either_side_keeps_the_prices_the_child_found(monkeypatch, tmp_path, side, children):
    """When one side stops (the deadline strikes both), the child's prices still come back
    and are merged before the stop goes on: every price either side found is exact, and a
    later solve takes it up."""
    from mqjoin.planning.candidates import enumerate_candidates
    from mqjoin.planning.ilp.model import build_model, components

    monkeypatch.setattr(ilp_blocks, "SPREAD_QUICK_PAIRS_PER_MB", 0.0)
    mdl = build_model(enumerate_candidates(random_workload(10, 100, 5, seed=0)), "single")
    part = ilp_blocks.coupled_part(mdl, *max(components(mdl), key=lambda p: len(p[0])))
    costs = ilp_blocks.BlockCosts(part, deadline=None)
    log, done = tmp_path / "priced", [0]

    def pricing(k, t):
        if forked.in_child() == (side == "child") and done[0] == 3:
            raise ilp_blocks.Stopped
        cost = costs.cost(k, part.chosen_by(k, t))
        done[0] += 1
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {k} {' '.join(map(str, t))}\n")
        return cost

    with pytest.raises(ilp_blocks.Stopped):
        costs.spread(pricing, part.combinations)
    lines = [line.split() for line in log.read_text().splitlines()]
    theirs = [(int(k), tuple(map(int, t))) for pid, k, *t in lines if int(pid) != os.getpid()]
    assert theirs and _reaped(children)
    assert all(part.key_of(k, part.chosen_by(k, t)) in costs.costs for k, t in theirs)
