"""The integer linear program that picks probe orders and partitionings (docs/model.md §5, docs/architecture.md §3).

Formulation (tight, "disaggregated"; probe orders and steps unpartitioned):

* ``x_o ∈ {0,1}`` per candidate probe order; ``Σ_o x_o = 1`` per (query, start) and
  ``Σ_o x_o = m_M`` per (MIR, start), where ``m_M`` says whether MIR ``M`` is materialised;
  ``x_o ≤ m_M`` for every MIR element ``M`` of ``o``.
* ``y_s ≥ x_o`` for every step ``s`` of ``o`` (the paper aggregates these into one
  ``Σ c·y − C·x ≥ 0`` row per order, whose LP relaxation is much weaker).
* ``single`` policy: ``z_{M,A} ∈ {0,1}``, ``Σ_A z_{M,A} = 1`` per store with several
  candidates and parallelism > 1; a broadcast indicator ``b_s ≥ y_s − Σ_{A known to s} z_{M,A}``.
* ``replicas`` policy: a step can always target a replica partitioned by an attribute its
  prefix knows (every element shares a class with its prefix), so ``χ = 1`` and no ``z``.
* objective ``Σ c_s·y_s + Σ c_s·(p − 1)·b_s``.
* optional **MIR memory budget** ``B`` (tuples): ``Σ_M mem(M)·m_M ≤ B`` over the MIRs
  (docs/model.md §5's memory of one replica; base stores are needed by every plan and not counted,
  nor are extra replicas under ``replicas``).  A large intermediate result that does not fit
  is then not materialised — and is once it shrinks (paper Section VII-B, Figure 8(b)).

``y``, ``m`` and ``b`` are continuous: they are integral whenever ``x`` and ``z`` are.  The
model splits into independent components (variables linked through rows), solved one by one.
Models with an MIR of :data:`RELAX_MIN_MIR` or more relations are first solved as
:func:`orders_relaxed` (``x`` continuous, ``m`` binary), exact when its orders come out integral.

With HiGHS, three kinds of components are not given to HiGHS's MIP but searched here, exactly
(sketched by issue 14's "exact search over MIR materialisation" and "decomposition over the
coupling"); the first two hold an MIR of :data:`BRANCH_MIN_MIR` relations (five-way queries):

* one query's component (``replicas``, or a query sharing no store): :func:`_branch_and_bound`,
  an LP branch and bound that branches on ``m`` first — with ``m`` fixed the LP is integral, so
  a 5-way query takes a few dozen LPs of ~1.5 ms (HiGHS's MIP: 0.75–3.4 s of cuts and
  heuristics at the root);
* queries coupled only through the partition choice of shared stores (``single``):
  :func:`_solve_coupled`, a search over the shared stores' attributes in which every complete
  choice leaves one independent block per query (solved by :func:`_branch_and_bound`, cached),
  bounded by the blocks' optima under partial choices — depth first for a few shared stores,
  by a master ILP over the blocks' choices (lazily costed) from :data:`MASTER_MIN_STORES` on;
* the same with small MIRs (three- and four-way queries, ``single``): every combination of
  the choices a block tells apart is costed up front by one LP (~0.15 ms: a query's LP with its
  partition choices fixed came out integral on every goal workload; when not, the branch and
  bound), so the master ILP is exact at once; the canonical tie-break is a second master over
  the blocks' lexicographic optima under each combination (a second small LP each), skipping
  the combinations a dual solution of the master's LP rules out (:func:`_ruled_out`).  A model
  whose every part is searched needs no MIR-free warm start (``optimizer._solve_workload``).

Measured after these (``ilp_scale.py --goals --repeat 3``, 30 s limit, load 2.1–2.4 on 2
cores; total = enumeration + build + MIR-free warm start + solve): 10 × 5 replicas 0.89 s
optimal and canonical (goal 3 s: met; was 3.8 % gap at 30 s), 10 × 5 single 2.60 s optimal and
canonical (met; was 13 %), 30 × 5 replicas 3.9 s optimal (goal 10 s: met; was 4.2 %), 30 × 5
single optimal in 29.1 s — search 22.4 s, warm start ~5.7 s — not proven canonical (missed;
was 59 % gap at 30 s), 100 × 3 single unchanged at 1.03 s (HiGHS; goal 0.5 s: missed).

Then three-way coupled parts costed combination by combination, and no warm start where every
part is searched (same command, load 1.5–2.1 with Spark benchmarks beside): 100 × 3 single
1.07 → 0.59 s, now proven canonical (HiGHS's tie-break had not finished: its plan was optimal,
the tie not proven broken; with an unlimited tie-break, 66 s, it is the plan found here);
missed still — solve 0.41 s: ~960 LPs for the costs and ~580 for the tie-break of ~0.15 ms
each (HiGHS's fixed cost per run; no option measured changes it), master ILPs 0.05 s;
enumeration + build 0.09 s, plan extraction and costing ~0.08 s.  30 × 5 single 30.1 →
25.5 s (no warm start; the search unchanged: missed).  The others unchanged (10 × 5 single
2.75 s, replicas 0.89 s, 30 × 5 replicas 3.4 s, 100 × 3 replicas 0.25 s).

Then the blocks costed on two threads (:func:`_per_block`, :data:`BLOCK_THREADS`: HiGHS releases
the GIL while it solves and every block has instances of its own; each block's combinations in
their order, so the plans do not depend on the threads — checked on ten random workloads of
sizes 3–5): every combination of the three-way parts, the tie-break's weights, the root bounds
and each master iteration's blocks.  Same command, load 1.0: 100 × 3 single 0.47 → 0.39 s
(goal 0.5 s: met; one thread 0.47 s the same hour), 30 × 5 single 23.6 → 13.8 s optimal (one
thread 23.2 s; goal ≤ 1 % gap in 10 s: missed — at a 10 s limit the gap is 12.4 %, incumbent
339,000 against 321,000: the master's bound rises late), 10 × 5 single 2.57 → 2.39 s.

Then, on five-way parts under the master, every combination priced by its LP before the first
master (a block's LP with the choices fixed; integral ones are costed at once), the
combinations of a block in reflected Gray order (:func:`_reflected`: each LP one store away
from the last), a first plan from the blocks' plans alone (kept should a time limit strike
before the master's first), and enumeration and build without garbage collections
(``optimizer._solve_workload`` under :func:`~mqjoin.support.gcpause.paused_gc`). 30 × 5 single: the
master's bound starts at 287,925 instead of 240,000 (optimum 321,000), 297 combinations are
costed exactly (199 branch and bounds) instead of 626; 19 master iterations instead of 53;
enumeration + build 1.6 → 0.6 s in the benchmark's process (it holds earlier runs' objects).
Same command, load 0.7: 30 × 5 single 13.8 → 8.2 s optimal (goal ≤ 1 % gap in 10 s: met; runs
8.26 / 8.21 / 8.18; at a 2 s solve limit 32 % gap, 5 s 5.2 %, 7 s 1.1 %), not proven canonical
(the master path has no second pass: at the optimum 132 more combinations would need their
exact optimum and 295 their lexicographic one, ~10 s more); other seeds 6.1–9.9 s against
8.7–13.2 s. Where its ~8.5 s go: enumeration + build 0.6 s, components and blocks 0.4 s, the
blocks alone and 748 LPs 2.7 s, master iterations 5.2 s (blocks 3.6 s, master ILPs 0.94 s;
0.65 s with presolve off, kept for these masters).
100 × 3 single 0.39 s, 10 × 5 single 2.44 s, 30 × 5 replicas 2.6 s: unchanged (within noise).

Speed (issue 14), measured on the goal workloads of ``benchmarks/ilp_scale.py --goals`` (seed 0;
2 cores shared with other sessions, load 4–10, so seconds vary 2–4× between runs).  Where the
time goes — the LP root is fast, the gap above it is what costs:

=====================  ====================================================================
100 × size 3, single   enumeration + build 0.09 s, MIR-free warm start 0.2 s, root LP 0.04 s
                       at 616,854 against the optimum 695,500 (11 % root gap), closed by
                       HiGHS's cuts at the root in 0.6–1.4 s; tie-break 0.25–0.4 s, unfinished.
                       The gap is all in the partition choices ``z``: each query alone has an
                       integral LP (100 queries: LP = ILP = 400,000, 6 ms each)
10 × size 5            build 0.2 s; 5 (single) or 10 (replicas) components, each 5-way query
                       alone an LP of 7,450–7,690 against 8,000 (4–7 % root gap), solved at
                       the root node in 0.75–2.7 s (cut loop ~1.1 s, strong branching, sub-MIP
                       heuristics).  With the MIR indicators ``m`` fixed at the optimum the LP
                       is integral (8,000): the whole gap is which MIRs to materialise
30 × size 5            single: one component of 21,009 columns whose root cut loop does not end
                       in 20 s (the incumbent is the warm start, 59 % gap); replicas: 30 parts
=====================  ====================================================================

The goals, median of 3 with a 30 s limit, before → after :func:`orders_relaxed` (load 5–10 →
4–7; gap = proven gap at the limit): 100 × 3 single 4.6 → 1.8 s, replicas 1.4 → 0.8 s (goal
0.5 s); 10 × 5 single 33 → 13 %, replicas 16 → 3.8 % (goal: optimal in 3 s); 30 × 5 single
60 → 59 %, replicas 26 → 4.2 % (goal: 1 % in 10 s).  None met; the 100 × 3 change is load.

Alternatives measured (same workloads; "exact" is the model as built):

==============================================  ==========================================
HiGHS options: symmetry detection off,          one 10 × 5 component: 1.5–2.6 s against 1.6 s
heuristic effort 0 or 0.3, presolve off         (default): no gain, none kept
CBC instead of HiGHS                            three 10 × 5 components: 5.6–8.0 s against
                                                2.5–4.8 s
dominance of partition choices (``z_B`` when    0 of 201 / 153 / 467 ``z`` on 100 × 3 / 10 × 5
every step knowing B knows A)                   / 30 × 5: not built
dominance among orders (an order's private      0 of 1,126 / 2,655 / 7,774 orders: not built
steps cost at least a cheaper order's, whose
MIRs it uses)
``m`` binary as well as ``x``                   three 10 × 5 components: 9.1 / 8.7 / 8.4 s
                                                against 10.6 / 6.7 / 8.6 s: no gain
:func:`orders_relaxed` (``x`` continuous,       three 10 × 5 components: 2.3 / 2.7 / 2.2 s
``m`` binary), exact fallback                   against 10.6 / 6.7 / 8.6 s.  Whole models
                                                (median of 3, 40 s limit): 10 × 5 replicas
                                                optimal in 38.7 s against 2.1 % gap at 40 s;
                                                30 × 5 replicas 6.6 % against 25.6 % gap at
                                                30 s; 10 × 5 single 13.0 % against 12.4 %;
                                                but 100 × 3 single 2.64 against 0.62 s, 20 × 4
                                                replicas 2.98 against 0.42 s, 20 × 4 single
                                                5.0 % against 6.5 %: kept for MIRs of ≥ 4
                                                relations (:data:`RELAX_MIN_MIR`)
the same for the canonical tie-break            100 × 3 replicas: the relaxed tie-break's LP is
                                                fractional (387,873,775.6 against 387,873,989),
                                                so it solves twice: not used
Lagrangian relaxation of the coupling (the      not built: 100 × 3 single's subproblems (one
partition choice of shared stores), per-query   query each) have integral LPs at zero prices, so
subproblems                                     its bound is not expected above the LP's
                                                616,854; a 5-way subproblem takes 0.75–2.7 s,
                                                so one subgradient round over 30 queries takes
                                                more than the 10 s goal
column generation over probe orders             not built: its LP bound is this model's (a
                                                group's orders already form a simplex), and the
                                                LP is not where the time goes
the LP branch and bound on coupled components   10 × 5 single's coupled component (3,703
(:func:`_branch_and_bound`), branching          columns, 6 queries): unfinished at 20 s (6,152
m → z → x or z → m → x                          nodes; incumbent 58,083 / 57,000, LP 46,271);
                                                100 × 3 single: unfinished at 20 s (9,460 nodes,
                                                incumbent 723,000 / 718,000 against 695,500):
                                                the ``z`` gap needs HiGHS's cuts; not used there
the same, z before m on one query's component   10 × 5 single's one-query components: 0.56 /
                                                3.8 / 2.4 s against 0.05 / 0.08 / 0.09 s (m
                                                first): m first kept
HiGHS options for the B&B's LPs: presolve off,  10 × 5 single: 2.81 / 2.90 s against 2.78 s
dual simplex strategy; primal simplex           (default); primal 17.9 s: defaults kept
the coupled search, block optima cached by the  10 × 5 single (no tie-break): 59 block solves,
choice of each shared store; + choices that     2.86 s; + equivalent choices 53, 2.42 s;
serve the same steps as one; + a known plan,    + recosted plans 32 solves, 1.53 s: all kept
recosted, is exact when it meets the bound
of a less decided choice
canonical tie-break inside the coupled search:  10 × 5 single: 4.6–5.3 s (lexicographic
lexicographic (cost, weight) in one pass        everywhere) against 2.3 s (a second pass over
                                                the optimal choices only): second pass kept
HiGHS options on 100 × 3 single's MIP (median   default 0.59 s; heuristic effort 0 0.62 s;
of 3, main solve only, load ~2)                 symmetry detection off 0.55 s; feasibility jump
                                                off 0.54 s; no restart 0.52 s; lp age limit 5
                                                0.47 s; presolve off + heuristics 0 0.74 s:
                                                none near the goal, none kept
one lexicographic solve of ``W·cost + tie``     not built: on 100 × 3 the weights of a plan sum
(``W`` > every weight sum) instead of the       to ~2^32, so ``W·cost`` reaches ~2^52, and the
tie-break                                       solvers' feasibility tolerance (1e-6 on ``y``,
                                                ``b``) times ``W·c`` is worth thousands of
                                                weight units: not exact
the coupled search's lazily costed master on    0.95 s (749 block solves) against HiGHS's 0.7 s;
100 × 3 single (branch and bound per block)     replaced by costing every combination (1,596,
                                                858 once choices serving the same steps are
                                                one) by one LP each: 0.13 s
all combinations of 100 × 3 in one stacked LP   0.62 s against 0.23 s for the 1,596 LPs apart
each combination's tie-break LP on the same     0.60 s against 0.50 s (both stages, 1,596
HiGHS instance as its cost LP (objective        combinations); the cost LP's basis passed to
switched), or from the cost LP's basis          the tie-break instance: tie-break 0.32 against
                                                0.23 s.  A stage's own instance kept
skipping the tie-break LP where the cost LP's   130 of 1,596 cost LPs dual nondegenerate: not
optimum is unique (dual nondegenerate)          worth the check
30 × 5 single's master priced by each           first measured on 1,232 LPs from cold
combination's LP bound (a block's LP with its   instances, 4.9 s, and not built (the bound,
choices fixed) instead of a less decided        285,733, is 11 % below the optimum); then
choice's optimum                                built: 748 LPs once choices serving the same
                                                steps are one, 1.8 s on the blocks' warm
                                                instances, and the master needs the exact
                                                optima of 297 combinations instead of 626:
                                                13.8 → 9.0 s (above)
branching rule of :func:`_branch_and_bound`     30 × 5 single's 199 branch and bounds, one
(the ``m`` nearest 0.5, the largest, the        thread: 6,072 / 6,132 / 5,981 / 6,604 LPs,
smallest, the first)                            12.5 / 12.5 / 12.2 / 12.8 s: nearest 0.5 kept
master ILP started from the best choice so far  30 × 5 single: 9.40 s against 9.40 s: not kept
every combination of 30 × 5 single costed up    13.0 s against 14.3 s (the lazy master costs
front (branch and bound each), one master       626 of 748 anyway); with LP prices the lazy
                                                master costs 297: not kept
combinations ruled out by the master LP's       none of 748 at the first master (cap 324,000,
reduced costs, the rest costed at once          LP-priced): all 639 uncosted costed, 14.9 s
                                                against 9.0 s: not kept
combinations ruled out of the tie-break by      279 of 1,047 master columns on 100 × 3 (the
the master LP's reduced costs                   master's LP bound is the optimum, but its dual
                                                is degenerate: many combinations tie); kept
the depth-first coupled search on 30 × 5        at 10 s and 30 s: incumbent 321,000 (the first,
single (42 shared stores of 2–3 attributes,     greedy leaf: optimal), bound 252,000 (21.5 %
30 blocks)                                      gap); 187 block solves of ~45 ms.  Replaced
                                                there by the master ILP: optimal in 22.5 s
                                                (577 block solves, 19.1 s of them); on 10 × 5
                                                single the master takes 1.9 s against the
                                                search's 1.5 s: the search kept below
                                                :data:`MASTER_MIN_STORES` (12) shared stores.
                                                The 10 s goal needs cheaper block bounds (most
                                                block solves only prove a choice's bound)
==============================================  ==========================================

This is the only module that imports PuLP or highspy.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... ''')
>>> sol = solve(build_model(enumerate_candidates(w, mirs=False)))
>>> sol.status, sol.objective
('optimal', 450.0)
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Iterable

from mqjoin.planning.candidates import MIR, Candidates, Owner, Step, owner_label
from mqjoin.model.errors import InfeasibleError, NoSolutionError, OptimizerError, SolverUnavailableError
from mqjoin.planning.options import (ALL_POLICIES, BUDGET, POLICIES, SOLVERS, check_budget, check_policy,  # noqa: F401
                      check_solution_limit, check_solver, check_time_limit)
from mqjoin.model.workload import Attr




@dataclass
class Model:
    """A sparse 0-1 model with named variables and rows, plus what each variable means."""

    candidates: Candidates
    policy: str
    names: list[str] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    tie: list[float] = field(default_factory=list)  # secondary (tie-break) objective, see tie_weight
    rows: list[tuple[str, list[int], list[float], float, float]] = field(default_factory=list)
    x: dict[tuple[Owner, str, int], int] = field(default_factory=dict)
    y: dict[Step, int] = field(default_factory=dict)
    m: dict[MIR, int] = field(default_factory=dict)
    z: dict[tuple[MIR, Attr], int] = field(default_factory=dict)
    b: dict[Step, int] = field(default_factory=dict)
    build_seconds: float = 0.0
    _used: set[str] = field(default_factory=set)

    def var(self, name: str, cost: float = 0.0, integer: bool = False, upper: float = 1.0,
            rank: int | None = None) -> int:
        """A new variable; ``rank`` (binaries that stand for a choice) gives it a tie-break
        weight (:func:`tie_weight`)."""
        name = _unique(_sanitize(name), self._used)
        self.names.append(name)
        self.cost.append(cost)
        self.integer.append(integer)
        self.upper.append(upper)
        self.tie.append(0.0 if rank is None else tie_weight(rank, name))
        return len(self.names) - 1

    def row(self, name: str, idx: list[int], coef: list[float], lo: float, hi: float) -> None:
        self.rows.append((_unique(_sanitize(name), self._used), idx, coef, lo, hi))

    @property
    def num_variables(self) -> int:
        return len(self.names)

    @property
    def num_constraints(self) -> int:
        return len(self.rows)

    @property
    def num_binaries(self) -> int:
        return sum(self.integer)


#: bits of the tie-break weight's pseudo-random part
TIE_BITS = 20


def tie_weight(rank: int, name: str) -> float:
    """The tie-break weight of a choice variable: ``rank · 2^20 + h``, with ``rank`` its
    position in the canonical order of its alternatives (probe orders as enumerated: fewer and
    smaller MIRs first; partition attributes alphabetically) and ``h ∈ [1, 2^20]`` a fixed hash
    of its name.  Integral, so weight sums are exact in floating point.

    >>> tie_weight(0, "z_S_b") < tie_weight(1, "z_S_c") < tie_weight(2, "z_S_a")
    True
    >>> tie_weight(3, "x_q_R_S_T") == tie_weight(3, "x_q_R_S_T")
    True
    """
    import hashlib

    h = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") % (1 << TIE_BITS)
    return float((rank << TIE_BITS) + h + 1)


_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def _sanitize(name: str) -> str:
    """A name solvers and LP files accept: runs of other characters (underscores included)
    become one underscore.

    >>> _sanitize("y_R » S[a]→T"), _sanitize("m_R⋈S"), _sanitize("__")
    ('y_R_S_a_to_T', 'm_RS', 'v')
    """
    s = name.replace("→", "_to_").replace("⋈", "")
    return _NOT_ALNUM.sub("_", s).strip("_")[:200] or "v"


def _unique(name: str, used: set[str]) -> str:
    if name not in used:
        used.add(name)
        return name
    k = 2
    while f"{name}_{k}" in used:
        k += 1
    used.add(f"{name}_{k}")
    return f"{name}_{k}"


def build_model(cands: Candidates, policy: str = "single", mir_budget: float | None = None,
                replica_budget: float | None = None) -> Model:
    """Build the ILP of docs/model.md §5 for the candidates under a partitioning policy, with an
    optional memory budget (tuples) for the materialised MIRs.

    Policy ``budget``: the ``single`` model with ``Σ_A z_{M,A} ≥ u_M`` instead of ``= 1``
    (``u_M ≥ y_s`` for the steps into ``M``: a used store has at least one replica) and the
    row ``Σ_{M,A} mem(M)·z_{M,A} − Σ_M mem(M)·u_M ≤ replica_budget``: the memory of the
    replicas beyond the first of every store.  At 0 it is ``single``; unbounded (None) it
    costs what ``replicas`` costs."""
    check_policy(policy)
    check_budget(mir_budget)
    check_budget(replica_budget, "replica memory budget")
    t0 = time.perf_counter()
    mdl = Model(cands, policy)

    # materialisation indicators
    for owner in cands.owners:
        if isinstance(owner, MIR):
            mdl.m[owner] = mdl.var(f"m_{owner.label}")
    if mir_budget is not None and mdl.m:
        mirs = sorted(mdl.m, key=lambda m: m.sort_key())
        mdl.row("mir_memory_budget", [mdl.m[m] for m in mirs], [cands.memory(m) for m in mirs], -math.inf,
                float(mir_budget))

    # steps
    for s, c in sorted(cands.step_cost.items(), key=lambda kv: kv[0].sort_key()):
        mdl.y[s] = mdl.var(f"y_{s.render()}", cost=c)

    # partition choice and broadcast indicators (single and budget policies)
    if policy in ("single", BUDGET):
        used: dict[MIR, int] = {}
        for store, attrs in cands.partition_candidates.items():
            p = cands.parallelism(store)
            if p > 1 and len(attrs) > 1:
                idx = [mdl.var(f"z_{store.render_partition(a)}", integer=True, rank=r) for r, a in enumerate(attrs)]
                for a, i in zip(attrs, idx):
                    mdl.z[(store, a)] = i
                if policy == "single":
                    mdl.row(f"part_{store.label}", idx, [1.0] * len(idx), 1.0, 1.0)
                else:  # at least one replica of a used store (u binary: see _solve_highs)
                    u = used[store] = mdl.var(f"u_{store.label}", integer=True)
                    mdl.row(f"part_{store.label}", idx + [u], [1.0] * len(idx) + [-1.0], 0.0, math.inf)
        if policy == BUDGET:
            for s, yi in mdl.y.items():
                if s.target in used:
                    mdl.row(f"used_{s.render()}", [used[s.target], yi], [1.0, -1.0], 0.0, math.inf)
            if used and replica_budget is not None:
                zs = sorted(mdl.z.items(), key=lambda kv: kv[1])
                stores = sorted(used, key=lambda m: used[m])
                mdl.row("replica_memory_budget", [i for _, i in zs] + [used[m] for m in stores],
                        [cands.memory(m) for (m, _), _ in zs] + [-cands.memory(m) for m in stores],
                        -math.inf, float(replica_budget))
        for s in mdl.y:
            attrs = cands.partition_candidates[s.target]
            p = cands.parallelism(s.target)
            if p == 1 or s.known >= set(attrs):
                continue
            bi = mdl.b[s] = mdl.var(f"b_{s.render()}", cost=cands.step_cost[s] * (p - 1), upper=math.inf)
            known = [mdl.z[(s.target, a)] for a in attrs if a in s.known]
            # b_s - y_s + Σ_known z ≥ 0
            mdl.row(f"bcast_{s.render()}", [bi, mdl.y[s]] + known, [1.0, -1.0] + [1.0] * len(known), 0.0, math.inf)

    strengthen = cands.size["probe_orders"] <= STRENGTHEN_MAX_ORDERS
    # probe orders.  Within one (owner, start) group exactly one order is chosen (or none for
    # an unmaterialised MIR), so the links aggregate over the group:
    #   y_s ≥ Σ_{o ∈ G, s ∈ o} x_o      and      Σ_{o ∈ G, M ∈ o} x_o ≤ m_M
    # which imply the per-order links and have a tighter LP relaxation.
    for owner, by_start in cands.orders.items():
        olabel = owner_label(owner)
        for start, orders in by_start.items():
            idx = []
            step_users: dict[Step, list[int]] = {}
            mir_users: dict[MIR, list[int]] = {}
            for i, o in enumerate(orders):
                xi = mdl.var(f"x_{olabel}_{o.render()}", integer=True, rank=i)
                mdl.x[(owner, start, i)] = xi
                idx.append(xi)
                for m in o.elements:
                    if not m.is_base:
                        mir_users.setdefault(m, []).append(xi)
                for st in cands.steps[owner][start][i]:
                    step_users.setdefault(st, []).append(xi)
            for m, xs in mir_users.items():
                mdl.row(f"use_{olabel}_{start}_{m.label}", xs + [mdl.m[m]], [1.0] * len(xs) + [-1.0], -math.inf, 0.0)
            for st, xs in step_users.items():
                mdl.row(f"link_{olabel}_{start}_{st.render()}", [mdl.y[st]] + xs, [1.0] + [-1.0] * len(xs),
                        0.0, math.inf)
            if mdl.b and strengthen:
                _group_broadcast_rows(mdl, f"{olabel}_{start}", step_users)
            if isinstance(owner, MIR):
                mdl.row(f"mat_{owner.label}_{start}", idx + [mdl.m[owner]], [1.0] * len(idx) + [-1.0], 0.0, 0.0)
            else:
                mdl.row(f"one_{owner}_{start}", idx, [1.0] * len(idx), 1.0, 1.0)
    mdl.build_seconds = time.perf_counter() - t0
    return mdl


#: add the group broadcast rows (see _group_broadcast_rows) to models of at most this many
#: candidate probe orders.  Measured (HiGHS 1.15, single, random workloads over 100 relations):
#: 100 × size 3 (1,126 orders) root LP 502,167 → 616,854, solve 8.5 → 3.5 s (loaded machine);
#: 10 × size 5 (2,655) gap at 30 s 52 % → 34 %; 30 × size 5 (7,774) bound 226,540 → 240,839 but
#: its LP takes 4–6× longer, so at a 20–30 s limit HiGHS had no bound at all (gap reported 100 %)
STRENGTHEN_MAX_ORDERS = 5000


def _group_broadcast_rows(mdl: Model, label: str, step_users: dict[Step, list[int]]) -> None:
    """Valid rows that cut a weakness of the broadcast indicators (``single``/``budget``).

    ``b_s ≥ y_s − Σ_{A∈K(s)} z_{M,A}`` lets the LP serve *several* steps of one (owner, start)
    group into store ``M`` from the same fraction of ``z_{M,A}``: half the group's flow through
    one order, half through another, both "served" by ``z_{M,A} = ½``.  But a group chooses one
    order, and an order has at most one step into ``M``, so for every set ``K`` of attributes
    ``Σ_{o ∈ G whose step into M knows ⊆ K} x_o ≤ Σ_{A∈K} z_{M,A} + Σ_{s ∈ G into M, K(s) ⊆ K} b_s``
    (the chosen order's step is served by a kept attribute of ``K`` or broadcast).  Added for
    every ``K`` that is some step's known set, where two or more steps are involved."""
    cands = mdl.candidates
    by_store: dict[MIR, dict[Step, frozenset[Attr]]] = {}
    for st in step_users:
        if st in mdl.b:
            attrs = cands.partition_candidates[st.target]
            if (st.target, attrs[0]) in mdl.z:
                by_store.setdefault(st.target, {})[st] = frozenset(a for a in attrs if a in st.known)
    for store, known in by_store.items():
        for k in sorted(set(known.values()), key=sorted):
            inside = [st for st, kk in known.items() if kk <= k]
            if not k or len(inside) < 2:
                continue
            xs = sorted({x for st in inside for x in step_users[st]})
            zs = [mdl.z[(store, a)] for a in sorted(k)]
            bs = [mdl.b[st] for st in inside]
            mdl.row(f"gbcast_{label}_{store.label}_{'_'.join(a.name for a in sorted(k))}", xs + zs + bs,
                    [1.0] * len(xs) + [-1.0] * (len(zs) + len(bs)), -math.inf, 0.0)


# --------------------------------------------------------------------------------------------
# solving
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Solution:
    """Solver outcome.  ``status`` is ``"optimal"`` or ``"time_limit"`` (a feasible plan was
    found but not proven optimal: ``gap`` says how far from the bound it may be)."""

    status: str
    objective: float
    bound: float
    values: tuple[float, ...]
    solver: str
    solve_seconds: float
    components: int
    canonical: bool = False  # the equal-cost tie was broken canonically in every part

    @property
    def gap(self) -> float:
        if self.objective <= 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / self.objective)

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def value(self, index: int) -> float:
        return self.values[index]


