"""The harness of the browser tests (``tests/test_browser.py``): a sandboxed JupyterLab, a
headless Chromium page, and what the tests read from the page and from the kernel.

* :func:`start_lab` serves a temporary root on 127.0.0.1 (a free port, a token,
  announcements and update checks off, temporary settings, workspaces, runtime and IPython
  directories: nothing is written to the user's home).  Its only ``python3`` kernel is this
  interpreter (:func:`sandboxed_jupyter_env`).  :func:`shutdown` stops the server and its
  kernels and kills whatever of its process tree survives.
* :func:`open_page` opens Debian's Chromium through Playwright (never a downloaded browser)
  with a fresh profile and records the page's errors and console errors on the page object.
* The page side: ``FIGURES_JS`` and friends read what plotly has drawn (``gd.data``);
  :class:`KernelProbe` is a second client of the notebook's kernel, so a test can compare the
  page's figures with the kernel's and hear every error the kernel broadcasts.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from _children import descendants, tied
from _kernels import ipc_runtime_dir

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1920, "height": 1080}  # a lecture hall's projector at 100 %

#: the text of the first traceback in an output (JupyterLab renders an error output as
#: ``application/vnd.jupyter.stderr``, like plain stderr), or null
CELL_ERROR_JS = ("""Array.from(document.querySelectorAll("""
                 """".jp-OutputArea-output[data-mime-type^='application/vnd.jupyter.']"))"""
                 """.map(e => e.textContent).find(t => t.includes('Traceback (most recent call last)')) || null""")
RUN_ALL_MS = 240_000   # the tour's cells (≈ 10 s in nbclient)
STEP_MS = 60_000       # one interaction and its round trip to the kernel
DEPLOY_MS = 240_000    # a cold Spark session and a micro-batch of the TPC-H plan on a loaded 2-core machine


def say(config, message: str) -> None:
    """Progress past pytest's output capture."""
    capman = config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        sys.stderr.write(f"[test_browser] {message}\n")
        sys.stderr.flush()


