"""Spark engines side by side on the paper's TPC-H workloads: ``mqo`` vs ``shared`` vs
``individual`` plans of our engine vs ``native`` (every query a chain of Spark stream-stream
joins, all queries in one streaming query over one shared source, HDFS state store, 1 shuffle
partition — the best measured here, ``--native-partitions``/``--native-state-store`` change
it; see ``mqjoin/runtime/spark/native.py`` for the configurations tried), in one local[2]
session, on the same input — and vs
``flink`` (``benchmarks/_flink.py``: the queries as regular joins in one StatementSet,
parallelism 2, over per-relation CSV files of the same tuples, results checked against the
oracle; throughput = input tuples / the job's net runtime with the whole input available at
once, state = rows its joins hold, computed).  Flink runs in an environment of its own — apache-flink
pins a pyarrow older than PySpark's Arrow path accepts — made once by ``benchmarks/flink-env``
(``.venv-flink/``); the Flink row runs through its interpreter in a subprocess.  Without it the
default engine list leaves Flink out (saying so), and ``--engines …,flink`` is an error that
says how to make it.  Plan engines run in
``--spark-mode driver`` (the default); ``mqo-distributed`` is the mqo plan in the distributed (sharded) mode;
``mqo-budget`` is the mqo plan under an MIR memory budget (``--mir-budget``, default 50 of the
workload's estimated tuples: a point of ``mqjoin frontier``'s probe-cost/memory curve).  The
default mqo plan minimises probe messages and materialises every MIR that saves one; on TPC-H
the MIRs that extend lineitem by its (partkey, suppkey) foreign key hold a row per lineitem
although the workload's independent-key estimates put them at 0.7 % of that, so the budgeted
plan keeps far fewer rows for a few more messages.
``mjoin`` and ``tree`` are the operator-level plan families of :mod:`mqjoin.planners.trees`:
one MJoin per query (base stores, probing sequences most selective first), and one binary join
tree per query (``--tree-shape``, default the cheapest of any shape; every inner node an MIR
store), each deployed shared like any plan, in driver mode, results checked against the oracle.

Workloads: the five four-way queries of the CLASH paper's Figure 7(a) (``tpch_fig7a.yaml``)
and the ten-query variant (``tpch_10q.yaml``), over TPC-H SF ``--sf`` relation streams
(``mqjoin data tpch``: constant arrivals, every relation spread over the same ~6 s of event
time, lineitem at 10,000 tuples/s), cut to the first ``--seconds`` of event time so one
engine run stays short on a 2-core machine.  Windows are null (full history), as in the paper.

What is measured, per workload and engine:

1. **Sustained throughput** (input tuples/s): unpaced replay, ``--batch`` input tuples per
   micro-batch.  Throughput = input tuples / busy seconds, where busy seconds = the length of
   the union of Spark's trigger intervals (StreamingQueryListener: trigger start +
   ``triggerExecution``) over all of the deployment's streaming queries.  For our engine (one
   query) that is the sum of micro-batch durations, and so it is for ``native`` (one
   streaming query; the union also covers a native run of several concurrent streaming
   queries).  The batch size is fixed and the same
   for every engine: our engine's micro-batches carry a large fixed cost (a few Spark jobs
   and SQL plans per batch, see the overhead table), so throughput grows with the batch size;
   ``--batch`` (default 5,000; the paper's figures come from a cluster at ~10⁵ tuples/s)
   keeps ≥ 3 batches per run on this machine's budget.  A warm-up deployment of each engine
   runs first (not reported) so no engine pays for JVM/Python-worker start-up.
2. **State**: the largest number of rows held at once (our engine: rows in all stores after
   a batch; native: Spark's stream-stream join state, ``numRowsTotal`` of its state
   operators, summed over the queries) and bytes (our engine: Spark's block manager storage of
   the cached stores; native: the state stores' ``memoryUsedBytes`` — different accounting,
   rows are the comparable figure).
3. **Result latency** (commit time of a result − arrival time of the tuple that triggered it),
   mean and p95 over *every* result (computed exactly from the committed outputs: a result's
   ``_arrival`` and its micro-batch's commit time), at a common **paced** input rate: ``rate =
   --rate-fraction`` (default 0.5) × the slowest engine's sustained throughput of step 1, so
   every engine can keep up (a micro-batch then takes what arrived during the previous one).
   The paced input is a prefix of the unpaced one: ``rate × --latency-seconds`` tuples, or more
   if that prefix holds fewer than ``--latency-results`` results (results of full-history
   TPC-H joins grow ~cubically with the prefix), at most ``rate × --latency-max-seconds``.
   ``lag`` (last batch end − the last tuple's scheduled arrival) shows whether an engine kept
   up.  (Unpaced latencies are only batch durations; they are kept in ``--json``.)
4. **Ratios** in the paper's terms (8-node Storm cluster): throughput mqo/individual (paper
   2.6×), state individual/mqo (paper 3.1× for 5 queries, 5.3× for 10), latency mqo vs
   individual (paper +14–16 %); and against ``native`` our goals: ≥ 3× throughput, ≥ 3× (5 q)
   / ≥ 5× (10 q) less state, ≤ +10 % latency.
5. **Probe messages** per store of each plan: measured in Spark vs the reference executor on
   the same input (the same definition — routed probe 1, broadcast ``p`` per travelling
   tuple — so the ratio must be 1.000), and vs the cost model's prediction.  The model's cost
   is per time unit at the workload's rates (``benchmarks/reference_throughput.py`` checks it
   over exactly one time unit with unbounded windows, where prediction = cost).  Over a span
   of ``S`` seconds with full-history windows a step whose prefix has ``k`` relations ships
   ``|⋈P|·S^k/k·χ = cost·S^k`` partial results (``k`` = 1: linear in ``S``), so the
   prediction here is Σ over the plan's steps (nodes) into the store of ``cost·S^k``.  The
   model assumes uniform, independent keys: TPC-H keys are foreign keys whose rows arrive in
   key order, so a time slice is far from uniform; the ``full`` columns compare the reference
   executor's count on the whole SF stream (the data the workload's statistics were estimated
   from) with the model, where its assumptions hold best.
6. **Results**: every engine's result sets are compared with the docs/model.md §6 oracle (brute force,
   independent of any plan) and printed as ✓/✗; the exit status is 1 if any differ (nothing
   else here passes or fails).

Other processes on the machine (e.g. test suites) share its 2 cores: the 1-minute load
average at the start of every run is printed next to it; compare figures within one run.

    python benchmarks/spark_mqo.py [--quick] [--sf 0.01] [--seconds S] [--batch N]
        [--workloads fig7a,10q] [--engines mqo,shared,individual,mjoin,tree,native] [--tree-shape S] [--rate R]
        [--rate-fraction F] [--latency-seconds D] [--no-native-10q] [--json FILE]

**What a user waits for** (``--whole``, :mod:`_whole`): the same workloads over the whole
``mqjoin data tpch`` folder of ``--sf``, every engine one whole process timed from outside
(prompt to prompt) with its process tree's peak RSS — ``mqjoin run --engine spark`` (default
flags, and ``--spark-mode distributed``), the default ``mqjoin run``, Pathway (all queries in
one computation, ``benchmarks/_pathway.py`` in an environment of its own) and Flink — beside
the busy throughput the ``--json`` of ``mqjoin run`` reports and where its seconds went, each
output compared with a DuckDB batch join of the same result sets (the floor)::

    python benchmarks/spark_mqo.py --whole --sf 0.1 --workloads fig7a,10q --rounds 2 \
        --pathway-python PATHWAY_VENV/bin/python [--rss-limit 8] [--engines spark,pathway,…]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

import _results
from _flink import MISSING
from _whole import WHOLE_ENGINES
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.oracle import oracle_results
from mqjoin.runtime.reference import run_reference
from mqjoin.model.tables import Table, read_inputs
from mqjoin.model.workload import load_workload

ENGINES = ("mqo", "mqo-budget", "shared", "individual", "mjoin", "tree", "mqo-distributed", "native", "flink")
# the plan engines run in --spark-mode driver (the default: stores in the driver's executor, one
# Spark job per micro-batch); mqo-distributed is the mqo plan with sharded stores (scale-out mode)
PLAN_ENGINES = ("mqo", "mqo-budget", "shared", "individual", "mjoin", "tree")
# optimize() options of each plan engine: CLASH's three modes, the mqo plan under an MIR memory
# budget (--mir-budget: a point of the probe-cost/memory frontier) and the operator-level plan
# families (mqjoin.planners.trees: one MJoin per query, one binary join tree per query — --tree-shape —
# shared)
PLAN_OPTIONS = {"mqo": {"mode": "mqo"}, "mqo-budget": {"mode": "mqo", "mir_budget": 50.0},
                "shared": {"mode": "shared"}, "individual": {"mode": "individual"},
                "mjoin": {"planner": "mjoin", "mode": "shared"}, "tree": {"planner": "tree", "mode": "shared"}}
NATIVE_OPTIONS: dict = {}  # deploy() options of the native runs (--native-partitions), set by main
WORKLOADS = {"fig7a": ("tpch_fig7a.yaml", "TPC-H Figure 7(a), five queries"),
             "10q": ("tpch_10q.yaml", "TPC-H ten queries")}
PAPER_MEMORY = {"fig7a": 3.1, "10q": 5.3}  # individual / mqo, paper Section VII
GOAL_STATE = {"fig7a": 3.0, "10q": 5.0}  # native / mqo, our goal
def plan_key(engine: str) -> str:
    """The plan an engine row deploys (native: the workload of the mqo plan)."""
    return "mqo" if engine in ("native", "mqo-distributed") else engine


# -- input ------------------------------------------------------------------------------------

def workload_file(name: str) -> Path:
    return Path(str(resources.files("mqjoin.datasets") / "workloads" / name))


def time_slice(tables: dict[str, Table], seconds: float | None) -> dict[str, Table]:
    """The tuples with ``ts ≤ seconds`` of every stream (a prefix: row indices stay the same)."""
    if seconds is None:
        return tables
    out = {}
    for r, t in tables.items():
        n = int(np.searchsorted(np.asarray(t.ts, dtype=float), seconds, side="right"))
        out[r] = Table(t.relation, t.ts[:n], {a: v[:n] for a, v in t.columns.items()}, t.source)
    return out


def n_tuples(tables) -> int:
    return sum(len(t) for t in tables.values())


def span(tables) -> float:
    """Event-time span of the input (the streams start at 0)."""
    lo = min(min(t.ts) for t in tables.values() if len(t))
    hi = max(max(t.ts) for t in tables.values() if len(t))
    return hi - lo


# -- model ------------------------------------------------------------------------------------

def predicted_messages(plan, seconds: float) -> dict[str, float]:
    """Store id → probe messages the cost model predicts over ``seconds`` of input (module
    doc, item 5): Σ over the plan's steps into the store of ``cost · S^k``.  Only for
    full-history windows (the TPC-H workloads); a store reached by a windowed step gets nan."""
    w = plan.workload
    out: dict[str, float] = {s.id: 0.0 for s in plan.stores}
    for node in plan.nodes:  # the per-store sum of node costs, as reference_throughput.py does
        rels = node.step.prefix_relations
        if any(w.relation(r).window is not None for r in rels):
            out[node.store] = math.nan
        else:
            out[node.store] += node.cost * seconds ** len(rels)
    return out


def completion_times(w, tables, results) -> np.ndarray:
    """Sorted event times at which each result exists (the ts of its latest tuple): a prefix of
    ``t`` seconds holds the results completed by ``t`` (full-history windows)."""
    out = []
    for q, rows in results.items():
        rels = w.query(q).relations
        ts = [np.asarray(tables[r].ts, dtype=float) for r in rels]
        if rows:
            idx = np.array(sorted(rows), dtype=np.int64)
            out.append(np.max(np.stack([ts[i][idx[:, i]] for i in range(len(rels))]), axis=0))
    return np.sort(np.concatenate(out)) if out else np.array([])


# -- one deployment -----------------------------------------------------------------------------

_PHASE_ROWS: dict[int, list[dict]] = {}


def _record_phases() -> None:
    """Keep each micro-batch's phase timings (``BatchReport.phases``, which the deployment's
    frames do not carry) for the overhead table."""
    from mqjoin.runtime.spark import launch as dep

    orig = dep.Deployment._on_report
    if getattr(orig, "_bench_phases", False):
        return

    def on_report(self, report):
        _PHASE_ROWS.setdefault(id(self), []).append(
            {"batch": report.batch, "rows": report.input_rows, "seconds": report.seconds, **dict(report.phases)})
        orig(self, report)

    on_report._bench_phases = True
    dep.Deployment._on_report = on_report


def _settle(d, quiet: float = 1.0, limit: float = 15.0) -> None:
    """Wait until the listener's progress reports stop arriving (they are asynchronous)."""
    t_end = time.time() + limit
    last, since = -1, time.time()
    while time.time() < t_end:
        n = len(d.progress)
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(0.2)