def components(mdl: Model) -> list[tuple[list[int], list[int]]]:
    """Independent parts of the model: (variable indices, row indices) per component."""
    parent = list(range(mdl.num_variables))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for _, idx, _, _, _ in mdl.rows:
        r0 = find(idx[0])
        for j in idx[1:]:
            rj = find(j)
            if rj != r0:
                parent[rj] = r0
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for v in range(mdl.num_variables):
        groups.setdefault(find(v), ([], []))[0].append(v)
    for ri, (_, idx, _, _, _) in enumerate(mdl.rows):
        groups[find(idx[0])][1].append(ri)
    return sorted(groups.values(), key=lambda g: g[0][0])


def solve(mdl: Model, solver: str = "highs", time_limit: float | None = None, threads: int | None = None,
          start: list[float] | None = None, canonical: bool = True, solution_limit: int | None = None,
          relax_orders: bool | None = None, branching: bool | None = None) -> Solution:
    """Solve the model; raise unless a feasible plan is found.  A time limit that stops the
    solver before optimality gives ``status="time_limit"`` with the gap to the best bound.
    ``start`` is a feasible assignment of all variables the solver starts from (HiGHS).
    ``solution_limit`` (HiGHS) stops the solver at its ``solution_limit``-th improving solution — a
    limit that, unlike time, does not depend on the machine — with ``status="solution_limit"``.

    ``canonical``: among the equal-cost optima return the one of least tie-break weight
    (:func:`tie_weight`), found by a second solve that keeps the cost at the optimum (within a
    relative 1e-7) and minimises the weights of the chosen probe orders and partition
    attributes.  The weights do not depend on the solver, so neither does the plan: HiGHS of
    any version and CBC return the same one (unless two optima have equal weight sums, which
    the pseudo-random part of the weights makes unlikely: probability ≤ binaries / 2^20).
    The tie-break gets a quarter of the first solve's time (at least 0.25 s, at most what is left of
    the time limit); ``Solution.canonical`` says whether it proved every part canonical (not
    after a time limit, nor on large models where it runs out of time: then the plan is still
    optimal, but equal-cost choices may differ between solvers).

    Independent components are solved separately; small ones are batched into one solver
    call (a solver call has a fixed overhead of milliseconds).

    ``relax_orders``: solve :func:`orders_relaxed` first and keep its answer when its probe
    orders are integral (then it is exact), else solve the model as built (exact either way;
    None: when the model has an MIR of at least :data:`RELAX_MIN_MIR` relations and there is no
    ``solution_limit``).

    ``branching``: solve the parts that :func:`_branches` selects (one query's orders with an MIR
    of :data:`BRANCH_MIN_MIR` or more relations) by :func:`_branch_and_bound` instead of HiGHS's
    MIP (None: with HiGHS and no ``solution_limit``; False: never).  Exact either way."""
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
    status, objective, bound, is_canonical = "optimal", 0.0, 0.0, True
    comps = components(mdl)
    if branching is None:
        branching = solver == "highs" and solution_limit is None
    how = {id(p): ("branch" if _branches(mdl, p[0]) else "coupled" if _couples(mdl, p[0]) else "")
           for p in comps} if branching else {}
    parts = ([(p, how[id(p)]) for p in comps if how.get(id(p))]
             + [(p, "") for p in _batches([p for p in comps if not how.get(id(p))])])
    left_cols = sum(len(c) for (c, _), _ in parts)
    for (cols, rows), method in parts:
        by_branching = method == "branch"
        t1 = time.perf_counter()
        # under a time limit each part gets its share of what is left, by size (the first
        # part used to take it all, leaving 0.01 s to the others)
        share = len(cols) / left_cols
        left_cols -= len(cols)
        try:
            coupled = _solve_coupled(mdl, cols, rows, remaining(share), canonical) if method == "coupled" else None
        except NoSolutionError:
            if start is None:
                raise
            # stopped before the search found a plan: the start is the best plan so far
            vals = [float(start[c]) for c in cols]
            coupled = ("time_limit", math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), 0.0, vals, False)
        if coupled is not None:
            st, obj, bd, vals, done = coupled
            for c, v in zip(cols, vals):
                values[c] = v
            objective, bound, status = objective + obj, bound + bd, status if st == "optimal" else st
            is_canonical = is_canonical and done
            continue
        try:
            st, obj, bd, vals = _solve_part(mdl, cols, rows, solver, remaining(share), threads, start,
                                            solution_limit=solution_limit, relax_orders=relax_orders,
                                            branching=by_branching)
        except NoSolutionError:
            if start is None:
                raise
            # stopped before the solver even took up the start: it is the best plan so far
            vals = [float(start[c]) for c in cols]
            st, obj, bd = "time_limit", math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals)), 0.0
        if st == "optimal" and canonical and any(mdl.tie[c] for c in cols):
            # the objective stays the optimum's: the canonical values cost the same, up to the
            # slack that the continuous variables may take in the tie-break solve
            left = remaining()
            budget = max(TIE_MIN_SECONDS, TIE_SHARE * (time.perf_counter() - t1))
            done, vals = _tie_break(mdl, cols, rows, obj, vals, solver, budget if left is None else min(left, budget),
                                    threads, by_branching)
            is_canonical = is_canonical and done
        else:
            is_canonical = is_canonical and st == "optimal"
        for c, v in zip(cols, vals):
            values[c] = v
        objective += obj
        bound += bd
        if st != "optimal":
            status = st
    return Solution(status, objective, min(bound, objective), tuple(values), solver,
                    time.perf_counter() - t0, len(comps), canonical and is_canonical)


