"""Predicted beside measured (mqjoin.planning.measured): on data where the model's
assumptions hold the ratios are 1, on foreign-key data measured sizes bring them there, a run's
sizes re-plan a workload, and the CLI shows it all (``run --json``, ``optimize --stats-from``)."""

from __future__ import annotations

import json

import pytest

from _foreign_keys import foreign_keys
from _cli import cli_process, run_cli
from mqjoin.datasets import tpch
from mqjoin.datasets.sizes import measure_sizes
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.workload import parse_workload
from mqjoin.planning.measured import check_run, exposure, run_sizes
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.reference import run_reference

UNIFORM = parse_workload("""
defaults: {rate: 1500, window: null, parallelism: 4}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
selectivities: {R.a = S.a: 0.002, S.b = T.b: 0.003, T.c = U.c: 0.002}
""")


def test_exposure_is_the_window_volume_a_start_tuple_sees():
    w = UNIFORM.with_relation("S", window=0.5)
    assert exposure(w, ["R"], "R", 2.0) == 2.0
    assert exposure(w, ["R", "T"], "R", 2.0) == pytest.approx(2.0 ** 2 / 2)  # full history: S^k / k · k
    assert exposure(w, ["R", "S"], "R", 2.0) == pytest.approx(0.5 ** 2 / 2 + 0.5 * 1.5)
    assert exposure(w, ["R", "S", "T"], "R", 2.0) == pytest.approx(0.5 ** 3 / 3 + 0.5 * (2.0 ** 2 - 0.5 ** 2) / 2)


def test_predictions_hold_where_the_model_does():
    """Uniform independent keys, uniform arrivals, one time unit: measured / predicted ≈ 1."""
    plan = optimize(UNIFORM).plan
    run = run_reference(plan, uniform_streams(UNIFORM, duration=1.0, seed=1), collect=False)
    check = check_run(plan, run.probe_messages, run.store_rows, 1.0)
    pred, got = check.total("messages")
    assert got / pred == pytest.approx(1, abs=0.1)
    rows_pred, rows_got = check.total("rows")
    assert rows_got / rows_pred == pytest.approx(1, abs=0.1)
    assert {c.store for c in check.stores} == {s.id for s in plan.stores}
    assert sum(c.measured for c in check.steps) == run.total_probe_messages


def test_measured_sizes_make_predictions_hold_on_foreign_keys():
    w, tables = foreign_keys()
    sized = w.with_sizes(measure_sizes(w, tables, 0.5))
    worst = {}
    for name, wl in (("estimates", w), ("sizes", sized)):
        plan = optimize(wl).plan
        run = run_reference(plan, tables, collect=False)
        check = check_run(plan, run.probe_messages, run.store_rows, 1.0)
        worst[name] = check.worst(1)[0].ratio
    assert worst["estimates"] > 3 or worst["estimates"] < 1 / 3
    assert worst["sizes"] == pytest.approx(1, abs=0.2)


def test_the_order_of_arrival_makes_predictions_hold_on_key_ordered_streams():
    """The same foreign keys arriving in key order — each row of P just before the rows of L
    that reference it: L completes every result of P ⋈ L, not half of them.  Sizes alone
    leave the steps from that prefix off; the measured order of arrival puts them right."""
    from dataclasses import replace

    from mqjoin.model.tables import Table

    w, tables = foreign_keys()
    p, li = tables["P"], tables["L"]
    tables = {**tables, "P": Table.from_columns("P", {**p.columns, "ts": [i / 200 for i in range(200)]}),
              "L": Table.from_columns("L", {**li.columns, "ts": [pk / 200 + 0.001 for pk in li.columns["pk"]]})}
    sizes = measure_sizes(w, tables)
    assert any(m.last for m in sizes)
    worst = {}
    for name, sized in (("sizes", w.with_sizes([replace(m, arrival=()) for m in sizes])),
                        ("order", w.with_sizes(sizes))):
        assert all(not m.last for m in sized.sizes) == (name == "sizes")
        plan = optimize(sized, mirs=False).plan
        run = run_reference(plan, tables, collect=False)
        check = check_run(plan, run.probe_messages, run.store_rows, 1.0)
        worst[name] = check.worst(1)[0].ratio
    assert not 0.8 <= worst["sizes"] <= 1.2
    assert worst["order"] == pytest.approx(1, abs=0.1)


@pytest.fixture(scope="module")
def fig7a_sample():
    """The shipped TPC-H sample and Figure 7(a)'s workload as shipped (its sizes and orders of
    arrival) with the rates and selectivities of the sample."""
    from mqjoin.datasets.stats import estimate_statistics
    from mqjoin.model.tables import read_inputs
    from mqjoin.model.workload import load_workload

    w = load_workload(tpch.WORKLOADS / "tpch_fig7a.yaml")
    tables = read_inputs(w, tpch.SAMPLE)
    return w, tables, estimate_statistics(w, tables, sample=None).apply(w)


