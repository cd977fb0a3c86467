"""Solving the model: part by part, each by the method that suits it, then the canonical
tie-break.

:func:`solve` splits the model into its independent components and chooses per part:

* one query's orders with an MIR of :data:`~mqjoin.planning.ilp.branching.BRANCH_MIN_MIR`
  relations or more (five-way queries, HiGHS only): the search without LPs of
  :mod:`mqjoin.planning.ilp.paths` (its optimum, then its lexicographic optimum), or where it
  gives up (too many nodes) the LP branch and bound of :mod:`mqjoin.planning.ilp.branching`;
* several queries under ``single`` (coupled only through the partition choice of shared
  stores, HiGHS only): the coupled search of :mod:`mqjoin.planning.ilp.coupled`;
* everything else: HiGHS's MIP or CBC (:mod:`mqjoin.planning.ilp.backends`), small parts batched
  into one call (a solver call has a fixed overhead of milliseconds).  A part with an MIR of
  :data:`RELAX_MIN_MIR` relations or more is first solved as :func:`orders_relaxed` (probe
  orders continuous, ``m`` binary), whose answer stands when its orders come out integral.

Every method is exact; under a time limit each part gets its share of what is left, by size,
and returns its incumbent and a valid bound.  A ``start`` (a feasible assignment) is the plan
kept for a part stopped before it found one.

The plan is made canonical (:func:`~mqjoin.planning.ilp.model.tie_weight`) by a second,
lexicographic stage: among the optima, the least tie-break weight.  For parts given to a MIP
solver it is a second solve with the cost capped at the optimum (:func:`_tie_break`); the
branch and bound and the coupled search break ties their own way and say whether they proved
it.

>>> import mqjoin
>>> from pathlib import Path
>>> from mqjoin.model.workload import load_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model
>>> mdl = build_model(enumerate_candidates(load_workload(Path(mqjoin.__file__).parent / "workloads" / "paper_v2.yaml")))
>>> sol = solve(mdl)
>>> sol.status, sol.objective, sol.canonical
('optimal', 700.0, True)
>>> relaxed = orders_relaxed(mdl)  # probe orders continuous, MIR indicators binary
>>> [relaxed.integer[i] for i in (next(iter(mdl.x.values())), next(iter(mdl.m.values())))]
[False, True]
>>> lp_bound(mdl) <= solve(relaxed).objective <= sol.objective
True
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from mqjoin.model.errors import NoSolutionError
from mqjoin.planning.ilp.backends import (INTEGRALITY_TOLERANCE, PartResult, cbc_relaxation, solve_cbc,
                                          solve_highs)
from mqjoin.planning.ilp.blocks import Stopped
from mqjoin.planning.ilp.branching import branch_and_bound, large_mirs
from mqjoin.planning.ilp.coupled import CoupledResult, solve_coupled
from mqjoin.planning.ilp.fairshare import fair_shares
from mqjoin.planning.ilp.model import TIE_MIN_SECONDS, TIE_SHARE, TIE_SLACK, Model, PartKey, components, part_key
from mqjoin.planning.ilp.monitor import Monitor, Watch, relative_gap
from mqjoin.planning.ilp.paths import BlockPaths, TooLarge, applies
from mqjoin.planning.ilp.prices import BlockKey, PricedBlock
from mqjoin.planning.options import check_solution_limit, check_solver, check_time_limit

#: solve :func:`orders_relaxed` first (by default) when the model has an MIR of at least this
#: many relations: it wins on five-way queries, whose root gap is all in the materialisation of
#: nested MIRs, and loses 4-7x on three- and four-way ones, where HiGHS's cuts on the binary
#: order choices close the gap at the root (benchmarks/RESULTS.md, section ILP)
RELAX_MIN_MIR = 4


@dataclass(frozen=True)
class SolvedPart:
    """One independent part's answer, kept to be reused by a later solve of a model that has
    the same part (:func:`part_key`): its nonzero values by column name and its objective,
    and for a coupled part its blocks' prices (:mod:`mqjoin.planning.ilp.prices`), which a
    later solve of a part that differs in a few blocks takes up."""

    values: Mapping[str, float]
    objective: float
    canonical: bool
    blocks: Mapping[BlockKey, PricedBlock] = field(default_factory=dict, compare=False, repr=False)


_RESOLVING = threading.Lock()


class Parts(Mapping[PartKey, SolvedPart]):
    """A solution's parts proven optimal, by :func:`part_key` (``Solution.parts``), whose keys
    are computed when asked for: a part's key holds every column and row of the part, which
    takes a while on a large part, and a later solve looks a part up only when it has one of
    the same size (the number of its columns and rows, :meth:`find`).  A part whose key is not
    computed yet is held as its model (which must not change after the solve), columns and
    rows.  ``prices``: the blocks' prices of the coupled parts that a time limit stopped (not
    parts of this mapping: their answers are not their optima, but every price is exact), which
    a later solve takes up as it takes up the kept parts' (an anytime round after the one
    before, :func:`mqjoin.planning.anytime.improve`)."""

    def __init__(self, known: Mapping[PartKey, SolvedPart] | None = None,
                 pending: list[tuple[Model, list[int], list[int], SolvedPart]] | None = None,
                 prices: Mapping[BlockKey, PricedBlock] | None = None) -> None:
        self._known: dict[PartKey, SolvedPart] = dict(known or {})
        self._pending = list(pending or [])
        self.prices: Mapping[BlockKey, PricedBlock] = dict(prices or {})

    def find(self, mdl: Model, cols: list[int], rows: list[int]) -> tuple[PartKey | None, SolvedPart | None]:
        """The key of a part of ``mdl`` and the part of that key here: (None, None) without
        computing the key when no part here has the part's size."""
        size = len(cols) + len(rows)
        if not any(len(k) == size for k in self._known) and not any(
                len(c) + len(r) == size for _, c, r, _ in self._pending):
            return None, None
        self._resolve(size)
        key = part_key(mdl, cols, rows)
        return key, self._known.get(key)

    def solved(self) -> list[SolvedPart]:
        """Every part's answer, without computing a key."""
        return list(self._known.values()) + [p for _, _, _, p in self._pending]

    def _resolve(self, size: int | None = None) -> None:
        """Compute the keys of the parts pending (of that size only, when given)."""
        with _RESOLVING:  # two re-plans from one result (the explorer's and a user's) at once
            left = []
            for mdl, cols, rows, part in self._pending:
                if size is None or len(cols) + len(rows) == size:
                    self._known[part_key(mdl, cols, rows)] = part
                else:
                    left.append((mdl, cols, rows, part))
            self._pending = left

    def __getitem__(self, key: PartKey) -> SolvedPart:
        self._resolve(len(key))
        return self._known[key]

    def __iter__(self) -> Iterator[PartKey]:
        self._resolve()
        return iter(self._known)

    def __len__(self) -> int:  # (parts of one model: their keys differ, names being unique)
        return len(self._known) + len(self._pending)


