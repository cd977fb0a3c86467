"""The explorer in a real browser: JupyterLab + headless Chromium, driven by Playwright.

One end-to-end test on the tour notebook (``notebooks/01_tour.ipynb``), marked ``slow``
(about 1–2 minutes: JupyterLab's start, the tour's cells, a cold Spark session):

1. JupyterLab serves a copy of the tour from a temporary root on 127.0.0.1 (the harness,
   ``tests/_browser.py``: a reserved port, a token, announcements and update checks off,
   temporary settings, workspaces, runtime and IPython directories — nothing is written to
   the user's home).  Its only ``python3`` kernel
   is this interpreter (a kernel spec in a temporary ``JUPYTER_PATH`` whose ``argv[0]`` is
   ``sys.executable``; ipykernel's own spec says ``python``, i.e. whatever is first on PATH).
2. Debian's Chromium (``/usr/bin/chromium``, launched by Playwright with
   ``executable_path``; Playwright never downloads a browser here) opens the notebook and runs
   all cells from the *Run* menu.
3. The explorer rendered: its tabs, the status line with the probe cost of the plan the
   tour's what-if leads to (computed independently here), the query graph and the probe trees
   as plotly figures whose traces carry this workload's relations and this plan's stores, drawn
   as SVG; the probe trees' per-query filter (*show* q4, then all queries) redraws them — and no
   "Loading widget…" or error box anywhere.
4. A real mouse drag of the selectivity slider re-optimises in the kernel and the page
   follows: the slider's readout, the status line's probe cost and the *what changed* diff
   change, and the diff goes from the probe cost shown before to the one shown after.
5. A click on **Deploy** starts a Spark deployment of the current plan; its throughput trace
   is sampled in the page every 100 ms and must gain points over time (at least two different
   non-zero lengths, i.e. the chart grows while the run is live); **Stop** stops it.

A second test, ``test_the_explorer_survives_the_browser`` (about 5 minutes), opens a notebook
that builds the explorer on TPC-H and checks, through a second client of the same kernel
(:class:`KernelProbe`), that every figure the page draws (plotly's ``gd.data``: trace names
and points) is the kernel's: after an edit, after a page reload, after an edit following the
reload, during a deployment reloaded mid-run and at its end, on each of 20 builds of the
explorer in one kernel, and after *Restart Kernel* with Spark live and the cell run again; and
that neither the browser console nor the kernel (what JupyterLab's log console shows) reports
an error — nor the server's output once the page is reloaded and then closed with a deployment
running and the kernel still updating its widgets.  It times 20 edits from Enter to the redraw
(with a CPU-bound process beside) and Deploy from the click to the first point, cold and warm
(``benchmarks/explorer_browser.py`` prints them).

A third test, ``test_two_notebooks_in_one_page`` (about 1 minute), opens that notebook and a
second one like it in one page (two tabs of JupyterLab's main area), switches between them six
times with a CPU-bound process beside, opening on each switch an explorer tab built on first
opening (new chart models while the page is busy) and editing a selectivity: the edit redraws
the explorer shown, every figure is drawn as its kernel holds it, and neither the browser
console (no "[anywidget] Failed to initialize model"), nor either kernel's log, nor the
server's output reports an error.

Screenshots go to ``$MQJOIN_ARTIFACTS`` (default ``<repo>/artifacts/browser/``, gitignored):
``1-render.png``, ``2-probe-trees.png``, ``3-slider.png``, ``4-deploy.png``, ``5-two-runs.png``,
``tab-1-query-graph.png`` … ``tab-9-pmjoin.png`` (every tab at 1920×1080), ``6-refusal.png``, ``failure.png``
and ``failure.html`` on a failure, and ``explorer.png`` — the README's picture (the explorer's Probe trees tab).
With ``MQJOIN_UPDATE_DOC_IMAGES=1`` the test also copies that picture to
``notebooks/img/explorer.png`` and every tab's to ``notebooks/img/``.  JupyterLab's log is ``jupyterlab.log`` there.

JupyterLab, its kernel (and the kernel's Spark) and the browser are shut down at the end,
also on failure.  Without ``/usr/bin/chromium`` (``apt-get install chromium``) or the
Python package ``playwright`` (the ``dev`` extra) the test is skipped with a message saying so
— and fails under ``CI=true`` (tests/conftest.py), where ``.ci/setup`` installs both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from _browser import (CELL_ERROR_JS, CHROMIUM, DEPLOY_MS, KERNEL_FIGURES, KERNEL_IDLE_JS, RECORD_THROUGHPUT_JS,
                      RUN_ALL_MS,
                      KernelProbe, assert_no_broken_widgets, assert_page_draws_the_kernels_figures, number_of,
                      open_and_run, open_page, percentile, probe_cost_of, save_and_reload, say, start_lab, tab,
                      wait_explorer, wait_figure_with, NUMBER)
from _requires import skip_missing

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TOUR = REPO / "notebooks" / "01_tour.ipynb"
DOC_IMAGE = REPO / "notebooks" / "img" / "explorer.png"
# what the tour's cells do to the model before the browser takes over (section "A what-if")
TOUR_CLASS, TOUR_SELECTIVITY = "lineitem.orderkey = orders.orderkey", 1e-3
DRAG_CLASS = "lineitem.suppkey = partsupp.suppkey = supplier.suppkey"  # selectivity 0.01
TAB_TITLES = ["Query graph", "Probe trees", "ILP", "Compare", "Plan diagram", "Deploy", "Adaptivity", "JAQPOT",
              "PMJoin"]
DOC_IMAGES = REPO / "notebooks" / "img"  # the tabs' pictures kept with the notebooks (MQJOIN_UPDATE_DOC_IMAGES=1)
SURVIVAL = "explorer_survival.ipynb"  # the notebook of test_the_explorer_survives_the_browser
BESIDE = "explorer_beside.ipynb"  # the same explorer in a second notebook (test_two_notebooks_in_one_page)
SWITCHES = 6           # switches between the two notebooks of one page
BUILDS = 20            # Explorer builds in one kernel
EDITS = 20             # timed edits (Enter in the selectivity box → status line and chart redrawn)

# --------------------------------------------------------------------------------------------
# fixtures: artifacts, Chromium, JupyterLab, the browser (the harness is tests/_browser.py)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def artifacts() -> Path:
    d = Path(os.environ.get("MQJOIN_ARTIFACTS") or REPO / "artifacts" / "browser")
    d.mkdir(parents=True, exist_ok=True)
    for stale in ("failure.png", "failure.html"):
        (d / stale).unlink(missing_ok=True)
    return d


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, or a skip saying how to install it (never downloaded here)."""
    if not CHROMIUM.exists():
        skip_missing(f"Chromium ({CHROMIUM})", "install Debian's Chromium with `apt-get install -y chromium`, "
                     "as .ci/setup does (this test never lets Playwright download a browser)")
    return CHROMIUM


