"""The ``mqjoin`` parser: one sub-parser per command and the argument groups they share."""

from __future__ import annotations

import argparse

from mqjoin.cli.plans import cmd_candidates, cmd_compare, cmd_frontier, cmd_optimize, cmd_partitions, cmd_report
from mqjoin.cli.runs import cmd_demo, cmd_run, cmd_synth
from mqjoin.cli.spark import BATCH_ROWS
from mqjoin.datasets.commands import add_dataset_parsers
from mqjoin.planning.options import MODES, POLICIES, SOLVERS
from mqjoin.planners.registry import PLANNERS, named, planner_of
from mqjoin.planners.trees import TREE_SHAPES


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"mqjoin: error: {message} (see 'mqjoin {self.prog.split()[-1]} --help')\n"
                  if " " in self.prog else f"mqjoin: error: {message} (see 'mqjoin --help')\n")


def optimizer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, default="mqo",
                   help="mqo: joint optimum; individual: each query alone with its own stores; "
                        "shared: individual plans deployed together (default: mqo)")
    p.add_argument("--partitioning", choices=POLICIES, default="single",
                   help="single: one partition attribute per store; replicas: one replica per "
                        "partition attribute used (default: single)")
    p.add_argument("--no-mirs", action="store_true", help="do not materialise intermediate results")
    p.add_argument("--solver", choices=SOLVERS, default="highs", help="ILP solver (default: highs)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                   help="stop the solver after S seconds; the best plan found is then reported with "
                        "its gap to the optimum (default: 60)")
    p.add_argument("--mir-budget", type=float, default=None, metavar="N",
                   help="at most N tuples of MIR stores (memory estimate of docs/model.md §5; default: no limit)")
    planner_args(p)


def and_list(names) -> str:
    """``a, b and c``."""
    *head, last = names
    return f"{', '.join(head)} and {last}" if head else last


def planner_args(p: argparse.ArgumentParser, default: str | None = "clash") -> None:
    p.add_argument("--planner", choices=PLANNERS, default=default,
                   help="; ".join(f"{name}: {planner_of(name).label}" for name in PLANNERS) +
                        f"; for {and_list(name for name in PLANNERS if not planner_of(name).joint)}, --mode mqo means "
                        "shared"
                        + (f" (default: {default})" if default else f" (default: {and_list(named('compared'))})"))
    p.add_argument("--tree-shape", choices=TREE_SHAPES, default=None,
                   help="with --planner tree: the cheapest linear (deep) tree, the cheapest most balanced (bushy) "
                        "tree, or the cheapest of all (best, the default)")
    p.add_argument("--decompose", action="store_true",
                   help="with --planner mjoin: split MJoins by the paper's appendix A.2 rule (D(k,l) > S(k,l))")
    p.add_argument("--groups", type=int, default=None, metavar="D",
                   help="with --planner pmjoin: partition every PMJoin's streams into D value groups (default 1)")
    p.add_argument("--partition-by", choices=("hash", "range", "rate"), default=None,
                   help="with --planner pmjoin: how values are grouped (default rate: k-means of rank vectors)")
    p.add_argument("--tuple-sizes", choices=("sum", "unit"), default=None,
                   help="with --planner pmjoin: a result tuple is as large as its inputs together (sum, the "
                        "default) or all tuples are equal (unit)")
    p.add_argument("--value-rates", metavar="DIR", default=None,
                   help="with --planner pmjoin: estimate the rates per join value from DIR/<relation>.csv or "
                        ".parquet (run: default its --data)")



def executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("auto", "vector", "per-tuple"), default="auto",
                   help="the reference engine's executor: vector (a batch of arrivals at a time as column arrays, "
                        "--max-rows-per-batch of them; results written a batch at a time), per-tuple (one arrival "
                        "at a time: what --cpu-budget and --adaptive/--changes/--static run on) or auto (the "
                        "default: vector for a static plan, per-tuple where only it applies; the choice and its "
                        "reason are printed)")


