"""TPC-H as streams, the paper's TPC-H workloads, and statistics on TPC-H.

The central check: the Figure 7(a) workload (and the ten-query variant) optimised in the mqo
and individual modes and run on the reference engine over TPC-H SF 0.01 gives exactly the
results of an independent SQL-style evaluation of the same joins with pandas merges (docs/model.md
§6 with full history: every combination whose class members are equal).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from _cli import run_cli
from mqjoin.planning.measured import check_run
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import Attr, Workload, load_workload
from mqjoin.datasets.arrivals import Arrival
from mqjoin.datasets.stats import estimate_statistics
from mqjoin.datasets import tpch
from mqjoin.datasets.tpch import (FIG7A_QUERIES, POTENTIAL_JOINS, RELATIONS, WORKLOADS,
                                  implied_pairs, random_tpch_workload, tpch_sample, tpch_streams,
                                  write_bundled_workloads)

SF001_ROWS = {"region": 5, "nation": 25, "supplier": 100, "customer": 1500, "part": 2000, "partsupp": 8000,
              "orders": 15000, "lineitem": 60175}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("mqjoin-cache")


@pytest.fixture(scope="module")
def sf001(cache):
    """TPC-H SF 0.01 as streams with the default arrivals (what the bundled workloads used)."""
    return tpch_streams(0.01, cache=cache)


@pytest.fixture(scope="module")
def frames(sf001):
    """The streams read independently of mqjoin.model.tables (row position = tuple identity)."""
    return {r.name: pd.read_parquet(sf001.directory / f"{r.name}.parquet").reset_index(drop=True) for r in RELATIONS}


# --------------------------------------------------------------------------------------------
# an independent SQL-style evaluation with pandas
# --------------------------------------------------------------------------------------------


def pandas_results(query, frames) -> set[tuple[int, ...]]:
    """SELECT row ids FROM the query's relations WHERE every class's members are equal,
    evaluated as a chain of inner merges (a relation joins when it shares a class with the
    relations joined so far; all its equalities to them are merge keys)."""
    left = list(query.relations)
    inside: list[str] = []
    joined = None
    while left:
        r = next(x for x in left if not inside or any(
            c.member_of(x) is not None and any(a.relation in inside for a in c.members) for c in query.classes))
        left.remove(r)
        df = frames[r].copy()
        df = df.rename(columns={col: f"{r}.{col}" for col in df.columns})
        df[f"{r}.#row"] = np.arange(len(df))
        if joined is None:
            joined = df
        else:
            lk, rk = [], []
            for c in query.classes:
                mine = c.member_of(r)
                others = [a for a in c.members if a.relation in inside]
                if mine is not None and others:
                    for o in others:  # every equality to the joined relations (cycles, 3-member classes)
                        lk.append(str(o))
                        rk.append(str(mine))
            joined = joined.merge(df, left_on=lk, right_on=rk, how="inner")
        inside.append(r)
    cols = [joined[f"{r}.#row"].to_numpy() for r in query.relations]
    return set(zip(*(c.tolist() for c in cols)))


# --------------------------------------------------------------------------------------------
# the streams
# --------------------------------------------------------------------------------------------


def test_streams_have_the_input_format_and_tpch_sizes(sf001, cache):
    assert sf001.directory == cache / "tpch" / "sf0.01"
    assert {s.relation: s.rows for s in sf001.streams} == SF001_ROWS
    spec = tpch.base_spec({})
    w = Workload.build(spec["relations"], {}, {}, spec["defaults"])
    tables = read_inputs(w, sf001.directory, [r.name for r in RELATIONS], every_attribute=True)
    for r in RELATIONS:
        t = tables[r.name]
        assert len(t) == SF001_ROWS[r.name]
        assert list(pq.read_schema(sf001.directory / f"{r.name}.parquet").names) == ["ts", *r.attributes]
        assert all(a <= b for a, b in zip(t.ts, t.ts[1:])), f"{r.name}: ts must not decrease"
    assert tables["lineitem"].value("linestatus", 0) in ("F", "O")
    assert set(tables["orders"].columns["orderstatus"]) == {"F", "O", "P"}
    # rates proportional to sizes: every stream spans (about) the same event time
    rates = {s.relation: s.rate for s in sf001.streams}
    assert rates["lineitem"] == 10_000
    assert rates["orders"] == pytest.approx(10_000 * 15000 / 60175)
    est = estimate_statistics(w, tables, sample=None)
    for r in RELATIONS:
        assert est.rate(r.name) == pytest.approx(rates[r.name], rel=1e-9)


def test_streams_are_cached_and_keyed_by_their_parameters(sf001, cache, tmp_path):
    again = tpch_streams(0.01, cache=cache)
    assert again.cached and again.directory == sf001.directory
    out = tmp_path / "poisson"
    p1 = tpch_streams(0.01, out=out, cache=cache, arrival=Arrival("poisson", rate=5000, seed=7))
    assert not p1.cached and json.loads((out / "manifest.json").read_text())["arrival"]["process"] == "poisson"
    ts1 = pq.read_table(out / "orders.parquet").column("ts").to_numpy()
    p2 = tpch_streams(0.01, out=out, cache=cache, arrival=Arrival("poisson", rate=5000, seed=7), force=True)
    assert not p2.cached
    assert np.array_equal(ts1, pq.read_table(out / "orders.parquet").column("ts").to_numpy())
    tpch_streams(0.01, out=out, cache=cache, arrival=Arrival("poisson", rate=5000, seed=8))
    assert not np.array_equal(ts1, pq.read_table(out / "orders.parquet").column("ts").to_numpy())
    # keys do not depend on the arrivals
    assert pq.read_table(out / "orders.parquet").column("orderkey").equals(
        pq.read_table(sf001.directory / "orders.parquet").column("orderkey"))


def test_env_cache_override(monkeypatch, tmp_path):
    monkeypatch.setenv("MQJOIN_CACHE", str(tmp_path / "c"))
    assert tpch.tpch_dir(0.1) == tmp_path / "c" / "tpch" / "sf0.1"


def test_missing_generator_is_a_clear_error(monkeypatch, tmp_path):
    from mqjoin.model.errors import DataError

    monkeypatch.setattr(tpch.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(tpch.shutil, "which", lambda name: None)
    with pytest.raises(DataError, match="pip install tpchgen-cli"):
        tpch_streams(0.01, cache=tmp_path)


# --------------------------------------------------------------------------------------------
# the workloads: Figure 7(a), ten queries, all pairs
# --------------------------------------------------------------------------------------------


def test_fig7a_workload_is_the_papers():
    w = load_workload(WORKLOADS / "tpch_fig7a.yaml")
    want = {"q1": {"region", "nation", "supplier", "partsupp"}, "q2": {"nation", "supplier", "partsupp", "part"},
            "q3": {"supplier", "partsupp", "part", "lineitem"}, "q4": {"supplier", "partsupp", "lineitem", "orders"},
            "q5": {"part", "partsupp", "lineitem", "orders"}}
    assert {q.name: set(q.relations) for q in w.queries} == want
    assert all(r.window is None for r in w.relations)  # full history, as in the paper
    assert w.defaults.selectivity is None  # every class has an explicit, estimated selectivity
    assert w.selectivity_of(Attr("nation", "nationkey"), Attr("supplier", "nationkey")) == 0.04
    ten = load_workload(WORKLOADS / "tpch_10q.yaml")
    assert len(ten.queries) == 10 and ten.restricted_to(list(FIG7A_QUERIES)).queries == w.queries
    # the paper's type-compatible joins are used
    texts = " ".join(q.text for q in ten.queries)
    assert "lineitem.linestatus = orders.orderstatus" in texts and "customer.custkey = nation.nationkey" in texts


def test_bundled_workloads_are_the_sf001_statistics(sf001, tmp_path):
    """The shipped YAML files are exactly what the generator writes from SF 0.01."""
    for p in write_bundled_workloads(sf001.directory, tmp_path):
        assert p.read_text() == (WORKLOADS / p.name).read_text(), f"{p.name} is stale: rerun write_bundled_workloads"


def test_shipped_sample_is_reproducible_and_tiny(sf001, tmp_path):
    out = tpch_sample(sf001.directory, tmp_path / "tiny")
    for r in RELATIONS:
        assert (out / f"{r.name}.csv").read_text() == (tpch.SAMPLE / f"{r.name}.csv").read_text()
    assert sum(p.stat().st_size for p in tpch.SAMPLE.iterdir()) < 12_000


@pytest.mark.parametrize("name", ["tpch_fig7a.yaml", "tpch_10q.yaml"])
def test_tpch_workloads_run_equal_to_pandas_sql(sf001, frames, name):
    """The issue's acceptance check: load, optimise, run on the reference engine over SF 0.01;
    results equal the pandas evaluation, for mqo and individual plans."""
    w = load_workload(WORKLOADS / name)
    tables = read_inputs(w, sf001.directory)
    want = {q.name: pandas_results(q, frames) for q in w.queries}
    assert len(want["q1"]) == len(want["q2"]) == SF001_ROWS["partsupp"]  # one result per partsupp row
    assert len(want["q4"]) == len(want["q5"]) == SF001_ROWS["lineitem"]  # composite foreign key
    assert len(want["q3"]) > len(want["q4"])  # lineitem × the 4 partsupp rows of its part
    costs = {}
    for mode in ("mqo", "individual"):
        res = optimize(w, mode=mode)
        assert res.ilp.status == "optimal"
        run = run_reference(res.plan, tables)
        for q, rows in run.results.items():
            assert len(rows) == len(set(rows)), f"{mode}: duplicate results in {q}"
        assert run.result_sets() == want, f"{mode} plan differs from the pandas evaluation"
        costs[mode] = res.probe_cost
        assert_predicted(check_run(res.plan, run.probe_messages, run.store_rows, run.duration))
    assert costs["mqo"] < costs["individual"]


def assert_predicted(check) -> None:
    """The bounds of docs/model.md's promise for the bundled workloads on the data they describe:
    total probe messages and store rows within ±10 % of the run's counts, every store holding
    ≥ 1 % of its kind's total within ±25 %."""
    for kind in ("messages", "rows"):
        predicted, measured = check.total(kind)
        assert measured == pytest.approx(predicted, rel=0.10), kind
    for c in check.worst(n=1_000, share=0.01):
        assert 0.8 <= c.ratio <= 1.25, (c.store, c.kind, c.predicted, c.measured)