@pytest.fixture(scope="session")
def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_missing("the Python package playwright", "pip install -e '.[dev]' (or '.[all]'); "
                     "the browser itself is Debian's chromium, not `playwright install`")
    return sync_playwright


@pytest.fixture
def lab(tmp_path, artifacts):
    """JupyterLab serving a copy of the tour, the survival notebook and a second one like it."""
    with start_lab(tmp_path, artifacts / "jupyterlab.log",
                   {TOUR.name: TOUR.read_text(), SURVIVAL: json.dumps(survival_notebook()),
                    BESIDE: json.dumps(survival_notebook())}) as server:
        yield server


@pytest.fixture
def page(chromium, sync_playwright, tmp_path):
    with open_page(sync_playwright, chromium, tmp_path) as pg:
        yield pg


# --------------------------------------------------------------------------------------------
# the tour in a browser: one walk, step by step
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Walk:
    """What every step of a walk acts on: the page, the explorer's output area in it, where
    pictures go, and the progress line (``step``).  The steps run in order, each on the page as
    the steps before it left it (cells run, tabs open, widgets clicked)."""
    page: Any
    artifacts: Path
    step: Callable[[str], None]
    #: where the explorer is: a CSS selector of the elements holding it ("": the whole page)
    within: str = ""

    @property
    def explorer(self):
        """The explorer's tab widget."""
        return self.page.locator(f"{self.within} .jp-OutputArea-output .widget-tab").first

    @property
    def out(self):
        """The explorer's output area."""
        return self.page.locator(f"{self.within} .jp-OutputArea-output:has(.widget-tab)").first

    @property
    def status(self):
        """The status line: the plan's probe cost, memory and stores."""
        return self.out.locator(".widget-html", has_text="tuples/s · memory").first

    @property
    def changes(self):
        """The *what changed* diff."""
        return self.out.locator(".widget-html", has_text="what changed").first

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.artifacts / name))

    def tab(self, title: str) -> None:
        """Open the explorer's tab ``title`` and wait until it is the current one."""
        self.explorer.locator(".lm-TabBar-tab", has_text=re.compile(f"^{re.escape(title)}$")).first.click()
        self.page.wait_for_function(
            """t => Array.from(document.querySelectorAll('.widget-tab .lm-TabBar-tab.lm-mod-current'))
                   .some(e => e.textContent.trim() === t)""", arg=title)

    def select_class(self, label: str) -> None:
        """Choose the class the Query graph tab's selectivity controls edit."""
        self.out.locator("select:has(option:text-is('lineitem.orderkey = orders.orderkey'))").first.select_option(
            label=label)


def progress(pytestconfig, page, started: float):
    """The ``step`` of a walk: the time since ``started`` and the message, past pytest's
    capture, with the number of errors the browser console has shown so far."""
    def step(message: str) -> None:
        errors = len(page.page_errors) + len(page.console_errors)
        say(pytestconfig, f"{time.monotonic() - started:6.1f} s  {message}"
            + (f" ({errors} errors in the browser console so far)" if errors else ""))
    return step


@contextmanager
def failure_artifacts(page, artifacts: Path, log_errors: Callable[[], list[str]] = list):
    """On a failure inside the block: the page's screenshot, its HTML and the errors of the
    browser console (and ``log_errors()``, the kernel's) into ``artifacts``; the error goes on."""
    try:
        yield
    except BaseException:
        try:
            page.screenshot(path=str(artifacts / "failure.png"))
            (artifacts / "failure.html").write_text(page.content())
            (artifacts / "failure-console.txt").write_text("\n".join(page.page_errors + page.console_errors
                                                                     + log_errors()))
        except Exception:  # noqa: BLE001 — the page may be gone; the original error matters
            pass
        raise