def trigger_intervals(progress) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of every trigger of every streaming query."""
    import pandas as pd

    if not len(progress):
        return []
    p = progress.dropna(subset=["timestamp", "duration_ms"])
    start = (pd.to_datetime(p["timestamp"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return sorted(zip(start.tolist(), (start + p["duration_ms"].astype(float) / 1000).tolist()))


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def committed_outputs(d):
    """Every committed result's ``query``, ``_seq``, ``_arrival``, micro-batch and commit time
    (wall clock).  The commit time of (batch, query) is ``latency_mean + mean(_arrival)`` of the
    batch's results: the engines report latency_mean = commit − mean arrival."""
    import pandas as pd
    import pyarrow.parquet as pq

    q = d.queries
    if not len(q) or "latency_mean" not in q:
        return None
    q = q.dropna(subset=["latency_mean"])
    root = d.out / ("_batches" if d.engine_name == "mqjoin" else "_native")
    parts = []
    for bdir in list(root.glob("batch=*")) + list(root.glob("*/batch=*")):
        if not any(bdir.glob("*.parquet")):
            continue
        t = pq.read_table(bdir, columns=["query", "_seq", "_arrival"]).to_pandas()
        t["batch"] = int(bdir.name.split("=", 1)[1])
        parts.append(t)
    if not parts:
        return None
    rows = pd.concat(parts, ignore_index=True)
    mean_arr = rows.groupby(["batch", "query"])["_arrival"].mean().rename("mean_arrival").reset_index()
    commit = q[["batch", "query", "latency_mean"]].merge(mean_arr, on=["batch", "query"])
    commit["commit"] = commit["latency_mean"] + commit["mean_arrival"]
    return rows.merge(commit[["batch", "query", "commit"]], on=["batch", "query"], how="inner")


