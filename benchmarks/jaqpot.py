"""JAQPOT throughput vs available resources (the shape of the paper's Figure 7.a), by the model.

The linear plan (((A ⋈ B) ⋈ C) ⋈ D) with Table 3's synthetic parameters drawn uniformly per
plan: arrival rates 300–1200 tuples/s, state sizes 200–5000 tuples (every state, intermediate
ones included), selectivities 0.01–0.1, freshness predicates 1.5× the window (a stream's
window in seconds: |S_I| / λ_I).  For μ from 0 to 100 % of the saturation resources (every
tuple probes), each policy's predicted throughput as a percentage of the saturation
throughput, averaged over the plans:

* JAQPOT — Algorithm 1: freshness cover (GH-WMSCP), then GrePP (an infeasible cover takes
  all of μ and is counted as it is);
* GrePP — throughput only, no freshness;
* EqualHJ, GlobalHJPR, EBestHJP, SBestHJP — the paper's ρ_h-based baselines (Appendix B), with
  producer–consumer capping (an allowance probes only the tuples its producer made).

"fresh" columns: the share of plans whose every freshness predicate holds (Lemma 1) under
that policy's allowances; "× best ρh": JAQPOT's throughput over the best baseline's.  This is
the model's prediction; ``--executor`` below measures.

    python benchmarks/jaqpot.py [--plans 50] [--seed 0] [--freshness 1.5] [--shape linear|bushy]

``--executor`` measures instead of predicting: the reference executor runs the linear plan
(:mod:`mqjoin.datasets.jaqpot_paper`: one corner of Table 3, by default its low end — rates
300/s, windows 200 tuples, σ 0.01; 10 s of arrivals) under a CPU budget
(:mod:`mqjoin.runtime.shedding`) of 0–100 % of the saturation resources — the probes per second the
unbounded run made — and each policy's results as a percentage of the unbounded run's,
averaged over ``--seeds`` inputs; "stale": the streams whose measured staleness (Lemma 1 with
the measured refresh rates) exceeds the freshness predicate, summed over the policies' runs.

The measured tables, and how they differ from the paper's Figure 7.a, are in
``benchmarks/RESULTS.md``.

    python benchmarks/jaqpot.py --executor [--seeds 3] [--rate 300|A,B,C,D] [--size 200|A,B,C,D]
        [--selectivity 0.01|AB,BC,CD] [--duration 10] [--cycle 1] [--freshness 1.5]
"""

from __future__ import annotations

import argparse
import random
import statistics

from mqjoin.planners.jaqpot import (BASELINES, BinaryPlan, baseline, grepp, jaqpot, linear_plan, refresh_rates,
                                    staleness, state_names)

SHAPES = {"linear": linear_plan("ABCD"), "bushy": (("A", "B"), ("C", "D"))}