def test_tour_notebook_in_a_browser(lab, page, artifacts, pytestconfig):
    from mqjoin.planning.optimizer import optimize
    from mqjoin.widgets import as_workload, with_class_selectivity
    from mqjoin.widgets.tree_figures import probe_tree_traces

    # the plan the tour leaves the explorer with, computed here independently of the kernel
    workload = as_workload("tpch_fig7a.yaml")
    expected = optimize(with_class_selectivity(workload, TOUR_CLASS, TOUR_SELECTIVITY))
    expected_stores = next(t["text"] for t in probe_tree_traces(expected.plan)[0] if t["name"] == "stores")
    walk = Walk(page, artifacts, progress(pytestconfig, page, time.monotonic()))
    with failure_artifacts(page, artifacts):
        run_all_cells_of_the_tour(walk, lab)
        the_explorer_shows_the_tours_plan(walk, expected, workload)
        the_probe_trees_and_their_filter(walk, expected_stores)
        drag_the_selectivity_slider(walk)
        deploy_and_watch_the_chart_grow(walk)
        a_second_run_overlays_the_first(walk)
        photograph_every_tab(walk)
        the_guarded_run_is_refused(walk)


def run_all_cells_of_the_tour(walk: Walk, lab) -> None:
    """Open the tour, hide the file browser, *Run → Run All Cells*: every code cell executed."""
    page = walk.page
    page.goto(f"{lab.base}/lab/tree/{TOUR.name}?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell")
    n_code = sum(c["cell_type"] == "code" for c in json.loads(TOUR.read_text())["cells"])
    page.wait_for_function("n => document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell').length === n", arg=n_code)
    page.wait_for_function(KERNEL_IDLE_JS)  # "Python 3 (ipykernel) | Idle"
    walk.step("notebook open, kernel idle")
    # hide the file browser: the explorer gets the page's width
    page.locator(".jp-NotebookPanel .jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+b")
    page.wait_for_function("() => !document.querySelector('#jp-left-stack') || "
                           "document.querySelector('#jp-left-stack').offsetWidth === 0")

    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # every code cell executed: a number in every prompt (an error stops the run: later cells stay
    # unnumbered, so an error output ends the wait at once)
    try:
        page.wait_for_function(
            """n => { if (""" + CELL_ERROR_JS + """) return true;
                      const p = Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt'))
                        .map(e => e.textContent.trim());
                      return p.length === n && p.every(t => /^\\[\\d+\\]:$/.test(t)); }""",
            arg=n_code, timeout=RUN_ALL_MS)
    finally:  # a cell that raised says more than the timeout
        error = page.evaluate(CELL_ERROR_JS)
        assert not error, f"a cell of the tour raised:\n{error}"
    page.wait_for_function(KERNEL_IDLE_JS)
    walk.step(f"ran all {n_code} code cells")


def the_explorer_shows_the_tours_plan(walk: Walk, expected, workload) -> None:
    """The explorer rendered: its tabs, the status line of the tour's plan, the query graph
    drawn, the tour's diff."""
    from mqjoin.widgets.figures import fmt

    walk.explorer.wait_for()
    titles = [t.strip() for t in walk.explorer.locator(".lm-TabBar-tab .lm-TabBar-tabLabel").all_inner_texts()]
    assert titles[:len(TAB_TITLES)] == TAB_TITLES, titles
    # the status line shows the plan of the tour's what-if (probe cost as the widgets format it)
    status = walk.status.inner_text()
    assert f"probe cost {fmt(expected.probe_cost)} tuples/s" in status, status
    assert f"{len(expected.plan.stores)} stores" in status

    walk.tab("Query graph")
    graph = wait_figure_with(walk.page, "relations", "classes", *workload.query_names)
    assert sorted(graph["traces"]["relations"]["text"]) == sorted(r.name for r in workload.relations)
    assert "lineitem" in graph["svgText"] and "orders" in graph["svgText"]  # drawn, not only in the data
    assert "lineitem⋈orders" in walk.changes.inner_text()  # the tour's diff: that MIR store disappeared
    assert_no_broken_widgets(walk.page)
    walk.explorer.evaluate("e => e.scrollIntoView({block: 'start'})")
    walk.shot("1-render.png")
    walk.step("explorer rendered: tabs, status line, query graph")


def the_probe_trees_and_their_filter(walk: Walk, expected_stores) -> None:
    """The probe trees drawn with the plan's stores; *show* q4 draws fewer steps, *all queries*
    all of them again.  The picture is the README's."""
    page = walk.page
    walk.tab("Probe trees")
    trees = wait_figure_with(page, "edges", "stores", "start relations", "outputs")
    assert trees["traces"]["stores"]["text"] == list(expected_stores)
    assert any(t in trees["svgText"] for t in expected_stores)
    assert_no_broken_widgets(page)
    show = walk.out.locator("select:has(option:text-is('all queries'))")
    n_nodes = """() => { for (const gd of document.querySelectorAll('.js-plotly-plot'))
                           for (const t of (gd.data || [])) if (t.name === 'stores' && gd.offsetParent !== null)
                             return t.x.length;
                         return -1; }"""
    show.select_option(label="q4")
    page.wait_for_function(f"n => ({n_nodes})() > 0 && ({n_nodes})() < n", arg=len(expected_stores))
    show.select_option(label="all queries")
    page.wait_for_function(f"n => ({n_nodes})() === n", arg=len(expected_stores))
    walk.out.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.mouse.move(0, 0)  # no hover label in the picture
    walk.shot("2-probe-trees.png")
    shutil.copy(walk.artifacts / "2-probe-trees.png", walk.artifacts / "explorer.png")
    if os.environ.get("MQJOIN_UPDATE_DOC_IMAGES") == "1":
        shutil.copy(walk.artifacts / "explorer.png", DOC_IMAGE)
    walk.step(f"probe trees drawn ({len(expected_stores)} step nodes, as expected)")