def reserved_port() -> int:
    """A port on 127.0.0.1 that no other process is given for the next minute, yet a server that
    binds it with ``SO_REUSEADDR`` (as JupyterLab's does) can take: a connection to it is made
    and closed from the listening side first, which leaves the port in TIME_WAIT.  A port only
    bound and released could be taken by another process before the server binds it (and with
    ``port_retries=0`` the server would then exit)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the accepting side closes first: it is the one left in TIME_WAIT
            client.recv(1)  # wait for its FIN before closing this side
    return port


class Lab:
    """A running JupyterLab server (see the ``lab`` fixture)."""

    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.root, self.port, self.token, self.proc, self.log = root, port, token, proc, log
        self.base = f"http://127.0.0.1:{port}"

    def api(self, path: str, method: str = "GET", timeout: float = 10):
        req = urllib.request.Request(f"{self.base}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def sandboxed_jupyter_env(tmp: Path, runtime: Path) -> dict[str, str]:
    """Environment for a Jupyter server and its kernels that touches nothing outside ``tmp``
    and the runtime directory ``runtime``, and whose ``python3`` kernel is this interpreter."""
    kernels = tmp / "jupyter-path" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}))
    config = tmp / "jupyter-config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ,
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "JUPYTER_PATH": str(tmp / "jupyter-path"),   # searched first: our python3 spec wins
            "JUPYTER_DATA_DIR": str(tmp / "jupyter-data"),
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_RUNTIME_DIR": str(runtime),
            "JUPYTER_PLATFORM_DIRS": "1",
            "IPYTHONDIR": str(tmp / "ipython"),
            "MPLCONFIGDIR": str(tmp / "matplotlib"),
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


@contextlib.contextmanager
def start_lab(tmp_path: Path, log: Path, notebooks: dict[str, str]):
    """JupyterLab on 127.0.0.1 serving a root holding ``notebooks`` (name → JSON text); every
    cell of a notebook stays in the DOM (no virtual scrolling).  Shut down, kernels included,
    when the block ends."""
    with ipc_runtime_dir(tmp_path / "jupyter-runtime") as runtime:
        root = tmp_path / "root"
        root.mkdir()
        for name, text in notebooks.items():
            (root / name).write_text(text)
        env = sandboxed_jupyter_env(tmp_path, runtime)
        settings = tmp_path / "lab-settings"
        # every cell stays in the DOM (no virtual scrolling of a long notebook)
        (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
        (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
            json.dumps({"windowingMode": "none"}))
        port, token = reserved_port(), secrets.token_hex(24)
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
               "--LabApp.news_url=", "--ServerApp.open_browser=False",
               "--KernelManager.transport=ipc"]  # no TCP port for a kernel to lose: see _kernels
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(log, "w") as out:
            proc = subprocess.Popen(tied(cmd), cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        server = Lab(root, port, token, proc, log)
        try:
            deadline = time.monotonic() + 120
            while True:  # wait for the server to answer
                if proc.poll() is not None:
                    pytest.fail(f"JupyterLab exited with {proc.returncode} before serving:\n{server.log_tail()}",
                                pytrace=False)
                try:
                    server.api("/api/status", timeout=5)
                    break
                except (urllib.error.URLError, OSError):
                    if time.monotonic() > deadline:
                        pytest.fail(f"JupyterLab did not answer within 120 s:\n{server.log_tail()}", pytrace=False)
                    time.sleep(0.25)
            specs = server.api("/api/kernelspecs")
            argv = specs["kernelspecs"]["python3"]["spec"]["argv"]
            assert argv[0] == sys.executable, f"JupyterLab's python3 kernel would run {argv[0]}, not {sys.executable}"
            yield server
        finally:
            shutdown(server)


def shutdown(server: Lab) -> None:
    """Stop JupyterLab and its kernels; kill (by id) whatever of its process tree survives."""
    proc = server.proc
    tree = descendants(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        try:
            server.api("/api/shutdown", method="POST", timeout=30)  # shuts the kernels down, then the server
        except (urllib.error.URLError, OSError):
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
    for pid in tree + descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@contextlib.contextmanager
def open_page(sync_playwright, chromium: Path, tmp_path: Path):
    """A fresh headless Chromium page (new user-data-dir) recording ``page_errors`` and
    ``console_errors``, closed when the block ends."""
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS,
            viewport=VIEWPORT, device_scale_factor=1)
        try:
            pg = context.pages[0] if context.pages else context.new_page()
            pg.set_default_timeout(STEP_MS)
            errors: list[str] = []
            console: list[str] = []
            pg.on("pageerror", lambda e: errors.append(str(e)))
            pg.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            pg.page_errors = errors
            pg.console_errors = console
            yield pg
        finally:
            context.close()


# --------------------------------------------------------------------------------------------
# reading the page
# --------------------------------------------------------------------------------------------

# Plotly graphs of the page (a figure widget renders as a .js-plotly-plot div holding its data):
# [{visible, traces: {name: {n: number of points, text: [...]}}, svgText: [...]}]
FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
  const traces = {};
  for (const t of (gd.data || [])) {
    traces[t.name] = {n: t.x ? t.x.length : 0, text: t.text ? Array.from(t.text).map(String) : []};
  }
  return {visible: gd.offsetParent !== null && gd.getBoundingClientRect().width > 0, traces,
          svgText: Array.from(gd.querySelectorAll('.main-svg text')).map(e => e.textContent)};
})"""

KERNEL_IDLE_JS = """() => { const bar = document.querySelector('#jp-main-statusbar');
                           return bar && /\\| Idle/.test(bar.innerText) && !/No Kernel/.test(bar.innerText); }"""

