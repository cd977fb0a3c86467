"""The planners by name: one :class:`Planner` value per planner says what it is and which
options fit it, so that the command line, the comparison and the widgets look a planner up
instead of testing its name.

``clash`` is the ILP of :mod:`mqjoin.planning.optimizer`; every other planner builds its
plan from operator trees (``mjoin``, ``tree``), AJoin's grouping (``ajoin``) or PMJoin's
placement (``pmjoin``); :mod:`mqjoin.planners.dispatch` runs them.  This module imports no
planner, so that every stage may consult it.

>>> [p for p in PLANNERS if planner_of(p).joint]
['clash', 'ajoin']
>>> planner_of("tree").solver_label("deep"), planner_of("pmjoin").solver_label()
('dp-deep', 'streamjoinopt')
>>> family("tree", "best"), family("mjoin", decompose=True)
('tree (best)', 'mjoin (decomposed)')
"""

from __future__ import annotations

from dataclasses import dataclass

from mqjoin.model.errors import PlannerError
from mqjoin.planners.trees import PLANNER_MODES, TREE_SHAPES


@dataclass(frozen=True)
class Planner:
    """What a planner is and which options it accepts.

    ``label``: what it does, in a phrase (the ``--planner`` help); ``ilp``: it is CLASH's ILP
    (solver, time limit, MIR budget, replicas, re-optimisation of an adaptive run); ``joint``:
    it optimises the queries of a workload jointly (else its ``mqo`` mode is ``shared``);
    ``operator_trees``: it makes an operator tree per query by a rule
    (:func:`mqjoin.planners.dispatch.operator_trees`); ``tree_shapes``: it takes a binary tree
    shape; ``decompose``: it takes MJoin decomposition; ``materialises``: why its plans always
    keep MIR stores ('' when they need none); ``replans``: it re-plans the query changes of an
    adaptive run; ``pmjoin_options``: it takes :class:`~mqjoin.planners.pmjoin.PMJoinOptions`;
    ``compared``: ``mqjoin compare`` lists it without ``--planner``; ``modes``: the modes it
    plans in; ``solver``: the solver label of its results (``{shape}``: the tree shape; '' for
    the ILP, whose label is the ILP solver's).  A planner known only by name (registered in
    :data:`PLANNERS` without a value here) has none of these features."""

    name: str
    label: str = ""
    ilp: bool = False
    joint: bool = False
    operator_trees: bool = False
    tree_shapes: bool = False
    decompose: bool = False
    materialises: str = ""
    replans: bool = False
    pmjoin_options: bool = False
    compared: bool = False
    modes: tuple[str, ...] = PLANNER_MODES
    solver: str = ""

    def solver_label(self, tree_shape: str | None = None) -> str:
        """The solver label of a plan of this planner (``tree_shape``: of the ``tree`` planner)."""
        return self.solver.format(shape=tree_shape or "best")

    def shape(self, tree_shape: str | None) -> str | None:
        """The tree shape a plan of this planner has (``best`` unless told; None where shapes do
        not apply)."""
        return (tree_shape or "best") if self.tree_shapes else None


REGISTRY: dict[str, Planner] = {p.name: p for p in (
    Planner("clash", "the ILP over all probe orders", ilp=True, joint=True, replans=True, compared=True),
    Planner("mjoin", "one MJoin per query (base stores, probing sequences most selective first)",
            operator_trees=True, decompose=True, compared=True, solver="mjoin"),
    Planner("tree", "one binary join tree per query (every inner node an MIR store)", operator_trees=True,
            tree_shapes=True, materialises="a binary tree materialises every inner node", compared=True,
            solver="dp-{shape}"),
    Planner("ajoin", "AJoin's query groups and iterative join reordering with shared costs (binary trees)",
            joint=True, operator_trees=True, materialises="an AJoin plan (binary trees) materialises every inner node",
            replans=True, compared=True, solver="ajoin-idp"),
    Planner("pmjoin", "PMJoin's placement of MJoins at the relations' nodes (STREAMJOINOPT) with value-partitioned "
            "groups reported beside the plan",
            materialises="PMJoin materialises every MJoin operator's output that feeds another", pmjoin_options=True,
            solver="streamjoinopt"),
)}

#: the planners' names, in menu order (a later planner may be appended)
PLANNERS = tuple(REGISTRY)


def planner_of(name: str) -> Planner:
    """The :class:`Planner` value of ``name`` (a bare one for a planner registered by name only).

    >>> planner_of("ajoin").replans, planner_of("later").joint
    (True, False)
    """
    return REGISTRY.get(name) or Planner(name)


def named(feature: str) -> tuple[str, ...]:
    """The planners of :data:`PLANNERS` that have ``feature`` (a boolean field of :class:`Planner`).

    >>> named("compared"), named("pmjoin_options")
    (('clash', 'mjoin', 'tree', 'ajoin'), ('pmjoin',))
    """
    return tuple(p for p in PLANNERS if getattr(planner_of(p), feature))


def family(planner: str, tree_shape: str | None = None, decompose: bool = False) -> str:
    """The plan family in words: the planner with its tree shape or MJoin decomposition."""
    return planner + (f" ({tree_shape})" if tree_shape else "") + (" (decomposed)" if decompose else "")


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
        raise PlannerError(f"tree shape {tree_shape!r} applies to the tree planner only, not to {planner}; "
                           "leave it out or use planner 'tree'")
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
        raise PlannerError(f"{what} as an MIR store: allow MIRs (no --no-mirs) or use planner 'mjoin' without decomposition")
