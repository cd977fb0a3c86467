"""The ``mqjoin`` command line.

Errors are one line on stderr, no tracebacks; the exit code says whose fault it is:
``2`` bad input (any :class:`~mqjoin.model.errors.MqjoinError`: workload, option, data …),
``3`` an internal error of mqjoin (:class:`~mqjoin.model.errors.InternalError`, e.g. ``run --check``
finding results that differ from the brute-force oracle: please report it),
``4`` a deployment that started and then failed (:class:`RunFailedError`: a Spark job failed —
not the input's fault).

>>> main(["optimize", "paper_v2.yaml", "--time-limit", "0"])
2

Commands: ``optimize``, ``run``, ``candidates``, ``compare``, ``frontier``, ``partitions``, ``synth``, ``demo``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from mqjoin.model.errors import (EngineError, InternalError, MqjoinError, OptionError, PlannerError,
                                 ResultMismatchError, RunFailedError)
from mqjoin.datasets.commands import add_dataset_parsers, load_named_workload, write_text
from mqjoin.planning.options import MODES, POLICIES, SOLVERS, check_options
from mqjoin.planners.registry import PLANNERS, named, planner_of
from mqjoin.planners.trees import TREE_SHAPES

#: exit code of bad input (workload, options, data): the user can fix it
EXIT_BAD_INPUT = 2
#: exit code of an internal error (a bug of mqjoin, e.g. results that differ from the oracle)
EXIT_INTERNAL = 3
#: exit code of an engine failure (a deployment started, then failed): not the input's fault
EXIT_ENGINE = 4


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"mqjoin: error: {message} (see 'mqjoin {self.prog.split()[-1]} --help')\n"
                  if " " in self.prog else f"mqjoin: error: {message} (see 'mqjoin --help')\n")


def _opt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, default="mqo",
                   help="mqo: joint optimum; individual: each query alone with its own stores; "
                        "shared: individual plans deployed together (default: mqo)")
    p.add_argument("--partitioning", choices=POLICIES, default="single",
                   help="single: one partition attribute per store; replicas: one replica per "
                        "partition attribute used (default: single)")
    p.add_argument("--no-mirs", action="store_true", help="do not materialise intermediate results")
    p.add_argument("--solver", choices=SOLVERS, default="highs", help="ILP solver (default: highs)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                   help="stop the solver after S seconds; the best plan found is then reported with "
                        "its gap to the optimum (default: 60)")
    p.add_argument("--mir-budget", type=float, default=None, metavar="N",
                   help="at most N tuples of MIR stores (memory estimate of docs/model.md §5; default: no limit)")
    _planner_args(p)


def _and(names) -> str:
    """``a, b and c``."""
    *head, last = names
    return f"{', '.join(head)} and {last}" if head else last


def _planner_args(p: argparse.ArgumentParser, default: str | None = "clash") -> None:
    p.add_argument("--planner", choices=PLANNERS, default=default,
                   help="; ".join(f"{name}: {planner_of(name).label}" for name in PLANNERS) +
                        f"; for {_and(name for name in PLANNERS if not planner_of(name).joint)}, --mode mqo means "
                        "shared" + (f" (default: {default})" if default else f" (default: {_and(named('compared'))})"))
    p.add_argument("--tree-shape", choices=TREE_SHAPES, default=None,
                   help="with --planner tree: the cheapest linear (deep) tree, the cheapest most balanced (bushy) "
                        "tree, or the cheapest of all (best, the default)")
    p.add_argument("--decompose", action="store_true",
                   help="with --planner mjoin: split MJoins by the paper's appendix A.2 rule (D(k,l) > S(k,l))")
    p.add_argument("--groups", type=int, default=None, metavar="D",
                   help="with --planner pmjoin: partition every PMJoin's streams into D value groups (default 1)")
    p.add_argument("--partition-by", choices=("hash", "range", "rate"), default=None,
                   help="with --planner pmjoin: how values are grouped (default rate: k-means of rank vectors)")
    p.add_argument("--tuple-sizes", choices=("sum", "unit"), default=None,
                   help="with --planner pmjoin: a result tuple is as large as its inputs together (sum, the "
                        "default) or all tuples are equal (unit)")
    p.add_argument("--value-rates", metavar="DIR", default=None,
                   help="with --planner pmjoin: estimate the rates per join value from DIR/<relation>.csv or "
                        ".parquet (run: default its --data)")


def _optimize(args: argparse.Namespace, workload=None, monitor=None):
    from mqjoin.planning.optimizer import optimize

    w = workload if workload is not None else load_named_workload(args.workload)
    return optimize(w, mode=args.mode, partitioning=args.partitioning, mirs=not args.no_mirs,
                    solver=args.solver, time_limit=args.time_limit, mir_budget=args.mir_budget,
                    planner=args.planner, tree_shape=args.tree_shape, decompose=args.decompose,
                    pmjoin=_pmjoin_options(args, w), monitor=monitor)


#: ``optimize`` prints the solve's progress on stderr once it has run this long (seconds):
#: every better plan, and a better bound alone at most once per this many seconds (a solve
#: that ends sooner prints nothing)
PROGRESS_AFTER = 0.5


@contextlib.contextmanager
def _watched():
    """A :class:`~mqjoin.planning.ilp.monitor.Monitor` for one ``optimize``: its progress on
    stderr (:data:`PROGRESS_AFTER`), and Ctrl-C (SIGINT) stops the solve, which returns its best
    plan so far; a second Ctrl-C interrupts as usual."""
    import signal
    import threading

    from mqjoin.planning.ilp.monitor import Monitor

    shown = [-PROGRESS_AFTER, math.inf]  # the last line printed: its seconds and incumbent

    def show(r) -> None:  # a better plan at once, a better bound alone once per PROGRESS_AFTER s
        if r.seconds >= PROGRESS_AFTER and (r.incumbent < shown[1] or r.seconds >= shown[0] + PROGRESS_AFTER):
            shown[:] = [r.seconds, r.incumbent]
            print(f"mqjoin: {r.describe()}", file=sys.stderr, flush=True)

    monitor = Monitor(on_report=show)
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield monitor
        return

    def stop(signum, frame) -> None:
        if monitor.stopped:
            raise KeyboardInterrupt
        monitor.stop()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield monitor
    finally:
        signal.signal(signal.SIGINT, previous)


def _pmjoin_options(args: argparse.Namespace, workload, planner: str | None = None):
    """PMJoin's options from the command line (``None`` for another planner, which must not
    be given any of them); per-value rates come from ``--value-rates`` or ``run``'s data."""
    from mqjoin.planners.pmjoin import PMJoinOptions, value_rates
    from mqjoin.model.tables import read_inputs

    given = [f for f, v in (("--groups", args.groups), ("--partition-by", args.partition_by),
                            ("--tuple-sizes", args.tuple_sizes), ("--value-rates", args.value_rates)) if v is not None]
    if not planner_of(planner or args.planner).pmjoin_options:
        if given:
            raise PlannerError(f"{', '.join(given)} work with --planner pmjoin only, not {planner or args.planner}")
        return None
    data = args.value_rates or getattr(args, "data", None)
    rates = value_rates(workload, read_inputs(workload, data)) if data else None
    return PMJoinOptions(rates, 1 if args.groups is None else args.groups, args.partition_by or "rate",
                         args.tuple_sizes or "sum")


