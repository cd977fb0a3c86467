"""Figure 7(a) on a standalone Spark cluster of one and then two one-core workers on this
machine: input tuples/s of the mqo plan in the distributed mode, in the driver mode and of
native Spark, per worker count.

Usage::

    python benchmarks/spark_cluster_scale.py [--sf 0.1] [--seconds 1] [--batch 5000]
                                             [--engines mqo-distributed,native,mqo] [--repeat 1]
                                             [--native-partitions 1]

One driver (this process) on the cluster's master: the engines run with one worker, then a
second worker joins, the driver's application gets its executor, and they run again (the
distributed mode's shards: the task slots when a deployment starts).  The engines' order is
rotated between repeats; every run's results are checked against the oracle.  Throughput and
its accounting are ``benchmarks/spark_mqo.py``'s (input tuples / the union of Spark's trigger
intervals); the cluster is started as ``tests/test_spark_cluster.py`` starts it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from spark_mqo import (NATIVE_OPTIONS, PLAN_OPTIONS, _record_phases, n_tuples, plan_key, run_engine,  # noqa: E402  (after the paths above)
                       time_slice, warm_up, workload_file)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--engines", default="mqo-distributed,native,mqo")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--native-partitions", type=int, default=1,
                    help="shuffle partitions of the native query (spark_mqo.py's default 1; 0 = the cores)")
    args = ap.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]

    from test_spark_cluster import START_TIMEOUT, Cluster

    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.model.tables import read_inputs
    from mqjoin.model.workload import load_workload
    from mqjoin.planning.optimizer import optimize
    from mqjoin.runtime.oracle import oracle_results
    from mqjoin.runtime.spark.session import session_cores, spark_session

    _record_phases()
    streams = tpch_streams(args.sf)
    w = load_workload(workload_file("tpch_fig7a.yaml"))
    tables = time_slice(read_inputs(w, streams.directory), args.seconds)
    truth = oracle_results(w, tables)
    plans = {e: optimize(w, **PLAN_OPTIONS[plan_key(e)]).plan for e in engines}
    if args.native_partitions:
        NATIVE_OPTIONS["partitions"] = args.native_partitions
    root = Path(tempfile.mkdtemp(prefix="mqjoin-scale-"))
    cluster = Cluster(root)
    os.environ.update({k: v for k, v in cluster.env.items() if k.startswith(("SPARK_LOCAL_IP", "PYSPARK"))})
    rows = []
    try:
        cluster.start(workers=1)
        spark = spark_session(cluster.url, conf={"spark.driver.memory": "1g", "spark.executor.memory": "1g"})
        warm_up(spark, streams.directory)
        print(f"Figure 7(a), SF {args.sf:g}, first {args.seconds:g} s: {n_tuples(tables):,} tuples in batches of "
              f"{args.batch:,}, {sum(map(len, truth.values())):,} results; standalone cluster on this machine "
              f"({os.cpu_count()} cores)", flush=True)
        for workers in (1, 2):
            if workers == 2:
                cluster.add_worker("worker1")
                deadline = time.time() + START_TIMEOUT
                while session_cores(spark) < 2:
                    if time.time() > deadline:
                        raise RuntimeError("the second worker's executor did not join the application")
                    time.sleep(0.5)
                warm_up(spark, streams.directory)  # the new executor's Python workers and JVM code paths
            for k in range(args.repeat):
                order = engines[k % len(engines):] + engines[:k % len(engines)]
                for e in order:
                    r = run_engine(e, plans[e], tables, spark, truth, timeout=args.timeout,
                                   max_rows_per_batch=args.batch)
                    r.update(workers=workers, repeat=k, cores=session_cores(spark), load_end=os.getloadavg()[0])
                    rows.append(r)
                    print(f"  {workers} worker(s), {e:<16} {r.get('throughput') or 0:>9,.0f} tuples/s  "
                          f"{r.get('trigger_mean_s') or 0:>6.2f} s/batch  "
                          f"{'equal to the oracle' if r.get('equal') else 'DIFFERENT / ' + str(r.get('error'))}  "
                          f"load {r['load']:.1f}/{r['load_end']:.1f}", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("\n| workers | engine | tuples/s (median) | runs | s/batch (median) | results |")
    print("|---:|---|---:|---:|---:|---|")
    for workers in (1, 2):
        for e in engines:
            got = [r for r in rows if r["workers"] == workers and r["engine"] == e]
            tp = sorted(r.get("throughput") or 0 for r in got)
            sb = sorted(r.get("trigger_mean_s") or 0 for r in got)
            ok = all(r.get("equal") for r in got)
            print(f"| {workers} | {e} | {tp[len(tp) // 2]:,.0f} | {len(got)} | {sb[len(sb) // 2]:.2f} | "
                  f"{'= oracle' if ok else 'DIFFER'} |")
    return 0 if all(r.get("equal") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
