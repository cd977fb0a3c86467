"""Waiting for background threads with one deadline for all of them.

The explorer's model and the run guard start daemon threads (a debounce timer, an anytime
improvement, a stop at the budget) and wait for them when their widget closes.  A closing
widget must not hang on a thread that takes long, so the wait has one deadline for the whole
lot rather than one per thread; a thread never waits for itself (a close called from the
thread being closed).

>>> import threading, time
>>> ts = [threading.Thread(target=time.sleep, args=(0.01,)) for _ in range(3)]
>>> for t in ts:
...     t.start()
>>> join_threads(ts, timeout=5)
True
>>> join_threads([threading.current_thread()], timeout=0)   # itself: not waited for, still alive
False
"""

from __future__ import annotations

import threading
import time
from typing import Iterable


def join_threads(threads: Iterable[threading.Thread], timeout: float | None = None) -> bool:
    """Wait for ``threads`` (at most ``timeout`` seconds in all; ``None``: as long as they
    take); returns whether none is alive."""
    threads = list(threads)
    deadline = None if timeout is None else time.monotonic() + timeout
    for t in threads:
        if t is not threading.current_thread():
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)
