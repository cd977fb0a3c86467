"""The package's arrows point one way: no import cycle between mqjoin's modules (at module
level, in ``TYPE_CHECKING`` blocks or inside functions), no private name imported across
modules, each heavy library behind its one stage, and the core (every module of ``mqjoin``
but the command line) free of the add-ons ``mqjoin.datasets`` and ``mqjoin.widgets``.

The walk reads the source (AST), so it sees the imports a running test would never trigger.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: import name → folder (datasets/ and widgets/ are installed as mqjoin.datasets, mqjoin.widgets)
PACKAGES = {"mqjoin": ROOT / "mqjoin", "mqjoin.datasets": ROOT / "datasets", "mqjoin.widgets": ROOT / "widgets"}
#: a heavy library → the module prefixes that may import it
HEAVY = {
    "pyspark": ("mqjoin.runtime.spark",),
    "pulp": ("mqjoin.planning.ilp",),
    "highspy": ("mqjoin.planning.ilp",),
    "plotly": ("mqjoin.widgets",),
    "ipywidgets": ("mqjoin.widgets",),
}

#: the add-ons: installed with mqjoin, built on the core, never imported by it
ADDONS = ("mqjoin.datasets", "mqjoin.widgets")
#: the command line, the one package of mqjoin's own that may import the add-ons
CLI = "mqjoin.cli"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if pkg == "mqjoin" and parts[0] in ("datasets", "widgets"):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()


def _imports(module: str, path: Path):
    """(imported module, imported name or None, line) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield sub, None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for module, path in MODULES.items():
        g.add_node(module)
        for target, _, line in _imports(module, path):
            if target in MODULES and target != module:
                g.add_edge(module, target, line=line)
    return g


def test_the_walk_sees_the_package():
    g = _graph()
    assert {"mqjoin.model.workload", "mqjoin.planning.ilp", "mqjoin.runtime.spark.driver",
            "mqjoin.widgets.explorer", "mqjoin.datasets.tpch"} <= set(g)
    # a function-level import is an arrow too
    assert g.has_edge("mqjoin.cli.options", "mqjoin.planning.optimizer")


def test_no_import_cycle():
    g = _graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    details = []
    for c in cycles:
        sub = g.subgraph(c)
        details.append(" → ".join(nx.find_cycle(sub)[i][0] for i in range(len(nx.find_cycle(sub)))))
    assert not cycles, "import cycles:\n" + "\n".join(details)


def test_no_private_name_across_modules():
    bad = []
    for module, path in MODULES.items():
        for target, name, line in _imports(module, path):
            if name and name.startswith("_") and not name.startswith("__") and target.startswith("mqjoin"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}.{name}")
            if name is None and target.startswith("mqjoin") and target.rsplit(".", 1)[-1].startswith("_") \
                    and target.rsplit(".", 1)[0] != module.rsplit(".", 1)[0]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports the private module {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("library", sorted(HEAVY))
def test_heavy_library_behind_its_stage(library):
    bad = [f"{MODULES[m].relative_to(ROOT)}:{line}" for m in MODULES
           for target, _, line in _imports(m, MODULES[m])
           if (target == library or target.startswith(library + "."))
           and not any(m == p or m.startswith(p + ".") for p in HEAVY[library])]
    assert not bad, f"{library} imported outside {HEAVY[library]}: {bad}"


def _core_imports_of_addons(modules: dict[str, Path]) -> list[str]:
    """``path:line imports module`` for every import of an add-on by a core module of
    ``modules`` (doctests may import them: the walk does not read docstrings)."""
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line} imports {target}"
            for m, path in modules.items()
            if not any(_within(m, p) for p in (CLI, *ADDONS))
            for target, _, line in _imports(m, path) if any(_within(target, a) for a in ADDONS)]


def test_core_imports_no_addon():
    bad = _core_imports_of_addons(MODULES)
    assert not bad, "the core imports an add-on (move what it needs into the core):\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "from mqjoin.datasets.stats import with_pair_values\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mqjoin.widgets.model\n",
    "def f():\n    from mqjoin import widgets\n",
    "def f():\n    from ...datasets import stats\n",
])
def test_the_addon_check_can_fail(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert _core_imports_of_addons({"mqjoin.planning.ilp.m": path})  # module level, TYPE_CHECKING, in a function
    assert not _core_imports_of_addons({"mqjoin.cli.m": path})  # the command line may
    assert not _core_imports_of_addons({"mqjoin.widgets.m": path})  # and so may the add-ons


def test_every_package_is_installed():
    """A folder with an ``__init__.py`` that pyproject's package list misses works in an
    editable install and is absent from a wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, path in MODULES.items() if path.name == "__init__.py"}
    assert packages - listed == set(), f"add to [tool.setuptools] packages: {sorted(packages - listed)}"
    assert listed - packages == set(), f"listed but not a package: {sorted(listed - packages)}"