def test_fig7a_on_the_shipped_sample_through_the_cli(tmp_path, capsys):
    """Fast path without tpchgen: the shipped sample, run through `mqjoin run --check`."""
    code, printed, err = run_cli(capsys, "run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", tmp_path, "--check",
                                 "--json")
    out = json.loads(printed)
    assert code == 0 and out["check"] == "equal to the oracle"
    # the sample is other data than the SF 0.01 the workload describes: its statistics are measured
    # again, said in one line, and the prediction is then of this run
    (line,) = err.splitlines()
    assert line.startswith("mqjoin: the workload's statistics describe other data than") and "measured again" in line
    assert "mqjoin stats tpch_fig7a.yaml --data" in line
    assert out["statistics"]["remeasured"] and out["statistics"]["horizon"] == pytest.approx(out["predicted"]["span"],
                                                                                             rel=1e-4)
    assert out["predicted"]["total_rows"]["ratio"] == pytest.approx(1, rel=0.10)
    code, printed, err = run_cli(capsys, "run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", tmp_path, "--json",
                                 "--workload-stats")
    assert code == 0
    assert err == "" and not json.loads(printed)["statistics"]["remeasured"]
    frames = {r.name: pd.read_csv(tpch.SAMPLE / f"{r.name}.csv") for r in RELATIONS}
    w = load_workload(WORKLOADS / "tpch_fig7a.yaml")
    for q in w.queries:
        assert out["queries"][q.name]["results"] == len(pandas_results(q, frames)) > 0


