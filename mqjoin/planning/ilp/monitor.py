"""What a running solve reports and obeys: its incumbent and bound as they improve, and a stop.

:func:`mqjoin.planning.ilp.solving.solve` solves the model part by part, and every method
inside a part (HiGHS's MIP through its improving-solution callback, the branch and bound, the
coupled search and its master) tells a :class:`Monitor` its part's best plan and proven
bound whenever either improves.  The monitor adds them up over the parts — a part not solved
yet counts with its start's cost (the plan kept should the solve stop there) and the bound it has
from the start (:mod:`~mqjoin.planning.ilp.fairshare`) —
and records one :class:`Report` (seconds, incumbent, bound) each time the whole model's
incumbent falls or its bound rises, calling ``on_report`` with it: the progress lines of
``mqjoin optimize`` and the explorer's incumbent/bound chart.

:meth:`Monitor.stop` (say, on Ctrl-C) makes the solve end as a time limit would, at its
next check — between LPs, at HiGHS's MIP interrupt callback — and return its incumbent with
the bound proven so far; parts not started keep their start.  It is safe to call from a
signal handler or another thread (it only sets an event).

>>> m = Monitor()
>>> m.begin({0: 50.0, 1: 70.0})
>>> m.report(0, 40.0, 30.0)
>>> m.report(1, 60.0, 55.0)
>>> m.report(1, 60.0, 55.0)  # nothing new: no report
>>> [(r.incumbent, r.bound) for r in m.reports]
[(120.0, 0.0), (110.0, 30.0), (100.0, 85.0)]
>>> m.reports[-1].describe().startswith("incumbent 100, bound 85, gap 15.00% after")
True
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from mqjoin.planning.ilp import forked


def relative_gap(incumbent: float, bound: float) -> float:
    """``(incumbent − bound) / incumbent``, at least 0 (0 for an incumbent of 0).

    >>> relative_gap(100.0, 85.0), relative_gap(0.0, 0.0)
    (0.15, 0.0)
    """
    if incumbent <= 0:
        return 0.0
    return max(0.0, (incumbent - bound) / incumbent)


@dataclass(frozen=True)
class Report:
    """The whole model's state at one moment of a solve: seconds since the solve began, the
    best plan's cost and the proven lower bound."""

    seconds: float
    incumbent: float
    bound: float

    @property
    def gap(self) -> float:
        return relative_gap(self.incumbent, self.bound)

    @property
    def status(self) -> str:
        """``optimal`` once the bound meets the incumbent, else ``improving``."""
        return "optimal" if self.gap <= 1e-9 else "improving"

    def describe(self) -> str:
        """One line, in the format of :meth:`mqjoin.planning.anytime.Progress.describe`."""
        return (f"incumbent {self.incumbent:g}, bound {self.bound:g}, gap {self.gap:.2%} "
                f"after {self.seconds:.1f} s")

    def to_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds, "incumbent": self.incumbent, "bound": self.bound, "gap": self.gap}


#: the gap of the anytime goal: a plan within this proven gap early (:func:`anytime_summary`)
ANYTIME_GAP = 0.02


def anytime_summary(reports: list[Report], status: str, end: float, gap: float = ANYTIME_GAP) -> dict[str, Any]:
    """When a solve's plans came, from its reports: the first plan (seconds and proven gap)
    and the first moment its gap was at most ``gap`` (None when it never was; ``end``, the
    seconds of the whole solve, when it ended optimal without a report that says so).

    >>> rs = [Report(0.5, 120.0, 0.0), Report(1.5, 110.0, 100.0), Report(2.5, 102.0, 100.0)]
    >>> anytime_summary(rs, "optimal", 3.0)
    {'first_plan_seconds': 0.5, 'first_plan_gap': 1.0, 'gap': 0.02, 'within_gap_seconds': 2.5}
    >>> anytime_summary(rs[:2], "time_limit", 3.0)["within_gap_seconds"] is None
    True
    """
    within = next((r.seconds for r in reports if r.gap <= gap), end if status == "optimal" else None)
    return {"first_plan_seconds": reports[0].seconds if reports else None,
            "first_plan_gap": reports[0].gap if reports else None, "gap": gap, "within_gap_seconds": within}