def _solve_part(mdl: Model, cols: list[int], rows: list[int], solver: str, time_limit: float | None,
                threads: int | None, start: list[float] | None, integral_objective: bool = False,
                solution_limit: int | None = None, relax_orders: bool = False,
                branching: bool = False) -> tuple[str, float, float, list[float]]:
    if branching:
        return _branch_and_bound(mdl, cols, rows, time_limit, start, integral_objective)
    if relax_orders and any(mdl.integer[c] for c in cols):
        return _solve_orders_relaxed(mdl, cols, rows, solver, time_limit, threads, start, integral_objective)
    if solver == "highs":
        return _solve_highs(mdl, cols, rows, time_limit, threads, start, integral_objective, solution_limit)
    return _solve_cbc(mdl, cols, rows, time_limit, integral_objective)


#: phase one of :func:`_solve_coupled` by its master ILP from this many shared stores on (fewer:
#: the depth-first search over their choices)
MASTER_MIN_STORES = 12

#: at most this many combinations of the choices blocks tell apart are costed up front by
#: :func:`_solve_coupled` on parts with small MIRs (more: the part goes to HiGHS's MIP)
QUICK_MAX_COMBINATIONS = 5000

#: solve a part by :func:`_branch_and_bound` (HiGHS only) when it holds an MIR of at least this
#: many relations and the probe orders of at most one query (see :func:`_branches`)
BRANCH_MIN_MIR = 4