def spark_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Spark engines")
    g.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    g.add_argument("--spark-mode", choices=("auto", "driver", "distributed"), default="auto",
                   help="where the plan's stores live: driver (in the driver's executor, one Spark job per "
                   "micro-batch), distributed (the stores sharded over the executors, for state beyond one "
                   "machine) or auto (the default: distributed on a cluster master, and on a local one when the "
                   "model's estimated state exceeds half the machine's available memory; the choice and its reason are "
                   "printed)")
    g.add_argument("--rate", type=float, metavar="N", help="replay N input tuples per second (default: as fast "
                   "as the engine takes them)")
    g.add_argument("--speedup", type=float, metavar="X", help="replay at X times event time")
    g.add_argument("--max-rows-per-batch", type=int, metavar="N", help="cap a micro-batch at N input tuples (default "
                   f"{BATCH_ROWS:,} when unpaced: the memory of a run follows one batch's results, not all of them; "
                   "also the batch of the reference engine's vector executor)")
    g.add_argument("--checkpoint", metavar="DIR", help="checkpoint directory: rerun with the same DIR and --out "
                   "to resume a stopped or killed run (default: a temporary one)")
    g.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds")


def adaptive_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("adaptivity (paper Section VI)")
    g.add_argument("--adaptive", action="store_true",
                   help="re-optimise every epoch on sampled statistics (--engine reference or spark); a new "
                   "plan is active from the epoch after next")
    g.add_argument("--epoch", type=float, default=1.0, metavar="S", help="epoch length in seconds of event time "
                   "(default 1)")
    g.add_argument("--threshold", type=float, default=0.1, metavar="X", help="switch only when the new plan is "
                   "predicted to save more than X of the running plan's probe cost (default 0.1)")
    g.add_argument("--changes", metavar="FILE", help="changelog YAML: queries added and removed at run time "
                   "(implies --adaptive)")
    g.add_argument("--static", action="store_true", help="with --adaptive/--changes: keep the plan whatever the "
                   "statistics (the static baseline); query changes still apply")
    g.add_argument("--sample", type=float, default=1.0, metavar="F", help="fraction of join values sampled for "
                   "selectivities (default 1: all)")