# Samples every 100 ms the number of points of the first throughput trace and records each
# new length with its time: window.__throughput = [[ms since start, trace name, points], …]
RECORD_THROUGHPUT_JS = """() => {
  window.__throughput = [];
  const t0 = performance.now();
  window.__throughputTimer = setInterval(() => {
    for (const gd of document.querySelectorAll('.js-plotly-plot'))
      for (const t of (gd.data || []))
        if (t.meta && String(t.meta).endsWith(' throughput')) {
          const n = t.x ? t.x.length : 0, rec = window.__throughput, last = rec[rec.length - 1];
          if (!last || last[2] !== n) rec.push([Math.round(performance.now() - t0), String(t.meta), n]);
          return;
        }
  }, 100);
}"""


def figures(page) -> list[dict]:
    return page.evaluate(FIGURES_JS)


def wait_figure_with(page, *names: str) -> dict:
    """The first visible plotly figure that has drawn traces with all ``names``."""
    page.wait_for_function(
        """names => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
             gd.offsetParent !== null && gd.querySelector('.main-svg .scatterlayer .trace') &&
             names.every(n => (gd.data || []).some(t => t.name === n)))""", arg=list(names))
    for f in figures(page):
        if f["visible"] and all(n in f["traces"] for n in names):
            return f
    raise AssertionError(f"no visible figure with traces {names}")


NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?(?:e[+\-][0-9]+)?)"  # mqjoin.support.units.number: 26,327 · 12.35 · 2.5e+16


def number_of(text: str) -> float:
    return float(text.replace(",", ""))


def probe_cost_of(text: str) -> float:
    m = re.search(r"probe cost\s+" + NUMBER, text)
    assert m, f"no probe cost in {text!r}"
    return number_of(m.group(1))


def assert_no_broken_widgets(page) -> None:
    text = "\n".join(page.locator(".jp-NotebookPanel").all_inner_texts())  # every notebook open
    for bad in ("Loading widget", "Error displaying widget", "Model not found"):
        assert bad not in text, f"{bad!r} on the page"
    assert page.locator(".jupyter-widgets-error-widget, .widget-error").count() == 0


#: in the kernel: the figures of the explorer on screen, as (trace name, points) lists
KERNEL_FIGURES = """
import json as _json
from mqjoin.widgets.plotly_view import PlotlyView as _PlotlyView

def _mqjoin_figures(w):
    found = [w] if isinstance(w, _PlotlyView) else []
    for c in getattr(w, "children", None) or ():
        found += _mqjoin_figures(c)
    return found

def _mqjoin_signatures():
    return _json.dumps([[[t.get("name"), len(t.get("x") or [])] for t in f.figure["data"]]
                        for f in _mqjoin_figures(explorer)])
"""

