"""What the test suite needs beyond the engine core, and what a missing piece means.

Locally, a test whose stack is missing (Chromium, Playwright, PySpark, the widget or notebook
stack) is skipped with a reason saying how to install it.  Under CI (``CI=true``) the same
test FAILS: a suite must not pass by not running (``tests/conftest.py`` turns exactly these
skips into failures).
"""

from __future__ import annotations

import os
import re

import pytest

#: modules whose absence is a missing part of the stack (``pytest.importorskip`` of one of them)
REQUIRED_MODULES = frozenset({
    "pyspark", "playwright", "ipywidgets", "plotly", "anywidget", "jupyterlab", "nbformat", "nbclient",
    "ipykernel", "ruff", "mypy",
})
#: prefix of a skip reason that reports a missing piece other than a module (e.g. Chromium)
MISSING = "missing test dependency: "

_IMPORTORSKIP = re.compile(r"could not import '([\w.]+)'")


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def is_missing_dependency(reason: str) -> bool:
    """Whether a skip reason reports a missing part of the test stack.

    >>> is_missing_dependency("could not import 'pyspark': No module named 'pyspark'")
    True
    >>> is_missing_dependency(MISSING + "/usr/bin/chromium")
    True
    >>> is_missing_dependency("could not import 'tomllib'"), is_missing_dependency("the Spark UI is disabled")
    (False, False)
    """
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith(MISSING):
        return True
    m = _IMPORTORSKIP.match(reason)
    return bool(m) and m.group(1).split(".")[0] in REQUIRED_MODULES


def skip_missing(what: str, how: str) -> None:
    """Skip (locally) or fail (CI) because ``what`` is missing; ``how`` says how to install it."""
    pytest.skip(f"{MISSING}{what}: {how}")
