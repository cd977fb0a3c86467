"""Deploy → first point, and whether the run keeps up: the Deploy panel as the explorer builds it.

The explorer's default setting: the Figure 7(a) workload, the panel's synthetic input
(``mqjoin.datasets.uniform`` streams of the workload over the panel's event seconds), its
default rate and micro-batch cap — or ``--data sample``: the bundled TPC-H sample
(``mqjoin.datasets.tpch.SAMPLE``).  The first run starts the Spark session (cold: JVM, Python
workers); the later runs reuse it (warm).  Per run: the seconds the click itself took (the
start runs off the caller's thread: ~0), seconds to the panel's first throughput point and
first latency point, then — after the run consumed its input — tuples, tuples/s over the run,
and the result latency p95 after the first micro-batch (goal: ≤ 2 s, i.e. the run keeps up).
Goals: first point ≤ 3 s warm, ≤ 20 s cold.

With ``--breakdown`` each run also says where its seconds to the first point went: the Spark
session's start (the JVM; ~0 when running), the deploy call after it (the replay log written,
the streaming query started), the wait for Spark's first trigger (the Python process that runs
the replay source's reader starts), the wait from there to the trigger of the first batch with
input (an empty first batch runs before it), that batch's read and run, and the redraw after
its report.

With ``--ahead`` the panel starts Spark before each click as an explorer built in a kernel does
(the session and its Python workers; ``DeployPanel.prepare``) and the click comes once that is
done: a cold run then measures a first Deploy a while after the explorer was built.

    python benchmarks/deploy_first_point.py [--runs 3] [--mode driver|distributed] [--data sample] \
        [--breakdown] [--ahead]
"""

from __future__ import annotations

import argparse
import os
import re
import time

from mqjoin.planning.optimizer import optimize
from mqjoin.widgets import as_workload
from mqjoin.widgets.deploy_panel import DeployPanel


def first_points(panel: DeployPanel, t0: float, timeout: float) -> tuple[float | None, float | None]:
    """Seconds from ``t0`` until the figure holds a throughput point and a latency point
    (rows 1 and 2 of the panel's chart)."""
    t_first = t_lat = None
    while time.monotonic() - t0 < timeout and (t_first is None or t_lat is None):
        for tr in panel.figure.data:
            if tr.x is None or not len(tr.x) or (tr.name or "").startswith("input rate target"):
                continue
            if tr.yaxis in ("y", None) and t_first is None:
                t_first = time.monotonic() - t0
            if tr.yaxis == "y2" and t_lat is None:
                t_lat = time.monotonic() - t0
        time.sleep(0.02)
    return t_first, t_lat


def keeps_up(d) -> tuple[int, float | None, float | None]:
    """Tuples consumed, tuples/s from the first batch's start to the last one's end, and the
    95th percentile of the per-batch result latency p95 after the first micro-batch."""
    b, q = d.batches, d.queries
    if not len(b):
        return 0, None, None
    span = float((b["started"] + b["seconds"]).max() - b["started"].min())
    later = q[q["batch"] > q["batch"].min()].dropna(subset=["latency_p95"]) if len(q) else q
    p95 = float(later["latency_p95"].quantile(0.95)) if len(later) else None
    return int(b["input_rows"].sum()), (b["input_rows"].sum() / span if span > 0 else None), p95


class TimedDeploy:
    """Times the panel's deploy (``mqjoin.runtime.spark.launch.deploy``, which the panel's
    default deploy function calls): when the Spark session was up and when the deploy call
    returned (seconds on the monotonic clock)."""

    def __init__(self):
        import mqjoin.runtime.spark.launch as launch

        self.session_up = self.deployed = None
        self._deploy = launch.deploy
        launch.deploy = self

    def __call__(self, plan, data, out, **kw):
        from mqjoin.runtime.spark.session import spark_session

        spark_session()
        self.session_up = time.monotonic()
        d = self._deploy(plan, data, out, **kw)
        self.deployed = time.monotonic()
        return d

    def close(self) -> None:
        import mqjoin.runtime.spark.launch as launch

        launch.deploy = self._deploy


