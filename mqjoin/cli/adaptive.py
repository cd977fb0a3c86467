"""``run --adaptive/--changes/--static``: re-optimisation every epoch on the reference engine
or on Spark (paper Section VI)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mqjoin.cli.spark import run_spark, spark_line
from mqjoin.datasets.commands import load_named_workload
from mqjoin.model.errors import OptionError, ResultMismatchError
from mqjoin.planners.registry import planner_of

#: why re-optimisation runs on the per-tuple executor (``executor_reason`` in ``--json``)
ADAPTIVE_REASON = "re-optimisation switches plans between epochs"


def run_adaptive(args: argparse.Namespace) -> int:
    from mqjoin.adaptive.policy import AdaptivePolicy, lifetime_of, lifetimes, load_changes
    from mqjoin.model.tables import read_inputs, write_results

    if args.engine == "native":
        raise OptionError("--adaptive/--changes run on the reference engine or --engine spark; --engine native "
                          "(Spark's own joins) has no plan to adapt")
    policy = AdaptivePolicy(epoch=args.epoch, threshold=args.threshold, adapt=not args.static, mode=args.mode,
                            partitioning=args.partitioning, mirs=not args.no_mirs, solver=args.solver,
                            time_limit=args.time_limit, sample=args.sample, mir_budget=args.mir_budget)
    w = load_named_workload(args.workload)
    changes = load_changes(args.changes) if args.changes else ()
    full, lives = lifetimes(w, changes, policy)
    replanner = planner_of(args.planner).replanner  # a re-planner of its own (AJoin's, incremental); else the ILP's
    optimizer = None if replanner is None else replanner()
    if args.engine == "spark":
        d = run_spark(args, w, None, policy=policy, changes=changes, optimizer=optimizer)
        run = d.snapshot()
        tables = d.tables
        summary = {"engine": "spark", "adaptive": True, **run.summary(), "spark": d.summary(), "out": str(args.out)}
    else:
        from mqjoin.runtime.epochs import run_adaptive

        tables = read_inputs(full, args.data)
        run = run_adaptive(w, tables, policy, changes, speedup=args.speedup or 1.0, optimizer=optimizer)
        write_results(full, run.results, args.out)
        summary = {"engine": "reference", "executor": "per-tuple",
                   "executor_reason": ADAPTIVE_REASON, "adaptive": True,
                   **run.summary(), "out": str(args.out)}
    if args.check:
        from mqjoin.runtime.oracle import adaptive_oracle_results

        ok = run.result_sets() == adaptive_oracle_results(w, tables, changes, policy)
        summary["check"] = "equal to the oracle" if ok else "DIFFERENT from the oracle"
        if not ok:
            raise ResultMismatchError("adaptive results differ from the brute-force oracle (docs/model.md §6): please "
                                      "report this")
    if args.json:
        print(json.dumps(summary, indent=1, default=str, ensure_ascii=False))
        return 0
    if args.engine == "spark":
        print(spark_line({**summary["spark"], "engine": "spark (adaptive)"}))
    print(f"{run.input_tuples} input tuples in {run.seconds:.2f}s ({run.throughput:,.0f} tuples/s), "
          f"{len(run.epochs)} epochs of {policy.epoch:g}s, {len(run.switches) - 1} plan switch(es)")
    for d in run.switches:
        print(f"  epoch {d.active_from}: plan {d.plan} — {d.reason}")
    for q, res in run.results.items():
        lf = lifetime_of(lives, q)
        span = "" if lf.added is None and lf.removed is None else \
            f" (epochs {'…' if lf.added is None else lf.added}–{'…' if lf.removed is None else lf.removed - 1})"
        print(f"  {q:>8}: {len(res)} results{span} → {Path(args.out) / (q + '.parquet')}")
    if args.check:
        print(summary["check"])
    return 0
