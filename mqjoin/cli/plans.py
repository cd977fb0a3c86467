"""The commands that plan: ``optimize``, ``candidates``, ``compare``, ``frontier``, ``partitions``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mqjoin.cli.options import (clash_only, optimize_args, optimize_options, pmjoin_options, stats_from,
                                watched)
from mqjoin.datasets.commands import load_named_workload, write_text
from mqjoin.model.errors import DataError, OptionError


def cmd_optimize(args: argparse.Namespace) -> int:
    before = None
    steps: list[dict[str, Any]] = []
    if args.changes and args.stats_from:
        raise OptionError("--changes and --stats-from are two kinds of re-plan; use one at a time")
    if args.stats_from:
        w0, w = stats_from(args)
        before = optimize_args(args, w0)
        res = optimize_args(args, w)
    elif args.changes:
        res, steps = _replanned(args)
    else:
        with watched() as monitor:
            res = optimize_args(args, monitor=monitor)
            end = monitor.elapsed
    if args.plan_out:
        write_text(args.plan_out, res.plan.to_json())
    if args.export:
        from mqjoin.planning.candidates import enumerate_candidates
        from mqjoin.planning.ilp import build_model, export

        clash_only(args, "--export (the ILP model)")
        if args.mode != "mqo":
            raise OptionError("--export writes the joint (mqo) model; use it with --mode mqo")
        export(build_model(enumerate_candidates(res.workload, mirs=not args.no_mirs), args.partitioning,
                           args.mir_budget), args.export)
    replanned = None
    if before is not None:
        from mqjoin.planning.measured import replan_report

        replanned = replan_report(before.plan, res.plan)
    from mqjoin.planning.ilp.monitor import anytime_summary

    watched_one = before is None and not args.changes
    progress = [r.to_dict() for r in monitor.reports] if watched_one else []
    anytime = {"anytime": anytime_summary(monitor.reports, res.ilp.status, end)} if watched_one else {}
    if args.json:
        from mqjoin.planning.attribution import cost_by_query

        print(json.dumps({**res.to_dict(), "cost_by_query": cost_by_query(res.plan),
                          **({"stats_from": replanned.to_dict()} if replanned else {}),
                          **({"changes": steps} if args.changes else {}),
                          "progress": progress, **anytime}, indent=1, ensure_ascii=False))
    else:
        if steps:
            print(_render_steps(steps))
        print(res.summary())
        if res.workload.sizes:
            print(f"join sizes: {len(res.workload.sizes)} measured (the workload's 'sizes'), the others estimated "
                  f"as if the classes were independent")
        if args.tree:
            print("probe trees:")
            print(res.plan.render())
        if replanned:
            print(replanned.render())
    if res.ilp.status == "interrupted":
        print(f"mqjoin: interrupted: the best plan so far, incumbent {res.ilp.objective:g} and bound "
              f"{res.ilp.bound:g}; it may be up to {res.ilp.gap:.2%} above the optimum", file=sys.stderr)
    elif res.ilp.status != "optimal":
        print(f"mqjoin: warning: the solver stopped at its time limit with incumbent {res.ilp.objective:g} and "
              f"bound {res.ilp.bound:g}; the plan may be up to {res.ilp.gap:.2%} above the optimum", file=sys.stderr)
    return 0



def _replanned(args: argparse.Namespace) -> tuple[Any, list[dict[str, Any]]]:
    """``optimize --changes``: the workload's plan, then a re-plan after each change of the
    changelog in turn (in the order of their times), each from the plan before it
    (:func:`mqjoin.planning.optimizer.replan`).  Returns the last result and one record per
    plan: the change, the queries, build + solve seconds and the ILP's parts solved and kept."""
    from mqjoin.adaptive.policy import load_changes, with_change
    from mqjoin.planning.optimizer import replan

    w = load_named_workload(args.workload)
    changes = sorted(load_changes(args.changes), key=lambda c: c.at)
    workloads = [w]
    for ch in changes:  # every change checked before the first solve
        workloads.append(with_change(workloads[-1], ch))
    res = optimize_args(args, w)
    steps = [_step(None, res)]
    for ch, w in zip(changes, workloads[1:]):
        res = replan(res, w, optimize_options(args, w))
        steps.append(_step(ch, res))
    return res, steps


