"""Measured join sizes on TPC-H: what ``mqjoin stats --sizes`` costs and how close a sample
gets, and whether the model's predictions then hold per store.

Part 1 — measuring: for each workload and scale factor, the sizes of every set the
optimiser uses (:func:`mqjoin.datasets.sizes.size_sets`) counted exactly and on a correlated
sample of ``--fraction`` of join values: wall and CPU seconds (tables already read; the read
is timed apart), the largest and mean relative error of the sampled sizes against the exact
ones, and how many exact values fall in the sample's 95 % interval.

Part 2 — predicted beside measured: the workload's statistics re-estimated from the data
(rates, selectivities: ``mqjoin stats``), once without and once with the sampled sizes (and
the order of arrival measured with them, where it departs from ``1/|P|``); each
optimised (``mqo``, ``single``) and run by the reference executor over the whole stream; per
store, probe messages and most rows held, predicted (:mod:`mqjoin.planning.measured`) beside
measured.  The goal: within ±20 % for every store holding ≥ 1 % of its plan's total.
``--compare`` runs every plan ``mqjoin compare`` lists (CLASH's modes × policies, MJoin, binary
trees, AJoin) optimised on the sized workload, and prints their measured messages and rows
beside the plan chosen on the sizes (``mqo``, ``single``) and the one chosen on the estimates.
It marks the plans on the measured Pareto front (messages vs rows) and lists the plans the
chosen one does not dominate; the chosen plan breaks ties within the sampled sizes' error
towards less memory (:mod:`mqjoin.planning.ties`), and the plan without that tie-break is
listed too.  ``--executor vector`` runs the plans with the vectorised executor (the same counts,
faster at SF 0.1).
``--shuffled`` repeats part 2 with every relation's timestamps shuffled (the same tuples and
span, arrivals no longer in key order): what is left after the sizes then is gone, so it is
the order of arrival (which relation of a join arrives last), not a size.

    python benchmarks/join_sizes.py [--sf 0.01 0.1] [--workloads tpch_fig7a.yaml tpch_10q.yaml]
                                    [--fraction 0.1] [--no-runs] [--shuffled] [--compare]
                                    [--executor reference|vector]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import time
from dataclasses import replace

from mqjoin.datasets.sizes import measure_sizes
from mqjoin.datasets.stats import estimate_statistics
from mqjoin.datasets.tpch import WORKLOADS, tpch_streams
from mqjoin.model.tables import Table, read_inputs
from mqjoin.model.workload import load_workload
from mqjoin.planning.measured import check_run
from mqjoin.planning.optimizer import optimize
from mqjoin.runtime.reference import run_reference


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(f, *a, **k):
    t0, c0 = time.perf_counter(), cpu()
    out = f(*a, **k)
    return out, time.perf_counter() - t0, cpu() - c0


def part1(w, tables, fraction: float) -> None:
    exact, wall_e, cpu_e = timed(measure_sizes, w, tables)
    sampled, wall_s, cpu_s = timed(measure_sizes, w, tables, fraction)
    errors, covered, n = [], 0, 0
    for a, b in zip(exact, sampled):
        errors.append(abs(b.value / a.value - 1))
        if not b.exact:
            n += 1
            covered += b.low <= a.value <= b.high
    print(f"  {len(exact)} sets: exact {wall_e:.2f} s wall / {cpu_e:.2f} s CPU; sample {fraction:.0%} of join values "
          f"{wall_s:.2f} s wall / {cpu_s:.2f} s CPU; error max {max(errors):.2%}, mean {sum(errors) / len(errors):.2%};"
          " "
          f"{n} sets sampled ({len(exact) - n} counted exactly: few values), exact value inside the 95 % interval "
          f"for {covered}/{n}")


def table(title: str, plan, tables, span: float, executor: str = "reference") -> tuple[int, int]:
    run = execute(plan, tables, executor)
    check = check_run(plan, run.probe_messages, run.store_rows, span)
    print(f"\n  {title}: {len(plan.stores)} stores")
    print(f"    {'store':<46}{'kind':<9}{'predicted':>12}{'measured':>12}{'share':>8}{'measured/pred':>15}")
    ok = big = 0
    for kind in ("messages", "rows"):
        pred_total, meas_total = check.total(kind)
        for c in (c for c in check.stores if c.kind == kind):
            share = c.measured / meas_total if meas_total else 0.0
            counts = share >= 0.01 or (c.predicted / pred_total if pred_total else 0) >= 0.01
            good = 0.8 <= c.ratio <= 1.2
            big += counts
            ok += counts and good
            flag = "" if not counts else (" ✓" if good else " ✗")
            print(f"    {c.store:<46}{kind:<9}{c.predicted:>12,.0f}{c.measured:>12,.0f}{share:>8.1%}{c.ratio:>13.3f}"
                  f"{flag}")
        print(f"    {'all stores':<46}{kind:<9}{pred_total:>12,.0f}{meas_total:>12,.0f}{'':>8}"
              f"{meas_total / pred_total if pred_total else math.inf:>13.3f}")
    print(f"    stores (kind) holding ≥ 1 % within ±20 %: {ok}/{big}")
    return ok, big


def execute(plan, tables, executor: str):
    """A run of ``plan`` by the reference (per tuple) or the vectorised executor (same counts)."""
    if executor == "vector":
        from mqjoin.runtime.vector import run_vector

        return run_vector(plan, tables)
    return run_reference(plan, tables, collect=False)


def pareto(points: dict[str, tuple[int, int]]) -> dict[str, list[str]]:
    """Per plan, the plans that dominate it (no more messages and rows, fewer of one); a plan
    on the measured Pareto front has none.

    >>> pareto({"a": (1, 2), "b": (2, 1), "c": (2, 2)})
    {'a': [], 'b': [], 'c': ['a', 'b']}
    """
    return {n: [m for m, (mm, mr) in points.items() if mm <= pm and mr <= pr and (mm, mr) != (pm, pr)]
            for n, (pm, pr) in points.items()}


def compare(estimated, sized, tables, executor: str = "reference") -> None:
    """Measured probe messages and most rows held at once (sum over stores) of every plan
    ``mqjoin compare`` lists, the plan chosen on the sizes without the memory tie-break
    (``--no-ties``) and the one chosen on the estimates; which plans are on the measured Pareto
    front (messages vs rows), and what the chosen plan (sizes: clash mqo single) does not dominate."""
    from mqjoin.planning.options import MODES, POLICIES

    chosen = "sizes: clash mqo single"
    plans = [("estimates: clash mqo single", optimize(estimated)),
             ("sizes, no ties: clash mqo single", optimize(sized, memory_ties=False))]
    plans += [(f"sizes: clash {m} {p}", optimize(sized, mode=m, partitioning=p)) for m in MODES for p in POLICIES
              if p != "budget"]
    for planner in ("mjoin", "tree", "ajoin"):
        for m in ("individual", "shared", "mqo"):
            try:
                plans.append((f"sizes: {planner} {m}", optimize(sized, mode=m, planner=planner)))
            except Exception as e:  # noqa: BLE001 — a planner without this mode
                print(f"    ({planner} {m}: {e})")
    tie = dict(plans)[chosen].tie_break
    if tie is not None:
        print(f"\n  {chosen}: {tie.changes(dict(plans)[chosen].probe_cost, dict(plans)[chosen].memory)} "
              f"({tie.solves} solves after the optimum)")
    measured = {}
    for name, res in plans:
        run = execute(res.plan, tables, executor)
        measured[name] = (run.total_probe_messages, sum(run.store_rows.values()))
    beaten = pareto(measured)
    print(f"\n  every plan on the same input ({executor} executor; predicted probe cost and memory in the model's "
          f"units; Pareto: on the measured front of messages vs rows)")
    print(f"    {'plan':<36}{'messages':>11}{'rows':>11}{'pred. cost':>12}{'pred. mem':>12}  Pareto")
    for name, res in plans:
        msgs, rows = measured[name]
        print(f"    {name:<36}{msgs:>11,}{rows:>11,}{res.probe_cost:>12.5g}{res.memory:>12.5g}  "
              f"{'yes' if not beaten[name] else f'no (beaten by {len(beaten[name])}, e.g. {beaten[name][-1]})'}")
    cm, cr = measured[chosen]
    apart = [f"{n} ({m / cm - 1:+.1%} messages, {r / cr - 1:+.1%} rows)" for n, (m, r) in measured.items()
             if n != chosen and not (cm <= m and cr <= r)]
    print(f"  {chosen}: {'on' if not beaten[chosen] else 'NOT on'} the measured Pareto front; "
          f"does not dominate: {'; '.join(apart) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, nargs="+", default=[0.01])
    ap.add_argument("--workloads", nargs="+", default=["tpch_fig7a.yaml", "tpch_10q.yaml"])
    ap.add_argument("--fraction", type=float, default=0.1, help="share of join values sampled (default 0.1)")
    ap.add_argument("--no-runs", action="store_true", help="part 1 only")
    ap.add_argument("--shuffled", action="store_true", help="also part 2 with shuffled arrival times")
    ap.add_argument("--compare", action="store_true", help="measured messages and rows of every plan compare lists")
    ap.add_argument("--executor", choices=("reference", "vector"), default="reference",
                    help="the executor of the runs (the same counts; vector is faster)")
    args = ap.parse_args()
    print(f"join sizes on TPC-H; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for sf in args.sf:
        d = tpch_streams(sf).directory
        for name in args.workloads:
            w = load_workload(WORKLOADS / name)
            tables, wall, c = timed(read_inputs, w, d)
            print(f"\n=== {name}, SF {sf:g} ({sum(len(t) for t in tables.values()):,} tuples, read in {wall:.2f} s "
                  f"wall / {c:.2f} s CPU) ===")
            stats, wall, c = timed(estimate_statistics, w, tables, sizes=args.fraction)
            print(f"  mqjoin stats --sizes {args.fraction:g} (rates, selectivities and sizes): {wall:.2f} s wall / "
                  f"{c:.2f} s CPU")
            part1(stats.apply(w), tables, args.fraction)
            if args.no_runs:
                continue
            span = max(max(t.ts) for t in tables.values() if len(t)) - min(min(t.ts) for t in tables.values() if len(t))
            est = replace(stats, sizes=()).apply(w)
            table("plan on the independence estimates", optimize(est).plan, tables, span, args.executor)
            table(f"plan on sizes from a {args.fraction:.0%} sample", optimize(stats.apply(w)).plan, tables, span,
                  args.executor)
            if args.compare:
                compare(est, stats.apply(w), tables, args.executor)
            if args.shuffled:
                rng = random.Random(0)
                mixed = {}
                for r, t in tables.items():
                    ts = list(t.ts)
                    rng.shuffle(ts)
                    mixed[r] = Table(r, tuple(ts), t.columns, t.source)
                st = estimate_statistics(w, mixed, sizes=args.fraction)
                table(f"shuffled arrivals, plan on sizes from a {args.fraction:.0%} sample", optimize(st.apply(w)).plan,
                      mixed, span)


if __name__ == "__main__":
    main()
