"""Run the doctests of every ``mqjoin.widgets`` module.

pytest collects doctests only under ``tests/``, ``mqjoin/`` and ``docs/``; the top-level
``widgets/`` folder is installed as ``mqjoin.widgets`` (it must not be imported as a
top-level ``widgets`` package), so its modules are imported by their installed name here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

import mqjoin.widgets

MODULES = sorted(m.name for m in pkgutil.walk_packages(mqjoin.widgets.__path__, "mqjoin.widgets."))


def test_every_module_is_found():
    assert {"mqjoin.widgets.model", "mqjoin.widgets.figures", "mqjoin.widgets.graph",
            "mqjoin.widgets.trees", "mqjoin.widgets.ilp_view", "mqjoin.widgets.compare",
            "mqjoin.widgets.diagram", "mqjoin.widgets.explorer", "mqjoin.widgets.deploy_panel"} <= set(MODULES)


@pytest.mark.parametrize("name", ["mqjoin.widgets", *MODULES])
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) of {name} failed (run python -m doctest -v)"
    assert result.attempted > 0, f"{name} has no doctest"
