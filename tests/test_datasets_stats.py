"""Statistics from data: rates, pair selectivities with their precision, classes of
three members and classes shared between queries, writing workloads, the `stats` CLI."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from _cli import run_cli
from mqjoin.model.errors import DataError, WorkloadError
from mqjoin.planning.optimizer import optimize
from mqjoin.model.tables import Table, write_inputs
from mqjoin.model.workload import Attr, load_workload, parse_workload
from mqjoin.model.statistics import selectivity_groups
from mqjoin.datasets.stats import (assign_selectivities, estimate_statistics, pair_estimate, statistics_from_data,
                                   value_counts, workload_yaml)
from mqjoin.datasets import tpch

TWO = parse_workload("""
defaults: {selectivity: 0.5, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q1: "R(a), S(a)", q2: "S(b), T(b)"}
""")


def _table(name, values, rate=1.0):
    return Table.from_columns(name, {"ts": [i / rate for i in range(len(values))], "a": list(values)})


def brute_selectivity(xs, ys):
    agree = sum(1 for x in xs for y in ys if x is not None and x == y)
    return agree / (len(xs) * len(ys))


# --------------------------------------------------------------------------------------------
# exact estimates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_exact_pair_equals_brute_force(seed):
    rng = random.Random(seed)
    xs = [rng.choice([None, 0, 1, 2, 2.0, "2", "x"]) for _ in range(rng.randint(1, 40))]
    ys = [rng.choice([None, 1, 1.0, 2, 3, "x"]) for _ in range(rng.randint(1, 40))]
    p = pair_estimate(Attr("R", "a"), Attr("S", "a"), value_counts(xs), value_counts(ys),
                      (len(xs), len(ys)), (len(xs), len(ys)))
    assert p.exact and p.stderr == 0 and p.low == p.high == p.value
    assert p.value == pytest.approx(brute_selectivity(xs, ys))


def test_rates_are_observed_over_all_rows():
    w = parse_workload("""
defaults: {selectivity: 0.5}
relations: {R: {attributes: [a], rate: 7}, S: {attributes: [a], rate: 7}}
queries: {q: "R(a), S(a)"}
""")
    st = estimate_statistics(w, {"R": _table("R", range(101), rate=20), "S": _table("S", [1])})
    assert st.rate("R") == pytest.approx(20) and st.rate("S") is None
    w2 = st.apply(w)
    assert w2.rate("R") == 20 and w2.rate("S") == 7  # a rate that cannot be estimated is kept
    assert "rate not estimated" in st.render()


def test_three_member_class_uses_the_geometric_mean_of_its_pairs():
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
queries: {q: "R(a), S(a), T(a)"}
""")
    tables = {"R": _table("R", [1, 2, 3, 4]), "S": _table("S", [1, 1, 2, 5]), "T": _table("T", [1, 2, 2, 2])}
    st = estimate_statistics(w, tables, sample=None)
    rs, rt, st_ = (brute_selectivity(tables[x].columns["a"], tables[y].columns["a"])
                   for x, y in (("R", "S"), ("R", "T"), ("S", "T")))
    g = st.group("R.a = S.a")
    assert len(g.pairs) == 3 and g.exact
    assert g.value == pytest.approx((rs * rt * st_) ** (1 / 3), rel=1e-6)
    assert st.apply(w).query("q").classes[0].selectivity == g.value


def test_classes_sharing_a_pair_across_queries_get_one_value():
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}, U: {attributes: [a]}}
queries: {q1: "R(a), S(a), T(a)", q2: "S(a), T(a)", q3: "T(a), U(a)"}
""")
    groups = selectivity_groups(w)
    assert [len(g.pairs) for g in groups] == [3, 1]  # {R,S,T} with {S,T}; {T,U} alone
    tables = {r: _table(r, [i % k for i in range(30)]) for r, k in zip("RSTU", (3, 5, 2, 7))}
    w2 = estimate_statistics(w, tables, sample=None).apply(w)
    assert w2.query("q1").classes[0].selectivity == w2.query("q2").classes[0].selectivity
    assert parse_workload(workload_yaml(w2)) == w2


def test_zero_agreement_is_written_as_the_smallest_positive_selectivity():
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    st = estimate_statistics(w, {"R": _table("R", [1, 2]), "S": _table("S", [3, 4, 5])}, sample=None)
    assert st.pair("R.a = S.a").value == 0
    assert st.selectivity("S.a = R.a") == pytest.approx(1 / 6, rel=1e-5)  # written with 6 digits
    assert st.apply(w).query("q").classes[0].selectivity == pytest.approx(1 / 6, rel=1e-5)


def test_assign_selectivities_needs_every_pair():
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
queries: {q: "R(a), S(a), T(a)"}
""")
    with pytest.raises(WorkloadError, match="no selectivity known for R.a = T.a"):
        assign_selectivities(w, {(Attr("R", "a"), Attr("S", "a")): 0.1, (Attr("S", "a"), Attr("T", "a")): 0.1})