def drag_the_selectivity_slider(walk: Walk) -> None:
    """A real mouse drag of the selectivity slider: the kernel re-optimises; the readout, the
    status line's probe cost and the diff follow, the diff from the old cost to the new."""
    page = walk.page
    walk.tab("Query graph")
    # a class whose selectivity the optimum's cost follows over the drag: the tour's class does not
    # there (at 10⁻³ and around it, its plan forms lineitem ⋈ orders only in free final hops)
    walk.select_class(DRAG_CLASS)
    slider = walk.out.locator(".widget-hslider",
                              has=page.locator(".widget-label", has_text=re.compile(r"^selectivity$")))
    assert slider.count() == 1
    readout = slider.locator("xpath=..").locator("input")  # the number box beside it: the one readout
    page.wait_for_function("el => el.value === '0.01'", arg=readout.element_handle())
    status, changes = walk.status, walk.changes
    before = {"readout": readout.input_value(), "status": status.inner_text(), "changes": changes.inner_text()}
    handle = slider.locator(".noUi-handle")
    handle.scroll_into_view_if_needed()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 45, y, steps=12)
    page.mouse.up()
    # the kernel re-optimised (after the model's debounce) and the page shows the new plan
    page.wait_for_function("""([el, old]) => { const t = el.textContent;
                                               return t !== old && !t.includes('optimizing'); }""",
                           arg=[status.element_handle(), before["status"]])
    page.wait_for_function("""([el, old]) => el.textContent !== old""",
                           arg=[changes.element_handle(), before["changes"]])
    after = {"readout": readout.input_value(), "status": status.inner_text(), "changes": changes.inner_text()}
    assert float(after["readout"]) < float(before["readout"]), (before, after)
    old_cost, new_cost = probe_cost_of(before["status"]), probe_cost_of(after["status"])
    assert new_cost != old_cost, (before, after)
    m = re.search(rf"probe cost {NUMBER} → {NUMBER}", after["changes"])
    assert m, after["changes"]
    assert number_of(m.group(1)) == pytest.approx(old_cost, rel=1e-3)
    assert number_of(m.group(2)) == pytest.approx(new_cost, rel=1e-3)
    assert_no_broken_widgets(page)
    walk.shot("3-slider.png")
    walk.step(f"slider {before['readout']} → {after['readout']}: probe cost {old_cost:g} → {new_cost:g}")


def deploy_and_watch_the_chart_grow(walk: Walk) -> None:
    """**Deploy**: the throughput trace, sampled every 100 ms, gains points while the run is
    live; then **Stop**."""
    page = walk.page
    walk.tab("Deploy")
    deploy_status = walk.out.locator(".widget-html", has_text=re.compile(r"^idle")).first
    assert "press Deploy" in deploy_status.inner_text()
    deploy_status = deploy_status.element_handle()  # the same element, whatever it says later
    page.evaluate(RECORD_THROUGHPUT_JS)
    walk.out.get_by_role("button", name="Deploy").click()
    walk.step("clicked Deploy")
    page.wait_for_function("el => window.__throughput.some(r => r[2] >= 1) || /^error/.test(el.textContent)",
                           arg=deploy_status, timeout=DEPLOY_MS)
    assert not deploy_status.text_content().startswith("error"), deploy_status.text_content()
    walk.step("first throughput point")
    # a later redraw has more points (the sample is replayed in two micro-batches)
    page.wait_for_function("""el => new Set(window.__throughput.filter(r => r[2] >= 1).map(r => r[2])).size >= 2 ||
                                    /^error/.test(el.textContent)""", arg=deploy_status, timeout=DEPLOY_MS)
    record = page.evaluate("() => { clearInterval(window.__throughputTimer); return window.__throughput; }")
    text = deploy_status.text_content()
    assert not text.startswith("error"), text
    lengths = [n for _, _, n in record if n >= 1]
    assert len(set(lengths)) >= 2 and lengths == sorted(lengths), f"the throughput trace did not grow: {record}"
    name = record[-1][1]
    assert name == "mqo #1 throughput" and "mqo #1" in text, (record, text)
    assert_no_broken_widgets(page)
    walk.shot("4-deploy.png")
    walk.step(f"throughput chart grew {' → '.join(map(str, dict.fromkeys(lengths)))} points ({text})")
    stop_the_run(walk)
    assert not page.page_errors, page.page_errors
    walk.step("stopped (or finished)")


def stop_the_run(walk: Walk) -> None:
    """Stop the live run (the sample's two batches may have finished it already) and wait for
    Deploy to be enabled again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        walk.out.get_by_role("button", name="Stop").click(timeout=5_000)
    except PlaywrightTimeout:
        pass  # it ended on its own: Stop was disabled
    walk.page.wait_for_function("el => !el.disabled",
                                arg=walk.out.get_by_role("button", name="Deploy").element_handle())


def a_second_run_overlays_the_first(walk: Walk) -> None:
    """A second run overlays the first: one colour and one legend entry per run, a row each."""
    page = walk.page
    walk.out.get_by_role("button", name="Deploy").click()
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
        (gd.data || []).some(t => t.meta === 'mqo #2 throughput' && t.x && t.x.length >= 1))""", timeout=DEPLOY_MS)
    legend = page.evaluate("""() => { for (const gd of document.querySelectorAll('.js-plotly-plot'))
        if ((gd.data || []).some(t => t.meta === 'mqo #2 throughput'))
          return Array.from(gd.querySelectorAll('.legend .traces text')).map(e => e.textContent); return null; }""")
    assert legend[1:] == ["mqo #1", "mqo #2"] and legend[0].startswith("input rate target"), legend
    runs = walk.out.locator("table.mqjoin-table", has_text="latency p95").first.inner_text()
    assert "mqo #1" in runs and "mqo #2" in runs and re.search(r"stopped|finished", runs), runs  # a row per run
    page.mouse.move(0, 0)
    walk.shot("5-two-runs.png")
    stop_the_run(walk)
    walk.step(f"two runs overlaid: legend {legend}")


