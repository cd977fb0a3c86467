"""The command line's options turned into values: the optimiser's call, PMJoin's options,
the measured workload of ``--stats-from``, and the checks that an option fits the planner."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path

from mqjoin.datasets.commands import load_named_workload
from mqjoin.model.errors import OptionError, PlannerError
from mqjoin.planners.registry import planner_of


def optimize_options(args: argparse.Namespace, workload, monitor=None):
    """The :class:`~mqjoin.planning.options.OptimizeOptions` of ``optimize``, ``run`` and
    ``deploy``'s options (checked as the value is made)."""
    from mqjoin.planning.options import OptimizeOptions

    return OptimizeOptions(mode=args.mode, partitioning=args.partitioning, mirs=not args.no_mirs, solver=args.solver,
                           time_limit=args.time_limit, mir_budget=args.mir_budget, planner=args.planner,
                           tree_shape=args.tree_shape, decompose=args.decompose, pmjoin=pmjoin_options(args, workload),
                           monitor=monitor)


def optimize_args(args: argparse.Namespace, workload=None, monitor=None):
    """The plan of the command line's workload (``workload``: already loaded) and options."""
    from mqjoin.planning.optimizer import plan_with

    w = workload if workload is not None else load_named_workload(args.workload)
    return plan_with(w, optimize_options(args, w, monitor))


#: ``optimize`` prints the solve's progress on stderr once it has run this long (seconds):
#: every better plan, and a better bound alone at most once per this many seconds (a solve
#: that ends sooner prints nothing)
PROGRESS_AFTER = 0.5


@contextlib.contextmanager
def watched():
    """A :class:`~mqjoin.planning.ilp.monitor.Monitor` for one ``optimize``: its progress on
    stderr (:data:`PROGRESS_AFTER`), and Ctrl-C (SIGINT) stops the solve, which returns its best
    plan so far; a second Ctrl-C interrupts as usual."""
    import signal
    import threading

    from mqjoin.planning.ilp.monitor import Monitor

    shown = [-PROGRESS_AFTER, math.inf]  # the last line printed: its seconds and incumbent

    def show(r) -> None:  # a better plan at once, a better bound alone once per PROGRESS_AFTER s
        if r.seconds >= PROGRESS_AFTER and (r.incumbent < shown[1] or r.seconds >= shown[0] + PROGRESS_AFTER):
            shown[:] = [r.seconds, r.incumbent]
            print(f"mqjoin: {r.describe()}", file=sys.stderr, flush=True)

    monitor = Monitor(on_report=show)
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield monitor
        return

    def stop(signum, frame) -> None:
        if monitor.stopped:
            raise KeyboardInterrupt
        monitor.stop()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield monitor
    finally:
        signal.signal(signal.SIGINT, previous)


def pmjoin_options(args: argparse.Namespace, workload, planner: str | None = None):
    """PMJoin's options from the command line (``None`` for another planner, which must not
    be given any of them); per-value rates come from ``--value-rates`` or ``run``'s data."""
    from mqjoin.planners.pmjoin import PMJoinOptions, value_rates
    from mqjoin.model.tables import read_inputs

    given = [f for f, v in (("--groups", args.groups), ("--partition-by", args.partition_by),
                            ("--tuple-sizes", args.tuple_sizes), ("--value-rates", args.value_rates)) if v is not None]
    if not planner_of(planner or args.planner).pmjoin_options:
        if given:
            raise PlannerError(f"{', '.join(given)} work with --planner pmjoin only, not {planner or args.planner}")
        return None
    data = args.value_rates or getattr(args, "data", None)
    rates = value_rates(workload, read_inputs(workload, data)) if data else None
    return PMJoinOptions(rates, 1 if args.groups is None else args.groups, args.partition_by or "rate",
                         args.tuple_sizes or "sum")


def clash_only(args: argparse.Namespace, what: str) -> None:
    """Refuse options that need the CLASH optimiser when another planner is chosen."""
    if not planner_of(args.planner).ilp:
        raise PlannerError(f"{what} works with --planner clash only, not {args.planner}; leave one of them out")


def stats_from(args: argparse.Namespace):
    """``optimize --stats-from RUN.json``: the workload with the join sizes the run measured,
    and the plan optimised without them (to show what changed)."""
    from mqjoin.planning.measured import measured_workload

    w = load_named_workload(args.workload)
    try:
        run = json.loads(Path(args.stats_from).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OptionError(f"--stats-from: {args.stats_from!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OptionError(f"--stats-from: cannot read {args.stats_from!r} "
                          f"as the JSON of 'mqjoin run --json': {e}") from None
    if not isinstance(run, dict) or "predicted" not in run:
        raise OptionError(f"--stats-from: {args.stats_from!r} has no 'predicted' section; write it with "
                          f"'mqjoin run W --data D --out O --json > RUN.json' (reference engine)")
    return w, measured_workload(w, run["predicted"])
