"""The CLI's commands for data: ``mqjoin data tpch``, ``mqjoin data synthetic`` and ``mqjoin stats``
(rates, selectivities and join sizes estimated from data), and how a command finds a workload
by path or by the name of a bundled one.

>>> load_named_workload("paper_v2.yaml")
Workload(4 relations, 2 queries: q1, q2)
>>> bundled_workload("tpch_fig7a.yaml").name
'tpch_fig7a.yaml'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mqjoin.model.errors import DataError, OptionError


def load_named_workload(path: str):
    """The workload at ``path``, or the bundled workload of that file name (e.g.
    ``paper_v2.yaml``, ``tpch_fig7a.yaml``) when no such file exists."""
    from mqjoin.model.workload import load_workload

    p = Path(path)
    if not p.exists():
        p = bundled_workload(path) or p
    return load_workload(p)


#: the default selectivity a workload without selectivities is read with by ``stats``, which
#: estimates every class's: a placeholder, left out of what ``stats --write`` writes
PLACEHOLDER_SELECTIVITY = 1.0


def load_for_estimation(path: str):
    r"""``(workload, placeholder)``: the workload at ``path`` (as :func:`load_named_workload`)
    for ``stats``, which estimates its selectivities — so one with a class that has none, and
    no ``defaults.selectivity``, is read with :data:`PLACEHOLDER_SELECTIVITY` as that default
    (``placeholder`` True).

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "w.yaml"
    >>> _ = f.write_text('relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nqueries: {q: "R(a), S(a)"}')
    >>> w, placeholder = load_for_estimation(str(f))
    >>> placeholder, w.defaults.selectivity
    (True, 1.0)
    """
    from mqjoin.model.errors import MissingSelectivityError, SelectivityError
    from mqjoin.model.spec import read_yaml
    from mqjoin.model.workload import Workload

    try:
        return load_named_workload(path), False
    except MissingSelectivityError:
        p = Path(path) if Path(path).exists() else bundled_workload(path) or Path(path)
        spec = dict(read_yaml(p.read_text(encoding="utf-8")))
        spec["defaults"] = {**(spec.get("defaults") or {}), "selectivity": PLACEHOLDER_SELECTIVITY}
        try:
            return Workload.from_spec(spec), True
        except SelectivityError as again:
            raise type(again)(f"{p.name}: {again}") from None


def fitted_inputs(workload: str, data: str, as_written: bool = False):
    """``(tables, fit)``: the inputs in ``data`` of the workload named ``workload``, and the
    workload to plan on for them (:func:`mqjoin.datasets.fitting.fit_to_data`): unless
    ``as_written``, its horizon the data's span and its statistics measured again where the
    data contradicts them, or where the workload leaves a class without a selectivity (read as
    :func:`load_for_estimation` reads it: the data gives what is missing) — said in one line on
    stderr.  ``as_written`` plans on the workload's own statistics, so every class needs one."""
    from mqjoin.datasets.fitting import fit_inputs

    w, missing = (load_named_workload(workload), False) if as_written else load_for_estimation(workload)
    tables, fit = fit_inputs(w, data, command=workload, check=not as_written,
                             measure="it gives no selectivity for some classes" if missing else None)
    if fit.message:
        progress(f"mqjoin: {fit.message}")
    return tables, fit


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``; a typed error naming the file when it cannot be written."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise DataError(f"cannot write {path!r}: {e}") from None


def bundled_workload(name: str) -> Path | None:
    """A workload shipped with mqjoin, by file name: ``mqjoin/workloads/`` first, then the
    data-set workloads of ``mqjoin.datasets`` (``tpch_fig7a.yaml``, ``tpch_10q.yaml`` …)."""
    import mqjoin
    from mqjoin import datasets  # the top-level datasets/ folder, installed as mqjoin.datasets

    for folder in (Path(mqjoin.__file__).parent / "workloads", Path(datasets.__file__).parent / "workloads"):
        if (folder / name).is_file():
            return folder / name
    return None


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_data_tpch(args: argparse.Namespace) -> int:
    from mqjoin.datasets.arrivals import Arrival
    from mqjoin.datasets.tpch import tpch_streams

    arrival = Arrival(args.arrival, rate=args.rate, seed=args.seed, burst_period=args.burst_period,
                      burst_duty=args.burst_duty)
    res = tpch_streams(args.sf, out=args.out, arrival=arrival, cache=args.cache, force=args.force,
                       progress=None if args.quiet else progress)
    if args.json:
        print(json.dumps(res.to_dict(), indent=1))
        return 0
    print(f"TPC-H SF {args.sf:g} as relation streams ({arrival.describe()} for "
          f"lineitem){' [cached]' if res.cached else ''}:")
    print(f"  {'relation':<10}{'rows':>12}{'tuples/s':>12}{'bytes':>12}")
    for s in res.streams:
        print(f"  {s.relation:<10}{s.rows:>12,}{s.rate:>12,.6g}{s.bytes:>12,}")
    print(f"  {'total':<10}{res.rows:>12,}{'':>12}{res.bytes:>12,}")
    print(f"written to {res.directory} in {res.seconds:.1f}s")
    return 0


