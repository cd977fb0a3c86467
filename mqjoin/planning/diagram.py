"""What-if plan diagrams in the spirit of Picasso: sweep two statistics over a grid.

Each cell of the grid is the workload with two statistics changed — the selectivities of
two classes, the rates of two relations, or one of each — optimised in the model's mode
and policy.  Cells are coloured by the optimal plan, plans being identified by their
rendered probe orders (:func:`~mqjoin.planning.diff.plan_signature`) and named ``P1, P2, …``
in the order the sweep meets them; beside it the cost surface (the optimal probe cost of
every cell) and, optionally, how much the plan saves against ``individual`` optimisation —
the visual answer to "when does sharing pay off?".

Grids are log-spaced (statistics span decades); ``progress`` follows long sweeps.

>>> from pathlib import Path
>>> from mqjoin.model.workload import load_workload
>>> w = load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml")
>>> x = SweepParam("selectivity", "S.b = T.b", log_grid(0.001, 0.5, 3))
>>> y = SweepParam("rate", "S", log_grid(10, 1000, 3))
>>> d = plan_diagram(w, x, y, mirs=False)
>>> d.names()
['P1', 'P2', 'P3']
>>> d.plan_index
((0, 0, 1), (0, 0, 1), (0, 2, 1))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mqjoin.model.statistics import selectivity_groups, with_class_selectivity
from mqjoin.model.workload import Workload
from mqjoin.planning.diff import plan_signature
from mqjoin.planning.optimizer import optimize

KINDS = ("selectivity", "rate")


def log_grid(lo: float, hi: float, n: int) -> tuple[float, ...]:
    """``n`` log-spaced values from ``lo`` to ``hi`` (rounded to 6 significant digits).

    >>> log_grid(0.001, 0.1, 3)
    (0.001, 0.01, 0.1)
    """
    if n < 1:
        raise ValueError("a grid needs at least one value")
    if lo <= 0 or hi <= 0:
        raise ValueError("grid bounds must be positive (the grid is log-spaced)")
    if n == 1:
        return (float(f"{lo:.6g}"),)
    a, b = math.log10(lo), math.log10(hi)
    return tuple(float(f"{10 ** (a + (b - a) * i / (n - 1)):.6g}") for i in range(n))


@dataclass(frozen=True)
class SweepParam:
    """One axis of a plan diagram: a class selectivity (``target`` = equality text, e.g.
    ``"S.b = T.b"``) or a relation rate (``target`` = relation name) over ``values``."""

    kind: str
    target: str
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown sweep parameter kind {self.kind!r} (choose {' or '.join(KINDS)})")

    @property
    def label(self) -> str:
        return f"selectivity of {self.target}" if self.kind == "selectivity" else f"rate of {self.target}"

    def apply(self, workload: Workload, value: float) -> Workload:
        """The workload with this parameter set to ``value``."""
        if self.kind == "selectivity":
            return with_class_selectivity(workload, self.target, value)
        return workload.with_relation(self.target, rate=value)


def sweep_parameters(workload: Workload) -> list[tuple[str, str, float]]:
    """Every statistic a plan diagram can sweep: ``(kind, target, current value)``.

    >>> from pathlib import Path
    >>> from mqjoin.model.workload import load_workload
    >>> sweep_parameters(load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml"))[:4]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('selectivity', 'R.a = S.a', 0.01), ('selectivity', 'S.b = T.b', 0.015), ('selectivity', 'T.c = U.c', 0.01),
    ('rate', 'R', 100.0)]
    """
    out = [("selectivity", g.label, g.selectivity) for g in selectivity_groups(workload)]
    out += [("rate", r, workload.rate(r)) for r in workload.used_relations]
    return out


def default_range(kind: str, value: float, decades: float = 1.0) -> tuple[float, float]:
    """A log range around the current value (selectivities capped at 1).

    >>> default_range("selectivity", 0.5), default_range("rate", 100)
    ((0.05, 1.0), (10.0, 1000.0))
    """
    lo, hi = value / 10 ** decades, value * 10 ** decades
    if kind == "selectivity":
        hi = min(hi, 1.0)
    return float(f"{lo:.6g}"), float(f"{hi:.6g}")


@dataclass(frozen=True)
class PlanDiagram:
    """The result of a sweep: ``plan_index[iy][ix]`` is the optimal plan's index into
    ``plans`` (signatures) for ``x.values[ix]`` and ``y.values[iy]``; ``cost`` and ``memory``
    of the optimal plans; ``baseline_cost`` the ``individual`` plans' cost when requested."""

    x: SweepParam
    y: SweepParam
    mode: str
    partitioning: str
    plans: tuple[tuple[tuple[str, str, str], ...], ...]
    plan_index: tuple[tuple[int, ...], ...]
    cost: tuple[tuple[float, ...], ...]
    memory: tuple[tuple[float, ...], ...]
    baseline_cost: tuple[tuple[float, ...], ...] | None = None

    def names(self) -> list[str]:
        return [f"P{i + 1}" for i in range(len(self.plans))]

    @property
    def distinct(self) -> int:
        """How many different optimal plans the grid has."""
        return len(self.plans)

    def cells(self, k: int) -> int:
        return sum(row.count(k) for row in self.plan_index)

    def distinguishing(self, k: int) -> list[str]:
        """The rendered probe orders of plan ``k`` that not every plan of the diagram has."""
        common = set(self.plans[0]).intersection(*map(set, self.plans[1:])) if self.plans else set()
        return [f"{q} from {s}: {o}" for q, s, o in self.plans[k] if (q, s, o) not in common]

    def saving(self) -> list[list[float]] | None:
        """Per cell, the relative saving of the optimal plan against ``individual`` (0.25 = 25 %)."""
        if self.baseline_cost is None:
            return None
        return [[(b - c) / b if b else 0.0 for c, b in zip(cr, br)] for cr, br in zip(self.cost, self.baseline_cost)]


def plan_diagram(workload: Workload, x: SweepParam, y: SweepParam, mode: str = "mqo",
                 partitioning: str = "single", mirs: bool = True, solver: str = "highs",
                 time_limit: float | None = None, baseline: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> PlanDiagram:
    """Optimise the workload on the grid ``x.values × y.values`` (row by row, ``y`` outer)."""
    n = len(x.values) * len(y.values)
    sigs: dict[tuple[Any, ...], int] = {}
    index, cost, mem, base = [], [], [], []
    k = 0
    for yv in y.values:
        wy = y.apply(workload, yv)
        ri, rc, rm, rb = [], [], [], []
        for xv in x.values:
            if progress is not None:
                progress(k, n)
            w = x.apply(wy, xv)
            res = optimize(w, mode=mode, partitioning=partitioning, mirs=mirs, solver=solver, time_limit=time_limit)
            sig = plan_signature(res.plan)
            ri.append(sigs.setdefault(sig, len(sigs)))
            rc.append(res.probe_cost)
            rm.append(res.memory)
            if baseline:
                rb.append(optimize(w, mode="individual", partitioning=partitioning, mirs=mirs, solver=solver,
                                   time_limit=time_limit).probe_cost)
            k += 1
        index.append(tuple(ri))
        cost.append(tuple(rc))
        mem.append(tuple(rm))
        base.append(tuple(rb))
    if progress is not None:
        progress(n, n)
    return PlanDiagram(x, y, mode, partitioning, tuple(sigs), tuple(index), tuple(cost), tuple(mem),
                       tuple(base) if baseline else None)