# --------------------------------------------------------------------------------------------
# sampled estimates: unbiased, and honest intervals
# --------------------------------------------------------------------------------------------


def _skewed_columns(seed, n_x=20000, n_y=8000):
    rng = np.random.default_rng(seed)
    xs = rng.zipf(1.6, size=n_x) % 500  # skewed keys
    ys = rng.integers(0, 400, size=n_y)
    return xs.tolist(), ys.tolist()


def test_sampled_intervals_cover_the_truth_at_their_nominal_rate():
    xs, ys = _skewed_columns(0)
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    tables = {"R": _table("R", xs), "S": _table("S", ys)}
    truth = estimate_statistics(w, tables, sample=None).pair("R.a = S.a").value
    covered, errors, ses = 0, [], []
    runs = 200
    for seed in range(runs):
        p = estimate_statistics(w, tables, sample=800, seed=seed).pair("R.a = S.a")
        assert not p.exact and p.samples == (800, 800)
        covered += p.low <= truth <= p.high
        errors.append(p.value - truth)
        ses.append(p.stderr)
    assert 0.9 <= covered / runs <= 1.0
    assert abs(np.mean(errors)) < 3 * np.std(errors) / math.sqrt(runs)  # unbiased
    assert np.mean(ses) >= 0.9 * np.std(errors)  # the stated SE is not too small


def test_no_agreeing_sample_pair_gives_an_honest_upper_bound():
    # one value in 10,000 agrees: a sample of 100 rows usually sees none
    xs = [1] + list(range(100, 10099))
    ys = [1] * 10 + list(range(20000, 20990))
    w = parse_workload("""
defaults: {selectivity: 1}
relations: {R: {attributes: [a]}, S: {attributes: [a]}}
queries: {q: "R(a), S(a)"}
""")
    tables = {"R": _table("R", xs), "S": _table("S", ys)}
    truth = 10 / (len(xs) * len(ys))
    misses = 0
    for seed in range(50):
        p = estimate_statistics(w, tables, sample=100, seed=seed).pair("R.a = S.a")
        if p.matches == 0:
            assert p.value == 0 and p.low == 0 and p.high == pytest.approx(3 / 100)
            assert p.few_matches and "raise --sample" in p.describe()
        misses += not (p.low <= truth <= p.high)
    assert misses <= 5


def test_sample_size_is_checked():
    with pytest.raises(DataError, match="sample size"):
        estimate_statistics(TWO, {}, sample=1)


# --------------------------------------------------------------------------------------------
# from a data directory, and the CLI
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_statistics_from_a_directory(tmp_path, fmt):
    tables = {"R": _table("R", [1, 2, 2, None], rate=2),
              "S": Table.from_columns("S", {"ts": [0, 1, 2], "a": [2, 2, 3], "b": ["x", "y", "y"]}),
              "T": Table.from_columns("T", {"ts": [0, 5], "b": ["y", "z"]})}
    write_inputs(tables, tmp_path, fmt)
    st = statistics_from_data(TWO, tmp_path)
    assert st.pair("R.a = S.a").value == pytest.approx(4 / 12)
    assert st.selectivity("S.b = T.b") == pytest.approx(2 / 6, rel=1e-5)
    assert (st.rate("R"), st.rate("S"), st.rate("T")) == (2.0, 1.0, 0.2)
    w = st.apply(TWO)
    assert w.defaults.parallelism == 2 and w.rate("T") == 0.2
    assert optimize(w).ilp.status == "optimal"


def test_missing_input_is_a_data_error(tmp_path):
    write_inputs({"R": _table("R", [1])}, tmp_path)
    with pytest.raises(DataError, match="no input for relation S"):
        statistics_from_data(TWO, tmp_path)


