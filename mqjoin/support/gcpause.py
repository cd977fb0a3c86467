"""No garbage collection in the middle of a redraw or a micro-batch, without touching the rest
of the process.

A notebook kernel with plotly holds ~250k long-lived objects; a full collection rescans them
all, which takes longer than the rest of a slider's round trip.  Python starts one when enough
objects have been promoted to the oldest generation since the last — and an optimisation plus a redraw allocates enough
short-lived objects that gen-0/gen-1 collections *during* it promote thousands of them, only
for them to die a moment later.  :func:`paused_gc` turns the collector off for the round trip
(objects without cycles die by reference counting as usual; cycles wait for the next
collection) and restores it as it was, so far fewer objects reach the oldest generation and
full collections become rare — unlike ``gc.freeze()``, nothing of the user's process changes
after the round trip.  The Spark driver mode pauses it for a micro-batch the same way: the
executor allocates millions of entries and partial results in one, and collections during it
cost about a quarter of the batch's CPU time (measured in ``benchmarks/RESULTS.md``).

>>> import gc
>>> with paused_gc():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc():
    """Disable automatic collection inside the block (re-entrant, thread-safe), then restore it."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
