"""What pricing a coupled part's combinations costs, and how the blocks' optima depend on the
shared stores' choices (five- and six-way queries under ``single``).

A coupled part (:mod:`mqjoin.planning.ilp.coupled`) splits into blocks, one query and its MIRs
each; a combination is one class of attributes per shared store the block touches, and the
master ILP needs the block's optimum under each combination it may pick (its "price").  For
the largest part of a random workload this script prints its shape (blocks, shared stores,
combinations) and, for the first ``--blocks`` blocks, prices every combination exactly by the
block's search (:meth:`mqjoin.planning.ilp.blocks.BlockCosts.lp_cost`), and every choice of one
shared store alone (the others left to the block).  It compares the exact price ``c(t)`` with

    alone      the block's optimum with every shared store left to it (a valid lower bound)
    max-one    max over the block's stores s of c_s(t_s), the optimum with store s alone
               decided as in t (a valid lower bound: a relaxation of the combination)
    additive   alone + Σ_s (c_s(t_s) − alone): exact when each store's extra cost does not
               depend on the others' (not a bound in general: one re-route of a probe order
               may avoid two stores' extra costs at once)

and the CPU seconds of the single-store prices against those of every combination (one
process, one thread).

    python benchmarks/ilp_pricing.py --queries 20 --size 6 --blocks 5
    python benchmarks/ilp_pricing.py --queries 100 --size 5 --blocks 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp.blocks import BlockCosts, coupled_part
from mqjoin.planning.ilp.model import build_model, components


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--size", type=int, default=6, help="relations per query")
    ap.add_argument("--relations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blocks", type=int, default=5, help="price the first N blocks (default 5)")
    args = ap.parse_args(argv)
    w = random_workload(args.queries, args.relations, args.size, seed=args.seed)
    cpu = time.process_time()
    cands = enumerate_candidates(w)
    enum = time.process_time() - cpu
    mdl = build_model(cands, "single")
    build = time.process_time() - cpu - enum
    cols, rows = max(components(mdl), key=lambda c: len(c[0]))
    part = coupled_part(mdl, cols, rows)
    if part is None:
        print("the largest part does not split into blocks")
        return 1
    per_block = [sum(k == kk for kk, _ in part.combinations) for k in range(len(part.blocks))]
    print(f"# {args.queries} x {args.size} over {args.relations} relations, seed {args.seed}, single; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"enumeration {enum:.2f} s, model {build:.2f} s CPU; largest part: {len(part.blocks)} blocks, "
          f"{len(part.stores)} shared stores, {len(part.combinations)} combinations "
          f"({min(per_block)}-{max(per_block)} per block)")
    costs = BlockCosts(part, None)
    single_cpu = every_cpu = 0.0
    exact = additive = 0
    max_one, over_alone = [], []
    for k in range(min(args.blocks, len(part.blocks))):
        alone = costs.cost(k, {})
        b = part.blocks[k]
        cpu = time.process_time()
        one = {(i, c): costs.lp_cost(k, {st: attrs[0]})
               for i, st in enumerate(b.stores) for c, attrs in enumerate(part.classes[(k, st)])}
        single_cpu += time.process_time() - cpu
        cpu = time.process_time()
        for kk, t in part.combinations:
            if kk != k:
                continue
            price = costs.lp_cost(k, part.chosen_by(k, t))
            estimate = alone + sum(one[(i, c)] - alone for i, c in enumerate(t))
            exact += 1
            additive += abs(estimate - price) <= 1e-6 * max(1.0, price)
            max_one.append(max([alone] + [one[(i, c)] for i, c in enumerate(t)]) / price)
            over_alone.append(price / alone)
        every_cpu += time.process_time() - cpu
    print(f"blocks 0-{min(args.blocks, len(part.blocks)) - 1}: {exact} combinations priced, "
          f"additive estimate equal to the price on {additive}")
    print(f"price / alone: median {statistics.median(over_alone):.3f}, max {max(over_alone):.3f}; "
          f"max-one / price: median {statistics.median(max_one):.3f}, min {min(max_one):.3f}")
    print(f"CPU: single-store prices {single_cpu:.2f} s, every combination {every_cpu:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
