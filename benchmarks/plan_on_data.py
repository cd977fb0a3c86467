"""The plan chosen on the run's own data beside the plan chosen on exact sizes (a plan chosen on
sampled statistics should ship and hold no more than the exact one): for each bundled TPC-H
workload and data directory, the workload a command plans on for that data
(:func:`mqjoin.datasets.fitting.fit_to_data`: the horizon the data's span, statistics measured
again where the data contradicts the shipped ones, join sizes on a sample of the join values for
large inputs — 10 %, falling with the input beyond a million rows,
:func:`~mqjoin.datasets.fitting.sizes_fraction`) and the same statistics with every join size
counted exactly; both plans (``mqo``, ``single``) costed under the exact sizes: probe messages and
store rows over the data's span, which a run counts within 0.2 % (benchmarks/RESULTS.md, "One
model from the first click").  Also the seconds the check and the re-measurement took.

    python benchmarks/plan_on_data.py --data DIR [DIR …] [--workloads tpch_fig7a.yaml tpch_10q.yaml]
"""

from __future__ import annotations

import argparse
import time

from mqjoin.datasets.commands import load_named_workload
from mqjoin.datasets.fitting import fit_to_data
from mqjoin.datasets.sizes import measure_sizes
from mqjoin.model.sizes import MeasuredSize
from mqjoin.model.tables import read_inputs
from mqjoin.planning.measured import memory_on
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.recost import recost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", required=True)
    ap.add_argument("--workloads", nargs="+", default=["tpch_fig7a.yaml", "tpch_10q.yaml"])
    args = ap.parse_args()
    print(f"{'workload':<16}{'data':<28}{'fit s':>7}{'remeasured':>11}{'messages own/exact':>20}"
          f"{'rows own/exact':>16}")
    for d in args.data:
        for name in args.workloads:
            w = load_named_workload(name)
            tables = read_inputs(w, d)
            t0 = time.perf_counter()
            fit = fit_to_data(w, tables, source=d)
            seconds = time.perf_counter() - t0
            exact = fit.workload.with_sizes([MeasuredSize(m.query, m.relations, m.value, m.last)
                                             for m in measure_sizes(fit.workload, tables, 1.0)])
            own, best = optimize(fit.workload).plan, optimize(exact).plan
            msg = recost(own, exact) / recost(best, exact)
            rows = memory_on(own, exact) / memory_on(best, exact)
            print(f"{name:<16}{d[-27:]:<28}{seconds:>7.1f}{str(fit.remeasured):>11}{msg:>20.4f}{rows:>16.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