def budget_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("CPU budget (JAQPOT; reference engine, one query, --planner "
                             f"{' or '.join(named('cpu_budget'))})")
    g.add_argument("--cpu-budget", type=float, default=None, metavar="N",
                   help="at most N probes per second of event time; probes beyond an allocation are shed, tuples "
                        "never (the summary reports the result deficit against the unbounded run and staleness)")
    g.add_argument("--allocation", default=None, metavar="POLICY",
                   help="how the budget is divided over the half-way joins: JAQPOT (default), GrePP, EqualHJ, "
                        "GlobalHJPR, EBestHJP or SBestHJP")
    g.add_argument("--cycle", type=float, default=None, metavar="S", help="execution cycle in seconds (default 1)")
    g.add_argument("--freshness", type=float, default=None, metavar="X",
                   help="freshness predicates: X times each stream's unbounded staleness (default 1.5)")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="mqjoin", description="Optimise and run multiple multi-way stream joins (CLASH).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    o = sub.add_parser("optimize", help="optimise a workload and print the plan")
    o.add_argument("workload", help="workload YAML file (or a bundled one: paper_v2.yaml, paper_fig3.yaml, demo.yaml)")
    optimizer_args(o)
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.add_argument("--tree", action="store_true", help="also print the probe trees")
    o.add_argument("--plan-out", metavar="FILE", help="write the plan as JSON")
    o.add_argument("--export", metavar="FILE", help="write the ILP as .lp or .mps")
    o.add_argument("--stats-from", metavar="RUN.json", help="re-plan with the join sizes a run measured (the JSON "
                   "of 'mqjoin run --json', reference engine) and show what changed: plan diff, probe cost and "
                   "memory before and after, both under the measured sizes")
    o.add_argument("--changes", metavar="CHANGES.yaml", help="changelog YAML (as for 'run --changes'): after the "
                   "workload's plan, re-plan after each change in turn from the plan before it (mode mqo: only the "
                   "independent parts of the ILP a change touches are solved again); one line per change, then "
                   "the last plan")
    o.set_defaults(func=cmd_optimize)

    r = sub.add_parser("run", help="optimise, then run the plan over input data")
    r.add_argument("workload")
    r.add_argument("--data", required=True, metavar="DIR", help="input: DIR/<relation>.csv or .parquet")
    r.add_argument("--out", required=True, metavar="DIR", help="output: DIR/<query>.parquet")
    r.add_argument("--workload-stats", action="store_true",
                   help="plan on the workload as written (rates, selectivities, sizes, horizon), even where the "
                        "data contradicts it (default: the horizon is the data's span, and statistics the data "
                        "contradicts are measured again)")
    r.add_argument("--engine", choices=("reference", "spark", "native"), default="reference",
                   help="reference (in-process), spark (the plan on Spark Structured Streaming) or native "
                        "(Spark's own stream-stream joins, one query each: the baseline)")
    executor_args(r)
    optimizer_args(r)
    spark_args(r)
    adaptive_args(r)
    budget_args(r)
    r.add_argument("--check", action="store_true", help="compare results with the brute-force oracle (with "
                   "--cpu-budget: a subset of it)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("candidates", help="list MIRs, partition candidates and probe orders")
    c.add_argument("workload")
    c.add_argument("--no-mirs", action="store_true")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_candidates)

    cm = sub.add_parser("compare", help="probe cost and memory of every mode and policy")
    cm.add_argument("workload")
    cm.add_argument("--no-mirs", action="store_true")
    cm.add_argument("--solver", choices=SOLVERS, default="highs")
    cm.add_argument("--time-limit", type=float, default=60.0)
    planner_args(cm, default=None)
    cm.add_argument("--stats-from", metavar="RUN.json", help="add every plan's probe cost and memory on the join sizes "
                    "a run measured (the JSON of 'mqjoin run --json'), and mark the plans on their Pareto front")
    cm.add_argument("--json", action="store_true")
    cm.set_defaults(func=cmd_compare)

    rp = sub.add_parser("report", help="write a handout: one self-contained HTML file of the workload, its query "
                                       "graph, probe trees, the plan, Compare and the frontier (opens offline)")
    rp.add_argument("workload")
    rp.add_argument("--out", required=True, metavar="REPORT.html", help="the HTML file to write")
    rp.add_argument("--no-mirs", action="store_true")
    rp.add_argument("--solver", choices=SOLVERS, default="highs")
    rp.add_argument("--mode", choices=MODES, default="mqo")
    rp.add_argument("--no-compare", action="store_true", help="leave out Compare (every mode and policy solved)")
    rp.add_argument("--no-frontier", action="store_true", help="leave out the probe cost / memory frontier")
    rp.set_defaults(func=cmd_report)

    fr = sub.add_parser("frontier", help="Pareto curve of probe cost against memory (policy budget: extra "
                                         "replicas of stores), with single, replicas, individual and shared marked")
    fr.add_argument("workload")
    fr.add_argument("--no-mirs", action="store_true")
    fr.add_argument("--solver", choices=("highs", "cbc"), default="highs")
    fr.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    fr.add_argument("--max-points", type=int, default=25, help="at most this many budget solves (default 25)")
    fr.add_argument("--json", action="store_true")
    fr.set_defaults(func=cmd_frontier)

    pa = sub.add_parser("partitions", help="probe messages and rows per partition of every store at several "
                                           "partition counts: the model's and the data's (the skew before a cluster)")
    pa.add_argument("workload")
    pa.add_argument("--data", metavar="DIR", help="input: DIR/<relation>.csv or .parquet (counts per partition "
                    "measured on it, distinct values of the partition attributes; default: the model alone)")
    pa.add_argument("--plan", metavar="FILE", help="a plan written by 'mqjoin optimize --plan-out' (default: "
                    "optimise the workload with the options below)")
    pa.add_argument("--partitions", default="8,32,128", metavar="P,P,…",
                    help="partition counts to project (default 8,32,128)")
    pa.add_argument("--batch", type=int, default=100_000, metavar="N", help="run the data N input tuples at a "
                    "time (default 100000)")
    pa.add_argument("--json", action="store_true")
    optimizer_args(pa)
    pa.set_defaults(func=cmd_partitions)

    s = sub.add_parser("synth", help="generate uniform synthetic input streams for a workload")
    s.add_argument("workload")
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--duration", type=float, default=1.0, help="event-time span in seconds (default 1)")
    s.add_argument("--scale", type=float, default=1.0, help="multiply every rate (default 1)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    s.set_defaults(func=cmd_synth)

    d = sub.add_parser("demo", help="the main job: optimise, run and check the bundled demo workload")
    d.add_argument("--workload", default="demo.yaml")
    d.add_argument("--duration", type=float, default=2.0)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default="out/demo")
    d.add_argument("--no-check", dest="check", action="store_false", help="skip the brute-force oracle")
    d.add_argument("--engine", choices=("spark", "reference"), default="spark",
                   help="also run the mqo plan on local Spark (default), or only on the reference engine")
    d.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    d.set_defaults(func=cmd_demo)

    add_dataset_parsers(sub, Parser)  # data tpch / data synthetic / stats
    return p