#: in the page: what every plotly graph of the page has drawn (plotly's gd.data), same shape
PAGE_FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd =>
  (gd.data || []).map(t => [t.name === undefined ? null : t.name, t.x ? t.x.length : 0]))"""


class KernelProbe:
    """A second client of the notebook's kernel (jupyter_client over its connection file): runs
    code beside the browser and hears everything the kernel broadcasts — an error or a
    traceback on stderr outside our own requests is what JupyterLab's log console shows."""

    def __init__(self, lab: Lab, runtime: Path, notebook: str | None = None):
        """A client of the kernel of the only session, or of ``notebook``'s (its path)."""
        from jupyter_client import BlockingKernelClient

        (session,) = [s for s in lab.api("/api/sessions") if notebook is None or s["path"] == notebook]
        self.connection_file = str(runtime / f"kernel-{session['kernel']['id']}.json")
        self.client = BlockingKernelClient(connection_file=self.connection_file)
        self.client.load_connection_file()
        self.client.start_channels()
        self.log_errors: list[str] = []

    def reconnect(self, timeout: float = 120) -> None:
        """After a kernel restart: what the old connection heard taken in, then a new client over
        the connection file, ready when the new kernel answers.  (A request sent on the old
        sockets while they reconnect to the new kernel can be lost, and then ``run`` would wait
        for a reply that never comes.)"""
        from jupyter_client import BlockingKernelClient

        self.drain()
        self.client.stop_channels()
        self.client = BlockingKernelClient(connection_file=self.connection_file)
        self.client.load_connection_file()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=timeout)

    def _note(self, msg: dict, mine: str | None) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        kind, content = msg["msg_type"], msg["content"]
        if parent == mine:
            return
        if kind == "error":
            self.log_errors.append(f"{content.get('ename')}: {content.get('evalue')}")
        elif kind == "stream" and content.get("name") == "stderr" and re.search(r"Traceback|Error",
                                                                                content.get("text", "")):
            self.log_errors.append(content["text"][-2000:])

    def run(self, code: str, timeout: float = 300) -> str:
        """Run ``code``; its stdout (a failure raises with the kernel's traceback)."""
        mine = self.client.execute(code, store_history=False)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
            self._note(msg, mine)
            if msg.get("parent_header", {}).get("msg_id") != mine:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content.get("name") == "stdout":
                out.append(content["text"])
            elif kind == "error":
                raise AssertionError("the kernel raised:\\n" + "\\n".join(content.get("traceback", [])))
            elif kind == "status" and content.get("execution_state") == "idle":
                return "".join(out)

    def drain(self) -> None:
        """Take in what the kernel broadcast meanwhile."""
        while True:
            try:
                self._note(self.client.get_iopub_msg(timeout=0.2), None)
            except Exception:  # noqa: BLE001 — queue.Empty: nothing more
                return

    def close(self) -> None:
        self.client.stop_channels()


def assert_page_draws_the_kernels_figures(page, probe: KernelProbe, what: str, timeout: float = 30) -> int:
    """Every figure of the explorer on screen is drawn in the page with the kernel's traces
    (names and points); waits for redraws in flight.  Returns the number of figures."""
    deadline = time.monotonic() + timeout
    while True:
        kernel = [json.dumps(f) for f in json.loads(probe.run("print(_mqjoin_signatures())"))]
        drawn = [json.dumps(f) for f in page.evaluate(PAGE_FIGURES_JS)]
        missing = [k for k in kernel if k not in drawn]
        if not missing and kernel:
            return len(kernel)
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {len(missing)} of the kernel's {len(kernel)} figures are not drawn as the "
                                 f"kernel holds them; first missing: {missing[:1]}; the page draws: {drawn}")
        time.sleep(0.5)


def open_and_run(lab, page, name: str) -> None:
    """Open a notebook, hide the file browser, run all its cells, wait for an explorer."""
    page.goto(f"{lab.base}/lab/tree/{name}?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell")
    page.wait_for_function(KERNEL_IDLE_JS)
    page.locator(".jp-NotebookPanel .jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+b")
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    wait_explorer(page)


def wait_explorer(page, timeout: float = RUN_ALL_MS, within: str = "") -> None:
    """An explorer rendered in the page (``within``: in the elements this CSS selector picks,
    e.g. one notebook's panel): its tabs and a drawn query graph."""
    page.locator(f"{within} .jp-OutputArea-output .widget-tab").first.wait_for(timeout=timeout)
    page.wait_for_function("""within => Array.from(document.querySelectorAll(within + ' .js-plotly-plot')).some(gd =>
        (gd.data || []).some(t => t.name === 'relations') && gd.querySelector('.main-svg .scatterlayer .trace'))""",
                           arg=within, timeout=timeout)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout)


def save_and_reload(page) -> None:
    """Save the notebook (its outputs hold the explorer's view) and reload the page: the views
    come back from the live kernel's widget state."""
    page.locator(".jp-NotebookPanel .jp-Notebook").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')")
    page.wait_for_timeout(500)
    page.reload()
    wait_explorer(page)


def tab(page, title: str) -> None:
    page.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(f"^{re.escape(title)}$")).first.click()


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