def run_engine(engine: str, plan, tables, spark, truth, *, timeout: float, attempts: int = 2, **pacing) -> dict:
    """:func:`run_once`, once more if the deployment failed (on a loaded machine a Python worker
    may time out connecting back to the JVM); the row says how many attempts it took."""
    for k in range(1, attempts + 1):
        row = run_once(engine, plan, tables, spark, truth, timeout=timeout, **pacing)
        row["attempts"] = k
        if not row.get("error"):
            break
        print(f"    ({engine} attempt {k} failed: {row['error']})", flush=True)
    return row


def run_once(engine: str, plan, tables, spark, truth, *, timeout: float, **pacing) -> dict:
    """Deploy one engine, wait for all input, stop; every figure the tables need."""
    from mqjoin.runtime.spark.launch import deploy

    out = Path(tempfile.mkdtemp(prefix=f"mqjoin-bench-{engine}-"))
    row: dict = {"engine": engine, "input_tuples": n_tuples(tables), "load": os.getloadavg()[0]}
    d = None
    t0 = time.time()
    try:
        extra = NATIVE_OPTIONS if engine == "native" else \
            {"mode": "distributed" if engine.endswith("-distributed") else "driver"}
        d = deploy(plan, tables, out, engine="native" if engine == "native" else "mqjoin", spark=spark, **pacing,
                   **extra)
        finished = d.wait(timeout)
        _settle(d)
        row["wall_s"] = time.time() - t0
        if not finished:
            row["error"] = f"did not finish within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 — one engine's failure must not hide the others' figures
        row["error"] = str(exc).splitlines()[0][:300]
        row["wall_s"] = time.time() - t0
    finally:
        if d is not None:
            d.stop()
            d.cleanup()
    if d is None:
        shutil.rmtree(out, ignore_errors=True)
        return row
    try:
        s = d.summary()
        iv = trigger_intervals(d.progress)
        busy = union_length(iv)
        outs = committed_outputs(d)
        lat = np.array([]) if outs is None else (outs["commit"] - outs["_arrival"]).to_numpy()
        got = d.results()
        row.update({
            "batches": s["batches"], "busy_s": busy, "busy_foreachbatch_s": s["busy_seconds"],
            "throughput": row["input_tuples"] / busy if busy > 0 else None,
            "span_s": (iv[-1][1] - min(a for a, _ in iv)) if iv else None,
            "state_rows": s.get("state_rows_max"), "state_bytes": s.get("state_bytes_max"),
            "results": sum(len(v) for v in got.values()), "results_by_query": {k: len(v) for k, v in got.items()},
            "equal": got == truth,
            "latency_mean": float(lat.mean()) if len(lat) else None,
            "latency_p95": float(np.percentile(lat, 95)) if len(lat) else None,
            "latency_max": float(lat.max()) if len(lat) else None,
            "latency_mean_engine": s.get("latency_mean"),
            "trigger_mean_s": float(np.mean([e - a for a, e in iv])) if iv else None,
        })
        if not row["equal"]:
            bad = [q for q in truth if got.get(q) != truth[q]]
            row["differs"] = {q: {"got": len(got.get(q, ())), "want": len(truth[q]),
                                  "missing": len(truth[q] - got.get(q, set())),
                                  "extra": len(got.get(q, set()) - truth[q])} for q in bad}
        if pacing.get("rate") and outs is not None and iv:
            # rate pacing: tuple s arrives at t0 + s / rate (t0 = when the source started serving);
            # lag = how long after the last tuple's scheduled arrival the last batch ended
            rate = pacing["rate"]
            t0 = float(np.median(outs["_arrival"] - outs["_seq"] / rate))
            row["lag_s"] = iv[-1][1] - (t0 + (row["input_tuples"] - 1) / rate)
            row["achieved_rate"] = row["input_tuples"] / (iv[-1][1] - t0)
        if d.engine_name == "mqjoin":
            b, st = d.batches, d.stores
            row["probe_messages"] = int(b["probe_messages"].sum()) if len(b) else 0
            row["store_messages"] = {k: int(v)
                                     for k, v in st.groupby("store")["messages"].sum().items()} if len(st) else {}
            ph = _PHASE_ROWS.pop(id(d), [])
            if ph:
                keys = dict.fromkeys(k for p in ph for k in p if k not in ("batch", "rows"))
                row["phases"] = {k: float(np.mean([p.get(k, 0.0) for p in ph])) for k in keys}
                row["phases"]["rows"] = float(np.mean([p["rows"] for p in ph]))
            row["jobs_per_batch"] = s.get("jobs_per_batch")
            row["stages_per_batch"] = s.get("stages_per_batch")
        else:
            p = d.progress
            row["native_trigger_mean_s"] = float(p["duration_ms"].mean() / 1000) if len(p) else None
            row["native_batches_per_query"] = float(p.groupby("query")["batch"].nunique().mean()) if len(p) else None
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return row


