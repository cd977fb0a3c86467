"""Services a test starts die with the test process, however it ends.

A fixture's ``finally`` stops what it started when pytest ends normally or fails, but not when
pytest itself is killed (SIGKILL, or SIGTERM, whose default action skips every handler): a
Spark master or worker started in its own session would then run on, holding ports, memory and
a core.  :func:`tied` prefixes a command with this file run as a launcher: it asks Linux to
SIGKILL it when its parent — the test process — dies (``prctl(PR_SET_PDEATHSIG)``, kept across
``exec``), then replaces itself with the command.  A launcher, not ``Popen(preexec_fn=…)``: the
test process may have live threads (Spark's, Jupyter's), and code run between ``fork`` and
``exec`` of a threaded process can deadlock.

>>> cmd = tied(["sleep", "1"])
>>> cmd[1] == __file__ and cmd[2] == str(os.getpid()) and cmd[3:]
['sleep', '1']

What the launched command starts in turn is its own business: a killed Spark worker's
executors exit when they lose their worker, a PySpark driver's JVM when its Python's pipe
closes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def tied(cmd: list[str]) -> list[str]:
    """``cmd`` run through the launcher, so that it is killed when this process dies (on Linux;
    elsewhere the launcher only runs it).  The parent-death signal follows the thread that
    started the child: call ``Popen`` from the thread that lives as long as the test process
    (pytest's main thread)."""
    return [sys.executable, __file__, str(os.getpid()), *cmd]


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs.  A zombie does not: whoever inherits an orphan (a
    container's first process, say) may never reap it.

    >>> alive(os.getpid()), alive(2 ** 22 + 1)
    (True, False)
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _launch(parent: int, cmd: list[str]) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before the signal was asked for
            sys.exit(1)
    os.execvp(cmd[0], cmd)


def descendants(pid: int) -> list[int]:
    """Process ids of every descendant of ``pid`` (Linux /proc), children before theirs."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


if __name__ == "__main__":
    _launch(int(sys.argv[1]), sys.argv[2:])
