"""The MJoin paper's Section 3.3 setting (Viglas et al., VLDB 2003): an inflating three-way join.

What the paper states, and how it is built here:

* a three-way join of streams S1, S2, S3 "in the style of" Section 3.2, whose where-clause
  joins all inputs on one attribute (``R.unique1 = S.unique1 and S.unique1 = T.unique1``),
  so any probing sequence is a valid one: query ``S1(k), S2(k), S3(k)``;
* S1 and S3 have 10,000 tuples, S2 15,000;
* the join attribute has cardinality 1,000 (the paper's example: S1 ⋈ S2 has 150,000
  results, so every value occurs 10 times in S1 and S3 and 15 times in S2).  The Wisconsin
  benchmark's attribute of cardinality 1,000 is ``thousand = unique1 mod 1000`` with
  ``unique1`` a random permutation, so each stream carries every value exactly ``copies``
  times, in a random order (seeded per stream);
* arrivals: Poisson, no rate fluctuation, mean inter-arrival delay 20 ms for S1 and S2 and
  5 ms for S3 (exponential gaps, :mod:`mqjoin.datasets.arrivals`); S3 therefore ends after
  50 s, S1 after 200 s and S2 after 300 s;
* no window (every tuple joins every earlier one; the paper's Section 3.4 adds windows).

``values`` scales the setting: ``values=100`` keeps the copies per value and the delays (so
every count the paper reports scales by exactly ``values / 1000`` in expectation, and the
exact ones exactly).  The workload describes each stream by its *size* (rate = tuples per
unit of time, the whole input being one unit) and selectivity ``1 / values``: the basis of
the paper's probing-sequence rule, which sorts by partner cardinality.

>>> s = section33(values=10, seed=1)
>>> {r: len(t) for r, t in s.tables.items()}
{'S1': 100, 'S2': 150, 'S3': 100}
>>> sorted(set(s.tables["S2"].columns["k"])) == list(range(10)), s.tables["S2"].columns["k"].count(3)
(True, 15)
>>> s.workload.query("q").text, s.workload.relation("S2").rate
('S1(k), S2(k), S3(k)', 150.0)
>>> s.results
15000
>>> {name: p.probe_orders()["q"]["S1"] for name, p in table1_plans(s.workload).items()}
... # doctest: +NORMALIZE_WHITESPACE
{'deep': 'S1 » S2[k] » S3[k]', 'mjoin': 'S1 » S3[k] » S2[k]', 'mjoin, wrong': 'S1 » S2[k] » S3[k]', 'deep, §4': 'S1 »
S3[k] » S2[k]'}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from mqjoin.datasets.arrivals import Arrival, arrival_times, relation_rng
from mqjoin.model.errors import DataError
from mqjoin.planning.plan import Plan
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload, parse_workload

RELATIONS = ("S1", "S2", "S3")
#: the paper's copies of each join value per stream (10,000 / 15,000 / 10,000 tuples over 1,000 values)
COPIES = (10, 15, 10)
#: the paper's mean inter-arrival delays, seconds
DELAYS = (0.020, 0.020, 0.005)
#: the paper's Table 1: plan → (hashes, moves, comparisons)
TABLE1 = {"deep": (185_000, 185_000, 1_500_000), "mjoin": (35_000, 35_000, 1_656_727),
          "mjoin, wrong": (35_000, 35_000, 2_004_639)}


@dataclass(frozen=True)
class Section33:
    """The workload (query ``q``) and input tables of the Section 3.3 setting, with its knobs."""

    workload: Workload
    tables: Mapping[str, Table]
    values: int
    copies: tuple[int, ...]
    delays: tuple[float, ...]
    seed: int

    @property
    def results(self) -> int:
        """Results of the query: every value joins ``Π copies`` triples."""
        return self.values * int(np.prod(self.copies))

    @property
    def scale(self) -> float:
        """This setting's size relative to the paper's (``values / 1000``)."""
        return self.values / 1000


def section33(values: int = 1000, copies: tuple[int, ...] = COPIES, delays: tuple[float, ...] = DELAYS,
              seed: int = 0) -> Section33:
    """The Section 3.3 setting with ``values`` join values (the paper: 1,000), each occurring
    ``copies[i]`` times in stream ``S{i+1}``, Poisson arrivals with mean gaps ``delays``
    (seconds).

    >>> section33(values=0)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.DataError: values must be a positive integer, got 0
    """
    if isinstance(values, bool) or not isinstance(values, int) or values <= 0:
        raise DataError(f"values must be a positive integer, got {values!r}")
    if len(copies) != len(RELATIONS) or len(delays) != len(RELATIONS):
        raise DataError(f"copies and delays need one entry per stream ({', '.join(RELATIONS)})")
    if any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in copies):
        raise DataError(f"copies must be positive integers, got {copies!r}")
    tables = {}
    for r, c, d in zip(RELATIONS, copies, delays):
        if not d > 0:
            raise DataError(f"the mean inter-arrival delay of {r} must be positive, got {d!r}")
        n = values * c
        ts = arrival_times(Arrival("poisson", rate=1.0 / d, seed=seed), n, relation=r)
        k = relation_rng(seed + 1, r).permutation(n) % values  # Wisconsin: thousand = unique1 mod 1000
        tables[r] = Table.from_columns(r, {"ts": ts.tolist(), "k": k.tolist()}, f"MJoin Section 3.3 {r}")
    rels = ", ".join(f"{r}: {{attributes: [k], rate: {values * c}}}" for r, c in zip(RELATIONS, copies))
    w = parse_workload(f"defaults: {{selectivity: {1 / values!r}}}\nrelations: {{{rels}}}\n"
                       f'queries: {{q: "{", ".join(f"{r}(k)" for r in RELATIONS)}"}}\n')
    return Section33(w, tables, values, tuple(copies), tuple(float(d) for d in delays), seed)


def table1_plans(workload: Workload) -> dict[str, Plan]:
    """The plans of Table 1 on a Section 3.3 workload, named as :data:`TABLE1`: ``deep`` — the
    deep tree the paper's counts imply, ``(S1 ⋈ S2) ⋈ S3`` (185,000 moves = 35,000 inputs +
    ``|S1 ⋈ S2|``); ``mjoin`` — MJoin with the correct probing sequence; ``mjoin, wrong`` — the
    least selective predicate first; and ``deep, §4`` — the cheapest deep tree under docs/model.md §4,
    ``(S1 ⋈ S3) ⋈ S2``."""
    from mqjoin.planning.optimizer import optimize
    from mqjoin.planners.registry import operator_trees
    from mqjoin.planners.trees import JoinTree, plan_trees

    leaf = JoinTree.leaf
    paper_tree = JoinTree.join([JoinTree.join([leaf("S1"), leaf("S2")]), leaf("S3")])
    return {
        "deep": plan_trees(workload, {"q": paper_tree}),
        "mjoin": optimize(workload, planner="mjoin", mode="individual").plan,
        "mjoin, wrong": plan_trees(workload, operator_trees(workload, "mjoin"), least_selective_first=True),
        "deep, §4": optimize(workload, planner="tree", tree_shape="deep", mode="individual").plan,
    }