# -- one workload -------------------------------------------------------------------------------

def bench_workload(key: str, args, spark, streams_dir: Path) -> dict:
    file, title = WORKLOADS[key]
    w = load_workload(workload_file(file))
    full = read_inputs(w, streams_dir)
    tables = time_slice(full, args.seconds)
    n, S, S_full, n_full = n_tuples(tables), span(tables), span(full), n_tuples(full)
    if not args.full_messages:  # the model check on the slice only (SF 0.1: the full stream is slow)
        full, S_full = tables, S
    plans = {m: optimize(w, **PLAN_OPTIONS[m], **({"tree_shape": args.tree_shape} if m == "tree" else {})).plan
             for m in PLAN_ENGINES}
    t0 = time.perf_counter()
    truth = oracle_results(w, tables)
    t_oracle = time.perf_counter() - t0
    engines = [e for e in args.engines if not (e == "native" and key == "10q" and not args.native_10q)]
    skipped = [e for e in args.engines if e not in engines]
    print(f"\n=== {title} ({file}): {len(w.queries)} queries, SF {args.sf:g}, first {S:.2f} s of event time "
          f"({n:,} input tuples of {n_full:,}); {sum(map(len, truth.values())):,} results "
          f"(oracle, {t_oracle:.1f}s) ===", flush=True)
    if skipped:
        print(f"    skipped: {', '.join(skipped)} (--no-native-10q / --quick: ten native streaming queries "
              f"take too long on this machine's budget)")

    # reference executor: the same probe messages on the slice; the model check on the full stream
    # (only the per-store messages are kept: six plans' results at SF 0.1 would not fit in memory)
    ref = {}
    for m in PLAN_ENGINES:
        r = run_reference(plans[m], tables)
        if r.result_sets() != truth:
            print(f"    ✗ the reference executor's {m} results differ from the oracle", flush=True)
        ref[m] = r.store_messages
    ref_full = ({m: run_reference(plans[m], full, collect=False).store_messages for m in PLAN_ENGINES}
                if S_full > S + 1e-9 else ref)

    # 1. unpaced: throughput, state, messages
    print(f"\n  unpaced replay, {args.batch:,} input tuples per micro-batch:", flush=True)
    unpaced = {}
    for e in engines:
        if e == "flink":
            from _flink import run_flink_isolated

            r = run_flink_isolated(w, tables, truth, parallelism=args.flink_parallelism, timeout=args.timeout)
            r["load"] = os.getloadavg()[0]
        else:
            r = run_engine(e, plans[plan_key(e)], tables, spark, truth, timeout=args.timeout,
                           max_rows_per_batch=args.batch)
        unpaced[e] = r
        _progress_line(r)

    # 3. paced: latency at a common rate every engine sustains (Spark engines; Flink reads its
    # bounded input as fast as it can)
    ok = [r["throughput"] for e, r in unpaced.items() if e != "flink" and r.get("throughput") and not r.get("error")]
    rate = args.rate or (args.rate_fraction * min(ok) if ok else None)
    paced, paced_info = {}, {}
    if rate and args.latency_seconds > 0:
        # a prefix of the input: rate × --latency-seconds tuples, longer if that holds fewer than
        # --latency-results results, but at most rate × --latency-max-seconds tuples
        per_s = n / S  # input tuples per second of event time
        done = completion_times(w, tables, truth)
        t_res = done[min(args.latency_results, len(done)) - 1] if len(done) else S
        secs = min(S, max(args.latency_seconds * rate / per_s, t_res), args.latency_max_seconds * rate / per_s)
        ptables = time_slice(tables, secs)
        ptruth = oracle_results(w, ptables)
        paced_info = {"rate": rate, "seconds": secs, "input_tuples": n_tuples(ptables),
                      "results": sum(map(len, ptruth.values()))}
        print(f"\n  paced replay at {rate:,.0f} tuples/s "
              f"({'--rate' if args.rate else f'{args.rate_fraction:g} × the slowest throughput'}), "
              f"first {secs:.2f} s of event time ({n_tuples(ptables):,} tuples, {paced_info['results']:,} results):",
              flush=True)
        for e in [e for e in engines if e != "flink"]:
            r = run_engine(e, plans[plan_key(e)], ptables, spark, ptruth, timeout=args.timeout,
                           rate=rate)
            paced[e] = r
            _progress_line(r)

    res = {"workload": file, "title": title, "queries": len(w.queries), "sf": args.sf, "seconds": S,
           "input_tuples": n, "full_seconds": S_full, "batch": args.batch, "skipped": skipped,
           "results": {q: len(v) for q, v in truth.items()}, "unpaced": unpaced, "paced": paced,
           "paced_config": paced_info,
           "model": {m: {"probe_cost": plans[m].probe_cost, "memory": plans[m].memory, "stores": len(plans[m].stores)}
                     for m in PLAN_ENGINES},
           "messages": messages(plans, ref, ref_full, unpaced, S, S_full)}
    report(key, res, args)
    return res