def photograph_every_tab(walk: Walk) -> None:
    """Every tab at 1920×1080 (the Plan diagram after a sweep on a small grid)."""
    page, out = walk.page, walk.out
    for k, title in enumerate(TAB_TITLES):
        walk.tab(title)
        if title == "Plan diagram":  # a sweep on a small grid: the picture shows a diagram
            grid = out.locator(".widget-hbox:has(> .widget-hslider > .widget-label:text-is('grid n×n')) input").first
            grid.fill("5")
            grid.press("Enter")
            out.locator("button.widget-button", has_text="Run sweep").first.click()
            page.wait_for_function("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
                gd.offsetParent !== null && (gd.data || []).some(t => t.name === 'optimal plan')
                && gd.querySelector('.heatmaplayer image'))""", timeout=DEPLOY_MS)
        if title == "Compare":  # the tab optimises every planner when it opens: the picture shows the table
            page.wait_for_function("() => Array.from(document.querySelectorAll('table.mqjoin-table th'))"
                                   ".some(e => e.textContent === 'vs CLASH individual/single')", timeout=DEPLOY_MS)
            page.wait_for_function(KERNEL_IDLE_JS, timeout=DEPLOY_MS)
        page.wait_for_timeout(1500)  # let plotly settle (a picture, not an assertion)
        walk.explorer.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.mouse.move(0, 0)
        picture = f"tab-{k + 1}-{title.lower().replace(' ', '-')}.png"
        walk.shot(picture)
        if os.environ.get("MQJOIN_UPDATE_DOC_IMAGES") == "1":
            shutil.copy(walk.artifacts / picture, DOC_IMAGES / picture)
    assert_no_broken_widgets(page)
    walk.step("every tab photographed")


def selectivity_box(out):
    """The number box beside the selectivity slider (its own row: slider and box are its direct
    children)."""
    return out.locator(".widget-hbox:has(> .widget-hslider > .widget-label:text-is('selectivity')) "
                       "> .widget-text input").first


def the_guarded_run_is_refused(walk: Walk) -> None:
    """The lecture-hall accident (a selectivity of 0.79, then Run on the Adaptivity tab) is
    refused with a message naming the class; the kernel lives."""
    page, out = walk.page, walk.out
    walk.tab("Query graph")
    walk.select_class(TOUR_CLASS)
    sel_box = selectivity_box(out)
    # as a user would, type once the box shows the class's selectivity (the tour set it): typed
    # sooner, the value is overwritten by the kernel's answer to the class change, still on its way
    page.wait_for_function(f"el => el.value === '{TOUR_SELECTIVITY:g}'", arg=sel_box.element_handle())
    sel_box.fill("0.79")
    sel_box.press("Enter")
    page.wait_for_function("() => !document.body.innerText.includes('optimizing')")
    page.wait_for_function("el => el.value === '0.79'", arg=sel_box.element_handle())  # the box: the one readout
    walk.tab("Adaptivity")
    data = out.locator("select:has(option:text-is('uniform streams of the workload (mqjoin.datasets.uniform)'))").first
    data.select_option(label="uniform streams of the workload (mqjoin.datasets.uniform)")
    out.locator("button.widget-button", has_text=re.compile(r"^\s*Run\s*$")).first.click()
    refusal = out.locator(".mqjoin-error", has_text="not started").first
    refusal.wait_for()
    got = refusal.inner_text()
    assert "lineitem.orderkey = orders.orderkey 0.79" in got and "results" in got, got
    assert out.locator("button.widget-button", has_text="Run anyway").first.is_visible()
    page.wait_for_function(KERNEL_IDLE_JS)  # the kernel is alive and idle
    refusal.scroll_into_view_if_needed()
    page.mouse.move(0, 0)
    walk.shot("6-refusal.png")
    walk.step(f"refused: {got[:90]} …")


# --------------------------------------------------------------------------------------------
# the explorer survives the browser: reloads, a reload mid-deployment, 20 builds, no errors
# --------------------------------------------------------------------------------------------

SURVIVAL_SOURCE = """from mqjoin.widgets import Explorer
explorer = Explorer("tpch_fig7a.yaml")
explorer"""


def survival_notebook() -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": "explorer", "metadata": {}, "outputs": [],
                       "source": SURVIVAL_SOURCE}],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


def test_the_explorer_survives_the_browser(lab, page, artifacts, pytestconfig, tmp_path):
    """Reload the page mid-way and mid-deployment, build the explorer 20 times in one kernel:
    every figure drawn in the page is the kernel's, and neither the browser console nor the
    kernel (JupyterLab's log console) reports an error.  Times an edit from Enter to its redraw
    and Deploy from the click to its first point (``$MQJOIN_BROWSER_TIMINGS``: written as JSON,
    for benchmarks/explorer_browser.py)."""
    walk = Walk(page, artifacts, progress(pytestconfig, page, time.monotonic()))
    timings: dict[str, list[float]] = {"edit_ms": [], "deploy_first_point_s": []}
    probe = None
    try:
        with failure_artifacts(page, artifacts, lambda: probe.log_errors if probe else []):
            open_and_run(lab, page, SURVIVAL)
            probe = KernelProbe(lab, tmp_path / "jupyter-runtime")
            probe.run(KERNEL_FIGURES)
            n = assert_page_draws_the_kernels_figures(page, probe, "first render")
            walk.step(f"explorer rendered: {n} figures drawn as the kernel holds them")
            a_reload_mid_way(walk, probe)
            timings["edit_ms"] = timed_edits(walk, probe)
            timings["deploy_first_point_s"] = deploy_cold_and_warm(walk, probe)
            build_the_explorer_again_and_again(walk, probe)
            no_errors_anywhere(walk, probe, timings)
            a_kernel_restart_with_spark_live(walk, probe)
            closing_the_page_with_a_deployment_running(walk, lab, probe)
    finally:
        if probe is not None:
            probe.close()


def a_reload_mid_way(walk: Walk, probe: KernelProbe) -> None:
    """An edit in the kernel, then a reload: the page draws the kernel's figures, and edits
    after the reload reach the page too."""
    page = walk.page
    probe.run('explorer.model.add_query("q6", "orders(orderkey), lineitem(orderkey)")')
    assert_page_draws_the_kernels_figures(page, probe, "after an edit")
    save_and_reload(page)
    assert_page_draws_the_kernels_figures(page, probe, "after a reload")
    assert "6 queries" in " ".join(page.evaluate(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot .gtitle')).map(e => e.textContent)"))
    probe.run('explorer.model.remove_query("q6")')
    assert_page_draws_the_kernels_figures(page, probe, "an edit after the reload")
    walk.step("reload mid-way: every figure redrawn from the kernel, later edits follow")


def timed_edits(walk: Walk, probe: KernelProbe) -> list[float]:
    """Edit → redraw, :data:`EDITS` times with one CPU-bound process beside: Enter in the
    selectivity box until the status line and every chart have changed.  Returns the times (ms)."""
    page = walk.page
    times: list[float] = []
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one busy process beside
    try:
        tab(page, "Query graph")
        walk.select_class("lineitem.orderkey = orders.orderkey")
        page.wait_for_function(KERNEL_IDLE_JS)
        for k in range(EDITS):
            times.append(edit_until_redrawn(walk, f"{(2e-5, 5e-4)[k % 2] * (1 + k / 100):.6g}"))
    finally:
        busy.kill()
        busy.wait()
    assert_page_draws_the_kernels_figures(page, probe, "after the edits")
    walk.step(f"{EDITS} edits: Enter → redrawn p50 {percentile(times, 0.5):.0f} ms, "
              f"p95 {percentile(times, 0.95):.0f} ms (one busy process beside)")
    return times


def edit_until_redrawn(walk: Walk, selectivity: str) -> float:
    """Type ``selectivity`` into the selectivity box of the class chosen on the Query graph tab
    and press Enter; wait until the status line shows the new plan and the explorer's charts
    have redrawn.  Returns the milliseconds from Enter."""
    page = walk.page
    box = selectivity_box(walk.out)
    status = walk.status.element_handle()
    revisions_js = (f"() => Array.from(document.querySelectorAll({json.dumps(walk.within + ' .mqjoin-plotly')}))"
                    ".map(e => e.dataset.revision).join()")
    box.fill(selectivity)
    before = {"status": status.text_content(), "revisions": page.evaluate(revisions_js)}
    t0 = time.monotonic()
    box.press("Enter")
    page.wait_for_function("""([el, old, rev, js]) => el.textContent !== old
                               && !el.textContent.includes('optimizing')
                               && eval(js)() !== rev""",
                           arg=[status, before["status"], before["revisions"], revisions_js])
    return 1000 * (time.monotonic() - t0)


def deploy_cold_and_warm(walk: Walk, probe: KernelProbe) -> list[float]:
    """Deploy twice (cold, then warm Spark), a reload during the cold run, each run to its end:
    the charts are drawn as the kernel holds them.  Returns the seconds from the click to the
    first point."""
    page = walk.page
    first_point: list[float] = []
    for k, run in enumerate(("cold", "warm"), start=1):
        first_point.append(deploy_until_its_first_point(walk, f"mqo #{k}", elsewhere=run == "cold"))
        walk.step(f"Deploy ({run}): first point after {first_point[-1]:.1f} s")
        if run == "cold":
            save_and_reload(page)
            assert_page_draws_the_kernels_figures(page, probe, "a reload mid-deployment")
            walk.step("reload mid-deployment: the live chart is redrawn from the kernel")
        wait_for_the_runs_end(probe)
        assert_page_draws_the_kernels_figures(page, probe, f"the {run} run's end")
    rows = probe.run("print(explorer.deploy_panel.runs_table.value)")
    assert "finished" in rows and "failed" not in rows, rows
    walk.step("two runs to their end, charts drawn as the kernel holds them")
    return first_point


def deploy_until_its_first_point(walk: Walk, label: str, elsewhere: bool = False) -> float:
    """Click Deploy and wait until run ``label`` draws its first point; with ``elsewhere``,
    another tab opens meanwhile (the explorer stays live while Spark starts).  Returns the
    seconds from the click."""
    page = walk.page
    tab(page, "Deploy")
    deploy_button = walk.out.get_by_role("button", name="Deploy")
    deploy_button.wait_for()
    t0 = time.monotonic()
    deploy_button.click()
    if elsewhere:
        tab(page, "Query graph")
        page.wait_for_function("() => !!document.querySelector('.lm-TabBar-tab.lm-mod-current')")
        tab(page, "Deploy")
    page.wait_for_function("""meta => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
        (gd.data || []).some(t => t.meta === meta && t.x && t.x.length >= 1))""", arg=f"{label} throughput",
                           timeout=DEPLOY_MS)
    return time.monotonic() - t0


def wait_for_the_runs_end(probe: KernelProbe) -> None:
    """Until the last run is neither starting nor running (polled from here: a cell waiting in
    the kernel would hold up its redraws)."""
    deadline = time.monotonic() + DEPLOY_MS / 1000
    states = "print(_json.dumps([s['state'] for s in explorer.deploy_panel.run_state.values()]))"
    while json.loads(probe.run(states))[-1] in ("starting", "running"):
        assert time.monotonic() < deadline, "the deployment did not end"
        time.sleep(1)


def build_the_explorer_again_and_again(walk: Walk, probe: KernelProbe) -> None:
    """The explorer's cell run :data:`BUILDS` times in one kernel: every build drawn as the
    kernel holds it."""
    page = walk.page
    cell = page.locator(".jp-NotebookPanel .jp-CodeCell").first
    for k in range(2, BUILDS + 1):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")
        page.wait_for_function(f"() => /\\[{k}\\]/.test(document.querySelector('.jp-CodeCell "
                               ".jp-InputPrompt').textContent)", timeout=RUN_ALL_MS)
        wait_explorer(page)
        assert_page_draws_the_kernels_figures(page, probe, f"build {k}")
    walk.step(f"{BUILDS} builds: every one drawn as the kernel holds it")


def no_errors_anywhere(walk: Walk, probe: KernelProbe, timings: dict[str, list[float]]) -> None:
    """Neither the browser console nor the kernel's log reports an error; the timings go to
    ``$MQJOIN_BROWSER_TIMINGS``."""
    page = walk.page
    probe.drain()
    assert not page.page_errors, page.page_errors
    assert not page.console_errors, page.console_errors
    assert not probe.log_errors, probe.log_errors
    assert_no_broken_widgets(page)
    walk.shot("survival.png")
    walk.step(f"no errors in the browser console or the kernel's log; "
              f"edit p95 {percentile(timings['edit_ms'], 0.95):.0f} ms")
    if os.environ.get("MQJOIN_BROWSER_TIMINGS"):
        Path(os.environ["MQJOIN_BROWSER_TIMINGS"]).write_text(json.dumps(timings))


def a_kernel_restart_with_spark_live(walk: Walk, probe: KernelProbe) -> None:
    """*Restart Kernel* from the menu with the deployments' Spark session live, then the
    explorer's cell again: the kernel's log stays clean (no accumulator ``EOFError`` from the
    old kernel's JVM) and the new explorer is drawn as the new kernel holds it."""
    page = walk.page
    live = "from pyspark import SparkContext as _SC; print(_SC._active_spark_context is not None)"
    assert probe.run(live).strip() == "True"
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…$")).click()
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    page.wait_for_function("() => !document.querySelector('.jp-Dialog')")
    page.wait_for_timeout(3000)  # the restart under way: the status bar says Idle again when it is done
    page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_ALL_MS)
    page.locator(".jp-NotebookPanel .jp-CodeCell").first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => /\\[1\\]/.test(document.querySelector('.jp-CodeCell .jp-InputPrompt').textContent)",
                           timeout=RUN_ALL_MS)
    wait_explorer(page)
    probe.reconnect()
    probe.run(KERNEL_FIGURES)
    assert_page_draws_the_kernels_figures(page, probe, "after Restart Kernel")
    probe.drain()
    assert not probe.log_errors, probe.log_errors
    assert not page.page_errors + page.console_errors, page.page_errors + page.console_errors
    assert_no_broken_widgets(page)
    walk.step("Restart Kernel with Spark live: nothing in the log console, the explorer drawn again")