# --------------------------------------------------------------------------------------------
# the random generator
# --------------------------------------------------------------------------------------------


def test_random_tpch_workload_follows_the_papers_recipe():
    w = random_tpch_workload(20, query_size=4, seed=3)
    assert w == random_tpch_workload(20, query_size=4, seed=3)
    assert w != random_tpch_workload(20, query_size=4, seed=4)
    direct = {frozenset((j.left, j.right)) for j in POTENTIAL_JOINS}
    keys = set()
    for q in w.queries:
        assert len(q.relations) == 4
        # every equality written is a potential join, and they form a tree over the relations
        eqs = [e.split(" = ") for e in q.text.split(", ")]
        assert len(eqs) == 3
        assert all(frozenset(Attr(*x.split(".")) for x in e) in direct for e in eqs)
        keys.add(frozenset(q.classes))
    assert len(keys) == 20  # distinct queries
    ref = load_workload(WORKLOADS / "tpch_joins.yaml")
    assert w.rate("lineitem") == ref.rate("lineitem")
    for q in w.queries:  # a two-member class has its pair's selectivity
        for c in q.classes:
            if len(c.members) == 2 and all(len(c2.members) == 2 or not set(c.members) <= set(c2.members)
                                           for q2 in w.queries for c2 in q2.classes):
                assert c.selectivity == ref.selectivity_of(*c.members)


def test_tpch_joins_hold_every_pair_a_random_query_can_need():
    ref = load_workload(WORKLOADS / "tpch_joins.yaml")
    for j in POTENTIAL_JOINS:
        assert ref.selectivity_of(j.left, j.right) is not None
    for a, b in implied_pairs():
        assert ref.selectivity_of(a, b) is not None
    for seed in range(5):  # large queries link many joins into classes: still all known
        random_tpch_workload(10, query_size=6, seed=seed)


# --------------------------------------------------------------------------------------------
# statistics on TPC-H: exact values and sampled precision against the truth from the keys
# --------------------------------------------------------------------------------------------


