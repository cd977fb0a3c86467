"""Bytes per store row of the vectorised executor: the figure behind ``--spark-mode auto``.

Runs a TPC-H plan through :class:`mqjoin.runtime.vector.BatchExecutor` in batches and prints,
per workload and scale factor, the live store rows, the bytes the stores' arrays hold (columns,
arrival numbers, key indexes) and the growth of the process's resident memory, each per row.
Then what ``--spark-mode auto`` chooses for the mqo plan and the plan under ``--mir-budget 50``
on a local master with this machine's available memory (no Spark session is started).

    python benchmarks/state_bytes.py --sf 0.01,0.1 --workloads tpch_fig7a.yaml,tpch_10q.yaml
"""

from __future__ import annotations

import argparse
import gc

import numpy as np


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def array_bytes(ex) -> int:
    seen, total = set(), 0

    def add(a) -> None:
        nonlocal total
        if isinstance(a, np.ndarray) and id(a) not in seen:
            seen.add(id(a))
            total += a.nbytes

    for segs in ex.stores.values():
        for seg in segs:
            f = seg.frame
            add(f.seq)
            for c in f.cols:
                for a in c.values():
                    add(a)
            for ix in seg.indexes.values():
                for a in (ix.start, ix.count, ix.rows):
                    add(a)
                total += ix.codes.memory_usage()
    return total


def measure(workload: str, sf: float, batch: int) -> dict:
    from mqjoin.datasets.commands import load_named_workload
    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.model.tables import read_inputs
    from mqjoin.planning.optimizer import optimize
    from mqjoin.runtime.vector import Arrivals, BatchExecutor

    w = load_named_workload(workload)
    tables = read_inputs(w, tpch_streams(sf).directory)
    plan = optimize(w).plan
    ex = BatchExecutor(plan)
    arrivals = Arrivals(w, tables, ex.source_need)
    gc.collect()
    before = rss()
    for frames in arrivals.batches(batch):
        ex.feed(frames)
    gc.collect()
    grown = rss() - before
    rows = sum(ex.live.values())
    return {"workload": workload, "sf": sf, "rows": rows, "array_bytes_per_row": array_bytes(ex) / rows,
            "rss_bytes_per_row": grown / rows, "model_bytes_per_row": ex.state_bytes() / rows}


def auto_choice(workload: str, sf: float, mir_budget: float | None) -> str:
    from mqjoin.datasets.commands import load_named_workload
    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.model.tables import read_inputs
    from mqjoin.planning.optimizer import optimize
    from mqjoin.runtime.spark.mode import mode_choice

    w = load_named_workload(workload)
    c = mode_choice(optimize(w, mir_budget=mir_budget).plan, read_inputs(w, tpch_streams(sf).directory),
                    master="local[2]")
    return f"{c.mode}: {c.reason}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", default="0.01")
    p.add_argument("--workloads", default="tpch_fig7a.yaml,tpch_10q.yaml")
    p.add_argument("--batch", type=int, default=50000)
    a = p.parse_args()
    print(f"{'workload':<16} {'SF':>5} {'live rows':>10} {'arrays B/row':>13} {'RSS B/row':>10} {'8 B/field':>10}")
    for sf in (float(x) for x in a.sf.split(",")):
        for wl in a.workloads.split(","):
            m = measure(wl, sf, a.batch)
            print(f"{wl:<16} {sf:>5g} {m['rows']:>10,} {m['array_bytes_per_row']:>13.0f} "
                  f"{m['rss_bytes_per_row']:>10.0f} {m['model_bytes_per_row']:>10.0f}")
    print(f"\n{'workload':<16} {'SF':>5} {'plan':<14} --spark-mode auto on local[2]")
    for sf in (float(x) for x in a.sf.split(",")):
        for wl in a.workloads.split(","):
            for label, budget in (("mqo", None), ("mir-budget 50", 50)):
                print(f"{wl:<16} {sf:>5g} {label:<14} {auto_choice(wl, sf, budget)}")


if __name__ == "__main__":
    main()
