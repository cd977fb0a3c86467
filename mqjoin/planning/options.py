"""The optimiser's options, validated in one place.

Every interface that takes a mode, a partitioning policy, a solver, a time limit or an MIR
budget — :func:`mqjoin.planning.optimizer.optimize`, the CLI and
:class:`mqjoin.adaptive.policy.AdaptivePolicy` — checks them here and raises
:class:`~mqjoin.model.errors.OptionError`, whose message names the option, the bad value and the
allowed ones.  :class:`OptimizeOptions` holds them as one value, checked when it is made, which
the layers between a user and a planner (the explorer's model, the command line, the comparison,
the planners themselves) pass on instead of a dozen keywords.

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
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from mqjoin.model.errors import OptionError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    _Options = TypeVar("_Options", bound=DataclassInstance)

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


@dataclass(frozen=True)
class OptimizeOptions:
    """How to optimise a workload: every option of :func:`mqjoin.planning.optimizer.optimize`
    but the workload, checked when the value is made (:func:`check_options`; whether an option
    fits the planner is :func:`mqjoin.planners.registry.check_fit`'s, since the planner says).

    ``mode``, ``partitioning``, ``mirs``: docs/model.md §5; ``solver``, ``time_limit``: the
    ILP's; ``mir_budget``: tuples of MIR stores at most; ``replica_budget``: tuples of replicas
    beyond a store's first (policy ``budget``); ``planner``: a name of
    :data:`mqjoin.planners.registry.PLANNERS`; ``tree_shape``, ``decompose``, ``pmjoin``: the
    options of the planners that take them (a binary tree's shape, MJoin decomposition,
    :class:`~mqjoin.planners.pmjoin.PMJoinOptions`); ``monitor``: a
    :class:`~mqjoin.planning.ilp.monitor.Monitor` told the ILP's progress (not part of the
    value's identity: two options differing only in it are equal); ``memory_ties``: break ties
    within a sampled size's error by memory (:mod:`mqjoin.planning.ties`); ``previous``: an
    earlier result of the ``clash`` planner (mode ``mqo``) to re-plan from — the independent
    parts of the ILP that the change leaves as they were keep their answers and are not solved
    again (:func:`mqjoin.planning.clash.replan`; not part of the value's identity either).

    >>> o = OptimizeOptions(mode="individual", mirs=False)
    >>> o.planner, o.changed(planner="tree").planner, o == OptimizeOptions(mode="individual", mirs=False)
    ('clash', 'tree', True)
    >>> OptimizeOptions(solver="glpk")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.OptionError: unknown solver 'glpk' (choose highs or cbc)
    """

    mode: str = "mqo"
    partitioning: str = "single"
    mirs: bool = True
    solver: str = "highs"
    time_limit: float | None = None
    mir_budget: float | None = None
    replica_budget: float | None = None
    planner: str = "clash"
    tree_shape: str | None = None
    decompose: bool = False
    pmjoin: Any = None
    monitor: Any = field(default=None, compare=False, repr=False)
    memory_ties: bool = True
    previous: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_options(self.mode, self.partitioning, self.solver, self.time_limit, self.mir_budget, self.replica_budget)

    def changed(self, **changes: Any) -> "OptimizeOptions":
        """This value with ``changes`` (checked again)."""
        return replace(self, **changes) if changes else self

    @staticmethod
    def of(options: "OptimizeOptions | None" = None, **keywords: Any) -> "OptimizeOptions":
        """``options`` (default: the defaults) with the ``keywords`` given: how the keyword
        interface of :func:`~mqjoin.planning.optimizer.optimize` builds its value.

        >>> OptimizeOptions.of(None, planner="tree").planner, OptimizeOptions.of(OptimizeOptions(mode="shared")).mode
        ('tree', 'shared')
        >>> OptimizeOptions.of(modes="mqo")  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        mqjoin.model.errors.OptionError: unknown option 'modes' (choose among mode, partitioning, mirs, solver,
        time_limit, mir_budget, replica_budget, planner, tree_shape, decompose, pmjoin, monitor, memory_ties,
        previous)
        """
        return with_keywords(OptimizeOptions, options, keywords)


def with_keywords(cls: type[_Options], options: _Options | None, keywords: dict[str, Any]) -> _Options:
    """``options`` — a value of the frozen dataclass ``cls``, None for its defaults — with
    ``keywords`` (its fields) changed: how an interface that takes an options value also takes
    keywords.  An unknown keyword is an :class:`~mqjoin.model.errors.OptionError` that lists the
    known ones."""
    names = [f.name for f in fields(cls)]
    unknown = [k for k in keywords if k not in names]
    if unknown:
        raise OptionError(f"unknown option {unknown[0]!r} (choose among {', '.join(names)})")
    return cls(**keywords) if options is None else replace(options, **keywords) if keywords else options