@dataclass(frozen=True)
class Solution:
    """Solver outcome.  ``status`` is ``"optimal"``, ``"time_limit"`` (a feasible plan was
    found but not proven optimal: ``gap`` says how far from the bound it may be) or
    ``"interrupted"`` (the same, stopped by :meth:`Monitor.stop <mqjoin.planning.ilp.monitor.Monitor.stop>`)."""

    status: str
    objective: float
    bound: float
    values: tuple[float, ...]
    solver: str
    solve_seconds: float
    components: int
    canonical: bool = False  # the equal-cost tie was broken canonically in every part
    #: with ``reuse``: every part proven optimal, a time limit or not (canonical where asked
    #: and proven), by its :func:`part_key`, and the blocks' prices of the parts a time limit
    #: stopped (``Parts.prices``), for the next solve's ``reuse``
    parts: Parts | None = field(default=None, compare=False, repr=False)
    reused: int = 0  # parts taken from ``reuse``, not solved

    @property
    def gap(self) -> float:
        return relative_gap(self.objective, self.bound)

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def value(self, index: int) -> float:
        return self.values[index]


#: a feasible assignment to start from, or what computes it (:func:`solve`)
Start = list[float] | Callable[[], list[float]] | None


def solve(mdl: Model, solver: str = "highs", time_limit: float | None = None, threads: int | None = None,
          start: Start = None, canonical: bool = True, solution_limit: int | None = None,
          relax_orders: bool | None = None, branching: bool | None = None, monitor: Monitor | None = None,
          fallback: list[float] | None = None, reuse: Mapping[PartKey, SolvedPart] | None = None) -> Solution:
    """Solve the model; raise unless a feasible plan is found.  A time limit that stops the
    solver before optimality gives ``status="time_limit"`` with the gap to the best bound.
    ``start`` is a feasible assignment of all variables the solver starts from (HiGHS), or a
    function that computes it, called once, when a part first needs it (a searched part only
    when it is stopped before it has a plan: without a time limit, never).
    ``solution_limit`` (HiGHS) stops the solver at its ``solution_limit``-th improving solution — a
    limit that, unlike time, does not depend on the machine — with ``status="solution_limit"``.

    ``canonical``: among the equal-cost optima return the one of least tie-break weight
    (:func:`~mqjoin.planning.ilp.model.tie_weight`), found by a second solve that keeps the
    cost at the optimum (within a relative 1e-7) and minimises the weights of the chosen probe
    orders and partition attributes.  The weights do not depend on the solver, so neither does
    the plan: HiGHS of any version and CBC return the same one (unless two optima have equal
    weight sums, which the pseudo-random part of the weights makes unlikely: probability ≤
    binaries / 2^20).  The tie-breaks of the coupled search and of the branch and bound run to
    the end, or to the time limit; that of HiGHS's or CBC's MIP gets a quarter of the first
    solve's time (at least 0.25 s, at most what is left of the time limit).
    ``Solution.canonical`` says whether it proved every part canonical (not after a time limit,
    nor where a MIP's tie-break runs out of its time: then the plan is still optimal, but
    equal-cost choices may differ between solvers).
    ``relax_orders``: solve :func:`orders_relaxed` first and keep its answer when its probe
    orders are integral (then it is exact), else solve the model as built (exact either way;
    None: when the model has an MIR of at least :data:`RELAX_MIN_MIR` relations and there is no
    ``solution_limit``).
    ``branching``: solve the parts that :func:`_branches` selects by the branch and bound and
    those :func:`_couples` selects by the coupled search, instead of HiGHS's MIP (None: with
    HiGHS and no ``solution_limit``; False: never).  Exact either way.
    ``monitor`` (:class:`~mqjoin.planning.ilp.monitor.Monitor`): told the incumbent and bound
    as they improve; once stopped, the solve ends as at a time limit, parts not started keep
    the ``start`` (which a monitored solve should have: stopped before any plan, it raises
    :class:`~mqjoin.model.errors.NoSolutionError`), and the status is ``interrupted``.
    ``fallback``: a feasible assignment kept wherever a ``start`` would be, should the solve
    stop before it has a plan, but not handed to the solvers (so it changes no search).
    ``reuse``: an earlier solution's ``parts`` (with blocks' prices), not solved again (:func:`_known_parts`)."""
    stand_in = _StandIn(start, fallback)
    check_solver(solver)
    check_time_limit(time_limit)
    check_solution_limit(solution_limit, solver)
    if relax_orders is None:
        relax_orders = solution_limit is None and any(len(m.relations) >= RELAX_MIN_MIR for m in mdl.m)
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit

    def remaining(share: float = 1.0) -> float | None:
        return None if deadline is None else max(0.01, share * (deadline - time.perf_counter()))

    values = [0.0] * mdl.num_variables
    comps = components(mdl)
    known, todo, comps_left, objective, priced, blocks = _known_parts(mdl, comps, reuse, canonical, values)
    status, bound, is_canonical = "optimal", objective, True
    proven: dict[int, bool] = {}  # the parts solved optimal here, by their first column: whether canonical
    firsts = {cols[0] for cols, _ in comps_left}  # (a batch of parts holds several: :func:`_batches`)
    if branching is None:
        branching = solver == "highs" and solution_limit is None
    parts = _methods(mdl, comps_left) if branching else [(p, "") for p in _batches(comps_left)]
    left_cols = sum(len(c) for (c, _), _ in parts)
    if monitor is not None:
        _begin(monitor, mdl, [cols for (cols, _), _ in parts], stand_in())
    for n, ((cols, rows), method) in enumerate(parts):
        t1 = time.perf_counter()
        watch = Watch(monitor, n)
        if watch.stopped:  # not started: the start stands, with the part's fair shares as bound
            keep = stand_in()
            if keep is None:
                raise NoSolutionError("the solve was interrupted before it found any plan")
            for c in cols:
                values[c] = float(keep[c])
            objective += math.fsum(mdl.cost[c] * keep[c] for c in cols)
            bound += watch.bound(0.0)
            status, is_canonical = "time_limit", False
            continue
        # under a time limit each part gets its share of what is left, by size
        share = len(cols) / left_cols
        left_cols -= len(cols)
        by_branching, st = method == "branch", ""  # (its status once a method answered)
        coupled = None if method != "coupled" else _coupled_or_start(mdl, cols, rows, remaining(share), canonical,
                                                                    stand_in, watch, priced, blocks)
        if coupled is not None:
            st, obj, bd, vals, done = coupled
            bd = min(obj, watch.bound(bd))
            watch.report(obj, bd)
        exact = _by_paths(mdl, cols, rows, deadline, canonical, watch) if by_branching and not st else None
        if exact is not None:  # the search without LPs ended (it gives up on too many nodes)
            (obj, vals, done), st = exact, "optimal"
            bd = obj
            watch.report(obj, obj)
        if not st:
            st, obj, bd, vals = _by_solver(mdl, cols, rows, solver, remaining(share), threads, stand_in.started(),
                                           stand_in(), solution_limit, relax_orders, by_branching, watch)
            done = st == "optimal"
            if done and canonical and any(mdl.tie[c] for c in cols):
                # the objective stays the optimum's: the canonical values cost the same, up to the
                # slack that the continuous variables may take in the tie-break solve
                done, vals = _tie_break(mdl, cols, rows, obj, vals, solver,
                                        _tie_seconds(remaining(), by_branching, time.perf_counter() - t1),
                                        threads, by_branching, watch.quiet())
        is_canonical = is_canonical and done
        if st == "optimal":
            proven.update((c, done) for c in cols if c in firsts)
        for c, v in zip(cols, vals):
            values[c] = v
        objective += obj
        bound += bd
        if st != "optimal":
            status = st
    if status != "optimal" and monitor is not None and monitor.stopped:
        status = "interrupted"
    kept = _kept(mdl, todo, values, known, proven if canonical else dict.fromkeys(proven, False), blocks)
    return Solution(status, objective, min(bound, objective), tuple(values), solver, time.perf_counter() - t0,
                    len(comps), canonical and is_canonical, kept, len(comps) - len(comps_left))


