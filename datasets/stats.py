"""Statistics from data: relation rates and class selectivities, written into a workload.

Point a workload at a data directory (``<relation>.parquet`` / ``.csv``, docs/model.md §6) and get
the numbers the optimiser needs without typing them:

**Rates.**  The rate of ``R`` is ``(n − 1) / (max ts − min ts)`` tuples per second of event
time over all ``n`` rows (exact for constant arrivals, the usual estimate for Poisson ones;
never sampled).  A relation whose tuples span no time keeps its declared rate (and says so).

**Pair selectivities** (docs/model.md §1: the probability that a random pair agrees).  For
attributes ``X.a`` and ``Y.b``::

    s = Σ_v cnt_X(v) · cnt_Y(v) / (|X| · |Y|)

where nulls count in ``|X|`` but agree with nothing.  A relation with at most ``sample``
rows is counted exactly; a larger one is replaced by a uniform sample of ``sample`` rows
drawn without replacement (seeded per relation, so every pair uses the same sample of a
relation).  The estimate is then the two-sample U-statistic above over the samples
(unbiased), with the standard error from its variance::

    Var ≈ f_X·ζ_X/m + f_Y·ζ_Y/n + [both sampled]·s(1−s)/(m·n)

``ζ_X`` is the variance over the sampled ``x`` of ``Y``'s (sampled) frequency of ``x``,
``m``/``n`` are the sample sizes and ``f = 1 − m/|X|`` the finite-population correction
(0 for a relation counted exactly).  The plug-in ``ζ`` estimates are inflated by the
sampling noise of the frequencies, so the standard error errs on the large side.  The 95 %
interval is ``s ± 1.96·SE`` (cut at 0).  When no sampled pair agrees, the estimate is 0 and
the interval ``[0, 3/k]`` (rule of three: ``k`` disjoint random pairs, ``k`` the smaller
sample size) bounds it honestly; fewer than 10 agreeing sample pairs are flagged, as the
normal interval is then unreliable.

**Classes of three or more members, and classes shared between queries.**  The workload
model gives one selectivity per class, and classes of different queries that share a pair of
attributes must agree (docs/model.md §1).  So pairs are grouped: every pair of members of a class is
estimated, pairs of one class are linked, and linked pairs (across all queries) form a group
that gets one value — the **geometric mean** of its pair estimates.  For a two-member class
that is not linked to another class this is just its pair estimate; for a class
``{X.a, Y.b, Z.c}`` over uniform independent data, ``s²`` is its join fraction, and the
geometric mean of the pairs recovers ``s``.  The group's interval is the geometric mean of the
pairs' interval ends (the mean is monotone in each pair), its standard error the
delta-method bound ``g · mean(SE_i / s_i)`` (pairs treated as fully correlated, the
conservative case).  A pair without any agreeing value in the full data is written as
``1/(|X|·|Y|)`` (less than one agreeing pair), since a selectivity must be positive.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> w = parse_workload('''
... defaults: {selectivity: 0.5}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 1, 2, 3], "a": [1, 1, 2, None]}),
...           "S": Table.from_columns("S", {"ts": [0, 2], "a": [1, 3]})}
>>> st = estimate_statistics(w, tables)
>>> st.rate("R"), st.rate("S"), st.selectivity("R.a = S.a")
(1.0, 0.5, 0.25)
>>> w2 = st.apply(w)
>>> w2.rate("S"), w2.query("q").classes[0].selectivity
(0.5, 0.25)

**Join sizes** (``sizes=F``, ``mqjoin stats --sizes [F]``): the size of every connected
relation set the optimiser uses, exactly or on a correlated sample of a fraction ``F`` of join
values, with its precision and its ratio to the independence estimate
(:mod:`mqjoin.datasets.sizes`); written under ``sizes``, they replace earlier ones.

**Pass fractions** of query filters (docs/model.md §7): the share ``p`` of a relation's rows (of its
sample, when sampled) that pass the filter, with the binomial standard error
``√(p(1−p)/m · (1 − m/|R|))`` and the 95 % interval ``p ± 1.96·SE`` (``[0, 3/m]`` when no
sampled row passes; fewer than 10 passing sample rows are flagged).  A filter no row passes is
written as ``1/|R|`` (a pass fraction must be positive).

>>> w = parse_workload('''
... defaults: {selectivity: 0.5}
... relations: {R: {attributes: [a, x]}, S: {attributes: [a]}}
... queries: {q: {join: "R(a), S(a)", where: "R.x < 2"}}
... ''')
>>> tables["R"] = Table.from_columns("R", {"ts": [0, 1, 2, 3], "a": [1, 1, 2, None], "x": [0, 1, 5, 7]})
>>> st = estimate_statistics(w, tables)
>>> st.filters[0].describe()
'q.R (R.x < 2): 0.5 (exact)'
>>> st.apply(w).query("q").filter_of("R").fraction
0.5
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mqjoin.model.errors import DataError
from mqjoin.model.statistics import (FEW_MATCHES, PairEstimate, RateEstimate, covering_classes, selectivity_groups,
                                     significant, with_group_values, with_pair_values)
from mqjoin.model.tables import Column, Table, bounds, read_inputs
from mqjoin.model.workload import Attr, Workload
from mqjoin.datasets.arrivals import relation_rng
from mqjoin.datasets.sizes import SizeEstimate, measure_sizes

#: default sample size per relation: relations with at most this many rows are counted exactly
DEFAULT_SAMPLE = 100_000
#: z-value of the two-sided 95 % normal interval
Z95 = 1.959963984540054


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterEstimate:
    """The pass fraction of one query's filter on one relation, with its precision."""

    query: str
    relation: str
    text: str
    value: float
    stderr: float
    low: float
    high: float
    size: int  # |R| (all rows)
    sample: int  # rows used (|R| when exact)
    passing: int  # rows used that pass

    @property
    def exact(self) -> bool:
        return self.sample == self.size

    @property
    def key(self) -> str:
        return f"{self.query}.{self.relation}"

    @property
    def written(self) -> float:
        """The value written into a workload (positive: ``1/|R|`` when no row passes)."""
        return self.value if self.value > 0 else 1.0 / max(1, self.size)

    @property
    def few_matches(self) -> bool:
        return not self.exact and self.passing < FEW_MATCHES

    def describe(self) -> str:
        if self.exact:
            how = "exact"
        else:
            how = (f"sampled {self.sample}/{self.size} rows, SE {self.stderr:.3g}, "
                   f"95% CI [{self.low:.4g}, {self.high:.4g}]")
            if self.few_matches:
                how += f"; only {self.passing} passing sample rows: interval unreliable, raise --sample"
        return f"{self.key} ({self.text}): {self.value:.6g} ({how})"


