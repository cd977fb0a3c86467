"""Predicted beside measured in the explorer: the Probe trees tab coloured by measured /
predicted after a run (Deploy panel, Adaptivity tab, a reference run), both numbers on hover,
and "re-optimise on what was measured" planning as ``mqjoin optimize --stats-from`` does."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from _cli import run_cli
from _foreign_keys import foreign_keys
from mqjoin.adaptive.policy import AdaptivePolicy
from mqjoin.datasets import tpch
from mqjoin.model.tables import read_inputs
from mqjoin.planning.measured import RunCounts, check_run
from mqjoin.planning.plan import Plan
from mqjoin.runtime.epochs import run_adaptive
from mqjoin.runtime.reference import run_reference
from mqjoin.widgets.deploy_panel import DeployPanel
from mqjoin.widgets.explorer import Explorer
from mqjoin.widgets.figures import query_colors, trace_by_name
from mqjoin.widgets.model import ExplorerModel
from mqjoin.widgets.tree_figures import RATIO_TEXT_SCALE, probe_tree_figure, ratio_color
from mqjoin.widgets.trees import ProbeTreeView


def reference_counts(plan, tables, label="reference"):
    run = run_reference(plan, tables, collect=False)
    return RunCounts(label, plan, run.probe_messages, run.store_rows, run.duration)


def numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", text)]


def test_ratio_colours_diverge_around_one():
    more, less, same = ratio_color(4.0), ratio_color(0.25), ratio_color(1.0)
    assert len({more, less, same}) == 3
    assert ratio_color(4.0) == ratio_color(4.0) and ratio_color(100.0) == ratio_color(20.0)  # clipped
    assert ratio_color(2.0) != more  # a log scale: 2× is paler than 4×
    assert ratio_color(math.inf) == ratio_color(20.0) and ratio_color(0.0) == ratio_color(0.05)
    red = [int(v) for v in re.findall(r"\d+", more)]
    blue = [int(v) for v in re.findall(r"\d+", less)]
    assert red[0] > red[2] and blue[2] > blue[0]


def test_probe_trees_coloured_by_measured_over_predicted_with_both_numbers_on_hover():
    w, tables = foreign_keys()
    plan_of = ExplorerModel(w, debounce=0).result.plan
    counts = reference_counts(plan_of, tables)
    check = counts.check()
    plain = probe_tree_figure(plan_of)
    fig = probe_tree_figure(plan_of, check=check)
    stores_plain, stores = trace_by_name(plain, "stores"), trace_by_name(fig, "stores")
    assert set(stores_plain.marker.color) <= set(query_colors(w).values()) | {"#37474F", "#7F7F7F"}
    assert not trace_by_name(plain, "measured / predicted").marker.showscale
    scale = trace_by_name(fig, "measured / predicted")
    assert scale.marker.showscale and "measured / predicted" in scale.marker.colorbar.title.text
    steps = dict(zip((n.edge for n in plan_of.nodes), check.steps))
    ratios = []
    for (edge, *_), colour, hover in zip(stores.customdata, stores.marker.color, stores.hovertext):
        step = steps[edge]
        assert colour == ratio_color(step.ratio)
        ratios.append(step.ratio)
        line = hover.split("<b>the run</b>: ")[1].split("<br>")[0]
        pred, meas = numbers(line)[:2]
        assert pred == pytest.approx(step.predicted, rel=1e-3) and meas == step.measured
    # the foreign keys make some steps count more than the model says and others not
    assert max(ratios) > 1.5 and len({ratio_color(r) for r in ratios}) > 1
    hi = [c for c, r in zip(stores.marker.color, ratios) if r > 1.5]
    lo = [c for c, r in zip(stores.marker.color, ratios) if r < 1 / 1.5]
    assert hi and (not lo or set(hi).isdisjoint(lo))
    rows = {c.store: c.ratio for c in check.stores if c.kind == "rows"}
    store_of = {n.edge: n.store for n in plan_of.nodes}
    assert list(stores.textfont.color) == [ratio_color(rows[store_of[e]], RATIO_TEXT_SCALE)
                                           for e, *_ in stores.customdata]


def test_the_view_colours_after_a_run_keeps_them_through_an_edit_and_drops_them_for_another_plan():
    w, tables = foreign_keys()
    view = ProbeTreeView(w, debounce=0)
    first = list(view.figure.data[4].marker.color)
    assert view.replan_button.disabled and view.check() is None
    view.model.set_measured(reference_counts(view.model.result.plan, tables, "mqo #1"))
    coloured = list(view.figure.data[4].marker.color)
    assert coloured != first and not view.replan_button.disabled
    assert "mqo #1" in view.run_note.value and "blue" in view.run_note.value
    assert view.figure.data[8].marker.showscale
    # a rate edit keeps the plan's layout: still coloured, the predictions follow the edit
    before = view.check().total("messages")
    view.model.set_rate("O", 600)
    after = view.check()
    assert after is not None and after.total("messages")[1] == before[1] and after.total("messages")[0] != before[0]
    # another layout: the usual colours and a note saying why
    view.model.set_options(mode="individual")
    assert view.check() is None and "another plan" in view.run_note.value
    assert not view.figure.data[8].marker.showscale
    assert set(view.figure.data[4].marker.color) <= set(query_colors(w).values()) | {"#37474F", "#7F7F7F"}


def test_reoptimise_on_what_was_measured_is_optimize_stats_from(tmp_path, capsys):
    run_json, plan_json = tmp_path / "run.json", tmp_path / "plan.json"
    # the explorer plans on the workload as written: so does this run
    code, run_text, _ = run_cli(capsys, "run", "tpch_fig7a.yaml", "--data", tpch.SAMPLE, "--out", tmp_path / "o",
                                "--json", "--workload-stats")
    assert code == 0
    run_json.write_text(run_text)
    code, cli_text, _ = run_cli(capsys, "optimize", "tpch_fig7a.yaml", "--stats-from", run_json,
                                "--plan-out", plan_json)
    assert code == 0

    view = ProbeTreeView("tpch_fig7a.yaml", debounce=0)
    plan = view.model.result.plan
    view.model.set_measured(reference_counts(plan, read_inputs(plan.workload, tpch.SAMPLE), "run"))
    report = view.replan()
    got = view.model.result.plan
    assert json.loads(got.to_json()) == json.loads(plan_json.read_text())
    assert Plan.from_json(plan_json.read_text()).probe_cost == pytest.approx(got.probe_cost)
    assert report.render().splitlines()[0] in cli_text
    assert "re-planned on" in view.replan_out.value and "probe cost" in view.replan_out.value


def test_reoptimise_keeps_the_users_edits():
    w, tables = foreign_keys()
    m = ExplorerModel(w, debounce=0)
    view = ProbeTreeView(m)
    m.set_measured(reference_counts(m.result.plan, tables))
    m.set_rate("O", 700)
    m.add_query("extra", "L(ok), O(ok)")
    report = view.replan()
    assert report is not None and m.workload.sizes
    assert m.workload.rate("O") == 700 and "extra" in m.workload.query_names
    assert {tuple(s.relations) for s in m.workload.sizes} >= {("P", "L")}


class StoresDeployment:
    """A finished deployment that counted per store, as Spark's micro-batches do."""

    def __init__(self, plan, tables):
        self.plan, self.tables, self.total, self.done, self.subs = plan, tables, 1, False, []
        run = run_reference(plan, tables, collect=False)
        self.stores = pd.DataFrame([{"batch": 0, "store": s, "rows": run.store_rows[s],
                                     "messages": run.store_messages.get(s, 0)} for s in run.store_rows])
        self.batches = self.queries = self.progress = pd.DataFrame()

    def subscribe(self, f):
        self.subs.append(f)

    def stop(self):
        pass

    def finish(self):
        self.done = True
        for f in list(self.subs):
            f({"kind": "status", "status": "finished", "error": None})


