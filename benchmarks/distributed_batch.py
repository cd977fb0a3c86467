"""Where a micro-batch of the distributed Spark mode spends its time: per batch the input
rows, seconds, Spark jobs and stages, and the engine's phases (``job``: the batch's Spark job,
from submitting it to its shards' reports on the driver; ``waves``: the time the shards spent
running the plan's edges — per wave the slowest shard's, summed over the waves).

Usage::

    python benchmarks/distributed_batch.py [--workload tpch_fig7a.yaml] [--sf 0.01] [--seconds 1]
                                           [--batch 5000] [--master local[2]]

The input is the first ``--seconds`` of event time of the TPC-H streams (``mqjoin data
tpch``), the plan the workload's mqo plan; the results are checked against the oracle.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import load_workload
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results

sys.path.insert(0, str(Path(__file__).parent))
from spark_mqo import _PHASE_ROWS, _record_phases, n_tuples, time_slice, workload_file  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="tpch_fig7a.yaml")
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--mode", default="distributed", choices=("distributed", "driver"))
    args = ap.parse_args(argv)
    _record_phases()

    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.runtime.spark.launch import run_spark
    from mqjoin.runtime.spark.session import spark_session

    streams = tpch_streams(args.sf)
    w = load_workload(workload_file(args.workload))
    tables = time_slice(read_inputs(w, streams.directory), args.seconds)
    plan = optimize(w).plan
    spark = spark_session(args.master)
    print(f"{args.workload}, SF {args.sf:g}, first {args.seconds:g} s: {n_tuples(tables):,} tuples in batches of "
          f"{args.batch:,}, {args.mode} mode on {args.master} ({os.cpu_count()} cores), "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for run in ("warm-up", "measured"):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.time()
            d = run_spark(plan, tables, out, spark=spark, max_rows_per_batch=args.batch, timeout=1800, mode=args.mode)
            wall = time.time() - t0
            equal = d.results() == oracle_results(w, tables)
        b = d.batches
        if run == "warm-up":
            continue
        rows = _PHASE_ROWS[id(d)]
        keys = [k for k in rows[0] if k not in ("batch", "rows", "seconds")]
        print(f"{'batch':>5} {'rows':>6} {'seconds':>8} {'jobs':>5} {'stages':>6}  " + " ".join(f"{k:>12}" for k in keys))
        for r, (_, x) in zip(rows, b.iterrows()):
            print(f"{r['batch']:>5} {r['rows']:>6} {r['seconds']:>8.2f} {int(x['jobs']):>5} {int(x['stages']):>6}  "
                  + " ".join(f"{r.get(k, 0.0):>12.2f}" for k in keys))
        busy = float(b["seconds"].sum())
        print(f"tuples/s {n_tuples(tables) / busy:,.0f} (busy {busy:.1f} s, wall {wall:.1f} s); "
              f"jobs/batch {b['jobs'].mean():.1f}, stages/batch {b['stages'].mean():.1f}, "
              f"s/batch {b['seconds'].mean():.2f} (median {b['seconds'].median():.2f}); "
              f"results {'equal to' if equal else 'DIFFERENT from'} the oracle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