def filter_estimate(query: str, f: Any, table: Table, rows: np.ndarray | None) -> FilterEstimate:
    """The pass fraction of filter ``f`` (a :class:`mqjoin.model.filters.Filter`) of ``query`` over
    ``table`` (its ``rows`` only when sampled).

    >>> from mqjoin.model.filters import Comparison, Filter
    >>> t = Table.from_columns("R", {"ts": [0] * 4, "x": [1, 2, 3, 4]})
    >>> f = Filter("R", (Comparison(Attr("R", "x"), ">", (2,)),))
    >>> e = filter_estimate("q", f, t, np.array([0, 1, 2]))
    >>> e.value, e.passing, e.exact, round(e.stderr, 4)
    (0.333333, 1, False, 0.1361)
    """
    names = sorted({c.attr.name for c in f.comparisons})
    table.require(names)
    used = range(len(table)) if rows is None else rows.tolist()
    m = len(used)
    passing = sum(f.passes({a: table.columns[a][i] for a in names}) for i in used)
    if m == 0:
        return FilterEstimate(query, f.relation, str(f), 0.0, 0.0, 0.0, 0.0, len(table), 0, 0)
    p = passing / m
    fpc = 1.0 - m / len(table)
    se = math.sqrt(p * (1 - p) / m * fpc) if fpc > 0 else 0.0
    if passing == 0 and fpc > 0:
        low, high = 0.0, min(1.0, 3.0 / m)
    else:
        low, high = max(0.0, p - Z95 * se), min(1.0, p + Z95 * se)
    return FilterEstimate(query, f.relation, str(f), significant(p), se, low, high, len(table), m, passing)