def _begin(monitor: Monitor, mdl: Model, parts: list[list[int]], keep: list[float] | None) -> None:
    """Tell the monitor the parts to solve: the cost of each under the plan that stands in for
    it (``keep``; none: ``math.inf``) and its fair shares, so that the first plan reported comes
    with a bound (:mod:`~mqjoin.planning.ilp.fairshare`, one pass over the probe orders)."""
    floors = fair_shares(mdl, parts)
    monitor.begin({n: math.inf if keep is None else math.fsum(mdl.cost[c] * keep[c] for c in cols)
                   for n, cols in enumerate(parts)}, dict(enumerate(floors)))


@dataclass
class _StandIn:
    """The plan that stands in for a part of :func:`solve` stopped before it has one: the start
    (computed the first time it is asked for, :meth:`started`), else the fallback."""

    start: Start
    fallback: list[float] | None
    _made: list[list[float] | None] = field(default_factory=list)

    def started(self) -> list[float] | None:
        if not self._made:
            self._made.append(self.start() if callable(self.start) else self.start)
        return self._made[0]

    def __call__(self) -> list[float] | None:
        given = self.started()
        return given if given is not None else self.fallback


def _tie_seconds(left: float | None, branching: bool, first: float) -> float | None:
    """The time of a part's tie-break after a solve of ``first`` seconds, ``left`` being what
    remains of the time limit: the branch and bound's (integral weights, a few LPs) runs to
    the end unless the solve has a time limit; HiGHS's and CBC's MIP get a share of the first
    solve's time (:data:`TIE_SHARE`, at least :data:`TIE_MIN_SECONDS`).

    >>> _tie_seconds(None, True, 8.0), _tie_seconds(None, False, 8.0), _tie_seconds(1.0, False, 8.0)
    (None, 2.0, 1.0)
    """
    budget = None if branching else max(TIE_MIN_SECONDS, TIE_SHARE * first)
    return left if budget is None else budget if left is None else min(left, budget)


