"""The Spark session: local by default, any master the user names; Spark errors made readable.

Settings and why (measured on a 2-core machine, docs/architecture.md §4):

* ``PYSPARK_PYTHON`` is this interpreter — the replay source runs in Python workers;
* ``spark.sql.autoBroadcastJoinThreshold=-1`` — a probe is broadcast only when the plan says
  so (an explicit broadcast hint), never because a micro-batch happens to be small;
* ``spark.sql.requireAllClusterKeysForCoPartition=false`` — a probe that knows a store's
  partition attribute ships only the travelling tuples, hashed by that attribute, to the
  store's partitions; the store itself is never reshuffled, even when the probe predicate has
  more equalities than the partition attribute;
* adaptive query execution off (it costs 100–150 ms per tiny batch and may rewrite joins the
  plan chose), few shuffle partitions, no console progress bars.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping

from mqjoin.model.errors import EngineError
from mqjoin.runtime.spark import LOG4J, cds

DEFAULT_MASTER = "local[*]"


#: held while pyspark is imported: two threads importing its packages at once (a start ahead of a
#: deploy, the deploy panel's mode line) can each see the other's half-initialised module
_IMPORT_LOCK = threading.Lock()
#: the parts of pyspark the engine imports (lazily, from any thread), imported first in one go
PYSPARK_MODULES = ("pyspark", "pyspark.sql", "pyspark.sql.functions", "pyspark.sql.streaming",
                   "pyspark.sql.datasource", "pyspark.sql.streaming.datasource")


def import_pyspark() -> None:
    """Import pyspark (the parts in :data:`PYSPARK_MODULES`) once per process, one thread at a
    time: call it on any thread before importing a module of this package that imports pyspark
    (deployment, launch, distributed, source).  pyspark not installed is an :class:`EngineError`
    saying how to install it; pyspark installed but failing to import is one carrying the real
    error (chained, with its traceback).

    >>> import_pyspark()  # a second call returns at once
    >>> "pyspark.sql.streaming" in sys.modules
    True
    """
    import importlib
    import importlib.util

    with _IMPORT_LOCK:
        if all(m in sys.modules for m in PYSPARK_MODULES):
            return
        if importlib.util.find_spec("pyspark") is None:
            raise EngineError("the Spark engine needs pyspark: pip install 'mqjoin[spark]'")
        try:
            for m in PYSPARK_MODULES:
                importlib.import_module(m)
        except Exception as e:  # installed, yet failing: say what failed
            raise EngineError(f"pyspark is installed but failed to import ({type(e).__name__}: {e}); "
                              "restart the kernel, and if it fails again reinstall it: "
                              "pip install --force-reinstall 'mqjoin[spark]'") from e



def java_available() -> bool:
    return bool(os.environ.get("JAVA_HOME") or shutil.which("java"))


def install_java() -> None:
    """Install the Java runtime Spark needs when none is found: Debian's
    ``openjdk-17-jre-headless`` with apt-get when running as root (~1 min), else an
    :class:`EngineError` saying how.  Only the CLI's set-up path calls this (``mqjoin demo``,
    ``mqjoin run --engine spark|native``): the library never installs system packages."""
    if java_available():
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("mqjoin: Java not found; installing openjdk-17-jre-headless with apt-get …", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        ok = subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True).returncode == 0 and \
            subprocess.run(["apt-get", "install", "-y", "-qq", "openjdk-17-jre-headless"], env=env,
                           capture_output=True).returncode == 0
        if ok and java_available():
            return
    _require_java()


def _require_java() -> None:
    if not java_available():
        raise EngineError("Spark needs Java 17 or newer and none was found: install it (Debian/Ubuntu: "
                          "apt-get install -y openjdk-17-jre-headless; `mqjoin demo` does this when run as root) "
                          "or set JAVA_HOME")


def session_running() -> bool:
    """Whether this process has a Spark context already (a deployment then starts in about a
    second; otherwise the JVM and Python workers start first).  Never starts one.

    >>> isinstance(session_running(), bool)
    True
    """
    # no import: pyspark not imported has no session, and one being imported on another thread
    # (in sys.modules, half initialised) has none yet
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    return getattr(context, "_active_spark_context", None) is not None


def spark_session(master: str | None = None, conf: Mapping[str, Any] | None = None,
                  shuffle_partitions: int = 4):
    """Get or create the session (``local[*]`` unless ``master`` names another) with the
    settings above; ``conf`` adds or overrides Spark settings.

    One process has one Spark context: with one running, ``master=None`` reuses it, and a
    ``master`` other than the running one's is an :class:`EngineError` (Spark itself would
    hand back the running session and silently ignore the master asked for)."""
    import_pyspark()
    _require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with _START_LOCK:  # one start at a time: threads would interleave their stderr redirections
        return _start_session(master, conf, shuffle_partitions)


class Starting(Future):
    """A session starting in a thread (:func:`start_ahead`): a future with the ``seconds`` the
    start took (None until it ends)."""

    seconds: float | None = None


def start_ahead(master: str | None = None, conf: Mapping[str, Any] | None = None) -> Starting:
    """Start :func:`spark_session` in a thread and return its future: a command reads its
    input and optimises its plan meanwhile, and :class:`~.deployment.Deployment` takes the
    future as its ``spark`` and waits for it only when the replay log is written.  The future's
    ``seconds`` is how long the start took (None until it ends).

    While the JVM starts, file descriptor 2 points at Spark's log (:func:`_quiet_jvm_stderr`);
    ``sys.stderr`` is moved to a copy of the original descriptor first, so the command's own
    messages written meanwhile still reach the terminal."""
    fut = Starting()
    try:
        if sys.stderr is not None and sys.stderr.fileno() == 2:
            sys.stderr.flush()
            sys.stderr = open(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding,
                              errors=sys.stderr.errors, closefd=True)
    except (AttributeError, OSError, ValueError):  # a replaced stderr (tests, notebooks): nothing to keep
        pass

    def run() -> None:
        t0 = time.perf_counter()
        try:
            spark = spark_session(master, conf)
        except BaseException as exc:  # noqa: BLE001 -- every failure goes to the waiting thread, re-raised there
            fut.seconds = time.perf_counter() - t0
            fut.set_exception(exc)
            return
        fut.seconds = time.perf_counter() - t0
        fut.set_result(spark)

    threading.Thread(target=run, name="mqjoin-spark-start", daemon=True).start()
    return fut


def driver_memory_setting(conf: Mapping[str, Any] | None = None) -> str:
    """The driver memory a session started with ``conf`` gets: ``conf``'s
    ``spark.driver.memory``, else ``MQJOIN_DRIVER_MEMORY``, else 2g."""
    given = (conf or {}).get("spark.driver.memory")
    return str(given) if given is not None else os.environ.get("MQJOIN_DRIVER_MEMORY", "2g")


#: held while a session starts (a deploy's start thread and a start ahead of it may race)
_START_LOCK = threading.RLock()


def _start_session(master: str | None, conf: Mapping[str, Any] | None, shuffle_partitions: int):
    from pyspark import SparkContext

    running = SparkContext._active_spark_context
    if running is not None and master is not None and running.master != master:
        raise EngineError(f"a Spark session on {running.master} is already running in this process, so Spark "
                          f"cannot start one on {master}: stop it first (spark.stop()), or leave the master "
                          "unset to use the running session")
    settings: dict[str, Any] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        "spark.sql.adaptive.enabled": "false",
        # a runtime bloom filter costs one more job per probe on every micro-batch
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.driver.memory": driver_memory_setting(),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Spark's log4j output would bury our one-line errors (MQJOIN_SPARK_LOG=warn shows it)
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    archive = cds.java_options() if running is None and "spark.driver.extraJavaOptions" not in (conf or {}) else ""
    try:
        spark = _get_or_create(master, settings, archive)
    except EngineError:
        if not archive:
            raise
        # the class archive may be why: start without it, and drop it only if that start works
        # (a bad master URL fails either way, and the archive is kept; docs in cds.py)
        spark = _get_or_create(master, settings, "")
        cds.forget()
    for k, v in settings.items():  # an existing session: apply the SQL settings at least
        if k.startswith("spark.sql."):
            spark.conf.set(k, v)
    spark.sparkContext.setLogLevel(os.environ.get("MQJOIN_SPARK_LOG", "OFF").upper())
    from mqjoin.runtime.spark.source import ReplaySource

    spark.dataSource.register(ReplaySource)
    stop_with_the_kernel()
    return spark


def _get_or_create(master: str | None, settings: Mapping[str, str], java_options: str):
    """``SparkSession.builder…getOrCreate()`` with ``settings``, the driver JVM also given
    ``java_options``; a failure to start as an :class:`EngineError` naming the reason."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName("mqjoin")
    for k, v in settings.items():
        if k == "spark.driver.extraJavaOptions" and java_options:
            v = f"{java_options} {v}"
        builder = builder.config(k, v)
    launch = _Launch()
    try:
        with _quiet_jvm_stderr(launch):
            return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 — Java failed to start, bad master URL, …
        reason = launch.reason() or spark_message(exc)
        raise EngineError(f"could not start Spark ({master or DEFAULT_MASTER}): {reason}") from None


