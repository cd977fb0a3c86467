"""Pathway and DuckDB as reference points of ``benchmarks/spark_mqo.py --whole`` (optional;
never part of the mqjoin package).

**Its own environment.**  Pathway (PyPI ``pathway``, a Rust dataflow engine with a Python
API) and DuckDB run in a virtualenv of their own, like the Flink row: this file imports
nothing of mqjoin and runs through that environment's interpreter (``--pathway-python``),
reading a *spec* the benchmark writes from the workload (:func:`spec` — relations, each
query's relations and its chain of equi-joins in the native Spark baseline's order, and the
same chain as SQL).  Only full-history workloads (every window null) are run here: a result
is then every combination of tuples that agrees on the query's classes, i.e. one batch join.

Subcommands (each a whole process the benchmark times from outside)::

    python _pathway.py pathway SPEC DATA OUT   # all queries in ONE Pathway computation
    python _pathway.py duckdb SPEC DATA OUT    # the same result sets as one DuckDB batch join
    python _pathway.py compare SPEC A B        # do two outputs hold the same result sets?
                                               # (mqjoin's and DuckDB's Parquet, Pathway's CSV,
                                               # Flink's CSV parts in OUT/<q>/)

``pathway`` reads every relation once (Parquet → pandas → a static Pathway table), joins each
query's chain, writes each query's row indices with Pathway's CSV sink (``OUT/<q>.csv``) and
runs everything with one ``pw.run()``; threads: ``PATHWAY_THREADS`` (the benchmark sets 2).
``duckdb`` runs each query's SQL over the Parquet inputs and writes ``OUT/<q>.parquet`` in
mqjoin's output format.  ``compare`` counts, with DuckDB, the rows of each query's output
(Parquet or Pathway's CSV) missing from the other (``EXCEPT ALL`` both ways) and prints a
JSON verdict.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def spec(w) -> dict:
    """The JSON spec of workload ``w`` (run in the benchmark's environment, with mqjoin)."""
    from mqjoin.runtime.spark.native import join_order

    queries = {}
    for q in w.queries:
        order = join_order(w, q)
        steps = []
        for k, r in enumerate(order[1:], 1):
            conds = []
            for c in q.classes:
                mine = c.member_of(r)
                left = [a for a in c.members if a.relation in order[:k]]
                if mine is not None and left:
                    conds.append([left[0].relation, left[0].name, r, mine.name])
            steps.append(conds)
        alias = {r: f"t{i}" for i, r in enumerate(order)}
        sql = f'"{order[0]}" AS {alias[order[0]]}'
        for r, conds in zip(order[1:], steps):
            on = " AND ".join(f'{alias[a]}."{x}" = {alias[b]}."{y}"' for a, x, b, y in conds) or "TRUE"
            sql += f' JOIN "{r}" AS {alias[r]} ON {on}'
        cols = ", ".join(f'{alias[r]}._row AS "{r}"' for r in q.relations)
        queries[q.name] = {"relations": list(q.relations), "order": order, "steps": steps,
                           "sql": f"SELECT {cols} FROM {sql}"}
        if any(w.window(r) is not None for r in q.relations):
            raise ValueError(f"query {q.name} has a window: this runner joins full histories only")
    return {"relations": {r: sorted({a.name for q in w.queries for c in q.classes for a in c.members
                                     if a.relation == r}) for r in w.used_relations},
            "queries": queries}


def _inputs(sp: dict, data: Path) -> dict:
    import pyarrow.parquet as pq

    out = {}
    for r, attrs in sp["relations"].items():
        t = pq.read_table(data / f"{r}.parquet", columns=attrs)
        df = t.to_pandas()
        df.insert(0, "_row", range(len(df)))
        out[r] = df.rename(columns={a: f"{r}__{a}" for a in attrs}).rename(columns={"_row": f"{r}___row"})
    return out


def run_pathway(sp: dict, data: Path, out: Path) -> dict:
    import pathway as pw

    t0 = time.perf_counter()
    frames = _inputs(sp, data)
    tables = {r: pw.debug.table_from_pandas(df) for r, df in frames.items()}
    read = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    for name, q in sp["queries"].items():
        order = q["order"]
        acc = tables[order[0]]
        for r, conds in zip(order[1:], q["steps"]):
            right = tables[r]
            on = [acc[f"{a}__{x}"] == right[f"{b}__{y}"] for a, x, b, y in conds]
            acc = acc.join(right, *on).select(*pw.left, *pw.right)
        res = acc.select(**{r: acc[f"{r}___row"] for r in q["relations"]})
        pw.io.csv.write(res, out / f"{name}.csv")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    done = time.perf_counter()
    return {"read_s": read - t0, "run_s": done - read}


def run_duckdb(sp: dict, data: Path, out: Path) -> dict:
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect()
    for r in sp["relations"]:
        con.execute(f"CREATE VIEW \"{r}\" AS SELECT file_row_number AS _row, * "
                    f"FROM read_parquet('{data / f'{r}.parquet'}', file_row_number=true)")
    out.mkdir(parents=True, exist_ok=True)
    join = 0.0
    for name, q in sp["queries"].items():
        t1 = time.perf_counter()
        con.execute(f"COPY ({q['sql']}) TO '{out / f'{name}.parquet'}' (FORMAT parquet)")
        join += time.perf_counter() - t1
    return {"join_and_write_s": join, "all_s": time.perf_counter() - t0}


def _source(path: Path, relations: list[str]) -> str:
    if path.is_dir():  # Flink's CSV sink: part files, no header, the row indices in the query's order
        cols = ", ".join(f'column{i:d}::BIGINT AS "{r}"' for i, r in enumerate(relations))
        return f"SELECT {cols} FROM read_csv('{path}/**/*', header=false, columns=" + "{" + \
            ", ".join(f"'column{i}': 'BIGINT'" for i in range(len(relations))) + "})"
    if path.suffix == ".csv":  # Pathway's sink: the row indices, then time and diff
        cols = ", ".join(f'"{r}"::BIGINT' for r in relations)
        return f"SELECT {cols} FROM read_csv('{path}', header=true)"
    return f"SELECT {', '.join(repr(r).replace(chr(39), chr(34)) for r in relations)} FROM read_parquet('{path}')"


def compare(sp: dict, a: Path, b: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    verdict = {}
    for name, q in sp["queries"].items():
        pa_, pb_ = (next(p for p in (d / f"{name}.parquet", d / f"{name}.csv", d / name) if p.exists())
                    for d in (a, b))
        sa, sb = _source(pa_, q["relations"]), _source(pb_, q["relations"])
        n_a = con.execute(f"SELECT count(*) FROM ({sa})").fetchone()[0]
        n_b = con.execute(f"SELECT count(*) FROM ({sb})").fetchone()[0]
        only_a = con.execute(f"SELECT count(*) FROM ({sa} EXCEPT ALL {sb})").fetchone()[0]
        only_b = con.execute(f"SELECT count(*) FROM ({sb} EXCEPT ALL {sa})").fetchone()[0]
        verdict[name] = {"rows": [n_a, n_b], "only_first": only_a, "only_second": only_b}
    verdict["equal"] = all(v["only_first"] == 0 and v["only_second"] == 0 for v in verdict.values())
    return verdict


def main(argv: list[str]) -> int:
    what, sp = argv[0], json.loads(Path(argv[1]).read_text())
    a, b = Path(argv[2]), Path(argv[3])
    got = {"pathway": run_pathway, "duckdb": run_duckdb, "compare": compare}[what](sp, a, b)
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
