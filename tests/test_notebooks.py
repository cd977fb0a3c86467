"""Every notebook in ``notebooks/`` runs top to bottom in a fresh kernel (its ``assert``s are
the checks).

* Every ``notebooks/*.ipynb`` is collected (a glob: notebooks added later are included).
* The kernel is this interpreter (``sys.executable``, i.e. the venv's Python), whatever
  ``python3`` kernelspecs the user has installed: the kernel spec manager only knows
  ipykernel's own native spec, which launches ``sys.executable``.  ``PYSPARK_PYTHON`` (and the
  driver's) point at it too, so Spark's Python workers run with the same packages.
* The working directory is ``notebooks/``, as in JupyterLab.  Jupyter's and IPython's own
  directories (runtime/connection files, config, data, IPython profile) are temporary
  directories of the test: nothing is written to the user's home.
* Notebooks that start Spark are ``slow``: those whose metadata say
  ``"mqjoin": {"slow": true}``, and, as a safety net, any whose code mentions Spark
  (``mqjoin.runtime.spark``, ``pyspark``, ``spark_session``).  ``pytest -m "not slow"`` runs
  the others.
* A failure reports the notebook, the failing cell (number and source) and the error, in one
  message without a pytest traceback.
* Notebooks are stored without outputs (the tests produce them): checked separately.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from _kernels import kernel_manager

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))

#: seconds a single cell may take (Spark cells on a loaded 2-core machine are slow)
CELL_TIMEOUT = 180
SLOW_CELL_TIMEOUT = 600
#: seconds for the kernel to start
STARTUP_TIMEOUT = 120

_SPARK = re.compile(r"mqjoin\.runtime\.spark|\bpyspark\b|\bspark_session\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def is_slow(nb) -> bool:
    """A notebook is slow if its metadata say so or if its code starts Spark."""
    if (nb.metadata.get("mqjoin") or {}).get("slow"):
        return True
    return any(c.cell_type == "code" and _SPARK.search(c.source) for c in nb.cells)


def _params():
    out = []
    for p in NOTEBOOKS:
        try:
            slow = is_slow(_read(p))
        except Exception:  # noqa: BLE001 — an unreadable notebook fails in the test itself, with its error
            slow = False
        out.append(pytest.param(p, id=p.name, marks=[pytest.mark.slow] if slow else []))
    return out


def _kernel_manager(runtime: Path):
    """A kernel manager whose ``python3`` kernel is this interpreter, on Unix sockets in ``runtime``."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    ksm = KernelSpecManager(kernel_dirs=[])  # no user/system specs: only ipykernel's native one
    km = kernel_manager(AsyncKernelManager, runtime, kernel_name="python3", kernel_spec_manager=ksm)
    argv = km.kernel_spec.argv
    assert argv[0] == sys.executable, f"the notebook kernel would run {argv[0]}, not {sys.executable}"
    return km


def _error_text(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            tb = "\n".join(out.get("traceback") or [])
            return _ANSI.sub("", tb) or f"{out.get('ename')}: {out.get('evalue')}"
    return ""


def _failure_message(path: Path, nb, index: int | None, exc: BaseException) -> str:
    head = f"{path.name}: "
    if index is None:
        return head + f"{type(exc).__name__} before any cell ran: {exc}"
    cell = nb.cells[index]
    number = sum(1 for c in nb.cells[: index + 1] if c.cell_type == "code")
    error = _error_text(cell)
    if not error:  # a timeout or a dead kernel leaves no error output
        error = _ANSI.sub("", f"{type(exc).__name__}: {exc}")
        error = error.split("\n------------------\n")[-1].strip() if "------------------" in error else error
    source = "\n".join(f"    {line}" for line in cell.source.splitlines())
    return (f"{head}code cell {number} (cell index {index}) failed\n"
            f"--- source ---\n{source}\n"
            f"--- error ---\n{error.strip()}")


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", _params())
def test_notebook_runs(path: Path, monkeypatch, tmp_path, kernel_runtime):
    nb = _read(path)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiet ipykernel's debugger warning
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(kernel_runtime))
    for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter-config"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                     ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "matplotlib")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    current: dict[str, int | None] = {"index": None}

    def on_cell_execute(cell, cell_index, **_):
        current["index"] = cell_index

    client = nbclient.NotebookClient(
        nb,
        km=_kernel_manager(kernel_runtime),
        timeout=SLOW_CELL_TIMEOUT if is_slow(nb) else CELL_TIMEOUT,
        startup_timeout=STARTUP_TIMEOUT,
        allow_errors=False,
        record_timing=True,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},  # the kernel's cwd
        on_cell_execute=on_cell_execute,
    )
    failure = None
    try:
        client.execute()
    except Exception as exc:  # noqa: BLE001 — CellExecutionError, CellTimeoutError, DeadKernelError …
        failure = _failure_message(path, nb, current["index"], exc)
    if failure:  # outside the except block: no chained traceback in the report
        pytest.fail(failure, pytrace=False)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path: Path):
    nb = _read(path)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs or execution counts; clear them "
                       "(Jupyter: Edit → Clear Outputs of All Cells) — the tests execute the notebooks")
