"""Statistics that follow the data (docs/model.md §2, "Statistics of the data"): a command given
data plans on statistics of that data, over its span.

A workload's rates, selectivities and sizes describe one data set.  Run on other data — TPC-H
at another scale factor, where a key's selectivity is one over the number of keys, or streams
at other rates — its predictions and its plan are off by the ratio, silently.  So when a
command is given data (:func:`fit_to_data`):

1. the horizon becomes the data's event-time span (docs/model.md §4), so that predicted totals
   are the counts of that run;
2. a quick check asks whether the workload's statistics describe the data: every relation's
   rate (exact, from its row count and span) and every class's selectivity estimated on a
   sample of :data:`CHECK_SAMPLE` rows per relation, each against the workload's value, with a
   tolerance of :data:`TOLERANCE` beyond the estimate's own 95 % interval;
3. when one disagrees, the statistics are measured again on the data (rates, selectivities,
   filters' pass fractions and the join sizes of every set the optimiser uses, on a sample of
   join values for large inputs: :func:`mqjoin.datasets.stats.estimate_statistics`), and one
   line says so, with what disagreed and how to keep them.

>>> from mqjoin.model.tables import Table
>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 10}, S: {attributes: [a], rate: 10}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.5}''')
>>> tables = {r: Table.from_columns(r, {"ts": [i / 10 for i in range(101)], "a": [i % 2 for i in range(101)]})
...           for r in "RS"}
>>> fit = fit_to_data(w, tables)
>>> fit.workload.defaults.horizon, fit.remeasured, fit.message
(10.0, False, '')
>>> other = {r: Table.from_columns(r, {"ts": t.ts, "a": [i % 50 for i in range(101)]}) for r, t in tables.items()}
>>> fit = fit_to_data(w, other, source="D")
>>> fit.remeasured, round(fit.workload.query("q").classes[0].selectivity, 3)
(True, 0.02)
>>> print(fit.message[:fit.message.index(" again")])
the workload's statistics describe other data than D (R.a = S.a: 0.5 vs 0.0201): measured
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

from mqjoin.model.errors import MissingSelectivityError
from mqjoin.model.tables import Table, time_range
from mqjoin.model.workload import Workload

#: rows per relation of the sampled check of the selectivities
CHECK_SAMPLE = 20_000
#: relative disagreement tolerated beyond an estimate's 95 % interval (rounding of written
#: statistics, arrivals that are not exactly constant)
TOLERANCE = 0.1
#: inputs with more rows than this have their join sizes measured on a sample of join values
EXACT_SIZES_ROWS = 200_000
#: the fraction of join values sampled then, up to :data:`SAMPLED_ROWS` rows of input; beyond,
#: the fraction falls with the input (``SIZES_FRACTION · SAMPLED_ROWS / rows``: about as many
#: sampled rows and values at any scale; a class of few values keeps
#: :data:`mqjoin.datasets.sizes.MIN_SAMPLED_VALUES` of them)
SIZES_FRACTION = 0.1
SAMPLED_ROWS = 1_000_000


@dataclass(frozen=True)
class Fit:
    """The workload a command plans on for its data, and the line that says what changed ('' when
    the workload's statistics describe the data: only the horizon follows the data's span)."""

    workload: Workload
    remeasured: bool = False
    message: str = ""
    seconds: float = 0.0
    #: the statistics were checked against the data (its span is the horizon)
    checked: bool = False
    #: what the data is called in :meth:`line` (a folder's path)
    source: str = ""

    def to_dict(self) -> dict:
        """``run --json``'s ``statistics``: the horizon planned over and whether they were measured again."""
        return {"horizon": self.workload.defaults.horizon, "remeasured": self.remeasured,
                **({"message": self.message} if self.message else {})}

    def line(self) -> str:
        """One line: which statistics the plan is chosen on, and what data they were taken on.

        >>> from mqjoin.datasets.commands import load_named_workload
        >>> w = load_named_workload("paper_v2.yaml")
        >>> print(Fit(w.with_defaults(horizon=6.5), checked=True, source="D").line())  # doctest: +NORMALIZE_WHITESPACE
        the plan is chosen on the workload's statistics, which a sampled check of D agrees with,
        over the span of D (6.5 s)
        """
        on = self.source or "the data"
        over = f"over the span of {on} ({self.workload.defaults.horizon:.4g} s)"
        if self.remeasured:
            return f"{self.message}; the plan is chosen on them {over}"
        if self.checked:
            return f"the plan is chosen on the workload's statistics, which a sampled check of {on} agrees with, {over}"
        return f"the plan is chosen on the workload's statistics as written, not checked against {on}"


