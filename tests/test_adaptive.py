"""Adaptivity (paper Section VI): epochs, plan switches, query changes — against the oracle.

The central check: whatever plans the epochs run and whatever queries come and go, every
query returns exactly the result set :func:`mqjoin.runtime.oracle.adaptive_oracle_results` defines
(docs/model.md §6 restricted to the query's lifetime and the retained history), each result once.
To make plans switch as often as possible, a cycling optimiser hands the controller a
different mode/policy/MIR plan every time and the hysteresis is told every change saves.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest

from _cases import cases
from _cli import cli_process

import mqjoin.adaptive.controller as adaptive
from mqjoin.adaptive.controller import AdaptiveController
from mqjoin.adaptive.policy import (AdaptivePolicy, QueryChange, available_since, lifetimes, parse_changes,
                                   retained_relations)
from mqjoin.adaptive.sampling import EpochSample, epoch_stats
from mqjoin.model.errors import AdaptiveError, OptionError, UnknownRelationError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import adaptive_oracle_results, oracle_results
from mqjoin.planning.recost import recost
from mqjoin.runtime.epochs import run_adaptive
from mqjoin.model.tables import Table
from mqjoin.model.workload import Attr, parse_workload

CONFIGS = [("mqo", "single", True), ("individual", "replicas", False), ("shared", "single", True),
           ("mqo", "replicas", True), ("individual", "single", True), ("mqo", "single", False)]


def cycling_optimizer():
    """A different mode/policy/MIR configuration at every call."""
    k = itertools.count()

    def opt(w, policy):
        mode, part, mirs = CONFIGS[next(k) % len(CONFIGS)]
        return optimize(w, mode=mode, partitioning=part, mirs=mirs).plan

    return opt


@pytest.fixture
def always_switch(monkeypatch):
    """Every re-optimised plan that differs is taken (the running plan 'costs' 1e300)."""
    monkeypatch.setattr(adaptive, "recost", lambda plan, w: 1e300)


def check(run, workload, tables, changes, policy):
    """The run's results are the oracle's (which derives lifetimes and availability itself)."""
    want = adaptive_oracle_results(workload, tables, changes, policy)
    for q, res in run.results.items():
        assert len(res) == len(set(res)), f"{q}: a result was produced twice"
    got = run.result_sets()
    assert got == want, {q: (sorted(want[q] - got[q])[:3], sorted(got[q] - want[q])[:3]) for q in want
                         if got[q] != want[q]}


# --------------------------------------------------------------------------------------------
# exactly once across plan switches and query changes (random workloads, ties, windows, nulls)
# --------------------------------------------------------------------------------------------

SWITCH_CASES = cases(30, start=7000)


@pytest.mark.parametrize("seed,w,tables", SWITCH_CASES, ids=[f"seed{c[0]}" for c in SWITCH_CASES])
def test_results_across_forced_plan_switches_equal_the_oracle(seed, w, tables, always_switch):
    for length in (1.0, 0.7):
        policy = AdaptivePolicy(epoch=length, threshold=0.0)
        run = run_adaptive(w, tables, policy, optimizer=cycling_optimizer())
        check(run, w, tables, (), policy)
        assert oracle_results(w, tables) == run.result_sets()  # no changes: plain §6 results
        if len(run.epochs) > 2:
            assert len(run.switches) > 1  # the initial plan and at least one switch


def test_switching_exercises_probing_of_older_partners(always_switch):
    """Over the switch cases, MIRs missing in older epochs are reached through base stores."""
    total = 0
    for _seed, w, tables in SWITCH_CASES[:12]:
        run = run_adaptive(w, tables, AdaptivePolicy(epoch=1.0, threshold=0.0), optimizer=cycling_optimizer())
        total += sum(e.history_messages for e in run.epochs)
    assert total > 0


CHANGE_CASES = cases(30, start=8000)


def random_changes(seed, w):
    rng = random.Random(seed)
    names = list(w.query_names)
    init = [n for n in names if rng.random() < 0.6] or names[:1]
    changes = [QueryChange(at=rng.uniform(-1, 8), add={f"x{k}": w.query(n).text})
               for k, n in enumerate(names) if rng.random() < 0.8]
    changes += [QueryChange(at=rng.uniform(0, 8), remove=(n,)) for n in init if rng.random() < 0.4]
    return w.restricted_to(init), changes


@pytest.mark.parametrize("seed,w,tables", CHANGE_CASES, ids=[f"seed{c[0]}" for c in CHANGE_CASES])
def test_query_changes_equal_the_oracle(seed, w, tables, always_switch):
    w0, changes = random_changes(seed, w)
    for length, opt in ((1.0, cycling_optimizer()), (0.6, None)):
        policy = AdaptivePolicy(epoch=length, threshold=0.0)
        run = run_adaptive(w0, tables, policy, changes, optimizer=opt)
        check(run, w0, tables, changes, policy)


def test_added_queries_answer_from_history_in_the_random_cases(always_switch):
    """The change cases are not vacuous: added queries return results, some with partners
    from before their activation."""
    with_results = with_history = 0
    for seed, w, tables in CHANGE_CASES:
        w0, changes = random_changes(seed, w)
        policy = AdaptivePolicy(epoch=1.0)
        full, lives = lifetimes(w0, changes, policy)
        run = run_adaptive(w0, tables, policy, changes)
        for lf in lives:
            if lf.added is None or not run.results[lf.query]:
                continue
            with_results += 1
            q = full.query(lf.query)
            with_history += any(policy.epoch_of(tables[r].ts[i]) < lf.added
                                for res in run.results[lf.query] for r, i in zip(q.relations, res))
    assert with_results >= 10 and with_history >= 5


# --------------------------------------------------------------------------------------------
# what an added query returns (paper Figure 6), removal, reference counting
# --------------------------------------------------------------------------------------------

W_FIG6 = """
defaults: {selectivity: 0.5, window: 3, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
queries: {q1: "R(a), S(a)"}
"""


def fig6_tables():
    # one tuple of each relation every second, all with a = 1
    return {r: Table.from_columns(r, {"ts": [k + 0.1 * j for k in range(10)], "a": [1] * 10})
            for j, r in enumerate("RST")}


def test_added_query_over_retained_relations_has_its_full_window_at_once():
    w, tables = parse_workload(W_FIG6), fig6_tables()
    policy = AdaptivePolicy(epoch=1.0)
    changes = [QueryChange(at=3.5, add={"q2": "S(a), R(a)"})]  # submitted in epoch 3, active from 5
    run = run_adaptive(w, tables, policy, changes)
    check(run, w, tables, changes, policy)
    q2 = run.result_sets()["q2"]  # (S row, R row); R's k-th tuple at k s, S's at k + 0.1 s
    assert (4, 5) in q2 and (5, 3) in q2  # triggered in epoch 5 by partners from before it
    expected = {(s, r) for s in range(10) for r in range(10)
                if max(s + 0.1, r) >= 5 and abs((s + 0.1) - r) <= 3}
    assert q2 == expected


def test_added_query_with_an_unretained_relation_bootstraps_for_one_window():
    w, tables = parse_workload(W_FIG6), fig6_tables()
    policy = AdaptivePolicy(epoch=1.0)
    changes = [QueryChange(at=3.5, add={"q3": "S(a), T(a)"})]
    full, lives = lifetimes(w, changes, policy)
    assert available_since(full, lives, "S", 5) is None and available_since(full, lives, "T", 5) == 5
    run = run_adaptive(w, tables, policy, changes)
    check(run, w, tables, changes, policy)
    q3 = run.result_sets()["q3"]
    # triggered by T (never stored before epoch 5): complete at once, old S partners included
    assert (3, 5) in q3
    # triggered by S after activation: only T tuples from epoch 5 on (T's history was not kept)
    assert (6, 4) not in q3 and (6, 5) in q3
    # one window after activation everything is complete
    full_q3 = oracle_results(full.restricted_to(["q3"]), tables)["q3"]
    late = {res for res in full_q3 if min(tables["S"].ts[res[0]], tables["T"].ts[res[1]]) >= 5}
    assert late <= q3


def test_removed_query_stops_at_its_epoch_and_its_stores_are_dropped():
    w, tables = parse_workload(W_FIG6), fig6_tables()
    w = w.with_query("q2", "S(a), T(a)")
    policy = AdaptivePolicy(epoch=1.0)
    changes = [QueryChange(at=2.5, remove=("q2",))]  # active until epoch 3 inclusive
    run = run_adaptive(w, tables, policy, changes)
    check(run, w, tables, changes, policy)
    assert max(tables["T"].ts[t] for _, t in run.results["q2"]) < 4
    by_epoch = {e.epoch: e for e in run.epochs}
    assert any(s.startswith("T[") for s in by_epoch[3].stores)
    assert not any(s.startswith("T[") for s in by_epoch[4].stores)  # T no longer retained: dropped
    assert by_epoch[4].queries == ("q1",)
    assert [d.reason for d in run.switches][-1] == "query change: −q2"


def test_retention_and_availability_follow_the_lifetimes():
    w = parse_workload(W_FIG6)
    policy = AdaptivePolicy(epoch=1.0)
    changes = [QueryChange(at=0.5, add={"q2": "S(a), T(a)"}), QueryChange(at=3.5, remove=("q2",)),
               QueryChange(at=6.5, add={"q3": "R(a), T(a)"})]
    full, lives = lifetimes(w, changes, policy)
    assert [(lf.query, lf.added, lf.removed) for lf in lives] == [("q1", None, None), ("q2", 2, 5), ("q3", 8, None)]
    assert retained_relations(full, lives, 1) == {"R", "S"}
    assert retained_relations(full, lives, 3) == {"R", "S", "T"}
    assert available_since(full, lives, "T", 8) == 8  # T was dropped in epochs 5–7
    assert available_since(full, lives, "R", 8) is None


# --------------------------------------------------------------------------------------------
# the controller: statistics, hysteresis, reasons
# --------------------------------------------------------------------------------------------

W3 = """
defaults: {rate: 10, window: 2, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q: "R(a), S(a,b), T(b)"}
selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.5}
"""
A, B = (Attr("R", "a"), Attr("S", "a")), (Attr("S", "b"), Attr("T", "b"))


def sample(epoch, ra, sb, n=10):
    return EpochSample(epoch, {"R": n, "S": n, "T": n}, {A: ra * n * n, B: sb * n * n})


def test_epoch_statistics_are_rates_and_pair_fractions():
    st = epoch_stats(EpochSample(3, {"R": 20, "S": 10}, {A: 5}), AdaptivePolicy(epoch=2.0), ["R", "S", "T"])
    assert st.rates == {"R": 10.0, "S": 5.0, "T": 0.25}  # T had no tuple: half a tuple per epoch
    assert st.pairs == {A: 5 / 200}
    st0 = epoch_stats(EpochSample(3, {"R": 20, "S": 10}, {A: 0}), AdaptivePolicy(epoch=2.0), ["R", "S"])
    assert st0.pairs == {A: 1 / 200}  # no agreeing pair: one pair's worth, as mqjoin stats writes it


def test_switch_is_decided_one_epoch_and_active_the_next():
    c = AdaptiveController(parse_workload(W3), AdaptivePolicy(epoch=1.0))
    p0 = c.enter(0)
    assert c.enter(1, {0: sample(0, 0.9, 0.01)}) is p0  # decided at the start of 1 …
    assert c.enter(2) is not p0  # … active from 2
    d = c.switches()[-1]
    assert (d.epoch, d.stats_epoch, d.active_from) == (1, 0, 2)
    assert "R.a = S.a 0.01 → 0.9" in d.reason and "S.b = T.b 0.5 → 0.01" in d.reason
    assert d.saving > 0.1 and d.running_cost > d.candidate_cost


def test_hysteresis_keeps_the_plan_below_the_threshold_and_never_flaps():
    w = parse_workload(W3)
    c = AdaptiveController(w, AdaptivePolicy(epoch=1.0, threshold=10.0))
    c.enter(0)
    c.enter(2, {0: sample(0, 0.9, 0.01)})
    assert len(c.switches()) == 1 and c.decisions[1].reason.startswith("kept: predicted probe cost")
    # noise around the declared statistics: the plan never changes
    rng = random.Random(1)
    c = AdaptiveController(w, AdaptivePolicy(epoch=1.0, threshold=0.1))
    c.enter(0)
    for e in range(1, 30):
        c.enter(e, {e - 1: sample(e - 1, 0.01 * rng.uniform(0.9, 1.1), 0.5 * rng.uniform(0.9, 1.1))})
    assert len(c.switches()) == 1


def test_static_policy_ignores_statistics_but_not_query_changes():
    w = parse_workload(W3)
    c = AdaptiveController(w, AdaptivePolicy(epoch=1.0, adapt=False),
                           [QueryChange(at=2.5, add={"q2": "S(b), T(b)"})])
    c.enter(0)
    for e in range(1, 6):
        c.enter(e, {e - 1: sample(e - 1, 0.9, 0.01)})
    assert [d.active_from for d in c.switches()] == [0, 4]
    assert c.switches()[1].reason == "query change: +q2"
    assert "q2" in c.plan_for(4).probe_orders() and "q2" not in c.plan_for(3).probe_orders()


def test_sampled_statistics_estimate_selectivities():
    rng = random.Random(5)
    n = 4000
    w = parse_workload(W3).with_defaults(window=0.001)  # statistics only: keep the joins small
    tables = {"R": Table.from_columns("R", {"ts": sorted(rng.uniform(0, 4) for _ in range(n)),
                                            "a": [rng.randrange(100) for _ in range(n)]}),
              "S": Table.from_columns("S", {"ts": sorted(rng.uniform(0, 4) for _ in range(n)),
                                            "a": [rng.randrange(100) for _ in range(n)],
                                            "b": [rng.randrange(50) for _ in range(n)]}),
              "T": Table.from_columns("T", {"ts": sorted(rng.uniform(0, 4) for _ in range(n)),
                                            "b": [rng.randrange(50) for _ in range(n)]})}
    for fraction in (1.0, 0.3):
        run = run_adaptive(w, tables, AdaptivePolicy(epoch=1.0, sample=fraction), collect=False)
        st = [d.statistics for d in run.decisions if d.statistics is not None]
        assert len(st) == 3
        for s in st:
            assert s.pairs[A] == pytest.approx(0.01, rel=0.35) and s.pairs[B] == pytest.approx(0.02, rel=0.35)
            assert sum(s.rates.values()) == pytest.approx(3 * n / 4, rel=0.1)


def test_recost_equals_the_plan_cost_under_its_own_statistics():
    for _seed, w, _ in cases(20, start=9000):
        for mode, part, mirs in CONFIGS:
            plan = optimize(w, mode=mode, partitioning=part, mirs=mirs).plan
            assert recost(plan, w) == pytest.approx(plan.probe_cost)


# --------------------------------------------------------------------------------------------
# the paper's Section VII-B on small data
# --------------------------------------------------------------------------------------------


def test_selectivity_change_adaptive_plan_recovers_static_does_not():
    from mqjoin.datasets.synthetic_paper import selectivity_change

    d = selectivity_change(scale=1000, partners=20)  # 100 tuples/s per relation, change at 15 s
    tables = d.tables()
    runs = {a: run_adaptive(d.workload, tables, AdaptivePolicy(epoch=1.0, adapt=a)) for a in (True, False)}
    want = oracle_results(d.workload, tables)
    for run in runs.values():
        assert run.result_sets() == want
    ad, st = runs[True], runs[False]
    assert len(st.switches) == 1
    (switch,) = ad.switches[1:]
    assert switch.active_from == 17 and switch.stats_epoch == 15  # change at 15 s: seen in epoch 15
    assert ad.plans[switch.plan].probe_orders()["q"]["S"].startswith("S » T[b]")  # S probes T first now
    def msgs(run, e):
        return run.epochs[e].probe_messages

    assert msgs(st, 20) == msgs(st, 29) > 5 * msgs(ad, 29)
    assert msgs(ad, 14) == msgs(st, 14)
    # older partners are probed iteratively for about one window after the switch, then never
    hist = [e.history_messages for e in ad.epochs]
    assert hist[17] > 0 and hist[23:] == [0] * 7


def test_skewed_rates_introduce_the_stu_store_under_a_memory_budget():
    from mqjoin.datasets.synthetic_paper import skewed_rates

    d = skewed_rates(high_rate=500, low_rate=10, fanout=5)
    tables = d.tables()
    # memory over the workload's 1-s horizon: before the change STU holds ~50 tuples and does not
    # fit the budget, TU (~10) does; after it STU holds ~0.2 and fits
    run = run_adaptive(d.workload, tables, AdaptivePolicy(epoch=1.0, mir_budget=20))
    assert run.result_sets() == oracle_results(d.workload, tables)
    stores = [[s.id for s in run.plans[e.plan].stores] for e in run.epochs]
    assert not any(s.startswith("STU") for s in stores[10]) and any(s.startswith("STU") for s in stores[25])
    intro = next(dd for dd in run.switches if any(s.id.startswith("STU") for s in run.plans[dd.plan].stores)
                 and dd.active_from > 5)
    assert 15 < intro.active_from <= 19
    assert run.epochs[25].probe_messages < run.epochs[10].probe_messages


# --------------------------------------------------------------------------------------------
# errors: one typed message that names the culprit
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("changes,message", [
    ([QueryChange(at=1, remove=("q9",))], "removes q9, which no earlier change added"),
    ([QueryChange(at=1, add={"q1": "R(a), S(a)"})], "adds q1, a name already used"),
    ([QueryChange(at=1, remove=("q1",)), QueryChange(at=2, remove=("q1",))], "removes q1 again"),
])
def test_changelog_errors_name_the_query(changes, message):
    with pytest.raises(AdaptiveError, match=message):
        lifetimes(parse_workload(W_FIG6), changes, AdaptivePolicy())


def test_added_query_with_unknown_relation_is_a_workload_error():
    with pytest.raises(UnknownRelationError, match=r"the change at 1 s: .*X"):
        lifetimes(parse_workload(W_FIG6), [QueryChange(at=1, add={"q2": "R(a), X(a)"})], AdaptivePolicy())


@pytest.mark.parametrize("kwargs,message", [
    ({"epoch": 0}, "epoch length"), ({"epoch": -1}, "epoch length"), ({"threshold": -0.1}, "threshold"),
    ({"sample": 0}, "sample"), ({"sample": 1.5}, "sample"),
])
def test_policy_errors(kwargs, message):
    with pytest.raises(AdaptiveError, match=message):
        AdaptivePolicy(**kwargs)


@pytest.mark.parametrize("kwargs,message", [
    ({"mode": "best"}, "unknown mode 'best'"), ({"partitioning": "both"}, "unknown partitioning policy 'both'"),
    ({"solver": "glpk"}, "unknown solver 'glpk'"), ({"mir_budget": -1}, "budget"), ({"time_limit": 0}, "time limit"),
])
def test_policy_options_raise_the_optimisers_option_error(kwargs, message):
    """The optimiser's options are checked by the optimiser's rules (mqjoin.planning.options), with its error."""
    with pytest.raises(OptionError, match=message):
        AdaptivePolicy(**kwargs)
    with pytest.raises(OptionError, match=message):
        optimize(parse_workload(W3), **kwargs)


def test_changelog_yaml_errors():
    with pytest.raises(AdaptiveError, match="must be a list"):
        parse_changes("at: 3")
    with pytest.raises(AdaptiveError, match="entry 1: a query change needs an event time"):
        parse_changes("- {add: {q: 'R(a), S(a)'}}")
    with pytest.raises(AdaptiveError, match="adds and removes nothing"):
        parse_changes("- {at: 2}")
    with pytest.raises(AdaptiveError, match="both adds and removes q"):
        parse_changes("- {at: 2, add: {q: 'R(a), S(a)'}, remove: [q]}")


def test_late_submission_is_refused_and_a_timely_one_activates_two_epochs_later():
    c = AdaptiveController(parse_workload(W3), AdaptivePolicy(epoch=1.0))
    c.enter(0)
    c.enter(3)
    with pytest.raises(AdaptiveError, match="too late"):
        c.submit(QueryChange(at=1.2, add={"q2": "S(b), T(b)"}))
    assert c.submit(QueryChange(at=3.4, add={"q2": "S(b), T(b)"})) == 5
    c.enter(5)
    assert "q2" in c.plan_for(5).probe_orders()


def test_mir_budget_limits_materialised_memory():
    for _seed, w, _ in cases(15, start=9100):
        free = optimize(w)
        mirs = [s for s in free.plan.stores if not s.mir.is_base]
        if not mirs:
            continue
        budget = min(s.memory for s in mirs) / 2
        limited = optimize(w, mir_budget=budget)
        distinct = {s.mir: s.memory for s in limited.plan.stores if not s.mir.is_base}
        assert sum(distinct.values()) <= budget * (1 + 1e-9)
        assert limited.probe_cost >= free.probe_cost - 1e-9
    with pytest.raises(OptionError, match="budget"):
        optimize(parse_workload(W3), mir_budget=-5)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_adaptive_run_with_changes_json_and_check(tmp_path):
    from mqjoin.model.tables import write_inputs

    (tmp_path / "w.yaml").write_text(W_FIG6)
    (tmp_path / "changes.yaml").write_text("- {at: 3.5, add: {q2: 'S(a), T(a)'}}\n- {at: 6.5, remove: [q1]}\n")
    write_inputs(fig6_tables(), tmp_path / "data")
    r = cli_process("run", tmp_path / "w.yaml", "--data", tmp_path / "data", "--out", tmp_path / "out",
                    "--changes", tmp_path / "changes.yaml", "--check", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["check"] == "equal to the oracle" and s["executor"] == "per-tuple"
    assert s["lifetimes"] == {"q1": {"added": None, "removed": 8}, "q2": {"added": 5, "removed": None}}
    assert [d["reason"] for d in s["decisions"] if d["switched"]][1:] == ["query change: +q2", "query change: −q1"]
    assert (tmp_path / "out" / "q2.parquet").exists()
    r = cli_process("run", tmp_path / "w.yaml", "--data", tmp_path / "data", "--out", tmp_path / "out",
                    "--adaptive", "--epoch", "2")
    assert r.returncode == 0 and "5 epochs of 2s" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("extra,message", [
    (["--changes", "missing.yaml"], "cannot read changelog"),
    (["--adaptive", "--epoch", "0"], "epoch length"),
    (["--adaptive", "--engine", "native"], "reference engine"),
])
def test_cli_adaptive_errors_are_one_line(tmp_path, extra, message):
    from mqjoin.model.tables import write_inputs

    (tmp_path / "w.yaml").write_text(W_FIG6)
    write_inputs(fig6_tables(), tmp_path / "data")
    r = cli_process("run", tmp_path / "w.yaml", "--data", tmp_path / "data", "--out", tmp_path / "o", *extra,
                    cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_all_queries_removed_runs_on_an_empty_plan():
    w, tables = parse_workload(W_FIG6), fig6_tables()
    policy = AdaptivePolicy(epoch=1.0)
    changes = [QueryChange(at=1.5, remove=("q1",)), QueryChange(at=5.5, add={"q2": "R(a), S(a)"})]
    run = run_adaptive(w, tables, policy, changes)
    check(run, w, tables, changes, policy)
    assert {e.epoch: e.state_rows for e in run.epochs}[5] == 0
    assert run.results["q1"] and run.results["q2"]


def test_a_run_over_its_budget_stops_itself_and_keeps_its_results():
    """A run whose state and results outgrow its budget stops with a typed error (a live
    replay: status 'stopped' and the message), keeping what it produced — never taking the
    process down.  Every result kept is a true result (a prefix of the oracle's)."""
    from mqjoin.model.errors import ResourceLimitError
    from mqjoin.runtime.epochs import AdaptiveReplay

    w = parse_workload('''
defaults: {selectivity: 1, window: null}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
''')
    n = 600
    tables = {r: Table.from_columns(r, {"ts": [i / 1000 for i in range(n)], "a": [1] * n}) for r in "RS"}
    with pytest.raises(ResourceLimitError, match="over its budget of 50,000"):
        run_adaptive(w, tables, AdaptivePolicy(epoch=1.0), budget=50_000)
    live = AdaptiveReplay(w, tables, AdaptivePolicy(epoch=1.0), speedup=1e6, budget=50_000).start()
    assert live.wait(timeout=120)
    assert live.status == "stopped" and "over its budget of 50,000" in live.error
    kept = live.results()["q"]
    full = oracle_results(w, tables)["q"]
    assert 0 < len(kept) < len(full) and kept <= full
    assert run_adaptive(w, tables, AdaptivePolicy(epoch=1.0)).result_sets()["q"] == full  # no budget: complete


def test_the_controllers_join_sizes_converge_to_the_measured_ones():
    """Foreign keys (L references P by (pk, sk)): independence puts |P ⋈ L| at a tenth of its
    size; the running plan's steps and MIR stores measure it, and every re-optimisation plans
    on the measured size, closer to the exact one epoch after epoch."""
    from _foreign_keys import foreign_keys
    from mqjoin.adaptive.controller import default_optimizer
    from mqjoin.datasets.sizes import measure_sizes
    from mqjoin.planning.cost import join_size
    from mqjoin.model.sizes import size_targets

    w, tables = foreign_keys()
    exact = next(m for m in w.with_sizes(measure_sizes(w, tables, 1.0)).sizes
                 if m.query == "q" and m.relations == ("P", "L"))  # P ⋈ L joined on (pk, sk)
    seen = []

    def optimizer(workload, policy):
        seen.append(workload)
        return default_optimizer(workload, policy)

    run = run_adaptive(w, tables, AdaptivePolicy(epoch=0.2), optimizer=optimizer)

    def size(workload):
        _, classes, selection = size_targets(exact, {q.name: q for q in workload.queries})[0]
        return join_size(workload, ("P", "L"), classes, selection)

    assert size(seen[0]) == pytest.approx(exact.value / 10, rel=0.2)  # the declared statistics: independence
    sized = [s for s in seen[1:] if s.sizes]
    assert len(sized) == len(seen) - 1 >= 3  # every re-optimisation planned on measured sizes
    errors = [abs(size(s) / exact.value - 1) for s in sized]
    assert errors[-1] < 0.1 and errors[-1] < errors[0]
    measured = [m for d in run.decisions if d.statistics for m in d.statistics.sizes]
    assert measured and {m.relations for m in measured} == {("P", "L")}
    assert all(set(d.to_dict()["statistics"]) >= {"sizes"} for d in run.decisions if d.statistics)
    seen.clear()
    run_adaptive(w, tables, AdaptivePolicy(epoch=0.2, sizes=False), optimizer=optimizer)
    assert len(seen) > 1 and not any(s.sizes for s in seen)  # class selectivities only


def test_sizes_measured_on_independent_data_agree_with_the_estimates():
    """Uniform independent join values: the sizes the running plan measures are the
    independence estimates within the sampling error, and the plans stay the declared one's."""
    from mqjoin.datasets.uniform import uniform_streams

    w = parse_workload("""
defaults: {rate: 400, window: null, parallelism: 4}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
selectivities: {R.a = S.a: 0.005, S.b = T.b: 0.005, T.c = U.c: 0.005}
""")
    run = run_adaptive(w, uniform_streams(w, duration=2.0, seed=3), AdaptivePolicy(epoch=0.5))
    from mqjoin.adaptive.sampling import estimated_size

    last = [d for d in run.decisions if d.statistics][-1]
    assert last.statistics.sizes
    for m in last.statistics.sizes:
        assert m.value == pytest.approx(estimated_size(w, m), rel=0.25)
    assert len(run.plans) == 1 and not run.switches[1:]


def test_decisions_read_numbers_in_the_explorers_one_style():
    """Costs with separators (never 2.978e+04), a change that rounds to nothing as 0.0 %
    (never −0.0 %), the threshold as a percentage."""
    import re

    c = AdaptiveController(parse_workload(W3), AdaptivePolicy(epoch=1.0, threshold=10.0))
    c.enter(0)
    c.enter(2, {0: sample(0, 0.9, 0.01)})  # a better plan, below the threshold: kept
    reason = c.decisions[1].reason
    assert reason.startswith("kept: predicted probe cost"), reason
    assert not re.search(r"\de[+-]\d", reason) and "−0.0 %" not in reason and "threshold 1000 %)" in reason, reason
    assert re.search(r"cost [\d,.]+ → [\d,.]+ tuples/s \(−\d+\.\d %", reason), reason
