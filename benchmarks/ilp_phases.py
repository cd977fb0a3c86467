"""Where the optimiser's time goes: CPU seconds per phase of ``optimize()`` on random workloads.

Wraps the phases of ``mqjoin.planning.clash.plan_clash`` and of the ILP's coupled search with
CPU timers (``time.process_time``, so that a loaded machine inflates them less than wall
time) and prints the mean per run over several seeds (after one warm-up run).  The blocks are
costed on one thread (``BLOCK_THREADS = 1``) and in this process (``MQJOIN_FORK=0``: no child
takes half of the searches), so the phases add up to the run's CPU time:

    enumerate        candidate MIRs, probe orders and steps
    build_model      the ILP's variables and rows
    coupled_part     the coupled parts split into blocks (choices, classes, combinations)
    block enumeration  every combination of the blocks that are enumerated: optimum and
                     lexicographic optimum (mqjoin.planning.ilp.enumeration)
    block costs      the other blocks' optima under the combinations the search asks for: by the
                     search without LPs (mqjoin.planning.ilp.paths; "of which searches"), else LPs
    block ties       their lexicographic optima (canonical tie-break), the same way
    LP branch and bound (one query)  one query's parts the search without LPs gave up on
    master           the master ILP: built, solved, and its LP's dual for the tie-break
    build_plan       the chosen orders merged into probe trees (with extract_choices)

    python benchmarks/ilp_phases.py                      # 100 x 3 over 100 relations, single, 5 seeds
    python benchmarks/ilp_phases.py --queries 30 --size 5 --seeds 3
    python benchmarks/ilp_phases.py --results              # also into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import _results
import mqjoin.planning.ilp.blocks as blocks
import mqjoin.planning.ilp.coupled as coupled
import mqjoin.planning.ilp.master as master
import mqjoin.planning.ilp.paths as paths
import mqjoin.planning.ilp.solving as solving
import mqjoin.planning.clash as clash
import mqjoin.planning.optimizer as optimizer
from mqjoin.datasets.random_workloads import random_workload

SECONDS: dict[str, float] = collections.Counter()
CALLS: dict[str, int] = collections.Counter()


def timed(name: str, fn):
    def wrapper(*args, **kwargs):
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[name] += time.process_time() - t
            CALLS[name] += 1
    return wrapper


def instrument() -> None:
    blocks.BLOCK_THREADS = 1
    clash.enumerate_candidates = timed("enumerate", clash.enumerate_candidates)
    clash.build_model = timed("build_model", clash.build_model)
    clash.solve = timed("solve (all)", clash.solve)
    clash.extract_choices = timed("build_plan", clash.extract_choices)
    clash.build_plan = timed("build_plan", clash.build_plan)
    coupled.coupled_part = timed("coupled_part", coupled.coupled_part)
    blocks.BlockCosts.enumerate_blocks = timed("block enumeration", blocks.BlockCosts.enumerate_blocks)
    blocks.BlockCosts.cost = timed("block costs", blocks.BlockCosts.cost)
    blocks.BlockCosts.weight = timed("block ties", blocks.BlockCosts.weight)
    paths.BlockPaths.optimum = timed("  of which searches", paths.BlockPaths.optimum)
    paths.BlockPaths.lexicographic = timed("  of which tie searches", paths.BlockPaths.lexicographic)
    solving.branch_and_bound = timed("LP branch and bound (one query)", solving.branch_and_bound)
    master.Master.__init__ = timed("master", master.Master.__init__)
    master.Master.run = timed("master", master.Master.run)
    master._ruled_out = timed("master", master._ruled_out)


def main(argv: list[str] | None = None) -> int:
    os.environ["MQJOIN_FORK"] = "0"  # every phase in this process, under its timer
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--size", type=int, default=3, help="relations per query")
    ap.add_argument("--relations", type=int, default=100)
    ap.add_argument("--policy", default="single")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 … N-1 (default 5)")
    _results.add_flag(ap)
    args = ap.parse_args(argv)
    with _results.recorded("ilp_phases", "ILP: CPU seconds per phase of optimize() (benchmarks/ilp_phases.py)",
                           args.results):
        return phases(args)


def phases(args) -> int:
    instrument()

    def run(seed: int):
        w = random_workload(args.queries, args.relations, args.size, seed=seed)
        return optimizer.optimize(w, mode="mqo", partitioning=args.policy)

    run(0)  # warm-up: imports, first HiGHS instances
    SECONDS.clear()
    CALLS.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    for seed in range(args.seeds):
        res = run(seed)
        assert res.ilp.status == "optimal", res.ilp.status
    cpu, wall, n = time.process_time() - cpu, time.perf_counter() - wall, args.seeds
    print(f"# {args.queries} x {args.size} over {args.relations} relations, {args.policy}, seeds 0-{n - 1}; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'phase':<18}{'CPU s/run':>10}{'calls/run':>11}")
    print(f"{'optimize (all)':<18}{cpu / n:>10.3f}{1:>11}   (wall {wall / n:.3f} s/run)")
    for name, s in sorted(SECONDS.items(), key=lambda kv: -kv[1]):
        print(f"{name:<18}{s / n:>10.3f}{CALLS[name] / n:>11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
