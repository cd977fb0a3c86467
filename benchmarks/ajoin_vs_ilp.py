"""How far AJoin's heuristic (planner ``ajoin``: query groups + iterative DP join reordering with
shared costs) is from CLASH's ILP optimum, by the docs/model.md §4 probe cost of their plans.

Rows: the CLASH paper's examples (``paper_v2.yaml``, ``paper_fig3.yaml``), AJoin's Figure 6
(two filtered queries), the filtered TPC-H Figure 7(a) workload, and random workloads like the
CLASH paper's Figure 9 (``mqjoin.datasets.random_workloads.random_workload``: 5 queries of 3 relations over 8
relations, parallelism 4), each also with random filters (pass fractions 0.2–0.8 on half of the
relations of every query).  Columns: the ILP's optimum (``mqo``, policy ``single``) of the
workload as given, the ILP's optimum over ajoin's query groups (the same problem ajoin solves:
a group shares its stores over the union of its filters), the ajoin plan's cost, the ratio
ajoin / ILP-with-groups, and the groups.  Both plans are ordinary plans of the same cost
model; the ILP chooses among all probe orders (MIRs included), ajoin among binary join trees
only, so ``ratio ≥ 1`` up to the ILP's tolerance.

    python benchmarks/ajoin_vs_ilp.py [--random 10] [--seed 0]

The measured table (deterministic) is in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path

from mqjoin.planners.ajoin import figure6_workload
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.optimizer import optimize
from mqjoin.model.workload import Workload, load_workload

ROOT = Path(__file__).resolve().parents[1]


def with_random_filters(w: Workload, seed: int) -> Workload:
    """``w`` with a random filter (attribute ``a`` below a constant) on about half of every
    query's relations, pass fractions drawn from 0.2–0.8 (a constant per fraction)."""
    rng = random.Random(seed)
    spec = w.to_spec()
    spec["filters"] = {}
    for q in w.queries:
        conds = []
        for r in q.relations:
            if rng.random() < 0.5:
                f = rng.choice([0.2, 0.4, 0.6, 0.8])
                conds.append(f"{r}.{w.relation(r).attributes[0]} < {int(f * 10)}")
                spec["filters"][f"{q.name}.{r}"] = f
        if conds:
            spec["queries"][q.name] = {"join": q.text, "where": " AND ".join(conds)}
    return Workload.from_spec(spec)


def compare(name: str, w: Workload) -> dict:
    ilp = optimize(w, time_limit=120)
    aj = optimize(w, planner="ajoin")
    # the same problem: the ILP over ajoin's groups (a group shares its stores over the union of filters)
    grouped = optimize(aj.workload, time_limit=120) if aj.workload.groups else ilp
    return {"workload": name, "ilp": ilp.probe_cost, "grouped": grouped.probe_cost, "ajoin": aj.probe_cost,
            "ratio": aj.probe_cost / grouped.probe_cost,
            "optimal": ilp.ilp.status == "optimal" and grouped.ilp.status == "optimal",
            "groups": " ".join("{" + ",".join(g) + "}" for g in aj.workload.groups) or "-"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=10, help="random workloads per kind (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = [compare("paper_v2 (CLASH V-2)", load_workload(ROOT / "mqjoin/workloads/paper_v2.yaml")),
            compare("paper_fig3 (CLASH Fig. 3)", load_workload(ROOT / "mqjoin/workloads/paper_fig3.yaml")),
            compare("AJoin Figure 6", figure6_workload()),
            compare("TPC-H Fig. 7(a) filtered", load_workload(ROOT / "datasets/workloads/tpch_fig7a_filtered.yaml"))]
    plain, filtered = [], []
    for k in range(args.random):
        w = random_workload(5, n_relations=8, query_size=3, parallelism=4, seed=args.seed + k)
        plain.append(compare(f"random #{args.seed + k}", w))
        filtered.append(compare(f"random #{args.seed + k} + filters", with_random_filters(w, args.seed + k)))
    rows += plain + filtered
    print(f"{'workload':<30}{'ILP':>11}{'ILP groups':>12}{'ajoin':>11}{'ratio':>8}  ajoin's groups")
    for r in rows:
        star = "" if r["optimal"] else " (ILP time limit)"
        print(f"{r['workload']:<30}{r['ilp']:>11.6g}{r['grouped']:>12.6g}{r['ajoin']:>11.6g}{r['ratio']:>8.3f}  "
              f"{r['groups']}{star}")
    for label, rs in (("random", plain), ("random + filters", filtered)):
        ratios = [r["ratio"] for r in rs]
        if ratios:
            print(f"{label}: ajoin / ILP  median {statistics.median(ratios):.3f}, mean {statistics.mean(ratios):.3f}, "
                  f"min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} workloads")


if __name__ == "__main__":
    main()
