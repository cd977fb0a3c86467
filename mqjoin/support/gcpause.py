"""No garbage collection in the middle of a redraw or a micro-batch, and the collector exactly
as it was after the last of them.

A notebook kernel with plotly holds a great many long-lived objects; a full collection rescans
them all, which takes longer than the rest of a slider's round trip.  Python starts one when enough
objects have been promoted to the oldest generation since the last — and an optimisation plus a redraw allocates enough
short-lived objects that gen-0/gen-1 collections *during* it promote thousands of them, only
for them to die a moment later.  :func:`paused_gc` turns the collector off for the round trip
(objects without cycles die by reference counting as usual; cycles wait for the next
collection) and restores it as it was, so far fewer objects reach the oldest generation and
full collections become rare — unlike ``gc.freeze()``, nothing of the user's process changes
after the round trip.  The Spark driver mode pauses it for a micro-batch the same way: the
executor allocates millions of entries and partial results in one, and collections during it
would cost a good share of the batch's CPU time (``benchmarks/RESULTS.md``, "Spark driver mode:
what a micro-batch costs").

The collector is the process's, so a pause holds for every thread while it is open: pauses
are counted across threads and the collector is restored when the last one ends.  A pause
sets the first generation's threshold to 0 (which stops automatic collection just as
``gc.disable()`` does) and leaves ``gc.isenabled()`` to the user: a collector the user turns
off — before or during a pause — stays off, one the user turns on during a pause does not end
it, and thresholds the user sets during a pause are kept.  ``gc.collect()`` still collects.

>>> import gc
>>> enabled, thresholds = gc.isenabled(), gc.get_threshold()
>>> with paused_gc():
...     gc.get_threshold()[0], gc.isenabled() == enabled
(0, True)
>>> gc.get_threshold() == thresholds
True
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # pauses open, in every thread
_saved: tuple[int, ...] = ()  # the thresholds before the first of them
_paused: tuple[int, ...] = ()  # the thresholds set for them


@contextmanager
def paused_gc():
    """No automatic collection inside the block (re-entrant, thread-safe); then the collector
    as it was (see the module doc).  Also a decorator: ``@paused_gc()``."""
    global _depth, _saved, _paused
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            _paused = (0, *_saved[1:])
            gc.set_threshold(*_paused)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and gc.get_threshold() == _paused:  # else the user set new thresholds
                gc.set_threshold(*_saved)
