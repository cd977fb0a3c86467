"""The commands that run: ``run`` (the reference engine — vectorised or per tuple —, Spark, adaptive, a CPU budget),
``synth`` and ``demo``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mqjoin.cli.adaptive import ADAPTIVE_REASON, run_adaptive
from mqjoin.cli.budget import budget_line, budget_options
from mqjoin.cli.options import clash_only, optimize_args
from mqjoin.cli.spark import BATCH_ROWS, run_spark, spark_check, spark_line, start_spark_ahead
from mqjoin.datasets.commands import fitted_inputs, load_named_workload
from mqjoin.model.errors import OptionError, ResultMismatchError
from mqjoin.planners.registry import planner_of


def cmd_run(args: argparse.Namespace) -> int:
    from mqjoin.model.tables import ResultWriter, read_results
    from mqjoin.runtime.reference import run_reference
    from mqjoin.runtime.vector import run_vector
    from mqjoin.support.phases import Phases

    budget = budget_options(args)
    if budget and (args.adaptive or args.changes or args.static):
        raise OptionError("--cpu-budget runs a static binary tree plan; leave out --adaptive/--changes/--static")
    executor, why = executor_choice(args, budget)

    if args.adaptive or args.changes or args.static:
        if not planner_of(args.planner).replans:
            clash_only(args, "--adaptive/--changes/--static (re-optimisation)")
        return run_adaptive(args)
    if budget and args.engine != "reference":
        raise OptionError(f"--cpu-budget runs on the reference engine, not --engine {args.engine}")
    if args.engine == "native":
        clash_only(args, "--engine native (Spark's own joins, no plan)")
    phases = Phases()
    starting = start_spark_ahead(args) if args.engine != "reference" else None
    with phases("input"):
        tables, fit = fitted_inputs(args.workload, args.data, args.workload_stats)
    with phases("optimise"):
        res = optimize_args(args, fit.workload)
    if args.engine == "reference":
        with ResultWriter(res.workload, args.out) as put:
            def sink(q, entries):  # the results, handed over as the run goes: their writing is output's
                with phases("output"):
                    put.add(q, entries)
            t0 = time.perf_counter()
            if executor == "vector":
                run = run_vector(res.plan, tables, batch=args.max_rows_per_batch or BATCH_ROWS, sink=sink)
            else:
                run = run_reference(res.plan, tables, sink=sink, **budget)
            phases.add("batches", time.perf_counter() - t0 - phases.seconds.get("output", 0.0))
            with phases("output"):
                put.close()
        from mqjoin.planning.measured import check_run

        check = check_run(res.plan, run.probe_messages, run.store_rows, run.duration)
        summary = {"engine": args.engine, "executor": executor, "executor_reason": why, "mode": args.mode,
                   "partitioning": args.partitioning, "predicted_probe_cost": res.probe_cost, **run.summary(),
                   "out": str(args.out),
                   "statistics": fit.to_dict(), "predicted": check.to_dict()}
        counts = dict(run.counts)
        if budget:
            from mqjoin.runtime.shedding import deficit

            full = run_vector(res.plan, tables, batch=BATCH_ROWS, sink=_discard).counts
            summary["budget"].update(unbounded_results=full, deficit=deficit(counts, full))
    else:
        d = run_spark(args, res.plan, tables, spark=starting, phases=phases)
        summary = {"engine": args.engine, "mode": args.mode if args.engine == "spark" else "native",
                   "partitioning": args.partitioning, "predicted_probe_cost": res.probe_cost,
                   **d.summary(), "out": str(args.out), "statistics": fit.to_dict()}
        counts = summary["results"]
        check = spark_check(res.plan, d, tables) if args.engine == "spark" else None
        if check is not None:
            summary["predicted"] = check.to_dict()
    summary["phases"] = phases.to_dict()
    if args.check:
        from mqjoin.runtime.oracle import oracle_results

        want, sets = oracle_results(res.workload, tables), read_results(res.workload, args.out)
        if budget:
            ok = all(sets[q] <= want[q] for q in want)
            summary["check"] = "a subset of the oracle" if ok else "NOT a subset of the oracle"
        else:
            ok = sets == want
            summary["check"] = "equal to the oracle" if ok else "DIFFERENT from the oracle"
        if not ok:
            print(json.dumps(summary, indent=1) if args.json else summary["check"])
            raise ResultMismatchError("results differ from the brute-force oracle (docs/model.md §6): please report "
                                      "this")
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        if args.engine == "reference":
            print(f"{run.input_tuples} input tuples in {run.seconds:.2f}s ({run.throughput:,.0f} tuples/s), "
                  f"{run.total_probe_messages} probe messages; {executor} executor ({why})")
            print(check.render())
            if budget:
                print(budget_line(summary["budget"]))
        else:
            print(spark_line(summary))
            if check is not None:
                print(check.render())
        for q, n in counts.items():
            print(f"  {q:>8}: {n} results → {Path(args.out) / (q + '.parquet')}")
        print(f"whole command {_phases_line(summary['phases'])}")
        if args.check:
            print(summary["check"])
    return 0


def executor_choice(args: argparse.Namespace, budget: dict) -> tuple[str, str]:
    """The reference engine's executor for ``run``'s options and why: the vectorised one
    (:mod:`mqjoin.runtime.vector`, a batch of arrivals at a time) for a static plan; the
    per-tuple one where only it applies — a CPU budget sheds probes tuple by tuple, and
    re-optimisation switches plans between epochs (:mod:`mqjoin.runtime.epochs`)."""
    given = args.executor
    adaptive = args.adaptive or args.changes or args.static
    if given != "auto" and args.engine != "reference":
        raise OptionError(f"--executor chooses the reference engine's executor; leave it out with --engine "
                          f"{args.engine}")
    if given == "vector" and (budget or adaptive):
        what = "--cpu-budget" if budget else "--adaptive/--changes/--static"
        raise OptionError(f"{what} runs on the per-tuple executor: leave out --executor vector")
    if args.max_rows_per_batch is not None and args.max_rows_per_batch < 1:
        raise OptionError(f"--max-rows-per-batch must be at least 1, not {args.max_rows_per_batch}")
    if given != "auto":
        return given, "--executor"
    if budget:
        return "per-tuple", "--cpu-budget sheds probes tuple by tuple"
    if adaptive:
        return "per-tuple", ADAPTIVE_REASON
    return "vector", f"a static plan, up to {args.max_rows_per_batch or BATCH_ROWS:,} arrivals a batch"


def _discard(query: str, rows) -> None:
    """A results sink that keeps nothing (a run counted only)."""


def _phases_line(p: dict) -> str:
    """``run``'s phases in one line (``start``: Spark's start, in a thread beside optimise and input)."""
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in p.items() if k != "whole")
    return f"{p['whole']:.1f} s: {parts} (s)"


def cmd_synth(args: argparse.Namespace) -> int:
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.model.tables import write_inputs

    w = load_named_workload(args.workload)
    tables = uniform_streams(w, duration=args.duration, scale=args.scale, seed=args.seed)
    write_inputs(tables, args.out, args.format)
    print(f"wrote {sum(len(t) for t in tables.values())} tuples of {len(tables)} relations to {args.out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: optimise the bundled demo workload in every mode, run each plan on the
    reference engine over generated uniform streams, and check results against the oracle."""
    from mqjoin.planning.optimizer import optimize
    from mqjoin.runtime.oracle import oracle_results
    from mqjoin.runtime.reference import run_reference
    from mqjoin.datasets.uniform import uniform_streams
    from mqjoin.model.tables import write_results

    w = load_named_workload(args.workload)
    print(f"workload {args.workload}: {w}")
    for q in w.queries:
        print(f"  {q.name}: {q.text}")
    tables = uniform_streams(w, duration=args.duration, seed=args.seed)
    print(f"generated {sum(len(t) for t in tables.values()):,} tuples over {args.duration:g} s of event time")
    t0 = time.perf_counter()
    want = oracle_results(w, tables) if args.check else None
    if want is not None:
        print(f"oracle (brute force, docs/model.md §6): {sum(map(len, want.values())):,} results "
              f"in {time.perf_counter() - t0:.2f}s")
    print(f"\n{'plan':<22}{'probe cost':>12}{'memory':>10}{'measured msgs/s':>17}{'measured/model':>16}"
          f"{'tuples/s':>11}{'results':>9}  check")
    best, twice = None, []
    for pol in ("single", "replicas"):
        for mode in ("individual", "shared", "mqo"):
            res = optimize(w, mode=mode, partitioning=pol)
            run = run_reference(res.plan, tables)
            per_s = run.total_probe_messages / args.duration
            ok = "" if want is None else ("= oracle" if run.result_sets() == want else "DIFFERENT")
            print(f"{mode + '/' + pol:<22}{res.probe_cost:>12,.0f}{res.memory:>10,.0f}{per_s:>17,.0f}"
                  f"{per_s / res.probe_cost:>16.2f}{run.throughput:>11,.0f}{sum(run.counts.values()):>9,}  {ok}")
            if ok == "DIFFERENT":
                raise ResultMismatchError(f"{mode}/{pol} results differ from the oracle: please report this")
            if mode == "mqo" and pol == "single":
                best = (res, run)
            if mode == "shared" and pol == "single":
                twice = res.plan.kept_twice()
    if twice:
        print(f"\nshared/single merges the plans each query made for itself, so it keeps "
              f"{'; '.join(' and '.join(g) for g in twice)}: replicas,\nwhich a joint plan under "
              "'single' may not hold; that is why it can cost less than mqo/single.  Compare it with "
              "mqo/replicas\n(docs/model.md §5).")
    res, run = best
    if args.engine == "spark":
        print(f"\nmqo/single on Spark Structured Streaming ({args.master or 'local[*]'}), "
              "four micro-batches:", flush=True)
        args.checkpoint, args.rate, args.speedup, args.timeout = None, None, None, 600.0
        args.max_rows_per_batch = max(1, -(-run.input_tuples // 4))
        d = run_spark(args, res.plan, tables)
        got = d.results()
        print(spark_line(d.summary()))
        same = got == run.result_sets()
        print(f"Spark results {'=' if same else '≠'} reference results"
              + ("" if want is None else f" {'=' if got == want else '≠'} oracle"))
        if not same or (want is not None and got != want):
            raise ResultMismatchError("Spark results differ from the reference engine (docs/model.md §6): please "
                                      "report this")
    print("\n'measured/model': probe messages per second over the modelled probe cost.  Windows are not "
          "in the cost model (docs/model.md §1),\nso this is only indicative here; benchmarks/reference_throughput.py "
          "checks it where the model's assumptions hold (≈ 1.00).")
    print("\nmqo/single plan:\n" + res.summary())
    print("\nprobe trees:\n" + res.plan.render())
    write_results(w, run.results, args.out)
    print(f"\nresults of mqo/single written to {args.out}/<query>.parquet")
    return 0
