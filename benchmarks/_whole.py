"""What a user waits for: ``benchmarks/spark_mqo.py --whole`` — every engine as one whole
process, timed from outside (from the prompt to the prompt), its peak memory, and its results
checked against a DuckDB batch join of the same result sets (the floor).

Engines (each a subprocess over the same ``mqjoin data tpch`` folder):

* ``spark`` — ``mqjoin run W --data D --out O --engine spark --json`` under the default flags
  (``--spark-mode auto``); ``spark-distributed`` adds ``--spark-mode distributed``;
  ``reference`` is the default engine (``mqjoin run`` without ``--engine``).  Their ``--json``
  gives the busy throughput and where the command's seconds went (``phases``).
* ``pathway`` — ``benchmarks/_pathway.py pathway``: all queries in one Pathway computation,
  ``PATHWAY_THREADS=2``, in the environment given by ``--pathway-python``.
* ``flink`` — ``benchmarks/_flink.py --whole``: the queries as regular joins in one
  StatementSet (parallelism 2), in ``.venv-flink/`` (``benchmarks/flink-env``).
* ``duckdb`` — ``benchmarks/_pathway.py duckdb``: every query's result set as one SQL join
  over the Parquet inputs, written as mqjoin's output format: the floor, and the result sets
  every other engine's output is compared with (``_pathway.py compare``, in DuckDB).  Run
  first in every round (the others' check needs it) and timed like the others.

Peak memory is the largest sum of the resident set sizes of the process and all its
descendants (the JVM of Spark and Flink included), sampled every ``POLL`` seconds; with
``rss_limit`` a run whose tree passes it is killed (process group) and reported as such.
Rounds rotate the engines' order (a JVM's first engine pays the disk cache's warm-up), and
the 1-minute load average is printed beside every run: this machine is shared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
POLL = 0.25
WHOLE_ENGINES = ("duckdb", "spark", "spark-distributed", "reference", "pathway", "flink")


def timed(cmd: list[str], env: dict | None = None, rss_limit: float | None = None,
          timeout: float = 1800) -> dict:
    """Run ``cmd``; wall seconds from outside, the process tree's peak RSS (bytes), its
    stdout and the last line of its stderr."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, **(env or {})}, start_new_session=True)
    peak, killed = 0, None
    proc = psutil.Process(p.pid)
    while p.poll() is None:
        try:
            rss = sum(x.memory_info().rss for x in [proc, *proc.children(recursive=True)] if x.is_running())
        except psutil.Error:
            rss = 0
        peak = max(peak, rss)
        if rss_limit and rss > rss_limit:
            killed = f"killed at {rss / 1e9:.1f} GB RSS (limit {rss_limit / 1e9:g} GB)"
        elif time.perf_counter() - t0 > timeout:
            killed = f"killed after {timeout:g} s"
        if killed:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            break
        time.sleep(POLL)
    seconds = time.perf_counter() - t0
    out.seek(0)
    err.seek(0)
    stderr = err.read().decode("utf-8", "replace").strip().splitlines()
    return {"seconds": seconds, "peak_rss": peak, "returncode": p.returncode, "killed": killed,
            "stdout": out.read().decode("utf-8", "replace"), "stderr_tail": stderr[-1][:300] if stderr else ""}


def command(engine: str, workload: Path, data: Path, out: Path, spec: Path, pathway_python: str) -> tuple[list, dict]:
    mqjoin = [sys.executable, "-m", "mqjoin.cli", "run", str(workload), "--data", str(data), "--out", str(out),
              "--json"]
    if engine == "spark":
        return mqjoin + ["--engine", "spark"], {}
    if engine == "spark-distributed":
        return mqjoin + ["--engine", "spark", "--spark-mode", "distributed"], {}
    if engine == "reference":
        return mqjoin, {}
    if engine in ("pathway", "duckdb"):
        return [pathway_python, str(HERE / "_pathway.py"), engine, str(spec), str(data), str(out)], \
            {"PATHWAY_THREADS": "2"}
    if engine == "flink":
        from _flink import FLINK_PYTHON

        return [str(FLINK_PYTHON), str(HERE / "_flink.py"), str(workload), "--whole", str(data), str(out)], {}
    raise ValueError(engine)


def _last_json(text: str) -> dict:
    """The JSON object a run printed (the whole stdout, or its last line)."""
    for chunk in (text, *reversed(text.strip().splitlines())):
        try:
            got = json.loads(chunk)
            if isinstance(got, dict):
                return got
        except ValueError:
            continue
    return {}


