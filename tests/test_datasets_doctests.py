"""Run the doctests of every ``mqjoin.datasets`` module.

pytest does not collect the top-level ``datasets/`` folder itself: it would import it as a
top-level package ``datasets`` (which must never shadow the popular package of that name),
so the modules are imported by their installed name here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import mqjoin.datasets

MODULES = sorted(m.name for m in pkgutil.walk_packages(mqjoin.datasets.__path__, "mqjoin.datasets."))


def test_every_module_is_found():
    assert {"mqjoin.datasets.arrivals", "mqjoin.datasets.stats", "mqjoin.datasets.streams",
            "mqjoin.datasets.synthetic_paper", "mqjoin.datasets.tpch"} <= set(MODULES)


@pytest.mark.parametrize("name", ["mqjoin.datasets", *MODULES])
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) of {name} failed (run python -m doctest -v)"
    if name != "mqjoin.datasets":
        assert result.attempted > 0, f"{name} has no doctest"
