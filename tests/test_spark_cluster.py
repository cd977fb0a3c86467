"""Deployments on a real Spark standalone cluster.

A module fixture starts a master and two workers (one core, 1 GB each) from the installed
pyspark (``$SPARK_HOME/bin/spark-class …deploy.master.Master`` / ``…deploy.worker.Worker``,
SPARK_HOME = the pyspark package), everything bound to 127.0.0.1, work and log directories in a
temporary directory, and waits until the master's JSON lists both workers ALIVE.  A Spark
session is one per process, so every deployment runs as ``mqjoin run … --master
spark://127.0.0.1:<port>`` in a subprocess:

* the plan engine (``--engine spark``) and the native baseline (``--engine native``) give the
  oracle's results (``--check``, and the raw per-batch output read back here: every result
  exactly once);
* a worker killed mid-run (SIGKILL of the worker and of the executor it launched — the node
  is gone) is survived by the same run: it finishes on the other worker with the oracle's
  results, nothing lost or duplicated.  The plan engine in ``driver`` mode keeps its stores in
  the driver (the lost executor's read task runs again elsewhere); in ``distributed`` mode the
  shards' stores are segment files in the output directory, which the lost executor does not
  take with it: Spark runs the lost tasks again on the other worker, which map the same files,
  and nothing is rebuilt; the native baseline's state stores reload from Spark's checkpoint.

Everything the fixture started is killed and its directories removed, also on failure; and
every service and run dies with the test process even when pytest itself is killed
(:func:`_children.tied`).  ``RUNS`` lists the (engine, ``--spark-mode``) pairs each test runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from _children import alive, descendants, tied
from _cli import cli_command

pytest.importorskip("pyspark")

from mqjoin.runtime.oracle import oracle_results
from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import load_workload

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "datasets" / "workloads" / "tpch_fig7a.yaml"
DATA = ROOT / "datasets" / "samples" / "tpch_tiny"
# (engine, --spark-mode): the plan engine's modes and the native baseline (no mode)
RUNS = [("spark", "driver"), ("native", None)]
KILL_RUNS = RUNS + [("spark", "distributed")]
START_TIMEOUT = 120  # seconds for the master and both workers to come up
RUN_TIMEOUT = 900  # seconds per deployment (a loaded 2-core machine is slow)


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in [proc.pid] + descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


class Cluster:
    """A standalone master and its workers, started by this test module.

    Every service binds port 0 (the system picks a free port as it binds, so no other process
    can take it in between); the master's ports are read back from its log, the workers' are
    never needed (the master's JSON lists them)."""

    def __init__(self, root: Path) -> None:
        import pyspark

        self.root = root
        self.home = Path(pyspark.__file__).parent
        self.url = ""  # spark://127.0.0.1:<port>, known once the master has bound it
        self.ui = 0  # the master's web UI port, likewise
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_MASTER_HOST": "127.0.0.1", "SPARK_LOG_DIR": str(root / "logs"),
                    "SPARK_PID_DIR": str(root / "pids"), "SPARK_WORKER_DIR": str(root / "work"),
                    "SPARK_LOCAL_DIRS": str(root / "local"), "SPARK_DAEMON_MEMORY": "256m",
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no fixed port 6066
                    "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.root / "logs" / f"{name}.log", "ab") as log:  # the child holds its own descriptor
            return subprocess.Popen(tied([str(self.home / "bin" / "spark-class"), *args]), env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)

    def _logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted((self.root / "logs").glob("*.log")))

    def _await(self, what: str, ready, deadline: float):
        """Poll ``ready()`` until it returns something true; fail with the logs if a process died
        or the deadline passed."""
        while not (got := ready()):
            dead = [p for p in [self.master, *self.workers] if p is not None and p.poll() is not None]
            if dead or time.time() > deadline:
                raise RuntimeError(f"the standalone cluster did not come up ({what}):\n{self._logs()}")
            time.sleep(0.5)
        return got

    def _master_ports(self) -> tuple[str, int] | None:
        """The master's URL and web UI port as it logged them once bound, or None before."""
        text = (self.root / "logs" / "master.log").read_text(errors="replace")
        url = re.search(r"Starting Spark master at (spark://\S+)", text)
        ui = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
        return (url.group(1), int(ui.group(1))) if url and ui else None

    def add_worker(self, name: str) -> subprocess.Popen:
        """One more worker (one core, 1 GB) registering with the master."""
        work = self.root / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        worker = self._spawn(name, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                             "--webui-port", "0", "--cores", "1", "--memory", "1g", "--work-dir", str(work), self.url)
        self.workers.append(worker)
        return worker

    def await_workers(self, n: int) -> None:
        """Wait until the master lists ``n`` workers ALIVE."""
        self._await(f"{len(self.alive_workers())} of {n} workers alive", lambda: len(self.alive_workers()) >= n,
                    time.time() + START_TIMEOUT)

    def start(self, workers: int = 2) -> "Cluster":
        for d in ("logs", "pids", "work", "local"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", "0", "--webui-port", "0")
        self.url, self.ui = self._await("the master's ports", self._master_ports, time.time() + START_TIMEOUT)
        for i in range(workers):
            self.add_worker(f"worker{i}")
        self.await_workers(workers)
        return self

    def state(self) -> dict:
        """The master's state as its web UI reports it; empty while the UI cannot answer yet
        (not listening, or, just started, an empty or partial page instead of JSON)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json", timeout=5) as r:
                return json.load(r)
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def stop(self) -> None:
        for p in [*self.workers, self.master]:
            if p is not None:
                _kill_tree(p)


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="mqjoin-cluster-"))
    c = Cluster(root)
    try:
        yield c.start()
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def truth():
    w = load_workload(WORKLOAD)
    tables = read_inputs(w, DATA)
    return w, oracle_results(w, tables)


def _command(engine: str, mode: str | None, cluster: Cluster, out: Path, ckpt: Path, batch: int) -> list[str]:
    return cli_command("run", WORKLOAD, "--data", DATA, "--out", out, "--engine", engine, "--master", cluster.url,
                       "--checkpoint", ckpt, "--max-rows-per-batch", batch, "--check", "--json",
                       "--timeout", RUN_TIMEOUT, *([] if mode is None else ["--spark-mode", mode]))


def _start_run(cmd: list[str], cluster: Cluster, log: Path) -> subprocess.Popen:
    """``mqjoin run`` in its own process (and process group): JSON summary on ``log``, its
    stderr next to it (``log`` with suffix ``.err``)."""
    env = {**cluster.env, "MQJOIN_DRIVER_MEMORY": "1g"}
    with open(log, "wb") as out, open(log.with_suffix(".err"), "wb") as err:
        return subprocess.Popen(tied(cmd), env=env, stdout=out, stderr=err, cwd=cluster.root, start_new_session=True)


def _tail(log: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in (log, log.with_suffix(".err")) if p.exists())


def _finish(proc: subprocess.Popen, log: Path) -> dict:
    try:
        proc.wait(RUN_TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        pytest.fail(f"the deployment did not finish:\n{_tail(log)}")
    assert proc.returncode == 0, f"mqjoin run failed ({proc.returncode}):\n{_tail(log)}"
    return json.loads(log.read_text())


def _batch_outputs(out: Path, engine: str) -> dict[str, list[tuple[int, ...]]]:
    """Every result row the sink committed, per query, duplicates kept."""
    from mqjoin.runtime.spark.frames import committed_parts, read_parts

    rows: dict[str, list[tuple[int, ...]]] = {}
    for q, r in read_parts(committed_parts(out / ("_native" if engine == "native" else "_batches"))):
        rows.setdefault(q, []).extend(map(tuple, r.tolist()))
    return rows


def _check(out: Path, engine: str, summary: dict, truth) -> None:
    w, want = truth
    assert summary["check"] == "equal to the oracle"
    raw = _batch_outputs(out, engine)
    for q in w.query_names:
        got = raw.get(q, [])
        assert len(got) == len(set(got)), f"{q}: a result was committed twice"
        assert set(got) == want[q], f"{q}: {len(set(got))} results, the oracle has {len(want[q])}"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:  # it ended meanwhile
        return ""


def _executors(proc: subprocess.Popen) -> list[int]:
    """The executor processes a worker launched."""
    return [p for p in descendants(proc.pid) if "CoarseGrainedExecutorBackend" in _cmdline(p)]


@pytest.mark.parametrize("engine,mode", RUNS)
def test_deployment_on_a_standalone_cluster_equals_the_oracle(cluster, truth, tmp_path, engine, mode):
    log = tmp_path / "run.log"
    proc = _start_run(_command(engine, mode, cluster, tmp_path / "out", tmp_path / "ckpt", 200), cluster, log)
    summary = _finish(proc, log)
    _check(tmp_path / "out", engine, summary, truth)
    # it ran on the cluster: the master knows the application (its state page follows the
    # application's end asynchronously: asked until it lists it, at most 20 s)
    deadline = time.time() + 20
    while True:
        state = cluster.state()
        if state.get("completedapps") or state.get("activeapps") or time.time() > deadline:
            break
        time.sleep(0.5)
    assert state.get("completedapps") or state.get("activeapps"), f"the master lists no application: {state}"


@pytest.mark.parametrize("engine,mode", KILL_RUNS)
def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, truth, tmp_path, engine, mode):
    if len(cluster.alive_workers()) < 2:  # a previous kill: bring the cluster back to two workers
        cluster.workers = [p for p in cluster.workers if p.poll() is None]
        cluster.add_worker(f"worker{len(cluster.workers)}-{int(time.time())}")
        cluster.await_workers(2)
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = _start_run(_command(engine, mode, cluster, out, tmp_path / "ckpt", 100), cluster, log)
    root = out / ("_native" if engine == "native" else "_batches")
    victim = None
    try:
        # wait until both executors run and a first batch with results is committed, then
        # kill one worker node (the worker and its executor), mid-run
        deadline = time.time() + RUN_TIMEOUT
        while victim is None:
            assert proc.poll() is None, f"the run ended before a worker was killed:\n{_tail(log)}"
            assert time.time() < deadline, "no batch was committed"
            committed = any(root.glob("batch=*/_SUCCESS")) if root.exists() else False
            busy = [w for w in cluster.workers if w.poll() is None and _executors(w)]
            if committed and len(busy) == 2:
                victim = busy[-1]
            time.sleep(0.2)
        _kill_tree(victim)
        assert victim.poll() is not None
        before = len(list(root.glob("batch=*/_SUCCESS")))
    except BaseException:
        _kill_tree(proc)
        raise
    try:
        proc.wait(RUN_TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        pass
    summary = _finish(proc, log)
    if mode == "distributed":  # the segments outlived the executor: no shard was rebuilt from the replay log
        assert "rebuilding" not in _tail(log), _tail(log)
    # the kill was mid-run: batches were committed after it, on the surviving worker
    assert len(list(root.glob("batch=*/_SUCCESS"))) > before
    _check(out, engine, summary, truth)


#: a test process that starts a master (the workers are spawned the same way), prints its id and waits
_STARTER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from test_spark_cluster import Cluster
c = Cluster(Path(sys.argv[1])).start(workers=0)
print(json.dumps([c.master.pid, *(w.pid for w in c.workers)]), flush=True)
time.sleep(600)
"""


def test_the_cluster_dies_with_a_killed_test_process(tmp_path):
    """SIGKILL of the process that started the cluster (no ``finally``, no ``atexit`` runs)
    takes the master with it."""
    starter = subprocess.Popen(tied([sys.executable, "-c", _STARTER, str(tmp_path), str(Path(__file__).parent)]),
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    services: list[int] = []
    try:
        line = starter.stdout.readline()
        assert line, f"the cluster did not start:\n{(tmp_path / 'logs' / 'master.log').read_text(errors='replace')}"
        services = json.loads(line)
        assert len(services) == 1 and all(map(alive, services))
        starter.kill()
        starter.wait()
        deadline = time.time() + 30
        while any(map(alive, services)) and time.time() < deadline:
            time.sleep(0.2)
        assert not [p for p in services if alive(p)], "a service outlived the process that started it"
    finally:
        for pid in [starter.pid, *services]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        starter.wait()
