"""Live sources of adaptive runs, and redraws throttled to a few per second from any thread.

**Sources.**  A *static* source is a finished :class:`~mqjoin.runtime.epochs.AdaptiveRun`.
A *live* source is anything with the interface of
:class:`~mqjoin.runtime.epochs.AdaptiveReplay` — ``subscribe(callback)`` (events
``{"kind": "epoch" | "switch" | "change" | "status", …}``), ``snapshot()`` (the run so far,
an ``AdaptiveRun``), ``submit(add=…, remove=…, selectivities=…)`` (returns the activation
epoch), ``status`` / ``error`` / ``event_time`` / ``stop()`` — so a Spark adaptive deployment
with the same interface plugs in unchanged.  Nothing in the views looks inside a source.

**Live redraws.**  Events arrive on the source's thread.  A view never draws inside the
event callback: it schedules a redraw (:class:`Redraw`), at most one per ``min_interval``
seconds (default 0.5: ≤ 2 redraws/s, plus one right away when the run ends).  In a Jupyter
kernel the redraw runs as a callback of the kernel's event loop (the thread of every widget
callback); without a running loop (scripts, tests) on a timer thread.  Redraws of one view
are serialised.

The epoch timeline (:mod:`mqjoin.widgets.timeline`), the query changes panel
(:mod:`mqjoin.widgets.query_changes`) and the Adaptivity tab (:mod:`mqjoin.widgets.adaptivity`)
all draw this way.

>>> class Finished:
...     status = "finished"
>>> is_live(Finished()), status_of(Finished())
(False, 'finished')
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from mqjoin.widgets._kernel import unbound

_log = logging.getLogger(__name__)

#: states of a live source after which nothing changes any more
ENDED = ("finished", "stopped", "failed")


# --------------------------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------------------------


def is_live(source: Any) -> bool:
    """Whether ``source`` is a live run (has ``subscribe`` and ``snapshot``), not a finished
    :class:`~mqjoin.runtime.epochs.AdaptiveRun`."""
    return callable(getattr(source, "subscribe", None)) and callable(getattr(source, "snapshot", None))


def snapshot(source: Any):
    """The run as it stands: ``source.snapshot()`` for a live source, else the run itself."""
    return source.snapshot() if is_live(source) else source


def status_of(source: Any) -> str:
    """``running``, ``finished`` … of a live source; a static run is ``finished``."""
    return str(getattr(source, "status", "finished")) if is_live(source) else "finished"


def default_label(run) -> str:
    """``adaptive`` or ``static``: what a run's policy does."""
    return "adaptive" if run.policy.adapt else "static"


# --------------------------------------------------------------------------------------------
# throttled redraws from any thread
# --------------------------------------------------------------------------------------------


class _Scheduled:
    """A draw scheduled by :class:`Redraw`: its timer handle, and whether it was accounted for."""

    __slots__ = ("handle", "retired")

    def __init__(self) -> None:
        self.handle: Any = None
        self.retired = False


class Redraw:
    """Calls ``draw()`` at most once per ``min_interval`` seconds when :meth:`request`\\ ed
    from any thread, never inside the caller (see the module doc); :meth:`now` draws at once
    on the calling thread.  ``count`` draws so far.

    >>> seen = []
    >>> r = Redraw(lambda: seen.append(1), min_interval=0.05)
    >>> for _ in range(20):
    ...     r.request()
    >>> r.wait_idle(5), 1 <= len(seen) <= 2
    (True, True)
    """

    def __init__(self, draw: Callable[[], None], min_interval: float = 0.5):
        self.draw = draw
        self.min_interval = float(min_interval)
        self.count = 0
        self._lock = threading.Lock()  # bookkeeping only: never held while drawing
        self.lock = threading.RLock()  # one draw at a time (views take it to change what a draw shows)
        self._last = -math.inf
        self._pending: Any = None
        self._busy = 0
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._loop_thread = threading.current_thread()

    def _on_loop(self) -> bool:
        loop = self._loop
        return loop is not None and loop.is_running() and not loop.is_closed()

    def request(self, force: bool = False) -> None:
        """Schedule a draw (``force``: without waiting for the interval)."""
        if self._on_loop():
            try:
                self._loop.call_soon_threadsafe(self._schedule, force)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._schedule(force)

    def _schedule(self, force: bool) -> None:
        with self._lock:
            wait = 0.0 if force else max(0.0, self._last + self.min_interval - time.monotonic())
            old = self._pending
            if old is not None:
                if not force:
                    return  # a draw is already scheduled: it will show this too
                old.handle.cancel()
                self._retire(old)
            token = _Scheduled()
            self._pending = token
            self._busy += 1
            if self._on_loop() and threading.current_thread() is self._loop_thread:
                token.handle = self._loop.call_later(wait, self._fire, token)
            else:
                token.handle = threading.Timer(wait, self._fire, (token,))
                token.handle.daemon = True
                token.handle.start()

    def _retire(self, token: "_Scheduled") -> None:
        """Account for a scheduled draw exactly once (drawn or cancelled); under ``_lock``."""
        if not token.retired:
            token.retired = True
            self._busy -= 1

    def _fire(self, token: "_Scheduled") -> None:
        with self._lock:
            if token.retired:  # cancelled by a forced draw while it was about to start
                return
            if self._pending is token:
                self._pending = None
        try:
            self.now()
        finally:
            with self._lock:
                self._retire(token)

    def now(self) -> None:
        """Draw now, on this thread."""
        with self.lock:
            self._last = time.monotonic()
            self.count += 1
            try:
                with unbound():  # a draw answers no request of the page (see mqjoin.widgets._kernel)
                    self.draw()
            except Exception:  # noqa: BLE001 - a failing redraw must not kill the source's thread
                _log.exception("a redraw failed")

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no draw is scheduled or running (scripts, tests); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                busy = self._busy
            if not busy:
                with self.lock:  # a draw in progress
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
