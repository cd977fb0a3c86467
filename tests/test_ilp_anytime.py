"""Anytime solving: a solve tells its monitor the incumbent and bound as they improve, a
stopped solve (time limit, ``Monitor.stop``, Ctrl-C on ``mqjoin optimize``) returns a feasible
plan with its gap, and the command line prints the progress and carries it in ``--json``."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import _ref_optimizer as ref
from _cli import cli_command, cli_process
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, solve
from mqjoin.planning.ilp.monitor import Monitor
from mqjoin.planning.clash import first_orders, warm_start
from mqjoin.planning.optimizer import optimize

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _monotone(reports) -> None:
    """Incumbents never rise, bounds never fall, the bound never passes the incumbent."""
    for a, b in zip(reports, reports[1:]):
        assert b.incumbent <= a.incumbent and b.bound >= a.bound and b.seconds >= a.seconds
    assert all(0 <= r.bound <= r.incumbent and 0 <= r.gap <= 1 for r in reports)


def _feasible(res) -> None:
    """The plan is whole (every query, every start) and costs what the ILP says."""
    w = res.workload
    orders = res.probe_orders()
    assert set(orders) == {q.name for q in w.queries}
    assert all(set(orders[q.name]) == set(q.relation_set) for q in w.queries)
    assert math.isclose(res.probe_cost, res.ilp.objective, rel_tol=1e-6)


def _long():
    """A workload whose optimum takes the solver over a minute to prove (60 five-way queries)."""
    return random_workload(60, 100, 5, seed=0)


def test_time_limited_large_solve_reports_progress_and_returns_a_plan():
    """60 five-way queries in 2 s: not proven optimal, a plan with gap ≥ 0, and progress that
    ends at the plan returned."""
    m = Monitor()
    res = optimize(_long(), time_limit=2.0, monitor=m)
    assert res.ilp.status == "time_limit" and 0 <= res.ilp.gap <= 1
    _feasible(res)
    assert m.reports, "no progress reported"
    _monotone(m.reports)
    assert m.reports[-1].incumbent == pytest.approx(res.ilp.objective)
    assert m.reports[-1].bound <= res.ilp.bound * (1 + 1e-9) + 1e-9


def test_optimal_solve_ends_with_a_closed_gap():
    """An unhindered solve's last report is the optimum with bound equal to it."""
    m = Monitor()
    res = optimize(random_workload(10, 100, 3, seed=1), monitor=m)
    assert res.ilp.status == "optimal" and res.ilp.canonical
    _monotone(m.reports)
    last = m.reports[-1]
    assert last.incumbent == pytest.approx(res.probe_cost) and last.bound == pytest.approx(res.probe_cost)
    assert last.status == "optimal"


def test_stop_returns_the_best_plan_so_far():
    """Monitor.stop from another thread mid-solve: status interrupted, a feasible plan, gap ≥ 0."""
    m = Monitor()
    timer = threading.Timer(1.0, m.stop)
    timer.start()
    try:
        res = optimize(_long(), time_limit=120.0, monitor=m)
    finally:
        timer.cancel()
    assert res.ilp.status == "interrupted" and 0 <= res.ilp.gap <= 1
    _feasible(res)
    _monotone(m.reports)


def test_highs_mip_reports_improving_solutions_and_obeys_the_stop():
    """HiGHS's own MIP (no search of ours): its improving solutions reach the monitor through
    HiGHS's callback, and the stop interrupts it through the MIP interrupt callback."""
    w = ref.random_workload(2, n_rel=(8, 8), n_attr=(2, 3), n_q=(10, 10), q_size=(4, 4), par=(4, 4),
                            dpar=(4, 4), extra_eq=0, selectivity=0.01)  # HiGHS needs seconds to prove it
    cands = enumerate_candidates(w)
    mdl = build_model(cands)
    m = Monitor()
    sol = solve(mdl, time_limit=5.0, branching=False, monitor=m)
    assert sol.status in ("time_limit", "optimal")
    _monotone(m.reports)
    assert m.reports[0].seconds < sol.solve_seconds - 0.05, "nothing reported before the solve ended"
    assert m.reports[-1].incumbent == pytest.approx(sol.objective)
    m = Monitor()  # stopped at once: the start (the plan without MIRs) is kept
    threading.Timer(0.3, m.stop).start()
    t0 = time.perf_counter()
    sol = solve(mdl, time_limit=60.0, branching=False, monitor=m, start=warm_start(cands, mdl, first_orders(cands)))
    assert time.perf_counter() - t0 < 20 and sol.status == "interrupted" and sol.objective > 0


