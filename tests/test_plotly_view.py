"""The figure widget every view draws with (mqjoin.widgets.plotly_view): its state is the whole
figure, so a view opened at any time (a page reload, a second view) draws what the kernel holds."""

import json
import threading

import pytest

pytest.importorskip("anywidget")

from plotly.offline import get_plotlyjs

from _subshells import kernel, request_from  # noqa: F401 — kernel is a fixture
from test_widgets import recording_comm  # noqa: F401  (the fixture)

from mqjoin.widgets import plotly_view
from mqjoin.widgets.figures import new_figure_widget, sync_figure
from mqjoin.widgets.plotly_view import library, plotly_js


def scatter(name, n, **kw):
    return {"type": "scatter", "name": name, "x": list(range(n)), "y": [float(i) for i in range(n)], **kw}


def reopened_state(widget) -> dict:
    """The state a new browser view receives: ipywidgets answers its ``request_state``."""
    before = len(widget.comm.messages)
    widget._handle_msg({"content": {"data": {"method": "request_state"}}, "buffers": []})
    (msg,) = widget.comm.messages[before:]
    return json.loads(json.dumps(msg["state"]))


def test_a_view_opened_after_updates_draws_the_current_figure(recording_comm):
    fig = new_figure_widget([scatter("a", 2)], {"height": 300})
    sync_figure(fig, [scatter("a", 3), scatter("b", 1)], {"height": 300})  # a trace added
    sync_figure(fig, [scatter("b", 4)], {"height": 310})  # one removed, the other changed
    updates = [m["state"] for m in fig.comm.messages if m.get("method") == "update"]
    state = reopened_state(fig)
    assert [(t["name"], len(t["x"])) for t in state["figure"]["data"]] == [("b", 4)]
    assert state["figure"]["layout"]["height"] == 310 and state["revision"] == 3
    # every update was one message holding the whole figure, never an edit of a trace list
    assert all(set(u) <= {"figure", "revision"} for u in updates)
    assert [[t["name"] for t in u["figure"]["data"]] for u in updates if "figure" in u][-2:] == [["a", "b"], ["b"]]


def test_an_unchanged_figure_sends_nothing_and_plotly_js_is_not_in_each_figure(recording_comm):
    fig = new_figure_widget([scatter("a", 2)], {})
    sent = len(fig.comm.messages)
    sync_figure(fig, [scatter("a", 2)], {})
    assert len(fig.comm.messages) == sent
    other = new_figure_widget([], {})
    assert fig.get_state()["_library"] == other.get_state()["_library"] == f"IPY_MODEL_{library().model_id}"
    assert len(json.dumps(fig.get_state())) < 10_000


def ask_for_plotly_js(lib) -> None:
    """The page's question to the library model (widgets/plotly_view.js)."""
    lib._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "plotly.js"}}}, "buffers": []})


def test_plotly_js_is_not_in_any_state_and_the_kernel_sends_it_when_asked(recording_comm, monkeypatch):
    """A reloaded page asks for the state of every widget and waits a few seconds: plotly.js
    (5 MB) is in no widget's state, it comes in the answer to the page's own question."""
    monkeypatch.setattr(plotly_view, "_library", None)  # one with a recording comm
    fig = new_figure_widget([scatter("a", 2)], {})
    lib = library()
    assert len(plotly_js()) > 1_000_000
    assert len(json.dumps(lib.get_state())) < 1_000 and len(json.dumps(fig.get_state())) < 10_000
    sent = len(lib.comm.messages)
    lib._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []})
    assert len(lib.comm.messages) == sent  # not a question for the library
    ask_for_plotly_js(lib)
    ask_for_plotly_js(lib)  # every page that asks gets it (a reload, a second view)
    answers = lib.comm.messages[sent:]
    assert len(answers) == 2 and all(a["method"] == "custom" for a in answers)
    content = answers[0]["content"]
    assert content["event"] == "plotly.js" and content["templates"]["plotly_white"]["layout"]
    assert lib.comm.buffers[sent:] == [[plotly_js()]] * 2
    assert plotly_js().decode() == get_plotlyjs()  # the copy the plotly package ships


def test_a_reloaded_page_gets_plotly_js_on_its_own_subshell(kernel, monkeypatch):
    """The kernel routes a page's message to a widget through the subshell of the request
    under which the widget last sent something.  The library made while a page's message was
    handled (a tab built on first opening) and its answer to that page name no request, so
    the page reloaded — its old subshell gone — still has its question handled and answered."""
    monkeypatch.setattr(plotly_view, "_library", None)
    published = []
    monkeypatch.setattr(kernel.session, "send", lambda stream, msg_type, content=None, parent=None, ident=None,
                        buffers=None, **kw: published.append((msg_type, content, buffers)))
    made = []
    request_from(kernel, "page", lambda: made.append(library()))
    (lib,) = made
    request_from(kernel, "page", lambda: ask_for_plotly_js(lib))
    (msg_type, content, buffers) = published[-1]
    assert msg_type == "comm_msg" and content["data"]["content"]["event"] == "plotly.js"
    assert [bytes(b) for b in buffers] == [plotly_js()]
    assert lib.comm._reply_subshell_for({}, "reloaded") == "reloaded"  # not "page": gone with the reload
    lib.close()


def test_updates_from_many_threads_leave_the_last_figure(recording_comm):
    fig = new_figure_widget([], {})
    barrier = threading.Barrier(4)

    def worker(k):
        barrier.wait()
        for i in range(50):
            sync_figure(fig, [scatter(f"w{k}", i + 1)], {"title": {"text": f"{k}-{i}"}})

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = reopened_state(fig)
    (trace,) = state["figure"]["data"]
    assert state["figure"]["layout"]["title"]["text"] == f"{trace['name'][1:]}-49" and len(trace["x"]) == 50
    assert [t.name for t in fig.data] == [trace["name"]]


def click(fig, trace: int, point: int, revision: int) -> None:
    fig._handle_msg({"content": {"data": {"method": "custom", "content": {
        "event": "click", "revision": revision, "points": [{"trace": trace, "point": point}]}}}, "buffers": []})


def test_clicks_reach_the_trace_and_stale_ones_are_dropped(recording_comm):
    fig = new_figure_widget([scatter("a", 3), scatter("b", 3)], {})
    got = []
    fig.data[1].on_click(lambda trace, points, state: got.append((trace.name, points.point_inds, points.xs)))
    click(fig, 1, 2, fig.revision)
    assert got == [("b", [2], [2])]
    rev = fig.revision
    sync_figure(fig, [scatter("a", 3), scatter("b", 5)], {})  # same traces, new points: the callback stays
    click(fig, 1, 4, fig.revision)
    click(fig, 1, 1, rev)  # clicked just before the update: the traces are the same, it counts
    assert got[1:] == [("b", [4], [4]), ("b", [1], [1])]
    rev = fig.revision
    sync_figure(fig, [scatter("c", 3)], {})  # the traces were replaced
    click(fig, 0, 0, rev)  # on a trace drawn before: dropped
    click(fig, 7, 0, fig.revision)  # no such trace: dropped
    assert len(got) == 3
