"""A run on Spark from the command line: deploy, follow its micro-batches on stderr, wait,
write the results; the one-line summary and the predicted-beside-measured check."""

from __future__ import annotations

import argparse
import sys
import time

from mqjoin.model.errors import EngineError, MqjoinError, RunFailedError


def spark_check(plan, deployment, tables):
    """Predicted beside measured for a Spark deployment of ``plan``, per store (its micro-batches
    count messages per store and rows held after each batch); ``None`` when it counted none."""
    from mqjoin.planning.measured import store_counts

    counts = store_counts("spark", plan, deployment.stores, tables, deployment.batches)
    return None if counts is None else counts.check()



def spark_line(s: dict) -> str:
    lat = "" if s.get("latency_mean") is None else \
        f", latency mean {s['latency_mean']:.2f}s / p95 {s['latency_p95_max']:.2f}s"
    state = "" if s.get("state_rows_max") is None else f", state ≤ {s['state_rows_max']:,} rows"
    thr = f" ({s['throughput']:,.0f} tuples/s busy)" if s.get("throughput") else ""
    return (f"{s['engine']}: {s['input_tuples']:,} input tuples in {s['batches']} micro-batches, "
            f"{s['busy_seconds']:.1f}s{thr}{lat}{state}; Spark UI {s.get('ui')}")


#: input tuples per micro-batch of an unpaced run without --max-rows-per-batch: the whole input
#: in one batch would hold all its results at once (at TPC-H SF 1 Figure 7(a), 37.6 million)
BATCH_ROWS = 1_000_000


def batch_rows(args: argparse.Namespace) -> int | None:
    """The micro-batch cap of a run: ``--max-rows-per-batch``, else :data:`BATCH_ROWS` when the
    input is not paced (``--rate``/``--speedup`` pace it: a batch is what arrived meanwhile)."""
    if args.max_rows_per_batch is not None or args.rate or args.speedup:
        return args.max_rows_per_batch
    return BATCH_ROWS


def start_spark_ahead(args: argparse.Namespace):
    """Spark's session started in a thread (after the options that need no data are checked),
    to run while the plan is optimised and the input read and packed."""
    from mqjoin.runtime.spark.deployment import Pacing
    from mqjoin.runtime.spark.session import install_java, start_ahead

    Pacing(args.rate, args.speedup, args.max_rows_per_batch).options()  # bad pacing: before Spark starts
    install_java()  # the CLI is the set-up path: Java when missing (as root on Debian), else how to get it
    return start_ahead(args.master)


def run_spark(args: argparse.Namespace, plan, tables, spark=None, phases=None, **adaptive):
    """Deploy on Spark, print one progress line per micro-batch on stderr, wait, write results.
    ``adaptive`` (``policy=``, ``changes=``, ``optimizer=``): an adaptive deployment of the
    workload ``plan`` reading its inputs from ``--data`` (relations added queries join included).
    ``spark``: a session (or one starting, :func:`start_spark_ahead`); ``phases``
    (:class:`~mqjoin.support.phases.Phases`) learns where the seconds went."""
    from mqjoin.runtime.spark.launch import DeployOptions, deploy
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
    options = DeployOptions(engine="mqjoin" if args.engine == "spark" else "native", spark=spark, master=args.master,
                            checkpoint=args.checkpoint, rate=args.rate, speedup=args.speedup,
                            max_rows_per_batch=batch_rows(args), **adaptive)
    d = deploy(plan, tables, args.out, options)
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