def test_cli_ctrl_c_returns_the_best_plan_so_far(tmp_path):
    """SIGINT to ``mqjoin optimize``: exit 0, the JSON of the best plan so far with status
    interrupted, its gap and the progress, and a one-line note on stderr."""
    path = tmp_path / "w.yaml"
    path.write_text(_long().to_yaml(), encoding="utf-8")
    proc = subprocess.Popen(cli_command("optimize", path, "--time-limit", "120", "--json"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # the first progress line: the solve has started
        assert first.startswith("mqjoin: incumbent "), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    d = json.loads(out)
    assert d["ilp"]["status"] == "interrupted" and 0 <= d["ilp"]["gap"] <= 1
    assert d["progress"] and d["progress"][-1]["incumbent"] == pytest.approx(d["ilp"]["objective"])
    notes = [line for line in err.splitlines() if line.startswith("mqjoin: interrupted")]
    assert len(notes) == 1 and "Traceback" not in err


def test_cli_prints_progress_lines_on_a_long_solve(tmp_path):
    """A time-limited ``mqjoin optimize`` of a large workload prints its progress on stderr
    in the format of anytime.Progress.describe, and ``--json`` carries it."""
    path = tmp_path / "w.yaml"
    path.write_text(_long().to_yaml(), encoding="utf-8")
    r = cli_process("optimize", path, "--time-limit", "2", "--json", timeout=300, cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("mqjoin: incumbent ")]
    assert lines and all(", bound " in line and ", gap " in line and " after " in line for line in lines)
    d = json.loads(r.stdout)
    assert d["ilp"]["status"] == "time_limit"
    assert d["progress"][-1]["gap"] == pytest.approx(d["ilp"]["gap"], abs=1e-9)
    first = d["anytime"]  # the first plan and its gap are the first progress report's
    assert (first["first_plan_seconds"], first["first_plan_gap"]) == (d["progress"][0]["seconds"],
                                                                      d["progress"][0]["gap"])
    within = [p["seconds"] for p in d["progress"] if p["gap"] <= first["gap"]]
    assert first["within_gap_seconds"] == (within[0] if within else None)


def test_anytime_rounds_pass_on_the_reports_inside_each_round():
    """improve(on_report=…): the incumbent and bound inside the rounds, on one clock, never
    worse than the round's result that follows them."""
    from mqjoin.planning.anytime import improve

    reports = []
    rounds = list(improve(random_workload(30, 100, 5, seed=3), 1.0, max_rounds=2, on_report=reports.append))
    assert rounds and reports
    _monotone_clock = [r.seconds for r in reports]
    assert _monotone_clock == sorted(_monotone_clock) and reports[-1].seconds <= rounds[-1].seconds + 1e-6
    assert min(r.incumbent for r in reports) == pytest.approx(min(p.incumbent for p in rounds))


def test_monitor_delivers_reports_in_clock_order_from_many_threads():
    """Parts solved on several threads report at once: ``on_report`` still sees the reports
    in the order of their seconds and of ``Monitor.reports`` (a progress line never goes
    back in time)."""
    seen = []

    def slow(r):  # a printing or drawing listener takes a while
        time.sleep(0.0002)
        seen.append(r)

    m = Monitor(on_report=slow)
    parts = range(8)
    m.begin({p: 1000.0 for p in parts})

    def worker(p):
        for k in range(200):
            m.report(p, 1000.0 - k, float(k))

    threads = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) > 100
    assert seen == m.reports
    assert [r.seconds for r in seen] == sorted(r.seconds for r in seen)


def _stopping_after(monkeypatch, monitor: Monitor, n: int) -> None:
    """``monitor`` stops at the ``n``-th block priced (a stop that does not depend on the clock)."""
    from mqjoin.planning.ilp import blocks

    calls, cost = [0], blocks.BlockCosts.cost

    def counting(self, k, choice):
        calls[0] += 1
        if calls[0] == n:
            monitor.stop()
        return cost(self, k, choice)

    monkeypatch.setattr(blocks.BlockCosts, "cost", counting)


def _counted_searches(monkeypatch) -> list[int]:
    from mqjoin.planning.ilp import paths

    searches, optimum = [0], paths.BlockPaths.optimum

    def counting(self, *a, **k):
        searches[0] += 1
        return optimum(self, *a, **k)

    monkeypatch.setattr(paths.BlockPaths, "optimum", counting)
    return searches


@pytest.mark.parametrize("stop_at", [30, 60])
def test_a_stopped_solve_keeps_its_blocks_prices_and_the_next_one_goes_on_from_them(monkeypatch, stop_at):
    """A solve stopped while it prices the blocks of a coupled part keeps what it priced
    (``Solution.parts.prices``: every price is exact); a solve from that result searches only
    what is left, and ends on the plan a solve from scratch gives."""
    monkeypatch.setenv("MQJOIN_FORK", "0")  # (where the stop falls does not depend on a child)
    w = random_workload(10, 100, 5, seed=0)
    scratch_searches = _counted_searches(monkeypatch)
    scratch = optimize(w)
    searched_from_scratch, scratch_searches[0] = scratch_searches[0], 0
    m = Monitor()
    _stopping_after(monkeypatch, m, stop_at)
    first = optimize(w, monitor=m)
    assert first.ilp.status == "interrupted" and first.parts is not None and first.parts.prices
    scratch_searches[0] = 0
    again = optimize(w, previous=first)
    assert again.ilp.status == "optimal" and again.ilp.canonical and again.plan == scratch.plan
    assert 0 < scratch_searches[0] < searched_from_scratch


def test_each_anytime_round_goes_on_from_the_round_before(monkeypatch):
    """improve(): the first round re-plans from the result it starts from, each later one from
    the round before it (``OptimizeOptions.previous``), so that the rounds add up."""
    from dataclasses import replace

    from mqjoin.planning.anytime import improve, progress_of

    w = random_workload(6, 30, 3, seed=4)
    seen, made = [], []

    def unfinished(workload, options):  # a real plan, reported as stopped (so that the rounds go on)
        seen.append(options.previous)
        res = optimize(workload, options.changed(monitor=None))
        made.append(replace(res, ilp=replace(res.ilp, status="time_limit", gap=0.5)))
        return made[-1]

    whole = optimize(w)
    first = replace(whole, ilp=replace(whole.ilp, status="time_limit", gap=0.5))
    rounds = list(improve(w, 0.5, max_rounds=3, start=progress_of(first, 0.1), optimize_fn=unfinished))
    assert len(rounds) == 3
    assert seen[0] is first and seen[1:] == made[:-1]
