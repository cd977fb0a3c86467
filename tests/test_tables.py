"""Input tables read from Parquet: numeric columns without nulls as :class:`Column` arrays
(no Python object per row), everything else as before, and every engine's results the same
whichever form a table has."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqjoin.model.errors import DataError
from mqjoin.model.tables import Column, Table, read_csv, read_inputs, read_parquet, time_range
from mqjoin.model.workload import parse_workload

W = parse_workload("{defaults: {selectivity: 0.2}, relations: {R: {attributes: [a, b]}, S: {attributes: [a]}, "
                   "T: {attributes: [b]}}, queries: {q1: 'R(a), S(a)', q2: 'R(b), T(b)'}}")


def _same(x, y) -> bool:
    """Equal values, NaN and None included."""
    return len(x) == len(y) and all(a == b or (a is None and b is None) or
                                    (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
                                    for a, b in zip(x, y))


@pytest.mark.parametrize("data", [
    {"ts": [0.0, 1.0, 2.5], "a": [3, 1, 3], "b": [0.5, 1.5, 2.0]},
    {"ts": [0, 1, 2], "a": [3, None, 3], "b": [0.5, float("nan"), 2.0]},  # nulls and NaN: Python values
    {"ts": [0.0, 1.0], "a": ["x", "y"], "b": [True, False]},
    {"ts": [], "a": [], "b": []},
])
def test_parquet_reads_the_values_from_columns_makes(data, tmp_path):
    pq.write_table(pa.table(data), tmp_path / "R.parquet")
    got = read_parquet(tmp_path / "R.parquet", "R")
    want = Table.from_columns("R", data)
    assert _same(got.ts, want.ts) and set(got.columns) == set(want.columns)
    for name, col in want.columns.items():
        assert _same(list(got.columns[name]), list(col)), name
        assert [type(v) for v in got.columns[name]] == [type(v) for v in col], name
    numeric = {n for n, v in data.items() if v and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                      and not (isinstance(x, float) and math.isnan(x)) for x in v)}
    assert {n for n, c in got.columns.items() if isinstance(c, Column)} == numeric - {"ts"}


def test_only_ts_and_the_declared_attributes_are_read(tmp_path):
    pq.write_table(pa.table({"ts": [0.0, 1.0], "a": [1, 2], "b": [3, 4], "note": ["x", "y"]}), tmp_path / "R.parquet")
    pq.write_table(pa.table({"ts": [0.5], "a": np.array([2], dtype=np.int32), "c": [9]}), tmp_path / "S.parquet")
    pq.write_table(pa.table({"ts": [0.2], "b": [3]}), tmp_path / "T.parquet")
    t = read_inputs(W, tmp_path)
    assert set(t["R"].columns) == {"a", "b"} and set(t["S"].columns) == {"a"}
    narrow = parse_workload("{defaults: {selectivity: 0.2}, relations: {R: {attributes: [a, b]}, "
                            "S: {attributes: [a]}}, queries: {q1: 'R(a), S(a)'}}")
    assert set(read_inputs(narrow, tmp_path)["R"].columns) == {"a"}  # the attributes its queries use
    assert set(read_inputs(narrow, tmp_path, every_attribute=True)["R"].columns) == {"a", "b"}  # declared
    assert isinstance(t["S"].columns["a"], Column) and t["S"].columns["a"].array.dtype == np.int64
    assert time_range(t) == (0.0, 1.0)


def test_a_timestamp_ts_is_seconds_and_a_null_ts_is_a_data_error(tmp_path):
    ts = pa.array([0, 1_500_000, None], pa.timestamp("us"))
    pq.write_table(pa.table({"ts": ts.slice(0, 2), "a": [1, 2]}), tmp_path / "R.parquet")
    assert list(read_parquet(tmp_path / "R.parquet", "R").ts) == [0.0, 1.5]
    pq.write_table(pa.table({"ts": ts, "a": [1, 2, 3]}), tmp_path / "R.parquet")
    with pytest.raises(DataError, match="row 2 has ts None"):
        read_parquet(tmp_path / "R.parquet", "R")


@pytest.mark.parametrize("bad, line", [("not a time", 4), ("", 4), ("nan", 4)])
def test_a_csv_ts_that_is_no_number_is_named_by_its_line(tmp_path, bad, line):
    # a blank line before it: the line number is the file's, not the row's
    (tmp_path / "R.csv").write_text(f"ts,a\n0.0,1\n\n{bad},2\n1.5,3\n")
    with pytest.raises(DataError, match=f"line {line} has ts {bad!r}"):
        read_csv(tmp_path / "R.csv", "R")


def test_a_column_reads_like_the_tuple_it_stands_for():
    c = Column(np.array([1.5, 0.0, 2.0]))
    t = (1.5, 0.0, 2.0)
    assert c == t and list(c) == list(t) and c[1:] == t[1:] and c[-1] == t[-1] and c.count(0.0) == 1
    assert c.index(2.0) == 2 and min(c) == 0.0 and c[:1] + c[-1:] == (1.5, 2.0)
    assert type(c[0]) is float and np.asarray(c) is c.array
    with pytest.raises(ValueError):
        c.array[0] = 3.0  # read-only, like a tuple
    assert c != Column(np.array([1.5, 0.0])) and c != (1.5, 0.0, 2.5)
    big = Column(np.arange(200_000))
    assert sum(big) == sum(range(200_000))


def test_every_engine_gives_the_same_results_from_columns_and_from_tuples(tmp_path):
    from mqjoin.planning.optimizer import optimize
    from mqjoin.runtime.oracle import oracle_results
    from mqjoin.runtime.reference import run_reference
    from mqjoin.runtime.vector import run_vector

    rng = np.random.default_rng(7)
    data = {"R": {"ts": np.sort(rng.uniform(0, 5, 60)), "a": rng.integers(0, 6, 60), "b": rng.integers(0, 6, 60)},
            "S": {"ts": np.sort(rng.uniform(0, 5, 40)), "a": rng.integers(0, 6, 40)},
            "T": {"ts": np.sort(rng.uniform(0, 5, 30)), "b": rng.integers(0, 6, 30)}}
    for r, cols in data.items():
        pq.write_table(pa.table(cols), tmp_path / f"{r}.parquet")
    columns = read_inputs(W, tmp_path)
    tuples = {r: Table.from_columns(r, {k: v.tolist() for k, v in cols.items()}) for r, cols in data.items()}
    assert all(isinstance(c, Column) for t in columns.values() for c in t.columns.values())
    want = oracle_results(W, tuples)
    assert oracle_results(W, columns) == want and sum(map(len, want.values()))
    plan = optimize(W).plan
    for engine in (run_reference, run_vector, lambda p, t: run_vector(p, t, batch=7)):
        for tables in (columns, tuples):
            assert {q: set(r) for q, r in engine(plan, tables).results.items()} == want