def _truth():
    n = SF001_ROWS
    return {
        "nation.nationkey = supplier.nationkey": 1 / 25,
        "customer.nationkey = nation.nationkey": 1 / 25,
        "nation.regionkey = region.regionkey": 1 / 5,
        "part.partkey = partsupp.partkey": 1 / n["part"],
        "lineitem.partkey = part.partkey": 1 / n["part"],
        "lineitem.partkey = partsupp.partkey": 1 / n["part"],  # 4 partsupp rows per part
        "partsupp.suppkey = supplier.suppkey": 1 / n["supplier"],
        "lineitem.suppkey = supplier.suppkey": 1 / n["supplier"],
        "lineitem.orderkey = orders.orderkey": 1 / n["orders"],
        "customer.custkey = orders.custkey": 1 / n["customer"],
    }


@pytest.fixture(scope="module")
def joins_tables(sf001):
    w = load_workload(WORKLOADS / "tpch_joins.yaml")
    return w, read_inputs(w, sf001.directory)


def test_exact_statistics_equal_the_key_structure_and_pandas(joins_tables, frames):
    w, tables = joins_tables
    st = estimate_statistics(w, tables, sample=None)
    for eq, true in _truth().items():
        p = st.pair(eq)
        assert p.exact and p.value == pytest.approx(true, rel=1e-12), eq
    # every pair against Σ_v cnt_X(v)·cnt_Y(v) / (|X|·|Y|) computed with pandas
    for p in st.pairs:
        x = frames[p.left.relation][p.left.name].value_counts()
        y = frames[p.right.relation][p.right.name].value_counts()
        both = x.index.intersection(y.index)
        want = float((x[both] * y[both]).sum()) / (len(frames[p.left.relation]) * len(frames[p.right.relation]))
        assert p.value == pytest.approx(want, rel=1e-12), p.key


def test_sampled_estimates_are_within_their_stated_precision(joins_tables):
    w, tables = joins_tables
    st = estimate_statistics(w, tables, sample=3000, seed=1)
    truth = _truth()
    sampled = [p for p in st.pairs if not p.exact]
    assert len(sampled) >= 8
    for p in st.pairs:
        if p.key in truth:
            assert abs(p.value - truth[p.key]) <= 3 * p.stderr + 1e-15, p.describe()
            assert p.low <= truth[p.key] <= p.high or abs(p.value - truth[p.key]) <= 2.6 * p.stderr, p.describe()


def test_sampled_intervals_are_calibrated_on_tpch(joins_tables):
    """Over many seeds, the stated 95 % intervals cover the true (exact) value about 95 % of
    the time — the precision statement is honest, not just wide."""
    w, tables = joins_tables
    exact = {p.key: p.value for p in estimate_statistics(w, tables, sample=None).pairs}
    hits = total = 0
    for seed in range(30):
        for p in estimate_statistics(w, tables, sample=1500, seed=seed).pairs:
            if p.exact or p.few_matches:
                continue
            total += 1
            hits += p.low <= exact[p.key] <= p.high
    assert total > 200
    assert 0.9 <= hits / total <= 1.0, f"coverage {hits}/{total}"


def test_stats_cli_on_tpch_writes_a_workload_that_optimises(sf001, tmp_path, capsys):
    out = tmp_path / "w.yaml"
    code, text, _ = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", sf001.directory, "--write", out,
                            "--sample", "0")
    assert code == 0 and "nation.nationkey = supplier.nationkey: 0.04 (exact)" in text
    w = load_workload(out)
    assert w == load_workload(WORKLOADS / "tpch_fig7a.yaml")
    assert optimize(w).ilp.status == "optimal"


def test_data_tpch_cli(cache, sf001, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "data", "tpch", "--sf", "0.01", "--cache", cache, "--json")
    d = json.loads(out)
    assert code == 0 and d["cached"] and d["streams"]["lineitem"]["rows"] == 60175
    code, out, err = run_cli(capsys, "data", "tpch", "--sf", "0.01", "--cache", cache, "--out", tmp_path / "b",
                             "--arrival", "bursts", "--rate", "1000", "--burst-duty", "0.5")
    assert code == 0 and "lineitem" in out and "bursts" in out
    assert "lineitem" in err  # progress on stderr
    ts = pq.read_table(tmp_path / "b" / "lineitem.parquet").column("ts").to_numpy()
    assert np.all(np.mod(ts, 1.0) < 0.5 + 1e-9)  # bursts: arrivals only in the first half of each second
    assert (len(ts) - 1) / (ts[-1] - ts[0]) == pytest.approx(1000, rel=0.01)
    code, _, err = run_cli(capsys, "data", "tpch", "--sf", "0", "--cache", cache)
    assert code == 2 and "scale factor" in err