def _progress_line(r: dict) -> None:
    if r.get("error") and "throughput" not in r:
        print(f"    {r['engine']:<11} FAILED: {r['error']}", flush=True)
        return
    extra = f"  lag {r['lag_s']:.1f} s" if r.get("lag_s") is not None else ""
    extra += f"  state {r['state_rows']:,} rows" if r.get("state_rows") is not None else ""
    print(f"    {r['engine']:<11}{_f(r.get('throughput'), ',.0f'):>9} tuples/s  {r.get('batches', 0)} batches  "
          f"busy {_f(r.get('busy_s'), '.1f')} s  wall {r['wall_s']:.1f} s  latency {_f(r.get('latency_mean'), '.2f')} s"
          f"{extra}  load {r['load']:.1f}  {'✓' if r.get('equal') else '✗'}"
          + (f"  ERROR {r['error']}" if r.get("error") else ""), flush=True)


def messages(plans, ref, ref_full, unpaced, S, S_full) -> dict:
    out = {}
    for m in PLAN_ENGINES:
        pred, pred_full = predicted_messages(plans[m], S), predicted_messages(plans[m], S_full)
        spark = (unpaced.get(m) or {}).get("store_messages")
        stores = {}
        for st in plans[m].stores:
            sid = st.id
            stores[sid] = {"spark": None if spark is None else spark.get(sid, 0),
                           "reference": int(ref[m].get(sid, 0)), "model": pred[sid],
                           "reference_full": int(ref_full[m].get(sid, 0)), "model_full": pred_full[sid],
                           "broadcast": any(n.broadcast for n in plans[m].nodes if n.store == sid)}
        tot = {k: (None if k == "spark" and spark is None else sum(v[k] for v in stores.values()))
               for k in ("spark", "reference", "model", "reference_full", "model_full")}
        tot["model_linear"] = plans[m].probe_cost * S  # cost × span, what a linear scaling would say
        out[m] = {"stores": stores, "total": tot}
    return out


# -- tables ---------------------------------------------------------------------------------------

def _f(x, fmt: str, dash: str = "—") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return dash
    return format(x, fmt)


def _ratio(a, b):
    return a / b if a is not None and b and not (isinstance(a, float) and math.isnan(a)) else None


