"""Seeded random small workloads and data with ties in ts, windows (incl. 0 and null),
nulls, several queries, 3-way and 4-way joins, classes of three members."""

from __future__ import annotations

import random
import zlib

from mqjoin.model.errors import WorkloadError
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload


def random_case(seed: int, max_rows: int = 25):
    """A (workload, tables) pair, or None when the drawn workload is invalid (a
    :class:`~mqjoin.model.errors.WorkloadError`; any other exception propagates: it is a bug)."""
    rng = random.Random(seed)
    nrel = rng.randint(3, 5)
    rels = {}
    for i in range(nrel):
        attrs = ["a", "b", "c"][: rng.randint(1, 3)]
        rels[f"R{i}"] = {"attributes": attrs, "rate": rng.choice([1, 10, 100]),
                         "window": rng.choice([None, 0, 1, 2.5, 4]), "parallelism": rng.randint(1, 3)}
    names = list(rels)
    queries = {}
    for qi in range(rng.randint(1, 3)):
        size = rng.randint(2, min(4, nrel))
        inq = [rng.choice(names)]
        eqs = []
        while len(inq) < size:
            a = rng.choice(inq)
            b = rng.choice([n for n in names if n not in inq])
            eqs.append(f"{a}.{rng.choice(rels[a]['attributes'])} = {b}.{rng.choice(rels[b]['attributes'])}")
            inq.append(b)
        if rng.random() < 0.3 and size >= 3:  # an extra equality: cycles and 3-member classes
            x, y = rng.sample(inq, 2)
            eqs.append(f"{x}.{rng.choice(rels[x]['attributes'])} = {y}.{rng.choice(rels[y]['attributes'])}")
        queries[f"q{qi}"] = ", ".join(eqs)
    try:
        w = Workload.build(rels, queries, defaults={"selectivity": rng.choice([0.1, 0.3, 0.5]),
                                                    "parallelism": rng.randint(1, 3)})
    except WorkloadError:  # a drawn query may be invalid (self-join class, …); anything else is a bug
        return None
    tables = {}
    for r, spec in rels.items():
        n = rng.randint(0, max_rows)
        cols = {"ts": [float(rng.randint(0, 8)) for _ in range(n)]}  # many ties
        for a in spec["attributes"]:
            cols[a] = [None if rng.random() < 0.05 else rng.randint(0, 2) for _ in range(n)]
        tables[r] = Table.from_columns(r, cols)
    return w, tables


def cases(n: int, start: int = 0, max_rows: int = 25):
    out = []
    seed = start
    while len(out) < n:
        c = random_case(seed, max_rows)
        if c is not None:
            out.append((seed, *c))
        seed += 1
    return out


def random_filtered_case(seed: int, max_rows: int = 25, grouped: bool = False):
    """A :func:`random_case` whose queries carry random filters (docs/model.md §7: comparisons with
    constants of every operator, on join and non-join attributes, pass fractions given), with
    every query in one query group when ``grouped``; None when the drawn workload is invalid."""
    case = random_case(seed, max_rows)
    if case is None:
        return None
    w, tables = case
    rng = random.Random(seed * 7919 + 1)
    comparisons = ["{} = 1", "{} != 0", "{} < 2", "{} <= 0", "{} > 0", "{} >= 1", "{} IN (0, 2)",
                   "{} BETWEEN 1 AND 2"]
    spec = w.to_spec()
    fractions = {}
    for q in w.queries:
        conds = []
        for r in q.relations:
            if rng.random() < 0.5:
                a = rng.choice(w.relation(r).attributes)
                cond = rng.choice(comparisons).format(f"{r}.{a}")
                conds.append(cond)
                fractions[f"{q.name}.{r}"] = 0.3 + 0.1 * (zlib.crc32(cond.encode()) % 5)  # one per filter
        if conds:
            spec["queries"][q.name] = {"join": q.text, "where": " AND ".join(conds)}
    spec["filters"] = fractions
    if grouped:
        spec["groups"] = [list(w.query_names)]
    return Workload.from_spec(spec), tables


def filtered_cases(n: int, start: int = 0, max_rows: int = 25, grouped: bool = False):
    out = []
    seed = start
    while len(out) < n:
        c = random_filtered_case(seed, max_rows, grouped)
        if c is not None:
            out.append((seed, *c))
        seed += 1
    return out
