"""The adaptivity views without a browser: the epoch timeline, query changes while a run is
live, and the Explorer's Adaptivity tab.

The comm is swapped as in tests/test_widgets.py (its recording comm and fake frontend are
reused): the tests play the frontend (slider moves, button clicks) and read what the kernel
sent back.  Live runs are :class:`~mqjoin.runtime.epochs.AdaptiveReplay`\\ s on small data
at a high speed-up.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import threading
import time
from dataclasses import replace

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from test_widgets import (fake_timers, figure_messages, frontend_clicks, frontend_sets,  # noqa: F401  (the fixtures)
                          recording_comm, sent_values)

from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange
from mqjoin.widgets.charts import epoch_figure, switch_cause
from mqjoin.datasets.synthetic_paper import selectivity_change
from mqjoin.model.errors import DataError
from mqjoin.runtime.oracle import adaptive_oracle_results
from mqjoin.runtime.epochs import AdaptiveReplay, run_adaptive
from mqjoin.model.tables import Table
from mqjoin.widgets import Explorer, EpochTimeline, QueryChangesPanel, epoch_view, figure_8b_budget
from mqjoin.widgets.figures import trace_by_name
from mqjoin.widgets.adaptivity import AdaptivityPanel
from mqjoin.widgets.timeline import TIMELINE_PANELS
from mqjoin.model.workload import parse_workload

REPLAY_THREAD = "mqjoin-adaptive-replay"

W_LIVE = parse_workload("""
defaults: {selectivity: 0.5, window: 3, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
queries: {q1: "R(a), S(a)"}
""")


def live_tables(seconds: int, per_second: int = 4) -> dict[str, Table]:
    """R, S, T with ``per_second`` tuples a second each, values cycling over 3."""
    n = seconds * per_second
    return {r: Table.from_columns(r,
                                  {"ts": [k / per_second + 0.05 * j for k in range(n)], "a": [k % 3 for k in range(n)]})
            for j, r in enumerate("RST")}


def text(widget) -> str:
    return html.unescape(widget.value)


def shapes_at(fig, x: float) -> list:
    return [s for s in fig.layout.shapes if s.type == "line" and s.x0 == x]


# --------------------------------------------------------------------------------------------
# a finished run: the paper's selectivity change (Figure 8(a)) at 100 tuples/s per relation
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paper_runs():
    d = selectivity_change(scale=1000, partners=20)
    tables = d.tables()
    runs = {name: run_adaptive(d.workload, tables, AdaptivePolicy(epoch=1.0, adapt=adapt), collect=False)
            for name, adapt in (("adaptive", True), ("static", False))}
    return d, runs


def test_band_has_one_segment_per_plan_and_switches_are_annotated_at_their_epochs(paper_runs):
    d, runs = paper_runs
    ad, st = runs["adaptive"], runs["static"]
    (switch,) = ad.switches[1:]
    assert switch.active_from == 17  # the engine's decision; the timeline must draw it there
    tl = EpochTimeline(ad, marks={"data change": d.change_at})
    assert tl.add(st) == "static"
    fig = tl.figure
    names = [t.name for t in fig.data]
    assert names[:2] == ["adaptive plans", "adaptive latency"] and "static plans" in names
    assert {"adaptive throughput", "adaptive state", "adaptive messages", "static p95"} <= set(names)
    band = trace_by_name(fig, "adaptive plans")
    assert len(band.text) == len(ad.plans) == 2
    assert list(band.text) == ["P0", "P1"] and list(band.base) == [0.0, 17.0] and list(band.x) == [17.0, 13.0]
    assert [c[0] for c in band.customdata] == [0, 1]
    static_band = trace_by_name(fig, "static plans")
    assert list(static_band.text) == ["P0"] and list(static_band.base) == [0.0] and list(static_band.x) == [30.0]
    # the switch: a line at the start of epoch 17 in every row, annotated with the plan it installed
    lines = shapes_at(fig, 17.0)
    assert len(lines) == len(TIMELINE_PANELS) and {s.line.color for s in lines} == {band.marker.line.color}
    assert len(shapes_at(fig, d.change_at)) == len(TIMELINE_PANELS)
    assert {s.x0 for s in fig.layout.shapes if s.type == "line"} == {17.0, d.change_at}
    notes = {a.text: a for a in fig.layout.annotations}
    assert switch_cause(switch) == f"cost −{switch.saving:.0%}".replace("%", " %") and switch.saving > 0.5
    note = notes[f"adaptive: P1 ({switch_cause(switch)})"]
    assert note.x == 17.0 and notes["data change"].x == d.change_at
    assert not any(t.startswith("static: P") for t in notes)
    # the annotation's hover: when and on what it was decided, and the reason clause by clause
    hover = html.unescape(note.hovertext).split("<br>")
    assert hover[0] == ("adaptive: P1 active from epoch 17, decided at the start of epoch 16 on the statistics "
                        "of epoch 15")
    assert hover[1:] == switch.reason.split("; ") and "S » T[b] » R[a] » U[c]" in note.hovertext.replace("&gt;", ">")
    # throughput: tuples per second of processing time; the input rate (4 × 100 tuples/s) dashed
    thr = trace_by_name(fig, "adaptive throughput")
    assert list(thr.y) == [e.input_tuples / e.busy_seconds for e in ad.epochs]
    assert list(trace_by_name(fig, "adaptive input rate").y) == [400.0] * 30
    assert trace_by_name(fig, "adaptive input rate").line.dash == "dash"
    # … which falls for the static plan after the change (each S tuple's 20 partials go on to T)
    static_thr = list(trace_by_name(fig, "static throughput").y)
    assert sorted(static_thr[20:])[5] < sorted(static_thr[5:15])[5] / 1.5
    assert list(trace_by_name(fig, "adaptive messages").y) == [e.probe_messages for e in ad.epochs]
    # the frontend got the band and the annotations
    msgs = figure_messages(fig)
    assert "adaptive plans" in msgs and f"adaptive: P1 ({switch_cause(switch)})" in msgs and "static plans" in msgs
    # the figure is epoch_figure's, with the band and throughput rows
    ref = epoch_figure([("adaptive", ad), ("static", st)], marks={"data change": d.change_at}, panels=TIMELINE_PANELS)
    assert [t.name for t in ref.data] == names


def test_selecting_an_epoch_shows_its_plan_the_decision_and_the_diff(paper_runs):
    _, runs = paper_runs
    ad = runs["adaptive"]
    tl = EpochTimeline(ad)
    assert tl.epoch.min == 0 and tl.epoch.max == 29 and tl.epoch.value == 29  # follows the latest epoch
    frontend_sets(tl.epoch, value=17)
    got = text(tl.details)
    switch = ad.switches[1]
    assert "epoch 17" in got and "P1" in got and "active in epochs 17–29" in got
    for by_start in ad.plans[1].probe_orders().values():  # rendered as the engine renders them
        for order in by_start.values():
            assert order in got
    assert "S » T[b] » R[a] » U[c]" in got
    for s in ad.plans[1].stores:
        assert s.id in got
    assert switch.reason in got and "statistics of epoch 15" in got
    assert "made at the start of epoch 16 on the statistics of epoch 15, active from epoch 17" in got
    assert "plan diff P0 → P1" in got and epoch_view(ad, 17).diff.summary().splitlines()[0] in got
    assert any("P1" in html.unescape(v) and switch.reason in html.unescape(v) for v in sent_values(tl.details))
    selected = [s for s in tl.figure.layout.shapes if s.name == "selected epoch"]
    assert len(selected) == 1 and (selected[0].x0, selected[0].x1) == (17.0, 18.0)
    # the epoch before: still P0, and the decision made at its start switches to P1
    tl.select(16)
    got = text(tl.details)
    assert "P0" in got and "active in epochs 0–16" in got and "decision at the start of epoch 16" in got
    assert "switch to P1" in got and "initial plan" in got and "plan diff" not in got
    assert epoch_view(ad, 16).plan is ad.plans[0]


def test_overlaid_runs_are_chosen_in_the_selector(paper_runs):
    _, runs = paper_runs
    tl = EpochTimeline(runs["adaptive"])
    assert tl.run_choice.layout.display == "none"  # one run: no chooser
    tl.add(runs["static"])
    assert tl.run_choice.layout.display is None and list(tl.run_choice.options) == ["adaptive", "static"]
    frontend_sets(tl.run_choice, index=1)
    tl.select(20)
    got = text(tl.details)
    assert "static · " in got
    assert "P0" in got and "active in epochs 0–29" in got and "keep P0" in got and "static plan" in got
    assert tl.add(runs["adaptive"]) == "adaptive #2"


# --------------------------------------------------------------------------------------------
# live runs
# --------------------------------------------------------------------------------------------


def record_draws(view) -> list[tuple[float, str]]:
    """Wrap a view's redraw to record (time, thread name) of every draw."""
    draws: list[tuple[float, str]] = []
    redraw = view._redraw
    draw = redraw.draw

    def recording():
        draws.append((time.monotonic(), threading.current_thread().name))
        draw()

    redraw.draw = recording
    return draws


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_redraws_are_throttled_to_one_per_interval(monkeypatch, fake_timers):
    """Redraw's throttle against a fake clock and fake timers: deterministic, no sleeping."""
    import types

    from mqjoin.widgets import live

    clock = FakeClock()
    monkeypatch.setattr(live, "time", types.SimpleNamespace(monotonic=clock, sleep=time.sleep))
    drawn: list[float] = []
    r = live.Redraw(lambda: drawn.append(clock()), min_interval=0.5)
    r.request()
    assert drawn == [] and [t.interval for t in fake_timers.live] == [0.0]  # never inside the caller
    fake_timers.fire(fake_timers.live[0])
    assert drawn == [100.0] and r.count == 1
    for _ in range(10):  # a burst: one timer for the rest of the interval shows them all
        clock.now += 0.01
        r.request()
    (waiting,) = [t for t in fake_timers.live if t is not fake_timers.made[0]]
    assert len(fake_timers.made) == 2  # the later nine requests found it scheduled
    assert waiting.interval == pytest.approx(0.49) and drawn == [100.0]  # scheduled at 100.01
    clock.now = 100.5
    fake_timers.fire(waiting)
    assert drawn == [100.0, 100.5]
    clock.now += 0.1
    r.request()  # 0.1 s after a draw: waits the remaining 0.4 s
    assert fake_timers.made[-1].interval == pytest.approx(0.4)
    r.request(force=True)  # the end of a run: drawn without waiting, the waiting draw cancelled
    assert fake_timers.made[-2].cancelled and fake_timers.made[-1].interval == 0.0
    fake_timers.fire(fake_timers.made[-1])
    assert drawn == [100.0, 100.5, 100.6] and r.wait_idle(timeout=0)
    clock.now += 5
    r.request()  # long after the last draw: at once
    assert fake_timers.made[-1].interval == 0.0


def test_a_live_replay_drives_redraws_off_its_thread():
    """A live run redraws the timeline from other threads than the replay's (how often is
    :class:`Redraw`'s business, checked deterministically above)."""
    live = AdaptiveReplay(W_LIVE, live_tables(20), AdaptivePolicy(epoch=1.0), speedup=10)
    tl = EpochTimeline(live)
    assert tl.status.value.count("created") == 1 and tl.epoch.disabled
    draws = record_draws(tl)
    live.start()
    assert live.wait(timeout=60) and live.status == "finished"
    assert tl.wait_drawn(timeout=30)
    assert len(draws) >= 1  # at least the final, forced one
    assert not any(name == REPLAY_THREAD for _, name in draws)  # never on the source's thread
    # the last draw shows the whole run
    assert "finished" in tl.status.value and "20 epochs" in tl.status.value
    assert tl.epoch.max == 19 and tl.epoch.value == 19
    band = trace_by_name(tl.figure, "adaptive plans")
    assert list(band.text) == ["P0"] and list(band.base) == [0.0] and list(band.x) == [20.0]
    assert len(trace_by_name(tl.figure, "adaptive latency").x) == 20
    assert '"adaptive plans"' in figure_messages(tl.figure)


def test_live_redraws_run_on_the_kernel_event_loop():
    """In a Jupyter kernel (a running asyncio loop) redraws are loop callbacks: the thread of
    every widget callback."""

    async def scenario():
        live = AdaptiveReplay(W_LIVE, live_tables(8), AdaptivePolicy(epoch=1.0), speedup=10)
        tl = EpochTimeline(live)
        draws = record_draws(tl)
        live.start()
        for _ in range(6000):  # until the final (forced) redraw, a loop callback too, showed the end
            if live.done and "finished" in tl.status.value:
                break
            await asyncio.sleep(0.01)
        return tl, draws

    tl, draws = asyncio.run(scenario())
    assert len(draws) >= 2 and {name for _, name in draws} == {threading.main_thread().name}
    assert tl.epoch.max == 7 and "finished" in tl.status.value


def test_adding_a_query_while_live_activates_it_two_epochs_later():
    tables = live_tables(14)
    live = AdaptiveReplay(W_LIVE, tables, AdaptivePolicy(epoch=1.0), speedup=4)  # 0.25 s per epoch
    panel = QueryChangesPanel(live)
    tl = EpochTimeline(live)
    assert "created" in panel.clock.value and panel.add_button.disabled
    live.start()
    assert live.wait_for_epoch(1, timeout=20)
    panel.refresh()
    assert not panel.add_button.disabled and "event time" in panel.clock.value
    assert list(panel.remove_choice.options) == ["q1"]
    frontend_sets(panel.name, value="q2")
    frontend_sets(panel.text, value="S(a), T(a)")
    frontend_clicks(panel.add_button)
    (ev,) = panel.changes
    a = ev["activation_epoch"]
    assert a == live.policy.epoch_of(ev["change"]["at"]) + 2 and ev["change"]["add"] == {"q2": "S(a), T(a)"}
    assert f"active from epoch {a}" in text(panel.message) and "mqjoin-error" not in panel.message.value
    assert panel.name.value == "" and panel.text.value == ""
    rows = text(panel.table)
    assert "+q2" in rows and f"<td>{a}</td>" in rows
    assert any("+q2" in v for v in sent_values(panel.table))  # the frontend was told
    assert set(panel.remove_choice.options) == {"q1", "q2"}
    assert live.wait(timeout=30) and live.error is None
    assert panel.wait_drawn(timeout=60) and tl.wait_drawn(timeout=60)
    run = live.snapshot()
    assert {lf.query: lf.added for lf in run.lifetimes} == {"q1": None, "q2": a}
    rec = {e.epoch: e for e in run.epochs}
    assert "q2" in rec[a].queries and "q2" not in rec[a - 1].queries
    assert "q2" in run.plans[rec[a].plan].probe_orders() and "q2" not in run.plans[rec[a - 1].plan].probe_orders()
    submitted = [QueryChange(**{**e["change"], "remove": tuple(e["change"]["remove"])}) for e in panel.changes]
    assert run.result_sets() == adaptive_oracle_results(W_LIVE, tables, submitted, live.policy)
    assert run.results["q2"]
    # the timeline: the plan of epoch a answers q2, installed by the query change
    assert [s.first for s in tl.segments()] == [0, a]
    tl.select(a)
    got = text(tl.details)
    assert "query change: +q2" in got and "S » T[a]" in got and "+ q2 from S" in got
    # the change is active now; the run has ended, so the panel refuses further changes inline
    assert "active" in text(panel.table) and "pending" not in text(panel.table)
    assert panel.add_button.disabled
    frontend_sets(panel.name, value="q3")
    frontend_sets(panel.text, value="R(a), T(a)")
    assert panel.add() is None and "the run is finished" in text(panel.message)
    assert panel.text.value == "R(a), T(a)"


def test_invalid_changes_show_inline_errors_and_keep_the_text():
    live = AdaptiveReplay(W_LIVE, live_tables(60), AdaptivePolicy(epoch=1.0), speedup=1)
    panel = QueryChangesPanel(live)
    live.start()
    try:
        assert live.wait_for_epoch(0, timeout=20)
        cases = [
            ("q2", "R(a), Nope(a)", "", "query q2: relation 'Nope' is not declared (declared: R, S, T)"),
            ("q2", "R(a), S(b)", "", "query q2"),
            ("q1", "S(a), T(a)", "", "adds q1, a name already used"),
            ("q2", "S(a), T(a)", "S.a = T.a", "one 'equality: value' per line"),
            ("q2", "S(a), T(a)", "S.a = T.a: 7", "(0, 1]"),
            ("", "S(a), T(a)", "", "give the query a name"),
            ("q2", "", "", "write the query q2"),
        ]
        for name, query, sel, message in cases:
            frontend_sets(panel.name, value=name)
            frontend_sets(panel.text, value=query)
            frontend_sets(panel.selectivities, value=sel)
            frontend_clicks(panel.add_button)
            got = text(panel.message)
            assert "mqjoin-error" in panel.message.value and message in got, (query, got)
            assert "Traceback" not in got
            assert (panel.name.value, panel.text.value, panel.selectivities.value) == (name, query, sel)
        assert panel.changes == [] and [lf.query for lf in live.snapshot().lifetimes] == ["q1"]
        assert any("Nope" in v for v in sent_values(panel.message))
        # a valid change after the errors clears the message
        frontend_sets(panel.selectivities, value="")
        frontend_sets(panel.name, value="q2")
        frontend_sets(panel.text, value="S(a), T(a)")
        frontend_clicks(panel.add_button)
        assert "mqjoin-error" not in panel.message.value and len(panel.changes) == 1
        # removing works from the dropdown; removing twice is refused inline
        panel.remove_choice.value = "q1"
        frontend_clicks(panel.remove_button)
        assert "q1 removed" in text(panel.message) and "−q1" in text(panel.table)
        assert "q1" not in panel.remove_choice.options
    finally:
        live.stop()
    assert live.status == "stopped"
    # a finished run takes no changes
    static = QueryChangesPanel(live.snapshot())
    static.name.value, static.text.value = "q9", "S(a), T(a)"
    assert static.add() is None and "this run is finished" in text(static.message)


class FakeLive:
    """The live-source interface and nothing else (mqjoin.runtime.contracts.AdaptiveSource, what
    a Spark adaptive deployment offers): ``subscribe``, ``snapshot``, ``submit``, ``status``,
    ``error``, ``event_time``, ``stop``."""

    def __init__(self, run):
        self.run, self.shown, self.subs, self.submitted = run, 0, [], []
        self.status, self.error, self.event_time, self.broken = "running", None, 0.0, None

    def subscribe(self, callback):
        self.subs.append(callback)

    def stop(self):
        self.status = "stopped"

    def snapshot(self):
        if self.broken:
            raise self.broken
        # as a live run: the epochs finished, and the decisions made when the last one ended
        return replace(self.run, epochs=self.run.epochs[:self.shown],
                       decisions=tuple(d for d in self.run.decisions if d.epoch < self.shown))

    def submit(self, change=None, *, add=None, remove=(), selectivities=None):
        self.submitted.append({k: v for k, v in (("change", change), ("add", add), ("remove", remove),
                                                 ("selectivities", selectivities)) if v})
        return self.run.policy.epoch_of(self.event_time) + 2

    def advance(self, epochs: int):
        for _ in range(epochs):
            rec = self.run.epochs[self.shown]
            self.shown += 1
            self.event_time = rec.start + 0.5
            for f in self.subs:
                f({"kind": "epoch", **rec.to_dict()})


def test_a_duck_typed_live_source_is_enough(paper_runs):
    _, runs = paper_runs
    src = FakeLive(runs["adaptive"])
    tl, panel = EpochTimeline(src, "spark"), QueryChangesPanel(src)
    assert tl.epoch.disabled and "no epoch finished yet" in tl.details.value
    src.advance(10)
    assert tl.wait_drawn(timeout=60)
    assert tl.epoch.max == 9 and tl.epoch.value == 9 and not tl.epoch.disabled
    assert len(trace_by_name(tl.figure, "spark latency").x) == 10
    assert list(trace_by_name(tl.figure, "spark plans").text) == ["P0"]
    assert not [a for a in tl.figure.layout.annotations if a.text.startswith("spark: P")]
    assert "10 epochs (last: 9), 0 switches" in text(tl.status)
    sent_before = len(tl.figure.comm.messages)
    src.advance(10)  # past the switch to P1 at epoch 17
    assert tl.wait_drawn(timeout=60)
    assert tl.epoch.max == 19 and [(s.label, s.first, s.last) for s in tl.segments()] == [("P0", 0, 16), ("P1", 17, 19)]
    assert list(trace_by_name(tl.figure, "spark plans").base) == [0.0, 17.0]
    assert len(trace_by_name(tl.figure, "spark latency").x) == 20
    (note,) = [a for a in tl.figure.layout.annotations if a.text.startswith("spark: P")]
    assert note.x == 17.0 and note.text == f"spark: P1 ({switch_cause(runs['adaptive'].switches[1])})"
    assert "20 epochs (last: 19), 1 switch" in text(tl.status)
    later = json.dumps(tl.figure.comm.messages[sent_before:], default=str, ensure_ascii=False)
    assert "spark: P1" in later  # the frontend was sent the new switch
    panel.name.value, panel.text.value = "q2", "R(a), S(a)"
    assert panel.add() == 21 and src.submitted == [{"add": {"q2": "R(a), S(a)"}}]  # no selectivities given
    # a failing snapshot is reported in the status line; the last good one stays drawn
    src.broken = DataError("the deployment's driver is gone")
    tl.refresh()
    assert "the deployment's driver is gone" in text(tl.status) and tl.epoch.max == 19
    panel.refresh()
    assert "the deployment's driver is gone" in text(panel.clock) and panel.add_button.disabled
    src.broken, src.status = None, "failed"
    panel.refresh()
    assert panel.add_button.disabled and "failed" in panel.clock.value


# --------------------------------------------------------------------------------------------
# the Explorer's Adaptivity tab
# --------------------------------------------------------------------------------------------


def test_explorer_adaptivity_tab_runs_overlays_and_stops():
    ex = Explorer(W_LIVE, debounce=0, deploy=None)
    assert ex._adaptivity is None  # built on first use: the constructor stays fast
    ex.show("Adaptivity")
    panel = ex.adaptivity
    assert ex.adaptivity_slot.children == (panel,) and panel.sources == [] and panel.timeline is None
    # before the first run the panels stand empty with their axes, titles and units
    (empty,) = panel.slot.children
    assert "tuple latency (s)" in {a.text for a in empty.layout.annotations}
    assert empty.layout.xaxis5.title.text == "event time (s)"
    # plotly draws a subplot's axes only when a trace lies on it: one empty trace per panel
    assert sorted((t.xaxis, t.yaxis) for t in empty.data) == [(f"x{k}", f"y{k}") for k in ("", 2, 3, 4, 5)]
    assert all(len(t.x) == 0 for t in empty.data)
    # not the paper's query: the workload on screen runs by default (its uniform streams), the
    # paper's data sets (their own query) are offered
    assert [v for _, v in panel.data.options] == ["uniform", "selectivity-change", "skewed-rates"]
    assert panel.data.value == "uniform" and "uniform over 1/selectivity" in text(panel.data_note)
    # the default speed-up leaves time to act: 10 s of event time in 30 s, 30 s of a paper set in 30 s
    assert panel.speedup.value == pytest.approx(10 / 30, rel=0.01)
    frontend_sets(panel.data, index=1)
    assert "not this workload's" in text(panel.data_note) and panel.speedup.value == 1.0
    frontend_sets(panel.data, index=0)
    frontend_sets(panel.duration, value=60.0)
    frontend_sets(panel.speedup, value=2.0)
    frontend_sets(panel.epoch, value=0.5)
    frontend_clicks(panel.run_button)
    assert panel.error.value == "" and len(panel.sources) == 1
    (label, live), = panel.sources
    assert label == "adaptive" and live.status == "running" and live.policy.epoch == 0.5
    assert "running" in panel.status.value and not panel.stop_button.disabled
    assert panel.timeline.runs[0][1] is live and panel.changes.source is live
    # a second, static run overlays on the same data
    frontend_sets(panel.adapt, index=1)
    frontend_clicks(panel.run_button)
    assert [lab for lab, _ in panel.sources] == ["adaptive", "static"]
    static = panel.sources[1][1]
    assert static.policy.adapt is False and panel.changes.source is static
    assert static.snapshot().policy.mode == ex.model.mode
    assert live.wait_for_epoch(1, timeout=20) and static.wait_for_epoch(1, timeout=20)
    # queries go to the latest run while it is live: a relation without a stream is refused inline …
    changes = panel.changes
    frontend_sets(changes.name, value="q3")
    frontend_sets(changes.text, value="S(a), T(a)")
    frontend_clicks(changes.add_button)
    assert "query q3 joins T, which has no input in this run" in text(changes.message) and changes.changes == []
    # … a query over retained relations is added, and the static run's timeline gets its plan
    frontend_sets(changes.name, value="q2")
    frontend_sets(changes.text, value="S(a), R(a)")
    frontend_clicks(changes.add_button)
    (ev,) = changes.changes
    a = ev["activation_epoch"]
    assert "mqjoin-error" not in changes.message.value and f"active from epoch {a}" in text(changes.message)
    assert static.wait_for_epoch(a, timeout=20)
    assert [lf.added for lf in static.snapshot().lifetimes] == [None, a] and live.snapshot().lifetimes[1:] == ()
    assert "q2" in next(e for e in static.snapshot().epochs if e.epoch == a).queries
    panel.timeline.refresh()
    assert [(s.label, s.first) for s in panel.timeline.segments("static")] == [("P0", 0), ("P1", a)]
    assert "static: P1 (+q2)" in {x.text for x in panel.timeline.figure.layout.annotations}
    frontend_clicks(panel.stop_button)
    assert live.status == static.status == "stopped" and panel.stop_button.disabled
    assert "adaptive" in panel.status.value and panel.status.value.count("stopped") == 2
    tl = panel.timeline
    assert tl.wait_drawn(timeout=60)
    tl.refresh()
    assert {"adaptive plans", "static plans"} <= {t.name for t in tl.figure.data}
    assert "stopped" in tl.status.value and tl.epoch.max >= 1
    assert "stopped" in panel.changes.clock.value and panel.changes.add_button.disabled
    frontend_clicks(panel.clear_button)
    assert panel.sources == [] and len(panel.slot.children) == 1  # the empty panels again
    assert all(len(t.x) == 0 for t in panel.slot.children[0].data)


def test_explorer_adaptivity_on_the_paper_data_switches_at_epoch_17():
    ex = Explorer("paper_selectivity_change.yaml", debounce=0, deploy=None)
    panel = ex.adaptivity
    assert panel.data.value == "selectivity-change" and "Figure 8(a)" in panel.data_note.value
    frontend_sets(panel.speedup, value=1000.0)
    frontend_clicks(panel.run_button)
    (_, live), = panel.sources
    assert live.wait(timeout=60) and live.status == "finished", live.error
    assert panel.wait_drawn(timeout=60)
    tl = panel.timeline
    assert [(s.label, s.first) for s in tl.segments()] == [("P0", 0), ("P1", 17)]
    assert {a.text: a.x for a in tl.figure.layout.annotations}["data change"] == 15.0
    assert "adaptive <b" in panel.status.value and "finished" in panel.status.value
    assert panel.stop_button.disabled


def test_adaptivity_panel_errors_are_inline_and_the_skewed_budget_is_suggested():
    from mqjoin.datasets.synthetic_paper import skewed_rates
    from mqjoin.widgets.model import ExplorerModel

    def failing(workload, tables, policy, speedup):
        raise DataError("no input table for relation R")

    panel = AdaptivityPanel(ExplorerModel(W_LIVE, debounce=0), start=failing)
    frontend_clicks(panel.run_button)
    assert "no input table for relation R" in text(panel.error) and panel.sources == [] and panel.timeline is None
    ex = Explorer("paper_skewed_rates.yaml", debounce=0, deploy=None)
    p = ex.adaptivity
    assert p.data.value == "skewed-rates" and p.mir_budget.disabled
    frontend_sets(p.limit_mirs, value=True)
    b = figure_8b_budget(skewed_rates(high_rate=500, low_rate=10, fanout=5))
    assert not p.mir_budget.disabled and p.mir_budget.value == b.budget and b.before > b.budget > b.after
    assert p._policy().mir_budget == b.budget


def test_a_run_that_fails_while_live_reports_the_engine_error_inline():
    from mqjoin.model.errors import OptimizerError
    from mqjoin.planning.optimizer import optimize
    from mqjoin.widgets.model import ExplorerModel

    calls = []

    def failing_later(workload, policy):  # the initial plan, then a solver failure
        calls.append(workload)
        if len(calls) > 1:
            raise OptimizerError("HiGHS ran out of memory")
        return optimize(workload).plan

    def start(workload, tables, policy, speedup):
        return AdaptiveReplay(workload, tables, policy, speedup=speedup, optimizer=failing_later).start()

    panel = AdaptivityPanel(ExplorerModel(W_LIVE, debounce=0), start=start)
    panel.data.value = "uniform"
    frontend_sets(panel.speedup, value=20.0)
    frontend_clicks(panel.run_button)
    (_, live), = panel.sources
    assert live.wait(timeout=30) and live.status == "failed"
    assert panel.wait_drawn(timeout=60)
    for view in (panel.status, panel.timeline.status):
        got = text(view)
        assert re.search(r"failed.*re-optimisation for epoch \d+ \(queries q1\) failed: HiGHS ran out of memory", got)
        assert "Traceback" not in got, got
    assert panel.stop_button.disabled and panel.changes.add_button.disabled
    assert "failed" in panel.changes.clock.value


# --------------------------------------------------------------------------------------------
# guarded runs
# --------------------------------------------------------------------------------------------


def test_a_run_the_model_says_is_too_large_is_refused_and_nothing_is_lost():
    # the lecture-hall accident: lineitem.orderkey = orders.orderkey dragged to 0.79
    ex = Explorer("tpch_fig7a.yaml", debounce=0, deploy=None)
    assert ex.model.set_selectivity("lineitem.orderkey = orders.orderkey", 0.79)
    panel = ex.adaptivity
    assert panel.data.value == "uniform"  # the default runs the workload's own streams
    frontend_clicks(panel.run_button)
    msg = text(panel.error)
    assert re.search(r"⚠ not started — this run would produce about [\d.]+ (million|billion) results", msg), msg
    assert "lower the selectivities (the largest: lineitem.orderkey = orders.orderkey 0.79)" in msg
    assert panel.sources == [] and panel.timeline is None
    assert panel.anyway_button.layout.display is None  # offered, not taken
    # nothing the user set is lost: the selectivity and the panel's controls stay
    assert ex.model.workload.query("q4").classes and panel.duration.value == 10.0
    sel = {str(c): c.selectivity for q in ex.model.workload.queries for c in q.classes}
    assert 0.79 in sel.values()
    # shortening the run makes it acceptable (full history: its results grow as the span's fourth power)
    frontend_sets(panel.duration, value=1.0)
    assert panel.guard.check(ex.model.workload, 1.0) is None


def test_a_live_run_past_its_budget_stops_itself_and_keeps_what_it_produced():
    from mqjoin.planning.guard import RunLimits
    from mqjoin.widgets.model import ExplorerModel

    panel = AdaptivityPanel(ExplorerModel(W_LIVE, debounce=0))
    panel.guard.limits = RunLimits(max_results=2, max_bytes=1e12)
    panel.data.value = "uniform"
    frontend_sets(panel.duration, value=60.0)
    frontend_sets(panel.speedup, value=2.0)  # 30 s of wall time: the budget stops it long before
    frontend_clicks(panel.run_button)
    assert "not started" in text(panel.error) and panel.sources == []
    frontend_clicks(panel.anyway_button)
    (label, live), = panel.sources
    assert live.wait(timeout=60) and live.status == "stopped"
    assert panel.wait_drawn(timeout=60)
    panel._show_run_status()
    got = re.sub(r"<[^>]+>", "", text(panel.status))
    assert f"{label} stopped: over its budget: " in got and "what it produced so far stays" in got
    run = live.snapshot()
    assert run.epochs and sum(sum(e.results.values()) for e in run.epochs) > 2  # kept, not dropped
    assert panel.stop_button.disabled


def _paper_runs():
    d = selectivity_change(scale=5000, partners=4)
    adaptive = run_adaptive(d.workload, d.tables(), AdaptivePolicy(epoch=1.0), collect=False)
    static = run_adaptive(d.workload, d.tables(), AdaptivePolicy(epoch=1.0, adapt=False), collect=False)
    return adaptive, static


def test_plans_keep_their_names_and_colours_across_runs_and_the_diff_says_the_decisions_saving():
    adaptive, static = _paper_runs()
    tl = EpochTimeline(static, "static")  # the static run first: its only plan is named P0 …
    tl.add(adaptive, "adaptive")
    assert [s.label for s in tl.segments("static")] == ["P0"]
    segs = tl.segments("adaptive")
    assert [(s.label, s.first) for s in segs] == [("P0", 0), ("P1", 17)]  # … and is P0 in the adaptive run too
    bars = {t.name: t for t in tl.figure.data if t.type == "bar"}
    assert list(bars["static plans"].marker.color)[0] == list(bars["adaptive plans"].marker.color)[0]
    assert list(bars["adaptive plans"].marker.color)[1] != list(bars["adaptive plans"].marker.color)[0]
    # a run whose first plan is another run's second plan calls it by the same name
    from types import SimpleNamespace as N

    assert tl.names.number(N(plans=[adaptive.plans[1]]), 0) == 1
    # the switch's label and the epoch's plan diff give one saving
    label = next(a.text for a in tl.figure.layout.annotations if a.text.startswith("adaptive: P1"))
    pct = re.search(r"cost −(\d+) %", label).group(1)
    tl.select(17, "adaptive")
    details = text(tl.details)
    assert "plan diff P0 → P1" in details and "under the statistics the switch was decided on" in details
    assert re.search(rf"−{pct}(\.\d)? ?%", details), details
    assert all(a.font.size >= 14 for a in tl.figure.layout.annotations)


def test_switch_labels_stand_in_rows_that_never_overlap():
    from mqjoin.widgets.charts import LABEL_ROW_PX, label_rows

    labels = [(17.0, "adaptive: P1 (cost −83 %)"), (17.0, "static #2: P1 (cost −83 %)"), (15.0, "data change")]
    rows = label_rows(sorted(labels), 30)
    assert rows == [0, 1, 2]  # 15 s and 17 s are ~100 px apart on 30 s: the label at 15 s reaches past 17 s
    adaptive, static = _paper_runs()
    fig = epoch_figure([("adaptive", adaptive), ("again", adaptive)], marks={"data change": 15.0},
                       panels=TIMELINE_PANELS)
    tops = [a for a in fig.layout.annotations if a.yshift]
    assert sorted(a.yshift for a in tops) == [6 + LABEL_ROW_PX * (r + 1) for r in range(3)]
    assert all(a.textangle in (None, 0) for a in tops)  # level, never rotated across the plan bars
