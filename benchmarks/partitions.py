"""Stores per logical partition on the TPC-H plans: the skew a cluster would see.

For Figure 7(a) and the ten-query workload over TPC-H SF ``--sf`` streams (generated on first
use), the default (mqo) plan's every store at 8, 32 and 128 partitions
(:func:`mqjoin.runtime.partitions.project`, what ``mqjoin partitions`` prints): ``d`` the
distinct values of its partition attribute, then per partition count the max/mean of the
rows held at the end and of the probe messages over the run, measured on the data (one run
of the vectorised executor), and the model's fullest partition over the model's mean
(``P`` × the share of the ``d`` values that the partition function puts into the fullest
partition, for routed messages and rows).  Then what counting costs the driver mode per
micro-batch: the vectorised executor over the whole input in batches of ``--batch`` tuples,
without and with the per-partition counts of every batch (CPU seconds, median of ``--reps``).

    python benchmarks/partitions.py --sf 0.01,0.1 [--workloads fig7a,10q] [--batch 5000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from mqjoin.datasets.commands import load_named_workload
from mqjoin.datasets.tpch import tpch_streams
from mqjoin.model.tables import read_inputs
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.partitions import PartitionTally, project, store_partitions
from mqjoin.runtime.vector import Arrivals, BatchExecutor

WORKLOADS = {"fig7a": "tpch_fig7a.yaml", "10q": "tpch_10q.yaml"}
COUNTS = (8, 32, 128)


def skew_table(name: str, sf: float, plan, tables) -> list[str]:
    rows = project(plan, tables, (1, *COUNTS))  # P = 1: the model's whole store
    by = {}
    for r in rows:
        by.setdefault((r.store, r.partition, r.distinct), {})[r.partitions] = r
    lines = []
    for (store, attr, d), ps in sorted(by.items()):
        cells = []
        for P in COUNTS:
            r = ps[P]
            whole = ps[1].model_rows
            model = P * r.model_rows / whole if whole else 1.0
            cells.append(f"{_x(r.rows_skew):>5} {_x(r.messages_skew):>5} {model:>5.2f}")
        lines.append(f"{name:<6} {sf:>4g} {store[:44]:<44} {attr:<18} {d or 0:>7,}  " + "   ".join(cells))
    return lines


def _x(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def overhead(plan, tables, batch: int, reps: int) -> tuple[float, float]:
    parts = list(Arrivals(plan.workload, tables, BatchExecutor(plan).source_need).batches(batch))
    out = {}
    for counted in [c for _ in range(max(reps, 1)) for c in (False, True)]:  # interleaved
        ex = BatchExecutor(plan)
        if counted:
            ex.tally = PartitionTally(ex)
        t0 = time.process_time()  # CPU seconds: the machine's other jobs count less
        for f in parts:
            if counted:
                ex.tally.reset()
            ex.feed(f)
            if counted:
                store_partitions(ex, ex.tally)
        out.setdefault(counted, []).append(time.process_time() - t0)
    return statistics.median(out[False]), statistics.median(out[True])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", default="0.01")
    p.add_argument("--workloads", default="fig7a,10q")
    p.add_argument("--batch", type=int, default=5000)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    lines, costs = [], []
    for sf in (float(x) for x in a.sf.split(",")):
        data = tpch_streams(sf).directory
        for name in a.workloads.split(","):
            w = load_named_workload(WORKLOADS[name])
            tables = read_inputs(w, data)
            plan = optimize(w).plan
            lines += skew_table(name, sf, plan, tables)
            plain, counted = overhead(plan, tables, a.batch, a.reps)
            costs.append(f"{name:<6} {sf:>4g} {a.batch:>6,} {plain:>9.2f} {counted:>9.2f} {counted / plain - 1:>8.1%}")
    head = "   ".join(f"P={P:<3} rows  msgs model" for P in COUNTS)
    print(f"{'wl':<6} {'SF':>4} {'store':<44} {'partition':<18} {'d':>7}  {head}")
    print("\n".join(lines))
    print(f"\nload average {os.getloadavg()[0]:.1f}; executor CPU seconds, whole input, median of {a.reps}")
    print(f"{'wl':<6} {'SF':>4} {'batch':>6} {'plain':>9} {'counted':>9} {'overhead':>8}")
    print("\n".join(costs))


if __name__ == "__main__":
    main()
