"""The two in-process executors side by side: per tuple (the reference) vs vectorised.

Both run the same plan's rules (``mqjoin.runtime.rules``) over the same input: the per-tuple
:class:`~mqjoin.runtime.executor.Executor` one arrival at a time, the vectorised
:class:`~mqjoin.runtime.vector.BatchExecutor` a batch of arrivals at a time (``--batches``:
rows per batch; 0 = the whole input in one).  Workloads: the CLASH paper's Figure 7(a) and the
ten-query variant over TPC-H SF ``--sf`` streams (generated on first use, as
``benchmarks/spark_mqo.py`` does).  Times count the executor only (input tuples already in
memory in each executor's form; results kept as row indices); both must produce the same
results and probe messages (checked).  Prints a table.

The per-tuple row builds every input tuple as a Python tuple on purpose
(:func:`~mqjoin.runtime.rules.base_tuples`, the reference executor's form): it is the executor
being compared.  The vectorised rows take their batches from the tables' columns
(:class:`~mqjoin.runtime.vector.Arrivals`), as ``mqjoin run``'s default engine does.

    python benchmarks/executors.py [--sf 0.01] [--workloads fig7a,10q] [--batches 0,100000,5000]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import _results
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.executor import Executor, StaticSchedule
from mqjoin.runtime.rules import arrival_order, base_tuples
from mqjoin.runtime.vector import Arrivals, BatchExecutor
from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import load_workload

WORKLOADS = {"fig7a": "tpch_fig7a.yaml", "10q": "tpch_10q.yaml"}
ROOT = Path(__file__).resolve().parents[1]


def per_tuple(plan, arrivals) -> tuple[float, dict, dict]:
    ex = Executor(StaticSchedule(plan), triggers=True)
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        ex.feed(arrivals, triggers=range(len(arrivals)))
        seconds = time.perf_counter() - t0
    finally:
        gc.enable()
    return seconds, dict(ex.counts), ex.messages_by_edge(0)


def vectorised(plan, tables, size: int) -> tuple[float, dict, dict]:
    ex = BatchExecutor(plan)
    batches = list(Arrivals(plan.workload, tables, ex.source_need).batches(size))
    t0 = time.perf_counter()
    for b in batches:
        ex.feed(b)
    return time.perf_counter() - t0, dict(ex.counts), dict(ex.messages)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--workloads", default="fig7a,10q")
    ap.add_argument("--batches", default="0,100000,5000", help="rows per batch of the vectorised runs (0: all)")
    _results.add_flag(ap)
    args = ap.parse_args(argv)
    with _results.recorded('executors', 'In-process executors: per tuple vs vectorised (benchmarks/executors.py)',
                           args.results, [__file__, *(sys.argv[1:] if argv is None else argv)]):
        return _bench(ap, args)


def _bench(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from mqjoin.datasets.tpch import tpch_streams

    streams = tpch_streams(args.sf)
    print(f"in-process executors, TPC-H SF {args.sf}, load average {os.getloadavg()[0]:.1f}")
    print(f"  {'workload':9} {'executor':31} {'input':>9} {'results':>10} {'seconds':>8} {'tuples/s':>11} "
          f"{'speed-up':>8}")
    for key in args.workloads.split(","):
        w = load_workload(ROOT / "datasets" / "workloads" / WORKLOADS[key])
        plan = optimize(w).plan
        tables = read_inputs(w, streams.directory)
        base = base_tuples(w, tables, plan.sources)
        arrivals = [(r, base[r][row]) for r, row in arrival_order(base, w.relation_rank)]
        n = len(arrivals)
        s0, counts, msgs = per_tuple(plan, arrivals)
        print(f"  {key:9} {'per tuple (reference)':31} {n:>9,} {sum(counts.values()):>10,} {s0:>8.3f} {n / s0:>11,.0f} "
              f"{1:>7.1f}×")
        for size in (int(x) for x in args.batches.split(",")):
            s, c, m = vectorised(plan, tables, size)
            same = "" if (c, m) == (counts, msgs) else "  RESULTS OR MESSAGES DIFFER"
            label = f"vectorised, {'whole input' if not size else f'{size:,} rows'}/batch"
            print(f"  {key:9} {label:31} {n:>9,} {sum(c.values()):>10,} {s:>8.3f} {n / s:>11,.0f} "
                  f"{s0 / s:>7.1f}×{same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
