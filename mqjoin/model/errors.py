"""Typed errors of mqjoin.

Every error a user can cause is a subclass of :class:`MqjoinError`; its message names the
culprit (query, relation, attribute, file, column …) and says how to fix it.  The CLI prints
the message as one line on stderr and exits with code 2; widgets show it inline.

Which error for what:

* :class:`WorkloadError` and its subclasses — the workload (docs/model.md §1);
* :class:`OptionError` — an option of the optimiser (mode, partitioning policy, solver,
  time limit, MIR budget), wherever it is given: :func:`mqjoin.planning.optimizer.optimize`, the CLI,
  :class:`mqjoin.adaptive.policy.AdaptivePolicy` (all validate through :mod:`mqjoin.planning.options`);
* :class:`OptimizerError` — the optimiser ran but produced no plan;
* :class:`PlanError` — a plan value (e.g. read from JSON) is malformed or does not fit;
* :class:`DataError` — input *data* only (files, columns, values);
* :class:`AdaptiveError` — adaptivity settings and query changes;
* :class:`EngineError` — a deployment failed or cannot start;
* :class:`InternalError` — not the user's fault but a bug of mqjoin, e.g.
  :class:`ResultMismatchError` when an engine disagrees with the brute-force oracle.  The CLI
  exits with code 3 for these (2 means bad input);
* :class:`RunFailedError` — a deployment that started and then failed (a Spark job failed, not
  the input's fault): the CLI exits with code 4.

>>> from mqjoin.model.errors import UnknownRelationError, MqjoinError
>>> issubclass(UnknownRelationError, MqjoinError)
True
>>> from mqjoin.planning.options import check_options
>>> check_options(mode="best")
Traceback (most recent call last):
...
mqjoin.model.errors.OptionError: unknown mode 'best' (choose one of mqo, individual, shared)
"""

from __future__ import annotations


class MqjoinError(Exception):
    """Base class of every error mqjoin raises on bad input or an unusable result."""


# -- workload (docs/model.md §1) ---------------------------------------------------------------------


class WorkloadError(MqjoinError):
    """The workload (YAML file, string or Python value) is invalid."""


class WorkloadSyntaxError(WorkloadError):
    """The workload text cannot be parsed (YAML syntax, query notation, wrong types)."""


class UnknownRelationError(WorkloadError):
    """A query or selectivity names a relation that is not declared under ``relations``."""


class UnknownAttributeError(WorkloadError):
    """A query or selectivity names an attribute its relation does not declare."""


class DisconnectedQueryError(WorkloadError):
    """A query is not connected: it would need a cross product."""


class SelfJoinError(WorkloadError):
    """A query joins a relation with itself, or puts two attributes of one relation in a class."""


class SelectivityError(WorkloadError):
    """A selectivity is missing, out of (0, 1], or given inconsistently."""


class MissingSelectivityError(SelectivityError):
    """A class has no selectivity and the workload no default (``stats`` estimates it)."""


class FilterError(WorkloadError):
    """A query filter (docs/model.md §7) cannot be read, or its pass fraction is missing or out of (0, 1]."""


class MissingFractionError(FilterError):
    """A query's filter on a relation has no pass fraction; ``query`` and ``relation`` name it
    (an editor can then point at the box where the fraction goes)."""

    def __init__(self, message: str, query: str, relation: str):
        super().__init__(message)
        self.query, self.relation = query, relation


class SizeError(WorkloadError):
    """A measured join size (``sizes:``, docs/model.md §2) names a relation set no query joins,
    is ambiguous between queries, or contradicts another."""


class ValueRangeError(WorkloadError):
    """A rate, window, parallelism or horizon is out of its allowed range."""


class GeneratorError(WorkloadError, ValueError):
    """The parameters of a generated random workload (:mod:`mqjoin.datasets.random_workloads`) are invalid or
    cannot be met (e.g. more distinct queries than exist).  Also a ``ValueError``, as before."""


# -- optimisation -----------------------------------------------------------------------------


class OptionError(MqjoinError):
    """An optimiser option (mode, partitioning policy, solver, time limit, MIR budget) is invalid."""


class OptimizerError(MqjoinError):
    """The optimiser could not produce a plan."""


class SolverUnavailableError(OptimizerError):
    """The requested ILP solver is not installed."""


class InfeasibleError(OptimizerError):
    """The ILP has no solution (should not happen for valid workloads: a bug if it does)."""


class NoSolutionError(OptimizerError):
    """The solver stopped (time limit) before it found any plan."""


class PlannerError(OptimizerError):
    """A planner (``clash``, ``mjoin``, ``tree``) or one of its options does not fit the request."""


# -- plans and data ---------------------------------------------------------------------------


class PlanError(MqjoinError):
    """A plan (e.g. one read from JSON) is malformed or does not fit the workload."""


class DataError(MqjoinError):
    """Input data of a run is missing or malformed (file, column, value)."""


class JaqpotError(MqjoinError):
    """A JAQPOT plan, resource limit μ, refresh rate or freshness predicate is invalid."""


class AdaptiveError(MqjoinError):
    """An adaptivity setting (epoch length, threshold, sample) or a query change is invalid."""


class EngineError(MqjoinError):
    """A deployment failed or cannot start (Spark missing, Java missing, a job failed)."""


# -- bugs -------------------------------------------------------------------------------------


class RunFailedError(EngineError):
    """A deployment that started and then failed (a Spark job failed): exit code 4."""


class InternalError(MqjoinError):
    """A bug of mqjoin, not bad input: the message says what to report.  CLI exit code 3."""


class ResultMismatchError(InternalError):
    """An engine's results differ from the brute-force oracle's (docs/model.md §6) — ``run --check``."""


# -- resources ------------------------------------------------------------------------------


class ResourceLimitError(MqjoinError):
    """A run stopped itself at its memory budget (stored entries plus collected results);
    what it produced until then is kept."""