def test_stats_cli_on_the_shipped_sample(tmp_path, capsys):
    out = tmp_path / "fig7a.yaml"
    code, printed, _ = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--write", out)
    assert code == 0 and "selectivities" in printed and f"written to {out}" in printed
    text = out.read_text()
    assert text.startswith("# workload tpch_fig7a.yaml with statistics") and "# rates" in text
    w = load_workload(out)
    assert w.rate("region") == load_workload(tpch.WORKLOADS / "tpch_fig7a.yaml").rate("region")
    assert w.selectivity_of(Attr("nation", "nationkey"), Attr("supplier", "nationkey")) == 0.04
    code, printed, _ = run_cli(capsys, "stats", "tpch_10q.yaml", "--data", tpch.SAMPLE, "--sample", "20", "--seed", "3",
                               "--json")
    d = json.loads(printed)
    assert code == 0 and d["sample"] == 20 and d["rates"]["lineitem"]["tuples"] == 38
    sampled = [p for g in d["selectivities"] for p in g["pairs"] if not p["exact"]]
    assert sampled and all(p["ci95"][0] <= p["value"] <= p["ci95"][1] for p in sampled)


def _clicks(tmp_path):
    """A click-stream workload with no selectivity for its page class (and no default), and its
    data written to ``tmp_path/data``: ``(workload file, tables)``."""
    w = tmp_path / "clicks.yaml"
    w.write_text('relations: {clicks: {attributes: [user, page]}, pages: {attributes: [page]}, '
                 'users: {attributes: [user]}}\n'
                 'queries: {q: "clicks(user, page), pages(page), users(user)"}\n'
                 'selectivities: {clicks.user = users.user: 0.5}\n')
    tables = {"clicks": Table.from_columns("clicks", {"ts": [0, 1, 2, 3], "user": [1, 1, 2, 2], "page": [1, 2, 1, 3]}),
              "pages": Table.from_columns("pages", {"ts": [0, 1], "page": [1, 2]}),
              "users": Table.from_columns("users", {"ts": [0, 1], "user": [1, 3]})}
    write_inputs(tables, tmp_path / "data")
    return w, tables


def test_stats_estimates_a_workload_written_without_selectivities(tmp_path, capsys):
    """What `stats` estimates need not be there: a workload with no selectivity for a class (and
    no default) is estimated, and the workload written has the estimate and no default."""
    w, tables = _clicks(tmp_path)
    out = tmp_path / "out.yaml"
    code, _, err = run_cli(capsys, "stats", w, "--data", tmp_path / "data", "--write", out)
    assert code == 0, err
    fitted = load_workload(out)
    assert fitted.defaults.selectivity is None
    assert fitted.selectivity_of(Attr("clicks", "page"), Attr("pages", "page")) == pytest.approx(3 / 8)
    assert fitted.selectivity_of(Attr("clicks", "user"), Attr("users", "user")) == pytest.approx(2 / 8)
    # a selectivity given wrongly is still the user's to fix
    w.write_text(w.read_text().replace("0.5", "1.5"))
    code, _, err = run_cli(capsys, "stats", w, "--data", tmp_path / "data")
    assert code == 2 and "1.5" in err and err.count("\n") == 1


def test_run_on_data_measures_the_selectivities_a_workload_leaves_out(tmp_path, capsys):
    """`run --data` plans on statistics of the data: a class the workload gives no selectivity
    (and no default) is measured there, like every other statistic, and the results are the
    oracle's; `--workload-stats` (plan on the workload as written) still needs every class's."""
    w, tables = _clicks(tmp_path)
    code, out, err = run_cli(capsys, "run", w, "--data", tmp_path / "data", "--out", tmp_path / "out", "--check",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["statistics"]["remeasured"] and "statistics are incomplete" in err
    assert d["queries"]["q"]["results"] == 2  # clicks rows 0 and 1 (user 1) with pages 1 and 2
    code, _, err = run_cli(capsys, "run", w, "--data", tmp_path / "data", "--out", tmp_path / "o2", "--workload-stats")
    assert code == 2 and err.count("\n") == 1 and "no selectivity for the class" in err
    # data that spans no time gives no statistics: said, not planned on the placeholder
    flat = {r: Table.from_columns(r, {**{c: list(v) for c, v in t.columns.items()}, "ts": [0] * len(t)})
            for r, t in tables.items()}
    write_inputs(flat, tmp_path / "flat")
    code, _, err = run_cli(capsys, "run", w, "--data", tmp_path / "flat", "--out", tmp_path / "o3")
    assert code == 2 and err.count("\n") == 1 and "spans no time" in err


def test_stats_cli_errors_are_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tmp_path / "nope")
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    code, _, err = run_cli(capsys, "stats", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--sample", "1")
    assert code == 2 and "sample size" in err
