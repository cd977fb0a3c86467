"""TPC-H as relation streams, and the TPC-H workloads of the CLASH paper (Section VII-A).

**Data.**  :func:`tpch_streams` runs ``tpchgen-cli`` (a PyPI package, installed with mqjoin;
no download at run time) to write the eight TPC-H tables as Parquet, then turns each table
into a relation stream ``<relation>.parquet``: a ``ts`` column from an arrival process
(:mod:`mqjoin.datasets.arrivals`) followed by the columns queries join on, named by the TPC-H
column without its prefix (``s_nationkey`` → ``supplier.nationkey``).  Rows keep the table's
order, so a tuple's identity (docs/model.md §6) is its row in the TPC-H table.  The arrival rate
given is that of the largest relation, ``lineitem``; every relation streams over the same
span of event time, so its rate is proportional to its size.

Generated data goes to ``<cache>/tpch/sf<SF>/`` (``<cache>`` = ``$MQJOIN_CACHE`` or
``~/.cache/mqjoin``; the raw tables in its ``tpchgen/`` folder) unless another directory is
given; a second request with the same parameters is answered from the cache.

**Joins.**  :data:`POTENTIAL_JOINS` lists the joins Section VII-A builds queries from: primary
and foreign keys, plus type-compatible columns that share values (``lineitem.linestatus =
orders.orderstatus`` over the domain F/O/P; ``customer.custkey = nation.nationkey``, where
only the customers with the lowest keys find a partner).  The bundled workloads
``tpch_fig7a.yaml`` (the five four-way queries of Figure 7(a)), ``tpch_10q.yaml`` (those plus
five partly overlapping ones) and ``tpch_joins.yaml`` (every potential join as a two-way
query: the pair statistics :func:`random_tpch_workload` draws from) carry rates and
selectivities estimated from SF 0.01 (:func:`write_bundled_workloads` regenerates them).

>>> [r.name for r in RELATIONS]
['region', 'nation', 'supplier', 'customer', 'part', 'partsupp', 'orders', 'lineitem']
>>> str(POTENTIAL_JOINS[0]), POTENTIAL_JOINS[0].kind
('nation.regionkey = region.regionkey', 'key')
>>> w = random_tpch_workload(3, query_size=4, seed=1)
>>> len(w.queries), {len(q.relations) for q in w.queries}
(3, {4})
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mqjoin.model.errors import DataError, WorkloadError
from mqjoin.model.workload import Attr, Workload, load_workload
from mqjoin.support.unionfind import UnionFind
from mqjoin.datasets.arrivals import Arrival, arrival_times
from mqjoin.datasets.streams import ensure_dir, read_manifest, write_manifest, write_stream
from mqjoin.support.cachedir import cache_root

Progress = Callable[[str], None]

#: where the bundled workload files live (installed as package data of mqjoin.datasets)
WORKLOADS = Path(__file__).parent / "workloads"
#: the tiny shipped sample (a consistent subset of SF 0.01, see :func:`tpch_sample`)
SAMPLE = Path(__file__).parent / "samples" / "tpch_tiny"

#: default arrivals: constant, lineitem at 10,000 tuples/s (SF 0.01 then spans ~6 s)
DEFAULT_ARRIVAL = Arrival("constant", rate=10_000.0)
#: version of the stream layout (part of the cache key)
FORMAT = "mqjoin-tpch-streams/1"


@dataclass(frozen=True)
class TpchRelation:
    """A TPC-H table as a relation: its column prefix and the columns kept (without prefix)."""

    name: str
    prefix: str
    attributes: tuple[str, ...]

    def source_column(self, attribute: str) -> str:
        return self.prefix + attribute


RELATIONS: tuple[TpchRelation, ...] = (
    TpchRelation("region", "r_", ("regionkey",)),
    TpchRelation("nation", "n_", ("nationkey", "regionkey")),
    TpchRelation("supplier", "s_", ("suppkey", "nationkey")),
    TpchRelation("customer", "c_", ("custkey", "nationkey")),
    TpchRelation("part", "p_", ("partkey",)),
    TpchRelation("partsupp", "ps_", ("partkey", "suppkey")),
    TpchRelation("orders", "o_", ("orderkey", "custkey", "orderstatus")),
    TpchRelation("lineitem", "l_", ("orderkey", "partkey", "suppkey", "linenumber", "returnflag", "linestatus")),
)
_BY_NAME = {r.name: r for r in RELATIONS}


@dataclass(frozen=True)
class PotentialJoin:
    """An equality TPC-H queries may use: ``kind`` is ``key`` (primary/foreign key) or
    ``compatible`` (type-compatible columns that share values)."""

    left: Attr
    right: Attr
    kind: str

    def __str__(self) -> str:
        return f"{self.left} = {self.right}"


def _j(left: str, right: str, kind: str = "key") -> PotentialJoin:
    return PotentialJoin(Attr(*left.split(".")), Attr(*right.split(".")), kind)


POTENTIAL_JOINS: tuple[PotentialJoin, ...] = (
    _j("nation.regionkey", "region.regionkey"),
    _j("supplier.nationkey", "nation.nationkey"),
    _j("customer.nationkey", "nation.nationkey"),
    _j("partsupp.partkey", "part.partkey"),
    _j("partsupp.suppkey", "supplier.suppkey"),
    _j("orders.custkey", "customer.custkey"),
    _j("lineitem.orderkey", "orders.orderkey"),
    _j("lineitem.partkey", "part.partkey"),
    _j("lineitem.suppkey", "supplier.suppkey"),
    _j("lineitem.partkey", "partsupp.partkey"),
    _j("lineitem.suppkey", "partsupp.suppkey"),
    _j("lineitem.linestatus", "orders.orderstatus", "compatible"),
    _j("customer.custkey", "nation.nationkey", "compatible"),
    _j("supplier.nationkey", "customer.nationkey", "compatible"),
)


def implied_pairs(joins: Sequence[PotentialJoin] = POTENTIAL_JOINS) -> tuple[tuple[Attr, Attr], ...]:
    """Pairs of attributes (of different relations) that are not a potential join themselves
    but can meet in one class of a query built from ``joins`` (they are linked through other
    joins), e.g. ``nation.nationkey = orders.custkey`` via ``customer.custkey``.

    >>> [f"{a} = {b}" for a, b in implied_pairs()]  # doctest: +NORMALIZE_WHITESPACE
    ['customer.custkey = supplier.nationkey', 'customer.nationkey = orders.custkey', 'nation.nationkey =
    orders.custkey', 'orders.custkey = supplier.nationkey']
    """
    uf: UnionFind[Attr] = UnionFind()
    for j in joins:
        uf.union(j.left, j.right)
    direct = {frozenset((j.left, j.right)) for j in joins}
    out = []
    for members in uf.groups():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if a.relation != b.relation and frozenset((a, b)) not in direct:
                    out.append((a, b))
    return tuple(out)

#: Figure 7(a): five four-way queries (linear query graphs in the order the figure lists them;
#: partsupp–lineitem joins on the composite foreign key (partkey, suppkey))
FIG7A_QUERIES: dict[str, str] = {
    "q1": "region(regionkey), nation(regionkey, nationkey), supplier(nationkey, suppkey), partsupp(suppkey)",
    "q2": "nation(nationkey), supplier(nationkey, suppkey), partsupp(suppkey, partkey), part(partkey)",
    "q3": "supplier(suppkey), partsupp(suppkey, partkey), part(partkey), lineitem(partkey)",
    "q4": "supplier(suppkey), partsupp(suppkey, partkey), lineitem(suppkey, partkey, orderkey), orders(orderkey)",
    "q5": "part(partkey), partsupp(partkey, suppkey), lineitem(partkey, suppkey, orderkey), orders(orderkey)",
}

#: the ten-query variant: Figure 7(a) plus five queries with more partly overlapping joins,
#: including the type-compatible ones the paper names
TEN_QUERIES: dict[str, str] = {
    **FIG7A_QUERIES,
    "q6": "nation(nationkey), customer(nationkey, custkey), orders(custkey, orderkey), lineitem(orderkey)",
    "q7": "region(regionkey), nation(regionkey, nationkey), customer(nationkey, custkey), orders(custkey)",
    "q8": "lineitem.orderkey = orders.orderkey AND lineitem.linestatus = orders.orderstatus "
          "AND orders.custkey = customer.custkey",
    "q9": "customer.custkey = nation.nationkey AND nation.regionkey = region.regionkey "
          "AND customer.custkey = orders.custkey",
    "q10": "supplier(suppkey, nationkey), lineitem(suppkey, orderkey), orders(orderkey, custkey), "
           "customer(custkey, nationkey)",
}

#: Figure 7(a) with TPC-H-style selections (docs/model.md §7): returned line items, finished orders,
#: part and supplier key ranges; q4 and q5 filter orders alike, so they may share its steps
FIG7A_FILTERED_QUERIES: dict[str, dict[str, str]] = {
    "q1": {"join": FIG7A_QUERIES["q1"], "where": "supplier.suppkey <= 50"},
    "q2": {"join": FIG7A_QUERIES["q2"], "where": "part.partkey < 1000"},
    "q3": {"join": FIG7A_QUERIES["q3"], "where": "lineitem.returnflag = 'R' AND part.partkey < 1000"},
    "q4": {"join": FIG7A_QUERIES["q4"], "where": "orders.orderstatus = 'F' AND lineitem.returnflag IN ('R', 'A')"},
    "q5": {"join": FIG7A_QUERIES["q5"], "where": "orders.orderstatus = 'F' AND part.partkey BETWEEN 1 AND 500"},
}

#: defaults of the generated TPC-H workloads: full history (as in the paper), parallelism 4
WORKLOAD_DEFAULTS = {"window": None, "parallelism": 4, "horizon": 1.0}


# --------------------------------------------------------------------------------------------
# generating the tables
# --------------------------------------------------------------------------------------------


def sf_label(sf: float) -> str:
    """The scale factor as used in directory names.

    >>> sf_label(0.01), sf_label(0.1), sf_label(1), sf_label(1.0)
    ('0.01', '0.1', '1', '1')
    """
    return format(float(sf), "g")


def check_sf(sf: Any) -> float:
    """A valid scale factor (a positive number; 0.01 – 1 is the tested range).

    >>> check_sf(0)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.DataError: TPC-H scale factor must be a positive number such as 0.01, 0.1 or 1, got 0
    """
    if isinstance(sf, bool) or not isinstance(sf, (int, float)) or not (sf > 0) or math.isinf(sf):
        raise DataError(f"TPC-H scale factor must be a positive number such as 0.01, 0.1 or 1, got {sf!r}")
    return float(sf)


def tpch_dir(sf: float, cache: str | Path | None = None) -> Path:
    """The default directory of SF ``sf``: ``<cache>/tpch/sf<SF>``.

    >>> tpch_dir(0.1, cache="/tmp/c").as_posix()
    '/tmp/c/tpch/sf0.1'
    """
    root = Path(cache).expanduser() if cache is not None else cache_root()
    return root / "tpch" / f"sf{sf_label(check_sf(sf))}"


def tpchgen_executable() -> str:
    """The ``tpchgen-cli`` console script: next to the running Python (a venv's ``bin/``),
    else on ``PATH``."""
    here = Path(sys.executable).parent / ("tpchgen-cli.exe" if os.name == "nt" else "tpchgen-cli")
    if here.exists():
        return str(here)
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    raise DataError("tpchgen-cli is not installed (it generates TPC-H offline): pip install tpchgen-cli")


def generate_tables(sf: float, directory: str | Path, progress: Progress | None = None) -> Path:
    """The eight raw TPC-H tables of SF ``sf`` as Parquet in ``directory`` (generated with
    ``tpchgen-cli`` unless a complete earlier generation is there)."""
    sf = check_sf(sf)
    d = Path(directory).expanduser()
    want = {"generator": "tpchgen-cli parquet", "sf": sf_label(sf)}
    if read_manifest(d) == want and all((d / f"{r.name}.parquet").exists() for r in RELATIONS):
        _say(progress, f"TPC-H SF {sf_label(sf)}: using the tables cached in {d}")
        return d
    ensure_dir(d.parent)
    tmp = d.parent / f".{d.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    ensure_dir(tmp)
    _say(progress, f"TPC-H SF {sf_label(sf)}: generating the tables with tpchgen-cli …")
    t0 = time.perf_counter()
    cmd = [tpchgen_executable(), "parquet", "-s", sf_label(sf), "-o", str(tmp), "--overwrite"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"cannot run {cmd[0]}: {e}; reinstall it with pip install tpchgen-cli") from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        msg = " ".join((proc.stderr or proc.stdout or "").split())[:300]
        raise DataError(f"tpchgen-cli failed for SF {sf_label(sf)} (exit {proc.returncode}): {msg}")
    missing = [r.name for r in RELATIONS if not (tmp / f"{r.name}.parquet").exists()]
    if missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"tpchgen-cli wrote no {', '.join(missing)} table(s) in {tmp}; check its version "
                        f"(pip install -U tpchgen-cli)")
    write_manifest(tmp, want)
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    _say(progress, f"TPC-H SF {sf_label(sf)}: tables generated in {time.perf_counter() - t0:.1f}s")
    return d


@dataclass(frozen=True)
class StreamInfo:
    """One written relation stream."""

    relation: str
    rows: int
    bytes: int
    rate: float
    path: str


@dataclass(frozen=True)
class StreamSet:
    """A directory of relation streams and how it was made."""

    directory: Path
    streams: tuple[StreamInfo, ...]
    manifest: Mapping[str, Any]
    seconds: float
    cached: bool

    def info(self, relation: str) -> StreamInfo:
        for s in self.streams:
            if s.relation == relation:
                return s
        raise DataError(f"no stream {relation!r} in {self.directory}")

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.streams)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.streams)

    def to_dict(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "cached": self.cached, "seconds": self.seconds,
                "manifest": dict(self.manifest),
                "streams": {s.relation: {"rows": s.rows, "bytes": s.bytes, "rate": s.rate, "path": s.path}
                            for s in self.streams}}


def tpch_streams(sf: float, out: str | Path | None = None, arrival: Arrival = DEFAULT_ARRIVAL,
                 cache: str | Path | None = None, force: bool = False,
                 progress: Progress | None = None) -> StreamSet:
    """TPC-H SF ``sf`` as relation streams in ``out`` (default :func:`tpch_dir`).

    ``arrival.rate`` is lineitem's rate; the other relations get rates proportional to their
    sizes (every stream spans the same event time).  The raw tables are cached in
    ``tpch_dir(sf, cache)/tpchgen``; ``force`` regenerates the streams (not the tables).
    """
    sf = check_sf(sf)
    t0 = time.perf_counter()
    base = tpch_dir(sf, cache)
    d = Path(out).expanduser() if out is not None else base
    manifest = {"format": FORMAT, "sf": sf_label(sf), "arrival": arrival.to_dict(),
                "relations": {r.name: list(r.attributes) for r in RELATIONS}}
    old = read_manifest(d)
    if not force and old is not None and {k: old.get(k) for k in manifest} == manifest and \
            all((d / f"{r.name}.parquet").exists() for r in RELATIONS):
        _say(progress, f"TPC-H SF {sf_label(sf)} streams are cached in {d} (use --force to rewrite)")
        return StreamSet(d, _infos(d, old), old, time.perf_counter() - t0, True)
    raw = generate_tables(sf, base / "tpchgen", progress)

    import pyarrow as pa
    import pyarrow.parquet as pq

    sizes = {r.name: pq.ParquetFile(raw / f"{r.name}.parquet").metadata.num_rows for r in RELATIONS}
    top = sizes["lineitem"]
    ensure_dir(d)
    rates = {}
    for r in RELATIONS:
        t = pq.read_table(raw / f"{r.name}.parquet", columns=[r.source_column(a) for a in r.attributes])
        cols = {}
        for a in r.attributes:
            col = t.column(r.source_column(a))
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or "string_view" in str(col.type):
                col = col.cast(pa.string())
            cols[a] = col.combine_chunks()
        rate = arrival.rate * sizes[r.name] / top
        rates[r.name] = rate
        ts = arrival_times(arrival.with_rate(rate), t.num_rows, r.name)
        write_stream(d, r.name, ts, cols)
        _say(progress, f"  {r.name:<9} {t.num_rows:>10,} rows at {rate:,.6g} tuples/s → {d / (r.name + '.parquet')}")
    manifest = {**manifest, "rows": sizes, "rates": rates}
    write_manifest(d, manifest)
    secs = time.perf_counter() - t0
    _say(progress, f"TPC-H SF {sf_label(sf)}: {sum(sizes.values()):,} tuples written to {d} in {secs:.1f}s")
    return StreamSet(d, _infos(d, manifest), manifest, secs, False)


def _infos(d: Path, manifest: Mapping[str, Any]) -> tuple[StreamInfo, ...]:
    out = []
    for r in RELATIONS:
        p = d / f"{r.name}.parquet"
        out.append(StreamInfo(r.name, int(manifest.get("rows", {}).get(r.name, 0)), p.stat().st_size,
                              float(manifest.get("rates", {}).get(r.name, 0.0)), str(p)))
    return tuple(out)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# --------------------------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------------------------


def base_spec(queries: Mapping[str, str | Mapping[str, str]]) -> dict[str, Any]:
    """The workload structure of TPC-H queries: every relation with the columns it streams,
    the defaults of :data:`WORKLOAD_DEFAULTS` and a placeholder selectivity 1 (to be replaced
    by statistics)."""
    return {"defaults": {**WORKLOAD_DEFAULTS, "selectivity": 1.0},
            "relations": {r.name: {"attributes": list(r.attributes)} for r in RELATIONS},
            "queries": dict(queries), "selectivities": {}}


def tpch_workload(queries: Mapping[str, str | Mapping[str, str]], data_dir: str | Path, sample: int | None = None,
                  seed: int = 0, sizes: float | None = None):
    """``(workload, statistics)``: TPC-H ``queries`` with rates and selectivities estimated
    from the streams in ``data_dir`` (exact by default), the data's span as horizon and, with
    ``sizes``, the join sizes of every set the optimiser uses (1: counted exactly)."""
    from mqjoin.datasets.stats import statistics_from_data

    spec = base_spec(queries)
    w = Workload.build(spec["relations"], spec["queries"], {}, spec["defaults"])
    st = statistics_from_data(w, data_dir, sample=sample, seed=seed, sizes=sizes)
    return st.apply(w).with_defaults(selectivity=None), st


BUNDLED = {
    "tpch_fig7a.yaml": ("The five four-way TPC-H queries of Figure 7(a) of the CLASH paper (Section VII-A):\n"
                        "q1 region–nation–supplier–partsupp, q2 nation–supplier–partsupp–part,\n"
                        "q3 supplier–partsupp–part–lineitem, q4 supplier–partsupp–lineitem–orders,\n"
                        "q5 part–partsupp–lineitem–orders; full history (window null), as in the paper.",
                        FIG7A_QUERIES),
    "tpch_10q.yaml": ("Ten TPC-H queries: Figure 7(a) plus five with more partly overlapping joins, including\n"
                      "the type-compatible joins lineitem.linestatus = orders.orderstatus and\n"
                      "customer.custkey = nation.nationkey; full history (window null).", TEN_QUERIES),
    "tpch_fig7a_filtered.yaml": ("Figure 7(a) with TPC-H-style filters (docs/model.md §7) on lineitem.returnflag,\n"
                                 "orders.orderstatus and part/supplier keys; pass fractions estimated from the data.",
                                 FIG7A_FILTERED_QUERIES),
    "tpch_joins.yaml": ("Every potential TPC-H join of Section VII-A as a two-way query (j01 …), and every pair\n"
                        "such joins can link into one class (i01 …): the pair statistics that\n"
                        "mqjoin.datasets.tpch.random_tpch_workload draws queries from.",
                        {**{f"j{i + 1:02d}": str(j) for i, j in enumerate(POTENTIAL_JOINS)},
                         **{f"i{i + 1:02d}": f"{a} = {b}" for i, (a, b) in enumerate(implied_pairs())}}),
}


def write_bundled_workloads(data_dir: str | Path, out_dir: str | Path = WORKLOADS,
                            note: str = "TPC-H SF 0.01 from tpchgen-cli, constant arrivals, lineitem at "
                                        "10000 tuples/s", names: Sequence[str] | None = None) -> list[Path]:
    """(Re)write the bundled TPC-H workload files (or those of ``names``) from the streams in ``data_dir``."""
    out = []
    for name, (title, queries) in BUNDLED.items():
        if names is not None and name not in names:
            continue
        w, st = tpch_workload(queries, data_dir, sizes=1.0)
        text = st.to_yaml(w, title + f"\nRates, selectivities, join sizes (exact) and horizon (the data's span): "
                                     f"'mqjoin stats --sizes' over {note}.\nA command given other data measures "
                                     f"them again; to keep them: mqjoin stats {name} --data DIR --sizes --write "
                                     "OUT.yaml\n")
        text = text.replace(f"statistics of {st.source} ", "statistics of the data ")
        p = ensure_dir(out_dir) / name
        p.write_text(text, encoding="utf-8")
        out.append(p)
    return out


def random_tpch_workload(n_queries: int, query_size: int = 4, seed: int = 0,
                         joins: Sequence[PotentialJoin] = POTENTIAL_JOINS,
                         statistics: Workload | None = None) -> Workload:
    """Random TPC-H queries as Section VII-A builds them: pick a random relation, then add
    random potential joins (each bringing in a relation not yet in the query) until the query
    has ``query_size`` relations.  Duplicate queries (equal equivalence classes, however the
    equalities were written) are drawn again.

    Rates and selectivities come from ``statistics`` (a workload holding every pair of
    ``joins`` and :func:`implied_pairs`, default the bundled ``tpch_joins.yaml`` from SF 0.01);
    classes get the geometric mean of their pairs
    (:func:`mqjoin.datasets.stats.assign_selectivities`).

    >>> w = random_tpch_workload(2, query_size=3, seed=4)
    >>> [q.text for q in w.queries]  # doctest: +NORMALIZE_WHITESPACE
    ['lineitem.orderkey = orders.orderkey, orders.custkey = customer.custkey', 'nation.regionkey = region.regionkey,
    supplier.nationkey = nation.nationkey']
    >>> random_tpch_workload(1, query_size=9)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.WorkloadError: query_size must be an integer from 2 to 8 (TPC-H has 8 relations), got 9
    """
    from mqjoin.datasets.stats import assign_selectivities

    if isinstance(query_size, bool) or not isinstance(query_size, int) or not 2 <= query_size <= len(RELATIONS):
        raise WorkloadError(f"query_size must be an integer from 2 to {len(RELATIONS)} (TPC-H has "
                            f"{len(RELATIONS)} relations), got {query_size!r}")
    if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 1:
        raise WorkloadError(f"n_queries must be a positive integer, got {n_queries!r}")
    stats = statistics if statistics is not None else load_workload(WORKLOADS / "tpch_joins.yaml")
    rng = random.Random(seed)
    rels = sorted({a.relation for j in joins for a in (j.left, j.right)})
    queries: dict[str, str] = {}
    seen: set[frozenset] = set()
    failures, width = 0, len(str(n_queries))
    while len(queries) < n_queries:
        inside = [rng.choice(rels)]
        eqs: list[PotentialJoin] = []
        while len(inside) < query_size:
            grow = [j for j in joins if (j.left.relation in inside) != (j.right.relation in inside)]
            if not grow:
                break
            j = rng.choice(grow)
            eqs.append(j)
            inside.append(j.right.relation if j.left.relation in inside else j.left.relation)
        key = _classes_key(eqs)
        if len(inside) < query_size or key in seen:
            failures += 1
            if failures > 10_000:
                raise WorkloadError(f"cannot draw {n_queries} distinct TPC-H queries of {query_size} relations "
                                    f"(found {len(queries)}); ask for fewer queries")
            continue
        failures = 0
        seen.add(key)
        queries[f"q{len(queries) + 1:0{width}d}"] = ", ".join(str(j) for j in eqs)
    spec = base_spec(queries)
    for r in stats.relations:
        if r.name in spec["relations"]:
            spec["relations"][r.name]["rate"] = r.rate
    spec["defaults"]["parallelism"] = stats.defaults.parallelism
    w = Workload.build(spec["relations"], spec["queries"], {}, spec["defaults"])
    pair_values = dict(stats.selectivities)
    return assign_selectivities(w, pair_values).with_defaults(selectivity=None)


def _classes_key(eqs: Sequence[PotentialJoin]) -> frozenset[frozenset[Attr]]:
    """The equivalence classes of a set of equalities (what makes two queries the same)."""
    classes: list[set[Attr]] = []
    for j in eqs:
        hit = [c for c in classes if j.left in c or j.right in c]
        merged = set().union({j.left, j.right}, *hit)
        classes = [c for c in classes if c not in hit] + [merged]
    return frozenset(frozenset(c) for c in classes)


# --------------------------------------------------------------------------------------------
# the shipped sample
# --------------------------------------------------------------------------------------------


def tpch_sample(streams_dir: str | Path, out_dir: str | Path = SAMPLE, orders: int = 10) -> Path:
    """A tiny, referentially consistent subset of TPC-H streams as CSV (the shipped sample):
    the first ``orders`` orders, their lineitems, customers, parts and those parts' partsupp
    rows, and all suppliers, nations and regions.  Rows keep their order and ``ts``."""
    from mqjoin.model.tables import Table, read_inputs, write_inputs

    spec = base_spec({})
    w = Workload.build(spec["relations"], {}, {}, spec["defaults"])
    t = read_inputs(w, streams_dir, [r.name for r in RELATIONS], every_attribute=True)
    keep: dict[str, list[int]] = {}

    def rows_where(rel: str, col: str, values: set) -> list[int]:
        return [i for i, v in enumerate(t[rel].columns[col]) if v in values]

    keep["orders"] = list(range(min(orders, len(t["orders"]))))
    okeys = {t["orders"].value("orderkey", i) for i in keep["orders"]}
    keep["lineitem"] = rows_where("lineitem", "orderkey", okeys)
    pkeys = {t["lineitem"].value("partkey", i) for i in keep["lineitem"]}
    keep["part"] = rows_where("part", "partkey", pkeys)
    keep["partsupp"] = rows_where("partsupp", "partkey", pkeys)
    keep["customer"] = rows_where("customer", "custkey", {t["orders"].value("custkey", i) for i in keep["orders"]})
    for r in ("region", "nation", "supplier"):
        keep[r] = list(range(len(t[r])))
    tables = {}
    for r in RELATIONS:
        src = t[r.name]
        cols = {"ts": [src.ts[i] for i in keep[r.name]],
                **{a: [src.columns[a][i] for i in keep[r.name]] for a in r.attributes}}
        tables[r.name] = Table.from_columns(r.name, cols)
    return write_inputs(tables, out_dir, "csv")