def _branches(mdl: Model, cols: list[int]) -> bool:
    """Whether a part is solved by :func:`_branch_and_bound`: it has an MIR of at least
    :data:`BRANCH_MIN_MIR` relations (five-way queries, where HiGHS spends seconds in cuts and
    heuristics on a root gap that is all in ``m``) and holds one query's orders only (parts
    coupled by shared stores carry the partition choices ``z`` of several queries, whose gap
    HiGHS's cuts close and plain LP branching does not; measured in the module docstring)."""
    if not _large_mirs(mdl, cols):
        return False
    inside = set(cols)
    queries = {owner for (owner, _, _), i in mdl.x.items() if isinstance(owner, str) and i in inside}
    return len(queries) <= 1


def _branch_and_bound(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                      start: list[float] | None = None, integral_objective: bool = False,
                      highs=None) -> tuple[str, float, float, list[float]]:
    """An LP-based branch and bound over one part that branches on the MIR indicators ``m``
    first, then on partition choices and probe orders: the HiGHS LP (dual simplex, warm from the
    parent's basis) at every node, depth first towards the rounded LP value, a node pruned when
    its LP bound cannot beat the incumbent (by more than HiGHS's own gap settings: 1e-9
    relative, or 0.99 for integral objectives).  Exact: every integer variable is branched on
    until the LP optimum is integral.  On a five-way query the LP with ``m`` fixed is integral,
    so the tree is a few dozen nodes of milliseconds, where HiGHS's MIP spends 1–3 s in cuts
    and heuristics at the root.  Under a time limit it returns the incumbent with the least
    bound of the open nodes (a start, when given, is the first incumbent).  ``highs``: a HiGHS
    instance that holds this part's LP already (its column bounds are set at every node, so
    only the rows and costs must match): :func:`_solve_coupled` reuses one per block."""
    import highspy
    import numpy as np

    t0 = time.perf_counter()
    n = len(cols)
    local = {c: i for i, c in enumerate(cols)}
    h = highs
    if h is None:
        h = _lp_highs(highspy)
        h.passModel(_highs_lp(mdl, cols, rows, highspy, np))
    lower = np.zeros(n)
    upper = np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in cols])
    every = np.arange(n, dtype=np.int32)
    # branching order: materialisation first, then the binaries of the model
    ms = [local[i] for i in mdl.m.values() if i in local]
    binaries = [j for j, c in enumerate(cols) if mdl.integer[c]]
    zs = set(local[i] for i in mdl.z.values() if i in local)
    tiers = [ms, [j for j in binaries if j in zs], [j for j in binaries if j not in zs]]
    must = set(binaries)
    tol = INTEGRALITY_TOLERANCE

    best, best_vals = math.inf, None
    if start is not None:
        best_vals = [float(start[c]) for c in cols]
        best = math.fsum(mdl.cost[c] * v for c, v in zip(cols, best_vals))

    def beaten(bound: float) -> bool:  # no node below this bound can improve the incumbent
        if integral_objective:
            return bound > best - 0.99
        return bound >= best - 1e-9 * max(1.0, abs(best))

    # a node: (fixings as (column, value) pairs, the parent's LP bound)
    stack: list[tuple[tuple[tuple[int, float], ...], float]] = [((), -math.inf)]
    stopped = False
    while stack:
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            stopped = True
            break
        fixed, parent = stack.pop()
        if beaten(parent):
            continue
        lo, up = lower.copy(), upper.copy()
        for j, v in fixed:
            lo[j] = up[j] = v
        h.changeColsBounds(n, every, lo, up)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            continue  # infeasible fixings
        vals = np.asarray(h.getSolution().col_value)
        bound = float(h.getInfo().objective_function_value)
        if beaten(bound):
            continue
        pick = None
        for tier in tiers:
            frac = [(abs(vals[j] - 0.5), j) for j in tier if tol < vals[j] - math.floor(vals[j]) < 1 - tol]
            if frac:
                pick = min(frac)[1]
                break
        if pick is None:  # integral: the new incumbent
            best_vals = [float(round(v)) if j in must else float(v) for j, v in enumerate(vals)]
            best = math.fsum(mdl.cost[c] * v for c, v in zip(cols, best_vals))
            continue
        near = 1.0 if vals[pick] >= 0.5 else 0.0
        stack.append((fixed + ((pick, 1.0 - near),), bound))
        stack.append((fixed + ((pick, near),), bound))
    if best_vals is None:
        if stopped:
            raise NoSolutionError("the solver reached its time limit before it found any plan; "
                                  "raise the time limit (--time-limit) or disable MIRs (--no-mirs)")
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    if not stopped:
        return "optimal", best, best, best_vals
    bound = min([best] + [b for _, b in stack])
    return "time_limit", best, max(0.0, bound), best_vals


def searched(mdl: Model) -> bool:
    """Whether :func:`solve` (HiGHS, default ``branching``) searches every part of the model
    itself (:func:`_branches`, :func:`_couples`) rather than handing one to HiGHS's MIP: then a
    start is only the plan kept should a time limit strike before the search has one (see
    ``optimizer._solve_workload``)."""
    return all(_branches(mdl, cols) or _couples(mdl, cols) for cols, _ in components(mdl))


def _large_mirs(mdl: Model, cols: list[int]) -> bool:
    """Whether a part holds an MIR of at least :data:`BRANCH_MIN_MIR` relations."""
    inside = set(cols)
    return any(len(m.relations) >= BRANCH_MIN_MIR and i in inside for m, i in mdl.m.items())


def _couples(mdl: Model, cols: list[int]) -> bool:
    """Whether a part is solved by :func:`_solve_coupled`: policy ``single`` and the orders of
    several queries (coupled through the partition choices of the stores they share)."""
    if mdl.policy != "single":
        return False
    inside = set(cols)
    return len({owner for (owner, _, _), i in mdl.x.items() if isinstance(owner, str) and i in inside}) > 1


@dataclass(frozen=True)
class _Block:
    """One block of a coupled part: its columns and rows (the shared stores' ``z`` and
    ``Σ_A z_{S,A} = 1`` rows included) and the shared stores it touches."""

    cols: list[int]
    rows: list[int]
    stores: tuple[MIR, ...]


