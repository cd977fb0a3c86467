"""Spark engines side by side on the paper's TPC-H workloads (Figure 7(a), and ten queries).

For each engine — the ``mqo`` plan, the ``shared`` and ``individual`` plans of our engine, and
``native`` (every query a chain of Spark stream-stream joins) — one unpaced run over the same
TPC-H streams in ``local[2]``, ``--batch`` input tuples per micro-batch:

* throughput: input tuples / busy seconds (the sum of micro-batch durations);
* state: the largest number of rows held (our engine: all stores; native: Spark's join state)
  and bytes (Spark's block manager for our stores; the state store's memory for native);
* latency: result commit time − the arrival of its triggering tuple (unpaced, a tuple
  arrives when its micro-batch is planned, so this is the processing latency of a batch);
* probe messages: measured in Spark per store vs the reference executor on the same data
  (the same definition: must be 1.000) and vs the cost model's prediction (probe cost per
  second × event-time span; indicative only — TPC-H keys are not uniform and the windows here
  keep the whole history, which the per-time-unit model does not describe);
* ✓/✗: every engine's result sets equal the reference executor's.

Paper anchors (8-node Storm cluster): MQO 2.6× the throughput of independent execution,
independent execution 3.1× (5 queries) / 5.3× (10 queries) the memory, MQO latency +14–16 %.

    python benchmarks/spark_mqo.py [--quick] [--sf 0.01] [--seconds S] [--batch N] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from mqjoin.optimizer import optimize
from mqjoin.runtime.reference import run_reference
from mqjoin.tables import Table, read_inputs
from mqjoin.workload import load_workload

ENGINES = ("mqo", "shared", "individual", "native")


def workload_file(name: str) -> Path:
    return Path(str(resources.files("mqjoin.datasets") / "workloads" / name))


def time_slice(tables: dict[str, Table], seconds: float | None) -> dict[str, Table]:
    """The first ``seconds`` of event time of every stream (row indices stay 0-based)."""
    if seconds is None:
        return tables
    out = {}
    for r, t in tables.items():
        n = sum(1 for x in t.ts if x <= seconds)
        out[r] = Table(r, t.ts[:n], {a: v[:n] for a, v in t.columns.items()}, t.source)
    return out


def run_engine(engine: str, workload, tables, spark, batch: int, timeout: float):
    from mqjoin.runtime.spark.deploy import run_spark

    plan = optimize(workload, mode="mqo" if engine == "native" else engine).plan
    out = tempfile.mkdtemp(prefix=f"mqjoin-bench-{engine}-")
    t0 = time.perf_counter()
    d = run_spark(plan, tables, out, spark=spark, engine="native" if engine == "native" else "mqjoin",
                  max_rows_per_batch=batch, timeout=timeout)
    wall = time.perf_counter() - t0
    return plan, d, wall


def bench(name: str, workload, tables, spark, args) -> dict:
    total = sum(len(t) for t in tables.values())
    span = max(max(t.ts) for t in tables.values() if len(t)) - min(min(t.ts) for t in tables.values() if len(t))
    print(f"\n== {name}: {len(workload.queries)} queries, {total:,} input tuples over {span:.2f} s of event "
          f"time, {args.batch:,} tuples per micro-batch, local[2] ==", flush=True)
    rows, refs = {}, {}
    for engine in args.engines:
        if engine == "native" and len(workload.queries) > 5 and args.quick:
            print("  native skipped (--quick)")
            continue
        plan, d, wall = run_engine(engine, workload, tables, spark, args.batch, args.timeout)
        ref_plan = plan if engine != "native" else optimize(workload).plan
        key = ref_plan.mode
        if key not in refs:
            refs[key] = run_reference(ref_plan, tables)
        ref = refs[key]
        s = d.summary()
        ok = d.results() == ref.result_sets()
        row = {"engine": engine, "throughput": s["throughput"], "busy_s": s["busy_seconds"], "wall_s": wall,
               "batches": s["batches"], "latency_mean": s["latency_mean"], "latency_p95": s["latency_p95_max"],
               "state_rows": s.get("state_rows_max"), "state_bytes": s.get("state_bytes_max"),
               "results": sum(s["results"].values()), "equal": ok}
        if engine != "native":
            st = d.stores.groupby("store")["messages"].sum().to_dict()
            row["messages"] = int(d.batches["probe_messages"].sum())
            row["ref_messages"] = ref.total_probe_messages
            row["model_messages"] = plan.probe_cost * span
            row["per_store"] = {
                sid: {"spark": int(st.get(sid, 0)), "reference": int(ref.store_messages.get(sid, 0)),
                      "model": sum(n.cost for n in plan.nodes if n.store == sid) * span}
                for sid in (x.id for x in plan.stores)}
        rows[engine] = row
        print(f"  {engine:<10} {row['throughput']:>9,.0f} tuples/s  busy {row['busy_s']:6.1f}s  "
              f"{row['batches']} batches  latency {row['latency_mean'] or 0:6.2f}s  state "
              f"{row['state_rows'] or 0:>9,} rows  {'✓' if ok else '✗ RESULTS DIFFER'}", flush=True)
    report(rows)
    return rows


def _ratio(a, b):
    return a / b if a and b else float("nan")


def report(rows: dict) -> None:
    print(f"\n  {'engine':<11}{'tuples/s':>10}{'lat mean s':>11}{'lat p95 s':>10}{'state rows':>12}"
          f"{'state MB':>10}{'results':>10}  equal")
    for r in rows.values():
        print(f"  {r['engine']:<11}{r['throughput']:>10,.0f}{r['latency_mean'] or 0:>11.2f}{r['latency_p95'] or 0:>10.2f}"
              f"{r['state_rows'] or 0:>12,}{(r['state_bytes'] or 0) / 1e6:>10.1f}{r['results']:>10,}  "
              f"{'✓' if r['equal'] else '✗'}")
    m, i, n = rows.get("mqo"), rows.get("individual"), rows.get("native")
    print("\n  ratios (paper anchor → measured):")
    if m and i:
        print(f"    throughput mqo / individual      2.6×  → {_ratio(m['throughput'], i['throughput']):.2f}×")
        print(f"    state individual / mqo (rows)    3.1× (5 q) / 5.3× (10 q) → "
              f"{_ratio(i['state_rows'], m['state_rows']):.2f}×")
        print(f"    latency mqo vs individual        +14–16 %  → {100 * (_ratio(m['latency_mean'], i['latency_mean']) - 1):+.0f} %")
    if m and n:
        print(f"    throughput mqo / native          goal ≥ 3×  → {_ratio(m['throughput'], n['throughput']):.2f}×")
        print(f"    state native / mqo (rows)        goal ≥ 3×/5× → {_ratio(n['state_rows'], m['state_rows']):.2f}×")
        print(f"    latency mqo vs native            goal ≤ +10 % → {100 * (_ratio(m['latency_mean'], n['latency_mean']) - 1):+.0f} %")
    if m and "per_store" in m:
        print("\n  probe messages of the mqo plan per store: Spark / reference (must be 1.000), Spark / model")
        for sid, v in m["per_store"].items():
            if v["spark"] or v["reference"]:
                print(f"    {sid:<46}{v['spark']:>10,}  {_ratio(v['spark'], v['reference']):.3f}  "
                      f"{_ratio(v['spark'], v['model']):8.2f}")
        print(f"    {'total':<46}{m['messages']:>10,}  {_ratio(m['messages'], m['ref_messages']):.3f}  "
              f"{_ratio(m['messages'], m['model_messages']):8.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 s of event time, five queries only")
    ap.add_argument("--sf", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    ap.add_argument("--seconds", type=float, help="use the first S seconds of event time (default: all; "
                    "--quick: 2)")
    ap.add_argument("--batch", type=int, default=20000, help="input tuples per micro-batch (default 20000)")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if args.quick and args.seconds is None:
        args.seconds = 2.0

    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.runtime.spark.session import spark_session

    streams = tpch_streams(args.sf)
    spark = spark_session("local[2]")
    spark.sparkContext.setJobDescription("mqjoin benchmark")
    results = {}
    for name, file in [("Figure 7(a), five queries", "tpch_fig7a.yaml"), ("ten queries", "tpch_10q.yaml")]:
        if args.quick and file == "tpch_10q.yaml":
            continue
        w = load_workload(workload_file(file))
        tables = time_slice(read_inputs(w, streams.directory), args.seconds)
        results[name] = bench(name, w, tables, spark, args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0 if all(r["equal"] for rs in results.values() for r in rs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