def test_a_deployment_that_ends_colours_the_explorers_probe_trees():
    w, tables = foreign_keys()
    made = []

    def deploy_fn(plan, data, out, engine, rate, **kw):
        made.append(StoresDeployment(plan, data))
        return made[-1]

    ex = Explorer(w, debounce=0, deploy=lambda provider: DeployPanel(provider, deploy_fn=deploy_fn, data=tables,
                                                                      refresh_seconds=0))
    ex.deploy_panel.deploy()
    assert ex.deploy_panel.wait_started(10)  # the start runs off the kernel's thread
    assert ex.model.measured is None
    made[0].finish()
    counts = ex.model.measured
    assert counts is not None and counts.per_store and counts.label == "mqo #1"
    check = ex.trees.check()
    assert all(math.isnan(c.measured) for c in check.steps)
    got = {c.store: c.measured for c in check.stores if c.kind == "messages"}
    assert got == {s: float(made[0].stores.set_index("store").messages[s]) for s in got}
    hover = ex.trees.figure.data[4].hovertext[0]
    assert "not measured per step" in hover and "measured" in hover.split("store ")[-1]
    assert "its store’s" in ex.trees.run_note.value
    ex.close()


def test_an_adaptive_run_gives_the_counts_of_its_last_plan():
    w, tables = foreign_keys()
    run = run_adaptive(w, tables, AdaptivePolicy(epoch=0.25, adapt=False))
    counts = run.counts("static")
    assert counts.since == 0 and counts.plan is run.plans[-1]
    assert sum(counts.messages.values()) == sum(e.probe_messages - e.history_messages for e in run.epochs)
    ref = run_reference(counts.plan, tables, collect=False)
    assert counts.messages == ref.probe_messages  # one plan throughout: the static run's counts
    check = counts.check()
    assert check.total("messages")[0] == pytest.approx(
        check_run(counts.plan, ref.probe_messages, ref.store_rows, ref.duration).total("messages")[0])