#: the IPython shells whose shutdown stops Spark (:func:`stop_with_the_kernel`), by id
_HOOKED: set[int] = set()


def stop_with_the_kernel() -> bool:
    """In a Jupyter kernel, stop this process's Spark session when the kernel is asked to
    shut down (a restart too), before the kernel terminates its child processes.

    Why: a kernel asked to shut down sends SIGTERM to its children — the JVM among them —
    while it still forwards its own stderr to the page.  The JVM's shutdown closes its
    connection to PySpark's accumulator server (the Python workers' updates travel on it),
    whose handler thread then raises ``EOFError`` and prints the traceback: in JupyterLab's
    log console after every restart with Spark running.  Stopped first (its streaming queries,
    then the context), Spark closes that connection in order and the kernel finds no JVM to
    terminate.  The hook is the shell's ``exit_now`` trait, which the kernel sets when it is
    asked to shut down.  Returns whether the hook is in place (False outside a kernel); a
    second call adds none.

    >>> stop_with_the_kernel()  # a plain interpreter: no kernel, nothing to hook
    False
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None or not shell.has_trait("exit_now"):
        return False
    if id(shell) not in _HOOKED:
        _HOOKED.add(id(shell))
        shell.observe(lambda change: stop_session() if change["new"] else None, "exit_now")
    return True


def stop_session() -> None:
    """Stop this process's Spark session, if any: its streaming queries first, then the
    context (the JVM stops with it).  Never raises: it runs as a process ends, and py4j's
    reports of a lost JVM are silenced from then on (:func:`quiet_py4j`)."""
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    sc = getattr(context, "_active_spark_context", None)
    if sc is None:
        return
    quiet_py4j()
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession(sc)
        for q in spark.streams.active:
            q.stop()
        spark.stop()
    except Exception:  # noqa: BLE001 — the JVM may be gone already; the process is ending anyway
        with contextlib.suppress(Exception):
            sc.stop()


def quiet_py4j() -> None:
    """Leave py4j's reports unsaid from now on: this process is ending with its Spark session.

    Why: a kernel restarted while Spark stops slowly (a loaded machine) is given a few seconds
    by the Jupyter server, which then terminates its process group — the JVM with it — while
    the stop still waits for the JVM's answer.  py4j then logs the lost connection as an
    ``ERROR`` with a traceback, partly through the root logger, which JupyterLab shows in its
    log console after the restart.  Records from the ``py4j`` loggers and from py4j's own files
    are dropped; everything else is logged as before.  A second call adds nothing.

    The root logger's filter tells py4j's records by the file that logged them:

    >>> def record(path):
    ...     return logging.LogRecord("root", logging.ERROR, path, 1, "lost", None, None)
    >>> _not_from_py4j(record("/venv/py4j/java_gateway.py")), _not_from_py4j(record(__file__))
    (False, True)
    """
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    root = logging.getLogger()
    if _not_from_py4j not in root.filters:
        root.addFilter(_not_from_py4j)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """Whether a record was logged outside py4j's files (a root-logger filter)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