def _step(change, res) -> dict[str, Any]:
    i = res.ilp
    return {"change": None if change is None else change.to_dict(),
            "label": "(workload)" if change is None else change.describe(), "queries": len(res.workload.queries),
            "build_seconds": i.build_seconds, "solve_seconds": i.solve_seconds, "status": i.status,
            "canonical": i.canonical, "parts": i.components, "parts_reused": res.reused_parts,
            "probe_cost": res.probe_cost}


def _render_steps(steps: list[dict[str, Any]]) -> str:
    """The re-plans of ``optimize --changes`` as a table, one line per plan."""
    lines = [f"{'change':<16}{'queries':>8}{'build + solve s':>17}{'parts':>7}{'reused':>8}  {'status':<11}probe cost"]
    for s in steps:
        lines.append(f"{s['label'][:15]:<16}{s['queries']:>8}{s['build_seconds'] + s['solve_seconds']:>17.3f}"
                     f"{s['parts']:>7}{s['parts_reused']:>8}  {s['status']:<11}{s['probe_cost']:g}")
    return "\n".join(lines)


def cmd_candidates(args: argparse.Namespace) -> int:
    from mqjoin.planning.candidates import MIR, enumerate_candidates, owner_label

    w = load_named_workload(args.workload)
    c = enumerate_candidates(w, mirs=not args.no_mirs)
    data: dict[str, Any] = {
        "mirs": [m.label for m in c.mirs],
        "partition_candidates": {m.label: [str(a) for a in a_] for m, a_ in c.partition_candidates.items()},
        "probe_orders": {owner_label(o): {s: [str(x) for x in os_] for s, os_ in by.items()}
                         for o, by in c.orders.items()},
        "size": c.size,
    }
    if args.json:
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    print("MIRs:", ", ".join(data["mirs"]))
    print("partition candidates:")
    for m, a_ in data["partition_candidates"].items():
        print(f"  {m}: {', '.join(a_)}")
    for o, by in c.orders.items():
        kind = "MIR" if isinstance(o, MIR) else "query"
        print(f"probe orders of {kind} {owner_label(o)}:")
        for s, os_ in by.items():
            print(f"  {s}: {', '.join(str(x) for x in os_)}")
    print(f"{data['size']['probe_orders']} probe orders, {data['size']['steps']} distinct steps, "
          f"{data['size']['stores']} stores")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from mqjoin.planning.comparison import COMPARED_PLANNERS, compare, settings
    from mqjoin.planning.options import OptimizeOptions
    from mqjoin.planners.registry import check_planner

    w = load_named_workload(args.workload)
    planners = (args.planner,) if args.planner else COMPARED_PLANNERS
    if args.planner:  # without one, --tree-shape applies to the tree rows and --decompose to the mjoin rows
        check_planner(args.planner, args.tree_shape, args.decompose)
    pmjoin = pmjoin_options(args, w, args.planner or "clash")
    plans = compare(w, settings(planners, args.tree_shape, args.decompose),
                    OptimizeOptions(mirs=not args.no_mirs, solver=args.solver, time_limit=args.time_limit,
                                    pmjoin=pmjoin))
    rows = [{"mode": s.mode, "partitioning": s.partitioning, "probe_cost": r.probe_cost, "memory": r.memory,
             "stores": len(r.plan.stores), "status": r.ilp.status, "planner": s.label} for s, r in plans.items()]
    chosen = None
    if args.stats_from:  # every plan costed on the join sizes the run measured, and which are on their front
        from mqjoin.planning.measured import memory_on, pareto_front
        from mqjoin.planning.recost import recost

        sized = stats_from(args)[1]
        for row, r in zip(rows, plans.values()):
            row["measured_probe_cost"], row["measured_memory"] = recost(r.plan, sized), memory_on(r.plan, sized)
        for row, front in zip(rows, pareto_front((r["measured_probe_cost"], r["measured_memory"]) for r in rows)):
            row["measured_front"] = front
        # the plan `mqjoin optimize` chooses with these options: mqo (or the planner's only mode), single
        chosen = next((r for r in rows if r["partitioning"] == "single" and r["mode"] == "mqo"
                       and r["planner"] == (args.planner or "clash")), None)
        if chosen is not None:
            chosen["chosen"] = True
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    measured = f"{'on measured':>14}{'memory':>14}{'front':>7}" if args.stats_from else ""
    print(f"{'partitioning':<13}{'mode':<12}{'probe cost':>14}{'memory':>14}{measured}{'stores':>8}  planner")
    for r in rows:
        m = (f"{r['measured_probe_cost']:>14,.1f}{r['measured_memory']:>14,.1f}{'*' if r['measured_front'] else '':>7}"
             if args.stats_from else "")
        print(f"{r['partitioning']:<13}{r['mode']:<12}{r['probe_cost']:>14,.1f}{r['memory']:>14,.1f}{m}"
              f"{r['stores']:>8}  {r['planner']}{'  ← chosen' if r is chosen else ''}")
    if chosen is not None:
        print(f"* on the Pareto front of probe cost and memory on the measured sizes; the optimiser's choice "
              f"({chosen['planner']} mqo single) is {'on' if chosen['measured_front'] else 'not on'} it")
    return 0


