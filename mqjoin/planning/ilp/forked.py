"""Two halves of a pure-Python computation at once: one here, one in a forked child process.

The blocks' searches (:mod:`mqjoin.planning.ilp.paths`) are pure Python, so threads do not run
them side by side (the GIL); a child made by ``fork`` does, and it starts with a copy of
everything the parent knows — the model, the caches — at no cost of its own.  :func:`split`
runs ``there`` in a child and ``here`` in this process, and returns both results: the child's
comes back pickled through a pipe.

* If ``here`` raises (a time limit, Ctrl-C, a bug), the child is killed before the error goes
  on: no process is left behind.
* While the parent waits for the child it calls ``poll`` every :data:`POLL_SECONDS`, so a stop
  asked meanwhile (the solve's monitor) still ends the wait: ``poll`` raises, the child dies.
* The child ignores Ctrl-C (the parent decides and kills it), never reports progress
  (:func:`in_child`), and leaves with ``os._exit`` (no buffered output is written twice).
* If the child raises, its exception is raised here; if it dies without an answer (killed,
  out of memory) or is far behind the parent (:data:`PATIENCE_MIN`, :data:`PATIENCE_FACTOR`:
  a child that hangs is killed), :class:`ChildFailed` is raised with ``here``'s result, and
  the caller can do the child's half itself.

Where the halves are many items of uneven cost, a :class:`Shares` list taken from by both
sides (each item by one) keeps either side from idling while the other still has a long list.

Forking is used on Linux only (on macOS, system libraries such as Accelerate are not safe in
a forked child of a process that used them) and pays only with a second core: :func:`available`
says whether to fork, and ``MQJOIN_FORK=0`` in the environment turns it off.  Nor does it fork
while another thread runs in this process (:func:`fork_hazard`): the child gets a copy of every
lock as it was, held by threads that do not exist in the child, so a lock another thread held
at that moment (the logging module's, an import's, a py4j connection's) would hang the child.  A
Jupyter kernel (its heartbeat and I/O threads) and a Spark driver (its py4j gateway) are such
processes, and are named as such.  Without a fork, :func:`split` runs both halves here, one
after the other.

>>> here, there = split(lambda: sum(range(10)), lambda: [i * i for i in range(4)])
>>> here, there
(45, [0, 1, 4, 9])
>>> in_child()
False
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

#: how often (seconds) the parent, its own half done, checks ``poll`` while the child works
POLL_SECONDS = 0.05

#: the parent, its own half done, waits for the child at most this many seconds, or this many
#: times as long as its own half took if that is longer; then the child is killed
PATIENCE_MIN = 60.0
PATIENCE_FACTOR = 10.0

_child = False


class ChildFailed(Exception):
    """The child process ended without an answer (killed, or it could not pickle one);
    ``here`` holds the parent's own result."""

    def __init__(self, here: object) -> None:
        super().__init__("the child process ended without an answer")
        self.here = here


def in_child() -> bool:
    """Whether this process is a child made by :func:`split`."""
    return _child


def available() -> bool:
    """Whether :func:`split` forks: on Linux, where this process may run on two cores or more,
    when it is not a child already, ``MQJOIN_FORK`` is not ``0`` and :func:`fork_hazard` finds
    nothing."""
    if _child or not sys.platform.startswith("linux") or os.environ.get("MQJOIN_FORK", "1") == "0":
        return False
    return len(os.sched_getaffinity(0)) >= 2 and fork_hazard() is None


