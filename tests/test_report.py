"""The handout (mqjoin.widgets.report): one HTML file that opens offline with every chart drawn,
and reopens in the explorer with the same workload, edits and options."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from _cli import run_cli
from mqjoin.model.errors import DataError
from mqjoin.widgets.model import ExplorerModel
from mqjoin.widgets.report import write_report


def test_the_handout_inlines_plotly_once_and_reopens_the_same_model_and_edits(tmp_path):
    m = ExplorerModel("tpch_fig7a.yaml", debounce=0, mode="individual")
    from mqjoin.model.statistics import selectivity_groups

    assert m.set_selectivity(selectivity_groups(m.workload)[0].label, 0.5)  # an edit the handout keeps
    path = write_report(m, tmp_path / "report.html", frontier=False)
    page = path.read_text()
    assert "<script src=" not in page and "<link " not in page  # nothing fetched
    assert page.count("window.PlotlyConfig") == 1 and page.count('class="mqjoin-chart"') == 3
    back = ExplorerModel.from_report(path, debounce=0)
    assert back.workload == m.workload and back.options == m.options
    assert back.result.probe_cost == pytest.approx(m.result.probe_cost)
    with pytest.raises(DataError, match="not an mqjoin handout"):
        ExplorerModel.from_report("<html><body>a page</body></html>")
    with pytest.raises(DataError, match="no handout"):
        ExplorerModel.from_report(tmp_path / "missing.html")


def test_mqjoin_report_writes_the_handout(tmp_path, capsys):
    out = tmp_path / "r.html"
    code, printed, _ = run_cli(capsys, "report", "paper_v2.yaml", "--out", out, "--no-frontier")
    assert code == 0
    assert "handout written to" in printed
    assert ExplorerModel.from_report(out).workload.query_names == ("q1", "q2")


@pytest.mark.slow
def test_the_handout_opens_offline_in_chromium_with_every_chart_drawn(tmp_path):
    """Headless Chromium with every request but the file itself refused (no network): no
    error on the page or its console, and every chart div holds a drawn plotly graph."""
    from _browser import CHROMIUM, open_page

    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    m = ExplorerModel("tpch_fig7a.yaml", debounce=0)
    path = write_report(m, tmp_path / "report.html")
    refused: list[str] = []
    with open_page(sync_playwright, CHROMIUM, tmp_path) as page:
        def only_the_file(route):
            if route.request.url.startswith("file://"):
                return route.continue_()
            refused.append(route.request.url)
            return route.abort()

        page.route("**/*", only_the_file)
        page.context.set_offline(True)
        page.goto(path.as_uri())
        page.wait_for_function("document.querySelectorAll('.mqjoin-chart .main-svg').length >= "
                               "document.querySelectorAll('.mqjoin-chart').length", timeout=60_000)
        drawn = page.evaluate("""() => Array.from(document.querySelectorAll('.mqjoin-chart')).map(
            d => [d.id, d.querySelectorAll('.main-svg').length, (d.data || []).length])""")
        assert len(drawn) == 4 and all(svgs > 0 and traces > 0 for _, svgs, traces in drawn), drawn
        assert page.page_errors == [] and page.console_errors == [], (page.page_errors, page.console_errors)
    assert refused == []  # the page asked for nothing beyond itself


def test_one_click_in_the_explorer_writes_the_handout_with_its_runs(tmp_path, monkeypatch):
    from test_deploy_panel import TABLES, make_panel

    from mqjoin.widgets import Explorer

    monkeypatch.chdir(tmp_path)
    ex = Explorer("paper_v2.yaml", debounce=0, deploy=None)
    panel = ex.attach_deploy(make_panel([], data=TABLES))
    panel.deploy_button.click()
    assert panel.wait_started(10)
    d = panel.deployments[0][1]
    d.batch(0, 2, 1)
    d.finish()
    ex.handout_button.click()
    page = (tmp_path / "handout.html").read_text()
    assert "handout written" in ex.handout_line.value and "runs made" in page
    assert page.count('class="mqjoin-chart"') == 5  # graph, trees, Compare, frontier, the runs
    ex.close()