def cmd_frontier(args: argparse.Namespace) -> int:
    from mqjoin.planning.frontier import frontier

    f = frontier(load_named_workload(args.workload), mirs=not args.no_mirs, solver=args.solver,
                 time_limit=args.time_limit, max_points=args.max_points)
    print(json.dumps(f.to_dict(), indent=1, ensure_ascii=False) if args.json else f.summary())
    return 0


def cmd_partitions(args: argparse.Namespace) -> int:
    from mqjoin.model.tables import read_inputs
    from mqjoin.planning.plan import Plan
    from mqjoin.runtime.partitions import check_counts, project, render

    counts = check_counts(args.partitions.split(","))
    if args.batch is not None and args.batch < 1:
        raise OptionError(f"--batch must be a number of input tuples ≥ 1, got {args.batch}")
    if args.plan:
        try:
            text = Path(args.plan).read_text()
        except OSError as e:
            raise DataError(f"cannot read the plan {args.plan}: {e.strerror or e}") from None
        plan = Plan.from_json(text)
    else:
        plan = optimize_args(args).plan
    tables = read_inputs(plan.workload, args.data) if args.data else None
    rows = project(plan, tables, counts, batch=args.batch)
    if args.json:
        print(json.dumps({"partitions": list(counts), "data": args.data, "stores": [r.to_dict() for r in rows]},
                         indent=1, ensure_ascii=False))
        return 0
    span = "over the data's span" if tables else "per time unit (no --data: the model alone, values spread evenly)"
    print(f"probe messages and rows per partition of every store, the model's fullest partition {span}"
          + ("; measured: one run of the vectorised executor over the data" if tables else ""))
    print(render(rows))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``mqjoin report W.yaml --out report.html``: the explorer's handout, from the command line."""
    try:
        from mqjoin.widgets.model import ExplorerModel
        from mqjoin.widgets.report import write_report
    except ImportError as e:
        raise DataError(f"the handout needs the notebook extra ({e.name} is missing): "
                        "pip install 'mqjoin[notebook]'") from None

    model = ExplorerModel(load_named_workload(args.workload), mode=args.mode, mirs=not args.no_mirs,
                          solver=args.solver, debounce=0)
    path = write_report(model, args.out, compare=not args.no_compare, frontier=not args.no_frontier)
    print(f"handout written to {path} ({path.stat().st_size / 1e6:.1f} MB, opens offline; reopen it in the "
          f"explorer with ExplorerModel.from_report({str(path)!r}))")
    return 0
