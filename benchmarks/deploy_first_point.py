"""Deploy → first point: how long after the click the Deploy panel draws its first points.

The tour's setting (notebook 01): the Figure 7(a) workload, the bundled TPC-H sample
(``mqjoin.datasets.tpch.SAMPLE``), ``max_rows_per_batch=200``, the panel's default rate.  The
first run starts the Spark session (cold: JVM, Python workers); the later runs reuse it (warm).
Per run: seconds from ``DeployPanel.deploy()`` to the panel's first throughput point and its
first latency point, the time the call itself blocked (the session start on a cold run), and
the status line the panel showed while it waited.  Goal: the first point within
5 s of the click on a warm local session.

    python benchmarks/deploy_first_point.py [--runs 4] [--mode driver|distributed]
"""

from __future__ import annotations

import argparse
import os
import re
import time

from mqjoin.datasets.tpch import SAMPLE
from mqjoin.planning.optimizer import optimize
from mqjoin.widgets import as_workload
from mqjoin.widgets.deploy_panel import DeployPanel


def first_points(panel: DeployPanel, timeout: float) -> tuple[float | None, float | None]:
    """Seconds until the figure holds a throughput point and a latency point (rows 1 and 2 of
    the panel's chart)."""
    start = time.time()
    t_first = t_lat = None
    while time.time() - start < timeout and (t_first is None or t_lat is None):
        for tr in panel.figure.data:
            if tr.x is None or not len(tr.x) or (tr.name or "").startswith("input rate target"):
                continue
            if tr.yaxis in ("y", None) and t_first is None:
                t_first = time.time() - start
            if tr.yaxis == "y2" and t_lat is None:
                t_lat = time.time() - start
        time.sleep(0.02)
    return t_first, t_lat


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4, help="deployments (the first one starts Spark)")
    ap.add_argument("--mode", default="auto", help="--spark-mode of the plan engine")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args(argv)
    w = as_workload("tpch_fig7a.yaml")
    plan = optimize(w).plan
    rows = []
    for run in range(args.runs):
        panel = DeployPanel(lambda: plan, data=SAMPLE, max_rows_per_batch=200, mode=args.mode,
                            refresh_seconds=0.0)
        seen: list[str] = []
        panel.status.observe(lambda ch: seen.append(re.sub("<[^>]+>", "", ch["new"])), "value")
        t0 = time.time()
        d = panel.deploy()
        blocked = time.time() - t0
        if d is None:
            print(f"run {run + 1}: not deployed — {panel.status.value}")
            return 1
        t_first, t_lat = first_points(panel, args.timeout)
        d.wait(args.timeout)
        panel.stop()
        rows.append(("cold" if run == 0 else "warm", blocked, None if t_first is None else blocked + t_first,
                     None if t_lat is None else blocked + t_lat, seen))
    load = os.getloadavg()[0]
    print(f"Deploy → first point, Figure 7(a) on the bundled sample, max 200 rows per batch (load {load:.1f})")
    print(f"  {'run':<6}{'session':<8}{'deploy() s':>11}{'1st point s':>12}{'1st latency s':>14}")
    for k, (kind, blocked, first, lat, _) in enumerate(rows):
        f = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"  {k + 1:<6}{kind:<8}{blocked:>11.2f}{f(first):>12}{f(lat):>14}")
    for k in (0, len(rows) - 1) if len(rows) > 1 else (0,):
        print(f"  status lines of run {k + 1} until its first point:")
        for line in rows[k][4][:3]:
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