def test_a_run_of_the_adaptivity_tab_that_ends_colours_the_probe_trees():
    from mqjoin.runtime.epochs import AdaptiveReplay
    from mqjoin.widgets.adaptivity import AdaptivityPanel

    w, _ = foreign_keys()
    m = ExplorerModel(w, debounce=0)
    view = ProbeTreeView(m)
    panel = AdaptivityPanel(m, start=lambda wl, tables, policy, speedup: AdaptiveReplay(
        wl, tables, policy, speedup=1000.0).start())
    panel.data.value = "uniform"
    panel.duration.value = 2.0
    panel.adapt.value = False
    source = panel.run()
    assert source is not None and source.wait(60)
    assert panel.wait_drawn(30)
    assert m.measured is not None and m.measured.label == panel.sources[0][0]
    assert view.check() is not None and not view.replan_button.disabled
    assert view.figure.data[8].marker.showscale
    panel.close()


def test_compare_gains_measured_columns_once_a_run_exists():
    from mqjoin.planning.measured import measured_workload
    from mqjoin.planning.recost import recost
    from mqjoin.widgets.compare import ComparisonView

    w, tables = foreign_keys()
    m = ExplorerModel(w, debounce=0)
    view = ComparisonView(m)
    view.compute()
    assert "measured" not in view.table.value
    counts = reference_counts(m.result.plan, tables, "mqo #1")
    m.set_measured(counts)
    html = view.table.value
    assert "probe cost on measured sizes" in html and "probe messages measured in mqo #1" in html
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)[1:]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S) for r in rows]
    sized = measured_workload(w, counts.check().to_dict())
    for r, row in zip(view.plans.values(), cells):
        assert row[8] == f"{recost(r.plan, sized):,.0f}" or numbers(row[8])[0] == pytest.approx(recost(r.plan, sized),
                                                                                                rel=1e-3)
        ran = counts.check(r.plan)
        assert (row[9] == "—") == (ran is None)
    got = sum(counts.messages.values())
    assert sum(1 for row in cells if row[9] != "—") >= 1
    assert all(numbers(row[9])[0] == got for row in cells if row[9] != "—")


class StoppedDeployment(StoresDeployment):
    """A deployment of ``tables`` stopped ``span`` time units in: its stores counted what the
    reference engine counts on the rows it reached, its batches reached ``span``."""

    def __init__(self, plan, tables, span):
        from mqjoin.datasets.fitting import reached

        super().__init__(plan, reached(tables, span))
        self.tables = tables
        self.batches = pd.DataFrame([{"batch": 0, "input_rows": 1, "started": 100.0, "seconds": 0.5, "state_rows": 0,
                                      "max_ts": span}])