#: the blocks' prices of the coupled parts a solve solved, by the part's first column
Blocks = dict[int, dict[BlockKey, PricedBlock]]

#: with ``reuse``: the parts a solve found there, the parts it solves (by key — None where no
#: part of ``reuse`` has its size —, columns and rows), those parts as (columns, rows), the
#: objective of the parts found, every block priced there, and where the prices of the blocks
#: it solves go (None without ``reuse``: nothing is kept)
Known = tuple[dict[PartKey, SolvedPart] | None, list[tuple[PartKey | None, list[int], list[int]]],
              list[tuple[list[int], list[int]]], float, dict[BlockKey, PricedBlock], Blocks | None]


def _known_parts(mdl: Model, comps: list[tuple[list[int], list[int]]], reuse: Mapping[PartKey, SolvedPart] | None,
                 canonical: bool, values: list[float]) -> Known:
    """Incremental re-planning: a part of the model found in ``reuse`` (the ``parts`` of an
    earlier :class:`Solution`, same :func:`part_key`; proven canonical when ``canonical``) takes
    its values from there (written into ``values``) and is not solved; the others are.  Parts
    share no row and each part's optimum (its canonical one) depends on the part alone, so the
    answer is the one a solve from scratch gives.  Without ``reuse`` every part is solved and
    none is kept (``Solution.parts`` None); with it (an empty mapping to start) the solution
    lists its parts proven optimal for the next solve (:func:`_kept`).  The blocks priced in
    ``reuse``'s parts, and in its parts a time limit stopped (``Parts.prices``), are priced
    again by none of the coupled parts solved (:mod:`mqjoin.planning.ilp.prices`)."""
    if reuse is None:
        return None, [], comps, 0.0, {}, None
    parts = reuse if isinstance(reuse, Parts) else Parts(reuse)
    known: dict[PartKey, SolvedPart] = {}
    todo, left, objective = [], [], 0.0
    for cols, rows in comps:
        key, hit = parts.find(mdl, cols, rows)
        if key is None or hit is None or (canonical and not hit.canonical):
            todo.append((key, cols, rows))
            left.append((cols, rows))
            continue
        known[key] = hit
        at = {mdl.names[c]: c for c in cols}
        for name, v in hit.values.items():
            values[at[name]] = v
        objective += hit.objective
    priced = {k: v for part in parts.solved() for k, v in part.blocks.items()}
    return known, todo, left, objective, {**parts.prices, **priced}, {}


