"""Reference executor: throughput, and measured probe messages vs the model's prediction.

Part 1 — throughput (target ≥ 100k input tuples/s): a 3-query, 4-relation workload
(R(a),S(a,b),T(b) / S(b),T(b,c),U(c) / R(a),S(a,b),T(b,c),U(c)) over uniform streams with
windows, every mode and policy; prints input tuples/s, results and probe messages per input
tuple.

Part 2 — model check: the same queries with unbounded windows over exactly one time unit
(= defaults.horizon), where the model's assumptions hold (uniform keys, symmetric arrivals),
so a step's expected number of shipped partial results is its modelled cost.  Prints, per
store and in total, measured probe messages / predicted probe cost.

    python benchmarks/reference_throughput.py [--rate 20000] [--duration 5] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _results
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.reference import run_reference
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.workload import parse_workload

QUERIES = """
queries:
  q1: R(a), S(a,b), T(b)
  q2: S(b), T(b,c), U(c)
  q3: R(a), S(a,b), T(b,c), U(c)
"""


def throughput_workload(rate: float, window: float, results_per_tuple: float):
    # per q1 result rate ≈ 3·λ³·w²·s² (three latest-arrival cases); aim for `results_per_tuple`
    # results per input tuple summed over the queries by choosing s
    s = (results_per_tuple * 4 * rate / (3 * 3 * rate ** 3 * window ** 2)) ** 0.5
    return parse_workload(f"""
defaults: {{rate: {rate}, window: {window}, parallelism: 4}}
relations: {{R: {{attributes: [a]}}, S: {{attributes: [a, b]}}, T: {{attributes: [b, c]}}, U: {{attributes: [c]}}}}
{QUERIES}
selectivities: {{R.a = S.a: {s}, S.b = T.b: {s}, T.c = U.c: {s}}}
""")


def model_workload(rate: float):
    return parse_workload(f"""
defaults: {{rate: {rate}, window: null, parallelism: 4, horizon: 1}}
relations: {{R: {{attributes: [a]}}, S: {{attributes: [a, b]}}, T: {{attributes: [b, c]}}, U: {{attributes: [c]}}}}
{QUERIES}
selectivities: {{R.a = S.a: {2 / rate}, S.b = T.b: {3 / rate}, T.c = U.c: {2 / rate}}}
""")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20000, help="tuples per second per relation (part 1)")
    ap.add_argument("--duration", type=float, default=5.0, help="event-time seconds (part 1)")
    ap.add_argument("--window", type=float, default=1.0)
    ap.add_argument("--results-per-tuple", type=float, default=2.0)
    ap.add_argument("--model-rate", type=float, default=3000, help="tuples per relation (part 2)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds averaged in part 2")
    _results.add_flag(ap)
    args = ap.parse_args(argv)
    with _results.recorded('reference_throughput',
                           'Reference executor: throughput and probe messages vs the model '
                           '(benchmarks/reference_throughput.py)', args.results,
                           [__file__, *(sys.argv[1:] if argv is None else argv)]):
        return _bench(ap, args)


def _bench(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:

    w = throughput_workload(args.rate, args.window, args.results_per_tuple)
    t0 = time.perf_counter()
    tables = uniform_streams(w, duration=args.duration, seed=0)
    n = sum(len(t) for t in tables.values())
    print(f"Part 1: throughput — {n:,} input tuples ({args.rate:g}/s per relation, {args.duration:g} s, "
          f"window {args.window:g} s), generated in {time.perf_counter() - t0:.1f}s")
    print(f"{'plan':<22}{'tuples/s':>12}{'results/tuple':>15}{'msgs/tuple':>12}{'max rows':>10}{'seconds':>9}")
    for pol in ("single", "replicas"):
        for mode in ("mqo", "shared", "individual"):
            plan = optimize(w, mode=mode, partitioning=pol).plan
            run = run_reference(plan, tables, collect=False)
            print(f"{mode + '/' + pol:<22}{run.throughput:>12,.0f}{sum(run.counts.values()) / n:>15.2f}"
                  f"{run.total_probe_messages / n:>12.2f}{sum(run.store_rows.values()):>10,}{run.seconds:>9.2f}")
            sys.stdout.flush()

    print(f"\nPart 2: measured probe messages / predicted probe cost (unbounded windows, one time unit, "
          f"{args.model_rate:g} tuples per relation, mean over {args.seeds} seeds)")
    mw = model_workload(args.model_rate)
    print(f"{'plan':<22}{'predicted':>12}{'measured':>12}{'ratio':>8}   per store (ratio)")
    for pol in ("single", "replicas"):
        for mode in ("mqo", "shared", "individual"):
            plan = optimize(mw, mode=mode, partitioning=pol).plan
            measured, per_store = [], {}
            for seed in range(args.seeds):
                run = run_reference(plan, uniform_streams(mw, duration=1.0, seed=seed), collect=False)
                measured.append(run.total_probe_messages)
                for sid, c in run.store_messages.items():
                    per_store.setdefault(sid, []).append(c)
            predicted_store = {}
            for node in plan.nodes:
                predicted_store[node.store] = predicted_store.get(node.store, 0.0) + node.cost
            m = statistics.mean(measured)
            detail = ", ".join(f"{sid} {statistics.mean(v) / predicted_store[sid]:.2f}"
                               for sid, v in per_store.items() if predicted_store.get(sid))
            print(f"{mode + '/' + pol:<22}{plan.probe_cost:>12,.0f}{m:>12,.0f}{m / plan.probe_cost:>8.3f}   {detail}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
