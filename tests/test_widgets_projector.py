"""Projector mode: every chart of the explorer readable from the back of a room at 1920×1080
(text at least 14 px, nothing on top of another) on the flagship TPC-H workload."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from mqjoin.widgets.charts import PROJECTOR_FONT
from mqjoin.widgets.figures import LABEL_CHAR, LABEL_HEIGHT, NAME_LIFT, query_graph_traces, trace_by_name, to_figure
from mqjoin.widgets.model import as_workload


def _sizes(layout: dict) -> list[float]:
    """Every font size a layout sets (titles, legend, annotations, hover labels)."""
    out = []

    def walk(x) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "font" and isinstance(v, dict) and "size" in v:
                    out.append(v["size"])
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk(layout)
    return out


def test_the_tpch_query_graph_keeps_its_hubs_and_labels_apart():
    w = as_workload("tpch_fig7a.yaml")
    fig = to_figure(*query_graph_traces(w))
    assert fig.layout.font.size >= PROJECTOR_FONT and fig.layout.width >= 1000  # most of a projector's width
    assert trace_by_name(fig, "classes").textfont.size >= PROJECTOR_FONT
    rel = trace_by_name(fig, "relations")
    pos = dict(zip(rel.text, zip(rel.x, rel.y)))
    used = [r for r in pos if r in w.used_relations]
    assert min(math.dist(pos[a], pos[b]) for i, a in enumerate(used) for b in used[i + 1:]) >= 0.2 - 1e-6
    hubs = trace_by_name(fig, "hyperedge hubs")
    pts = list(zip(hubs.x, hubs.y))
    centres = {(round(x, 3), round(y, 3)) for x, y in pts}
    assert len(pts) == 3 and all(math.dist(h, p) > 0.05 for h in pts for p in pos.values())
    labels = trace_by_name(fig, "classes")
    spots = list(zip(labels.x, labels.y))
    for i, (x, y) in enumerate(spots):  # no two class labels on one spot
        assert all(abs(x - a) >= 0.07 or abs(y - b) >= 0.035 for a, b in spots[i + 1:]), (labels.text[i], spots)
    assert len(centres) == 3  # q3's and q5's partkey hubs (one triangle) stand side by side, not on one spot
    # no class label over a relation's name (drawn above its marker): 'suppkey' once covered 'partsupp'
    for text, (x, y) in zip(labels.text, spots):
        for name, (rx, ry) in pos.items():
            clear = abs(x - rx) >= LABEL_CHAR * (len(text) + len(name)) or abs(y - (ry + NAME_LIFT)) >= LABEL_HEIGHT
            assert clear, (text, name, (x, y), (rx, ry))


def test_every_figure_layout_of_the_tabs_uses_projector_fonts():
    from mqjoin.planners.jaqpot import running_example
    from mqjoin.planners.pmjoin import EXAMPLE_2, PMJoinOptions, plan_query
    from mqjoin.planning.frontier import frontier
    from mqjoin.widgets.compare import compare_plans, comparison_traces
    from mqjoin.widgets.frontier_view import frontier_traces
    from mqjoin.widgets.ilp_view import progress_traces
    from mqjoin.widgets.jaqpot_view import allocations, throughput_traces
    from mqjoin.widgets.pmjoin_view import placement_figure
    from mqjoin.model.workload import parse_workload
    from mqjoin.planning.anytime import progress_of
    from mqjoin.planning.optimizer import optimize

    w = as_workload("paper_fig3.yaml")
    layouts = {
        "jaqpot": throughput_traces(running_example(), 30, allocations(running_example(), 30))[1],
        "pmjoin": placement_figure(plan_query(parse_workload(EXAMPLE_2), "q", PMJoinOptions(sizes="unit")))[1],
        "frontier": frontier_traces(frontier(w))[1],
        "compare": comparison_traces(compare_plans(w))[1],
        "anytime": progress_traces([progress_of(optimize(w), 0.2)])[1],
        "query graph": query_graph_traces(as_workload("tpch_fig7a.yaml"))[1],
    }
    for name, layout in layouts.items():
        sizes = _sizes(layout)
        assert layout["font"]["size"] >= PROJECTOR_FONT and min(sizes) >= PROJECTOR_FONT, (name, sizes)
        assert "width" not in layout or layout["width"] is None or layout["width"] >= 1000, name
