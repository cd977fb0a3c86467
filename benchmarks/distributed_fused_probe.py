"""Prototype: the probes of one probe-tree depth as one join instead of one join per store.

``K`` stores of ``N`` rows each (hash-partitioned by their key into ``P`` partitions, locally
checkpointed as the distributed mode keeps them) are probed by ``M`` travelling tuples each:

* ``separate``: one routed join per store (the travelling tuples hashed by the key into the
  store's partitions, the store in place) — how the distributed mode probes today, all joins
  of the depth in one job (their results unioned and counted);
* ``fused``: the stores as one DataFrame keyed by ``(store, key)`` (hash-partitioned by both,
  checkpointed), the travelling tuples of every probe unioned with their target store's id,
  one join on ``(store, key)``.

Per variant: seconds (median of ``--repeat``), Spark jobs and stages of the probe, matches
(equal in both: the check).  Usage::

    python benchmarks/distributed_fused_probe.py [--stores 6] [--rows 50000] [--probes 5000]
                                                 [--partitions 2] [--repeat 5] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", type=int, default=6)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--probes", type=int, default=5_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from mqjoin.runtime.spark.distributed import job_cost
    from mqjoin.runtime.spark.session import spark_session

    spark = spark_session(args.master)
    sc = spark.sparkContext
    K, N, M, P = args.stores, args.rows, args.probes, args.partitions
    keys = max(N // 4, 1)  # about four stored entries per key

    def rows(n: int, salt: int):
        return spark.range(n).select((F.hash(F.col("id"), F.lit(salt)) % keys).cast("long").alias("k"),
                                     F.col("id").alias("v"), (F.col("id") * 0.5).alias("w"))

    stores = [rows(N, s).repartition(P, "k").localCheckpoint(eager=True) for s in range(K)]
    fused = None
    for s, df in enumerate(stores):
        part = df.select(F.lit(s).alias("st"), "k", "v", "w")
        fused = part if fused is None else fused.unionByName(part)
    fused = fused.repartition(P, "st", "k").localCheckpoint(eager=True)
    trav = [rows(M, 100 + s).localCheckpoint(eager=True) for s in range(K)]

    def separate():
        out = None
        for s in range(K):
            t = trav[s].repartition(P, "k").alias("t")
            j = t.join(stores[s].alias("s"), F.col("t.k") == F.col("s.k")).select(F.col("t.v").alias("tv"),
                                                                                  F.col("s.v").alias("sv"))
            out = j if out is None else out.unionByName(j)
        return out.count()

    def fused_join():
        t = None
        for s in range(K):
            part = trav[s].select(F.lit(s).alias("st"), "k", "v")
            t = part if t is None else t.unionByName(part)
        t = t.repartition(P, "st", "k").alias("t")
        j = t.join(fused.alias("s"), (F.col("t.st") == F.col("s.st")) & (F.col("t.k") == F.col("s.k")))
        return j.select(F.col("t.v").alias("tv"), F.col("s.v").alias("sv")).count()

    print(f"{K} stores × {N:,} rows, {M:,} probes each, {P} partitions, {args.master} ({os.cpu_count()} cores), "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<10} {'seconds':>8} {'jobs':>5} {'stages':>6} {'matches':>10}")
    for name, fn in (("separate", separate), ("fused", fused_join)):
        fn()  # warm-up
        secs, cost, n = [], None, None
        for i in range(args.repeat):
            group = f"fused-probe-{name}-{i}"
            sc.setJobGroup(group, group)
            t0 = time.time()
            n = fn()
            secs.append(time.time() - t0)
            cost = job_cost(sc, group)
        print(f"{name:<10} {statistics.median(secs):>8.2f} {cost[0]:>5} {cost[1]:>6} {n:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
