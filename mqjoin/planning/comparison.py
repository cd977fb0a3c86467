"""Plans of one workload side by side: every planner, mode and partitioning policy.

``mqjoin compare`` and the explorer's Compare tab list the same plans: CLASH (the ILP) in
every mode, and beside it the plan families it is compared with — MJoin, binary join trees,
AJoin and PMJoin — each a :class:`Setting` optimised by :func:`mqjoin.planning.optimizer.optimize`.
CLASH and AJoin optimise a workload jointly (``mqo``); the others plan each query alone, so
their ``mqo`` is their ``shared`` plan and is listed once, as ``shared``.

>>> from pathlib import Path
>>> from mqjoin.model.workload import load_workload
>>> w = load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml")
>>> plans = compare(w, settings(("clash", "mjoin", "tree"), policies=("single",)))
>>> for s, r in plans.items():
...     print(f"{s.label:<12}{s.mode:<11}{r.probe_cost:g}")
clash       individual 800
clash       shared     800
clash       mqo        700
mjoin       individual 950
mjoin       shared     950
tree (best) individual 800
tree (best) shared     800
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mqjoin.planning.optimizer import plan_with
from mqjoin.planning.options import POLICIES, OptimizeOptions
from mqjoin.planning.result import OptimizeResult, family
from mqjoin.model.workload import Workload
from mqjoin.planners.registry import named, planner_of

#: the planners ``mqjoin compare`` lists without ``--planner``
COMPARED_PLANNERS = named("compared")


@dataclass(frozen=True)
class Setting:
    """One plan of a comparison: planner (with its tree shape or MJoin decomposition), mode
    and partitioning policy.

    >>> Setting("tree", "shared", "single", "best").label, Setting("mjoin", "shared", "single", decompose=True).label
    ('tree (best)', 'mjoin (decomposed)')
    """

    planner: str
    mode: str
    partitioning: str
    tree_shape: str | None = None
    decompose: bool = False

    @property
    def label(self) -> str:
        """The planner column of a comparison."""
        return family(self.planner, self.tree_shape, self.decompose)

    def mirs(self, allowed: bool) -> bool:
        """Whether the plan may use MIR stores when the user ``allowed`` them or not: plan
        families that consist of MIR stores get them regardless (their shape is the point)."""
        return allowed or bool(planner_of(self.planner).materialises) or self.decompose

    def options(self, base: OptimizeOptions) -> OptimizeOptions:
        """The options of this setting's plan: ``base`` (MIRs, solver, time limit, PMJoin's
        options) with this planner, mode and policy.

        >>> Setting("tree", "shared", "single", "deep").options(OptimizeOptions(mirs=False, solver="cbc"))
        ... # doctest: +NORMALIZE_WHITESPACE
        OptimizeOptions(mode='shared', partitioning='single', mirs=True, solver='cbc', time_limit=None, mir_budget=None,
        replica_budget=None, planner='tree', tree_shape='deep', decompose=False, pmjoin=None, memory_ties=True)
        """
        return base.changed(mode=self.mode, partitioning=self.partitioning, mirs=self.mirs(base.mirs),
                            planner=self.planner, tree_shape=self.tree_shape, decompose=self.decompose,
                            pmjoin=base.pmjoin if planner_of(self.planner).pmjoin_options else None)


def settings(planners: tuple[str, ...] = COMPARED_PLANNERS, tree_shape: str | None = None, decompose: bool = False,
             policies: tuple[str, ...] = POLICIES,
             modes: tuple[str, ...] = ("individual", "shared", "mqo")) -> tuple[Setting, ...]:
    """The settings a comparison optimises, planner by planner, policy by policy, in the order
    of ``modes``; ``tree_shape`` (default ``best``) applies to ``tree``, ``decompose`` to ``mjoin``.

    >>> [(s.label, s.mode) for s in settings(("clash", "tree"), policies=("single",), modes=("mqo", "individual"))]
    [('clash', 'mqo'), ('clash', 'individual'), ('tree (best)', 'individual')]
    """
    return tuple(Setting(p, m, pol, planner_of(p).shape(tree_shape), decompose and planner_of(p).decompose)
                 for p in planners for pol in policies for m in modes if m != "mqo" or planner_of(p).joint)


def compare(workload: Workload, wanted: tuple[Setting, ...], options: OptimizeOptions = OptimizeOptions(),
            progress: Callable[[int, int, Setting], None] | None = None) -> dict[Setting, OptimizeResult]:
    """Optimise ``workload`` in every wanted setting (:meth:`Setting.options` of ``options``:
    its MIRs, solver, time limit and PMJoin options apply to every plan).  ``progress(k, n,
    setting)`` is called before each of the ``n`` optimisations and once at the end with
    ``k = n``."""
    out: dict[Setting, OptimizeResult] = {}
    for k, s in enumerate(wanted):
        if progress is not None:
            progress(k, len(wanted), s)
        out[s] = plan_with(workload, s.options(options))
    if progress is not None and wanted:
        progress(len(wanted), len(wanted), wanted[-1])
    return out
