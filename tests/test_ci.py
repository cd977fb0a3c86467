"""CI behaviour: the README's test command is what CI runs, and under ``CI=true``
a test that lacks part of its stack fails instead of passing by being skipped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"Set up and run the tests[^\n]*\n\n```bash\n(?P<cmd>[^\n]+)\n```", readme)
    assert block, "the README's test command block moved: keep it and .ci/run in step"
    run = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
           if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert run == [block["cmd"]]


def test_ci_scripts_are_valid_bash():
    for script in ("run", "setup"):
        path = REPO / ".ci" / script
        assert os.access(path, os.X_OK), f".ci/{script} is not executable"
        subprocess.run(["bash", "-n", str(path)], check=True)
    setup = (REPO / ".ci" / "setup").read_text()
    assert "apt-get install" in setup and "chromium" in setup


INNER = '''
import pytest
from _requires import skip_missing

def test_needs_chromium():
    skip_missing("Chromium (/usr/bin/chromium)", "apt-get install -y chromium")

def test_needs_pyspark():
    pytest.skip("could not import 'pyspark': No module named 'pyspark'")  # what importorskip says

def test_not_applicable():
    pytest.skip("the Spark UI is disabled")

def test_passes():
    assert True
'''

INNER_MODULE = '''
import pytest
pytest.skip("could not import 'ipywidgets': No module named 'ipywidgets'", allow_module_level=True)

def test_never_collected():
    pass
'''


def _inner_run(tmp_path: Path, ci: str | None, module_level: bool = False) -> subprocess.CompletedProcess:
    conftest = (TESTS / "conftest.py").read_text()
    for helper in ["conftest.py", *(f"{m}.py" for m in re.findall(r"^from (_[a-z]\w*) import", conftest, re.M))]:
        shutil.copy(TESTS / helper, tmp_path / helper)  # the conftest and the test helpers it imports
    (tmp_path / "test_inner.py").write_text(INNER)
    if module_level:
        (tmp_path / "test_inner_module.py").write_text(INNER_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _counts(out: str) -> dict[str, int]:
    last = out.strip().splitlines()[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}


def test_locally_a_missing_stack_is_a_skip_with_its_reason(tmp_path):
    r = _inner_run(tmp_path, None, module_level=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _counts(r.stdout) == {"passed": 1, "skipped": 4}
    assert "apt-get install -y chromium" in r.stdout  # -rs prints the reasons


def test_under_ci_a_missing_stack_fails_and_other_skips_stay_skips(tmp_path):
    r = _inner_run(tmp_path, "true")
    assert r.returncode == 1, r.stdout + r.stderr
    assert _counts(r.stdout) == {"passed": 1, "failed": 2, "skipped": 1}, r.stdout
    assert r.stdout.count("CI=true and part of the test stack is missing") == 2
    assert "the Spark UI is disabled" in r.stdout  # still a skip, with its reason


def test_under_ci_a_module_skipped_for_a_missing_stack_is_a_collection_error(tmp_path):
    r = _inner_run(tmp_path, "true", module_level=True)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "ERROR collecting test_inner_module.py" in r.stdout
    assert "cannot run: could not import 'ipywidgets'" in r.stdout


def test_ci_other_than_true_changes_nothing(tmp_path):
    r = _inner_run(tmp_path, "false", module_level=True)
    assert r.returncode == 0 and _counts(r.stdout) == {"passed": 1, "skipped": 4}, r.stdout
