"""The linters CI runs, as tests (CI runs the README's test command only): ``ruff check`` and
``mypy`` with the settings of pyproject.toml pass, and no function in the package, its tests or
its benchmarks is longer than :data:`MAX_FUNCTION_LINES` lines.  A failure shows the tool's own report."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: the package's code: the core and the folders installed as mqjoin.datasets and mqjoin.widgets
PACKAGE = ("mqjoin", "datasets", "widgets")
#: the folders whose functions are held to :data:`MAX_FUNCTION_LINES`: the package, its tests, its benchmarks
SHORT_FUNCTIONS = (*PACKAGE, "tests", "benchmarks")
MAX_FUNCTION_LINES = 120


def _run(tool: str, *args: str) -> None:
    pytest.importorskip(tool)
    proc = subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"{tool} {' '.join(args)} found problems (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}",
                    pytrace=False)


def test_ruff_finds_nothing():
    _run("ruff", "check", "--no-cache", ".")


def test_mypy_finds_nothing():
    """mypy over the ``files`` of pyproject.toml; strict where pyproject.toml says so."""
    _run("mypy")


def _long_functions(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = node.end_lineno - first + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {n} lines")
    return out


def test_no_function_is_longer_than_the_limit():
    long = [f for d in SHORT_FUNCTIONS for f in _long_functions(REPO / d)]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(long)