def _clash_only(args: argparse.Namespace, what: str) -> None:
    """Refuse options that need the CLASH optimiser when another planner is chosen."""
    if not planner_of(args.planner).ilp:
        raise PlannerError(f"{what} works with --planner clash only, not {args.planner}; leave one of them out")


def _stats_from(args: argparse.Namespace):
    """``optimize --stats-from RUN.json``: the workload with the join sizes the run measured,
    and the plan optimised without them (to show what changed)."""
    from mqjoin.planning.measured import measured_workload

    w = load_named_workload(args.workload)
    try:
        run = json.loads(Path(args.stats_from).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OptionError(f"--stats-from: {args.stats_from!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OptionError(f"--stats-from: cannot read {args.stats_from!r} as the JSON of 'mqjoin run --json': {e}") from None
    if not isinstance(run, dict) or "predicted" not in run:
        raise OptionError(f"--stats-from: {args.stats_from!r} has no 'predicted' section; write it with "
                          f"'mqjoin run W --data D --out O --json > RUN.json' (reference engine)")
    return w, measured_workload(w, run["predicted"])


def cmd_optimize(args: argparse.Namespace) -> int:
    before = None
    if args.stats_from:
        w0, w = _stats_from(args)
        before = _optimize(args, w0)
        res = _optimize(args, w)
    else:
        with _watched() as monitor:
            res = _optimize(args, monitor=monitor)
    if args.plan_out:
        write_text(args.plan_out, res.plan.to_json())
    if args.export:
        from mqjoin.planning.candidates import enumerate_candidates
        from mqjoin.planning.ilp import build_model, export

        _clash_only(args, "--export (the ILP model)")
        if args.mode != "mqo":
            raise OptionError("--export writes the joint (mqo) model; use it with --mode mqo")
        export(build_model(enumerate_candidates(res.workload, mirs=not args.no_mirs), args.partitioning,
                           args.mir_budget), args.export)
    replanned = None
    if before is not None:
        from mqjoin.planning.measured import replan_report

        replanned = replan_report(before.plan, res.plan)
    progress = [] if before is not None else [r.to_dict() for r in monitor.reports]
    if args.json:
        print(json.dumps({**res.to_dict(), **({"stats_from": replanned.to_dict()} if replanned else {}),
                          "progress": progress}, indent=1, ensure_ascii=False))
    else:
        print(res.summary())
        if res.workload.sizes:
            print(f"join sizes: {len(res.workload.sizes)} measured (the workload's 'sizes'), the others estimated "
                  f"as if the classes were independent")
        if args.tree:
            print("probe trees:")
            print(res.plan.render())
        if replanned:
            print(replanned.render())
    if res.ilp.status == "interrupted":
        print(f"mqjoin: interrupted: the best plan so far, incumbent {res.ilp.objective:g} and bound "
              f"{res.ilp.bound:g}; it may be up to {res.ilp.gap:.2%} above the optimum", file=sys.stderr)
    elif res.ilp.status != "optimal":
        print(f"mqjoin: warning: the solver stopped at its time limit with incumbent {res.ilp.objective:g} and "
              f"bound {res.ilp.bound:g}; the plan may be up to {res.ilp.gap:.2%} above the optimum", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from mqjoin.model.tables import ResultWriter, read_inputs, read_results
    from mqjoin.runtime.reference import run_reference
    from mqjoin.support.phases import Phases

    budget = _budget_options(args)
    if budget and (args.adaptive or args.changes or args.static):
        raise OptionError("--cpu-budget runs a static binary tree plan; leave out --adaptive/--changes/--static")

    if args.adaptive or args.changes or args.static:
        if not planner_of(args.planner).replans:
            _clash_only(args, "--adaptive/--changes/--static (re-optimisation)")
        return _run_adaptive(args)
    if budget and args.engine != "reference":
        raise OptionError(f"--cpu-budget runs on the reference engine, not --engine {args.engine}")
    if args.engine == "native":
        _clash_only(args, "--engine native (Spark's own joins, no plan)")
    phases = Phases()
    starting = _start_spark_ahead(args) if args.engine != "reference" else None
    with phases("optimise"):
        res = _optimize(args)
    with phases("input"):
        tables = read_inputs(res.workload, args.data)
    if args.engine == "reference":
        with ResultWriter(res.workload, args.out) as put:
            def sink(q, entries):  # the results, handed over as the run goes: their writing is output's
                with phases("output"):
                    put.add(q, entries)
            t0 = time.perf_counter()
            run = run_reference(res.plan, tables, sink=sink, **budget)
            phases.add("batches", time.perf_counter() - t0 - phases.seconds.get("output", 0.0))
            with phases("output"):
                put.close()
        from mqjoin.planning.measured import check_run

        check = check_run(res.plan, run.probe_messages, run.store_rows, run.duration)
        summary = {"engine": args.engine, "mode": args.mode, "partitioning": args.partitioning,
                   "predicted_probe_cost": res.probe_cost, **run.summary(), "out": str(args.out),
                   "predicted": check.to_dict()}
        counts = dict(run.counts)
        if budget:
            from mqjoin.runtime.shedding import deficit

            full = run_reference(res.plan, tables, collect=False).counts
            summary["budget"].update(unbounded_results=full, deficit=deficit(counts, full))
    else:
        d = _run_spark(args, res.plan, tables, spark=starting, phases=phases)
        summary = {"engine": args.engine, "mode": args.mode if args.engine == "spark" else "native",
                   "partitioning": args.partitioning, "predicted_probe_cost": res.probe_cost,
                   **d.summary(), "out": str(args.out)}
        counts = summary["results"]
        check = _spark_check(res.plan, d, tables) if args.engine == "spark" else None
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
            raise ResultMismatchError("results differ from the brute-force oracle (docs/model.md §6): please report this")
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        if args.engine == "reference":
            print(f"{run.input_tuples} input tuples in {run.seconds:.2f}s ({run.throughput:,.0f} tuples/s), "
                  f"{run.total_probe_messages} probe messages")
            print(check.render())
            if budget:
                print(_budget_line(summary["budget"]))
        else:
            print(_spark_line(summary))
            if check is not None:
                print(check.render())
        for q, n in counts.items():
            print(f"  {q:>8}: {n} results → {Path(args.out) / (q + '.parquet')}")
        print(f"whole command {_phases_line(summary['phases'])}")
        if args.check:
            print(summary["check"])
    return 0


def _phases_line(p: dict) -> str:
    """``run``'s phases in one line (``start``: Spark's start, in a thread beside optimise and input)."""
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in p.items() if k != "whole")
    return f"{p['whole']:.1f} s: {parts} (s)"


def _start_spark_ahead(args: argparse.Namespace):
    """Spark's session started in a thread (after the options that need no data are checked),
    to run while the plan is optimised and the input read and packed."""
    from mqjoin.runtime.spark.deployment import Pacing
    from mqjoin.runtime.spark.session import install_java, start_ahead

    Pacing(args.rate, args.speedup, args.max_rows_per_batch).options()  # bad pacing: before Spark starts
    install_java()  # the CLI is the set-up path: Java when missing (as root on Debian), else how to get it
    return start_ahead(args.master)


def _spark_check(plan, deployment, tables):
    """Predicted beside measured for a Spark deployment of ``plan``, per store (its micro-batches
    count messages per store and rows held after each batch); ``None`` when it counted none."""
    from mqjoin.planning.measured import store_counts

    counts = store_counts("spark", plan, deployment.stores, tables)
    return None if counts is None else counts.check()


def _budget_options(args: argparse.Namespace) -> dict:
    """``run_reference``'s CPU budget keywords from ``run``'s options (empty: no budget)."""
    given = {k: v for k, v in (("allocation", args.allocation), ("cycle", args.cycle),
                               ("freshness", args.freshness)) if v is not None}
    if args.cpu_budget is None:
        if given:
            raise OptionError(f"--{next(iter(given))} divides a CPU budget: give --cpu-budget N too")
        return {}
    return {"cpu_budget": args.cpu_budget, **given}


def _budget_line(b: dict) -> str:
    """One line per budgeted run: probes admitted and shed, results missing, stale streams."""
    deficits = ", ".join(f"{q} {d:.1%}" for q, d in b["deficit"].items())
    mu = "unlimited" if b["cpu_budget"] is None else f"{b['cpu_budget']:g} probes/s"
    return (f"CPU budget {mu} ({b['allocation']}, {b['cycle']:g}s cycles): {b['probes']} "
            f"probes, {b['shed']} shed; results missing vs the unbounded run: {deficits}; stale streams: "
            f"{', '.join(b['stale']) or 'none'}")


def _run_adaptive(args: argparse.Namespace) -> int:
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
    optimizer = None
    if not planner_of(args.planner).ilp:  # a re-planner of its own: AJoin re-plans each batch of changes incrementally
        from mqjoin.planners.ajoin import ajoin_optimizer

        optimizer = ajoin_optimizer()
    if args.engine == "spark":
        d = _run_spark(args, w, None, policy=policy, changes=changes, optimizer=optimizer)
        run = d.snapshot()
        tables = d.tables
        summary = {"engine": "spark", "adaptive": True, **run.summary(), "spark": d.summary(), "out": str(args.out)}
    else:
        from mqjoin.runtime.epochs import run_adaptive

        tables = read_inputs(full, args.data)
        run = run_adaptive(w, tables, policy, changes, speedup=args.speedup or 1.0, optimizer=optimizer)
        write_results(full, run.results, args.out)
        summary = {"engine": "reference", "adaptive": True, **run.summary(), "out": str(args.out)}
    if args.check:
        from mqjoin.runtime.oracle import adaptive_oracle_results

        ok = run.result_sets() == adaptive_oracle_results(w, tables, changes, policy)
        summary["check"] = "equal to the oracle" if ok else "DIFFERENT from the oracle"
        if not ok:
            raise ResultMismatchError("adaptive results differ from the brute-force oracle (docs/model.md §6): please report this")
    if args.json:
        print(json.dumps(summary, indent=1, default=str, ensure_ascii=False))
        return 0
    if args.engine == "spark":
        print(_spark_line({**summary["spark"], "engine": "spark (adaptive)"}))
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


def _spark_line(s: dict) -> str:
    lat = "" if s.get("latency_mean") is None else \
        f", latency mean {s['latency_mean']:.2f}s / p95 {s['latency_p95_max']:.2f}s"
    state = "" if s.get("state_rows_max") is None else f", state ≤ {s['state_rows_max']:,} rows"
    thr = f" ({s['throughput']:,.0f} tuples/s busy)" if s.get("throughput") else ""
    return (f"{s['engine']}: {s['input_tuples']:,} input tuples in {s['batches']} micro-batches, "
            f"{s['busy_seconds']:.1f}s{thr}{lat}{state}; Spark UI {s.get('ui')}")


def _run_spark(args: argparse.Namespace, plan, tables, spark=None, phases=None, **adaptive):
    """Deploy on Spark, print one progress line per micro-batch on stderr, wait, write results.
    ``adaptive`` (``policy=``, ``changes=``, ``optimizer=``): an adaptive deployment of the
    workload ``plan`` reading its inputs from ``--data`` (relations added queries join included).
    ``spark``: a session (or one starting, :func:`_start_spark_ahead`); ``phases``
    (:class:`~mqjoin.support.phases.Phases`) learns where the seconds went."""
    from mqjoin.runtime.spark.launch import deploy
    from mqjoin.runtime.spark.session import install_java
    from mqjoin.support.phases import Phases

    phases = phases if phases is not None else Phases()
    if spark is None:
        install_java()  # the CLI is the set-up path: Java when missing (as root on Debian), else how to get it
    quiet = getattr(args, "json", False)
    if adaptive:
        tables = args.data
        adaptive = {"adaptive": adaptive["policy"], "changes": adaptive["changes"],
                    "optimizer": adaptive.get("optimizer")}
    if not adaptive:
        adaptive = {"mode": getattr(args, "spark_mode", "auto")}
    t0 = time.perf_counter()
    d = deploy(plan, tables, args.out, engine="mqjoin" if args.engine == "spark" else "native", spark=spark,
               master=args.master, checkpoint=args.checkpoint, rate=args.rate, speedup=args.speedup,
               max_rows_per_batch=args.max_rows_per_batch, **adaptive)
    timings = getattr(d, "timings", {})
    phases.add("start", getattr(spark, "seconds", None))  # in a thread, beside optimise and input
    phases.add("pack", timings.get("replay_log"))
    phases.add("start_wait", timings.get("session_wait"))
    phases.add("deploy", time.perf_counter() - t0 - sum(timings.values()))
    if not quiet:
        print(f"mqjoin: deployed on Spark ({d.spark.sparkContext.master}), UI {d.ui_url}", file=sys.stderr)
        if d.engine_name == "mqjoin":
            print(f"mqjoin: spark mode {d.mode_choice.mode} — {d.mode_choice.reason}", file=sys.stderr)

        def show(ev: dict) -> None:
            if ev["kind"] == "batch":
                print(f"  batch {ev['batch']}: {ev['input_rows']:,} tuples in {ev['seconds']:.2f}s, "
                      f"{ev['results']:,} results, state {ev['state_rows']:,} rows", file=sys.stderr)
            elif ev["kind"] == "query" and ev["results"]:
                print(f"  {ev['query']} batch {ev['batch']}: {ev['results']:,} results", file=sys.stderr)
            elif ev["kind"] == "epoch":
                print(f"  epoch {ev['epoch']}: plan {ev['plan']}, {sum(ev['results'].values()):,} results, "
                      f"{ev['probe_messages']:,} probe messages", file=sys.stderr)
            elif ev["kind"] == "switch":
                print(f"  switch: plan {ev['plan']} from epoch {ev['active_from']} — {ev['reason']}", file=sys.stderr)
        d.subscribe(show)
    t0 = time.perf_counter()
    try:
        try:
            finished = d.wait(args.timeout)
        except EngineError as e:
            if isinstance(e.__cause__, MqjoinError) and not isinstance(e.__cause__, EngineError):
                raise  # bad input found while running (e.g. a value of the data): exit 2
            raise RunFailedError(str(e)) from e
        if not finished:
            raise EngineError(f"the deployment did not finish within {args.timeout:g}s "
                              "(raise --timeout or --rate); committed results are kept in --out")
    finally:
        d.stop()
        d.cleanup()
        phases.add("batches", time.perf_counter() - t0)
    with phases("output"):
        d.write_results()
    return d


def cmd_candidates(args: argparse.Namespace) -> int:
    from mqjoin.planning.candidates import MIR, enumerate_candidates, owner_label

    w = load_named_workload(args.workload)
    c = enumerate_candidates(w, mirs=not args.no_mirs)
    data: dict[str, Any] = {
        "mirs": [m.label for m in c.mirs],
        "partition_candidates": {m.label: [str(a) for a in a_] for m, a_ in c.partition_candidates.items()},
        "probe_orders": {owner_label(o): {s: [str(x) for x in os_] for s, os_ in by.items()}
                         for o, by in c.orders.items()},
        "size": c.size,
    }
    if args.json:
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    print("MIRs:", ", ".join(data["mirs"]))
    print("partition candidates:")
    for m, a_ in data["partition_candidates"].items():
        print(f"  {m}: {', '.join(a_)}")
    for o, by in c.orders.items():
        kind = "MIR" if isinstance(o, MIR) else "query"
        print(f"probe orders of {kind} {owner_label(o)}:")
        for s, os_ in by.items():
            print(f"  {s}: {', '.join(str(x) for x in os_)}")
    print(f"{data['size']['probe_orders']} probe orders, {data['size']['steps']} distinct steps, "
          f"{data['size']['stores']} stores")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from mqjoin.planning.comparison import COMPARED_PLANNERS, compare, settings
    from mqjoin.planners.registry import check_planner

    w = load_named_workload(args.workload)
    planners = (args.planner,) if args.planner else COMPARED_PLANNERS
    if args.planner:  # without one, --tree-shape applies to the tree rows and --decompose to the mjoin rows
        check_planner(args.planner, args.tree_shape, args.decompose)
    pmjoin = _pmjoin_options(args, w, args.planner or "clash")
    plans = compare(w, settings(planners, args.tree_shape, args.decompose), mirs=not args.no_mirs, solver=args.solver,
                    time_limit=args.time_limit, pmjoin=pmjoin)
    rows = [{"mode": s.mode, "partitioning": s.partitioning, "probe_cost": r.probe_cost, "memory": r.memory,
             "stores": len(r.plan.stores), "status": r.ilp.status, "planner": s.label} for s, r in plans.items()]
    chosen = None
    if args.stats_from:  # every plan costed on the join sizes the run measured, and which are on their front
        from mqjoin.planning.measured import memory_on, pareto_front
        from mqjoin.planning.plan import recost

        sized = _stats_from(args)[1]
        for row, r in zip(rows, plans.values()):
            row["measured_probe_cost"], row["measured_memory"] = recost(r.plan, sized), memory_on(r.plan, sized)
        for row, front in zip(rows, pareto_front((r["measured_probe_cost"], r["measured_memory"]) for r in rows)):
            row["measured_front"] = front
        # the plan `mqjoin optimize` chooses with these options: mqo (or the planner's only mode), single
        chosen = next((r for r in rows if r["partitioning"] == "single" and r["mode"] == "mqo"
                       and r["planner"] == (args.planner or "clash")), None)
        if chosen is not None:
            chosen["chosen"] = True
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    measured = f"{'on measured':>14}{'memory':>14}{'front':>7}" if args.stats_from else ""
    print(f"{'partitioning':<13}{'mode':<12}{'probe cost':>14}{'memory':>14}{measured}{'stores':>8}  planner")
    for r in rows:
        m = (f"{r['measured_probe_cost']:>14,.1f}{r['measured_memory']:>14,.1f}{'*' if r['measured_front'] else '':>7}"
             if args.stats_from else "")
        print(f"{r['partitioning']:<13}{r['mode']:<12}{r['probe_cost']:>14,.1f}{r['memory']:>14,.1f}{m}"
              f"{r['stores']:>8}  {r['planner']}{'  ← chosen' if r is chosen else ''}")
    if chosen is not None:
        print(f"* on the Pareto front of probe cost and memory on the measured sizes; the optimiser's choice "
              f"({chosen['planner']} mqo single) is {'on' if chosen['measured_front'] else 'not on'} it")
    return 0


def cmd_frontier(args: argparse.Namespace) -> int:
    from mqjoin.planning.frontier import frontier

    f = frontier(load_named_workload(args.workload), mirs=not args.no_mirs, solver=args.solver, time_limit=args.time_limit,
                 max_points=args.max_points)
    print(json.dumps(f.to_dict(), indent=1, ensure_ascii=False) if args.json else f.summary())
    return 0


def cmd_partitions(args: argparse.Namespace) -> int:
    from mqjoin.model.errors import DataError
    from mqjoin.model.tables import read_inputs
    from mqjoin.planning.plan import Plan
    from mqjoin.runtime.partitions import check_counts, project, render

    counts = check_counts(args.partitions.split(","))
    if args.batch is not None and args.batch < 1:
        raise OptionError(f"--batch must be a number of input tuples ≥ 1, got {args.batch}")
    if args.plan:
        try:
            text = Path(args.plan).read_text()
        except OSError as e:
            raise DataError(f"cannot read the plan {args.plan}: {e.strerror or e}") from None
        plan = Plan.from_json(text)
    else:
        plan = _optimize(args).plan
    tables = read_inputs(plan.workload, args.data) if args.data else None
    rows = project(plan, tables, counts, batch=args.batch)
    if args.json:
        print(json.dumps({"partitions": list(counts), "data": args.data, "stores": [r.to_dict() for r in rows]},
                         indent=1, ensure_ascii=False))
        return 0
    span = "over the data's span" if tables else "per time unit (no --data: the model alone, values spread evenly)"
    print(f"probe messages and rows per partition of every store, the model's fullest partition {span}"
          + ("; measured: one run of the vectorised executor over the data" if tables else ""))
    print(render(rows))
    return 0


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
        d = _run_spark(args, res.plan, tables)
        got = d.results()
        print(_spark_line(d.summary()))
        same = got == run.result_sets()
        print(f"Spark results {'=' if same else '≠'} reference results"
              + ("" if want is None else f" {'=' if got == want else '≠'} oracle"))
        if not same or (want is not None and got != want):
            raise ResultMismatchError("Spark results differ from the reference engine (docs/model.md §6): please report this")
    print("\n'measured/model': probe messages per second over the modelled probe cost.  Windows are not "
          "in the cost model (docs/model.md §1),\nso this is only indicative here; benchmarks/reference_throughput.py "
          "checks it where the model's assumptions hold (≈ 1.00).")
    print("\nmqo/single plan:\n" + res.summary())
    print("\nprobe trees:\n" + res.plan.render())
    write_results(w, run.results, args.out)
    print(f"\nresults of mqo/single written to {args.out}/<query>.parquet")
    return 0


def _spark_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Spark engines")
    g.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    g.add_argument("--spark-mode", choices=("auto", "driver", "distributed"), default="auto",
                   help="where the plan's stores live: driver (in the driver's executor, one Spark job per "
                   "micro-batch), distributed (the stores sharded over the executors, for state beyond one "
                   "machine) or auto (the default: distributed on a cluster master, and on a local one when the "
                   "model's estimated state exceeds half the machine's available memory; the choice and its reason are printed)")
    g.add_argument("--rate", type=float, metavar="N", help="replay N input tuples per second (default: as fast "
                   "as the engine takes them)")
    g.add_argument("--speedup", type=float, metavar="X", help="replay at X times event time")
    g.add_argument("--max-rows-per-batch", type=int, metavar="N", help="cap a micro-batch at N input tuples")
    g.add_argument("--checkpoint", metavar="DIR", help="checkpoint directory: rerun with the same DIR and --out "
                   "to resume a stopped or killed run (default: a temporary one)")
    g.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds")


def _adaptive_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("adaptivity (paper Section VI)")
    g.add_argument("--adaptive", action="store_true", help="re-optimise every epoch on sampled statistics (--engine reference or spark); a new "
                   "plan is active from the epoch after next")
    g.add_argument("--epoch", type=float, default=1.0, metavar="S", help="epoch length in seconds of event time "
                   "(default 1)")
    g.add_argument("--threshold", type=float, default=0.1, metavar="X", help="switch only when the new plan is "
                   "predicted to save more than X of the running plan's probe cost (default 0.1)")
    g.add_argument("--changes", metavar="FILE", help="changelog YAML: queries added and removed at run time "
                   "(implies --adaptive)")
    g.add_argument("--static", action="store_true", help="with --adaptive/--changes: keep the plan whatever the "
                   "statistics (the static baseline); query changes still apply")
    g.add_argument("--sample", type=float, default=1.0, metavar="F", help="fraction of join values sampled for "
                   "selectivities (default 1: all)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mqjoin", description="Optimise and run multiple multi-way stream joins (CLASH).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    o = sub.add_parser("optimize", help="optimise a workload and print the plan")
    o.add_argument("workload", help="workload YAML file (or a bundled one: paper_v2.yaml, paper_fig3.yaml, demo.yaml)")
    _opt_args(o)
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.add_argument("--tree", action="store_true", help="also print the probe trees")
    o.add_argument("--plan-out", metavar="FILE", help="write the plan as JSON")
    o.add_argument("--export", metavar="FILE", help="write the ILP as .lp or .mps")
    o.add_argument("--stats-from", metavar="RUN.json", help="re-plan with the join sizes a run measured (the JSON "
                   "of 'mqjoin run --json', reference engine) and show what changed: plan diff, probe cost and "
                   "memory before and after, both under the measured sizes")
    o.set_defaults(func=cmd_optimize)

    r = sub.add_parser("run", help="optimise, then run the plan over input data")
    r.add_argument("workload")
    r.add_argument("--data", required=True, metavar="DIR", help="input: DIR/<relation>.csv or .parquet")
    r.add_argument("--out", required=True, metavar="DIR", help="output: DIR/<query>.parquet")
    r.add_argument("--engine", choices=("reference", "spark", "native"), default="reference",
                   help="reference (in-process), spark (the plan on Spark Structured Streaming) or native "
                        "(Spark's own stream-stream joins, one query each: the baseline)")
    _opt_args(r)
    _spark_args(r)
    _adaptive_args(r)
    g = r.add_argument_group("CPU budget (JAQPOT; reference engine, one query, --planner tree)")
    g.add_argument("--cpu-budget", type=float, default=None, metavar="N",
                   help="at most N probes per second of event time; probes beyond an allocation are shed, tuples "
                        "never (the summary reports the result deficit against the unbounded run and staleness)")
    g.add_argument("--allocation", default=None, metavar="POLICY",
                   help="how the budget is divided over the half-way joins: JAQPOT (default), GrePP, EqualHJ, "
                        "GlobalHJPR, EBestHJP or SBestHJP")
    g.add_argument("--cycle", type=float, default=None, metavar="S", help="execution cycle in seconds (default 1)")
    g.add_argument("--freshness", type=float, default=None, metavar="X",
                   help="freshness predicates: X times each stream's unbounded staleness (default 1.5)")
    r.add_argument("--check", action="store_true", help="compare results with the brute-force oracle (with "
                   "--cpu-budget: a subset of it)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("candidates", help="list MIRs, partition candidates and probe orders")
    c.add_argument("workload")
    c.add_argument("--no-mirs", action="store_true")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_candidates)

    cm = sub.add_parser("compare", help="probe cost and memory of every mode and policy")
    cm.add_argument("workload")
    cm.add_argument("--no-mirs", action="store_true")
    cm.add_argument("--solver", choices=SOLVERS, default="highs")
    cm.add_argument("--time-limit", type=float, default=60.0)
    _planner_args(cm, default=None)
    cm.add_argument("--stats-from", metavar="RUN.json", help="add every plan's probe cost and memory on the join sizes "
                    "a run measured (the JSON of 'mqjoin run --json'), and mark the plans on their Pareto front")
    cm.add_argument("--json", action="store_true")
    cm.set_defaults(func=cmd_compare)

    fr = sub.add_parser("frontier", help="Pareto curve of probe cost against memory (policy budget: extra "
                                         "replicas of stores), with single, replicas, individual and shared marked")
    fr.add_argument("workload")
    fr.add_argument("--no-mirs", action="store_true")
    fr.add_argument("--solver", choices=("highs", "cbc"), default="highs")
    fr.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    fr.add_argument("--max-points", type=int, default=25, help="at most this many budget solves (default 25)")
    fr.add_argument("--json", action="store_true")
    fr.set_defaults(func=cmd_frontier)

    pa = sub.add_parser("partitions", help="probe messages and rows per partition of every store at several "
                                           "partition counts: the model's and the data's (the skew before a cluster)")
    pa.add_argument("workload")
    pa.add_argument("--data", metavar="DIR", help="input: DIR/<relation>.csv or .parquet (counts per partition "
                    "measured on it, distinct values of the partition attributes; default: the model alone)")
    pa.add_argument("--plan", metavar="FILE", help="a plan written by 'mqjoin optimize --plan-out' (default: "
                    "optimise the workload with the options below)")
    pa.add_argument("--partitions", default="8,32,128", metavar="P,P,…",
                    help="partition counts to project (default 8,32,128)")
    pa.add_argument("--batch", type=int, default=100_000, metavar="N", help="run the data N input tuples at a "
                    "time (default 100000)")
    pa.add_argument("--json", action="store_true")
    _opt_args(pa)
    pa.set_defaults(func=cmd_partitions)

    s = sub.add_parser("synth", help="generate uniform synthetic input streams for a workload")
    s.add_argument("workload")
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--duration", type=float, default=1.0, help="event-time span in seconds (default 1)")
    s.add_argument("--scale", type=float, default=1.0, help="multiply every rate (default 1)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    s.set_defaults(func=cmd_synth)

    d = sub.add_parser("demo", help="the main job: optimise, run and check the bundled demo workload")
    d.add_argument("--workload", default="demo.yaml")
    d.add_argument("--duration", type=float, default=2.0)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default="out/demo")
    d.add_argument("--no-check", dest="check", action="store_false", help="skip the brute-force oracle")
    d.add_argument("--engine", choices=("spark", "reference"), default="spark",
                   help="also run the mqo plan on local Spark (default), or only on the reference engine")
    d.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    d.set_defaults(func=cmd_demo)

    add_dataset_parsers(sub, _Parser)  # data tpch / data synthetic / stats
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if hasattr(args, "time_limit"):  # the optimiser's options, checked before any data is read
            check_options(getattr(args, "mode", "mqo"), getattr(args, "partitioning", "single"),
                          args.solver, args.time_limit, getattr(args, "mir_budget", None))
        return args.func(args)
    except InternalError as e:
        print(f"mqjoin: internal error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INTERNAL
    except RunFailedError as e:
        print(f"mqjoin: engine error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ENGINE
    except MqjoinError as e:
        print(f"mqjoin: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mqjoin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