def _kept(mdl: Model, todo: list[tuple[PartKey | None, list[int], list[int]]], values: list[float],
          known: dict[PartKey, SolvedPart] | None, proven: Mapping[int, bool], blocks: Blocks | None) -> Parts | None:
    """``known`` with the parts solved (``todo``) added that the solve proved optimal
    (``proven``, by their first column: whether canonical too; a part that a time limit
    stopped is not kept, its answer is not the part's optimum), each with its blocks' prices
    (``blocks``, by the part's first column); a part without a key yet gets it when a later
    solve asks (:class:`Parts`).  The blocks' prices of the coupled parts not kept are kept
    apart (``Parts.prices``): every price is exact, a time limit or not."""
    if known is None:
        return None
    pending = []
    prices: dict[BlockKey, PricedBlock] = {}
    for key, cols, rows in todo:
        priced = (blocks or {}).get(cols[0], {})
        if cols[0] not in proven:
            prices.update(priced)
            continue
        part = SolvedPart({mdl.names[c]: values[c] for c in cols if values[c]},
                          math.fsum(mdl.cost[c] * values[c] for c in cols), proven[cols[0]], priced)
        if key is None:
            pending.append((mdl, cols, rows, part))
        else:
            known[key] = part
    return Parts(known, pending, prices)


