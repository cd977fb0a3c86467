"""The paper's Section VII-B data sets and the arrival processes.

The stated properties are checked with the brute-force oracle (docs/model.md §6, windows applied)
on small scaled instances.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from _cli import run_cli
from mqjoin.model.errors import DataError
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results, query_results
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import load_workload
from mqjoin.datasets.arrivals import Arrival, arrival_times
from mqjoin.datasets.synthetic_paper import WORKLOADS, paper_data, selectivity_change, skewed_rates


def _participation(results, position):
    """How many results each row of the relation at ``position`` takes part in."""
    return Counter(r[position] for r in results)


def _sub(workload, text):
    return workload.with_query("sub", text).restricted_to(["sub"])


# --------------------------------------------------------------------------------------------
# selectivity-change (Figure 8(a))
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def change():
    return selectivity_change(scale=5000)  # 20 tuples/s per relation, 600 each


def test_selectivity_change_before_the_change_every_tuple_is_in_exactly_one_result(change):
    w, tables = change.workload, change.tables()
    n_pre = round(change.change_at * change.params["rate"])
    assert n_pre == 300 and change.change_at == 15.0
    res = oracle_results(w, tables)["q"]
    assert len(res) == n_pre
    for pos, r in enumerate(w.query("q").relations):
        part = _participation(res, pos)
        assert set(part) == set(range(n_pre)), f"{r}: every pre-change tuple, and only those, is in a result"
        assert set(part.values()) == {1}, f"{r}: each in exactly one result"


def test_selectivity_change_after_the_change(change):
    w, tables = change.workload, change.tables()
    n = len(tables["S"])
    n_pre = 300
    post = range(n_pre, n)
    rs = query_results(w, _sub(w, "R(a), S(a)").query("sub"), tables)
    st = query_results(w, _sub(w, "S(b), T(b)").query("sub"), tables)
    tu = query_results(w, _sub(w, "T(c), U(c)").query("sub"), tables)
    s_in_rs = _participation(rs, 1)
    assert all(s_in_rs[i] == 100 for i in post), "every S tuple finds 100 partners in R (within the window)"
    s_in_st, t_in_st = _participation(st, 0), _participation(st, 1)
    assert all(s_in_st[i] == 0 and t_in_st[i] == 0 for i in post), "S and T find no partner in each other"
    t_in_tu = _participation(tu, 0)
    assert all(t_in_tu[i] == 100 for i in post), "every T tuple finds 100 partners in U"
    assert all(s_in_rs[i] == 1 for i in range(n_pre)), "before: one partner"


def test_selectivity_change_workload_makes_s_probe_r_and_t_probe_u(change):
    orders = optimize(change.workload, mirs=False).probe_orders()["q"]
    assert orders["S"].startswith("S » R[a]") and orders["T"].startswith("T » U[c]")
    sel = {str(c): c.selectivity for c in change.workload.query("q").classes}
    assert sel["{S.b=T.b}"] == pytest.approx(1.1 * sel["{R.a=S.a}"],
                                             rel=1e-4) and sel["{R.a=S.a}"] == pytest.approx(1 / 300, rel=1e-5)


def test_selectivity_change_reference_engine_agrees_with_the_oracle(change, tmp_path):
    d = change.write(tmp_path)
    w = load_workload(d / "workload.yaml")
    assert w == change.workload
    tables = read_inputs(w, d)
    want = oracle_results(w, tables)
    for mode in ("mqo", "individual"):
        assert run_reference(optimize(w, mode=mode).plan, tables).result_sets() == want


def test_selectivity_change_checks_its_parameters():
    with pytest.raises(DataError, match="longer than the window"):
        selectivity_change(scale=10000)  # 10 tuples/s: 100 partners span 9.9 s > 5 s
    with pytest.raises(DataError, match="fewer than 100 tuples"):
        selectivity_change(scale=5000, duration=18)
    with pytest.raises(DataError, match="scale must be a number"):
        selectivity_change(scale=-1)


# --------------------------------------------------------------------------------------------
# skewed-rates (Figure 8(b))
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def skewed():
    return skewed_rates(high_rate=100, low_rate=2)  # R 3000 tuples, S, T, U 60 each


def test_skewed_rates_properties(skewed):
    w, tables = skewed.workload, skewed.tables()
    assert {r: w.rate(r) for r in "RSTU"} == {"R": 100, "S": 2, "T": 2, "U": 2}
    assert len(tables["R"]) == 3000 and len(tables["S"]) == 60
    n_pre = 30  # 15 s at 2 tuples/s, a multiple of the fanout 5
    rs = query_results(w, _sub(w, "R(a), S(a)").query("sub"), tables)
    r_in_rs = _participation(rs, 0)
    assert set(r_in_rs.values()) == {1} and len(r_in_rs) == 3000, "every R tuple joins one S tuple"
    stu = query_results(w, _sub(w, "S(b), T(b,c), U(c)").query("sub"), tables)
    per_s = _participation(stu, 0)
    assert all(per_s[i] == 5 for i in range(n_pre)), "before: fanout T partners (one U each) per S tuple"
    post = [per_s[i] for i in range(n_pre, 60)]
    assert sum(post) == 3 and max(post) == 1, "after: only every 10th S tuple has one"
    full = oracle_results(w, tables)["q"]
    assert len(full) == 1500 * 5 + 3 * 50  # R tuples before the change × 5, after: R of kept S


def test_skewed_rates_default_scale_and_workload_file():
    d = skewed_rates()
    assert d.params["high_rate"] == 5000 and d.params["low_rate"] == 5 and d.change_at == 15
    for name, file in (("selectivity-change", "paper_selectivity_change.yaml"),
                       ("skewed-rates", "paper_skewed_rates.yaml")):
        assert paper_data(name).workload_text() == (WORKLOADS / file).read_text(), f"{file} is stale"
        assert load_workload(WORKLOADS / file) == paper_data(name).workload


def test_skewed_rates_checks_its_parameters():
    with pytest.raises(DataError, match="at most 1"):
        skewed_rates(keep=2)
    with pytest.raises(DataError, match="window"):
        skewed_rates(low_rate=0.5, high_rate=10, fanout=5)


# --------------------------------------------------------------------------------------------
# arrival processes
# --------------------------------------------------------------------------------------------


def test_arrival_processes():
    c = arrival_times(Arrival("constant", rate=50), 1001)
    assert c[0] == 0 and (len(c) - 1) / c[-1] == pytest.approx(50)
    p = arrival_times(Arrival("poisson", rate=50, seed=1), 20001, "R")
    assert np.all(np.diff(p) >= 0)
    assert (len(p) - 1) / p[-1] == pytest.approx(50, rel=0.05)
    gaps = np.diff(p)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1, abs=0.05)  # exponential gaps
    assert np.array_equal(p, arrival_times(Arrival("poisson", rate=50, seed=1), 20001, "R"))
    assert not np.array_equal(p, arrival_times(Arrival("poisson", rate=50, seed=1), 20001, "S"))
    b = arrival_times(Arrival("bursts", rate=50, burst_period=2, burst_duty=0.25), 1000)
    assert np.all(np.mod(b, 2) < 0.5 + 1e-9) and np.all(np.diff(b) >= 0)
    assert 1000 / 50 == pytest.approx(b[-1] + 2 * 0.75, abs=0.1)  # mean rate kept
    with pytest.raises(DataError, match="burst duty"):
        Arrival("bursts", burst_duty=0)
    with pytest.raises(DataError, match="positive"):
        Arrival("constant", rate=0)


# --------------------------------------------------------------------------------------------
# the CLI
# --------------------------------------------------------------------------------------------


def test_data_synthetic_cli(tmp_path, capsys):
    out = tmp_path / "sc"
    code, stdout, stderr = run_cli(capsys, "data", "synthetic", "selectivity-change", "--out", out, "--scale", "5000",
                                   "--json")
    assert code == 0 and json.loads(stdout)["rows"] == {"R": 600, "S": 600, "T": 600, "U": 600}
    assert "R.parquet" in stderr  # progress
    w = load_workload(out / "workload.yaml")
    tables = read_inputs(w, out)
    assert w == selectivity_change(scale=5000).workload and len(tables["U"]) == 600
    code, stdout, _ = run_cli(capsys, "data", "synthetic", "skewed-rates", "--out", tmp_path / "sk",
                              "--high-rate", "100", "--low-rate", "2", "--quiet")
    assert code == 0 and "skewed-rates: 3,180 tuples" in stdout
    code, _, err = run_cli(capsys, "data", "synthetic", "skewed-rates", "--out", tmp_path / "x", "--partners", "3")
    assert code == 2 and err.count("\n") == 1 and "--partners applies to selectivity-change only" in err
    code, _, err = run_cli(capsys, "data", "synthetic", "selectivity-change", "--out", tmp_path / "y",
                           "--scale", "100000")
    assert code == 2 and err.startswith("mqjoin: error:") and "scale" in err
