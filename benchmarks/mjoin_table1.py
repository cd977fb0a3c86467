"""MJoin paper Table 1 (Section 3.3): operation counts, model vs measured vs paper.

The setting is :func:`mqjoin.datasets.mjoin_paper.section33` (S1, S3: 10,000 tuples, S2: 15,000,
1,000 join values, Poisson arrivals 20 / 20 / 5 ms, no window); the plans are
:func:`~mqjoin.datasets.mjoin_paper.table1_plans`.  For each plan: the docs/model.md §4 probe cost (per unit
of time = the whole input), the reference executor's counts (``run_reference(instrument=True)``,
mean ± standard deviation over ``--seeds`` seeds) and the paper's numbers.  ``--even`` spreads
every stream over the same time (30 / 20 / 30 ms) — what the cost model assumes — so that lookups
(hashes − moves) should match the model.

Measured counts against the paper's: ``benchmarks/RESULTS.md``; notebook 06 explains every
difference.

    python benchmarks/mjoin_table1.py [--seeds 3] [--values 1000] [--even]
"""

from __future__ import annotations

import argparse
import statistics

from mqjoin.datasets.mjoin_paper import DELAYS, TABLE1, section33, table1_plans
from mqjoin.runtime.reference import run_reference

COUNTS = ("hashes", "moves", "comparisons", "intermediate", "lookups")


def measure(values: int, seeds: int, even: bool) -> dict[str, dict[str, list[int]]]:
    """Plan → count → one value per seed."""
    delays = (0.03, 0.02, 0.03) if even else DELAYS
    out: dict[str, dict[str, list[int]]] = {}
    for seed in range(seeds):
        s = section33(values=values, delays=delays, seed=seed)
        for name, plan in table1_plans(s.workload).items():
            ops = dict(run_reference(plan, s.tables, collect=False, instrument=True).operations)
            ops["lookups"] = ops["hashes"] - ops["moves"]
            by = out.setdefault(name, {c: [] for c in COUNTS})
            for c in COUNTS:
                by[c].append(ops[c])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--values", type=int, default=1000, help="join values (the paper: 1,000)")
    ap.add_argument("--even", action="store_true", help="every stream over the same time (30/20/30 ms)")
    a = ap.parse_args()
    s = section33(values=a.values)
    model = {name: p.probe_cost for name, p in table1_plans(s.workload).items()}
    data = measure(a.values, a.seeds, a.even)
    print(f"Section 3.3, {a.values} join values, {a.seeds} seed(s){', even streams' if a.even else ''}")
    print(f"{'plan':<14}{'probe cost':>11}" + "".join(f"{c:>20}" for c in COUNTS) + f"{'paper h/m/c':>32}")
    for name, by in data.items():
        cells = []
        for c in COUNTS:
            v = by[c]
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            cells.append(f"{statistics.mean(v):>12,.0f} ±{sd:>6,.0f}")
        paper = "/".join(f"{x:,}" for x in TABLE1[name]) if name in TABLE1 else "—"
        print(f"{name:<14}{model[name]:>11,.0f}" + "".join(f"{x:>20}" for x in cells) + f"{paper:>32}")


if __name__ == "__main__":
    main()
