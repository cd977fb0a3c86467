"""Flink as a reference point for ``benchmarks/spark_mqo.py`` (optional; never part of the
mqjoin package).

**Its own environment.**  apache-flink pins a pyarrow older than PySpark's Arrow path accepts
(apache-flink 2.3: pyarrow < 17; PySpark 4.3: ≥ 18), so Flink cannot share the benchmark's
environment.  Make ``.venv-flink/`` once, at the top of the checkout::

    benchmarks/flink-env

and ``spark_mqo.py`` runs the Flink row through ``.venv-flink/bin/python`` in a subprocess
(:func:`run_flink_isolated`: the workload, the input tables and the oracle's results go to a
temporary directory, this module's ``main`` runs :func:`run_flink` on them there and writes
the row back as JSON).  Without ``.venv-flink/`` the row fails at once, saying how to make it.

The workload's queries run as Flink SQL *regular* joins in ONE ``StatementSet`` (one Flink
job, parallelism 2 by default) over the same input: one CSV file per relation (``_row`` = the
row index, ``ts``, the attributes), written from the tables the Spark engines replay.  Each
query joins its relations in the chain order of the native Spark baseline (Flink keeps the
order written: join reordering is off by default), with its equalities and the exact window
conditions of docs/model.md §6 (``ts_i − ts_j ≤ window(Rj)`` per ordered pair; none for null
windows), and writes the row indices of every result to a CSV sink, read back and compared
with the oracle's sets.

Measured: the job's net runtime (Flink's ``JobExecutionResult``; the whole input is bounded
and read as fast as Flink takes it, like the Spark runs' single batch) and the rows its joins
hold at the end: a regular inner join keeps every input row of both sides (no TTL, no
watermark), so state rows = Σ over each query's joins of |left input| + |right input|,
computed from the data (not read from Flink's state backend).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the interpreter of the Flink environment (made by benchmarks/flink-env)
FLINK_PYTHON = Path(__file__).resolve().parent.parent / ".venv-flink" / "bin" / "python"
MISSING = ("the Flink row runs in an environment of its own, .venv-flink/, which does not exist: make it with "
           "benchmarks/flink-env (apache-flink pins a pyarrow older than PySpark needs, so it cannot share .venv/)")


def available() -> bool:
    """Whether the Flink environment exists."""
    return FLINK_PYTHON.exists()


def run_flink_isolated(w, tables, truth, parallelism: int = 2, timeout: float | None = None) -> dict:
    """:func:`run_flink` in the Flink environment (see the module doc): the row it returns, or
    a row with ``error`` when the subprocess failed.  Raises ``RuntimeError`` (:data:`MISSING`)
    when the environment does not exist."""
    if not available():
        raise RuntimeError(MISSING)
    from mqjoin.model.tables import write_inputs

    root = Path(tempfile.mkdtemp(prefix="mqjoin-flink-run-"))
    try:
        (root / "workload.yaml").write_text(w.to_yaml())
        write_inputs(tables, root / "inputs")
        (root / "truth.json").write_text(json.dumps({q: sorted(map(list, rows)) for q, rows in truth.items()}))
        cmd = [str(FLINK_PYTHON), str(Path(__file__).resolve()), str(root), "--parallelism", str(parallelism)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"engine": "flink", "error": f"the Flink run took longer than {timeout:g} s", "equal": False}
        out = root / "row.json"
        if done.returncode != 0 or not out.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return {"engine": "flink", "error": f"the Flink subprocess exited with {done.returncode}: {last}",
                    "equal": False}
        return json.loads(out.read_text())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _csv_inputs(w, tables, root: Path) -> dict[str, list[str]]:
    """``root/<relation>/data.csv`` (no header): ``_row, ts, attributes…`` (those the tables
    hold: an input read for a run holds the attributes its queries use); returns the columns of
    every relation."""
    cols = {}
    for r, t in tables.items():
        names = [a for a in w.relation(r).attributes if a in t.columns]
        (root / r).mkdir(parents=True)
        with open(root / r / "data.csv", "w", newline="") as f:
            out = csv.writer(f)
            for i in range(len(t)):
                out.writerow([i, repr(float(t.ts[i]))] + ["" if t.columns[a][i] is None else t.columns[a][i]
                                                           for a in names])
        cols[r] = names
    return cols


def _sql_type(values) -> str:
    vals = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in vals) and vals:
        return "BOOLEAN"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "BIGINT"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "DOUBLE"
    return "STRING"


def query_sql(w, q, sink: str) -> str:
    """``INSERT INTO sink SELECT <row indices> FROM <chain of joins>`` for query ``q``."""
    from mqjoin.runtime.spark.native import join_order

    order = join_order(w, q)
    alias = {r: f"t{i}" for i, r in enumerate(order)}
    sql = f"`{order[0]}` AS {alias[order[0]]}"
    joined = [order[0]]
    for r in order[1:]:
        cond = []
        for c in q.classes:
            mine = c.member_of(r)
            left = [a for a in c.members if a.relation in joined]
            if mine is not None and left:
                cond.append(f"{alias[left[0].relation]}.`{left[0].name}` = {alias[r]}.`{mine.name}`")
        for i in joined:
            wi, wk = w.window(i), w.window(r)
            if wi is not None:
                cond.append(f"{alias[r]}.ts - {alias[i]}.ts <= {float(wi)!r}")
            if wk is not None:
                cond.append(f"{alias[i]}.ts - {alias[r]}.ts <= {float(wk)!r}")
        sql += f" JOIN `{r}` AS {alias[r]} ON " + " AND ".join(cond)
        joined.append(r)
    cols = ", ".join(f"{alias[r]}._row" for r in q.relations)
    return f"INSERT INTO `{sink}` SELECT {cols} FROM {sql}"


def join_state_rows(w, tables, results_by_prefix=None) -> int:
    """Rows Flink's regular joins hold after the whole input: Σ over every query's chain of
    the sizes of both inputs of each join (intermediate sizes by pandas merges)."""
    import pandas as pd

    from mqjoin.runtime.spark.native import join_order

    frames = {r: pd.DataFrame({"ts": list(t.ts), **{a: list(v) for a, v in t.columns.items()}})
              for r, t in tables.items()}
    total = 0
    for q in w.queries:
        order = join_order(w, q)
        cur = frames[order[0]].add_prefix(f"{order[0]}.")
        joined = [order[0]]
        for r in order[1:]:
            right = frames[r].add_prefix(f"{r}.")
            total += len(cur) + len(right)
            lk, rk = [], []
            for c in q.classes:
                mine = c.member_of(r)
                left = [a for a in c.members if a.relation in joined]
                if mine is not None and left:
                    lk.append(f"{left[0].relation}.{left[0].name}")
                    rk.append(f"{r}.{mine.name}")
            cur = cur.dropna(subset=lk).merge(right.dropna(subset=rk), left_on=lk, right_on=rk)
            for i in joined:
                wi, wk = w.window(i), w.window(r)
                if wi is not None:
                    cur = cur[cur[f"{r}.ts"] - cur[f"{i}.ts"] <= wi]
                if wk is not None:
                    cur = cur[cur[f"{i}.ts"] - cur[f"{r}.ts"] <= wk]
            joined.append(r)
    return total


def run_flink(w, tables, truth, parallelism: int = 2, out: Path | None = None) -> dict:
    """Run the workload on a local Flink mini-cluster; the figures of one benchmark row.
    ``truth`` None: the results are left in ``out/<query>/`` (CSV parts) and not read back
    (``spark_mqo.py --whole`` compares them with DuckDB's)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    root = Path(tempfile.mkdtemp(prefix="mqjoin-flink-"))
    sinks = out if out is not None else root / "out"
    row: dict = {"engine": "flink", "input_tuples": sum(len(t) for t in tables.values())}
    try:
        cols = _csv_inputs(w, tables, root / "in")
        env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
        conf = env.get_config()
        conf.set("parallelism.default", str(parallelism))
        conf.set("pipeline.name", "mqjoin-benchmark")
        for r, names in cols.items():
            types = [_sql_type(tables[r].columns[a]) for a in names]
            fields = ", ".join([" `_row` BIGINT", "ts DOUBLE"] + [f"`{a}` {t}" for a, t in zip(names, types)])
            env.execute_sql(f"CREATE TABLE `{r}` ({fields}) WITH ('connector' = 'filesystem', "
                            f"'path' = '{root / 'in' / r}', 'format' = 'csv', "
                            "'csv.null-literal' = '', 'csv.ignore-parse-errors' = 'false')")
        stmts = env.create_statement_set()
        for q in w.queries:
            fields = ", ".join(f"c{i} BIGINT" for i in range(len(q.relations)))
            env.execute_sql(f"CREATE TABLE `out_{q.name}` ({fields}) WITH ('connector' = 'filesystem', "
                            f"'path' = '{sinks / q.name}', 'format' = 'csv')")
            stmts.add_insert_sql(query_sql(w, q, f"out_{q.name}"))
        t0 = time.perf_counter()
        result = stmts.execute()
        job = result.get_job_client().get_job_execution_result().result()
        row["wall_s"] = time.perf_counter() - t0
        row["busy_s"] = job.get_net_runtime() / 1000.0
        row["throughput"] = row["input_tuples"] / row["busy_s"] if row["busy_s"] > 0 else None
        if truth is None:
            return row
        got = {}
        for q in w.queries:
            rows = set()
            for f in (sinks / q.name).rglob("*"):
                if f.is_file() and not f.name.startswith("."):
                    with open(f, newline="") as fh:
                        rows.update(tuple(int(x) for x in line) for line in csv.reader(fh) if line)
            got[q.name] = rows
        row["results"] = sum(map(len, got.values()))
        row["results_by_query"] = {k: len(v) for k, v in got.items()}
        row["equal"] = got == truth
        row["state_rows"] = join_state_rows(w, tables)
    except Exception as exc:  # noqa: BLE001 — Flink is optional: its failure must not stop the benchmark
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        row["equal"] = False
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    """In the Flink environment: the row of the run prepared by :func:`run_flink_isolated`."""
    ap = argparse.ArgumentParser(description="the Flink row of benchmarks/spark_mqo.py (run by it)")
    ap.add_argument("root", type=Path, help="the directory run_flink_isolated prepared")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--whole", nargs=2, type=Path, metavar=("DATA", "OUT"),
                    help="root is a workload file: run it over DATA, leave the results in OUT/<query>/ and print "
                         "the row (a whole process, timed from outside by spark_mqo.py --whole)")
    args = ap.parse_args(argv)
    from mqjoin.model.tables import read_inputs
    from mqjoin.model.workload import load_workload, parse_workload

    if args.whole:
        w = load_workload(args.root)
        row = run_flink(w, read_inputs(w, args.whole[0]), None, parallelism=args.parallelism, out=args.whole[1])
        print(json.dumps(row, default=str))
        return 0 if "error" not in row else 1

    w = parse_workload((args.root / "workload.yaml").read_text())
    tables = read_inputs(w, args.root / "inputs")
    truth = {q: {tuple(r) for r in rows} for q, rows in json.loads((args.root / "truth.json").read_text()).items()}
    row = run_flink(w, tables, truth, parallelism=args.parallelism)
    (args.root / "row.json").write_text(json.dumps(row, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