#: what the server's output must not show once pages with live widgets reloaded or closed
SERVER_NOISE = re.compile(r"Traceback|Task exception was never retrieved|WebSocketClosedError|"
                          r"No such comm target registered|Error|^\[E ")


def closing_the_page_with_a_deployment_running(walk: Walk, lab, probe: KernelProbe) -> None:
    """A deployment running (its charts redrawn every second), the page reloaded, then closed
    while the run goes on and the kernel keeps updating the explorer's widgets: Deploy's charts
    are drawn again after the reload, and nothing shows in the server's output (no ``Task
    exception was never retrieved … WebSocketClosedError``, no ``No such comm target
    registered``) nor in the kernel's log, up to the run's end."""
    page = walk.page
    served = len(lab.log_tail(10 ** 9))
    # replayed at a quarter of the default rate: a run that outlasts the reload and the close
    probe.run("explorer.deploy_panel.rate.value = 500.0")
    deploy_until_its_first_point(walk, "mqo #1")
    save_and_reload(page)
    assert_page_draws_the_kernels_figures(page, probe, "a reload with a deployment running")
    states = "print(_json.dumps([s['state'] for s in explorer.deploy_panel.run_state.values()]))"
    assert json.loads(probe.run(states))[-1] == "running"
    page.close()
    probe.run("for _k in range(10):\n    explorer.model.set_rate('lineitem', 1000 + _k)\n    explorer.model.flush()")
    assert json.loads(probe.run(states))[-1] == "running"  # the page closed mid-run
    wait_for_the_runs_end(probe)
    time.sleep(3)
    probe.drain()
    assert not probe.log_errors, probe.log_errors
    after = lab.log_tail(10 ** 9)[served:]
    bad = [line for line in after.splitlines() if SERVER_NOISE.search(line)]
    assert not bad, "the server's output after the page reloaded and closed mid-run:\n" + after[-4000:]
    walk.step("page reloaded, then closed, with a deployment running: nothing in the server's output")


