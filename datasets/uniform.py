"""Synthetic input streams on which the cost model's assumptions hold.

Relation ``R`` gets ``round(λ_R · duration · scale)`` tuples with ``ts`` uniform in
``[0, duration)``; every attribute in a class with selectivity ``s`` draws uniformly from
``round(1/s)`` values (an attribute in several classes of different selectivities uses the
largest domain, so pairs whose class has a larger selectivity then join less often than the
model says).  Two uniform attributes
over domains of sizes ``d ≤ d'`` agree with probability ``1/d'``.

With unbounded windows and ``duration = defaults.horizon = 1`` the expected number of
partial results a step ships is exactly its modelled cost, so the reference executor's
probe-message count can be compared with the plan's prediction.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {selectivity: 0.1, rate: 50}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> t = uniform_streams(w, seed=1)
>>> len(t["R"]), max(t["R"].columns["a"]) < 10
(50, True)
"""

from __future__ import annotations

import random

from mqjoin.model.tables import Table
from mqjoin.model.workload import Attr, Workload


def attribute_domains(workload: Workload) -> dict[Attr, int]:
    """Domain size per joined attribute: ``round(1/s_c)``, the largest over its classes."""
    dom: dict[Attr, int] = {}
    for q in workload.queries:
        for c in q.classes:
            d = max(1, round(1 / c.selectivity))
            for a in c.members:
                dom[a] = max(dom.get(a, 0), d)
    return dom


def uniform_streams(workload: Workload, duration: float = 1.0, scale: float = 1.0, seed: int = 0,
                    other_domain: int = 1000) -> dict[str, Table]:
    """Tables for every relation some query reads (see the module docstring)."""
    rng = random.Random(seed)
    dom = attribute_domains(workload)
    out = {}
    for r in workload.used_relations:
        rel = workload.relation(r)
        n = max(0, round(rel.rate * duration * scale))
        ts = sorted(rng.random() * duration for _ in range(n))
        cols: dict[str, list] = {"ts": ts}
        for a in rel.attributes:
            d = dom.get(Attr(r, a), other_domain)
            cols[a] = [rng.randrange(d) for _ in range(n)]
        out[r] = Table.from_columns(r, cols, f"synthetic {r}")
    return out
