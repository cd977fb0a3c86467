"""ILP scale: reproduce Figure 9 (a)–(f) of the CLASH paper on this machine.

Random workloads (mqjoin.datasets.random_workloads.random_workload: relations with three attributes, equal
rates, selectivity 1/rate, parallelism 4; queries drawn as in Section VII-C, duplicates
eliminated).  For every row the workload is optimised six times — modes individual, shared
and mqo under the single and replicas partitioning policies, MIRs on — and one line is
printed as soon as the row is done:

    fig        the figure(s) the row belongs to: ab (10 relations), cde (100 relations), f (query sizes)
    Q R k      queries, relations, query size
    orders     candidate probe orders (queries and MIR sub-queries; Figure 9(b)/(d) purple line)
    vars cons  ILP variables and constraints of the mqo/single model (Figure 9(b)/(d) green line)
    comp       independent components of that model
    enum build candidate enumeration and model building, seconds (measured separately, single policy)
    solve      mqo/single solve seconds;  mqo s: mqo/single total (enumeration + build + solve)
    status     mqo/single solver status ("optimal", "tl 3.1%" = time limit with that gap, "no plan")
    r.vars r.s r.status   the same for mqo/replicas (r.s = enumeration + build + solve)
    ind shr mqo sav%      probe cost of individual / shared / mqo and the saving 1 − mqo/ind,
                          first for single, then for replicas

The first n queries of a workload do not depend on n (same seed), so the rows of one figure
are nested workloads.  A time limit never aborts the run: the row reports the status and gap.

    python benchmarks/ilp_scale.py --quick                 # smoke run, a few rows
    python benchmarks/ilp_scale.py --time-limit 60         # everything
    python benchmarks/ilp_scale.py --rows f --seed 3       # only Figure 9(f)
    python benchmarks/ilp_scale.py --goals --time-limit 30 # the three speed goals (median of 3)
    python benchmarks/ilp_scale.py --spread 20 --sizes 100x3 --policies single
                                                           # 20 workloads (seeds 0-19) per size: median and worst
    python benchmarks/ilp_scale.py --replan 3 --sizes 301x4/300
                                                           # one query added, then removed, re-planned
    python benchmarks/ilp_scale.py --rounds 3 --sizes 100x5,20x6 --budget 2
                                                           # the explorer's anytime rounds after a 2 s first solve

``--spread N`` draws N workloads per size (seeds ``--seed`` to ``--seed + N - 1``), optimises each
once (mqo, MIRs on) and prints, per size and policy, the median and worst optimiser time — build +
solve as ``mqjoin optimize --json`` reports them (``ilp.build_seconds + ilp.solve_seconds``) —
the median and worst CPU seconds of the whole ``optimize()`` call (plan extraction included,
every thread of the process: a loaded machine inflates it far less than wall time), and how
many plans were proven optimal and canonical.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.model.errors import MqjoinError, NoSolutionError
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.ilp import build_model, lp_bound
from mqjoin.planning.optimizer import optimize

FIGURES = {
    "ab": [(n, 10, 3) for n in range(10, 101, 10)],
    "cde": [(n, 100, 3) for n in range(10, 101, 10)],
    "f": [(n, 100, k) for k in (3, 4, 5) for n in (10, 20, 30)],
}
QUICK = {
    "ab": [(10, 10, 3), (30, 10, 3)],
    "cde": [(10, 100, 3), (100, 100, 3)],
    "f": [(10, 100, 4), (10, 100, 5)],
}
LETTER = {"a": "ab", "b": "ab", "c": "cde", "d": "cde", "e": "cde", "f": "f"}
MODES = ("individual", "shared", "mqo")
POLICIES = ("single", "replicas")

# The paper's numbers (Gurobi, 3.1 GHz i7) and this project's targets (HiGHS, 2 cores):
# seconds including enumeration and model build, and the proven gap allowed at that time.
PAPER = {(100, 100, 3): "120 ms", (10, 100, 5): "12 s", (30, 100, 5): "> 2 min"}
TARGET = {(100, 100, 3): 0.5, (10, 100, 5): 3.0, (30, 100, 5): 10.0}
TARGET_GAP = {(100, 100, 3): 0.0, (10, 100, 5): 0.0, (30, 100, 5): 0.01}


@dataclass
class Run:
    """One optimisation: its probe cost (None when it found no plan), ILP stats and wall time."""

    cost: float | None
    seconds: float
    status: str
    gap: float = 0.0
    variables: int = 0
    constraints: int = 0
    components: int = 0
    build: float = 0.0
    solve: float = 0.0
    error: str = ""

    @property
    def label(self) -> str:
        if self.cost is None:
            return "no plan" if self.status == "no_solution" else "error"
        if self.status == "optimal":
            return "optimal"
        return f"tl {self.gap:.1%}"


@dataclass
class Row:
    fig: str
    n: int
    rels: int
    size: int
    orders: int = 0
    enum: float = 0.0
    build: float = 0.0
    runs: dict[tuple[str, str], Run] = field(default_factory=dict)
    wall: float = 0.0

    def saving(self, policy: str) -> float | None:
        ind, mqo = self.runs[("individual", policy)].cost, self.runs[("mqo", policy)].cost
        if ind is None or mqo is None or ind <= 0:
            return None
        return 1 - mqo / ind


def run_one(w, mode: str, policy: str, time_limit: float) -> Run:
    t0 = time.perf_counter()
    try:
        res = optimize(w, mode=mode, partitioning=policy, mirs=True, time_limit=time_limit)
    except NoSolutionError as e:  # the time limit struck before any plan was found
        return Run(None, time.perf_counter() - t0, "no_solution", error=str(e))
    except MqjoinError as e:  # anything else: report it in the row, keep going
        return Run(None, time.perf_counter() - t0, "error", error=f"{type(e).__name__}: {e}")
    i = res.ilp
    return Run(res.probe_cost, time.perf_counter() - t0, i.status, i.gap, i.variables, i.constraints,
               i.components, i.build_seconds, i.solve_seconds)


def measure(fig: str, n: int, rels: int, size: int, seed: int, time_limit: float) -> Row:
    t0 = time.perf_counter()
    row = Row(fig, n, rels, size)
    w = random_workload(n, rels, size, seed=seed)
    # enumeration vs model build, timed apart (optimize() reports them summed as build_seconds)
    t = time.perf_counter()
    cands = enumerate_candidates(w, mirs=True)
    row.enum = time.perf_counter() - t
    t = time.perf_counter()
    build_model(cands, "single")
    row.build = time.perf_counter() - t
    row.orders = cands.size["probe_orders"]
    for policy in POLICIES:
        for mode in MODES:
            row.runs[(mode, policy)] = run_one(w, mode, policy, time_limit)
    row.wall = time.perf_counter() - t0
    return row


HEADER = (f"{'fig':<4}{'Q':>4}{'R':>4}{'k':>2} {'orders':>6} {'vars':>6} {'cons':>6} {'comp':>4} "
          f"{'enum':>6} {'build':>6} {'solve':>7} {'mqo s':>7} {'status':<9}| "
          f"{'r.vars':>6} {'r.s':>6} {'r.status':<9}| "
          f"{'ind':>9} {'shr':>9} {'mqo':>9} {'sav%':>5} | "
          f"{'r.ind':>9} {'r.shr':>9} {'r.mqo':>9} {'sav%':>5} | {'wall':>6}")


def _cost(r: Run) -> str:
    return f"{r.cost:>9.0f}" if r.cost is not None else f"{r.label:>9}"


def _pct(x: float | None) -> str:
    return f"{x:>5.0%}" if x is not None else f"{'-':>5}"


def format_row(row: Row) -> str:
    s, r = row.runs[("mqo", "single")], row.runs[("mqo", "replicas")]
    line = (f"{row.fig:<4}{row.n:>4}{row.rels:>4}{row.size:>2} {row.orders:>6} {s.variables:>6} {s.constraints:>6} "
            f"{s.components:>4} {row.enum:>6.3f} {row.build:>6.3f} {s.solve:>7.3f} {s.seconds:>7.3f} {s.label:<9}| "
            f"{r.variables:>6} {r.seconds:>6.3f} {r.label:<9}| ")
    for policy in POLICIES:
        line += " ".join(_cost(row.runs[(m, policy)]) for m in MODES) + f" {_pct(row.saving(policy))} | "
    return line + f"{row.wall:>6.1f}"


def met(run: Run, key: tuple[int, int, int]) -> bool:
    """Whether a run meets the speed goal of its row (time and, where allowed, proven gap)."""
    if run.cost is None:
        return False
    close_enough = run.status == "optimal" or run.gap <= TARGET_GAP.get(key, 0.0)
    return run.seconds <= TARGET[key] and close_enough


def goals(seed: int, time_limit: float, repeat: int = 3) -> int:
    """Only the three speed goals (:data:`TARGET`: 100 three-way queries optimal in 0.5 s, 10
    five-way queries optimal in 3 s, 30 five-way queries within 1 % in 10 s), mqo under both policies: each run
    ``repeat`` times (timings on a shared machine are noisy), one line with the median run and the load.

    Columns: ``build`` enumeration + model build, ``solve`` the solver calls (warm start not
    included, tie-break included), ``total`` the whole optimisation (median; ``runs`` all of
    them), ``root`` the root gap ``1 − LP bound / objective`` (what cuts and branching close;
    against the incumbent when not optimal), ``load`` the 1-minute load average before the runs."""
    print(f"# ilp_scale --goals: seed {seed}, time limit {time_limit:g} s per optimisation, "
          f"median of {repeat}, {os.cpu_count()} cores")
    print(f"{'Q':>4}{'R':>4}{'k':>2} {'policy':<9}{'vars':>7}{'bins':>6}{'comp':>5} {'build':>6} {'solve':>7} "
          f"{'total':>7} {'status':<10}{'gap':>7}{'root':>7} {'canon':<6}{'load':>5}{'goal':>14}  verdict  runs")
    for key in TARGET:
        n, rels, size = key
        w = random_workload(n, rels, size, seed=seed)
        for policy in POLICIES:
            load = os.getloadavg()[0]
            runs = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                try:
                    res = optimize(w, mode="mqo", partitioning=policy, time_limit=time_limit)
                except MqjoinError as e:
                    print(f"{n:>4}{rels:>4}{size:>2} {policy:<9} {type(e).__name__}: {e}", flush=True)
                    break
                runs.append((time.perf_counter() - t0, res))
            if len(runs) < repeat:
                continue
            took, res = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
            i = res.ilp
            run = Run(res.probe_cost, took, i.status, i.gap)
            root = 1 - lp_bound(build_model(enumerate_candidates(w), policy)) / i.objective if i.objective > 0 else 0.0
            goal = f"≤{TARGET[key]:g}s" + (f" ≤{TARGET_GAP[key]:.0%}" if TARGET_GAP[key] else " opt")
            print(f"{n:>4}{rels:>4}{size:>2} {policy:<9}{i.variables:>7}{i.binaries:>6}{i.components:>5} "
                  f"{i.build_seconds:>6.3f} {i.solve_seconds:>7.3f} {took:>7.3f} {i.status:<10}{i.gap:>7.2%}"
                  f"{root:>7.2%} {str(i.canonical):<6}{load:>5.1f}{goal:>14}  {'met' if met(run, key) else 'MISSED':<7}"
                  "  "
                  f"{' '.join(f'{t:.2f}' for t, _ in runs)}", flush=True)
    print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


#: the speed goals for --spread: (queries, query size) → (median, worst) seconds of build + solve
SPREAD_GOALS = {(100, 3): (0.3, 0.6), (10, 5): (1.0, 1.0), (30, 5): (3.0, 3.0), (100, 4): (10.0, 10.0),
                (60, 5): (10.0, 10.0), (1000, 3): (10.0, 10.0), (300, 4): (30.0, 30.0), (100, 5): (30.0, 30.0),
                (20, 6): (10.0, 10.0)}


def _size(text: str) -> tuple[int, int, int]:
    """``QxK`` (Q queries of K relations over 100 relations) or ``QxK/R`` (over R relations).

    >>> _size("100x3"), _size("1000x3/1000")
    ((100, 3, 100), (1000, 3, 1000))
    """
    shape, _, rels = text.partition("/")
    q, k = shape.split("x")
    return int(q), int(k), int(rels or 100)


def _cpu() -> float:
    """CPU seconds of this process and of its children so far (the blocks' searches fork one)."""
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _secs(x: float) -> str:
    """Seconds in a 7-wide column, "-" for never (``math.inf``).

    >>> _secs(1.2345) + _secs(math.inf)
    '   1.23      -'
    """
    return f"{x:>7.2f}" if math.isfinite(x) else f"{'-':>7}"


def spread(sizes: list[tuple[int, int, int]], policies: list[str], count: int, first_seed: int,
           time_limit: float) -> int:
    """``count`` random workloads per size (seeds ``first_seed`` …), each optimised once per
    policy: median and worst of build + solve (the optimiser's own times, as ``mqjoin optimize
    --json`` reports them), the wall time of the median, and how many plans were optimal and
    canonical, against the size's goal (:data:`SPREAD_GOALS`).  CPU counts the forked children
    too.  The seeds of the worst run are printed so that it can be profiled alone.  Each solve
    is watched by a monitor (as ``mqjoin optimize`` watches it): "1st" is the median seconds to
    its first plan and "gap" the median of that plan's proven gap (before any part is solved,
    the fair-share bound), "2%" the median and worst seconds to a plan within 2 % proven gap
    (``anytime`` in ``optimize --json``, from the start of the call; "-": not within the time
    limit), against the anytime goal of 5 s."""
    from mqjoin.planning.ilp import forked
    from mqjoin.planning.ilp.monitor import Monitor, anytime_summary

    print(f"# ilp_scale --spread: {count} workloads per size (seeds {first_seed}-{first_seed + count - 1}), "
          f"time limit {time_limit:g} s, {os.cpu_count()} cores, "
          f"searches forked: {'yes' if forked.available() else 'no'} (MQJOIN_FORK), "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'Q':>4}{'k':>2}{'R':>5} {'policy':<9}{'median':>8}{'worst':>8}{'(seed)':>7}{'build':>7}{'solve':>8}"
          f"{'cpu med':>8}{'cpu max':>8}{'optimal':>9}{'canonical':>10}{'1st':>7}{'gap':>6}{'2% med':>7}"
          f"{'2% max':>7}  goal")
    for n, size, rels in sizes:
        for policy in policies:
            runs = []
            for seed in range(first_seed, first_seed + count):
                w = random_workload(n, rels, size, seed=seed)
                cpu, monitor = _cpu(), Monitor()
                try:
                    res = optimize(w, mode="mqo", partitioning=policy, time_limit=time_limit, monitor=monitor)
                except MqjoinError as e:
                    print(f"{n:>4}{size:>2}{rels:>5} {policy:<9} seed {seed}: {type(e).__name__}: {e}", flush=True)
                    continue
                i = res.ilp
                runs.append((i.build_seconds + i.solve_seconds, seed, i, _cpu() - cpu,
                             anytime_summary(monitor.reports, i.status, monitor.elapsed)))
            if not runs:
                continue
            runs.sort(key=lambda r: r[0])
            took, _, med, _, _ = runs[len(runs) // 2]
            worst, worst_seed, _, _, _ = runs[-1]
            cpus = sorted(r[3] for r in runs)
            optimal = sum(r[2].status == "optimal" for r in runs)
            canonical = sum(r[2].canonical for r in runs)
            firsts = sorted(math.inf if r[4]["first_plan_seconds"] is None else r[4]["first_plan_seconds"]
                            for r in runs)
            gaps = sorted(1.0 if r[4]["first_plan_gap"] is None else r[4]["first_plan_gap"] for r in runs)
            within = sorted(math.inf if r[4]["within_gap_seconds"] is None else r[4]["within_gap_seconds"]
                            for r in runs)
            goal = SPREAD_GOALS.get((n, size))
            verdict = "" if goal is None else (
                f"  ≤{goal[0]:g}/{goal[1]:g} s " + ("met" if took <= goal[0] and worst <= goal[1]
                                                   and optimal == canonical == len(runs) else "MISSED"))
            print(f"{n:>4}{size:>2}{rels:>5} {policy:<9}{took:>8.3f}{worst:>8.3f}{worst_seed:>7}"
                  f"{med.build_seconds:>7.3f}{med.solve_seconds:>8.3f}{cpus[len(cpus) // 2]:>8.3f}{cpus[-1]:>8.3f}"
                  f"{f'{optimal}/{len(runs)}':>9}{f'{canonical}/{len(runs)}':>10}{_secs(firsts[len(runs) // 2])}"
                  f"{gaps[len(runs) // 2]:>6.0%}{_secs(within[len(runs) // 2])}{_secs(within[-1])}{verdict}"
                  f"{'' if goal is None else ', 2% ≤5 s ' + ('met' if within[-1] <= 5 else 'MISSED')}", flush=True)
    print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def _blocks(res) -> set:
    """The keys of the blocks whose prices a result keeps (coupled parts, for a re-plan)."""
    return {key for part in (res.parts or {}).values() for key in part.blocks}


def replans(sizes: list[tuple[int, int, int]], count: int, first_seed: int) -> int:
    """Incremental re-planning, per size and seed (``single``, MIRs on, no time limit): the first
    Q − 1 queries of ``random_workload(Q, R, k, seed)`` optimised from scratch ("first"), then
    all Q re-planned from that result ("add", :func:`mqjoin.planning.optimizer.replan`), then
    the first Q − 1 again from the re-plan ("remove").  Wall seconds of each call, its build +
    solve seconds as ``optimize --json`` reports them ("b+s") and its CPU seconds (counting the
    forked children), the parts of the ILP reused whole, the blocks priced anew
    (blocks of the re-solved coupled parts whose prices were not kept from the plan before; an
    enumerated block's are not kept, so these count searched blocks) out of those kept, and
    whether the re-plan equals a solve from scratch (the same objective and the same plan)."""
    from mqjoin.planning.optimizer import replan

    print(f"# ilp_scale --replan: seeds {first_seed}-{first_seed + count - 1}, {os.cpu_count()} cores, "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'Q':>4}{'k':>2}{'R':>5}{'seed':>5}{'first':>8}{'cpu':>7} | {'add':>7}{'b+s':>7}{'cpu':>7}{'parts':>7}"
          f"{'blocks':>11}{'equal':>6} | {'remove':>7}{'b+s':>7}{'cpu':>7}{'parts':>7}{'blocks':>11}{'equal':>6}")
    for n, size, rels in sizes:
        for seed in range(first_seed, first_seed + count):
            w = random_workload(n, rels, size, seed=seed)
            fewer = w.restricted_to([q.name for q in w.queries[:-1]])
            cols = []
            t, cpu = time.perf_counter(), _cpu()
            res = optimize(fewer, mode="mqo", partitioning="single")
            cols.append(f"{time.perf_counter() - t:>8.2f}{_cpu() - cpu:>7.2f} |")
            for step, scratch in ((w, None), (fewer, res)):
                t, cpu = time.perf_counter(), _cpu()
                again = replan(res, step)
                wall, used = time.perf_counter() - t, _cpu() - cpu
                scratch = scratch or optimize(step, mode="mqo", partitioning="single")
                equal = (again.plan == scratch.plan and again.ilp.status == scratch.ilp.status == "optimal"
                         and math.isclose(again.ilp.objective, scratch.ilp.objective, rel_tol=1e-9))
                kept, new = _blocks(res), _blocks(again)
                took = again.ilp.build_seconds + again.ilp.solve_seconds  # (as optimize --json reports them)
                cols.append(f"{wall:>7.2f}{took:>7.2f}{used:>7.2f}{f'{again.reused_parts}/{again.ilp.components}':>7}"
                            f"{f'{len(new - kept)}/{len(new)}':>11}{'yes' if equal else 'NO':>6} |")
                res = again
            print(f"{n:>4}{size:>2}{rels:>5}{seed:>5}" + " ".join(cols).rstrip(" |"), flush=True)
    print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def rounds(sizes: list[tuple[int, int, int]], count: int, first_seed: int, budget: float) -> int:
    """The explorer's anytime improvement, per size and seed (``single``, MIRs on): a first
    solve under the interactive budget (``--budget`` seconds), then
    :func:`mqjoin.planning.anytime.improve` from it as ``ExplorerModel`` calls it (rounds of
    twice the budget, growing twofold, no limit above).  Seconds since the first solve began
    and the proven gap at the end of the first solve and of each round, and when the plan was
    proven optimal ("-": not within the six rounds)."""
    from mqjoin.planning.anytime import improve, progress_of

    print(f"# ilp_scale --rounds: seeds {first_seed}-{first_seed + count - 1}, budget {budget:g} s, "
          f"{os.cpu_count()} cores, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'Q':>4}{'k':>2}{'R':>5}{'seed':>5}{'optimal':>9}  first, then each round: seconds (gap)")
    for n, size, rels in sizes:
        for seed in range(first_seed, first_seed + count):
            w = random_workload(n, rels, size, seed=seed)
            t0 = time.perf_counter()
            first = progress_of(optimize(w, mode="mqo", partitioning="single", time_limit=budget),
                                time.perf_counter() - t0)
            steps = [first]
            if first.status != "optimal":
                steps += list(improve(w, 2 * budget, start=first, mode="mqo", partitioning="single"))
            done = f"{steps[-1].seconds:.1f}" if steps[-1].status == "optimal" else "-"
            print(f"{n:>4}{size:>2}{rels:>5}{seed:>5}{done:>9}  "
                  + "  ".join(f"{p.seconds:.1f} ({p.gap:.0%})" for p in steps), flush=True)
    print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def summary(rows: list[Row], time_limit: float) -> list[str]:
    out = ["", "Summary", "-------"]
    by_key = {(r.n, r.rels, r.size): r for r in rows}
    for key, paper in PAPER.items():
        row = by_key.get(key)
        if row is None:
            continue
        n, rels, size = key
        parts = []
        for policy in POLICIES:
            run = row.runs[("mqo", policy)]
            took = f"{run.seconds:.3f} s" + ("" if run.label == "optimal" else f" ({run.label})")
            parts.append(f"{policy} {took}")
        target = TARGET.get(key)
        verdict = ""
        if target is not None:
            ok = {p: met(row.runs[("mqo", p)], key) for p in POLICIES}
            verdict = f"; target < {target:g} s: " + ", ".join(f"{p} {'met' if v else 'MISSED'}" for p, v in ok.items())
        out.append(f"{n} queries of size {size} over {rels} relations (enumeration + build + solve): "
                   f"{'; '.join(parts)} — paper {paper}{verdict}")
    missing = [k for k in PAPER if k not in by_key]
    if missing:
        out.append("not run: " + ", ".join(f"{n}x size {k} over {r}" for n, r, k in missing))
    for fig, what in (("ab", "10 relations (paper: ~50%)"), ("cde", "100 relations (paper: ~15% at 50 queries)")):
        sel = [r for r in rows if r.fig == fig]
        if not sel:
            continue
        parts = []
        for policy in POLICIES:
            vals = [v for v in (r.saving(policy) for r in sel) if v is not None]
            parts.append(f"{policy} {statistics.mean(vals):.0%}" if vals else f"{policy} -")
        out.append(f"average MQO saving vs individual, {what}: {', '.join(parts)} over {len(sel)} rows")
    slow = [r for r in rows for p in POLICIES if r.runs[("mqo", p)].label != "optimal"]
    if slow:
        seen = []
        for r in slow:
            for p in POLICIES:
                run = r.runs[("mqo", p)]
                if run.label != "optimal":
                    seen.append(f"{r.n}x{r.size}/{r.rels} {p}: {run.label}")
        out.append(f"mqo not optimal within {time_limit:g} s: " + "; ".join(dict.fromkeys(seen)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few rows only (smoke run); time limit 10 s unless given")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per optimisation (default 120)")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    ap.add_argument("--rows", default="abcdef",
                    help="figures to run, letters a–f (a/b: 10 relations, c/d/e: 100 relations, f: sizes)")
    ap.add_argument("--goals", action="store_true",
                    help="only the speed goals (100x3, 10x5, 30x5 over 100 relations), mqo, both policies")
    ap.add_argument("--repeat", type=int, default=3, help="--goals: runs per goal, the median is shown (default 3)")
    ap.add_argument("--spread", type=int, default=0, metavar="N",
                    help="N random workloads per size (seeds --seed …): median and worst build + solve")
    ap.add_argument("--sizes", default="100x3,10x5,30x5",
                    help="--spread: sizes as QUERIESxRELATIONS_PER_QUERY, over 100 relations or /RELATIONS, "
                         "comma-separated (default 100x3,10x5,30x5; e.g. 1000x3/1000)")
    ap.add_argument("--policies", default="single,replicas", help="--spread: policies, comma-separated")
    ap.add_argument("--replan", type=int, default=0, metavar="N",
                    help="N workloads per size of --sizes (seeds --seed …): one query added, then removed, re-planned")
    ap.add_argument("--rounds", type=int, default=0, metavar="N",
                    help="N workloads per size of --sizes (seeds --seed …): the explorer's anytime rounds")
    ap.add_argument("--budget", type=float, default=2.0,
                    help="--rounds: the explorer's interactive budget in seconds (default 2)")
    args = ap.parse_args(argv)
    bad = set(args.rows) - set(LETTER) - set(", ")
    if bad:
        ap.error(f"--rows: unknown figure letter(s) {''.join(sorted(bad))} (use a–f)")
    time_limit = args.time_limit if args.time_limit is not None else (10.0 if args.quick else 120.0)
    if time_limit <= 0:
        ap.error("--time-limit must be positive")
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.goals:
        return goals(args.seed, time_limit, args.repeat)
    if args.spread or args.replan or args.rounds:
        try:
            sizes = [_size(part) for part in args.sizes.split(",")]
        except ValueError:
            ap.error(f"--sizes: {args.sizes!r} is not a list like 100x3,10x5,1000x3/1000")
        bad_policies = [p for p in args.policies.split(",") if p not in POLICIES]
        if bad_policies:
            ap.error(f"--policies: unknown {', '.join(bad_policies)} (use {', '.join(POLICIES)})")
        if args.replan:
            return replans(sizes, args.replan, args.seed)
        if args.rounds:
            if args.budget <= 0:
                ap.error("--budget must be positive")
            return rounds(sizes, args.rounds, args.seed, args.budget)
        return spread(sizes, args.policies.split(","), args.spread, args.seed, time_limit)
    figs = list(dict.fromkeys(LETTER[c] for c in args.rows if c in LETTER))
    table = QUICK if args.quick else FIGURES

    print(f"# ilp_scale: seed {args.seed}, time limit {time_limit:g} s per optimisation, "
          f"rows {'+'.join(figs)}{' (quick)' if args.quick else ''}")
    print(HEADER)
    sys.stdout.flush()
    rows = []
    for fig in figs:
        for n, rels, size in table[fig]:
            row = measure(fig, n, rels, size, args.seed, time_limit)
            rows.append(row)
            print(format_row(row), flush=True)
    print("\n".join(summary(rows, time_limit)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