class _Stopped(Exception):
    pass


def _blocks(mdl: Model, cols: list[int], rows: list[int]) -> tuple[list[_Block], dict[MIR, list[int]]] | None:
    """Split a part at the partition choices ``z``: blocks of the columns linked through rows
    without counting ``z`` (here: one query each, with its MIRs), and the stores whose ``z``
    lie in the rows of several blocks (shared stores: store → its ``z`` columns in candidate
    order).  None when that leaves one block."""
    zs = {i: store for (store, _), i in mdl.z.items()}
    parent = {c: c for c in cols}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for r in rows:
        idx = [i for i in mdl.rows[r][1] if i not in zs]
        for j in idx[1:]:
            a, b = find(j), find(idx[0])
            if a != b:
                parent[a] = b
    roots = sorted({find(c) for c in cols if c not in zs})
    if len(roots) < 2:
        return None
    number = {r: k for k, r in enumerate(roots)}
    touch: dict[MIR, set[int]] = {}
    for r in rows:
        idx = mdl.rows[r][1]
        plain = [i for i in idx if i not in zs]
        if plain:
            for i in idx:
                if i in zs:
                    touch.setdefault(zs[i], set()).add(number[find(plain[0])])
    zcols: dict[MIR, list[int]] = {}
    for (store, _), i in mdl.z.items():
        if i in parent:
            zcols.setdefault(store, []).append(i)
    shared = {st: zc for st, zc in zcols.items() if len(touch.get(st, ())) > 1}
    b_cols: list[list[int]] = [[] for _ in roots]
    b_rows: list[list[int]] = [[] for _ in roots]
    for c in cols:
        if c not in zs:
            b_cols[number[find(c)]].append(c)
        elif zs[c] in shared:
            for k in touch[zs[c]]:
                b_cols[k].append(c)
        else:
            b_cols[min(touch.get(zs[c], {0}))].append(c)
    for r in rows:
        idx = mdl.rows[r][1]
        plain = [i for i in idx if i not in zs]
        if plain:
            b_rows[number[find(plain[0])]].append(r)
        elif zs[idx[0]] in shared:  # Σ_A z = 1 of a shared store: in every block it touches
            for k in touch[zs[idx[0]]]:
                b_rows[k].append(r)
        else:
            b_rows[min(touch.get(zs[idx[0]], {0}))].append(r)
    stores = [tuple(sorted((st for st in shared if k in touch[st]), key=MIR.sort_key)) for k in range(len(roots))]
    return [_Block(sorted(c), r, st) for c, r, st in zip(b_cols, b_rows, stores)], shared