@dataclass(frozen=True)
class GroupEstimate:
    """One selectivity for a group of linked pairs (see the module docstring)."""

    classes: tuple[tuple[Attr, ...], ...]  # distinct member sets of the classes in the group
    pairs: tuple[PairEstimate, ...]
    value: float
    stderr: float
    low: float
    high: float

    @property
    def exact(self) -> bool:
        return all(p.exact for p in self.pairs)

    @property
    def keys(self) -> tuple[str, ...]:
        """The equalities written into a workload: one per distinct class, leaving out classes
        whose pairs another class of the group already covers."""
        return tuple(" = ".join(str(a) for a in c) for c in covering_classes(self.classes))

    @property
    def relative_precision(self) -> float:
        """Half-width of the 95 % interval relative to the value (0 when exact)."""
        return 0.0 if self.value <= 0 else (self.high - self.low) / 2 / self.value

    def describe(self) -> str:
        how = ("exact" if self.exact else
               f"SE {self.stderr:.3g}, 95% CI [{self.low:.4g}, {self.high:.4g}] (±{self.relative_precision:.1%})")
        rule = "" if len(self.pairs) == 1 else f", geometric mean of {len(self.pairs)} pairs"
        return f"{' ; '.join(self.keys)}: {self.value:.6g} ({how}{rule})"