class _Launch:
    """Where the JVM's stderr went while it started, to tell why a launch failed."""

    def __init__(self) -> None:
        self.log: Path | None = None
        self.start = 0

    def reason(self) -> str | None:
        """The launcher's own error (e.g. spark-submit's ``SparkException: Master must …``),
        read back from the log: PySpark only says that the Java gateway exited."""
        if self.log is None:
            return None
        try:
            with open(self.log, "rb") as f:
                f.seek(self.start)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        found = [m for m in _JAVA_EXC.findall(text) if m[1].strip()]
        if found:
            name, msg = found[-1]
            return f"{name}: {msg.strip().splitlines()[0]}"
        errors = [line.strip() for line in text.splitlines() if line.strip().lower().startswith("error")]
        return errors[-1][:500] if errors else None


@contextlib.contextmanager
def _quiet_jvm_stderr(launch: _Launch | None = None):
    """The JVM inherits our stderr when it starts; point it at a log file instead (unless
    MQJOIN_SPARK_LOG asks for Spark's logging), so a CLI error stays one line.  ``launch``
    learns where the output went, to report a failed start with the launcher's reason."""
    from pyspark import SparkContext

    if os.environ.get("MQJOIN_SPARK_LOG") or SparkContext._gateway is not None:
        yield
        return
    log = Path(tempfile.gettempdir()) / f"mqjoin-spark-{os.getpid()}.log"
    saved = os.dup(2)
    try:
        with open(log, "ab") as f:
            if launch is not None:
                launch.log, launch.start = log, f.tell()
            os.dup2(f.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def session_cores(spark) -> int:
    """Task slots the session has now (cores of ``local[N]``, or of the executors registered
    with a cluster master), at least 1.  Unlike ``defaultParallelism`` this ignores
    ``spark.default.parallelism`` (which :func:`spark_session` sets)."""
    sc = spark.sparkContext._jsc.sc()
    try:
        return max(1, int(sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile())))
    except Exception:  # noqa: BLE001 — a Spark without that (private) method: the configured parallelism
        return max(1, int(spark.sparkContext.defaultParallelism))


