"""The master ILP of the coupled search: which attribute each shared store is partitioned by.

Its variables are the binary ``z`` of the shared stores and, per block, one continuous column
``λ`` per combination (a class of attributes per store the block touches, see
:mod:`mqjoin.planning.ilp.blocks`); its rows say that every store has one attribute, that every
block takes one combination, and that a block's combination agrees with the stores' ``z``
(``Σ_{λ using class C of S} λ = Σ_{A ∈ C} z_{S,A}``).  A column costs the block's optimum under
its combination when known, else the best bound known.  With every column priced by a bound
the master's optimum is a lower bound of the part's; the blocks' optima under its choice
(computed and cached) give a plan; the prices rise and the master is solved again until its
choice is costed exactly everywhere — then the plan is optimal (:meth:`Master.optimise`).
Where every combination is costed up front (small MIRs, as a rule) the first master is already exact,
and it is solved with the columns fixed at 0 that an interior-point dual of its LP rules out of every
solution as cheap as a plan at hand (the LP's solution rounded): :meth:`Master._prune`.

The canonical tie-break is a second master (:meth:`Master.tie_break`): the same rows, the cost
capped at the optimum (within :data:`~mqjoin.planning.ilp.model.TIE_SLACK`) by one more row,
and as objective the tie-break weights — the shared ``z``'s own and, per column, the block's
lexicographic optimum under its combination.  Columns that an interior-point dual solution of
the master's LP rules out of every solution within the cap (:func:`_floors`, :func:`_ruled_out`) are
fixed at 0 and not weighed: on 100 three-way queries that leaves about 220 of some 850 combinations.
The dual is the one :meth:`Master._prune` computed when the prices have not changed since (a dual
depends on the LP alone; the cap only says which columns it rules out).
Where columns are priced by bounds (large MIRs), a bound rules out no more than the optimum
would (valid), and the tie-break master is solved lazily: columns not costed at their bound,
columns not weighed at the least weight any plan of their block has, the master's choice
costed and weighed exactly, until that choice is exact.  Integral weights: a gap below 1
proves the least weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mqjoin.planning.candidates import MIR
from mqjoin.planning.ilp.backends import silent_highs
from mqjoin.planning.ilp.blocks import BlockCosts, Choice, Incumbent, Part, Stopped
from mqjoin.planning.ilp.model import TIE_SLACK


class Master:
    """The master ILP over one coupled part, on one HiGHS instance re-solved as prices rise."""

    def __init__(self, part: Part, costs: BlockCosts) -> None:
        import highspy
        import numpy as np

        self.part, self.costs = part, costs
        self.zcol: dict[tuple[MIR, int], int] = {}
        for st in part.stores:
            for j in range(len(part.shared[st])):
                self.zcol[(st, j)] = len(self.zcol)
        names = self.names = len(self.zcol)
        n = self.n = names + len(part.combinations)
        index: list[int]
        value: list[float]
        lo: list[float]
        hi: list[float]
        starts, index, value, lo, hi = [0], [], [], [], []

        def row(idx: list[int], coef: list[float], lower: float, upper: float) -> None:
            index.extend(idx)
            value.extend(coef)
            starts.append(len(index))
            lo.append(lower)
            hi.append(upper)

        for st in part.stores:
            row([self.zcol[(st, j)] for j in range(len(part.shared[st]))], [1.0] * len(part.shared[st]), 1.0, 1.0)
        of_block: list[list[int]] = [[] for _ in part.blocks]  # per block: its λ columns
        for li, (k, _) in enumerate(part.combinations):
            of_block[k].append(names + li)
        for k, b in enumerate(part.blocks):
            row(of_block[k], [1.0] * len(of_block[k]), 1.0, 1.0)
            users: list[list[list[int]]] = [[[] for _ in part.classes[(k, st)]] for st in b.stores]
            for li in of_block[k]:  # (per store of the block and class: the λ that take it)
                for by_class, c in zip(users, part.combinations[li - names][1]):
                    by_class[c].append(li)
            for st, by_class in zip(b.stores, users):
                for c, attrs in enumerate(part.classes[(k, st)]):
                    row(by_class[c] + [self.zcol[(st, j)] for j in attrs],
                        [1.0] * len(by_class[c]) + [-1.0] * len(attrs), 0.0, 0.0)
        lp = self.lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(lo)
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
        lp.row_lower_, lp.row_upper_ = np.array(lo, dtype=float), np.array(hi, dtype=float)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=float)
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, len(lo)
        lp.integrality_ = ([highspy.HighsVarType.kInteger] * names
                           + [highspy.HighsVarType.kContinuous] * len(part.combinations))
        h = self.h = silent_highs(highspy)
        h.setOptionValue("mip_rel_gap", 1e-9)
        if not part.quick:  # re-solved after every pick: presolve off is faster there (not on small MIRs)
            h.setOptionValue("presolve", "off")
        h.passModel(lp)
        if costs.watch.monitor is not None:  # interrupted by the monitor's stop
            h.setCallback(costs.watch.monitor.highs_callback(None, highspy), None)
            h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        self.lam_cols = np.arange(names, n, dtype=np.int32)
        self.floors: tuple[Any, Floors | None] | None = None  # (prices, floors) of the last dual (:func:`_floors`)

    def prices(self) -> list[float]:
        """The columns' prices: each block's optimum under the combination, or the best bound known."""
        costs = self.costs.costs
        return [costs[key][0] if key in costs else self.costs.lower(key[0], key) for key in self.part.keys]

    def run(self) -> Choice:
        """Solve the master within the time left; its choice of the shared stores."""
        import highspy

        left_s = self.costs.left()
        if left_s is not None:
            self.h.setOptionValue("time_limit", left_s)
        self.h.run()
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise Stopped
        vals = self.h.getSolution().col_value
        return {st: next(j for j in range(len(self.part.shared[st])) if vals[self.zcol[(st, j)]] > 0.5)
                for st in self.part.stores}

    def optimise(self, best: Incumbent) -> None:
        """Solve, cost the blocks under the master's choice, reprice, until the choice is
        costed exactly or the incumbent meets the master's bound (``best.current``)."""
        import numpy as np

        part = self.part
        if all(key in self.costs.costs for key in part.keys):  # (then the first master is exact)
            self._prune()
        while True:
            self.h.changeColsCost(len(part.combinations), self.lam_cols,
                                  np.array(self.prices(), dtype=float))
            pick = self.run()
            lower_bound = float(self.h.getInfo().objective_function_value)
            best.current = [lower_bound]
            exact = all(part.key_of(k, pick) in self.costs.costs for k in range(len(part.blocks)))
            def cost_at(k: int, _: tuple[()], pick: Choice = pick) -> float:
                return self.costs.cost(k, pick)

            self.costs.spread(cost_at, [(k, ()) for k in range(len(part.blocks))
                                        if part.key_of(k, pick) not in self.costs.costs])
            total = math.fsum(self.costs.cost(k, pick) for k in range(len(part.blocks)))
            if total < best.cost:
                best.cost, best.choice = total, dict(pick)
            self.costs.watch.report(best.cost, lower_bound)
            if exact or best.cost <= lower_bound + 1e-9 * max(1.0, abs(lower_bound)):
                break

    def tie_break(self, best: Incumbent) -> None:
        """The least weight at the optimal cost, by the master with the weights as objective and
        the cost capped at the optimum.  Columns that the master LP's dual rules out of every
        plan within the cap are fixed at 0.  Every column costed already (small MIRs, as a
        rule): the blocks' lexicographic optima under the columns left are its weights, and one
        master solve ends it.  Else (large MIRs, or a block whose LPs are fractional) the master
        is solved lazily, as :meth:`optimise` does:
        a column not costed is priced by its bound, a column not weighed by the least weight
        any plan of its block has (:meth:`_least_weights`); the blocks of the master's choice
        are costed and weighed exactly, and the master solved again, until its choice is exact
        — a relaxation whose optimum is exact is the optimum."""
        import highspy
        import numpy as np

        part, h, names, n = self.part, self.h, self.names, self.n
        cap = best.cost * (1 + TIE_SLACK) + TIE_SLACK
        prices = np.array(self.prices(), dtype=float)
        out = np.flatnonzero(_ruled_out(self._floors_at(prices), cap)[names:])
        skip = set(out.tolist())
        costs, ties = self.costs.costs, self.costs.ties
        h.changeColsBounds(len(out), (names + out).astype(np.int32), np.zeros(len(out)), np.zeros(len(out)))
        h.addRow(-highspy.kHighsInf, cap, len(part.combinations), self.lam_cols, prices)
        cap_row = h.getNumRow() - 1
        h.setOptionValue("mip_rel_gap", 0.0)  # integral weights: a gap below 1 proves the optimum
        h.setOptionValue("mip_abs_gap", 0.99)
        own = [part.tie_of[st][j] for st in part.stores for j in range(len(part.shared[st]))]
        lazy = any(key not in costs for key in part.keys)
        if not lazy:
            weighed = {i for i, key in enumerate(part.keys) if key in ties}
            self.costs.spread(lambda k, i: self.costs.weight(k, part.chosen_by(k, part.combinations[i][1])),
                              [(k, i) for i, (k, _) in enumerate(part.combinations)], skip | weighed)
            weights = [0.0 if i in skip else ties[key][0] for i, key in enumerate(part.keys)]
        else:
            least = self._least_weights()
        while True:
            if lazy:
                weights = [ties[key][0] if key in ties else least[key[0]] for key in part.keys]
                for i, key in enumerate(part.keys):
                    if i not in skip and key in costs and costs[key][0] != prices[i]:
                        prices[i] = costs[key][0]
                        h.changeCoeff(cap_row, names + i, prices[i])
            h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(own + list(weights)))
            pick = self.run()
            todo = [k for k in range(len(part.blocks)) if part.key_of(k, pick) not in ties]
            if not todo:
                break
            def weigh_at(k: int, _: tuple[()], pick: Choice = pick) -> float:
                return self.costs.cost(k, pick) + self.costs.weight(k, pick)

            self.costs.spread(weigh_at, [(k, ()) for k in todo])
        best.weight, best.choice = float(h.getInfo().objective_function_value), pick

    def _floors_at(self, prices: Any) -> Floors | None:
        """:func:`_floors` of the master's LP with the columns priced at ``prices`` (the ``λ``'s;
        the ``z`` cost 0): the last ones computed when the prices are the same."""
        import numpy as np

        if self.floors is None or not np.array_equal(self.floors[0], prices):
            self.floors = (prices, _floors(self.lp, np.concatenate([np.zeros(self.names), prices])))
        return self.floors[1]

    def _prune(self) -> None:
        """Before the first master with every combination costed: fix at 0 the ``λ`` that the
        LP's dual (:meth:`_floors_at`) rules out of every solution that costs at most a plan at
        hand — each store partitioned by its largest ``z`` in the LP's solution, each block
        costed there — within the tie-break's slack.  Every optimum costs no more, so none is
        cut off, and the tie-break (whose cap, the optimum, is at most this one) fixes these
        columns too."""
        import numpy as np

        part = self.part
        self.costs.left()  # (the time limit, before the interior point method, which has none)
        floors = self._floors_at(np.array(self.prices(), dtype=float))
        if floors is None:
            return
        z = floors.primal
        pick = {st: max(range(len(part.shared[st])), key=lambda j: (z[self.zcol[(st, j)]], -j)) for st in part.stores}
        upper = math.fsum(self.costs.costs[part.key_of(k, pick)][0] for k in range(len(part.blocks)))
        out = np.flatnonzero(_ruled_out(floors, upper * (1 + TIE_SLACK) + TIE_SLACK)[self.names:])
        self.h.changeColsBounds(len(out), (self.names + out).astype(np.int32), np.zeros(len(out)), np.zeros(len(out)))

    def _least_weights(self) -> list[float]:
        """Per block, a lower bound of the tie-break weight of any of its plans: every (query,
        start) chooses one probe order and every store of the block alone one attribute (MIRs
        need not be materialised, and the shared stores weigh in the master)."""
        part, mdl = self.part, self.part.mdl
        x_at = mdl.keys_of("x")
        z_at = {c: store for (store, _), c in mdl.z.items()}
        out = []
        for b in part.blocks:
            least: dict[tuple[Any, ...], float] = {}
            for c in b.cols:
                if c in x_at and isinstance(x_at[c][0], str):
                    group = x_at[c][:2]
                elif c in z_at and part.tie[c]:
                    group = (z_at[c],)
                else:
                    continue
                least[group] = min(least.get(group, math.inf), part.tie[c])
            out.append(math.fsum(least.values()))
        return out


