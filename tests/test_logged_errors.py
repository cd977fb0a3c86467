"""An unexpected error in the explorer is shown as a status string (never a traceback in a
widget) and logged with its traceback, so that it can be reported."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("ipywidgets")

from mqjoin.planning.optimizer import optimize
from mqjoin.widgets import ExplorerModel


def test_a_failed_optimisation_is_shown_and_logged_with_its_traceback(caplog):
    calls: list[int] = []

    def failing_after_the_first(workload, options):
        if calls:
            raise RuntimeError("boom")
        calls.append(1)
        return optimize(workload, options)

    m = ExplorerModel("paper_v2.yaml", debounce=0, optimize_fn=failing_after_the_first)
    with caplog.at_level(logging.ERROR, logger="mqjoin.widgets.model"):
        assert m.recompute() is None
    assert m.error == "RuntimeError: boom"
    logged = [r for r in caplog.records if r.exc_info]
    assert logged and logged[0].exc_info[0] is RuntimeError and "boom" in caplog.text
    m.close()