def resident_mb() -> float:
    """This process's resident memory in MB (0 where ``/proc`` does not tell: forking is for
    Linux only)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def fork_hazard() -> str | None:
    """Why forking this process now could hang the child, or None: a running Jupyter kernel, a
    live Spark context, or any other thread than the one asking (see the module docstring).

    >>> import threading
    >>> done = threading.Event()
    >>> busy = threading.Thread(target=done.wait, name="busy")
    >>> busy.start()
    >>> fork_hazard() is not None  # names the thread (a kernel or a Spark driver comes first)
    True
    >>> done.set(); busy.join()
    """
    kernel = sys.modules.get("ipykernel.kernelapp")
    if kernel is not None and kernel.IPKernelApp.initialized():
        return "a Jupyter kernel"
    spark = sys.modules.get("pyspark")
    if spark is not None and getattr(spark.SparkContext, "_active_spark_context", None) is not None:
        return "a Spark driver"
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    return f"other threads run ({', '.join(sorted(others))})" if others else None


def split(here: Callable[[], A], there: Callable[[], B], poll: Callable[[], object] = lambda: None) -> tuple[A, B]:
    """``(here(), there())``, ``there`` computed in a forked child while ``here`` runs in this
    process (both here, in turn, when :func:`available` says no).  See the module docstring for
    errors and stops."""
    if not available():
        return here(), there()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, answer, leave
        os.close(read)
        _answer(write, there)
    os.close(write)
    try:
        t0 = time.perf_counter()
        mine = here()
        took = time.perf_counter() - t0
        data = _receive(read, poll, time.perf_counter() + max(PATIENCE_MIN, PATIENCE_FACTOR * took))
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(read)
    if data is None:  # far behind: the child's half is the caller's
        _kill(pid)
        raise ChildFailed(mine)
    os.waitpid(pid, 0)
    try:
        ok, theirs = pickle.loads(data)
    except Exception as e:  # nothing, or half an answer
        raise ChildFailed(mine) from e
    if not ok:
        raise theirs
    return mine, theirs


class Shares:
    """At most :data:`MAX_SHARES` items (numbers below 65536) that the parent and a child forked
    after this was made take one at a time, in order, each item by one of them: a pipe filled at
    once and closed for writing, read two bytes at a time (a pipe read is atomic under the
    pipe's lock, and what is left in it is always whole items).  ``take()`` gives None once all
    are taken.

    >>> shares = Shares([3, 1, 2])
    >>> [shares.take() for _ in range(4)]
    [3, 1, 2, None]
    >>> shares.close()
    """

    def __init__(self, items: list[int]) -> None:
        if len(items) > MAX_SHARES or any(not 0 <= i < 1 << 16 for i in items):
            raise ValueError(f"Shares holds at most {MAX_SHARES} numbers below 65536")
        self._read, write = os.pipe()
        try:
            os.write(write, b"".join(i.to_bytes(2, "little") for i in items))
        finally:
            os.close(write)

    def take(self) -> int | None:
        data = os.read(self._read, 2)
        return int.from_bytes(data, "little") if data else None

    def close(self) -> None:
        os.close(self._read)


#: the most items a :class:`Shares` holds: two bytes each, within the one page of buffer that
#: every pipe has (filled before anyone reads it)
MAX_SHARES = 2048


def _answer(write: int, there: Callable[[], object]) -> None:
    """The child's whole life: ``there()`` (or its exception) pickled into the pipe, then exit."""
    global _child
    _child = True
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            data = pickle.dumps((True, there()), pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001 — every error goes back to the parent
            try:
                data = pickle.dumps((False, e), pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 — an exception that does not pickle: the parent redoes the work
                data, code = b"", 1
        view = memoryview(data)
        while view:
            view = view[os.write(write, view):]
    except BaseException:  # noqa: BLE001 — the parent is gone or the pipe broke: just leave
        code = 1
    finally:
        os._exit(code)


def _receive(read: int, poll: Callable[[], object], deadline: float) -> bytes | None:
    """Everything the child writes, until it closes the pipe; ``poll`` called while waiting;
    None once ``deadline`` (``time.perf_counter()``) has passed."""
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([read], [], [], POLL_SECONDS)
        if not ready:
            poll()
            if time.perf_counter() > deadline:
                return None
            continue
        chunk = os.read(read, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill(pid: int) -> None:
    """End the child at once and reap it."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