#: rows of the replay log a warm-up serves: two read tasks (one per core of a 2-core machine)
WARM_UP_ROWS = 10_000


def warm_up(spark, timeout: float = 300) -> bool:
    """Run a tiny deployment's paths once, ahead of the first real one, each stopped after its
    first batch: the driver mode's (Spark's ``rate-micro-batch`` source ticking a
    ``foreachBatch`` function, which is what a local deployment runs), then the Python
    source's (a replay log of :data:`WARM_UP_ROWS` rows: the source's lookup and its reader's
    process, the read tasks' Python workers, the batch collected as Arrow), which the
    distributed mode and the native queries read through.  A fresh JVM loads and compiles a
    path's classes on its first batch — tens of seconds on a busy 2-core machine, which a
    first deployment would otherwise wait for — and Spark keeps the idle Python workers for
    reuse (about a minute).  Returns whether both batches ran within ``timeout`` seconds."""
    import numpy as np
    import pyarrow as pa

    from mqjoin.runtime.spark.source import SOURCE_NAME, write_replay_log

    deadline = time.monotonic() + timeout
    n = WARM_UP_ROWS
    log = pa.table({"_seq": np.arange(n, dtype=np.int64), "_rel": np.zeros(n, dtype=np.int32),
                    "_ts": np.arange(n, dtype=np.float64), "_row": np.arange(n, dtype=np.int64),
                    "r0_a0": np.arange(n, dtype=np.int64)})
    with tempfile.TemporaryDirectory(prefix="mqjoin-warm-up-") as tmp:
        ticks = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1)
                 .option("numPartitions", 1).load())
        if not _first_batch(ticks, "driver", Path(tmp), _reaches_the_driver, deadline):
            return False
        path = write_replay_log(log, Path(tmp) / "replay.parquet")
        rows = spark.readStream.format(SOURCE_NAME).option("path", str(path)).load()
        return _first_batch(rows, "source", Path(tmp), lambda frame: frame.toArrow().num_rows, deadline)