def run_round(key: str, workload: Path, data: Path, engines: list[str], work: Path, pathway_python: str,
              rss_limit: float | None) -> dict:
    """One run of every engine (in the order given; DuckDB first), each checked against DuckDB."""
    import _pathway
    from mqjoin.model.workload import load_workload

    spec = work / f"{key}.spec.json"
    spec.write_text(json.dumps(_pathway.spec(load_workload(workload))))
    rows = {}
    floor = work / f"{key}-duckdb"
    for engine in ["duckdb"] + [e for e in engines if e != "duckdb"]:
        out = work / f"{key}-{engine}"
        subprocess.run(["rm", "-rf", str(out)], check=False)
        cmd, env = command(engine, workload, data, out, spec, pathway_python)
        load = os.getloadavg()[0]
        r = timed(cmd, env, rss_limit)
        row = {"engine": engine, "seconds": r["seconds"], "peak_rss": r["peak_rss"], "load": load,
               "ok": r["returncode"] == 0 and not r["killed"], "error": r["killed"] or
               (None if r["returncode"] == 0 else f"exit {r['returncode']}: {r['stderr_tail']}")}
        got = _last_json(r["stdout"])
        if engine in ("spark", "spark-distributed", "reference"):
            row["busy_seconds"] = got.get("busy_seconds", got.get("seconds"))
            row["throughput"] = got.get("throughput")
            row["phases"] = got.get("phases")
            row["results"] = sum((got.get("results") or {}).values()) if "results" in got else \
                sum(v["results"] for v in (got.get("queries") or {}).values())
            row["mode"] = (got.get("spark_mode") or {}).get("mode")
        elif engine == "flink":
            row["busy_seconds"], row["throughput"] = got.get("busy_s"), got.get("throughput")
        elif engine == "pathway":
            row["phases"] = got
        else:
            row["phases"] = got
        if row["ok"] and engine != "duckdb":
            c = subprocess.run([pathway_python, str(HERE / "_pathway.py"), "compare", str(spec), str(out), str(floor)],
                               capture_output=True, text=True)
            verdict = _last_json(c.stdout)
            row["equal"] = bool(verdict.get("equal"))
            row["results"] = row.get("results") or sum(v["rows"][0] for k, v in verdict.items() if k != "equal")
        elif engine == "duckdb":
            row["equal"] = True
        subprocess.run(["rm", "-rf", str(out)] if engine != "duckdb" else ["true"], check=False)
        rows[engine] = row
        print(f"    {key} {engine:<18} {row['seconds']:7.1f} s  peak {row['peak_rss'] / 1e9:5.2f} GB  "
              f"load {load:4.1f}  {'✓' if row.get('equal') else '✗ ' + str(row.get('error'))}", flush=True)
    return rows


def report(key: str, rounds: list[dict], engines: list[str]) -> None:
    """Per engine: whole seconds (best and every round), peak RSS, busy throughput, and the
    ratios the goals name."""
    import statistics

    print(f"\n{key}: whole process (prompt to prompt), {len(rounds)} round(s), engines' order rotated")
    print(f"  {'engine':<18} {'whole s (best)':>14} {'all rounds':>26} {'peak RSS GB':>12} "
          f"{'busy tuples/s':>14} {'results':>10} {'=DuckDB':>8}")
    best = {}
    for e in ["duckdb"] + [x for x in engines if x != "duckdb"]:
        rs = [r[e] for r in rounds if e in r]
        ok = [r for r in rs if r["ok"]]
        if not rs:
            continue
        best[e] = min((r["seconds"] for r in ok), default=None)
        thr = [r["throughput"] for r in ok if r.get("throughput")]
        allr = " ".join(f"{r['seconds']:.1f}" if r["ok"] else "✗" for r in rs)
        print(f"  {e:<18} {best[e] if best[e] is not None else float('nan'):>14.1f} {allr:>26} "
              f"{max(r['peak_rss'] for r in rs) / 1e9:>12.2f} "
              f"{(statistics.median(thr) if thr else float('nan')):>14,.0f} "
              f"{(ok[0].get('results') if ok else 0) or 0:>10,} "
              f"{'✓' if ok and all(r.get('equal') for r in ok) else '✗':>8}")
    for e in ("spark", "spark-distributed", "reference"):
        ph = [r[e]["phases"] for r in rounds if e in r and r[e].get("phases")]
        if ph:
            last = min(ph, key=lambda p: p.get("whole", 1e9))
            print(f"  {e} phases (its best round, s): " + ", ".join(f"{k} {v:.1f}" for k, v in last.items()))
    sp, pw, fl, ref = (best.get(k) for k in ("spark", "pathway", "flink", "reference"))
    if sp and pw:
        print(f"  spark / pathway = {sp / pw:.2f} (goal ≤ 0.5)" + (f"; spark / flink = {sp / fl:.2f} (goal ≤ 0.25)"
                                                                   if fl else ""))
    if ref and pw:
        print(f"  reference / pathway = {ref / pw:.2f} (goal ≤ 1)")
    if sp and best.get("duckdb"):
        print(f"  spark / duckdb = {sp / best['duckdb']:.1f}")


def main(args) -> int:
    """``spark_mqo.py --whole``: ``args.sf``, ``args.workloads``, ``args.engines`` (of
    :data:`WHOLE_ENGINES`), ``args.rounds``, ``args.rss_limit`` (GB), ``args.pathway_python``,
    ``args.data`` (default: ``mqjoin data tpch``'s cache for ``--sf``)."""
    from mqjoin.datasets.tpch import tpch_streams

    data = Path(args.data) if args.data else tpch_streams(args.sf).directory
    work = Path(tempfile.mkdtemp(prefix="mqjoin-whole-"))
    engines = args.engines
    print(f"Whole process on TPC-H SF {args.sf:g} ({data}), {os.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GB; load average {os.getloadavg()[0]:.1f}", flush=True)
    wrong = False
    try:
        for key in args.workloads:
            from spark_mqo import WORKLOADS, workload_file

            rounds = []
            for i in range(args.rounds):
                order = engines[i % len(engines):] + engines[:i % len(engines)]
                print(f"  round {i + 1}: {', '.join(order)}", flush=True)
                rounds.append(run_round(key, workload_file(WORKLOADS[key][0]), data, order, work, args.pathway_python,
                                        args.rss_limit * 1e9 if args.rss_limit else None))
            report(key, rounds, engines)
            wrong |= any(not r.get("equal") for rnd in rounds for r in rnd.values() if r["ok"])
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 1 if wrong else 0
