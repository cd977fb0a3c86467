"""Shared test configuration.

* **Tests that cannot pass unrun.**  Under ``CI=true`` a test skipped because part of the
  stack is missing (Chromium, Playwright, PySpark, the widget or notebook stack: see
  :mod:`_requires`) is reported as a failure, at collection (module-level
  ``pytest.importorskip``) and at run time (a fixture's skip).  Other skips stay skips, and
  every skip's reason is printed (``-rs`` in the pytest options).
* **One Spark session** for every Spark test module, configured the same whichever module
  asks first (``spark`` fixture): the tests do not depend on which module started the JVM.
* **Two workers, one heavy lane.**  The suite runs on pytest-xdist workers (``-n 2 --dist
  loadgroup`` in the pytest options).  Every test that starts a JVM, a browser or a cluster is
  in one scope of the scheduler (:func:`heavy`), so those run one at a time on one worker,
  which starts the Spark session once; the other tests spread over both workers.
"""

from __future__ import annotations

import os

import pytest

from _kernels import ipc_runtime_dir
from _requires import in_ci, is_missing_dependency
from _spark import RETAINED_EXECUTIONS


def _fail_missing_dependency(report) -> None:
    if not (report.skipped and in_ci()):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if is_missing_dependency(reason):
        report.outcome = "failed"
        report.longrepr = (f"CI=true and part of the test stack is missing, so this test cannot run: {reason} "
                           "(locally this is a skip; .ci/setup installs everything)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_missing_dependency(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_missing_dependency(outcome.get_result())


#: test modules that start a Spark JVM, a standalone cluster, Chromium or a Jupyter server in
#: (nearly) every test, besides ``test_spark_*.py``; and test_timeline, whose live replays race
#: the test's clicks in wall-clock time (kept away from the JVMs and browsers)
HEAVY_MODULES = frozenset({"test_browser.py", "test_notebooks.py", "test_report.py", "test_timeline.py"})
#: the tests of other modules that start a JVM: they use the ``spark`` session (checked at
#: collection) or run Spark in a subprocess (list such a test here)
HEAVY_TESTS = frozenset({
    "test_ajoin.py::test_cli_run_changes_with_planner_ajoin_on_spark",
    "test_conformance.py::test_spark_engines_agree",
    "test_cli.py::test_demo_main_job_with_spark_as_a_process",
    "test_cli.py::test_run_on_spark_says_which_mode_auto_chose_and_reports_partitions",
    "test_measured.py::test_spark_run_json_has_the_reference_counts_beside_the_model",
})
#: the xdist scope of the heavy lane
HEAVY = "heavy"


def heavy(nodeid: str) -> bool:
    """Whether the test of this id runs in the heavy lane.  By id, not by item: xdist's
    scheduler, in the controlling process, sees ids only.

    >>> heavy("tests/test_spark_native.py::test_x[a-b]")
    True
    >>> heavy("tests/test_cli.py::test_demo_main_job_with_spark_as_a_process")
    True
    >>> heavy("tests/test_cli.py::test_run_check_passes_with_exit_0"), heavy("mqjoin/cli/__init__.py::mqjoin.cli")
    (False, False)
    """
    path, _, rest = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    return (module.startswith("test_spark_") or module in HEAVY_MODULES
            or f"{module}::{rest.partition('[')[0]}" in HEAVY_TESTS)


def pytest_collection_modifyitems(config, items):
    stray = [item.nodeid for item in items if "spark" in getattr(item, "fixturenames", ()) and not heavy(item.nodeid)]
    if stray:
        raise pytest.UsageError(f"{', '.join(stray)} use(s) the Spark session outside the heavy lane: add the "
                                "test to HEAVY_TESTS in tests/conftest.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with one more group: the heavy lane (:func:`heavy`).  (xdist's own
    ``xdist_group`` marks rename ``item._nodeid``, which pytest 9 no longer reads: they group
    nothing.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class HeavyLane(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return HEAVY if heavy(nodeid) else super()._split_scope(nodeid)

    return HeavyLane(config, log)


@pytest.fixture(scope="session")
def spark():
    """The local[2] Spark session of the whole run, with the UI keeping
    :data:`RETAINED_EXECUTIONS` SQL executions (a launch setting: this fixture is the only
    place a test session starts the JVM)."""
    pytest.importorskip("pyspark")
    from pyspark import SparkContext

    from mqjoin.runtime.spark.session import spark_session

    assert SparkContext._active_spark_context is None, \
        "a Spark context was started outside the shared `spark` fixture of tests/conftest.py"
    # a static setting: spark_session's conf cannot set it, only the JVM's launch arguments
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--conf spark.sql.ui.retainedExecutions={RETAINED_EXECUTIONS} pyspark-shell"
    try:
        session = spark_session("local[2]")
    finally:
        if before is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = before
    assert session.sparkContext.getConf().get("spark.sql.ui.retainedExecutions") == str(RETAINED_EXECUTIONS)
    yield session
    session.stop()


@pytest.fixture
def kernel_runtime(tmp_path):
    """A Jupyter runtime directory for kernels on Unix sockets (see :mod:`_kernels`), also
    reachable as ``tmp_path / "jupyter-runtime"``; removed after the test."""
    with ipc_runtime_dir(tmp_path / "jupyter-runtime") as runtime:
        yield runtime


@pytest.fixture
def tie_breaks_to_the_end(monkeypatch):
    """HiGHS's and CBC's MIP break ties on a time budget (at least ``TIE_MIN_SECONDS``): on a
    loaded machine (or beside the other xdist worker) a small part may run out of it and come
    out optimal but not canonical, and then two optima may differ; under this fixture every
    tie-break has time to end.  For the tests that compare plans with each other or with golden
    plans, not for those about the budget."""
    import mqjoin.planning.ilp.solving as solving

    monkeypatch.setattr(solving, "TIE_MIN_SECONDS", 60.0)


@pytest.fixture(autouse=True)
def _no_progress_lines_in_process(monkeypatch):
    """An in-process CLI call prints no solve progress: tests read its stderr for warnings and
    errors, and on a loaded machine a short solve passes the progress threshold and adds lines.
    The progress itself is tested through subprocesses (tests/test_ilp_anytime.py)."""
    monkeypatch.setattr("mqjoin.cli.options.PROGRESS_AFTER", float("inf"))
