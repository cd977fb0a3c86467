"""Stores per logical partition (mqjoin.runtime.partitions): the vectorised partition keys
against the scalar partition function, the counts of a run against the executor's totals and
a direct count, the model's projection, and ``mqjoin partitions``."""

from __future__ import annotations

import decimal
import json
import math

import numpy as np
import pytest

from _cases import cases
from _cli import run_cli
from mqjoin.model.errors import OptionError
from mqjoin.model.tables import Table, write_inputs
from mqjoin.model.workload import parse_workload
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.partitions import PartitionTally, check_counts, partition_rows, project, store_partitions
from mqjoin.runtime.rules import Probe, field_positions, layout_of, partition_of, position
from mqjoin.runtime.vector import Arrivals, BatchExecutor, partition_keys, values_array


@pytest.mark.parametrize("values", [
    [0, 1, -7, 2**40, None, 5],
    [1.0, 2.5, -3.0, float("inf"), None, 1e300],
    ["nation", "", "x", None, "ü"],
    [1, 1.0, "1", True, decimal.Decimal("2.5"), None, 2**70],
])
def test_partition_keys_give_every_value_its_partition(values):
    col = values_array(values) if all(isinstance(v, (int, float, type(None))) and not isinstance(v, bool)
                                      for v in values) and max(abs(v) for v in values if v is not None) < 2**62 \
        else np.array(values, dtype=object)
    keys = partition_keys(col)
    for P in (1, 2, 7, 32):
        assert [int(k % P) for k in keys] == [partition_of(v, P) for v in values], (P, values)


def _run(plan, tables, batch, counts=None):
    """The executor after ``tables`` in batches, the per-partition rows reported after every
    batch (the tally's cache of unwindowed segments in use) checked against a fresh count."""
    ex = BatchExecutor(plan)
    ex.tally = PartitionTally(ex, counts)
    for k, frames in enumerate(Arrivals(plan.workload, tables, ex.source_need).batches(batch)):
        ex.feed(frames)
        reported = store_partitions(ex, ex.tally)
        for layout, sid in ex.names.items():
            fresh = partition_rows(ex, layout, (ex.p[layout],))[ex.p[layout]].tolist()
            assert reported[sid]["rows"] == fresh, (sid, k)
    return ex


@pytest.mark.parametrize("seed,w,tables", cases(6, start=9100, max_rows=20), ids=lambda v: f"s{v}"
                         if isinstance(v, int) else "")
def test_counts_per_partition_add_up_to_the_executor_and_match_a_direct_count(seed, w, tables):
    plan = optimize(w).plan
    ex = _run(plan, tables, 7)
    assert ex.tally.held or not any(not ex.windows[layout] and ex.stores[layout] for layout in ex.stores)
    got = store_partitions(ex, ex.tally)
    fields = field_positions(w)
    into: dict[str, int] = {}
    for lab, r in ex.rules.edges.items():
        if isinstance(r, Probe):
            sid = ex.names[r.layout]
            into[sid] = into.get(sid, 0) + ex.messages[lab]
    for s in plan.stores:
        d = got[s.id]
        assert d["partitions"] == s.parallelism == len(d["messages"]) == len(d["rows"])
        assert sum(d["messages"]) == into.get(s.id, 0), s.id  # routed once, broadcast to every partition
        assert sum(d["rows"]) == ex.live[layout_of(s)], s.id
        # the live entries' partitions by the scalar function, entry by entry
        layout = layout_of(s)
        c, f = position(fields, layout.mir.relations, layout.partition)
        want = [0] * s.parallelism
        for seg in ex.stores[layout]:
            for i in range(len(seg)):
                if all(ex.T - seg.frame.cols[comp][1][i] <= win for comp, win in ex.windows[layout]):
                    v = seg.frame.cols[c][f][i]
                    want[partition_of(None if isinstance(v, float) and math.isnan(v) else v.item(), s.parallelism)] += 1
        assert d["rows"] == want, s.id


W = parse_workload('''
defaults: {selectivity: 0.5, window: null, parallelism: 4}
relations: {N: {attributes: [k]}, S: {attributes: [k]}}
queries: {q: "N(k), S(k)"}
''')


def _nation_tables():
    # 3 distinct keys: at most 3 partitions are used whatever P
    return {"N": Table.from_columns("N", {"ts": [0, 1, 2], "k": [0, 1, 2]}),
            "S": Table.from_columns("S", {"ts": [float(i) / 10 for i in range(30)], "k": [i % 3 for i in range(30)]})}


def test_a_low_cardinality_partition_attribute_caps_the_parallelism():
    plan = optimize(W).plan
    rows = {(r.store, r.partitions): r for r in project(plan, _nation_tables(), (2, 8, 64))}
    s8, s64 = rows[("S[k]", 8)], rows[("S[k]", 64)]
    assert s8.distinct == 3 and s8.rows_max == 10 and s64.rows_max == 10  # 30 rows on 3 partitions
    assert s8.rows_mean == 30 / 8 and s64.rows_mean == 30 / 64 and s64.rows_skew == 64 / 3
    # the model: the fullest partition holds 1 of the 3 values, whatever P ≥ 3
    assert s8.model_rows == pytest.approx(s64.model_rows) == pytest.approx(rows[("S[k]", 2)].model_rows / 2)
    nomodel = {(r.store, r.partitions): r for r in project(plan, None, (2, 8))}
    assert nomodel[("S[k]", 8)].messages_max is None and nomodel[("S[k]", 8)].distinct is None
    assert nomodel[("S[k]", 2)].model_rows == pytest.approx(4 * nomodel[("S[k]", 8)].model_rows)


def test_bad_partition_counts_are_option_errors():
    for bad in (["0"], ["8", "x"], ["-3"], ["2.5"], []):
        with pytest.raises(OptionError, match="partition count|at least one"):
            check_counts(bad)


def test_partitions_command_prints_the_projection_and_json(capsys, tmp_path):
    (tmp_path / "w.yaml").write_text(W.to_yaml())
    write_inputs(_nation_tables(), tmp_path / "data")
    code, out, err = run_cli(capsys, "partitions", tmp_path / "w.yaml", "--data", tmp_path / "data",
                             "--partitions", "2,8")
    assert code == 0 and err == "", err
    line = next(x for x in out.splitlines() if x.startswith("S[k]") and x.split()[2] == "8")
    assert line.split()[3] == "3"  # used partitions: min(P, distinct values)
    code, out, _ = run_cli(capsys, "partitions", tmp_path / "w.yaml", "--data", tmp_path / "data",
                           "--partitions", "8", "--json")
    d = json.loads(out)
    s = next(r for r in d["stores"] if r["store"] == "S[k]")
    assert code == 0 and d["partitions"] == [8] and s["rows_max"] == 10 and s["distinct"] == 3
    for args, needle in ((["--partitions", "8,x"], "partition count 'x'"),
                         (["--plan", tmp_path / "no.json"], "cannot read the plan"), (["--batch", "0"], "--batch")):
        code, out, err = run_cli(capsys, "partitions", tmp_path / "w.yaml", *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
