"""TPC-H streams: generation time and size per scale factor, and the precision of sampled
statistics against the exact ones.

Part 1 — for each scale factor, in a fresh cache: ``tpchgen-cli`` time, time to turn the
tables into relation streams, rows and bytes per relation.

Part 2 — ``mqjoin stats`` over the streams of every potential TPC-H join
(``tpch_joins.yaml``): read time, exact vs sampled estimates, each sampled estimate's
standard error and whether its 95 % interval covers the exact value.

    python benchmarks/datasets.py [--sf 0.01 0.1 1] [--stats-sf 0.1] [--sample 20000]

Prints tables; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from mqjoin.model.tables import read_inputs
from mqjoin.model.workload import load_workload
from mqjoin.datasets.stats import estimate_statistics
from mqjoin.datasets.tpch import RELATIONS, WORKLOADS, generate_tables, tpch_dir, tpch_streams


def generation(sfs: list[float], cache: Path) -> None:
    print("Part 1 — TPC-H as relation streams (constant arrivals, lineitem at 10,000 tuples/s)")
    header = f"{'SF':>6}{'tpchgen s':>11}{'streams s':>11}" + "".join(f"{r.name:>11}" for r in RELATIONS) + \
             f"{'rows':>12}{'stream MB':>11}{'raw MB':>9}"
    print(header)
    for sf in sfs:
        t0 = time.perf_counter()
        raw = generate_tables(sf, tpch_dir(sf, cache) / "tpchgen")
        t_gen = time.perf_counter() - t0
        t1 = time.perf_counter()
        s = tpch_streams(sf, cache=cache)
        t_streams = time.perf_counter() - t1
        raw_bytes = sum(p.stat().st_size for p in raw.glob("*.parquet"))
        print(f"{sf:>6g}{t_gen:>11.1f}{t_streams:>11.1f}" + "".join(f"{s.info(r.name).rows:>11,}" for r in RELATIONS)
              + f"{s.rows:>12,}{s.bytes / 1e6:>11.1f}{raw_bytes / 1e6:>9.1f}")
        sys.stdout.flush()


def precision(sf: float, cache: Path, sample: int, seed: int) -> None:
    w = load_workload(WORKLOADS / "tpch_joins.yaml")
    d = tpch_streams(sf, cache=cache).directory
    t0 = time.perf_counter()
    tables = read_inputs(w, d)
    t_read = time.perf_counter() - t0
    t1 = time.perf_counter()
    exact = estimate_statistics(w, tables, sample=None)
    t_exact = time.perf_counter() - t1
    t2 = time.perf_counter()
    est = estimate_statistics(w, tables, sample=sample, seed=seed)
    t_sampled = time.perf_counter() - t2
    print(f"\nPart 2 — statistics of SF {sf:g} ({sum(map(len, tables.values())):,} tuples): read_inputs "
          f"{t_read:.1f}s, exact {t_exact:.2f}s, sampled ({sample:,} rows per relation) {t_sampled:.2f}s")
    print(f"{'pair':<42}{'exact':>12}{'sampled':>12}{'SE':>11}{'rel. ±95%':>10}{'|err|/SE':>9}  covered")
    hits = n = 0
    for p in est.pairs:
        e = exact.pair(p.key).value
        if p.exact:
            print(f"{p.key:<42}{e:>12.6g}{'(exact)':>12}")
            continue
        n += 1
        ok = p.low <= e <= p.high
        hits += ok
        ratio = abs(p.value - e) / p.stderr if p.stderr > 0 else float("nan")
        rel = (p.high - p.low) / 2 / p.value if p.value > 0 else float("inf")
        print(f"{p.key:<42}{e:>12.6g}{p.value:>12.6g}{p.stderr:>11.3g}{rel:>10.1%}{ratio:>9.2f}  "
              f"{'yes' if ok else 'NO'}")
    print(f"{hits} of {n} sampled estimates have the exact value inside their 95% interval")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    ap.add_argument("--stats-sf", type=float, nargs="*", default=[0.1])
    ap.add_argument("--sample", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, help="cache root (default: a fresh temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mqjoin-bench-") as tmp:
        cache = args.cache or Path(tmp)
        generation(args.sf, cache)
        for sf in args.stats_sf:
            precision(sf, cache, args.sample, args.seed)


if __name__ == "__main__":
    main()
