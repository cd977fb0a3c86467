"""The optimiser's options, validated in one place.

Every interface that takes a mode, a partitioning policy, a solver, a time limit or an MIR
budget — :func:`mqjoin.planning.optimizer.optimize`, the CLI and
:class:`mqjoin.adaptive.policy.AdaptivePolicy` — checks them here and raises
:class:`~mqjoin.model.errors.OptionError`, whose message names the option, the bad value and the
allowed ones.

>>> check_options(mode="mqo", partitioning="replicas", solver="cbc", time_limit=5, mir_budget=0)
>>> check_options(partitioning="both")
Traceback (most recent call last):
...
mqjoin.model.errors.OptionError: unknown partitioning policy 'both' (choose single, replicas, budget)
>>> check_options(time_limit=0)
Traceback (most recent call last):
...
mqjoin.model.errors.OptionError: the time limit must be a positive number of seconds, got 0
"""

from __future__ import annotations

import math
from typing import Any

from mqjoin.model.errors import OptionError

#: docs/model.md §5's modes
MODES = ("mqo", "individual", "shared")
#: docs/model.md §5's partitioning policies
POLICIES = ("single", "replicas")
#: the policy between them: a store may be kept once per partition attribute, within a budget
#: of memory for the replicas beyond the first (``single`` at 0, ``replicas`` when unbounded)
BUDGET = "budget"
ALL_POLICIES = POLICIES + (BUDGET,)
#: ILP solvers (HiGHS through highspy, CBC through PuLP)
SOLVERS = ("highs", "cbc")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_mode(mode: Any) -> None:
    """``mode`` is one of :data:`MODES`.

    >>> check_mode("shared")
    """
    if mode not in MODES:
        raise OptionError(f"unknown mode {mode!r} (choose one of {', '.join(MODES)})")


def check_policy(partitioning: Any) -> None:
    """``partitioning`` is one of :data:`ALL_POLICIES`.

    >>> check_policy("single")
    """
    if partitioning not in ALL_POLICIES:
        raise OptionError(f"unknown partitioning policy {partitioning!r} (choose {', '.join(ALL_POLICIES)})")


def check_solver(solver: Any) -> None:
    """``solver`` is one of :data:`SOLVERS`.

    >>> check_solver("glpk")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.OptionError: unknown solver 'glpk' (choose highs or cbc)
    """
    if solver not in SOLVERS:
        raise OptionError(f"unknown solver {solver!r} (choose {' or '.join(SOLVERS)})")


def check_time_limit(time_limit: Any) -> None:
    """``time_limit`` is ``None`` (no limit) or a positive finite number of seconds.

    >>> check_time_limit(None), check_time_limit(0.5)
    (None, None)
    """
    if time_limit is not None and (not _number(time_limit) or time_limit <= 0):
        raise OptionError(f"the time limit must be a positive number of seconds, got {time_limit!r}")


def check_budget(budget: Any, what: str = "MIR memory budget") -> None:
    """A memory budget is ``None`` (unbounded) or a finite number of tuples ≥ 0.

    >>> check_budget(-5)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.OptionError: the MIR memory budget must be a number of tuples ≥ 0, got -5
    """
    if budget is not None and (not _number(budget) or budget < 0):
        raise OptionError(f"the {what} must be a number of tuples ≥ 0, got {budget!r}")


def check_mir_budget(mir_budget: Any) -> None:
    """``mir_budget`` is ``None`` (unbounded) or a finite number of tuples ≥ 0."""
    check_budget(mir_budget)


def check_solution_limit(solution_limit: Any, solver: Any = "highs") -> None:
    """``solution_limit`` is ``None`` or a positive number of improving solutions after which
    HiGHS stops (:func:`mqjoin.planning.ilp.solve`: a limit that does not depend on the machine, unlike time).

    >>> check_solution_limit(10), check_solution_limit(None, "cbc")
    (None, None)
    >>> check_solution_limit(10, "cbc")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.OptionError: a solution limit needs solver 'highs', got 'cbc'
    """
    if solution_limit is None:
        return
    if isinstance(solution_limit, bool) or not isinstance(solution_limit, int) or solution_limit < 1:
        raise OptionError(f"the solution limit must be a positive integer, got {solution_limit!r}")
    if solver != "highs":
        raise OptionError(f"a solution limit needs solver 'highs', got {solver!r}")


def check_options(mode: Any = "mqo", partitioning: Any = "single", solver: Any = "highs",
                  time_limit: Any = None, mir_budget: Any = None, replica_budget: Any = None) -> None:
    """All of the above at once (defaults are valid, so pass only what was given).

    >>> check_options(solver="highs", mir_budget=float("inf"))
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.OptionError: the MIR memory budget must be a number of tuples ≥ 0, got inf
    """
    check_mode(mode)
    check_policy(partitioning)
    check_solver(solver)
    check_time_limit(time_limit)
    check_mir_budget(mir_budget)
    check_budget(replica_budget, "replica memory budget")
