"""Anytime optimisation: when a solve exceeds an interactive budget, keep improving
the plan in rounds of growing time limits and report the best plan so far with its proven
gap after each round.

Each round is one time-limited :func:`mqjoin.planning.optimizer.optimize` (the solver's own warm start
from the MIR-free plan makes every round return a plan); the best plan of all rounds and the
best bound of all rounds are kept, so the incumbent never rises and the bound never falls.
A round of the ILP (planner ``clash``, mode ``mqo``) goes on from the round before it, as a
re-plan does (:func:`~mqjoin.planning.optimizer.replan`): the independent parts of the ILP that
round proved optimal keep their answers, and the blocks it priced in a part it did not finish
keep their prices (:mod:`mqjoin.planning.ilp.prices`), so the rounds add up instead of each
starting over.
The rounds stop at a proven optimum, when ``cancelled()`` says so (an edit made the solve
stale), after ``max_rounds``, or when a round's limit would exceed ``max_limit``.

>>> from mqjoin.model.workload import load_workload
>>> from pathlib import Path
>>> w = load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml")
>>> [(p.status, p.incumbent, p.gap) for p in improve(w, first_limit=5)]
[('optimal', 700.0, 0.0)]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mqjoin.model.errors import NoSolutionError, OptimizerError
from mqjoin.planning.ilp.monitor import Monitor, Report, relative_gap
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.result import OptimizeResult
from mqjoin.planning.options import OptimizeOptions
from mqjoin.model.workload import Workload


@dataclass(frozen=True)
class Progress:
    """The state after a round: seconds since the start, the best plan's cost (incumbent), the
    best proven lower bound, the status of that plan and the plan itself."""

    seconds: float
    incumbent: float
    bound: float
    status: str
    result: OptimizeResult

    @property
    def gap(self) -> float:
        """``(incumbent − bound) / incumbent`` (0 when optimal)."""
        return 0.0 if self.status == "optimal" else relative_gap(self.incumbent, self.bound)

    def describe(self) -> str:
        """One line: ``incumbent 1.2e+05, bound 9.8e+04, gap 18.33% after 4.1 s``."""
        if self.status == "optimal":
            return f"optimal {self.incumbent:g} after {self.seconds:.1f} s"
        return (f"incumbent {self.incumbent:g}, bound {self.bound:g}, gap {self.gap:.2%} "
                f"after {self.seconds:.1f} s")


def progress_of(result: OptimizeResult, seconds: float, bound: float = 0.0) -> Progress:
    """The progress a single result stands for (its bound combined with an earlier one).

    >>> from mqjoin.model.workload import load_workload
    >>> from pathlib import Path
    >>> r = optimize(load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml"))
    >>> progress_of(r, 0.5).describe()
    'optimal 700 after 0.5 s'
    """
    i = result.ilp
    b = max(bound, i.bound if i.status != "optimal" else result.probe_cost)
    return Progress(seconds, result.probe_cost, min(b, result.probe_cost), i.status, result)


def improve(workload: Workload, first_limit: float, *, growth: float = 2.0, max_rounds: int = 6,
            max_limit: float | None = None, cancelled: Callable[[], bool] | None = None,
            start: Progress | None = None, optimize_fn: Callable[..., OptimizeResult] = optimize,
            on_report: Callable[[Report], None] | None = None, options: OptimizeOptions | None = None,
            **keywords: Any) -> Iterator[Progress]:
    """Rounds of time-limited solves (``first_limit`` seconds, then ``growth`` times longer
    each round); yields the progress after each round (see the module docstring).  ``start``:
    the progress so far (an earlier time-limited result), which the rounds only improve on.
    ``on_report``: told the incumbent and bound inside each round as they improve (a
    :class:`~mqjoin.planning.ilp.monitor.Report`, its seconds counted from the first round's
    start; the plans themselves come with the rounds).
    ``options`` (with ``keywords`` changed) are :func:`~mqjoin.planning.optimizer.optimize`'s, their
    time limit and monitor set by each round; ``optimize_fn(workload, options)`` solves a round."""
    if not first_limit > 0 or not growth >= 1:
        raise OptimizerError(f"anytime rounds need first_limit > 0 and growth ≥ 1, got {first_limit!r}, {growth!r}")
    base = OptimizeOptions.of(options, **keywords)
    t0 = time.perf_counter() - (start.seconds if start is not None else 0.0)
    best = start
    limit = first_limit
    # each round goes on from the last plan of this workload (the ILP's parts it proved optimal
    # and the blocks it priced are not solved again): a round adds to the one before
    from_last = base.planner == "clash" and base.mode == "mqo"
    last = start.result if start is not None and start.result is not None else base.previous
    for _ in range(max_rounds):
        if cancelled is not None and cancelled():
            return
        if max_limit is not None and limit > max_limit:
            limit = max_limit
        monitor = None if on_report is None else _shifted(on_report, time.perf_counter() - t0, best)
        round_options = base.changed(time_limit=limit, monitor=monitor)
        if from_last and last is not None:
            round_options = round_options.changed(previous=last)
        try:
            res = optimize_fn(workload, round_options)
        except NoSolutionError:  # no plan in this round: the next one has longer
            res = None
        last = res if res is not None else last
        if cancelled is not None and cancelled():
            return
        if res is not None:
            p = progress_of(res, time.perf_counter() - t0, best.bound if best is not None else 0.0)
            if best is not None and best.incumbent <= p.incumbent and p.status != "optimal":
                p = Progress(p.seconds, best.incumbent, max(best.bound, p.bound), best.status, best.result)
            best = p
            yield p
            if p.status == "optimal":
                return
        if max_limit is not None and limit >= max_limit:
            return
        limit *= growth


def _shifted(on_report: Callable[[Report], None], offset: float, best: Progress | None) -> Monitor:
    """A monitor for one round that passes on, ``offset`` seconds later, what improves on the
    rounds before it (``best``): a round starts from its own fallback plan and a bound of 0,
    which are no news to a user who saw the earlier rounds.

    >>> seen = []
    >>> m = _shifted(seen.append, 2.0, None)
    >>> m.begin({"all": 1300.0}); m.report("all", 1000.0, 700.0)
    >>> [(r.incumbent, r.bound) for r in seen]
    [(1300.0, 0.0), (1000.0, 700.0)]
    >>> seen.clear(); m = _shifted(seen.append, 2.0, Progress(1.0, 1100.0, 650.0, "time_limit", None))
    >>> m.begin({"all": 1300.0}); m.report("all", 1000.0, 600.0)
    >>> [(r.incumbent, r.bound) for r in seen]
    [(1000.0, 650.0)]
    """
    state = [] if best is None else [best.incumbent, best.bound]

    def passed(r: Report) -> None:
        if state:
            incumbent, bound = min(state[0], r.incumbent), max(state[1], r.bound)
            if (incumbent, bound) == tuple(state):
                return
        else:
            incumbent, bound = r.incumbent, r.bound
        state[:] = [incumbent, bound]
        on_report(Report(r.seconds + offset, incumbent, bound))

    return Monitor(on_report=passed)
