"""Packaging: the extras install together, and the installed stack is the one PySpark needs.

An extra that pins a package into a range another extra excludes breaks ``pip install
-e ".[all,…]"``; when the pin comes from a dependency's own requirements it breaks at run time
instead: apache-flink pins a pyarrow older than PySpark's Arrow path accepts, and with it
installed every driver-mode deployment fails with ``[UNSUPPORTED_PACKAGE_VERSION] PyArrow >=
18``.  So Flink is no extra: it runs from an environment of its own (``benchmarks/flink-env``)."""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def flink():
    """benchmarks/_flink.py, loaded from its file (benchmarks/ is no package, and on sys.path
    its datasets.py would shadow the popular package of that name)."""
    spec = importlib.util.spec_from_file_location("_flink", REPO / "benchmarks" / "_flink.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_installed_pyarrow_and_pandas_satisfy_pyspark():
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version

    require_minimum_pyarrow_version()  # the Arrow path of the driver mode and of toPandas
    require_minimum_pandas_version()


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _versions(spec: SpecifierSet) -> list[Version]:
    """Versions that decide whether a conjunction of specifiers can hold: every version they
    name, and one just above each (between it and the next)."""
    out = []
    for s in spec:
        v = Version(s.version.replace(".*", ""))
        out += [v, Version(".".join(map(str, (*v.release, 1))))]
    return out


def compatible(specs: list[SpecifierSet]) -> bool:
    """Whether some release satisfies every one of ``specs``.

    >>> compatible([SpecifierSet("<17"), SpecifierSet(">=14")]), compatible([SpecifierSet("<17"), SpecifierSet(">=18")])
    (True, False)
    >>> compatible([SpecifierSet(">1"), SpecifierSet("<2")]), compatible([SpecifierSet("==2.*"), SpecifierSet("!=2.1")])
    (True, True)
    """
    joint = SpecifierSet(",".join(str(s) for s in specs if str(s)))
    candidates = _versions(joint)
    return not candidates or any(joint.contains(v) for v in candidates)


def test_no_two_extras_pin_conflicting_versions_of_a_package():
    project = _project()
    name = canonicalize_name(project["name"])
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    pins: dict[str, dict[str, SpecifierSet]] = {}
    for group, reqs in groups.items():
        for text in reqs:
            req = Requirement(text)
            if canonicalize_name(req.name) == name:  # an extra made of others (all = …)
                unknown = req.extras - set(groups)
                assert not unknown, f"extra {group} names unknown extras {sorted(unknown)}"
                continue
            pins.setdefault(canonicalize_name(req.name), {})[group] = req.specifier
    for package, by_group in pins.items():
        for (g1, s1), (g2, s2) in itertools.combinations(by_group.items(), 2):
            assert compatible([s1, s2]), f"{package}: {g1} pins {s1}, {g2} pins {s2}: they cannot install together"
        assert compatible(list(by_group.values())), f"{package}: no version satisfies {by_group}"


def test_the_spark_extra_asks_for_the_pyarrow_pyspark_needs():
    spark = [Requirement(r) for r in _project()["optional-dependencies"]["spark"]]
    pyarrow = [r.specifier for r in spark if r.name == "pyarrow"]
    assert pyarrow and not any(s.contains("17.0.0") for s in pyarrow) and all(s.contains("18.0.0") for s in pyarrow)


def test_flink_is_no_extra_and_its_environment_is_ignored_by_git():
    assert "flink" not in _project()["optional-dependencies"]
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert ".venv-flink/" in ignored


def test_the_flink_row_without_its_environment_fails_saying_how_to_make_it(flink, tmp_path, monkeypatch):
    monkeypatch.setattr(flink, "FLINK_PYTHON", tmp_path / "no-such-venv" / "bin" / "python")
    assert not flink.available()
    with pytest.raises(RuntimeError, match=re.escape("benchmarks/flink-env")):
        flink.run_flink_isolated(None, {}, {})


def test_the_flink_row_runs_in_a_subprocess_of_the_flink_interpreter(flink, tmp_path, monkeypatch):
    """This interpreter stands for .venv-flink's (it has no PyFlink): the workload, tables and
    oracle results cross to the subprocess and its failure comes back as the row's error."""
    from mqjoin.model.tables import Table
    from mqjoin.model.workload import parse_workload

    w = parse_workload("defaults: {selectivity: 0.5}\nrelations: {R: {attributes: [a]}, S: {attributes: [a]}}\n"
                       "queries: {q: 'R(a), S(a)'}\n")
    tables = {r: Table.from_columns(r, {"ts": [0.0, 1.0], "a": [1, 2]}) for r in ("R", "S")}
    monkeypatch.setattr(flink, "FLINK_PYTHON", Path(sys.executable))
    row = flink.run_flink_isolated(w, tables, {"q": {(0, 0), (1, 1)}}, timeout=120)
    assert row["engine"] == "flink" and row["equal"] is False
    assert "pyflink" in row["error"]