def report(key: str, res: dict, args) -> None:
    un, pa = res["unpaced"], res["paced"]
    engines = list(un)
    print(f"\n  {'engine':<16}{'tuples/s':>9}{'busy s':>8}{'batches':>8}{'state rows':>11}{'state MB':>9}"
          f"{'lat mean':>9}{'lat p95':>8}{'lat max':>8}{'batch s':>8}{'lag s':>7}{'results':>11}  equal  "
          "load(unpaced/paced)")
    for e in engines:
        u, p = un[e], pa.get(e, {})
        eq = "✓" if u.get("equal") and p.get("equal", True) else "✗"
        print(f"  {e:<16}{_f(u.get('throughput'), ',.0f'):>9}{_f(u.get('busy_s'), '.1f'):>8}"
              f"{_f(u.get('batches'), 'd'):>8}"
              f"{_f(u.get('state_rows'), ',d'):>11}{_f(_mb(u.get('state_bytes')), '.1f'):>9}"
              f"{_f(p.get('latency_mean'), '.2f'):>9}{_f(p.get('latency_p95'), '.2f'):>8}"
              f"{_f(p.get('latency_max'), '.2f'):>8}"
              f"{_f(p.get('trigger_mean_s'), '.2f'):>8}{_f(p.get('lag_s'), '.1f'):>7}{_f(u.get('results'), ',d'):>11}  "
              f"{eq:^5}  "
              f"{u['load']:.1f}/{_f(p.get('load'), '.1f')}"
              + (f"  {u.get('error') or p.get('error')}" if u.get("error") or p.get("error") else ""))
        for r in (u, p):
            if r.get("differs"):
                print(f"    ✗ {e} results differ: {r['differs']}")
    pc = res["paced_config"]
    if pc:
        print(f"  (throughput, busy, batches, state: unpaced, {res['batch']:,} tuples per batch; latency (s), batch s "
              f"(mean trigger), lag: paced at {pc['rate']:,.0f} tuples/s over {pc['input_tuples']:,} tuples with "
              f"{pc['results']:,} results; lag = last batch end − last tuple's scheduled arrival: an engine keeps up "
              f"if it is about one or two batch durations)")

    m, i, n = un.get("mqo", {}), un.get("individual", {}), un.get("native", {})
    b = un.get("mqo-budget", {})
    pm, pi, pn = pa.get("mqo", {}), pa.get("individual", {}), pa.get("native", {})
    model = res["model"]
    lines = [
        ("throughput   mqo / individual", "2.6×", "", _ratio(m.get("throughput"), i.get("throughput")), "×"),
        ("state rows   individual / mqo", f"{PAPER_MEMORY[key]}×", "", _ratio(i.get("state_rows"), m.get("state_rows")),
         "×"),
        ("state bytes  individual / mqo", f"{PAPER_MEMORY[key]}×", "",
         _ratio(i.get("state_bytes"), m.get("state_bytes")), "×"),
        ("  model memory individual / mqo", "", "", _ratio(model["individual"]["memory"], model["mqo"]["memory"]), "×"),
        ("latency      mqo vs individual", "+14–16 %", "", _pct(pm.get("latency_mean"), pi.get("latency_mean")), "%"),
        ("latency p95  mqo vs individual", "", "", _pct(pm.get("latency_p95"), pi.get("latency_p95")), "%"),
        ("throughput   mqo / native", "", "≥ 3×", _ratio(m.get("throughput"), n.get("throughput")), "×"),
        ("throughput   mqo / flink", "", "≥ 2×", _ratio(m.get("throughput"), un.get("flink", {}).get("throughput")),
         "×"),
        ("state rows   flink / mqo", "", "", _ratio(un.get("flink", {}).get("state_rows"), m.get("state_rows")), "×"),
        ("state rows   native / mqo", "", f"≥ {GOAL_STATE[key]:g}×", _ratio(n.get("state_rows"), m.get("state_rows")),
         "×"),
        ("state bytes  native / mqo", "", f"≥ {GOAL_STATE[key]:g}×", _ratio(n.get("state_bytes"), m.get("state_bytes")),
         "×"),
        ("state rows   mqo / native", "", "≤ 0.5×", _ratio(m.get("state_rows"), n.get("state_rows")), "×"),
        ("throughput   mqo-budget / native", "", "≥ 3×", _ratio(b.get("throughput"), n.get("throughput")), "×"),
        ("throughput   mqo-budget / flink", "", "≥ 2×", _ratio(b.get("throughput"),
                                                         un.get("flink", {}).get("throughput")), "×"),
        ("state rows   mqo-budget / native", "", "≤ 0.5×", _ratio(b.get("state_rows"), n.get("state_rows")), "×"),
        ("state rows   mqo-budget / flink", "", "", _ratio(b.get("state_rows"),
                                                      un.get("flink", {}).get("state_rows")), "×"),
        ("latency p95  mqo-budget vs native", "", "", _pct(pa.get("mqo-budget", {}).get("latency_p95"),
                                                         pn.get("latency_p95")), "%"),
        ("latency      mqo vs native", "", "≤ +10 %", _pct(pm.get("latency_mean"), pn.get("latency_mean")), "%"),
        ("latency p95  mqo vs native", "", "", _pct(pm.get("latency_p95"), pn.get("latency_p95")), "%"),
        ("throughput   mqo / shared", "", "", _ratio(m.get("throughput"), un.get("shared", {}).get("throughput")), "×"),
        ("throughput   mqo / mqo-distributed", "", "", _ratio(m.get("throughput"),
                                                            un.get("mqo-distributed", {}).get("throughput")), "×"),
        ("state rows   shared / mqo", "", "", _ratio(un.get("shared", {}).get("state_rows"), m.get("state_rows")), "×"),
        ("throughput   mqo / mjoin", "", "", _ratio(m.get("throughput"), un.get("mjoin", {}).get("throughput")), "×"),
        ("throughput   mqo / tree", "", "", _ratio(m.get("throughput"), un.get("tree", {}).get("throughput")), "×"),
        ("state rows   mjoin / mqo", "", "", _ratio(un.get("mjoin", {}).get("state_rows"), m.get("state_rows")), "×"),
        ("state rows   tree / mqo", "", "", _ratio(un.get("tree", {}).get("state_rows"), m.get("state_rows")), "×"),
    ]
    print(f"\n  {'ratio':<34}{'paper':>10}{'goal':>10}{'measured':>11}")
    for name, paper, goal, val, unit in lines:
        v = _f(val, ".2f") + "×" if unit == "×" and val is not None else (_f(val, "+.0f") + " %" if val is not None
                                                                          else "—")
        print(f"  {name:<34}{paper:>10}{goal:>10}{v:>11}")

    ph = {e: r["phases"] for e, r in un.items() if r.get("phases")}
    if ph or n:
        print("\n  mean cost of an unpaced micro-batch (our engine: BatchReport phases in seconds; Spark jobs and "
              "stages per batch; 'other' = the rest of the batch)")
        print(f"  {'engine':<16}{'rows':>7}{'batch s':>9}{'jobs':>6}{'stages':>8}  phases")
        for e, p in ph.items():
            parts = {k: v for k, v in p.items() if k not in ("seconds", "rows")}
            # the distributed mode's "waves" and its tasks' steps ("input …", "shard …") lie within its "job"
            other = p["seconds"] - sum(v for k, v in parts.items() if k != "waves"
                                       and not k.startswith(("input ", "shard ")))
            print(f"  {e:<16}{p['rows']:>7,.0f}{p['seconds']:>9.2f}{_f(un[e].get('jobs_per_batch'), '.1f'):>6}"
                  f"{_f(un[e].get('stages_per_batch'), '.1f'):>8}  "
                  + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()) + f", other {other:.2f}")
        if n.get("native_trigger_mean_s") is not None:
            print(f"  {'native':<11}{'':>7}{n['native_trigger_mean_s']:>9.2f}  (mean trigger of the streaming query "
                  f"of all {len(res['results'])} queries, {n.get('native_batches_per_query', 0):.0f} batches)")

    print(f"\n  probe messages: Spark (unpaced run) vs the reference executor on the same input (must be 1.000) "
          f"and vs the model (cost·S^k, S = {res['seconds']:.2f} s); 'full' = reference on the whole stream "
          f"(S = {res['full_seconds']:.2f} s) vs the model")
    print(f"  {'plan':<11}{'store':<44}{'Spark':>10}{'reference':>10}{'S/ref':>7}{'model':>11}{'S/model':>8}"
          f"{'full ref':>10}{'full model':>11}{'ref/model':>10}")
    for mode, v in res["messages"].items():
        rows = list(v["stores"].items()) if (mode == "mqo" or args.all_stores) else []
        for sid, x in rows:
            if not (x["reference"] or x["reference_full"] or x["spark"]):
                continue
            _msg_row(mode, sid + (" (bcast)" if x["broadcast"] else ""), x)
        _msg_row(mode, "total", v["total"])
    print("  (a linear scaling cost × S would predict "
          + ", ".join(f"{m} {v['total']['model_linear']:,.0f}" for m, v in res["messages"].items())
          + " messages on the slice: wrong for k > 1 with full-history windows)")