# --------------------------------------------------------------------------------------------
# two notebooks with live explorers in one page, switched between
# --------------------------------------------------------------------------------------------

#: the notebook JupyterLab shows (the panels of the other notebooks are hidden)
SHOWN = ".jp-NotebookPanel:not(.lm-mod-hidden)"
#: whether the current tab of the page's main area is notebook ``n``'s
SHOWN_TAB_JS = ("n => document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current')"
                ".textContent.includes(n)")
#: explorer tabs built on first opening (their charts are models made while the page is busy)
FIRST_OPENED = ("Adaptivity", "JAQPOT", "PMJoin")


def test_two_notebooks_in_one_page(lab, page, artifacts, pytestconfig, tmp_path):
    """Two notebooks with live explorers in one JupyterLab page (tabs of its main area),
    switched between :data:`SWITCHES` times with a CPU-bound process beside; each switch opens
    a tab of the explorer shown that is built on first opening and then edits a selectivity.
    After every switch the explorer shown responds (the edit redraws its charts, and every
    figure is drawn as its kernel holds it), and at the end neither the browser console (no
    "[anywidget] Failed to initialize model": a model whose module did not load within
    anywidget's 2 s drops its updates), nor either kernel's log, nor the server's output
    reports an error."""
    walk = Walk(page, artifacts, progress(pytestconfig, page, time.monotonic()), within=SHOWN)
    served = len(lab.log_tail(10 ** 9))
    probes: dict[str, KernelProbe] = {}
    try:
        with failure_artifacts(page, artifacts, lambda: [e for p in probes.values() for e in p.log_errors]):
            open_and_run(lab, page, SURVIVAL)
            probes[SURVIVAL] = KernelProbe(lab, tmp_path / "jupyter-runtime", SURVIVAL)
            walk.step(f"{SURVIVAL}: explorer rendered")
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one busy process beside
            try:
                open_beside_and_run(walk, BESIDE)
                probes[BESIDE] = KernelProbe(lab, tmp_path / "jupyter-runtime", BESIDE)
                walk.step(f"{BESIDE}: opened in the same page, explorer rendered")
                for probe in probes.values():
                    probe.run(KERNEL_FIGURES)
                for k in range(SWITCHES):
                    name = (SURVIVAL, BESIDE)[k % 2]
                    switch_to(walk, name)
                    walk.tab(FIRST_OPENED[k // 2 % len(FIRST_OPENED)])
                    page.wait_for_function(KERNEL_IDLE_JS)
                    walk.tab("Query graph")
                    walk.select_class("lineitem.orderkey = orders.orderkey")
                    ms = edit_until_redrawn(walk, f"{(2e-5, 5e-4)[k // 2 % 2] * (1 + k / 100):.6g}")
                    n = assert_page_draws_the_kernels_figures(page, probes[name], f"switch {k + 1} to {name}")
                    walk.step(f"switch {k + 1} to {name}: an edit redrawn in {ms:.0f} ms, {n} figures as the kernel "
                              "holds them")
            finally:
                busy.kill()
                busy.wait()
            for probe in probes.values():
                probe.drain()
            assert not page.page_errors, page.page_errors
            assert not page.console_errors, page.console_errors
            assert not [e for p in probes.values() for e in p.log_errors], {n: p.log_errors for n, p in probes.items()}
            assert_no_broken_widgets(page)
            after = lab.log_tail(10 ** 9)[served:]
            bad = [line for line in after.splitlines() if SERVER_NOISE.search(line)]
            assert not bad, "the server's output while switching between notebooks:\n" + after[-4000:]
            walk.step("two notebooks switched between: nothing in the browser console, the kernels' logs or the "
                      "server's output")
    finally:
        for probe in probes.values():
            probe.close()


def open_beside_and_run(walk: Walk, name: str) -> None:
    """Open notebook ``name`` from the file browser (a second tab of the page's main area), hide
    the file browser again, run all its cells, wait for its explorer."""
    page = walk.page
    page.keyboard.press("Control+b")
    page.locator(".jp-DirListing-item", has_text=name).dblclick()
    page.wait_for_function("() => document.querySelectorAll('.jp-NotebookPanel').length === 2")
    page.wait_for_function(SHOWN_TAB_JS, arg=name)
    page.keyboard.press("Control+b")
    page.wait_for_function(KERNEL_IDLE_JS)
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    wait_explorer(page, within=walk.within)


def switch_to(walk: Walk, name: str) -> None:
    """Show notebook ``name`` (its tab in the page's main area); its explorer drawn."""
    page = walk.page
    page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text=name).click()
    page.wait_for_function(SHOWN_TAB_JS, arg=name)
    wait_explorer(page, within=walk.within)
