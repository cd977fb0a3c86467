"""Where a micro-batch of the distributed Spark mode spends its time, and what the driver
holds while the state grows: per batch the input rows, seconds, Spark jobs and stages, the
state rows after it, and the engine's phases (``job``: the batch's Spark job, from submitting
it to its shards' reports on the driver; ``waves``: the time the shards spent running the
plan's edges — per wave the slowest shard's, summed over the waves).

Usage::

    python benchmarks/distributed_batch.py [--workload tpch_fig7a.yaml] [--sf 0.01] [--seconds 1]
                                           [--batch 5000] [--master local[2]] [--mode distributed]
                                           [--memory] [--every 1] [--no-warm-up] [--no-check] [--stages]

The input is the first ``--seconds`` of event time of the TPC-H streams (``mqjoin data
tpch``), the plan the workload's mqo plan; the results are checked against the oracle
(``--no-check``: not, for long runs whose oracle is slow).  ``--memory`` adds, sampled after
every batch, the driver's memory: the Python driver process's RSS, the JVM's RSS and its used
heap (after a requested GC) and the RSS of the Python workers the JVM started (in local mode
the executors' Python processes: where the distributed mode's tasks run).  ``--every k``
prints every k-th batch (and the last); the summary covers all of them.  ``--stages`` adds,
per batch, every stage of its Spark job from the Spark UI's REST API: its tasks, its wall
seconds (submitted to completed) and the summed run time of its tasks.
The phases named ``input …`` and ``shard …`` are the tasks' own timers (the slowest input
partition's and shard's seconds per step, summed over the waves): ``read`` the input rows as
Arrow, ``frames`` the source edges' frames routed, ``pickle``/``unpickle`` what crosses an
exchange, ``bind`` the shard's segments mapped, ``edges`` the executor's own work,
``results`` the result files, ``route`` the frames for other shards, ``finish`` the batch's
entries into the stores (merges, expiry), ``segments`` the segment files written.
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
from spark_mqo import _PHASE_ROWS, _record_phases, n_tuples, time_slice, workload_file

MB = 1 << 20


def memory_sampler(spark):
    """A function returning the driver's memory now (MB): the Python driver's RSS, the JVM's
    RSS and used heap, and the summed RSS of the Python processes the JVM started."""
    import psutil

    me = psutil.Process()
    jvm = [p for p in me.children() if "java" in p.name().lower()]
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    system = spark.sparkContext._jvm.java.lang.System

    def sample() -> dict[str, float]:
        system.gc()
        out = {"py_rss": me.memory_info().rss / MB,
               "jvm_heap": (runtime.totalMemory() - runtime.freeMemory()) / MB}
        rss, workers = 0.0, 0.0
        for j in jvm:
            try:
                rss += j.memory_info().rss / MB
                workers += sum(c.memory_info().rss for c in j.children(recursive=True)) / MB
            except psutil.Error:
                pass
        out["jvm_rss"], out["workers_rss"] = rss, workers
        return out

    return sample


def print_stages(spark, since: float) -> None:
    """Every stage of the Spark jobs submitted after ``since`` (epoch seconds), from the Spark
    UI's REST API: job, stage, tasks, wall seconds and the tasks' summed run seconds."""
    import json
    import urllib.request
    from datetime import datetime

    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"

    def get(path):
        with urllib.request.urlopen(base + path, timeout=30) as r:
            return json.load(r)

    def when(text):
        return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

    print(f"{'job':>5} {'stage':>6} {'tasks':>6} {'wall s':>8} {'task s':>8}  name")
    for job in sorted(get("/jobs"), key=lambda j: j["jobId"]):
        if "submissionTime" not in job or when(job["submissionTime"]) < since:
            continue
        for sid in sorted(job["stageIds"]):
            for st in get(f"/stages/{sid}"):
                if "submissionTime" not in st or "completionTime" not in st:
                    continue
                wall = when(st["completionTime"]) - when(st["submissionTime"])
                print(f"{job['jobId']:>5} {sid:>6} {st['numTasks']:>6} {wall:>8.2f} {st['executorRunTime'] / 1e3:>8.2f}"
                      f"  {st['name'][:60]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="tpch_fig7a.yaml")
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--mode", default="distributed", choices=("distributed", "driver"))
    ap.add_argument("--memory", action="store_true", help="sample the driver's memory after every batch")
    ap.add_argument("--every", type=int, default=1, help="print every k-th batch")
    ap.add_argument("--no-warm-up", dest="warm_up", action="store_false")
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip the oracle")
    ap.add_argument("--stages", action="store_true", help="print each batch's Spark stages (REST API)")
    args = ap.parse_args(argv)
    _record_phases()

    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.runtime.spark import launch as dep
    from mqjoin.runtime.spark.launch import run_spark
    from mqjoin.runtime.spark.session import spark_session

    streams = tpch_streams(args.sf)
    w = load_workload(workload_file(args.workload))
    tables = time_slice(read_inputs(w, streams.directory), args.seconds)
    plan = optimize(w).plan
    spark = spark_session(args.master)
    samples: dict[int, list[dict]] = {}
    if args.memory:
        sample = memory_sampler(spark)
        orig = dep.Deployment._on_report

        def on_report(self, report):
            orig(self, report)
            samples.setdefault(id(self), []).append(sample())

        dep.Deployment._on_report = on_report
    print(f"{args.workload}, SF {args.sf:g}, first {args.seconds:g} s: {n_tuples(tables):,} tuples in batches of "
          f"{args.batch:,}, {args.mode} mode on {args.master} ({os.cpu_count()} cores), "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for run in ("warm-up", "measured") if args.warm_up else ("measured",):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.time()
            d = run_spark(plan, tables, out, spark=spark, max_rows_per_batch=args.batch, timeout=3600, mode=args.mode)
            wall = time.time() - t0
            equal = d.results() == oracle_results(w, tables) if args.check and run == "measured" else None
        b = d.batches
        if run == "warm-up":
            continue
        rows = _PHASE_ROWS[id(d)]
        mem = samples.get(id(d), [])
        keys = [k for k in rows[0] if k not in ("batch", "rows", "seconds")]
        mkeys = list(mem[0]) if mem else []
        print(f"{'batch':>5} {'rows':>6} {'seconds':>8} {'jobs':>5} {'stages':>6} {'state rows':>11}  "
              + " ".join(f"{k:>11}" for k in keys + mkeys))
        for i, (r, (_, x)) in enumerate(zip(rows, b.iterrows())):
            if i % args.every and i != len(rows) - 1:
                continue
            m = mem[i] if i < len(mem) else {}
            print(f"{r['batch']:>5} {r['rows']:>6} {r['seconds']:>8.2f} {int(x['jobs']):>5} {int(x['stages']):>6} "
                  f"{int(x['state_rows']):>11,}  " + " ".join(f"{r.get(k, 0.0):>11.2f}" for k in keys)
                  + "".join(f" {m.get(k, 0.0):>11.0f}" for k in mkeys))
        if args.stages:
            print_stages(spark, t0)
        busy = float(b["seconds"].sum())
        check = "" if equal is None else f"; results {'equal to' if equal else 'DIFFERENT from'} the oracle"
        print(f"tuples/s {n_tuples(tables) / busy:,.0f} (busy {busy:.1f} s, wall {wall:.1f} s); "
              f"jobs/batch {b['jobs'].mean():.1f}, stages/batch {b['stages'].mean():.1f}, "
              f"s/batch {b['seconds'].mean():.2f} (median {b['seconds'].median():.2f}){check}; "
              f"load average {os.getloadavg()[0]:.1f}")
        if equal is False:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
