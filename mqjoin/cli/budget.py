"""``run --cpu-budget``: the budget's options and its one-line summary."""

from __future__ import annotations

import argparse

from mqjoin.model.errors import OptionError


def budget_options(args: argparse.Namespace) -> dict:
    """``run_reference``'s CPU budget keywords from ``run``'s options (empty: no budget)."""
    given = {k: v for k, v in (("allocation", args.allocation), ("cycle", args.cycle),
                               ("freshness", args.freshness)) if v is not None}
    if args.cpu_budget is None:
        if given:
            raise OptionError(f"--{next(iter(given))} divides a CPU budget: give --cpu-budget N too")
        return {}
    return {"cpu_budget": args.cpu_budget, **given}


def budget_line(b: dict) -> str:
    """One line per budgeted run: probes admitted and shed, results missing, stale streams."""
    deficits = ", ".join(f"{q} {d:.1%}" for q, d in b["deficit"].items())
    mu = "unlimited" if b["cpu_budget"] is None else f"{b['cpu_budget']:g} probes/s"
    return (f"CPU budget {mu} ({b['allocation']}, {b['cycle']:g}s cycles): {b['probes']} "
            f"probes, {b['shed']} shed; results missing vs the unbounded run: {deficits}; stale streams: "
            f"{', '.join(b['stale']) or 'none'}")