def breakdown(t0: float, timed: TimedDeploy, d, first: float | None) -> list[tuple[str, float | None]]:
    """Where the seconds from the click to the first point went (see the module doc)."""
    from datetime import datetime

    to_mono = time.monotonic() - time.time()  # Spark's and the reports' clocks are epoch seconds
    out = [("session start (JVM)", None if timed.session_up is None else timed.session_up - t0),
           ("deploy call (replay log, query start)", None if timed.deployed is None
            else timed.deployed - (timed.session_up or t0))]
    p, b = d.progress, d.batches
    if not len(p) or not len(b) or timed.deployed is None:
        return out
    trig = {int(r["batch"]): datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).timestamp() + to_mono
            for _, r in p.iterrows()}
    first_batch = b.sort_values("batch").iloc[0]
    k = int(first_batch["batch"])
    start = min(trig.values())
    out.append(("→ Spark's first trigger (source runner starts)", start - timed.deployed))
    out.append(("→ trigger of the first batch with input", trig.get(k, start) - start))
    out.append(("  that batch: trigger → its run starts", float(first_batch["started"]) + to_mono - trig.get(k, start)))
    out.append(("  that batch: read + run", float(first_batch["seconds"])))
    report = float(first_batch["started"] + first_batch["seconds"]) + to_mono
    out.append(("report → first point drawn", None if first is None else first - (report - t0)))
    out.append(("first batch: batch id", float(k)))
    out.append(("first batch: input rows", float(first_batch["input_rows"])))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="deployments (the first one starts Spark)")
    ap.add_argument("--mode", default="auto", help="--spark-mode of the plan engine")
    ap.add_argument("--data", choices=["synthetic", "sample"], default="synthetic")
    ap.add_argument("--rate", type=float, default=None, help="input tuples/s (default: the panel's)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="event seconds of synthetic input (default: the panel's)")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--breakdown", action="store_true", help="where each run's seconds to the first point went")
    ap.add_argument("--ahead", action="store_true",
                    help="start Spark ahead as an explorer built in a kernel does (DeployPanel.prepare), and "
                         "click once it is ready (that start's seconds are printed apart)")
    args = ap.parse_args(argv)
    w = as_workload("tpch_fig7a.yaml")
    plan = optimize(w).plan
    data = None
    if args.data == "sample":
        from mqjoin.datasets.tpch import SAMPLE

        data = SAMPLE
    rows, parts = [], []
    for run in range(args.runs):
        timed = TimedDeploy() if args.breakdown else None
        panel = DeployPanel(lambda: plan, data=data, mode=args.mode, refresh_seconds=0.5)
        if args.rate:
            panel.rate.value = args.rate
        if args.seconds:
            panel.duration.value = args.seconds
        if args.ahead:
            t_ahead = time.monotonic()
            panel.prepare()
            panel.wait_idle(args.timeout)
            print(f"run {run + 1}: Spark started ahead in {time.monotonic() - t_ahead:.1f} s (load "
                  f"{os.getloadavg()[0]:.1f})")
        seen: list[str] = []
        panel.status.observe(lambda ch, seen=seen: seen.append(re.sub("<[^>]+>", "", ch["new"])), "value")
        t0 = time.monotonic()
        label = panel.deploy()
        clicked = time.monotonic() - t0
        if label is None:
            print(f"run {run + 1}: not deployed — {panel.status.value}")
            return 1
        t_first, t_lat = first_points(panel, t0, args.timeout)
        panel.wait_started(args.timeout)
        d = dict(panel.deployments)[label]
        try:
            d.wait(args.timeout)
        finally:
            panel.stop()
            panel.wait_idle(60)
        tuples, tps, p95 = keeps_up(d)
        rows.append(("cold" if run == 0 else "warm", clicked, t_first, t_lat, tuples, tps, p95, seen))
        if timed is not None:
            parts.append(breakdown(t0, timed, d, t_first))
            timed.close()
        panel.close()
    load = os.getloadavg()[0]
    print(f"Deploy → first point, Figure 7(a), {args.data} input at {panel.rate.value:,.0f} tuples/s "
          f"(load {load:.1f}, {os.cpu_count()} cores)")
    print(f"  {'run':<5}{'session':<8}{'click s':>8}{'1st point s':>12}{'1st latency s':>14}{'tuples':>9}"
          f"{'tuples/s':>10}{'latency p95 s':>14}")

    def f(x, p=2):
        return "—" if x is None else f"{x:,.{p}f}"

    for k, (kind, clicked, first, lat, tuples, tps, p95, _) in enumerate(rows):
        print(f"  {k + 1:<5}{kind:<8}{clicked:>8.2f}{f(first):>12}{f(lat):>14}{tuples:>9,}{f(tps, 0):>10}{f(p95):>14}")
    for k in (0, len(rows) - 1) if len(rows) > 1 else (0,):
        print(f"  status lines of run {k + 1} until its first point:")
        for line in dict.fromkeys(re.sub(r"\d+ s\b", "N s", s) for s in rows[k][7][:12]):
            print(f"    {line}")
    if parts:
        print("  where the seconds to the first point went (s):")
        names = list(dict.fromkeys(name for p in parts for name, _ in p))
        print(f"    {'':<50}" + "".join(f"{f'run {k + 1}':>9}" for k in range(len(parts))))
        for name in names:
            vals = [dict(p).get(name) for p in parts]
            print(f"    {name:<50}" + "".join(f"{f(v, 0 if name.startswith('first batch:') else 2):>9}" for v in vals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