@dataclass
class Monitor:
    """The incumbent and bound of a solve, summed over its parts, and its stop flag (see the
    module docstring).  One monitor per solve; ``on_report`` is called on the solving thread."""

    on_report: Callable[[Report], None] | None = None
    reports: list[Report] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _parts: dict[object, tuple[float, float]] = field(default_factory=dict, repr=False)
    _t0: float = field(default_factory=time.perf_counter, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _deliver: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def sharing_stop(self) -> "Monitor":
        """A monitor that reports nowhere but stops with this one (for an auxiliary solve)."""
        return Monitor(_stop=self._stop)

    def stop(self) -> None:
        """Ask the solve to end at its next check and return its best plan so far."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def elapsed(self) -> float:
        """Seconds since the monitor was made (the clock of its reports)."""
        return time.perf_counter() - self._t0

    def begin(self, fallback: dict[object, float], floors: dict[object, float] | None = None) -> None:
        """A solve starts: its parts (keys) with the cost of the plan each keeps should the
        solve stop before it has a better one (``math.inf``: none), and the bound each has
        from the start (``floors``, 0 where absent: :mod:`~mqjoin.planning.ilp.fairshare`).

        >>> m = Monitor()
        >>> m.begin({0: 50.0, 1: 70.0}, {0: 20.0})
        >>> m.reports[-1].bound, m.bound_of(0)
        (20.0, 20.0)
        """
        floors = floors or {}
        with self._lock:
            self._parts = {key: (cost, min(cost, floors.get(key, 0.0))) for key, cost in fallback.items()}
        self._emit()

    def bound_of(self, part: object) -> float:
        """The best bound a part has reported (0 when none)."""
        with self._lock:
            return self._parts.get(part, (math.inf, 0.0))[1]

    def report(self, part: object, incumbent: float, bound: float) -> None:
        """A part's best plan so far and its proven bound (each kept at its best)."""
        with self._lock:
            inc, low = self._parts.get(part, (math.inf, 0.0))
            new = (min(inc, incumbent), max(low, min(bound, incumbent)))
            if new == (inc, low):
                return
            self._parts[part] = new
        self._emit()

    def _emit(self) -> None:
        # One report at a time from making to delivery, so that parts solving on several
        # threads reach ``on_report`` in the order of their clock.
        with self._deliver:
            with self._lock:
                incumbent = math.fsum(v[0] for v in self._parts.values())
                bound = math.fsum(v[1] for v in self._parts.values())
                if not math.isfinite(incumbent):
                    return
                last = self.reports[-1] if self.reports else None
                if last is not None and incumbent >= last.incumbent and bound <= last.bound:
                    return
                if last is not None:  # neither ever goes back
                    incumbent, bound = min(incumbent, last.incumbent), max(bound, last.bound)
                r = Report(time.perf_counter() - self._t0, incumbent, min(bound, incumbent))
                self.reports.append(r)
            if self.on_report is not None:
                self.on_report(r)

    def highs_callback(self, part: object, highspy: ModuleType) -> Callable[..., Any]:
        """A HiGHS callback (``setCallback``) that reports a MIP's improving solutions of
        ``part`` and interrupts the MIP once :meth:`stop` is called."""
        improving = int(highspy.cb.HighsCallbackType.kCallbackMipImprovingSolution)
        interrupt = int(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)

        def callback(kind: Any, _message: str, out: Any, into: Any, _data: Any) -> None:
            kind = int(kind)
            if kind == interrupt:
                if self.stopped:
                    into.user_interrupt = True
            elif kind == improving:
                self.report(part, float(out.objective_function_value), max(0.0, float(out.mip_dual_bound)))

        return callback


@dataclass(frozen=True)
class Watch:
    """One part's line to the solve's monitor: ``part`` None (an auxiliary search, such as a
    block's or a tie-break's, whose objective is not the part's) obeys the stop and reports
    nothing.  ``Watch()`` watches nothing."""

    monitor: Monitor | None = None
    part: object = None

    @property
    def stopped(self) -> bool:
        return self.monitor is not None and self.monitor.stopped

    def report(self, incumbent: float, bound: float) -> None:
        """Tell the monitor the part's incumbent and bound (not from a forked child, whose
        monitor is a copy: :mod:`mqjoin.planning.ilp.forked`)."""
        if self.monitor is not None and self.part is not None and not forked.in_child():
            self.monitor.report(self.part, incumbent, bound)

    def bound(self, bound: float) -> float:
        """A part's bound with the best one it reported: a search stopped early may have
        proven more on the way than it can say at the end."""
        if self.monitor is None or self.part is None:
            return bound
        return max(bound, self.monitor.bound_of(self.part))

    def quiet(self) -> "Watch":
        """The same stop, no reports."""
        return Watch(self.monitor)
