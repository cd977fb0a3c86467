"""The JAQPOT paper's synthetic linear plan (Section 5.1, Figure 5.b, Table 3) as a workload,
its plan and input streams, for runs under a CPU budget (:mod:`mqjoin.runtime.shedding`).

What the paper states, and how it is built here:

* an equi-join of four streams A, B, C, D by the linear plan ``((A ⋈ B) ⋈ C) ⋈ D``: query
  ``A(a), B(a,b), C(b,c), D(c)`` and the binary tree plan of exactly that shape
  (:func:`mqjoin.planners.trees.plan_trees`), every inner node an MIR store;
* Table 3's ranges: arrival rates 300–1,200 tuples/s, window sizes 200–5,000 tuples, join
  selectivities 0.01–0.1.  One point of the ranges per stream and join (by default their low
  ends for all, the corner whose saturation output — every half-way join inflating by
  ``σ · |S| ≥ 2`` — a single-threaded executor runs in seconds); count-based windows become
  time-based ones of ``size / rate`` seconds (Appendix A);
* arrivals: Poisson (uniform times given the count, :func:`mqjoin.datasets.uniform.uniform_streams`),
  join values uniform over ``1 / σ`` values.

>>> s = table3_linear(duration=2)
>>> s.workload.query("q").text, s.workload.window("A"), {r: len(t) for r, t in s.tables.items()}
('A(a), B(a,b), C(b,c), D(c)', 0.6666666666666666, {'A': 600, 'B': 600, 'C': 600, 'D': 600})
>>> s.plan.probe_orders()["q"]["C"]
'C » AB[b] » D[c]'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from mqjoin.model.errors import DataError
from mqjoin.planning.plan import Plan
from mqjoin.planners.trees import JoinTree, plan_trees
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload, parse_workload


@dataclass(frozen=True)
class Table3Linear:
    """The workload (query ``q``), the linear binary plan and the input tables."""

    workload: Workload
    plan: Plan
    tables: Mapping[str, Table]


def table3_linear(rate: float | Sequence[float] = 300, size: float | Sequence[float] = 200,
                  selectivity: float | Sequence[float] = 0.01, duration: float = 10, seed: int = 0) -> Table3Linear:
    """The setting with streams A–D at ``rate`` tuples/s, windows of ``size`` tuples and the
    joins A–B, B–C, C–D of selectivity ``selectivity``, over ``duration`` seconds (see the
    module doc); each one number for all, or one per stream (per join).

    >>> s = table3_linear(rate=(300, 300, 300, 1200), selectivity=(0.01, 0.01, 0.05), duration=1)
    >>> s.workload.rate("D"), s.workload.window("D"), s.workload.query("q").classes[2].selectivity
    (1200.0, 0.16666666666666666, 0.05)
    """
    rates, sizes, sels = _each(rate, 4, "rate"), _each(size, 4, "size"), _each(selectivity, 3, "selectivity")
    attrs = ("a", "a, b", "b, c", "c")
    relations = ", ".join(f"{r}: {{attributes: [{a}], rate: {x!r}, window: {n / x!r}}}"
                          for r, a, x, n in zip("ABCD", attrs, rates, sizes))
    w = parse_workload(f"""
relations: {{{relations}}}
queries: {{q: "A(a), B(a,b), C(b,c), D(c)"}}
selectivities: {{A.a = B.a: {sels[0]!r}, B.b = C.b: {sels[1]!r}, C.c = D.c: {sels[2]!r}}}
""")
    A, B, C, D = (JoinTree.leaf(r) for r in "ABCD")
    plan = plan_trees(w, {"q": JoinTree.join([JoinTree.join([JoinTree.join([A, B]), C]), D])})
    return Table3Linear(w, plan, uniform_streams(w, duration=duration, seed=seed))


def _each(value: float | Sequence[float], n: int, what: str) -> tuple[float, ...]:
    values = tuple(value) if isinstance(value, Sequence) else (value,) * n
    if len(values) != n:
        raise DataError(f"the {what} is one number or {n} numbers, got {len(values)}")
    return tuple(float(v) for v in values)