def _msg_row(mode, name, x) -> None:
    print(f"  {mode:<11}{name[:43]:<44}{_f(x['spark'], ',d'):>10}{x['reference']:>10,}"
          f"{_f(_ratio(x['spark'], x['reference']), '.3f'):>7}{_f(x['model'], ',.0f'):>11}"
          f"{_f(_ratio(x['spark'], x['model']), '.2f'):>8}{x['reference_full']:>10,}{_f(x['model_full'], ',.0f'):>11}"
          f"{_f(_ratio(x['reference_full'], x['model_full']), '.2f'):>10}")


def _mb(b):
    return b / 1e6 if b is not None and b >= 0 else None


def _pct(a, b):
    r = _ratio(a, b)
    return None if r is None else 100 * (r - 1)


# -- main -----------------------------------------------------------------------------------------

def warm_up(spark, streams_dir: Path) -> None:
    """One tiny deployment of each engine mode: JVM code paths, Python workers (the distributed
    mode's load the executor's modules), the replay source."""
    w = load_workload(workload_file(WORKLOADS["fig7a"][0]))
    tables = time_slice(read_inputs(w, streams_dir), 0.05)
    plan = optimize(w).plan
    truth = oracle_results(w, tables)
    for e in ("mqo", "mqo-distributed", "native"):
        r = run_engine(e, plan, tables, spark, truth, timeout=600, max_rows_per_batch=max(1, n_tuples(tables) // 2))
        if r.get("error"):
            print(f"  warm-up of {e} failed: {r['error']}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="Figure 7(a) only, first 0.3 s of event time, 1,500 tuples per batch, 8 s latency runs")
    ap.add_argument("--sf", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    ap.add_argument("--seconds", type=float, help="first S seconds of event time (default 1; --quick 0.3)")
    ap.add_argument("--batch", type=int, help="input tuples per unpaced micro-batch (default 5000; --quick 1500)")
    ap.add_argument("--workloads", help="comma-separated: fig7a,10q (default both; --quick fig7a)")
    ap.add_argument("--engines", default=None, help="comma-separated subset of " + ",".join(ENGINES)
                    + " (default: all)")
    ap.add_argument("--rate", type=float, help="paced input rate for the latency runs (default: see --rate-fraction)")
    ap.add_argument("--rate-fraction", type=float, default=0.5,
                    help="paced rate = this × the slowest engine's sustained throughput (default 0.5)")
    ap.add_argument("--latency-seconds", type=float,
                    help="paced runs replay rate × this many tuples (default 15; --quick 8; 0: no paced runs) …")
    ap.add_argument("--latency-results", type=int, default=200,
                    help="… or more, up to the first prefix with this many results (default 200) …")
    ap.add_argument("--latency-max-seconds", type=float, default=40,
                    help="… but at most rate × this many tuples (default 40)")
    ap.add_argument("--native-10q", dest="native_10q", action="store_true", default=None,
                    help="also run native on the ten-query workload (default: yes, unless --quick)")
    ap.add_argument("--no-native-10q", dest="native_10q", action="store_false")
    ap.add_argument("--all-stores", action="store_true", help="per-store messages of every plan (default: mqo)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per deployment")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--native-partitions", type=int, default=1,
                    help="shuffle partitions of the native query's joins (default 1: the best measured on "
                         "local[2], see mqjoin/runtime/spark/native.py; 0 = the deployment's default, the cores)")
    ap.add_argument("--native-state-store", choices=("hdfs", "rocksdb", "rocksdb-changelog"),
                    help="state store provider of the native query (default: the module's choice)")
    ap.add_argument("--flink-parallelism", type=int, default=2, help="Flink's parallelism (default 2)")
    ap.add_argument("--tree-shape", choices=("deep", "bushy", "best"), default="best",
                    help="shape of the tree engine's binary join trees (default best)")
    ap.add_argument("--mir-budget", type=float, default=PLAN_OPTIONS["mqo-budget"]["mir_budget"],
                    help="MIR memory budget of the mqo-budget engine's plan, in the workload's estimated tuples "
                         "(optimize --mir-budget; default %(default)g)")
    ap.add_argument("--no-full-messages", dest="full_messages", action="store_false",
                    help="skip the reference executor's run of every plan over the whole stream (the "
                         "messages table's 'full' columns then cover the slice)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--whole", action="store_true",
                    help="instead: every engine as one whole process timed from outside, with peak RSS, beside "
                         "Pathway, Flink and a DuckDB batch join (benchmarks/_whole.py; engines: "
                         + ",".join(WHOLE_ENGINES) + ")")
    ap.add_argument("--rounds", type=int, default=1, help="--whole: rounds, the engines' order rotated (default 1)")
    ap.add_argument("--rss-limit", type=float, help="--whole: kill a run whose process tree passes this many GB")
    ap.add_argument("--pathway-python", default="python3",
                    help="--whole: the interpreter of an environment with pathway and duckdb (default python3)")
    ap.add_argument("--data", help="--whole: the TPC-H folder (default: mqjoin data tpch's cache for --sf)")
    _results.add_flag(ap)
    args = ap.parse_args(argv)
    argv_ = [__file__, *(sys.argv[1:] if argv is None else argv)]
    if args.whole:
        import _whole
        from _flink import available

        asked = args.engines is not None
        args.engines = [e.strip() for e in (args.engines or ",".join(WHOLE_ENGINES)).split(",") if e.strip()]
        bad = [e for e in args.engines if e not in WHOLE_ENGINES]
        if bad:
            ap.error(f"unknown --whole engine: {', '.join(bad)} (choose from {', '.join(WHOLE_ENGINES)})")
        if "flink" in args.engines and not available():
            if asked:
                ap.error(MISSING)
            args.engines.remove("flink")
        args.workloads = [x.strip() for x in (args.workloads or "fig7a,10q").split(",") if x.strip()]
        with _results.recorded('spark_mqo_whole', 'The whole command, prompt to prompt (spark_mqo.py --whole)',
                               args.results, argv_):
            return _whole.main(args)
    with _results.recorded('spark_mqo', 'Spark engines on TPC-H (benchmarks/spark_mqo.py)', args.results, argv_):
        return _bench(ap, args)


def _bench(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    engines_asked = args.engines is not None
    args.engines = args.engines or ",".join(ENGINES)
    PLAN_OPTIONS["mqo-budget"]["mir_budget"] = args.mir_budget
    q = args.quick
    args.seconds = args.seconds if args.seconds is not None else (0.3 if q else 1.0)
    args.batch = args.batch or (1500 if q else 5000)
    if args.latency_seconds is None:
        args.latency_seconds = 8.0 if q else 15.0
    elif args.latency_seconds < 0:
        ap.error(f"--latency-seconds must be 0 (no paced runs) or more, not {args.latency_seconds:g}")
    args.workloads = [x.strip() for x in (args.workloads or ("fig7a" if q else "fig7a,10q")).split(",") if x.strip()]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if args.native_10q is None:
        args.native_10q = not q
    bad = [x for x in args.workloads if x not in WORKLOADS] + [e for e in args.engines if e not in ENGINES]
    if bad:
        ap.error(f"unknown workload/engine: {', '.join(bad)}")
    from _flink import available

    if "flink" in args.engines and not available():
        if engines_asked:
            ap.error(MISSING)
        print(f"(no Flink row: {MISSING})", flush=True)
        args.engines = [e for e in args.engines if e != "flink"]
    if args.native_partitions:
        NATIVE_OPTIONS["partitions"] = args.native_partitions
    if args.native_state_store:
        from mqjoin.runtime.spark import native

        native.DEFAULT_STATE_STORE = args.native_state_store

    from mqjoin.datasets.tpch import tpch_streams
    from mqjoin.runtime.spark.session import spark_session

    t_start = time.time()
    streams = tpch_streams(args.sf)
    t0 = time.time()
    spark = spark_session(args.master)
    print(f"Spark engines on TPC-H, {args.master} ({os.cpu_count()} cores), session started in "
          f"{time.time() - t0:.1f}s, load average {os.getloadavg()[0]:.1f}; warming up …", flush=True)
    _record_phases()
    warm_up(spark, streams.directory)
    out = {"config": {k: v for k, v in vars(args).items()}, "workloads": {}}
    for key in args.workloads:
        out["workloads"][key] = bench_workload(key, args, spark, streams.directory)
    out["seconds"] = time.time() - t_start
    print(f"\ntotal {out['seconds']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    wrong = [(k, s, e) for k, r in out["workloads"].items() for s in ("unpaced", "paced")
             for e, x in r[s].items() if not x.get("equal") and not (e == "flink" and x.get("error"))]
    if wrong:
        print("✗ results differ or runs failed: " + ", ".join(f"{k}/{s}/{e}" for k, s, e in wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
