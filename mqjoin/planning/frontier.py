"""The probe-cost / memory frontier: what each extra replica of a store buys.

Policy ``budget`` (``mqjoin.planning.ilp``) lets a store be kept once per partition attribute, with at
most ``B`` tuples in the replicas beyond the first of every store.  ``B = 0`` is the paper's
``single`` policy, an unbounded ``B`` costs what ``replicas`` costs.  :func:`frontier` walks ``B``
down from the ``replicas`` optimum (each solve asks for strictly less replica memory than the
previous plan used) to ``single``, and keeps the Pareto-optimal plans: probe cost against the
memory of all stores (docs/model.md §5).  The modes ``individual`` and ``shared`` (single policy) are
marked next to it: every query with its own stores is a "copy per query", and the frontier's
replicas end never costs more probe load than ``individual``.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
... relations: {R: {attributes: [b]}, S: {attributes: [b, c]}, T: {attributes: [c, d]}, U: {attributes: [d]}}
... queries: {q1: "R(b), S(b,c), T(c)", q2: "S(c), T(c,d), U(d)"}
... ''')
>>> f = frontier(w)
>>> [(p.memory, p.probe_cost) for p in f.points]
[(500.0, 900.0), (600.0, 600.0)]
>>> f.marks["single"].probe_cost, f.marks["replicas"].probe_cost, f.marks["individual"].probe_cost
(900.0, 600.0, 800.0)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from mqjoin.model.errors import OptimizerError
from mqjoin.planning.ilp import BUDGET
from mqjoin.planning.optimizer import optimize
from mqjoin.planning.result import OptimizeResult
from mqjoin.planning.plan import Plan
from mqjoin.model.workload import Workload

#: the plans marked next to the curve: (mode, policy)
MARKS = {"single": ("mqo", "single"), "replicas": ("mqo", "replicas"),
         "individual": ("individual", "single"), "shared": ("shared", "single")}


def replica_memory(plan: Plan) -> float:
    """Tuples held by the replicas beyond the first of every store (0 for a ``single`` plan).

    >>> from mqjoin.datasets.synthetic_paper import skewed_rates
    >>> replica_memory(optimize(skewed_rates().workload).plan)
    0.0
    """
    first: dict[tuple[str, Any], float] = {}
    total = 0.0
    for s in plan.stores:
        first.setdefault((s.namespace, s.mir), s.memory)
        total += s.memory
    return total - sum(first.values())


@dataclass(frozen=True)
class FrontierPoint:
    """One Pareto-optimal plan: its probe cost, memory (all stores), memory of the extra
    replicas, and the replica budget that produced it (None: unbounded, the replicas plan)."""

    probe_cost: float
    memory: float
    replica_memory: float
    budget: float | None
    result: OptimizeResult

    def to_dict(self) -> dict[str, Any]:
        return {"probe_cost": self.probe_cost, "memory": self.memory, "replica_memory": self.replica_memory,
                "budget": self.budget, "probe_orders": self.result.probe_orders(),
                "stores": [s.id for s in self.result.plan.stores], "ilp_status": self.result.ilp.status}


@dataclass(frozen=True)
class Frontier:
    """The Pareto curve (memory ascending, probe cost descending) and the marked plans."""

    workload: Workload
    mirs: bool
    points: tuple[FrontierPoint, ...]
    marks: Mapping[str, OptimizeResult]
    complete: bool  # False when max_points or the time limit cut the walk short
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"mirs": self.mirs, "complete": self.complete,
                "points": [p.to_dict() for p in self.points],
                "marks": {k: {"probe_cost": r.probe_cost, "memory": r.memory, "mode": r.mode,
                              "partitioning": r.partitioning} for k, r in self.marks.items()}}

    def summary(self) -> str:
        """The curve as a table, then the marked plans (the CLI's output without ``--json``)."""
        lines = [f"probe cost / memory frontier ({'MIRs on' if self.mirs else 'MIRs off'}; "
                 f"{len(self.points)} Pareto-optimal plans{'' if self.complete else ', walk cut short'})",
                 f"{'memory':>12} {'replica mem':>12} {'probe cost':>12}  marks"]
        for p in self.points:
            names = [k for k, r in self.marks.items() if k in ("single", "replicas")
                     and _same(r.probe_cost, p.probe_cost) and _same(r.memory, p.memory)]
            lines.append(f"{p.memory:>12g} {p.replica_memory:>12g} {p.probe_cost:>12g}  {', '.join(names)}")
        lines.append("marked plans:")
        for k, r in self.marks.items():
            lines.append(f"  {k:<10} memory {r.memory:g}, probe cost {r.probe_cost:g}")
        return "\n".join(lines)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def frontier(workload: Workload, mirs: bool = True, solver: str = "highs", time_limit: float | None = None,
             max_points: int = 25) -> Frontier:
    """Compute the probe-cost / memory frontier of a workload (see the module docstring).
    ``time_limit`` bounds each solve; ``max_points`` the number of budget solves."""
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 2:
        raise OptimizerError(f"max_points must be an integer ≥ 2, got {max_points!r}")
    t0 = time.perf_counter()
    marks = {k: optimize(workload, mode=m, partitioning=p, mirs=mirs, solver=solver, time_limit=time_limit)
             for k, (m, p) in MARKS.items()}
    top = marks["replicas"]
    found = [FrontierPoint(top.probe_cost, top.memory, replica_memory(top.plan), None, top)]
    complete = True
    while complete and found[-1].replica_memory > 0:
        if len(found) >= max_points:
            complete = False
            break
        # strictly less replica memory than the last plan used: a relative step below it
        # (solvers accept rows violated by ~1e-7, so a hair below is not enough), larger if needed
        last = found[-1].replica_memory
        for step in (1e-6, 1e-4, 1e-2):
            budget = max(0.0, last * (1 - step) - step)
            res = optimize(workload, partitioning=BUDGET, mirs=mirs, solver=solver, time_limit=time_limit,
                           replica_budget=budget)
            if replica_memory(res.plan) < last * (1 - 1e-9):
                found.append(FrontierPoint(res.probe_cost, res.memory, replica_memory(res.plan), budget, res))
                break
        else:
            complete = False
    points = _pareto(found)
    return Frontier(workload, mirs, tuple(points), marks, complete, time.perf_counter() - t0)


def _pareto(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """The points no other point beats in both memory and probe cost, memory ascending."""
    out: list[FrontierPoint] = []
    for p in sorted(points, key=lambda p: (p.memory, p.probe_cost)):
        if out and (p.probe_cost > out[-1].probe_cost or _same(p.probe_cost, out[-1].probe_cost)):
            continue
        out.append(p)
    return out
