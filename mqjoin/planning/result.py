"""What an optimisation returns, whichever planner made it: the plan with its costs and the
statistics of the solve (for planners without an ILP, the time they took and ``optimal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mqjoin.model.workload import Workload
from mqjoin.planning.plan import Plan


def family(planner: str, tree_shape: str | None = None, decompose: bool = False) -> str:
    """The plan family in words: the planner with its tree shape or MJoin decomposition.

    >>> family("tree", "best"), family("mjoin", decompose=True)
    ('tree (best)', 'mjoin (decomposed)')
    """
    return planner + (f" ({tree_shape})" if tree_shape else "") + (" (decomposed)" if decompose else "")


@dataclass(frozen=True)
class IlpStats:
    """Size and timing of the ILP(s) behind a plan (summed over queries in ``individual``)."""

    variables: int
    constraints: int
    binaries: int
    components: int
    build_seconds: float
    solve_seconds: float
    status: str
    gap: float
    objective: float
    solver: str
    canonical: bool = False  # equal-cost ties broken canonically (mqjoin.planning.ilp.solve)

    @property
    def bound(self) -> float:
        """The proven lower bound on the optimum (the objective itself when optimal)."""
        return self.objective * (1 - self.gap)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, bound=self.bound)



@dataclass(frozen=True)
class TieBreak:
    """The least-memory pass over probe costs that tie within the error of sampled sizes
    (:mod:`mqjoin.planning.ties`): the tolerance ``ε`` it used and the optimum it started from."""

    tolerance: float  # relative: plans costing at most optimum · (1 + ε) tie
    optimum_cost: float  # probe cost of the cheapest plan (the ILP optimum)
    optimum_memory: float  # its memory
    solves: int  # solves after the optimum's: the least MIR memory within ε, then the cheapest plan holding it
    complete: bool = True  # False: a solve was cut short (time limit) before it was proven optimal

    def changes(self, probe_cost: float, memory: float) -> str:
        """One line: what the pass did to a plan of ``probe_cost`` and ``memory``.

        >>> print(TieBreak(0.01, 100.0, 50.0, 2).changes(100.5, 40.0))  # doctest: +NORMALIZE_WHITESPACE
        ties within 1.00% of the optimum's probe cost (sampled sizes): least memory chosen, probe cost +0.50%, memory
        -20.0%
        >>> print(TieBreak(0.01, 100.0, 50.0, 1).changes(100.0, 50.0))
        ties within 1.00% of the optimum's probe cost (sampled sizes): the optimum holds the least memory
        """
        head = f"ties within {self.tolerance:.2%} of the optimum's probe cost (sampled sizes): "
        if self.changed(memory):
            return (head + f"least memory chosen, probe cost {probe_cost / self.optimum_cost - 1:+.2%}, "
                    f"memory {memory / self.optimum_memory - 1:+.1%}")
        return head + "the optimum holds the least memory"

    def changed(self, memory: float) -> bool:
        return memory < self.optimum_memory * (1 - 1e-9)

    def to_dict(self, probe_cost: float, memory: float) -> dict[str, Any]:
        return {"tolerance": self.tolerance, "changed": self.changed(memory),
                "optimum_probe_cost": self.optimum_cost, "optimum_memory": self.optimum_memory,
                "probe_cost_change": probe_cost / self.optimum_cost - 1 if self.optimum_cost else 0.0,
                "memory_change": memory / self.optimum_memory - 1 if self.optimum_memory else 0.0,
                "solves": self.solves, "complete": self.complete}


@dataclass(frozen=True)
class OptimizeResult:
    """A plan with its probe cost, memory and the ILP statistics that produced it."""

    workload: Workload
    mode: str
    partitioning: str
    mirs: bool
    plan: Plan
    ilp: IlpStats
    mir_budget: float | None = None  # tuples of MIR stores the ILP allowed (None: unbounded)
    planner: str = "clash"  # a name of mqjoin.planners.registry.PLANNERS
    tree_shape: str | None = None  # deep, bushy or best (planner tree)
    trees: Mapping[str, str] | None = None  # query → rendered operator tree (None: the ILP made the plan)
    replica_budget: float | None = None  # policy budget: tuples of extra replicas allowed
    #: planner pmjoin: the mqjoin.planners.pmjoin.PMJoinReport beside the plan (per-group plans, costs)
    pmjoin: Any = None
    join_trees: Mapping[str,
                        Any] | None = None  # query → its mqjoin.planners.trees.JoinTree (the values rendered in trees)
    #: the least-memory pass among probe costs within the sampled sizes' error (None: no sampled size)
    tie_break: TieBreak | None = None
    #: mode mqo: the ILP's independent parts proven optimal, for a later re-plan to reuse
    #: (:func:`mqjoin.planning.clash.replan`; ``options.previous``)
    parts: Mapping[Any, Any] | None = field(default=None, compare=False, repr=False)
    reused_parts: int = 0  # parts of the ILP taken from ``options.previous``, not solved again
    #: mode mqo: the ILP model solved (a :class:`mqjoin.planning.ilp.Model`, with its candidates),
    #: whose candidates a later re-plan enumerates from (``options.previous``)
    model: Any = field(default=None, compare=False, repr=False)

    @property
    def probe_cost(self) -> float:
        return self.plan.probe_cost

    @property
    def memory(self) -> float:
        return self.plan.memory

    def probe_orders(self) -> dict[str, dict[str, str]]:
        return self.plan.probe_orders()

    def to_dict(self) -> dict[str, Any]:
        return {
            "planner": self.planner,
            **({"tree_shape": self.tree_shape} if self.tree_shape else {}),
            **({"trees": dict(self.trees)} if self.trees is not None else {}),
            **({"groups": [list(g) for g in self.workload.groups]} if self.workload.groups else {}),
            "mode": self.mode,
            "partitioning": self.partitioning,
            "mirs": self.mirs,
            "mir_budget": self.mir_budget,
            "replica_budget": self.replica_budget,
            "probe_cost": self.probe_cost,
            "memory": self.memory,
            "probe_orders": self.probe_orders(),
            "materializations": self.plan.materializations(),
            "stores": [{"id": s.id, "mir": s.mir.label, "relations": list(s.mir.relations),
                        "partition": str(s.partition), "parallelism": s.parallelism, "memory": s.memory}
                       for s in self.plan.stores],
            "ilp": self.ilp.to_dict(),
            **({"tie_break": self.tie_break.to_dict(self.probe_cost, self.memory)} if self.tie_break else {}),
            **({"pmjoin": self.pmjoin.to_dict()} if self.pmjoin is not None else {}),
        }

    def summary(self) -> str:
        """A readable multi-line summary (the CLI's output without ``--json``)."""
        planner = "" if self.trees is None else f"planner {family(self.planner, self.tree_shape)}, "
        lines = [f"{planner}mode {self.mode}, partitioning {self.partitioning}, MIRs {'on' if self.mirs else 'off'}",
                 f"probe cost {self.probe_cost:g} tuples per time unit; memory {self.memory:g} tuples",
                 "probe orders:"]
        for q, by_start in self.probe_orders().items():
            for o in by_start.values():
                lines.append(f"  {q:>8}  {o}")
        mats = self.plan.materializations()
        if mats:
            lines.append("materialised MIRs:")
            for m, by_start in mats.items():
                for o in by_start.values():
                    lines.append(f"  {m:>8}  {o}")
        lines.append("stores:")
        for s in self.plan.stores:
            lines.append(f"  {s.id:<16} parallelism {s.parallelism:<3} memory {s.memory:g}")
        i = self.ilp
        if self.workload.groups:
            lines.append(f"query groups: {', '.join('{' + ', '.join(g) + '}' for g in self.workload.groups)}")
        if self.trees is not None:  # a planner by rule: no ILP
            lines.append(f"operator trees: {', '.join(f'{q} {t}' for q, t in (self.trees or {}).items())}")
            lines.append(f"no ILP ({i.solver}): planned in {i.build_seconds:.3f}s")
            if self.pmjoin is not None:
                lines.append(self.pmjoin.summary())
            return "\n".join(lines)
        gap = "" if i.status == "optimal" else f": incumbent {i.objective:g}, bound {i.bound:g}, gap {i.gap:.2%}"
        lines.append(f"ILP ({i.solver}): {i.variables} variables, {i.constraints} constraints, "
                     f"{i.components} components, build {i.build_seconds:.3f}s, solve {i.solve_seconds:.3f}s, "
                     f"status {i.status}{gap}")
        if self.tie_break is not None:
            lines.append(self.tie_break.changes(self.probe_cost, self.memory))
        return "\n".join(lines)

    def __repr__(self) -> str:
        planner = "" if self.trees is None else f"{self.planner} "
        return f"OptimizeResult({planner}{self.mode}/{self.partitioning}: probe cost {self.probe_cost:g})"

    def _repr_html_(self) -> str:
        """Notebook display: :meth:`summary` as preformatted text."""
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"
