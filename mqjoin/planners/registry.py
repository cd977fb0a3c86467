"""The planners by name: one :class:`PlannerEntry` per planner holds its plan function (a
:class:`~mqjoin.planners.contract.Planner`) and says what it is and which options fit it, so
that :func:`mqjoin.planning.optimizer.optimize`, the command line, the comparison and the
widgets look a planner up instead of testing its name.  A new planner is one module (its plan
function, or the rule :class:`~mqjoin.planners.contract.ByRule` makes one of) and one entry
in :data:`REGISTRY`.

``clash`` is the ILP of :mod:`mqjoin.planning.clash`; every other planner builds its plan
from operator trees (``mjoin``, ``tree``), AJoin's grouping (``ajoin``), PMJoin's placement
(``pmjoin``) or, for JAQPOT (``jaqpot``), the binary trees whose half-way joins a CPU budget
divides when the plan runs (:mod:`mqjoin.runtime.shedding`).

>>> [p for p in PLANNERS if planner_of(p).joint]
['clash', 'ajoin']
>>> named("cpu_budget"), named("tree_shapes")
(('tree', 'jaqpot'), ('tree', 'jaqpot'))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from mqjoin.model.errors import PlannerError
from mqjoin.model.workload import Workload
from mqjoin.planning.clash import plan_clash
from mqjoin.planning.options import OptimizeOptions
from mqjoin.planners.ajoin import ajoin_groups, ajoin_optimizer, ajoin_tree
from mqjoin.planners.contract import ByRule, Planner, TreeRule
from mqjoin.planners.mjoin import mjoin_rule
from mqjoin.planners.pmjoin import pmjoin_built
from mqjoin.planners.trees import PLANNER_MODES, TREE_SHAPES, JoinTree, tree_rule


@dataclass(frozen=True)
class PlannerEntry:
    """A planner: its plan function and which options it accepts.

    ``plan``: the :class:`~mqjoin.planners.contract.Planner` that makes its plans; ``label``:
    what it does, in a phrase (the ``--planner`` help); ``ilp``: it is solved as an ILP
    (solver, time limit, MIR budget, replicas apply); ``joint``: it optimises the queries of a
    workload jointly (else its ``mqo`` mode is ``shared``); ``tree_shapes``: it takes a binary
    tree shape; ``decompose``: it takes MJoin decomposition; ``materialises``: why its plans
    always keep MIR stores ('' when they need none); ``replans``: it re-plans the query changes
    of an adaptive run, by ``replanner()`` (a fresh optimiser for the run, as
    :class:`~mqjoin.adaptive.controller.AdaptiveController` takes one; None: the ILP with the
    policy's settings); ``pmjoin_options``: it takes :class:`~mqjoin.planners.pmjoin.PMJoinOptions`;
    ``cpu_budget``: its plans are binary trees whose half-way joins a CPU budget divides when
    they run (``mqjoin run --cpu-budget``, :mod:`mqjoin.runtime.shedding`); ``compared``:
    ``mqjoin compare`` lists it without ``--planner``; ``modes``: the modes it plans in."""

    name: str
    plan: Planner
    label: str = ""
    ilp: bool = False
    joint: bool = False
    tree_shapes: bool = False
    decompose: bool = False
    materialises: str = ""
    replans: bool = False
    replanner: Callable[[], Callable[..., Any]] | None = field(default=None, repr=False)
    pmjoin_options: bool = False
    cpu_budget: bool = False
    compared: bool = False
    modes: tuple[str, ...] = PLANNER_MODES

    @property
    def tree(self) -> TreeRule | None:
        """The rule that makes each query's operator tree alone (None: the planner has none)."""
        return self.plan.tree if isinstance(self.plan, ByRule) else None

    @property
    def operator_trees(self) -> bool:
        """Whether it makes an operator tree per query by a rule (:func:`operator_trees`)."""
        return self.tree is not None

    def shape(self, tree_shape: str | None) -> str | None:
        """The tree shape a plan of this planner has (``best`` unless told; None where shapes do
        not apply)."""
        return (tree_shape or "best") if self.tree_shapes else None


def _unknown(workload: Workload, options: OptimizeOptions) -> Any:
    raise PlannerError(f"the planner {options.planner!r} is known by name only: register it with its plan "
                       "function in mqjoin.planners.registry.REGISTRY")


_TREE = "a binary tree materialises every inner node"

REGISTRY: dict[str, PlannerEntry] = {p.name: p for p in (
    PlannerEntry("clash", plan_clash, "the ILP over all probe orders", ilp=True, joint=True, replans=True,
                 compared=True),
    PlannerEntry("mjoin", ByRule("mjoin", mjoin_rule),
                 "one MJoin per query (base stores, probing sequences most selective first)", decompose=True,
                 compared=True),
    PlannerEntry("tree", ByRule("dp-{shape}", tree_rule),
                 "one binary join tree per query (every inner node an MIR store)", tree_shapes=True,
                 materialises=_TREE, cpu_budget=True, compared=True),
    PlannerEntry("ajoin", ByRule("ajoin-idp", ajoin_tree, ajoin_groups),
                 "AJoin's query groups and iterative join reordering with shared costs (binary trees)", joint=True,
                 materialises="an AJoin plan (binary trees) materialises every inner node", replans=True,
                 replanner=ajoin_optimizer, compared=True),
    PlannerEntry("pmjoin", ByRule("streamjoinopt", build=pmjoin_built),
                 "PMJoin's placement of MJoins at the relations' nodes (STREAMJOINOPT) with value-partitioned "
                 "groups reported beside the plan",
                 materialises="PMJoin materialises every MJoin operator's output that feeds another",
                 pmjoin_options=True),
    PlannerEntry("jaqpot", ByRule("dp-{shape}", tree_rule),
                 "JAQPOT: one binary join tree per query whose half-way joins a CPU budget μ divides when it runs "
                 "(run --cpu-budget)", tree_shapes=True, materialises=_TREE, cpu_budget=True),
)}

#: the planners' names, in menu order (a later planner may be appended)
PLANNERS = tuple(REGISTRY)


def planner_of(name: str) -> PlannerEntry:
    """The :class:`PlannerEntry` of ``name`` (a bare one, with no features and a plan function
    that refuses, for a planner registered by name only).

    >>> planner_of("ajoin").replans, planner_of("later").joint
    (True, False)
    """
    return REGISTRY.get(name) or PlannerEntry(name, _unknown)


def named(feature: str) -> tuple[str, ...]:
    """The planners of :data:`PLANNERS` that have ``feature`` (a boolean field of :class:`PlannerEntry`).

    >>> named("compared"), named("pmjoin_options")
    (('clash', 'mjoin', 'tree', 'ajoin'), ('pmjoin',))
    """
    return tuple(p for p in PLANNERS if getattr(planner_of(p), feature))


def check_planner(planner: str, tree_shape: str | None = None, decompose: bool = False, mirs: bool = True,
                  mir_budget: float | None = None, mode: str = "mqo") -> None:
    """Typed errors for options that do not fit the planner.

    >>> check_planner("tree", "zigzag")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.PlannerError: unknown tree shape 'zigzag' (choose one of deep, bushy, best)
    """
    if planner not in PLANNERS:
        raise PlannerError(f"unknown planner {planner!r} (choose one of {', '.join(PLANNERS)})")
    p = planner_of(planner)
    if tree_shape is not None and not p.tree_shapes:
        raise PlannerError(f"tree shape {tree_shape!r} applies to the {_and(named('tree_shapes'))} planners only, "
                           f"not to {planner}; leave it out or use planner 'tree'")
    if tree_shape is not None and tree_shape not in TREE_SHAPES:
        raise PlannerError(f"unknown tree shape {tree_shape!r} (choose one of {', '.join(TREE_SHAPES)})")
    if decompose and not p.decompose:
        raise PlannerError(f"MJoin decomposition applies to the mjoin planner only, not to {planner}")
    if p.ilp:
        return
    if mode not in p.modes:
        raise PlannerError(f"unknown mode {mode!r} (choose one of {', '.join(p.modes)})")
    if mir_budget is not None:
        raise PlannerError(f"an MIR budget limits the CLASH optimiser; the {planner} planner's shape fixes its MIRs "
                           "— leave the budget out")
    if not mirs and (p.materialises or decompose):
        what = p.materialises or "a decomposed MJoin materialises its parts"
        raise PlannerError(f"{what} as an MIR store: allow MIRs (no --no-mirs) or use planner 'mjoin' without "
                           "decomposition")


def check_fit(options: OptimizeOptions) -> OptimizeOptions:
    """``options`` checked against their planner (:func:`check_planner`, PMJoin options only
    for a planner that takes them), with the tree shape ``best`` filled in where shapes apply:
    the value the planner's plan function gets.

    >>> check_fit(OptimizeOptions(planner="tree")).tree_shape
    'best'
    >>> check_fit(OptimizeOptions(planner="mjoin", mir_budget=10))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.PlannerError: an MIR budget limits the CLASH optimiser; the mjoin planner's shape fixes its MIRs
    — leave the budget out
    """
    p = planner_of(options.planner)
    if options.pmjoin is not None and not p.pmjoin_options:
        raise PlannerError(f"PMJoin options apply to the pmjoin planner only, not to {options.planner}")
    check_planner(options.planner, options.tree_shape, options.decompose, options.mirs, options.mir_budget,
                  options.mode)
    return options.changed(tree_shape=p.shape(options.tree_shape))


def operator_trees(workload: Workload, planner: str, tree_shape: str | None = None,
                   decompose: bool = False) -> dict[str, JoinTree]:
    """Query → its operator tree under ``planner``, each query alone (a planner with a
    :class:`~mqjoin.planners.contract.TreeRule`: ``mjoin``, ``tree``, ``ajoin``, ``jaqpot``).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> operator_trees(w, "tree", "deep"), operator_trees(w, "tree", "bushy")
    ({'q': (((C ⋈ D) ⋈ B) ⋈ A)}, {'q': ((A ⋈ B) ⋈ (C ⋈ D))})
    """
    check_planner(planner, tree_shape, decompose)
    p = planner_of(planner)
    if not isinstance(p.plan, ByRule) or p.tree is None:
        raise PlannerError(f"the {planner} planner has no rule-made operator trees (it plans the workload as a "
                           f"whole); choose one of {', '.join(named('operator_trees'))}")
    return p.plan.operator_trees(workload, check_fit(OptimizeOptions(planner=planner, tree_shape=tree_shape,
                                                                     decompose=decompose)))


def _and(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