def _close(written: float, estimate: float, low: float, high: float) -> bool:
    lo, hi = min(low, estimate) / (1 + TOLERANCE), max(high, estimate) * (1 + TOLERANCE)
    return lo <= written <= hi


def disagreement(workload: Workload, tables: Mapping[str, Table], source: str = "") -> str:
    """What of ``workload``'s statistics the data in ``tables`` contradicts ('' when nothing):
    a relation's rate or a class's selectivity (sampled), each as written vs in the data."""
    from mqjoin.datasets.stats import estimate_statistics

    found = []
    st = estimate_statistics(workload, {r: t for r, t in tables.items() if r in workload.used_relations},
                             sample=CHECK_SAMPLE)
    for r in st.rates:
        n = r.tuples
        if r.rate is not None and not _close(workload.rate(r.relation), r.rate, r.rate * (1 - 3 / math.sqrt(n)),
                                             r.rate * (1 + 3 / math.sqrt(n))):
            found.append(f"{r.relation} rate {workload.rate(r.relation):.3g} vs {r.rate:.3g}")
    for g in st.groups:
        for p in g.pairs:
            written = next((v for (a, b), v in workload.selectivities if {a, b} == {p.left, p.right}), None)
            if written is None:
                written = next((c.selectivity for q in workload.queries for c in q.classes
                                if p.left in c.members and p.right in c.members), None)
            if written is not None and p.value > 0 and not _close(written, p.value, p.low, p.high):
                found.append(f"{p.key}: {written:.3g} vs {p.value:.3g}")
    return "; ".join(found[:2]) + (f" and {len(found) - 2} more" if len(found) > 2 else "")


def sizes_fraction(rows: int) -> float:
    """The share of join values the join sizes of an input of ``rows`` rows are measured on.

    >>> sizes_fraction(100_000), sizes_fraction(850_000), sizes_fraction(8_500_000)
    (1.0, 0.1, 0.011764705882352941)
    """
    if rows <= EXACT_SIZES_ROWS:
        return 1.0
    return SIZES_FRACTION * min(1.0, SAMPLED_ROWS / rows)


def fit_to_data(workload: Workload, tables: Mapping[str, Table], source: str = "", command: str = "",
                check: bool = True, progress: Callable[[str], None] | None = None,
                measure: str | None = None) -> Fit:
    """``workload`` for a run over ``tables``: its horizon the data's span and, when the data
    contradicts its statistics (:func:`disagreement`), its statistics measured again on the data
    (module docstring); with ``check=False`` the workload as written.  ``measure``: why the
    statistics are measured whatever the check would say (the workload lacks some).  ``source``
    names the data and ``command`` the workload in the message; ``progress(message)`` hears each
    stage (the explorer shows them while it measures)."""
    from mqjoin.datasets.sizes import measure_sizes
    from mqjoin.datasets.stats import DEFAULT_SAMPLE, estimate_statistics

    say = progress or (lambda message: None)
    span = time_range(tables)[1]
    if measure and check and not span > 0:
        raise MissingSelectivityError(f"the workload's statistics are incomplete ({measure}) and "
                                      f"{source or 'the data'} spans no time to measure them over (every ts is equal): "
                                      "add the selectivities to the workload or set defaults.selectivity")
    if not (span > 0 and check):
        return Fit(workload, source=source)
    t0 = time.perf_counter()
    if measure is None:
        say(f"checking the workload's statistics on a sample of {source or 'the data'} …")
    why = measure or disagreement(workload, tables, source)
    if not why:
        w = workload if math.isclose(workload.defaults.horizon, span,
                                     rel_tol=1e-9) else workload.with_defaults(horizon=span)
        return Fit(w, seconds=time.perf_counter() - t0, checked=True, source=source)
    rows = sum(len(t) for r, t in tables.items() if r in workload.used_relations)
    fraction = sizes_fraction(rows)
    say(f"measuring the statistics of {source or 'the data'} ({why}) …")
    st = estimate_statistics(workload, tables, sample=DEFAULT_SAMPLE, source=source)
    # rates over the data's span, so that a relation that arrives in a burst is counted as the
    # tuples it brings to the run; the sizes measured in that unit (count / Π λ_R over n_R)
    st = replace(st, rates=tuple(replace(r, horizon=span) for r in st.rates))
    spec = workload.to_spec()
    spec.pop("sizes", None)  # sizes of the other data: every set the optimiser uses is measured again
    bare = Workload.from_spec(spec)
    st = replace(st, sizes=measure_sizes(st.apply(bare), tables, fraction))
    w = st.apply(bare)
    seconds = time.perf_counter() - t0
    sized = f", {len(st.sizes)} join sizes" + ("" if fraction == 1 else f" on {fraction * 100:.2g}% of join values")
    keep = (f"; to keep them: mqjoin stats {command} --data {source} --sizes --write OUT.yaml"
            if command and source else "")
    done = f"in {seconds:.1f}s (rates, selectivities{sized if st.sizes else ''}){keep}"
    if measure:
        message = f"the workload's statistics are incomplete ({why}): measured on {source or 'the data'} {done}"
    else:
        there = f" than {source}" if source else ""
        message = f"the workload's statistics describe other data{there} ({why}): measured again {done}"
    return Fit(w, True, message, seconds, True, source)