def _methods(mdl: Model, comps: list[tuple[list[int], list[int]]]) -> list[tuple[tuple[list[int], list[int]], str]]:
    """The parts in the order they are solved, each with its method: the components that
    :func:`_branches` selects (``"branch"``) or :func:`_couples` selects (``"coupled"``) one by
    one, then the others batched (:func:`_batches`) for HiGHS's MIP (``""``)."""
    how = {id(p): ("branch" if _branches(mdl, p[0]) else "coupled" if _couples(mdl, p[0]) else "") for p in comps}
    return ([(p, how[id(p)]) for p in comps if how[id(p)]]
            + [(p, "") for p in _batches([p for p in comps if not how[id(p)]])])


def _by_solver(mdl: Model, cols: list[int], rows: list[int], solver: str, time_limit: float | None,
               threads: int | None, start: list[float] | None, keep: list[float] | None,
               solution_limit: int | None, relax_orders: bool, branching: bool,
               watch: Watch) -> tuple[str, float, float, list[float]]:
    """One part by :func:`_solve_part` (HiGHS's or CBC's MIP, or the LP branch and bound):
    (status, objective, bound, values), the bound at most the objective and both told to
    ``watch``.  Stopped before the solver took up the start, the part keeps ``keep`` (the best
    plan so far) with bound 0; without one, :class:`~mqjoin.model.errors.NoSolutionError`."""
    try:
        st, obj, bd, vals = _solve_part(mdl, cols, rows, solver, time_limit, threads, start,
                                        solution_limit=solution_limit, relax_orders=relax_orders,
                                        branching=branching, watch=watch)
    except NoSolutionError:
        if keep is None:
            raise
        vals = [float(keep[c]) for c in cols]
        st, obj, bd = "time_limit", math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), 0.0
    bd = min(obj, watch.bound(bd))
    watch.report(obj, bd)
    return st, obj, bd, vals


def _by_paths(mdl: Model, cols: list[int], rows: list[int], deadline: float | None, canonical: bool,
              watch: Watch) -> tuple[float, list[float], bool] | None:
    """One query's part solved by :class:`~mqjoin.planning.ilp.paths.BlockPaths` (no LPs):
    (optimum, values, canonical proven), or None when it gives up (too many nodes, rows it
    does not model, or the time limit before the optimum: the branch and bound takes over)."""
    if not applies(mdl, rows):
        return None

    def check() -> None:
        if watch.stopped or (deadline is not None and time.perf_counter() > deadline):
            raise Stopped

    paths = BlockPaths(mdl, cols, mdl.tie, check)
    try:
        obj, vals = paths.optimum({})
    except (TooLarge, Stopped):
        return None
    if not canonical or not any(mdl.tie[c] for c in cols):
        return obj, vals, True
    try:
        return obj, paths.lexicographic({}, obj, vals)[1], True
    except (TooLarge, Stopped):
        return obj, vals, False


def _coupled_or_start(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None, canonical: bool,
                      kept: Callable[[], list[float] | None], watch: Watch = Watch(),
                      known: Mapping[BlockKey, PricedBlock] | None = None,
                      blocks: Blocks | None = None) -> CoupledResult | None:
    """The coupled search's answer for a part (None: the part is not for it), or the start
    (``kept()``, computed then) with bound 0 when a time limit stopped the search before it had
    a plan.  ``known``: blocks priced before; ``blocks``: where the part's blocks' prices go, by
    its first column (see :func:`~mqjoin.planning.ilp.coupled.solve_coupled`)."""
    try:
        return solve_coupled(mdl, cols, rows, time_limit, canonical, watch, known,
                             None if blocks is None else blocks.setdefault(cols[0], {}))
    except NoSolutionError:
        start = kept()
        if start is None:
            raise
        vals = [float(start[c]) for c in cols]
        return "time_limit", math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), 0.0, vals, False