def _solve_coupled(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                   canonical: bool) -> tuple[str, float, float, list[float], bool] | None:
    """Solve a part whose queries are coupled only through the partition choices of shared
    stores (``single``): a search over those choices, one store at a time, where a choice of
    every shared store leaves independent blocks (one query each) solved exactly by
    :func:`_branch_and_bound`, and a partial choice is bounded by the blocks' exact optima
    with the undecided stores chosen by each block for itself (a relaxation: blocks may
    choose differently).  Block optima are cached by the choices they see, and a block starts
    from a plan it found under other choices, recosted (every plan is feasible under every
    choice; only its broadcasts change).

    With ``canonical`` a second pass visits every choice whose bound is within
    :data:`TIE_SLACK` of the optimum and, at those that reach it, breaks the tie as
    :func:`_tie_break` does, block by block: cost and tie-break weight both add up over the
    blocks once the shared choices are fixed, so the least (cost, weight) found is the
    canonical optimum of the part (not run where the master ILP found the optimum: the plan
    is optimal, ``canonical`` says it is not proven canonical).  Returns (status, objective,
    bound, values, canonical proven), or None when the part does not split into blocks."""
    import highspy
    import numpy as np

    split = _blocks(mdl, cols, rows)
    if split is None:
        return None
    blocks, shared = split
    t0 = time.perf_counter()
    limit = [None if time_limit is None else t0 + time_limit]
    shared_z = {i for zc in shared.values() for i in zc}
    # shared z weigh in the tie-break once, here, not in every block that sees them
    tie = [0.0 if i in shared_z else w for i, w in enumerate(mdl.tie)]
    tie_of = {st: [mdl.tie[i] for i in zc] for st, zc in shared.items()}
    costs: dict[tuple, tuple[float, list[float]]] = {}  # (block, choices it sees) → optimum, values
    ties: dict[tuple, tuple[float, list[float], bool]] = {}  # → weight, values, proven
    lps: dict[tuple[int, int], object] = {}  # one HiGHS instance per block and stage
    bcast = [(bi, mdl.y[s], [mdl.z[(s.target, a)] for a in s.known if (s.target, a) in mdl.z])
             for s, bi in mdl.b.items()]

    # a choice matters to a block only through which of its broadcast steps it serves: choices
    # that serve the same steps are one (cached once; their values differ in the shared z only)
    # (numbered: keys hash fast)
    serving: dict[int, list[int]] = {}  # z → the broadcast indicators of the steps it serves
    for bi, _, zs in bcast:
        for i in zs:
            serving.setdefault(i, []).append(bi)
    number: dict[frozenset[int], int] = {}
    served: dict[tuple[int, MIR, int], int] = {}
    for k, b in enumerate(blocks):
        inside = set(b.cols)
        for st in b.stores:
            for j, i in enumerate(shared[st]):
                steps = frozenset(bi for bi in serving.get(i, ()) if bi in inside)
                served[(k, st, j)] = number.setdefault(steps, len(number))

    def key_of(k: int, choice: dict[MIR, int]) -> tuple:
        return (k, tuple(None if choice.get(st) is None else served[(k, st, choice[st])]
                         for st in blocks[k].stores))

    def patched(k: int, vals: list[float], choice: dict[MIR, int]) -> list[float]:
        """A block's values with the shared z as chosen (assigned stores)."""
        vals = list(vals)
        for st in blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(shared[st]):
                    vals[pos[k][i]] = 1.0 if j == choice[st] else 0.0
        return vals

    def left() -> float | None:
        if limit[0] is None:
            return None
        if time.perf_counter() > limit[0]:
            raise _Stopped
        return max(0.01, limit[0] - time.perf_counter())

    def instance(k: int, stage: int, sub, brows: list[int]):
        """The block's HiGHS instance of a stage, built from ``sub()`` (a model) the first time."""
        if (k, stage) not in lps:
            lps[(k, stage)] = _lp_highs(highspy)
            if quick:  # tiny LPs, one per combination: presolve off (100 × 3: solve 0.41 against 0.46 s)
                lps[(k, stage)].setOptionValue("presolve", "off")
            lps[(k, stage)].passModel(_highs_lp(sub(), blocks[k].cols, brows, highspy, np))
        return lps[(k, stage)]

    def restricted(k: int, choice: dict[MIR, int]) -> Model:
        upper = list(mdl.upper)
        for st in blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(shared[st]):
                    if j != choice[st]:
                        upper[i] = 0.0  # the row Σ z = 1 makes the chosen one 1
        return replace(mdl, upper=upper, tie=tie)

    pos = [{c: n for n, c in enumerate(b.cols)} for b in blocks]
    bcast_in = [[(pos[k][bi], pos[k][yi], [pos[k][z] for z in zs]) for bi, yi, zs in bcast if bi in pos[k]]
                for k in range(len(blocks))]
    pool: dict[int, list[list[float]]] = {}  # plans found per block (first stage)
    known: dict[int, list] = {}  # the cached optima per block: (choices it saw, (optimum, values))

    def recost(k: int, vals: list[float], choice: dict[MIR, int]) -> tuple[float, list[float]]:
        """A plan of the block under these choices: shared z as chosen, broadcasts anew (every
        plan is feasible under every choice; only which of its steps broadcast changes)."""
        vals = patched(k, vals, choice)
        for b, y, zs in bcast_in[k]:
            vals[b] = max(0.0, vals[y] - sum(vals[z] for z in zs))
        return math.fsum(mdl.cost[c] * v for c, v in zip(blocks[k].cols, vals)), vals

    integer = [np.array([n for n, c in enumerate(b.cols) if mdl.integer[c]], dtype=np.int64) for b in blocks]
    uppers = [np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in b.cols])
              for b in blocks]

    def block_lp(k: int, h, choice: dict[MIR, int]) -> tuple[float, list[float] | None] | None:
        """The block's LP under the choices on its HiGHS instance ``h`` (either stage): its
        optimum (a lower bound of the block's optimum there) and its values when the binaries
        come out integral (then they are the block's optimum under the choices), else None."""
        left()  # the time limit
        n = len(blocks[k].cols)
        up = uppers[k].copy()
        for st in blocks[k].stores:
            if choice.get(st) is not None:
                for j, i in enumerate(shared[st]):
                    if j != choice[st]:
                        up[pos[k][i]] = 0.0
        h.changeColsBounds(n, np.arange(n, dtype=np.int32), np.zeros(n), up)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        vals = np.asarray(h.getSolution().col_value)
        obj = float(h.getInfo().objective_function_value)
        ints = vals[integer[k]]
        if np.any(np.abs(ints - np.round(ints)) > INTEGRALITY_TOLERANCE):
            return obj, None
        vals[integer[k]] = np.round(ints)
        return obj, [float(v) for v in vals]

    lp_bounds: dict[tuple, float] = {}  # (block, choices it sees) → its LP optimum, when fractional

    def lower(k: int, key: tuple) -> float:
        """The best bound known of a block's optimum under a choice (``key``) not costed yet:
        its LP optimum, or the optimum of a cached, less decided choice."""
        return max([v[0] for kk, v in known.get(k, ()) if all(x is None or x == y for x, y in zip(kk, key[1]))]
                   + [lp_bounds.get(key, -math.inf)])

    def lp_cost(k: int, choice: dict[MIR, int]) -> float:
        """The block's LP under the choices: its optimum when integral (costed then), else a
        bound (``lp_bounds``); either way the best bound known (``lower``)."""
        key = key_of(k, choice)
        if key not in costs and key not in lp_bounds:
            b = blocks[k]
            res = block_lp(k, instance(k, 0, lambda: restricted(k, choice), b.rows), choice)
            if res is not None and res[1] is not None:
                costs[key] = (math.fsum(mdl.cost[c] * v for c, v in zip(b.cols, res[1])), res[1])
            elif res is not None:
                lp_bounds[key] = res[0]
        return costs[key][0] if key in costs else lower(k, key)

    def cost(k: int, choice: dict[MIR, int]) -> float:
        """The block's optimum under the choices: its LP when integral (small MIRs, ``quick``,
        or the master's LP prices, ``lp_priced``), else the best recosted known plan when it
        meets the best bound known (exact then), else a branch and bound from it."""
        b = blocks[k]
        key = key_of(k, choice)
        if quick or lp_priced:  # one LP (integral as a rule with small MIRs) is cheaper than recosting
            lp_cost(k, choice)
        if key not in costs:
            bound = lower(k, key)
            plan = min((recost(k, vals, choice) for vals in pool.get(k, [])), key=lambda t: t[0], default=None)
            if plan is not None and plan[0] <= bound + 1e-9 * max(1.0, abs(bound)):
                costs[key] = plan
                known.setdefault(k, []).append((key[1], plan))
                return plan[0]
            start = None
            if plan is not None:
                start = [0.0] * mdl.num_variables
                for c, v in zip(b.cols, plan[1]):
                    start[c] = v
            sub = restricted(k, choice)
            st, obj, _, vals = _branch_and_bound(sub, b.cols, b.rows, left(), start=start,
                                                 highs=instance(k, 0, lambda: sub, b.rows))
            if st != "optimal":
                raise _Stopped
            costs[key] = (obj, vals)
            known.setdefault(k, []).append((key[1], costs[key]))
            pool.setdefault(k, []).append(vals)
        return costs[key][0]

    def weight(k: int, choice: dict[MIR, int]) -> float:
        b = blocks[k]
        key = key_of(k, choice)
        if key not in ties:
            obj, vals = costs[key]
            vals = patched(k, vals, choice)
            if not any(tie[c] for c in b.cols):
                ties[key] = (0.0, vals, True)
            else:
                cap = obj * (1 + TIE_SLACK) + TIE_SLACK

                def second() -> Model:
                    costed = [c for c in b.cols if mdl.cost[c]]
                    return replace(restricted(k, choice), cost=tie, rows=mdl.rows + [
                        ("canonical_cost", costed, [mdl.cost[c] for c in costed], -math.inf, cap)])

                brows = b.rows + [len(mdl.rows)]
                h = instance(k, 1, second, brows)
                h.changeRowBounds(len(b.rows), -highspy.kHighsInf, cap)
                res = block_lp(k, h, choice) if quick else None
                vals2 = None if res is None else res[1]
                if vals2 is not None:
                    ties[key] = (math.fsum(tie[c] * v for c, v in zip(b.cols, vals2)), vals2, True)
                    return ties[key][0]
                start = [0.0] * mdl.num_variables
                for c, v in zip(b.cols, vals):
                    start[c] = v
                st, w, _, vals2 = _branch_and_bound(second(), b.cols, brows, left(), start=start,
                                                    integral_objective=True, highs=h)
                ties[key] = (w, vals2, st == "optimal")
        return ties[key][0]

    stores = sorted(shared, key=lambda st: (-sum(st in b.stores for b in blocks), st.sort_key()))
    # small MIRs (three- and four-way queries): a block's LP under a choice came out integral
    # on every goal workload, so every combination is costed by one LP and the master is exact
    quick = not _large_mirs(mdl, cols)
    by_master = quick or len(stores) >= MASTER_MIN_STORES
    best: dict = {"cost": math.inf, "weight": math.inf, "choice": None}
    choice: dict[MIR, int] = {}

    classes = {}  # (block, store) → the choices it tells apart: lists of attribute indices
    for k, b in enumerate(blocks):
        for st in b.stores:
            by: dict[int, list[int]] = {}
            for j in range(len(shared[st])):
                by.setdefault(served[(k, st, j)], []).append(j)
            classes[(k, st)] = list(by.values())
    # (block, combination of the classes of its stores); consecutive combinations of a block
    # differ in one store, so each LP starts near the last one's basis (30 × 5: 0.25 s less)
    lam = [(k, t) for k, b in enumerate(blocks) for t in _reflected([len(classes[(k, st)]) for st in b.stores])]
    if quick and len(lam) > QUICK_MAX_COMBINATIONS:
        return None
    # large MIRs under the master: every combination priced by its LP (integral: costed) before
    # the first master, so the master's bound starts near the optimum (30 × 5: 288,000 against
    # 240,000 with the blocks' optima alone; optimum 321,000) and few combinations need a branch
    # and bound (301 against 626 of 748 + 30)
    lp_priced = by_master and not quick and len(lam) <= QUICK_MAX_COMBINATIONS

    alone = [(k, ()) for k in range(len(blocks))]  # every block once, for _per_block

    def chosen_by(k: int, t: tuple[int, ...]) -> dict[MIR, int]:
        """A choice of the block's stores (the first attribute of each class) of a combination."""
        return {st: classes[(k, st)][c][0] for st, c in zip(blocks[k].stores, t)}

    def master():
        """Phase one by a master ILP (:data:`MASTER_MIN_STORES` shared stores or more, or every
        combination costed up front: ``quick``): binary ``z`` of the shared stores and, per block,
        one column per combination of the choices it can tell apart, costed by the block's
        optimum there when known, else by the best bound of a less decided cached choice.  Its
        optimum is a lower bound; the blocks' optima under its choice (computed, cached) give a
        plan; repeated until the master's choice is costed exactly everywhere (then optimal).
        With every combination costed (``quick``) and ``canonical``, a second master breaks the
        tie: the least tie-break weight (the blocks' lexicographic optima under each
        combination, plus the shared ``z``) at a cost within :data:`TIE_SLACK` of the optimum,
        run by the function returned."""
        zcol, names = {}, 0
        for st in stores:
            for j in range(len(shared[st])):
                zcol[(st, j)] = names
                names += 1
        n = names + len(lam)
        starts, index, value, lo, hi = [0], [], [], [], []

        def row(idx, coef, l, u):
            index.extend(idx)
            value.extend(coef)
            starts.append(len(index))
            lo.append(l)
            hi.append(u)

        for st in stores:
            row([zcol[(st, j)] for j in range(len(shared[st]))], [1.0] * len(shared[st]), 1.0, 1.0)
        users: dict[tuple, list[int]] = {}
        for li, (k, t) in enumerate(lam):
            users.setdefault((k,), []).append(names + li)
            for st, c in zip(blocks[k].stores, t):
                users.setdefault((k, st, c), []).append(names + li)
        for k in range(len(blocks)):
            row(users[(k,)], [1.0] * len(users[(k,)]), 1.0, 1.0)
            for st in blocks[k].stores:
                for c, attrs in enumerate(classes[(k, st)]):
                    idx = users.get((k, st, c), []) + [zcol[(st, j)] for j in attrs]
                    row(idx, [1.0] * len(users.get((k, st, c), [])) + [-1.0] * len(attrs), 0.0, 0.0)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(lo)
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
        lp.row_lower_, lp.row_upper_ = np.array(lo, dtype=float), np.array(hi, dtype=float)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=float)
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, len(lo)
        lp.integrality_ = [highspy.HighsVarType.kInteger] * names + [highspy.HighsVarType.kContinuous] * len(lam)
        h = _silent_highs(highspy)
        h.setOptionValue("mip_rel_gap", 1e-9)
        if not quick:  # re-solved after every pick (30 × 5: 19 masters 0.94 → 0.65 s; 100 × 3: no gain)
            h.setOptionValue("presolve", "off")
        h.passModel(lp)

        def priced(k, t) -> float:
            kk = key_of(k, chosen_by(k, t))
            return costs[kk][0] if kk in costs else lower(k, kk)

        def run() -> dict[MIR, int]:
            left_s = left()
            if left_s is not None:
                h.setOptionValue("time_limit", left_s)
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                raise _Stopped
            vals = h.getSolution().col_value
            return {st: next(j for j in range(len(shared[st])) if vals[zcol[(st, j)]] > 0.5) for st in stores}

        lam_cols = np.arange(names, n, dtype=np.int32)
        while True:
            h.changeColsCost(len(lam), lam_cols, np.array([priced(k, t) for k, t in lam], dtype=float))
            pick = run()
            lower_bound = float(h.getInfo().objective_function_value)
            current[:] = [lower_bound]
            exact = all(key_of(k, pick) in costs for k in range(len(blocks)))
            total = math.fsum(_per_block(lambda k, _: cost(k, pick), alone))
            if total < best["cost"]:
                best.update(cost=total, choice=dict(pick))
            if exact or best["cost"] <= lower_bound + 1e-9 * max(1.0, abs(lower_bound)):
                break

        def tie_break() -> None:
            """The least weight at the optimal cost: the blocks' lexicographic optima under every
            combination that may be part of an optimal choice (the others are ruled out by the
            reduced costs of a dual solution of the master's LP), then the master by weight."""
            cap = best["cost"] * (1 + TIE_SLACK) + TIE_SLACK
            prices = np.array([priced(k, t) for k, t in lam], dtype=float)
            out = np.flatnonzero(_ruled_out(lp, np.concatenate([np.zeros(names), prices]), cap)[names:])
            skip = set(out.tolist())
            weights = _per_block(lambda k, t: weight(k, chosen_by(k, t)), lam, skip)
            h.changeColsBounds(len(out), (names + out).astype(np.int32), np.zeros(len(out)), np.zeros(len(out)))
            h.addRow(-highspy.kHighsInf, cap, len(lam), lam_cols, prices)
            h.changeColsCost(n, np.arange(n, dtype=np.int32),
                             np.array([tie_of[st][j] for st in stores for j in range(len(shared[st]))] + weights))
            h.setOptionValue("mip_rel_gap", 0.0)  # integral weights: a gap below 1 proves the optimum
            h.setOptionValue("mip_abs_gap", 0.99)
            pick = run()
            best.update(weight=float(h.getInfo().objective_function_value), choice=pick)

        return tie_break

    def first_plan() -> None:
        """A plan before any combination is costed (kept should a time limit strike before the
        master's first plan): each shared store partitioned by the attribute most blocks chose
        alone (the first on a tie), each block's plan alone recosted there."""
        alone_plans = [costs[key_of(k, {})][1] for k in range(len(blocks))]
        votes: dict[tuple[MIR, int], int] = {}
        for k, b in enumerate(blocks):
            for st in b.stores:
                for j, i in enumerate(shared[st]):
                    if alone_plans[k][pos[k][i]] > 0.5:
                        votes[(st, j)] = votes.get((st, j), 0) + 1
        pick = {st: max(range(len(shared[st])), key=lambda j: (votes.get((st, j), 0), -j)) for st in stores}
        plans = [recost(k, vals, pick) for k, vals in enumerate(alone_plans)]
        best.update(cost=math.fsum(p[0] for p in plans), choice=pick, recosted=[p[1] for p in plans])

    pending: list[list[float]] = []  # per depth: the bounds of the siblings not visited yet
    current: list[float] = []  # the bound of the node being visited

    def search(depth: int, parts: dict[int, float], second: bool) -> None:
        total = math.fsum(parts.values())
        current[:] = [total]
        left()  # the time limit
        if second:
            if total > best["cost"] * (1 + TIE_SLACK) + TIE_SLACK:
                return
        elif total >= best["cost"] - 1e-9 * max(1.0, abs(best["cost"])):
            return
        if depth == len(stores):
            if not second:
                best.update(cost=total, choice=dict(choice))
                return
            w = (math.fsum(weight(k, choice) for k in range(len(blocks)))
                 + math.fsum(tie_of[st][choice[st]] for st in stores))
            if w < best["weight"]:
                best.update(weight=w, choice=dict(choice))
            return
        st = stores[depth]
        children = []
        for a in range(len(shared[st])):
            choice[st] = a
            child = dict(parts)
            for k, b in enumerate(blocks):
                if st in b.stores:
                    child[k] = cost(k, choice)
            children.append((math.fsum(child.values()), tie_of[st][a], a, child))
        children.sort(key=lambda t: t[:3])
        pending.append([t[0] for t in children])
        for _, _, a, child in children:
            pending[-1].pop(0)
            choice[st] = a
            search(depth + 1, child, second)
        pending.pop()
        del choice[st]

    status, root, optimum = "optimal", 0.0, math.inf
    try:
        if quick:  # every combination costed up front: the master's first choice is exact
            _per_block(lambda k, t: cost(k, chosen_by(k, t)), lam)
        else:  # each block alone: the root bound
            parts = dict(enumerate(_per_block(lambda k, _: cost(k, choice), alone)))
            root = math.fsum(parts.values())
            if by_master:  # a plan at once (the LPs take seconds on 30 × 5)
                first_plan()
            if lp_priced:
                _per_block(lambda k, t: lp_cost(k, chosen_by(k, t)), lam)
        tie_break = master() if by_master else search(0, parts, False)
        optimum = best["cost"]
        if canonical and quick:
            tie_break()
        elif canonical and by_master:
            status = "canonical_time_limit"  # no second pass: depth first it would not end there
        elif canonical:  # the second pass may take as long as the first (≥ 0.25 s): it visits the
            # optimal choices again and breaks ties in their blocks (HiGHS-solved parts: a quarter)
            spent = max(TIE_MIN_SECONDS, time.perf_counter() - t0)
            limit[0] = time.perf_counter() + spent if limit[0] is None else min(limit[0], time.perf_counter() + spent)
            search(0, parts, True)
    except _Stopped:
        status = "time_limit"
        # not visited: the pending siblings and the subtree of the node being visited (whose
        # bound is at least its parent's); before the first pass ends, nothing else is proven
        if math.isfinite(optimum):  # stopped in the canonical pass: optimal, not proven canonical
            status = "canonical_time_limit"
        elif by_master:
            root = max([root] + current)  # the master's last optimum
        elif pending:
            root = min([best["cost"], *(b for level in pending for b in level)] + current)
        if best["choice"] is None:
            raise NoSolutionError("the solver reached its time limit before it found any plan; "
                                  "raise the time limit (--time-limit) or disable MIRs (--no-mirs)") from None
    chosen = best["choice"]
    values = [0.0] * mdl.num_variables
    proven = canonical and status == "optimal"
    if status == "canonical_time_limit":  # optimal; the tie not (provably) broken
        status = "optimal"
    for k, b in enumerate(blocks):
        key = key_of(k, chosen)
        vals = costs[key][1] if key in costs else best["recosted"][k]  # first_plan's, at a time limit
        if canonical and key in ties:
            vals = ties[key][1]
            proven = proven and ties[key][2]
        elif canonical:
            proven = False
        for c, v in zip(b.cols, patched(k, vals, chosen)):
            values[c] = v
    out = [values[c] for c in cols]
    obj = math.fsum(mdl.cost[c] * v for c, v in zip(cols, out))
    if status == "optimal":  # the optimum, without the slack the tie-break lets continuous columns take
        return status, min(obj, optimum), min(obj, optimum), out, proven
    return status, obj, min(obj, root), out, False