def _reaches_the_driver(frame: Any) -> bool:
    """What the driver mode's engine does first with a batch: reach its Spark context."""
    return frame.sparkSession.sparkContext is not None


def _first_batch(df, name: str, tmp: Path, read: Callable[[Any], Any], deadline: float) -> bool:
    """Run a streaming query of ``df`` whose ``foreachBatch`` function calls ``read`` on each
    batch until it returned something true once (by ``deadline``, ``time.monotonic()``), then
    stop it; whether it did."""
    done = threading.Event()

    def batch(frame, batch_id):
        if read(frame):
            done.set()

    q = (df.writeStream.queryName(f"mqjoin_warm_up_{name}_{os.getpid()}").foreachBatch(batch)
         .option("checkpointLocation", str(tmp / f"checkpoint-{name}")).start())
    try:
        while not done.wait(0.1) and q.isActive and time.monotonic() < deadline:
            pass
    finally:
        q.stop()
    return done.is_set()


_QUERY_CONF_LOCK = threading.Lock()


@contextlib.contextmanager
def query_conf(spark, settings: Mapping[str, Any]):
    """SQL settings for the streaming queries started inside the block only: a streaming
    query copies the session's settings when it starts (and keeps them in its checkpoint), so
    they are set for the start and the previous values restored after it.  Blocks starting
    in other threads with their own settings wait."""
    with _QUERY_CONF_LOCK:
        old = {k: spark.conf.get(k, None) for k in settings}
        try:
            for k, v in settings.items():
                spark.conf.set(k, str(v))
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)


def ui_url(spark) -> str | None:
    """The Spark UI address of the session, reachable from the user's browser: a local
    session's UI is served on 127.0.0.1 (Spark names the machine's network address, which a
    browser outside a container cannot reach); None when the UI is disabled."""
    url = spark.sparkContext.uiWebUrl
    if url and spark.sparkContext.master.startswith("local"):
        port = url.rsplit(":", 1)[-1]
        return f"http://127.0.0.1:{port}"
    return url


_JAVA_EXC = re.compile(r"(?:[a-z_$][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error)):\s*(.*)")


def spark_message(exc: BaseException) -> str:
    """One line out of a Spark/Java error: the innermost ``Exception: message``, no stack."""
    from mqjoin.model.errors import MqjoinError

    if isinstance(exc, MqjoinError):
        return str(exc)
    text = str(getattr(exc, "desc", None) or exc)
    if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j") and "Exception" not in text:
        return f"{type(exc).__name__}: {text}"  # a Python error, e.g. in a foreachBatch function
    # a Python error raised inside a worker or a foreachBatch function travels as text
    py = re.findall(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", text, re.M)
    found = [m for m in _JAVA_EXC.findall(text) if m[1].strip()]
    if py and any("mqjoin" in name or name.endswith(("DataError", "PlanError", "EngineError")) for name, _ in py):
        name, msg = py[-1]
        return msg.strip()
    if found:
        name, msg = found[-1]
        line = msg.strip().splitlines()[0]
        return f"{name}: {line}"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:500]
