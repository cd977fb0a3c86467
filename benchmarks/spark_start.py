"""Spark's start with and without the driver JVM's class archive (:mod:`mqjoin.runtime.spark.cds`):
each trial a fresh process that starts the product's session (:func:`~mqjoin.runtime.spark.session.spark_session`),
runs a small query and a Python function (the first Python worker), then reads its JVM's CPU
seconds; trials alternate between the two, ``--rounds`` times.  The archive is made first if
it is missing (once; its seconds are printed).

    python benchmarks/spark_start.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TRIAL = r"""
import json, os, time
t0 = time.perf_counter()
from mqjoin.runtime.spark.session import spark_session
spark = spark_session()
t1 = time.perf_counter()
spark.range(10_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
t2 = time.perf_counter()
spark.range(100).mapInArrow(lambda batches: batches, "id long").count()
t3 = time.perf_counter()
pid = spark.sparkContext._gateway.proc.pid
fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print(json.dumps({"session": t1 - t0, "query": t2 - t1, "python": t3 - t2, "jvm_cpu": cpu,
                  "archive": any("SharedArchiveFile" in str(a) for a in args)}))
spark.stop()
"""


def trial(with_archive: bool) -> dict:
    env = dict(os.environ, MQJOIN_SPARK_CDS="1" if with_archive else "0")
    out = subprocess.run([sys.executable, "-c", TRIAL], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from mqjoin.runtime.spark import cds

    path = cds.archive_path()
    if not path.is_file():
        t0 = time.perf_counter()
        made = cds.make(path)
        print(f"archive {'made' if made else 'NOT made'} in {time.perf_counter() - t0:.1f} s: {path}")
    rows: dict[bool, list[dict]] = {False: [], True: []}
    loads = []
    for r in range(args.rounds):
        for with_archive in ((False, True) if r % 2 == 0 else (True, False)):
            loads.append(load())
            rows[with_archive].append(trial(with_archive))
    print(f"\n{args.rounds} rounds, load {min(loads):.1f}–{max(loads):.1f}; medians (s)\n")
    print("| driver JVM | session start | first query | first Python function | JVM CPU | archive in use |")
    print("|---|---:|---:|---:|---:|---|")
    for with_archive in (False, True):
        rs = rows[with_archive]

        def med(k: str, rs: list[dict] = rs) -> float:
            return statistics.median(x[k] for x in rs)

        print(f"| {'with the class archive' if with_archive else 'without'} | {med('session'):.2f} | "
              f"{med('query'):.2f} | {med('python'):.2f} | {med('jvm_cpu'):.1f} | "
              f"{sum(x['archive'] for x in rs)}/{len(rs)} |")


if __name__ == "__main__":
    main()
