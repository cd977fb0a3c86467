"""Prototype: the floor of a micro-batch run as *waves* over a sharded state RDD.

The state is ``P`` shard objects (one per partition of a persisted RDD, each holding ``K``
stores of column arrays with a hash index per store), ``N`` rows in all.  A micro-batch of
``M`` travelling tuples runs ``W`` waves: in each wave the travelling frames are exchanged to
their shard (``partitionBy(P)``) and one ``mapPartitions`` per shard probes a store with them,
inserts them into another store, and sends the matches on to the next wave.  Where the state
lies between waves:

* ``beside``: in a persisted RDD, unioned partition by partition with the exchanged frames
  (same partitioner: Spark keeps partition ``i`` of both together); the frames for the next
  wave are filtered out of each wave's persisted output (a second Python pass);
* ``exchange``: each shard's state is yielded keyed by its own shard and goes through the
  next exchange with the frames (one Python pass per wave, no persisted wave outputs).

The whole batch is one Spark job: the input's exchange, one stage per wave; the new state is
persisted and cut from its lineage with ``localCheckpoint``.  Only counts reach the driver.
Per variant and index (``pickled`` with the shard, or ``rebuilt`` after unpickling): seconds
per batch (median of ``--repeat`` after a warm-up), Spark jobs and stages of a batch, pickled
MB per shard.  Usage::

    python benchmarks/distributed_sharded.py [--stores 10] [--rows 220000] [--batch 5000]
                                             [--waves 4] [--shards 2] [--repeat 5] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time

import numpy as np

from mqjoin.runtime.vector import KeyIndex


def make_shard(stores: list[dict[str, np.ndarray]], keep_index: bool) -> dict:
    """K stores of (key, value, ts, seq) columns with a hash index on the key (built on first
    use; pickled with the shard when ``keep_index``)."""
    return {"stores": stores, "keep": keep_index, "index": [None] * len(stores), "log": []}


def get_index(shard: dict, s: int) -> KeyIndex:
    if shard["index"][s] is None:
        k = shard["stores"][s]["k"]
        shard["index"][s] = KeyIndex(k, np.arange(len(k)), True)
    return shard["index"][s]


def for_pickle(shard: dict) -> dict:
    return shard if shard["keep"] else {**shard, "index": [None] * len(shard["stores"])}


def _ident(k):
    return k


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", type=int, default=10)
    ap.add_argument("--rows", type=int, default=220_000)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--waves", type=int, default=4)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from mqjoin.runtime.spark.distributed import job_cost
    from mqjoin.runtime.spark.session import spark_session

    spark = spark_session(args.master)
    sc = spark.sparkContext
    K, N, M, W, P = args.stores, args.rows, args.batch, args.waves, args.shards
    keys = max(N // K, 1)  # about one stored entry per key and store

    def new_shard(p: int, keep: bool) -> dict:
        rng = np.random.default_rng(p)
        n = N // K // P
        return make_shard([{"k": rng.integers(0, keys, n) * P + p, "v": np.arange(n), "ts": rng.random(n),
                       "seq": np.arange(n)} for _ in range(K)], keep)

    dumps, loads = (lambda x: pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)), pickle.loads

    def wave(w: int, last: bool, exchange: bool):
        def run(index, it):
            t0 = time.time()
            shard, frames = None, []
            for _, (kind, v) in it:
                if kind == "state":
                    shard = loads(v)
                elif kind == "msg" or (kind == "out" and exchange):  # "out": sent by this wave's input
                    frames.append(loads(v))
            t1 = time.time()
            k = np.concatenate([f["k"] for f in frames]) if frames else np.empty(0, np.int64)
            s = w % K
            pi, si = get_index(shard, s).match(k, np.arange(len(k)))
            out = {"k": (k[pi] * 7 + w) % keys, "v": shard["stores"][s]["v"][si]}
            ins = (s + 1) % K
            st = shard["stores"][ins]
            shard["stores"][ins] = {"k": np.concatenate([st["k"], k]), "v": np.concatenate([st["v"], k]),
                                 "ts": np.concatenate([st["ts"], np.zeros(len(k))]),
                                 "seq": np.concatenate([st["seq"], k])}
            shard["index"][ins] = None
            shard["log"].append((w, len(k), len(pi), round(t1 - t0, 3), round(time.time() - t1, 3)))
            if last:
                summary, shard["log"] = shard["log"], []
            yield index, ("state", dumps(for_pickle(shard)))
            if last:
                yield index, ("sum", summary)
                return
            dest = out["k"] % P
            for p in range(P):
                m = dest == p
                yield p, ("out", dumps({"k": out["k"][m], "v": out["v"][m]}))
        return run

    def batch(state, seed: int, exchange: bool):
        rng = np.random.default_rng(seed)
        k = rng.integers(0, keys * P, M)
        inp = sc.parallelize([(p, ("msg", dumps({"k": k[k % P == p], "v": k[k % P == p]}))) for p in range(P)], P)
        msgs = inp.map(_ident).partitionBy(P, _ident)
        if exchange:  # the state travels with the frames through every exchange
            state = state.union(msgs)
            for w in range(W):
                run = wave(w, w == W - 1, exchange)
                out = state.mapPartitionsWithIndex(run, preservesPartitioning=w == W - 1)
                if w + 1 < W:
                    state = out.partitionBy(P, _ident)
        else:  # the state stays in a persisted RDD beside the exchange of the frames
            for w in range(W):
                run = wave(w, w == W - 1, exchange)
                out = state.union(msgs).mapPartitionsWithIndex(run, preservesPartitioning=True)
                if w + 1 < W:
                    out = out.persist()
                    # a new partitioning (map forgets the partitioner, or partitionBy would keep it)
                    msgs = out.filter(lambda kv: kv[1][0] == "out").map(lambda kv: (kv[0], ("msg", kv[1][1]))
                                                                      ).partitionBy(P, _ident)
                state = out  # the next wave skips the frames and summaries it finds here
        out.persist()
        out.localCheckpoint()  # marks the RDD: its blocks are kept when the job computes it
        got = out.filter(lambda kv: kv[1][0] == "sum").map(lambda kv: kv[1][1]).collect()
        return out, got

    print(f"{K} stores, {N:,} rows, batches of {M:,}, {W} waves, {P} shards, {args.master} ({os.cpu_count()} cores), "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'state':<9} {'index':<9} {'s/batch':>8} {'jobs':>5} {'stages':>6} {'MB/shard':>9}")
    for exchange, keep in ((False, False), (False, True), (True, False), (True, True)):
        state = sc.parallelize([(p, ("state", dumps(new_shard(p, keep)))) for p in range(P)], P).partitionBy(P, _ident)
        state.localCheckpoint()
        state.count()
        mb = len(pickle.dumps(new_shard(0, keep), protocol=pickle.HIGHEST_PROTOCOL)) / 1e6
        secs, cost = [], None
        for i in range(args.repeat + 1):
            group = f"sharded-{exchange}-{keep}-{i}"
            sc.setJobGroup(group, group)
            t0 = time.time()
            state, _ = batch(state, i, exchange)
            if i:  # the first batch is a warm-up
                secs.append(time.time() - t0)
                cost = job_cost(sc, group)
        print(f"{'exchange' if exchange else 'beside':<9} {'pickled' if keep else 'rebuilt':<9} "
              f"{statistics.median(secs):>8.2f} {cost[0]:>5} {cost[1]:>6} "
              f"{mb:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