def _solve_part(mdl: Model, cols: list[int], rows: list[int], solver: str, time_limit: float | None,
                threads: int | None, start: list[float] | None, integral_objective: bool = False,
                solution_limit: int | None = None, relax_orders: bool = False,
                branching: bool = False, watch: Watch = Watch()) -> PartResult:
    if branching:
        return branch_and_bound(mdl, cols, rows, time_limit, start, integral_objective, watch=watch)
    if relax_orders and any(mdl.integer[c] for c in cols):
        return _solve_orders_relaxed(mdl, cols, rows, solver, time_limit, threads, start, integral_objective, watch)
    if solver == "highs":
        return solve_highs(mdl, cols, rows, time_limit, threads, start, integral_objective, solution_limit,
                           watch=watch)
    return solve_cbc(mdl, cols, rows, time_limit, integral_objective)


def _branches(mdl: Model, cols: list[int]) -> bool:
    """Whether a part is solved by the branch and bound: it has an MIR of at least
    :data:`~mqjoin.planning.ilp.branching.BRANCH_MIN_MIR` relations (five-way queries, where
    HiGHS spends seconds in cuts and heuristics on a root gap that is all in ``m``) and holds
    one query's orders only (parts coupled by shared stores carry the partition choices ``z``
    of several queries, whose gap plain LP branching does not close)."""
    return large_mirs(mdl, cols) and len(_queries(mdl, cols)) <= 1


def _couples(mdl: Model, cols: list[int]) -> bool:
    """Whether a part is solved by the coupled search: policy ``single`` and the orders of
    several queries (coupled through the partition choices of the stores they share)."""
    return mdl.policy == "single" and len(_queries(mdl, cols)) > 1


def _queries(mdl: Model, cols: list[int]) -> set[str]:
    """The queries whose probe orders are among a part's columns."""
    x_at = mdl.keys_of("x")
    return {x_at[c][0] for c in cols if c in x_at and isinstance(x_at[c][0], str)}


def searched(mdl: Model) -> bool:
    """Whether :func:`solve` (HiGHS, default ``branching``) searches every part of the model
    itself (:func:`_branches`, :func:`_couples`) rather than handing one to HiGHS's MIP: then a
    start is only the plan kept should a time limit strike before the search has one (see
    ``mqjoin.planning.clash._solve_workload``)."""
    return all(_branches(mdl, cols) or _couples(mdl, cols) for cols, _ in components(mdl))


def unsearched_binaries(mdl: Model) -> int:
    """The binaries of the parts :func:`solve` (HiGHS, default ``branching``) hands to HiGHS's
    MIP, not searched itself: what a good start can help with.  A large workload whose one
    coupled part is searched often has a few one-query components beside it, which HiGHS
    solves in milliseconds without a start."""
    return sum(sum(mdl.integer[c] for c in cols) for cols, _ in components(mdl)
               if not (_branches(mdl, cols) or _couples(mdl, cols)))


def orders_relaxed(mdl: Model) -> Model:
    """The model with continuous probe-order choices ``x`` and binary materialisation
    indicators ``m``: a relaxation (every plan is feasible in it), so its optimum is a lower
    bound, and an optimum whose ``x`` are integral is an optimum of the model itself.  Solvers
    then branch on which MIRs to materialise and on partition choices only — with ``m``
    fixed, the LP was integral on every workload measured, which is where the root gap of
    five-way queries came from (see the module's example)."""
    xs, ms = set(mdl.x.values()), set(mdl.m.values())
    return replace(mdl, integer=[(flag and i not in xs) or i in ms for i, flag in enumerate(mdl.integer)])