_SYNTH_OPTIONS = {"partners": ("selectivity-change",), "bias": ("selectivity-change",),
                  "fanout": ("skewed-rates",), "keep": ("skewed-rates",), "high_rate": ("skewed-rates",),
                  "low_rate": ("skewed-rates",)}


def cmd_data_synthetic(args: argparse.Namespace) -> int:
    from mqjoin.datasets.synthetic_paper import paper_data

    params = {k: getattr(args, k) for k in ("scale", "duration", "change_at", "window", "parallelism",
                                            *_SYNTH_OPTIONS) if getattr(args, k) is not None}
    for k in params:
        if k in _SYNTH_OPTIONS and args.name not in _SYNTH_OPTIONS[k]:
            raise OptionError(f"--{k.replace('_', '-')} applies to {' and '.join(_SYNTH_OPTIONS[k])} only, "
                              f"not to {args.name}; leave it out")
    data = paper_data(args.name, **params)
    if not args.quiet:
        progress(f"{args.name}: writing {data.rows:,} tuples …")
    data.write(args.out, progress=None if args.quiet else progress)
    if args.json:
        print(json.dumps({"name": data.name, "out": str(args.out), "params": dict(data.params),
                          "rows": {r: len(c["ts"]) for r, c in data.columns.items()}}, indent=1))
        return 0
    print(f"{data.name}: {data.rows:,} tuples of {len(data.columns)} relations written to {args.out}; "
          f"workload: {Path(args.out) / 'workload.yaml'}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from mqjoin.datasets.stats import statistics_from_data

    w, placeholder = load_for_estimation(args.workload)
    if args.sample < 0:
        raise OptionError(f"--sample must be a number of rows >= 2, or 0 for exact counts; got {args.sample}")
    if args.sizes is not None and not (0 < args.sizes <= 1):
        raise OptionError(f"--sizes takes the fraction of join values to sample, in (0, 1] (1 or nothing: exact "
                          f"counts); got {args.sizes:g}")
    stats = statistics_from_data(w, args.data, sample=args.sample or None, seed=args.seed, sizes=args.sizes)
    per_value = None
    if args.per_value is not None:  # PMJoin's per-value rates of the partition attributes
        from mqjoin.planners.pmjoin import plain_value, render_value_rates, value_rates
        from mqjoin.model.tables import read_inputs
        from mqjoin.model.workload import parse_attr_ref

        by_name = {r.name: r for r in w.relations}
        attrs = [parse_attr_ref(a, by_name, "--per-value") for a in args.per_value] or None
        per_value = value_rates(w, read_inputs(w, args.data), attrs)
    if args.write:
        title = f"workload {args.workload} with statistics estimated by 'mqjoin stats' from {args.data}"
        write_text(args.write, stats.to_yaml(w, title, keep_default_selectivity=not placeholder))
    if args.json:
        extra = {} if per_value is None else \
            {"value_rates": {str(a): [[plain_value(v), r] for v, r in rates.items()] for a, rates in per_value.items()}}
        print(json.dumps({**stats.to_dict(), **extra}, indent=1))
    else:
        print(stats.render())
        if per_value is not None:
            print(render_value_rates(per_value))
        if args.write:
            print(f"workload with these statistics written to {args.write}")
    return 0


def add_dataset_parsers(sub: Any, parser_class: type) -> None:
    """The ``data`` and ``stats`` sub-commands on ``sub`` (the CLI's sub-parsers)."""
    data = sub.add_parser("data", help="generate input streams: TPC-H or the paper's synthetic data sets")
    dsub = data.add_subparsers(dest="dataset", required=True, parser_class=parser_class)

    t = dsub.add_parser("tpch", help="TPC-H tables (tpchgen-cli, offline) as relation streams")
    t.add_argument("--sf", type=float, default=0.01, help="scale factor, e.g. 0.01, 0.1, 1 (default 0.01)")
    t.add_argument("--out", metavar="DIR", help="where to write <relation>.parquet (default: the cache, "
                                                "<cache>/tpch/sf<SF>)")
    t.add_argument("--cache", metavar="DIR", help="cache root (default: $MQJOIN_CACHE or ~/.cache/mqjoin); the "
                                                  "raw tables go to <cache>/tpch/sf<SF>/tpchgen")
    t.add_argument("--arrival", choices=("constant", "poisson", "bursts"), default="constant",
                   help="arrival process of every stream (default constant)")
    t.add_argument("--rate", type=float, default=10_000.0,
                   help="tuples per second of lineitem; the other relations stream over the same span, at rates "
                        "proportional to their sizes (default 10000)")
    t.add_argument("--burst-period", type=float, default=1.0, metavar="S", help="bursts: period in seconds (default 1)")
    t.add_argument("--burst-duty", type=float, default=0.1, metavar="F",
                   help="bursts: fraction of each period with arrivals (default 0.1)")
    t.add_argument("--seed", type=int, default=0, help="seed of random arrivals (default 0)")
    t.add_argument("--force", action="store_true", help="rewrite the streams even if cached")
    t.add_argument("--quiet", action="store_true", help="no progress on stderr")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_data_tpch)

    s = dsub.add_parser("synthetic", help="the paper's Section VII-B data sets (with their workload.yaml)")
    s.add_argument("name", choices=("selectivity-change", "skewed-rates"))
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--scale", type=float, help="divide the paper's rates by this (default 100 for "
                                                "selectivity-change: 1000 t/s; 1000 for skewed-rates: 5000 and 5 t/s)")
    s.add_argument("--duration", type=float, metavar="S", help="seconds of event time (default 30)")
    s.add_argument("--change-at", type=float, metavar="S", help="time of the change (default 15)")
    s.add_argument("--window", type=float, metavar="S", help="window of every relation (default 5)")
    s.add_argument("--parallelism", type=int, help="parallelism in the workload (default 4)")
    s.add_argument("--partners", type=int, help="selectivity-change: R partners of an S tuple after the change "
                                                "(default 100)")
    s.add_argument("--bias", type=float, help="selectivity-change: raise S.b = T.b by this fraction (default 0.1)")
    s.add_argument("--fanout", type=int, help="skewed-rates: T partners of an S tuple before the change (default 5)")
    s.add_argument("--keep", type=float, help="skewed-rates: fraction of S tuples with a T partner after the change "
                                              "(default 0.1)")
    s.add_argument("--high-rate", type=float, help="skewed-rates: rate of R (overrides --scale)")
    s.add_argument("--low-rate", type=float, help="skewed-rates: rate of S, T, U (overrides --scale)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_data_synthetic)

    stats_parser = sub.add_parser("stats", help="estimate rates and selectivities of a workload from data")
    stats_parser.add_argument("workload", help="workload YAML file (or a bundled one, e.g. tpch_fig7a.yaml)")
    stats_parser.add_argument("--data", required=True, metavar="DIR", help="input: DIR/<relation>.csv or .parquet")
    stats_parser.add_argument("--write", metavar="OUT.yaml", help="write the workload with the estimated statistics")
    stats_parser.add_argument("--sample", type=int, default=100_000, metavar="N",
                    help="sample relations with more than N rows down to N rows (default 100000; 0: exact)")
    stats_parser.add_argument("--seed", type=int, default=0, help="seed of the samples (default 0)")
    stats_parser.add_argument("--per-value", nargs="*", metavar="R.a", default=None,
                              help="also the rates per value of these attributes (PMJoin's partition attributes; "
                                   "none named: every join attribute)")
    stats_parser.add_argument("--sizes", type=float, nargs="?", const=1.0, default=None, metavar="F",
                              help="also measure the join size of every set of relations the optimiser uses (MIRs, "
                                   "probe-order prefixes, queries), exactly or on a correlated sample of the fraction "
                                   "F of join values (e.g. --sizes 0.1); --write puts them under 'sizes'")
    stats_parser.add_argument("--json", action="store_true")
    stats_parser.set_defaults(func=cmd_stats)