def fit_inputs(workload: Workload, data: str | Path | Mapping[str, Table], command: str = "",
               check: bool = True, progress: Callable[[str], None] | None = None,
               measure: str | None = None) -> tuple[dict[str, Table], Fit]:
    """The inputs of ``workload`` in ``data`` — a folder of ``R.csv`` or ``R.parquet`` per
    relation, or the tables themselves — and the workload to plan on for them
    (:func:`fit_to_data`, ``progress`` hearing each stage): the one path of ``run``, ``stats`` and
    the explorer given data; ``measure`` as :func:`fit_to_data` takes it)."""
    from mqjoin.model.tables import read_inputs

    if isinstance(data, Mapping):
        tables, source = dict(data), "the data given"
    else:
        if progress is not None:
            progress(f"reading {data} …")
        tables, source = read_inputs(workload, data), str(data)
    return tables, fit_to_data(workload, tables, source=source, command=command, check=check, progress=progress,
                               measure=measure)


def reached(tables: Mapping[str, Table], span: float) -> dict[str, Table]:
    """The rows of ``tables`` within ``span`` time units of their first ``ts``: the input a run
    stopped there has seen.

    >>> t = {"R": Table.from_columns("R", {"ts": [0.0, 1.0, 2.0], "a": [5, 6, 7]})}
    >>> reached(t, 1.0)["R"].columns["a"]
    (5, 6)
    """
    import numpy as np

    from mqjoin.model.tables import Column

    end = time_range(tables)[0] + span
    out = {}
    for r, t in tables.items():
        keep = np.flatnonzero(np.asarray(t.ts, dtype=float) <= end)
        out[r] = Table(r, Column(np.asarray(t.ts, dtype=float)[keep]),
                       {c: Column(v.array[keep]) if isinstance(v, Column) else tuple(v[i] for i in keep)
                        for c, v in t.columns.items()}, t.source)
    return out


def fit_reached(workload: Workload, tables: Mapping[str, Table], span: float) -> Workload | None:
    """The workload that predicts a run stopped ``span`` time units into ``tables``: fitted
    (:func:`fit_to_data`) to the rows it reached; None when the run reached the end.  Data whose
    arrivals follow its keys — TPC-H's tables arrive in key order — joins more densely in a
    prefix than the whole run's statistics say (a foreign-key join of the first third of both
    sides holds a third of its results, not a ninth), so a stopped run is predicted on its own
    part of the data."""
    first, full = time_range(tables)
    if not 0 < span < full * (1 - 1e-9):
        return None
    return fit_to_data(workload, reached(tables, span)).workload
