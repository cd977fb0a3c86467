"""The Deploy panel's runs, without a widget: their states and what moves them, the start of
Spark ahead of a deploy (one per process), and the panel's words.

:class:`Runs` is the state machine of one panel's runs.  A run is *starting* from the click until its deployment exists
(Stop cancels it: *stopped*), then *running* until its deployment reports the end of its input (*finished*), a failure
(*failed*: a transient Spark warning leaves it running, with a note; the buttons are set again all the same) or is
stopped (*stopped*: by Stop, or past its budget).  Every method takes the lock, changes the states and returns what the
view has to show (:class:`Reaction`); nothing here imports ipywidgets, so the transitions are tested without a kernel.

>>> runs = Runs()
>>> start = runs.begin("mqjoin", "mqo", 2000.0, on_spark=False)
>>> start.label, runs.busy()
('mqo #1', ['mqo #1'])
>>> class D:
...     done, plan = False, "its plan"
>>> d = D()
>>> runs.started(start, d, closed=False)
False
>>> runs.event("mqo #1", d, {"kind": "status", "status": "failed", "error": "Connection reset", "ended": False})
Reaction(status=None, ended=False, stop_as=None, force=True)
>>> runs.state["mqo #1"]["state"], runs.state["mqo #1"]["note"]
('running', 'Spark warned (the run goes on): Connection reset')
>>> d.done = True
>>> runs.event("mqo #1", d, {"kind": "batch", "results": 3})
Reaction(status=('finished', 'mqo #1 finished — all input consumed'), ended=True, stop_as='finished', force=False)
>>> runs.busy(), runs.to_measure()
([], [])
>>> runs.stopped("mqo #1", "finished"); [label for label, _ in runs.to_measure()]
['mqo #1']
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mqjoin.model.errors import MqjoinError

_log = logging.getLogger(__name__)

#: Spark reports that are not failures of the run when the run goes on (substrings)
TRANSIENT = ("SocketTimeoutException", "connect back", "Accept timed out", "Connection reset",
             "BlockManager", "heartbeat")
#: the panel's default input: on a 2-core machine the plan's run keeps up with it
#: (benchmarks/RESULTS.md, "Deploy: does the default run keep up")
DEFAULT_RATE, DEFAULT_SECONDS = 2000.0, 5.0
#: a micro-batch takes at most this many seconds of input (see ``_start``)
BATCH_SECONDS = 4.0
ADVICE = ("press Deploy to try again; if it fails the same way, restart the kernel (a fresh Spark session) "
          "or lower the rate")


def default_deploy(plan, data, out, **kw):
    from mqjoin.runtime.spark.session import import_pyspark

    import_pyspark()  # before the modules that import it (another thread may be importing it)
    from mqjoin.runtime.spark.launch import deploy

    return deploy(plan, data, out, **kw)


#: seconds from Deploy to the first point on a busy 2-core machine (benchmarks/RESULTS.md,
#: "Deploy → first point"): a cold start (the JVM, then the first batch's Python workers: a
#: range) and a warm one (the session running)
COLD_START_S, WARM_START_S = (30, 60), 3
#: seconds the start ahead of a deploy takes on a busy 2-core machine (the JVM, a first job)
WARMING_S = 20


def session_running() -> bool:
    """Whether this process has a Spark session (never starts one, never imports pyspark)."""
    from mqjoin.runtime.spark import session

    return session.session_running()


def starting_message(engine: str, on_spark: bool, elapsed: float | None = None, cold: bool | None = None) -> str:
    """What a click on Deploy waits for, with the seconds waited so far: a cold start (no Spark
    session when Deploy was clicked: ``cold``, default: none now) names the JVM and its Python
    workers until the session is up.

    >>> starting_message("mqjoin", False)
    'starting mqjoin …'
    >>> starting_message("mqjoin", False, 3.4)
    'starting mqjoin … 3 s'
    """
    waited = "" if elapsed is None else f" {elapsed:.0f} s"
    if not on_spark:
        return f"starting {engine} …{waited}"
    running = session_running()
    if cold is None:
        cold = not running
    if cold and not running:
        return (f"starting a Spark session for {engine} (the JVM and its Python workers) …{waited} (the first "
                f"time {COLD_START_S[0]}–{COLD_START_S[1]} s to the first point on a busy 2-core machine; later "
                "deploys reuse it; Stop cancels)")
    if cold:
        return f"the Spark session is up; starting the {engine} streaming query and its first batch …{waited}"
    return (f"starting {engine} on the running Spark session …{waited} (usually about {WARM_START_S} s to "
            "the first point)")


#: one start ahead at a time in a process (explorers built one after another share the session),
#: and none again within this many seconds of the last (its Python workers are still up)
PREPARING = threading.Lock()
WARM_FOR_S = 30.0
warmed = [-math.inf]
deploys_waiting = [0]  # deploys waiting for the start ahead (see after_prepare)


def prepare_session() -> str | None:
    """The local Spark session and its Python workers, started ahead of a deploy; returns why
    the session is not up (None when it is).  A start ahead under way in another panel is
    waited for.  A failure is logged with its traceback; the deploy reports it again."""
    from mqjoin.runtime.spark.session import import_pyspark

    with PREPARING:
        try:
            if session_running() and time.monotonic() - warmed[0] < WARM_FOR_S:
                return None
            import_pyspark()
            from mqjoin.runtime.spark.session import spark_session, warm_up

            spark = spark_session()
            if not deploys_waiting[0]:  # a Deploy clicked while the JVM started runs its own first batch
                warm_up(spark)
                warmed[0] = time.monotonic()
        except MqjoinError as e:  # not installed, no Java: said in words, as the deploy will say it
            _log.warning("the Spark session was not started ahead of a deploy: %s", e,
                         exc_info=e.__cause__ is not None)
            return str(e)
        except Exception as e:  # noqa: BLE001 — Deploy starts it again and says why it fails
            _log.warning("starting the Spark session ahead of a deploy failed", exc_info=True)
            return f"{type(e).__name__}: {e}"
    return None if session_running() else "the Spark session is not running"


def after_prepare(cancelled: threading.Event) -> bool:
    """Wait for a start ahead under way (:func:`prepare_session`): a deploy that ran beside it
    would start the same Python processes and compile the same classes a second time on the
    same two cores, and its first batch would come later.  A start ahead that has not begun its
    warm-up when the session is up skips it (the waiting deploy's first batch does that work).
    False when ``cancelled`` is set meanwhile (checked every 0.2 s)."""
    deploys_waiting[0] += 1
    try:
        while not PREPARING.acquire(timeout=0.2):
            if cancelled.is_set():
                return False
    finally:
        deploys_waiting[0] -= 1
    PREPARING.release()
    return not cancelled.is_set()


def waiting_message(running: str, elapsed: float | None = None) -> str:
    """The status line of a run started and waiting for its first micro-batch.

    >>> waiting_message("mqo #1 running", 2.2)
    'mqo #1 running — waiting for the first micro-batch (its Python workers start with it) … 2 s'
    """
    waited = "" if elapsed is None else f" {elapsed:.0f} s"
    return f"{running} — waiting for the first micro-batch (its Python workers start with it) …{waited}"


#: the inputs a Deploy can replay: (menu label, value); "given" is the data given to the panel
INPUTS = (("synthetic uniform streams", "synthetic"), ("TPC-H at a scale factor", "tpch"),
          ("a folder of CSV / Parquet files", "folder"))


def input_words(choice: str, sf: float | None = None, folder: str = "") -> str:
    """What the input line says a Deploy replays.

    >>> input_words("folder", folder="~/clicks")
    'replays the files in ~/clicks (R.csv or R.parquet per relation, with a ts column)'
    """
    if choice == "tpch":
        return (f"replays the bundled TPC-H data at scale factor {sf:g} (generated on the first Deploy, "
                "then cached)")
    if choice == "folder":
        return f"replays the files in {folder or '…'} (R.csv or R.parquet per relation, with a ts column)"
    if choice == "given":
        return "replays the data given to the panel"
    return "replays synthetic uniform streams at the workload’s rates (the event seconds chosen)"


def synthetic_data(plan, duration: float):
    from mqjoin.datasets.uniform import uniform_streams

    return uniform_streams(plan.workload, duration=duration, seed=0)


def is_transient(message: str) -> bool:
    """Whether a Spark report is one of the transient kinds (:data:`TRANSIENT`).

    >>> is_transient("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back")
    True
    >>> is_transient("the mqjoin deployment failed: AnalysisException: column x not found")
    False
    """
    return any(t.lower() in (message or "").lower() for t in TRANSIENT)


def local_ui_url(url: str | None, host: str | None = None) -> str | None:
    """The Spark UI address as the user's browser reaches it: the driver binds to the
    container's address, the browser sees the notebook's host — ``host`` (default: the
    environment's ``MQJOIN_UI_HOST``, else ``127.0.0.1`` for a local session).

    >>> local_ui_url("http://172.17.0.5:4040")
    'http://127.0.0.1:4040'
    >>> local_ui_url("http://172.17.0.5:4041", host="lab.example.org"), local_ui_url(None)
    ('http://lab.example.org:4041', None)
    """
    if not url:
        return None
    parts = urlsplit(url)
    host = host or os.environ.get("MQJOIN_UI_HOST") or "127.0.0.1"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


class Start:
    """A run being started off the kernel's thread: its label, when Deploy was clicked, and
    whether Stop cancelled it meanwhile."""

    def __init__(self, label: str, on_spark: bool):
        self.label, self.on_spark = label, on_spark
        self.cold = on_spark and not session_running()  # no Spark session yet when Deploy was clicked
        self.clicked = time.monotonic()
        self.cancelled = threading.Event()
        self.thread: threading.Thread | None = None


#: states after which a run changes no more
ENDED = ("finished", "stopped", "failed")


@dataclass(frozen=True)
class Reaction:
    """What the view shows after an event of a run: a status line (``(state, text)``) or
    none, whether the run ended (the buttons and the measured counts follow), the state to stop
    its deployment as (it consumed its input: its query would poll for ever), and whether the
    chart is redrawn at once."""

    status: tuple[str, str] | None = None
    ended: bool = False
    stop_as: str | None = None
    force: bool = False


class Runs:
    """The runs of one Deploy panel (see the module doc); thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: (label, deployment) of every run that started, in order
        self.deployments: list[tuple[str, Any]] = []
        #: per run label: its state and what happened to it (a warning or the error), in words
        self.state: dict[str, dict[str, Any]] = {}
        self.count = 0  # runs numbered so far (started or not)
        self.starts: dict[str, Start] = {}  # runs being started
        self.waiting: dict[str, tuple[float, str]] = {}  # run → (since, its status line) until its first batch
        self.stopping: set[str] = set()  # runs whose deployment is being stopped (counted once it stopped)
        self.pointed: set[str] = set()  # runs that reported data (their first point was drawn at once)

    def busy(self) -> list[str]:
        """Runs starting or running."""
        with self.lock:
            return [label for label, st in self.state.items() if st["state"] in ("starting", "running")]

    def live(self) -> list[tuple[str, Any]]:
        """(label, deployment) of the runs running."""
        with self.lock:
            return [(label, d) for label, d in self.deployments
                    if self.state[label]["state"] in ("starting", "running")]

    def begin(self, engine: str, mode: str, rate: float, on_spark: bool) -> "Start":
        """A run clicked: numbered, *starting*."""
        with self.lock:
            self.count += 1
            start = Start(f"{engine if engine == 'native' else mode} #{self.count}", on_spark)
            self.starts[start.label] = start
            self.state[start.label] = {"state": "starting", "note": "", "rate": rate}
            return start

    def dropped(self, start: "Start") -> None:
        """A start cancelled before anything was started."""
        with self.lock:
            self.starts.pop(start.label, None)

    def start_failed(self, start: "Start", message: str) -> bool:
        """A start that raised: *failed* with ``message`` unless Stop cancelled it; returns
        whether to say so."""
        with self.lock:
            self.starts.pop(start.label, None)
            if start.cancelled.is_set():
                return False
            self.state[start.label].update(state="failed", note=message)
            return True

    def started(self, start: "Start", d: Any, closed: bool) -> bool:
        """A start that yielded deployment ``d``: *running*, or *stopped* when Stop was pressed
        meanwhile or the panel ``closed`` (returns whether, then: the view stops it)."""
        with self.lock:
            self.starts.pop(start.label, None)
            self.deployments.append((start.label, d))
            cancelled = start.cancelled.is_set() or closed
            self.state[start.label]["state"] = "stopped" if cancelled else "running"
            return cancelled

    def wait_first(self, label: str, text: str) -> None:
        """The run waits for its first micro-batch; ``text``: its status line meanwhile."""
        with self.lock:
            self.waiting[label] = (time.monotonic(), text)

    def cancel(self) -> tuple[list["Start"], list[tuple[str, Any]]]:
        """Stop pressed: the starts under way cancelled and the live runs marked *stopped*
        (their deployments being stopped); returns both."""
        with self.lock:
            starting = [s for s in self.starts.values() if not s.cancelled.is_set()]
            for s in starting:
                s.cancelled.set()
                self.state[s.label]["state"] = "stopped"
            live = self.live()
            for label, _ in live:
                self.state[label]["state"] = "stopped"
                self.stopping.add(label)
            self.waiting.clear()
            return starting, live

    def stopping_as(self, label: str, state: str, note: str | None = None) -> None:
        """A run stopped by its budget (``note``: why)."""
        with self.lock:
            self.state[label].update(state=state, **({"note": note} if note is not None else {}))

    def stopped(self, label: str, state: str, note: str | None = None) -> None:
        """A run's deployment stopped: the run is ``state`` (``note``: what its stop said)."""
        with self.lock:
            if note is not None:
                self.state[label]["note"] = note
            self.state[label]["state"] = state
            self.stopping.discard(label)

    def to_measure(self) -> list[tuple[str, Any]]:
        """The runs that ended and were not counted yet (each returned once; a run being
        stopped is counted once its deployment stopped)."""
        out = []
        with self.lock:
            for label, d in self.deployments:
                st = self.state[label]
                if (st["state"] in ("starting", "running") or st.get("measured") or label in self.stopping
                        or getattr(d, "plan", None) is None):
                    continue
                st["measured"] = "yes"
                out.append((label, d))
        return out

    def clock(self) -> tuple[str, str] | None:
        """The status line while a run starts or waits for its first batch, with the seconds
        so far (None: nothing waits)."""
        with self.lock:
            starting = [s for s in self.starts.values() if not s.cancelled.is_set()]
            waiting = list(self.waiting.items())
        now = time.monotonic()
        if starting:
            s = starting[0]
            engine = "native" if s.label.startswith("native") else "mqjoin"
            return "starting", starting_message(engine, s.on_spark, now - s.clicked, s.cold)
        if waiting:
            _, (since, text) = waiting[0]
            return "running", waiting_message(text, now - since)
        return None

    def event(self, label: str, d: Any, ev: dict) -> Reaction:
        """An event of run ``label``'s deployment ``d`` (``status``, ``batch``, ``query``,
        ``progress``): the states it moves, and what the view shows."""
        kind = ev.get("kind")
        with self.lock:
            st = self.state[label]
            if kind == "status":
                new, err, status = ev.get("status"), ev.get("error") or "", None
                if new == "failed" and is_transient(err) and not ev.get("ended"):
                    # a report Spark recovers from while the run goes on (an end would be reported again)
                    st["note"] = f"Spark warned (the run goes on): {err}"
                    return Reaction(None, force=True)
                if new == "failed":
                    st.update(state="failed", note=f"{err} — {ADVICE}")
                    status = ("error", f"{label}: {err} — {ADVICE}")
                elif new in ("finished", "stopped"):
                    st["state"] = new if st["state"] != "stopped" else "stopped"
                    status = (st["state"], f"{label} {st['state']}"
                              + (" — all input consumed" if new == "finished" else ""))
                if new in ENDED:
                    self.waiting.pop(label, None)
                    return Reaction(status, ended=True)
                return Reaction(status, force=True)
            if kind not in ("batch", "query", "progress"):
                return Reaction()
            # the first report of data (the native baseline reports queries and progress, no batches)
            waited = self.waiting.pop(label, None)
            status = ("running", waited[1]) if waited is not None and st["state"] == "running" else None
            if st["state"] == "failed":  # it failed, yet goes on: that report was a warning
                st.update(state="running", note=f"Spark warned (the run goes on): {st['note'].split(' — ')[0]}")
            if getattr(d, "done", False) and st["state"] == "running":
                st["state"] = "finished"
                self.stopping.add(label)
                return Reaction(("finished", f"{label} finished — all input consumed"), ended=True, stop_as="finished")
            if label not in self.pointed and (kind != "progress" or ev.get("input_rows")):
                self.pointed.add(label)  # the run's first point: drawn now, not after the redraw interval
                return Reaction(status, force=True)
            return Reaction(status)