def _solve_orders_relaxed(mdl: Model, cols: list[int], rows: list[int], solver: str, time_limit: float | None,
                          threads: int | None, start: list[float] | None, integral_objective: bool,
                          watch: Watch = Watch()) -> PartResult:
    """Solve :func:`orders_relaxed` of one part; its answer stands when optimal with integral
    probe orders.  Otherwise the part is solved as built, in the time left, from the relaxed
    plan when it is one, keeping the better of the two (valid) bounds."""
    t0 = time.perf_counter()
    relaxed = orders_relaxed(mdl)
    try:
        # (a relaxation: its plans are the part's, its bound is not the part's until proven)
        st, obj, bd, vals = _solve_part(relaxed, cols, rows, solver, time_limit, threads, start, integral_objective,
                                        watch=watch.quiet())
    except NoSolutionError:
        st, bd, vals = "none", 0.0, []
    xs = set(mdl.x.values())
    integral = bool(vals) and all(abs(v - round(v)) <= INTEGRALITY_TOLERANCE
                                  for c, v in zip(cols, vals) if c in xs)
    if st == "optimal" and integral:
        return st, obj, bd, vals
    if integral:  # a plan, found before the limit: the exact solve starts from it
        start = [0.0] * mdl.num_variables
        for c, v in zip(cols, vals):
            start[c] = v
    left = None if time_limit is None else max(0.01, time_limit - (time.perf_counter() - t0))
    try:
        st2, obj2, bd2, vals2 = _solve_part(mdl, cols, rows, solver, left, threads, start, integral_objective,
                                            watch=watch)
    except NoSolutionError:
        if not integral:
            raise
        return "time_limit", obj, bd, vals  # no time left to take up the relaxed plan: it is the best so far
    return st2, obj2, max(bd, bd2), vals2


def lp_bound(mdl: Model, solver: str = "highs") -> float:
    """The optimum of the model's LP relaxation (every binary in [0, 1]): the root bound a
    branch and bound starts from.  ``(optimum − lp_bound) / optimum`` is the root gap that
    cuts and branching must close.

    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from mqjoin.planning.ilp.model import build_model
    >>> mdl = build_model(enumerate_candidates(random_workload(4, 8, 3, seed=2)))
    >>> round(lp_bound(mdl)) == round(lp_bound(mdl, "cbc")) <= solve(mdl).objective
    True
    """
    check_solver(solver)
    total = 0.0
    for cols, rows in components(mdl):
        if solver == "highs":
            total += solve_highs(mdl, cols, rows, None, None, relax=True)[1]
        else:
            total += cbc_relaxation(mdl, cols, rows)
    return total


def _tie_break(mdl: Model, cols: list[int], rows: list[int], optimum: float, vals: list[float], solver: str,
               time_limit: float | None, threads: int | None, branching: bool = False,
               watch: Watch = Watch()) -> tuple[bool, list[float]]:
    """The second, lexicographic stage: minimise the tie-break weights subject to the model
    and ``cost ≤ optimum``, starting from the optimum found.  Returns (proven, values); the
    values keep the optimal cost either way."""
    costed = [c for c in cols if mdl.cost[c]]
    row = ("canonical_cost", costed, [mdl.cost[c] for c in costed], -math.inf,
           optimum * (1 + TIE_SLACK) + TIE_SLACK)
    second = replace(mdl, cost=mdl.tie, rows=mdl.rows + [row])
    start = [0.0] * mdl.num_variables
    for c, v in zip(cols, vals):
        start[c] = v
    try:
        st, _, _, vals2 = _solve_part(second, cols, rows + [len(mdl.rows)], solver, time_limit, threads, start,
                                      integral_objective=True, branching=branching, watch=watch)
    except NoSolutionError:  # no time left to even reload the start: keep the optimum found
        return False, vals
    return st == "optimal", vals2


def _batches(comps: list[tuple[list[int], list[int]]], size: int = 3000) -> list[tuple[list[int], list[int]]]:
    """Group components: each large one alone, small ones together up to ``size`` columns."""
    out: list[tuple[list[int], list[int]]] = []
    cur: tuple[list[int], list[int]] = ([], [])
    for cols, rows in comps:
        if len(cols) >= size:
            out.append((cols, rows))
            continue
        if len(cur[0]) + len(cols) > size and cur[0]:
            out.append(cur)
            cur = ([], [])
        cur[0].extend(cols)
        cur[1].extend(rows)
    if cur[0]:
        out.append(cur)
    return out