def table3_plan(rng: random.Random, tree) -> BinaryPlan:
    """One plan with Table 3's parameter ranges."""
    states = state_names(tree)
    return BinaryPlan.build(tree, rates={s: rng.uniform(300, 1200) for s in "ABCD"},
                            sizes={s: rng.uniform(200, 5000) for s in states},
                            selectivities={s: rng.uniform(0.01, 0.1) for s in states})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plans", type=int, default=50, help="random plans averaged per point (default 50)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--freshness", type=float, default=1.5, help="freshness predicate as a multiple of the "
                                                                  "window (default 1.5)")
    ap.add_argument("--shape", choices=tuple(SHAPES), default="linear")
    ap.add_argument("--executor", action="store_true", help="measure in the reference executor under a CPU budget")
    ap.add_argument("--seeds", type=int, default=3, help="--executor: inputs averaged per point (default 3)")
    ap.add_argument("--rate", type=_numbers, default=(300.0,),
                    help="--executor: tuples/s of every stream, or of A,B,C,D (default 300)")
    ap.add_argument("--size", type=_numbers, default=(200.0,),
                    help="--executor: window of every stream in tuples, or of A,B,C,D (default 200)")
    ap.add_argument("--selectivity", type=_numbers, default=(0.01,),
                    help="--executor: σ of every join, or of A–B,B–C,C–D (default 0.01)")
    ap.add_argument("--duration", type=float, default=10, help="--executor: seconds of arrivals (default 10)")
    ap.add_argument("--cycle", type=float, default=1.0, help="--executor: cycle in seconds (default 1)")
    args = ap.parse_args(argv)
    if args.executor:
        return measure(args)

    rng = random.Random(args.seed)
    plans = [table3_plan(rng, SHAPES[args.shape]) for _ in range(args.plans)]
    policies = ("JAQPOT", "GrePP") + BASELINES
    print(f"{args.shape} plan, {args.plans} plans with Table 3 parameters, freshness {args.freshness:g}× window")
    print("throughput as % of saturation throughput (mean over plans); fresh: % of plans meeting every "
          "freshness predicate")
    head = f"{'μ % sat':>8}" + "".join(f"{p:>12}" for p in policies) + f"{'× best ρh':>11}{'JAQPOT Δμ %':>13}" + \
        "".join(f"{'fresh ' + p[:6]:>14}" for p in ("JAQPOT", "GrePP", "GlobalHJPR"))
    print(head)
    for pct in range(0, 101, 10):
        thr = {p: [] for p in policies}
        fresh = {p: [] for p in policies}
        delta = []
        for plan in plans:
            sat_mu, sat_r = plan.saturation()
            mu = sat_mu * pct / 100
            predicates = {s: args.freshness * plan.sizes[s] / plan.rates[s] for s in plan.streams}
            allocs = {"JAQPOT": jaqpot(plan, mu, refresh_rates(plan, predicates)), "GrePP": grepp(plan, mu)}
            allocs.update({p: baseline(plan, mu, p) for p in BASELINES})
            for p, a in allocs.items():
                thr[p].append(100 * a.throughput / sat_r)
                st = staleness(plan, a.allowances)
                fresh[p].append(100 * all(st[s] <= predicates[s] * (1 + 1e-9) for s in plan.streams))
            delta.append(100 * allocs["JAQPOT"].freshness / mu if mu else 0.0)
        means = {p: statistics.mean(thr[p]) for p in policies}
        best_base = max(means[p] for p in BASELINES)
        print(f"{pct:>8}" + "".join(f"{means[p]:>12.1f}" for p in policies)
              + (f"{means['JAQPOT'] / best_base:>11.1f}" if best_base else f"{'–':>11}")
              + f"{statistics.mean(delta):>13.1f}"
              + "".join(f"{statistics.mean(fresh[p]):>14.0f}" for p in ("JAQPOT", "GrePP", "GlobalHJPR")))
    return 0


def _numbers(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(","))


def _one(values: tuple[float, ...]):
    return values[0] if len(values) == 1 else values


def measure(args: argparse.Namespace) -> int:
    """The ``--executor`` table: budgeted runs of the linear plan in the reference executor."""
    from mqjoin.datasets.jaqpot_paper import table3_linear
    from mqjoin.runtime.reference import run_reference
    from mqjoin.runtime.shedding import ALLOCATIONS

    settings = [table3_linear(_one(args.rate), _one(args.size), _one(args.selectivity), args.duration, seed)
                for seed in range(args.seeds)]
    full = [run_reference(s.plan, s.tables, collect=False) for s in settings]

    def show(xs):
        return "/".join(f"{x:g}" for x in xs)

    print(f"linear plan ((A ⋈ B) ⋈ C) ⋈ D in the reference executor: rates {show(args.rate)}/s, windows "
          f"{show(args.size)} tuples, σ {show(args.selectivity)}, {args.duration:g} s × {args.seeds} seeds, "
          f"{args.cycle:g} s cycles, freshness {args.freshness:g}×")
    print("saturation: " + ", ".join(f"{f.total_probe_messages / f.duration:,.0f} probes/s → "
                                     f"{f.counts['q'] / f.duration:,.0f} results/s" for f in full))
    print("results as % of the unbounded run's (mean over seeds); stale: stale streams summed over the runs")
    print(f"{'μ % sat':>8}" + "".join(f"{p:>12}" for p in ALLOCATIONS) + f"{'× best ρh':>11}"
          + "".join(f"{'stale ' + p[:6]:>14}" for p in ("JAQPOT", "GrePP", "EqualHJ")))
    for pct in range(0, 101, 10):
        share = {p: [] for p in ALLOCATIONS}
        stale = {p: 0 for p in ALLOCATIONS}
        for s, f in zip(settings, full):
            mu = f.total_probe_messages / f.duration * pct / 100
            for p in ALLOCATIONS:
                run = run_reference(s.plan, s.tables, collect=False, cpu_budget=mu, allocation=p, cycle=args.cycle,
                                    freshness=args.freshness)
                share[p].append(100 * run.counts["q"] / f.counts["q"])
                stale[p] += len(run.budget.stale)
        means = {p: statistics.mean(v) for p, v in share.items()}
        best = max(means[p] for p in BASELINES)
        print(f"{pct:>8}" + "".join(f"{means[p]:>12.1f}" for p in ALLOCATIONS)
              + (f"{means['JAQPOT'] / best:>11.2f}" if best else f"{'–':>11}")
              + "".join(f"{stale[p]:>14}" for p in ("JAQPOT", "GrePP", "EqualHJ")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