def key_ordered():
    """P and its foreign key in L, both arriving in key order over one time unit (as TPC-H's
    tables do): the whole run's statistics are exact, a prefix joins more densely than they say."""
    from mqjoin.model.tables import Table
    from mqjoin.model.workload import parse_workload

    w = parse_workload("""
defaults: {window: null}
relations: {P: {attributes: [pk], rate: 200}, L: {attributes: [pk, ok], rate: 2000}, O: {attributes: [ok], rate: 500}}
queries: {q: "P(pk), L(pk, ok), O(ok)"}
selectivities: {P.pk = L.pk: 0.005, L.ok = O.ok: 0.002}
""")
    return w.with_defaults(horizon=1.0), {
        "P": Table.from_columns("P", {"ts": [i / 200 for i in range(201)], "pk": list(range(201))}),
        "L": Table.from_columns("L", {"ts": [i / 2000 for i in range(2001)], "pk": [i // 10 for i in range(2001)],
                                      "ok": [i // 4 for i in range(2001)]}),
        "O": Table.from_columns("O", {"ts": [i / 500 for i in range(501)], "ok": list(range(501))})}


def test_a_deploy_stopped_early_is_coloured_against_the_part_of_the_data_it_reached():
    """A run stopped 30 % of the way into key-ordered data: the probe trees compare it with the
    prediction for the rows it reached (within the CLI's bounds), not with the whole run's
    statistics over that part of the span (a step probing with P ⋈ L's results: ≈ 1 / 0.3 times
    more than predicted)."""
    from dataclasses import replace

    from test_datasets_tpch import assert_predicted

    w, tables = key_ordered()
    made = []

    def deploy_fn(plan, data, out, engine, rate, **kw):
        made.append(StoppedDeployment(plan, data, 0.3))
        return made[-1]

    ex = Explorer(w, debounce=0, deploy=lambda provider: DeployPanel(provider, deploy_fn=deploy_fn, data=tables,
                                                                      refresh_seconds=0))
    ex.deploy_panel.deploy()
    assert ex.deploy_panel.wait_started(10)
    ex.deploy_panel.stop()
    assert ex.deploy_panel.wait_idle()
    counts = ex.model.measured
    assert counts is not None and counts.span == pytest.approx(0.3) and counts.workload is not None
    assert_predicted(ex.trees.check())
    whole = replace(counts, workload=None).check(ex.model.result.plan)  # the whole run's statistics
    assert max(c.ratio for c in whole.worst()) > 2.5  # a step of P ⋈ L's results: ≈ 1 / 0.3 more than predicted
    ex.close()


@pytest.mark.slow
def test_a_deploy_on_tpch_sf001_colours_the_probe_trees_within_the_clis_bounds(tmp_path, monkeypatch):
    """Deploy on TPC-H SF 0.01 from the Deploy tab (planned on that data), the run to its end and
    a run stopped a third of the way: every store's measured / predicted within the bounds of
    ``mqjoin run``'s comparison (tests/test_datasets_tpch.py), the reference engine counting
    per store as Spark's batches do."""
    from mqjoin.model.tables import read_inputs, time_range
    from test_datasets_tpch import assert_predicted

    monkeypatch.setenv("MQJOIN_CACHE", str(tmp_path))
    made, share = [], [1.0]

    def deploy_fn(plan, data, out, engine, rate, **kw):
        tables = read_inputs(plan.workload, data)
        made.append(StoppedDeployment(plan, tables, time_range(tables)[1] * share[0]))
        return made[-1]

    ex = Explorer("tpch_fig7a.yaml", debounce=0,
                  deploy=lambda provider: DeployPanel(provider, deploy_fn=deploy_fn, refresh_seconds=0))
    panel = ex.deploy_panel
    panel.input.value = "tpch"
    for share[0] in (1.0, 1 / 3):
        panel.deploy()
        assert panel.wait_started(600)
        panel.stop()
        assert panel.wait_idle(60)
        assert ex.model.measured is not None and ex.model.measured.label == panel.deployments[-1][0]
        assert "sf0.01" in ex.statistics_line.value
        assert_predicted(ex.trees.check())
    ex.close()
