"""Starting plans on Spark: :func:`deploy` (a running :class:`~.deployment.Deployment`, or an
adaptive one) and :func:`run_spark` (deploy, wait, write the results), both under a
:class:`DeployOptions` value (or its fields as keywords), and :func:`spark_engine`.

>>> from mqjoin.runtime.spark.launch import spark_mode
>>> spark_mode("auto", "local[*]")
'driver'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from mqjoin.model.errors import EngineError
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload
from mqjoin.planning.options import with_keywords
from mqjoin.planning.plan import Plan
from mqjoin.runtime.spark.deployment import Deployment, Pacing, check_deployment
from mqjoin.runtime.spark.mode import MODES, spark_mode

__all__ = ["MODES", "DeployOptions", "Deployment", "Pacing", "deploy", "run_spark", "spark_engine", "spark_mode"]


@dataclass(frozen=True)
class DeployOptions:
    """How :func:`deploy` starts a plan on Spark, checked when the value is made.

    ``engine``: ``mqjoin`` (the plan) or ``native`` (Spark's own joins of its workload);
    ``spark``: a session to use (else one for ``master`` with ``conf``; not part of the value's
    identity); ``checkpoint``: where Spark and the engine keep their state (default: a temporary
    directory); ``rate``, ``speedup``, ``max_rows_per_batch``, ``trigger_seconds``: the replay's
    :class:`Pacing`; ``adaptive`` (an :class:`~mqjoin.adaptive.policy.AdaptivePolicy`, or True
    for the default one), ``changes`` (a query changelog) and ``optimizer`` (the plan of every
    epoch; default :func:`mqjoin.planning.optimizer.optimize` with the policy's settings): run
    adaptively (any of them); ``mode``: where the plan's stores live (:func:`spark_mode`);
    ``partitions``: shuffle partitions of the native baseline's joins (default: the session's
    cores).

    >>> DeployOptions(speedup=10).pacing
    Pacing(rate=None, speedup=10, max_rows_per_batch=None, trigger_seconds=None)
    >>> DeployOptions(engine="native", adaptive=True)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.EngineError: adaptivity runs on the mqjoin engine, not on 'native' (Spark's own joins have no
    plan to adapt)
    """

    engine: str = "mqjoin"
    spark: Any = field(default=None, compare=False, repr=False)
    master: str | None = None
    checkpoint: str | Path | None = None
    rate: float | None = None
    speedup: float | None = None
    max_rows_per_batch: int | None = None
    trigger_seconds: float | None = None
    conf: Mapping[str, Any] | None = None
    adaptive: Any = None
    changes: tuple = ()
    optimizer: Any = field(default=None, compare=False)
    mode: str = "auto"
    partitions: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", tuple(self.changes))
        check_deployment(self.engine, self.mode, self.partitions)
        self.pacing.options()  # bad pacing fails before Spark starts
        if self.is_adaptive:
            if self.engine != "mqjoin":
                raise EngineError(f"adaptivity runs on the mqjoin engine, not on {self.engine!r} (Spark's own joins "
                                  "have no plan to adapt)")
            if self.mode == "distributed":
                raise EngineError("adaptive deployments keep their stores in the driver's executor (--spark-mode "
                                  "driver or auto); the distributed mode runs static plans")

    @property
    def pacing(self) -> Pacing:
        return Pacing(self.rate, self.speedup, self.max_rows_per_batch, self.trigger_seconds)

    @property
    def is_adaptive(self) -> bool:
        """Whether the deployment runs adaptively (a policy, a changelog or an optimiser given)."""
        return (self.adaptive is not None and self.adaptive is not False) or bool(self.changes) \
            or self.optimizer is not None


def deploy(plan: Plan | Workload, data: str | Path | Mapping[str, Table], out: str | Path,
           options: DeployOptions | None = None, /, **keywords: Any) -> Deployment:
    """Start ``plan`` (engine ``mqjoin``) or the native baseline of its workload (engine
    ``native``) on Spark and return the running :class:`Deployment`: ``options`` (a
    :class:`DeployOptions`) with the ``keywords`` given — its fields — changed.

    With ``adaptive``, ``changes`` or ``optimizer`` the workload (a plan's, or a
    :class:`Workload`) runs adaptively — re-optimised every epoch, queries added and removed
    while it runs — and the result is an :class:`~.epochs.AdaptiveDeployment` (paper Section
    VI; see :mod:`.epochs`)."""
    o = with_keywords(DeployOptions, options, keywords)
    if o.is_adaptive:
        from mqjoin.adaptive.policy import AdaptivePolicy
        from mqjoin.runtime.spark.epochs import AdaptiveDeployment

        policy = o.adaptive if isinstance(o.adaptive, AdaptivePolicy) else AdaptivePolicy()
        return AdaptiveDeployment(plan, data, out, policy=policy, changes=o.changes, optimizer=o.optimizer,
                                  spark=o.spark, master=o.master, checkpoint=o.checkpoint, pacing=o.pacing,
                                  conf=o.conf).start()
    if isinstance(plan, Workload):
        raise EngineError("deploy needs a plan (mqjoin.planning.optimizer.optimize(workload).plan), or adaptive=… to "
                          "let "
                          "the adaptive controller choose the plan of every epoch")
    return Deployment(plan, data, out, engine=o.engine, spark=o.spark, master=o.master, checkpoint=o.checkpoint,
                      pacing=o.pacing, conf=o.conf, mode=o.mode, partitions=o.partitions).start()


def run_spark(plan: Plan | Workload, data: str | Path | Mapping[str, Table], out: str | Path,
              options: DeployOptions | None = None, /, *, timeout: float | None = None, **keywords: Any) -> Deployment:
    """Deploy, wait until all input is consumed, stop, write ``OUT/<query>.parquet`` (adaptive
    deployments too: ``adaptive=``, ``changes=``, ``optimizer=`` as in :func:`deploy`)."""
    d = deploy(plan, data, out, with_keywords(DeployOptions, options, keywords))
    try:
        if not d.wait(timeout):
            raise EngineError(f"the deployment did not finish within {timeout} s; raise --timeout or the rate")
    finally:
        d.stop()
        d.cleanup()
    d.write_results()
    return d


def spark_engine(out: str | Path, options: DeployOptions = DeployOptions(), *, timeout: float | None = None
                 ) -> Callable[[Plan, Mapping[str, Table]], Deployment]:
    """Spark as an :class:`~mqjoin.runtime.contracts.Engine`: ``engine(plan, tables)`` runs the
    plan to the end of its input by :func:`run_spark` (results under ``out``; ``options``, e.g.
    ``mode="distributed"`` for the sharded engine, ``adaptive=`` for the adaptive driver engine)
    and returns the finished deployment, whose ``result_sets()`` and ``summary()`` are the run's."""

    def engine(plan: Plan, tables: Mapping[str, Table], /) -> Deployment:
        return run_spark(plan, tables, out, options, timeout=timeout)

    return engine
