"""A run on Spark from the command line: deploy, follow its micro-batches on stderr, wait,
write the results; the one-line summary and the predicted-beside-measured check."""

from __future__ import annotations

import argparse
import sys

from mqjoin.model.errors import EngineError, MqjoinError, RunFailedError


def spark_check(plan, deployment, tables):
    """Predicted beside measured for a Spark deployment of ``plan``, per store (its micro-batches
    count messages per store and rows held after each batch); ``None`` when it counted none."""
    from mqjoin.planning.measured import store_counts

    counts = store_counts("spark", plan, deployment.stores, tables)
    return None if counts is None else counts.check()



def spark_line(s: dict) -> str:
    lat = "" if s.get("latency_mean") is None else \
        f", latency mean {s['latency_mean']:.2f}s / p95 {s['latency_p95_max']:.2f}s"
    state = "" if s.get("state_rows_max") is None else f", state ≤ {s['state_rows_max']:,} rows"
    thr = f" ({s['throughput']:,.0f} tuples/s busy)" if s.get("throughput") else ""
    return (f"{s['engine']}: {s['input_tuples']:,} input tuples in {s['batches']} micro-batches, "
            f"{s['busy_seconds']:.1f}s{thr}{lat}{state}; Spark UI {s.get('ui')}")


def run_spark(args: argparse.Namespace, plan, tables, **adaptive):
    """Deploy on Spark, print one progress line per micro-batch on stderr, wait, write results.
    ``adaptive`` (``policy=``, ``changes=``, ``optimizer=``): an adaptive deployment of the
    workload ``plan`` reading its inputs from ``--data`` (relations added queries join included)."""
    from mqjoin.runtime.spark.launch import DeployOptions, deploy
    from mqjoin.runtime.spark.session import install_java

    install_java()  # the CLI is the set-up path: Java when missing (as root on Debian), else how to get it
    quiet = getattr(args, "json", False)
    if adaptive:
        tables = args.data
        adaptive = {"adaptive": adaptive["policy"], "changes": adaptive["changes"],
                    "optimizer": adaptive.get("optimizer")}
    if not adaptive:
        adaptive = {"mode": getattr(args, "spark_mode", "auto")}
    options = DeployOptions(engine="mqjoin" if args.engine == "spark" else "native", master=args.master,
                            checkpoint=args.checkpoint, rate=args.rate, speedup=args.speedup,
                            max_rows_per_batch=args.max_rows_per_batch, **adaptive)
    d = deploy(plan, tables, args.out, options)
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
    d.write_results()
    return d
