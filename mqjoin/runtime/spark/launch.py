"""Starting plans on Spark: :func:`deploy` (a running :class:`~.deployment.Deployment`, or an
adaptive one) and :func:`run_spark` (deploy, wait, write the results).

>>> from mqjoin.runtime.spark.launch import spark_mode
>>> spark_mode("auto", "local[*]")
'driver'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from mqjoin.model.errors import EngineError
from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload
from mqjoin.runtime.spark.deployment import MODES, Deployment, Pacing, spark_mode

__all__ = ["MODES", "Deployment", "Pacing", "deploy", "run_spark", "spark_engine", "spark_mode"]


def deploy(plan: Plan | Workload, data: str | Path | Mapping[str, Table], out: str | Path, *, engine: str = "mqjoin",
           spark=None, master: str | None = None, checkpoint: str | Path | None = None,
           rate: float | None = None, speedup: float | None = None, max_rows_per_batch: int | None = None,
           trigger_seconds: float | None = None, conf: Mapping[str, Any] | None = None,
           adaptive=None, changes=(), optimizer=None, mode: str = "auto", partitions: int | None = None) -> Deployment:
    """Start ``plan`` (``engine="mqjoin"``) or the native baseline of its workload
    (``engine="native"``) on Spark and return the running :class:`Deployment`.

    With ``adaptive`` (an :class:`~mqjoin.adaptive.policy.AdaptivePolicy`, or True for the default
    one) or a changelog ``changes``, the workload (a plan's, or a :class:`Workload`) runs
    adaptively — re-optimised every epoch by ``optimizer`` (default
    :func:`mqjoin.planning.optimizer.optimize` with the policy's settings), queries added and removed
    while it runs — and the result is an :class:`~.adaptive.AdaptiveDeployment`
    (paper Section VI; see :mod:`.epochs`).  ``mode``: where the plan's stores live
    (:func:`spark_mode`); ``partitions``: shuffle partitions of the native baseline's joins
    (default: the session's cores)."""
    pacing = Pacing(rate, speedup, max_rows_per_batch, trigger_seconds)
    if adaptive is not None and adaptive is not False or changes or optimizer is not None:
        from mqjoin.adaptive.policy import AdaptivePolicy
        from mqjoin.runtime.spark.epochs import AdaptiveDeployment

        if engine != "mqjoin":
            raise EngineError(f"adaptivity runs on the mqjoin engine, not on {engine!r} (Spark's own joins have "
                              "no plan to adapt)")
        if mode == "distributed":
            raise EngineError("adaptive deployments keep their stores in the driver's executor (--spark-mode "
                              "driver or auto); the distributed mode runs static plans")
        policy = adaptive if isinstance(adaptive, AdaptivePolicy) else AdaptivePolicy()
        return AdaptiveDeployment(plan, data, out, policy=policy, changes=changes, optimizer=optimizer, spark=spark,
                                  master=master, checkpoint=checkpoint, pacing=pacing, conf=conf).start()
    if isinstance(plan, Workload):
        raise EngineError("deploy needs a plan (mqjoin.planning.optimizer.optimize(workload).plan), or adaptive=… to let "
                          "the adaptive controller choose the plan of every epoch")
    return Deployment(plan, data, out, engine=engine, spark=spark, master=master, checkpoint=checkpoint,
                      pacing=pacing, conf=conf, mode=mode, partitions=partitions).start()


def run_spark(plan: Plan | Workload, data: str | Path | Mapping[str, Table], out: str | Path, *,
              timeout: float | None = None, **kwargs) -> Deployment:
    """Deploy, wait until all input is consumed, stop, write ``OUT/<query>.parquet`` (adaptive
    deployments too: ``adaptive=``, ``changes=``, ``optimizer=`` as in :func:`deploy`)."""
    d = deploy(plan, data, out, **kwargs)
    try:
        if not d.wait(timeout):
            raise EngineError(f"the deployment did not finish within {timeout} s; raise --timeout or the rate")
    finally:
        d.stop()
        d.cleanup()
    d.write_results()
    return d



def spark_engine(out: str | Path, *, timeout: float | None = None, **options: Any
                 ) -> Callable[[Plan, Mapping[str, Table]], Deployment]:
    """Spark as an :class:`~mqjoin.runtime.contracts.Engine`: ``engine(plan, tables)`` runs the
    plan to the end of its input by :func:`run_spark` (results under ``out``; ``options``:
    :func:`deploy`'s, e.g. ``mode="distributed"`` for the sharded engine, ``adaptive=`` for
    the adaptive driver engine) and returns the finished deployment, whose ``result_sets()``
    and ``summary()`` are the run's."""

    def engine(plan: Plan, tables: Mapping[str, Table], /) -> Deployment:
        return run_spark(plan, tables, out, timeout=timeout, **options)

    return engine