@dataclass(frozen=True)
class Floors:
    """Per column of a 0-1 program, the least objective of any solution with that column at 1
    (``least``), by a dual solution of its LP (:func:`_floors`), and the LP's solution (``primal``)."""

    least: Any
    primal: Any


def _floors(lp: Any, cost: Any) -> Floors | None:
    """What a dual solution of a 0-1 program's LP says of its columns (``lp``: a
    ``highspy.HighsLp`` of equality rows and columns in [0, 1], here with objective ``cost``):
    every solution with ``x_j = 1`` costs at least ``L + d_j`` (``d = cost − Aᵀy``,
    ``L = y·b + Σ min(0, d)``, any ``y``: weak duality), so it is 0 in every solution that costs
    less (:func:`_ruled_out`).  None when the LP is not solved.

    Which columns a ``y`` rules out depends on the ``y``.  The master's LP is degenerate (many
    combinations tie), and a simplex vertex of its dual face leaves many reduced costs at 0; the
    interior point method without crossover ends near the centre of that face, where a column
    has a positive reduced cost whenever it is 0 in every optimum of the LP, so it rules out all
    that any optimal ``y`` does.  Its ``y`` need not be exactly optimal: every ``y`` gives a
    valid bound.  Should it not converge, the simplex's dual is used.

    >>> import highspy, numpy as np
    >>> lp = highspy.HighsLp()  # x0 + x1 + x2 = 1
    >>> lp.num_col_, lp.num_row_ = 3, 1
    >>> lp.col_lower_, lp.col_upper_ = np.zeros(3), np.ones(3)
    >>> lp.row_lower_, lp.row_upper_ = np.ones(1), np.ones(1)
    >>> lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    >>> lp.a_matrix_.start_, lp.a_matrix_.index_ = np.array([0, 3], dtype=np.int32), np.arange(3, dtype=np.int32)
    >>> lp.a_matrix_.value_ = np.ones(3)
    >>> lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = 3, 1
    >>> floors = _floors(lp, np.array([1.0, 2.0, 5.0]))
    >>> bool(np.all(floors.least <= np.array([1.0, 2.0, 5.0]) + 1e-9)), _ruled_out(floors, cap=2.0).tolist()
    (True, [False, False, True])
    """
    import highspy
    import numpy as np

    h = silent_highs(highspy)
    relaxed = highspy.HighsLp()
    relaxed.num_col_, relaxed.num_row_ = lp.num_col_, lp.num_row_
    relaxed.col_cost_, relaxed.col_lower_, relaxed.col_upper_ = cost, lp.col_lower_, lp.col_upper_
    relaxed.row_lower_, relaxed.row_upper_ = lp.row_lower_, lp.row_upper_
    relaxed.a_matrix_ = lp.a_matrix_
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    h.passModel(relaxed)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        h.setOptionValue("solver", "simplex")
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
    solution = h.getSolution()
    y = np.asarray(solution.row_dual)
    a = lp.a_matrix_
    rows = np.repeat(np.arange(lp.num_row_), np.diff(np.asarray(a.start_)))
    d = np.asarray(cost, dtype=float) - np.bincount(np.asarray(a.index_), weights=np.asarray(a.value_) * y[rows],
                                                    minlength=lp.num_col_)
    low = math.fsum(y * np.asarray(lp.row_lower_)) + math.fsum(np.minimum(0.0, d))
    return Floors(low + d, np.asarray(solution.col_value))


def _ruled_out(floors: Floors | None, cap: float) -> Any:
    """Which columns :func:`_floors` rules out of every solution of objective at most ``cap``
    (beyond floating-point noise): a boolean array per column; none (an empty array) without a
    dual."""
    import numpy as np

    if floors is None:
        return np.zeros(0, dtype=bool)
    return floors.least > cap + 1e-6 * max(1.0, abs(cap))
