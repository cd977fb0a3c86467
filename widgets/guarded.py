"""Guarded runs in the explorer: refuse a run the model says is too large, stop a live one at
its budget (docs/model.md §2 estimates from :mod:`mqjoin.planning.guard`; nothing here estimates itself).

A :class:`RunGuard` belongs to a panel that starts runs (Adaptivity, Deploy).  Before a run,
:meth:`RunGuard.check` returns ``None`` (go) or the refusal message; the panel shows it with a
**Run anyway** button, whose run is still stopped at the budget.  While a run is live the
panel reports its progress to :meth:`RunGuard.watch`'s watcher (results so far, rows held),
which stops the run once — off the source's own thread — when the budget is passed, and keeps
the reason for the status line.  Everything the run produced stays.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a], rate: 100}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.9}
... ''')
>>> g = RunGuard()
>>> g.check(w, 10.0) is None, g.estimate.summary()
(True, 'expected: about 2,000 input tuples, 900,000 results, 2,000 rows in stores at the end, ~109 MB')
>>> print(g.check(w, 100.0))  # doctest: +NORMALIZE_WHITESPACE
this run would produce about 90 million results (q 90 million) and need about 11 GB of memory (limits: 20 million
results, 2.0 GB): shorten the run, lower the selectivities (the largest: R.a = S.a 0.9) or raise the limits
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from mqjoin.planning.guard import RunEstimate, RunLimits, RunTooLargeError, check_run, estimate_run, over_budget
from mqjoin.support.threads import join_threads
from mqjoin.widgets._kernel import spawn


#: seconds a closing widget waits for its background threads (ipywidgets also closes a widget
#: when it is collected: never for long); a thread still running then is a daemon, and ends
#: on its own without reporting
CLOSE_WAIT = 2.0


class GuardedPanel:
    """What a panel with a :class:`RunGuard` (its ``guard``) does when it closes: a stop at
    the budget under way is waited for (briefly: :data:`CLOSE_WAIT`), then the widget closes.
    Live runs go on: the panel's ``stop`` ends them.  Mixed in before the widget class."""

    def close(self) -> None:
        guard = getattr(self, "guard", None)  # (also called when a half-built panel is collected)
        if guard is not None:
            guard.close(CLOSE_WAIT)
        super().close()


def tables_duration(tables: Mapping[str, Any]) -> float:
    """Seconds of event time the tables span (at least 1).

    >>> from mqjoin.model.tables import Table
    >>> tables_duration({"R": Table.from_columns("R", {"ts": [0.5, 29.5]})})
    29.0
    """
    ts = [t for table in tables.values() for t in (table.ts[:1] + table.ts[-1:])] if tables else []
    return max(1.0, max(ts) - min(ts)) if ts else 1.0


class RunGuard:
    """Refusal before a run and the budget while it is live (see the module doc)."""

    def __init__(self, limits: RunLimits | None = None):
        self.limits = limits or RunLimits()
        self.estimate: RunEstimate | None = None
        #: why a run was stopped, by run label
        self.stopped: dict[str, str] = {}
        self._threads: list[threading.Thread] = []  # the stops under way (joined by close())
        self._lock = threading.Lock()

    def check(self, workload, duration: float, plan: Any = None) -> str | None:
        """``None`` when the run fits the limits, else the refusal message."""
        self.estimate = estimate_run(workload, duration, plan)
        try:
            check_run(self.estimate, self.limits)
        except RunTooLargeError as e:
            return str(e)
        return None

    def watch(self, label: str, stop: Callable[[], Any], on_stop: Callable[[str], None]) -> Callable[[float, float],
                                                                                                     None]:
        """A function ``(results so far, rows held)`` that stops the run once past the budget:
        ``stop()`` on a helper thread (a source may not be stopped from its own thread),
        then ``on_stop(message)``."""
        fired = threading.Event()

        def report(results: float, state_rows: float) -> None:
            msg = over_budget(results, state_rows, self.limits)
            if msg is None or fired.is_set():
                return
            fired.set()
            self.stopped[label] = msg

            def halt() -> None:
                try:
                    stop()
                finally:
                    on_stop(msg)

            with self._lock:
                self._threads = [x for x in self._threads if x.is_alive()] + [spawn(halt, "mqjoin-budget-stop")]

        return report

    def close(self, timeout: float | None = None) -> bool:
        """Wait for the stops under way (at most ``timeout`` seconds); returns whether they
        all finished.  The panel that owns the guard calls this when it closes."""
        with self._lock:
            threads, self._threads = self._threads, []
        return join_threads(threads, timeout)
