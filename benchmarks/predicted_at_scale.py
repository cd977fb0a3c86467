"""Predicted beside measured on data too large for ``mqjoin run``'s reference engine: the
workload a run plans on for the data (:func:`mqjoin.datasets.fitting.fit_to_data`), its default
plan (``mqo``, ``single``), run by the vectorised executor
(:func:`mqjoin.runtime.vector.run_vector`, which counts probe messages and store rows as the
reference engine does) a batch of arrivals at a time from the tables' columns, its results
handed to a sink that drops them (counted, not kept); then the ``predicted`` block of
``run --json`` (:func:`mqjoin.planning.measured.check_run`) over the data's span: totals and
the store furthest from its prediction among those holding ≥ 1 % of their kind's total.

    python benchmarks/predicted_at_scale.py --data DIR [--workload tpch_fig7a.yaml] [--batch 200000]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from mqjoin.datasets.commands import fitted_inputs
from mqjoin.planning.measured import check_run
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.vector import run_vector
from mqjoin.model.tables import time_range


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--workload", default="tpch_fig7a.yaml")
    ap.add_argument("--batch", type=int, default=200_000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    tables, fit = fitted_inputs(args.workload, args.data)
    t_fit = time.perf_counter() - t0
    plan = optimize(fit.workload).plan
    _, span = time_range(tables)
    run = run_vector(plan, tables, args.batch, sink=lambda query, rows: None)  # results counted, not kept
    check = check_run(plan, run.probe_messages, run.store_rows, span)
    print(json.dumps({"workload": args.workload, "data": args.data, "tuples": run.input_tuples,
                      "results": run.counts, "statistics": fit.to_dict(), "predicted": check.to_dict(),
                      "seconds": {"read and fit": round(t_fit, 1), "run": round(run.seconds, 1)},
                      "max_rss_gb": round(rss_gb(), 2)}, indent=1, default=str))
    print(check.render())


if __name__ == "__main__":
    main()
