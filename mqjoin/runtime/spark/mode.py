"""Where a Spark deployment keeps the plan's stores: ``driver`` (the in-process executor behind
``foreachBatch``) or ``distributed`` (every store sharded over the executors), chosen by
:func:`choose_mode` from the master and the estimated state, with the reason in words that
name the numbers (``--spark-mode auto``'s choice; docs/architecture.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from mqjoin.model.errors import EngineError
from mqjoin.model.tables import Table, time_range
from mqjoin.planning.plan import Plan
from mqjoin.runtime.spark.session import DEFAULT_MASTER
from mqjoin.support.units import count, size

MODES = ("auto", "driver", "distributed")  # where the plan's stores live (see spark_mode())


#: masters whose executors run on other machines: the stores go where the cluster's memory is
CLUSTER_MASTERS = ("spark://", "yarn", "k8s://", "mesos://")
#: bytes one store row takes in the driver mode's vectorised executor — its column arrays,
#: arrival number and key index — rounded up from the most measured on the TPC-H plans
#: (41–76 bytes of arrays, 41–79 bytes of resident memory per row at SF 0.1:
#: ``python benchmarks/state_bytes.py --sf 0.01,0.1``)
STATE_BYTES_PER_ROW = 100
#: the share of the driver's memory the estimated state may take before ``auto`` shards it:
#: the rest is the batch being processed, its results and Spark's own
DRIVER_SHARE = 0.5


@dataclass(frozen=True)
class ModeChoice:
    """Where a deployment keeps the plan's stores (``driver`` or ``distributed``) and why, in
    words that name the numbers."""

    mode: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


def choose_mode(mode: str, master: str, state_rows: float | None = None, memory: float | None = None,
                share: float = DRIVER_SHARE) -> ModeChoice:
    """The engine mode a deployment runs, and why.  ``driver`` keeps the stores in the
    in-process executor behind ``foreachBatch`` (:mod:`.driver`: one Spark job per
    micro-batch, exact restarts from its state journal), ``distributed`` shards every store
    over the executors (:mod:`.distributed`: state spread over the cluster).  ``auto``: on a
    cluster master (:data:`CLUSTER_MASTERS`) distributed; on a local master driver while the
    estimated state — ``state_rows`` (:func:`estimated_state_rows`) at
    :data:`STATE_BYTES_PER_ROW` — fits ``share`` of the ``memory`` bytes available to the
    driver's Python process (where the driver mode's stores live), else distributed.

    >>> choose_mode("auto", "local[2]", 2_212_771, 16 * 1024**3)
    ModeChoice(mode='driver', reason='estimated state 221 MB (2.2 million rows) ≤ 50 % of available memory 17 GB')
    >>> choose_mode("auto", "local[*]", 3e7, 2 * 1024**3).reason
    'estimated state 3.0 GB (30 million rows) > 50 % of available memory 2.1 GB'
    >>> choose_mode("auto", "spark://10.0.0.1:7077").to_dict()
    {'mode': 'distributed', 'reason': 'cluster master spark://10.0.0.1:7077: the stores are sharded over its executors'}
    >>> choose_mode("driver", "yarn").reason
    'asked for (--spark-mode driver)'
    """
    if mode not in MODES:
        raise EngineError(f"unknown Spark mode {mode!r}: choose one of {', '.join(MODES)}")
    if mode != "auto":
        return ModeChoice(mode, f"asked for (--spark-mode {mode})")
    if str(master).startswith(CLUSTER_MASTERS):
        return ModeChoice("distributed", f"cluster master {master}: the stores are sharded over its executors")
    if state_rows is None or memory is None:
        return ModeChoice("driver", f"local master {master}: the stores stay in the driver (no state estimate)")
    need, bound = state_rows * STATE_BYTES_PER_ROW, share * memory
    fits = need <= bound
    return ModeChoice("driver" if fits else "distributed",
                      f"estimated state {size(need)} ({count(state_rows)} rows) {'≤' if fits else '>'} "
                      f"{share * 100:g} % of available memory {size(memory)}")


def spark_mode(mode: str, master: str) -> str:
    """The mode :func:`choose_mode` picks without a state estimate (``auto``: distributed on a
    cluster master, driver on a local one).

    >>> spark_mode("auto", "local[2]"), spark_mode("auto", "spark://10.0.0.1:7077"), spark_mode("driver", "yarn")
    ('driver', 'distributed', 'driver')
    """
    return choose_mode(mode, master).mode


def estimated_state_rows(plan: Plan, tables: Mapping[str, Table] | None = None, span: float | None = None) -> float:
    """The rows the plan's stores hold at the end of a run over ``tables`` (or ``span`` time
    units of input at the workload's rates): the cost model's ``|⋈M| · Π min(w_R, S)`` per
    store over the input's event-time span ``S`` (:func:`mqjoin.planning.measured.memory_on`),
    or over the plan's horizon without either — its memory (docs/model.md §5)."""
    from mqjoin.planning.measured import memory_on

    if tables:
        span = time_range(tables)[1]
    return float(memory_on(plan, span=span if span and span > 0 else None))


def available_memory() -> float | None:
    """The machine's available memory in bytes (``MemAvailable``; None where it is unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def mode_choice(plan: Plan | None, tables: Mapping[str, Table] | None, mode: str = "auto", master: str | None = None,
                spark=None, span: float | None = None) -> ModeChoice:
    """:func:`choose_mode` for ``plan`` over ``tables`` (or ``span`` time units of input at the
    workload's rates: :func:`estimated_state_rows`) on the master of the running session
    ``spark``, else ``master``.  The memory is the machine's available memory: on a local
    master the driver mode's stores live in the driver's Python process, which
    ``spark.driver.memory`` (the JVM's heap) does not bound."""
    if spark is not None:
        master = spark.sparkContext.master
    if mode != "auto":
        return choose_mode(mode, master or DEFAULT_MASTER)
    if plan is None:
        return ModeChoice("driver", "adaptive: the plans of every epoch keep their stores in the driver's executor")
    return choose_mode(mode, master or DEFAULT_MASTER, estimated_state_rows(plan, tables, span), available_memory())