#: threads that cost the blocks' combinations in :func:`_solve_coupled` (HiGHS releases the GIL
#: while it solves, and every block has HiGHS instances of its own)
BLOCK_THREADS = min(4, os.cpu_count() or 1)


def _per_block(fn: Callable[[int, tuple], float], pairs: list[tuple[int, tuple]],
               skip: set[int] = frozenset()) -> list[float]:
    """``fn(block, combination)`` for every pair (0.0 for the indices in ``skip``), the blocks
    spread over :data:`BLOCK_THREADS` threads, each block's pairs in their order (so the results
    do not depend on the threads).  The first exception raised is raised here.

    >>> _per_block(lambda k, t: 10 * k + t[0], [(0, (1,)), (1, (2,)), (0, (3,))], skip={1})
    [1, 0.0, 3]
    """
    out: list[float] = [0.0] * len(pairs)
    groups: dict[int, list[int]] = {}
    for i, (k, _) in enumerate(pairs):
        if i not in skip:
            groups.setdefault(k, []).append(i)

    def run(indices: list[int]) -> None:
        for i in indices:
            out[i] = fn(*pairs[i])

    if BLOCK_THREADS < 2 or len(groups) < 2:
        for indices in groups.values():
            run(indices)
    else:  # the longest first, so that no thread is left with one at the end
        with ThreadPoolExecutor(BLOCK_THREADS) as pool:
            list(pool.map(run, sorted(groups.values(), key=len, reverse=True)))
    return out


def _reflected(radices: list[int]) -> list[tuple[int, ...]]:
    """Every combination of digits below the radices, consecutive ones differing in one digit
    (the reflected mixed-radix Gray order).

    >>> _reflected([2, 3])
    [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]
    """
    out: list[tuple[int, ...]] = [()]
    for r in radices:
        out = [p + (d,) for i, p in enumerate(out) for d in (range(r) if i % 2 == 0 else reversed(range(r)))]
    return out


def _ruled_out(lp, cost, cap: float):
    """Which binaries of a 0-1 program (``lp``: a ``highspy.HighsLp`` of equality rows and
    columns in [0, 1], here with objective ``cost``) are 0 in every solution of objective at
    most ``cap``: by a dual solution ``y`` of its LP, every solution costs at least
    ``L + d_j`` when ``x_j = 1`` (``d = cost − Aᵀy``, ``L = y·b + Σ min(0, d)``, any ``y``: weak
    duality), so ``x_j = 0`` when that exceeds ``cap`` (beyond floating-point noise).  A boolean
    array per column; none ruled out when the LP is not solved."""
    import highspy
    import numpy as np

    h = _silent_highs(highspy)
    relaxed = highspy.HighsLp()
    relaxed.num_col_, relaxed.num_row_ = lp.num_col_, lp.num_row_
    relaxed.col_cost_, relaxed.col_lower_, relaxed.col_upper_ = cost, lp.col_lower_, lp.col_upper_
    relaxed.row_lower_, relaxed.row_upper_ = lp.row_lower_, lp.row_upper_
    relaxed.a_matrix_ = lp.a_matrix_
    h.passModel(relaxed)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.zeros(lp.num_col_, dtype=bool)
    y = np.asarray(h.getSolution().row_dual)
    a = lp.a_matrix_
    rows = np.repeat(np.arange(lp.num_row_), np.diff(np.asarray(a.start_)))
    d = np.asarray(cost, dtype=float) - np.bincount(np.asarray(a.index_), weights=np.asarray(a.value_) * y[rows],
                                                    minlength=lp.num_col_)
    low = math.fsum(y * np.asarray(lp.row_lower_)) + math.fsum(np.minimum(0.0, d))
    return low + d > cap + 1e-6 * max(1.0, abs(cap))


def orders_relaxed(mdl: Model) -> Model:
    """The model with continuous probe-order choices ``x`` and binary materialisation
    indicators ``m``: a relaxation (every plan is feasible in it), so its optimum is a lower
    bound, and an optimum whose ``x`` are integral is an optimum of the model itself.  Solvers
    then branch on which MIRs to materialise and on partition choices only — with ``m``
    fixed, the LP was integral on every goal workload of issue 14, which is where the root gap
    of five-way queries came from (see the module docstring).

    >>> from mqjoin.model.workload import load_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from pathlib import Path
    >>> mdl = build_model(enumerate_candidates(load_workload(Path(__file__).parent / "workloads" / "paper_v2.yaml")))
    >>> r = orders_relaxed(mdl)
    >>> [r.integer[i] for i in (next(iter(mdl.x.values())), next(iter(mdl.m.values())))]
    [False, True]
    >>> r.num_binaries < mdl.num_binaries, solve(mdl, relax_orders=True).objective == solve(mdl, relax_orders=False).objective
    (True, True)
    """
    xs, ms = set(mdl.x.values()), set(mdl.m.values())
    return replace(mdl, integer=[(flag and i not in xs) or i in ms for i, flag in enumerate(mdl.integer)])


#: solve :func:`orders_relaxed` first (by default) when the model has an MIR of at least this
#: many relations: measured (module docstring), it wins on five-way queries, whose root gap is
#: all in the materialisation of nested MIRs, and loses 4-7x on three- and four-way ones, where
#: HiGHS's cuts on the binary order choices close the gap at the root
RELAX_MIN_MIR = 4

#: a relaxed order choice within this of 0 or 1 counts as integral (the solvers' own
#: integrality tolerance)
INTEGRALITY_TOLERANCE = 1e-6


def _solve_orders_relaxed(mdl: Model, cols: list[int], rows: list[int], solver: str, time_limit: float | None,
                          threads: int | None, start: list[float] | None,
                          integral_objective: bool) -> tuple[str, float, float, list[float]]:
    """Solve :func:`orders_relaxed` of one part; its answer stands when optimal with integral
    probe orders.  Otherwise the part is solved as built, in the time left, from the relaxed
    plan when it is one, keeping the better of the two (valid) bounds."""
    t0 = time.perf_counter()
    relaxed = orders_relaxed(mdl)
    try:
        st, obj, bd, vals = _solve_part(relaxed, cols, rows, solver, time_limit, threads, start, integral_objective)
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
        st2, obj2, bd2, vals2 = _solve_part(mdl, cols, rows, solver, left, threads, start, integral_objective)
    except NoSolutionError:
        if not integral:
            raise
        return "time_limit", obj, bd, vals  # no time left to take up the relaxed plan: it is the best so far
    return st2, obj2, max(bd, bd2), vals2