@dataclass(frozen=True)
class Statistics:
    """Rates and selectivities estimated from one data directory (or set of tables)."""

    rates: tuple[RateEstimate, ...]
    pairs: tuple[PairEstimate, ...]
    groups: tuple[GroupEstimate, ...]
    sample: int | None
    seed: int
    source: str = ""
    filters: tuple[FilterEstimate, ...] = ()
    #: measured join sizes (:mod:`mqjoin.datasets.sizes`), when asked for
    sizes: tuple[SizeEstimate, ...] = ()

    def rate(self, relation: str) -> float | None:
        for r in self.rates:
            if r.relation == relation:
                return r.rate
        raise DataError(f"no rate was estimated for relation {relation!r} (estimated: "
                        f"{', '.join(r.relation for r in self.rates)})")

    def pair(self, equality: str) -> PairEstimate:
        """The estimate of one pair, given as ``"X.a = Y.b"`` (either order)."""
        want = _parse_pair(equality)
        for p in self.pairs:
            if {p.left, p.right} == want:
                return p
        raise DataError(f"no pair {equality!r} was estimated (pairs: {', '.join(p.key for p in self.pairs)})")

    def group(self, equality: str) -> GroupEstimate:
        """The group (the written selectivity) that contains the pair ``equality``."""
        want = _parse_pair(equality)
        for g in self.groups:
            if any({p.left, p.right} == want for p in g.pairs):
                return g
        raise DataError(f"no class contains {equality!r}")

    def selectivity(self, equality: str) -> float:
        """The value written for the class containing ``equality``."""
        return self.group(equality).value

    @property
    def span(self) -> float:
        """The event-time span of the data (first to last tuple of any relation; 0 without tuples)."""
        seen = [r for r in self.rates if r.tuples]
        return max(r.last for r in seen) - min(r.first for r in seen) if seen else 0.0

    def apply(self, workload: Workload) -> Workload:
        """The workload with the estimated rates, one explicit selectivity per class (existing
        explicit selectivities of estimated pairs are replaced) and the data's span as its
        horizon (docs/model.md §4: its totals are then the counts of a run over the data)."""
        spec = workload.to_spec()
        if self.span > 0:
            spec["defaults"]["horizon"] = significant(self.span)
        for r in self.rates:
            if r.rate is not None and r.relation in spec["relations"]:
                spec["relations"][r.relation]["rate"] = significant(r.rate)
        spec.setdefault("filters", {}).update({f.key: significant(f.written) for f in self.filters})
        if self.sizes:  # measured on every set the optimiser uses: they replace earlier ones
            spec["sizes"] = {}
            for m in self.sizes:
                (spec["sizes"] if m.query is None else spec["sizes"].setdefault(m.query, {}))[m.key] = (
                    {"size": significant(m.value), **({"error": significant(m.error, 3)} if m.error else {}),
                     **({"last": _shares(m.last)} if m.last else {})}
                    if m.last or m.error else significant(m.value))
        return with_group_values(workload, spec, [(g.classes, g.value) for g in self.groups], keep_sizes=not self.sizes)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``--json``."""
        return {
            "source": self.source, "sample": self.sample, "seed": self.seed,
            "rates": {r.relation: {"rate": r.rate, "tuples": r.tuples, "span": r.span} for r in self.rates},
            "selectivities": [{"classes": list(g.keys), "value": g.value, "stderr": g.stderr,
                               "ci95": [g.low, g.high], "exact": g.exact,
                               "pairs": [{"pair": p.key, "value": p.value, "stderr": p.stderr,
                                          "ci95": [p.low, p.high], "exact": p.exact,
                                          "rows": list(p.sizes), "sampled": list(p.samples),
                                          "agreeing_sample_pairs": p.matches, "few_matches": p.few_matches}
                                         for p in g.pairs]}
                              for g in self.groups],
            "filters": [{"filter": f.key, "where": f.text, "value": f.value, "stderr": f.stderr,
                         "ci95": [f.low, f.high], "exact": f.exact, "rows": f.size, "sampled": f.sample,
                         "passing_sample_rows": f.passing, "few_matches": f.few_matches} for f in self.filters],
            **({"sizes": [{"query": m.query, "relations": list(m.relations), "results": m.count, "value": m.value,
                           "stderr": m.stderr, "error": m.error, "ci95": [m.low, m.high], "exact": m.exact,
                           "sample": m.fraction, "sampled_class": m.sampled_on, "sampled_values": m.values,
                           "independence_estimate": m.estimate, "ratio": m.ratio, "few_values": m.few_values,
                           "arriving_last": [{"relation": r, "share": o, "stderr": se} for r, o, se in m.arrival],
                           "arriving_last_values": m.arrival_values, "last_written": bool(m.last)}
                          for m in self.sizes]} if self.sizes else {}),
        }

    def render(self) -> str:
        """Readable lines (the CLI's output and the header of written workloads)."""
        how = "exact" if self.sample is None else f"relations over {self.sample:,} rows sampled (seed {self.seed})"
        lines = [f"statistics of {self.source or 'the given tables'} ({how})",
                 "rates (tuples per second of event time):"]
        lines += [f"  {r.describe()}" for r in self.rates]
        lines.append("selectivities (probability that a random pair agrees):")
        for g in self.groups:
            if len(g.pairs) == 1:
                lines.append(f"  {g.pairs[0].describe()}")
            else:
                lines.append(f"  {g.describe()}")
                lines += [f"      {p.describe()}" for p in g.pairs]
        if self.filters:
            lines.append("pass fractions (share of a relation's tuples that pass a query's filter):")
            lines += [f"  {f.describe()}" for f in self.filters]
        if self.sizes:
            lines.append("join sizes (results over the data → tuples per time unit, beside the independence estimate):")
            lines += [f"  {m.describe()}" for m in self.sizes]
        return "\n".join(lines)

    def to_yaml(self, workload: Workload, title: str = "", keep_default_selectivity: bool = True) -> str:
        """The applied workload as YAML, headed by comments that state the estimates' precision
        (without ``keep_default_selectivity``, its ``defaults.selectivity`` left out: every class
        has its estimate)."""
        head = ([f"# {line}" if line else "#" for line in title.splitlines()] if title else []) + \
               [f"# {line}" if line else "#" for line in self.render().splitlines()]
        applied = self.apply(workload)
        if not keep_default_selectivity:
            spec = applied.to_spec()
            spec["defaults"].pop("selectivity", None)
            applied = Workload.from_spec(spec)
        return "\n".join(head) + "\n" + workload_yaml(applied)


def _parse_pair(equality: str) -> set[Attr]:
    parts = [p.strip() for p in equality.split("=")]
    if len(parts) != 2 or not all("." in p for p in parts):
        raise DataError(f"{equality!r} is not an equality like 'R.a = S.b'")
    return {Attr(*p.split(".", 1)) for p in parts}


# --------------------------------------------------------------------------------------------
# estimation
# --------------------------------------------------------------------------------------------


def _check_sample(sample: int | None) -> int | None:
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 2:
        raise DataError(f"sample size must be an integer >= 2 (rows per relation) or None for exact "
                        f"counts, got {sample!r}")
    return sample


def sample_rows(n: int, sample: int | None, seed: int, relation: str) -> np.ndarray | None:
    """Sorted row indices of a relation's sample, ``None`` when it is counted exactly.

    >>> sample_rows(10, None, 0, "R") is None, sample_rows(10, 20, 0, "R") is None
    (True, True)
    >>> s = sample_rows(1000, 5, 0, "R"); len(s), bool((s[1:] > s[:-1]).all())
    (5, True)
    """
    if sample is None or n <= sample:
        return None
    return np.sort(relation_rng(seed, relation).choice(n, size=sample, replace=False))


def value_counts(values: Sequence[Any], rows: np.ndarray | None = None) -> Counter:
    """Counts of the non-null values (of ``rows`` only, when given).  Values are compared as
    read, like the engines do (``1 == 1.0``; nulls and NaN agree with nothing).

    >>> value_counts([1, 1.0, None, "x", float("nan")])
    Counter({1: 2, 'x': 1})
    """
    if rows is not None:
        values = np.asarray(values)[rows].tolist() if isinstance(values, Column) else [values[i] for i in rows.tolist()]
    c = Counter(values)
    c.pop(None, None)
    for k in [k for k in c if isinstance(k, float) and math.isnan(k)]:
        del c[k]
    return c


def pair_estimate(left: Attr, right: Attr, cx: Counter, cy: Counter, sizes: tuple[int, int],
                  samples: tuple[int, int]) -> PairEstimate:
    """The selectivity of ``left = right`` from value counts of the rows used (see the module
    docstring for the estimator and its standard error).

    >>> from collections import Counter
    >>> p = pair_estimate(Attr("R", "a"), Attr("S", "a"), Counter({1: 2, 2: 1}), Counter({1: 1, 3: 1}), (4, 2), (4, 2))
    >>> p.value, p.exact, p.stderr
    (0.25, True, 0.0)
    """
    (nx, ny), (m, n) = sizes, samples
    if nx == 0 or ny == 0:
        return PairEstimate(left, right, 0.0, 0.0, 0.0, 0.0, sizes, samples, 0)
    small, big = (cx, cy) if len(cx) <= len(cy) else (cy, cx)
    common = [(v, c) for v, c in small.items() if v in big]
    matches = sum(c * big[v] for v, c in common)
    u = matches / (m * n)
    fx, fy = 1.0 - m / nx, 1.0 - n / ny
    if fx <= 0 and fy <= 0:
        return PairEstimate(left, right, u, 0.0, u, u, sizes, samples, matches)
    # ζ_X: variance over sampled x of q(x) = cnt_Y(x)/n; ζ_Y likewise (unbiased over the sample)
    sx = sum(cx[v] * (cy[v] / n) ** 2 for v, _ in common)
    sy = sum(cy[v] * (cx[v] / m) ** 2 for v, _ in common)
    zeta_x = max(0.0, (sx / m - u * u) * m / (m - 1)) if m > 1 else 0.0
    zeta_y = max(0.0, (sy / n - u * u) * n / (n - 1)) if n > 1 else 0.0
    # rounding noise of a zero variance (e.g. every x has the same partner count)
    zeta_x, zeta_y = (z if z > 1e-12 * u * u else 0.0 for z in (zeta_x, zeta_y))
    var = max(fx, 0.0) * zeta_x / m + max(fy, 0.0) * zeta_y / n
    if fx > 0 and fy > 0:
        var += u * (1 - u) / (m * n)
    se = math.sqrt(var)
    if matches == 0:
        k = min(s for s, f in ((m, fx), (n, fy)) if f > 0)
        low, high = 0.0, min(1.0, 3.0 / k)
    else:
        low, high = max(0.0, u - Z95 * se), min(1.0, u + Z95 * se)
    return PairEstimate(left, right, u, se, low, high, sizes, samples, matches)


def group_estimate(classes: tuple[tuple[Attr, ...], ...], pairs: Sequence[PairEstimate]) -> GroupEstimate:
    """One value for linked pairs: geometric means of values and interval ends (see above).

    >>> a, b, c = Attr("R", "a"), Attr("S", "a"), Attr("T", "a")
    >>> ps = [PairEstimate(a, b, 0.01, 0, 0.01, 0.01, (10, 10), (10, 10), 1),
    ...       PairEstimate(a, c, 0.04, 0, 0.04, 0.04, (10, 10), (10, 10), 4)]
    >>> round(group_estimate(((a, b, c),), ps).value, 12)
    0.02
    """
    vals = [p.written for p in pairs]
    g = math.exp(sum(math.log(v) for v in vals) / len(vals))
    low = math.exp(sum(math.log(max(p.low, p.floor)) for p in pairs) / len(pairs)) if all(p.low > 0 for p in pairs) \
        else 0.0
    high = math.exp(sum(math.log(max(p.high, p.floor)) for p in pairs) / len(pairs))
    if len(pairs) == 1:
        p = pairs[0]
        return GroupEstimate(classes, tuple(pairs), significant(g), p.stderr, p.low, p.high)
    rel = sum(p.stderr / v for p, v in zip(pairs, vals)) / len(pairs)
    return GroupEstimate(classes, tuple(pairs), significant(g), g * rel, min(low, g), max(high, g))


def estimate_statistics(workload: Workload, tables: Mapping[str, Table], sample: int | None = DEFAULT_SAMPLE,
                        seed: int = 0, source: str = "", sizes: float | None = None) -> Statistics:
    """Rates of every relation in ``tables`` and selectivities of every class of ``workload``.

    ``sample``: relations with more rows are sampled down to this many (``None``: exact).
    ``sizes``: also measure the join sizes (:func:`mqjoin.datasets.sizes.measure_sizes`) on
    this fraction of join values (1: exact), in the unit of the estimated rates.
    """
    sample = _check_sample(sample)
    rates = []
    for r in workload.relations:
        t = tables.get(r.name)
        if t is not None:
            rates.append(RateEstimate(r.name, len(t), *bounds(t.ts)))
    rows = {}
    for r, t in tables.items():
        rows[r] = sample_rows(len(t), sample, seed, r)
    counts: dict[Attr, Counter] = {}

    def counts_of(a: Attr) -> Counter:
        if a not in counts:
            if a.relation not in tables:
                raise DataError(f"no input for relation {a.relation}, which a query joins on {a}")
            t = tables[a.relation]
            t.require([a.name])
            counts[a] = value_counts(t.columns[a.name], rows[a.relation])
        return counts[a]

    def used(relation: str) -> int:
        n = len(tables[relation])
        return n if rows[relation] is None else len(rows[relation])

    pair_est: dict[tuple[Attr, Attr], PairEstimate] = {}
    groups = []
    for g in selectivity_groups(workload):
        est = []
        for x, y in g.pairs:
            if (x, y) not in pair_est:
                cx, cy = counts_of(x), counts_of(y)
                pair_est[(x, y)] = pair_estimate(x, y, cx, cy, (len(tables[x.relation]), len(tables[y.relation])),
                                                 (used(x.relation), used(y.relation)))
            est.append(pair_est[(x, y)])
        groups.append(group_estimate(g.classes, est))
    filters = []
    for q in workload.queries:
        for f in q.filters:
            if f.relation not in tables:
                raise DataError(f"no input for relation {f.relation}, which query {q.name} filters")
            filters.append(filter_estimate(q.name, f, tables[f.relation], rows[f.relation]))
    stats = Statistics(tuple(rates), tuple(pair_est[k] for k in sorted(pair_est)), tuple(groups), sample, seed, source,
                       tuple(filters))
    if sizes is None:
        return stats
    return replace(stats, sizes=measure_sizes(stats.apply(workload), tables, sizes))


def statistics_from_data(workload: Workload, data_dir: str | Path, sample: int | None = DEFAULT_SAMPLE,
                         seed: int = 0, sizes: float | None = None) -> Statistics:
    """Read the inputs of ``workload`` from ``data_dir`` (every relation some query uses, plus
    declared relations that have an input file there) and estimate their statistics (and,
    with ``sizes``, measure the join sizes: :func:`estimate_statistics`)."""
    d = Path(data_dir)
    extra = [r.name for r in workload.relations if r.name not in workload.used_relations
             and ((d / f"{r.name}.parquet").exists() or (d / f"{r.name}.csv").exists())]
    tables = read_inputs(workload, d, list(workload.used_relations) + extra, every_attribute=True)
    return estimate_statistics(workload, tables, sample, seed, source=str(d), sizes=sizes)


# --------------------------------------------------------------------------------------------
# writing selectivities
# --------------------------------------------------------------------------------------------


def _shares(last: Iterable[tuple[str, float]]) -> dict[str, float]:
    """An order of arrival as written: 4 significant digits, the largest share the rest of 1
    (so that the written shares sum to 1 and are read back as written).

    >>> _shares([("R", 0.50955), ("S", 0.124212), ("T", 0.366238)])
    {'R': 0.5096, 'S': 0.1242, 'T': 0.3662}
    """
    shares = {r: significant(o, 4) for r, o in last}
    top = max(shares, key=shares.__getitem__)
    shares[top] = round(1 - sum(v for r, v in shares.items() if r != top), 10)
    return shares


def workload_yaml(workload: Workload) -> str:
    """The workload as compact, block-style YAML in the format of docs/model.md §1 (one line per
    relation, query and selectivity; a relation's window and parallelism only when they differ
    from the defaults).  Parsing it gives the same workload.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.00001}
    ... relations: {R: {attributes: [a], rate: 2}, S: {attributes: [a], window: 5}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> print(workload_yaml(w), end="")
    defaults: {rate: 1.0, window: null, parallelism: 1, selectivity: 1.0e-05, horizon: 1.0}
    relations:
      R: {attributes: [a], rate: 2.0}
      S: {attributes: [a], rate: 1.0, window: 5.0}
    queries:
      q: "R(a), S(a)"
    >>> parse_workload(workload_yaml(w)) == w
    True
    """
    import json

    import yaml

    def num(v: Any) -> str:
        return "null" if v is None else yaml.safe_dump(v).splitlines()[0]

    d = workload.defaults
    lines = ["defaults: {" + ", ".join(f"{k}: {num(getattr(d, k))}"
                                      for k in ("rate", "window", "parallelism", "selectivity", "horizon")) + "}",
             "relations:"]
    for r in workload.relations:
        items = [f"attributes: [{', '.join(r.attributes)}]", f"rate: {num(r.rate)}"]
        if r.window != d.window:
            items.append(f"window: {num(r.window)}")
        if r.parallelism != d.parallelism:
            items.append(f"parallelism: {num(r.parallelism)}")
        lines.append(f"  {r.name}: {{{', '.join(items)}}}")
    if workload.queries:
        lines.append("queries:")
        lines += [f"  {q.name}: " + (f"{{join: {json.dumps(q.text, ensure_ascii=False)}, "
                                     f"where: {json.dumps(q.where, ensure_ascii=False)}}}" if q.filters
                                     else json.dumps(q.text, ensure_ascii=False)) for q in workload.queries]
    if workload.selectivities:
        lines.append("selectivities:")
        lines += [f"  {a} = {b}: {num(v)}" for (a, b), v in workload.selectivities]
    fractions = [(f"{q.name}.{f.relation}", f.fraction) for q in workload.queries for f in q.filters
                 if f.fraction is not None]
    if fractions:
        lines.append("filters:")
        lines += [f"  {k}: {num(v)}" for k, v in fractions]
    if workload.groups:
        lines.append("groups: [" + ", ".join("[" + ", ".join(g) + "]" for g in workload.groups) + "]")
    if workload.sizes:
        def size(m: Any) -> str:  # the value, or {size: …, error: …, last: {…}} on one line
            return num(m.spec) if not isinstance(m.spec, dict) else yaml.safe_dump(
                m.spec, default_flow_style=True, sort_keys=False, allow_unicode=True, width=10_000).strip()

        lines.append("sizes:")
        lines += [f"  {m.key}: {size(m)}" for m in workload.sizes if m.query is None]
        for q in dict.fromkeys(m.query for m in workload.sizes if m.query is not None):
            lines.append(f"  {q}:")
            lines += [f"    {m.key}: {size(m)}" for m in workload.sizes if m.query == q]
    return "\n".join(lines) + "\n"


def assign_selectivities(workload: Workload, pair_values: Mapping[tuple[Attr, Attr], float]) -> Workload:
    """Give every class of ``workload`` an explicit selectivity from known pair values, grouped
    and averaged exactly like estimates (geometric mean over linked pairs).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 1}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a), T(a)"}
    ... ''')
    >>> vals = {(Attr("R", "a"), Attr("S", "a")): 0.01, (Attr("R", "a"), Attr("T", "a")): 0.04,
    ...         (Attr("S", "a"), Attr("T", "a")): 0.02}
    >>> assign_selectivities(w, vals).query("q1").classes[0].selectivity
    0.02
    """
    return with_pair_values(workload, pair_values, missing="error")