def test_a_runs_sizes_are_its_counts(fig7a_sample):
    w, tables, fitted = fig7a_sample
    plan = optimize(fitted).plan
    run = run_reference(plan, tables, collect=False)
    span = max(max(t.ts) for t in tables.values()) - min(min(t.ts) for t in tables.values())
    check = check_run(plan, run.probe_messages, run.store_rows, span).to_dict()
    sizes = run_sizes(fitted, check)
    assert sizes and all(len(m.relations) > 1 and m.value > 0 for m in sizes)
    assert len({(m.query, frozenset(m.relations)) for m in sizes}) == len(sizes)  # one size per set and scope
    for h in check["held"]:  # an MIR store's rows are its join's count, whichever query's steps also reach it
        m = next(m for m in sizes if set(m.relations) == set(h["relations"]) and m.query in (None, h["query"]))
        assert m.value * h["volume"] == pytest.approx(max(h["rows"], 1))
    replanned = fitted.with_sizes(sizes, strict=False)
    assert replanned.sizes and optimize(replanned).probe_cost > 0


def test_run_json_and_stats_from(tmp_path, capsys):
    out = tmp_path / "res"
    code, text, _ = run_cli(capsys, "run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", out, "--json")
    assert code == 0
    d = json.loads(text)
    p = d["predicted"]
    assert p["span"] > 0 and p["steps"] and p["stores"]
    assert p["total_messages"]["measured"] == d["probe_messages"]
    assert {s["store"] for s in p["stores"]} == set(d["probe_messages_by_store"])
    for s in p["steps"]:
        assert set(s) >= {"store", "step", "predicted", "measured", "ratio"}
    # the text rendering of the same section; planned on the workload as written (the statistics
    # the data contradicts are not measured again: the first run did that)
    code, text, _ = run_cli(capsys, "run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", out, "--workload-stats")
    assert code == 0
    assert "probe messages: predicted" in text and "furthest from the model" in text

    run = tmp_path / "run.json"
    run.write_text(json.dumps(d))
    code, text, _ = run_cli(capsys, "optimize", "tpch_fig7a.yaml", "--stats-from", run)
    assert code == 0
    assert "re-planned on" in text and "join sizes measured by the run" in text and "probe cost" in text
    assert "join sizes: " in text and "measured (the workload's 'sizes')" in text
    code, text, _ = run_cli(capsys, "optimize", "tpch_fig7a.yaml", "--stats-from", run, "--json")
    assert code == 0
    j = json.loads(text)
    assert j["stats_from"]["sizes"] and "cost_before" in j["stats_from"]["diff"]

    code, text, _ = run_cli(capsys, "compare", "tpch_fig7a.yaml", "--planner", "clash", "--stats-from", run, "--json")
    assert code == 0
    rows = json.loads(text)
    mqo = next(r for r in rows if (r["mode"], r["partitioning"]) == ("mqo", "single"))
    assert mqo["measured_probe_cost"] == pytest.approx(j["stats_from"]["diff"]["cost_before"])
    assert len({round(r["measured_probe_cost"]) for r in rows}) > 1
    # the measured Pareto front of probe cost and memory, and whether the optimiser's choice is on it
    front = [r for r in rows if r["measured_front"]]
    assert front and len(front) < len(rows)
    for r in rows:
        beaten = any(o["measured_probe_cost"] <= r["measured_probe_cost"]
                     and o["measured_memory"] <= r["measured_memory"]
                     and (o["measured_probe_cost"], o["measured_memory"]) != (r["measured_probe_cost"],
                                                                              r["measured_memory"])
                     for o in rows)
        assert r["measured_front"] == (not beaten), r
    assert [r for r in rows if r.get("chosen")] == [mqo]
    code, text, _ = run_cli(capsys, "compare", "tpch_fig7a.yaml", "--planner", "clash", "--stats-from", run)
    assert code == 0
    lines = text.splitlines()
    assert "on measured" in lines[0] and "front" in lines[0]
    assert sum("← chosen" in line for line in lines) == 1
    assert lines[-1].endswith("the optimiser's choice (clash mqo single) is "
                              f"{'on' if mqo['measured_front'] else 'not on'} it")


@pytest.mark.parametrize("content, culprit", [(None, "does not exist"), ("{", "cannot read"),
                                              ('{"probe_messages": 3}', "no 'predicted' section"),
                                              ('{"predicted": {"span": 1}}', "malformed")])
def test_stats_from_errors_are_one_line(tmp_path, capsys, content, culprit):
    f = tmp_path / "run.json"
    if content is not None:
        f.write_text(content)
    code, _, err = run_cli(capsys, "optimize", "tpch_fig7a.yaml", "--stats-from", f)
    assert code == 2
    assert err.count("\n") == 1 and culprit in err


@pytest.mark.slow
def test_spark_run_json_has_the_reference_counts_beside_the_model(tmp_path):
    """Driver-mode Spark counts messages per store and rows per batch: its ``predicted``
    section compares stores (steps are predicted only), with the reference executor's counts."""
    from mqjoin.model.tables import read_inputs
    from mqjoin.model.workload import load_workload

    pytest.importorskip("pyspark")
    r = cli_process("run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", tmp_path / "out", "--engine", "spark",
                    "--master", "local[2]", "--spark-mode", "driver", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    p = json.loads(r.stdout)["predicted"]
    from mqjoin.datasets.fitting import fit_to_data

    w = load_workload(tpch.WORKLOADS / "tpch_fig7a.yaml")
    tables = read_inputs(w, tpch.SAMPLE)
    ref = run_reference(optimize(fit_to_data(w, tables).workload).plan, tables, collect=False)
    got = {s["store"]: s["measured"] for s in p["stores"] if s["kind"] == "messages"}
    assert got == {k: float(v) for k, v in ref.store_messages.items()}
    assert all(s["measured"] is None for s in p["steps"]) and p["shapes"] == []