def lp_bound(mdl: Model, solver: str = "highs") -> float:
    """The optimum of the model's LP relaxation (every binary in [0, 1]): the root bound a
    branch and bound starts from.  ``(optimum − lp_bound) / optimum`` is the root gap that
    cuts and branching must close (see the measurements in the module docstring).

    >>> from mqjoin.model.workload import load_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> from pathlib import Path
    >>> w = load_workload(Path(__file__).parent / "workloads" / "paper_v2.yaml")
    >>> mdl = build_model(enumerate_candidates(w))
    >>> import math
    >>> lp_bound(mdl) <= solve(mdl).objective, math.isclose(lp_bound(mdl), lp_bound(mdl, "cbc"))
    (True, True)
    """
    check_solver(solver)
    total = 0.0
    for cols, rows in components(mdl):
        if solver == "highs":
            total += _solve_highs(mdl, cols, rows, None, None, relax=True)[1]
        else:
            total += _cbc_relaxation(mdl, cols, rows)
    return total


#: time of the tie-break solve: at most TIE_SHARE × the first solve's, or TIE_MIN_SECONDS
#: (proving the canonical optimum can take far longer than finding an optimum: 72 s against
#: 1.3 s for 100 three-way queries over 100 relations under ``single``)
TIE_SHARE = 0.25
TIE_MIN_SECONDS = 0.25

#: relative slack of the cost row in the tie-break solve: optima whose costs differ by less
#: are equal (solvers accept values within 1e-6 of integral, so costs carry such noise)
TIE_SLACK = 1e-7


def _tie_break(mdl: Model, cols: list[int], rows: list[int], optimum: float, vals: list[float], solver: str,
               time_limit: float | None, threads: int | None, branching: bool = False) -> tuple[bool, list[float]]:
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
                                      integral_objective=True, branching=branching)
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


def _highs_lp(mdl: Model, cols: list[int], rows: list[int], highspy, np):
    """One part of the model as a ``highspy.HighsLp`` (continuous; integrality is set apart)."""
    local = {c: i for i, c in enumerate(cols)}
    lp = highspy.HighsLp()
    lp.num_col_ = len(cols)
    lp.num_row_ = len(rows)
    lp.col_cost_ = np.array([mdl.cost[c] for c in cols], dtype=float)
    lp.col_lower_ = np.zeros(len(cols))
    lp.col_upper_ = np.array([mdl.upper[c] if mdl.upper[c] != math.inf else highspy.kHighsInf for c in cols])
    starts, index, value, lo, hi = [0], [], [], [], []
    for r in rows:
        _, idx, coef, l, u = mdl.rows[r]
        index.extend(local[i] for i in idx)
        value.extend(coef)
        starts.append(len(index))
        lo.append(-highspy.kHighsInf if l == -math.inf else l)
        hi.append(highspy.kHighsInf if u == math.inf else u)
    lp.row_lower_ = np.array(lo, dtype=float)
    lp.row_upper_ = np.array(hi, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=float)
    lp.a_matrix_.num_col_ = len(cols)
    lp.a_matrix_.num_row_ = len(rows)
    return lp


def _solve_highs(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
                 threads: int | None, start: list[float] | None = None, integral_objective: bool = False,
                 solution_limit: int | None = None, relax: bool = False) -> tuple[str, float, float, list[float]]:
    try:
        import highspy
        import numpy as np
    except ImportError:  # pragma: no cover - depends on the installation
        raise SolverUnavailableError("solver 'highs' needs the highspy package: pip install highspy "
                                     "(or choose --solver cbc)") from None
    h = _silent_highs(highspy)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if solution_limit is not None:
        h.setOptionValue("mip_max_improving_sols", int(solution_limit))
    if threads is not None:
        h.setOptionValue("threads", int(threads))
    if integral_objective:  # integer costs: a gap below 1 proves optimality, exactly
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.99)
    else:
        h.setOptionValue("mip_rel_gap", 1e-9)
    lp = _highs_lp(mdl, cols, rows, highspy, np)
    if not relax and any(mdl.integer[c] for c in cols):
        lp.integrality_ = [highspy.HighsVarType.kInteger if mdl.integer[c] else highspy.HighsVarType.kContinuous
                           for c in cols]
    h.passModel(lp)
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = [float(start[c]) for c in cols]
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    ms = h.getModelStatus()
    if ms in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        # every model of a valid workload is feasible: HiGHS's presolve declared the policy
        # budget's memory row infeasible at a right-hand side a hair below a sum of its
        # coefficients (Figure 3 at 99.999899, highspy 1.15, while u_M was continuous; with
        # the group broadcast rows it even returned a worse "optimum"; u_M is binary since,
        # which fixed both); should it happen again, solve once more without presolve
        h.setOptionValue("presolve", "off")
        h.run()
        ms = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if ms == highspy.HighsModelStatus.kOptimal:
        st = "optimal"
    elif ms in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    elif ms == highspy.HighsModelStatus.kTimeLimit or ms == highspy.HighsModelStatus.kInterrupt:
        if not has_solution:
            raise NoSolutionError("the solver reached its time limit before it found any plan; "
                                  "raise the time limit (--time-limit) or disable MIRs (--no-mirs)")
        st = "time_limit"
    elif ms == highspy.HighsModelStatus.kSolutionLimit and solution_limit is not None:
        if not has_solution:
            raise NoSolutionError(f"the solver stopped at its solution limit ({solution_limit}) without a plan")
        st = "solution_limit"
    else:
        raise OptimizerError(f"HiGHS stopped with status {h.modelStatusToString(ms)!r}")
    vals = list(h.getSolution().col_value)
    # the objective of the values returned, not HiGHS's report: highspy 1.16 stopped by a time
    # limit reported an objective below the optimum for an incumbent that cost more
    obj = math.fsum(mdl.cost[c] * v for c, v in zip(cols, vals))
    if not relax and any(mdl.integer[c] for c in cols) and st != "optimal":
        bound = max(0.0, float(info.mip_dual_bound))  # costs are ≥ 0, so 0 is always a bound
    else:
        bound = obj
    return st, obj, bound, vals


def _lp_highs(highspy):
    """A silent HiGHS instance for the LPs of :func:`_branch_and_bound` (default options: presolve
    off and the dual or primal simplex strategies measured no faster, the interior point 6×
    slower)."""
    return _silent_highs(highspy)


def _silent_highs(highspy):
    """A HiGHS instance that prints nothing.  highspy ≥ 1.16's ``Highs()`` writes its banner to
    the process's stdout in its constructor, before an option can be set (breaking ``--json``
    on stdout); the core class beneath it does not, and has every method used here."""
    core = getattr(getattr(highspy, "_core", None), "_Highs", None)
    h = core() if core is not None else highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def to_pulp(mdl: Model, cols: Iterable[int] | None = None, rows: Iterable[int] | None = None,
            relax: bool = False):
    """The model (or one component of it) as a ``pulp.LpProblem`` (for CBC and exports)."""
    try:
        import pulp
    except ImportError:  # pragma: no cover
        raise SolverUnavailableError("PuLP is needed for CBC and for LP/MPS export: pip install pulp") from None
    cols = list(range(mdl.num_variables)) if cols is None else list(cols)
    rows = list(range(mdl.num_constraints)) if rows is None else list(rows)
    prob = pulp.LpProblem("mqjoin_probe_orders", pulp.LpMinimize)
    var = {}
    for c in cols:
        cat = pulp.LpBinary if (mdl.integer[c] and not relax) else pulp.LpContinuous
        up = None if mdl.upper[c] == math.inf else mdl.upper[c]
        if hasattr(prob, "add_variable"):  # PuLP ≥ 3.3: variables are created through the problem
            var[c] = prob.add_variable(mdl.names[c], lowBound=0, upBound=up, cat=cat)
        else:  # pragma: no cover - older PuLP
            var[c] = pulp.LpVariable(mdl.names[c], lowBound=0, upBound=up, cat=cat)
    prob += pulp.lpSum(mdl.cost[c] * var[c] for c in cols if mdl.cost[c])
    for r in rows:
        name, idx, coef, lo, hi = mdl.rows[r]
        expr = pulp.LpAffineExpression([(var[i], a) for i, a in zip(idx, coef)])
        if lo == hi:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, name, lo)
        elif hi == math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, name, lo)
        elif lo == -math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, name, hi)
        else:  # pragma: no cover - the model has no ranged rows
            raise OptimizerError(f"ranged row {name} cannot be exported")
    return prob, var


def _solve_cbc(mdl: Model, cols: list[int], rows: list[int], time_limit: float | None,
               integral_objective: bool = False) -> tuple[str, float, float, list[float]]:
    import pulp

    prob, var = to_pulp(mdl, cols, rows)
    kw = {"msg": False}
    if integral_objective:  # integer costs: a gap below 1 proves optimality, exactly
        kw.update(gapRel=0.0, gapAbs=0.99)
    if time_limit is not None:
        kw["timeLimit"] = max(1, int(math.ceil(time_limit)))
    cbc = pulp.PULP_CBC_CMD(**kw)
    if not cbc.available():  # pragma: no cover
        raise SolverUnavailableError("CBC is not available in this PuLP installation; use --solver highs")
    prob.solve(cbc)
    # LpStatus says "Optimal" for an incumbent at a time-out too: sol_status tells them apart.
    if prob.sol_status == pulp.LpSolutionOptimal:
        st = "optimal"
    elif prob.sol_status == pulp.LpSolutionIntegerFeasible:
        st = "time_limit"
    elif prob.sol_status in (pulp.LpSolutionInfeasible, pulp.LpSolutionUnbounded):
        raise InfeasibleError("the ILP is infeasible; this is a bug in mqjoin for a valid workload — please report it")
    else:
        raise NoSolutionError("CBC stopped before it found any plan; raise the time limit or use --solver highs")
    vals = [float(var[c].value() or 0.0) for c in cols]
    obj = sum(mdl.cost[c] * v for c, v in zip(cols, vals))
    bound = obj
    if st != "optimal":  # CBC's bound is not exposed by PuLP: the LP relaxation is a valid one
        bound = _cbc_relaxation(mdl, cols, rows)
    return st, obj, bound, vals


def _cbc_relaxation(mdl: Model, cols: list[int], rows: list[int]) -> float:
    """The optimum of the LP relaxation of one part, by CBC."""
    import pulp

    relax, _ = to_pulp(mdl, cols, rows, relax=True)
    relax.solve(pulp.PULP_CBC_CMD(msg=False))
    return float(pulp.value(relax.objective) or 0.0)


def export(mdl: Model, path: str) -> str:
    """Write the model as ``.lp`` or ``.mps`` (by the file's extension); returns the path."""
    prob, _ = to_pulp(mdl)
    if path.endswith(".mps"):
        prob.writeMPS(path)
    elif path.endswith(".lp"):
        prob.writeLP(path)
    else:
        raise OptimizerError(f"cannot export to {path!r}: use a file name ending in .lp or .mps")
    return path


def lp_text(mdl: Model) -> str:
    """The model in LP format, as text (for widgets and notebooks)."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".lp")
    os.close(fd)
    try:
        export(mdl, tmp)
        with open(tmp, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(tmp)
